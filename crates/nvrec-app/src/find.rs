//! `find`: the flows of a recording's window that a Community ID or an expression names,
//! with their times, packets, bytes and the chunks their packets lie in.
//!
//! This reads every chunk of the window through a [`ChunkSource`] (the drives or an
//! archive) and keys every packet ([`FlowScan`]): its answer is exact, and is what a flow
//! index's answer must equal. A hole in the window (missing or damaged chunks, records
//! that do not decode, a packet whose fragments never met) is named with the answer and
//! fails it: a flow may have had packets there. The losses the source recorded (a
//! socket's or a capture ring's drops) are named too; they are the traffic's, not the
//! recording's.
//!
//! An archive whose segments carry their flows (`nvrec_archive::flows`) answers from
//! them instead: only the flows of the segments whose packets the window overlaps are
//! read, then only the chunks the matching flows lie in, keyed again ([`FindRead`]). The
//! answer is the same; where the flows cannot give it (a segment archived without them,
//! one whose scan could not key some packets, holes in the archive) every chunk is read.

use crate::chunks::ChunkSource;
use crate::flow_index::{DriveIndex, Stretch};
use crate::outcome::{Class, UsageError};
use anyhow::Result;
use nvrec::control::{Control, Progress};
use nvrec::engine::EngineChoice;
use nvrec::export::Window;
use nvrec::flow::{FlowEntry, FlowKey, FlowQuery, FlowScan, FlowTable};
use nvrec::layout::{RecordingEntry, RecordingFlags};
use nvrec::recording::reader::{read_recording_from, Item, ReadSummary};
use nvrec::recording::volume::VolumeSet;
use nvrec_archive::manifest::SegmentInfo;
use nvrec_archive::read::ArchivedRecording;
use nvrec_archive::Archive;
use std::collections::HashSet;
use std::sync::Arc;

/// What `find` is asked.
#[derive(Debug, Clone)]
pub struct FindRequest {
    pub query: FlowQuery,
    /// Receive times, ns since the Unix epoch (`window::window_of`).
    pub window: Window,
    /// The Community ID seed (0 unless the sensors that name flows were given another).
    pub seed: u16,
    /// Whether the flows' index is used where there is one, or every chunk is read.
    pub lookup: Lookup,
}

/// How `find` comes to its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lookup {
    /// From the flows' index (on the drives or beside an archive's segments) where there is
    /// one; by reading every chunk of the window otherwise.
    #[default]
    Index,
    /// By reading every chunk of the window, whatever index there is (the answer the index
    /// must equal).
    Scan,
}

/// What `find` found.
#[derive(Debug)]
pub struct FindReport {
    pub entry: RecordingEntry,
    /// The flows asked for, by their first packet's time.
    pub flows: Vec<FlowEntry>,
    /// Flows and packets in the window, asked for or not.
    pub flows_in_window: usize,
    pub packets_in_window: u64,
    pub summary: ReadSummary,
    /// Holes in the window and records that could not be read or joined.
    pub holes: Vec<String>,
    /// The losses the source recorded in the window (drops before the recorder).
    pub losses: Vec<String>,
    /// How the answer was come to.
    pub read: FindRead,
}

/// How `find` came to its answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum FindRead {
    /// Every chunk of the window was read and every packet keyed: `flows_in_window` and
    /// `packets_in_window` count them. Over an archive, why its flows could not answer.
    Scanned {
        #[serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "nvrec::serialize_message"
        )]
        why_not_indexed: Option<NotIndexed>,
    },
    /// From an archive's flows: those of the segments whose packets the window overlaps
    /// were read, then the chunks that the matching flows lie in. `flows_in_window` and
    /// `packets_in_window` count the flows of those segments whose times overlap the
    /// window, and all their packets in those segments; the losses named are the source's
    /// drops in the chunks read.
    Indexed {
        segments_searched: usize,
        flows_bytes_read: u64,
        /// The chunks of the segments searched, and those read.
        chunks_searched: u64,
        chunks_read: u64,
    },
    /// From the flow index the recorder wrote on the drives (`flow_index`): its blocks for
    /// the window were read (`index_chunks_read` chunks read to find them), then the
    /// chunks the matching flows lie in and the stretches no block covers (`unindexed`
    /// says why each is scanned). `flows_in_window` and `packets_in_window` count the
    /// flows of the blocks read whose times overlap the window.
    DriveIndex {
        blocks_read: usize,
        index_bytes_read: u64,
        index_chunks_read: u64,
        /// The chunks of the blocks' buckets, and those read for the answer.
        chunks_searched: u64,
        chunks_read: u64,
        unindexed: Vec<String>,
    },
}

