//! `bench profile`: the presets people compare drives by, rebuilt on nvrec's driver so the
//! numbers sit beside the recorder's own.
//! - `cdm`: CrystalDiskMark's default set: SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1.
//! - `cdm6`: CrystalDiskMark 6's set: Seq Q32T1 (128 KiB transfers), 4K Q8T8, 4K Q32T1,
//!   4K Q1T1, the shapes of the seed's Gen3/Gen4 comparison.
//! - `cdm-nvme`: its NVMe set: SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, RND4K Q1T1.
//! - `custom`: the shapes given (`--test SEQ1M-Q8T1`, see [`TestShape::parse`]), run as
//!   CrystalDiskMark runs its own.
//! - `atto`: ATTO's sweep of transfer sizes from 512 B to 64 MiB at queue depth 4 over a
//!   256 MiB region, written then read.
//!
//! CrystalDiskMark-style tests are time-based: each runs `runs` times for `duration` over the
//! test region (1 GiB by default), reads first on a region written once beforehand, then
//! writes; the best and the mean of the runs are reported in MB/s and MiB/s. `T16` means
//! sixteen threads, each with its own engine and queue; on the simulated drive, which has one
//! clock, they are one engine with sixteen times the queue depth.
//!
//! Data is each tool's: incompressible for CrystalDiskMark's shapes, compressible for ATTO
//! (its best case, which a drive that compresses shows as faster); [`ProfileSettings::data`]
//! overrides it.

use super::driver::{self, Access, Data, Workload, WorkloadResult};
use super::size::{size_at_most, Need};
use super::{BenchError, BenchTarget, Lockstep, RunMeta};
use crate::control::{Control, ControlState, Progress};
use crate::engine::{Engine, EngineChoice, IoOp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    Cdm,
    Cdm6,
    CdmNvme,
    /// The shapes of [`ProfileSettings::shapes`].
    Custom,
    Atto,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Cdm => "cdm",
            Profile::Cdm6 => "cdm6",
            Profile::CdmNvme => "cdm-nvme",
            Profile::Custom => "custom",
            Profile::Atto => "atto",
        }
    }

    /// The region a profile tests by default.
    pub fn region_bytes_default(self) -> u64 {
        match self {
            Profile::Cdm | Profile::Cdm6 | Profile::CdmNvme | Profile::Custom => 1 << 30,
            Profile::Atto => 256 << 20,
        }
    }

    /// The data the tool itself writes: ATTO's is compressible, CrystalDiskMark's random.
    pub fn data_default(self) -> ProfileData {
        match self {
            Profile::Atto => ProfileData::Compressible,
            _ => ProfileData::Incompressible,
        }
    }

    /// The preset's shapes (none for ATTO, whose tests are its sizes, or for `custom`).
    pub fn shapes(self) -> &'static [TestShape] {
        match self {
            Profile::Cdm => &CDM,
            Profile::Cdm6 => &CDM6,
            Profile::CdmNvme => &CDM_NVME,
            Profile::Custom | Profile::Atto => &[],
        }
    }
}

/// What a profile writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileData {
    Compressible,
    Incompressible,
}

/// Why a `--test` shape does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("test shape '{text}': {why} (give SEQ or RND, a size, -Q<depth>T<threads>: SEQ1M-Q8T1, RND4K-Q32T16)")]
pub struct ShapeError {
    pub text: String,
    pub why: &'static str,
}

/// One test of a preset: `SEQ1M Q8T1` and the like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TestShape {
    pub sequential: bool,
    pub io_size_bytes: u64,
    pub queue_depth: u32,
    pub thread_count: u32,
}

impl TestShape {
    const fn new(
        sequential: bool,
        io_size_bytes: u64,
        queue_depth: u32,
        thread_count: u32,
    ) -> TestShape {
        TestShape {
            sequential,
            io_size_bytes,
            queue_depth,
            thread_count,
        }
    }

