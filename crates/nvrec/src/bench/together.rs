//! One bench on several drives at once: what a shared link, a shared switch or the CPU takes
//! away from drives that a recording stripes over.
//!
//! The bench runs on every target at the same time, one thread each ([`run_together`]), and
//! the threads start every measured workload together: each bench calls
//! [`Lockstep::wait`] before one, and a drive whose bench has ended no longer holds the
//! others back. Then every drive runs the same bench alone, one after another. [`combine`]
//! turns both into figures: each drive's rate together and alone, the aggregate (what all
//! drives moved together over the interval in which all were running), the sum of the drives
//! alone, and the share of that sum the aggregate reached.
//!
//! The aggregate of a rate logged per window (a fill's write and read) is the bytes every
//! drive completed between the latest start and the earliest end, over that interval, read
//! from each drive's windows on the engines' common clock. A rate without windows (a sweep's
//! transfer, a profile's run) was started together on every drive and is taken to be steady
//! within its run: the bytes each drive moved in the common interval are its rate times the
//! interval, so the aggregate is the sum of the rates (of the best run together, for a
//! profile).
//!
//! What it deliberately does not do: open targets, check that they differ (the CLI does both
//! through [`crate::device`]), or judge a share: 100 % means the drives did not slow each
//! other, and what a lower share costs is the reader's to weigh.

use super::driver::WorkloadResult;
use super::window::Window;
use super::{FillResult, OverwriteResult, ProfileResult, SweepResult, TargetFacts};
use crate::engine::IoOp;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Version of the JSON of a bench on several drives (`nvrec.bench.together`).
pub const TOGETHER_SCHEMA_VERSION: u32 = 1;
/// Points of an aggregate's time series.
const SERIES_POINT_COUNT: usize = 256;

/// Lets benches on several drives start each measured workload together. A bench on one
/// drive holds [`Lockstep::alone`], whose wait returns at once.
#[derive(Clone, Default)]
pub struct Lockstep {
    gate: Option<Arc<Gate>>,
}

impl std::fmt::Debug for Lockstep {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.gate {
            Some(gate) => write!(formatter, "Lockstep({} drives)", gate.lock().members),
            None => write!(formatter, "Lockstep(alone)"),
        }
    }
}

impl Lockstep {
    pub fn alone() -> Lockstep {
        Lockstep::default()
    }

    /// Waits until every drive whose bench is still running has come to its next workload.
    pub fn wait(&self) {
        if let Some(gate) = &self.gate {
            gate.wait();
        }
    }
}

/// A barrier that members may leave: the drives still running wait for each other only.
struct Gate {
    state: Mutex<GateState>,
    opened: Condvar,
}

struct GateState {
    members: usize,
    arrived: usize,
    /// Counts the openings, so that a waiter knows its own has come.
    opening: u64,
}

