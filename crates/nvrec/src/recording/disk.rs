//! A member's device as the recording code reaches it: an open target (a file or a block
//! device), or one disk of a set of simulated disks.
//!
//! The recording code does all of its I/O through [`Disk`] (metadata, flushes, discards)
//! and the engine [`open_engine`] gives it over a set's disks (chunks), so that the same
//! writer, recovery and reader run on real targets and, in tests, on [`SimDisks`] with
//! injected faults.

use super::RecordingError;
use crate::buffer::BufferPool;
use crate::clock::Clock;
use crate::device::{self, OpenOptions, Target};
use crate::engine::{self, EngineChoice, EngineConfig, IoError, OpenedEngine, SimDisks};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Where a recording's members are.
#[derive(Debug, Clone, Copy)]
pub enum Members<'a> {
    /// Files or block devices, opened (and checked) by path.
    Paths(&'a [PathBuf]),
    /// Every disk of a set of simulated disks, in order.
    Sim(&'a SimDisks),
}

impl Members<'_> {
    pub fn len(&self) -> usize {
        match self {
            Members::Paths(paths) => paths.len(),
            Members::Sim(set) => set.disk_count(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The clock the members' I/O runs on: virtual on simulated disks, real otherwise.
    pub fn clock(&self) -> Clock {
        match self {
            Members::Paths(_) => Clock::Real,
            Members::Sim(set) => set.clock(),
        }
    }

    /// Opens every member (`options` applies to paths: access, creation, safety checks).
    pub fn open(&self, options: &OpenOptions) -> Result<Vec<Disk>, RecordingError> {
        match self {
            Members::Paths(paths) => paths
                .iter()
                .map(|path| Ok(Disk::Target(device::open(path, options)?)))
                .collect(),
            Members::Sim(set) => Ok((0..set.disk_count())
                .map(|index| Disk::Sim {
                    set: (*set).clone(),
                    index,
                    path: PathBuf::from(format!("sim:{index}")),
                })
                .collect()),
        }
    }
}

/// One member's device.
#[derive(Debug)]
pub enum Disk {
    Target(Target),
    Sim {
        set: SimDisks,
        index: usize,
        /// What reports call it (`sim:N`).
        path: PathBuf,
    },
}

fn io_error(error: IoError) -> std::io::Error {
    if error.errno != 0 {
        std::io::Error::from_raw_os_error(error.errno)
    } else {
        std::io::Error::other(error)
    }
}

impl Disk {
    /// The clock this disk's I/O runs on.
    pub fn clock(&self) -> Clock {
        match self {
            Disk::Target(_) => Clock::Real,
            Disk::Sim { set, .. } => set.clock(),
        }
    }

    /// The set of simulated disks this disk is one of, if it is simulated.
    pub fn simulated(&self) -> Option<&SimDisks> {
        match self {
            Disk::Target(_) => None,
            Disk::Sim { set, .. } => Some(set),
        }
    }

    /// A second handle on a simulated disk (`None` for a target, whose file is not
    /// shared so).
    pub fn clone_simulated(&self) -> Option<Disk> {
        match self {
            Disk::Target(_) => None,
            Disk::Sim { set, index, path } => Some(Disk::Sim {
                set: set.clone(),
                index: *index,
                path: path.clone(),
            }),
        }
    }

    /// The open target, where the member is one (a simulated disk has none).
    pub fn file(&self) -> Option<&std::fs::File> {
        match self {
            Disk::Target(target) => Some(&target.file),
            Disk::Sim { .. } => None,
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Disk::Target(target) => &target.path,
            Disk::Sim { path, .. } => path,
        }
    }

    pub fn capacity_bytes(&self) -> u64 {
        match self {
            Disk::Target(target) => target.capacity_bytes,
            Disk::Sim { set, index, .. } => set.capacity_bytes(*index),
        }
    }

    pub fn logical_block_bytes(&self) -> u32 {
        match self {
            Disk::Target(target) => target.logical_block_bytes,
            Disk::Sim { set, .. } => set.logical_block_bytes(),
        }
    }

    /// Reads exactly `out.len()` bytes at `offset_bytes` (aligned for direct I/O).
    pub fn read_exact_at(&self, out: &mut [u8], offset_bytes: u64) -> std::io::Result<()> {
        match self {
            Disk::Target(target) => target.file.read_exact_at(out, offset_bytes),
            Disk::Sim { set, index, .. } => {
                set.read_at(*index, offset_bytes, out).map_err(io_error)
            }
        }
    }

    /// Writes all of `data` at `offset_bytes` (aligned for direct I/O).
    pub fn write_all_at(&self, data: &[u8], offset_bytes: u64) -> std::io::Result<()> {
        match self {
            Disk::Target(target) => target.file.write_all_at(data, offset_bytes),
            Disk::Sim { set, index, .. } => {
                set.write_at(*index, offset_bytes, data).map_err(io_error)
            }
        }
    }

    /// Makes what was written durable (fdatasync).
    pub fn sync_data(&self) -> std::io::Result<()> {
        match self {
            Disk::Target(target) => target.file.sync_data(),
            Disk::Sim { set, index, .. } => set.flush(*index).map_err(io_error),
        }
    }

    /// BLKDISCARD on a block device, a punched hole in a file: the range holds nothing
    /// worth keeping.
    pub fn discard(&self, offset_bytes: u64, len_bytes: u64) -> std::io::Result<()> {
        let result = match self {
            Disk::Target(target) => engine::discard_file(&target.file, offset_bytes, len_bytes),
            Disk::Sim { set, index, .. } => set.discard(*index, offset_bytes, len_bytes),
        };
        result.map_err(io_error)
    }

    /// Takes the recording's exclusive lock on a target (see [`device::Lock`]); a
    /// simulated disk belongs to its test alone.
    pub fn lock_for_recording(&self) -> Result<(), RecordingError> {
        match self {
            Disk::Target(target) => {
                device::lock(&target.path, &target.file, device::Lock::Recording)?;
                target
                    .recording_lock
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Disk::Sim { .. } => Ok(()),
        }
    }

    /// Whether a recording (another program's) holds this target right now: never the
    /// recording this process runs on it.
    pub fn is_recording(&self) -> bool {
        match self {
            Disk::Target(target) => {
                !target
                    .recording_lock
                    .load(std::sync::atomic::Ordering::Relaxed)
                    && device::is_recording(&target.file)
            }
            Disk::Sim { .. } => false,
        }
    }
}

/// One engine over `disks` (engine file index `i` is `disks[i]`): the engine `choice`
/// names over targets, the simulated disks' own over simulated disks.
pub fn open_engine(
    disks: &[&Disk],
    choice: EngineChoice,
    pool: BufferPool,
    config: EngineConfig,
) -> Result<OpenedEngine, RecordingError> {
    let files: Option<Vec<&std::fs::File>> = disks
        .iter()
        .map(|disk| match disk {
            Disk::Target(target) => Some(&target.file),
            Disk::Sim { .. } => None,
        })
        .collect();
    if let Some(files) = files {
        return Ok(engine::open_engine(choice, &files, pool, config)?);
    }
    let sims: Option<Vec<(&SimDisks, usize)>> = disks
        .iter()
        .map(|disk| match disk {
            Disk::Sim { set, index, .. } => Some((set, *index)),
            Disk::Target(_) => None,
        })
        .collect();
    match sims {
        Some(sims) if !sims.is_empty() && sims.iter().all(|(set, _)| set.same_set(sims[0].0)) => {
            let set = sims[0].0;
            let indices = sims.iter().map(|(_, index)| *index).collect();
            Ok(OpenedEngine {
                engine: Box::new(set.engine(indices, pool, config)?),
                fallback_reason: None,
            })
        }
        _ => Err(RecordingError::Usage(
            "a set's members are all targets, or all disks of one simulated set".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EngineConfig {
        EngineConfig {
            queue_depth: 2,
            sqpoll: false,
            caller_may_block: false,
        }
    }

    #[test]
    fn one_engine_serves_disks_of_one_simulated_set_only() {
        let (a, b) = (
            SimDisks::new(2, 1 << 20, 4096, 1),
            SimDisks::new(1, 1 << 20, 4096, 2),
        );
        let options = OpenOptions {
            access: crate::device::Access::Write,
            create_len_bytes: None,
            safety: crate::device::Safety::Check,
        };
        let same = Members::Sim(&a).open(&options).unwrap();
        let other = Members::Sim(&b).open(&options).unwrap();
        let pool = || BufferPool::new(2, 8192).unwrap();
        let disks: Vec<&Disk> = same.iter().collect();
        assert!(open_engine(&disks, EngineChoice::Auto, pool(), config()).is_ok());
        let mixed = vec![&same[0], &other[0]];
        let refused = open_engine(&mixed, EngineChoice::Auto, pool(), config());
        assert!(matches!(refused, Err(RecordingError::Usage(_))));
    }
}
