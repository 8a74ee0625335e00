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
use crate::outcome::{Class, UsageError};
use anyhow::Result;
use nvrec::control::{Control, Progress};
use nvrec::engine::EngineChoice;
use nvrec::export::Window;
use nvrec::flow::{FlowEntry, FlowKey, FlowQuery, FlowScan, FlowTable};
use nvrec::layout::{RecordingEntry, RecordingFlags};
use nvrec::recording::reader::{Item, ReadSummary};
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
    let indexed = Indexed::of(
        source,
        &entry,
        &request.window,
        &request.query,
        request.seed,
    );
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

/// What an archive's flows say of a window and a query: the flows of the segments whose
/// packets the window overlaps, and the runs of chunks that the flows asked for lie in:
/// all that a search or an export cut by flows reads.
pub struct Indexed<'a> {
    archive: &'a Archive,
    recording: &'a ArchivedRecording,
    segments_searched: usize,
    flows_bytes_read: u64,
    chunks_searched: u64,
    /// The flows of the segments searched whose times overlap the window.
    rows: Vec<FlowEntry>,
    runs: Vec<(u64, u64)>,
}

impl<'a> Indexed<'a> {
    /// The flows of `entry` of `source` for `window` and `query` (Community IDs with
    /// `seed`), where `source` is an archive (None otherwise); why its flows cannot answer,
    /// where they cannot.
    pub fn of(
        source: &'a ChunkSource,
        entry: &RecordingEntry,
        window: &Window,
        query: &FlowQuery,
        seed: u16,
    ) -> Option<Result<Indexed<'a>, NotIndexed>> {
        let (archive, recording) = source.archived(entry)?;
        Some(indexed_segments(recording, window).and_then(|segments| {
            let mut indexed = Indexed {
                archive,
                recording,
                segments_searched: segments.len(),
                flows_bytes_read: 0,
                chunks_searched: segments.iter().map(|info| info.chunk_count).sum(),
                rows: Vec::new(),
                runs: Vec::new(),
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

    /// Adds the flows of segment `info`.
    fn read_flows(&mut self, info: &SegmentInfo, seed: u16) -> Result<(), NotIndexed> {
        let unreadable = |error| NotIndexed::FlowsUnreadable(Arc::new(error));
        let flows = info.flows.as_ref().expect("searched for its flows");
        let bytes = self.archive.get(&flows.key).map_err(unreadable)?;
        self.flows_bytes_read += bytes.len() as u64;
        let decoded = nvrec_archive::flows::decode(&flows.key, bytes, seed);
        self.rows.extend(decoded.map_err(unreadable)?);
        Ok(())
    }

    /// Reads the runs of chunks, handing each item to `each` (which goes on past the
    /// window: the next run may be in it).
    pub fn read(
        &self,
        control: &Control,
        progress: &Progress,
        each: &mut dyn FnMut(Item<'_>),
    ) -> Result<ReadSummary> {
        let summary = nvrec_archive::read::read_runs(
            self.archive,
            self.recording,
            &self.runs,
            control,
            progress,
            &mut |item| {
                each(item);
                true
            },
        )?;
        Ok(summary)
    }

    /// How a reading of `chunks_read` chunks of the runs came to its answer.
    pub fn how(&self, chunks_read: u64) -> FindRead {
        FindRead::Indexed {
            segments_searched: self.segments_searched,
            flows_bytes_read: self.flows_bytes_read,
            chunks_searched: self.chunks_searched,
            chunks_read,
        }
    }
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
    scan.finish();
    let (table, holes, losses) = scan.into_parts();
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
