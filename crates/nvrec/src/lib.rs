//! nvrec: the library core of a data recorder for NVMe SSDs.
//!
//! Everything that moves, checks or measures bytes lives here. Above it, `nvrec-archive`
//! keeps recordings in object storage, `nvrec-app` holds the use cases (record, replay,
//! verify, export, archive) with their typed outcomes, and the `nvrec` binary in
//! `crates/nvrec-cli` (the command and the service) parses, calls them and prints.
//!
//! The layers, bottom up (see ARCHITECTURE.md for the full map); a module imports only
//! from the layers below it:
//! - [`mod@unit`]: byte sizes and durations as users write them (`128K`, `4G`, `500ms`).
//! - [`window`]: the receive times a reading is about.
//! - [`pattern`]: the seekable, incompressible test pattern and its checker.
//! - [`buffer`]: the aligned buffer pool allocated once at start.
//! - [`inflight`]: the ring of requests between submission and completion.
//! - [`clock`]: time as the recording code reads it, real or virtual (simulated disks).
//! - [`control`]: stop and abort of a long run, its live progress counters, CPU time.
//! - [`layout`]: the on-disk format of recordings (superblock, chunk header, CRC32C).
//! - [`flow`]: the flow a recorded packet belongs to (its key, its Community ID), the flows
//!   of a read's chunks; pure.
//! - [`device`]: opening targets, probing size and alignment, safety checks, sysfs facts.
//! - [`report`]: self-contained HTML pages with SVG charts, for the bench results.
//! - [`engine`]: how bytes reach a target: io_uring, a portable thread pool, simulations.
//! - [`nvme`]: what the drives say of themselves (Identify, SMART, the PCIe tree).
//! - [`source`] and [`sink`]: where written bytes come from and where read bytes go.
//! - [`plan`]: drives, RAM buffer, retention and wear for a target rate; pure arithmetic.
//! - [`stream`]: chunked write and read over an address range, with stop and abort.
//! - [`net`]: network sources (UDP, TCP, packet capture) recorded as records.
//! - [`mod@bench`]: drives characterized the way a recorder uses them.
//! - [`recording`]: striped, crash-safe, self-describing recordings on a volume set.
//! - [`input`]: the source `--source` names, opened (byte sources and network ones).
//! - [`selftest`]: the NVMe-Streamer-style test suite built on [`stream`].
//! - [`export`]: a recording read back, written as PcapNg, SigMF or MCAP.

pub mod bench;
pub mod buffer;
pub mod clock;
pub mod control;
pub mod device;
pub mod engine;
pub mod export;
pub mod flow;
pub mod inflight;
pub mod input;
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
pub mod window;

/// A typed failure (or reason) as `--json` gives it: its message, or null (serde's
/// `serialize_with`; the value stays typed everywhere else).
pub fn serialize_message<T: std::fmt::Display, S: serde::Serializer>(
    value: &Option<T>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&value.as_ref().map(T::to_string), serializer)
}

/// A typed failure (or reason) as `--json` gives it: its message (serde's
/// `serialize_with`, for a value that is always there).
pub fn serialize_shown<T: std::fmt::Display, S: serde::Serializer>(
    value: &T,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

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
