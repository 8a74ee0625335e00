//! `nvrec bench sweep|fill|overwrite|profile`: arguments, progress, tables, JSON, CSV and the
//! HTML report. The measuring is `nvrec::bench`'s.

use crate::bench_together::{self as together, Shape};
use crate::{exit, progress, signal, size_arg, EngineArg, Finished, UsageError};
use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use nvrec::bench::{
    self, analysis::AnalysisSettings, BenchTarget, FillResult, OverwriteMode, OverwriteResult,
    Profile, ProfileResult, SweepResult, TargetSpec,
};
use nvrec::device::{Access, Safety};
use nvrec::stream::Progress;
use nvrec::unit::format_bytes;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// Saved benches (--save JSON) on one HTML page: curves overlaid, plateaus, and each
    /// file's key rates with the difference in percent against the first.
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
    command: BenchCommand,
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
    common: CommonArgs,
    #[arg(long, default_value = "128K", value_parser = size_arg)]
    chunk_size: u64,
    /// Largest chunk count of the sweep; refused when the target holds fewer chunks.
    /// Default: 32768, or as many as fit.
    #[arg(long)]
    max_chunks: Option<u64>,
    #[arg(long, default_value_t = 3)]
    runs: u32,
    #[arg(long, default_value_t = 32)]
    queue_depth: u32,
}

#[derive(Args, Debug)]
pub struct FillArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Bytes to write from the start (default: the whole target).
    #[arg(long, value_parser = size_arg)]
    size: Option<u64>,
    #[arg(long, default_value = "1M", value_parser = size_arg)]
    io_size: u64,
    #[arg(long, default_value_t = 32)]
    queue_depth: u32,
    /// Length of one logging window, seconds (default: sized for the run, 256 to 512
    /// windows, each holding at least 16 transfers for the analysis).
    #[arg(long)]
    window: Option<f64>,
    /// Skip the read-back comparison.
    #[arg(long)]
    no_verify: bool,
    /// Fill this many times: each run's plateaus and rates, and their average (the
    /// streamer's "average continuous performance"). The JSON's other fields are the last
    /// run's.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Windows a drop must last to count as the cache cliff (or a later drop).
    #[arg(long, default_value_t = AnalysisSettings::default().drop_window_count)]
    drop_windows: usize,
    /// Windows a steady state must hold.
    #[arg(long, default_value_t = AnalysisSettings::default().steady_window_count)]
    steady_windows: usize,
    /// A transfer slower than this is a stall (default: 10x the median of the windows'
    /// slowest, at least 50 ms), e.g. 100ms.
    #[arg(long, value_parser = crate::duration_arg)]
    stall_latency: Option<std::time::Duration>,
    #[command(flatten)]
    telemetry: crate::telemetry::TelemetryArgs,
}

#[derive(Args, Debug)]
pub struct OverwriteArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Size of the ring from the start (default: the whole target).
    #[arg(long, value_parser = size_arg)]
    size: Option<u64>,
    /// Laps in all, the first included.
    #[arg(long, default_value_t = 2.0)]
    laps: f64,
    #[arg(long, default_value = "1M", value_parser = size_arg)]
    io_size: u64,
    #[arg(long, default_value_t = 32)]
    queue_depth: u32,
    #[arg(long, default_value_t = bench::WINDOW_S_DEFAULT)]
    window: f64,
    /// How far ahead of the write point TRIM runs (default: 1/16 of the ring).
    #[arg(long, value_parser = size_arg)]
    trim_ahead: Option<u64>,
    /// Which phases to run.
    #[arg(long, value_enum, default_value = "both")]
    trim: TrimArg,
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
    profile: ProfileArg,
    #[command(flatten)]
    common: CommonArgs,
    /// Test region (default: 1 GiB for cdm, 256 MiB for atto); a target smaller than the
    /// region is refused.
    #[arg(long, value_parser = size_arg)]
    size: Option<u64>,
    /// Seconds each run of a time-based test lasts.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Run these shapes, CrystalDiskMark's way (needs the custom profile; repeat or list
    /// with commas): SEQ|RND<size>-Q<depth>T<threads>, e.g. SEQ1M-Q8T1, RND4K-Q32T16.
    #[arg(long = "test", value_delimiter = ',', value_parser = shape_arg)]
    tests: Vec<bench::TestShape>,
    /// Write compressible data (ATTO's default; drives that compress look faster).
    #[arg(long, conflicts_with = "incompressible")]
    compressible: bool,
    /// Write incompressible data (CrystalDiskMark's default; ATTO's worst case).
    #[arg(long)]
    incompressible: bool,
}

