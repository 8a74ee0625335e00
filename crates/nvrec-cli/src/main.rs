//! The `nvrec` command: argument parsing, progress, human and JSON output.
//!
//! The use cases live in the application layer (`nvrec-app`) and the data path in the
//! `nvrec` library; this crate only translates between people (or scripts) and them. Every
//! command ends in a [`Class`], whose exit status `Class::exit_status` decides; this file
//! adds the one status of its own, a closed stdout ([`exit_status`]).

// First, so that its printing macros (`outln!`, `out!`, `errln!`) are seen by every module.
#[macro_use]
mod output;
mod archive_cmd;
mod args;
mod bench_args;
mod bench_cmd;
mod bench_compare;
mod bench_drives;
mod bench_output;
mod bench_report;
mod bench_together;
mod export_cmd;
mod find_cmd;
mod index_cmd;
mod ls_cmd;
mod mark_cmd;
mod nvme_cmd;
mod plan_cmd;
mod progress;
mod reading;
mod record_args;
mod record_cmd;
mod repair_cmd;
mod replay_cmd;
mod samples;
mod selftest_cmd;
mod serve;
mod signal;
mod stream_cmd;
mod telemetry;
mod verify_cmd;

use anyhow::Result;
use clap::{Parser, Subcommand};
use nvrec::recording::failure::Parts;
use nvrec_app::{error_text, Class, UsageError};
use std::process::ExitCode;

/// The exit status of a command whose stdout was closed (`nvrec ls SET | head -1`): the run
/// is aborted and nothing more printed; 128 + SIGPIPE, what a shell shows for a program that
/// SIGPIPE ended. Every other status comes from the outcome's class (`Class::exit_status`,
/// documented in `--help` and docs/GUIDE.md, "Exit statuses").
const STDOUT_CLOSED: u8 = 128 + libc::SIGPIPE as u8;

const AFTER_HELP: &str = "\
SIZES: bytes, or with K, M, G, T, P (x1024; also KiB, MiB ...), KB, MB, GB, TB, PB (x1000),
       or 0x hex, as dd and fio take them: 128K, 4G, 1.5G, 0x20000.
SIGNALS: Ctrl-C (SIGINT) stops: chunks already taken are written, the flush runs and the last
       address is reported. A second Ctrl-C or SIGTERM aborts: chunks not yet submitted are
       dropped, in-flight ones complete, the flush runs.
EXIT STATUS: 0 done (or stopped), 1 failed (I/O error, mismatch, damaged recording), 2 bad
       arguments or addresses, 3 refused for safety (in use, or holding data: --force
       overrides a signature, --overwrite an nvrec set), 4 aborted, 5 target full,
       6 degraded (a member failed and was retired; the recording is whole on the others),
       141 stdout closed (a reader such as head went away: the run is aborted, quietly).";

