//! `nvrec archive`: every finished recording of a volume set into an archive.
//!
//! The read pipeline feeds it: [`nvrec::recording::reader::read_recording`] hands the
//! chunks over in sequence order on a thread of its own, and they are packed into
//! segments ([`crate::segment`]) while the previous segment uploads, so reading the
//! drives and sending overlap. A segment goes up as one PUT (a directory: a file renamed
//! into place) or, on S3, as a multipart upload of parts sent in parallel; each step the
//! store acknowledges is written to the local state ([`crate::state`]) before the next, so
//! a run killed at any point resumes where the store stands: each segment stored is
//! written down with what it commits, and a ring (whose start is overwritten by then) is
//! taken up after the last of them rather than read again from its oldest chunk. The
//! manifest goes last: a recording without one is not archived, whatever segments are
//! there. A manifest already in the store for an earlier revision of the recording's
//! entry (a crashed recording archived before recovery closed its entry) is gone on from
//! the same way, never cut again from the drives, and no manifest replaces one that holds
//! more ([`crate::manifest::Standing`], [`Manifest::lacks_what`]).
//!
//! Before any byte leaves, a segment's bytes are summed and compared with the checksum
//! built from the recorded chunks ([`crate::segment::Segment::check`]). The upload never
//! touches the drives' data or metadata: deleting after a verified archive is the
//! caller's decision.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::{Duration, Instant};

use futures::StreamExt;
use nvrec::control::{Control, ControlState, Progress};
use nvrec::engine::EngineChoice;
use nvrec::export::Window;
use nvrec::flow::FlowScan;
use nvrec::layout::{RecordingEntry, RecordingFlags, RecordingState};
use nvrec::recording::reader::{self, Item, ReadSummary};
use nvrec::recording::volume::VolumeSet;
use object_store::multipart::{MultipartStore, PartId};
use object_store::{MultipartId, PutPayload};

use crate::catalog::Catalog;
use crate::flows::{flows_key, FlowsOf};
use crate::manifest::{
    encode_entry, manifest_key, recording_dir, state_word, FlowsInfo, Hole, Loss, LossCause,
    Manifest, RetirementInfo, SegmentInfo, Standing, MANIFEST_FORMAT, MANIFEST_VERSION,
};
use crate::pace::Pacer;
use crate::pack::{
    Commit, Packed, Packer, ReadOutcome, RingReading, Sealed, SealedFlows, SegmentStart,
};
use crate::segment::{Segment, SegmentBuilder, Spares, SEGMENT_SIZE_BYTES_DEFAULT};
use crate::state::{ObjectState, State};
use crate::store::Archive;
use crate::{ArchiveError, Result};

/// Part size of a multipart upload: S3 needs 5 MiB at least (but for the last part).
pub const PART_SIZE_BYTES_DEFAULT: u64 = 8 << 20;
/// Parts of one segment in flight at once.
pub const PARTS_IN_FLIGHT_DEFAULT: usize = 8;
/// Segments read ahead while one uploads (each is held in memory).
const SEGMENTS_AHEAD: usize = 1;
/// Tries of a request that failed for a reason a retry may cure (a connection lost), with
/// this pause before each; `object_store` itself retries with backoff underneath (see
/// `store`), so one more try here covers what it does not (a directory, memory).
const REQUEST_TRIES: u32 = 2;
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// How to archive.
#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    /// Names this recorder in the keys and the catalog.
    pub node: String,
    /// Only this recording (default: every finished one).
    pub recording: Option<u32>,
    pub segment_size_bytes: u64,
    pub part_size_bytes: u64,
    pub parts_in_flight: usize,
    /// Upload no faster than this, on average (spare bandwidth only).
    pub max_rate_bytes_per_s: Option<f64>,
    pub engine: EngineChoice,
    /// What to do with a recording still being written.
    pub live: Live,
}

/// What `archive` does with a recording still being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    /// Leave it for a later run.
    Skip,
    /// Follow it: every segment that has filled goes up as soon as it has (looking again
    /// after each pause), and the rest with the manifest once the recording has ended.
    Follow { poll: Duration },
}

impl ArchiveOptions {
    pub fn new(node: String) -> ArchiveOptions {
        ArchiveOptions {
            node,
            recording: None,
            segment_size_bytes: SEGMENT_SIZE_BYTES_DEFAULT,
            part_size_bytes: PART_SIZE_BYTES_DEFAULT,
            parts_in_flight: PARTS_IN_FLIGHT_DEFAULT,
            max_rate_bytes_per_s: None,
            engine: EngineChoice::Auto,
            live: Live::Skip,
        }
    }

    fn validate(&self) -> Result<()> {
        crate::manifest::check_node(&self.node)?;
        if self.part_size_bytes < 5 << 20 {
            return Err(ArchiveError::Usage(format!(
                "part size {} bytes: S3 takes parts of 5 MiB and more",
                self.part_size_bytes
            )));
        }
        if self.segment_size_bytes < self.part_size_bytes {
            return Err(ArchiveError::Usage(format!(
                "segment size {} bytes is smaller than a part ({} bytes)",
                self.segment_size_bytes, self.part_size_bytes
            )));
        }
        if self.parts_in_flight == 0 {
            return Err(ArchiveError::Usage(
                "parts in flight must be 1 or more".into(),
            ));
        }
        if self
            .max_rate_bytes_per_s
            .is_some_and(|rate| !(rate.is_finite() && rate > 0.0))
        {
            return Err(ArchiveError::Usage("--max-rate must be above 0".into()));
        }
        Ok(())
    }
}

/// What became of one recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Archived by this run (segments the store held already were kept).
    Archived,
    /// Its manifest was there already, for this very entry.
    AlreadyArchived,
    /// Still being recorded: left for a later run.
    Recording,
    /// Ctrl-C or SIGTERM came first: resumed by the next run.
    Stopped,
    /// The archive holds this recording as an entry that the drives' entry does not go on
    /// from (another start, or an end before the chunks the archive holds): left as it
    /// is, never cut again from the drives (`kept_because` says why).
    Kept,
}

/// Which segments of a reading go up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upto {
    /// Every one, then the manifest: the recording has ended.
    End,
    /// Only those that filled (a live recording): the last one is still growing.
    Sealed,
}