fn shape_arg(text: &str) -> Result<bench::TestShape, String> {
    bench::TestShape::parse(text).map_err(|error| error.to_string())
}

/// The one target of a bench on one drive.
fn open(common: &CommonArgs, create_len_bytes: Option<u64>) -> Result<BenchTarget> {
    let spec = parse_target(&common.targets[0])?;
    open_spec(common, &common.targets[0], &spec, create_len_bytes)
}

pub(crate) fn parse_target(target: &str) -> Result<TargetSpec> {
    Ok(TargetSpec::parse(target).map_err(|error| UsageError(error.to_string()))?)
}

/// Opens a target for writing, through the safety checks unless `--force`.
pub(crate) fn open_spec(
    common: &CommonArgs,
    target: &str,
    spec: &TargetSpec,
    create_len_bytes: Option<u64>,
) -> Result<BenchTarget> {
    let safety = if common.force {
        Safety::Force
    } else {
        Safety::Check
    };
    BenchTarget::open(spec, Access::Write, safety, create_len_bytes)
        .with_context(|| format!("opening {target} for the bench"))
}

/// Whether this bench runs on several drives at once.
fn several(common: &CommonArgs) -> bool {
    common.targets.len() > 1
}

pub fn run(args: BenchArgs, json: bool) -> Result<Finished> {
    match args.command {
        BenchCommand::Sweep(args) => sweep(args, json),
        BenchCommand::Fill(args) => fill(args, json),
        BenchCommand::Overwrite(args) => overwrite(args, json),
        BenchCommand::Profile(args) => profile(args, json),
        BenchCommand::Report(args) => crate::bench_compare::run(args, json),
    }
}

/// What a bench hands [`emit`]: its JSON, text, CSV, report, and its rates for `--rated`.
struct Outputs<'a> {
    value: serde_json::Value,
    text: String,
    csv: String,
    report: nvrec::report::Report,
    rates: &'a dyn bench::rated::RatedRates,
}

/// Adds the rates against `--rated` to every output, then writes the JSON (stdout and/or
/// file), the CSV and the report; prints the text when not JSON.
fn emit(common: &CommonArgs, json: bool, outputs: Outputs<'_>) -> Result<()> {
    let Outputs {
        mut value,
        mut text,
        csv,
        mut report,
        rates,
    } = outputs;
    if let Some(rated) = &common.rated {
        let figures = bench::of_rated(rated, rates);
        value["rated"] = serde_json::json!({ "rating": rated, "figures": figures });
        text += &rated_text(&figures);
        report
            .sections
            .push(crate::bench_report::rated_section(&figures));
    }
    write_outputs(common, json, &value, &text, &csv, &report)
}

/// Writes the JSON (stdout and/or `--save`), the CSV and the report; prints the text when
/// not JSON.
pub(crate) fn write_outputs(
    common: &CommonArgs,
    json: bool,
    value: &serde_json::Value,
    text: &str,
    csv: &str,
    report: &nvrec::report::Report,
) -> Result<()> {
    if let Some(path) = &common.save {
        write_file(path, &format!("{value:#}\n"))?;
    }
    if let Some(path) = &common.csv {
        write_file(path, csv)?;
    }
    if let Some(path) = &common.report {
        write_file(path, &nvrec::report::render_html(report))?;
    }
    if json {
        outln!("{value}");
    } else {
        out!("{text}");
        for (what, path) in [
            ("JSON", &common.save),
            ("CSV", &common.csv),
            ("report", &common.report),
        ] {
            if let Some(path) = path {
                outln!("{what} written to {}", path.display());
            }
        }
    }
    Ok(())
}

