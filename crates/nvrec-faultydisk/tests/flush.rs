//! Failing flushes and a dying disk through a loop device: with a flush rule, O_DIRECT
//! writes succeed while `fsync`/`fdatasync` of the loop device (and an O_DSYNC write, whose
//! FUA the block layer emulates with flushes) fail with EIO; dying fails writes, discards
//! and flushes together while reads go on (or fail too, when asked); `clear` brings both back.
//!
//! What reaches the disk: the loop device's queue has a volatile write cache and no FUA, so
//! each `fsync` or `fdatasync` of the device becomes exactly one FUSE FSYNC of `disk`
//! (counted in `Stats::fsyncs`), which is where the faults answer EIO. The tests count on
//! that and check it.

mod common;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use common::{errno, read, rig, write, Rig};
use nvrec_faultydisk::Durability;

const MIB: u64 = 1 << 20;

/// `BLKDISCARD`, `_IO(0x12, 119)`.
const BLKDISCARD: libc::c_ulong = 0x1277;

/// `fsync` of the device and the number of FSYNCs it sent to the disk.
fn fsync(rig: &Rig) -> (i32, u64) {
    let before = rig.disk.stats().fsyncs;
    let result = rig.device.sync_all();
    (errno(&result), rig.disk.stats().fsyncs - before)
}

/// `fdatasync` of the device and the number of FSYNCs it sent to the disk.
fn fdatasync(rig: &Rig) -> (i32, u64) {
    let before = rig.disk.stats().fsyncs;
    let result = rig.device.sync_data();
    (errno(&result), rig.disk.stats().fsyncs - before)
}

fn open_dsync(path: &Path) -> File {
    File::options()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(path)
        .unwrap_or_else(|e| panic!("opening {} with O_DSYNC: {e}", path.display()))
}

