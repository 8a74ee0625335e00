//! A recording of samples (a byte stream whose entry keeps a signal's facts, format 1.3)
//! exported as a SigMF recording: NAME.sigmf-data, the samples as recorded, and
//! NAME.sigmf-meta, JSON: the datatype, sample rate and metadata of the recording, a capture
//! segment with the time of its first sample (and its centre frequency), and an annotation
//! for each hole in the stream.
//!
//! A hole is found where a chunk's stream offset lies past the end of the one before it: the
//! recorder lost input there (the chunk's gap), or chunks are missing or damaged. Its
//! annotation (label `loss`) starts at the sample index where the hole is in the data file,
//! with the samples lost (`nvrec:lost_samples`) and the bytes by cause
//! (`nvrec:recorder_lost_bytes`, `nvrec:missing_bytes`) in keys of the `nvrec` extension,
//! which the global object declares. With [`Gaps::Zero`] the hole is written as zeros, so
//! every sample sits at its own index and the annotation covers those zeros
//! (`core:sample_count`); with [`Gaps::Skip`] nothing is written, the annotation covers no
//! sample, and a new capture segment starts there with the stream's own index of the next
//! sample (`core:global_index`) and its time.
//!
//! Time windows are taken by chunk (a chunk's timestamp is when its first byte arrived), so
//! a window's data starts at a chunk; the first capture's `core:global_index` says where
//! that is in the whole stream. The data file holds whole samples: a tail shorter than one
//! is left out and reported.

use super::write_behind::WriteBehind;
use super::{create_file, ExportError, Gaps};
use crate::layout::{ChunkHeader, RecordingEntry, Signal};
use crate::unit::format_rfc3339_ns;
use serde_json::{json, Map, Value};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The SigMF version the metadata follows.
const SIGMF_VERSION: &str = "1.2.0";
/// The version of the `nvrec` extension's keys (documented in docs/GUIDE.md, "SigMF").
const EXTENSION_VERSION: &str = "1.0.0";
/// Zeros written at once in place of a hole.
const ZERO_FILL_BYTES: usize = 1 << 20;

/// What a SigMF export wrote.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SigmfSummary {
    pub data_path: PathBuf,
    pub meta_path: PathBuf,
    pub datatype: String,
    /// Samples in the data file, zeros included.
    pub samples: u64,
    /// Bytes of the data file.
    pub data_bytes: u64,
    /// Holes annotated, and the samples they stand for.
    pub losses: u64,
    pub lost_samples: u64,
    /// Zeros written in place of holes (`--gaps zero`).
    pub zero_filled_bytes: u64,
    pub captures: u64,
}

/// A recording's samples on their way into a SigMF recording.
pub struct SigmfExport {
    /// The data file, written by a thread of its own.
    data: WriteBehind,
    meta: File,
    signal: Signal,
    sample_bytes: u64,
    gaps: Gaps,
    /// The stream's length (holes are filled no further) and the recording's name.
    stream_len_bytes: u64,
    name: String,
    /// The stream offset the next byte of the data file stands for (None before the first).
    next_offset_bytes: Option<u64>,
    written_bytes: u64,
    zeros: Vec<u8>,
    captures: Vec<Value>,
    annotations: Vec<Value>,
    summary: SigmfSummary,
}

/// The two files of a SigMF recording named `base` (an extension given is replaced).
pub fn sigmf_paths(base: &Path) -> (PathBuf, PathBuf) {
    let stem = match base.extension().and_then(|e| e.to_str()) {
        Some("sigmf-data" | "sigmf-meta" | "sigmf") => base.with_extension(""),
        _ => base.to_path_buf(),
    };
    let with = |extension: &str| {
        let mut name = stem.clone().into_os_string();
        name.push(extension);
        PathBuf::from(name)
    };
    (with(".sigmf-data"), with(".sigmf-meta"))
}

