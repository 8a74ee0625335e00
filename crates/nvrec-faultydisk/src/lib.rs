//! A faulty disk for tests: one fixed-size file, `disk`, served by a FUSE file system whose
//! faults change at run time, and a loop device over it that makes it a block device.
//!
//! nvrec's real code paths (O_DIRECT, io_uring, flushes) run on the loop device unchanged,
//! while a test or a script makes the disk fail byte ranges with EIO or ENOSPC, fail its
//! flushes, die (every write and flush failing at once), stall every request, crawl at a
//! set rate, or lose (or tear) the writes not yet flushed in a power cut.
//!
//! ```no_run
//! use nvrec_faultydisk::{Errno, FaultyDisk, Op, Options};
//!
//! # fn main() -> nvrec_faultydisk::Result<()> {
//! let disk = FaultyDisk::start("/dev/shm/disk.img".as_ref(), 64 << 20, Options::default())?;
//! let device = disk.attach_loop()?; // /dev/loopN, detached on drop
//! disk.fail(Op::Write, 1 << 20..2 << 20, Errno::Eio);
//! // ... writes to device.path() touching the second MiB fail with EIO ...
//! disk.clear();
//! disk.fail_flushes(); // fsync/fdatasync of device.path() fail with EIO; writes work
//! disk.clear();
//! disk.dying(); // every write, discard and flush fails with EIO; reads work
//! disk.clear(); // a working disk again
//! println!("{}", disk.stats().to_json());
//! # Ok(())
//! # }
//! ```
//!
//! Flushes: the loop device turns each block-layer flush (`fsync` or `fdatasync` of the
//! device, an O_DSYNC or FUA write) into an `fsync` of `disk`, which reaches the file system
//! as a FUSE FSYNC; that is what [`FaultyDisk::fail_flushes`],
//! [`FaultyDisk::fail_flushes_after`] and [`FaultyDisk::dying`] fail. (FUSE's FLUSH comes
//! with a `close`, not a block-layer flush, and never fails.)
//!
//! The same commands reach a disk from a shell through its control file (`MOUNT/ctl`; see
//! [`Command`] and the README): `fail read|write|any START LEN [eio|enospc]`, `fail flush
//! [after=N]`, `dying [reads=eio]`, `stall [DURATION]`, `resume`, `slow RATE`, `power-cut
//! [seed=N]`, `clear`. The `nvrec-faultydisk` binary serves one in the foreground.
//!
//! Tests skip where [`missing_requirement`] (or its sentence alone, [`skip_reason`]) says
//! this machine lacks root, `/dev/fuse` or `losetup`.
//!
//! Architecture invariant: the data path never changes what it is given; a fault only holds,
//! delays, fails or (power cut) forgets a request. The crate does not touch any device but
//! the loop devices it attaches itself.

mod control;
mod disk;
mod error;
mod fault;
mod fs;
mod loopdev;
mod overlay;
mod pool;
mod server;
mod stats;
mod store;

pub use disk::{FaultyDisk, Options, Unmount, FUSE_THREADS_DEFAULT};
pub use error::{Error, Result};
pub use fault::{parse_commands, parse_duration, parse_size, Command, Errno, Fault, Op};
pub use fs::{CTL_NAME, DISK_NAME, MAX_WRITE_BYTES};
pub use loopdev::{missing_requirement, skip_reason, LoopDevice, Missing};
pub use overlay::{torn_keep, PowerCut, SECTOR_BYTES};
pub use stats::Stats;
pub use store::{Durability, UNFLUSHED_MAX_BYTES_DEFAULT};
