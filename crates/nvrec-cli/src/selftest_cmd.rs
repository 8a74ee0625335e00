//! `nvrec selftest`: the suite on a scratch file (default) or on a given target, printed as
//! a console log in the style of the NVMe Streamer's.

use crate::args::IoArgs;
use crate::signal;
use anyhow::{Context, Result};
use clap::Args;
use nvrec::device::{self, Access, OpenOptions, Safety, Target};
use nvrec::nvme::monitor::Telemetry;
use nvrec::selftest::{self, Reporter, SelftestReport, SweepRow, Verdict, VerdictKind};
use nvrec::stream::{FlushMode, StreamConfig};
use nvrec::unit::{format_bytes, parse_size_bytes};
use nvrec_app::{Class, UsageError};
use std::path::{Path, PathBuf};

/// Scratch file made in the current directory when no target is given.
const SCRATCH_NAME: &str = "nvrec-selftest.scratch";
const RULE: &str = "****************************************************************";

#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// File or block device to test (it is overwritten). Default: a scratch file in the
    /// current directory, removed afterwards.
    target: Option<PathBuf>,
    /// Bytes of the target to use: the scratch file's size, or a limit on a file or device
    /// (never more than it holds: an existing target is not grown). At least 16 chunks and
    /// 2.5 I/Os (2.5 MiB with the defaults).
    #[arg(long, value_parser = size_arg)]
    size: Option<u64>,
    /// Keep the scratch file afterwards.
    #[arg(long)]
    keep: bool,
    /// Test a device even if its first blocks hold a filesystem or partition table (one
    /// that is mounted or in use is never written).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    io: IoArgs,
    #[command(flatten)]
    telemetry: crate::telemetry::TelemetryArgs,
    /// Refused (see [`STOP_AFTER_REFUSED`]): kept out of the help, and taken only so that
    /// the refusal says why rather than that the option is unknown.
    #[arg(long, hide = true, value_name = "DURATION")]
    stop_after: Option<String>,
}

/// Why `selftest` refuses `--stop-after`, which `write` and `read` take. A self-test cut off
/// after a time would end inside a test, whose checks need its whole run: what was not run
/// could be neither passed nor failed.
const STOP_AFTER_REFUSED: &str = "selftest has no --stop-after: each of its tests checks a \
    whole run, so one cut off after a time would test nothing. For a shorter self-test give a \
    smaller --size (TEST #10 writes and reads every byte the self-test may use); Ctrl-C ends \
    it after the test in progress, the tests not run failing as interrupted";

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size_bytes(text).map_err(|error| error.to_string())
}

/// Default scratch size: big enough for the sweep to reach 4096 chunks of 128 KiB.
const SCRATCH_BYTES_DEFAULT: u64 = 1 << 30;

pub fn run(args: SelftestArgs, json: bool) -> Result<Class> {
    if args.stop_after.is_some() {
        return Err(UsageError(STOP_AFTER_REFUSED.into()).into());
    }
    let config = args.io.config(FlushMode::AfterWrite);
    config.validate(1)?;
    if args.size == Some(0) {
        return Err(UsageError(
            "--size 0 leaves the self-test nothing to test: give the bytes it may use (at least a few MiB), or leave --size out"
                .into(),
        )
        .into());
    }
    let (path, scratch) = match &args.target {
        Some(path) => (path.clone(), false),
        None => (PathBuf::from(SCRATCH_NAME), true),
    };
    let target = open_target(&args, &path, scratch, &config)?;
    let mut console = Console { quiet: json };
    console.start(&path, scratch, &target, &config);
    let monitor = crate::telemetry::start(std::slice::from_ref(&path), &args.telemetry);
    let report = selftest::run(&target, config, &signal::CONTROL, &mut console);
    let telemetry = crate::telemetry::finish(monitor);
    drop(target);
    if scratch && !args.keep {
        if let Err(error) = std::fs::remove_file(&path) {
            errln!(
                "nvrec: warning: could not remove the scratch file {}: {error}",
                path.display()
            );
        }
    }
    let report = report?;
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["telemetry"] = serde_json::to_value(&telemetry)?;
        outln!("{value}");
    } else {
        print_summary(&report, telemetry.as_ref());
    }
    Ok(if report.passed() {
        Class::Done
    } else {
        Class::Failed
    })
}

