//! `find`: the flows of a recording's window that a Community ID or an expression names,
//! with their times, packets, bytes and the chunks their packets lie in.
//!
//! This reads every chunk of the window through a [`ChunkSource`] (the drives or an
//! archive) and keys every packet: its answer is exact, and is what a flow index's answer
//! must equal. A hole in the window (missing or damaged chunks, records that do not decode,
//! a packet whose fragments never met) is named with the answer and fails it: a flow may
//! have had packets there. The losses the source recorded (a socket's or a capture ring's
//! drops) are named too; they are the traffic's, not the recording's.

use crate::chunks::ChunkSource;
use crate::outcome::{Class, UsageError};
use crate::verify::hole_text;
use anyhow::Result;
use nvrec::control::{Control, Progress};
use nvrec::engine::EngineChoice;
use nvrec::export::Window;
use nvrec::flow::{key_of_packet, FlowEntry, FlowQuery, FlowTable};
use nvrec::layout::{
    ChunkFlags, ChunkHeader, LossCause, Reassembly, Record, RecordingEntry, RecordingFlags,
};
use nvrec::recording::reader::{Item, ReadSummary};

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
}

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
    let mut scan = FlowScan::new(request, entry.start_ns);
    let window = (request.window.from_ns, request.window.to_ns);
    let summary = source.read_window(&entry, engine, window, control, progress, &mut |item| {
        scan.item(item)
    })?;
    scan.finish();
    Ok(FindReport {
        flows: scan
            .table
            .matching(&request.query)
            .into_iter()
            .cloned()
            .collect(),
        flows_in_window: scan.table.len(),
        packets_in_window: scan.table.packets(),
        entry,
        summary,
        holes: scan.holes,
        losses: scan.losses,
    })
}

/// The flows of the chunks read so far, with the packets put back together across
/// payloads.
struct FlowScan {
    table: FlowTable,
    reassembly: Reassembly,
    window: Window,
    start_ns: u64,
    /// The chunk where a packet spanning payloads began.
    spanning_from: Option<u64>,
    holes: Vec<String>,
    losses: Vec<String>,
}

impl FlowScan {
    fn new(request: &FindRequest, start_ns: u64) -> FlowScan {
        FlowScan {
            table: FlowTable::new(request.seed),
            reassembly: Reassembly::new(),
            window: request.window,
            start_ns,
            spanning_from: None,
            holes: Vec::new(),
            losses: Vec::new(),
        }
    }

    /// Takes one item of the read; returns whether to go on (not past the window, but to
    /// complete a packet begun in it).
    fn item(&mut self, item: Item<'_>) -> bool {
        let Item::Chunk { header, payload } = item else {
            self.holes.extend(hole_text(&item));
            return true;
        };
        let past_window = self
            .window
            .to_ns
            .is_some_and(|to| header.time_ns(self.start_ns) >= to);
        if past_window && !self.reassembly.is_spanning() {
            return false;
        }
        if header.flags.contains(ChunkFlags::RECORDS) {
            self.chunk(header, payload);
        }
        !past_window
    }

    /// Keys every packet of one chunk's records. A packet completed at the start of this
    /// payload (the walk's first record, after a payload that ended in a first fragment)
    /// lies in the chunks from where it began to this one.
    fn chunk(&mut self, header: &ChunkHeader, payload: &[u8]) {
        let sequence = header.sequence;
        let began = self
            .reassembly
            .is_spanning()
            .then_some(self.spanning_from)
            .flatten();
        let mut yielded = 0usize;
        let walk = self.reassembly.payload(header.stream_offset_bytes, payload);
        for record in walk {
            let joined = if yielded == 0 { began } else { None };
            yielded += 1;
            match record {
                Ok(Record::Packet(packet)) if self.window.contains(packet.timestamp_ns) => {
                    let chunks = (joined.unwrap_or(sequence), sequence);
                    let key = key_of_packet(&packet);
                    let (time, len) = (packet.timestamp_ns, packet.original_len);
                    self.table.add(key, time, len, chunks);
                }
                Ok(Record::Loss(loss)) if self.window.contains(loss.timestamp_ns) => {
                    let text = format!(
                        "{} packets ({} bytes) lost in stream {} by {}, in chunk {sequence}",
                        loss.count,
                        loss.bytes,
                        loss.stream,
                        loss.cause.name()
                    );
                    match loss.cause {
                        LossCause::Partial => self.holes.push(text),
                        _ => self.losses.push(text),
                    }
                }
                Ok(_) => {}
                Err(error) => self.holes.push(format!(
                    "chunk {sequence}: records that do not decode, the rest of its payload \
                     unread: {error}"
                )),
            }
        }
        // A payload that is all a middle fragment goes on with the packet begun before;
        // one that yielded records ended it, and a packet spanning on begins here.
        if self.reassembly.is_spanning() {
            self.spanning_from = match (yielded, began) {
                (0, Some(began)) => Some(began),
                _ => Some(sequence),
            };
        }
    }

