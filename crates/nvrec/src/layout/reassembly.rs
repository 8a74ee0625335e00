//! Packets that span payloads put back together (format 1.4, `docs/FORMAT.md` section 6.3).
//!
//! A reader hands every payload of records to one [`Reassembly`], in stream order, with the
//! payload's `stream_offset_bytes`; it gets the payload's records back whole: a packet whose
//! first fragment ended the previous payload comes first, joined, and the first fragment at
//! the end of this payload is kept for the next. Whatever cannot be joined is a loss with
//! cause [`LossCause::Partial`], the packet's `original_len` as its bytes, never dropped in
//! silence: a head whose next payload is not contiguous (a missing or damaged chunk, the end
//! of a crashed recording: [`Reassembly::finish`]) or does not start with its continuation,
//! and a continuation with no head (a ring that overwrote it, a read that started after it).
//!
//! Deliberately absent: any I/O, and any allocation beyond one packet's data (bounded by
//! [`SPAN_DATA_MAX_BYTES`]).

use super::error::{LayoutError, Structure};
use super::records::{
    decode_record, skip_index_records, Content, Loss, LossCause, Packet, Part, Piece, Record,
};
use std::net::SocketAddr;

/// The most data a packet put back together holds; a longer one is a loss (`Partial`). The
/// largest a source frames is a capture's snap length or a TCP read, far below.
pub const SPAN_DATA_MAX_BYTES: usize = 64 << 20;

/// A packet whose fragments have begun: its header's fields, and whether it is already
/// counted lost (then its data is not kept, and its later fragments are passed over).
#[derive(Debug, Clone, Copy)]
struct Head {
    stream: u16,
    content: Content,
    timestamp_ns: u64,
    original_len: u32,
    peer: Option<SocketAddr>,
    local: Option<SocketAddr>,
    end: bool,
    lost: bool,
}

impl Head {
    fn of(packet: &Packet<'_>) -> Head {
        Head {
            stream: packet.stream,
            content: packet.content,
            timestamp_ns: packet.timestamp_ns,
            original_len: packet.original_len,
            peer: packet.peer,
            local: packet.local,
            end: packet.end,
            lost: false,
        }
    }

    /// Whether `packet` is a fragment of this packet.
    fn matches(&self, packet: &Packet<'_>) -> bool {
        self.stream == packet.stream
            && self.timestamp_ns == packet.timestamp_ns
            && self.original_len == packet.original_len
            && self.content == packet.content
    }

    fn loss(&self) -> Loss {
        Loss {
            stream: self.stream,
            timestamp_ns: self.timestamp_ns,
            cause: LossCause::Partial,
            count: 1,
            bytes: self.original_len as u64,
        }
    }
}

/// A spanning packet's data so far: all of it, or its first `keep` bytes (the rest counted).
#[derive(Debug, Clone)]
struct Held {
    bytes: Vec<u8>,
    seen: usize,
    keep: usize,
}

impl Default for Held {
    fn default() -> Held {
        Held {
            bytes: Vec::new(),
            seen: 0,
            keep: usize::MAX,
        }
    }
}

impl Held {
    fn clear(&mut self) {
        self.bytes.clear();
        self.seen = 0;
    }

    fn extend(&mut self, data: &[u8]) {
        let room = self.keep.saturating_sub(self.bytes.len());
        self.bytes.extend_from_slice(&data[..data.len().min(room)]);
        self.seen += data.len();
    }
}

/// Puts the packets of a recording's payloads back together; one per read of a recording.
#[derive(Debug, Clone, Default)]
pub struct Reassembly {
    head: Option<Head>,
    /// The head's data so far.
    data: Held,
    /// The packet the current payload completed.
    joined: Vec<u8>,
    /// Where the next payload is contiguous with the last one.
    next_offset_bytes: Option<u64>,
}

/// What comes before a payload's own records: up to a lost head and the packet completed
/// (or a lost continuation).
type Front<'a> = [Option<Record<'a>>; 2];

impl Reassembly {
    pub fn new() -> Reassembly {
        Reassembly::default()
    }

