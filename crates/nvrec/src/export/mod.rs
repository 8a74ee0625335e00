//! Exports: a recording read back, in sequence order, written in a format the field's tools
//! read: PcapNg for network captures (Wireshark, tshark, tcpdump), SigMF for sampled radio
//! signals (the `sigmf` package, GNU Radio, inspectrum), MCAP for robotics logs (the `mcap`
//! tools, Foxglove). One file per format beside this one.
//!
//! An export is a sink of the read pipeline (`recording::reader`): whoever reads the
//! recording, from its drives or from an archive, hands each [`Item`] to [`Export::item`],
//! which answers whether to go on, as the reader's callback does; [`Export::finish`] writes
//! what comes last (interface statistics, the index, the metadata file) and says what was
//! written. A time window ends the walk at the first chunk stamped past it; with the reader
//! starting at the window (its binary search over chunk timestamps), a one-second window of
//! a long recording reads about a second of it.
//!
//! [`Export::create`] checks that the recording can be exported as asked before it creates
//! any file: a refusal ([`ExportError::is_refusal`]) writes nothing.
//!
//! Deliberately absent: reading. An export never opens a volume set or an archive; it takes
//! the items of whatever read them, so every reader the CLI has feeds every format.

pub mod mcap;
pub mod pcapng;
pub mod sigmf;
pub mod split;
mod write_behind;

use crate::flow::FlowFilter;
use crate::layout::{
    ChunkFlags, ChunkHeader, LayoutError, Reassembly, Record, RecordingEntry, RecordingFlags,
};
use crate::net::BpfFilter;
use crate::recording::reader::Item;
use std::io::{self, Write};
use std::path::PathBuf;
use write_behind::WriteBehind;

pub use self::mcap::{McapExport, McapSummary};
pub use crate::window::Window;
pub use pcapng::{first_content, PcapngExport, PcapngSummary};
pub use sigmf::{SigmfExport, SigmfSummary};
pub use split::{part_path, Part, Split, SplitExport};

/// What an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// PcapNg: an interface per stream, a packet per datagram, read or frame.
    Pcapng,
    /// SigMF: the samples of a byte stream, NAME.sigmf-data and NAME.sigmf-meta.
    Sigmf,
    /// MCAP: a channel per stream, a message per datagram, read, frame or chunk.
    Mcap,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Pcapng => "pcapng",
            Format::Sigmf => "sigmf",
            Format::Mcap => "mcap",
        }
    }
}

/// What a SigMF export writes where the stream has a hole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gaps {
    /// Nothing: the samples as kept; each hole starts a new capture segment.
    Skip,
    /// Zeros of the hole's length, so that every sample sits at its own index.
    Zero,
}

/// How an MCAP export compresses its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Zstd,
    Lz4,
    None,
}

/// Where an export goes: a file (a base name for SigMF's two), or a stream (stdout), which
/// only PcapNg can be written to.
pub enum Output {
    File(PathBuf),
    Stream(Box<dyn Write>),
}

