//! Skips that show.
//!
//! A test that cannot run here (no root, no `/dev/fuse`, no `chromium`...) calls [`skip`]
//! with what it needs and returns. `cargo test` captures what a passing test prints, so a
//! skip that only printed would look like a pass; [`skip`] instead
//!
//! - writes its line straight to the process's standard error, which the harness does not
//!   capture, so it shows between the test results;
//! - adds it to the run's list (one file per `cargo test` run, keyed by cargo's process id,
//!   under the target directory), and when the test binary exits prints a summary: how many
//!   tests it skipped, for want of what, which package brings each missing thing, and how
//!   many the whole run has skipped so far;
//! - panics instead, failing the test, where `NVREC_NO_SKIP=1` is set (CI sets it): CI
//!   allows no skip. A need that another test covers ([`Need::covered_by`]) is allowed
//!   there only when that other test runs.
//!
//! It also holds [`TempDir`], the scratch directory the library's tests share.

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, Once};

/// Set to `1`, every skip fails its test instead.
pub const NO_SKIP_VARIABLE: &str = "NVREC_NO_SKIP";

/// Set to `1`, the slowest tests run whole (CI sets it): every case of the seeded runs and
/// the tests [`kept_for_full_run`] holds back. Without it, `cargo test --workspace` is the
/// quick run a developer waits for (HACKING.md, "The first hour").
pub const FULL_RUN_VARIABLE: &str = "NVREC_FULL_TESTS";

/// Something a test needs and this machine may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// What is missing, in a few words.
    pub what: &'static str,
    /// How to get it: the package that brings it, or what to do.
    pub brought_by: &'static str,
    /// Another test that checks the same where this one cannot, and the variable (set to
    /// `1`) that makes that test run; `None` for most needs.
    pub covered_by: Option<Coverage>,
}

/// Where the checks of a test that cannot run here are made instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    pub test: &'static str,
    pub variable: &'static str,
}

const fn need(what: &'static str, brought_by: &'static str) -> Need {
    Need {
        what,
        brought_by,
        covered_by: None,
    }
}