/// One line a rate: measured, rated, percent.
pub(crate) fn rated_text(figures: &[bench::RatedFigure]) -> String {
    let mut out = "of rated (--rated):\n".to_string();
    for figure in figures {
        let _ = writeln!(
            out,
            "  {:<24} {:>5} {:>6.1} % ({:.0} of {:.0} MB/s)",
            figure.name,
            figure.op.name(),
            figure.percent,
            figure.bytes_per_s / 1e6,
            figure.rated_bytes_per_s / 1e6
        );
    }
    out
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn rate(bytes_per_s: f64) -> String {
    format!(
        "{:.0} MB/s ({:.0} MiB/s)",
        bytes_per_s / 1e6,
        bytes_per_s / 1048576.0
    )
}

fn start_progress(label: &str, json: bool) -> (Arc<Progress>, progress::ProgressDisplay) {
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), label.to_string(), !json);
    (progress, display)
}

fn sweep(args: SweepArgs, json: bool) -> Result<Finished> {
    let settings = bench::SweepSettings {
        chunk_size_bytes: args.chunk_size,
        chunk_count_max: args.max_chunks,
        runs: args.runs,
        queue_depth: args.queue_depth,
        engine: args.common.engine.choice(),
        ..bench::SweepSettings::default()
    };
    let create_len_bytes = args.chunk_size.saturating_mul(
        args.max_chunks
            .unwrap_or(bench::SWEEP_CHUNK_COUNT_MAX_DEFAULT),
    );
    if several(&args.common) {
        let shape = Shape {
            name: "sweep",
            create_len_bytes: Some(create_len_bytes),
        };
        let result =
            together::measure(&args.common, json, &shape, |target, lockstep, progress| {
                let settings = bench::SweepSettings {
                    lockstep,
                    ..settings.clone()
                };
                bench::sweep(target, &settings, &signal::CONTROL, progress, &mut |_| {})
            })?;
        let value = serde_json::to_value(&result)?;
        return together::emit(
            &args.common,
            json,
            &result,
            value,
            String::new(),
            |r: &SweepResult| !r.summary.verified,
        );
    }
    let target = open(&args.common, Some(create_len_bytes))?;
    let (progress, display) = start_progress("sweep", json);
    let result = bench::sweep(&target, &settings, &signal::CONTROL, &progress, &mut |_| {})?;
    drop(display);
    let text = sweep_text(&result);
    let csv = sweep_csv(&result);
    let report = crate::bench_report::sweep(&result);
    let value = serde_json::to_value(&result)?;
    let outputs = Outputs {
        value,
        text,
        csv,
        report,
        rates: &result,
    };
    emit(&args.common, json, outputs)?;
    Ok(Finished(if result.summary.verified {
        exit::OK
    } else {
        exit::FAILURE
    }))
}

fn sweep_text(result: &SweepResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sweep on {} ({}), {} engine",
        result.meta.target.name, result.meta.target.kind, result.meta.engine
    );
    let _ = writeln!(
        out,
        "{:>8} {:>10} {:>14} {:>14}",
        "chunks", "bytes", "write MB/s", "read MB/s"
    );
    for point in &result.points {
        let _ = writeln!(
            out,
            "{:>8} {:>10} {:>14.0} {:>14.0}",
            point.chunk_count,
            format_bytes(point.bytes),
            point.write.mean_bytes_per_s / 1e6,
            point.read.mean_bytes_per_s / 1e6
        );
    }
    let summary = &result.summary;
    let _ = writeln!(
        out,
        "peak write {} at {} chunks; peak read {} at {} chunks; {}",
        rate(summary.peak_write_bytes_per_s),
        summary.peak_write_chunk_count,
        rate(summary.peak_read_bytes_per_s),
        summary.peak_read_chunk_count,
        if summary.verified {
            "every read matched"
        } else {
            "READ-BACK MISMATCH"
        }
    );
    out
}