/// Why an archive's flows could not answer, and every chunk of the window was read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotIndexed {
    #[error(
        "the archive lacks chunks of the recording ({0} holes): every chunk is read to name them"
    )]
    ArchiveHoles(usize),
    #[error("segment {0} was archived without its flows")]
    SegmentWithoutFlows(String),
    /// What the archive's scan of that segment could not key, as its flows object says.
    #[error("the flows of {key} lack packets: {note}")]
    FlowsLackPackets { key: String, note: String },
    #[error("reading the flows: {0}")]
    FlowsUnreadable(Arc<nvrec_archive::ArchiveError>),
    #[error("reading the chunks the flows name: {0:#}")]
    ChunksUnreadable(Arc<anyhow::Error>),
    #[error("reading the flow index on the drives: {0:#}")]
    IndexUnreadable(Arc<anyhow::Error>),
}

/// Two reasons are the same where they say the same (the errors they carry are not
/// comparable otherwise).
impl PartialEq for NotIndexed {
    fn eq(&self, other: &NotIndexed) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for NotIndexed {}

impl FindReport {
    /// An answer read around holes may lack packets: it fails, naming them.
    pub fn class(&self) -> Class {
        Class::passed(self.holes.is_empty())
    }
}

/// Finds the flows `request` asks for in `entry` of `source`.
pub fn find(
    source: &ChunkSource,
    entry: RecordingEntry,
    request: &FindRequest,
    engine: EngineChoice,
    control: &Control,
    progress: &Progress,
) -> Result<FindReport> {
    if !entry.flags.contains(RecordingFlags::RECORDS) {
        return Err(UsageError(format!(
            "recording {} is a byte stream, not packets: find looks for flows in recordings \
             of udp://, tcp:// and capture: sources",
            entry.recording_id
        ))
        .into());
    }
    let question = (&request.window, &request.query, request.seed);
    let indexed = match request.lookup {
        Lookup::Index => Indexed::of(source, &entry, question, engine, control),
        Lookup::Scan => None,
    };
    let why_not_indexed = match indexed {
        Some(Ok(indexed)) => match find_indexed(&indexed, &entry, request, control, progress) {
            Ok(report) => return Ok(report),
            Err(why) => Some(why),
        },
        Some(Err(why)) => Some(why),
        None => None,
    };
    let mut scan = FlowScan::new(request.seed, request.window, entry.start_ns);
    let window = (request.window.from_ns, request.window.to_ns);
    let summary = source.read_window(&entry, engine, window, control, progress, &mut |item| {
        scan_item(&mut scan, item)
    })?;
    scan.finish();
    let (table, holes, losses) = scan.into_parts();
    Ok(FindReport {
        flows: asked(&table, &request.query),
        flows_in_window: table.len(),
        packets_in_window: table.packets(),
        entry,
        summary,
        holes,
        losses,
        read: FindRead::Scanned { why_not_indexed },
    })
}

/// The flows of `table` that `query` asks for.
fn asked(table: &FlowTable, query: &FlowQuery) -> Vec<FlowEntry> {
    table.matching(query).into_iter().cloned().collect()
}

/// Hands one item of a read to `scan`; whether to go on.
fn scan_item(scan: &mut FlowScan, item: Item<'_>) -> bool {
    match item {
        Item::Chunk { header, payload } => scan.chunk(header, payload),
        hole => {
            scan.hole(hole.hole_text().unwrap_or_default());
            true
        }
    }
}

/// The segments of an archived recording whose flows `window` asks for; why its flows
/// cannot give the answer otherwise: a segment archived without them, one whose scan could
/// not key some packets, or chunks the archive lacks (a scan names them).
fn indexed_segments<'a>(
    recording: &'a ArchivedRecording,
    window: &Window,
) -> Result<Vec<&'a SegmentInfo>, NotIndexed> {
    let holes = recording.manifest.holes.len();
    if holes > 0 {
        return Err(NotIndexed::ArchiveHoles(holes));
    }
    let mut searched = Vec::new();
    for info in &recording.manifest.segments {
        let Some(flows) = info.flows.as_ref() else {
            return Err(NotIndexed::SegmentWithoutFlows(info.key.clone()));
        };
        let Some((first, last)) = flows.times_ns else {
            continue;
        };
        if !overlaps(window, first, last) {
            continue;
        }
        if let Some(note) = flows.unindexed.first() {
            return Err(NotIndexed::FlowsLackPackets {
                key: flows.key.clone(),
                note: note.to_string(),
            });
        }
        searched.push(info);
    }
    Ok(searched)
}

