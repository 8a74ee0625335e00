//! A recording exported as MCAP, the log format of robotics tools: a channel per stream of
//! the recording (topic `stream N`, no schema), and a message per datagram, TCP read or
//! captured frame, logged and published at its receive time; a byte stream's chunks are its
//! messages, at the time their first byte arrived. A channel's message encoding says what its
//! messages hold: `nvrec.udp` (a datagram's payload), `nvrec.tcp` (bytes of a connection, as
//! one read took them), `nvrec.ethernet` (a frame as captured), `nvrec.bytes` (a stretch of a
//! byte stream); its metadata gives the stream's number, what it holds and, for network
//! streams, the address it was received on. Each message's sequence is its number on its
//! channel, from 0.
//!
//! Losses are metadata records named `loss`: for records, each loss record of the recording
//! (stream, time, cause, count, bytes); for a byte stream, each hole in its offsets (the
//! recorder's gap, and chunks missing or damaged), with where it starts in the stream.
//!
//! The `mcap` crate writes the file in chunks of about 1 MiB, compressed (zstd, lz4) or not,
//! with message and chunk indexes and a summary, so that readers seek by time and channel.

use super::write_behind::WriteBehind;
use super::{create_file, Compression, ExportError};
use crate::layout::{ChunkHeader, Content, Loss, LossCause, Packet, Record};
use mcap::records::{MessageHeader, Metadata};
use mcap::write::NoSeek;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Uncompressed bytes of messages per MCAP chunk.
const MCAP_CHUNK_BYTES: u64 = 1 << 20;

/// What an MCAP export wrote.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct McapSummary {
    pub path: PathBuf,
    pub bytes: u64,
    pub messages: u64,
    pub channels: u64,
    /// Loss metadata records written.
    pub losses: u64,
    pub compression: &'static str,
}

/// What one channel's messages are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holds {
    Datagrams,
    TcpBytes,
    Frames,
    StreamBytes,
}

impl Holds {
    fn encoding(self) -> &'static str {
        match self {
            Holds::Datagrams => "nvrec.udp",
            Holds::TcpBytes => "nvrec.tcp",
            Holds::Frames => "nvrec.ethernet",
            Holds::StreamBytes => "nvrec.bytes",
        }
    }
}

impl From<Content> for Holds {
    fn from(content: Content) -> Holds {
        match content {
            Content::Udp => Holds::Datagrams,
            Content::Tcp => Holds::TcpBytes,
            Content::Ethernet => Holds::Frames,
        }
    }
}

/// A stream's channel, once its first message declared it.
#[derive(Debug, Clone, Copy)]
struct Channel {
    id: u16,
    next_sequence: u32,
}

/// A recording on its way into an MCAP file.
pub struct McapExport {
    /// Writes each chunk whole (it never seeks back), to a file written by a thread of its own.
    writer: mcap::Writer<NoSeek<WriteBehind>>,
    /// Each stream's channel (index: stream number).
    channels: Vec<Option<Channel>>,
    /// A byte stream's next offset, per stream: what follows a hole.
    next_offsets: Vec<Option<u64>>,
    streams: Option<Vec<u16>>,
    summary: McapSummary,
}

