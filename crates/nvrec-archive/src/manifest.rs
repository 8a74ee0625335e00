//! The manifest: one JSON object per archived recording, and the keys of its objects.
//!
//! Keys are deterministic, so that archiving the same recording again writes the same
//! objects (harmless) and never a second copy:
//!
//! ```text
//! PREFIX/NODE/SET-UUID/rec-000001/seg-000000     chunks, back to back
//! PREFIX/NODE/SET-UUID/rec-000001/seg-000001
//! PREFIX/NODE/SET-UUID/rec-000001/manifest.json  written last: its presence means complete
//! ```
//!
//! The manifest holds what `ls` and the catalog show (times, sizes, losses, retirements),
//! each segment's sequences, times, size and CRC32C, and a chunk index (offset and
//! timestamp of every chunk in its segment) so that a time window is found without
//! reading any segment. It also carries the recording's entry in its on-disk encoding
//! (`docs/FORMAT.md`), so that readers get back exactly the entry the drives held.

use nvrec::layout::{RecordingEntry, RecordingFlags, RecordingState, Retirement};

use crate::{ArchiveError, Result};

/// What `format` says in every manifest.
pub const MANIFEST_FORMAT: &str = "nvrec-archive-manifest";
/// The manifest version this code writes and reads.
pub const MANIFEST_VERSION: u32 = 1;
/// The name of a manifest object, in its recording's directory.
pub const MANIFEST_NAME: &str = "manifest.json";

/// The directory (key prefix) of a recording: `NODE/SET-UUID/rec-NNNNNN`.
pub fn recording_dir(node: &str, set_uuid: &str, recording_id: u32) -> String {
    format!("{node}/{set_uuid}/rec-{recording_id:06}")
}

/// The key of segment `index` of the recording in `dir`.
pub fn segment_key(dir: &str, index: u32) -> String {
    format!("{dir}/seg-{index:06}")
}

/// The key of the manifest of the recording in `dir`.
pub fn manifest_key(dir: &str) -> String {
    format!("{dir}/{MANIFEST_NAME}")
}

/// Checks a node name: it becomes a key part, so letters, digits, `.`, `_` and `-` only.
pub fn check_node(node: &str) -> Result<()> {
    let ok = !node.is_empty()
        && node.len() <= 128
        && node != "."
        && node != ".."
        && node
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ArchiveError::Usage(format!(
            "node name {node:?}: use letters, digits, '.', '_' and '-' (it becomes part of every key)"
        )))
    }
}

/// Stream bytes the archive does not hold: the range `stream_offset_bytes - gap_bytes ..
/// stream_offset_bytes`, right before chunk `sequence` (the first one after them that the
/// archive holds).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Loss {
    pub sequence: u64,
    pub stream_offset_bytes: u64,
    pub gap_bytes: u64,
    /// Why they are missing (a gap the recorder marked where not said).
    #[serde(default, skip_serializing_if = "LossCause::is_recorded")]
    pub cause: LossCause,
    /// The first sequence of the chunks that held them, where they were chunks
    /// (overwritten): sequences `first_sequence_lost..sequence` are not in the archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sequence_lost: Option<u64>,
}

/// Why stream bytes are missing from an archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum LossCause {
    /// Lost while recording: the input outran the drives (the chunk after says `GAP`).
    #[default]
    #[serde(rename = "lost while recording")]
    Recorded,
    /// Recorded, but a ring overwrote their chunks before the archive read them.
    #[serde(rename = "overwritten on the drives before archived")]
    Overwritten,
}

impl LossCause {
    fn is_recorded(&self) -> bool {
        *self == LossCause::Recorded
    }

    /// In words, as the manifest has it.
    pub fn text(self) -> &'static str {
        match self {
            LossCause::Recorded => "lost while recording",
            LossCause::Overwritten => "overwritten on the drives before archived",
        }
    }
}

impl Loss {
    /// A gap the recorder marked, as the chunk after it says.
    pub fn recorded(sequence: u64, stream_offset_bytes: u64, gap_bytes: u64) -> Loss {
        Loss {
            sequence,
            stream_offset_bytes,
            gap_bytes,
            cause: LossCause::Recorded,
            first_sequence_lost: None,
        }
    }

