//! `verify`: every chunk of the recordings read and checked: CRC and sequence (by the
//! reader), the pattern of a pattern recording (against its own seed, read from its first
//! chunk, or the one asked for), the records of a network recording (each decodes; losses
//! counted by cause), and the entry against the chunks past its end. An archive is read the
//! same way, or only its objects checked in the store ([`check_stored`]).

use crate::chunks::ChunkSource;
use crate::listing::{add_unaccounted, retirement_json, state_text};
use crate::losses::RecordCounts;
use crate::outcome::{Class, UsageError};
use crate::window::TimeArg;
use anyhow::Result;
use nvrec::control::{Control, ControlState, Progress};
use nvrec::engine::EngineChoice;
use nvrec::layout::RecordingState;
use nvrec::layout::{ChunkFlags, ChunkHeader, Reassembly, RecordingEntry, RecordingFlags};
use nvrec::pattern::Pattern;
use nvrec::recording::health::{self, MetaDamage};
use nvrec::recording::reader::{Item, ReadSummary};
use nvrec::recording::scan::Unaccounted;
use nvrec::recording::volume::MemberProblem;
use std::sync::Arc;

/// What a verify is asked to check.
#[derive(Debug, Clone)]
pub struct VerifyRequest {
    /// Which recording (default: every one).
    pub recording: Option<u32>,
    /// A mark's window instead (format 1.7).
    pub mark: Option<u32>,
    /// The pattern's seed every pattern recording must carry (default: its own).
    pub seed: Option<u64>,
    /// Any loss at all fails the check.
    pub strict: bool,
    pub engine: EngineChoice,
    /// Only the chunks of this window (found by search), each end resolved against the
    /// recording's start.
    pub from: Option<TimeArg>,
    pub to: Option<TimeArg>,
}

/// The recordings a verify checks: one, or every one whose data the set still holds (a
/// reclaimed recording is listed by `ls` as such; asked for by id, it is refused), and
/// every mark a set keeps (format 1.7), so that a mark whose window was lost fails the
/// set's check too. None at all is an error, unless an archive's manifests could not be
/// read (which the check then counts). With a window (`--from`, `--to`), only those it
/// holds time of, and none is refused, naming what each spans.
pub fn select(source: &ChunkSource, request: &VerifyRequest) -> Result<Vec<RecordingEntry>> {
    let selected = match (request.recording, request.mark) {
        (_, Some(mark)) => vec![source.pick(None, Some(mark))?],
        (Some(id), None) => vec![source.select(Some(id))?],
        (None, None) => {
            let mut all: Vec<RecordingEntry> = source
                .recordings()?
                .into_iter()
                .filter(|entry| entry.reclaimed.is_none())
                .collect();
            if let Some(set) = source.set() {
                all.extend(nvrec::recording::marks::kept(set)?);
            }
            all
        }
    };
    if selected.is_empty() && source.unreadable().is_empty() {
        return Err(nvrec::recording::RecordingError::NoRecordings.into());
    }
    // A window checks the recordings it holds time of, and is refused where it holds none.
    Ok(crate::window::entries_met(
        selected,
        request.from,
        request.to,
    )?)
}

/// What is wrong with the set as a whole, whatever its recordings hold.
#[derive(Debug, Default)]
pub struct SetCheck {
    pub damage: Vec<MetaDamage>,
    pub missing_members: Vec<u16>,
    pub member_problems: Vec<MemberProblem>,
    /// Crashed recordings whose end is recovered without a missing member: what they hold
    /// past the last checkpoint is out of reach, so they are not called good.
    pub open_without_members: Vec<u32>,
    /// Chunks of recordings that no entry names (an entry write lost): the set holds them
    /// and no read finds them until `repair` restores their entries.
    pub unnamed: Vec<Unaccounted>,
}

