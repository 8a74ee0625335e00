//! `nvrec bench sweep|fill|overwrite|profile`: arguments, progress, tables, JSON, CSV and the
//! HTML report. The measuring is `nvrec::bench`'s.

use crate::bench_args::{
    open_spec, parse_target, CommonArgs, FillArgs, OverwriteArgs, ProfileArg, ProfileArgs,
    SweepArgs, TrimArg,
};
pub use crate::bench_args::{BenchArgs, BenchCommand};
use crate::bench_output::{emit, start_progress, Outputs};
use crate::bench_together::{self as together, Shape};
use crate::signal;
use anyhow::Result;
use nvrec::bench::rated::RatedRates;
use nvrec::bench::{
    self, analysis::AnalysisSettings, BenchTarget, FillResult, OverwriteMode, OverwriteResult,
    Profile, ProfileResult, SweepResult,
};
use nvrec::control::Progress;
use nvrec::device::IoPath;
use nvrec::report::Report;
use nvrec::unit::format_bytes;
use nvrec_app::{Class, UsageError};
use std::fmt::Write as _;
use std::path::PathBuf;

/// The one target of a bench on one drive.
fn open(
    common: &CommonArgs,
    create_len_bytes: Option<u64>,
    io_path: IoPath,
) -> Result<BenchTarget> {
    let spec = parse_target(&common.targets[0])?;
    open_spec(common, &common.targets[0], &spec, create_len_bytes, io_path)
}

/// Whether this bench runs on several drives at once.
fn several(common: &CommonArgs) -> bool {
    common.targets.len() > 1
}

pub fn run(args: BenchArgs, json: bool) -> Result<Class> {
    match args.command {
        BenchCommand::Sweep(args) => sweep(args, json),
        BenchCommand::Fill(args) => fill(args, json),
        BenchCommand::Overwrite(args) => overwrite(args, json),
        BenchCommand::Profile(args) => profile(args, json),
        BenchCommand::Report(args) => crate::bench_compare::run(args, json),
    }
}

/// Runs a bench on the one target under a progress display.
fn measure_alone<R>(
    common: &CommonArgs,
    shape: &Shape,
    json: bool,
    measure: impl FnOnce(&BenchTarget, &Progress) -> Result<R, bench::BenchError>,
) -> Result<R> {
    let target = open(common, shape.create_len_bytes, shape.io_path)?;
    let (progress, display) = start_progress(shape.name, json);
    let result = measure(&target, &progress)?;
    drop(display);
    Ok(result)
}

/// How a bench on one drive draws its result as text, CSV and report.
struct Render<R> {
    text: fn(&R) -> String,
    csv: fn(&R) -> String,
    report: fn(&R) -> Report,
}

const SWEEP_RENDER: Render<SweepResult> = Render {
    text: sweep_text,
    csv: sweep_csv,
    report: crate::bench_report::sweep,
};

const OVERWRITE_RENDER: Render<OverwriteResult> = Render {
    text: overwrite_text,
    csv: overwrite_csv,
    report: crate::bench_report::overwrite,
};

const PROFILE_RENDER: Render<ProfileResult> = Render {
    text: profile_text,
    csv: profile_csv,
    report: crate::bench_report::profile,
};

/// Writes the outputs of a bench on one drive, its JSON being the result itself.
fn emit_alone<R: serde::Serialize + RatedRates>(
    common: &CommonArgs,
    json: bool,
    result: &R,
    render: Render<R>,
) -> Result<()> {
    let outputs = Outputs {
        value: serde_json::to_value(result)?,
        text: (render.text)(result),
        csv: (render.csv)(result),
        report: (render.report)(result),
        rates: result,
    };
    emit(common, json, outputs)
}

fn rate(bytes_per_s: f64) -> String {
    format!(
        "{:.0} MB/s ({:.0} MiB/s)",
        bytes_per_s / 1e6,
        bytes_per_s / 1048576.0
    )
}