impl McapExport {
    /// Creates the file and writes MCAP's header.
    pub fn create(
        path: &Path,
        compression: Compression,
        streams: Option<Vec<u16>>,
    ) -> Result<McapExport, ExportError> {
        let file = WriteBehind::new(create_file(path)?).map_err(|source| ExportError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        let (compression, name) = match compression {
            Compression::Zstd => (Some(mcap::Compression::Zstd), "zstd"),
            Compression::Lz4 => (Some(mcap::Compression::Lz4), "lz4"),
            Compression::None => (None, "none"),
        };
        let writer = mcap::WriteOptions::new()
            .compression(compression)
            .chunk_size(Some(MCAP_CHUNK_BYTES))
            .library(format!("nvrec {}", env!("CARGO_PKG_VERSION")))
            .disable_seeking(true)
            // Each chunk keeps its CRC; one more over the whole data section would cost a
            // second pass over every byte for what the chunks' CRCs already check.
            .calculate_data_section_crc(false)
            .create(NoSeek::new(file))?;
        Ok(McapExport {
            writer,
            channels: Vec::new(),
            next_offsets: Vec::new(),
            streams,
            summary: McapSummary {
                path: path.to_path_buf(),
                compression: name,
                ..McapSummary::default()
            },
        })
    }

    fn wanted(&self, stream: u16) -> bool {
        self.streams
            .as_ref()
            .is_none_or(|streams| streams.contains(&stream))
    }

    /// Exports one record (a packet whole, put back together where it spanned payloads:
    /// `layout::Reassembly`).
    pub fn record(&mut self, record: &Record<'_>) -> Result<(), ExportError> {
        match record {
            Record::Packet(packet) => self.packet(packet),
            Record::Loss(loss) => self.loss(loss),
        }
    }

    fn packet(&mut self, packet: &Packet<'_>) -> Result<(), ExportError> {
        if !self.wanted(packet.stream) {
            return Ok(());
        }
        let local = packet.local.map(|address| address.to_string());
        let channel = self.channel(packet.stream, packet.content.into(), local)?;
        self.message(channel, packet.stream, packet.timestamp_ns, packet.data)
    }

    fn loss(&mut self, loss: &Loss) -> Result<(), ExportError> {
        if !self.wanted(loss.stream) {
            return Ok(());
        }
        let cause = match loss.cause {
            LossCause::SocketOverflow => "socket buffer full",
            LossCause::CaptureDrop => "dropped before the capture ring",
            LossCause::RecorderOverrun => "recorder had no buffer",
            LossCause::Partial => "only part of a packet read (the rest of it is missing)",
        };
        self.metadata(
            loss.stream,
            loss.timestamp_ns,
            cause,
            [("count", loss.count), ("bytes", loss.bytes)],
        )
    }

    /// Exports one chunk of a byte stream: a loss for the hole before it, if any, then its
    /// payload as a message.
    pub fn bytes(&mut self, header: &ChunkHeader, payload: &[u8]) -> Result<(), ExportError> {
        let stream = header.stream_id;
        if !self.wanted(stream) {
            return Ok(());
        }
        let index = usize::from(stream);
        if self.next_offsets.len() <= index {
            self.next_offsets.resize(index + 1, None);
        }
        let offset = header.stream_offset_bytes;
        let expected = self.next_offsets[index].unwrap_or(offset - header.gap_bytes);
        if offset > expected {
            let hole_bytes = offset - expected;
            let recorder_bytes = header.gap_bytes.min(hole_bytes);
            let cause = match (recorder_bytes, hole_bytes - recorder_bytes) {
                (_, 0) => "recorder had no buffer",
                (0, _) => "chunks missing or damaged",
                _ => "recorder had no buffer; chunks missing or damaged",
            };
            self.metadata(
                stream,
                header.timestamp_ns,
                cause,
                [
                    ("stream_offset_bytes", expected),
                    ("lost_bytes", hole_bytes),
                    ("recorder_lost_bytes", recorder_bytes),
                    ("missing_bytes", hole_bytes - recorder_bytes),
                ],
            )?;
        }
        self.next_offsets[index] = Some(offset.max(expected) + payload.len() as u64);
        if payload.is_empty() {
            return Ok(()); // An end marker.
        }
        let channel = self.channel(stream, Holds::StreamBytes, None)?;
        self.message(channel, stream, header.timestamp_ns, payload)
    }

    /// The channel of `stream`, declared at its first message.
    fn channel(
        &mut self,
        stream: u16,
        holds: Holds,
        local: Option<String>,
    ) -> Result<Channel, ExportError> {
        let index = usize::from(stream);
        if self.channels.len() <= index {
            self.channels.resize(index + 1, None);
        }
        if let Some(channel) = self.channels[index] {
            return Ok(channel);
        }
        let mut metadata = BTreeMap::from([
            ("stream".to_string(), stream.to_string()),
            (
                "content".to_string(),
                holds.encoding()["nvrec.".len()..].to_string(),
            ),
        ]);
        if let Some(local) = local {
            metadata.insert("local_address".into(), local);
        }
        let id =
            self.writer
                .add_channel(0, &format!("stream {stream}"), holds.encoding(), &metadata)?;
        let channel = Channel {
            id,
            next_sequence: 0,
        };
        self.channels[index] = Some(channel);
        self.summary.channels += 1;
        Ok(channel)
    }

    fn message(
        &mut self,
        channel: Channel,
        stream: u16,
        timestamp_ns: u64,
        data: &[u8],
    ) -> Result<(), ExportError> {
        self.writer.write_to_known_channel(
            &MessageHeader {
                channel_id: channel.id,
                sequence: channel.next_sequence,
                log_time: timestamp_ns,
                publish_time: timestamp_ns,
            },
            data,
        )?;
        if let Some(Some(kept)) = self.channels.get_mut(usize::from(stream)) {
            kept.next_sequence = kept.next_sequence.wrapping_add(1);
        }
        self.summary.messages += 1;
        Ok(())
    }

    /// A `loss` metadata record.
    fn metadata<const N: usize>(
        &mut self,
        stream: u16,
        timestamp_ns: u64,
        cause: &str,
        numbers: [(&str, u64); N],
    ) -> Result<(), ExportError> {
        let mut metadata = BTreeMap::from([
            ("stream".to_string(), stream.to_string()),
            ("timestamp_ns".to_string(), timestamp_ns.to_string()),
            ("cause".to_string(), cause.to_string()),
        ]);
        for (key, value) in numbers {
            metadata.insert(key.to_string(), value.to_string());
        }
        self.writer.write_metadata(&Metadata {
            name: "loss".into(),
            metadata,
        })?;
        self.summary.losses += 1;
        Ok(())
    }

    /// Writes the last chunk, the indexes and the summary, and flushes the file.
    pub fn finish(mut self) -> Result<McapSummary, ExportError> {
        self.writer.finish()?;
        let path = self.summary.path.clone();
        let failed = |source| ExportError::Write {
            path: path.clone(),
            source,
        };
        let file = self
            .writer
            .into_inner()
            .into_inner()
            .finish()
            .map_err(failed)?;
        self.summary.bytes = file.metadata().map_err(failed)?.len();
        Ok(self.summary)
    }
}