    /// The stream range it stands for.
    pub fn stream_range(&self) -> std::ops::Range<u64> {
        self.stream_offset_bytes.saturating_sub(self.gap_bytes)..self.stream_offset_bytes
    }

    /// One line for `ls`, `verify` and `archive`: the range, the chunks and the cause.
    pub fn line(&self) -> String {
        let range = self.stream_range();
        let chunks = match self.first_sequence_lost {
            Some(first) => format!(", sequences {first}..{}", self.sequence),
            None => String::new(),
        };
        format!(
            "stream bytes {}..{} ({} bytes{chunks}): {}",
            range.start,
            range.end,
            self.gap_bytes,
            self.cause.text()
        )
    }
}

impl Manifest {
    /// The losses of chunks overwritten before they were archived (a ring's).
    pub fn overwritten(&self) -> impl Iterator<Item = &Loss> {
        self.losses
            .iter()
            .filter(|loss| loss.cause == LossCause::Overwritten)
    }
}

/// Something the drives could not give when the recording was archived: chunks missing or
/// damaged there are missing in the archive too, and said so here.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hole {
    /// The first sequence missing, where known.
    pub first_sequence: Option<u64>,
    pub chunk_count: u64,
    pub what: String,
}

/// A segment object: where it is, what it holds, its checksum.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SegmentInfo {
    /// The key, relative to the archive's URL.
    pub key: String,
    pub size_bytes: u64,
    /// CRC32C of the whole object, computed from the chunks' CRCs before upload.
    pub crc32c: u32,
    /// The store's entity tag for the object, as the upload returned it.
    pub e_tag: Option<String>,
    pub chunk_count: u64,
    pub first_sequence: u64,
    pub last_sequence: u64,
    pub first_timestamp_ns: u64,
    pub last_timestamp_ns: u64,
    /// Where each chunk starts in the object (the chunk index), and when its first byte
    /// arrived: chunk `i` is bytes `chunk_offsets[i]..chunk_offsets[i + 1]`.
    pub chunk_offsets: Vec<u64>,
    pub chunk_timestamps_ns: Vec<u64>,
    /// The segment's flows object, for a recording of packets (`crate::flows`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<FlowsInfo>,
}

/// A segment's flows object: the flows of the packets completed in its chunks, as Parquet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowsInfo {
    /// The key, relative to the archive's URL.
    pub key: String,
    pub size_bytes: u64,
    pub flow_count: u64,
    pub packets: u64,
    /// The first and the last packet's receive time (ns since the Unix epoch), where it
    /// has packets: a search for a time window reads only the flows of the segments whose
    /// packets it overlaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times_ns: Option<(u64, u64)>,
    /// What the scan of the segment's chunks could not key (a packet cut by a hole, or
    /// begun before a run that started again after a kill; records that do not decode):
    /// the flows lack those packets, and a search that meets them says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unindexed: Vec<String>,
}

/// A retired member, as `ls` tells it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RetirementInfo {
    pub member_index: u16,
    pub cause: String,
    pub errno: i32,
    pub retired_ns: u64,
    pub stream_offset_bytes: u64,
    pub first_sequence: u64,
    pub redirect_member: u16,
}

impl RetirementInfo {
    pub fn of(retirement: &Retirement) -> RetirementInfo {
        RetirementInfo {
            member_index: retirement.member_index,
            cause: format!("{:?}", retirement.cause).to_lowercase(),
            errno: retirement.errno,
            retired_ns: retirement.retired_ns,
            stream_offset_bytes: retirement.stream_offset_bytes,
            first_sequence: retirement.first_sequence,
            redirect_member: retirement.redirect_member,
        }
    }
}

/// The manifest of one archived recording (`docs/ARCHIVE.md`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    pub node: String,
    pub set_uuid: String,
    pub set_label: String,
    pub recording_id: u32,
    pub label: String,
    /// `complete`, `aborted` or `interrupted`, as `ls` said on the drives.
    pub state: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub first_sequence: u64,
    pub end_sequence: u64,
    pub stream_len_bytes: u64,
    /// As the entry says; a ring's is everything of its stream not archived,
    /// `stream_len_bytes - payload_bytes` (what it overwrote before the archive read it
    /// among them: the `losses` overwritten).
    pub lost_bytes: u64,
    pub chunk_size_bytes: u32,
    /// Chunks archived, their payload bytes, and the bytes of all segments.
    pub chunk_count: u64,
    pub payload_bytes: u64,
    pub archived_bytes: u64,
    pub losses: Vec<Loss>,
    pub holes: Vec<Hole>,
    pub retirements: Vec<RetirementInfo>,
    /// The recording entry in its on-disk encoding (`docs/FORMAT.md`), as hex.
    pub entry: String,
    pub segments: Vec<SegmentInfo>,
}

