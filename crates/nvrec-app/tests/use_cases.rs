//! Each use case's outcome and class, from the application layer alone: no terminal, no
//! process, files in a directory of the test's own as the drives. A front end (the CLI,
//! the service) only parses, calls these and prints; what they decide is tested here.

use nvrec::control::{Control, Progress};
use nvrec::device::Safety;
use nvrec::engine::EngineChoice;
use nvrec::export::{Compression, ExportOptions, Format, Gaps as ExportGaps, Output};
use nvrec::recording::marks::{MarkOrder, MarkRequest};
use nvrec::recording::volume;
use nvrec::recording::{Fill, MemberFailure, Stripe};
use nvrec::window::Window;
use nvrec_app::archiving::{self, ArchiveRequest};
use nvrec_app::chunks::ChunkSource;
use nvrec_app::export::{self, ExportTo};
use nvrec_app::record::{self, CaptureRequest, RecordRequest, RecordRun};
use nvrec_app::repairing::{self, RepairRequest};
use nvrec_app::replay::{self, Gaps, Passes, ReplayOutcome, ReplayRequest, Selection};
use nvrec_app::sources::Samples;
use nvrec_app::verify::{self, Bad, VerifyRequest, VerifyRun};
use nvrec_app::{marking, Class};
use nvrec_archive::catalog::CatalogLocation;
use nvrec_archive::store::ArchiveUrl;
use nvrec_archive::upload::ArchiveOptions;
use nvrec_testkit::TempDir;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MEMBER_BYTES: u64 = 16 << 20;
const CHUNK_BYTES: u64 = 64 << 10;

/// A directory with an input file of `len` bytes and two members still to be made.
struct Bench {
    dir: TempDir,
    input: Vec<u8>,
}

impl Bench {
    fn new(name: &str, len: usize) -> Bench {
        let dir = TempDir::new(&format!("app-{name}"));
        // No two chunks alike, so that a chunk out of place shows.
        let input = nvrec_testkit::noise(len, 0x5eed);
        std::fs::write(dir.0.join("input"), &input).unwrap();
        Bench { dir, input }
    }

    fn members(&self) -> Vec<PathBuf> {
        vec![self.dir.0.join("m0"), self.dir.0.join("m1")]
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.0.join(name)
    }

    fn request(&self) -> RecordRequest {
        RecordRequest {
            targets: self.members(),
            sources: vec![self.path("input").display().to_string()],
            capture: CaptureRequest::default(),
            seed: 0,
            size: None,
            duration: None,
            rate_bytes_per_s: None,
            chunk_size_bytes: CHUNK_BYTES,
            io_size_bytes: None,
            queue_depth: 8,
            buffer_bytes: Some(4 << 20),
            // Member 0 takes the first write, which `damage_first_chunk` goes by.
            stripe: Stripe::RoundRobin,
            fill: Fill::Linear,
            append: false,
            reclaim: None,
            keep: None,
            overwrite: false,
            label: "use case".into(),
            sync_interval: Duration::from_secs(1),
            create_len_bytes: Some(MEMBER_BYTES),
            engine: EngineChoice::Auto,
            on_member_failure: MemberFailure::Retire,
            member_timeout: Duration::from_secs(5),
            safety: Safety::Check,
            realtime_priority: None,
            samples: Samples::default(),
            health_interval: None,
            max_marked: 0.5,
            flow_index: nvrec::recording::writer::FlowIndex::default(),
            mark_triggers: Default::default(),
            usable: None,
        }
    }

    fn record(&self, request: RecordRequest) -> RecordRun {
        let plan = record::plan(request).expect("a plan");
        let handle = record::RecordHandle::default();
        let source = record::open_source(&plan, &handle).expect("the input opens");
        record::run(&plan, source, &handle, &Control::new(), Box::new(|_| {}))
    }

    /// Records the input whole and says so.
    fn recorded(self) -> Self {
        let run = self.record(self.request());
        assert_eq!(run.class(), Class::Done);
        let report = run.report.as_ref().unwrap();
        assert_eq!(report.stream_bytes, self.input.len() as u64);
        self
    }