impl SigmfExport {
    /// Creates both files (the metadata is written at the end); if the second cannot be
    /// created, the first is removed again.
    pub fn create(
        base: &Path,
        entry: &RecordingEntry,
        gaps: Gaps,
    ) -> Result<SigmfExport, ExportError> {
        let signal = entry
            .signal
            .clone()
            .ok_or(ExportError::NoSignal(entry.recording_id))?;
        let (data_path, meta_path) = sigmf_paths(base);
        let data = create_file(&data_path)?;
        let meta = create_file(&meta_path).inspect_err(|_| {
            let _ = std::fs::remove_file(&data_path);
        })?;
        let data = WriteBehind::new(data).map_err(|source| ExportError::Create {
            path: data_path.clone(),
            source,
        })?;
        Ok(SigmfExport {
            data,
            meta,
            sample_bytes: u64::from(signal.format.sample_bytes()),
            summary: SigmfSummary {
                data_path,
                meta_path,
                datatype: signal.format.name(),
                ..SigmfSummary::default()
            },
            signal,
            gaps,
            stream_len_bytes: entry.stream_len_bytes,
            name: entry.name.as_str().to_string(),
            next_offset_bytes: None,
            written_bytes: 0,
            zeros: match gaps {
                Gaps::Zero => vec![0; ZERO_FILL_BYTES],
                Gaps::Skip => Vec::new(),
            },
            captures: Vec::new(),
            annotations: Vec::new(),
        })
    }

    /// Exports one chunk of the stream: the hole before it, if any, then its payload.
    pub fn chunk(
        &mut self,
        header: &ChunkHeader,
        payload: &[u8],
        problems: &mut Vec<String>,
    ) -> Result<(), ExportError> {
        let offset = header.stream_offset_bytes;
        // The first chunk exported: the data file starts where its gap began, so that a
        // loss right at the start is a hole like any other.
        let expected = match self.next_offset_bytes {
            Some(next) => next,
            None => {
                let start = offset - header.gap_bytes;
                if !start.is_multiple_of(self.sample_bytes) {
                    problems.push(format!(
                        "the export starts at stream offset {start}, not on a sample boundary \
                         ({} bytes a sample): the samples are shifted",
                        self.sample_bytes
                    ));
                }
                self.capture(start, header.timestamp_ns);
                start
            }
        };
        if offset < expected {
            problems.push(format!(
                "chunk sequence {} at stream offset {offset} overlaps what came before \
                 (up to {expected}): left out",
                header.sequence
            ));
            return Ok(());
        }
        if offset > expected {
            self.hole(expected, offset, header, problems)?;
        }
        self.write(payload)?;
        self.next_offset_bytes = Some(offset + payload.len() as u64);
        Ok(())
    }

    /// The hole from stream offset `from` to the chunk at `header`: annotated, and with
    /// [`Gaps::Zero`] filled (no further than the stream's length).
    fn hole(
        &mut self,
        from: u64,
        to: u64,
        header: &ChunkHeader,
        problems: &mut Vec<String>,
    ) -> Result<(), ExportError> {
        let hole_bytes = to - from;
        let recorder_bytes = header.gap_bytes.min(hole_bytes);
        let sample_index = self.written_bytes / self.sample_bytes;
        if !hole_bytes.is_multiple_of(self.sample_bytes) && self.gaps == Gaps::Skip {
            problems.push(format!(
                "a hole of {hole_bytes} bytes at stream offset {from} is not a whole number of \
                 samples: the samples after it are shifted (--gaps zero keeps them in place)"
            ));
        }
        let lost_samples = hole_bytes.div_ceil(self.sample_bytes);
        let covered_samples = match self.gaps {
            Gaps::Zero => {
                let fill = hole_bytes.min(self.stream_len_bytes.saturating_sub(from));
                self.fill_zeros(fill)?;
                fill / self.sample_bytes
            }
            Gaps::Skip => {
                self.capture(to, header.timestamp_ns);
                0
            }
        };
        let comment = match hole_bytes - recorder_bytes {
            0 => format!("{hole_bytes} bytes lost while recording (input the drives could not take)"),
            missing if recorder_bytes == 0 => {
                format!("{missing} bytes in chunks missing or damaged")
            }
            missing => format!(
                "{recorder_bytes} bytes lost while recording, {missing} in chunks missing or damaged"
            ),
        };
        self.annotations.push(json!({
            "core:sample_start": sample_index,
            "core:sample_count": covered_samples,
            "core:label": "loss",
            "core:comment": comment,
            "core:generator": "nvrec",
            "nvrec:lost_samples": lost_samples,
            "nvrec:stream_offset_bytes": from,
            "nvrec:recorder_lost_bytes": recorder_bytes,
            "nvrec:missing_bytes": hole_bytes - recorder_bytes,
        }));
        self.summary.losses += 1;
        self.summary.lost_samples += lost_samples;
        Ok(())
    }