    /// A reassembly that keeps at most the first `bytes` of a packet that spans payloads
    /// and counts the rest: for a reader that needs a packet's headers, not all its data
    /// (a flow's key). What is a loss is as for [`Reassembly::new`].
    pub fn keeping(bytes: usize) -> Reassembly {
        let mut reassembly = Reassembly::default();
        reassembly.data.keep = bytes;
        reassembly
    }

    /// Whether a packet's first fragment waits for the next payload.
    pub fn is_spanning(&self) -> bool {
        self.head.is_some_and(|head| !head.lost)
    }

    /// The whole records of the next payload, which starts at `stream_offset_bytes` of the
    /// stream: see the module's documentation. The walk must be run to its end for the
    /// payload's last fragment to be kept.
    pub fn payload<'a>(&'a mut self, stream_offset_bytes: u64, payload: &'a [u8]) -> Walk<'a> {
        let contiguous = self.next_offset_bytes == Some(stream_offset_bytes);
        self.next_offset_bytes = Some(stream_offset_bytes.saturating_add(payload.len() as u64));
        let payload = skip_index_records(payload);
        let mut lost = [None, None];
        if !contiguous {
            lost[0] = self.lose_head();
        }
        let (rest, completed, after_middle) = match decode_record(payload) {
            Ok((piece, len)) if piece.part.is_continuation() => {
                let (loss, completed) = self.continuation(&piece);
                lost[0] = lost[0].or(loss.0);
                lost[1] = loss.1;
                (&payload[len..], completed, piece.part == Part::Middle)
            }
            _ => {
                // Not a continuation (or not decodable: the walk reports it).
                lost[0] = lost[0].or(self.head.take().and_then(|head| lost_once(&head)));
                (payload, false, false)
            }
        };
        let Reassembly {
            head, data, joined, ..
        } = self;
        let mut front: Front<'a> = [lost[0].map(Record::Loss), lost[1].map(Record::Loss)];
        if completed {
            let done = joined_head(head, data, joined);
            front[1] = Some(Record::Packet(Packet {
                data: joined,
                ..done
            }));
        }
        Walk {
            front,
            rest,
            after_middle,
            head,
            data,
        }
    }

    /// At the end of a read: the packet whose rest never came, if any.
    pub fn finish(&mut self) -> Option<Loss> {
        self.next_offset_bytes = None;
        self.head.take().and_then(|head| lost_once(&head))
    }

    /// The head, counted lost (once) and kept as lost, so that its later fragments are
    /// passed over.
    fn lose_head(&mut self) -> Option<Loss> {
        let head = self.head.as_mut()?;
        let loss = lost_once(head);
        head.lost = true;
        self.data.clear();
        loss
    }

    /// Takes the fragment that starts a payload: (losses, whether it completed the head).
    fn continuation(&mut self, piece: &Piece<'_>) -> ((Option<Loss>, Option<Loss>), bool) {
        let Record::Packet(fragment) = piece.record else {
            unreachable!("only packets are fragments")
        };
        let mut losses = (None, None);
        match self.head {
            Some(head) if head.matches(&fragment) => {}
            _ => {
                // No head, or another packet's: that one is lost, and so is this one.
                losses.0 = self.head.take().and_then(|head| lost_once(&head));
                let mut orphan = Head::of(&fragment);
                losses.1 = Some(orphan.loss());
                orphan.lost = true;
                self.head = piece.part.continues().then_some(orphan);
                self.data.clear();
                return (losses, false);
            }
        }
        let head = self.head.as_mut().expect("matched above");
        if !head.lost && self.data.seen + fragment.data.len() > SPAN_DATA_MAX_BYTES {
            losses.1 = lost_once(head);
            head.lost = true;
            self.data.clear();
        }
        if !head.lost {
            self.data.extend(fragment.data);
        }
        if piece.part.continues() {
            return (losses, false);
        }
        let completed = !head.lost;
        if !completed {
            self.head = None;
        }
        (losses, completed)
    }
}

/// The head's loss, unless it was counted already.
fn lost_once(head: &Head) -> Option<Loss> {
    (!head.lost).then(|| head.loss())
}

/// Moves the completed head's data to `joined`; the packet's fields, with no data yet.
fn joined_head(head: &mut Option<Head>, data: &mut Held, joined: &mut Vec<u8>) -> Packet<'static> {
    let done = head.take().expect("a completed head");
    std::mem::swap(&mut data.bytes, joined);
    data.clear();
    Packet {
        stream: done.stream,
        content: done.content,
        timestamp_ns: done.timestamp_ns,
        original_len: done.original_len,
        data: &[],
        peer: done.peer,
        local: done.local,
        end: done.end,
    }
}

