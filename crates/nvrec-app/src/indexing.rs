//! `index`: a recording's flow index held to its data, and built again from it. Every chunk
//! is read and keyed as the recorder keyed it (`nvrec::flow::FlowScan`); each block the
//! recorder wrote is compared, flow by flow, with the flows of its bucket's chunks; what
//! no block covers, and each block that cannot be read, is named. The flows built from the
//! data are written as Parquet on request (the schema of an archive's flows objects,
//! docs/ARCHIVE.md): an index for engines such as DuckDB, for a recording recorded without
//! one too.

use crate::chunks::ChunkSource;
use crate::flow_index::DriveIndex;
use crate::outcome::{Class, UsageError};
use anyhow::{Context, Result};
use nvrec::control::{Control, Progress};
use nvrec::engine::EngineChoice;
use nvrec::export::Window;
use nvrec::flow::index::IndexBlock;
use nvrec::flow::{FlowEntry, FlowScan, FlowTable};
use nvrec::layout::{RecordingEntry, RecordingFlags};
use nvrec::recording::reader::{Item, ReadSummary};
use std::path::PathBuf;

/// What `index` is asked.
#[derive(Debug, Clone, Default)]
pub struct IndexRequest {
    /// Where to write the flows built from the data, as Parquet.
    pub parquet: Option<PathBuf>,
}

/// A block of the index that does not say what its bucket's chunks hold.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BlockDiffers {
    pub first_sequence: u64,
    pub end_sequence: u64,
    /// The first difference found.
    pub what: String,
}

/// What `index` found.
#[derive(Debug, serde::Serialize)]
pub struct IndexReport {
    #[serde(skip)]
    pub entry: RecordingEntry,
    /// Whether the recorder indexed the recording's flows.
    pub indexed: bool,
    /// The blocks read, those that agree with their chunks, and those that do not.
    pub blocks: usize,
    pub blocks_agree: usize,
    pub blocks_differ: Vec<BlockDiffers>,
    /// Blocks of a ring whose buckets' first chunks it wrote over: not held to anything.
    pub blocks_partly_overwritten: usize,
    /// Blocks that could not be read (a chunk missing or damaged, a CRC failed): named in
    /// `unindexed`, with what they covered.
    pub blocks_unreadable: usize,
    /// What no block covers, and why (a block that cannot be read, the last bucket).
    pub unindexed: Vec<String>,
    /// The index records' bytes read, and their share of the stream's bytes.
    pub index_bytes: u64,
    pub index_share: f64,
    /// The flows and packets the data holds.
    pub flows: usize,
    pub packets: u64,
    /// Holes in the read (missing or damaged chunks) and what could not be keyed.
    pub holes: Vec<String>,
    pub summary: ReadSummary,
    /// Where the flows built from the data were written.
    pub parquet: Option<PathBuf>,
}

impl IndexReport {
    /// An index that says something its chunks do not, or a block that cannot be read,
    /// fails, as does a read with holes.
    pub fn class(&self) -> Class {
        Class::passed(
            self.blocks_differ.is_empty() && self.blocks_unreadable == 0 && self.holes.is_empty(),
        )
    }
}

/// Checks the index of `entry` of `source` against its data, and builds it again.
pub fn index(
    source: &ChunkSource,
    entry: RecordingEntry,
    request: &IndexRequest,
    engine: EngineChoice,
    control: &Control,
    progress: &Progress,
) -> Result<IndexReport> {
    if !entry.flags.contains(RecordingFlags::RECORDS) {
        return Err(UsageError(format!(
            "recording {} is a byte stream, not packets: it has no flows to index",
            entry.recording_id
        ))
        .into());
    }
    let Some(set) = source.set() else {
        return Err(UsageError(
            "index reads a recording on its drives; an archive's flows are checked by \
             `archive --check`"
                .into(),
        )
        .into());
    };
    let indexed = entry.flags.contains(RecordingFlags::FLOW_INDEX);
    let stored = match indexed {
        true => DriveIndex::of(set, &entry, &Window::default(), 0, engine, control)?,
        false => DriveIndex::default(),
    };
    let mut check = Check::new(&stored, entry.start_ns);
    let summary = source.read_window(
        &entry,
        engine,
        (None, None),
        control,
        progress,
        &mut |item| {
            check.item(item);
            true
        },
    )?;
    let (table, holes, checked) = check.finish();
    let parquet = match &request.parquet {
        Some(path) => Some(write_parquet(path, &entry, &table)?),
        None => None,
    };
    let stream_bytes = entry.stream_len_bytes.max(1);
    Ok(IndexReport {
        indexed,
        blocks: stored.blocks.len(),
        blocks_agree: stored.blocks.len() - checked.differ.len() - checked.partly_overwritten,
        blocks_differ: checked.differ,
        blocks_partly_overwritten: checked.partly_overwritten,
        blocks_unreadable: stored.unreadable,
        unindexed: stored.notes.clone(),
        index_bytes: stored.index_bytes_read,
        index_share: stored.index_bytes_read as f64 / stream_bytes as f64,
        flows: table.len(),
        packets: table.packets(),
        holes,
        summary,
        parquet,
        entry,
    })
}