    /// A capture segment at the data file's current sample, for stream offset `offset`
    /// stamped `timestamp_ns` (it replaces one that would start at the same sample).
    fn capture(&mut self, offset: u64, timestamp_ns: u64) {
        let sample_start = self.written_bytes / self.sample_bytes;
        let mut segment = Map::new();
        segment.insert("core:sample_start".into(), sample_start.into());
        segment.insert(
            "core:global_index".into(),
            (offset / self.sample_bytes).into(),
        );
        segment.insert(
            "core:datetime".into(),
            format_rfc3339_ns(timestamp_ns).into(),
        );
        if let Some(freq) = self.signal.center_freq_hz {
            segment.insert("core:frequency".into(), freq.into());
        }
        let last_start = self
            .captures
            .last()
            .and_then(|last| last["core:sample_start"].as_u64());
        if last_start == Some(sample_start) {
            self.captures.pop();
        }
        self.captures.push(Value::Object(segment));
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), ExportError> {
        self.data
            .write_all(bytes)
            .map_err(|source| ExportError::Write {
                path: self.summary.data_path.clone(),
                source,
            })?;
        self.written_bytes += bytes.len() as u64;
        Ok(())
    }

    fn fill_zeros(&mut self, len_bytes: u64) -> Result<(), ExportError> {
        let mut left = len_bytes;
        while left > 0 {
            let now = left.min(self.zeros.len() as u64) as usize;
            self.data
                .write_all(&self.zeros[..now])
                .map_err(|source| ExportError::Write {
                    path: self.summary.data_path.clone(),
                    source,
                })?;
            left -= now as u64;
        }
        self.written_bytes += len_bytes;
        self.summary.zero_filled_bytes += len_bytes;
        Ok(())
    }

    /// Cuts the data file to whole samples and writes the metadata file.
    pub fn finish(mut self, problems: &mut Vec<String>) -> Result<SigmfSummary, ExportError> {
        let data_path = self.summary.data_path.clone();
        let failed = |source| ExportError::Write {
            path: data_path.clone(),
            source,
        };
        let file = self.data.finish().map_err(failed)?;
        let tail = self.written_bytes % self.sample_bytes;
        if tail > 0 {
            file.set_len(self.written_bytes - tail).map_err(failed)?;
            problems.push(format!(
                "the last {tail} bytes are less than a sample ({} bytes): left out",
                self.sample_bytes
            ));
        }
        self.summary.data_bytes = self.written_bytes - tail;
        self.summary.samples = self.summary.data_bytes / self.sample_bytes;
        self.summary.captures = self.captures.len() as u64;
        let meta = json!({
            "global": global(&self.signal, &self.name),
            "captures": self.captures,
            "annotations": self.annotations,
        });
        let text = serde_json::to_string_pretty(&meta).expect("JSON values always print");
        let meta_path = self.summary.meta_path.clone();
        self.meta
            .write_all(text.as_bytes())
            .and_then(|()| self.meta.write_all(b"\n"))
            .map_err(|source| ExportError::Write {
                path: meta_path,
                source,
            })?;
        Ok(self.summary)
    }
}

