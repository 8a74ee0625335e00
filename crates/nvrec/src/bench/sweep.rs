//! `bench sweep`: the streamer's "average peak" test (TEST #08 of the seed's log). For 1, 2,
//! 4 ... chunks, write that many chunks from the start of the target, then read them back
//! checking the pattern, and average the rates over the runs. Small transfers show what the
//! drive absorbs in its cache at once; large ones approach what it sustains.
//!
//! A transfer's time runs from submitting its first chunk to the completion of its last (the
//! flush that follows every write is not timed, as the streamer times acknowledgements).
//!
//! On a target opened through the page cache (`--buffered`, the TySOM article's dd without
//! `oflag=direct`) the page cache of the transfer's range is dropped before each write and each
//! read, and a write's time runs on to the end of its write-back ([`Engine::write_back`]: every
//! byte written to the drive and acknowledged, the moment a direct write completes), so that
//! both paths are timed to the same point and a buffered write is never timed as a copy into
//! memory. How the cache was dropped is in the result ([`SweepResult::cache_drop`]).

use super::driver::{self, Data, Workload, WorkloadResult};
use super::size::Need;
use super::{BenchError, BenchTarget, Lockstep, RunMeta};
use crate::control::{Control, ControlState, Progress};
use crate::device::{CacheDrop, IoPath};
use crate::engine::{Engine, EngineChoice, IoOp};
use crate::pattern::Pattern;
use crate::unit::format_bytes;

#[derive(Debug, Clone)]
pub struct SweepSettings {
    pub chunk_size_bytes: u64,
    /// The largest count of the sweep, as asked: 1, 2, 4 ... up to this, refused when the
    /// target holds fewer chunks. `None`: up to [`SWEEP_CHUNK_COUNT_MAX_DEFAULT`] or as many
    /// as fit, whichever is less.
    pub chunk_count_max: Option<u64>,
    pub runs: u32,
    pub queue_depth: u32,
    pub seed: u64,
    pub engine: EngineChoice,
    /// Benches on several drives at once start each measured workload together.
    pub lockstep: Lockstep,
}

/// The largest chunk count of a sweep that was not given one (4 GiB of 128 KiB chunks).
pub const SWEEP_CHUNK_COUNT_MAX_DEFAULT: u64 = 32768;

impl Default for SweepSettings {
    fn default() -> Self {
        SweepSettings {
            chunk_size_bytes: 128 << 10,
            chunk_count_max: None,
            runs: 3,
            queue_depth: 32,
            seed: 0x5eed,
            engine: EngineChoice::Auto,
            lockstep: Lockstep::alone(),
        }
    }
}

/// Rates of one chunk count over the runs.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct RateStats {
    pub mean_bytes_per_s: f64,
    pub min_bytes_per_s: f64,
    pub max_bytes_per_s: f64,
}