/// Whether packets from `first` to `last` may lie in `window`.
fn overlaps(window: &Window, first_ns: u64, last_ns: u64) -> bool {
    window.from_ns.is_none_or(|from| last_ns >= from) && window.to_ns.is_none_or(|to| first_ns < to)
}

/// What a recording's flows say of a window and a query (an archive's flows objects, or
/// the index its recorder wrote on the drives): the flows whose times overlap the window,
/// and the chunks that the flows asked for lie in: all that a search or an export cut by
/// flows reads.
pub struct Indexed<'a> {
    from: IndexedFrom<'a>,
    /// The flows read whose times overlap the window.
    rows: Vec<FlowEntry>,
    runs: Vec<(u64, u64)>,
    /// The source's losses in the window, as the index names them.
    losses: Vec<String>,
}

/// Where an [`Indexed`] answer's flows and chunks come from.
enum IndexedFrom<'a> {
    Archive {
        archive: &'a Archive,
        recording: &'a ArchivedRecording,
        segments_searched: usize,
        flows_bytes_read: u64,
        chunks_searched: u64,
    },
    Drives {
        set: &'a VolumeSet,
        entry: Box<RecordingEntry>,
        engine: EngineChoice,
        /// What is read: the runs with where each begins, and the stretches no block
        /// covers.
        stretches: Vec<Stretch>,
        index: Box<DriveIndex>,
    },
}

impl<'a> Indexed<'a> {
    /// The flows of `entry` of `source` for a window and a query (Community IDs with the
    /// seed), where `source` is an archive whose segments carry their flows or drives
    /// whose recording indexed its flows (None otherwise); why its flows cannot answer,
    /// where they cannot.
    pub fn of(
        source: &'a ChunkSource,
        entry: &RecordingEntry,
        (window, query, seed): (&Window, &FlowQuery, u16),
        engine: EngineChoice,
        control: &Control,
    ) -> Option<Result<Indexed<'a>, NotIndexed>> {
        if let ChunkSource::Set(set) = source {
            if !entry.flags.contains(RecordingFlags::FLOW_INDEX) {
                return None;
            }
            let unreadable = |error| NotIndexed::IndexUnreadable(Arc::new(error));
            let index = DriveIndex::of(set, entry, window, seed, engine, control);
            return Some(index.map_err(unreadable).map(|index| {
                Indexed::of_drives(set, entry.clone(), engine, index, (window, query))
            }));
        }
        let (archive, recording) = source.archived(entry)?;
        Some(indexed_segments(recording, window).and_then(|segments| {
            let mut indexed = Indexed {
                from: IndexedFrom::Archive {
                    archive,
                    recording,
                    segments_searched: segments.len(),
                    flows_bytes_read: 0,
                    chunks_searched: segments.iter().map(|info| info.chunk_count).sum(),
                },
                rows: Vec::new(),
                runs: Vec::new(),
                losses: Vec::new(),
            };
            for info in segments {
                indexed.read_flows(info, seed)?;
            }
            indexed
                .rows
                .retain(|flow| overlaps(window, flow.first_ns, flow.last_ns));
            indexed.runs = joined_runs(
                (indexed.rows.iter())
                    .filter(|flow| query.matches(flow))
                    .flat_map(|flow| flow.chunks.iter().copied()),
            );
            Ok(indexed)
        }))
    }

    /// The answer of the index on the drives: the rows of its blocks in the window, and
    /// the stretches to read (each run of the matching flows from its first chunk's time,
    /// and what no block covers).
    fn of_drives(
        set: &'a VolumeSet,
        entry: RecordingEntry,
        engine: EngineChoice,
        index: DriveIndex,
        (window, query): (&Window, &FlowQuery),
    ) -> Indexed<'a> {
        let mut rows: Vec<FlowEntry> = (index.blocks.iter())
            .flat_map(|block| block.flows.iter())
            .filter(|flow| overlaps(window, flow.first_ns, flow.last_ns))
            .cloned()
            .collect();
        rows.sort_by_key(|flow| (flow.first_ns, flow.key));
        let runs = joined_runs(
            (rows.iter())
                .filter(|flow| query.matches(flow))
                .flat_map(|flow| flow.chunks.iter().copied()),
        );
        let losses = (index.blocks.iter().rev())
            .flat_map(|block| block.losses.iter())
            .filter(|(time, _)| window.contains(*time))
            .map(|(_, text)| text.clone())
            .collect();
        let stretches = stretches_to_read(&index, &runs, window);
        Indexed {
            from: IndexedFrom::Drives {
                set,
                entry: Box::new(entry),
                engine,
                stretches,
                index: Box::new(index),
            },
            rows,
            runs,
            losses,
        }
    }

    /// Adds the flows of segment `info`.
    fn read_flows(&mut self, info: &SegmentInfo, seed: u16) -> Result<(), NotIndexed> {
        let IndexedFrom::Archive {
            archive,
            flows_bytes_read,
            ..
        } = &mut self.from
        else {
            unreachable!("segments are an archive's")
        };
        let unreadable = |error| NotIndexed::FlowsUnreadable(Arc::new(error));
        let flows = info.flows.as_ref().expect("searched for its flows");
        let bytes = archive.get(&flows.key).map_err(unreadable)?;
        *flows_bytes_read += bytes.len() as u64;
        let decoded = nvrec_archive::flows::decode(&flows.key, bytes, seed);
        self.rows.extend(decoded.map_err(unreadable)?);
        Ok(())
    }

    /// Reads the runs of chunks (and on the drives the stretches no block covers), handing
    /// each item to `each` (which goes on past the window: the next run may be in it).
    pub fn read(
        &self,
        control: &Control,
        progress: &Progress,
        each: &mut dyn FnMut(Item<'_>),
    ) -> Result<ReadSummary> {
        match &self.from {
            IndexedFrom::Archive {
                archive, recording, ..
            } => Ok(nvrec_archive::read::read_runs(
                archive,
                recording,
                &self.runs,
                control,
                progress,
                &mut |item| {
                    each(item);
                    true
                },
            )?),
            IndexedFrom::Drives {
                set,
                entry,
                engine,
                stretches,
                ..
            } => read_stretches(set, entry, *engine, stretches, control, progress, each),
        }
    }

    /// Whether the last chunks read are a stretch no block covers, read whole (the end of a
    /// recording killed or running): a packet cut at its end is a hole, not another run's.
    fn ends_with_a_scan(&self) -> bool {
        let IndexedFrom::Drives {
            stretches, index, ..
        } = &self.from
        else {
            return false;
        };
        let last_end = stretches.iter().map(|stretch| stretch.end).max();
        (index.unindexed.iter()).any(|stretch| Some(stretch.end) == last_end)
    }

    /// How a reading of `chunks_read` chunks of the runs came to its answer.
    pub fn how(&self, chunks_read: u64) -> FindRead {
        match &self.from {
            IndexedFrom::Archive {
                segments_searched,
                flows_bytes_read,
                chunks_searched,
                ..
            } => FindRead::Indexed {
                segments_searched: *segments_searched,
                flows_bytes_read: *flows_bytes_read,
                chunks_searched: *chunks_searched,
                chunks_read,
            },
            IndexedFrom::Drives {
                index, stretches, ..
            } => FindRead::DriveIndex {
                blocks_read: index.blocks.len(),
                index_bytes_read: index.index_bytes_read,
                index_chunks_read: index.chunks_read,
                chunks_searched: (index.blocks.iter())
                    .map(|block| block.chunk_times_ns.len() as u64)
                    .sum::<u64>()
                    + (index.unindexed.iter())
                        .map(|stretch| stretch.end - stretch.first)
                        .sum::<u64>(),
                chunks_read: chunks_read.min(stretches.iter().map(|s| s.end - s.first).sum()),
                unindexed: index.notes.clone(),
            },
        }
    }
}

