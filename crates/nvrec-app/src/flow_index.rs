//! A recording's flow index on the drives (`nvrec::flow::index`), read for a window: the
//! blocks of the buckets the window covers, found without reading the chunks between them,
//! and the stretches of chunks no block covers, to be scanned whole.
//!
//! Each block lies at the start of the chunk after its bucket, which begins the next
//! bucket; so a block leads to the one before it (at its own bucket's first chunk, whose
//! time it holds), and the walk goes back from the window's end to its start, a seek and a
//! chunk or two a block. The window's end is found by reading back from it in slices of
//! time that double until one holds a block: the newest block before the end, and the
//! chunks after its bucket (the last bucket of a recording killed or still running, whose
//! block was never written) are scanned. A block that cannot be read (a chunk missing or
//! damaged, a part that fails its CRC) is named, and everything from the window's start to
//! the block after it is scanned: never a bucket passed over.

use anyhow::Result;
use nvrec::control::{Control, Progress};
use nvrec::engine::EngineChoice;
use nvrec::export::Window;
use nvrec::flow::index::{decode_part, IndexBlock, IndexError, PartsJoin, BUCKET_SPAN_NS_MAX};
use nvrec::layout::{index_records, ChunkHeader, RecordingEntry};
use nvrec::recording::reader::{read_recording_from, Item, ReadSummary};
use nvrec::recording::volume::VolumeSet;
use std::collections::BTreeMap;

/// Chunks to read from `from_ns` on: those of sequences `first..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stretch {
    /// Where a read finds the first of them (None: the recording's start).
    pub from_ns: Option<u64>,
    pub first: u64,
    pub end: u64,
}

/// What a recording's index on the drives says of a window.
#[derive(Debug, Default)]
pub struct DriveIndex {
    /// The blocks read, newest first.
    pub blocks: Vec<IndexBlock>,
    /// Stretches of chunks no block read covers: scanned whole.
    pub unindexed: Vec<Stretch>,
    /// Why each part of the window is scanned rather than looked up.
    pub notes: Vec<String>,
    /// Blocks that could not be read (named in `notes`).
    pub unreadable: usize,
    /// The index records' bytes read, and the chunks read to find them.
    pub index_bytes_read: u64,
    pub chunks_read: u64,
}

/// The walk's reads of the drives.
struct Walk<'a> {
    set: &'a VolumeSet,
    entry: &'a RecordingEntry,
    engine: EngineChoice,
    control: &'a Control,
    seed: u16,
    found: DriveIndex,
}

/// What one read of the walk found: the blocks completed (oldest first), the chunks seen
/// by sequence with their times, and what could not be read.
#[derive(Default)]
struct Seen {
    blocks: Vec<IndexBlock>,
    chunks: BTreeMap<u64, u64>,
    failures: Vec<(u64, String)>,
    /// The index records' bytes read.
    index_bytes: u64,
}

impl Seen {
    /// Takes the index parts at the start of chunk `sequence`'s payload into `join`
    /// (Community IDs with `seed`): the blocks they complete, what does not read. Returns
    /// how many parts there were.
    fn take_parts(
        &mut self,
        join: &mut PartsJoin,
        sequence: u64,
        payload: &[u8],
        seed: u16,
    ) -> usize {
        let mut parts = 0;
        for data in index_records(payload) {
            parts += 1;
            self.index_bytes += data.len() as u64 + 64;
            match decode_part(data).map(|part| join.part(&part, seed)) {
                Ok(Some(Ok(block))) => self.blocks.push(block),
                Ok(Some(Err(error))) | Err(error) => {
                    self.failures.push((sequence, failure_text(&error)));
                }
                Ok(None) => {}
            }
        }
        parts
    }
}

impl DriveIndex {
    /// Reads the index of `entry` of `set` for `window` (Community IDs with `seed`).
    pub fn of(
        set: &VolumeSet,
        entry: &RecordingEntry,
        window: &Window,
        seed: u16,
        engine: EngineChoice,
        control: &Control,
    ) -> Result<DriveIndex> {
        let mut walk = Walk {
            set,
            entry,
            engine,
            control,
            seed,
            found: DriveIndex::default(),
        };
        if let Some(newest) = walk.newest_before_end(window)? {
            walk.back_from(newest, window)?;
        }
        Ok(walk.found)
    }

    /// The time of chunk `sequence`, where a block read covers it.
    pub fn chunk_time_ns(&self, sequence: u64) -> Option<u64> {
        self.blocks
            .iter()
            .find_map(|block| block.chunk_time_ns(sequence))
    }
}

