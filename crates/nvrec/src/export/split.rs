//! An export cut into numbered parts (`--split 1GB`, `--split 60s`): `cap.pcapng` becomes
//! `cap-0001.pcapng`, `cap-0002.pcapng`, ... (a SigMF base name `iq` becomes `iq-0001`).
//! Each part is a whole file of its format, readable on its own. A part ends at a chunk's
//! boundary: by size, before the chunk that would take the payload it was given past the
//! limit; by time, at the first chunk that began a period or more after the part's first
//! chunk. Never inside a packet that spans
//! chunks: its part ends after the chunk that completes it.

use super::{Export, ExportError, ExportOptions, Exported, Output};
use crate::layout::RecordingEntry;
use crate::recording::reader::Item;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where parts end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// After about this many bytes of the recording's payloads.
    Bytes(u64),
    /// Every period of chunk time.
    Time(Duration),
}

/// One part written.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Part {
    pub path: PathBuf,
    pub exported: Exported,
}

/// `base` numbered: the number before the extension, if it has one.
pub fn part_path(base: &Path, number: u32) -> PathBuf {
    let stem = base
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(extension) => format!("{stem}-{number:04}.{}", extension.to_string_lossy()),
        None => format!("{stem}-{number:04}"),
    };
    base.with_file_name(name)
}

/// An export whose output is cut into parts.
pub struct SplitExport {
    entry: RecordingEntry,
    options: ExportOptions,
    base: PathBuf,
    split: Split,
    current: Export,
    number: u32,
    /// The current part's first chunk time and the payload bytes it was given.
    part_start_ns: Option<u64>,
    part_bytes: u64,
    parts: Vec<Part>,
    problems: Vec<String>,
    failure: Option<ExportError>,
}

impl SplitExport {
    /// Checks and creates the first part, as [`Export::create`] does.
    pub fn create(
        entry: &RecordingEntry,
        options: ExportOptions,
        base: &Path,
        split: Split,
    ) -> Result<SplitExport, ExportError> {
        let current = Export::create(entry, options.clone(), Output::File(part_path(base, 1)))?;
        Ok(SplitExport {
            entry: entry.clone(),
            options,
            base: base.to_path_buf(),
            split,
            current,
            number: 1,
            part_start_ns: None,
            part_bytes: 0,
            parts: Vec::new(),
            problems: Vec::new(),
            failure: None,
        })
    }

    /// As [`Export::item`], starting a new part first where one is due.
    pub fn item(&mut self, item: Item<'_>) -> bool {
        if let Item::Chunk { header, payload } = &item {
            let len_bytes = payload.len() as u64;
            let time_ns = header.time_ns(self.entry.start_ns);
            if self.due(time_ns, len_bytes) {
                if let Err(error) = self.next_part() {
                    self.failure = Some(error);
                    return false;
                }
            }
            self.part_start_ns.get_or_insert(time_ns);
            self.part_bytes += len_bytes;
        }
        self.current.item(item)
    }

    fn due(&self, timestamp_ns: u64, len_bytes: u64) -> bool {
        let Some(start_ns) = self.part_start_ns else {
            return false;
        };
        if !self.current.between_packets() {
            return false;
        }
        match self.split {
            Split::Bytes(limit) => self.part_bytes + len_bytes > limit,
            Split::Time(period) => {
                timestamp_ns >= start_ns.saturating_add(period.as_nanos() as u64)
            }
        }
    }

    fn next_part(&mut self) -> Result<(), ExportError> {
        let next_path = part_path(&self.base, self.number + 1);
        let next = Export::create(&self.entry, self.options.clone(), Output::File(next_path))?;
        let done = std::mem::replace(&mut self.current, next);
        let (exported, problems) = done.finish()?;
        self.problems.extend(problems);
        self.parts.push(Part {
            path: part_path(&self.base, self.number),
            exported,
        });
        self.number += 1;
        self.part_start_ns = None;
        self.part_bytes = 0;
        Ok(())
    }

    /// Finishes the last part: every part written, and what could not be exported.
    pub fn finish(self) -> Result<(Vec<Part>, Vec<String>), ExportError> {
        let SplitExport {
            current,
            mut parts,
            mut problems,
            base,
            number,
            failure,
            ..
        } = self;
        if let Some(error) = failure {
            return Err(error);
        }
        let (exported, last_problems) = current.finish()?;
        problems.extend(last_problems);
        parts.push(Part {
            path: part_path(&base, number),
            exported,
        });
        Ok((parts, problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_numbered_before_the_extension() {
        assert_eq!(
            part_path(Path::new("/tmp/cap.pcapng"), 1),
            Path::new("/tmp/cap-0001.pcapng")
        );
        assert_eq!(part_path(Path::new("out/iq"), 12), Path::new("out/iq-0012"));
        assert_eq!(
            part_path(Path::new("a.b.mcap"), 3),
            Path::new("a.b-0003.mcap")
        );
    }
}