/// What a manifest in the store is to a recording's entry as the drives hold it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// It was written for this very entry.
    Current,
    /// Its data is gone from the drives (reclaimed: freed once archived, or reused): the
    /// archive is its copy, as it stands.
    Reclaimed,
    /// It was written for an earlier revision of the same recording's entry, which this one
    /// goes on from: the same id, start, first sequence and kind, ending at or past the last
    /// chunk the archive holds. Recovery closes a crashed recording so (a follow may have
    /// archived it as a reader recovers it, before the entry on the drives was rewritten),
    /// and a repair may extend one. The archive goes on from what it holds.
    Earlier,
    /// Anything else, and why: the archive holds what the drives' entry does not continue,
    /// and is left as it is.
    Other(NotContinued),
}

/// Why the drives' entry does not go on from what the archive holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotContinued {
    #[error(
        "the archive holds recording {held_id} started at {held_start_ns} ns, the drives \
         recording {drives_id} started at {drives_start_ns} ns"
    )]
    OtherRecording {
        held_id: u32,
        held_start_ns: u64,
        drives_id: u32,
        drives_start_ns: u64,
    },
    #[error("the archive holds another kind of recording, or from another first chunk")]
    OtherKind,
    #[error(
        "the archive holds its chunks up to sequence {held_last}, the drives' entry ends \
         before that, at {drives_end}"
    )]
    EndsBefore { held_last: u64, drives_end: u64 },
}

/// Why a manifest may not replace the one in the store ([`Manifest::lacks_what`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Lacks {
    #[error("it is {new}, not {old}")]
    OtherKey { new: String, old: String },
    #[error(
        "it does not name {key} ({size_bytes} bytes, CRC32C {crc32c:#010x}) as segment {index}"
    )]
    Segment {
        index: usize,
        key: String,
        size_bytes: u64,
        crc32c: u32,
    },
    #[error("it holds {new} {what}, the one in the store {held}")]
    Fewer {
        what: &'static str,
        new: u64,
        held: u64,
    },
}

impl Manifest {
    /// Where the archive's chunks end: one past the last sequence it holds (the recording's
    /// first where it holds none).
    pub fn held_sequence_end(&self) -> Option<u64> {
        self.segments.last().map(|last| last.last_sequence + 1)
    }

    /// What this manifest (read from the store) is to `entry`, the recording's entry on
    /// the drives now.
    pub fn standing(&self, entry: &RecordingEntry) -> Result<Standing> {
        if self.entry == encode_entry(entry)? {
            return Ok(Standing::Current);
        }
        if entry.reclaimed.is_some() {
            return Ok(Standing::Reclaimed);
        }
        let held = self.recording_entry(&self.key())?;
        let ring = |e: &RecordingEntry| e.flags.contains(RecordingFlags::RING);
        let why = if held.recording_id != entry.recording_id || held.start_ns != entry.start_ns {
            Some(NotContinued::OtherRecording {
                held_id: held.recording_id,
                held_start_ns: held.start_ns,
                drives_id: entry.recording_id,
                drives_start_ns: entry.start_ns,
            })
        } else if held.first_sequence != entry.first_sequence || ring(&held) != ring(entry) {
            Some(NotContinued::OtherKind)
        } else {
            match self.held_sequence_end() {
                Some(end) if entry.end_sequence < end => Some(NotContinued::EndsBefore {
                    held_last: end - 1,
                    drives_end: entry.end_sequence,
                }),
                _ => None,
            }
        };
        Ok(match why {
            Some(why) => Standing::Other(why),
            None => Standing::Earlier,
        })
    }