/// What to read for `runs` of an index on the drives: each run from its first chunk's
/// time (where the walk learnt it; else from the window's start), and the stretches no
/// block covers; those inside another are dropped, those that overlap joined.
fn stretches_to_read(index: &DriveIndex, runs: &[(u64, u64)], window: &Window) -> Vec<Stretch> {
    let mut stretches: Vec<Stretch> = (runs.iter())
        .map(|&(first, count)| Stretch {
            from_ns: index.chunk_time_ns(first).or(window.from_ns),
            first,
            end: first + count,
        })
        .chain(index.unindexed.iter().copied())
        .collect();
    stretches.sort_by_key(|stretch| (stretch.first, std::cmp::Reverse(stretch.end)));
    let mut joined: Vec<Stretch> = Vec::new();
    for stretch in stretches {
        match joined.last_mut() {
            Some(last) if stretch.first <= last.end => last.end = last.end.max(stretch.end),
            _ => joined.push(stretch),
        }
    }
    joined
}

/// Reads each stretch of chunks from the drives: from where it begins in time, handing on
/// the items of its sequences, until past its end.
fn read_stretches(
    set: &VolumeSet,
    entry: &RecordingEntry,
    engine: EngineChoice,
    stretches: &[Stretch],
    control: &Control,
    progress: &Progress,
    each: &mut dyn FnMut(Item<'_>),
) -> Result<ReadSummary> {
    let mut total = ReadSummary::default();
    for stretch in stretches {
        let mut within = |item: Item<'_>| -> bool {
            let (first, last) = match &item {
                Item::Chunk { header, .. } => (header.sequence, header.sequence),
                Item::Missing {
                    first_sequence,
                    count,
                } => (*first_sequence, first_sequence + count - 1),
                Item::Damage(damage) => {
                    let sequence = damage.sequence.unwrap_or(stretch.first);
                    (sequence, sequence)
                }
            };
            if first >= stretch.end {
                return false;
            }
            if last >= stretch.first {
                each(item);
            }
            true
        };
        let summary = read_recording_from(
            set,
            entry,
            engine,
            stretch.from_ns,
            control,
            progress,
            &mut within,
        )?;
        add_summary(&mut total, &summary);
    }
    Ok(total)
}

