//! Marks (format 1.7): a window of a ring recording, asked while it records, is kept out of
//! the ring: the ring goes round several more times, jumping over its slots, and both the
//! mark and the ring's last lap read back whole, byte for byte. Simulated disks
//! (deterministic: the mark is asked at a fixed stream offset, time is virtual).

use nvrec::control::{Control, Progress};
use nvrec::device::{Access, Safety};
use nvrec::engine::{EngineChoice, SimDisks};
use nvrec::layout::{RecordingEntry, RecordingFlags, RecordingState};
use nvrec::pattern::Pattern;
use nvrec::recording::disk::Members;
use nvrec::recording::marks::{self, MarkAnswer, MarkDesk, MarkOrder, MarkRefusal, MarkRequest};
use nvrec::recording::reader::{self, Item, ReadSummary};
use nvrec::recording::retention::ReclaimRefused;
use nvrec::recording::volume::{self, VolumeSet};
use nvrec::recording::writer::{self, RecordOptions, RecordReport};
use nvrec::recording::{Fill, RecordingError, Stripe};
use nvrec::source::{PatternSource, Source};
use std::io;
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "recovery across kept slots in many simulated crashes";

const DISK_BYTES: u64 = 8 << 20;
const CHUNK_BYTES: u32 = 8192;
const SEED: u64 = 41;

/// The pattern, asking the desk for `order` once the stream reaches `at` bytes.
struct AskAt {
    pattern: PatternSource,
    desk: Arc<MarkDesk>,
    orders: Vec<(u64, MarkOrder)>,
    answers: Vec<mpsc::Receiver<Result<MarkAnswer, MarkRefusal>>>,
}

impl Source for AskAt {
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        while self
            .orders
            .first()
            .is_some_and(|(at, _)| offset_bytes >= *at)
        {
            let (_, order) = self.orders.remove(0);
            self.answers.push(self.desk.ask(order));
        }
        self.pattern.read_at(offset_bytes, buf)
    }

    fn may_block(&self) -> bool {
        false
    }
}

fn options(limit_bytes: u64, desk: &Arc<MarkDesk>) -> RecordOptions {
    options_with_pool(limit_bytes, desk, 16 * u64::from(CHUNK_BYTES))
}

fn options_with_pool(limit_bytes: u64, desk: &Arc<MarkDesk>, pool: u64) -> RecordOptions {
    RecordOptions {
        chunk_size_bytes: CHUNK_BYTES,
        io_chunk_count: 2,
        queue_depth: 4,
        buffer_bytes: pool,
        stripe: Stripe::RoundRobin,
        fill: Fill::Ring { trim: false },
        limit_bytes: Some(limit_bytes),
        pattern: true,
        marks: Some(desk.clone()),
        ..RecordOptions::default()
    }
}

fn take(before_ms: u64, after_ms: u64, label: &str) -> MarkOrder {
    MarkOrder::Take(MarkRequest {
        before: Duration::from_millis(before_ms),
        after: Duration::from_millis(after_ms),
        label: label.into(),
    })
}

/// Records `limit_bytes` of the pattern as a ring, asking `orders` on the way.
fn record(
    sim: &SimDisks,
    limit_bytes: u64,
    orders: Vec<(u64, MarkOrder)>,
) -> (RecordReport, Vec<Result<MarkAnswer, MarkRefusal>>) {
    // Drives of 100 MB/s in virtual time: a mark's window in time is one in bytes.
    for disk in 0..sim.disk_count() {
        sim.slow(disk, 100e6);
    }
    record_asking(sim, orders, |desk| options(limit_bytes, desk))
}

/// Records the pattern with the options `options` makes for the marks' desk, asking
/// `orders` on the way; the report and each order's answer.
fn record_asking(
    sim: &SimDisks,
    orders: Vec<(u64, MarkOrder)>,
    options: impl FnOnce(&Arc<MarkDesk>) -> RecordOptions,
) -> (RecordReport, Vec<Result<MarkAnswer, MarkRefusal>>) {
    let desk = Arc::new(MarkDesk::default());
    let mut source = AskAt {
        pattern: PatternSource(Pattern::new(SEED)),
        desk: desk.clone(),
        orders,
        answers: Vec::new(),
    };
    let report = writer::record_on(
        Members::Sim(sim),
        &mut source,
        &options(&desk),
        &Control::new(),
        &Progress::default(),
    )
    .unwrap();
    let answers = source
        .answers
        .iter()
        .map(|answer| answer.recv_timeout(Duration::from_secs(5)).unwrap())
        .collect();
    (report, answers)
}