/// The whole records of one payload, from [`Reassembly::payload`].
pub struct Walk<'a> {
    front: Front<'a>,
    rest: &'a [u8],
    /// The payload started with a middle fragment, which must fill it.
    after_middle: bool,
    head: &'a mut Option<Head>,
    data: &'a mut Held,
}

impl<'a> Iterator for Walk<'a> {
    type Item = Result<Record<'a>, LayoutError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(record) = self.front.iter_mut().find_map(Option::take) {
            return Some(Ok(record));
        }
        if self.rest.is_empty() {
            return None;
        }
        if self.after_middle {
            // A middle fragment must fill its payload; the head is counted at the next one.
            self.rest = &[];
            return Some(Err(LayoutError::invalid(
                Structure::Record,
                "flags",
                "mark a middle fragment that does not fill its payload",
            )));
        }
        let (piece, len) = match decode_record(self.rest) {
            Ok(decoded) => decoded,
            Err(error) => {
                self.rest = &[];
                return Some(Err(error));
            }
        };
        let last = len == self.rest.len();
        self.rest = &self.rest[len..];
        match (piece.part, piece.record) {
            (Part::Whole, record) => Some(Ok(record)),
            (Part::First, Record::Packet(fragment)) if last => {
                let mut head = Head::of(&fragment);
                self.data.clear();
                let loss = if fragment.data.len() > SPAN_DATA_MAX_BYTES {
                    head.lost = true;
                    Some(Record::Loss(head.loss()))
                } else {
                    self.data.extend(fragment.data);
                    None
                };
                *self.head = Some(head);
                loss.map(Ok)
            }
            _ => {
                self.rest = &[];
                Some(Err(LayoutError::invalid(
                    Structure::Record,
                    "flags",
                    "mark a fragment where none may be (a first fragment ends its payload, \
                     a continuation starts it)",
                )))
            }
        }
    }
}

