//! Stopping a disk that a loop device still uses: the mount goes at once (lazily), the loop
//! device is served until it is detached, and then the FUSE threads end. One test in its own
//! binary, so that the threads it counts are its own.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{errno, is_mounted, open_direct, read, skipped, write, TempFile};
use nvrec_faultydisk::{FaultyDisk, LoopDevice, Options, Unmount};

#[test]
fn a_busy_disk_unmounts_lazily_and_serves_until_its_loop_device_goes() {
    if skipped() {
        return;
    }
    let backing = TempFile::new("teardown");
    let disk = FaultyDisk::start(&backing.0, 16 << 20, Options::default()).unwrap();
    let mount_dir = disk.mount_dir().to_path_buf();
    // A plain loop device, not attach_loop's: the disk cannot see it.
    let loop_device = LoopDevice::attach(&disk.disk_path()).unwrap();
    let dev = open_direct(loop_device.path());
    write(&dev, 0, 4096, 9).unwrap();
    disk.stall();

    assert_eq!(disk.unmount().unwrap(), Unmount::Lazy);
    assert!(!is_mounted(&mount_dir), "still mounted");
    assert!(!mount_dir.exists(), "mount point left behind");
    // Unmounting cleared the stall, and the loop device is still served.
    assert_eq!(read(&dev, 0, 4096).unwrap(), vec![9u8; 4096]);
    assert_eq!(errno(&write(&dev, 4096, 4096, 8)), 0);

    drop(dev);
    loop_device.detach().unwrap();
    let start = Instant::now();
    while fuse_threads() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "FUSE threads live on"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// This process's threads serving FUSE: fuser's session and the delay pool.
fn fuse_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("fuser-") || comm.starts_with("faultydisk-"))
        .count()
}