    fn source(&self) -> ChunkSource {
        ChunkSource::open(&self.members()).expect("the set opens")
    }

    /// Flips a byte in the payload of the recording's first chunk on member 0.
    fn damage_first_chunk(&self) {
        let set =
            volume::open(&self.members(), nvrec::device::Access::Read, Safety::Check).unwrap();
        let entry = nvrec::recording::reader::recordings(&set)
            .unwrap()
            .remove(0);
        let slot = entry.members[0].start_slot_index;
        assert!(
            entry.members[0].end_slot_index > slot,
            "member 0 holds chunks"
        );
        let member = set.members[0].as_ref().unwrap();
        let offset = member.layout().data_slot_offset_bytes(slot).unwrap() + 4096;
        drop(set);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.members()[0])
            .unwrap();
        let mut byte = [0u8; 1];
        file.read_exact_at(&mut byte, offset).unwrap();
        file.write_all_at(&[byte[0] ^ 0xff], offset).unwrap();
        file.sync_all().unwrap();
    }
}

fn replay_request() -> ReplayRequest {
    ReplayRequest {
        recording: None,
        mark: None,
        from: None,
        to: None,
        speed: None,
        streams: Vec::new(),
        gaps: Gaps::Skip,
        engine: EngineChoice::Auto,
        passes: Passes::Times(1),
    }
}

fn verify_request() -> VerifyRequest {
    VerifyRequest {
        recording: None,
        mark: None,
        seed: None,
        strict: false,
        engine: EngineChoice::Auto,
        from: None,
        to: None,
    }
}

fn verified(bench: &Bench) -> VerifyRun {
    let source = bench.source();
    let request = verify_request();
    let selected = verify::select(&source, &request).unwrap();
    verify::verify(&source, &selected, &request, &Control::new(), &mut ()).unwrap()
}

fn replayed_to(bench: &Bench, out: &Path) -> replay::ReplayReport {
    let source = bench.source();
    let request = replay_request();
    let selections = Selection::all(&source, &request).unwrap();
    let writer = BufWriter::new(File::create(out).unwrap());
    let progress = Progress::default();
    let mut reports = replay::replay_all(
        &source,
        selections,
        &request,
        Box::new(writer),
        &Control::new(),
        &progress,
    )
    .unwrap();
    assert_eq!(reports.len(), 1);
    reports.remove(0)
}

#[test]
fn record_takes_its_input_whole_or_says_the_target_was_full() {
    let bench = Bench::new("record", 3 << 20);
    let run = bench.record(bench.request());
    assert_eq!(run.class(), Class::Done);
    let report = run.report.as_ref().unwrap();
    assert_eq!(report.stream_bytes, 3 << 20);
    assert_eq!(report.lost_bytes, 0);

    // More input than two members of 16 MiB hold: full, what fitted kept and said.
    let big = Bench::new("record-full", 40 << 20);
    let mut request = big.request();
    request.fill = Fill::Linear;
    let run = big.record(request);
    assert_eq!(
        run.class(),
        Class::Full,
        "{:?}",
        run.report.as_ref().map(|r| r.outcome)
    );
    let kept = run.report.as_ref().unwrap().stream_bytes;
    assert!(kept > 0 && kept < 40 << 20, "{kept}");
    assert_eq!(
        verified(&big).class(),
        Class::Done,
        "what a full target kept reads whole"
    );
}

#[test]
fn replay_gives_back_the_stream_and_fails_on_a_damaged_chunk() {
    let bench = Bench::new("replay", 2 << 20).recorded();
    let out = bench.path("replayed");
    let report = replayed_to(&bench, &out);
    assert_eq!(report.outcome, ReplayOutcome::Complete);
    assert_eq!(report.class(), Class::Done);
    assert_eq!(std::fs::read(&out).unwrap(), bench.input);

    bench.damage_first_chunk();
    let report = replayed_to(&bench, &out);
    assert_eq!(report.class(), Class::Failed);
    assert_eq!(report.summary.damage_count, 1, "{:?}", report.problems);
    let written = std::fs::read(&out).unwrap();
    assert_eq!(written.len() as u64, report.written_bytes);
    assert!(
        bench.input.ends_with(&written),
        "the rest given back as recorded"
    );
}

