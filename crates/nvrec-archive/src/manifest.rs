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

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)).unwrap(), bytes);
        assert!(unhex("abc").is_none());
        assert!(unhex("zz").is_none());
    }
}