impl SetCheck {
    /// An archive has no members or metadata copies of its own: its manifests were read
    /// whole when it was opened.
    pub fn of(source: &ChunkSource) -> Result<SetCheck> {
        let Some(set) = source.set() else {
            return Ok(SetCheck::default());
        };
        let missing_members = set.missing_indices();
        let open_without_members = if missing_members.is_empty() {
            Vec::new()
        } else {
            set.recordings()?
                .iter()
                .filter(|entry| entry.state == RecordingState::Open)
                .map(|entry| entry.recording_id)
                .collect()
        };
        Ok(SetCheck {
            damage: health::check(set)?,
            missing_members,
            member_problems: set.problems.clone(),
            open_without_members,
            unnamed: crate::listing::unnamed_of(set),
        })
    }

    /// Whole: every member there, no stranger among them, no metadata lost, every manifest
    /// read.
    pub fn is_whole(&self, source: &ChunkSource) -> bool {
        self.missing_members.is_empty()
            && self.member_problems.is_empty()
            && self.unnamed.is_empty()
            && source.unreadable().is_empty()
            && !health::loses_anything(&self.damage)
    }
}

/// The first thing a verify found wrong with a recording; in JSON, its message.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Bad {
    #[error("{count} chunks missing from sequence {first_sequence}")]
    Missing { first_sequence: u64, count: u64 },
    /// A slot that did not hold the chunk it should (`what` is the reader's finding).
    #[error(
        "member {member_index} ({member}) slot {slot_index} at offset {offset_bytes:#x}{}: {what}",
        sequence.map(|s| format!(", sequence {s}")).unwrap_or_default()
    )]
    Damaged {
        member_index: u16,
        member: String,
        slot_index: u64,
        offset_bytes: u64,
        sequence: Option<u64>,
        what: String,
    },
    /// A chunk whose records do not decode.
    #[error("sequence {sequence} on member {member_index} slot {slot_index}: {cause}")]
    Records {
        sequence: u64,
        member_index: u16,
        slot_index: u64,
        cause: nvrec::layout::LayoutError,
    },
    /// A pattern chunk that is not the pattern.
    #[error("sequence {sequence} on member {member_index} slot {slot_index}: {cause}")]
    Pattern {
        sequence: u64,
        member_index: u16,
        slot_index: u64,
        cause: PatternProblem,
    },
    #[error("interrupted before the end: not all verified")]
    Interrupted,
    #[error(
        "its entry ends before {0} chunks the recording holds: unaccounted (nvrec repair \
         extends the entry over them)"
    )]
    Unaccounted(u64),
    #[error(
        "a slot past its entry's end could not be read: whether the recording holds chunks \
         its entry does not claim is unknown"
    )]
    UnreadablePastEnd,
    #[error(
        "its end is recovered without member{} {}, missing: the chunks there past its last \
         checkpoint cannot be found",
        if .0.len() == 1 { "" } else { "s" },
        .0.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
    )]
    RecoveredWithoutMembers(Vec<u16>),
    /// What a later recording wrote over explains what is missing: said first.
    #[error("written over: {over}; {bad}")]
    WrittenOver {
        over: nvrec::recording::scan::WrittenOver,
        bad: Box<Bad>,
    },
}

/// What checking one recording found.
#[derive(Debug)]
pub struct RecordingCheck {
    pub entry: RecordingEntry,
    pub summary: ReadSummary,
    /// The first thing found wrong; none: good.
    pub first_bad: Option<Bad>,
    pub pattern_errors: u64,
    pub pattern: Option<Pattern>,
    pub records: RecordCounts,
    pub unaccounted: Unaccounted,
    /// Anything lost, by any cause (gaps, loss records, ranges an archived ring overwrote).
    pub lossy: bool,
    /// An archive's stream ranges that a ring overwrote before they were archived (within
    /// what was read): the archive lacks them, so it is not called OK.
    pub not_archived: Vec<nvrec_archive::manifest::Loss>,
    /// Where the wall clock was stepped while recording (format 1.5 chunks tell): reported,
    /// never a fault, and no window or pacing goes by it.
    pub clock_steps: Vec<ClockStep>,
    /// A later recording of the set that wrote over this one's slots (a ring appended to
    /// the set goes round over all but kept marks), as `ls` names it: what it took is named
    /// so, not found missing without a cause.
    pub written_over: Option<nvrec::recording::scan::WrittenOver>,
}