/// Discards `[offset, offset + len)` of the device: the loop device punches a hole in
/// `disk`, which the faults treat as a write.
fn discard(device: &File, offset: u64, len: u64) -> std::io::Result<()> {
    let range = [offset, len];
    // SAFETY: BLKDISCARD reads two u64 from a live array on our stack.
    let rc = unsafe { libc::ioctl(device.as_raw_fd(), BLKDISCARD as _, range.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[test]
fn a_flush_rule_fails_fsync_and_fdatasync_while_writes_succeed() {
    let Some(rig) = rig("flush-fail", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    let dev = &rig.device;
    assert_eq!(fsync(&rig), (0, 1), "an fsync is one FSYNC");
    assert_eq!(fdatasync(&rig), (0, 1), "an fdatasync is one FSYNC");

    rig.disk.fail_flushes();
    assert_eq!(rig.disk.stats().faults, vec!["fail flush"]);
    assert_eq!(errno(&write(dev, MIB, 65536, 1)), 0, "writes go on");
    assert_eq!(read(dev, MIB, 65536).unwrap(), vec![1u8; 65536]);
    assert_eq!(fsync(&rig), (libc::EIO, 1), "fsync of the loop device");
    assert_eq!(
        fdatasync(&rig),
        (libc::EIO, 1),
        "fdatasync of the loop device"
    );
    assert_eq!(errno(&write(dev, 2 * MIB, 4096, 2)), 0);
    assert_eq!(fdatasync(&rig), (libc::EIO, 1), "write + fdatasync");
    // An O_DSYNC write is a FUA write, emulated with flushes around it: it fails, although
    // its data reached the disk.
    let dsync = open_dsync(rig.loop_device.path());
    assert_eq!(
        errno(&write(&dsync, 3 * MIB, 4096, 3)),
        libc::EIO,
        "O_DSYNC"
    );
    assert_eq!(read(dev, 3 * MIB, 4096).unwrap(), vec![3u8; 4096]);
    let stats = rig.disk.stats();
    assert_eq!(stats.failed, 4, "{stats:?}");

    rig.disk.clear();
    assert_eq!(rig.disk.stats().faults, Vec::<String>::new());
    assert_eq!(fsync(&rig), (0, 1), "cleared: fsync works again");
    assert_eq!(fdatasync(&rig), (0, 1), "cleared: fdatasync works again");
    assert_eq!(errno(&write(&dsync, 3 * MIB, 4096, 4)), 0, "and O_DSYNC");
    drop(dsync);
    rig.finish();
}

#[test]
fn a_flush_rule_lets_its_count_of_flushes_through_first() {
    let Some(rig) = rig("flush-after", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    rig.disk.fail_flushes_after(2);
    assert_eq!(rig.disk.stats().faults, vec!["fail flush after=2"]);
    assert_eq!(fsync(&rig), (0, 1), "first");
    assert_eq!(rig.disk.stats().faults, vec!["fail flush after=1"]);
    assert_eq!(fdatasync(&rig), (0, 1), "second");
    assert_eq!(fsync(&rig), (libc::EIO, 1), "third");
    assert_eq!(fsync(&rig), (libc::EIO, 1), "and every one after");
    assert_eq!(errno(&write(&rig.device, 0, 4096, 1)), 0, "writes go on");
    assert_eq!(rig.disk.stats().faults, vec!["fail flush"]);
    rig.disk.clear();
    assert_eq!(fsync(&rig), (0, 1));
    rig.finish();
}

#[test]
fn a_failed_flush_commits_nothing() {
    let tracking = Durability::TrackUnflushed { max_bytes: 8 * MIB };
    let Some(rig) = rig("flush-uncommitted", 16 * MIB, tracking) else {
        return;
    };
    let dev = &rig.device;
    write(dev, 0, 65536, 0xA1).unwrap();
    assert_eq!(fsync(&rig), (0, 1));
    write(dev, 0, 65536, 0xB2).unwrap();
    rig.disk.fail_flushes();
    assert_eq!(fsync(&rig), (libc::EIO, 1));
    assert_eq!(rig.disk.stats().unflushed_bytes, 65536, "still unflushed");
    rig.disk.power_cut(None).unwrap();
    assert_eq!(
        read(dev, 0, 65536).unwrap(),
        vec![0xA1u8; 65536],
        "the write whose flush failed is lost"
    );
    rig.finish();
}

#[test]
fn a_dying_disk_fails_writes_and_flushes_together_and_clear_brings_it_back() {
    let Some(rig) = rig("dying", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    let dev = &rig.device;
    write(dev, MIB, 65536, 1).unwrap();

    rig.disk.dying();
    assert_eq!(rig.disk.stats().faults, vec!["dying"]);
    assert_eq!(errno(&write(dev, MIB, 65536, 2)), libc::EIO, "a write");
    assert_eq!(errno(&write(dev, 9 * MIB, 4096, 2)), libc::EIO, "anywhere");
    assert_eq!(fsync(&rig), (libc::EIO, 1), "fsync");
    assert_eq!(fdatasync(&rig), (libc::EIO, 1), "fdatasync");
    assert_eq!(errno(&discard(dev, 4 * MIB, MIB)), libc::EIO, "a discard");
    let dsync = open_dsync(rig.loop_device.path());
    assert_eq!(errno(&write(&dsync, MIB, 4096, 2)), libc::EIO, "O_DSYNC");
    assert_eq!(
        read(dev, MIB, 65536).unwrap(),
        vec![1u8; 65536],
        "reads work, and nothing was written"
    );
    let stats = rig.disk.stats();
    assert_eq!(stats.failed, 6, "{stats:?}");

    rig.disk.clear();
    assert_eq!(errno(&write(dev, MIB, 65536, 3)), 0, "cleared: writes work");
    assert_eq!(fsync(&rig), (0, 1), "cleared: fsync works");
    assert_eq!(errno(&write(&dsync, 2 * MIB, 4096, 3)), 0, "and O_DSYNC");
    assert_eq!(read(dev, MIB, 65536).unwrap(), vec![3u8; 65536]);
    drop(dsync);
    rig.finish();
}

#[test]
fn a_dying_disk_with_reads_fails_reads_too() {
    let Some(rig) = rig("dying-reads", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    let dev = &rig.device;
    write(dev, 0, 4096, 7).unwrap();
    rig.disk.dying_with_reads();
    assert_eq!(rig.disk.stats().faults, vec!["dying reads=eio"]);
    assert_eq!(errno(&read(dev, 0, 4096)), libc::EIO, "a read");
    assert_eq!(errno(&write(dev, 0, 4096, 8)), libc::EIO, "a write");
    assert_eq!(fsync(&rig), (libc::EIO, 1), "fsync");
    // Back to a disk that only fails writes and flushes.
    rig.disk.dying();
    assert_eq!(read(dev, 0, 4096).unwrap(), vec![7u8; 4096]);
    rig.disk.clear();
    assert_eq!(errno(&write(dev, 0, 4096, 8)), 0);
    assert_eq!(read(dev, 0, 4096).unwrap(), vec![8u8; 4096]);
    rig.finish();
}