    /// Why this manifest may not replace `old` in the store, if it may not: it must hold
    /// at least everything `old` held, every segment `old` names in the same place (the
    /// same object: key, size and checksum) and no fewer chunks or bytes. Once a ring or
    /// a later recording has written over the drives, the archive is the better copy.
    pub fn lacks_what(&self, old: &Manifest) -> Option<Lacks> {
        if self.key() != old.key() {
            return Some(Lacks::OtherKey {
                new: self.key(),
                old: old.key(),
            });
        }
        let same = |a: &SegmentInfo, b: &SegmentInfo| {
            a.key == b.key && a.size_bytes == b.size_bytes && a.crc32c == b.crc32c
        };
        if let Some((index, segment)) =
            old.segments.iter().enumerate().find(|&(index, segment)| {
                !self.segments.get(index).is_some_and(|s| same(s, segment))
            })
        {
            return Some(Lacks::Segment {
                index,
                key: segment.key.clone(),
                size_bytes: segment.size_bytes,
                crc32c: segment.crc32c,
            });
        }
        let counts = [
            ("chunks", self.chunk_count, old.chunk_count),
            ("payload bytes", self.payload_bytes, old.payload_bytes),
            ("archived bytes", self.archived_bytes, old.archived_bytes),
        ];
        counts
            .into_iter()
            .find(|&(_, new, held)| new < held)
            .map(|(what, new, held)| Lacks::Fewer { what, new, held })
    }
}