/// A step of the wall clock between two chunks of a recording: `step_ns` (forward when
/// positive) before the chunk of `sequence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ClockStep {
    pub sequence: u64,
    pub step_ns: i64,
}

/// A change of the wall clock against the monotonic one between consecutive chunks larger
/// than this is a step (NTP slews by at most 0.5 ms a second; a step is set at once).
const CLOCK_STEP_NS_MIN: i64 = 100_000_000;

impl RecordingCheck {
    pub fn good(&self) -> bool {
        self.first_bad.is_none()
    }

    /// Good, and with `strict` lossless too.
    pub fn passes(&self, strict: bool) -> bool {
        self.good() && !(strict && self.lossy)
    }

    pub fn json(&self) -> serde_json::Value {
        let entry = &self.entry;
        let summary = &self.summary;
        let mut value = serde_json::json!({
            "recording_id": entry.recording_id,
            "state": state_text(entry),
            "good": self.good(),
            "chunk_count": summary.chunk_count,
            "payload_bytes": summary.payload_bytes,
            "missing_chunk_count": summary.missing_chunk_count,
            "damage_count": summary.damage_count,
            "pattern_error_count": self.pattern_errors,
            "records": entry.flags.contains(RecordingFlags::RECORDS).then_some(&self.records),
            "pattern_seed": self.pattern.as_ref().map(Pattern::seed),
            "lost_bytes": summary.lost_bytes,
            "lossy": self.lossy,
            "not_archived": self.not_archived,
            "first_bad": self.first_bad.as_ref().map(Bad::to_string),
            "rate_mib_per_s": summary.rate_mib_per_s,
            "degraded": !entry.retirements.is_empty(),
            "redirected_chunk_count": summary.redirected_chunk_count,
            "retirements": entry.retirements.iter().map(retirement_json).collect::<Vec<_>>(),
            "clock_steps": self.clock_steps,
            "written_over": self.written_over.map(|over| over.to_string()),
        });
        add_unaccounted(&mut value, &self.unaccounted);
        value
    }
}

/// Who watches a verify run: told when each recording's read begins (its progress) and
/// when its check is done. The CLI shows a progress line and prints each verdict.
pub trait VerifyWatch {
    fn started(&mut self, _entry: &RecordingEntry, _progress: &Arc<Progress>) {}
    fn checked(&mut self, _check: &RecordingCheck) {}
}

/// Nobody watches.
impl VerifyWatch for () {}

/// How a verify of `selected` recordings went.
#[derive(Debug)]
pub struct VerifyRun {
    pub set: SetCheck,
    pub checks: Vec<RecordingCheck>,
    /// Stopped or aborted before every recording was read.
    pub interrupted: bool,
    /// The set is whole (members, metadata, manifests), as [`SetCheck::is_whole`] says.
    pub set_whole: bool,
    pub strict: bool,
}

impl VerifyRun {
    /// Good: the set whole, every selected recording read and each one passing.
    pub fn good(&self) -> bool {
        self.set_whole
            && !self.interrupted
            && self.checks.iter().all(|check| check.passes(self.strict))
    }

    pub fn class(&self) -> Class {
        Class::passed(self.good())
    }
}