/// Adds one read's counts to a total.
fn add_summary(total: &mut ReadSummary, read: &ReadSummary) {
    total.chunk_count += read.chunk_count;
    total.payload_bytes += read.payload_bytes;
    total.read_bytes += read.read_bytes;
    total.missing_chunk_count += read.missing_chunk_count;
    total.damage_count += read.damage_count;
    total.gap_count += read.gap_count;
    total.lost_bytes += read.lost_bytes;
    total.elapsed_s += read.elapsed_s;
    total.cpu_user_s += read.cpu_user_s;
    total.cpu_system_s += read.cpu_system_s;
    total.redirected_chunk_count += read.redirected_chunk_count;
    total.read_pool_bytes = total.read_pool_bytes.max(read.read_pool_bytes);
    total.first_sequence = total.first_sequence.or(read.first_sequence);
    total.last_sequence = read.last_sequence.or(total.last_sequence);
    total.rate_mib_per_s = match total.elapsed_s > 0.0 {
        true => total.payload_bytes as f64 / (1u64 << 20) as f64 / total.elapsed_s,
        false => 0.0,
    };
}

/// [`find`] from an archive's flows: the chunks the flows asked for lie in, read and keyed
/// again, so that their times, packets and bytes are the window's exactly. Why not, where
/// the chunks could not be read (a scan answers then).
fn find_indexed(
    indexed: &Indexed<'_>,
    entry: &RecordingEntry,
    request: &FindRequest,
    control: &Control,
    progress: &Progress,
) -> Result<FindReport, NotIndexed> {
    let mut scan = FlowScan::new(request.seed, request.window, entry.start_ns).of_runs();
    let summary = indexed
        .read(control, progress, &mut |item| {
            scan_item(&mut scan, item);
        })
        .map_err(|error| NotIndexed::ChunksUnreadable(Arc::new(error)))?;
    if indexed.ends_with_a_scan() {
        scan.ends_whole();
    }
    scan.finish();
    let (table, holes, mut losses) = scan.into_parts();
    for loss in &indexed.losses {
        if !losses.contains(loss) {
            losses.push(loss.clone());
        }
    }
    let keys: HashSet<FlowKey> = indexed.rows.iter().map(|flow| flow.key).collect();
    Ok(FindReport {
        flows: asked(&table, &request.query),
        flows_in_window: keys.len(),
        packets_in_window: indexed.rows.iter().map(|flow| flow.packets).sum(),
        read: indexed.how(summary.chunk_count),
        entry: entry.clone(),
        summary,
        holes,
        losses,
    })
}

/// Chunk runs (first sequence, count) in order, those that overlap or touch joined.
fn joined_runs(runs: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = runs.collect();
    runs.sort_unstable();
    let mut joined: Vec<(u64, u64)> = Vec::new();
    for (first, count) in runs {
        match joined.last_mut() {
            Some((start, length)) if first <= *start + *length => {
                *length = (*length).max(first + count - *start);
            }
            _ => joined.push((first, count)),
        }
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_joined_where_they_overlap_or_touch() {
        let runs = [(10, 2), (5, 1), (11, 4), (15, 1), (20, 1), (5, 1)];
        assert_eq!(
            joined_runs(runs.into_iter()),
            vec![(5, 1), (10, 6), (20, 1)]
        );
        assert!(joined_runs(std::iter::empty()).is_empty());
    }

    #[test]
    fn a_window_overlaps_the_packets_that_may_lie_in_it() {
        let window = Window {
            from_ns: Some(100),
            to_ns: Some(200),
        };
        assert!(overlaps(&window, 50, 100));
        assert!(overlaps(&window, 199, 300));
        assert!(!overlaps(&window, 50, 99));
        assert!(!overlaps(&window, 200, 300));
        assert!(overlaps(&Window::default(), 0, 0));
    }
}