impl Gate {
    fn new(members: usize) -> Gate {
        Gate {
            state: Mutex::new(GateState {
                members,
                arrived: 0,
                opening: 0,
            }),
            opened: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // A member that panicked holds no invariant the others need.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wait(&self) {
        let mut state = self.lock();
        state.arrived += 1;
        if state.arrived >= state.members {
            self.open(&mut state);
            return;
        }
        let opening = state.opening;
        while state.opening == opening {
            state = self
                .opened
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn leave(&self) {
        let mut state = self.lock();
        state.members -= 1;
        if state.arrived > 0 && state.arrived >= state.members {
            self.open(&mut state);
        }
    }

    fn open(&self, state: &mut GateState) {
        state.arrived = 0;
        state.opening += 1;
        self.opened.notify_all();
    }
}

/// Leaves the gate when a drive's bench ends, however it ends.
struct Membership(Arc<Gate>);

impl Drop for Membership {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// Runs `bench(index, lockstep)` for `count` drives at once, one thread each, and returns
/// what each returned, in order.
pub fn run_together<R: Send>(count: usize, bench: impl Fn(usize, Lockstep) -> R + Sync) -> Vec<R> {
    assert!(count > 0, "a bench runs on at least one drive");
    let gate = Arc::new(Gate::new(count));
    let bench = &bench;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..count)
            .map(|index| {
                let gate = Arc::clone(&gate);
                scope.spawn(move || {
                    let _membership = Membership(Arc::clone(&gate));
                    bench(index, Lockstep { gate: Some(gate) })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("a bench thread panicked"))
            .collect()
    })
}

/// When a rate was measured: its workload's start on the engine's clock, how long it ran and
/// its windows (empty where it logged none: its rate is then taken to be steady).
#[derive(Debug, Clone)]
pub struct Span<'a> {
    pub started_ns: u64,
    pub elapsed_s: f64,
    pub windows: &'a [Window],
}

impl Span<'_> {
    fn end_ns(&self) -> u64 {
        self.started_ns + (self.elapsed_s * 1e9) as u64
    }

    /// Bytes completed `at_ns` on the common clock: from the windows, each window's bytes
    /// spread evenly over it; without windows, at the run's mean rate.
    fn bytes_at(&self, at_ns: u64, rate_bytes_per_s: f64) -> f64 {
        let at_s = at_ns.saturating_sub(self.started_ns) as f64 / 1e9;
        if self.windows.is_empty() {
            return rate_bytes_per_s * at_s.min(self.elapsed_s);
        }
        let mut bytes = 0.0;
        for window in self.windows {
            let end_s = window.start_s + window.duration_s;
            if at_s >= end_s {
                bytes = window.total_bytes as f64;
            } else {
                if at_s > window.start_s && window.duration_s > 0.0 {
                    bytes += window.bytes as f64 * (at_s - window.start_s) / window.duration_s;
                }
                break;
            }
        }
        bytes
    }
}

/// One rate a bench gives for one drive.
#[derive(Debug, Clone)]
pub struct Figure<'a> {
    /// Named as the single-drive report names it; the same name on every drive.
    pub name: String,
    pub op: IoOp,
    pub bytes_per_s: f64,
    pub span: Option<Span<'a>>,
    /// A profile's rate of each run (the figure is the best): runs started together add up.
    pub run_rates_bytes_per_s: Vec<f64>,
}

impl<'a> Figure<'a> {
    fn rate(name: String, op: IoOp, bytes_per_s: f64) -> Figure<'a> {
        Figure {
            name,
            op,
            bytes_per_s,
            span: None,
            run_rates_bytes_per_s: Vec::new(),
        }
    }
}

/// The rates of a bench that add up across drives.
pub trait TogetherFigures {
    fn figures(&self) -> Vec<Figure<'_>>;
}

/// Where a simulated drive's workload starts: each simulated drive keeps a virtual clock of
/// its own, so their times are not one time line; their workloads, started together, are
/// taken to start at 0.
fn started_ns(facts: &TargetFacts, started_ns: u64) -> u64 {
    if facts.kind == "sim" {
        0
    } else {
        started_ns
    }
}

fn span_of<'a>(facts: &TargetFacts, workload: &'a WorkloadResult) -> Span<'a> {
    Span {
        started_ns: started_ns(facts, workload.started_ns),
        elapsed_s: workload.elapsed_s,
        windows: &workload.windows,
    }
}

impl TogetherFigures for FillResult {
    fn figures(&self) -> Vec<Figure<'_>> {
        let span = |workload| span_of(&self.meta.target, workload);
        let mut figures = vec![
            Figure {
                span: Some(span(&self.write)),
                ..Figure::rate(
                    "write".into(),
                    IoOp::Write,
                    self.summary.mean_write_bytes_per_s,
                )
            },
            Figure::rate(
                "sustained write".into(),
                IoOp::Write,
                self.summary.sustained_write_bytes_per_s,
            ),
        ];
        if let Some(read) = &self.read {
            figures.push(Figure {
                span: Some(span(read)),
                ..Figure::rate("read back".into(), IoOp::Read, read.rate_bytes_per_s)
            });
        }
        figures
    }
}

impl TogetherFigures for SweepResult {
    fn figures(&self) -> Vec<Figure<'_>> {
        let mut figures = Vec::new();
        for point in &self.points {
            let size = crate::unit::format_bytes(point.bytes);
            for (op, stats) in [(IoOp::Write, point.write), (IoOp::Read, point.read)] {
                figures.push(Figure::rate(
                    format!("{} {size}", op.name()),
                    op,
                    stats.mean_bytes_per_s,
                ));
            }
        }
        figures
    }
}