/// How to export.
#[derive(Clone)]
pub struct ExportOptions {
    pub format: Format,
    pub window: Window,
    /// Only these streams (None: all). PcapNg and MCAP.
    pub streams: Option<Vec<u16>>,
    /// SigMF only; the others mark losses and fill nothing.
    pub gaps: Gaps,
    /// MCAP only.
    pub compression: Compression,
    /// PcapNg only: the packets this program keeps.
    pub filter: Option<BpfFilter>,
    /// PcapNg only: the packets of these flows (`--match`, `--flow`).
    pub flows: Option<FlowFilter>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(
        "recording {0} holds a byte stream, not datagrams or packets: `nvrec replay` gives it \
         back, and `--format sigmf` or `--format mcap` exports it"
    )]
    NotRecords(u32),
    #[error(
        "recording {0} holds datagrams or packets, not samples: export it with --format pcapng \
         or --format mcap"
    )]
    NotSamples(u32),
    #[error(
        "recording {0} does not say what its samples are: record it with --datatype and \
         --sample-rate to export it as SigMF"
    )]
    NoSignal(u32),
    #[error("--match and --flow cut a PcapNg export; --format {0} takes neither")]
    FlowsFormat(&'static str),
    #[error("--match and --flow find packets, and recording {0} holds a byte stream")]
    FlowsOnBytes(u32),
    #[error("--filter-bpf runs on packets, and recording {0} holds a byte stream")]
    FilterOnBytes(u32),
    #[error("--filter-bpf cuts a PcapNg export; --format {0} takes no filter")]
    FilterFormat(&'static str),
    #[error("--gaps zero fills a SigMF export's holes; --format {0} marks losses instead")]
    GapsFormat(&'static str),
    #[error("--compression is for MCAP; --format {0} is not compressed")]
    CompressionFormat(&'static str),
    #[error("--format {0} is written to files: give --output NAME, not -")]
    NeedsFile(&'static str),
    #[error("creating {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("writing the PcapNg export: {0}")]
    Pcap(#[from] pcap_file::PcapError),
    #[error("writing the MCAP export: {0}")]
    Mcap(#[from] ::mcap::McapError),
    #[error("a record in the recording is malformed: {0}")]
    Record(#[from] LayoutError),
}

impl ExportError {
    /// Whether the export was refused before anything was written: bad input, not a failure
    /// while exporting.
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            ExportError::Write { .. }
                | ExportError::Pcap(_)
                | ExportError::Mcap(_)
                | ExportError::Record(_)
        )
    }
}

/// What an export wrote, by format.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(untagged)]
pub enum Exported {
    Pcapng(PcapngSummary),
    Sigmf(SigmfSummary),
    Mcap(McapSummary),
}

/// A recording on its way out in one format.
pub struct Export {
    writer: Writer,
    /// The output as messages name it (`-` for stdout).
    output_path: PathBuf,
    window: Window,
    /// The recording's start: chunks are placed in the window by their time on its
    /// timeline ([`ChunkHeader::time_ns`]).
    start_ns: u64,
    /// Packets that span payloads, put back together.
    reassembly: Reassembly,
    /// What could not be exported as it is, each a sentence.
    problems: Vec<String>,
    failure: Option<ExportError>,
}

enum Writer {
    Pcapng(PcapngExport<Box<dyn Write>>),
    Sigmf(SigmfExport),
    Mcap(Box<McapExport>),
}

impl Export {
    /// Checks that `entry` can be exported with `options`, then creates the output. A
    /// refusal creates nothing; a file that cannot be created leaves none behind.
    pub fn create(
        entry: &RecordingEntry,
        options: ExportOptions,
        output: Output,
    ) -> Result<Export, ExportError> {
        check(entry, &options, &output)?;
        let output_path = match &output {
            Output::File(path) => path.clone(),
            Output::Stream(_) => PathBuf::from("-"),
        };
        let writer = match (options.format, output) {
            (Format::Pcapng, output) => {
                let out = match output {
                    Output::Stream(stream) => stream,
                    Output::File(path) => {
                        let file = create_file(&path)?;
                        Box::new(
                            WriteBehind::new(file)
                                .map_err(|source| ExportError::Create { path, source })?,
                        )
                    }
                };
                let mut export = PcapngExport::new(out, options.streams)?;
                if let Some(filter) = options.filter {
                    export = export.with_filter(filter);
                }
                if let Some(flows) = options.flows {
                    export = export.with_flows(flows);
                }
                Writer::Pcapng(export)
            }
            (Format::Sigmf, Output::File(base)) => {
                Writer::Sigmf(SigmfExport::create(&base, entry, options.gaps)?)
            }
            (Format::Mcap, Output::File(path)) => Writer::Mcap(Box::new(McapExport::create(
                &path,
                options.compression,
                options.streams,
            )?)),
            (format, Output::Stream(_)) => return Err(ExportError::NeedsFile(format.name())),
        };
        Ok(Export {
            writer,
            output_path,
            window: options.window,
            start_ns: entry.start_ns,
            reassembly: Reassembly::new(),
            problems: Vec::new(),
            failure: None,
        })
    }

    /// Whether no packet is half put together (one that spans chunks): a part of a split
    /// export may end here.
    pub fn between_packets(&self) -> bool {
        !self.reassembly.is_spanning()
    }

    /// Takes the reader's next item; false when the walk should end (past the window, or a
    /// write failed: [`Export::finish`] says so). Holes are the reader's to report; SigMF
    /// finds them in the stream offsets.
    pub fn item(&mut self, item: Item<'_>) -> bool {
        let Item::Chunk { header, payload } = item else {
            return true;
        };
        let past_window = self.window.is_past(header.time_ns(self.start_ns));
        if past_window && !self.reassembly.is_spanning() {
            return false;
        }
        // Past the window, a packet begun in it is still completed (the records past the
        // window are left out by their own times).
        match self.chunk(header, payload) {
            Ok(()) => !past_window,
            Err(error) => {
                self.failure = Some(error);
                false
            }
        }
    }

    fn chunk(&mut self, header: &ChunkHeader, payload: &[u8]) -> Result<(), ExportError> {
        let records = header.flags.contains(ChunkFlags::RECORDS);
        let window = self.window;
        let in_window = window.contains(header.time_ns(self.start_ns));
        match &mut self.writer {
            Writer::Pcapng(_) | Writer::Mcap(_) if records => {
                let walk = self.reassembly.payload(header.stream_offset_bytes, payload);
                for record in walk {
                    let record = record?;
                    if window.contains(record.timestamp_ns()) {
                        self.writer.record(&record)?;
                    }
                }
                Ok(())
            }
            Writer::Mcap(export) if in_window => export.bytes(header, payload),
            Writer::Sigmf(export) if !records && in_window => {
                export.chunk(header, payload, &mut self.problems)
            }
            Writer::Mcap(_) | Writer::Sigmf(_) if !records => Ok(()),
            _ => {
                self.problems.push(format!(
                    "chunk sequence {} holds {}, unlike the rest of the recording: left out",
                    header.sequence,
                    if records { "records" } else { "bytes" }
                ));
                Ok(())
            }
        }
    }

    /// Writes what comes last and flushes: what was written, and what could not be.
    pub fn finish(mut self) -> Result<(Exported, Vec<String>), ExportError> {
        if let Some(error) = self.failure {
            return Err(error);
        }
        if let Some(loss) = self.reassembly.finish() {
            if self.window.contains(loss.timestamp_ns) {
                self.writer.record(&Record::Loss(loss))?;
            }
        }
        let exported = match self.writer {
            Writer::Pcapng(export) => {
                let (mut out, summary) = export.finish()?;
                out.flush().map_err(|source| ExportError::Write {
                    path: self.output_path,
                    source,
                })?;
                Exported::Pcapng(summary)
            }
            Writer::Sigmf(export) => Exported::Sigmf(export.finish(&mut self.problems)?),
            Writer::Mcap(export) => Exported::Mcap(export.finish()?),
        };
        Ok((exported, self.problems))
    }
}

impl Writer {
    /// One record, to a format that takes records.
    fn record(&mut self, record: &Record<'_>) -> Result<(), ExportError> {
        match self {
            Writer::Pcapng(export) => export.record(record),
            Writer::Mcap(export) => export.record(record),
            // `check` refuses SigMF for a recording of records.
            Writer::Sigmf(_) => Ok(()),
        }
    }
}

/// The refusals: what the recording holds against what the format and options take.
fn check(
    entry: &RecordingEntry,
    options: &ExportOptions,
    output: &Output,
) -> Result<(), ExportError> {
    let id = entry.recording_id;
    let records = entry.flags.contains(RecordingFlags::RECORDS);
    let name = options.format.name();
    if options.filter.is_some() {
        if options.format != Format::Pcapng {
            return Err(ExportError::FilterFormat(name));
        }
        if !records {
            return Err(ExportError::FilterOnBytes(id));
        }
    }
    if options.flows.is_some() {
        if options.format != Format::Pcapng {
            return Err(ExportError::FlowsFormat(name));
        }
        if !records {
            return Err(ExportError::FlowsOnBytes(id));
        }
    }
    if options.gaps == Gaps::Zero && options.format != Format::Sigmf {
        return Err(ExportError::GapsFormat(name));
    }
    if options.compression != Compression::None && options.format != Format::Mcap {
        return Err(ExportError::CompressionFormat(name));
    }
    match options.format {
        Format::Pcapng if !records => return Err(ExportError::NotRecords(id)),
        Format::Sigmf if records => return Err(ExportError::NotSamples(id)),
        Format::Sigmf if entry.signal.is_none() => return Err(ExportError::NoSignal(id)),
        _ => {}
    }
    if options.format != Format::Pcapng && matches!(output, Output::Stream(_)) {
        return Err(ExportError::NeedsFile(name));
    }
    Ok(())
}

/// Creates (or truncates) an output file.
fn create_file(path: &std::path::Path) -> Result<std::fs::File, ExportError> {
    std::fs::File::create(path).map_err(|source| ExportError::Create {
        path: path.to_path_buf(),
        source,
    })
}