    /// The end of the read: a packet whose rest never came is named.
    fn finish(&mut self) {
        if let Some(loss) = self.reassembly.finish() {
            if self.window.contains(loss.timestamp_ns) {
                self.holes.push(format!(
                    "a packet of stream {} ({} bytes) whose rest was never read",
                    loss.stream, loss.bytes
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvrec::flow::FlowExpr;
    use nvrec::layout::{frame_span, packet_header, Content, Packet, Part, Uuid};

    const PAYLOAD_BYTES: usize = 4096;

    /// An Ethernet frame of a UDP datagram from 10.0.0.1:`from` to 10.0.0.2:53 with `len`
    /// bytes of data.
    fn frame(from: u16, len: usize) -> Vec<u8> {
        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        frame.extend_from_slice(&[
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        frame.extend_from_slice(&from.to_be_bytes());
        frame.extend_from_slice(&[0, 53, 0, 0, 0, 0]);
        frame.resize(frame.len() + len, 7);
        frame
    }

    /// Payloads of at most `PAYLOAD_BYTES` holding `frames` back to back, a frame that does
    /// not fit spanning payloads as a source frames it.
    fn payloads(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut payloads = vec![Vec::new()];
        for (index, data) in frames.iter().enumerate() {
            let packet = Packet {
                stream: 0,
                content: Content::Ethernet,
                timestamp_ns: 1_000 + index as u64,
                original_len: data.len() as u32,
                data,
                peer: None,
                local: None,
                end: false,
            };
            let header = packet_header(&packet, data.len());
            let mut placed = 0;
            loop {
                let payload = payloads.last_mut().expect("one at least");
                let used = payload.len();
                payload.resize(PAYLOAD_BYTES, 0);
                let spanned = frame_span(&mut payload[used..], &header, data, placed);
                let end = used + spanned.map_or(0, |spanned| spanned.record_bytes);
                payload.truncate(end);
                match spanned {
                    Some(spanned) if matches!(spanned.part, Part::Whole | Part::Last) => break,
                    Some(spanned) => placed += spanned.data_bytes,
                    None => {}
                }
                payloads.push(Vec::new());
            }
        }
        payloads
    }

    fn header(sequence: u64, stream_offset_bytes: u64, payload: &[u8]) -> ChunkHeader {
        ChunkHeader {
            set_uuid: Uuid::from_random_bytes([1; 16]),
            recording_id: 1,
            member_index: 0,
            stream_id: 0,
            sequence,
            slot_index: sequence,
            timestamp_ns: 0,
            elapsed_ns: 0,
            stream_offset_bytes,
            gap_bytes: 0,
            payload_len_bytes: payload.len() as u32,
            flags: ChunkFlags::RECORDS,
        }
    }

    fn request() -> FindRequest {
        FindRequest {
            query: FlowQuery::Expr(FlowExpr::parse("udp").unwrap()),
            window: Window::default(),
            seed: 0,
        }
    }

    /// The chunk runs of the flow from port `from`.
    fn chunks_of(scan: &FlowScan, from: u16) -> Vec<(u64, u64)> {
        let query = FlowQuery::Expr(FlowExpr::parse(&format!("src port {from}")).unwrap());
        let found = scan.table.matching(&query);
        assert_eq!(found.len(), 1, "{found:?}");
        found[0].chunks.clone()
    }

    #[test]
    fn a_packet_that_spans_chunks_lies_in_each_of_them() {
        // 100 bytes; 10,000 over three payloads (first, middle, last); 100 after it.
        let frames = [frame(1000, 100), frame(2000, 10_000), frame(3000, 100)];
        let payloads = payloads(&frames);
        assert_eq!(payloads.len(), 3);
        let mut scan = FlowScan::new(&request(), 0);
        let mut offset = 0;
        for (index, payload) in payloads.iter().enumerate() {
            let header = header(10 + index as u64, offset, payload);
            offset += payload.len() as u64;
            assert!(scan.item(Item::Chunk {
                header: &header,
                payload
            }));
        }
        scan.finish();
        assert!(scan.holes.is_empty(), "{:?}", scan.holes);
        assert_eq!(chunks_of(&scan, 1000), [(10, 1)]);
        assert_eq!(chunks_of(&scan, 2000), [(10, 3)]);
        assert_eq!(chunks_of(&scan, 3000), [(12, 1)]);
        assert_eq!(scan.table.packets(), 3);
    }

    #[test]
    fn a_missing_chunk_under_a_spanning_packet_is_a_hole_in_the_answer() {
        let frames = [frame(1000, 100), frame(2000, 10_000), frame(3000, 100)];
        let payloads = payloads(&frames);
        let mut scan = FlowScan::new(&request(), 0);
        let first = header(10, 0, &payloads[0]);
        scan.item(Item::Chunk {
            header: &first,
            payload: &payloads[0],
        });
        scan.item(Item::Missing {
            first_sequence: 11,
            count: 1,
        });
        let offset = (payloads[0].len() + payloads[1].len()) as u64;
        let last = header(12, offset, &payloads[2]);
        scan.item(Item::Chunk {
            header: &last,
            payload: &payloads[2],
        });
        scan.finish();
        // The chunk missing, and the packet it cut: each named.
        assert_eq!(scan.holes.len(), 2, "{:?}", scan.holes);
        assert!(scan.holes[0].contains("missing"), "{:?}", scan.holes);
        assert_eq!(chunks_of(&scan, 1000), [(10, 1)]);
        assert_eq!(chunks_of(&scan, 3000), [(12, 1)]);
        assert_eq!(scan.table.packets(), 2);
    }
}
