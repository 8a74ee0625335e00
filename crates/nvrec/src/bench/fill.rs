//! `bench fill`: the continuous test. One sequential write of the whole target (or a size),
//! logged per window, then the same range read back and compared with the pattern; the write
//! series is analysed for the cache cliff, the steady state, the slowest window and stalls.

use super::analysis::{analyse, AnalysisSettings, SeriesAnalysis};
use super::driver::{self, Data, Workload, WorkloadResult};
use super::size::{size_at_most, Need};
use super::window::Window;
use super::{BenchError, BenchTarget, Lockstep, RunMeta};
use crate::control::{Control, Progress};
use crate::engine::{EngineChoice, IoOp};
use crate::pattern::Pattern;

#[derive(Debug, Clone)]
pub struct FillSettings {
    /// Bytes to write from offset 0; `None`: the whole target.
    pub size_bytes: Option<u64>,
    pub io_size_bytes: u64,
    pub queue_depth: u32,
    /// Length of a logging window; `None`: sized for the run (see [`super::WINDOW_S_AUTO_START`]).
    pub window_s: Option<f64>,
    pub seed: u64,
    /// Read back and compare after the write.
    pub verify: bool,
    pub engine: EngineChoice,
    pub analysis: AnalysisSettings,
    /// Benches on several drives at once start each measured workload together.
    pub lockstep: Lockstep,
}

impl Default for FillSettings {
    fn default() -> Self {
        FillSettings {
            size_bytes: None,
            io_size_bytes: 1 << 20,
            queue_depth: 32,
            window_s: None,
            seed: 0x5eed,
            verify: true,
            engine: EngineChoice::Auto,
            analysis: AnalysisSettings::default(),
            lockstep: Lockstep::alone(),
        }
    }
}

/// The numbers people and `nvrec plan` read first.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct FillSummary {
    pub bytes_written: u64,
    pub peak_write_bytes_per_s: f64,
    pub mean_write_bytes_per_s: f64,
    /// Steady state if found, else after the cliff, else the mean (see `analysis`).
    pub sustained_write_bytes_per_s: f64,
    pub cache_cliff_bytes: Option<u64>,
    pub rate_after_cliff_bytes_per_s: Option<f64>,
    pub steady_state_bytes_per_s: Option<f64>,
    pub slowest_window_bytes_per_s: Option<f64>,
    pub stall_count: usize,
    pub read_bytes_per_s: Option<f64>,
    /// Whether the read-back matched; `None` when not verified.
    pub verified: Option<bool>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct FillResult {
    pub meta: RunMeta,
    pub summary: FillSummary,
    pub analysis: SeriesAnalysis,
    pub write: WorkloadResult,
    pub read: Option<WorkloadResult>,
}

/// What the fill needs of its target: the size asked for, or, for the whole target, room
/// for one I/O.
fn need(settings: &FillSettings, capacity_bytes: u64) -> Need<'static> {
    match settings.size_bytes {
        Some(size_bytes) => Need {
            bench: "fill",
            needed_bytes: size_bytes,
            why: "--size".to_string(),
            remedy: size_at_most(capacity_bytes),
        },
        None => Need {
            bench: "fill",
            needed_bytes: settings.io_size_bytes,
            why: "one I/O of --io-size".to_string(),
            remedy: "a smaller --io-size".to_string(),
        },
    }
}

