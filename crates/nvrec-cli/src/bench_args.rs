//! The arguments of `nvrec bench` and the opening of its targets, shared by the benches on
//! one drive (`bench_cmd`) and on several at once (`bench_together`).

use crate::args::{size_arg, EngineArg};
use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use nvrec::bench::{self, analysis::AnalysisSettings, BenchTarget, TargetSpec};
use nvrec::device::{Access, IoPath, Safety};
use nvrec_app::UsageError;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Peak rates: write then read 1, 2, 4 ... chunks from the start, averaged over runs.
    Sweep(SweepArgs),
    /// Continuous write of the whole target (or --size), read back and compared; finds the
    /// cache cliff, the steady state, the slowest window and stalls.
    Fill(FillArgs),
    /// A ring's second lap: the rate before and after the wrap, without and with TRIM.
    Overwrite(OverwriteArgs),
    /// CrystalDiskMark (cdm, cdm6, cdm-nvme, custom --test shapes) and ATTO (atto) presets.
    Profile(ProfileArgs),
    /// Saved benches (--save JSON) on one HTML page: curves overlaid, plateaus, each file's
    /// key rates with the difference in percent against the first, and drives side by side
    /// (continuous write and read, peak against continuous, measured against rated, direct
    /// against page cache).
    Report(crate::bench_compare::ReportArgs),
}

#[derive(Args, Debug)]
#[command(
    after_help = "TARGET: a file (created with --size if missing; one that exists is never \
grown, and a bench that needs more than it holds is refused), a block device, or a \
simulated drive: sim:capacity=1G,cache=256M,fast=2.8GB/s,slow=1.6GB/s,read=3.2GB/s (keys: \
capacity lbs cache fast slow read recover iops latency overwrite throttle-after \
throttle-factor stall-every stall seed)."
)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub(crate) command: BenchCommand,
}

#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// File, block device, or sim:... (see below). Everything on it is overwritten. A file
    /// that exists is used at its size, never grown. Several: the bench runs on all at once
    /// (each drive's rates, the aggregate), then on each alone (their sum, the share kept).
    #[arg(required = true, value_name = "TARGET")]
    pub(crate) targets: Vec<String>,
    /// I/O engine.
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) engine: EngineArg,
    /// Write even to a device whose first blocks hold a filesystem or partition table (one
    /// that is mounted or in use is never written).
    #[arg(long)]
    pub(crate) force: bool,
    /// Also write the JSON result to this file.
    #[arg(long)]
    pub(crate) save: Option<PathBuf>,
    /// Write the time series (or the table) as CSV to this file.
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
    /// Write a self-contained HTML report with charts to this file.
    #[arg(long)]
    pub(crate) report: Option<PathBuf>,
    /// The drive's rated read and write in MB/s, e.g. 3500,3000: every rate is also shown
    /// as a percent of its direction's rating (text, JSON `rated`, HTML).
    #[arg(long, value_parser = rated_arg)]
    pub(crate) rated: Option<bench::Rated>,
}

fn rated_arg(text: &str) -> Result<bench::Rated, String> {
    bench::Rated::parse(text).map_err(|error| error.to_string())
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    #[arg(long, default_value = "128K", value_parser = size_arg)]
    pub(crate) chunk_size: u64,
    /// Largest chunk count of the sweep; refused when the target holds fewer chunks.
    /// Default: 32768, or as many as fit.
    #[arg(long)]
    pub(crate) max_chunks: Option<u64>,
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: u32,
    #[arg(long, default_value_t = 32)]
    pub(crate) queue_depth: u32,
    /// Through the page cache instead of with O_DIRECT (dd without oflag=direct), to set
    /// beside a direct sweep of the same drive in `bench report`: each transfer's range is
    /// dropped from the cache before it, and a write is timed until the drive has its data.
    /// Files and block devices only.
    #[arg(long)]
    pub(crate) buffered: bool,
}

impl SweepArgs {
    /// How the sweep's targets are opened.
    pub(crate) fn io_path(&self) -> IoPath {
        if self.buffered {
            IoPath::Buffered
        } else {
            IoPath::Direct
        }
    }
}