fn sweep_csv(result: &SweepResult) -> String {
    let mut out = String::from("chunk_count,bytes,write_mean_bytes_per_s,write_min_bytes_per_s,write_max_bytes_per_s,read_mean_bytes_per_s,read_min_bytes_per_s,read_max_bytes_per_s\n");
    for point in &result.points {
        let _ = writeln!(
            out,
            "{},{},{:.0},{:.0},{:.0},{:.0},{:.0},{:.0}",
            point.chunk_count,
            point.bytes,
            point.write.mean_bytes_per_s,
            point.write.min_bytes_per_s,
            point.write.max_bytes_per_s,
            point.read.mean_bytes_per_s,
            point.read.min_bytes_per_s,
            point.read.max_bytes_per_s
        );
    }
    out
}

fn fill(args: FillArgs, json: bool) -> Result<Finished> {
    if let Some(window) = args
        .window
        .filter(|window| window.is_nan() || *window <= 0.0)
    {
        return Err(UsageError(format!("--window must be positive, not {window}")).into());
    }
    let settings = bench::FillSettings {
        size_bytes: args.size,
        io_size_bytes: args.io_size,
        queue_depth: args.queue_depth,
        window_s: args.window,
        verify: !args.no_verify,
        engine: args.common.engine.choice(),
        analysis: AnalysisSettings {
            drop_window_count: args.drop_windows.max(1),
            steady_window_count: args.steady_windows.max(2),
            stall_latency_us: args
                .stall_latency
                .map(|latency| latency.as_secs_f64() * 1e6),
            ..AnalysisSettings::default()
        },
        ..bench::FillSettings::default()
    };
    if several(&args.common) {
        return fill_together(&args, settings, json);
    }
    let target = open(&args.common, args.size)?;
    let monitor =
        crate::telemetry::start(&[PathBuf::from(&args.common.targets[0])], &args.telemetry);
    let results = fill_runs(&target, &settings, args.runs, json);
    let telemetry = crate::telemetry::finish(monitor);
    let results = results?;
    let average = (results.len() > 1)
        .then(|| bench::fill_average(&results))
        .flatten();
    let Some(result) = results.last() else {
        unreachable!("--runs is at least 1 and a failed run returns its error");
    };
    let mut text = String::new();
    for (index, run) in results.iter().enumerate() {
        if results.len() > 1 {
            let _ = writeln!(text, "run {} of {}:", index + 1, results.len());
        }
        text += &fill_text(run);
    }
    if let Some(average) = &average {
        text += &fill_average_text(average);
    }
    if let Some(telemetry) = &telemetry {
        text += &crate::telemetry::text(telemetry);
    }
    let csv = fill_csv(result);
    let report = crate::bench_report::fill(result, telemetry.as_ref());
    let mut value = serde_json::to_value(result)?;
    value["telemetry"] = serde_json::to_value(&telemetry)?;
    if let Some(average) = &average {
        value["average"] = serde_json::to_value(average)?;
    }
    let outputs = Outputs {
        value,
        text,
        csv,
        report,
        rates: result,
    };
    emit(&args.common, json, outputs)?;
    let failed = results
        .iter()
        .any(|run| run.write.error.is_some() || run.summary.verified == Some(false));
    Ok(Finished(if failed { exit::FAILURE } else { exit::OK }))
}

/// A fill on several drives at once, then on each alone, with every drive's health sampled.
fn fill_together(args: &FillArgs, settings: bench::FillSettings, json: bool) -> Result<Finished> {
    if args.runs > 1 {
        return Err(UsageError(
            "--runs with several targets: fill them together once, or each with --runs".into(),
        )
        .into());
    }
    let shape = Shape {
        name: "fill",
        create_len_bytes: args.size,
    };
    let paths: Vec<PathBuf> = args.common.targets.iter().map(PathBuf::from).collect();
    let monitor = crate::telemetry::start(&paths, &args.telemetry);
    let result = together::measure(&args.common, json, &shape, |target, lockstep, progress| {
        let settings = bench::FillSettings {
            lockstep,
            ..settings.clone()
        };
        bench::fill(
            target,
            &settings,
            &signal::CONTROL,
            progress,
            &mut |_, _| {},
        )
    });
    let telemetry = crate::telemetry::finish(monitor);
    let result = result?;
    let mut value = serde_json::to_value(&result)?;
    value["telemetry"] = serde_json::to_value(&telemetry)?;
    let text = telemetry
        .as_ref()
        .map_or(String::new(), crate::telemetry::text);
    together::emit(
        &args.common,
        json,
        &result,
        value,
        text,
        |run: &FillResult| run.write.error.is_some() || run.summary.verified == Some(false),
    )
}