#[derive(Parser, Debug)]
#[command(name = "nvrec", version, about = "Record streams onto NVMe SSDs at full speed, read them back, verify every byte", after_help = AFTER_HELP)]
struct Cli {
    /// Print the result as one JSON object on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Stream chunks into an address range of a file or block device.
    #[command(after_help = AFTER_HELP)]
    Write(stream_cmd::WriteArgs),
    /// Stream chunks out of an address range, checking the pattern or copying them out.
    #[command(after_help = AFTER_HELP)]
    Read(stream_cmd::ReadArgs),
    /// Run the NVMe-Streamer-style test suite on a target (default: a scratch file here).
    #[command(after_help = AFTER_HELP)]
    Selftest(selftest_cmd::SelftestArgs),
    /// Record a stream onto one or more targets: striped, framed, checkpointed.
    #[command(after_help = AFTER_HELP)]
    Record(record_args::RecordArgs),
    /// List the recordings on a volume set, or in an archive (file://DIR, s3://BUCKET/PREFIX).
    Ls(ls_cmd::LsArgs),
    /// Keep an event window of the ring recording running on a volume set out of its ring
    /// (--before, --after, --label), or release a mark (--release N).
    Mark(mark_cmd::MarkArgs),
    /// Reproduce a recorded stream byte-exactly, in order.
    Replay(replay_cmd::ReplayArgs),
    /// Write a recording as PcapNg (Wireshark, tcpdump; cut by a BPF filter), SigMF (radio
    /// samples) or MCAP (robotics logs).
    Export(export_cmd::ExportArgs),
    /// Find the flows of a packet recording that a Community ID (from Zeek or Suricata) or
    /// an expression (host, port, proto, ...) names: their times, packets, bytes, chunks.
    Find(find_cmd::FindArgs),
    /// Hold a packet recording's flow index to its data, block by block, and build the
    /// flows again from the data (as Parquet with --parquet, for a recording without one too).
    Index(index_cmd::IndexArgs),
    /// Check every chunk of the recordings: CRC, sequence, and the pattern.
    Verify(verify_cmd::VerifyArgs),
    /// Copy finished recordings into object storage (file://DIR, s3://BUCKET/PREFIX) as
    /// segments and a manifest each; resumable, checked against the chunks' CRCs.
    Archive(archive_cmd::ArchiveArgs),
    /// The catalog of archived recordings: list them, or rebuild it from an archive.
    Catalog(archive_cmd::CatalogArgs),
    /// Rewrite damaged metadata copies from good ones; persist a crashed recording's end;
    /// with --scan, rebuild lost recording entries from their chunks.
    Repair(repair_cmd::RepairArgs),
    /// Characterize a drive as a recorder uses it: sweep, fill, overwrite, profile.
    Bench(bench_cmd::BenchArgs),
    /// Plan drives, RAM buffer, retention and endurance for a target rate.
    Plan(plan_cmd::PlanArgs),
    /// List NVMe controllers and namespaces (model, firmware, PCIe link, formats) and other
    /// block devices, with what uses them.
    Devices(nvme_cmd::DevicesArgs),
    /// An NVMe drive's SMART / health log: temperatures, throttling, wear, data written.
    Health(nvme_cmd::HealthArgs),
    /// Run as a service: recordings started and stopped over an HTTP API (Unix socket or
    /// TCP), Prometheus metrics at /metrics, a live dashboard at /.
    Serve(serve::ServeArgs),
    /// Ask a running service (`nvrec serve`) how its recordings stand.
    Status(serve::client::StatusArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    signal::install();
    let json = cli.json;
    let result = run(cli);
    // A closed stdout ends the command whatever the run made of it (see `output`).
    let result = match output::take_stdout_error() {
        Some(error) => Err(anyhow::Error::new(error).context("writing to stdout")),
        None => result,
    };
    match result {
        Ok(class) => ExitCode::from(class.exit_status()),
        Err(error) => {
            let code = exit_status(&error);
            if code == STDOUT_CLOSED {
                // Quiet, as a program that SIGPIPE ended: the reader is gone.
            } else if json {
                let value = serde_json::json!({
                    "error": error_text(&error),
                    "failure": nvrec_app::recording_failure(&error).map(Parts::of),
                    "exit_code": code,
                });
                outln!("{value}");
            } else {
                errln!("nvrec: error: {}", error_text(&error));
            }
            ExitCode::from(code)
        }
    }
}

/// The exit status of a command that ended in `error`: its class's, but for a reader that
/// went away (stdout closed), which ends any command quietly.
fn exit_status(error: &anyhow::Error) -> u8 {
    let broken_pipe = error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        return STDOUT_CLOSED;
    }
    Class::of_error(error).exit_status()
}

/// Why `--json` means nothing to `command`, for the commands that print no report it could
/// shape: refused (exit 2) rather than silently ignored.
fn json_means_nothing(command: &Command) -> Option<&'static str> {
    match command {
        Command::Serve(_) => Some(
            "nvrec serve, which prints no report (it answers in JSON over its API, and `nvrec \
             --json status` asks it how its recordings stand); run it without --json",
        ),
        _ => None,
    }
}

fn run(cli: Cli) -> Result<Class> {
    let json = cli.json;
    if let Some(why) = json.then(|| json_means_nothing(&cli.command)).flatten() {
        return Err(UsageError(format!("--json means nothing to {why}")).into());
    }
    match cli.command {
        Command::Write(args) => stream_cmd::write(args, json),
        Command::Read(args) => stream_cmd::read(args, json),
        Command::Selftest(args) => selftest_cmd::run(args, json),
        Command::Bench(args) => bench_cmd::run(args, json),
        Command::Plan(args) => plan_cmd::run(args, json),
        Command::Devices(args) => nvme_cmd::devices(args, json),
        Command::Health(args) => nvme_cmd::health(args, json),
        Command::Record(args) => record_cmd::record(args, json),
        Command::Ls(args) => ls_cmd::ls(args, json),
        Command::Mark(args) => mark_cmd::mark(args, json),
        Command::Replay(args) => replay_cmd::replay(args, json),
        Command::Export(args) => export_cmd::export(args, json),
        Command::Find(args) => find_cmd::find(args, json),
        Command::Index(args) => index_cmd::index(args, json),
        Command::Verify(args) => verify_cmd::verify(args, json),
        Command::Repair(args) => repair_cmd::repair(args, json),
        Command::Serve(args) => serve::run(args),
        Command::Status(args) => serve::client::status(args, json),
        Command::Archive(args) => archive_cmd::archive(args, json),
        Command::Catalog(args) => archive_cmd::catalog(args, json),
    }
}