/// One recording's archive run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecordingReport {
    pub recording_id: u32,
    pub label: String,
    pub state: String,
    pub outcome: Outcome,
    pub manifest_key: String,
    pub segment_count: u64,
    /// Segments the store already held whole (an earlier run), not sent again.
    pub segments_kept: u64,
    /// Segments whose multipart upload was resumed, and the parts that were not sent again.
    pub segments_resumed: u64,
    pub parts_kept: u64,
    pub chunk_count: u64,
    pub payload_bytes: u64,
    pub archived_bytes: u64,
    pub uploaded_bytes: u64,
    /// Chunks missing or damaged on the drives: missing in the archive too.
    pub holes: Vec<Hole>,
    /// Stream ranges a ring overwrote before they were read: missing in the archive.
    pub overwritten: Vec<Loss>,
    /// Followed while it was being written (--follow).
    pub followed: bool,
    /// Segments sent while the recording was still being written (--follow).
    pub segments_sent_live: u64,
    /// Segments of a ring that an earlier run had sent before it was interrupted (killed,
    /// stopped), which this one went on after without reading them again: the resume state
    /// says what they hold. (A linear recording's last reading goes through it all again
    /// and finds them in the store: `segments_kept`.)
    pub segments_sent_before: u64,
    /// Segments a manifest already in the store named, written for an earlier revision of
    /// the recording's entry (a follow archived a crashed recording before recovery closed
    /// its entry on the drives): kept as they are, the manifest written again for the entry
    /// as it is now, with whatever the drives hold after them.
    pub segments_held: u64,
    /// Why the archive was left as it is (`Kept`).
    #[serde(serialize_with = "nvrec::serialize_message")]
    pub kept_because: Option<crate::manifest::NotContinued>,
    /// Seconds paused because a recorder on the same set was filling its buffer pool.
    pub backoff_s: f64,
    pub elapsed_s: f64,
    pub rate_mib_per_s: f64,
}

/// What uploading one segment did.
#[derive(Default)]
struct SegmentUpload {
    kept: bool,
    resumed: bool,
    parts_kept: u64,
    uploaded_bytes: u64,
    e_tag: Option<String>,
}

impl RecordingReport {
    /// Counts what uploading one segment did.
    fn add(&mut self, done: &SegmentUpload) {
        self.segments_kept += u64::from(done.kept);
        self.segments_resumed += u64::from(done.resumed);
        self.parts_kept += done.parts_kept;
        self.uploaded_bytes += done.uploaded_bytes;
    }
}

/// Where segments go and how: the store, the local state that makes a run resumable, the
/// options, and the pace.
struct Uploader<'a> {
    archive: &'a Archive,
    state: &'a State,
    options: &'a ArchiveOptions,
    pacer: &'a Pacer<'a>,
}

/// Where the chunks come from: the drives of a set, read under the run's control and pace.
/// The reading thread's share of a [`Job`] (the uploader's state stays on the sending one).
struct Source<'a> {
    set: &'a VolumeSet,
    options: &'a ArchiveOptions,
    pacer: &'a Pacer<'a>,
    control: &'a Control,
    progress: &'a Progress,
}

/// One archive run over a set: what it reads and where it sends.
struct Job<'a> {
    source: Source<'a>,
    up: Uploader<'a>,
    /// Segments' memory, kept from one segment to the next over the whole run.
    spares: Spares,
}

/// Archives the finished recordings of `set` (or `options.recording`). Recordings whose
/// manifest is already in the archive for the same entry are left as they are.
pub fn archive_set(
    archive: &Archive,
    set: &VolumeSet,
    state: &State,
    catalog: Option<&Catalog>,
    options: &ArchiveOptions,
    control: &Control,
    progress: &Progress,
) -> Result<Vec<RecordingReport>> {
    options.validate()?;
    let entries = reader::recordings(set)?;
    let selected: Vec<RecordingEntry> = match options.recording {
        Some(id) => vec![reader::select(&entries, Some(id))?],
        // A reclaimed recording's space holds newer ones: there is nothing of it to send.
        None => entries
            .into_iter()
            .filter(|entry| entry.reclaimed.is_none())
            .collect(),
    };
    let live = set.live_recording()?;
    let pacer = Pacer::new(
        options.max_rate_bytes_per_s,
        Some((set.set_uuid.to_string(), control)),
    );
    let job = Job {
        source: Source {
            set,
            options,
            pacer: &pacer,
            control,
            progress,
        },
        up: Uploader {
            archive,
            state,
            options,
            pacer: &pacer,
        },
        spares: Spares::default(),
    };
    let mut reports = Vec::new();
    for entry in &selected {
        if control.state() != ControlState::Run {
            break;
        }
        let report = job.archive_entry(entry, live == Some(entry.recording_id), catalog)?;
        let stopped = report.outcome == Outcome::Stopped;
        reports.push(report);
        if stopped {
            break;
        }
    }
    Ok(reports)
}

impl RecordingReport {
    /// The report on `entry` before anything was done, its manifest at `manifest_key`.
    fn new(entry: &RecordingEntry, manifest_key: String) -> RecordingReport {
        RecordingReport {
            recording_id: entry.recording_id,
            label: entry.name.to_string(),
            state: state_word(entry).to_string(),
            outcome: Outcome::Archived,
            manifest_key,
            segment_count: 0,
            segments_kept: 0,
            segments_resumed: 0,
            parts_kept: 0,
            chunk_count: 0,
            payload_bytes: 0,
            archived_bytes: 0,
            uploaded_bytes: 0,
            holes: Vec::new(),
            overwritten: Vec::new(),
            followed: false,
            segments_sent_live: 0,
            segments_sent_before: 0,
            segments_held: 0,
            kept_because: None,
            backoff_s: 0.0,
            elapsed_s: 0.0,
            rate_mib_per_s: 0.0,
        }
    }

