//! A power cut after an archive to a directory: every object `archive` said it stored is
//! there afterwards, whole. The directory is an ext4 file system on a loop device over a
//! faulty disk that holds writes in memory until they are flushed; the cut drops the rest,
//! as a drive's volatile cache loses it. Needs root, /dev/fuse and mkfs.ext4; skips, saying
//! why, elsewhere.

mod common;

use common::*;
use nvrec_faultydisk::{Durability, Errno, FaultyDisk, LoopDevice, Op, Options};
use std::path::{Path, PathBuf};
use std::process::Command;

const DISK_BYTES: u64 = 256 << 20;

/// A file this test made outside its scratch directory, removed when dropped.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Unmounts `dir` when dropped (a failed assertion must not leave it mounted).
struct Mounted(PathBuf);

impl Mounted {
    fn mount(device: &LoopDevice, dir: &Path) -> Mounted {
        let status = Command::new("mount")
            .arg(device.path())
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success(), "mount {}", device.path().display());
        Mounted(dir.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // After the cut the file system cannot write: it comes down all the same.
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// True, with the skip reported, where a file system on a faulty disk cannot be made here.
fn cannot_run() -> bool {
    if no_faulty_disks() {
        return true;
    }
    let mkfs = Command::new("mkfs.ext4").arg("-V").output();
    if mkfs.is_ok_and(|output| output.status.success()) {
        return false;
    }
    nvrec_testkit::skip(nvrec_testkit::MKFS_EXT4, "no mkfs.ext4");
    true
}

#[test]
fn a_power_cut_after_an_archive_to_a_directory_loses_no_object_it_acknowledged() {
    if cannot_run() {
        return;
    }
    let scratch = Scratch::new("arch-power");
    let backing = PathBuf::from(format!(
        "/dev/shm/nvrec-archive-power-{}.img",
        std::process::id()
    ));
    let _removed = RemovedOnDrop(backing.clone());
    let options = Options {
        durability: Durability::TrackUnflushed {
            max_bytes: DISK_BYTES,
        },
        ..Options::default()
    };
    let disk = FaultyDisk::start(&backing, DISK_BYTES, options).unwrap();
    let device = disk.attach_loop().unwrap();
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(device.path())
        .status()
        .unwrap();
    assert!(mkfs.success());
    let mnt = scratch.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();

    // A recording on a plain file, archived onto the faulty file system.
    let targets = vec![scratch.path("member.img")];
    let data = noise(24 << 20, 17);
    let output = record_stdin(&targets, &data, &["--create-size", "40M"]);
    assert!(output.status.success(), "{}", text(&output));
    let url = format!("file://{}", mnt.join("archive").display());
    let mounted = Mounted::mount(&device, &mnt);
    let output = run(nvrec()
        .env("XDG_STATE_HOME", scratch.path("state"))
        .args(["--json", "archive", "--node", "n", "--segment-size", "5M"])
        .args(["--part-size", "5M", "--to", &url])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["recordings"][0]["outcome"], "archived", "{report}");

    // The cut: from now on nothing reaches the disk, and what it held unflushed is gone.
    disk.fail(Op::Write, 0..DISK_BYTES, Errno::Eio);
    let cut = disk.power_cut(None).unwrap();
    eprintln!("power cut: {cut:?}");
    drop(mounted);
    device.detach().unwrap();
    disk.clear();

    // Powered up again: the journal replays, and the archive must be all there.
    let device = disk.attach_loop().unwrap();
    let mounted = Mounted::mount(&device, &mnt);
    let output = run(nvrec().args(["verify", "--stored", &url]));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec().args(["verify", &url]));
    assert!(output.status.success(), "{}", text(&output));
    let back = run(nvrec().args(["replay", "--output", "-", &url]));
    assert!(back.status.success(), "{}", text(&back));
    assert!(
        back.stdout == data,
        "the archive after the cut is not the recording"
    );
    drop(mounted);
    device.detach().unwrap();
    disk.unmount().unwrap();
}
