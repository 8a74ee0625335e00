//! `nvrec bench ... TARGET TARGET ...`: one bench on several drives at once, then on each
//! alone. Checks that the targets are distinct drives and opens every one (each through the
//! same safety checks as one target) before any is written; runs the bench through
//! `nvrec::bench::together`; prints each drive's rates, the aggregate, the sum alone and the
//! share, and writes the JSON (`nvrec.bench.together`), CSV and HTML report.

use crate::bench_args::{open_spec, parse_target, CommonArgs};
use crate::bench_output::{rated_text, write_outputs};
use crate::{progress, signal};
use anyhow::Result;
use nvrec::bench::{
    self, run_together, BenchError, BenchTarget, Combined, Lockstep, TogetherFigures,
    TogetherResult,
};
use nvrec::control::{ControlState, Progress};
use nvrec::unit::format_bytes;
use nvrec_app::{Class, UsageError};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the progress of the drives is added up for the display.
const PROGRESS_SUM_EVERY: Duration = Duration::from_millis(100);

/// Which bench runs on the drives, and what a file target is made with.
pub(crate) struct Shape {
    /// "sweep", "fill", "overwrite", "profile".
    pub name: &'static str,
    pub create_len_bytes: Option<u64>,
    /// Direct I/O, or through the page cache (`bench sweep --buffered`).
    pub io_path: nvrec::device::IoPath,
}

/// Checks and opens every target; a refusal of any leaves all of them unwritten.
fn open_all(common: &CommonArgs, shape: &Shape) -> Result<Vec<BenchTarget>> {
    let specs = common
        .targets
        .iter()
        .map(|target| parse_target(target))
        .collect::<Result<Vec<_>>>()?;
    bench::check_distinct(&common.targets, &specs)
        .map_err(|error| UsageError(error.to_string()))?;
    common
        .targets
        .iter()
        .zip(&specs)
        .map(|(target, spec)| {
            open_spec(common, target, spec, shape.create_len_bytes, shape.io_path)
        })
        .collect()
}

/// Runs `bench` on every target at once, then (unless stopped) on each alone.
pub(crate) fn measure<R>(
    common: &CommonArgs,
    json: bool,
    shape: &Shape,
    bench: impl Fn(&BenchTarget, Lockstep, &Progress) -> Result<R, BenchError> + Sync,
) -> Result<TogetherResult<R>>
where
    R: TogetherFigures + Send,
{
    let targets = open_all(common, shape)?;
    let progress: Vec<Arc<Progress>> = targets.iter().map(|_| Arc::default()).collect();
    let together = {
        let label = format!("{} on {} drives", shape.name, targets.len());
        let _display = SummedProgress::start(&progress, label, json);
        run_together(targets.len(), |index, lockstep| {
            bench(&targets[index], lockstep, &progress[index])
        })
        .into_iter()
        .collect::<Result<Vec<R>, BenchError>>()?
    };
    let mut alone = Some(Vec::new());
    for (index, target) in targets.iter().enumerate() {
        if signal::CONTROL.state() != ControlState::Run {
            alone = None;
            break;
        }
        let label = format!("{} on {} alone", shape.name, target.name);
        let _display = SummedProgress::start(&progress[index..=index], label, json);
        let result = bench(target, Lockstep::alone(), &progress[index])?;
        if let Some(alone) = &mut alone {
            alone.push(result);
        }
    }
    if signal::CONTROL.state() != ControlState::Run {
        // A run alone that was stopped part of the way is no drive's rate alone.
        alone = None;
    }
    let facts = targets.iter().map(|target| target.info.clone()).collect();
    Ok(TogetherResult::new(shape.name, facts, together, alone))
}

/// Writes the JSON, CSV and report and prints the text; exit 1 where `failed` says any run
/// failed.
pub(crate) fn emit<R>(
    common: &CommonArgs,
    json: bool,
    result: &TogetherResult<R>,
    mut value: serde_json::Value,
    extra_text: String,
    failed: impl Fn(&R) -> bool,
) -> Result<Class>
where
    R: bench::rated::RatedRates,
{
    let mut text = text(result) + &extra_text;
    if let Some(rated) = &common.rated {
        for (index, drive) in result.drives.iter().enumerate() {
            let figures = bench::of_rated(rated, &drive.together);
            value["drives"][index]["rated"] =
                serde_json::json!({ "rating": rated, "figures": figures });
            let _ = write!(text, "drive {} ", index + 1);
            text += &rated_text(&figures);
        }
    }
    let report = crate::bench_compare::together_report(&value);
    write_outputs(common, json, &value, &text, &csv(result), &report)?;
    let any_failed = result
        .drives
        .iter()
        .any(|drive| failed(&drive.together) || drive.alone.as_ref().is_some_and(&failed));
    Ok(if any_failed {
        Class::Failed
    } else {
        Class::Done
    })
}