/// Test help: the whole records of payloads read one after another (each starting where
/// the one before ended), then the loss of a packet never completed, if any.
#[cfg(test)]
pub(crate) fn for_each_record(
    payloads: &[Vec<u8>],
    mut visit: impl FnMut(Result<Record<'_>, LayoutError>),
) {
    let mut reassembly = Reassembly::new();
    let mut offset = 0;
    for payload in payloads {
        reassembly.payload(offset, payload).for_each(&mut visit);
        offset += payload.len() as u64;
    }
    if let Some(loss) = reassembly.finish() {
        visit(Ok(Record::Loss(loss)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::records::{encode_loss, record_bytes, records};

    fn packet(stream: u16, timestamp_ns: u64, data: &[u8]) -> Packet<'_> {
        Packet {
            stream,
            content: Content::Udp,
            timestamp_ns,
            original_len: data.len() as u32,
            data,
            peer: Some("10.0.0.1:9".parse().unwrap()),
            local: Some("10.0.0.2:10".parse().unwrap()),
            end: false,
        }
    }

    /// Packs the packets into payloads of `capacity` bytes, spanning as the sources do.
    fn pack(packets: &[Packet<'_>], capacity: usize) -> Vec<Vec<u8>> {
        let datas: Vec<Vec<u8>> = packets.iter().map(|p| p.data.to_vec()).collect();
        crate::layout::fuzzing::pack_records(&datas, capacity)
    }

    /// Reads payloads (offset, bytes) through one reassembly: packets' data, and losses.
    fn read(payloads: &[(u64, Vec<u8>)]) -> (Vec<Vec<u8>>, Vec<Loss>) {
        let mut reassembly = Reassembly::new();
        let mut found = (Vec::new(), Vec::new());
        for (offset, payload) in payloads {
            for record in reassembly.payload(*offset, payload) {
                match record.unwrap() {
                    Record::Packet(packet) => found.0.push(packet.data.to_vec()),
                    Record::Loss(loss) => found.1.push(loss),
                }
            }
        }
        found.1.extend(reassembly.finish());
        found
    }

    fn with_offsets(payloads: Vec<Vec<u8>>) -> Vec<(u64, Vec<u8>)> {
        let mut offset = 0;
        payloads
            .into_iter()
            .map(|payload| {
                let at = offset;
                offset += payload.len() as u64;
                (at, payload)
            })
            .collect()
    }

    fn datas(sizes: &[usize]) -> Vec<Vec<u8>> {
        sizes
            .iter()
            .enumerate()
            .map(|(n, &size)| (0..size).map(|i| (i * 7 + n) as u8).collect())
            .collect()
    }

    #[test]
    fn packets_of_any_size_come_back_whole_and_payloads_are_full() {
        let datas = datas(&[60, 3000, 1000, 9000, 8, 20_000, 100]);
        let packets: Vec<_> = datas
            .iter()
            .enumerate()
            .map(|(n, data)| packet(0, n as u64, data))
            .collect();
        let payloads = pack(&packets, 4096);
        for payload in &payloads[..payloads.len() - 1] {
            assert!(payload.len() > 4096 - 72, "{}", payload.len());
        }
        let (found, losses) = read(&with_offsets(payloads));
        assert_eq!(found, datas);
        assert!(losses.is_empty(), "{losses:?}");
    }

    #[test]
    fn a_missing_payload_loses_exactly_the_packets_it_held_part_of() {
        let datas = datas(&[3000, 8000, 500]);
        let packets: Vec<_> = datas
            .iter()
            .enumerate()
            .map(|(n, data)| packet(1, n as u64 + 10, data))
            .collect();
        // 4096-byte payloads: [3000 whole, 8000 first] [8000 middle] [8000 last, 500].
        let payloads = with_offsets(pack(&packets, 4096));
        assert_eq!(payloads.len(), 3);
        let mut without_middle = payloads.clone();
        without_middle.remove(1);
        let (found, losses) = read(&without_middle);
        assert_eq!(found, [datas[0].clone(), datas[2].clone()]);
        assert_eq!(losses.len(), 1, "counted once: {losses:?}");
        assert_eq!(
            (losses[0].cause, losses[0].count, losses[0].bytes),
            (LossCause::Partial, 1, 8000)
        );
        assert_eq!(losses[0].timestamp_ns, 1, "the packet's own time");
        // The read starts after the head (a ring, a window): the rest is one loss.
        let (found, losses) = read(&payloads[1..]);
        assert_eq!(found, [datas[2].clone()]);
        assert_eq!(losses.len(), 1, "{losses:?}");
        // The recording ends after the head (kill -9): the head is one loss.
        let (found, losses) = read(&payloads[..2]);
        assert_eq!(found, [datas[0].clone()]);
        assert_eq!(losses.len(), 1, "{losses:?}");
        assert_eq!(losses[0].bytes, 8000);
    }

    /// The format's cost by frame size, in 128 KiB chunks: the bytes of whole records (and
    /// of frame data) against the chunks written, the last one left out (a recording's
    /// last chunk is cut short by its end whatever the format). At least 95 % is record
    /// bytes for every frame size from 60 bytes to 256 KiB (before 1.4, 44 800-byte frames
    /// filled 68 %).
    #[test]
    fn every_frame_size_from_60_bytes_to_256_kib_fills_chunks_to_95_percent() {
        const CHUNK: usize = 128 << 10;
        let mut sizes: Vec<usize> = vec![60, 64, 1400, 1500, 9000, 44_800, 64_400, 65_535];
        let mut size = 60.0f64;
        while size <= (256 << 10) as f64 {
            sizes.push(size as usize);
            size *= 1.07;
        }
        sizes.push(256 << 10);
        for size in sizes {
            let count = (12 * CHUNK / size).max(3);
            let datas = vec![vec![0x5au8; size]; count];
            let payloads = crate::layout::fuzzing::pack_records(&datas, CHUNK - 128);
            let full = payloads.len() - 1;
            let in_full: usize = payloads[..full].iter().map(Vec::len).sum();
            let written = (full * CHUNK) as f64;
            // Of the records' bytes, what the full chunks hold (fragment headers aside).
            let fragments = payloads[..full]
                .iter()
                .map(|payload| {
                    records(payload)
                        .filter(|piece| piece.as_ref().unwrap().part != Part::Whole)
                        .count()
                })
                .sum::<usize>();
            let record_share = (in_full - fragments * 64) as f64 / written;
            let data_share = record_share * size as f64 / record_bytes(size) as f64;
            assert!(
                record_share >= 0.95,
                "{size}-byte frames: {record_share:.4} record bytes, {data_share:.4} data"
            );
        }
    }

    /// Payloads as 1.2 and 1.3 wrote them (whole records only; a packet too large for an
    /// empty payload cut to fit) read as they always did, holes or not.
    #[test]
    fn payloads_of_whole_records_read_as_before() {
        use crate::layout::records::encode_packet;
        let datas = datas(&[100, 2000, 40, 3000]);
        let mut payloads = Vec::new();
        for pair in datas.chunks(2) {
            let mut payload = vec![0u8; 8192];
            let mut at = 0;
            for (n, data) in pair.iter().enumerate() {
                at += encode_packet(&mut payload[at..], &packet(0, n as u64, data));
            }
            payload.truncate(at);
            payloads.push(payload);
        }
        let mut cut = vec![0u8; 1024];
        let kept = &datas[3][..960];
        let len = encode_packet(
            &mut cut,
            &Packet {
                original_len: 3000,
                ..packet(0, 9, kept)
            },
        );
        assert_eq!(len, 1024);
        payloads.push(cut);
        let expected = [&datas[..], &[kept.to_vec()]].concat();
        assert_eq!(
            read(&with_offsets(payloads.clone())),
            (expected.clone(), vec![])
        );
        let apart: Vec<_> = payloads
            .into_iter()
            .enumerate()
            .map(|(n, payload)| (n as u64 * 100_000, payload))
            .collect();
        assert_eq!(read(&apart), (expected, vec![]));
    }

    /// A reassembly that keeps a prefix hands out the same packets, cut to it, and loses
    /// what a whole one loses.
    #[test]
    fn a_reassembly_that_keeps_a_prefix_hands_out_the_same_packets_cut() {
        let sizes = [100, 5000, 300, 20_000, 64];
        let datas = datas(&sizes);
        let packets: Vec<Packet<'_>> = (datas.iter().enumerate())
            .map(|(n, data)| packet(0, n as u64, data))
            .collect();
        let payloads = with_offsets(pack(&packets, 1024));
        let (whole, whole_losses) = read(&payloads);
        let mut keeping = Reassembly::keeping(1000);
        let mut cut = Vec::new();
        for (offset, payload) in &payloads {
            for record in keeping.payload(*offset, payload) {
                if let Ok(Record::Packet(packet)) = record {
                    assert_eq!(
                        packet.original_len as usize,
                        sizes[packet.timestamp_ns as usize]
                    );
                    cut.push(packet.data.to_vec());
                }
            }
        }
        assert!(keeping.finish().is_none() && whole_losses.is_empty());
        let expected: Vec<Vec<u8>> = whole
            .iter()
            .map(|data| data[..data.len().min(1000)].to_vec())
            .collect();
        assert_eq!(cut, expected);
    }

    #[test]
    fn fragments_out_of_place_are_refused_not_joined() {
        let data = datas(&[3000]).remove(0);
        let first = pack(&[packet(0, 1, &data)], 1024);
        // A first fragment followed by a record in the same payload.
        let mut bad = first[0].clone();
        let mut loss = [0u8; 80];
        let len = encode_loss(
            &mut loss,
            &Loss {
                stream: 0,
                timestamp_ns: 1,
                cause: LossCause::SocketOverflow,
                count: 1,
                bytes: 0,
            },
        );
        bad.extend_from_slice(&loss[..len]);
        let mut reassembly = Reassembly::new();
        let walked: Vec<_> = reassembly.payload(0, &bad).collect();
        assert!(walked.last().unwrap().is_err(), "{walked:?}");
        // A continuation of another packet after a head: both lost.
        let other = datas(&[5000]).remove(0);
        let other_payloads = pack(&[packet(0, 2, &other)], 1024);
        let (found, losses) = read(&with_offsets(vec![
            first[0].clone(),
            other_payloads[1].clone(),
        ]));
        assert!(found.is_empty());
        assert_eq!(losses.len(), 2, "{losses:?}");
        assert_eq!(record_bytes(0), 64);
    }
}