impl RateStats {
    fn of(rates: &[f64]) -> RateStats {
        let mean = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
        RateStats {
            mean_bytes_per_s: mean,
            min_bytes_per_s: rates.iter().copied().fold(f64::INFINITY, f64::min),
            max_bytes_per_s: rates.iter().copied().fold(0.0, f64::max),
        }
    }
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SweepPoint {
    pub chunk_count: u64,
    pub bytes: u64,
    pub write: RateStats,
    pub read: RateStats,
    /// The slowest write transfer of any run, microseconds.
    pub write_latency_max_us: f64,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SweepSummary {
    pub peak_write_bytes_per_s: f64,
    pub peak_write_chunk_count: u64,
    pub peak_read_bytes_per_s: f64,
    pub peak_read_chunk_count: u64,
    /// The mean write rate of the largest transfer: the closest the sweep gets to sustained.
    pub largest_write_bytes_per_s: f64,
    pub verified: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SweepResult {
    pub meta: RunMeta,
    pub summary: SweepSummary,
    pub points: Vec<SweepPoint>,
    pub stopped: bool,
    /// Through the page cache (`--buffered`) rather than with O_DIRECT.
    pub buffered: bool,
    /// How the page cache was dropped before each transfer, the drops merged (buffered only).
    pub cache_drop: Option<CacheDrop>,
}

/// The chunk counts the sweep visits on a target of `capacity_bytes`: powers of two up to
/// the largest asked for that fits.
pub fn sweep_counts(settings: &SweepSettings, capacity_bytes: u64) -> Vec<u64> {
    let fits = capacity_bytes / settings.chunk_size_bytes.max(1);
    let last = settings
        .chunk_count_max
        .unwrap_or(SWEEP_CHUNK_COUNT_MAX_DEFAULT)
        .min(fits);
    std::iter::successors(Some(1u64), |count| count.checked_mul(2))
        .take_while(|count| *count <= last)
        .collect()
}

/// What the sweep needs of its target: every count asked for (`--max-chunks`), or one
/// chunk when the counts are left to what fits.
fn need(settings: &SweepSettings) -> Need<'static> {
    let chunk = settings.chunk_size_bytes;
    match settings.chunk_count_max {
        Some(count_max) => {
            let largest = sweep_counts(settings, u64::MAX)
                .last()
                .copied()
                .unwrap_or(1);
            Need {
                bench: "sweep",
                needed_bytes: largest.saturating_mul(chunk),
                why: format!(
                    "--max-chunks {count_max}: up to {largest} chunks of {}",
                    format_bytes(chunk)
                ),
                remedy: "a smaller --max-chunks".to_string(),
            }
        }
        None => Need {
            bench: "sweep",
            needed_bytes: chunk,
            why: format!("one chunk of {}", format_bytes(chunk)),
            remedy: "a smaller --chunk-size".to_string(),
        },
    }
}

/// Runs the sweep; `on_point` sees each chunk count's result as it is done.
pub fn sweep(
    target: &BenchTarget,
    settings: &SweepSettings,
    control: &Control,
    progress: &Progress,
    on_point: &mut dyn FnMut(&SweepPoint),
) -> Result<SweepResult, BenchError> {
    let chunk = settings.chunk_size_bytes;
    check_settings(target, settings)?;
    target.require(need(settings))?;
    let counts = sweep_counts(settings, target.capacity_bytes);
    // Each count is written and read back in every run.
    let total_bytes = counts.iter().sum::<u64>() * chunk * 2 * settings.runs as u64;
    driver::start_progress(progress, total_bytes);
    let mut engine = target.open_engine(settings.engine, settings.queue_depth, chunk)?;
    let mut meta = RunMeta::new("sweep", target, engine.as_ref());
    meta.settings = vec![
        ("chunk_size".to_string(), chunk.to_string()),
        (
            "chunk_count_max".to_string(),
            counts.last().copied().unwrap_or(0).to_string(),
        ),
        ("runs".to_string(), settings.runs.to_string()),
        ("queue_depth".to_string(), settings.queue_depth.to_string()),
    ];
    let buffered = target.io_path() == IoPath::Buffered;
    if buffered {
        meta.settings
            .push(("io".to_string(), "page cache (--buffered)".to_string()));
    }
    let mut sweeper = Sweeper {
        target,
        engine: engine.as_mut(),
        settings,
        control,
        progress,
        verified: true,
        cache_drop: None,
    };
    let mut points = Vec::new();
    let mut stopped = false;
    for count in counts {
        let Some(point) = sweeper.measure_count(count)? else {
            stopped = true;
            break;
        };
        on_point(&point);
        points.push(point);
    }
    Ok(SweepResult {
        meta,
        summary: summarise(&points, sweeper.verified),
        points,
        stopped,
        buffered,
        cache_drop: sweeper.cache_drop,
    })
}

fn check_settings(target: &BenchTarget, settings: &SweepSettings) -> Result<(), BenchError> {
    let chunk = settings.chunk_size_bytes;
    if chunk == 0
        || !chunk.is_multiple_of(target.logical_block_bytes as u64)
        || settings.runs == 0
        || settings.chunk_count_max == Some(0)
    {
        return Err(BenchError::Settings(format!(
            "the chunk size {chunk} must be a multiple of the logical block size {}, and runs and the chunk count at least 1",
            target.logical_block_bytes
        )));
    }
    Ok(())
}

/// What every chunk count of a sweep runs with, and whether every read so far matched.
struct Sweeper<'a> {
    target: &'a BenchTarget,
    engine: &'a mut dyn Engine,
    settings: &'a SweepSettings,
    control: &'a Control,
    progress: &'a Progress,
    verified: bool,
    /// The page cache drops so far, merged (a buffered target's).
    cache_drop: Option<CacheDrop>,
}

impl Sweeper<'_> {
    /// Writes and reads back `count` chunks in every run; `None` when the sweep was stopped.
    fn measure_count(&mut self, count: u64) -> Result<Option<SweepPoint>, BenchError> {
        let mut write_rates = Vec::new();
        let mut read_rates = Vec::new();
        let mut write_latency_max_us: f64 = 0.0;
        for run in 0..self.settings.runs {
            let Some((written, read_back)) = self.write_and_read(count, run)? else {
                return Ok(None);
            };
            self.verified &= read_back.is_success();
            write_rates.push(written.rate_bytes_per_s);
            read_rates.push(read_back.rate_bytes_per_s);
            write_latency_max_us = write_latency_max_us.max(written.latency.max_us);
        }
        Ok(Some(SweepPoint {
            chunk_count: count,
            bytes: count * self.settings.chunk_size_bytes,
            write: RateStats::of(&write_rates),
            read: RateStats::of(&read_rates),
            write_latency_max_us,
        }))
    }