/// The state of a finished recording, in the words `ls` uses.
pub fn state_word(entry: &RecordingEntry) -> &'static str {
    match entry.state {
        RecordingState::Open => "recording",
        RecordingState::Closed if entry.flags.contains(RecordingFlags::RING) => "complete (ring)",
        RecordingState::Closed => "complete",
        RecordingState::Aborted => "aborted",
        RecordingState::Interrupted => "interrupted",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The entry in its on-disk encoding, as the manifest carries it.
pub fn encode_entry(entry: &RecordingEntry) -> Result<String> {
    let bytes = entry.encode().map_err(|error| ArchiveError::Manifest {
        key: format!("recording {}", entry.recording_id),
        why: format!("its entry does not encode: {error}"),
    })?;
    Ok(hex(&bytes))
}

impl Manifest {
    /// Decodes and checks a manifest read from `key`.
    pub fn decode(key: &str, bytes: &[u8]) -> Result<Manifest> {
        let bad = |why: String| ArchiveError::Manifest {
            key: key.to_string(),
            why,
        };
        let manifest: Manifest = serde_json::from_slice(bytes)
            .map_err(|error| bad(format!("not a manifest: {error}")))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(bad(format!(
                "format is {:?}, not {MANIFEST_FORMAT:?}",
                manifest.format
            )));
        }
        if manifest.version != MANIFEST_VERSION {
            return Err(bad(format!(
                "version {} (this nvrec reads version {MANIFEST_VERSION})",
                manifest.version
            )));
        }
        for segment in &manifest.segments {
            let n = segment.chunk_count as usize;
            if segment.chunk_offsets.len() != n || segment.chunk_timestamps_ns.len() != n {
                return Err(bad(format!(
                    "segment {} lists {} chunks but indexes {} offsets and {} timestamps",
                    segment.key,
                    n,
                    segment.chunk_offsets.len(),
                    segment.chunk_timestamps_ns.len()
                )));
            }
            if segment
                .chunk_offsets
                .windows(2)
                .any(|pair| pair[0] >= pair[1])
                || segment
                    .chunk_offsets
                    .last()
                    .is_some_and(|&last| last >= segment.size_bytes)
            {
                return Err(bad(format!(
                    "segment {}: its chunk offsets do not rise within its {} bytes",
                    segment.key, segment.size_bytes
                )));
            }
        }
        manifest.recording_entry(key)?;
        Ok(manifest)
    }

    /// The recording's entry, decoded from the manifest.
    pub fn recording_entry(&self, key: &str) -> Result<RecordingEntry> {
        let bytes = unhex(&self.entry).ok_or_else(|| ArchiveError::Manifest {
            key: key.to_string(),
            why: "its entry is not hex".into(),
        })?;
        RecordingEntry::decode(&bytes).map_err(|error| ArchiveError::Manifest {
            key: key.to_string(),
            why: format!("its entry does not decode: {error}"),
        })
    }

    /// The manifest's own key.
    pub fn key(&self) -> String {
        manifest_key(&recording_dir(
            &self.node,
            &self.set_uuid,
            self.recording_id,
        ))
    }

    /// JSON, pretty enough to read with `cat`.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a manifest always serializes");
        bytes.push(b'\n');
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_deterministic_and_sorted_by_number() {
        let dir = recording_dir("node-1", "0123", 7);
        assert_eq!(dir, "node-1/0123/rec-000007");
        assert_eq!(segment_key(&dir, 12), "node-1/0123/rec-000007/seg-000012");
        assert!(segment_key(&dir, 9) < segment_key(&dir, 10));
        assert_eq!(manifest_key(&dir), "node-1/0123/rec-000007/manifest.json");
    }

    #[test]
    fn node_names_that_would_change_a_key_are_refused() {
        for bad in ["", ".", "..", "a/b", "a b", "x\n"] {
            assert!(check_node(bad).is_err(), "{bad:?}");
        }
        for good in ["rec-01", "vehicle_7.lab"] {
            check_node(good).unwrap();
        }
    }

    /// A ring's entry: recording 1, chunks of 1000 bytes from sequence 0 to `end_sequence`.
    fn ring_entry(revision: u64, end_sequence: u64) -> RecordingEntry {
        RecordingEntry {
            set_uuid: nvrec::layout::Uuid::from_random_bytes([0x3c; 16]),
            recording_id: 1,
            revision,
            state: RecordingState::Interrupted,
            flags: RecordingFlags::RING | RecordingFlags::PATTERN,
            first_sequence: 0,
            end_sequence,
            start_ns: 1_767_225_600_000_000_000,
            end_ns: 1_767_225_660_000_000_000,
            stream_len_bytes: 1000 * end_sequence,
            lost_bytes: 0,
            name: nvrec::layout::Label::new("ring").expect("valid"),
            members: vec![nvrec::layout::MemberSpan {
                start_slot_index: 0,
                end_slot_index: 50,
            }],
            retirements: Vec::new(),
            start_laps: Vec::new(),
            overwrote: Vec::new(),
            signal: None,
            reclaimed: None,
            mark_of: None,
        }
    }

    /// Segment `index` of chunks `first..=last` (1128 bytes each, framed).
    fn segment(index: u32, first: u64, last: u64) -> SegmentInfo {
        let count = last - first + 1;
        SegmentInfo {
            key: segment_key("n/s/rec-000001", index),
            size_bytes: 1128 * count,
            crc32c: 7 + index,
            e_tag: None,
            chunk_count: count,
            first_sequence: first,
            last_sequence: last,
            first_timestamp_ns: first,
            last_timestamp_ns: last,
            chunk_offsets: (0..count).map(|i| 1128 * i).collect(),
            chunk_timestamps_ns: (first..=last).collect(),
            flows: None,
        }
    }

    /// The manifest of `entry` archived as `segments`, with `losses` and `holes`.
    fn manifest(entry: &RecordingEntry, segments: Vec<SegmentInfo>, holes: Vec<Hole>) -> Manifest {
        let chunk_count: u64 = segments.iter().map(|s| s.chunk_count).sum();
        Manifest {
            format: MANIFEST_FORMAT.into(),
            version: MANIFEST_VERSION,
            node: "n".into(),
            set_uuid: "s".into(),
            set_label: String::new(),
            recording_id: entry.recording_id,
            label: entry.name.to_string(),
            state: state_word(entry).into(),
            start_ns: entry.start_ns,
            end_ns: entry.end_ns,
            first_sequence: entry.first_sequence,
            end_sequence: entry.end_sequence,
            stream_len_bytes: entry.stream_len_bytes,
            lost_bytes: entry.stream_len_bytes - 1000 * chunk_count,
            chunk_size_bytes: 131072,
            chunk_count,
            payload_bytes: 1000 * chunk_count,
            archived_bytes: segments.iter().map(|s| s.size_bytes).sum(),
            losses: Vec::new(),
            holes,
            retirements: Vec::new(),
            entry: encode_entry(entry).unwrap(),
            segments,
        }
    }

    #[test]
    fn an_entry_closed_by_recovery_goes_on_from_what_its_archive_holds() {
        let followed = ring_entry(3, 40);
        let held = manifest(
            &followed,
            vec![segment(0, 0, 19), segment(1, 20, 39)],
            vec![],
        );
        assert_eq!(held.standing(&followed).unwrap(), Standing::Current);
        // Recovery wrote the entry a reader had recovered as its next revision.
        let recovered = ring_entry(4, 40);
        assert_eq!(held.standing(&recovered).unwrap(), Standing::Earlier);
        // A repair extended it over chunks past its end.
        assert_eq!(
            held.standing(&ring_entry(5, 45)).unwrap(),
            Standing::Earlier
        );
        // An entry that ends before the chunks the archive holds does not go on from it.
        let short = ring_entry(5, 30);
        assert!(matches!(
            held.standing(&short).unwrap(),
            Standing::Other(NotContinued::EndsBefore {
                held_last: 39,
                drives_end: 30
            })
        ));
        // Nor does another recording under the same key.
        let other = RecordingEntry {
            start_ns: followed.start_ns + 1,
            ..recovered.clone()
        };
        assert!(matches!(
            held.standing(&other).unwrap(),
            Standing::Other(NotContinued::OtherRecording { .. })
        ));
        let linear = RecordingEntry {
            flags: RecordingFlags::PATTERN,
            ..recovered.clone()
        };
        assert_eq!(
            held.standing(&linear).unwrap(),
            Standing::Other(NotContinued::OtherKind)
        );
        // Its space given back once archived: the archive is its copy.
        let freed = RecordingEntry {
            flags: recovered.flags | RecordingFlags::RECLAIMED,
            reclaimed: Some(nvrec::layout::Reclaim {
                reclaimed_ns: followed.end_ns + 1,
                cause: nvrec::layout::ReclaimCause::Freed,
                archived: true,
            }),
            ..recovered.clone()
        };
        assert_eq!(held.standing(&freed).unwrap(), Standing::Reclaimed);
        // A manifest that holds nothing yet is gone on from too (from the start).
        let empty = manifest(&followed, vec![], vec![]);
        assert_eq!(empty.standing(&recovered).unwrap(), Standing::Earlier);
        assert_eq!(empty.held_sequence_end(), None);
        assert_eq!(held.held_sequence_end(), Some(40));
    }

    /// A manifest never replaces one in the store with less: as the soak found it, the
    /// recording read again from drives a new ring had written over (every chunk missing)
    /// would have replaced 40 archived chunks with none.
    #[test]
    fn a_manifest_that_holds_less_never_replaces_the_one_in_the_store() {
        let followed = ring_entry(3, 40);
        let recovered = ring_entry(4, 40);
        let old = manifest(
            &followed,
            vec![segment(0, 0, 19), segment(1, 20, 39)],
            vec![],
        );
        // The same segments for the recovered entry, or more after them: it may.
        let same = manifest(&recovered, old.segments.clone(), vec![]);
        assert_eq!(same.lacks_what(&old), None);
        let longer = ring_entry(5, 45);
        let mut more = old.segments.clone();
        more.push(segment(2, 40, 44));
        assert_eq!(manifest(&longer, more, vec![]).lacks_what(&old), None);
        // Read again from overwritten drives: nothing held, every chunk a hole.
        let hole = Hole {
            first_sequence: Some(0),
            chunk_count: 40,
            what: "missing on the drives".into(),
        };
        let emptied = manifest(&recovered, vec![], vec![hole]);
        let why = emptied.lacks_what(&old).expect("refused");
        assert!(
            matches!(&why, Lacks::Segment { index: 0, key, .. } if key.contains("seg-000000")),
            "{why}"
        );
        // Segments cut again from other chunks under the same keys.
        let recut = manifest(
            &recovered,
            vec![segment(0, 0, 19), segment(1, 25, 39)],
            vec![],
        );
        let why = recut.lacks_what(&old).unwrap();
        assert!(
            matches!(&why, Lacks::Segment { index: 1, key, .. } if key.contains("seg-000001")),
            "{why}"
        );
        // A segment dropped from the end.
        let dropped = manifest(&recovered, vec![segment(0, 0, 19)], vec![]);
        let why = dropped.lacks_what(&old).unwrap();
        assert!(matches!(&why, Lacks::Segment { index: 1, .. }), "{why}");
        // The same segments, claiming fewer bytes.
        let mut fewer = same.clone();
        fewer.payload_bytes -= 1;
        assert!(matches!(
            fewer.lacks_what(&old),
            Some(Lacks::Fewer {
                what: "payload bytes",
                ..
            })
        ));
    }

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)).unwrap(), bytes);
        assert!(unhex("abc").is_none());
        assert!(unhex("zz").is_none());
    }
}