impl Walk<'_> {
    /// Reads from `from_ns` on while `go_on` says so of each chunk's header (the chunk it
    /// stops at is taken): the index parts at the starts of the chunks, joined into blocks.
    fn read(
        &mut self,
        from_ns: Option<u64>,
        go_on: &mut dyn FnMut(&ChunkHeader) -> bool,
    ) -> Result<Seen> {
        let mut seen = Seen::default();
        let mut join = PartsJoin::new();
        let (seed, start_ns) = (self.seed, self.entry.start_ns);
        let mut each = |item: Item<'_>| -> bool {
            let Item::Chunk { header, payload } = item else {
                if let Some(text) = item.hole_text() {
                    let sequence = match item {
                        Item::Missing { first_sequence, .. } => first_sequence,
                        Item::Damage(damage) => damage.sequence.unwrap_or(0),
                        Item::Chunk { .. } => 0,
                    };
                    seen.failures.push((sequence, text));
                }
                return true;
            };
            seen.chunks
                .insert(header.sequence, header.time_ns(start_ns));
            seen.take_parts(&mut join, header.sequence, payload, seed);
            go_on(header)
        };
        self.read_with(from_ns, &mut each)?;
        self.found.index_bytes_read += seen.index_bytes;
        Ok(seen)
    }

    /// Reads the recording from `from_ns` on, handing each item to `each`; counts the
    /// chunks read.
    fn read_with(
        &mut self,
        from_ns: Option<u64>,
        each: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Result<()> {
        let summary: ReadSummary = read_recording_from(
            self.set,
            self.entry,
            self.engine,
            from_ns,
            self.control,
            &Progress::default(),
            each,
        )?;
        self.found.chunks_read += summary.chunk_count;
        Ok(())
    }

    /// The newest block before the window's end, found by reading back from the end in
    /// slices of time that double; the chunks after its bucket, to the first past the
    /// window, are scanned (all of the window where no block is found).
    fn newest_before_end(&mut self, window: &Window) -> Result<Option<IndexBlock>> {
        let entry = self.entry;
        let end_ns = window
            .to_ns
            .unwrap_or(u64::MAX)
            .min(entry.end_ns.max(entry.start_ns) + 1);
        let mut slice_ns = first_slice_ns(entry);
        let mut slice_end = end_ns;
        // The chunk at the end: the first that began at or after it (a packet completed
        // there may have begun inside), or the recording's last.
        let mut end_sequence: Option<u64> = None;
        loop {
            let slice_start = slice_end.saturating_sub(slice_ns).max(entry.start_ns);
            let first_slice = end_sequence.is_none();
            let at_start = slice_start <= entry.start_ns;
            let from_ns = (!at_start).then_some(slice_start);
            let mut go_on = |header: &ChunkHeader| {
                let time = header.time_ns(entry.start_ns);
                match first_slice {
                    true => window.to_ns.is_none_or(|to| time < to),
                    false => time < slice_end,
                }
            };
            let seen = self.read(from_ns, &mut go_on)?;
            if first_slice {
                let last = seen.chunks.keys().next_back().copied();
                end_sequence = Some(last.map_or(entry.first_sequence, |last| last + 1));
            }
            let end = end_sequence.expect("set by the first slice");
            if let Some(newest) = seen.blocks.iter().max_by_key(|block| block.end_sequence()) {
                let newest = newest.clone();
                self.unindexed_after(&newest, &seen, end);
                return Ok(Some(newest));
            }
            if at_start {
                self.found.unreadable += usize::from(!seen.failures.is_empty());
                self.found.notes.push(no_block_note(&seen));
                self.found.unindexed.push(Stretch {
                    from_ns: window.from_ns,
                    first: entry.first_sequence,
                    end,
                });
                return Ok(None);
            }
            slice_end = slice_start;
            slice_ns = slice_ns.saturating_mul(2);
        }
    }

    /// The chunks from the end of `newest`'s bucket to `end` (exclusive), where there are
    /// any: the last bucket, whose block was not written or not yet.
    fn unindexed_after(&mut self, newest: &IndexBlock, seen: &Seen, end: u64) {
        let first = newest.end_sequence();
        if first >= end {
            return;
        }
        let from_ns = seen
            .chunks
            .range(first..)
            .next()
            .map(|(_, &time)| time)
            .or(newest.chunk_times_ns.last().copied());
        self.found.notes.push(format!(
            "chunks {first} to {} come after the last index block (its own chunks, and a \
             recording's last bucket where it was killed or is running): scanned",
            end - 1
        ));
        self.found.unindexed.push(Stretch {
            from_ns,
            first,
            end,
        });
    }

    /// Walks back from `newest` to the block whose bucket the window's start lies in.
    fn back_from(&mut self, newest: IndexBlock, window: &Window) -> Result<()> {
        let mut oldest = newest;
        loop {
            let first = oldest.first_sequence;
            let began_ns = oldest.chunk_times_ns.first().copied().unwrap_or(0);
            let covers_start = window.from_ns.is_some_and(|from| began_ns < from);
            self.scan_what_it_could_not_key(&oldest);
            self.found.blocks.push(oldest);
            if covers_start || first <= self.entry.first_sequence {
                return Ok(());
            }
            match self.block_before(first, began_ns)? {
                Before::Block(block) => oldest = block,
                Before::Overwritten => return Ok(()),
                Before::Unreadable(why) => {
                    self.found.unreadable += 1;
                    self.found.notes.push(format!(
                        "the index block before chunk {first} cannot be read ({why}): the \
                         window's chunks before it are scanned"
                    ));
                    self.found.unindexed.push(Stretch {
                        from_ns: window.from_ns,
                        first: self.entry.first_sequence,
                        end: first,
                    });
                    return Ok(());
                }
            }
        }
    }

    /// A block whose recorder could not key some of its bucket's records (they did not
    /// decode) lacks their flows: its bucket is read whole, and why is named.
    fn scan_what_it_could_not_key(&mut self, block: &IndexBlock) {
        let Some(what) = block.unkeyed.first() else {
            return;
        };
        self.found.notes.push(format!(
            "chunks {} to {}: the recorder could not key some of them ({what}): scanned",
            block.first_sequence,
            block.end_sequence() - 1
        ));
        self.found.unindexed.push(Stretch {
            from_ns: block.chunk_times_ns.first().copied(),
            first: block.first_sequence,
            end: block.end_sequence(),
        });
    }

    /// The block whose parts begin chunk `first` (which began at `began_ns`).
    fn block_before(&mut self, first: u64, began_ns: u64) -> Result<Before> {
        let mut seen = self.read_block_at(began_ns, first)?;
        if let Some(at) = seen
            .blocks
            .iter()
            .position(|block| block.end_sequence() == first)
        {
            return Ok(Before::Block(seen.blocks.swap_remove(at)));
        }
        let oldest_seen = seen.chunks.keys().next().copied();
        if oldest_seen.is_some_and(|oldest| oldest > first) && seen.failures.is_empty() {
            return Ok(Before::Overwritten);
        }
        let why = seen
            .failures
            .first()
            .map(|(_, text)| text.clone())
            .unwrap_or_else(|| format!("chunk {first} holds no index block"));
        Ok(Before::Unreadable(why))
    }

    /// Reads from `from_ns` the chunks that hold the block ending at `first`: from chunk
    /// `first` on, until the block is whole, a chunk holds no part, or something cannot be
    /// read (a read that begins past `first` ends at once).
    fn read_block_at(&mut self, from_ns: u64, first: u64) -> Result<Seen> {
        let (seed, start_ns) = (self.seed, self.entry.start_ns);
        let mut seen = Seen::default();
        let mut join = PartsJoin::new();
        let mut each = |item: Item<'_>| -> bool {
            let Item::Chunk { header, payload } = item else {
                let sequence = match item {
                    Item::Missing {
                        first_sequence,
                        count,
                    } => first_sequence + count - 1,
                    Item::Damage(damage) => damage.sequence.unwrap_or(first),
                    Item::Chunk { .. } => first,
                };
                if sequence >= first {
                    seen.failures
                        .extend(item.hole_text().map(|text| (sequence, text)));
                    return false;
                }
                return true;
            };
            let had_first = seen.chunks.contains_key(&first);
            seen.chunks
                .insert(header.sequence, header.time_ns(start_ns));
            if header.sequence < first {
                return true;
            }
            if header.sequence > first && !had_first {
                return false; // Chunk `first` is gone (a ring wrote over it).
            }
            let parts = seen.take_parts(&mut join, header.sequence, payload, seed);
            let whole = seen
                .blocks
                .iter()
                .any(|block| block.end_sequence() == first);
            parts > 0 && !whole && seen.failures.is_empty()
        };
        self.read_with(Some(from_ns), &mut each)?;
        self.found.index_bytes_read += seen.index_bytes;
        Ok(seen)
    }
}