impl TogetherFigures for ProfileResult {
    fn figures(&self) -> Vec<Figure<'_>> {
        self.tests
            .iter()
            .map(|test| Figure {
                run_rates_bytes_per_s: test.run_rates_bytes_per_s.clone(),
                ..Figure::rate(
                    format!("{} {}", test.name, test.op.name()),
                    test.op,
                    test.best_bytes_per_s,
                )
            })
            .collect()
    }
}

impl TogetherFigures for OverwriteResult {
    fn figures(&self) -> Vec<Figure<'_>> {
        let mut figures = Vec::new();
        for phase in &self.phases {
            let mode = phase.mode.name();
            figures.push(Figure::rate(
                format!("{mode} before the wrap"),
                IoOp::Write,
                phase.rate_before_wrap_bytes_per_s,
            ));
            figures.push(Figure::rate(
                format!("{mode} after the wrap"),
                IoOp::Write,
                phase.rate_after_wrap_bytes_per_s,
            ));
        }
        figures
    }
}

/// One rate of the drives together and alone.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Combined {
    pub name: String,
    pub op: IoOp,
    /// Each drive's rate while all ran, in the order the targets were given.
    pub together_bytes_per_s: Vec<f64>,
    /// What the drives moved together over the interval in which all were running.
    pub aggregate_bytes_per_s: f64,
    /// That interval, for rates logged per window.
    pub common_s: Option<f64>,
    /// Each drive's rate alone; `None` when the runs alone did not happen (stopped).
    pub alone_bytes_per_s: Option<Vec<f64>>,
    pub alone_sum_bytes_per_s: Option<f64>,
    /// Aggregate over the sum alone, in percent.
    pub share_percent: Option<f64>,
    /// The aggregate over time, `[seconds since the first start, bytes/s]`, for rates
    /// logged per window; empty otherwise.
    pub aggregate_series: Vec<[f64; 2]>,
}

/// The figures every drive has, together and alone, in the first drive's order.
pub fn combine(together: &[Vec<Figure<'_>>], alone: Option<&[Vec<Figure<'_>>]>) -> Vec<Combined> {
    let Some(first) = together.first() else {
        return Vec::new();
    };
    let mut combined = Vec::new();
    for figure in first {
        let Some(drives) = named(together, &figure.name) else {
            continue;
        };
        let alone_rates = match alone {
            Some(alone) => match named(alone, &figure.name) {
                Some(drives) => Some(drives.iter().map(|f| f.bytes_per_s).collect::<Vec<_>>()),
                None => continue,
            },
            None => None,
        };
        let (aggregate_bytes_per_s, common_s) = aggregate(&drives);
        let alone_sum_bytes_per_s = alone_rates.as_ref().map(|rates| rates.iter().sum::<f64>());
        combined.push(Combined {
            name: figure.name.clone(),
            op: figure.op,
            together_bytes_per_s: drives.iter().map(|f| f.bytes_per_s).collect(),
            aggregate_bytes_per_s,
            common_s,
            share_percent: alone_sum_bytes_per_s
                .filter(|sum| *sum > 0.0)
                .map(|sum| aggregate_bytes_per_s / sum * 100.0),
            alone_bytes_per_s: alone_rates,
            alone_sum_bytes_per_s,
            aggregate_series: aggregate_series(&drives),
        });
    }
    combined
}

/// The figure named `name` of every drive; `None` where a drive has none.
fn named<'a>(figures: &[Vec<Figure<'a>>], name: &str) -> Option<Vec<Figure<'a>>> {
    figures
        .iter()
        .map(|drive| drive.iter().find(|figure| figure.name == name).cloned())
        .collect()
}