/// Checks the set and reads and checks each of `selected` in turn, until every one is
/// checked or `control` asks the run to end (the recordings left are then not good).
pub fn verify(
    source: &ChunkSource,
    selected: &[RecordingEntry],
    request: &VerifyRequest,
    control: &Control,
    watch: &mut dyn VerifyWatch,
) -> Result<VerifyRun> {
    let set = SetCheck::of(source)?;
    let mut run = VerifyRun {
        set_whole: set.is_whole(source),
        set,
        checks: Vec::new(),
        interrupted: false,
        strict: request.strict,
    };
    for entry in selected {
        if control.state() != ControlState::Run {
            run.interrupted = true;
            break;
        }
        let progress = Arc::new(Progress::default());
        watch.started(entry, &progress);
        let check = check_recording(source, entry, request, &run.set, control, &progress)?;
        watch.checked(&check);
        run.checks.push(check);
    }
    Ok(run)
}

/// Reads and checks one recording.
pub fn check_recording(
    source: &ChunkSource,
    entry: &RecordingEntry,
    request: &VerifyRequest,
    set: &SetCheck,
    control: &Control,
    progress: &Progress,
) -> Result<RecordingCheck> {
    let (from_ns, to_ns) = crate::window::window_of(entry, request.from, request.to)?;
    let mut checker = ChunkChecker::new(request.seed, entry.start_ns);
    let summary = source.read_window(
        entry,
        request.engine,
        (from_ns, to_ns),
        control,
        progress,
        &mut |item| {
            if let Item::Chunk { header, .. } = &item {
                let time_ns = header.time_ns(entry.start_ns);
                if from_ns.is_some_and(|from| time_ns < from) {
                    return true;
                }
                if to_ns.is_some_and(|to| time_ns > to) {
                    return false;
                }
            }
            checker.item(source, item);
            true
        },
    )?;
    let ChunkChecker {
        mut first_bad,
        pattern_errors,
        pattern,
        mut records,
        mut reassembly,
        clock_steps,
        ..
    } = checker;
    if let Some(loss) = reassembly.finish() {
        records.loss(&loss);
    }
    if control.state() != ControlState::Run {
        first_bad.get_or_insert(Bad::Interrupted);
    }
    // Chunks of the recording past its entry's end that the entry does not claim (the
    // slots right after its end on each member; an archive holds what its entry claims).
    let unaccounted = source
        .set()
        .map(|volume_set| nvrec::recording::scan::unaccounted(volume_set, entry))
        .unwrap_or_default();
    if first_bad.is_none() {
        first_bad = entry_problem(&unaccounted, set, entry);
    }
    let written_over = source
        .set()
        .and_then(|volume_set| nvrec::recording::scan::written_over(volume_set, entry));
    if let Some(over) = &written_over {
        first_bad = first_bad.map(|bad| Bad::WrittenOver {
            over: *over,
            bad: Box::new(bad),
        });
    }
    let lossy = summary.lost_bytes > 0 || records.losses > 0;
    let not_archived = source.overwritten(entry, &summary);
    Ok(RecordingCheck {
        entry: entry.clone(),
        summary,
        first_bad,
        pattern_errors,
        pattern,
        records,
        unaccounted,
        lossy,
        not_archived,
        clock_steps,
        written_over,
    })
}

/// What is wrong with a recording's entry that its chunks read whole do not show.
fn entry_problem(unaccounted: &Unaccounted, set: &SetCheck, entry: &RecordingEntry) -> Option<Bad> {
    if unaccounted.chunk_count > 0 {
        return Some(Bad::Unaccounted(unaccounted.chunk_count));
    }
    if unaccounted.unreadable_slots > 0 {
        return Some(Bad::UnreadablePastEnd);
    }
    set.open_without_members
        .contains(&entry.recording_id)
        .then(|| Bad::RecoveredWithoutMembers(set.missing_members.clone()))
}

/// The checks of each item a recording's read gives.
struct ChunkChecker {
    first_bad: Option<Bad>,
    pattern_errors: u64,
    pattern: Option<Pattern>,
    records: RecordCounts,
    reassembly: Reassembly,
    /// The recording's start, and the wall clock's offset at the chunk before.
    start_ns: u64,
    wall_offset_ns: Option<i64>,
    clock_steps: Vec<ClockStep>,
}

