//! The self-test: the NVMe Streamer's test suite (TEST #00 to #11), rebuilt for software.
//!
//! Each test drives the real [`stream`] path against the real target: nothing is simulated.
//! Tests report as they go through a [`Reporter`] (the CLI prints a console log in the
//! streamer's style) and the whole run ends in a [`SelftestReport`] for `--json`.
//!
//! The suite writes over the target. The caller decides whether that is allowed (a scratch
//! file, or a device the user forced); this module only needs an open [`Target`].
//!
//! The suite runs within the target's capacity and needs [`CHUNK_COUNT_MIN`] chunks of it;
//! [`usable_bytes`] says, before anything is opened for writing, whether a target (or the
//! part of it `--size` gives) is enough, and [`run`] refuses one that is not before any I/O.
//! Tests that can use more (the sweep, stop and abort, the whole target) take what there is.

use crate::control::{Control, ControlState, Progress};
use crate::device::pcie::{self, PcieHop, Training};
use crate::device::{self, Target, TargetInfo};
use crate::pattern::{MismatchKind, Pattern};
use crate::sink::CheckSink;
use crate::source::{PatternSource, Source, ZeroSource};
use crate::stream::{
    self, AddressError, ChunkRange, EarlyEnd, FlushMode, Outcome, RangeEnd, RangeSpec, StopTrigger,
    StopWhen, StreamConfig, StreamError, StreamReport,
};
use crate::unit::{format_bytes, rate_mib_per_s};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest chunk count of the sweep and of the stop/abort tests, as in the streamer.
pub const SWEEP_CHUNK_COUNT_MAX: u64 = 32768;

/// Chunks the suite needs whatever the I/O size: TEST #07 writes and checks sessions over
/// the first 16 chunks (TEST #02 needs 11).
pub const CHUNK_COUNT_MIN: u64 = 16;

/// Chunks the suite needs with `config`: [`CHUNK_COUNT_MIN`], and enough for the stop and
/// abort tests (#05, #06) to end a write after a whole I/O has gone out. They stop after
/// 2/5 of their chunks and one more; an abort drops the chunks of an I/O not yet submitted,
/// so with fewer than 2.5 I/Os of chunks nothing would have been written before it, which
/// would read as a failure of the target.
pub fn chunk_count_needed(config: &StreamConfig) -> u64 {
    let chunks_per_io = (config.io_size_bytes / config.chunk_size_bytes.max(1)).max(1);
    CHUNK_COUNT_MIN.max((5 * chunks_per_io).div_ceil(2))
}

/// Bytes the suite needs with `config`.
pub fn bytes_needed(config: &StreamConfig) -> u64 {
    chunk_count_needed(config).saturating_mul(config.chunk_size_bytes)
}

/// What limits the bytes the suite may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The target's own size.
    Target,
    /// The `--size` given (a scratch file's size, or a part of a larger target).
    SizeOption,
}

/// Why the suite cannot run on a target: found before anything is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("{}", too_small_text(.target, *.needed_bytes, *.available_bytes, *.chunk_size_bytes, *.limit))]
    TooSmall {
        target: PathBuf,
        needed_bytes: u64,
        available_bytes: u64,
        chunk_size_bytes: u64,
        limit: Limit,
    },
    #[error("--size {} is more than {} has ({}); the self-test never grows a target: give a \
             --size of at most {}, or a larger target",
             format_bytes(*.asked_bytes), .target.display(), format_bytes(*.available_bytes),
             format_bytes(*.available_bytes))]
    SizeBeyondTarget {
        target: PathBuf,
        asked_bytes: u64,
        available_bytes: u64,
    },
}

fn too_small_text(
    target: &Path,
    needed_bytes: u64,
    available_bytes: u64,
    chunk_size_bytes: u64,
    limit: Limit,
) -> String {
    let needs = format!(
        "the self-test needs {} ({} chunks of {})",
        format_bytes(needed_bytes),
        needed_bytes / chunk_size_bytes.max(1),
        format_bytes(chunk_size_bytes)
    );
    let available = format_bytes(available_bytes);
    match limit {
        Limit::Target => format!(
            "{needs}, {} has {available}; give a larger target, or a smaller --chunk-size \
             or --io-size",
            target.display()
        ),
        Limit::SizeOption => format!(
            "{needs}, --size gives it {available} of {}; give a --size of at least {}",
            target.display(),
            format_bytes(needed_bytes)
        ),
    }
}

/// The bytes of `target` the suite may use, or why it cannot run there. `capacity_bytes` is
/// what the target holds, `None` for a file still to be created at `size_bytes`; `size_bytes`
/// is the `--size` asked for, which may limit an existing target but never grow it.
pub fn usable_bytes(
    target: &Path,
    capacity_bytes: Option<u64>,
    size_bytes: Option<u64>,
    config: &StreamConfig,
) -> Result<u64, SizeError> {
    if let (Some(available_bytes), Some(asked_bytes)) = (capacity_bytes, size_bytes) {
        if asked_bytes > available_bytes {
            return Err(SizeError::SizeBeyondTarget {
                target: target.to_path_buf(),
                asked_bytes,
                available_bytes,
            });
        }
    }
    let (usable, limit) = match size_bytes {
        Some(size_bytes) => (size_bytes, Limit::SizeOption),
        None => (capacity_bytes.unwrap_or(0), Limit::Target),
    };
    let needed_bytes = bytes_needed(config);
    if usable < needed_bytes {
        return Err(SizeError::TooSmall {
            target: target.to_path_buf(),
            needed_bytes,
            available_bytes: usable,
            chunk_size_bytes: config.chunk_size_bytes,
            limit,
        });
    }
    Ok(usable)
}

/// Receives the suite's progress as it happens.
pub trait Reporter {
    fn test_start(&mut self, number: u32, title: &str, description: &str);
    fn info(&mut self, line: &str);
    fn test_end(&mut self, number: u32, verdict: &Verdict);
    /// The chunk-count sweep's table (TEST #08), once it is complete.
    fn sweep_table(&mut self, _rows: &[SweepRow]) {}
}

/// A reporter that says nothing (for callers that want only the final report).
pub struct QuietReporter;

impl Reporter for QuietReporter {
    fn test_start(&mut self, _: u32, _: &str, _: &str) {}
    fn info(&mut self, _: &str) {}
    fn test_end(&mut self, _: u32, _: &Verdict) {}
}

/// How a test ended. A test with nothing to check on this target (the PCIe link of a file
/// or a virtual disk) is not applicable: neither a pass nor a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(TestFailure),
    /// Why there was nothing to check.
    NotApplicable(String),
}

/// The verdict's name in JSON (`tests[].verdict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Pass,
    Fail,
    NotApplicable,
}