/// `runs` fills one after the other, stopping after the run a Ctrl-C or a failure ended.
fn fill_runs(
    target: &BenchTarget,
    settings: &bench::FillSettings,
    runs: u32,
    json: bool,
) -> Result<Vec<FillResult>> {
    let mut results = Vec::new();
    for run in 1..=runs {
        let label = if runs > 1 {
            format!("fill {run}/{runs}")
        } else {
            "fill".to_string()
        };
        let (progress, display) = start_progress(&label, json);
        let result = bench::fill(
            target,
            settings,
            &signal::CONTROL,
            &progress,
            &mut |_, _| {},
        );
        drop(display);
        let result = result?;
        let ended = result.write.stopped || result.write.error.is_some();
        results.push(result);
        if ended || signal::CONTROL.state() != nvrec::stream::ControlState::Run {
            break;
        }
    }
    Ok(results)
}

/// Each run's rates, then their average.
fn fill_average_text(average: &bench::FillAverage) -> String {
    let mut out = format!(
        "average continuous performance over {} runs:\n",
        average.run_count
    );
    for run in &average.runs {
        let _ = writeln!(
            out,
            "  run {:<13} write {}, sustained {}, read {}, {} plateaus",
            run.run,
            rate(run.write_bytes_per_s),
            rate(run.sustained_write_bytes_per_s),
            run.read_bytes_per_s.map_or("not done".to_string(), rate),
            run.plateaus.len()
        );
    }
    let _ = writeln!(
        out,
        "  average write     {} (runs from {} to {})",
        rate(average.write_bytes_per_s),
        rate(average.write_min_bytes_per_s),
        rate(average.write_max_bytes_per_s)
    );
    let _ = writeln!(
        out,
        "  average sustained {}",
        rate(average.sustained_write_bytes_per_s)
    );
    if let Some(read) = average.read_bytes_per_s {
        let _ = writeln!(out, "  average read      {}", rate(read));
    }
    out
}

/// One line a plateau: where it runs, its rate (bytes over time) and its windows' spread.
fn plateau_lines(out: &mut String, analysis: &bench::analysis::SeriesAnalysis) {
    for (index, plateau) in analysis.plateaus.iter().enumerate() {
        let _ = writeln!(
            out,
            "  plateau {:<9} {} from {} to {} ({:.2} - {:.2} s; windows p10 {:.0}, p90 {:.0} MB/s)",
            index + 1,
            rate(plateau.rate_bytes_per_s),
            format_bytes(plateau.start_bytes),
            format_bytes(plateau.end_bytes),
            plateau.start_s,
            plateau.end_s,
            plateau.rate_p10_bytes_per_s / 1e6,
            plateau.rate_p90_bytes_per_s / 1e6
        );
    }
}