    /// One run of one count: the write, its flush, and the checked read; `None` when stopped.
    fn write_and_read(
        &mut self,
        count: u64,
        run: u32,
    ) -> Result<Option<(WorkloadResult, WorkloadResult)>, BenchError> {
        let settings = self.settings;
        let chunk = settings.chunk_size_bytes;
        // A different seed each run, so a read cannot pass on what an earlier run left.
        let seed = settings.seed ^ (count << 8) ^ run as u64;
        let mut write = Workload::sequential(IoOp::Write, 0, count * chunk, chunk);
        write.data = Data::Pattern { seed };
        self.drop_cached(count * chunk)?;
        settings.lockstep.wait();
        let mut written = self.run(&write)?;
        fail_on_error(&written, "writing")?;
        if written.stopped || self.control.state() != ControlState::Run {
            return Ok(None);
        }
        self.time_write_back(&mut written)?;
        if let Err(source) = self.engine.sync_data() {
            return Err(BenchError::Io {
                what: "flushing after a sweep write".to_string(),
                source,
            });
        }
        let mut read = Workload::sequential(IoOp::Read, 0, count * chunk, chunk);
        read.check = Some(Pattern::new(seed));
        self.drop_cached(count * chunk)?;
        settings.lockstep.wait();
        let read_back = self.run(&read)?;
        fail_on_error(&read_back, "reading")?;
        if read_back.stopped {
            return Ok(None);
        }
        Ok(Some((written, read_back)))
    }

    /// Empties the page cache of the first `len_bytes` of a buffered target (nothing on a
    /// direct one) and keeps what the drop says.
    fn drop_cached(&mut self, len_bytes: u64) -> Result<(), BenchError> {
        if let Some(drop) = self.target.drop_cached(0, len_bytes)? {
            self.cache_drop = Some(match self.cache_drop {
                Some(before) => before.merge(drop),
                None => drop,
            });
        }
        Ok(())
    }

    /// On a buffered target, waits for the write-back of what `written` wrote and adds its
    /// time to the write's: the write ends when the drive has the data, as a direct one does.
    fn time_write_back(&mut self, written: &mut WorkloadResult) -> Result<(), BenchError> {
        if self.target.io_path() != IoPath::Buffered {
            return Ok(());
        }
        let started_ns = self.engine.now_ns();
        if let Err(source) = self.engine.write_back() {
            return Err(BenchError::Io {
                what: "writing back a buffered sweep write".to_string(),
                source,
            });
        }
        written.elapsed_s += self.engine.now_ns().saturating_sub(started_ns) as f64 / 1e9;
        if written.elapsed_s > 0.0 {
            written.rate_bytes_per_s = written.bytes as f64 / written.elapsed_s;
        }
        Ok(())
    }

    fn run(&mut self, workload: &Workload) -> Result<WorkloadResult, BenchError> {
        driver::run(
            &mut *self.engine,
            workload,
            self.control,
            self.progress,
            &mut |_| {},
        )
    }
}

/// The peaks over the chunk counts and the rate of the largest.
fn summarise(points: &[SweepPoint], verified: bool) -> SweepSummary {
    let best = |rate: fn(&SweepPoint) -> f64| {
        points
            .iter()
            .max_by(|a, b| rate(a).total_cmp(&rate(b)))
            .map(|point| (rate(point), point.chunk_count))
            .unwrap_or((0.0, 0))
    };
    let (peak_write, peak_write_count) = best(|point| point.write.mean_bytes_per_s);
    let (peak_read, peak_read_count) = best(|point| point.read.mean_bytes_per_s);
    SweepSummary {
        peak_write_bytes_per_s: peak_write,
        peak_write_chunk_count: peak_write_count,
        peak_read_bytes_per_s: peak_read,
        peak_read_chunk_count: peak_read_count,
        largest_write_bytes_per_s: points
            .last()
            .map(|point| point.write.mean_bytes_per_s)
            .unwrap_or(0.0),
        verified,
    }
}