impl Verdict {
    pub fn kind(&self) -> VerdictKind {
        match self {
            Verdict::Pass => VerdictKind::Pass,
            Verdict::Fail(_) => VerdictKind::Fail,
            Verdict::NotApplicable(_) => VerdictKind::NotApplicable,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TestResult {
    pub number: u32,
    pub title: String,
    pub verdict: VerdictKind,
    /// True only for a test that checked and passed (false when not applicable).
    pub passed: bool,
    #[serde(serialize_with = "crate::serialize_message")]
    pub failure: Option<TestFailure>,
    /// Why the test had nothing to check, when not applicable.
    pub not_applicable: Option<String>,
    pub log: Vec<String>,
}

impl TestResult {
    fn new(number: u32, title: &str, verdict: Verdict, log: Vec<String>) -> Self {
        let kind = verdict.kind();
        let (failure, not_applicable) = match verdict {
            Verdict::Pass => (None, None),
            Verdict::Fail(why) => (Some(why), None),
            Verdict::NotApplicable(why) => (None, Some(why)),
        };
        TestResult {
            number,
            title: title.to_string(),
            verdict: kind,
            passed: kind == VerdictKind::Pass,
            failure,
            not_applicable,
            log,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SweepRow {
    pub chunk_count: u64,
    pub offset_bytes: u64,
    pub bytes: u64,
    pub write_ns: u64,
    pub read_ns: u64,
    pub write_mib_per_s: f64,
    pub read_mib_per_s: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SelftestReport {
    pub target: std::path::PathBuf,
    pub capacity_bytes: u64,
    pub logical_block_bytes: u32,
    pub info: TargetInfo,
    pub chunk_size_bytes: u64,
    pub engine: Option<String>,
    pub tests: Vec<TestResult>,
    pub sweep: Vec<SweepRow>,
    pub whole_target_write_mib_per_s: Option<f64>,
    pub whole_target_read_mib_per_s: Option<f64>,
    pub test_count: u32,
    pub failed_count: u32,
    pub passed_count: u32,
    /// Tests with nothing to check on this target, counted apart from passes and failures.
    pub not_applicable_count: u32,
}

impl SelftestReport {
    pub fn passed(&self) -> bool {
        self.failed_count == 0 && self.test_count > 0
    }
}

struct Suite<'a> {
    target: &'a Target,
    config: StreamConfig,
    interrupt: &'a Control,
    reporter: &'a mut dyn Reporter,
    log: Vec<String>,
    sweep: Vec<SweepRow>,
    engine: Option<String>,
    whole_write_mib_per_s: Option<f64>,
    whole_read_mib_per_s: Option<f64>,
    /// Set by a test that found nothing to check (its `Ok` then becomes not applicable).
    not_applicable: Option<String>,
}

/// Why a test of the suite failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TestFailure {
    /// A write or read (`operation`) could not start.
    #[error("{0} could not start: {1}")]
    NotStarted(&'static str, std::sync::Arc<crate::stream::StreamError>),
    /// A write or read ended with an error.
    #[error("{0} failed: {1}")]
    Stream(&'static str, crate::stream::StreamFailure),
    /// Chunks read back that do not hold the pattern expected.
    #[error("{bad} of {of} chunks bad; first: {first}")]
    BadChunks {
        bad: u64,
        of: u64,
        first: crate::pattern::Mismatch,
    },
    #[error("read-back of {of} chunks failed: {first}")]
    ReadBack {
        of: u64,
        first: crate::pattern::Mismatch,
    },
    #[error("interrupted by the user")]
    Interrupted,
    #[error("the target is too small for this test (needs {0} chunks)")]
    TooSmall(u64),
    #[error("the flush did not run{0}")]
    NoFlush(&'static str),
    /// Links of the PCIe path trained below what both their ends can do.
    #[error("{}", .0.join("; "))]
    LinksBelow(Vec<String>),
    /// What a check expected and what it found, in the check's own words.
    #[error("{0}")]
    Unexpected(String),
}

/// Two failures are the same where they say the same (the errors they carry are not
/// comparable otherwise).
impl PartialEq for TestFailure {
    fn eq(&self, other: &TestFailure) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for TestFailure {}

type TestOutcome = Result<(), TestFailure>;

/// A check's expectation not met, in its own words.
fn fail<T>(text: impl Into<String>) -> Result<T, TestFailure> {
    Err(TestFailure::Unexpected(text.into()))
}

/// A stream run that started: its report, or the error it ended with as the failure of
/// the `operation` ("write", "read").
fn succeeded(report: StreamReport, operation: &'static str) -> Result<StreamReport, TestFailure> {
    match &report.error {
        Some(error) => Err(TestFailure::Stream(operation, error.clone())),
        None => Ok(report),
    }
}

impl Suite<'_> {
    fn info(&mut self, line: String) {
        self.reporter.info(&line);
        self.log.push(line);
    }

    fn chunk(&self) -> u64 {
        self.config.chunk_size_bytes
    }

    fn capacity_chunks(&self) -> u64 {
        self.target.capacity_bytes / self.chunk()
    }

    fn range(&self, first_offset_bytes: u64, chunk_count: u64) -> ChunkRange {
        ChunkRange {
            first_offset_bytes,
            chunk_count,
            chunk_size_bytes: self.chunk(),
        }
    }

    fn run_write(
        &mut self,
        range: ChunkRange,
        source: &mut dyn Source,
        flush: FlushMode,
        trigger: Option<StopTrigger>,
    ) -> Result<StreamReport, TestFailure> {
        let control = Control::new();
        let config = StreamConfig {
            flush,
            trigger,
            ..self.config
        };
        let report = stream::write(
            self.target,
            range,
            source,
            config,
            &control,
            &Progress::default(),
        )
        .map_err(|error| TestFailure::NotStarted("write", std::sync::Arc::new(error)))?;
        self.engine.get_or_insert_with(|| {
            format!("{} ({})", report.engine.name(), report.engine_features)
        });
        succeeded(report, "write")
    }

    fn write_pattern(
        &mut self,
        first_offset_bytes: u64,
        chunk_count: u64,
        seed: u64,
    ) -> Result<StreamReport, TestFailure> {
        self.info(format!(
            "Writing {chunk_count} chunks @ {first_offset_bytes:#x} with seed {seed:#x}"
        ));
        let range = self.range(first_offset_bytes, chunk_count);
        let report = self.run_write(
            range,
            &mut PatternSource(Pattern::new(seed)),
            FlushMode::AfterWrite,
            None,
        )?;
        self.info(format!(
            "Writing {} bytes took {} ns => {:.0} MiB/s",
            report.bytes,
            (report.elapsed_s * 1e9) as u64,
            report.rate_mib_per_s
        ));
        Ok(report)
    }

    fn read_check(
        &mut self,
        first_offset_bytes: u64,
        chunk_count: u64,
        seed: u64,
    ) -> Result<StreamReport, TestFailure> {
        let range = self.range(first_offset_bytes, chunk_count);
        let mut sink = CheckSink::new(Pattern::new(seed));
        let control = Control::new();
        let report = stream::read(
            self.target,
            range,
            &mut sink,
            self.config,
            &control,
            &Progress::default(),
        )
        .map_err(|error| TestFailure::NotStarted("read", std::sync::Arc::new(error)))?;
        succeeded(report, "read")
    }

    /// Reads and expects every chunk to hold the pattern of `seed`.
    fn expect_good(
        &mut self,
        first_offset_bytes: u64,
        chunk_count: u64,
        seed: u64,
    ) -> Result<StreamReport, TestFailure> {
        self.info(format!(
            "Reading {chunk_count} chunks @ {first_offset_bytes:#x}, expecting seed {seed:#x}"
        ));
        let report = self.read_check(first_offset_bytes, chunk_count, seed)?;
        let check = report.check.unwrap_or_default();
        match check.first_mismatch {
            None => {
                self.info(format!(
                    "Reading {} bytes took {} ns => {:.0} MiB/s, pattern good",
                    report.bytes,
                    (report.elapsed_s * 1e9) as u64,
                    report.rate_mib_per_s
                ));
                Ok(report)
            }
            Some(first) => Err(TestFailure::BadChunks {
                bad: check.bad_chunk_count,
                of: chunk_count,
                first,
            }),
        }
    }

    fn check_interrupt(&self) -> TestOutcome {
        match self.interrupt.state() {
            ControlState::Run => Ok(()),
            _ => Err(TestFailure::Interrupted),
        }
    }
}

/// Runs the whole suite on `target` (which it overwrites), within its capacity; a target
/// below [`bytes_needed`] is refused before any I/O. `config` carries no stop trigger: the
/// tests that stop (#05, #06) set their own, and every other test checks a whole run (the
/// CLI refuses `--stop-after`).
pub fn run(
    target: &Target,
    config: StreamConfig,
    interrupt: &Control,
    reporter: &mut dyn Reporter,
) -> Result<SelftestReport, SizeError> {
    assert!(
        config.trigger.is_none(),
        "the self-test's tests set their own stop triggers"
    );
    usable_bytes(&target.path, Some(target.capacity_bytes), None, &config)?;
    let info = device::describe(target);
    let mut suite = Suite {
        target,
        config,
        interrupt,
        reporter,
        log: Vec::new(),
        sweep: Vec::new(),
        engine: None,
        whole_write_mib_per_s: None,
        whole_read_mib_per_s: None,
        not_applicable: None,
    };
    type TestFn = fn(&mut Suite<'_>, &TargetInfo) -> TestOutcome;
    let tests: [(u32, &str, &str, TestFn); 12] = [
        (0, "test target and link status", "Shows what the target is. For an NVMe drive, checks the PCIe link of the drive and of its root port: each must run at the speed and width both ends of its link can do. A target not on the PCI bus has no link to check.", test_link),
        (1, "test flush of data beyond the range", "The source offers two chunks, the range takes one. The extra chunk must stay in the source and the chunk after the range must be untouched; the flush runs.", test_extra_source_data),
        (2, "test pattern checker", "Writes 10 chunks, then reads them back with a length error expected, with a seed error expected, and with no error expected.", test_pattern_checker),
        (3, "test flush after write", "Writes 100 chunks with flush after write; the flush must run, be timed, and the data read back.", test_flush_after_write),
        (4, "test early end of a chunk", "The source ends half-way through the second chunk of a range of four. The write must finish with the early end flag raised at that chunk (the streamer's 'finished' and 'early tlast'), the chunk padded with zeros, never dropped, and the flush run; the test fails if the flag is not raised. A source that ends on a chunk's boundary must not raise it.", test_early_end),
        (5, "test write abort", "Two cycles of write and read with different seeds; the second write is aborted. The checker must fail exactly on the first chunk not overwritten, which still holds the first seed.", test_abort),
        (6, "test write stop", "As #05, but the second write is stopped: every chunk already taken is written, then the flush runs.", test_stop),
        (7, "test sessions at adjacent addresses out of order", "Writes sessions at adjacent addresses out of order and reads them back in another order. No data may be overwritten or corrupted.", test_adjacent_sessions),
        (8, "test performance with different chunk counts per session", "Writes and reads 1, 2, 4 ... 32768 chunks (capped by the target's size) and measures each session.", test_sweep),
        (9, "test address errors", "Writes and reads with wrong first or last addresses. Each must fail with its own error before any I/O.", test_address_errors),
        (10, "test write and read of the whole target", "Writes and reads every chunk of the target and compares it.", test_whole_target),
        (11, "test target and link status", "As #00, after the load of the suite.", test_link),
    ];
    let mut results = Vec::new();
    for (number, title, description, test) in tests {
        suite.log.clear();
        suite.reporter.test_start(number, title, description);
        let outcome = suite
            .check_interrupt()
            .and_then(|()| test(&mut suite, &info));
        let verdict = match (outcome, suite.not_applicable.take()) {
            (Err(why), _) => Verdict::Fail(why),
            (Ok(()), Some(why)) => Verdict::NotApplicable(why),
            (Ok(()), None) => Verdict::Pass,
        };
        suite.reporter.test_end(number, &verdict);
        let log = std::mem::take(&mut suite.log);
        results.push(TestResult::new(number, title, verdict, log));
    }
    let count = |kind: VerdictKind| results.iter().filter(|r| r.verdict == kind).count() as u32;
    let (failed_count, passed_count) = (count(VerdictKind::Fail), count(VerdictKind::Pass));
    let not_applicable_count = count(VerdictKind::NotApplicable);
    Ok(SelftestReport {
        target: target.path.clone(),
        capacity_bytes: target.capacity_bytes,
        logical_block_bytes: target.logical_block_bytes,
        info,
        chunk_size_bytes: suite.config.chunk_size_bytes,
        engine: suite.engine,
        test_count: results.len() as u32,
        failed_count,
        passed_count,
        not_applicable_count,
        tests: results,
        sweep: suite.sweep,
        whole_target_write_mib_per_s: suite.whole_write_mib_per_s,
        whole_target_read_mib_per_s: suite.whole_read_mib_per_s,
    })
}

fn test_link(suite: &mut Suite<'_>, info: &TargetInfo) -> TestOutcome {
    let target = suite.target;
    suite.info(format!(
        "Target: {} ({}), {} bytes ({:#x}), logical block {} bytes",
        target.path.display(),
        info.transport,
        target.capacity_bytes,
        target.capacity_bytes,
        target.logical_block_bytes
    ));
    if let Some(model) = &info.model {
        suite.info(format!(
            "Model: {model}, serial {}, firmware {}",
            info.serial.as_deref().unwrap_or("?"),
            info.firmware.as_deref().unwrap_or("?")
        ));
    }
    if let Some(backing) = &info.loop_backing_file {
        suite.info(format!(
            "Loop device backed by {} (direct I/O {})",
            backing.display(),
            if info.loop_direct_io == Some(true) {
                "on"
            } else {
                "off"
            }
        ));
    }
    if let Some(device) = &info.backing_device {
        suite.info(format!("File on block device {device}"));
    }
    let (lines, verdict) = check_links(info);
    for line in lines {
        suite.info(line);
    }
    match verdict {
        Verdict::Pass => Ok(()),
        Verdict::Fail(why) => Err(why),
        Verdict::NotApplicable(why) => {
            suite.not_applicable = Some(why);
            Ok(())
        }
    }
}

/// One end of a PCIe link that TEST #00 judges: the drive's or its root port's.
struct LinkEnd<'a> {
    /// `drive`, `root port`.
    role: &'static str,
    /// The streamer's name for it in its status line: `SSD`, `RP`.
    tag: &'static str,
    hop: &'a PcieHop,
    /// The function at the link's other end, where sysfs shows one.
    partner: Option<&'a PcieHop>,
}

/// TEST #00 and #11 apart from the target: what the PCIe path says, line by line, and the
/// verdict. As the streamer's test checks its root port's link and its SSD's, the drive's
/// link and, where there is one, its root port's are each judged by [`pcie::training`]
/// against the function at the link's other end: either end trained below what its link can
/// do fails. A target with no PCIe path, or whose ends report no link state, has nothing to
/// check.
fn check_links(info: &TargetInfo) -> (Vec<String>, Verdict) {
    let mut lines = Vec::new();
    let path = &info.pcie_path;
    let Some(drive) = path.first() else {
        lines.push(format!(
            "No PCIe link to check: a {} target is not on the PCI bus",
            info.transport
        ));
        let why = format!("no PCIe link to check on a {} target", info.transport);
        return (lines, Verdict::NotApplicable(why));
    };
    let mut ends = vec![LinkEnd {
        role: "drive",
        tag: "SSD",
        hop: drive,
        partner: path.get(1),
    }];
    match info.pcie_root_port() {
        Some(root_port) => ends.push(LinkEnd {
            role: "root port",
            tag: "RP",
            hop: root_port,
            partner: path.get(path.len() - 2),
        }),
        None => lines.push("No root port: the drive sits on the host bridge itself".to_string()),
    }
    let mut status = Vec::new();
    let mut failures = Vec::new();
    let mut judged_count = 0;
    for end in ends.iter().rev() {
        let link = &end.hop.link;
        lines.push(format!(
            "PCIe link of the {} {}: {} x{} (maximum {} x{})",
            end.role,
            end.hop.address,
            link.current_speed,
            link.current_width,
            link.max_speed,
            link.max_width
        ));
        let training = pcie::training(link, end.partner.map(|partner| &partner.link));
        status.push(match (&training, pcie::generation(&link.current_speed)) {
            (Training::NotReported, _) | (_, None) => format!("{}_Link_Unknown", end.tag),
            (_, Some(generation)) => format!("{}_Gen{generation}_x{}", end.tag, link.current_width),
        });
        match training {
            Training::NotReported => lines.push(format!(
                "PCIe link state of the {} not reported (emulated or virtual device)",
                end.role
            )),
            Training::Full { speed, width } => {
                judged_count += 1;
                let limited = speed != link.max_speed || width != link.max_width;
                lines.push(format!(
                    "The {}'s link runs at what both its ends can do: {speed} x{width}{}",
                    end.role,
                    if limited {
                        " (the other end's maximum is lower than this end's)"
                    } else {
                        ""
                    }
                ));
            }
            Training::Below { speed, width } => {
                judged_count += 1;
                failures.push(format!(
                    "the {}'s link ({}) runs at {} x{}, below the {speed} x{width} both its \
                     ends can do",
                    end.role, end.hop.address, link.current_speed, link.current_width
                ));
            }
        }
    }
    if ends.len() == 1 {
        status.insert(0, "RP_None".to_string());
    }
    lines.push(format!("Link status: {}", status.join(" ")));
    let verdict = if !failures.is_empty() {
        Verdict::Fail(TestFailure::LinksBelow(failures))
    } else if judged_count == 0 {
        Verdict::NotApplicable(
            "the PCIe link state is not reported (emulated or virtual device)".to_string(),
        )
    } else {
        Verdict::Pass
    };
    (lines, verdict)
}

fn test_extra_source_data(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    let chunk = suite.chunk();
    suite.write_pattern(0, 2, 0xB)?;
    // A source holding two chunks of seed 0xA; the range takes one.
    let mut two_chunks = vec![0u8; 2 * chunk as usize];
    Pattern::new(0xA).fill(0, &mut two_chunks);
    let mut source = SliceSource {
        data: &two_chunks,
        position: 0,
    };
    suite.info("Writing 1 chunk from a source that offers 2".to_string());
    let report = suite.run_write(suite.range(0, 1), &mut source, FlushMode::AfterWrite, None)?;
    if report.flush_s.is_none() {
        return Err(TestFailure::NoFlush(""));
    }
    suite.info(format!(
        "Flush finished in {} ns",
        (report.flush_s.unwrap_or(0.0) * 1e9) as u64
    ));
    let left_bytes = two_chunks.len() - source.position;
    suite.info(format!(
        "{left_bytes} bytes left in the source, not written"
    ));
    if left_bytes as u64 != chunk {
        return fail(format!(
            "expected one chunk ({chunk} bytes) left in the source, found {left_bytes}"
        ));
    }
    suite.expect_good(0, 1, 0xA)?;
    suite.expect_good(chunk, 1, 0xB)?;
    Ok(())
}

/// An in-memory source, read in order.
struct SliceSource<'a> {
    data: &'a [u8],
    position: usize,
}

impl Source for SliceSource<'_> {
    fn read_at(&mut self, _offset_bytes: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let count = buf.len().min(self.data.len() - self.position);
        buf[..count].copy_from_slice(&self.data[self.position..self.position + count]);
        self.position += count;
        Ok(count)
    }
}

fn test_pattern_checker(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    let chunk = suite.chunk();
    // Clear 11 chunks so that the 11th holds no pattern at all.
    suite.run_write(
        suite.range(0, 11),
        &mut ZeroSource,
        FlushMode::AfterWrite,
        None,
    )?;
    suite.write_pattern(0, 10, 0x5EED)?;

    suite.info("Reading 11 chunks with a length error expected".to_string());
    let report = suite.read_check(0, 11, 0x5EED)?;
    match report.check.and_then(|check| check.first_mismatch) {
        Some(mismatch)
            if mismatch.kind == MismatchKind::EndsEarly && mismatch.offset_bytes == 10 * chunk =>
        {
            suite.info(format!("Expected length error: {mismatch}"));
        }
        other => {
            return fail(format!(
                "expected a length error at {:#x}, got {other:?}",
                10 * chunk
            ))
        }
    }

    suite.info("Reading 10 chunks with a seed error expected".to_string());
    let report = suite.read_check(0, 10, 0xBAD)?;
    match report.check.and_then(|check| check.first_mismatch) {
        Some(mismatch)
            if mismatch.kind == (MismatchKind::WrongSeed { found_seed: 0x5EED })
                && mismatch.offset_bytes == 0 =>
        {
            suite.info(format!("Expected seed error: {mismatch}"));
            suite.info(format!(
                "Captured error byte: {:#x} matches expected: {:#x}",
                mismatch.offset_bytes, 0
            ));
        }
        other => {
            return fail(format!(
                "expected a seed error at 0x0 naming seed 0x5eed, got {other:?}"
            ))
        }
    }

    suite.info("Reading 10 chunks with no errors expected".to_string());
    suite.expect_good(0, 10, 0x5EED)?;
    Ok(())
}

fn test_flush_after_write(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    let count = 100.min(suite.capacity_chunks());
    let report = suite.write_pattern(0, count, 3)?;
    match report.flush_s {
        Some(seconds) => suite.info(format!(
            "Flush after write finished in {} ns",
            (seconds * 1e9) as u64
        )),
        None => return Err(TestFailure::NoFlush(" after the write")),
    }
    suite.expect_good(0, count, 3)?;
    Ok(())
}

fn test_early_end(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    let chunk = suite.chunk();
    let mut data = vec![0u8; (chunk + chunk / 2) as usize];
    Pattern::new(4).fill(0, &mut data);
    let mut source = SliceSource {
        data: &data,
        position: 0,
    };
    suite.info("Writing 1.5 chunks into a range of 4 chunks".to_string());
    let report = suite.run_write(suite.range(0, 4), &mut source, FlushMode::AfterWrite, None)?;
    let early_end = check_early_end(&WriteStatus::of(&report), chunk)?;
    suite.info(format!("Expected early end flag set: {early_end}"));
    suite.info(format!(
        "Write finished: {} chunks, the source ended",
        report.chunk_count
    ));
    suite.info(format!(
        "Flush finished in {} ns",
        (report.flush_s.unwrap_or(0.0) * 1e9) as u64
    ));
    // The padded chunk holds half pattern, half zeros.
    let read = suite.read_check(0, 2, 4)?;
    match read.check.and_then(|check| check.first_mismatch) {
        Some(mismatch) if mismatch.offset_bytes == chunk + chunk / 2 => {
            suite.info(format!(
                "Padding starts at {:#x} as expected",
                mismatch.offset_bytes
            ));
        }
        other => {
            return fail(format!(
                "expected the padding to start at {:#x}, got {other:?}",
                chunk + chunk / 2
            ))
        }
    }
    // A source that ends on a chunk's boundary ends no chunk early: the flag tells the two
    // apart.
    let whole = &data[..chunk as usize];
    let mut source = SliceSource {
        data: whole,
        position: 0,
    };
    suite.info("Writing 1 whole chunk into a range of 4 chunks, no early end expected".to_string());
    let report = suite.run_write(suite.range(0, 4), &mut source, FlushMode::AfterWrite, None)?;
    if let Some(early_end) = report.early_end {
        return fail(format!(
            "a source that ends on a chunk's boundary raised the early end flag: {early_end}"
        ));
    }
    if report.outcome != Outcome::SourceEnded || report.chunk_count != 1 {
        return fail(format!(
            "expected 1 chunk written and the source ended, got {} chunks, outcome {:?}",
            report.chunk_count, report.outcome
        ));
    }
    suite.info("Early end flag not set, as expected".to_string());
    Ok(())
}

/// What TEST #04 reads from its write's report: the streamer's WRITE_STATUS, whose
/// 'finished' and 'early tlast' flags its test expects together.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WriteStatus {
    outcome: Outcome,
    chunk_count: u64,
    flushed: bool,
    early_end: Option<EarlyEnd>,
}

impl WriteStatus {
    fn of(report: &StreamReport) -> Self {
        WriteStatus {
            outcome: report.outcome,
            chunk_count: report.chunk_count,
            flushed: report.flush_s.is_some(),
            early_end: report.early_end,
        }
    }
}

/// TEST #04's rule: a source that ends half-way through the second chunk of a range of four
/// (of `chunk_size_bytes` each) must raise the early end flag at that chunk, half of it
/// padded, and the write must still finish (the source ended, both chunks written, the
/// flush run). No flag is a failure, as is a flag anywhere else. Returns the flag.
fn check_early_end(status: &WriteStatus, chunk_size_bytes: u64) -> Result<EarlyEnd, TestFailure> {
    let half = chunk_size_bytes / 2;
    let expected = EarlyEnd {
        chunk_index: 1,
        offset_bytes: chunk_size_bytes,
        filled_bytes: half,
        padded_bytes: half,
    };
    match status.early_end {
        None => {
            return fail(format!(
                "the early end flag was not raised: the source ended {half} bytes into chunk 1 \
                 at {chunk_size_bytes:#x}"
            ))
        }
        Some(early_end) if early_end != expected => {
            return fail(format!(
                "the early end flag was raised at the wrong place: expected {expected}, got \
                 {early_end}"
            ))
        }
        Some(_) => {}
    }
    if status.outcome != Outcome::SourceEnded || status.chunk_count != 2 {
        return fail(format!(
            "the write did not finish with the source ended and 2 chunks written: {} chunks, \
             outcome {:?}",
            status.chunk_count, status.outcome
        ));
    }
    if !status.flushed {
        return Err(TestFailure::NoFlush(" after the early end"));
    }
    Ok(expected)
}

fn test_abort(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    stop_or_abort(suite, ControlState::Abort)
}

fn test_stop(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    stop_or_abort(suite, ControlState::Stop)
}

fn stop_or_abort(suite: &mut Suite<'_>, action: ControlState) -> TestOutcome {
    let chunk = suite.chunk();
    let count = SWEEP_CHUNK_COUNT_MAX.min(suite.capacity_chunks());
    if count < 8 {
        return Err(TestFailure::TooSmall(8));
    }
    suite.write_pattern(0, count, 0x1111)?;
    suite.info(format!("Captured last address: {:#x}", (count - 1) * chunk));
    suite.expect_good(0, count, 0x1111)?;
    let after_chunk_count = count * 2 / 5 + 1;
    let word = if action == ControlState::Abort {
        "abort"
    } else {
        "stop"
    };
    suite.info(format!(
        "Writing {count} chunks with seed 0x2222, {word} after {after_chunk_count} chunks"
    ));
    let trigger = StopTrigger {
        when: StopWhen::AfterChunks(after_chunk_count),
        action,
    };
    let report = suite.run_write(
        suite.range(0, count),
        &mut PatternSource(Pattern::new(0x2222)),
        FlushMode::AfterWrite,
        Some(trigger),
    )?;
    let expected_outcome = if action == ControlState::Abort {
        Outcome::Aborted
    } else {
        Outcome::Stopped
    };
    if report.outcome != expected_outcome {
        return fail(format!(
            "expected outcome {expected_outcome:?}, got {:?}",
            report.outcome
        ));
    }
    suite.info(format!(
        "Write {}: flush ran in {} ns, {} chunks discarded",
        if action == ControlState::Abort {
            "aborted"
        } else {
            "stopped"
        },
        (report.flush_s.unwrap_or(0.0) * 1e9) as u64,
        report.discarded_chunk_count
    ));
    let Some(last) = report.last_offset_bytes else {
        return fail("no chunk was written before the stop");
    };
    suite.info(format!("Captured last address: {last:#x}"));
    if action == ControlState::Stop && last != (after_chunk_count - 1) * chunk {
        return fail(format!(
            "a stop must write every chunk taken: expected last address {:#x}, got {last:#x}",
            (after_chunk_count - 1) * chunk
        ));
    }
    suite.info(format!("Reading {count} chunks, expecting seed 0x2222"));
    let read = suite.read_check(0, count, 0x2222)?;
    let expected_offset = last + chunk;
    match read.check.and_then(|check| check.first_mismatch) {
        Some(mismatch)
            if mismatch.offset_bytes == expected_offset
                && mismatch.kind == (MismatchKind::WrongSeed { found_seed: 0x1111 }) =>
        {
            suite.info(format!(
                "Captured error byte: {:#x} matches expected: {expected_offset:#x} (old seed 0x1111 found)",
                mismatch.offset_bytes
            ));
            Ok(())
        }
        other => fail(format!(
            "expected the old seed 0x1111 from {expected_offset:#x} on, got {other:?}"
        )),
    }
}

fn test_adjacent_sessions(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    let chunk = suite.chunk();
    if suite.capacity_chunks() < 16 {
        return Err(TestFailure::TooSmall(16));
    }
    suite.write_pattern(0, 16, 7)?;
    suite.expect_good(0, 16, 7)?;
    // Sessions of 4 chunks at chunk 10, 2 and 6, out of order, with their own seeds.
    let sessions = [(10u64, 0x70u64), (2, 0x71), (6, 0x72)];
    for (first_chunk, seed) in sessions {
        suite.write_pattern(first_chunk * chunk, 4, seed)?;
    }
    for (first_chunk, seed) in [sessions[2], sessions[0], sessions[1]] {
        suite.expect_good(first_chunk * chunk, 4, seed)?;
    }
    // What no session touched still holds the first write.
    for (first_chunk, count) in [(0u64, 2u64), (14, 2)] {
        suite.expect_good(first_chunk * chunk, count, 7)?;
    }
    Ok(())
}

fn test_sweep(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    let chunk = suite.chunk();
    let mut chunk_count = 1u64;
    // Session n sits at n chunks from the start, as in the streamer's log.
    while chunk_count <= SWEEP_CHUNK_COUNT_MAX
        && 2 * chunk_count * chunk <= suite.target.capacity_bytes
    {
        suite.check_interrupt()?;
        let offset_bytes = chunk_count * chunk;
        let range = suite.range(offset_bytes, chunk_count);
        let seed = 0x800 + chunk_count;
        let write = suite.run_write(
            range,
            &mut PatternSource(Pattern::new(seed)),
            FlushMode::None,
            None,
        )?;
        let write_ns = (write.elapsed_s * 1e9) as u64;
        suite.info(format!(
            "Writing {chunk_count} chunks @ {offset_bytes:#x}: {} bytes took {write_ns} ns => {:.0} MiB/s",
            write.bytes, write.rate_mib_per_s
        ));
        let read = suite.read_check(offset_bytes, chunk_count, seed)?;
        if let Some(mismatch) = read.check.and_then(|check| check.first_mismatch) {
            return fail(format!(
                "read-back of {chunk_count} chunks failed: {mismatch}"
            ));
        }
        let read_ns = (read.elapsed_s * 1e9) as u64;
        suite.info(format!(
            "Reading {chunk_count} chunks @ {offset_bytes:#x}: {} bytes took {read_ns} ns => {:.0} MiB/s",
            read.bytes, read.rate_mib_per_s
        ));
        suite.sweep.push(SweepRow {
            chunk_count,
            offset_bytes,
            bytes: write.bytes,
            write_ns,
            read_ns,
            write_mib_per_s: rate_mib_per_s(write.bytes, Duration::from_nanos(write_ns)),
            read_mib_per_s: rate_mib_per_s(read.bytes, Duration::from_nanos(read_ns)),
        });
        chunk_count *= 2;
    }
    if suite.sweep.is_empty() {
        return Err(TestFailure::TooSmall(2));
    }
    suite.reporter.sweep_table(&suite.sweep);
    Ok(())
}

fn test_address_errors(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    let chunk = suite.chunk();
    let capacity = suite.target.capacity_bytes;
    let last_chunk = (capacity / chunk - 1) * chunk;
    // Marker data that an erroneous run would change.
    suite.write_pattern(0, 2, 0x99)?;
    type Case = (&'static str, RangeSpec, fn(&AddressError) -> bool);
    // Writes and reads are refused alike, except that only a write checks its first
    // address's alignment here and only a read its last's.
    let beyond_target: Case = (
        "last address beyond the target",
        RangeSpec {
            first_offset_bytes: 0,
            end: RangeEnd::LastOffset(last_chunk + chunk),
        },
        |e| matches!(e, AddressError::BeyondTarget { .. }),
    );
    let first_after_last: Case = (
        "first address greater than last",
        RangeSpec {
            first_offset_bytes: chunk,
            end: RangeEnd::LastOffset(0),
        },
        |e| matches!(e, AddressError::FirstAfterLast { .. }),
    );
    let unaligned_first: Case = (
        "unaligned first address",
        RangeSpec {
            first_offset_bytes: 512,
            end: RangeEnd::ChunkCount(1),
        },
        |e| matches!(e, AddressError::FirstUnaligned { .. }),
    );
    let unaligned_last: Case = (
        "unaligned last address",
        RangeSpec {
            first_offset_bytes: 0,
            end: RangeEnd::LastOffset(chunk + 512),
        },
        |e| matches!(e, AddressError::LastUnaligned { .. }),
    );
    let cases = [
        ("Writing", beyond_target),
        ("Writing", first_after_last),
        ("Writing", unaligned_first),
        ("Reading", beyond_target),
        ("Reading", first_after_last),
        ("Reading", unaligned_last),
    ];
    for (verb, (what, spec, expected)) in cases {
        suite.info(format!("{verb} with {what}"));
        match stream::plan(suite.target, spec, &suite.config) {
            Err(StreamError::Address(error)) if expected(&error) => {
                suite.info(format!("{verb} refused as expected: {error}"));
            }
            other => {
                return fail(format!(
                    "{verb} with {what}: expected its own address error, got {other:?}"
                ))
            }
        }
    }
    // Nothing was written by the refused runs.
    suite.expect_good(0, 2, 0x99)?;
    Ok(())
}

fn test_whole_target(suite: &mut Suite<'_>, _: &TargetInfo) -> TestOutcome {
    let count = suite.capacity_chunks();
    suite.info(format!("Writing all {count} chunks of the target"));
    let write = suite.write_pattern(0, count, 0x10)?;
    suite.whole_write_mib_per_s = Some(write.rate_mib_per_s);
    let read = suite.expect_good(0, count, 0x10)?;
    suite.whole_read_mib_per_s = Some(read.rate_mib_per_s);
    suite.info(format!(
        "Captured write last address: {:#x}",
        write.last_offset_bytes.unwrap_or(0)
    ));
    suite.info(format!(
        "Captured read last address: {:#x}",
        read.last_offset_bytes.unwrap_or(0)
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn usable(capacity: Option<u64>, size: Option<u64>) -> Result<u64, SizeError> {
        usable_bytes(Path::new("/t"), capacity, size, &StreamConfig::default())
    }

    #[test]
    fn the_suite_needs_sixteen_chunks_and_two_and_a_half_ios() {
        let config = |chunk_size_bytes: u64, io_size_bytes: u64| StreamConfig {
            chunk_size_bytes,
            io_size_bytes,
            ..StreamConfig::default()
        };
        // 128 KiB chunks in 1 MiB I/Os: 2.5 I/Os are 20 chunks.
        assert_eq!(bytes_needed(&StreamConfig::default()), 20 * (128 << 10));
        assert_eq!(chunk_count_needed(&config(128 << 10, 128 << 10)), 16);
        assert_eq!(chunk_count_needed(&config(64 << 10, 4 * MIB)), 160);
        assert_eq!(usable(Some(2560 << 10), None), Ok(2560 << 10));
        assert_eq!(
            usable(Some(MIB), None).unwrap_err().to_string(),
            "the self-test needs 2.50 MiB (20 chunks of 128 KiB), /t has 1 MiB; give a larger \
             target, or a smaller --chunk-size or --io-size"
        );
    }

    #[test]
    fn size_limits_an_existing_target_and_never_grows_it() {
        assert_eq!(usable(Some(64 * MIB), Some(4 * MIB)), Ok(4 * MIB));
        assert_eq!(
            usable(Some(3 * MIB), Some(4 * MIB)),
            Err(SizeError::SizeBeyondTarget {
                target: PathBuf::from("/t"),
                asked_bytes: 4 * MIB,
                available_bytes: 3 * MIB,
            })
        );
        let error = usable(Some(64 * MIB), Some(MIB)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the self-test needs 2.50 MiB (20 chunks of 128 KiB), --size gives it 1 MiB of /t; \
             give a --size of at least 2.50 MiB"
        );
    }

    #[test]
    fn a_file_to_be_created_is_judged_by_its_size() {
        assert_eq!(usable(None, Some(3 * MIB)), Ok(3 * MIB));
        assert!(matches!(
            usable(None, Some(2 * MIB)),
            Err(SizeError::TooSmall {
                limit: Limit::SizeOption,
                ..
            })
        ));
    }

    const CHUNK: u64 = 128 << 10;

    fn finished(early_end: Option<EarlyEnd>) -> WriteStatus {
        WriteStatus {
            outcome: Outcome::SourceEnded,
            chunk_count: 2,
            flushed: true,
            early_end,
        }
    }

    #[test]
    fn test_04_expects_the_early_end_flag_and_fails_without_it() {
        let raised = EarlyEnd {
            chunk_index: 1,
            offset_bytes: CHUNK,
            filled_bytes: CHUNK / 2,
            padded_bytes: CHUNK / 2,
        };
        assert_eq!(check_early_end(&finished(Some(raised)), CHUNK), Ok(raised));
        assert_eq!(
            raised.to_string(),
            "early end of chunk 1 at 0x20000: the source gave 65536 of its 131072 bytes, 65536 \
             zero bytes pad it"
        );
        let elsewhere = EarlyEnd {
            chunk_index: 2,
            offset_bytes: 2 * CHUNK,
            ..raised
        };
        let shorter = EarlyEnd {
            filled_bytes: 1000,
            padded_bytes: CHUNK - 1000,
            ..raised
        };
        let cases = [
            (finished(None), "the early end flag was not raised"),
            (finished(Some(elsewhere)), "raised at the wrong place"),
            (finished(Some(shorter)), "raised at the wrong place"),
            (
                WriteStatus {
                    outcome: Outcome::Complete,
                    ..finished(Some(raised))
                },
                "did not finish with the source ended",
            ),
            (
                WriteStatus {
                    outcome: Outcome::Failed,
                    ..finished(Some(raised))
                },
                "did not finish with the source ended",
            ),
            (
                WriteStatus {
                    chunk_count: 1,
                    ..finished(Some(raised))
                },
                "2 chunks written: 1 chunks",
            ),
            (
                WriteStatus {
                    flushed: false,
                    ..finished(Some(raised))
                },
                "the flush did not run",
            ),
        ];
        for (status, expected) in cases {
            let why = check_early_end(&status, CHUNK).expect_err("a failure");
            assert!(why.to_string().contains(expected), "{status:?}: {why}");
        }
    }

    const GEN1: &str = "2.5 GT/s PCIe";
    const GEN3: &str = "8.0 GT/s PCIe";
    const GEN4: &str = "16.0 GT/s PCIe";

    fn hop(address: &str, current: (&str, u32), max: (&str, u32)) -> PcieHop {
        PcieHop {
            address: address.to_string(),
            link: device::PcieLink {
                current_speed: current.0.to_string(),
                current_width: current.1,
                max_speed: max.0.to_string(),
                max_width: max.1,
            },
            bytes_per_s: None,
        }
    }

    fn nvme(pcie_path: Vec<PcieHop>) -> TargetInfo {
        TargetInfo {
            transport: "nvme".to_string(),
            pcie_link: pcie_path.first().map(|hop| hop.link.clone()),
            pcie_path,
            ..TargetInfo::default()
        }
    }

    const DRIVE: &str = "0000:01:00.0";
    const ROOT_PORT: &str = "0000:00:01.0";

    #[test]
    fn test_00_judges_the_drive_link_and_the_root_port_link() {
        let unknown = ("Unknown", 0);
        // (case, path from the drive to the root port, verdict, a line of the log or the
        // failure).
        let cases: Vec<(&str, Vec<PcieHop>, VerdictKind, &str)> = vec![
            (
                "the streamer's: both links Gen3 x4",
                vec![
                    hop(DRIVE, (GEN3, 4), (GEN3, 4)),
                    hop(ROOT_PORT, (GEN3, 4), (GEN3, 4)),
                ],
                VerdictKind::Pass,
                "Link status: RP_Gen3_x4 SSD_Gen3_x4",
            ),
            (
                "an x4 link trained at x2: both ends say so",
                vec![
                    hop(DRIVE, (GEN3, 2), (GEN3, 4)),
                    hop(ROOT_PORT, (GEN3, 2), (GEN3, 4)),
                ],
                VerdictKind::Fail,
                "the root port's link (0000:00:01.0) runs at 8.0 GT/s PCIe x2, below the 8.0 \
                 GT/s PCIe x4 both its ends can do; the drive's link (0000:01:00.0) runs at 8.0 \
                 GT/s PCIe x2",
            ),
            (
                "a Gen4 link trained at Gen1",
                vec![
                    hop(DRIVE, (GEN1, 4), (GEN4, 4)),
                    hop(ROOT_PORT, (GEN1, 4), (GEN4, 4)),
                ],
                VerdictKind::Fail,
                "below the 16.0 GT/s PCIe x4",
            ),
            (
                "a Gen4 drive in a Gen3 slot runs at all its link can do",
                vec![
                    hop(DRIVE, (GEN3, 4), (GEN4, 4)),
                    hop(ROOT_PORT, (GEN3, 4), (GEN3, 4)),
                ],
                VerdictKind::Pass,
                "The drive's link runs at what both its ends can do: 8.0 GT/s PCIe x4 (the \
                 other end's maximum is lower than this end's)",
            ),
            (
                "an x4 drive in an x16 slot",
                vec![
                    hop(DRIVE, (GEN4, 4), (GEN4, 4)),
                    hop(ROOT_PORT, (GEN4, 4), (GEN4, 16)),
                ],
                VerdictKind::Pass,
                "Link status: RP_Gen4_x4 SSD_Gen4_x4",
            ),
            (
                "behind a switch, the root port's x8 uplink trained at x4",
                vec![
                    hop(DRIVE, (GEN3, 4), (GEN3, 4)),
                    hop("0000:02:01.0", (GEN3, 4), (GEN3, 4)),
                    hop("0000:01:00.0", (GEN3, 4), (GEN3, 8)),
                    hop(ROOT_PORT, (GEN3, 4), (GEN3, 8)),
                ],
                VerdictKind::Fail,
                "the root port's link (0000:00:01.0) runs at 8.0 GT/s PCIe x4, below the 8.0 \
                 GT/s PCIe x8 both its ends can do",
            ),
            (
                "an emulated drive on the host bridge (QEMU's q35)",
                vec![hop("0000:00:02.0", unknown, ("Unknown", 255))],
                VerdictKind::NotApplicable,
                "Link status: RP_None SSD_Link_Unknown",
            ),
            (
                "a drive on the host bridge with a link",
                vec![hop("0000:00:02.0", (GEN3, 4), (GEN3, 4))],
                VerdictKind::Pass,
                "No root port: the drive sits on the host bridge itself",
            ),
            (
                "an emulated drive behind a root port that reports its link",
                vec![
                    hop(DRIVE, unknown, ("Unknown", 255)),
                    hop(ROOT_PORT, (GEN1, 1), (GEN1, 1)),
                ],
                VerdictKind::Pass,
                "PCIe link state of the drive not reported",
            ),
        ];
        for (case, path, expected, text) in cases {
            let (lines, verdict) = check_links(&nvme(path));
            assert_eq!(verdict.kind(), expected, "{case}: {verdict:?} {lines:#?}");
            let failure = match &verdict {
                Verdict::Fail(why) => why.to_string(),
                _ => String::new(),
            };
            assert!(
                failure.contains(text) || lines.iter().any(|line| line.contains(text)),
                "{case}: {text:?} not in {failure:?} {lines:#?}"
            );
        }
        // A loop device (or a file) has no PCIe path.
        let loop_device = TargetInfo {
            transport: "loop".to_string(),
            ..TargetInfo::default()
        };
        assert_eq!(
            check_links(&loop_device),
            (
                vec!["No PCIe link to check: a loop target is not on the PCI bus".to_string()],
                Verdict::NotApplicable("no PCIe link to check on a loop target".to_string())
            )
        );
        // A failure at one end only names that end.
        let (_, verdict) = check_links(&nvme(vec![
            hop(DRIVE, (GEN3, 4), (GEN3, 4)),
            hop("0000:01:00.0", (GEN3, 4), (GEN3, 8)),
            hop(ROOT_PORT, (GEN3, 4), (GEN3, 8)),
        ]));
        assert!(
            matches!(&verdict, Verdict::Fail(TestFailure::LinksBelow(below)) if !below.iter().any(|b| b.contains("drive's"))),
            "{verdict:?}"
        );
    }

    #[test]
    fn test_00_on_the_captured_qemu_tree_finds_no_root_port_and_no_link_state() {
        let root = std::env::temp_dir().join(format!("nvrec-selftest-qemu-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("dev/block")).unwrap();
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qemu-nvme/sysfs.tar.gz");
        let status = std::process::Command::new("tar")
            .arg("-xf")
            .arg(&fixture)
            .arg("-C")
            .arg(&root)
            .status()
            .expect("tar runs");
        assert!(status.success());
        // The kernel's dev/block link, which the capture leaves out.
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/0000:00:02.0/nvme/nvme0/nvme0n1",
            root.join("dev/block/259:0"),
        )
        .unwrap();
        let info = device::sysfs::Sysfs::at(&root).describe_block(device::sysfs::DevNum {
            major: 259,
            minor: 0,
        });
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(info.transport, "nvme");
        let addresses: Vec<&str> = info
            .pcie_path
            .iter()
            .map(|hop| hop.address.as_str())
            .collect();
        assert_eq!(addresses, ["0000:00:02.0"]);
        assert!(info.pcie_root_port().is_none());
        let (lines, verdict) = check_links(&info);
        assert_eq!(
            verdict,
            Verdict::NotApplicable(
                "the PCIe link state is not reported (emulated or virtual device)".to_string()
            )
        );
        assert_eq!(
            lines,
            [
                "No root port: the drive sits on the host bridge itself",
                "PCIe link of the drive 0000:00:02.0: Unknown x0 (maximum Unknown x255)",
                "PCIe link state of the drive not reported (emulated or virtual device)",
                "Link status: RP_None SSD_Link_Unknown",
            ]
        );
    }

    #[test]
    fn the_link_tests_are_not_applicable_on_a_file_and_counted_apart() {
        let path = std::env::temp_dir().join(format!("nvrec-selftest-na-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let options = device::OpenOptions {
            access: device::Access::Write,
            create_len_bytes: Some(4 * MIB),
            safety: device::Safety::Check,
        };
        let target = device::open(&path, &options).expect("open a scratch file");
        let report = run(
            &target,
            StreamConfig::default(),
            &Control::new(),
            &mut QuietReporter,
        );
        drop(target);
        let _ = std::fs::remove_file(&path);
        let report = report.expect("the suite runs");
        for test in &report.tests {
            let expected = if matches!(test.number, 0 | 11) {
                VerdictKind::NotApplicable
            } else {
                VerdictKind::Pass
            };
            assert_eq!(test.verdict, expected, "TEST #{:02}: {test:?}", test.number);
            assert_eq!(test.passed, expected == VerdictKind::Pass);
        }
        assert_eq!(
            report.tests[0].not_applicable.as_deref(),
            Some("no PCIe link to check on a file target")
        );
        assert_eq!(
            (
                report.passed_count,
                report.not_applicable_count,
                report.failed_count
            ),
            (10, 2, 0)
        );
        assert!(report.passed(), "not applicable is no failure");
        // TEST #04 saw its early end flag raised where the source ended, and not where the
        // source ended on a chunk's boundary.
        let early_end = &report.tests[4].log;
        assert!(
            early_end.iter().any(|line| line
                == "Expected early end flag set: early end of chunk 1 at 0x20000: the source \
                    gave 65536 of its 131072 bytes, 65536 zero bytes pad it"),
            "{early_end:#?}"
        );
        assert!(
            early_end
                .iter()
                .any(|line| line == "Early end flag not set, as expected"),
            "{early_end:#?}"
        );
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["tests"][0]["verdict"], "not_applicable");
        assert_eq!(json["tests"][1]["verdict"], "pass");
        assert_eq!(json["not_applicable_count"], 2);
    }
}