/// Runs the fill. `on_window` sees every window of the write and then of the read as it
/// closes (`IoOp` says which), for live progress.
pub fn fill(
    target: &BenchTarget,
    settings: &FillSettings,
    control: &Control,
    progress: &Progress,
    on_window: &mut dyn FnMut(IoOp, &Window),
) -> Result<FillResult, BenchError> {
    let io = settings.io_size_bytes;
    let size_bytes = checked_size_bytes(target, settings)?;
    let mut engine = target.open_engine(settings.engine, settings.queue_depth, io)?;
    let passes = if settings.verify { 2 } else { 1 };
    driver::start_progress(progress, size_bytes / io * io * passes);
    let meta = fill_meta(target, engine.as_ref(), settings, size_bytes);
    let windows = FillWindows::new(settings);
    let mut analysis_settings = settings.analysis;
    if settings.window_s.is_none() {
        analysis_settings.window_bytes_min = super::WINDOW_TRANSFER_COUNT_MIN * io;
    }
    let mut write_workload = Workload::sequential(IoOp::Write, 0, size_bytes, io);
    write_workload.data = Data::Pattern {
        seed: settings.seed,
    };
    windows.apply(&mut write_workload);
    settings.lockstep.wait();
    let write = driver::run(
        engine.as_mut(),
        &write_workload,
        control,
        progress,
        &mut |window| on_window(IoOp::Write, window),
    )?;
    if let Err(source) = engine.sync_data() {
        return Err(BenchError::Io {
            what: "flushing after the fill".to_string(),
            source,
        });
    }
    // Every drive reads once every drive has written, so the reads run side by side too.
    settings.lockstep.wait();
    let read = if settings.verify && write.error.is_none() && !write.stopped {
        let mut read_workload = Workload::sequential(IoOp::Read, 0, write.bytes, io);
        read_workload.check = Some(Pattern::new(settings.seed));
        windows.apply(&mut read_workload);
        Some(driver::run(
            engine.as_mut(),
            &read_workload,
            control,
            progress,
            &mut |window| on_window(IoOp::Read, window),
        )?)
    } else {
        None
    };
    let analysis = analyse(&write.windows, &analysis_settings);
    Ok(FillResult {
        meta,
        summary: summarise(&analysis, &write, read.as_ref()),
        analysis,
        write,
        read,
    })
}

/// The bytes to fill, once the target has room for them and the I/O size suits both the
/// block size and the fill.
fn checked_size_bytes(target: &BenchTarget, settings: &FillSettings) -> Result<u64, BenchError> {
    let io = settings.io_size_bytes;
    target.require(need(settings, target.capacity_bytes))?;
    let size_bytes = settings.size_bytes.unwrap_or(target.capacity_bytes);
    if io == 0 || !io.is_multiple_of(target.logical_block_bytes as u64) || size_bytes < io {
        return Err(BenchError::Settings(format!(
            "the I/O size {io} must be a multiple of the logical block size {} and fit the size {size_bytes}",
            target.logical_block_bytes
        )));
    }
    Ok(size_bytes)
}

fn fill_meta(
    target: &BenchTarget,
    engine: &dyn crate::engine::Engine,
    settings: &FillSettings,
    size_bytes: u64,
) -> RunMeta {
    let mut meta = RunMeta::new("fill", target, engine);
    meta.settings = vec![
        ("size".to_string(), size_bytes.to_string()),
        ("io_size".to_string(), settings.io_size_bytes.to_string()),
        ("queue_depth".to_string(), settings.queue_depth.to_string()),
        (
            "window_s".to_string(),
            settings
                .window_s
                .map_or("auto".to_string(), |window_s| window_s.to_string()),
        ),
        ("verify".to_string(), settings.verify.to_string()),
    ];
    meta
}

/// The logging windows of both passes: the length asked for, or short ones that double
/// whenever their count reaches the most.
#[derive(Clone, Copy)]
struct FillWindows {
    window_ns: Option<u64>,
    window_count_max: Option<usize>,
}

impl FillWindows {
    fn new(settings: &FillSettings) -> FillWindows {
        FillWindows {
            window_ns: Some((settings.window_s.unwrap_or(super::WINDOW_S_AUTO_START) * 1e9) as u64),
            window_count_max: match settings.window_s {
                Some(_) => None,
                None => Some(super::WINDOW_COUNT_AUTO_MAX),
            },
        }
    }

    fn apply(self, workload: &mut Workload) {
        workload.window_ns = self.window_ns;
        workload.window_count_max = self.window_count_max;
    }
}

fn summarise(
    analysis: &SeriesAnalysis,
    write: &WorkloadResult,
    read: Option<&WorkloadResult>,
) -> FillSummary {
    FillSummary {
        bytes_written: write.bytes,
        peak_write_bytes_per_s: analysis.peak_rate_bytes_per_s,
        mean_write_bytes_per_s: write.rate_bytes_per_s,
        sustained_write_bytes_per_s: analysis.sustained_rate_bytes_per_s,
        cache_cliff_bytes: analysis.cliff.map(|cliff| cliff.at_bytes),
        rate_after_cliff_bytes_per_s: analysis.rate_after_cliff_bytes_per_s,
        steady_state_bytes_per_s: analysis.steady_state.map(|steady| steady.rate_bytes_per_s),
        slowest_window_bytes_per_s: analysis
            .slowest_window
            .map(|window| window.rate_bytes_per_s),
        stall_count: analysis.stalls.len(),
        read_bytes_per_s: read.map(|read| read.rate_bytes_per_s),
        verified: read.map(|read| read.is_success() && read.bytes == write.bytes),
    }
}