fn fail_on_error(result: &WorkloadResult, what: &str) -> Result<(), BenchError> {
    match result.error {
        Some(source) => Err(BenchError::Io {
            what: format!("{what} {} bytes", result.bytes),
            source,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_double_up_to_what_fits() {
        let settings = SweepSettings::default();
        assert_eq!(sweep_counts(&settings, 1 << 20), vec![1, 2, 4, 8]);
        assert_eq!(sweep_counts(&settings, 1 << 40).len(), 16);
        assert_eq!(*sweep_counts(&settings, 1 << 40).last().unwrap(), 32768);
        assert!(sweep_counts(&settings, 4096).is_empty());
        let asked = SweepSettings {
            chunk_count_max: Some(100),
            ..settings
        };
        assert_eq!(*sweep_counts(&asked, 1 << 40).last().unwrap(), 64);
    }

    fn sweep_on(spec: &str, settings: &SweepSettings) -> Result<SweepResult, BenchError> {
        let target = crate::bench::open_sim(spec);
        sweep(
            &target,
            settings,
            &Control::new(),
            &Progress::default(),
            &mut |_| {},
        )
    }

    #[test]
    fn counts_asked_for_must_fit_and_the_default_shrinks_to_the_target() {
        let asked = SweepSettings {
            chunk_count_max: Some(100),
            runs: 1,
            ..SweepSettings::default()
        };
        // 100 asks for 64 chunks (8 MiB) at most; 4 MiB holds 32.
        match sweep_on("sim:capacity=4M", &asked) {
            Err(BenchError::TargetTooSmall(error)) => {
                assert_eq!(
                    (error.needed_bytes, error.available_bytes),
                    (8 << 20, 4 << 20)
                );
                assert!(error.remedy.contains("--max-chunks"), "{error}");
            }
            other => panic!(
                "expected a refusal, got {:?}",
                other.map(|r| r.points.len())
            ),
        }
        let fitting = sweep_on("sim:capacity=8M", &asked).unwrap();
        assert_eq!(fitting.points.last().unwrap().chunk_count, 64);
        // Left to the default, the counts stop at what fits...
        let default = SweepSettings {
            runs: 1,
            ..SweepSettings::default()
        };
        let shrunk = sweep_on("sim:capacity=4M", &default).unwrap();
        assert_eq!(shrunk.points.last().unwrap().chunk_count, 32);
        // ...and a target below one chunk is refused, naming the chunk.
        let large_chunks = SweepSettings {
            chunk_size_bytes: 2 << 20,
            ..default
        };
        match sweep_on("sim:capacity=1M", &large_chunks) {
            Err(BenchError::TargetTooSmall(error)) => {
                assert_eq!(
                    (error.needed_bytes, error.available_bytes),
                    (2 << 20, 1 << 20)
                );
                assert!(error.remedy.contains("--chunk-size"), "{error}");
            }
            other => panic!(
                "expected a refusal, got {:?}",
                other.map(|r| r.points.len())
            ),
        }
    }

    #[test]
    fn small_transfers_ride_the_cache_and_large_ones_fall_to_the_sustained_rate() {
        // overwrite=1: the sweep writes the same first chunks again and again.
        let spec = "sim:capacity=256M,cache=16M,fast=3GB/s,slow=1GB/s,recover=100GB/s,latency=0,overwrite=1";
        let target = crate::bench::open_sim(spec);
        let settings = SweepSettings {
            runs: 2,
            ..SweepSettings::default()
        };
        let mut seen = 0;
        let result = sweep(
            &target,
            &settings,
            &Control::new(),
            &Progress::default(),
            &mut |_| seen += 1,
        )
        .unwrap();
        assert_eq!(seen, 12); // 1 .. 2048 chunks of 128 KiB
        assert!(result.summary.verified);
        let small = &result.points[6]; // 8 MiB: inside the cache
        assert!(
            (small.write.mean_bytes_per_s / 3e9 - 1.0).abs() < 0.01,
            "{small:?}"
        );
        let large = result.points.last().unwrap(); // 256 MiB: 16 MiB fast, the rest slow
        let expected = (256.0 * 1048576.0) / (16.0 * 1048576.0 / 3e9 + 240.0 * 1048576.0 / 1e9);
        assert!(
            (large.write.mean_bytes_per_s / expected - 1.0).abs() < 0.01,
            "{large:?}"
        );
        assert!(
            (large.read.mean_bytes_per_s / 3.2e9 - 1.0).abs() < 0.01,
            "{large:?}"
        );
    }
}