/// What lies before a block's bucket.
enum Before {
    Block(IndexBlock),
    /// A ring wrote over it: nothing older is left.
    Overwritten,
    Unreadable(String),
}

fn failure_text(error: &IndexError) -> String {
    format!("an index part does not read: {error}")
}

/// Why a window with no block before its end is scanned whole.
fn no_block_note(seen: &Seen) -> String {
    match seen.failures.first() {
        Some((sequence, text)) => {
            format!("no index block could be read before the window's end (chunk {sequence}: {text}): scanned")
        }
        None => "no index block lies before the window's end (the recording's first bucket is not closed yet): scanned".into(),
    }
}

/// The first slice of time read back from a window's end: about two buckets of the
/// recording's chunks at its mean rate, at most a bucket's longest span.
fn first_slice_ns(entry: &RecordingEntry) -> u64 {
    let chunks = entry
        .end_sequence
        .saturating_sub(entry.first_sequence)
        .max(1);
    let span_ns = entry.end_ns.saturating_sub(entry.start_ns).max(1);
    let chunk_ns = span_ns / chunks;
    let bucket_chunks = nvrec::flow::index::BUCKET_BYTES_MAX / u64::from(chunk_size(entry)).max(1);
    chunk_ns
        .saturating_mul(bucket_chunks.max(1) * 2)
        .clamp(1_000_000, BUCKET_SPAN_NS_MAX)
}

/// The recording's chunk size, from its stream and chunk counts (a lower bound where
/// chunks are short).
fn chunk_size(entry: &RecordingEntry) -> u32 {
    let chunks = entry
        .end_sequence
        .saturating_sub(entry.first_sequence)
        .max(1);
    (entry.stream_len_bytes / chunks).clamp(4096, u64::from(u32::MAX)) as u32
}