/// One run of a repeated fill, as the average lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FillRun {
    /// Counted from 1.
    pub run: usize,
    /// The run's bytes over its time.
    pub write_bytes_per_s: f64,
    pub read_bytes_per_s: Option<f64>,
    pub sustained_write_bytes_per_s: f64,
    pub plateaus: Vec<crate::bench::plateau::Plateau>,
}

/// Fills repeated, averaged as the streamer reports its "average continuous performance":
/// each run's bytes over its time, then the mean of the runs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FillAverage {
    pub run_count: usize,
    pub write_bytes_per_s: f64,
    pub write_min_bytes_per_s: f64,
    pub write_max_bytes_per_s: f64,
    /// The mean over the runs that read back; `None` when none did.
    pub read_bytes_per_s: Option<f64>,
    pub sustained_write_bytes_per_s: f64,
    pub runs: Vec<FillRun>,
}

/// The average of `results` (in the order they ran); `None` for no result.
pub fn fill_average(results: &[FillResult]) -> Option<FillAverage> {
    let runs: Vec<FillRun> = results
        .iter()
        .enumerate()
        .map(|(index, result)| FillRun {
            run: index + 1,
            write_bytes_per_s: result.summary.mean_write_bytes_per_s,
            read_bytes_per_s: result.summary.read_bytes_per_s,
            sustained_write_bytes_per_s: result.summary.sustained_write_bytes_per_s,
            plateaus: result.analysis.plateaus.clone(),
        })
        .collect();
    let mean = |values: Vec<f64>| {
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let writes: Vec<f64> = runs.iter().map(|run| run.write_bytes_per_s).collect();
    Some(FillAverage {
        run_count: runs.len(),
        write_bytes_per_s: mean(writes.clone())?,
        write_min_bytes_per_s: writes.iter().copied().fold(f64::INFINITY, f64::min),
        write_max_bytes_per_s: writes.iter().copied().fold(0.0, f64::max),
        read_bytes_per_s: mean(runs.iter().filter_map(|run| run.read_bytes_per_s).collect()),
        sustained_write_bytes_per_s: mean(
            runs.iter()
                .map(|run| run.sustained_write_bytes_per_s)
                .collect(),
        )?,
        runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(spec: &str) -> BenchTarget {
        crate::bench::open_sim(spec)
    }

    /// Short windows for a short simulated fill, with the drop and steady-state rules counted
    /// in windows as on a real drive's 0.5 s windows.
    fn settings(window_s: f64) -> FillSettings {
        FillSettings {
            window_s: Some(window_s),
            analysis: AnalysisSettings {
                drop_window_count: 4,
                steady_window_count: 10,
                ..AnalysisSettings::default()
            },
            ..FillSettings::default()
        }
    }

    fn within(found: f64, expected: f64, tolerance: f64) -> bool {
        (found / expected - 1.0).abs() <= tolerance
    }

    /// Asserts a rate of `summary` within five percent of the simulated drive's.
    fn assert_rate(found: f64, expected: f64, summary: &FillSummary) {
        assert!(within(found, expected, 0.05), "{summary:?}");
    }

    /// Fills with no control, progress or window watcher of its own.
    fn fill_alone(target: &BenchTarget, settings: &FillSettings) -> Result<FillResult, BenchError> {
        fill(
            target,
            settings,
            &Control::new(),
            &Progress::default(),
            &mut |_, _| {},
        )
    }

    #[test]
    fn finds_the_simulated_cliff_and_both_rates_within_five_percent() {
        // 512 MiB drive, 128 MiB cache at 2.8 GB/s then 1.6 GB/s: the cliff at 48 ms of a
        // 0.3 s fill; 5 ms windows keep the proportions of a real drive's 0.5 s windows.
        let target = open("sim:capacity=512M,cache=128M,fast=2.8GB/s,slow=1.6GB/s");
        let result = fill_alone(&target, &settings(0.005)).unwrap();
        let summary = result.summary;
        assert_eq!(summary.bytes_written, 512 << 20);
        assert_eq!(summary.verified, Some(true));
        let cliff = summary.cache_cliff_bytes.expect("cliff found") as f64;
        assert!(
            within(cliff, (128u64 << 20) as f64, 0.05),
            "cliff at {cliff}"
        );
        assert_rate(summary.peak_write_bytes_per_s, 2.8e9, &summary);
        assert_rate(
            summary.rate_after_cliff_bytes_per_s.unwrap(),
            1.6e9,
            &summary,
        );
        assert_rate(summary.sustained_write_bytes_per_s, 1.6e9, &summary);
        assert_rate(summary.read_bytes_per_s.unwrap(), 3.2e9, &summary);
        assert_eq!(summary.stall_count, 0);
    }

    #[test]
    fn reports_stalls_and_throttling_on_the_simulated_drive() {
        let target = open(
            "sim:capacity=2G,cache=512M,fast=3GB/s,slow=2GB/s,throttle-after=500ms,throttle-factor=0.5,stall-every=512M,stall=40ms",
        );
        // Queue depth 8: a transfer takes 4-8 ms, a stalled one over 40 ms. Windows of 25 ms:
        // the cache lasts 7 of them, a stall 2 (too few to be a plateau).
        let mut settings = settings(0.025);
        settings.queue_depth = 8;
        settings.analysis.stall_latency_us = Some(30_000.0);
        let result = fill_alone(&target, &settings).unwrap();
        let analysis = &result.analysis;
        assert!(analysis.cliff.is_some());
        assert_eq!(analysis.later_drops.len(), 1, "{analysis:#?}");
        let throttle = analysis.later_drops[0];
        // Halved, give or take the stalls that fall into the measured windows.
        let ratio = throttle.rate_after_bytes_per_s / throttle.rate_before_bytes_per_s;
        assert!((0.4..0.6).contains(&ratio), "{throttle:?}");
        let stalls = target.sim_drive().unwrap().counters().stall_count as usize;
        assert!(stalls >= 3, "{stalls}");
        assert!(
            analysis.stalls.len() >= stalls - 1,
            "{} of {stalls}",
            analysis.stalls.len()
        );
    }

    #[test]
    fn refuses_a_size_beyond_the_target() {
        let target = open("sim:capacity=16M");
        let settings = FillSettings {
            size_bytes: Some(32 << 20),
            ..FillSettings::default()
        };
        let error = fill_alone(&target, &settings).err().unwrap();
        assert_eq!(
            error.to_string(),
            "bench fill needs 32 MiB (--size), sim has 16 MiB; give a larger target or a \
             --size of at most 16 MiB"
        );
        assert!(matches!(error, BenchError::TargetTooSmall(_)));
        // The whole of a target smaller than one I/O.
        let settings = FillSettings {
            io_size_bytes: 2 << 20,
            ..FillSettings::default()
        };
        let target = open("sim:capacity=1M");
        let error = fill_alone(&target, &settings).err().unwrap();
        assert!(error.to_string().contains("--io-size"), "{error}");
    }

    #[test]
    fn repeated_fills_average_each_run_and_keep_its_plateaus() {
        let target = open("sim:capacity=64M,cache=16M,fast=3GB/s,slow=1GB/s,read=2GB/s");
        let results: Vec<FillResult> = (0..3)
            .map(|_| fill_alone(&target, &settings(0.001)).unwrap())
            .collect();
        let average = fill_average(&results).unwrap();
        assert_eq!(average.run_count, 3);
        assert_eq!(average.runs.len(), 3);
        let writes: Vec<f64> = results
            .iter()
            .map(|r| r.summary.mean_write_bytes_per_s)
            .collect();
        assert!((average.write_bytes_per_s - writes.iter().sum::<f64>() / 3.0).abs() < 1e-6);
        assert!(average.write_min_bytes_per_s <= average.write_bytes_per_s);
        assert!(average.write_max_bytes_per_s >= average.write_bytes_per_s);
        for (run, result) in average.runs.iter().zip(&results) {
            assert_eq!(run.plateaus, result.analysis.plateaus);
            assert!(!run.plateaus.is_empty(), "{run:?}");
        }
        assert!(average.read_bytes_per_s.unwrap() > 0.0);
        assert!(fill_average(&[]).is_none());
    }
}
