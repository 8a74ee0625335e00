//! Characterizing drives the way a recorder uses them.
//!
//! Four benches, each a function that takes an open [`BenchTarget`] and its settings and
//! returns a result that serializes to the versioned JSON schema (`nvrec.bench`, version
//! [`SCHEMA_VERSION`]):
//! - [`sweep`]: the streamer's "average peak" test: write then read 1, 2, 4 ... chunks from
//!   the start of the target, averaged over runs (TEST #08 of the seed's test log).
//! - [`fill`]: the "continuous" test: one sequential write of the whole target logged per time
//!   window, read back and compared, then analysed ([`analysis`]) for the cache cliff, the
//!   rate after it, the steady state, the slowest window and stalls.
//! - [`overwrite`]: a ring's second lap, without and with TRIM ahead of the write point.
//! - [`profile`]: CrystalDiskMark's and ATTO's presets, rebuilt on the same driver.
//!
//! Every bench runs its I/O through [`driver`], which keeps a queue full on one engine and
//! times everything by the engine's clock ([`Engine::now_ns`]): the monotonic clock on real
//! targets, the virtual clock on the simulated drive, so the analysis can be tested against a
//! model with known answers.
//!
//! Every bench also runs on several drives at once ([`together`]): a thread a drive, each
//! measured workload started on all together, then each drive alone; the figures say what
//! the drives moved together against the sum of what each moves alone.
//!
//! Every bench runs within its target (`size.rs`): a file that exists is never grown, and a
//! bench asked for more than the target holds refuses with [`TargetTooSmall`] before any I/O.
//!
//! What it deliberately does not do: draw anything (the CLI turns results into text, CSV and
//! HTML through [`crate::report`]), or run safety checks of its own (opening goes through
//! [`crate::device::open`], which refuses a device holding data unless forced).

pub mod analysis;
mod distinct;
pub mod driver;
mod fill;
mod overwrite;
pub mod plateau;
mod profile;
pub mod rated;
mod size;
mod sweep;
pub mod together;
pub mod window;

pub use distinct::{check_distinct, NotDistinct};
pub use fill::{fill, fill_average, FillAverage, FillResult, FillRun, FillSettings, FillSummary};
pub use overwrite::{overwrite, OverwriteMode, OverwritePhase, OverwriteResult, OverwriteSettings};
pub use profile::{
    atto_sizes, profile, Profile, ProfileData, ProfileResult, ProfileSettings, ProfileTestResult,
    ShapeError, TestShape,
};
pub use rated::{of_rated, Rated, RatedError, RatedFigure};
pub use size::TargetTooSmall;
pub use sweep::{
    sweep, sweep_counts, RateStats, SweepPoint, SweepResult, SweepSettings, SweepSummary,
    SWEEP_CHUNK_COUNT_MAX_DEFAULT,
};
pub use together::{
    run_together, Combined, Lockstep, TogetherDrive, TogetherFigures, TogetherResult,
};
pub use window::Window;

use crate::buffer::BufferPool;
use crate::device::{self, Access, CacheDrop, IoPath, OpenOptions, Safety, Target, TargetInfo};
use crate::engine::{self, Engine, EngineChoice, EngineConfig, SimDrive, SimModel};
use std::path::PathBuf;

/// Version of the JSON every bench writes; bumped when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u32 = 1;
/// Default length of one logging window of the time series.
pub const WINDOW_S_DEFAULT: f64 = 0.5;
/// Windows sized for the run (`bench fill` without `--window`): they start this long and
/// double, merged in pairs, whenever [`WINDOW_COUNT_AUTO_MAX`] are logged.
pub const WINDOW_S_AUTO_START: f64 = 0.001;
pub const WINDOW_COUNT_AUTO_MAX: usize = 512;
/// Windows sized for the run hold at least this many transfers for the analysis (fewer
/// measure the transfers' timing more than the drive's rate).
pub const WINDOW_TRANSFER_COUNT_MIN: u64 = 16;

/// What a bench runs on.
#[derive(Debug, Clone)]
pub enum TargetSpec {
    Path(PathBuf),
    Sim(SimModel),
}