/// The drives' rate together and, for rates with spans, the common interval it covers.
fn aggregate(drives: &[Figure<'_>]) -> (f64, Option<f64>) {
    let spans: Option<Vec<&Span>> = drives.iter().map(|f| f.span.as_ref()).collect();
    if let Some(spans) = spans {
        let from_ns = spans.iter().map(|span| span.started_ns).max().unwrap_or(0);
        let to_ns = spans.iter().map(|span| span.end_ns()).min().unwrap_or(0);
        if to_ns <= from_ns {
            return (0.0, Some(0.0));
        }
        let bytes: f64 = spans
            .iter()
            .zip(drives)
            .map(|(span, figure)| {
                span.bytes_at(to_ns, figure.bytes_per_s)
                    - span.bytes_at(from_ns, figure.bytes_per_s)
            })
            .sum();
        let common_s = (to_ns - from_ns) as f64 / 1e9;
        return (bytes / common_s, Some(common_s));
    }
    let run_count = drives[0].run_rates_bytes_per_s.len();
    if run_count > 0
        && drives
            .iter()
            .all(|f| f.run_rates_bytes_per_s.len() == run_count)
    {
        let best = (0..run_count)
            .map(|run| {
                drives
                    .iter()
                    .map(|f| f.run_rates_bytes_per_s[run])
                    .sum::<f64>()
            })
            .fold(0.0, f64::max);
        return (best, None);
    }
    (drives.iter().map(|f| f.bytes_per_s).sum(), None)
}

/// What the drives moved together over time, from the first start to the last end: each
/// step's bytes of every drive (from its windows) over the step.
fn aggregate_series(drives: &[Figure<'_>]) -> Vec<[f64; 2]> {
    let spans: Option<Vec<&Span>> = drives.iter().map(|f| f.span.as_ref()).collect();
    let Some(spans) = spans.filter(|spans| spans.iter().all(|span| !span.windows.is_empty()))
    else {
        return Vec::new();
    };
    let from_ns = spans.iter().map(|span| span.started_ns).min().unwrap_or(0);
    let to_ns = spans.iter().map(|span| span.end_ns()).max().unwrap_or(0);
    if to_ns <= from_ns {
        return Vec::new();
    }
    let step_ns = (to_ns - from_ns) as f64 / SERIES_POINT_COUNT as f64;
    let at = |index: usize| from_ns + (index as f64 * step_ns) as u64;
    (0..SERIES_POINT_COUNT)
        .map(|index| {
            let (start_ns, end_ns) = (at(index), at(index + 1));
            let bytes: f64 = spans
                .iter()
                .map(|span| span.bytes_at(end_ns, 0.0) - span.bytes_at(start_ns, 0.0))
                .sum();
            let rate = bytes / (end_ns - start_ns).max(1) as f64 * 1e9;
            // Each point at the middle of its step.
            let middle_s = (start_ns + end_ns - 2 * from_ns) as f64 / 2e9;
            [middle_s, rate]
        })
        .collect()
}

/// One drive of a bench on several: its target, its run together and its run alone.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TogetherDrive<R> {
    pub target: TargetFacts,
    pub together: R,
    pub alone: Option<R>,
}

/// A bench on several drives at once, as its JSON (`nvrec.bench.together`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct TogetherResult<R> {
    pub schema: &'static str,
    pub schema_version: u32,
    /// "sweep", "fill", "overwrite", "profile".
    pub bench: String,
    pub drives: Vec<TogetherDrive<R>>,
    pub figures: Vec<Combined>,
}

impl<R: TogetherFigures> TogetherResult<R> {
    /// Lines the runs up: `alone` is `None` when the drives were not run alone.
    pub fn new(
        bench: &str,
        targets: Vec<TargetFacts>,
        together: Vec<R>,
        alone: Option<Vec<R>>,
    ) -> TogetherResult<R> {
        let figures = {
            let together_figures: Vec<_> = together.iter().map(R::figures).collect();
            let alone_figures: Option<Vec<_>> = alone
                .as_ref()
                .map(|alone| alone.iter().map(R::figures).collect());
            combine(&together_figures, alone_figures.as_deref())
        };
        let mut alone = alone.map(|runs| runs.into_iter().map(Some).collect::<Vec<_>>());
        let drives = targets
            .into_iter()
            .zip(together)
            .enumerate()
            .map(|(index, (target, together))| TogetherDrive {
                target,
                together,
                alone: alone.as_mut().and_then(|runs| runs[index].take()),
            })
            .collect();
        TogetherResult {
            schema: "nvrec.bench.together",
            schema_version: TOGETHER_SCHEMA_VERSION,
            bench: bench.to_string(),
            drives,
            figures,
        }
    }
}

#[cfg(test)]
mod tests;