fn fill_text(result: &FillResult) -> String {
    let mut out = String::new();
    let summary = &result.summary;
    let analysis = &result.analysis;
    let _ = writeln!(
        out,
        "fill of {} on {} ({}), {} engine{}",
        format_bytes(summary.bytes_written),
        result.meta.target.name,
        result.meta.target.kind,
        result.meta.engine,
        if result.write.stopped {
            ", STOPPED early"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  peak write        {}",
        rate(summary.peak_write_bytes_per_s)
    );
    let _ = writeln!(
        out,
        "  mean write        {}",
        rate(summary.mean_write_bytes_per_s)
    );
    if let Some(short) = analysis.too_short {
        let _ = writeln!(
            out,
            "  TOO SHORT         {} windows of the {} needed to tell plateaus apart: run at least \
             {:.1} s (about {} at this rate, --size {}M)",
            short.window_count,
            short.window_count_min,
            short.run_at_least_s,
            format_bytes(short.run_at_least_bytes),
            short.run_at_least_bytes.div_ceil(1 << 20)
        );
    }
    plateau_lines(&mut out, analysis);
    match analysis.cliff {
        Some(cliff) => {
            let _ = writeln!(
                out,
                "  cache cliff       after {} ({:.1} s): {} -> {}",
                format_bytes(cliff.at_bytes),
                cliff.at_s,
                rate(cliff.rate_before_bytes_per_s),
                rate(cliff.rate_after_bytes_per_s)
            );
        }
        None => {
            let _ = writeln!(out, "  cache cliff       none found");
        }
    }
    if let Some(after) = analysis.rate_after_cliff_bytes_per_s {
        let _ = writeln!(out, "  after the cliff   {}", rate(after));
    }
    for drop in &analysis.later_drops {
        let _ = writeln!(
            out,
            "  later drop        after {} ({:.1} s): {} -> {}",
            format_bytes(drop.at_bytes),
            drop.at_s,
            rate(drop.rate_before_bytes_per_s),
            rate(drop.rate_after_bytes_per_s)
        );
    }
    match analysis.steady_state {
        Some(steady) => {
            let _ = writeln!(
                out,
                "  steady state      {} from {:.1} s ({} in; range {:.0} %, slope {:.0} %)",
                rate(steady.rate_bytes_per_s),
                steady.start_s,
                format_bytes(steady.start_bytes),
                steady.range_fraction * 100.0,
                steady.slope_fraction * 100.0
            );
        }
        None => {
            let _ = writeln!(out, "  steady state      not reached");
        }
    }
    let _ = writeln!(
        out,
        "  sustained write   {} ({})",
        rate(summary.sustained_write_bytes_per_s),
        match (analysis.sustained_basis, analysis.sustained_plateau_index) {
            (bench::analysis::SustainedBasis::LastPlateau, Some(index)) => format!(
                "plateau {} of {}, the last",
                index + 1,
                analysis.plateaus.len()
            ),
            _ => "mean of the whole run".to_string(),
        }
    );
    if let Some(slowest) = analysis.slowest_window {
        let _ = writeln!(
            out,
            "  slowest window    {} at {:.1} s ({} in)",
            rate(slowest.rate_bytes_per_s),
            slowest.start_s,
            format_bytes(slowest.position_bytes)
        );
    }
    let _ = writeln!(
        out,
        "  stalls            {} (a window with no completion or a transfer over {:.0} ms)",
        analysis.stalls.len(),
        analysis.stall_latency_us / 1000.0
    );
    let _ = writeln!(
        out,
        "  write latency     mean {:.0} us, p99 {:.0} us, max {:.0} us",
        result.write.latency.mean_us, result.write.latency.p99_us, result.write.latency.max_us
    );
    match (&result.read, summary.verified) {
        (Some(read), Some(verified)) => {
            let _ = writeln!(
                out,
                "  read back         {}, {}",
                rate(read.rate_bytes_per_s),
                if verified {
                    "every byte matched".to_string()
                } else {
                    match read.first_mismatch {
                        Some(mismatch) => format!("MISMATCH: {mismatch}"),
                        None => "INCOMPLETE".to_string(),
                    }
                }
            );
        }
        _ => {
            let _ = writeln!(out, "  read back         not done");
        }
    }
    if let Some(error) = &result.write.error {
        let _ = writeln!(out, "  FAILED: {error}");
    }
    out
}

/// One CSV row per window, behind a first column naming the phase or mode.
fn window_rows(out: &mut String, label: &str, windows: &[bench::Window]) {
    for window in windows {
        let _ = writeln!(
            out,
            "{label},{:.6},{:.6},{},{},{},{:.0},{:.1}",
            window.start_s,
            window.duration_s,
            window.bytes,
            window.total_bytes,
            window.position_bytes,
            window.rate_bytes_per_s,
            window.latency_max_us
        );
    }
}

const WINDOW_COLUMNS: &str =
    "start_s,duration_s,bytes,total_bytes,position_bytes,rate_bytes_per_s,latency_max_us";

fn fill_csv(result: &FillResult) -> String {
    let mut out = format!("phase,{WINDOW_COLUMNS}\n");
    window_rows(&mut out, "write", &result.write.windows);
    if let Some(read) = &result.read {
        window_rows(&mut out, "read", &read.windows);
    }
    out
}

fn overwrite(args: OverwriteArgs, json: bool) -> Result<Finished> {
    if args.window.is_nan() || args.window <= 0.0 {
        return Err(UsageError(format!("--window must be positive, not {}", args.window)).into());
    }
    let settings = bench::OverwriteSettings {
        size_bytes: args.size,
        laps: args.laps,
        io_size_bytes: args.io_size,
        queue_depth: args.queue_depth,
        window_s: args.window,
        trim_ahead_bytes: args.trim_ahead,
        modes: match args.trim {
            TrimArg::Both => vec![OverwriteMode::NoTrim, OverwriteMode::Trim],
            TrimArg::Off => vec![OverwriteMode::NoTrim],
            TrimArg::On => vec![OverwriteMode::Trim],
        },
        engine: args.common.engine.choice(),
        lockstep: bench::Lockstep::alone(),
    };
    if several(&args.common) {
        let shape = Shape {
            name: "overwrite",
            create_len_bytes: args.size,
        };
        let result =
            together::measure(&args.common, json, &shape, |target, lockstep, progress| {
                let settings = bench::OverwriteSettings {
                    lockstep,
                    ..settings.clone()
                };
                bench::overwrite(
                    target,
                    &settings,
                    &signal::CONTROL,
                    progress,
                    &mut |_, _| {},
                )
            })?;
        let value = serde_json::to_value(&result)?;
        return together::emit(&args.common, json, &result, value, String::new(), |_| false);
    }
    let target = open(&args.common, args.size)?;
    let (progress, display) = start_progress("overwrite", json);
    let result = bench::overwrite(
        &target,
        &settings,
        &signal::CONTROL,
        &progress,
        &mut |_, _| {},
    )?;
    drop(display);
    let text = overwrite_text(&result);
    let csv = overwrite_csv(&result);
    let report = crate::bench_report::overwrite(&result);
    let value = serde_json::to_value(&result)?;
    let outputs = Outputs {
        value,
        text,
        csv,
        report,
        rates: &result,
    };
    emit(&args.common, json, outputs)?;
    Ok(Finished(exit::OK))
}

fn overwrite_text(result: &OverwriteResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "overwrite of a {} ring on {} ({}), {} engine",
        format_bytes(result.ring_bytes),
        result.meta.target.name,
        result.meta.target.kind,
        result.meta.engine
    );
    for phase in &result.phases {
        let _ = writeln!(
            out,
            "  {:<16} before the wrap {}, after {} ({:.0} %)",
            phase.mode.name(),
            rate(phase.rate_before_wrap_bytes_per_s),
            rate(phase.rate_after_wrap_bytes_per_s),
            phase.after_over_before * 100.0
        );
        if let Some(note) = &phase.prepare_note {
            let _ = writeln!(out, "    note: {note}");
        }
    }
    out
}