    /// Parses `SEQ1M-Q8T1`, `RND4K-Q32T16` (case aside; a space may stand for the dash):
    /// SEQ or RND, a transfer size in binary units (K, M, G; a multiple of 512 bytes), a
    /// queue depth and a thread count of at least 1.
    pub fn parse(text: &str) -> Result<TestShape, ShapeError> {
        let error = |why| ShapeError {
            text: text.to_string(),
            why,
        };
        let upper = text.trim().to_ascii_uppercase().replace(' ', "-");
        let (kind, rest) = upper.split_at(upper.len().min(3));
        let sequential = match kind {
            "SEQ" => true,
            "RND" => false,
            _ => return Err(error("it starts with neither SEQ nor RND")),
        };
        let (size, queue) = rest.split_once("-Q").ok_or(error("no -Q<depth>"))?;
        let (depth, threads) = queue.split_once('T').ok_or(error("no T<threads>"))?;
        let split = size
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(size.len());
        let shift = match &size[split..] {
            "" => 0,
            "K" | "KB" | "KIB" => 10,
            "M" | "MB" | "MIB" => 20,
            "G" | "GB" | "GIB" => 30,
            _ => return Err(error("the size's unit is not K, M or G")),
        };
        let count: u64 = size[..split].parse().map_err(|_| error("no size"))?;
        let io_size_bytes = count
            .checked_shl(shift)
            .filter(|bytes| *bytes >= 512 && bytes % 512 == 0 && *bytes <= 1 << 30)
            .ok_or(error("the size must be a multiple of 512 bytes up to 1G"))?;
        let number = |digits: &str, why| match digits.parse::<u32>() {
            Ok(value) if (1..=1024).contains(&value) => Ok(value),
            _ => Err(error(why)),
        };
        Ok(TestShape::new(
            sequential,
            io_size_bytes,
            number(depth, "the queue depth must be 1 to 1024")?,
            number(threads, "the thread count must be 1 to 1024")?,
        ))
    }

    /// `SEQ1M Q8T1`, `RND4K Q32T16`, as CrystalDiskMark labels them.
    pub fn label(&self) -> String {
        let bytes = self.io_size_bytes;
        let size = if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
            format!("{}M", bytes >> 20)
        } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
            format!("{}K", bytes >> 10)
        } else {
            bytes.to_string()
        };
        format!(
            "{}{size} Q{}T{}",
            if self.sequential { "SEQ" } else { "RND" },
            self.queue_depth,
            self.thread_count
        )
    }
}

const CDM: [TestShape; 4] = [
    TestShape::new(true, 1 << 20, 8, 1),
    TestShape::new(true, 1 << 20, 1, 1),
    TestShape::new(false, 4 << 10, 32, 1),
    TestShape::new(false, 4 << 10, 1, 1),
];
/// CrystalDiskMark 6: Seq Q32T1 moves 128 KiB transfers; 4K Q8T8 is eight threads at
/// queue depth 8.
const CDM6: [TestShape; 4] = [
    TestShape::new(true, 128 << 10, 32, 1),
    TestShape::new(false, 4 << 10, 8, 8),
    TestShape::new(false, 4 << 10, 32, 1),
    TestShape::new(false, 4 << 10, 1, 1),
];
const CDM_NVME: [TestShape; 4] = [
    TestShape::new(true, 1 << 20, 8, 1),
    TestShape::new(true, 128 << 10, 32, 1),
    TestShape::new(false, 4 << 10, 32, 16),
    TestShape::new(false, 4 << 10, 1, 1),
];
/// ATTO's queue depth.
const ATTO_QUEUE_DEPTH: u32 = 4;

#[derive(Debug, Clone)]
pub struct ProfileSettings {
    pub profile: Profile,
    /// The tests of [`Profile::Custom`] (ignored by the presets).
    pub shapes: Vec<TestShape>,
    pub region_bytes: Option<u64>,
    /// Each run of a time-based test.
    pub duration_s: f64,
    pub runs: u32,
    /// `None`: the tool's own ([`Profile::data_default`]).
    pub data: Option<ProfileData>,
    pub engine: EngineChoice,
    /// Benches on several drives at once start each measured workload together.
    pub lockstep: Lockstep,
}