impl TargetSpec {
    /// A path, or `sim:...` for the simulated drive.
    pub fn parse(text: &str) -> Result<TargetSpec, engine::SimSpecError> {
        if SimModel::is_spec(text) {
            Ok(TargetSpec::Sim(SimModel::parse(text)?))
        } else {
            Ok(TargetSpec::Path(PathBuf::from(text)))
        }
    }
}

enum Backend {
    Real(Target),
    Sim(SimDrive),
}

/// An open bench target: a file, a block device or a simulated drive.
pub struct BenchTarget {
    pub name: String,
    pub capacity_bytes: u64,
    pub logical_block_bytes: u32,
    pub info: TargetFacts,
    backend: Backend,
}

/// What reports say about the target.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetFacts {
    pub name: String,
    /// "file", "block" or "sim".
    pub kind: String,
    pub capacity_bytes: u64,
    pub logical_block_bytes: u32,
    pub transport: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub firmware: Option<String>,
    /// The simulated drive's parameters, for `sim:` targets.
    pub sim_model: Option<SimModel>,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Device(#[from] device::DeviceError),
    #[error("simulated drive: {0}")]
    Sim(std::io::Error),
    #[error(transparent)]
    Buffer(#[from] crate::buffer::BufferError),
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    #[error("{0}")]
    Settings(String),
    /// Asked for more than the target holds; nothing was written.
    #[error(transparent)]
    TargetTooSmall(#[from] TargetTooSmall),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: engine::IoError,
    },
}

impl BenchTarget {
    /// Opens `spec` for a bench that writes (`Access::Write`) or only reads. A regular file
    /// that does not exist yet is created and preallocated to `create_len_bytes` when given;
    /// one that exists is used at its size, never grown (a bench that needs more refuses).
    /// `io_path` buffered opens a file or device without O_DIRECT (`bench sweep
    /// --buffered`); the simulated drive has no page cache and refuses it.
    pub fn open(
        spec: &TargetSpec,
        access: Access,
        safety: Safety,
        create_len_bytes: Option<u64>,
        io_path: IoPath,
    ) -> Result<BenchTarget, BenchError> {
        match spec {
            TargetSpec::Sim(_) if io_path == IoPath::Buffered => Err(BenchError::Settings(
                "the simulated drive has no page cache: --buffered needs a file or a block device"
                    .to_string(),
            )),
            TargetSpec::Sim(model) => {
                let drive = SimDrive::new(model.clone()).map_err(BenchError::Sim)?;
                Ok(BenchTarget {
                    name: "sim".to_string(),
                    capacity_bytes: drive.capacity_bytes(),
                    logical_block_bytes: drive.logical_block_bytes(),
                    info: TargetFacts {
                        name: "sim".to_string(),
                        kind: "sim".to_string(),
                        capacity_bytes: drive.capacity_bytes(),
                        logical_block_bytes: drive.logical_block_bytes(),
                        transport: Some("simulated".to_string()),
                        model: Some(model.describe()),
                        serial: None,
                        firmware: None,
                        sim_model: Some(model.clone()),
                    },
                    backend: Backend::Sim(drive),
                })
            }
            TargetSpec::Path(path) => {
                let exists = std::fs::metadata(path).is_ok();
                let options = OpenOptions {
                    access,
                    create_len_bytes: create_len_bytes.filter(|_| !exists),
                    safety,
                };
                let target = match io_path {
                    IoPath::Direct => device::open(path, &options)?,
                    IoPath::Buffered => device::open_buffered(path, &options)?,
                };
                let described: TargetInfo = device::describe(&target);
                let name = path.display().to_string();
                Ok(BenchTarget {
                    name: name.clone(),
                    capacity_bytes: target.capacity_bytes,
                    logical_block_bytes: target.logical_block_bytes,
                    info: TargetFacts {
                        name,
                        kind: match target.kind {
                            device::TargetKind::File => "file",
                            device::TargetKind::BlockDevice => "block",
                        }
                        .to_string(),
                        capacity_bytes: target.capacity_bytes,
                        logical_block_bytes: target.logical_block_bytes,
                        transport: Some(described.transport),
                        model: described.model,
                        serial: described.serial,
                        firmware: described.firmware,
                        sim_model: None,
                    },
                    backend: Backend::Real(target),
                })
            }
        }
    }

    /// How this target's data moves: direct, or through the page cache.
    pub fn io_path(&self) -> IoPath {
        match &self.backend {
            Backend::Real(target) => target.io_path,
            Backend::Sim(_) => IoPath::Direct,
        }
    }

    /// Empties the page cache of a range of a buffered target ([`device::drop_cached`]);
    /// `None` for a target whose transfers never meet the page cache.
    pub fn drop_cached(
        &self,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<Option<CacheDrop>, BenchError> {
        match &self.backend {
            Backend::Real(target) if target.io_path == IoPath::Buffered => {
                Ok(Some(device::drop_cached(target, offset_bytes, len_bytes)?))
            }
            _ => Ok(None),
        }
    }

    /// The simulated drive behind this target, if it is one.
    pub fn sim_drive(&self) -> Option<&SimDrive> {
        match &self.backend {
            Backend::Sim(drive) => Some(drive),
            Backend::Real(_) => None,
        }
    }

    /// An engine over this target with `queue_depth` slots of `slot_bytes`.
    pub fn open_engine(
        &self,
        choice: EngineChoice,
        queue_depth: u32,
        slot_bytes: u64,
    ) -> Result<Box<dyn Engine>, BenchError> {
        let slot_bytes = slot_bytes.next_multiple_of(4096) as usize;
        let pool = BufferPool::new(queue_depth as usize, slot_bytes)?;
        let config = EngineConfig {
            queue_depth,
            sqpoll: false,
            caller_may_block: false,
        };
        match &self.backend {
            Backend::Sim(drive) => Ok(Box::new(drive.engine(pool, config)?)),
            Backend::Real(target) => {
                Ok(engine::open_engine(choice, &[&target.file], pool, config)?.engine)
            }
        }
    }
}

/// Facts about the run for every JSON and report: who measured what, where, how.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunMeta {
    pub schema: &'static str,
    pub schema_version: u32,
    /// "sweep", "fill", "overwrite", "profile".
    pub bench: String,
    pub nvrec_version: &'static str,
    pub kernel: String,
    pub hostname: String,
    /// UTC, `2026-11-22 09:17:10.123`.
    pub started_utc: String,
    pub target: TargetFacts,
    pub engine: String,
    pub engine_features: String,
    /// The settings as given, name to value, for people.
    pub settings: Vec<(String, String)>,
}

impl RunMeta {
    pub fn new(bench: &str, target: &BenchTarget, engine: &dyn Engine) -> RunMeta {
        let (kernel, hostname) = uname();
        let started_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos() as u64)
            .unwrap_or(0);
        RunMeta {
            schema: "nvrec.bench",
            schema_version: SCHEMA_VERSION,
            bench: bench.to_string(),
            nvrec_version: env!("CARGO_PKG_VERSION"),
            kernel,
            hostname,
            started_utc: crate::unit::format_utc_ns(started_ns),
            target: target.info.clone(),
            engine: engine.kind().name().to_string(),
            engine_features: engine.features(),
            settings: Vec::new(),
        }
    }
}

/// The kernel release and host name from uname(2).
fn uname() -> (String, String) {
    // SAFETY: uname fills the zeroed struct we pass.
    let name = unsafe {
        let mut name: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut name) != 0 {
            return (String::new(), String::new());
        }
        name
    };
    let text = |field: &[libc::c_char]| {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|c| **c != 0)
            // c_char is i8 on x86-64 and u8 on aarch64: take the byte either way.
            .map(|c| c.to_ne_bytes()[0])
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (text(&name.release), text(&name.nodename))
}

/// A simulated target for the benches' tests.
#[cfg(test)]
pub(crate) fn open_sim(spec: &str) -> BenchTarget {
    BenchTarget::open(
        &TargetSpec::parse(spec).expect("a valid sim: spec"),
        Access::Write,
        Safety::Check,
        None,
        IoPath::Direct,
    )
    .expect("the simulated drive opens")
}