#[test]
fn verify_passes_a_whole_set_and_names_the_first_bad_chunk() {
    let bench = Bench::new("verify", 2 << 20).recorded();
    let run = verified(&bench);
    assert_eq!(run.class(), Class::Done);
    assert_eq!(run.checks.len(), 1);
    assert!(run.checks[0].first_bad.is_none());

    bench.damage_first_chunk();
    let run = verified(&bench);
    assert_eq!(run.class(), Class::Failed);
    let bad = run.checks[0].first_bad.as_ref().expect("named");
    let Bad::Damaged {
        member_index, what, ..
    } = bad
    else {
        panic!("{bad}");
    };
    assert_eq!(*member_index, 0, "{bad}");
    assert!(what.contains("CRC"), "{bad}");

    // Stopped before the first recording: not good, whatever was read.
    let source = bench.source();
    let stopped = Control::new();
    stopped.request_stop();
    let selected = verify::select(&source, &verify_request()).unwrap();
    let run = verify::verify(&source, &selected, &verify_request(), &stopped, &mut ()).unwrap();
    assert!(run.interrupted);
    assert_eq!(run.class(), Class::Failed);
    assert!(run.checks.is_empty());
}

fn export_options(format: Format) -> ExportOptions {
    ExportOptions {
        format,
        window: Window {
            from_ns: None,
            to_ns: None,
        },
        streams: None,
        gaps: ExportGaps::Skip,
        compression: Compression::None,
        filter: None,
        flows: None,
    }
}

fn exported(bench: &Bench, format: Format, to: &Path) -> anyhow::Result<export::ExportReport> {
    let source = bench.source();
    let entry = source.select(None).unwrap();
    export::export(
        &source,
        entry,
        export_options(format),
        ExportTo::One(Output::File(to.to_path_buf())),
        EngineChoice::Auto,
        &Control::new(),
        &Progress::default(),
    )
}

#[test]
fn export_writes_samples_as_sigmf_and_refuses_a_format_the_recording_cannot_be() {
    let bench = Bench::new("export", 1 << 20);
    let mut request = bench.request();
    request.samples = Samples {
        datatype: Some("ci16_le".into()),
        sample_rate: Some("1000000".into()),
        center_freq: None,
        meta: Vec::new(),
    };
    assert_eq!(bench.record(request).class(), Class::Done);
    let to = bench.path("out.sigmf-data");
    let report = exported(&bench, Format::Sigmf, &to).unwrap();
    assert_eq!(report.class(), Class::Done);
    assert_eq!(std::fs::read(&to).unwrap(), bench.input);
    assert!(bench.path("out.sigmf-meta").exists());

    // A byte stream is not packets: refused as a usage error, nothing written.
    let pcapng = bench.path("out.pcapng");
    let refused = exported(&bench, Format::Pcapng, &pcapng).expect_err("refused");
    assert_eq!(Class::of_error(&refused), Class::Usage, "{refused:#}");
    assert!(!pcapng.exists());

    // A damaged chunk: the export holds the rest and fails.
    bench.damage_first_chunk();
    let report = exported(&bench, Format::Sigmf, &to).unwrap();
    assert_eq!(report.class(), Class::Failed);
    assert_eq!(report.summary.damage_count, 1);
}