impl Default for ProfileSettings {
    fn default() -> Self {
        ProfileSettings {
            profile: Profile::Cdm,
            shapes: Vec::new(),
            region_bytes: None,
            duration_s: 5.0,
            runs: 3,
            data: None,
            engine: EngineChoice::Auto,
            lockstep: Lockstep::alone(),
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ProfileTestResult {
    /// `SEQ1M Q8T1` or, for ATTO, the transfer size (`64K`).
    pub name: String,
    pub op: IoOp,
    pub shape: TestShape,
    /// Rate of each run.
    pub run_rates_bytes_per_s: Vec<f64>,
    pub best_bytes_per_s: f64,
    pub mean_bytes_per_s: f64,
    /// Best, in the units CrystalDiskMark shows (MB/s = 10^6 bytes/s) and in MiB/s.
    pub best_mb_per_s: f64,
    pub best_mib_per_s: f64,
    pub best_iops: f64,
    pub latency_mean_us: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ProfileResult {
    pub meta: RunMeta,
    pub profile: Profile,
    pub region_bytes: u64,
    pub data: ProfileData,
    pub tests: Vec<ProfileTestResult>,
    /// Tests that could not run here, with the reason (a transfer below the block size).
    pub skipped: Vec<String>,
    pub stopped: bool,
}

/// The transfer sizes of ATTO's sweep: 512 B to 64 MiB, doubling.
pub fn atto_sizes() -> Vec<u64> {
    std::iter::successors(Some(512u64), |size| Some(size * 2))
        .take_while(|size| *size <= 64 << 20)
        .collect()
}

fn test_result(
    name: String,
    op: IoOp,
    shape: TestShape,
    runs: &[WorkloadResult],
) -> ProfileTestResult {
    let rates: Vec<f64> = runs.iter().map(|run| run.rate_bytes_per_s).collect();
    let best = runs
        .iter()
        .max_by(|a, b| a.rate_bytes_per_s.total_cmp(&b.rate_bytes_per_s))
        .expect("at least one run");
    ProfileTestResult {
        name,
        op,
        shape,
        best_bytes_per_s: best.rate_bytes_per_s,
        mean_bytes_per_s: rates.iter().sum::<f64>() / rates.len() as f64,
        best_mb_per_s: best.rate_bytes_per_s / 1e6,
        best_mib_per_s: best.rate_bytes_per_s / 1048576.0,
        best_iops: best.iops,
        latency_mean_us: best.latency.mean_us,
        run_rates_bytes_per_s: rates,
    }
}

/// The bytes a profile moves, for its progress: ATTO writes and reads the region once per
/// transfer size and run; CrystalDiskMark's tests run for a time, so their total is unknown (0).
fn total_bytes(settings: &ProfileSettings, region_bytes: u64, lbs: u64) -> u64 {
    match settings.profile {
        Profile::Cdm | Profile::Cdm6 | Profile::CdmNvme | Profile::Custom => 0,
        Profile::Atto => atto_sizes()
            .into_iter()
            .filter(|size| size % lbs == 0 && *size <= region_bytes)
            .map(|size| region_bytes / size * size * 2 * settings.runs as u64)
            .sum(),
    }
}

/// What a profile needs of its target: the region asked for, or the preset's own.
fn need(settings: &ProfileSettings, capacity_bytes: u64) -> Need<'static> {
    let profile = settings.profile;
    let bench = match profile {
        Profile::Cdm => "profile cdm",
        Profile::Cdm6 => "profile cdm6",
        Profile::CdmNvme => "profile cdm-nvme",
        Profile::Custom => "profile custom",
        Profile::Atto => "profile atto",
    };
    let (needed_bytes, why) = match settings.region_bytes {
        Some(region_bytes) => (region_bytes, "--size".to_string()),
        None => (
            profile.region_bytes_default(),
            format!("the {} preset's test region", profile.name()),
        ),
    };
    Need {
        bench,
        needed_bytes,
        why,
        remedy: size_at_most(capacity_bytes),
    }
}

pub fn profile(
    target: &BenchTarget,
    settings: &ProfileSettings,
    control: &Control,
    progress: &Progress,
    on_test: &mut dyn FnMut(&ProfileTestResult),
) -> Result<ProfileResult, BenchError> {
    target.require(need(settings, target.capacity_bytes))?;
    let region = checked_region_bytes(settings)?;
    let profile_data = settings.data.unwrap_or(settings.profile.data_default());
    let meta = profile_meta(target, settings, region, profile_data)?;
    let lbs = target.logical_block_bytes as u64;
    driver::start_progress(progress, total_bytes(settings, region, lbs));
    let mut run = ProfileRun {
        target,
        settings,
        control,
        progress,
        region,
        data: match profile_data {
            ProfileData::Compressible => Data::Compressible,
            ProfileData::Incompressible => Data::Incompressible,
        },
        lbs,
        tests: Vec::new(),
        skipped: Vec::new(),
    };
    match settings.profile {
        Profile::Cdm | Profile::Cdm6 | Profile::CdmNvme | Profile::Custom => {
            run.crystal_disk_mark(on_test)?
        }
        Profile::Atto => run.atto(on_test)?,
    }
    Ok(ProfileResult {
        meta,
        profile: settings.profile,
        region_bytes: region,
        data: profile_data,
        stopped: run.stopped(),
        tests: run.tests,
        skipped: run.skipped,
    })
}

/// The test region in whole MiB, once it and the other settings make sense.
fn checked_region_bytes(settings: &ProfileSettings) -> Result<u64, BenchError> {
    let region = settings
        .region_bytes
        .unwrap_or(settings.profile.region_bytes_default())
        / (1 << 20)
        * (1 << 20);
    if region < 1 << 20 {
        return Err(BenchError::Settings(
            "the test region (--size) must be at least 1 MiB".to_string(),
        ));
    }
    if settings.runs == 0 || settings.duration_s.is_nan() || settings.duration_s <= 0.0 {
        return Err(BenchError::Settings(
            "runs and duration must be positive".to_string(),
        ));
    }
    if settings.profile == Profile::Custom && settings.shapes.is_empty() {
        return Err(BenchError::Settings(
            "the custom profile needs its tests (--test SEQ1M-Q8T1 ...)".to_string(),
        ));
    }
    Ok(region)
}

fn profile_meta(
    target: &BenchTarget,
    settings: &ProfileSettings,
    region: u64,
    profile_data: ProfileData,
) -> Result<RunMeta, BenchError> {
    let meta_engine = target.open_engine(settings.engine, 1, 1 << 20)?;
    let mut meta = RunMeta::new("profile", target, meta_engine.as_ref());
    drop(meta_engine);
    meta.settings = vec![
        ("profile".to_string(), settings.profile.name().to_string()),
        ("region".to_string(), region.to_string()),
        ("duration_s".to_string(), settings.duration_s.to_string()),
        ("runs".to_string(), settings.runs.to_string()),
        (
            "compressible".to_string(),
            (profile_data == ProfileData::Compressible).to_string(),
        ),
    ];
    Ok(meta)
}

/// What every test of a profile runs with, and the tests done and skipped so far.
struct ProfileRun<'a> {
    target: &'a BenchTarget,
    settings: &'a ProfileSettings,
    control: &'a Control,
    progress: &'a Progress,
    region: u64,
    data: Data,
    lbs: u64,
    tests: Vec<ProfileTestResult>,
    skipped: Vec<String>,
}

impl ProfileRun<'_> {
    fn stopped(&self) -> bool {
        self.control.state() != ControlState::Run
    }

    /// CrystalDiskMark's way: every shape read, then every shape written, each for a time.
    fn crystal_disk_mark(
        &mut self,
        on_test: &mut dyn FnMut(&ProfileTestResult),
    ) -> Result<(), BenchError> {
        let shapes = match self.settings.profile {
            Profile::Custom => self.settings.shapes.clone(),
            preset => preset.shapes().to_vec(),
        };
        self.write_region()?;
        for op in [IoOp::Read, IoOp::Write] {
            for &shape in &shapes {
                if shape.io_size_bytes % self.lbs != 0 {
                    self.skipped.push(format!(
                        "{} (below the {}-byte block size)",
                        shape.label(),
                        self.lbs
                    ));
                    continue;
                }
                let runs = self.timed_runs(op, shape)?;
                self.add_test(shape.label(), op, shape, &runs, on_test);
                if self.stopped() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Reads need written data: writes the region once, sequentially.
    fn write_region(&mut self) -> Result<(), BenchError> {
        let mut engine = self.target.open_engine(self.settings.engine, 8, 1 << 20)?;
        let mut prepare = Workload::sequential(IoOp::Write, 0, self.region, 1 << 20);
        prepare.data = self.data;
        let prepared = driver::run(
            engine.as_mut(),
            &prepare,
            self.control,
            self.progress,
            &mut |_| {},
        )?;
        if let Some(source) = prepared.error {
            return Err(BenchError::Io {
                what: "writing the test region before the read tests".to_string(),
                source,
            });
        }
        Ok(())
    }

    /// The runs of one time-based test, fewer when stopped.
    fn timed_runs(
        &mut self,
        op: IoOp,
        shape: TestShape,
    ) -> Result<Vec<WorkloadResult>, BenchError> {
        let settings = self.settings;
        let mut runs = Vec::new();
        for run in 0..settings.runs {
            let mut workload = Workload::sequential(op, 0, self.region, shape.io_size_bytes);
            workload.wrap = true;
            workload.limit_ns = Some((settings.duration_s * 1e9) as u64);
            workload.data = self.data;
            if !shape.sequential {
                workload.access = Access::Random {
                    seed: 0x5eed ^ run as u64,
                };
            }
            settings.lockstep.wait();
            runs.push(run_threads(
                self.target,
                settings.engine,
                shape,
                &workload,
                self.control,
                self.progress,
            )?);
            if self.stopped() {
                break;
            }
        }
        Ok(runs)
    }

    /// ATTO's way: for each transfer size the region written, then read, at queue depth 4.
    fn atto(&mut self, on_test: &mut dyn FnMut(&ProfileTestResult)) -> Result<(), BenchError> {
        for size in atto_sizes() {
            let label = crate::unit::format_bytes(size);
            if size % self.lbs != 0 {
                self.skipped
                    .push(format!("{label} (below the {}-byte block size)", self.lbs));
                continue;
            }
            if size > self.region {
                self.skipped
                    .push(format!("{label} (larger than the region)"));
                continue;
            }
            let shape = TestShape::new(true, size, ATTO_QUEUE_DEPTH, 1);
            let mut engine =
                self.target
                    .open_engine(self.settings.engine, ATTO_QUEUE_DEPTH, size)?;
            for op in [IoOp::Write, IoOp::Read] {
                let runs = self.atto_runs(engine.as_mut(), op, size, &label)?;
                self.add_test(label.clone(), op, shape, &runs, on_test);
                if self.stopped() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The runs of one ATTO transfer size and direction, fewer when stopped.
    fn atto_runs(
        &mut self,
        engine: &mut dyn Engine,
        op: IoOp,
        size: u64,
        label: &str,
    ) -> Result<Vec<WorkloadResult>, BenchError> {
        let mut runs = Vec::new();
        for _ in 0..self.settings.runs {
            let mut workload = Workload::sequential(op, 0, self.region, size);
            workload.data = self.data;
            self.settings.lockstep.wait();
            let result = driver::run(engine, &workload, self.control, self.progress, &mut |_| {})?;
            if let Some(source) = result.error {
                return Err(BenchError::Io {
                    what: format!("ATTO {label} {}", op.name()),
                    source,
                });
            }
            runs.push(result);
            if self.stopped() {
                break;
            }
        }
        Ok(runs)
    }

    fn add_test(
        &mut self,
        name: String,
        op: IoOp,
        shape: TestShape,
        runs: &[WorkloadResult],
        on_test: &mut dyn FnMut(&ProfileTestResult),
    ) {
        let result = test_result(name, op, shape, runs);
        on_test(&result);
        self.tests.push(result);
    }
}

/// Runs one time-based test with `shape.thread_count` threads, each with its own engine and
/// queue, and adds their results up. The simulated drive has one clock: there the threads
/// become one engine with their queues combined.
fn run_threads(
    target: &BenchTarget,
    engine_choice: EngineChoice,
    shape: TestShape,
    workload: &Workload,
    control: &Control,
    progress: &Progress,
) -> Result<WorkloadResult, BenchError> {
    let threads = if target.sim_drive().is_some() {
        1
    } else {
        shape.thread_count.max(1)
    };
    let queue_depth = shape.queue_depth * (shape.thread_count.max(1) / threads);
    let one = |index: u32| -> Result<WorkloadResult, BenchError> {
        let mut engine = target.open_engine(engine_choice, queue_depth, shape.io_size_bytes)?;
        let mut workload = *workload;
        if let Access::Random { seed } = workload.access {
            workload.access = Access::Random {
                seed: seed ^ ((index as u64) << 32),
            };
        }
        driver::run(engine.as_mut(), &workload, control, progress, &mut |_| {})
    };
    let results: Vec<Result<WorkloadResult, BenchError>> = if threads == 1 {
        vec![one(0)]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|index| scope.spawn(move || one(index)))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("a bench thread panicked"))
                .collect()
        })
    };
    let mut results = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    if let Some(source) = results.iter().find_map(|result| result.error) {
        return Err(BenchError::Io {
            what: format!("{} {}", shape.label(), workload.op.name()),
            source,
        });
    }
    let mut total = results.remove(0);
    for other in results {
        // The threads ran side by side: bytes add up, time is the longest.
        total.latency.mean_us = (total.latency.mean_us * total.io_count as f64
            + other.latency.mean_us * other.io_count as f64)
            / (total.io_count + other.io_count).max(1) as f64;
        total.latency.max_us = total.latency.max_us.max(other.latency.max_us);
        total.bytes += other.bytes;
        total.io_count += other.io_count;
        total.elapsed_s = total.elapsed_s.max(other.elapsed_s);
    }
    total.queue_depth = shape.queue_depth * shape.thread_count;
    if total.elapsed_s > 0.0 {
        total.rate_bytes_per_s = total.bytes as f64 / total.elapsed_s;
        total.iops = total.io_count as f64 / total.elapsed_s;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(spec: &str) -> BenchTarget {
        crate::bench::open_sim(spec)
    }

    #[test]
    fn labels_read_like_crystaldiskmark() {
        let labels: Vec<String> = CDM_NVME.iter().map(TestShape::label).collect();
        assert_eq!(
            labels,
            ["SEQ1M Q8T1", "SEQ128K Q32T1", "RND4K Q32T16", "RND4K Q1T1"]
        );
        assert_eq!(atto_sizes().first(), Some(&512));
        assert_eq!(atto_sizes().last(), Some(&(64 << 20)));
        assert_eq!(atto_sizes().len(), 18);
    }

    #[test]
    fn cdm_on_the_simulated_drive_shows_queue_depth_and_iops_limits() {
        let target =
            sim("sim:capacity=256M,cache=256M,fast=2GB/s,read=3GB/s,iops=100000,latency=100us");
        let settings = ProfileSettings {
            profile: Profile::Cdm,
            region_bytes: Some(64 << 20),
            duration_s: 0.02,
            runs: 2,
            ..ProfileSettings::default()
        };
        let mut seen = Vec::new();
        let result = profile(
            &target,
            &settings,
            &Control::new(),
            &Progress::default(),
            &mut |test| seen.push(test.name.clone()),
        )
        .unwrap();
        assert_eq!(result.tests.len(), 8);
        assert_eq!(seen[0], "SEQ1M Q8T1");
        let read = |name: &str| {
            result
                .tests
                .iter()
                .find(|test| test.name == name && test.op == IoOp::Read)
                .unwrap()
        };
        // Q8 reaches the channel's rate; Q1 pays the latency on every transfer.
        assert!((read("SEQ1M Q8T1").best_bytes_per_s / 3e9 - 1.0).abs() < 0.03);
        assert!(read("SEQ1M Q1T1").best_bytes_per_s < 0.8 * 3e9);
        // Random 4K at Q32 is limited by the 100k IOPS; Q1 by the latency.
        assert!((read("RND4K Q32T1").best_iops / 100_000.0 - 1.0).abs() < 0.03);
        assert!(read("RND4K Q1T1").best_iops < 10_000.0);
    }

    #[test]
    fn atto_skips_what_the_block_size_forbids() {
        let target = sim("sim:capacity=64M,lbs=4096");
        let settings = ProfileSettings {
            profile: Profile::Atto,
            region_bytes: Some(16 << 20),
            runs: 1,
            ..ProfileSettings::default()
        };
        let result = profile(
            &target,
            &settings,
            &Control::new(),
            &Progress::default(),
            &mut |_| {},
        )
        .unwrap();
        // 512 B, 1K, 2K below the block size; 32M and 64M beyond the region.
        assert_eq!(result.skipped.len(), 5, "{:?}", result.skipped);
        assert_eq!(result.tests.len(), 2 * 13);
        assert!(result.tests.iter().all(|test| test.best_bytes_per_s > 0.0));
    }

    #[test]
    fn a_region_beyond_the_target_is_refused_whether_asked_for_or_the_presets() {
        let target = sim("sim:capacity=16M");
        let refusal = |settings: ProfileSettings| match profile(
            &target,
            &settings,
            &Control::new(),
            &Progress::default(),
            &mut |_| {},
        ) {
            Err(BenchError::TargetTooSmall(error)) => error,
            other => panic!(
                "expected a refusal, got {:?}",
                other.map(|r| r.region_bytes)
            ),
        };
        let preset = refusal(ProfileSettings {
            profile: Profile::Atto,
            ..ProfileSettings::default()
        });
        assert_eq!(
            (preset.needed_bytes, preset.available_bytes),
            (256 << 20, 16 << 20)
        );
        assert_eq!(preset.why, "the atto preset's test region");
        assert_eq!(preset.remedy, "a --size of at most 16 MiB");
        let asked = refusal(ProfileSettings {
            profile: Profile::Cdm,
            region_bytes: Some(32 << 20),
            ..ProfileSettings::default()
        });
        assert_eq!(asked.bench, "profile cdm");
        assert_eq!(asked.why, "--size");
    }

    #[test]
    fn cdm6_has_the_published_shapes() {
        let labels: Vec<String> = Profile::Cdm6
            .shapes()
            .iter()
            .map(TestShape::label)
            .collect();
        // The seed's CrystalDiskMark 6 runs: Seq Q32T1, 4K Q8T8, 4K Q32T1, 4K Q1T1.
        assert_eq!(
            labels,
            ["SEQ128K Q32T1", "RND4K Q8T8", "RND4K Q32T1", "RND4K Q1T1"]
        );
        let q8t8 = Profile::Cdm6.shapes()[1];
        assert_eq!((q8t8.queue_depth, q8t8.thread_count), (8, 8));
        // The seed's single-thread Seq of 1 MiB transfers is cdm's second test.
        assert_eq!(Profile::Cdm.shapes()[1].label(), "SEQ1M Q1T1");
    }

    #[test]
    fn test_shapes_parse_and_bad_ones_say_why() {
        for (text, expected) in [
            ("SEQ1M-Q8T1", TestShape::new(true, 1 << 20, 8, 1)),
            ("RND4K-Q32T16", TestShape::new(false, 4 << 10, 32, 16)),
            ("rnd4k-q8t8", TestShape::new(false, 4 << 10, 8, 8)),
            ("SEQ128K Q32T1", TestShape::new(true, 128 << 10, 32, 1)),
            ("SEQ512-Q1T1", TestShape::new(true, 512, 1, 1)),
            ("SEQ8MiB-Q4T2", TestShape::new(true, 8 << 20, 4, 2)),
        ] {
            let shape = TestShape::parse(text).unwrap();
            assert_eq!(shape, expected, "{text}");
            // The label parses back to the shape.
            assert_eq!(TestShape::parse(&shape.label()), Ok(shape), "{text}");
        }
        for (text, why) in [
            ("MIX1M-Q1T1", "neither SEQ nor RND"),
            ("SEQ1M", "-Q"),
            ("SEQ1M-Q8", "T<threads>"),
            ("SEQ1X-Q8T1", "unit"),
            ("SEQ-Q8T1", "size"),
            ("SEQ100-Q8T1", "multiple of 512"),
            ("SEQ1M-Q0T1", "queue depth"),
            ("SEQ1M-Q8T0", "thread count"),
            ("SEQ1M-Q8Tx", "thread count"),
        ] {
            let error = TestShape::parse(text).unwrap_err();
            assert!(error.why.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn atto_writes_compressible_data_unless_told_and_custom_runs_its_shapes() {
        let target = sim("sim:capacity=64M");
        let run = |settings: ProfileSettings| {
            profile(
                &target,
                &settings,
                &Control::new(),
                &Progress::default(),
                &mut |_| {},
            )
        };
        let atto = ProfileSettings {
            profile: Profile::Atto,
            region_bytes: Some(4 << 20),
            runs: 1,
            ..ProfileSettings::default()
        };
        assert_eq!(run(atto.clone()).unwrap().data, ProfileData::Compressible);
        let incompressible = ProfileSettings {
            data: Some(ProfileData::Incompressible),
            ..atto
        };
        assert_eq!(
            run(incompressible).unwrap().data,
            ProfileData::Incompressible
        );
        let custom = ProfileSettings {
            profile: Profile::Custom,
            shapes: vec![TestShape::parse("SEQ1M-Q8T1").unwrap()],
            region_bytes: Some(16 << 20),
            duration_s: 0.01,
            runs: 1,
            ..ProfileSettings::default()
        };
        let result = run(custom.clone()).unwrap();
        assert_eq!(result.data, ProfileData::Incompressible);
        let names: Vec<&str> = result.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["SEQ1M Q8T1", "SEQ1M Q8T1"], "read, then write");
        let empty = ProfileSettings {
            shapes: Vec::new(),
            ..custom
        };
        assert!(matches!(run(empty), Err(BenchError::Settings(_))));
    }
}