impl ChunkChecker {
    fn new(seed: Option<u64>, start_ns: u64) -> ChunkChecker {
        ChunkChecker {
            first_bad: None,
            pattern_errors: 0,
            pattern: seed.map(Pattern::new),
            records: RecordCounts::default(),
            reassembly: Reassembly::new(),
            start_ns,
            wall_offset_ns: None,
            clock_steps: Vec::new(),
        }
    }

    /// Notes a step of the wall clock since the chunk before, where both clocks are there.
    fn clocks(&mut self, header: &ChunkHeader) {
        if !header.flags.contains(ChunkFlags::ELAPSED) {
            return;
        }
        let offset_ns = header.wall_offset_ns(self.start_ns);
        if let Some(before_ns) = self.wall_offset_ns.replace(offset_ns) {
            let step_ns = offset_ns.wrapping_sub(before_ns);
            if step_ns.unsigned_abs() > CLOCK_STEP_NS_MIN as u64 {
                self.clock_steps.push(ClockStep {
                    sequence: header.sequence,
                    step_ns,
                });
            }
        }
    }

    fn item(&mut self, source: &ChunkSource, item: Item<'_>) {
        match item {
            Item::Chunk { header, payload } => self.chunk(header, payload),
            Item::Missing {
                first_sequence,
                count,
            } => self.bad(|| Bad::Missing {
                first_sequence,
                count,
            }),
            Item::Damage(damage) => self.bad(|| Bad::Damaged {
                member_index: damage.member_index,
                member: source.describe_member(damage.member_index as usize),
                slot_index: damage.slot_index,
                offset_bytes: damage.offset_bytes,
                sequence: damage.sequence,
                what: damage.what.clone(),
            }),
        }
    }

    fn chunk(&mut self, header: &ChunkHeader, payload: &[u8]) {
        self.clocks(header);
        let (sequence, member_index, slot_index) =
            (header.sequence, header.member_index, header.slot_index);
        if header.flags.contains(ChunkFlags::RECORDS) {
            let walk = self.reassembly.payload(header.stream_offset_bytes, payload);
            if let Err(cause) = self.records.count(walk) {
                self.bad(|| Bad::Records {
                    sequence,
                    member_index,
                    slot_index,
                    cause,
                });
            }
        }
        if header.flags.contains(ChunkFlags::PATTERN) {
            if self.pattern.is_none() {
                self.pattern =
                    seed_of_payload(header.stream_offset_bytes, payload).map(Pattern::new);
            }
            if let Err(why) =
                check_pattern(self.pattern.as_ref(), header.stream_offset_bytes, payload)
            {
                self.pattern_errors += 1;
                self.bad(|| Bad::Pattern {
                    sequence,
                    member_index,
                    slot_index,
                    cause: why,
                });
            }
        }
    }

    fn bad(&mut self, what: impl FnOnce() -> Bad) {
        self.first_bad.get_or_insert_with(what);
    }
}

/// The seed that put the pattern into `payload` at stream offset `offset_bytes`, read from
/// its first two words (a chunk that is not aligned for that, or too short, tells none).
fn seed_of_payload(offset_bytes: u64, payload: &[u8]) -> Option<u64> {
    if !offset_bytes.is_multiple_of(8) || payload.len() < 8 {
        return None;
    }
    let word = |at: usize| u32::from_le_bytes(payload[at..at + 4].try_into().unwrap());
    Some(Pattern::seed_of_words(word(0), word(4), offset_bytes / 4))
}

/// Why a PATTERN chunk's payload is not the pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternProblem {
    #[error("stream offset {0:#x} is not a multiple of 8, where the pattern never puts a chunk")]
    Unaligned(u64),
    #[error("{0}")]
    Mismatch(nvrec::pattern::Mismatch),
}