fn overwrite_csv(result: &OverwriteResult) -> String {
    let mut out = format!("mode,{WINDOW_COLUMNS}\n");
    for phase in &result.phases {
        let mode = match phase.mode {
            OverwriteMode::NoTrim => "no_trim",
            OverwriteMode::Trim => "trim",
        };
        window_rows(&mut out, mode, &phase.write.windows);
    }
    out
}

fn profile(args: ProfileArgs, json: bool) -> Result<Finished> {
    let profile = match args.profile {
        ProfileArg::Cdm => Profile::Cdm,
        ProfileArg::Cdm6 => Profile::Cdm6,
        ProfileArg::CdmNvme => Profile::CdmNvme,
        ProfileArg::Custom => Profile::Custom,
        ProfileArg::Atto => Profile::Atto,
    };
    match (profile, args.tests.is_empty()) {
        (Profile::Custom, true) => {
            return Err(UsageError(
                "the custom profile runs the shapes given with --test (e.g. --test SEQ1M-Q8T1,RND4K-Q32T16)"
                    .into(),
            )
            .into())
        }
        (Profile::Custom, false) | (_, true) => {}
        (_, false) => {
            return Err(UsageError(format!(
                "--test replaces a preset's tests: use `bench profile custom` with it, not {}",
                profile.name()
            ))
            .into())
        }
    }
    let data = if args.compressible {
        Some(bench::ProfileData::Compressible)
    } else if args.incompressible {
        Some(bench::ProfileData::Incompressible)
    } else {
        None
    };
    let settings = bench::ProfileSettings {
        profile,
        shapes: args.tests.clone(),
        region_bytes: args.size,
        duration_s: args.duration,
        runs: args.runs,
        data,
        engine: args.common.engine.choice(),
        lockstep: bench::Lockstep::alone(),
    };
    let region = args.size.unwrap_or(profile.region_bytes_default());
    if several(&args.common) {
        let shape = Shape {
            name: "profile",
            create_len_bytes: Some(region),
        };
        let result =
            together::measure(&args.common, json, &shape, |target, lockstep, progress| {
                let settings = bench::ProfileSettings {
                    lockstep,
                    ..settings.clone()
                };
                bench::profile(target, &settings, &signal::CONTROL, progress, &mut |_| {})
            })?;
        let value = serde_json::to_value(&result)?;
        return together::emit(&args.common, json, &result, value, String::new(), |_| false);
    }
    let target = open(&args.common, Some(region))?;
    let (progress, display) = start_progress(profile.name(), json);
    let result = bench::profile(&target, &settings, &signal::CONTROL, &progress, &mut |_| {})?;
    drop(display);
    let text = profile_text(&result);
    let csv = profile_csv(&result);
    let report = crate::bench_report::profile(&result);
    let value = serde_json::to_value(&result)?;
    let outputs = Outputs {
        value,
        text,
        csv,
        report,
        rates: &result,
    };
    emit(&args.common, json, outputs)?;
    Ok(Finished(exit::OK))
}

