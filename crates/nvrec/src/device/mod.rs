//! Opening targets for direct I/O: regular files and block devices.
//!
//! API CONTRACT (stub to be replaced by the real implementation; keep the signatures).

use std::fs::File;
use std::path::{Path, PathBuf};

/// What kind of object a target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    File,
    BlockDevice,
}

/// Whether the target is opened for reading only or for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Whether the safety checks run before a write open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Safety {
    /// Refuse a mounted or in-use device, or one whose first blocks hold a signature.
    Check,
    /// The user said `--force`: open anyway.
    Force,
}

#[derive(Debug, Clone)]
pub struct OpenOptions {
    pub access: Access,
    /// For a regular file opened for writing: create it if missing and make sure it is at
    /// least this long, preallocated (fallocate). Ignored for block devices.
    pub create_len_bytes: Option<u64>,
    pub safety: Safety,
}

/// An open target, ready for O_DIRECT I/O.
#[derive(Debug)]
pub struct Target {
    pub path: PathBuf,
    pub kind: TargetKind,
    /// Usable bytes: the device size, or the file length after any preallocation.
    pub capacity_bytes: u64,
    /// Alignment that O_DIRECT needs for offsets, lengths and buffer addresses.
    pub logical_block_bytes: u32,
    /// Opened with O_DIRECT (and O_CLOEXEC); read-write when `Access::Write`.
    pub file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("{path}: {message}")]
    Other { path: PathBuf, message: String },
}

impl DeviceError {
    pub fn is_safety_refusal(&self) -> bool {
        false
    }
}

/// Opens `path` for direct I/O, creating or safety-checking it as `options` say.
/// (Interim: regular files only.)
pub fn open(path: &Path, options: &OpenOptions) -> Result<Target, DeviceError> {
    use std::os::unix::fs::OpenOptionsExt;
    let other = |message: String| DeviceError::Other { path: path.to_path_buf(), message };
    let mut open = std::fs::OpenOptions::new();
    open.read(true).custom_flags(libc::O_DIRECT);
    if options.access == Access::Write {
        open.write(true);
        if options.create_len_bytes.is_some() {
            open.create(true);
        }
    }
    let file = open.open(path).map_err(|e| other(e.to_string()))?;
    if let Some(len) = options.create_len_bytes {
        if file.metadata().map_err(|e| other(e.to_string()))?.len() < len {
            file.set_len(len).map_err(|e| other(e.to_string()))?;
        }
    }
    let capacity_bytes = file.metadata().map_err(|e| other(e.to_string()))?.len();
    Ok(Target { path: path.to_path_buf(), kind: TargetKind::File, capacity_bytes, logical_block_bytes: 4096, file })
}

/// Facts about a target for reports (TEST #00 of the self-test).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TargetInfo {
    /// "file", "loop", "nvme", "virtio", "block".
    pub transport: String,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub firmware: Option<String>,
    pub pcie_link: Option<PcieLink>,
    /// For a loop device: its backing file and whether it does direct I/O.
    pub loop_backing_file: Option<PathBuf>,
    pub loop_direct_io: Option<bool>,
    /// For a regular file: the block device that holds its filesystem, if known.
    pub backing_device: Option<String>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PcieLink {
    pub current_speed: String,
    pub current_width: u32,
    pub max_speed: String,
    pub max_width: u32,
}

pub fn describe(target: &Target) -> TargetInfo {
    let _ = target;
    todo!()
}