    /// Counts in the manifest an earlier run wrote for this very entry.
    fn already_archived(&mut self, manifest: &Manifest) {
        self.outcome = Outcome::AlreadyArchived;
        self.segment_count = manifest.segments.len() as u64;
        self.segments_kept = self.segment_count;
        self.chunk_count = manifest.chunk_count;
        self.payload_bytes = manifest.payload_bytes;
        self.archived_bytes = manifest.archived_bytes;
        self.holes = manifest.holes.clone();
        self.overwritten = manifest.overwritten().cloned().collect();
    }

    /// Counts what the readings of the recording have sent so far.
    fn sent(&mut self, sent: &Sent) {
        self.segment_count = sent.segments.len() as u64;
        self.chunk_count = sent.segments.iter().map(|s| s.chunk_count).sum();
        self.payload_bytes = sent.payload_bytes;
        self.archived_bytes = sent.segments.iter().map(|s| s.size_bytes).sum();
        self.holes = sent.outcome.holes.clone();
        self.overwritten = sent
            .outcome
            .losses
            .iter()
            .filter(|loss| loss.cause == LossCause::Overwritten)
            .cloned()
            .collect();
    }
}

impl Job<'_> {
    /// Archives one recording of the set (`live`: a recorder is writing it now) and
    /// catalogs its manifest. The report's outcome says whether the run was stopped.
    fn archive_entry(
        &self,
        entry: &RecordingEntry,
        live: bool,
        catalog: Option<&Catalog>,
    ) -> Result<RecordingReport> {
        let (options, pacer, archive) = (self.source.options, self.up.pacer, self.up.archive);
        let set_uuid = self.source.set.set_uuid.to_string();
        let dir = recording_dir(&options.node, &set_uuid, entry.recording_id);
        let mut report = RecordingReport::new(entry, manifest_key(&dir));
        let started = Instant::now();
        let paused_before = pacer.paused();
        let mut entry = entry.clone();
        // What an earlier run sent of it before it was killed or stopped: every reading of a
        // ring goes on from there (its early chunks may be gone from the drives by now), and
        // so does following a linear recording (its last reading goes through it all).
        let before = self.up.sent_before(&entry, &dir, Sent::default())?;
        let ring = entry.flags.contains(RecordingFlags::RING);
        let mut sent = Sent::default();
        if ring {
            report.segments_sent_before = before.segments.len() as u64;
            sent = before.clone();
        }
        if entry.state == RecordingState::Open || live {
            report.followed = self.source.options.live != Live::Skip;
            match self.until_ended(&entry, &dir, before, &mut report)? {
                Some((ended, carried)) => (entry, sent) = (ended, carried),
                None => return Ok(report),
            }
        }
        let entry = &entry;
        let stored = stored_manifest(archive, &report.manifest_key)?;
        if let Some(manifest) = &stored {
            match manifest.standing(entry)? {
                Standing::Current | Standing::Reclaimed => {
                    self.up.forget_sent(&dir)?;
                    report.already_archived(manifest);
                    if let Some(catalog) = catalog {
                        catalog.insert(&archive.url().to_string(), manifest)?;
                    }
                    return Ok(report);
                }
                Standing::Other(why) => {
                    report.already_archived(manifest);
                    report.outcome = Outcome::Kept;
                    report.kept_because = Some(why);
                    return Ok(report);
                }
                // Never cut again from the drives (a ring, or the recording after it, may
                // have written over them): what the archive holds stays, and the reading
                // goes on after it, and after what a run doing so sent before it was killed.
                Standing::Earlier => {
                    let held = self.up.held(manifest, entry)?;
                    report.segments_held = held.segments.len() as u64;
                    sent = self.up.sent_before(entry, &dir, held)?;
                    report.segments_sent_before = sent.segments.len() as u64 - report.segments_held;
                }
            }
        }
        let replaces = stored.as_ref();
        let manifest =
            archive_recording(self, entry, &dir, sent, Upto::End, replaces, &mut report)?.1;
        report.elapsed_s = started.elapsed().as_secs_f64();
        report.backoff_s = (pacer.paused() - paused_before).as_secs_f64();
        report.rate_mib_per_s =
            report.archived_bytes as f64 / (1u64 << 20) as f64 / report.elapsed_s.max(1e-9);
        match manifest {
            Some(manifest) => {
                if let Some(catalog) = catalog {
                    catalog.insert_with_flows(archive, &manifest)?;
                }
            }
            None => report.outcome = Outcome::Stopped,
        }
        Ok(report)
    }

    /// A recording still being written, as the options say: followed to its end from
    /// where `before` stands (its entry then, and what its passes sent that a ring's last
    /// one goes on from), or left (None, the report saying why).
    fn until_ended(
        &self,
        entry: &RecordingEntry,
        dir: &str,
        before: Sent,
        report: &mut RecordingReport,
    ) -> Result<Option<(RecordingEntry, Sent)>> {
        match self.source.options.live {
            Live::Skip => {
                report.outcome = Outcome::Recording;
                report.state = "recording".into();
                Ok(None)
            }
            Live::Follow { poll } => match follow(self, entry, dir, poll, before, report)? {
                Some((ended, sent)) => {
                    report.state = state_word(&ended).to_string();
                    Ok(Some((ended, sent)))
                }
                None => {
                    report.outcome = Outcome::Stopped;
                    Ok(None)
                }
            },
        }
    }
}