/// SigMF's global object: what the recording's entry says of its samples, its `--meta`
/// keys, and the extensions whose keys appear (nvrec's own, and any namespace a `--meta` key
/// brings, declared optional).
fn global(signal: &Signal, name: &str) -> Value {
    let mut global = Map::new();
    global.insert("core:datatype".into(), signal.format.name().into());
    global.insert("core:sample_rate".into(), signal.sample_rate_hz.into());
    global.insert("core:version".into(), SIGMF_VERSION.into());
    global.insert("core:num_channels".into(), 1.into());
    global.insert(
        "core:recorder".into(),
        format!("nvrec {}", env!("CARGO_PKG_VERSION")).into(),
    );
    if !name.is_empty() {
        global.insert("core:description".into(), name.into());
    }
    let mut namespaces = vec!["nvrec".to_string()];
    for (key, value) in &signal.meta {
        global.insert(key.clone(), value.clone().into());
        let namespace = key.split(':').next().unwrap_or("core").to_string();
        if namespace != "core" && !namespaces.contains(&namespace) {
            namespaces.push(namespace);
        }
    }
    let extensions: Vec<Value> = namespaces
        .iter()
        .map(|namespace| {
            let version = if namespace == "nvrec" {
                EXTENSION_VERSION
            } else {
                "unspecified"
            };
            json!({"name": namespace, "version": version, "optional": true})
        })
        .collect();
    global.insert("core:extensions".into(), extensions.into());
    Value::Object(global)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{
        ChunkFlags, Label, MemberSpan, RecordingFlags, RecordingState, SampleFormat, Uuid,
    };

    fn entry(stream_len_bytes: u64) -> RecordingEntry {
        RecordingEntry {
            set_uuid: Uuid::from_random_bytes([1; 16]),
            recording_id: 1,
            revision: 2,
            state: RecordingState::Closed,
            flags: RecordingFlags::SIGNAL,
            first_sequence: 0,
            end_sequence: 3,
            start_ns: 1_000,
            end_ns: 2_000,
            stream_len_bytes,
            lost_bytes: 36,
            name: Label::new("iq").unwrap(),
            members: vec![MemberSpan::default()],
            retirements: Vec::new(),
            start_laps: Vec::new(),
            overwrote: Vec::new(),
            signal: Some(Signal {
                format: SampleFormat::parse("ci16_le").unwrap(),
                sample_rate_hz: 1e6,
                center_freq_hz: Some(100e6),
                meta: vec![("core:author".into(), "Ada".into())],
            }),
            reclaimed: None,
            mark_of: None,
        }
    }

    fn header(offset: u64, gap: u64, timestamp_ns: u64) -> ChunkHeader {
        ChunkHeader {
            set_uuid: Uuid::from_random_bytes([1; 16]),
            recording_id: 1,
            member_index: 0,
            stream_id: 0,
            sequence: offset,
            slot_index: 0,
            timestamp_ns,
            elapsed_ns: 0,
            stream_offset_bytes: offset,
            gap_bytes: gap,
            payload_len_bytes: 16,
            flags: if gap > 0 {
                ChunkFlags::GAP
            } else {
                ChunkFlags::empty()
            },
        }
    }

    /// Runs three chunks with a recorder loss of 8 samples and 4 missing bytes' worth (one
    /// sample) between them, in `gaps` mode; returns the data and the metadata.
    fn export(gaps: Gaps) -> (Vec<u8>, Value, Vec<String>) {
        let dir = std::env::temp_dir().join(format!("nvrec-sigmf-{}-{gaps:?}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("out");
        let mut export = SigmfExport::create(&base, &entry(100), gaps).unwrap();
        let mut problems = Vec::new();
        let chunks = [(0u64, 0u64, [1u8; 16]), (48, 32, [2; 16]), (68, 0, [3; 16])];
        for (offset, gap, bytes) in chunks {
            export
                .chunk(&header(offset, gap, 1_000 + offset), &bytes, &mut problems)
                .unwrap();
        }
        let summary = export.finish(&mut problems).unwrap();
        let data = std::fs::read(&summary.data_path).unwrap();
        let meta = serde_json::from_slice(&std::fs::read(&summary.meta_path).unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        (data, meta, problems)
    }

    #[test]
    fn zero_filled_holes_keep_every_sample_at_its_index() {
        let (data, meta, problems) = export(Gaps::Zero);
        assert_eq!(problems, Vec::<String>::new());
        let mut expected = vec![1u8; 16];
        expected.extend([0; 32]);
        expected.extend([2; 16]);
        expected.extend([0; 4]);
        expected.extend([3; 16]);
        assert_eq!(data, expected);
        let annotations = meta["annotations"].as_array().unwrap();
        let at: Vec<(u64, u64, u64)> = annotations
            .iter()
            .map(|a| {
                (
                    a["core:sample_start"].as_u64().unwrap(),
                    a["core:sample_count"].as_u64().unwrap(),
                    a["nvrec:missing_bytes"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(at, [(4, 8, 0), (16, 1, 4)]);
        assert_eq!(meta["captures"].as_array().unwrap().len(), 1);
        assert_eq!(meta["captures"][0]["core:frequency"], 100e6);
        assert_eq!(meta["global"]["core:datatype"], "ci16_le");
        assert_eq!(meta["global"]["core:author"], "Ada");
    }

    #[test]
    fn skipped_holes_start_a_capture_segment_at_the_streams_index() {
        let (data, meta, _) = export(Gaps::Skip);
        assert_eq!(data.len(), 48);
        let captures: Vec<(u64, u64)> = meta["captures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["core:sample_start"].as_u64().unwrap(),
                    c["core:global_index"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(captures, [(0, 0), (4, 12), (8, 17)]);
        assert_eq!(meta["annotations"][1]["core:sample_count"], 0);
        assert_eq!(meta["annotations"][1]["nvrec:lost_samples"], 1);
    }

    #[test]
    fn an_extension_given_is_replaced() {
        for name in ["x", "x.sigmf-data", "x.sigmf-meta", "x.sigmf"] {
            assert_eq!(
                sigmf_paths(Path::new(name)),
                ("x.sigmf-data".into(), "x.sigmf-meta".into())
            );
        }
        assert_eq!(
            sigmf_paths(Path::new("a.b")).0,
            PathBuf::from("a.b.sigmf-data")
        );
    }
}
