//! The binary driven through its control file, as a shell script or the bench harness would:
//! faults (failing ranges and flushes, dying, stalls, slowness, power cuts) set and cleared
//! by writing lines, counters read back as JSON, bad lines refused,
//! and a clean exit on SIGTERM that leaves no mount behind.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{errno, is_mounted, open_direct, read, skipped, timed, write, TempFile};
use nvrec_faultydisk::LoopDevice;

const MIB: u64 = 1 << 20;

fn start(backing: &Path, mount: &Path) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvrec-faultydisk"))
        .args(["--backing", &backing.to_string_lossy()])
        .args(["--size", "16M", "--track-unflushed"])
        .args(["--mount", &mount.to_string_lossy()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("running nvrec-faultydisk");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("ready: "), "no ready line: '{line}'");
    child
}

fn ctl(mount: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(mount.join("ctl"), text)
}

fn counters(mount: &Path) -> String {
    std::fs::read_to_string(mount.join("ctl")).unwrap()
}

fn stop(mut child: Child) {
    // SAFETY: kill sends a signal to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn the_control_file_drives_the_binary() {
    if skipped() {
        return;
    }
    let backing = TempFile::new("ctl");
    let mount = std::env::temp_dir().join(format!("nvrec-faultydisk-ctl.{}", std::process::id()));
    let child = start(&backing.0, &mount);
    let loop_device = LoopDevice::attach(&mount.join("disk")).unwrap();
    let dev = open_direct(loop_device.path());

    ctl(&mount, "fail write 1M 64K eio\n").unwrap();
    assert_eq!(errno(&write(&dev, MIB, 4096, 1)), libc::EIO);
    assert_eq!(errno(&write(&dev, 2 * MIB, 4096, 1)), 0);
    let json = counters(&mount);
    assert!(json.contains("\"failed\":1,"), "{json}");
    assert!(
        json.contains("\"faults\":[\"fail write 1048576 65536 eio\"]"),
        "{json}"
    );

    let refused = ctl(&mount, "clear\nexplode\n");
    assert_eq!(
        errno(&refused),
        libc::EINVAL,
        "a bad line refuses the write"
    );
    assert!(
        counters(&mount).contains("fail write"),
        "nothing was applied"
    );

    ctl(&mount, "clear\nstall 300ms\n").unwrap();
    let (result, took) = timed(|| write(&dev, 0, 4096, 2));
    assert_eq!(errno(&result), 0);
    assert!(took >= Duration::from_millis(250), "{took:?}");

    ctl(&mount, "slow 1M\n").unwrap();
    let (_, took) = timed(|| write(&dev, 0, 262144, 3).unwrap());
    assert!(took >= Duration::from_millis(200), "{took:?}");
    ctl(&mount, "clear").unwrap();

    ctl(&mount, "fail flush after=1\n").unwrap();
    assert!(counters(&mount).contains("\"faults\":[\"fail flush after=1\"]"));
    assert_eq!(errno(&dev.sync_all()), 0, "the one flush let through");
    assert_eq!(errno(&write(&dev, 0, 4096, 5)), 0, "writes go on");
    assert_eq!(errno(&dev.sync_all()), libc::EIO, "then fsync fails");
    assert_eq!(errno(&dev.sync_data()), libc::EIO, "and fdatasync");
    assert_eq!(
        errno(&ctl(&mount, "fail flush enospc\n")),
        libc::EINVAL,
        "a flush fails with EIO only"
    );
    ctl(&mount, "clear\ndying\n").unwrap();
    assert!(counters(&mount).contains("\"faults\":[\"dying\"]"));
    assert_eq!(errno(&write(&dev, 0, 4096, 6)), libc::EIO, "dying: a write");
    assert_eq!(errno(&dev.sync_all()), libc::EIO, "dying: fsync");
    assert_eq!(read(&dev, 0, 4096).unwrap(), vec![5u8; 4096], "reads work");
    ctl(&mount, "dying reads=eio\n").unwrap();
    assert_eq!(errno(&read(&dev, 0, 4096)), libc::EIO, "dying reads=eio");
    ctl(&mount, "clear\n").unwrap();
    assert_eq!(errno(&write(&dev, 0, 4096, 6)), 0, "cleared");

    dev.sync_all().unwrap();
    write(&dev, 4 * MIB, 8192, 4).unwrap();
    ctl(&mount, "power-cut seed=7\n").unwrap();
    ctl(&mount, "power-cut\n").unwrap();
    let json = counters(&mount);
    assert!(json.contains("\"power_cuts\":2,"), "{json}");
    assert!(read(&dev, 4 * MIB, 8192).is_ok());

    drop(dev);
    loop_device.detach().unwrap();
    stop(child);
    assert!(!is_mounted(&mount), "{} still mounted", mount.display());
    assert!(!mount.exists(), "the mount point it made is left behind");
}

#[test]
fn the_binary_refuses_a_bad_size() {
    let backing = TempFile::new("ctl-bad-size");
    let mount =
        std::env::temp_dir().join(format!("nvrec-faultydisk-bad-size.{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_nvrec-faultydisk"))
        .args(["--backing", &backing.0.to_string_lossy()])
        .args(["--size", "1000", "--mount", &mount.to_string_lossy()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("multiple of 4096"), "{stderr}");
    assert!(!mount.exists(), "the mount point it made is left behind");
}
