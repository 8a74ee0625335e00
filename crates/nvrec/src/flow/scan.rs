//! The flows of a read: every packet of the chunks handed in, put back together where it
//! spans payloads, keyed into a [`FlowTable`] with the chunks it lies in; the reader's holes
//! are handed in as text. `find` scans a
//! window with it (its answer, exact, is what an index must equal); the archive scans
//! each segment's chunks with it and stores the table beside the segment.
//!
//! What the scan could not key is named, never skipped: a hole in the read (chunks missing
//! or damaged), records that do not decode, a packet whose fragments never met. The
//! losses the source recorded (a socket's or a capture ring's drops) are named apart: they
//! are the traffic's, not the recording's.

use super::key::{key_of_frame, key_of_packet, KEY_BYTES_MAX};
use super::table::FlowTable;
use crate::layout::{
    skip_index_records, whole_frame, ChunkFlags, ChunkHeader, LossCause, Reassembly, Record,
};
use crate::window::Window;

/// The flows of the chunks read so far, with the packets put back together across
/// payloads. A clone goes on from where this one stands (an archive's next pass starts
/// from the scan as it stood at the last segment sent).
#[derive(Debug, Clone)]
pub struct FlowScan {
    table: FlowTable,
    reassembly: Reassembly,
    window: Window,
    /// The recording's start, where its chunks' times are counted from.
    start_ns: u64,
    /// The chunk where a packet spanning payloads began.
    spanning_from: Option<u64>,
    holes: Vec<String>,
    losses: Vec<String>,
    /// When each of `losses` happened (ns since the Unix epoch).
    loss_times_ns: Vec<u64>,
    /// Only the chunks an index names are read: a packet cut at the edge of a run of them
    /// is another flow's (each of the flows asked for lies whole in its runs).
    runs_only: bool,
}

impl FlowScan {
    /// A scan of the packets received in `window` of a recording that began at `start_ns`
    /// (its entry's), whose Community IDs take `seed`.
    pub fn new(seed: u16, window: Window, start_ns: u64) -> FlowScan {
        FlowScan {
            table: FlowTable::new(seed),
            // Only a packet's key is wanted of it: of one that spans payloads, no more is
            // copied than the key reads.
            reassembly: Reassembly::keeping(KEY_BYTES_MAX),
            window,
            start_ns,
            spanning_from: None,
            holes: Vec::new(),
            losses: Vec::new(),
            loss_times_ns: Vec::new(),
            runs_only: false,
        }
    }

    /// The scan of a read of only the runs of chunks an index names for some flows: the
    /// packets cut at the runs' edges are not named as holes (they are other flows').
    pub fn of_runs(self) -> FlowScan {
        FlowScan {
            runs_only: true,
            ..self
        }
    }

    /// Takes the next chunk of a read; returns whether to go on (not past the window, but
    /// to complete a packet begun in it).
    pub fn chunk(&mut self, header: &ChunkHeader, payload: &[u8]) -> bool {
        let past_window = self.window.is_past(header.time_ns(self.start_ns));
        if past_window && !self.reassembly.is_spanning() {
            return false;
        }
        if header.flags.contains(ChunkFlags::RECORDS) {
            self.records(header.sequence, header.stream_offset_bytes, payload);
        }
        !past_window
    }

    /// Takes the next chunk of a recording being written: chunk `sequence` of records whose
    /// payload starts at `stream_offset_bytes` of the stream (the recorder's index keys its
    /// chunks as it fills them, before they have a header).
    pub fn records_at(&mut self, sequence: u64, stream_offset_bytes: u64, payload: &[u8]) {
        self.records(sequence, stream_offset_bytes, payload);
    }

    /// Names a hole in the read (chunks missing or damaged): a flow may have had packets
    /// there.
    pub fn hole(&mut self, text: String) {
        self.holes.push(text);
    }

    /// Keys every packet of one chunk's records. A packet completed at the start of this
    /// payload (the walk's first record, after a payload that ended in a first fragment)
    /// lies in the chunks from where it began to this one.
    fn records(&mut self, sequence: u64, stream_offset_bytes: u64, payload: &[u8]) {
        // Whole captured frames, while no packet spans into this payload, are keyed straight
        // from their records (every frame a recorder indexes passes here); the rest of the
        // payload, from the first record that is anything else, goes through the reassembly.
        let mut at = 0;
        if !self.reassembly.is_spanning() {
            at = payload.len() - skip_index_records(payload).len();
            while let Some((frame, len)) = whole_frame(&payload[at..]) {
                if self.window.contains(frame.timestamp_ns) {
                    let key = key_of_frame(frame.data);
                    let chunks = (sequence, sequence);
                    (self.table).add(key, frame.timestamp_ns, frame.original_len, chunks);
                }
                at += len;
            }
            if at == payload.len() {
                return;
            }
        }
        self.reassembled(sequence, stream_offset_bytes + at as u64, &payload[at..]);
    }