pub const ROOT: Need = need("root", "run the tests as root");
pub const FUSE: Need = need(
    "/dev/fuse",
    "modprobe fuse (the fuse3 package brings fusermount3)",
);
pub const LOSETUP: Need = need("losetup and loop devices", "apt-get install util-linux");
pub const MKFS_EXT4: Need = need("mkfs.ext4", "apt-get install e2fsprogs");
pub const NET_NAMESPACE: Need = need(
    "a network namespace of the test's own",
    "root with unshare(CLONE_NEWNET) allowed, and ip (apt-get install iproute2)",
);
pub const BLKIO_CGROUP: Need = need(
    "a cgroup v1 blkio hierarchy that takes write limits",
    "mount -t cgroup -o blkio none /sys/fs/cgroup/blkio (as root)",
);
pub const REALTIME: Need = need(
    "real-time time for SCHED_FIFO in this cgroup",
    "root in a cgroup with cpu.rt_runtime_us > 0",
);
pub const MOUNT_EXT4: Need = need(
    "mounting ext4 on a loop device",
    "root, and apt-get install e2fsprogs util-linux",
);
pub const IO_URING: Need = need(
    "io_uring",
    "a kernel with io_uring enabled (sysctl kernel.io_uring_disabled=0)",
);
pub const DD: Need = need("dd", "apt-get install coreutils");
/// A test that measures what qemu-user does not emulate (it translates system calls instead
/// of making them): the same test runs natively, where CI requires it.
pub const REAL_KERNEL: Need = Need {
    what: "a real kernel, not qemu-user's translation of system calls",
    brought_by: "run the test natively (an aarch64 machine, or the x86_64 build)",
    covered_by: Some(Coverage {
        test: "the same test in the native run",
        variable: "NVREC_QEMU_USER",
    }),
};
pub const CHROMIUM: Need = need("chromium", "apt-get install chromium");
pub const TSHARK: Need = need("tshark and capinfos", "apt-get install tshark");
pub const TCPDUMP: Need = need("tcpdump", "apt-get install tcpdump");
/// The official readers of the export formats, from PyPI (the tests install them when pip
/// can reach it; `.ci/run` installs them).
pub const PYTHON_SIGMF: Need = need(
    "the Python package sigmf (SigMF's reader)",
    "python3 -m pip install --quiet sigmf",
);
pub const PYTHON_MCAP: Need = need(
    "the Python package mcap (MCAP's reader)",
    "python3 -m pip install --quiet mcap",
);
/// The reference implementation of Community ID, from PyPI (`find`'s tests check every
/// flow's ID against it; `.ci/run` installs it).
pub const PYTHON_COMMUNITYID: Need = need(
    "the Python package communityid (Community ID's reference implementation)",
    "python3 -m pip install --quiet communityid",
);
/// DuckDB's Python package (`find`'s tests read the archive's flows objects with it, as an
/// engine users already run; `.ci/run` installs it).
pub const PYTHON_DUCKDB: Need = need(
    "the Python package duckdb",
    "python3 -m pip install --quiet duckdb",
);
/// s3fs, fsspec's S3 filesystem (DuckDB reads an archive's flows objects from the bucket
/// through it in the archive's tests; `.ci/run` installs it).
pub const PYTHON_S3FS: Need = need(
    "the Python package s3fs",
    "python3 -m pip install --quiet s3fs",
);
pub const PROMTOOL: Need = need("promtool", "apt-get install prometheus");
pub const SYSTEMD_ANALYZE: Need = need("systemd-analyze", "apt-get install systemd");
pub const CURL: Need = need("curl", "apt-get install curl");
pub const OPENSSL: Need = need("the openssl command", "apt-get install openssl");
pub const POSTGRES: Need = need("a PostgreSQL server", "apt-get install postgresql");
pub const GARAGE: Need = need(
    "garage, an S3 server",
    "cargo install garage --version 2.5.0 --locked (.ci/run builds it)",
);
pub const QUIET_MACHINE: Need = need(
    "a machine that does not hold the writer back",
    "run again on a machine with less load",
);
/// A slow test that only the full run makes; CI makes it.
pub const FULL_RUN: Need = need(
    "the full run (NVREC_FULL_TESTS=1)",
    "set NVREC_FULL_TESTS=1, as .ci/run does",
);
pub const QEMU_OPT_IN: Need = need(
    "NVREC_QEMU_TESTS=1 (boots QEMU, about a minute)",
    "apt-get install qemu-system-x86 nvme-cli; set NVREC_QEMU_TESTS=1",
);
pub const NVME_CONTROLLER: Need = Need {
    what: "an NVMe controller whose admin commands are allowed",
    brought_by: "a machine with NVMe (QEMU's emulated controller: NVREC_QEMU_TESTS=1)",
    covered_by: Some(Coverage {
        test: "nvrec-cli tests/qemu.rs (tests/qemu/check-health)",
        variable: "NVREC_QEMU_TESTS",
    }),
};
pub const NON_NVME_BLOCK_DEVICE: Need = need(
    "a block device other than NVMe",
    "a machine with a virtio, SATA or SCSI disk",
);

/// Reports that the calling test skips for want of `need` (`detail`: what exactly was
/// found), or fails it where `NVREC_NO_SKIP=1`. The test returns after the call.
#[track_caller]
pub fn skip(need: Need, detail: impl Display) {
    let test = test_name();
    if variable_is_one(NO_SKIP_VARIABLE) && !covered_here(need) {
        panic!(
            "{test} would skip ({detail}): it needs {}, {}; {NO_SKIP_VARIABLE}=1 makes a skip a failure",
            need.what, need.brought_by
        );
    }
    let line = format!(
        "SKIPPED {test}: {detail} (needs {}: {})",
        need.what, need.brought_by
    );
    // The harness captures `eprintln!`, not the standard error itself.
    let _ = writeln!(std::io::stderr(), "{line}");
    record(test, need);
}

/// Whether this is the full run (`NVREC_FULL_TESTS=1`).
pub fn full_run() -> bool {
    variable_is_one(FULL_RUN_VARIABLE)
}

/// How many of a repeated check to make: `full` in the full run, `quick` otherwise.
pub fn quick_or_full<T>(quick: T, full: T) -> T {
    if full_run() {
        full
    } else {
        quick
    }
}

/// For a slow test that only the full run makes: outside it, skips (as [`skip`] does, so
/// the skip shows and `NVREC_NO_SKIP=1` fails it) naming what the test `covers`, and returns
/// true; the test then returns. In the full run, returns false.
#[track_caller]
pub fn kept_for_full_run(covers: &str) -> bool {
    if full_run() {
        return false;
    }
    skip(FULL_RUN, format_args!("a slow test; it covers {covers}"));
    true
}

/// Whether another run covers what this test would check: the test that `need` names runs,
/// or this is a run under qemu-user emulation (`NVREC_QEMU_USER=1`, set by the aarch64
/// runner), every test of which CI also runs natively.
fn covered_here(need: Need) -> bool {
    variable_is_one("NVREC_QEMU_USER")
        || need
            .covered_by
            .is_some_and(|coverage| variable_is_one(coverage.variable))
}