fn mb(bytes_per_s: f64) -> String {
    format!("{:.0}", bytes_per_s / 1e6)
}

/// The drives, then a row a figure: each drive together, the aggregate, each drive alone,
/// the sum alone and the share.
fn text<R>(result: &TogetherResult<R>) -> String {
    let count = result.drives.len();
    let mut out = format!(
        "{} on {count} drives at once, then each alone\n",
        result.bench
    );
    for (index, drive) in result.drives.iter().enumerate() {
        let target = &drive.target;
        let _ = writeln!(
            out,
            "  drive {}  {} ({}, {})",
            index + 1,
            target.name,
            target.kind,
            format_bytes(target.capacity_bytes)
        );
    }
    let _ = write!(out, "{:<22} {:>5}", "MB/s", "op");
    for index in 1..=count {
        let _ = write!(out, " {:>8}", format!("drive {index}"));
    }
    let _ = write!(out, " {:>9} |", "aggregate");
    for index in 1..=count {
        let _ = write!(out, " {:>8}", format!("{index} alone"));
    }
    let _ = writeln!(out, " {:>9} {:>7}", "alone sum", "share");
    for figure in &result.figures {
        figure_line(&mut out, figure, count);
    }
    let _ = writeln!(
        out,
        "aggregate: what the drives moved together while all were running; share: the \
         aggregate over the sum of the drives alone{}",
        if result.figures.iter().any(|f| f.alone_bytes_per_s.is_none()) {
            " (STOPPED before the runs alone)"
        } else {
            ""
        }
    );
    out
}

fn figure_line(out: &mut String, figure: &Combined, count: usize) {
    let _ = write!(out, "{:<22} {:>5}", figure.name, figure.op.name());
    for rate in &figure.together_bytes_per_s {
        let _ = write!(out, " {:>8}", mb(*rate));
    }
    let _ = write!(out, " {:>9} |", mb(figure.aggregate_bytes_per_s));
    match &figure.alone_bytes_per_s {
        Some(alone) => {
            for rate in alone {
                let _ = write!(out, " {:>8}", mb(*rate));
            }
        }
        None => {
            for _ in 0..count {
                let _ = write!(out, " {:>8}", "-");
            }
        }
    }
    let sum = figure.alone_sum_bytes_per_s.map_or("-".to_string(), mb);
    let share = figure
        .share_percent
        .map_or("-".to_string(), |share| format!("{share:.1} %"));
    let _ = writeln!(out, " {sum:>9} {share:>7}");
}

/// A row a figure and drive, then its aggregate row (`drive` empty) and sum alone.
fn csv<R>(result: &TogetherResult<R>) -> String {
    let mut out = String::from("figure,op,drive,target,together_bytes_per_s,alone_bytes_per_s\n");
    let quoted = |text: &str| format!("\"{}\"", text.replace('"', "\"\""));
    for figure in &result.figures {
        let name = quoted(&figure.name);
        let op = figure.op.name();
        for (index, rate) in figure.together_bytes_per_s.iter().enumerate() {
            let alone = figure
                .alone_bytes_per_s
                .as_ref()
                .map_or(String::new(), |alone| format!("{:.0}", alone[index]));
            let target = quoted(&result.drives[index].target.name);
            let _ = writeln!(out, "{name},{op},{},{target},{rate:.0},{alone}", index + 1);
        }
        let sum = figure
            .alone_sum_bytes_per_s
            .map_or(String::new(), |sum| format!("{sum:.0}"));
        let _ = writeln!(
            out,
            "{name},{op},aggregate,,{:.0},{sum}",
            figure.aggregate_bytes_per_s
        );
    }
    out
}

/// The drives' progress added up for one display, until dropped.
struct SummedProgress {
    finished: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    _display: progress::ProgressDisplay,
}

impl SummedProgress {
    fn start(parts: &[Arc<Progress>], label: String, json: bool) -> SummedProgress {
        let sum = Arc::new(Progress::default());
        let finished = Arc::new(AtomicBool::new(false));
        let thread = {
            let (sum, finished) = (Arc::clone(&sum), Arc::clone(&finished));
            let parts = parts.to_vec();
            std::thread::spawn(move || loop {
                let total = |field: fn(&Progress) -> &std::sync::atomic::AtomicU64| {
                    parts
                        .iter()
                        .map(|part| field(part).load(Ordering::Relaxed))
                        .sum()
                };
                sum.done_bytes
                    .store(total(|p| &p.done_bytes), Ordering::Relaxed);
                sum.total_bytes
                    .store(total(|p| &p.total_bytes), Ordering::Relaxed);
                if finished.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(PROGRESS_SUM_EVERY);
            })
        };
        let display = progress::ProgressDisplay::start(sum, label, !json);
        SummedProgress {
            finished,
            thread: Some(thread),
            _display: display,
        }
    }
}

impl Drop for SummedProgress {
    fn drop(&mut self) {
        self.finished.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
