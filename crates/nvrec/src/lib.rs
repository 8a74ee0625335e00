//! nvrec: the library core of a data recorder for NVMe SSDs.
//!
//! Everything that moves, checks or measures bytes lives here; the `nvrec` binary in
//! `crates/nvrec-cli` only parses arguments, draws progress and prints reports.
//!
//! The layers, bottom up (see ARCHITECTURE.md for the full map):
//! - [`mod@unit`]: byte sizes and durations as users write them (`128K`, `4G`, `500ms`).
//! - [`pattern`]: the seekable, incompressible test pattern and its checker.
//! - [`buffer`]: the aligned buffer pool allocated once at start.
//! - [`clock`]: time as the recording code reads it, real or virtual (simulated disks).
//! - [`engine`]: how bytes reach a target: io_uring, or a portable thread pool.
//! - [`device`]: opening targets, probing size and alignment, safety checks, sysfs facts.
//! - [`source`] and [`sink`]: where written bytes come from and where read bytes go.
//! - [`stream`]: chunked write and read over an address range, with stop and abort.
//! - [`selftest`]: the NVMe-Streamer-style test suite built on [`stream`].
//! - [`layout`]: the on-disk format of recordings (superblock, chunk header, CRC32C).
//! - [`export`]: a recording read back, written as PcapNg, SigMF or MCAP.
//! - [`report`]: self-contained HTML pages with SVG charts, for the bench results.
//! - [`plan`]: drives, RAM buffer, retention and wear for a target rate; pure arithmetic.

pub mod bench;
pub mod buffer;
pub mod clock;
pub mod device;
pub mod engine;
pub mod export;
pub mod inflight;
pub mod layout;
pub mod net;
pub mod nvme;
pub mod pattern;
pub mod plan;
pub mod recording;
pub mod report;
pub mod selftest;
pub mod sink;
pub mod source;
pub mod stream;
pub mod unit;

/// Whether the tests run under qemu-user emulation (the aarch64 runner in .cargo/config.toml
/// sets `NVREC_QEMU_USER`), which translates system calls instead of making them: it accepts
/// madvise without populating anything and answers ioctls it does not know with ENOSYS. The
/// few tests that measure those skip there, printing why.
#[cfg(test)]
pub(crate) fn under_qemu_user(test: &str, why: &str) -> bool {
    let emulated = std::env::var_os("NVREC_QEMU_USER").is_some();
    if emulated {
        nvrec_testkit::skip(
            nvrec_testkit::REAL_KERNEL,
            format_args!("{test}: skipped under qemu-user: {why}"),
        );
    }
    emulated
}
