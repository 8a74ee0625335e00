//! `export`: a recording as PcapNg, SigMF or MCAP, in one output or numbered parts. The
//! formats are the library's (`nvrec::export`); this reads the recording through a
//! [`ChunkSource`] into one of them and says what came of it.

use crate::chunks::ChunkSource;
use crate::find::{FindRead, Indexed};
use crate::listing::state_text;
use crate::outcome::{Class, UsageError};
use anyhow::{Context, Result};
use nvrec::control::{Control, Progress};
use nvrec::engine::EngineChoice;
use nvrec::export::{Export, ExportError, ExportOptions, Output, Part, Split, SplitExport};
use nvrec::layout::RecordingEntry;
use nvrec::recording::reader::{Item, ReadSummary};
use std::path::{Path, PathBuf};

/// Where an export goes.
pub enum ExportTo {
    /// One output: a file, or a stream (stdout).
    One(Output),
    /// Numbered files next to this path, cut by size or time.
    Parts(PathBuf, Split),
}

/// How an export went.
#[derive(Debug)]
pub struct ExportReport {
    pub entry: RecordingEntry,
    /// Every output written (one without a split).
    pub parts: Vec<Part>,
    pub summary: ReadSummary,
    /// Holes in the recording and what could not be exported.
    pub problems: Vec<String>,
    /// An export cut by flows from an archive: how its chunks were found.
    pub read: FindRead,
}

impl ExportReport {
    /// A recording read with missing or damaged chunks fails; the export holds the rest.
    pub fn class(&self) -> Class {
        Class::passed(self.summary.damage_count == 0 && self.summary.missing_chunk_count == 0)
    }

    pub fn state_text(&self) -> &'static str {
        state_text(&self.entry)
    }
}

/// A refusal of the export (the recording cannot be had in that format) is a usage error;
/// anything else a failure.
pub fn refusal(error: ExportError) -> anyhow::Error {
    if error.is_refusal() {
        UsageError(error.to_string()).into()
    } else {
        error.into()
    }
}

/// Exports `entry` of `source` with `options` (whose window says where the read starts).
pub fn export(
    source: &ChunkSource,
    entry: RecordingEntry,
    options: ExportOptions,
    to: ExportTo,
    engine: EngineChoice,
    control: &Control,
    progress: &Progress,
) -> Result<ExportReport> {
    let window = (options.window.from_ns, options.window.to_ns);
    let indexed = options.flows.as_ref().and_then(|flows| {
        let asked = (&options.window, &flows.query, flows.seed);
        Indexed::of(source, &entry, asked, engine, control)
    });
    let (mut exporter, output) = Exporter::create(&entry, options, to)?;
    let mut problems: Vec<String> = Vec::new();
    let mut each = |item: Item<'_>| {
        problems.extend(item.hole_text());
        exporter.item(item)
    };
    let (summary, read) = match indexed {
        // Only the chunks the flows lie in; past the window is not the end there.
        Some(Ok(indexed)) => {
            let summary = indexed.read(control, progress, &mut |item| {
                each(item);
            })?;
            let read = indexed.how(summary.chunk_count);
            (summary, read)
        }
        why_not => {
            let summary =
                source.read_window(&entry, engine, window, control, progress, &mut each)?;
            let why_not_indexed = why_not.and_then(Result::err);
            (summary, FindRead::Scanned { why_not_indexed })
        }
    };
    let (parts, export_problems) = exporter.finish(&output).context("exporting")?;
    problems.extend(export_problems);
    Ok(ExportReport {
        entry,
        parts,
        summary,
        problems,
        read,
    })
}

/// An export to one output, or cut into parts.
enum Exporter {
    One(Box<Export>),
    Parts(Box<SplitExport>),
}

impl Exporter {
    /// The exporter and the path its report names (a stream has none of its own).
    fn create(
        entry: &RecordingEntry,
        options: ExportOptions,
        to: ExportTo,
    ) -> Result<(Exporter, PathBuf)> {
        Ok(match to {
            ExportTo::Parts(path, split) => {
                let export = SplitExport::create(entry, options, &path, split).map_err(refusal)?;
                (Exporter::Parts(Box::new(export)), path)
            }
            ExportTo::One(output) => {
                let path = match &output {
                    Output::File(path) => path.clone(),
                    Output::Stream(_) => PathBuf::from("-"),
                };
                let export = Export::create(entry, options, output).map_err(refusal)?;
                (Exporter::One(Box::new(export)), path)
            }
        })
    }

    fn item(&mut self, item: Item<'_>) -> bool {
        match self {
            Exporter::One(export) => export.item(item),
            Exporter::Parts(export) => export.item(item),
        }
    }

    /// Every output written, and what could not be exported.
    fn finish(self, output: &Path) -> Result<(Vec<Part>, Vec<String>), ExportError> {
        match self {
            Exporter::One(export) => export.finish().map(|(exported, problems)| {
                let path = output.to_path_buf();
                (vec![Part { path, exported }], problems)
            }),
            Exporter::Parts(export) => export.finish(),
        }
    }
}