fn profile_text(result: &ProfileResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {} ({}), {} region, {} data, {} engine",
        result.profile.name(),
        result.meta.target.name,
        result.meta.target.kind,
        format_bytes(result.region_bytes),
        match result.data {
            bench::ProfileData::Compressible => "compressible",
            bench::ProfileData::Incompressible => "incompressible",
        },
        result.meta.engine
    );
    let _ = writeln!(
        out,
        "{:<14} {:>5} {:>12} {:>12} {:>12} {:>12}",
        "test", "op", "best MB/s", "mean MB/s", "best MiB/s", "IOPS"
    );
    for test in &result.tests {
        let _ = writeln!(
            out,
            "{:<14} {:>5} {:>12.1} {:>12.1} {:>12.1} {:>12.0}",
            test.name,
            test.op.name(),
            test.best_mb_per_s,
            test.mean_bytes_per_s / 1e6,
            test.best_mib_per_s,
            test.best_iops
        );
    }
    for skipped in &result.skipped {
        let _ = writeln!(out, "skipped: {skipped}");
    }
    out
}

fn profile_csv(result: &ProfileResult) -> String {
    let mut out = String::from("test,op,io_size_bytes,queue_depth,threads,best_bytes_per_s,mean_bytes_per_s,best_iops,latency_mean_us\n");
    for test in &result.tests {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{:.0},{:.0},{:.0},{:.1}",
            test.name,
            test.op.name(),
            test.shape.io_size_bytes,
            test.shape.queue_depth,
            test.shape.thread_count,
            test.best_bytes_per_s,
            test.mean_bytes_per_s,
            test.best_iops,
            test.latency_mean_us
        );
    }
    out
}