/// Opens the target for writing, made with the size asked when it does not exist yet, and
/// limits its capacity to the bytes the self-test may use.
fn open_target(
    args: &SelftestArgs,
    path: &Path,
    scratch: bool,
    config: &StreamConfig,
) -> Result<Target> {
    // A target that exists is used as it is (never grown); one made here gets the size asked.
    let create_len_bytes = if std::fs::metadata(path).is_ok() {
        None
    } else if scratch {
        Some(args.size.unwrap_or(SCRATCH_BYTES_DEFAULT))
    } else {
        args.size
    };
    if let Some(len_bytes) = create_len_bytes {
        selftest::usable_bytes(path, None, Some(len_bytes), config)?;
    }
    let options = OpenOptions {
        access: Access::Write,
        create_len_bytes,
        safety: if args.force {
            Safety::Force
        } else {
            Safety::Check
        },
    };
    let mut target = device::open(path, &options)
        .with_context(|| format!("opening {} for the self-test", path.display()))?;
    target.capacity_bytes =
        selftest::usable_bytes(path, Some(target.capacity_bytes), args.size, config)?;
    Ok(target)
}

/// The closing summary: health, engine, the verdict and every test that did not pass.
fn print_summary(report: &SelftestReport, telemetry: Option<&Telemetry>) {
    if let Some(telemetry) = telemetry {
        out!("{}", crate::telemetry::text(telemetry));
    }
    if let Some(engine) = &report.engine {
        outln!("INFO: Engine: {engine}");
    }
    outln!("{RULE}\n{RULE}\n");
    outln!(
        "Overall Test Summary: {}",
        if report.passed() { "PASS" } else { "FAIL" }
    );
    outln!(
        "{} of {} tests failed, {} passed, {} not applicable",
        report.failed_count,
        report.test_count,
        report.passed_count,
        report.not_applicable_count
    );
    for test in report.tests.iter().filter(|test| !test.passed) {
        let (what, why) = match test.verdict {
            VerdictKind::NotApplicable => ("N/A", test.not_applicable.clone()),
            _ => ("FAIL", test.failure.as_ref().map(ToString::to_string)),
        };
        outln!(
            "  TEST #{:02} {}: {what}: {}",
            test.number,
            test.title,
            why.unwrap_or_default()
        );
    }
    outln!("\n{RULE}\n{RULE}\n");
    outln!("INFO: ... End");
}

struct Console {
    quiet: bool,
}

impl Console {
    fn line(&mut self, text: &str) {
        if !self.quiet {
            outln!("{text}");
        }
    }

    /// The opening lines: the version and what is tested.
    fn start(&mut self, path: &Path, scratch: bool, target: &Target, config: &StreamConfig) {
        self.line("INFO: Start ...");
        self.line(&format!(
            "INFO: nvrec {} self-test",
            env!("CARGO_PKG_VERSION")
        ));
        self.line(&format!(
            "INFO: Target: {} ({}), {} used, chunk size {}",
            path.display(),
            if scratch {
                "scratch file"
            } else {
                "given target"
            },
            format_bytes(target.capacity_bytes),
            format_bytes(config.chunk_size_bytes)
        ));
    }
}

impl Reporter for Console {
    fn test_start(&mut self, number: u32, title: &str, description: &str) {
        self.line(&format!(
            "{RULE}\nTEST #{number:02}: {title}\n{RULE}\n{description}\n********"
        ));
    }

    fn info(&mut self, line: &str) {
        self.line(&format!("INFO: {line}"));
    }

    fn test_end(&mut self, number: u32, verdict: &Verdict) {
        match verdict {
            Verdict::Pass => self.line(&format!("{RULE}\nTEST #{number:02}: PASS\n{RULE}")),
            Verdict::NotApplicable(why) => self.line(&format!(
                "INFO: not applicable: {why}\n{RULE}\nTEST #{number:02}: N/A\n{RULE}"
            )),
            Verdict::Fail(why) => self.line(&format!(
                "ERROR: {why}\n{RULE}\nTEST #{number:02}: FAIL\n{RULE}"
            )),
        }
    }

    fn sweep_table(&mut self, rows: &[SweepRow]) {
        self.line("*** Performance Summary ***");
        self.line("| chunks | write | read |");
        for row in rows {
            self.line(&format!(
                "| {} | {:.0} MiB/s | {:.0} MiB/s |",
                row.chunk_count, row.write_mib_per_s, row.read_mib_per_s
            ));
        }
    }
}