/// The read that keys every chunk: the whole recording's flows, and each stored block's
/// bucket's, compared with the block as the bucket ends.
struct Check<'a> {
    whole: FlowScan,
    bucket: FlowScan,
    /// The blocks, oldest first, and the next to compare.
    blocks: Vec<&'a IndexBlock>,
    next: usize,
    differ: Vec<BlockDiffers>,
    /// The first chunk read, and the blocks whose buckets began before it.
    first_read: Option<u64>,
    partly_overwritten: usize,
}

impl<'a> Check<'a> {
    fn new(stored: &'a DriveIndex, start_ns: u64) -> Check<'a> {
        let mut blocks: Vec<&IndexBlock> = stored.blocks.iter().collect();
        blocks.sort_by_key(|block| block.first_sequence);
        Check {
            whole: FlowScan::new(0, Window::default(), start_ns),
            bucket: FlowScan::new(0, Window::default(), start_ns),
            blocks,
            next: 0,
            differ: Vec::new(),
            first_read: None,
            partly_overwritten: 0,
        }
    }

    fn item(&mut self, item: Item<'_>) {
        let sequence = match &item {
            Item::Chunk { header, .. } => Some(header.sequence),
            _ => None,
        };
        if let Some(sequence) = sequence {
            self.first_read.get_or_insert(sequence);
            self.bucket_ends_before(sequence);
        }
        match item {
            Item::Chunk { header, payload } => {
                self.whole.chunk(header, payload);
                self.bucket.chunk(header, payload);
            }
            hole => {
                let text = hole.hole_text().unwrap_or_default();
                self.whole.hole(text.clone());
                self.bucket.hole(text);
            }
        }
    }

    /// Compares the blocks whose buckets end at or before chunk `sequence` with what was
    /// keyed since the one before.
    fn bucket_ends_before(&mut self, sequence: u64) {
        while let Some(block) = self.blocks.get(self.next) {
            if block.end_sequence() > sequence {
                if block.first_sequence == sequence {
                    // A bucket begins: what came before it is no block's.
                    self.bucket.take();
                }
                return;
            }
            self.next += 1;
            let (table, _, losses) = self.bucket.take_with_losses();
            if self
                .first_read
                .is_none_or(|first| block.first_sequence < first)
            {
                // A ring wrote over the bucket's first chunks: nothing to hold it to.
                self.partly_overwritten += 1;
                continue;
            }
            if let Some(what) = difference(block, &table, &losses) {
                self.differ.push(BlockDiffers {
                    first_sequence: block.first_sequence,
                    end_sequence: block.end_sequence(),
                    what,
                });
            }
        }
    }

    /// The whole recording's flows, the read's holes, and what the comparison found.
    fn finish(mut self) -> (FlowTable, Vec<String>, Checked) {
        self.bucket_ends_before(u64::MAX);
        self.whole.finish();
        let (table, holes, _) = self.whole.into_parts();
        let checked = Checked {
            differ: self.differ,
            partly_overwritten: self.partly_overwritten,
        };
        (table, holes, checked)
    }
}

/// What holding the blocks to their chunks found.
struct Checked {
    differ: Vec<BlockDiffers>,
    partly_overwritten: usize,
}

/// How `block` differs from the flows and losses its bucket's chunks hold, if it does.
fn difference(block: &IndexBlock, table: &FlowTable, losses: &[(u64, String)]) -> Option<String> {
    let keyed: Vec<&FlowEntry> = table.matching_all();
    if keyed.len() != block.flows.len() {
        return Some(format!(
            "the block names {} flows, the chunks hold {}",
            block.flows.len(),
            keyed.len()
        ));
    }
    let mut stored: Vec<&FlowEntry> = block.flows.iter().collect();
    stored.sort_by_key(|flow| (flow.first_ns, flow.key));
    for (held, said) in keyed.iter().zip(&stored) {
        if *held != *said {
            return Some(format!(
                "flow {}: the block says {} packets in chunks {:?}, the chunks hold {} in {:?}",
                held.key, said.packets, said.chunks, held.packets, held.chunks
            ));
        }
    }
    if block.losses != losses {
        return Some(format!(
            "the block names {} losses, the chunks {}",
            block.losses.len(),
            losses.len()
        ));
    }
    None
}

/// Writes the flows of `table` as Parquet to `path` (as one segment, 0, of the recording).
fn write_parquet(path: &PathBuf, entry: &RecordingEntry, table: &FlowTable) -> Result<PathBuf> {
    let set_uuid = entry.set_uuid.to_string();
    let of = nvrec_archive::flows::FlowsOf {
        set_uuid: &set_uuid,
        recording_id: entry.recording_id,
        segment: 0,
    };
    let bytes = nvrec_archive::flows::encode(of, table)?;
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    Ok(path.clone())
}