    /// Keys the records of `payload` (a payload, or the rest of one from a record on)
    /// through the reassembly.
    fn reassembled(&mut self, sequence: u64, stream_offset_bytes: u64, payload: &[u8]) {
        let began = self
            .reassembly
            .is_spanning()
            .then_some(self.spanning_from)
            .flatten();
        let mut yielded = 0usize;
        let walk = self.reassembly.payload(stream_offset_bytes, payload);
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
                        LossCause::Partial if self.runs_only => {}
                        LossCause::Partial => self.holes.push(text),
                        _ => {
                            self.losses.push(text);
                            self.loss_times_ns.push(loss.timestamp_ns);
                        }
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

    /// The read ends with chunks read whole (not a run cut from others): a packet whose
    /// rest never came is named at its end, as a whole read names it.
    pub fn ends_whole(&mut self) {
        self.runs_only = false;
    }

    /// The end of the read: a packet whose rest never came is named.
    pub fn finish(&mut self) {
        if let Some(loss) = self.reassembly.finish() {
            if self.window.contains(loss.timestamp_ns) && !self.runs_only {
                self.holes.push(format!(
                    "a packet of stream {} ({} bytes) whose rest was never read",
                    loss.stream, loss.bytes
                ));
            }
        }
    }

    /// The flows so far.
    pub fn table(&self) -> &FlowTable {
        &self.table
    }

    /// The flows so far, and the holes named with them; the scan goes on with none (a
    /// packet spanning on is keyed with the flows taken next). The source's losses named
    /// so far are dropped.
    pub fn take(&mut self) -> (FlowTable, Vec<String>) {
        let seed = self.table.seed();
        let table = std::mem::replace(&mut self.table, FlowTable::new(seed));
        self.losses.clear();
        self.loss_times_ns.clear();
        (table, std::mem::take(&mut self.holes))
    }

    /// As [`FlowScan::take`], with the source's losses named so far and when each was.
    pub fn take_with_losses(&mut self) -> (FlowTable, Vec<String>, Vec<(u64, String)>) {
        let times = std::mem::take(&mut self.loss_times_ns);
        let losses = times.into_iter().zip(std::mem::take(&mut self.losses));
        let losses = losses.collect();
        let (table, holes) = self.take();
        (table, holes, losses)
    }

    /// What could not be keyed: holes in the read, records that do not decode, packets cut.
    pub fn holes(&self) -> &[String] {
        &self.holes
    }

    /// The losses the source recorded.
    pub fn losses(&self) -> &[String] {
        &self.losses
    }

    /// The flows, the holes and the source's losses.
    pub fn into_parts(self) -> (FlowTable, Vec<String>, Vec<String>) {
        (self.table, self.holes, self.losses)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{FlowExpr, FlowQuery};
    use super::*;
    use crate::layout::{frame_span, packet_header, Content, Packet, Part, Uuid};

    const PAYLOAD_BYTES: usize = 4096;

    /// An Ethernet frame of a UDP datagram from 10.0.0.1:`from` to 10.0.0.2:53 with `len`
    /// bytes of data (the flow tests' frame: `flow::index`'s tests build theirs with it).
    pub(in crate::flow) fn frame(from: u16, len: usize) -> Vec<u8> {
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

    fn new_scan() -> FlowScan {
        FlowScan::new(0, Window::default(), 0)
    }

    /// The chunk runs of the flow from port `from`.
    fn chunks_of(table: &FlowTable, from: u16) -> Vec<(u64, u64)> {
        let query = FlowQuery::Expr(FlowExpr::parse(&format!("src port {from}")).unwrap());
        let found = table.matching(&query);
        assert_eq!(found.len(), 1, "{found:?}");
        found[0].chunks.clone()
    }

    /// Hands `payloads` to `scan` as chunks from sequence 10 on, one stream.
    fn read(scan: &mut FlowScan, payloads: &[Vec<u8>]) {
        let mut offset = 0;
        for (index, payload) in payloads.iter().enumerate() {
            let header = header(10 + index as u64, offset, payload);
            offset += payload.len() as u64;
            assert!(scan.chunk(&header, payload));
        }
    }

    #[test]
    fn a_packet_that_spans_chunks_lies_in_each_of_them() {
        // 100 bytes; 10,000 over three payloads (first, middle, last); 100 after it.
        let frames = [frame(1000, 100), frame(2000, 10_000), frame(3000, 100)];
        let payloads = payloads(&frames);
        assert_eq!(payloads.len(), 3);
        let mut scan = new_scan();
        read(&mut scan, &payloads);
        scan.finish();
        assert!(scan.holes().is_empty(), "{:?}", scan.holes());
        assert_eq!(chunks_of(scan.table(), 1000), [(10, 1)]);
        assert_eq!(chunks_of(scan.table(), 2000), [(10, 3)]);
        assert_eq!(chunks_of(scan.table(), 3000), [(12, 1)]);
        assert_eq!(scan.table().packets(), 3);
    }

    #[test]
    fn a_packet_spanning_a_cut_is_keyed_with_the_flows_taken_after_it() {
        let frames = [frame(1000, 100), frame(2000, 10_000), frame(3000, 100)];
        let payloads = payloads(&frames);
        let mut scan = new_scan();
        read(&mut scan, &payloads[..1]);
        let (first, holes) = scan.take();
        assert!(holes.is_empty());
        assert_eq!(first.packets(), 1);
        assert_eq!(chunks_of(&first, 1000), [(10, 1)]);
        let header = |index: usize| {
            let offset = payloads[..index].iter().map(|p| p.len() as u64).sum();
            header(10 + index as u64, offset, &payloads[index])
        };
        for (index, payload) in payloads.iter().enumerate().skip(1) {
            scan.chunk(&header(index), payload);
        }
        scan.finish();
        let (second, holes) = scan.take();
        assert!(holes.is_empty(), "{holes:?}");
        assert_eq!(second.packets(), 2);
        assert_eq!(
            chunks_of(&second, 2000),
            [(10, 3)],
            "from the chunk it began in"
        );
        assert_eq!(chunks_of(&second, 3000), [(12, 1)]);
    }

    #[test]
    fn a_missing_chunk_under_a_spanning_packet_is_a_hole_in_the_answer() {
        let frames = [frame(1000, 100), frame(2000, 10_000), frame(3000, 100)];
        let payloads = payloads(&frames);
        let mut scan = new_scan();
        scan.chunk(&header(10, 0, &payloads[0]), &payloads[0]);
        scan.hole("1 chunks missing from sequence 11".into());
        let offset = (payloads[0].len() + payloads[1].len()) as u64;
        scan.chunk(&header(12, offset, &payloads[2]), &payloads[2]);
        scan.finish();
        // The chunk missing, and the packet it cut: each named.
        assert_eq!(scan.holes().len(), 2, "{:?}", scan.holes());
        assert!(scan.holes()[0].contains("missing"), "{:?}", scan.holes());
        assert_eq!(chunks_of(scan.table(), 1000), [(10, 1)]);
        assert_eq!(chunks_of(scan.table(), 3000), [(12, 1)]);
        assert_eq!(scan.table().packets(), 2);
    }

    #[test]
    fn a_read_of_runs_passes_over_the_packets_cut_at_their_edges() {
        let frames = [frame(1000, 100), frame(2000, 10_000), frame(3000, 100)];
        let payloads = payloads(&frames);
        // The run of the flow from port 3000 (chunk 12), then the one from 1000 (chunk 10)
        // would be read in order; here chunk 12 alone: the tail of 2000's packet is cut.
        let mut scan = new_scan().of_runs();
        let offset = (payloads[0].len() + payloads[1].len()) as u64;
        scan.chunk(&header(12, offset, &payloads[2]), &payloads[2]);
        // And chunk 10 alone: the head of 2000's packet never completes.
        let mut alone = new_scan().of_runs();
        alone.chunk(&header(10, 0, &payloads[0]), &payloads[0]);
        alone.finish();
        scan.finish();
        assert!(scan.holes().is_empty(), "{:?}", scan.holes());
        assert!(alone.holes().is_empty(), "{:?}", alone.holes());
        assert_eq!(chunks_of(scan.table(), 3000), [(12, 1)]);
        assert_eq!(chunks_of(alone.table(), 1000), [(10, 1)]);
        // A hole in the read is still one.
        alone.hole("1 chunks missing from sequence 11".into());
        assert_eq!(alone.holes().len(), 1);
    }

    #[test]
    fn a_read_that_starts_inside_a_packet_names_the_part_it_lacks() {
        let frames = [frame(1000, 100), frame(2000, 10_000), frame(3000, 100)];
        let payloads = payloads(&frames);
        let mut scan = new_scan();
        let offset = (payloads[0].len() + payloads[1].len()) as u64;
        scan.chunk(&header(12, offset, &payloads[2]), &payloads[2]);
        scan.finish();
        assert_eq!(scan.holes().len(), 1, "{:?}", scan.holes());
        assert_eq!(chunks_of(scan.table(), 3000), [(12, 1)]);
        assert_eq!(scan.table().packets(), 1);
    }
}