/// Checks one PATTERN chunk's payload; `pattern` is `None` when no seed could be read.
fn check_pattern(
    pattern: Option<&Pattern>,
    offset_bytes: u64,
    payload: &[u8],
) -> Result<(), PatternProblem> {
    if !offset_bytes.is_multiple_of(8) {
        return Err(PatternProblem::Unaligned(offset_bytes));
    }
    match pattern {
        Some(pattern) => pattern
            .check(offset_bytes, payload, 0)
            .map_err(PatternProblem::Mismatch),
        // Under 8 bytes: too short to name a seed, and nothing to check it against.
        None => Ok(()),
    }
}

/// `verify --stored`: each recording's objects checked in the store by HEAD.
pub struct StoredCheck {
    /// Per selected recording: what is wrong, if anything.
    pub first_bad: Vec<Option<std::sync::Arc<nvrec_archive::ArchiveError>>>,
    pub all_good: bool,
}

impl StoredCheck {
    pub fn class(&self) -> Class {
        Class::passed(self.all_good)
    }
}

/// Checks that the store holds every object of `selected` as it was uploaded.
pub fn check_stored(
    source: &ChunkSource,
    selected: &[RecordingEntry],
) -> Result<StoredCheck, UsageError> {
    let Some(first_bad) = source.check_stored(selected) else {
        return Err(UsageError(
            "--stored checks the objects of an archive: give file://DIR or s3://BUCKET/PREFIX"
                .into(),
        ));
    };
    let all_good = source.unreadable().is_empty() && first_bad.iter().all(Option::is_none);
    Ok(StoredCheck {
        first_bad,
        all_good,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvrec::layout::Uuid;

    /// A chunk made `elapsed_ns` after a recording's start at 1000 s, the wall clock then
    /// `stepped_ns` away from it.
    fn chunk(sequence: u64, elapsed_ns: u64, stepped_ns: i64) -> ChunkHeader {
        let start_ns = 1_000_000_000_000;
        ChunkHeader {
            set_uuid: Uuid::from_random_bytes([1; 16]),
            recording_id: 1,
            member_index: 0,
            stream_id: 0,
            sequence,
            slot_index: sequence,
            timestamp_ns: (start_ns + elapsed_ns).wrapping_add_signed(stepped_ns),
            elapsed_ns,
            stream_offset_bytes: 0,
            gap_bytes: 0,
            payload_len_bytes: 0,
            flags: ChunkFlags::ELAPSED,
        }
    }

    #[test]
    fn steps_of_the_wall_clock_are_found_and_slewing_is_not() {
        let mut checker = ChunkChecker::new(None, 1_000_000_000_000);
        let ms = 1_000_000;
        // Slewed by a millisecond, then set an hour forward, then 30 s back.
        for (sequence, elapsed_ns, stepped_ns) in [
            (1, 0, 0),
            (2, 10 * ms, ms as i64),
            (3, 20 * ms, 3_600_000 * ms as i64),
            (4, 30 * ms, 3_570_000 * ms as i64),
        ] {
            checker.clocks(&chunk(sequence, elapsed_ns, stepped_ns));
        }
        let found: Vec<(u64, i64)> = checker
            .clock_steps
            .iter()
            .map(|step| (step.sequence, step.step_ns / ms as i64))
            .collect();
        assert_eq!(found, [(3, 3_599_999), (4, -30_000)]);
        // Chunks of before format 1.5 have one clock: nothing to compare.
        let mut old = ChunkChecker::new(None, 0);
        let mut header = chunk(1, 0, 0);
        header.flags = ChunkFlags::empty();
        header.elapsed_ns = 0;
        old.clocks(&header);
        header.timestamp_ns += 3_600_000 * ms;
        old.clocks(&header);
        assert!(old.clock_steps.is_empty());
    }
}