fn open(sim: &SimDisks) -> VolumeSet {
    volume::open_members(Members::Sim(sim), Access::Read, Safety::Check).unwrap()
}

/// What a read handed out: the stream ranges of its chunks (each checked against the
/// pattern), and anything missing or damaged.
#[derive(Default, Debug)]
struct ReadBack {
    first_offset: Option<u64>,
    end_offset: u64,
    /// The last chunk's time (ns since the epoch).
    last_time_ns: u64,
    bytes: u64,
    trouble: Vec<String>,
}

fn collect(
    read: impl FnOnce(&mut dyn FnMut(Item<'_>) -> bool) -> Result<ReadSummary, RecordingError>,
) -> Result<ReadBack, RecordingError> {
    let pattern = Pattern::new(SEED);
    let mut back = ReadBack::default();
    let mut last_end = None;
    read(&mut |item: Item<'_>| {
        match item {
            Item::Chunk { header, payload } => {
                let mut expected = vec![0u8; payload.len()];
                pattern.fill(header.stream_offset_bytes, &mut expected);
                if expected != payload {
                    back.trouble
                        .push(format!("sequence {} differs", header.sequence));
                }
                if last_end.is_some_and(|end| end != header.stream_offset_bytes) {
                    back.trouble
                        .push(format!("a hole before sequence {}", header.sequence));
                }
                back.first_offset.get_or_insert(header.stream_offset_bytes);
                last_end = Some(header.stream_offset_bytes + payload.len() as u64);
                back.end_offset = last_end.unwrap_or(0);
                back.last_time_ns = header.timestamp_ns;
                back.bytes += payload.len() as u64;
            }
            Item::Missing {
                first_sequence,
                count,
            } => back
                .trouble
                .push(format!("{count} missing from {first_sequence}")),
            Item::Damage(damage) => back.trouble.push(format!("damage: {}", damage.what)),
        }
        true
    })?;
    Ok(back)
}

fn read_recording(set: &VolumeSet, entry: &RecordingEntry) -> ReadBack {
    let (control, progress) = (Control::new(), Progress::default());
    collect(|each| {
        reader::read_recording(set, entry, EngineChoice::Auto, &control, &progress, each)
    })
    .unwrap()
}

fn read_mark(set: &VolumeSet, id: u32) -> Result<ReadBack, RecordingError> {
    let (control, progress) = (Control::new(), Progress::default());
    collect(|each| {
        reader::read_mark_from(set, id, EngineChoice::Auto, None, &control, &progress, each)
    })
}

#[test]
fn a_mark_survives_a_ring_that_goes_round_three_more_times() {
    let sim = SimDisks::new(2, DISK_BYTES, 4096, 7);
    let lap_bytes = 2 * DISK_BYTES;
    let at = lap_bytes / 2;
    let (report, answers) = record(&sim, 4 * lap_bytes, vec![(at, take(10, 10, "event"))]);
    assert!(report.error.is_none(), "{:?}", report.error);
    assert!(
        report.members.iter().all(|m| m.laps >= 3),
        "{:?}",
        report.members
    );
    let answer = answers[0].clone().expect("the mark is taken");
    assert_eq!(answer.mark_id, report.recording_id + 1);
    assert!(answer.before_ns > 0, "{answer:?}");

    let set = open(&sim);
    let marks = marks::marks_of(&set, report.recording_id).unwrap();
    assert_eq!(marks.len(), 1);
    let mark = &marks[0];
    assert_eq!(mark.state, RecordingState::Closed);
    assert!(mark.flags.contains(RecordingFlags::MARK));
    assert_eq!(mark.name.as_str(), "event");
    let back = read_mark(&set, mark.recording_id).unwrap();
    assert!(back.trouble.is_empty(), "mark: {:?}", back.trouble);
    let first = back.first_offset.expect("the mark holds chunks");
    assert!(first < at && back.end_offset > at, "{back:?} around {at}");
    assert_eq!(back.bytes, mark.stream_len_bytes);

    // The ring's own read: its last lap, whole, and the mark's old chunks not in it.
    let entry = reader::recordings(&set).unwrap().pop().unwrap();
    let ring = read_recording(&set, &entry);
    assert!(ring.trouble.is_empty(), "ring: {:?}", ring.trouble);
    assert_eq!(ring.end_offset, report.stream_bytes);
    assert!(ring.first_offset.unwrap() > back.end_offset);
}

#[test]
fn a_mark_larger_than_marks_may_keep_is_refused_with_the_size_it_needs() {
    let sim = SimDisks::new(1, DISK_BYTES, 4096, 3);
    let (report, answers) = record(
        &sim,
        2 * DISK_BYTES,
        vec![(DISK_BYTES, take(60_000, 0, "all"))],
    );
    assert!(report.error.is_none());
    let error = answers[0].clone().unwrap_err();
    let MarkRefusal::TooLarge {
        member: 0,
        need_bytes,
        allowed_bytes,
        ..
    } = error
    else {
        panic!("{error}");
    };
    assert!(need_bytes > allowed_bytes, "{error}");
    let text = error.to_string();
    assert!(
        text.contains("needs") && text.contains("--max-marked"),
        "{text}"
    );
    let set = open(&sim);
    assert!(marks::marks_of(&set, report.recording_id)
        .unwrap()
        .is_empty());
}

#[test]
fn a_released_mark_is_refused_and_the_ring_writes_over_it() {
    let sim = SimDisks::new(1, DISK_BYTES, 4096, 5);
    let orders = vec![
        (DISK_BYTES / 2, take(10, 10, "first")),
        (DISK_BYTES, MarkOrder::Release(2)),
    ];
    let (report, answers) = record(&sim, 3 * DISK_BYTES, orders);
    assert!(report.error.is_none());
    assert!(
        answers[0].is_ok() && answers[1].as_ref().unwrap().released,
        "{answers:?}"
    );
    let set = open(&sim);
    let error = read_mark(&set, 2).unwrap_err();
    assert!(
        matches!(error, RecordingError::MarkReleased { mark_id: 2, .. }),
        "{error}"
    );
    let entry = reader::recordings(&set).unwrap().pop().unwrap();
    let ring = read_recording(&set, &entry);
    assert!(ring.trouble.is_empty(), "ring: {:?}", ring.trouble);
    assert_eq!(ring.end_offset, report.stream_bytes);
}

/// A crash (and the power cut after it) anywhere while a mark records its after-window,
/// or after: a mark the recorder answered for is listed once after recovery, closed, and
/// reads back whole; the ring reads back whole too.
#[test]
fn a_crash_during_a_mark_keeps_every_mark_it_answered_for() {
    let mut answered_count = 0;
    for step in 1..=24u64 {
        let sim = SimDisks::new(1, DISK_BYTES, 4096, 100 + step);
        sim.slow(0, 100e6);
        // The whole run takes some 2,400 operations; crash within its first two thirds.
        sim.crash_at(60 * step + 300);
        let desk = Arc::new(MarkDesk::default());
        let mut source = AskAt {
            pattern: PatternSource(Pattern::new(SEED)),
            desk: desk.clone(),
            orders: vec![(DISK_BYTES / 2, take(5, 20, "crash"))],
            answers: Vec::new(),
        };
        let _ = writer::record_on(
            Members::Sim(&sim),
            &mut source,
            &options(3 * DISK_BYTES, &desk),
            &Control::new(),
            &Progress::default(),
        );
        if !sim.crashed() {
            sim.crash();
        }
        let answered: Vec<MarkAnswer> = source
            .answers
            .iter()
            .filter_map(|answer| answer.try_recv().ok().and_then(|a| a.ok()))
            .collect();
        answered_count += answered.len();
        let images = sim.power_cut_images().expect("crashed");
        let after = SimDisks::from_images(images, 4096, 100 + step);
        let Ok(set) = volume::open_members(Members::Sim(&after), Access::Write, Safety::Check)
        else {
            assert!(answered.is_empty(), "step {step}: a mark answered, no set");
            continue;
        };
        reader::recover(&set).unwrap();
        let marks = set.marks().unwrap();
        for answer in &answered {
            let listed: Vec<&RecordingEntry> = marks
                .iter()
                .filter(|m| m.recording_id == answer.mark_id)
                .collect();
            assert_eq!(
                listed.len(),
                1,
                "step {step}: mark {} listed once",
                answer.mark_id
            );
            assert_ne!(listed[0].state, RecordingState::Open, "step {step}: closed");
            let back = read_mark(&set, answer.mark_id).unwrap();
            assert!(
                back.trouble.is_empty(),
                "step {step}: mark: {:?}",
                back.trouble
            );
        }
        if let Some(entry) = reader::recordings(&set).unwrap().pop() {
            let ring = read_recording(&set, &entry);
            assert!(
                ring.trouble.is_empty(),
                "step {step}: ring: {:?}",
                ring.trouble
            );
        }
    }
    assert!(
        answered_count > 0,
        "no step crashed after the mark was taken"
    );
}

/// The input runs ahead of the writes by what the buffer pool holds (here 1 MiB, some 10 ms
/// of these drives): the chunks of the after-window still in the pool when it ends are the
/// mark's too, and it keeps them.
#[test]
fn a_mark_keeps_its_whole_after_window_though_the_writes_lag_the_input() {
    let sim = SimDisks::new(1, DISK_BYTES, 4096, 11);
    sim.slow(0, 100e6);
    let orders = vec![(DISK_BYTES / 2, take(5, 10, "lag"))];
    let (report, answers) = record_asking(&sim, orders, |desk| {
        options_with_pool(3 * DISK_BYTES, desk, 1 << 20)
    });
    assert!(report.error.is_none(), "{:?}", report.error);
    let answer = answers[0].clone().unwrap();
    let set = open(&sim);
    let mark = &marks::marks_of(&set, report.recording_id).unwrap()[0];
    let back = read_mark(&set, mark.recording_id).unwrap();
    assert!(back.trouble.is_empty(), "{:?}", back.trouble);
    let taken_ns = mark.mark_of.unwrap().from_ns + answer.before_ns;
    // Its last chunk began within a write (two chunks, 0.16 ms here) of the window's end.
    let window_end_ns = taken_ns + 10_000_000;
    assert!(
        back.last_time_ns + 200_000 >= window_end_ns,
        "the mark ends {} ms short of its window",
        (window_end_ns - back.last_time_ns) as f64 / 1e6
    );
    assert!(report.marks[0].after_ns >= 9_800_000, "{:?}", report.marks);
    assert!(!report.marks[0].cut_short, "{:?}", report.marks);
}

/// A time window of a ring with a kept mark is found by search, the mark's slots searched
/// as scans of their own: it hands out exactly what a read of the whole ring hands out from
/// the window's start on, wherever the window starts (before the ring's run, in it, at a
/// jump over the mark's slots).
#[test]
fn a_window_of_a_ring_with_a_mark_is_what_the_whole_read_holds_from_its_start() {
    let sim = SimDisks::new(2, DISK_BYTES, 4096, 21);
    let lap_bytes = 2 * DISK_BYTES;
    let (report, answers) = record(&sim, 3 * lap_bytes, vec![(lap_bytes, take(10, 10, "w"))]);
    assert!(report.error.is_none() && answers[0].is_ok(), "{answers:?}");
    let set = open(&sim);
    let entry = reader::recordings(&set).unwrap().pop().unwrap();
    let (control, progress) = (Control::new(), Progress::default());
    let mut whole: Vec<(u64, u64)> = Vec::new(); // (sequence, time)
    let read = reader::read_recording(
        &set,
        &entry,
        EngineChoice::Auto,
        &control,
        &progress,
        &mut |item| {
            if let Item::Chunk { header, .. } = item {
                whole.push((header.sequence, header.time_ns(entry.start_ns)));
            }
            true
        },
    )
    .unwrap();
    assert!(read.read_bytes > 0);
    let (first_ns, last_ns) = (whole[0].1, whole[whole.len() - 1].1);
    let mut checked = 0;
    for step in 0..=20u64 {
        let from_ns = first_ns - 5_000_000 + (last_ns - first_ns + 5_000_000) * step / 20;
        let mut window: Vec<u64> = Vec::new();
        let summary = reader::read_recording_from(
            &set,
            &entry,
            EngineChoice::Auto,
            Some(from_ns),
            &control,
            &progress,
            &mut |item| {
                if let Item::Chunk { header, .. } = item {
                    if header.time_ns(entry.start_ns) >= from_ns {
                        window.push(header.sequence);
                    }
                }
                true
            },
        )
        .unwrap();
        let expected: Vec<u64> = whole
            .iter()
            .skip_while(|(_, time)| *time < from_ns)
            .map(|(sequence, _)| *sequence)
            .collect();
        assert_eq!(window, expected, "window from step {step}");
        if step == 19 {
            // Found by search: the window's last tenth, not the lap, was read.
            assert!(
                summary.read_bytes * 4 < read.read_bytes,
                "{summary:?} of {read:?}"
            );
            // The mark's slots lie before the window: their scans take no read memory.
            let member_reads = 2 * reader::SCAN_QUEUE_DEPTH as u64;
            assert_eq!(
                read.read_pool_bytes * member_reads,
                summary.read_pool_bytes * (member_reads + 2 * reader::KEPT_SCAN_QUEUE_DEPTH as u64),
                "{summary:?} of {read:?}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 21);
}

/// Records `limit_bytes` more of the pattern onto the set, appended with `options`.
fn append(
    sim: &SimDisks,
    limit_bytes: u64,
    change: impl FnOnce(&mut RecordOptions),
) -> Result<RecordReport, RecordingError> {
    let desk = Arc::new(MarkDesk::default());
    let mut options = RecordOptions {
        append: true,
        fill: Fill::Linear,
        marks: None,
        ..options(limit_bytes, &desk)
    };
    change(&mut options);
    writer::record_on(
        Members::Sim(sim),
        &mut PatternSource(Pattern::new(SEED)),
        &options,
        &Control::new(),
        &Progress::default(),
    )
}

/// A ring with a mark, then more recordings on the set: a linear one appended keeps out of
/// the mark's slots (it ends full before them), one that reclaims reclaims the ring and
/// stops at the mark, naming it; a ring appended jumps over it lap after lap; the mark
/// reads whole after each, and `marks::overwritten` finds nothing wrong with it.
#[test]
fn a_kept_mark_is_never_written_over_by_what_the_set_records_next() {
    let sim = SimDisks::new(2, DISK_BYTES, 4096, 9);
    let lap_bytes = 2 * DISK_BYTES;
    let (report, answers) = record(
        &sim,
        3 * lap_bytes + lap_bytes / 3,
        vec![(2 * lap_bytes, take(10, 10, "keep"))],
    );
    assert!(report.error.is_none(), "{:?}", report.error);
    let mark_id = answers[0].clone().expect("the mark is taken").mark_id;
    let whole = |what: &str| {
        let set = open(&sim);
        let back = read_mark(&set, mark_id).unwrap();
        assert!(back.trouble.is_empty(), "after {what}: {:?}", back.trouble);
        let mark = set.marks().unwrap().pop().unwrap();
        assert_eq!(back.bytes, mark.stream_len_bytes, "after {what}");
        assert_eq!(
            marks::overwritten(&set, &mark),
            None,
            "after {what}: {mark:?}"
        );
        back.bytes
    };
    let kept_bytes = whole("the ring");

    let linear = append(&sim, lap_bytes, |_| {}).unwrap();
    assert_eq!(
        linear.outcome,
        writer::RecordOutcome::TargetFull,
        "{linear:?}"
    );
    assert!(linear.stream_bytes > 0, "{linear:?}");
    assert_eq!(whole("a linear recording"), kept_bytes);
    let set = open(&sim);
    let appended = reader::recordings(&set).unwrap().pop().unwrap();
    let back = read_recording(&set, &appended);
    assert!(back.trouble.is_empty(), "{:?}", back.trouble);
    assert_eq!(back.bytes, linear.stream_bytes);
    drop(set);

    let reclaiming = append(&sim, 2 * lap_bytes, |options| {
        options.retention.reclaim = Some(nvrec::recording::retention::ReclaimPolicy::Oldest);
    })
    .unwrap();
    let Some(ReclaimRefused::Mark(hint)) = &reclaiming.reclaim_refused else {
        panic!("no mark named: {reclaiming:?}");
    };
    assert_eq!((hint.mark_id, hint.label.as_str()), (mark_id, "keep"));
    let refused = hint.to_string();
    assert!(
        refused.contains(&format!("mark {mark_id} \"keep\"")) && refused.contains("--release"),
        "{refused}"
    );
    assert_eq!(whole("a recording that reclaims"), kept_bytes);

    // A ring added (as after a crash, the recorder started again) goes round twice, its
    // write points jumping over the mark, and reads back whole without it.
    let ring = append(&sim, 2 * lap_bytes, |options| {
        options.fill = Fill::Ring { trim: false };
    })
    .unwrap();
    assert!(ring.error.is_none(), "{ring:?}");
    assert!(
        ring.members.iter().all(|m| m.laps >= 1),
        "{:?}",
        ring.members
    );
    assert_eq!(whole("a ring that went round"), kept_bytes);
    let set = open(&sim);
    let entry = reader::recordings(&set).unwrap().pop().unwrap();
    let back = read_recording(&set, &entry);
    assert!(back.trouble.is_empty(), "ring: {:?}", back.trouble);
    assert_eq!(back.end_offset, ring.stream_bytes);
}

/// A second mark asked while the first still records its after-window is joined to it:
/// the answer names the first mark, the window goes on to the second's end, the set holds
/// one mark, and it reads whole to that end.
#[test]
fn a_mark_asked_during_another_s_after_window_is_joined_to_it() {
    let sim = SimDisks::new(2, DISK_BYTES, 4096, 13);
    let lap_bytes = 2 * DISK_BYTES;
    // At 100 MB/s a millisecond is 100 kB: the second is asked 2 ms into the first's 10 ms
    // after-window, and asks 20 ms more.
    let at = lap_bytes / 2;
    let orders = vec![
        (at, take(5, 10, "first")),
        (at + 200_000, take(1, 20, "second")),
    ];
    let (report, answers) = record(&sim, 3 * lap_bytes, orders);
    assert!(report.error.is_none(), "{:?}", report.error);
    let first = answers[0].clone().expect("taken");
    let second = answers[1].clone().expect("joined, not refused");
    assert!(second.joined && !first.joined, "{answers:?}");
    assert_eq!(second.mark_id, first.mark_id);
    assert_eq!(second.label, "first");
    assert!(second.after_ns >= 19_000_000, "{second:?}");
    assert_eq!(report.marks.len(), 1, "{:?}", report.marks);
    let set = open(&sim);
    assert_eq!(set.marks().unwrap().len(), 1);
    let back = read_mark(&set, first.mark_id).unwrap();
    assert!(back.trouble.is_empty(), "{:?}", back.trouble);
    // The window reaches the second's end: 2 ms + 20 ms after the first was asked.
    assert!(
        back.end_offset >= at + 200_000 + 2_000_000,
        "{back:?} from {at}"
    );
}

/// A mark taken while a member stalls costs no input: its entry is made durable with the
/// next checkpoint, off the writer's way, and answered then, while the other member takes
/// the writes (before, the writer wrote and flushed it in its own thread, and stood still
/// for the stall: a paced source lost what came meanwhile).
#[test]
fn a_mark_taken_while_a_member_stalls_costs_no_input() {
    let sim = SimDisks::new(2, DISK_BYTES, 4096, 17);
    for disk in 0..2 {
        sim.slow(disk, 200e6);
    }
    // The stall begins a little before the mark is asked, and lasts 400 ms: longer than a
    // paced source's backlog (250 ms), shorter than a lap at the rate.
    sim.stall(0, 60, Duration::from_millis(400));
    let lap_bytes = 2 * DISK_BYTES;
    // Disk 0's 60th write is some 2 MB into the stream (each member takes half).
    let orders = vec![(2_100_000, take(5, 5, "stalled"))];
    let (report, answers) = record_asking(&sim, orders, |desk| RecordOptions {
        rate_bytes_per_s: Some(10e6),
        stripe: Stripe::Adaptive,
        ..options_with_pool(lap_bytes, desk, 4 << 20)
    });
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_eq!(
        report.lost_bytes + report.lost_past_end_bytes,
        0,
        "the stall cost input: {report:?}"
    );
    let answer = answers[0].clone().expect("the mark is taken");
    let set = open(&sim);
    let back = read_mark(&set, answer.mark_id).unwrap();
    assert!(back.trouble.is_empty(), "{:?}", back.trouble);
}

/// Disks of 32 MiB: a lap of two holds 6.4 s at 10 MB/s, so a stall of 800 ms (8 MB for
/// the other member alone) stays well within how far a member may go past a checkpoint.
const STALL_DISK_BYTES: u64 = 32 << 20;

/// Records three laps of a two-member ring at 10 MB/s with a mark every 4 MiB of its first
/// lap, and member 0 stalled for 800 ms from its `stall_at`-th write (early in the second
/// lap, where member 1's write point comes round to the marks' slots, one every 2 MiB or so
/// of its own); crashed at operation `crash_at` if given. The buffer pool holds 420 ms of
/// input. Returns the report (none after a crash) and the marks answered.
fn stalled_ring(
    sim: &SimDisks,
    stall_at: u64,
    crash_at: Option<u64>,
) -> (Option<RecordReport>, Vec<MarkAnswer>) {
    for disk in 0..2 {
        sim.slow(disk, 200e6);
    }
    sim.stall(0, stall_at, Duration::from_millis(800));
    if let Some(operation) = crash_at {
        sim.crash_at(operation);
    }
    let desk = Arc::new(MarkDesk::default());
    let mut source = AskAt {
        pattern: PatternSource(Pattern::new(SEED)),
        desk: desk.clone(),
        orders: (0..12)
            .map(|i| ((1 + 4 * i) << 20, take(5, 5, "kept")))
            .collect(),
        answers: Vec::new(),
    };
    let options = RecordOptions {
        rate_bytes_per_s: Some(10e6),
        stripe: Stripe::Adaptive,
        ..options_with_pool(6 * STALL_DISK_BYTES, &desk, 4 << 20)
    };
    let report = writer::record_on(
        Members::Sim(sim),
        &mut source,
        &options,
        &Control::new(),
        &Progress::default(),
    );
    let answers = source
        .answers
        .iter()
        .filter_map(|answer| answer.recv_timeout(Duration::from_secs(5)).ok())
        .filter_map(Result::ok)
        .collect();
    (report.ok(), answers)
}

/// A stall of one member costs nothing where the other's write point comes round to slots
/// marks keep, again and again while the stalled member holds every checkpoint back: it
/// jumps over them and goes on, the marks and the ring read back whole.
#[test]
fn a_stall_costs_nothing_where_another_member_jumps_over_a_kept_mark() {
    let sim = SimDisks::new(2, STALL_DISK_BYTES, 4096, 23);
    let (report, answers) = stalled_ring(&sim, 2200, None);
    let report = report.expect("the recording ends");
    assert!(report.error.is_none(), "{:?}", report.error);
    assert_eq!(answers.len(), 12, "every mark taken");
    assert!(sim.counters().stalled_count > 0, "the stall happened");
    assert_eq!(
        report.lost_bytes + report.lost_past_end_bytes,
        0,
        "the stall cost input: {report:?}"
    );
    let set = open(&sim);
    for answer in &answers {
        let back = read_mark(&set, answer.mark_id).unwrap();
        assert!(
            back.trouble.is_empty(),
            "mark {}: {:?}",
            answer.mark_id,
            back.trouble
        );
    }
    let entry = reader::recordings(&set).unwrap().pop().unwrap();
    let ring = read_recording(&set, &entry);
    assert!(ring.trouble.is_empty(), "{:?}", ring.trouble);
}

/// A crash while the write points go on past kept slots, before a checkpoint says so:
/// recovery crosses the slots the marks' entries name, every mark reads whole, the ring
/// reads whole and reaches what its last durable checkpoint claimed.
#[test]
fn recovery_crosses_kept_slots_a_write_point_jumped_before_a_checkpoint() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let whole = SimDisks::new(2, STALL_DISK_BYTES, 4096, 29);
    stalled_ring(&whole, 2200, None);
    let operations = whole.counters().operation_count;
    let mut beyond = 0;
    for step in 0..12u64 {
        let sim = SimDisks::new(2, STALL_DISK_BYTES, 4096, 29);
        let crash_at = operations * (36 + 2 * step) / 100;
        let (_, answers) = stalled_ring(&sim, 2200, Some(crash_at));
        if !sim.crashed() {
            sim.crash();
        }
        let images = sim.power_cut_images().expect("crashed");
        let after = SimDisks::from_images(images, 4096, 29);
        let set = volume::open_members(Members::Sim(&after), Access::Write, Safety::Check)
            .expect("a set");
        let claimed = set
            .newest_checkpoint()
            .unwrap()
            .map_or(0, |c| c.durable_stream_bytes);
        reader::recover(&set).unwrap();
        for answer in &answers {
            let back = read_mark(&set, answer.mark_id).unwrap();
            assert!(
                back.trouble.is_empty(),
                "step {step}: mark {}: {:?}",
                answer.mark_id,
                back.trouble
            );
        }
        let entry = reader::recordings(&set).unwrap().pop().unwrap();
        assert!(
            entry.stream_len_bytes >= claimed,
            "step {step}: {} < {claimed}",
            entry.stream_len_bytes
        );
        if entry.stream_len_bytes > claimed {
            beyond += 1;
        }
        let ring = read_recording(&set, &entry);
        assert!(
            ring.trouble.is_empty(),
            "step {step}: ring: {:?}",
            ring.trouble
        );
        assert_eq!(ring.end_offset, entry.stream_len_bytes, "step {step}");
    }
    assert!(
        beyond > 0,
        "no crash left chunks past its checkpoint to find"
    );
}

/// A paced ring (its writes often partly filled, so that the write point meets kept slots
/// fewer than a write's slots before them) with a mark every third of a lap for twelve laps,
/// then a ring appended to the set, as after a restart, that goes round three times: every
/// mark reads whole after each, and the appended ring reads whole without them.
#[test]
fn many_marks_over_many_laps_then_a_ring_appended_stay_whole() {
    let sim = SimDisks::new(2, DISK_BYTES, 4096, 13);
    for disk in 0..sim.disk_count() {
        sim.slow(disk, 100e6);
    }
    let lap_bytes = 2 * DISK_BYTES;
    let orders: Vec<(u64, MarkOrder)> = (1..36)
        .map(|n| (n * lap_bytes / 3, take(2, 2, &format!("m{n}"))))
        .collect();
    let (report, answers) = record_asking(&sim, orders, |desk| RecordOptions {
        rate_bytes_per_s: Some(40e6),
        max_marked: 0.6,
        ..options_with_pool(12 * lap_bytes, desk, 64 * u64::from(CHUNK_BYTES))
    });
    assert!(report.error.is_none(), "{:?}", report.error);
    let taken: Vec<u32> = answers
        .iter()
        .filter_map(|a| a.clone().ok())
        .map(|a| a.mark_id)
        .collect();
    assert!(taken.len() >= 20, "{taken:?}");
    let all_whole = |what: &str| {
        let set = open(&sim);
        for mark in marks::kept(&set).unwrap() {
            let back = read_mark(&set, mark.recording_id).unwrap();
            assert!(
                back.trouble.is_empty(),
                "{what}: mark {}: {:?}",
                mark.recording_id,
                back.trouble
            );
            assert_eq!(back.bytes, mark.stream_len_bytes, "{what}: {mark:?}");
            assert_eq!(marks::overwritten(&set, &mark), None, "{what}: {mark:?}");
        }
    };
    all_whole("the ring");
    // The marks' scans wake as the read reaches their windows: the read's memory does not
    // grow with the marks (a read each for every mark on two members, all at once, before).
    let set = open(&sim);
    let entry = reader::recordings(&set).unwrap().pop().unwrap();
    let (control, progress) = (Control::new(), Progress::default());
    let summary = reader::read_recording(
        &set,
        &entry,
        EngineChoice::Auto,
        &control,
        &progress,
        &mut |_| true,
    )
    .unwrap();
    let read_bytes = reader::SCAN_SLOTS_PER_READ * u64::from(CHUNK_BYTES);
    assert!(summary.read_pool_bytes <= 16 * read_bytes, "{summary:?}");
    assert_eq!(
        summary.missing_chunk_count + summary.damage_count,
        0,
        "{summary:?}"
    );
    // No write left slots unwritten before a mark (it went round it), so no mark was
    // widened: each entry written when taken and when closed, each span the slots its
    // window's writes took (and those of marks within it).
    let set = open(&sim);
    let kept = marks::kept(&set).unwrap();
    let lap_slots = |_| set.members[0].as_ref().unwrap().layout().data_slot_count;
    let ranges: Vec<Vec<marks::KeptRange>> = kept
        .iter()
        .map(|mark| marks::ranges_of(mark, lap_slots))
        .collect();
    for (mark, own) in kept.iter().zip(&ranges) {
        assert_eq!(mark.revision, 2, "mark {} was rewritten", mark.recording_id);
        for range in own {
            let (first, end) = (range.first_slot, range.first_slot + range.slot_count);
            let others: u64 = ranges
                .iter()
                .flatten()
                .filter(|other| other.member == range.member && *other != range)
                .filter(|other| other.first_slot >= first && other.first_slot < end)
                .map(|other| other.slot_count)
                .sum();
            assert!(
                range.slot_count - others <= 12,
                "mark {} keeps {} slots on member {}, {others} of other marks",
                mark.recording_id,
                range.slot_count,
                range.member
            );
        }
    }
    let ring = append(&sim, 3 * lap_bytes, |options| {
        options.fill = Fill::Ring { trim: false };
    })
    .unwrap();
    assert!(ring.error.is_none(), "{ring:?}");
    all_whole("a ring appended");
    let set = open(&sim);
    let entry = reader::recordings(&set).unwrap().pop().unwrap();
    let back = read_recording(&set, &entry);
    assert!(back.trouble.is_empty(), "appended ring: {:?}", back.trouble);
    assert_eq!(back.end_offset, ring.stream_bytes);
}