#[derive(Args, Debug)]
pub struct FillArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Bytes to write from the start (default: the whole target).
    #[arg(long, value_parser = size_arg)]
    pub(crate) size: Option<u64>,
    #[arg(long, default_value = "1M", value_parser = size_arg)]
    pub(crate) io_size: u64,
    #[arg(long, default_value_t = 32)]
    pub(crate) queue_depth: u32,
    /// Length of one logging window, seconds (default: sized for the run, 256 to 512
    /// windows, each holding at least 16 transfers for the analysis).
    #[arg(long)]
    pub(crate) window: Option<f64>,
    /// Skip the read-back comparison.
    #[arg(long)]
    pub(crate) no_verify: bool,
    /// Fill this many times: each run's plateaus and rates, and their average (the
    /// streamer's "average continuous performance"). The JSON's other fields are the last
    /// run's.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) runs: u32,
    /// Windows a drop must last to count as the cache cliff (or a later drop).
    #[arg(long, default_value_t = AnalysisSettings::default().drop_window_count)]
    pub(crate) drop_windows: usize,
    /// Windows a steady state must hold.
    #[arg(long, default_value_t = AnalysisSettings::default().steady_window_count)]
    pub(crate) steady_windows: usize,
    /// A transfer slower than this is a stall (default: 10x the median of the windows'
    /// slowest, at least 50 ms), e.g. 100ms.
    #[arg(long, value_parser = crate::args::duration_arg)]
    pub(crate) stall_latency: Option<std::time::Duration>,
    #[command(flatten)]
    pub(crate) telemetry: crate::telemetry::TelemetryArgs,
}

#[derive(Args, Debug)]
pub struct OverwriteArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Size of the ring from the start (default: the whole target).
    #[arg(long, value_parser = size_arg)]
    pub(crate) size: Option<u64>,
    /// Laps in all, the first included.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) laps: f64,
    #[arg(long, default_value = "1M", value_parser = size_arg)]
    pub(crate) io_size: u64,
    #[arg(long, default_value_t = 32)]
    pub(crate) queue_depth: u32,
    #[arg(long, default_value_t = bench::WINDOW_S_DEFAULT)]
    pub(crate) window: f64,
    /// How far ahead of the write point TRIM runs (default: 1/16 of the ring).
    #[arg(long, value_parser = size_arg)]
    pub(crate) trim_ahead: Option<u64>,
    /// Which phases to run.
    #[arg(long, value_enum, default_value = "both")]
    pub(crate) trim: TrimArg,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimArg {
    Both,
    Off,
    On,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileArg {
    /// CrystalDiskMark's default set: SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1.
    Cdm,
    /// CrystalDiskMark 6: SEQ128K Q32T1, RND4K Q8T8, RND4K Q32T1, RND4K Q1T1.
    Cdm6,
    /// CrystalDiskMark's NVMe set: SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, RND4K Q1T1.
    #[value(name = "cdm-nvme")]
    CdmNvme,
    /// The shapes given with --test.
    Custom,
    /// ATTO: 512 B to 64 MiB at queue depth 4, compressible data.
    Atto,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    #[arg(value_enum)]
    pub(crate) profile: ProfileArg,
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    /// Test region (default: 1 GiB for cdm, 256 MiB for atto); a target smaller than the
    /// region is refused.
    #[arg(long, value_parser = size_arg)]
    pub(crate) size: Option<u64>,
    /// Seconds each run of a time-based test lasts.
    #[arg(long, default_value_t = 5.0)]
    pub(crate) duration: f64,
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: u32,
    /// Run these shapes, CrystalDiskMark's way (needs the custom profile; repeat or list
    /// with commas): SEQ|RND<size>-Q<depth>T<threads>, e.g. SEQ1M-Q8T1, RND4K-Q32T16.
    #[arg(long = "test", value_delimiter = ',', value_parser = shape_arg)]
    pub(crate) tests: Vec<bench::TestShape>,
    /// Write compressible data (ATTO's default; drives that compress look faster).
    #[arg(long, conflicts_with = "incompressible")]
    pub(crate) compressible: bool,
    /// Write incompressible data (CrystalDiskMark's default; ATTO's worst case).
    #[arg(long)]
    pub(crate) incompressible: bool,
}

fn shape_arg(text: &str) -> Result<bench::TestShape, String> {
    bench::TestShape::parse(text).map_err(|error| error.to_string())
}

pub(crate) fn parse_target(target: &str) -> Result<TargetSpec> {
    Ok(TargetSpec::parse(target).map_err(|error| UsageError(error.to_string()))?)
}

/// Opens a target for writing, through the safety checks unless `--force`, with direct I/O
/// or (`bench sweep --buffered`) through the page cache.
pub(crate) fn open_spec(
    common: &CommonArgs,
    target: &str,
    spec: &TargetSpec,
    create_len_bytes: Option<u64>,
    io_path: IoPath,
) -> Result<BenchTarget> {
    let safety = if common.force {
        Safety::Force
    } else {
        Safety::Check
    };
    BenchTarget::open(spec, Access::Write, safety, create_len_bytes, io_path)
        .with_context(|| format!("opening {target} for the bench"))
}
