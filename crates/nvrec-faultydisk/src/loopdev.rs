//! A loop device over a file, detached when dropped: the block device tests write to.
//!
//! Attaching asks `losetup` for direct I/O and falls back to a buffered loop device where the
//! kernel refuses it; [`LoopDevice::direct_io`] says which one it got, as the kernel reports
//! it in sysfs. Detaching runs `losetup -d` and waits (boundedly) until the kernel has let go
//! of the file, so that the file system under it can unmount cleanly.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::server::Server;
use crate::{Error, Result};

/// How long a detach waits for the kernel to release the backing file.
const DETACH_WAIT: Duration = Duration::from_secs(5);
/// How often it looks, and how long an attach that lost a race waits before it tries again.
const DETACH_POLL: Duration = Duration::from_millis(10);
/// Attempts at attaching while other processes attach loop devices too.
const ATTACH_ATTEMPTS: u32 = 20;

/// An attached loop device; dropping it detaches it.
#[derive(Debug)]
pub struct LoopDevice {
    path: PathBuf,
    /// A faulty disk under the device, whose faults are cleared before detaching.
    disk: Option<Arc<Server>>,
}

impl LoopDevice {
    /// Attaches a loop device over `file`, with direct I/O where the kernel allows it.
    pub fn attach(file: &Path) -> Result<LoopDevice> {
        let file = file.to_string_lossy();
        let path = match attach_retrying(&["--find", "--show", "--direct-io=on", &file]) {
            Ok(path) => path,
            Err(_) => attach_retrying(&["--find", "--show", &file])?,
        };
        Ok(LoopDevice { path, disk: None })
    }

    /// Attaches a buffered loop device (no direct I/O) over `file`.
    pub fn attach_buffered(file: &Path) -> Result<LoopDevice> {
        let file = file.to_string_lossy();
        let path = attach_retrying(&["--find", "--show", "--direct-io=off", &file])?;
        Ok(LoopDevice { path, disk: None })
    }

    pub(crate) fn release_before_detach(&mut self, disk: Arc<Server>) {
        self.disk = Some(disk);
    }

    /// The device node, e.g. `/dev/loop3`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the kernel does direct I/O on the backing file (sysfs `loop/dio`).
    pub fn direct_io(&self) -> bool {
        std::fs::read_to_string(self.sysfs("loop/dio")).is_ok_and(|dio| dio.trim() == "1")
    }

    /// Detaches now, reporting a failure instead of printing it.
    pub fn detach(mut self) -> Result<()> {
        self.detach_now()
    }

    fn sysfs(&self, name: &str) -> PathBuf {
        let device = self.path.file_name().unwrap_or_default();
        Path::new("/sys/block").join(device).join(name)
    }

    fn detach_now(&mut self) -> Result<()> {
        if self.path.as_os_str().is_empty() {
            return Ok(());
        }
        if let Some(disk) = self.disk.take() {
            disk.faults.clear();
        }
        let backing = self.sysfs("loop/backing_file");
        let path = std::mem::take(&mut self.path);
        losetup(&["--detach", &path.to_string_lossy()])?;
        let start = Instant::now();
        while backing.exists() && start.elapsed() < DETACH_WAIT {
            thread::sleep(DETACH_POLL);
        }
        Ok(())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        if let Err(err) = self.detach_now() {
            eprintln!("nvrec-faultydisk: {err}");
        }
    }
}

/// Runs `losetup --find --show ...`, again when another attach took the free device first.
fn attach_retrying(args: &[&str]) -> Result<PathBuf> {
    let mut attempt = 1;
    loop {
        match losetup(args) {
            Ok(path) => return Ok(PathBuf::from(path.trim())),
            Err(Error::Losetup { why, .. })
                if attempt < ATTACH_ATTEMPTS && why.contains("busy") =>
            {
                attempt += 1;
                thread::sleep(DETACH_POLL);
            }
            Err(err) => return Err(err),
        }
    }
}

/// Runs losetup, answering its standard output.
fn losetup(args: &[&str]) -> Result<String> {
    let joined = args.join(" ");
    let output = Command::new("losetup")
        .args(args)
        .output()
        .map_err(|err| Error::Losetup {
            args: joined.clone(),
            why: err.to_string(),
        })?;
    if !output.status.success() {
        return Err(Error::Losetup {
            args: joined,
            why: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// What this machine lacks to run faulty disks and loop devices; tests map it to the need
/// they report when they skip (`nvrec_testkit::ROOT`, `FUSE`, `LOSETUP`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Not root: mounting FUSE (here) and attaching loop devices need root.
    Root,
    /// No `/dev/fuse`.
    Fuse,
    /// No `losetup` to run.
    Losetup,
}

/// What is missing to run faulty disks and loop devices here (not root, no `/dev/fuse`, no
/// `losetup`) with a sentence saying so, or `None` when nothing is. Tests skip on it.
pub fn missing_requirement() -> Option<(Missing, String)> {
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some((
            Missing::Root,
            "not root: mounting FUSE and attaching loop devices need root".to_string(),
        ));
    }
    if !Path::new("/dev/fuse").exists() {
        return Some((Missing::Fuse, "no /dev/fuse (modprobe fuse)".to_string()));
    }
    if Command::new("losetup").arg("--version").output().is_err() {
        return Some((
            Missing::Losetup,
            "no losetup (apt-get install util-linux)".to_string(),
        ));
    }
    None
}

/// Why faulty disks and loop devices cannot be used here (not root, no `/dev/fuse`, no
/// `losetup`), or `None` when they can: [`missing_requirement`]'s sentence.
pub fn skip_reason() -> Option<String> {
    missing_requirement().map(|(_, why)| why)
}