/// The manifest at `key`, if there is one (a damaged one is written anew).
fn stored_manifest(archive: &Archive, key: &str) -> Result<Option<Manifest>> {
    if archive.head(key)?.is_none() {
        return Ok(None);
    }
    match Manifest::decode(key, &archive.get(key)?) {
        Ok(manifest) => Ok(Some(manifest)),
        Err(ArchiveError::Manifest { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// What the passes over a recording have archived so far. A followed ring's passes carry
/// it to the next and to its last one: its early chunks are gone by its end, so the last
/// pass adds to what they sent instead of reading the recording again. The resume state
/// keeps it segment by segment, so that a run started again after a kill carries it on
/// too ([`Uploader::sent_before`]).
#[derive(Debug, Clone, Default)]
struct Sent {
    /// Where the next reading starts.
    start: SegmentStart,
    segments: Vec<SegmentInfo>,
    outcome: ReadOutcome,
    payload_bytes: u64,
    /// The scan of the packets' flows as it stood after the last segment sent (a run
    /// started again after a kill has none: a packet spanning into the first segment it
    /// reads is named in that segment's flows as not indexed).
    scan: Option<FlowScan>,
}

impl Sent {
    /// Goes on after a segment the store now holds, with what it commits.
    fn add(&mut self, info: SegmentInfo, mut commit: Commit) {
        self.segments.push(info);
        self.outcome.append(&mut commit.outcome);
        self.payload_bytes += commit.payload_bytes;
        self.start = commit.next;
    }
}

/// What reading a recording into segments came to.
struct Reading {
    summary: Result<ReadSummary>,
    packed: Packed,
    /// A chunk that would not go into a segment.
    failure: Option<ArchiveError>,
}

/// Reads `entry` from where `sent` stands (or uploads it whole, `upto`): its chunks go
/// into segments, each sent up as it fills while the next one is read, then the manifest
/// (only once the recording has ended), in place of `replaces` (the manifest in the store,
/// which it must hold all of). Returns what is sent now, and the manifest written.
fn archive_recording(
    job: &Job<'_>,
    entry: &RecordingEntry,
    dir: &str,
    sent: Sent,
    upto: Upto,
    replaces: Option<&Manifest>,
    report: &mut RecordingReport,
) -> Result<(Sent, Option<Manifest>)> {
    let mut sent = sent;
    // Gone on from where the archive holds the recording's last chunk: nothing is left to
    // read (the drives may hold another recording's chunks there by now).
    let nothing_left = upto == Upto::End
        && !sent.start.is_beginning()
        && sent.start.sequence >= entry.end_sequence;
    if !nothing_left {
        read_and_send(job, entry, dir, &mut sent, upto, report)?;
    }
    report.sent(&sent);
    if job.source.control.state() != ControlState::Run || upto == Upto::Sealed {
        return Ok((sent, None));
    }
    let manifest = manifest_of(job, entry, report, &sent)?;
    if let Some(why) = replaces.and_then(|old| manifest.lacks_what(old)) {
        return Err(ArchiveError::Manifest {
            key: report.manifest_key.clone(),
            why: format!(
                "not written again: the archive holds more of recording {} than this run found ({why})",
                entry.recording_id
            ),
        });
    }
    job.up
        .archive
        .put(&report.manifest_key, manifest.encode().into())?;
    // The manifest says it all now: nothing to go on from.
    job.up.forget_sent(dir)?;
    Ok((sent, Some(manifest)))
}

/// The reading and the sending of [`archive_recording`]: the chunks of `entry` from where
/// `sent` stands into segments, each sent as it fills while the next one is read, `sent`
/// gone on after each.
fn read_and_send(
    job: &Job<'_>,
    entry: &RecordingEntry,
    dir: &str,
    sent: &mut Sent,
    upto: Upto,
    report: &mut RecordingReport,
) -> Result<()> {
    let (sender, receiver) = sync_channel::<Sealed>(SEGMENTS_AHEAD);
    let flows = entry.flags.contains(RecordingFlags::RECORDS).then(|| {
        sent.scan
            .clone()
            .unwrap_or_else(|| FlowScan::new(0, Window::default(), entry.start_ns))
    });
    let start = sent.start;
    let ring = match entry.flags.contains(RecordingFlags::RING) {
        true => Some(RingReading {
            first_sequence: entry.first_sequence,
            end_sequence: entry.end_sequence,
            stream_len_bytes: entry.stream_len_bytes,
            overwriting: upto == Upto::Sealed || written_over(job.source.set, entry)?,
        }),
        false => None,
    };
    let (reading, upload_error) = std::thread::scope(|scope| {
        let reading = {
            let (source, spares) = (&job.source, &job.spares);
            let what = ReadingOf {
                entry,
                dir,
                start,
                ring,
                flows,
                upto,
            };
            scope.spawn(move || read_segments(source, what, sender, spares))
        };
        let sending = Sending { entry, dir };
        let upload_error = upload_segments(job, &sending, receiver, sent, report);
        (
            reading.join().expect("the reader thread does not panic"),
            upload_error,
        )
    });
    if let Some(error) = upload_error {
        return Err(error);
    }
    reading.summary?;
    if let Some(error) = reading.failure {
        return Err(error);
    }
    let mut packed = reading.packed;
    // The next reading starts at the segment still filling, unless a segment read was
    // never sent (the run was aborted): then after the last one sent.
    if packed.next.index == sent.start.index {
        sent.start = packed.next;
    }
    sent.outcome.append(&mut packed.leftover);
    Ok(())
}

/// Whether a later recording on `set` has written since the ring `entry` ended (or is
/// writing now): it began where the ring's write point stood, over the ring's oldest
/// chunks, so the chunks a reading of the ring misses were overwritten, as while the ring
/// itself records.
fn written_over(set: &VolumeSet, entry: &RecordingEntry) -> Result<bool> {
    let id = entry.recording_id;
    let later = set.recordings()?.iter().any(|e| e.recording_id > id);
    Ok(later || set.live_recording()?.is_some_and(|live| live > id))
}

/// Whose segments a sending side sends: the recording, and its key prefix.
struct Sending<'a> {
    entry: &'a RecordingEntry,
    dir: &'a str,
}

/// The sending side of [`archive_recording`]: every segment `receiver` gives goes up and
/// into `sent`, written down in the resume state with what it commits, its memory back to
/// the run's spares. Returns the error that ended it, if any.
fn upload_segments(
    job: &Job<'_>,
    sending: &Sending<'_>,
    receiver: Receiver<Sealed>,
    sent: &mut Sent,
    report: &mut RecordingReport,
) -> Option<ArchiveError> {
    for Sealed {
        segment,
        commit,
        flows,
    } in receiver.iter()
    {
        let done = match job.up.segment(&segment) {
            Ok(done) => done,
            Err(error) => return Some(error),
        };
        report.add(&done);
        let Segment {
            index,
            bytes,
            mut info,
        } = segment;
        info.e_tag = done.e_tag;
        let scan_after = match flows {
            Some(flows) => match job.up.flows(sending.entry, index, &mut info, flows) {
                Ok(scan) => Some(scan),
                Err(error) => return Some(error),
            },
            None => None,
        };
        if let Err(error) = job.up.segment_sent(sending, &info, &commit) {
            return Some(error);
        }
        sent.add(info, commit);
        sent.scan = scan_after;
        if let Ok(bytes) = bytes.try_into_mut() {
            job.spares.give(Vec::from(bytes));
        }
        if job.source.control.state() == ControlState::Abort {
            break;
        }
    }
    None
}

/// What a reading side reads: the chunks of `entry` from `start` (`ring`: how a ring's
/// stream is followed; `flows`: the scan its packets' flows go on from) into segments keyed
/// in `dir`, the last one too when `upto` is the end.
struct ReadingOf<'a> {
    entry: &'a RecordingEntry,
    dir: &'a str,
    start: SegmentStart,
    ring: Option<RingReading>,
    flows: Option<FlowScan>,
    upto: Upto,
}

/// The reading side of [`archive_recording`], on a thread of its own: what `what` says
/// into segments, each given to `sender` as it fills, their memory taken from `spares`
/// where it has some.
fn read_segments(
    source: &Source<'_>,
    what: ReadingOf<'_>,
    sender: SyncSender<Sealed>,
    spares: &Spares,
) -> Reading {
    let (entry, start, upto) = (what.entry, what.start, what.upto);
    let mut builder = SegmentBuilder::new(source.options.segment_size_bytes, entry.start_ns);
    if let Some(spare) = spares.take() {
        builder.refill(spare);
    }
    let mut packer = Packer::new(builder, what.dir, start, what.ring, what.flows);
    let mut failure: Option<ArchiveError> = None;
    let from_ns = (!start.is_beginning()).then_some(start.timestamp_ns);
    let summary = reader::read_recording_from(
        source.set,
        entry,
        source.options.engine,
        from_ns,
        source.control,
        source.progress,
        &mut |item| {
            match item {
                // Chunks in segments already sent (following a live recording).
                Item::Chunk { header, .. } if header.sequence < start.sequence => {}
                Item::Chunk { header, payload } => {
                    // The drives are the recorder's first: wait while it needs them.
                    source.pacer.hold();
                    match packer.chunk(header, payload, &sender, spares) {
                        Ok(go_on) => return go_on,
                        Err(error) => {
                            failure = Some(error);
                            return false;
                        }
                    }
                }
                Item::Missing {
                    first_sequence,
                    count,
                } => packer.missing(Hole {
                    first_sequence: Some(first_sequence),
                    chunk_count: count,
                    what: "missing on the drives".into(),
                }),
                Item::Damage(damage) => packer.damage(Hole {
                    first_sequence: damage.sequence,
                    chunk_count: 1,
                    what: format!(
                        "damaged on member {} slot {}: {}",
                        damage.member_index, damage.slot_index, damage.what
                    ),
                }),
            }
            true
        },
    );
    let complete = source.control.state() == ControlState::Run;
    let last = failure.is_none() && complete && upto == Upto::End;
    Reading {
        summary: summary.map_err(ArchiveError::from),
        packed: packer.finish(last, &sender, spares),
        failure,
    }
}

/// The manifest of `entry` archived as `sent` says.
fn manifest_of(
    job: &Job<'_>,
    entry: &RecordingEntry,
    report: &RecordingReport,
    sent: &Sent,
) -> Result<Manifest> {
    let set = job.source.set;
    // A ring holds only what it did not overwrite: its archive says what it lacks.
    let lost_bytes = if entry.flags.contains(RecordingFlags::RING) {
        entry.stream_len_bytes.saturating_sub(sent.payload_bytes)
    } else {
        entry.lost_bytes
    };
    Ok(Manifest {
        format: MANIFEST_FORMAT.into(),
        version: MANIFEST_VERSION,
        node: job.up.options.node.clone(),
        set_uuid: set.set_uuid.to_string(),
        set_label: set.label.clone(),
        recording_id: entry.recording_id,
        label: entry.name.to_string(),
        state: state_word(entry).into(),
        start_ns: entry.start_ns,
        end_ns: entry.end_ns,
        first_sequence: entry.first_sequence,
        end_sequence: entry.end_sequence,
        stream_len_bytes: entry.stream_len_bytes,
        lost_bytes,
        chunk_size_bytes: set.chunk_size_bytes,
        chunk_count: report.chunk_count,
        payload_bytes: report.payload_bytes,
        archived_bytes: report.archived_bytes,
        losses: sent.outcome.losses.clone(),
        holes: sent.outcome.holes.clone(),
        retirements: entry.retirements.iter().map(RetirementInfo::of).collect(),
        entry: encode_entry(entry)?,
        segments: sent.segments.clone(),
    })
}

/// Follows recording `entry` while it is being written, from where `sent` stands (what
/// an earlier run sent before it was killed or stopped, or nothing): every segment that
/// has filled is sent (each reading starts at the first segment not yet sent, found by
/// time without reading what comes before it), then it waits `poll` and looks again.
/// Returns the entry as it ended, with what a ring's passes sent (its last pass goes on
/// from there; a linear recording's reads the whole again and finds the segments in the
/// store), or `None` when Ctrl-C or SIGTERM came first. Only what a checkpoint or a checked chunk made durable
/// is read, as `ls` shows it; the recorder is never waited for and never slowed but by the
/// drives' shared bandwidth (`--max-rate` bounds ours). A ring's chunks overwritten before
/// a pass read them are the archive's losses, with their stream ranges.
fn follow(
    job: &Job<'_>,
    entry: &RecordingEntry,
    dir: &str,
    poll: Duration,
    mut sent: Sent,
    report: &mut RecordingReport,
) -> Result<Option<(RecordingEntry, Sent)>> {
    let id = entry.recording_id;
    let ring = entry.flags.contains(RecordingFlags::RING);
    loop {
        if job.source.control.state() != ControlState::Run {
            return Ok(None);
        }
        let still_live = job.source.set.live_recording()? == Some(id);
        let now = reader::select(&reader::recordings(job.source.set)?, Some(id))?;
        if !still_live {
            return Ok(Some((now, if ring { sent } else { Sent::default() })));
        }
        let before = sent.start.index;
        sent = if ring {
            archive_recording(job, &now, dir, sent, Upto::Sealed, None, report)?.0
        } else {
            // Counted by the last pass, which finds these segments in the store.
            let mut pass = report.clone();
            archive_recording(job, &now, dir, sent, Upto::Sealed, None, &mut pass)?.0
        };
        report.segments_sent_live += u64::from(sent.start.index - before);
        let deadline = Instant::now() + poll;
        while Instant::now() < deadline && job.source.control.state() == ControlState::Run {
            std::thread::sleep(Duration::from_millis(50).min(poll));
        }
    }
}

/// Whether a store error is worth another try: the connection, not the request.
fn retryable(error: &object_store::Error) -> bool {
    matches!(error, object_store::Error::Generic { .. })
}

impl Uploader<'_> {
    /// Stores the flows of segment `index` (`info`) beside it, and names them in `info`;
    /// returns the scan the next segment's flows go on from.
    fn flows(
        &self,
        entry: &RecordingEntry,
        index: u32,
        info: &mut SegmentInfo,
        flows: SealedFlows,
    ) -> Result<FlowScan> {
        let set_uuid = entry.set_uuid.to_string();
        let of = FlowsOf {
            set_uuid: &set_uuid,
            recording_id: entry.recording_id,
            segment: index,
        };
        let bytes = crate::flows::encode(of, &flows.table)?;
        let key = flows_key(&info.key);
        let size_bytes = bytes.len() as u64;
        self.archive.put(&key, bytes.into())?;
        info.flows = Some(FlowsInfo {
            key,
            size_bytes,
            flow_count: flows.table.len() as u64,
            packets: flows.table.packets(),
            times_ns: flows.table.times(),
            unindexed: flows.unindexed,
        });
        Ok(flows.scan_after)
    }

    /// What an earlier run sent of `entry` (keyed in `dir`) after `base` (what a manifest
    /// in the store holds, or nothing) and wrote down, segment by segment, before it was
    /// killed or stopped, as far as the store still holds it (one LIST of `dir` says, as a
    /// HEAD confirms a segment kept): from the first segment it lacks, the reading goes
    /// again, and what was written down from there is forgotten. `base` where no run did.
    fn sent_before(&self, entry: &RecordingEntry, dir: &str, base: Sent) -> Result<Sent> {
        let url = self.archive.url().to_string();
        let rows = self
            .state
            .sent_segments(&url, dir, entry.start_ns, base.start.index)?;
        let mut sent = base;
        if rows.is_empty() {
            return Ok(sent);
        }
        let stored: std::collections::HashMap<String, u64> =
            self.archive.list(dir)?.into_iter().collect();
        for (info, commit) in rows {
            if stored.get(&info.key) != Some(&info.size_bytes) {
                break;
            }
            sent.add(info, commit);
        }
        self.state.forget_sent(&url, dir, sent.start.index)?;
        Ok(sent)
    }

    /// What the archive holds of `entry` as `manifest` (written for an earlier revision of
    /// its entry) names it, for a reading to go on after its last chunk: its segments,
    /// their payload bytes, the findings filed with them (not those after the last chunk:
    /// the reading finds them again), and where the reading starts, which for a ring is
    /// where its stream stood after that chunk (its header, one ranged GET, says).
    fn held(&self, manifest: &Manifest, entry: &RecordingEntry) -> Result<Sent> {
        let Some(last) = manifest.segments.last() else {
            return Ok(Sent::default());
        };
        let last_sequence = last.last_sequence;
        let ring = entry.flags.contains(RecordingFlags::RING);
        let (stream_offset_bytes, sent_sequence_end) = match ring {
            true => (self.stream_end_after(last)?, last_sequence + 1),
            false => (0, 0),
        };
        let before_end = |sequence: Option<u64>| sequence.is_none_or(|s| s <= last_sequence);
        Ok(Sent {
            start: SegmentStart {
                index: manifest.segments.len() as u32,
                sequence: last_sequence + 1,
                timestamp_ns: last.last_timestamp_ns,
                stream_offset_bytes,
                sent_sequence_end,
            },
            segments: manifest.segments.clone(),
            outcome: ReadOutcome {
                losses: (manifest.losses.iter())
                    .filter(|loss| before_end(Some(loss.sequence)))
                    .cloned()
                    .collect(),
                holes: (manifest.holes.iter())
                    .filter(|hole| before_end(hole.first_sequence))
                    .cloned()
                    .collect(),
            },
            payload_bytes: manifest.payload_bytes,
            // A packet spanning into the next segment began in one archived before: the
            // reading names it as not indexed.
            scan: None,
        })
    }

    /// Where a ring's stream stands after the last chunk of segment `info`: that chunk's
    /// offset in the stream and payload length, from its header in the store.
    fn stream_end_after(&self, info: &SegmentInfo) -> Result<u64> {
        let bad = |why: String| ArchiveError::Manifest {
            key: info.key.clone(),
            why,
        };
        let offset = *(info.chunk_offsets.last())
            .ok_or_else(|| bad("the manifest names it with no chunk".into()))?;
        let end = (offset + nvrec::layout::CHUNK_HEADER_SIZE_BYTES as u64).min(info.size_bytes);
        let bytes = self.archive.get_range(&info.key, offset..end)?;
        let header = nvrec::layout::decode_chunk_header(&bytes).map_err(|error| {
            bad(format!(
                "its last chunk's header at offset {offset} does not decode: {error}"
            ))
        })?;
        Ok(header.stream_offset_bytes + u64::from(header.payload_len_bytes))
    }

    /// Writes down that the store holds segment `info` of what `sending` sends, and what
    /// it commits: a run started again after a kill goes on after it.
    fn segment_sent(
        &self,
        sending: &Sending<'_>,
        info: &SegmentInfo,
        commit: &Commit,
    ) -> Result<()> {
        let url = self.archive.url().to_string();
        self.state
            .segment_sent(&url, sending.dir, sending.entry.start_ns, info, commit)
    }

    /// Forgets what was sent of the recording in `dir`: its manifest is in the store.
    fn forget_sent(&self, dir: &str) -> Result<()> {
        self.state
            .forget_sent(&self.archive.url().to_string(), dir, 0)
    }

    /// Writes down that the store holds the segment `info` describes, as entity `e_tag`.
    fn object_done(&self, info: &SegmentInfo, e_tag: Option<&str>) -> Result<()> {
        let url = self.archive.url().to_string();
        self.state
            .object_done(&url, &info.key, info.size_bytes, info.crc32c, e_tag)
    }

    /// Sends `segment` up, unless the store holds it whole already: as one PUT, or as a
    /// multipart upload (resumed where the local state says the store stands).
    fn segment(&self, segment: &Segment) -> Result<SegmentUpload> {
        let Uploader {
            archive,
            state,
            options,
            pacer,
        } = *self;
        segment.check()?;
        let url = archive.url().to_string();
        let info = &segment.info;
        let key = info.key.as_str();
        match state.object(&url, key, info.size_bytes, info.crc32c)? {
            ObjectState::Done { e_tag } => {
                if archive
                    .head(key)?
                    .is_some_and(|meta| meta.size == info.size_bytes)
                {
                    return Ok(SegmentUpload {
                        kept: true,
                        e_tag,
                        ..SegmentUpload::default()
                    });
                }
                state.forget(&url, key)?;
            }
            ObjectState::Uploading { upload_id, parts } if archive.multipart.is_some() => {
                match self.multipart(segment, Some((upload_id, parts))) {
                    Ok(done) => return Ok(done),
                    // The store refused the upload (it no longer knows it: aborted, expired, or
                    // completed just before a crash; stores say so in different ways): begin
                    // again, the bytes are the same. A store that is away fails again below.
                    Err(ArchiveError::Store { .. }) => state.forget(&url, key)?,
                    Err(error) => return Err(error),
                }
            }
            _ => {}
        }
        if archive.multipart.is_some() && info.size_bytes > options.part_size_bytes {
            return self.multipart(segment, None);
        }
        let mut tries = 0;
        loop {
            tries += 1;
            archive.runtime.block_on(pacer.take(info.size_bytes));
            let path = archive.path(key);
            let result = archive.runtime.block_on(
                archive
                    .store
                    .put(&path, PutPayload::from(segment.bytes.clone())),
            );
            match result {
                Ok(put) => {
                    self.object_done(info, put.e_tag.as_deref())?;
                    return Ok(SegmentUpload {
                        uploaded_bytes: info.size_bytes,
                        e_tag: put.e_tag,
                        ..SegmentUpload::default()
                    });
                }
                Err(error) if retryable(&error) && tries < REQUEST_TRIES => {
                    std::thread::sleep(RETRY_PAUSE);
                }
                Err(error) => return Err(archive.error("PUT", key, error)),
            }
        }
    }

    /// Uploads `segment` as a multipart upload, resuming `resume` (its id and the parts the
    /// store acknowledged) where given.
    fn multipart(
        &self,
        segment: &Segment,
        resume: Option<(String, Vec<(usize, String)>)>,
    ) -> Result<SegmentUpload> {
        let archive = self.archive;
        let store = archive.multipart.as_ref().expect("a multipart store");
        let info = &segment.info;
        let key = info.key.as_str();
        let path = archive.path(key);
        let part_size = self.options.part_size_bytes as usize;
        let part_count = segment.bytes.len().div_ceil(part_size).max(1);
        let mut done = SegmentUpload::default();
        let (upload_id, known) = match resume {
            Some((id, parts)) => {
                done.resumed = true;
                (id, parts)
            }
            None => {
                let id = archive
                    .runtime
                    .block_on(store.create_multipart(&path))
                    .map_err(|source| archive.error("create multipart upload", key, source))?;
                let url = archive.url().to_string();
                self.state
                    .begin_upload(&url, key, info.size_bytes, info.crc32c, &id)?;
                (id, Vec::new())
            }
        };
        let mut parts: Vec<Option<PartId>> = vec![None; part_count];
        for (index, content_id) in known {
            if index < part_count {
                parts[index] = Some(PartId { content_id });
                done.parts_kept += 1;
            }
        }
        self.send_parts(segment, &upload_id, &mut parts, &mut done)?;
        let parts: Vec<PartId> = parts
            .into_iter()
            .map(|p| p.expect("every part sent"))
            .collect();
        let put = archive
            .runtime
            .block_on(store.complete_multipart(&path, &upload_id, parts))
            .map_err(|source| archive.error("complete multipart upload", key, source))?;
        self.check_stored_size(info)?;
        self.object_done(info, put.e_tag.as_deref())?;
        done.e_tag = put.e_tag;
        Ok(done)
    }

    /// Sends the parts of `segment` not yet in `parts` (upload `upload_id`), several in
    /// flight, each written to the state as the store acknowledges it.
    fn send_parts(
        &self,
        segment: &Segment,
        upload_id: &MultipartId,
        parts: &mut [Option<PartId>],
        done: &mut SegmentUpload,
    ) -> Result<()> {
        let (archive, pacer) = (self.archive, self.pacer);
        let store = archive.multipart.as_ref().expect("a multipart store");
        let url = archive.url().to_string();
        let key = segment.info.key.as_str();
        let path = archive.path(key);
        let part_size = self.options.part_size_bytes as usize;
        let missing: Vec<usize> = (0..parts.len()).filter(|&i| parts[i].is_none()).collect();
        archive.runtime.block_on(async {
            let mut sends = futures::stream::iter(missing)
                .map(|index| {
                    let start = index * part_size;
                    let end = (start + part_size).min(segment.bytes.len());
                    let bytes = segment.bytes.slice(start..end);
                    let len = bytes.len();
                    let sent = send_part(store.as_ref(), pacer, &path, upload_id, index, bytes);
                    async move { (index, len, sent.await) }
                })
                .buffer_unordered(self.options.parts_in_flight);
            while let Some((index, len, result)) = sends.next().await {
                let part = result.map_err(|source| archive.error("upload part", key, source))?;
                self.state
                    .part_done(&url, key, upload_id, index, &part.content_id)?;
                done.uploaded_bytes += len as u64;
                parts[index] = Some(part);
            }
            Ok(())
        })
    }

    /// Checks that the store now holds exactly the bytes given: its size says so (the
    /// checksum was compared before they left).
    fn check_stored_size(&self, info: &SegmentInfo) -> Result<()> {
        let key = info.key.as_str();
        let size = self.archive.head(key)?.map(|meta| meta.size);
        if size != Some(info.size_bytes) {
            return Err(ArchiveError::Checksum {
                key: key.to_string(),
                why: format!(
                    "the store holds {} after the upload of {} bytes",
                    size.map_or("nothing".into(), |s| format!("{s} bytes")),
                    info.size_bytes
                ),
            });
        }
        Ok(())
    }
}

/// Sends part `index` of upload `upload_id` at the pace's leave, tried again after a
/// failure a retry may cure.
async fn send_part(
    store: &dyn MultipartStore,
    pacer: &Pacer<'_>,
    path: &object_store::path::Path,
    upload_id: &MultipartId,
    index: usize,
    bytes: bytes::Bytes,
) -> object_store::Result<PartId> {
    let mut tries = 0;
    loop {
        tries += 1;
        pacer.take(bytes.len() as u64).await;
        match store
            .put_part(path, upload_id, index, PutPayload::from(bytes.clone()))
            .await
        {
            Ok(part) => return Ok(part),
            Err(error) if retryable(&error) && tries < REQUEST_TRIES => {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ArchiveUrl, Mode};

    fn segment(len_bytes: usize, seed: u8) -> Segment {
        let mut builder = SegmentBuilder::new(u64::MAX, 0);
        let payload_len = 100_000usize;
        let mut sequence = 0u64;
        while builder.is_empty() || (sequence as usize) * (payload_len + 128) < len_bytes {
            let payload: Vec<u8> = (0..payload_len)
                .map(|i| (i as u64 * 7 + sequence * 13 + u64::from(seed)) as u8)
                .collect();
            let header = crate::segment::tests::header(sequence, payload_len);
            builder.push(&header, &payload).unwrap();
            sequence += 1;
        }
        builder.take(0, "n/s/rec-000001/seg-000000".into(), None)
    }

    struct Fixture {
        archive: Archive,
        state: State,
        dir: std::path::PathBuf,
        options: ArchiveOptions,
        pacer: Pacer<'static>,
    }

    impl Fixture {
        fn new(name: &str) -> Fixture {
            let dir =
                std::env::temp_dir().join(format!("nvrec-upload-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            Fixture {
                archive: Archive::open(&ArchiveUrl::Memory, Mode::Write).unwrap(),
                state: State::open(&dir.join("state.sqlite")).unwrap(),
                dir,
                options: ArchiveOptions::new("n".into()),
                pacer: Pacer::new(None, None),
            }
        }

        /// Writes to the state that a multipart upload `id` of `segment` began.
        fn begin_upload(&self, segment: &Segment, id: &str) {
            let url = self.archive.url().to_string();
            let info = &segment.info;
            self.state
                .begin_upload(&url, &info.key, info.size_bytes, info.crc32c, id)
                .unwrap();
        }

        fn upload(&self, segment: &Segment) -> Result<SegmentUpload> {
            Uploader {
                archive: &self.archive,
                state: &self.state,
                options: &self.options,
                pacer: &self.pacer,
            }
            .segment(segment)
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn a_multipart_upload_resumes_with_the_parts_the_store_acknowledged() {
        let fixture = Fixture::new("resume");
        let segment = segment(30 << 20, 1);
        let key = segment.info.key.clone();
        let url = fixture.archive.url().to_string();
        // A run that got two parts acknowledged, then died.
        let store = fixture.archive.multipart.clone().unwrap();
        let path = fixture.archive.path(&key);
        let id = fixture
            .archive
            .runtime
            .block_on(store.create_multipart(&path))
            .unwrap();
        fixture.begin_upload(&segment, &id);
        let part = PART_SIZE_BYTES_DEFAULT as usize;
        for index in 0..2 {
            let bytes = segment.bytes.slice(index * part..(index + 1) * part);
            let acknowledged = fixture
                .archive
                .runtime
                .block_on(store.put_part(&path, &id, index, bytes.into()))
                .unwrap();
            fixture
                .state
                .part_done(&url, &key, &id, index, &acknowledged.content_id)
                .unwrap();
        }
        let done = fixture.upload(&segment).unwrap();
        assert!(done.resumed);
        assert_eq!(done.parts_kept, 2);
        assert_eq!(
            done.uploaded_bytes,
            segment.info.size_bytes - 2 * part as u64
        );
        assert_eq!(fixture.archive.get(&key).unwrap(), segment.bytes);
        // Again: the store holds it whole, nothing goes.
        let again = fixture.upload(&segment).unwrap();
        assert!(again.kept);
        assert_eq!(again.uploaded_bytes, 0);
    }

    #[test]
    fn an_upload_the_store_forgot_begins_again_and_a_lost_object_goes_again() {
        let fixture = Fixture::new("forgot");
        let segment = segment(12 << 20, 2);
        let key = segment.info.key.clone();
        let url = fixture.archive.url().to_string();
        fixture.begin_upload(&segment, "999");
        fixture.state.part_done(&url, &key, "999", 0, "").unwrap();
        let done = fixture.upload(&segment).unwrap();
        assert_eq!(done.uploaded_bytes, segment.info.size_bytes);
        assert_eq!(fixture.archive.get(&key).unwrap(), segment.bytes);
        // The state says done, but the object is gone from the store: it goes again.
        fixture
            .archive
            .runtime
            .block_on(fixture.archive.store.delete(&fixture.archive.path(&key)))
            .unwrap();
        let done = fixture.upload(&segment).unwrap();
        assert!(!done.kept);
        assert_eq!(fixture.archive.get(&key).unwrap(), segment.bytes);
    }

    #[test]
    fn bytes_that_are_not_the_recorded_chunks_never_leave() {
        let fixture = Fixture::new("corrupt");
        let mut segment = segment(6 << 20, 3);
        let mut bytes = segment.bytes.to_vec();
        bytes[4 << 20] ^= 1;
        segment.bytes = bytes.into();
        match fixture.upload(&segment) {
            Err(ArchiveError::Checksum { .. }) => {}
            other => panic!("uploaded: {:?}", other.map(|done| done.uploaded_bytes)),
        }
        assert!(fixture.archive.head(&segment.info.key).unwrap().is_none());
    }
}
