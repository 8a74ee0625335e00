//! One conformance suite, run against every engine: the same writes, reads, stops, aborts
//! and failures must behave the same whether io_uring or the thread pool moves the bytes.
//!
//! Targets are regular files in a directory these tests create under the system temp dir.

use nvrec::control::{Control, ControlState, Progress};
use nvrec::device::{self, Access, OpenOptions, Safety, Target};
use nvrec::engine::{EngineChoice, EngineKind, IoErrorKind, IoOp};
use nvrec::pattern::{MismatchKind, Pattern};
use nvrec::sink::{CheckSink, Sink};
use nvrec::source::{PatternSource, Source, ZeroSource};
use nvrec::stream::{self, ChunkRange, FlushMode, Outcome, StopTrigger, StopWhen, StreamConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

const CHUNK: u64 = 128 << 10;

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nvrec-conformance-{}-{}-{name}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn target(&self, len_bytes: u64) -> Target {
        let options = OpenOptions {
            access: Access::Write,
            create_len_bytes: Some(len_bytes),
            safety: Safety::Check,
        };
        device::open(&self.0.join("target.img"), &options).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The engines this kernel offers; io_uring is skipped, with a reason, where it is disabled.
fn engines() -> Vec<EngineKind> {
    let mut kinds = vec![EngineKind::Threads];
    match io_uring::IoUring::new(8) {
        Ok(_) => kinds.push(EngineKind::IoUring),
        Err(error) => nvrec_testkit::skip(
            nvrec_testkit::IO_URING,
            format_args!("the io_uring engine is left out: {error}"),
        ),
    }
    kinds
}

fn config(engine: EngineKind) -> StreamConfig {
    StreamConfig {
        engine: EngineChoice::Only(engine),
        ..StreamConfig::default()
    }
}

fn range(first_chunk: u64, chunk_count: u64) -> ChunkRange {
    ChunkRange {
        first_offset_bytes: first_chunk * CHUNK,
        chunk_count,
        chunk_size_bytes: CHUNK,
    }
}

fn write(
    target: &Target,
    range: ChunkRange,
    source: &mut dyn Source,
    config: StreamConfig,
) -> stream::StreamReport {
    stream::write(
        target,
        range,
        source,
        config,
        &Control::new(),
        &Progress::default(),
    )
    .unwrap()
}

fn check(
    target: &Target,
    range: ChunkRange,
    seed: u64,
    config: StreamConfig,
) -> stream::StreamReport {
    let mut sink = CheckSink::new(Pattern::new(seed));
    stream::read(
        target,
        range,
        &mut sink,
        config,
        &Control::new(),
        &Progress::default(),
    )
    .unwrap()
}

fn first_mismatch(report: &stream::StreamReport) -> Option<nvrec::pattern::Mismatch> {
    report.check.and_then(|check| check.first_mismatch)
}

#[test]
fn round_trip_in_every_shape() {
    for engine in engines() {
        let scratch = Scratch::new("shapes");
        let target = scratch.target(64 << 20);
        // (chunk size, I/O size, queue depth): coalesced, one chunk per I/O, depth 1, big chunks.
        let shapes = [
            (CHUNK, 1 << 20, 32),
            (CHUNK, CHUNK, 4),
            (4096, 4096, 1),
            (1 << 20, 4 << 20, 3),
            (CHUNK, 3 * CHUNK, 5),
        ];
        for (seed, (chunk, io, depth)) in shapes.into_iter().enumerate() {
            let config = StreamConfig {
                chunk_size_bytes: chunk,
                io_size_bytes: io,
                queue_depth: depth,
                ..config(engine)
            };
            let chunk_count = (20 << 20) / chunk + 3;
            let range = ChunkRange {
                first_offset_bytes: chunk * 2,
                chunk_count,
                chunk_size_bytes: chunk,
            };
            let report = write(
                &target,
                range,
                &mut PatternSource(Pattern::new(seed as u64)),
                config,
            );
            assert_eq!(
                report.outcome,
                Outcome::Complete,
                "{engine:?} {chunk} {io} {depth}"
            );
            assert_eq!(report.engine, engine);
            assert_eq!(report.bytes, range.len_bytes());
            assert_eq!(report.last_offset_bytes, Some(range.last_offset_bytes()));
            assert!(report.flush_s.is_some());
            let read = check(&target, range, seed as u64, config);
            assert!(
                read.is_success(),
                "{engine:?} {chunk} {io} {depth}: {:?}",
                read.check
            );
            assert_eq!(read.check.unwrap().checked_chunk_count, chunk_count);
        }
    }
}

/// A sink that insists on address order.
struct OrderSink {
    next_offset_bytes: u64,
    chunk_count: u64,
}

impl Sink for OrderSink {
    fn consume(&mut self, offset_bytes: u64, chunk: &[u8]) -> std::io::Result<()> {
        assert_eq!(
            offset_bytes, self.next_offset_bytes,
            "chunks reach the sink in address order"
        );
        self.next_offset_bytes += chunk.len() as u64;
        self.chunk_count += 1;
        Ok(())
    }
}

#[test]
fn reads_reach_the_sink_in_address_order() {
    for engine in engines() {
        let scratch = Scratch::new("order");
        let target = scratch.target(32 << 20);
        let config = StreamConfig {
            queue_depth: 64,
            io_size_bytes: CHUNK,
            ..config(engine)
        };
        let range = range(0, 256);
        let mut sink = OrderSink {
            next_offset_bytes: 0,
            chunk_count: 0,
        };
        let report = stream::read(
            &target,
            range,
            &mut sink,
            config,
            &Control::new(),
            &Progress::default(),
        )
        .unwrap();
        assert_eq!(report.outcome, Outcome::Complete);
        assert_eq!(sink.chunk_count, 256);
    }
}

#[test]
fn stop_writes_every_chunk_taken_and_nothing_beyond() {
    for engine in engines() {
        let scratch = Scratch::new("stop");
        let target = scratch.target(16 << 20);
        let all = range(0, 128);
        write(
            &target,
            all,
            &mut PatternSource(Pattern::new(1)),
            config(engine),
        );
        let trigger = StopTrigger {
            when: StopWhen::AfterChunks(45),
            action: ControlState::Stop,
        };
        let config_stop = StreamConfig {
            trigger: Some(trigger),
            ..config(engine)
        };
        let report = write(
            &target,
            all,
            &mut PatternSource(Pattern::new(2)),
            config_stop,
        );
        assert_eq!(report.outcome, Outcome::Stopped);
        assert_eq!(report.chunk_count, 45);
        assert_eq!(report.last_offset_bytes, Some(44 * CHUNK));
        assert!(report.flush_s.is_some(), "a stop flushes");
        let read = check(&target, all, 2, config(engine));
        let mismatch = first_mismatch(&read).expect("the old data starts after the stop");
        assert_eq!(mismatch.offset_bytes, 45 * CHUNK);
        assert_eq!(mismatch.kind, MismatchKind::WrongSeed { found_seed: 1 });
        assert!(check(&target, range(45, 83), 1, config(engine)).is_success());
    }
}

#[test]
fn abort_discards_what_was_not_submitted() {
    for engine in engines() {
        let scratch = Scratch::new("abort");
        let target = scratch.target(16 << 20);
        let all = range(0, 128);
        write(
            &target,
            all,
            &mut PatternSource(Pattern::new(1)),
            config(engine),
        );
        // 8 chunks per I/O: an abort after 45 chunks drops the 5 in the slot being filled.
        let trigger = StopTrigger {
            when: StopWhen::AfterChunks(45),
            action: ControlState::Abort,
        };
        let config_abort = StreamConfig {
            trigger: Some(trigger),
            ..config(engine)
        };
        let report = write(
            &target,
            all,
            &mut PatternSource(Pattern::new(2)),
            config_abort,
        );
        assert_eq!(report.outcome, Outcome::Aborted);
        assert_eq!(report.chunk_count, 40);
        assert_eq!(report.discarded_chunk_count, 5);
        assert_eq!(report.last_offset_bytes, Some(39 * CHUNK));
        assert!(report.flush_s.is_some(), "an abort flushes too");
        assert!(check(&target, range(0, 40), 2, config(engine)).is_success());
        assert!(
            check(&target, range(40, 88), 1, config(engine)).is_success(),
            "nothing beyond was touched"
        );
    }
}

/// A source that ends part-way through a chunk.
struct ShortSource {
    left_bytes: usize,
}

impl Source for ShortSource {
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        // Hand out odd-sized pieces, as a pipe does.
        let count = buf.len().min(self.left_bytes).min(10_000);
        let len = buf.len();
        Pattern::new(5).fill(offset_bytes, &mut buf[..count.next_multiple_of(8).min(len)]);
        self.left_bytes -= count;
        Ok(count)
    }
}

#[test]
fn a_short_final_chunk_is_padded_and_reported() {
    for engine in engines() {
        let scratch = Scratch::new("short");
        let target = scratch.target(4 << 20);
        let mut source = ShortSource {
            left_bytes: 2 * CHUNK as usize + 1000,
        };
        let report = write(&target, range(0, 16), &mut source, config(engine));
        assert_eq!(report.outcome, Outcome::SourceEnded);
        assert_eq!(report.chunk_count, 3);
        assert_eq!(report.padded_bytes, CHUNK - 1000);
        // The early end is raised, naming the short chunk.
        assert_eq!(
            report.early_end,
            Some(stream::EarlyEnd {
                chunk_index: 2,
                offset_bytes: 2 * CHUNK,
                filled_bytes: 1000,
                padded_bytes: CHUNK - 1000,
            }),
            "{engine:?}"
        );
        // A source that ends on a chunk's boundary ends no chunk early.
        let mut source = ShortSource {
            left_bytes: 2 * CHUNK as usize,
        };
        let report = write(&target, range(0, 16), &mut source, config(engine));
        assert_eq!(report.outcome, Outcome::SourceEnded);
        assert_eq!((report.chunk_count, report.padded_bytes), (2, 0));
        assert_eq!(report.early_end, None, "{engine:?}");
    }
}

#[test]
fn a_failed_write_names_the_cause_and_the_offset() {
    for engine in engines() {
        let scratch = Scratch::new("readonly");
        drop(scratch.target(4 << 20));
        // The same file, opened read-only, cannot be written.
        let options = OpenOptions {
            access: Access::Read,
            create_len_bytes: None,
            safety: Safety::Check,
        };
        let target = device::open(&scratch.0.join("target.img"), &options).unwrap();
        let report = write(&target, range(2, 4), &mut ZeroSource, config(engine));
        assert_eq!(report.outcome, Outcome::Failed);
        let error = report.io_error.expect("an I/O error");
        assert_eq!(
            (error.op, error.kind, error.offset_bytes),
            (IoOp::Write, IoErrorKind::NotPermitted, 2 * CHUNK)
        );
        assert_eq!(report.last_offset_bytes, None);
        assert!(!report.is_success());
    }
}

#[test]
fn reading_past_the_end_of_a_file_is_a_zero_transfer_error() {
    for engine in engines() {
        let scratch = Scratch::new("eof");
        let mut target = scratch.target(CHUNK * 4);
        write(
            &target,
            range(0, 4),
            &mut PatternSource(Pattern::new(8)),
            config(engine),
        );
        // Pretend the target is bigger than the file: the kernel returns 0 bytes at the end.
        target.capacity_bytes = CHUNK * 8;
        let config = StreamConfig {
            io_size_bytes: CHUNK,
            queue_depth: 1,
            ..config(engine)
        };
        let report = check(&target, range(0, 8), 8, config);
        assert_eq!(report.outcome, Outcome::Failed);
        assert_eq!(
            report.io_error.map(|e| e.kind),
            Some(IoErrorKind::ZeroTransfer)
        );
        assert_eq!(
            report.chunk_count, 4,
            "everything before the end was read and checked"
        );
        assert_eq!(report.check.unwrap().bad_chunk_count, 0);
    }
}

#[test]
fn auto_prefers_io_uring_and_reports_the_engine() {
    let scratch = Scratch::new("auto");
    let target = scratch.target(1 << 20);
    let report = write(
        &target,
        range(0, 8),
        &mut ZeroSource,
        StreamConfig::default(),
    );
    let expected = if engines().contains(&EngineKind::IoUring) {
        EngineKind::IoUring
    } else {
        EngineKind::Threads
    };
    assert_eq!(report.engine, expected);
    assert_eq!(
        report.engine_fallback_reason.is_some(),
        expected == EngineKind::Threads
    );
}

#[test]
fn no_flush_means_no_flush() {
    let scratch = Scratch::new("noflush");
    let target = scratch.target(1 << 20);
    let config = StreamConfig {
        flush: FlushMode::None,
        ..StreamConfig::default()
    };
    let report = write(&target, range(0, 8), &mut ZeroSource, config);
    assert_eq!(report.flush_s, None);
}