fn variable_is_one(name: &str) -> bool {
    std::env::var(name).as_deref() == Ok("1")
}

fn test_name() -> String {
    let thread = std::thread::current();
    match thread.name() {
        Some(name) if name != "main" => name.to_string(),
        _ => "a test".to_string(),
    }
}

struct Skipped {
    test: String,
    need: Need,
}

static SKIPPED: Mutex<Vec<Skipped>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

fn record(test: String, need: Need) {
    if let Some(path) = run_list() {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| writeln!(file, "{test}\t{}\t{}", need.what, need.brought_by));
        if let Err(error) = appended {
            let _ = writeln!(
                std::io::stderr(),
                "nvrec-testkit: {}: {error}",
                path.display()
            );
        }
    }
    SKIPPED
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
        .push(Skipped { test, need });
    AT_EXIT.call_once(|| {
        // SAFETY: `summary` is an `extern "C" fn()` that neither unwinds nor returns a value;
        // atexit only stores its address.
        unsafe { libc::atexit(summary) };
    });
}

/// The list of this `cargo test` run's skips: a file named after cargo's process id (the
/// test binaries' parent) in `nvrec-skips/` beside the test binary's `deps/` folder.
fn run_list() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let dir = profile_dir.join("nvrec-skips");
    std::fs::create_dir_all(&dir).ok()?;
    // SAFETY: getppid has no preconditions and cannot fail.
    let parent = unsafe { libc::getppid() };
    Some(dir.join(format!("{parent}.tsv")))
}

extern "C" fn summary() {
    let skipped = SKIPPED.lock().unwrap_or_else(|poison| poison.into_inner());
    let run_total = run_list()
        .and_then(|path| std::fs::read_to_string(path).ok())
        .map(|text| text.lines().count());
    let text = summary_text(&skipped, run_total);
    let _ = std::io::stderr().write_all(text.as_bytes());
}

fn summary_text(skipped: &[Skipped], run_total: Option<usize>) -> String {
    let mut needs: Vec<Need> = Vec::new();
    for entry in skipped {
        if !needs.contains(&entry.need) {
            needs.push(entry.need);
        }
    }
    let mut text = format!(
        "\nnvrec: {} skipped in this test binary",
        plural(skipped.len())
    );
    if let Some(total) = run_total {
        text += &format!(", {} in this cargo run so far", plural(total));
    }
    text += ":\n";
    for need in needs {
        let tests: Vec<&str> = skipped
            .iter()
            .filter(|entry| entry.need == need)
            .map(|entry| entry.test.as_str())
            .collect();
        text += &format!(
            "  {} ({}): {}\n",
            need.what,
            need.brought_by,
            tests.join(", ")
        );
    }
    text
}

fn plural(count: usize) -> String {
    match count {
        1 => "1 test".to_string(),
        _ => format!("{count} tests"),
    }
}

/// Deterministic incompressible bytes (xorshift), unlike the pattern: what a test records
/// when no two chunks may be alike.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// A directory under the system temp dir, named for the test and this process, made empty,
/// and removed when dropped: where a test's files go.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("nvrec-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating the temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_groups_the_tests_by_what_they_need() {
        let skipped = [
            Skipped {
                test: "a".into(),
                need: ROOT,
            },
            Skipped {
                test: "b".into(),
                need: CHROMIUM,
            },
            Skipped {
                test: "c".into(),
                need: ROOT,
            },
        ];
        let text = summary_text(&skipped, Some(5));
        assert!(
            text.contains("3 tests skipped in this test binary, 5 tests in this cargo run so far"),
            "{text}"
        );
        assert!(
            text.contains("  root (run the tests as root): a, c\n"),
            "{text}"
        );
        assert!(
            text.contains("  chromium (apt-get install chromium): b\n"),
            "{text}"
        );
    }

    #[test]
    fn the_quick_run_takes_the_quick_count_and_the_full_run_the_full() {
        let expected = if std::env::var(FULL_RUN_VARIABLE).as_deref() == Ok("1") {
            3000
        } else {
            300
        };
        assert_eq!(quick_or_full(300, 3000), expected);
    }

    #[test]
    fn a_covered_need_is_allowed_only_while_its_cover_runs() {
        // No need but the NVMe controller's is covered by another test (outside qemu-user).
        assert_eq!(covered_here(ROOT), variable_is_one("NVREC_QEMU_USER"));
        let cover = NVME_CONTROLLER.covered_by.unwrap();
        assert_eq!(
            covered_here(NVME_CONTROLLER),
            variable_is_one(cover.variable)
        );
    }
}