fn sweep(args: SweepArgs, json: bool) -> Result<Class> {
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
            io_path: args.io_path(),
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
    let shape = Shape {
        name: "sweep",
        create_len_bytes: Some(create_len_bytes),
        io_path: args.io_path(),
    };
    let result = measure_alone(&args.common, &shape, json, |target, progress| {
        bench::sweep(target, &settings, &signal::CONTROL, progress, &mut |_| {})
    })?;
    emit_alone(&args.common, json, &result, SWEEP_RENDER)?;
    Ok(if result.summary.verified {
        Class::Done
    } else {
        Class::Failed
    })
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
        crate::bench_report::sweep_verified(summary.verified)
    );
    if result.buffered {
        let _ = writeln!(
            out,
            "{} (writes timed until the drive has the data)",
            crate::output::buffered_line(result.cache_drop)
        );
    }
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

fn fill(args: FillArgs, json: bool) -> Result<Class> {
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
    let target = open(&args.common, args.size, IoPath::Direct)?;
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
    Ok(if failed { Class::Failed } else { Class::Done })
}

/// A fill on several drives at once, then on each alone, with every drive's health sampled.
fn fill_together(args: &FillArgs, settings: bench::FillSettings, json: bool) -> Result<Class> {
    if args.runs > 1 {
        return Err(UsageError(
            "--runs with several targets: fill them together once, or each with --runs".into(),
        )
        .into());
    }
    let shape = Shape {
        name: "fill",
        create_len_bytes: args.size,
        io_path: IoPath::Direct,
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
        if ended || signal::CONTROL.state() != nvrec::control::ControlState::Run {
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
    fill_heading(&mut out, result);
    plateau_lines(&mut out, &result.analysis);
    cliff_lines(&mut out, &result.analysis);
    steady_lines(&mut out, result);
    read_back_line(&mut out, result);
    if let Some(error) = &result.write.error {
        let _ = writeln!(out, "  FAILED: {error}");
    }
    out
}

/// What was filled where, its peak and mean rates, and whether the run was too short.
fn fill_heading(out: &mut String, result: &FillResult) {
    let summary = &result.summary;
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
    if let Some(short) = result.analysis.too_short {
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
}

/// The cache cliff, the rate after it and every later drop.
fn cliff_lines(out: &mut String, analysis: &bench::analysis::SeriesAnalysis) {
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
}

/// The steady state, the sustained rate and what it rests on, the slowest window, the
/// stalls and the write latency.
fn steady_lines(out: &mut String, result: &FillResult) {
    let analysis = &result.analysis;
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
        rate(result.summary.sustained_write_bytes_per_s),
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
}

fn read_back_line(out: &mut String, result: &FillResult) {
    match (&result.read, result.summary.verified) {
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

fn overwrite(args: OverwriteArgs, json: bool) -> Result<Class> {
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
            io_path: IoPath::Direct,
        };
        let result =
            together::measure(&args.common, json, &shape, |target, lockstep, progress| {
                let settings = bench::OverwriteSettings {
                    lockstep,
                    ..settings.clone()
                };
                overwrite_watched_by_progress(target, &settings, progress)
            })?;
        let value = serde_json::to_value(&result)?;
        return together::emit(&args.common, json, &result, value, String::new(), |_| false);
    }
    let shape = Shape {
        name: "overwrite",
        create_len_bytes: args.size,
        io_path: IoPath::Direct,
    };
    let result = measure_alone(&args.common, &shape, json, |target, progress| {
        overwrite_watched_by_progress(target, &settings, progress)
    })?;
    emit_alone(&args.common, json, &result, OVERWRITE_RENDER)?;
    Ok(Class::Done)
}

/// An overwrite that only its progress watches, alone or beside other drives.
fn overwrite_watched_by_progress(
    target: &BenchTarget,
    settings: &bench::OverwriteSettings,
    progress: &Progress,
) -> Result<OverwriteResult, bench::BenchError> {
    bench::overwrite(target, settings, &signal::CONTROL, progress, &mut |_, _| {})
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

fn profile(args: ProfileArgs, json: bool) -> Result<Class> {
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
            io_path: IoPath::Direct,
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
    let shape = Shape {
        name: profile.name(),
        create_len_bytes: Some(region),
        io_path: IoPath::Direct,
    };
    let result = measure_alone(&args.common, &shape, json, |target, progress| {
        bench::profile(target, &settings, &signal::CONTROL, progress, &mut |_| {})
    })?;
    emit_alone(&args.common, json, &result, PROFILE_RENDER)?;
    Ok(Class::Done)
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