#[test]
fn archive_to_a_directory_is_read_back_whole_and_refuses_memory() {
    let bench = Bench::new("archive", 3 << 20).recorded();
    let store = bench.path("store");
    let request = |url: ArchiveUrl| ArchiveRequest {
        targets: bench.members(),
        url,
        options: ArchiveOptions::new("node-a".into()),
        state_path: bench.path("archive-state.sqlite"),
        catalog: CatalogLocation::File(bench.path("catalog.sqlite")),
        delete_after_verify: false,
    };
    let refused = archiving::archive(
        &request(ArchiveUrl::Memory),
        &Control::new(),
        &Progress::default(),
    )
    .err()
    .expect("memory is refused");
    assert_eq!(Class::of_error(&refused), Class::Usage);

    let run = archiving::archive(
        &request(ArchiveUrl::File(store.clone())),
        &Control::new(),
        &Progress::default(),
    )
    .unwrap();
    assert_eq!(run.class(), Class::Done);
    assert_eq!(run.recordings.len(), 1);
    let url = PathBuf::from(format!("file://{}", store.display()));
    let archived = ChunkSource::open(&[url]).expect("the archive opens");
    let request = verify_request();
    let selected = verify::select(&archived, &request).unwrap();
    let check = verify::verify(&archived, &selected, &request, &Control::new(), &mut ()).unwrap();
    assert_eq!(check.class(), Class::Done);
    assert_eq!(
        check.checks[0].summary.payload_bytes,
        bench.input.len() as u64
    );
}

#[test]
fn a_mark_is_refused_where_no_ring_records_and_a_long_label_before_anything_opens() {
    let bench = Bench::new("mark", 1 << 20).recorded();
    let take = |label: &str| {
        MarkOrder::Take(MarkRequest {
            before: Duration::from_secs(1),
            after: Duration::from_secs(1),
            label: label.into(),
        })
    };
    let long = "x".repeat(nvrec::layout::LABEL_MAX_BYTES + 1);
    let missing = [bench.path("no-such-member")];
    let refused = marking::mark(&missing, &take(&long)).expect_err("refused");
    assert_eq!(Class::of_error(&refused), Class::Usage, "{refused:#}");
    assert!(format!("{refused:#}").contains("--label"), "{refused:#}");

    // No recorder runs on the set: nothing to take a mark.
    let refused = marking::mark(&bench.members(), &take("now")).expect_err("refused");
    assert_eq!(Class::of_error(&refused), Class::Usage, "{refused:#}");
    assert!(
        format!("{refused:#}").contains("no recording runs"),
        "{refused:#}"
    );

    // A release with no recorder is done on the drives, and a mark that is not there is
    // named as such.
    let refused = marking::mark(&bench.members(), &MarkOrder::Release(77)).expect_err("refused");
    assert_ne!(Class::of_error(&refused), Class::Done);
    assert!(format!("{refused:#}").contains("77"), "{refused:#}");
}

#[test]
fn repair_leaves_a_whole_set_as_it_was_mends_a_lost_copy_and_fails_without_a_member() {
    let bench = Bench::new("repair", 1 << 20).recorded();
    let request = RepairRequest {
        targets: bench.members(),
        scan: false,
    };
    let run = repairing::repair(&request, &Control::new()).unwrap();
    assert!(run.was_whole());
    assert_eq!(run.class(), Class::Done);

    // Superblock copy A of member 1 zeroed: rewritten from what survives.
    let mut member = OpenOptions::new()
        .write(true)
        .open(&bench.members()[1])
        .unwrap();
    member.seek(SeekFrom::Start(0)).unwrap();
    member.write_all(&[0u8; 4096]).unwrap();
    member.sync_all().unwrap();
    drop(member);
    let run = repairing::repair(&request, &Control::new()).unwrap();
    assert!(!run.was_whole());
    assert!(!run.report.rewrote.is_empty(), "{:?}", run.report);
    assert_eq!(run.class(), Class::Done, "{:?}", run.report);
    assert!(repairing::repair(&request, &Control::new())
        .unwrap()
        .was_whole());

    // Member 1 not given: not whole, whatever member 0 says.
    let alone = RepairRequest {
        targets: vec![bench.members()[0].clone()],
        scan: false,
    };
    let run = repairing::repair(&alone, &Control::new()).unwrap();
    assert_eq!(run.report.missing_members, vec![1]);
    assert_eq!(run.class(), Class::Failed);
}
