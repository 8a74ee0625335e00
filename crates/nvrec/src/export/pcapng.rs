//! A recording of records (datagrams, packets) exported as PcapNg, for Wireshark and every
//! tool that reads it.
//!
//! One section; an interface description per stream of the recording, in the order the
//! streams first appear, with nanosecond timestamps (`if_tsresol` 9); an enhanced packet per
//! datagram, rebuilt as the IP packet it arrived in (IPv4 or IPv6 and UDP headers around
//! the payload, addresses and ports as received; link type RAW), with `epb_dropcount` on
//! the first packet after a loss; at the end, interface statistics with what was received
//! and what was dropped. The PcapNg blocks are written by the `pcap-file` crate.
//!
//! With a classic BPF filter ([`PcapngExport::with_filter`]), only the packets it keeps
//! are written: it runs on each packet as exported (a captured frame as it was, a datagram in
//! its rebuilt IP packet), with its length on the wire, so `tcpdump -r` of an unfiltered
//! export with the same expression keeps the same packets. An interface is declared when its
//! first packet passes.

use super::ExportError;
use crate::flow::FlowFilter;
use crate::layout::{records, Content, Loss, LossCause, Packet, Record};
use crate::net::BpfFilter;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::interface_statistics::{
    InterfaceStatisticsBlock, InterfaceStatisticsOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use std::borrow::Cow;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The largest packet an exported interface declares (an IP packet of 64 KiB).
const SNAPLEN: u32 = 65535;

/// What an export wrote, per stream and in all.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PcapngSummary {
    /// Bytes of PcapNg written after the section header.
    pub bytes: u64,
    pub packets: u64,
    pub dropped: u64,
    pub truncated: u64,
    /// Packets the filter left out (`--filter-bpf`).
    pub filtered_out: u64,
    pub streams: Vec<StreamSummary>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StreamSummary {
    pub stream: u16,
    pub packets: u64,
    pub dropped: u64,
    /// Drops after the stream's last packet: in its statistics block only.
    #[serde(skip)]
    pending_drops: u64,
    #[serde(skip)]
    last_timestamp_ns: u64,
}

pub struct PcapngExport<W: Write> {
    writer: PcapNgWriter<W>,
    /// Interface id of each stream seen (index: stream number).
    interfaces: Vec<Option<u32>>,
    summary: PcapngSummary,
    /// Which streams to export (None: all).
    streams: Option<Vec<u16>>,
    /// Only packets this program keeps (None: all).
    filter: Option<BpfFilter>,
    /// Only packets of these flows (None: all).
    flows: Option<FlowFilter>,
    /// TCP: the sequence number of each stream's next byte (index: stream number).
    tcp_sequences: Vec<u32>,
    packet: Vec<u8>,
}

impl<W: Write> PcapngExport<W> {
    /// Starts the export (writes the section header); `streams` limits it to those.
    pub fn new(out: W, streams: Option<Vec<u16>>) -> Result<PcapngExport<W>, ExportError> {
        Ok(PcapngExport {
            writer: PcapNgWriter::new(out)?,
            interfaces: Vec::new(),
            summary: PcapngSummary::default(),
            streams,
            filter: None,
            flows: None,
            tcp_sequences: Vec::new(),
            packet: Vec::with_capacity(1 << 17),
        })
    }

    /// Writes only the packets `filter` keeps.
    pub fn with_filter(mut self, filter: BpfFilter) -> PcapngExport<W> {
        self.filter = Some(filter);
        self
    }

    /// Writes only the packets of the flows `flows` asks for. A packet the source lost
    /// part of (cause `Partial`) cannot be told to be of them or not: it is not counted
    /// in the drops then (the drops a source recorded still are).
    pub fn with_flows(mut self, flows: FlowFilter) -> PcapngExport<W> {
        self.flows = Some(flows);
        self
    }

    /// Exports one record (a packet whole, put back together where it spanned payloads:
    /// `layout::Reassembly`).
    pub fn record(&mut self, record: &Record<'_>) -> Result<(), ExportError> {
        match record {
            Record::Packet(packet) => self.packet(packet),
            Record::Loss(loss) => self.loss(loss),
        }
    }

    fn wanted(&self, stream: u16) -> bool {
        self.streams
            .as_ref()
            .is_none_or(|streams| streams.contains(&stream))
    }

    /// The interface of `stream`, declared at its first use.
    fn interface(&mut self, stream: u16, content: Content) -> Result<u32, ExportError> {
        let index = stream as usize;
        if self.interfaces.len() <= index {
            self.interfaces.resize(index + 1, None);
        }
        if let Some(id) = self.interfaces[index] {
            return Ok(id);
        }
        let id = self.summary.streams.len() as u32;
        self.summary.bytes += self.writer.write_pcapng_block(InterfaceDescriptionBlock {
            // A captured frame is exported as it is; datagrams and stream bytes in the IP
            // packets they came in.
            linktype: match content {
                Content::Ethernet => DataLink::ETHERNET,
                Content::Udp | Content::Tcp => DataLink::RAW,
            },
            snaplen: SNAPLEN,
            options: vec![
                InterfaceDescriptionOption::IfName(Cow::Owned(format!("stream {stream}"))),
                InterfaceDescriptionOption::IfTsResol(9),
            ],
        })? as u64;
        self.interfaces[index] = Some(id);
        self.summary.streams.push(StreamSummary {
            stream,
            ..StreamSummary::default()
        });
        Ok(id)
    }

    fn loss(&mut self, loss: &Loss) -> Result<(), ExportError> {
        if !self.wanted(loss.stream) {
            return Ok(());
        }
        if self.flows.is_some() && loss.cause == LossCause::Partial {
            return Ok(());
        }
        let id = self.interface(loss.stream, Content::Udp)?;
        let stream = &mut self.summary.streams[id as usize];
        stream.dropped += loss.count;
        stream.pending_drops += loss.count;
        self.summary.dropped += loss.count;
        Ok(())
    }

    fn packet(&mut self, packet: &Packet<'_>) -> Result<(), ExportError> {
        if !self.wanted(packet.stream) {
            return Ok(());
        }
        let original_len = self.build(packet);
        if let Some(filter) = &self.filter {
            if !filter.accepts(&self.packet, original_len) {
                self.summary.filtered_out += 1;
                return Ok(());
            }
        }
        if self
            .flows
            .as_ref()
            .is_some_and(|flows| !flows.keeps(packet))
        {
            self.summary.filtered_out += 1;
            return Ok(());
        }
        let id = self.interface(packet.stream, packet.content)?;
        let stream = &mut self.summary.streams[id as usize];
        let mut options = Vec::new();
        if stream.pending_drops > 0 {
            options.push(EnhancedPacketOption::DropCount(stream.pending_drops));
            stream.pending_drops = 0;
        }
        stream.packets += 1;
        stream.last_timestamp_ns = packet.timestamp_ns;
        self.summary.packets += 1;
        if packet.is_truncated() {
            self.summary.truncated += 1;
        }
        self.summary.bytes += self.writer.write_pcapng_block(EnhancedPacketBlock {
            interface_id: id,
            timestamp: Duration::from_nanos(packet.timestamp_ns),
            original_len,
            data: Cow::Borrowed(&self.packet),
            options,
        })? as u64;
        Ok(())
    }

    /// Puts the packet as exported into `self.packet`; returns its length on the wire. A TCP
    /// stream's sequence number moves on whether or not a filter keeps the packet.
    fn build(&mut self, packet: &Packet<'_>) -> u32 {
        match packet.content {
            Content::Udp => build_ip(&mut self.packet, packet, Transport::Udp),
            Content::Tcp => {
                let index = usize::from(packet.stream);
                if self.tcp_sequences.len() <= index {
                    self.tcp_sequences.resize(index + 1, 0);
                }
                let sequence = self.tcp_sequences[index];
                self.tcp_sequences[index] = sequence.wrapping_add(packet.original_len);
                build_ip(&mut self.packet, packet, Transport::Tcp { sequence })
            }
            Content::Ethernet => {
                self.packet.clear();
                self.packet.extend_from_slice(packet.data);
                packet.original_len
            }
        }
    }

    /// Writes each interface's statistics and hands back the output and the summary.
    pub fn finish(mut self) -> Result<(W, PcapngSummary), ExportError> {
        for (id, stream) in self.summary.streams.iter().enumerate() {
            let timestamp = stream.last_timestamp_ns;
            self.summary.bytes += self.writer.write_pcapng_block(InterfaceStatisticsBlock {
                interface_id: id as u32,
                // Split into high and low words by the format, in the interface's units (ns).
                timestamp,
                options: vec![
                    InterfaceStatisticsOption::IsbIfRecv(stream.packets + stream.dropped),
                    InterfaceStatisticsOption::IsbIfDrop(stream.dropped),
                ],
            })? as u64;
        }
        Ok((self.writer.into_inner(), self.summary))
    }
}

/// What the first packet of a payload of records holds, if it has one.
pub fn first_content(payload: &[u8]) -> Option<Content> {
    records(payload).find_map(|piece| match piece.map(|piece| piece.record) {
        Ok(Record::Packet(packet)) => Some(packet.content),
        _ => None,
    })
}

/// The transport header a packet record's data gets in an export, and its IP protocol.
enum Transport {
    Udp,
    /// TCP, at this offset in the connection's stream.
    Tcp {
        sequence: u32,
    },
}

/// Puts the IP packet the data arrived in into `out`: IPv4 (both addresses IPv4) or IPv6,
/// the UDP or TCP header, then the data kept. Returns the length the whole packet had.
fn build_ip(out: &mut Vec<u8>, packet: &Packet<'_>, transport: Transport) -> u32 {
    let unspecified = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
    let peer = packet.peer.unwrap_or(unspecified);
    let local = packet.local.unwrap_or(unspecified);
    let (protocol, header) = transport_header(&transport, peer.port(), local.port(), packet);
    let l4_len = header.len() + packet.original_len as usize;
    out.clear();
    let (source, destination, ip_len) = match (v4(peer.ip()), v4(local.ip())) {
        (Some(source), Some(destination)) => {
            let total = (20 + l4_len).min(u16::MAX as usize) as u16;
            out.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, protocol, 0, 0]);
            out[2..4].copy_from_slice(&total.to_be_bytes());
            out.extend_from_slice(&source.octets());
            out.extend_from_slice(&destination.octets());
            let checksum = internet_checksum(&[&out[..20]]);
            out[10..12].copy_from_slice(&checksum.to_be_bytes());
            (
                source.to_ipv6_mapped().octets(),
                destination.to_ipv6_mapped().octets(),
                20,
            )
        }
        _ => {
            let (source, destination) = (v6_octets(peer.ip()), v6_octets(local.ip()));
            out.extend_from_slice(&[0x60, 0, 0, 0]);
            out.extend_from_slice(&(l4_len.min(u16::MAX as usize) as u16).to_be_bytes());
            out.extend_from_slice(&[protocol, 64]);
            out.extend_from_slice(&source);
            out.extend_from_slice(&destination);
            (source, destination, 40)
        }
    };
    let checksum_at = out.len() + if protocol == 17 { 6 } else { 16 };
    out.extend_from_slice(&header);
    out.extend_from_slice(packet.data);
    // The transport checksum over the pseudo-header, the header and the data kept
    // (mandatory for TCP and for UDP over IPv6).
    let mut pseudo = Vec::with_capacity(40);
    if ip_len == 20 {
        pseudo.extend_from_slice(&source[12..]);
        pseudo.extend_from_slice(&destination[12..]);
        pseudo.extend_from_slice(&[0, protocol]);
        pseudo.extend_from_slice(&(l4_len.min(u16::MAX as usize) as u16).to_be_bytes());
    } else {
        pseudo.extend_from_slice(&source);
        pseudo.extend_from_slice(&destination);
        pseudo.extend_from_slice(&(l4_len as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, protocol]);
    }
    let checksum = match internet_checksum(&[&pseudo, &out[ip_len..]]) {
        0 if protocol == 17 => 0xffff,
        sum => sum,
    };
    out[checksum_at..checksum_at + 2].copy_from_slice(&checksum.to_be_bytes());
    (ip_len + l4_len) as u32
}

/// The UDP or TCP header for `packet` (checksum left zero) and the IP protocol number.
fn transport_header(
    transport: &Transport,
    source_port: u16,
    destination_port: u16,
    packet: &Packet<'_>,
) -> (u8, Vec<u8>) {
    let mut header = Vec::with_capacity(20);
    header.extend_from_slice(&source_port.to_be_bytes());
    header.extend_from_slice(&destination_port.to_be_bytes());
    match transport {
        Transport::Udp => {
            let len = (8 + packet.original_len as usize).min(u16::MAX as usize) as u16;
            header.extend_from_slice(&len.to_be_bytes());
            header.extend_from_slice(&[0, 0]);
            (17, header)
        }
        Transport::Tcp { sequence } => {
            header.extend_from_slice(&sequence.to_be_bytes());
            header.extend_from_slice(&[0, 0, 0, 0]); // acknowledgement
            header.extend_from_slice(&[0x50, 0x18]); // 5 words; PSH, ACK
            header.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]); // window, checksum, urgent
            (6, header)
        }
    }
}

fn v4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

fn v6_octets(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The ones' complement of the ones' complement sum of 16-bit words (RFC 1071), over
/// `parts` taken as one byte string.
fn internet_checksum(parts: &[&[u8]]) -> u16 {
    let mut sum = 0u64;
    let mut odd: Option<u8> = None;
    for part in parts {
        for &byte in *part {
            match odd.take() {
                Some(high) => sum += u64::from(u16::from_be_bytes([high, byte])),
                None => odd = Some(byte),
            }
        }
    }
    if let Some(high) = odd {
        sum += u64::from(u16::from_be_bytes([high, 0]));
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{encode_loss, encode_packet, LossCause};
    use pcap_file::pcapng::{Block, PcapNgReader};

    fn datagram<'a>(stream: u16, data: &'a [u8], peer: &str, local: &str) -> Packet<'a> {
        Packet {
            stream,
            content: Content::Udp,
            timestamp_ns: 1_700_000_000_000_000_000 + data.len() as u64,
            original_len: data.len() as u32,
            data,
            peer: Some(peer.parse().unwrap()),
            local: Some(local.parse().unwrap()),
            end: false,
        }
    }

    #[test]
    fn the_ipv4_header_checksum_verifies() {
        let mut out = Vec::new();
        let len = build_ip(
            &mut out,
            &datagram(0, b"abc", "10.0.0.1:1000", "10.0.0.2:2000"),
            Transport::Udp,
        );
        assert_eq!(len, 20 + 8 + 3);
        assert_eq!(
            internet_checksum(&[&out[..20]]),
            0,
            "a header with its checksum sums to 0"
        );
        assert_eq!(&out[20..22], &1000u16.to_be_bytes());
        assert_eq!(&out[28..], b"abc");
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&out[12..20]);
        pseudo.extend_from_slice(&[0, 17, 0, 11]);
        assert_eq!(
            internet_checksum(&[&pseudo, &out[20..]]),
            0,
            "the UDP checksum verifies too"
        );
    }

    #[test]
    fn tcp_bytes_get_consecutive_sequence_numbers_and_frames_stay_as_they_are() {
        let mut payload = vec![0u8; 4096];
        let tcp = |data| Packet {
            content: Content::Tcp,
            ..datagram(0, data, "10.0.0.1:1000", "10.0.0.2:2000")
        };
        let mut at = encode_packet(&mut payload, &tcp(b"0123456789"));
        at += encode_packet(&mut payload[at..], &tcp(b"abc"));
        let frame = [0xaau8; 60];
        at += encode_packet(
            &mut payload[at..],
            &Packet {
                content: Content::Ethernet,
                peer: None,
                local: None,
                ..datagram(1, &frame, "10.0.0.1:1", "10.0.0.2:2")
            },
        );
        let mut export = PcapngExport::new(Vec::new(), None).unwrap();
        export_payload(&mut export, &payload[..at]);
        let (bytes, _) = export.finish().unwrap();
        let mut reader = PcapNgReader::new(&bytes[..]).unwrap();
        let mut sequences = Vec::new();
        let mut linktypes = Vec::new();
        while let Some(block) = reader.next_block() {
            match block.unwrap() {
                Block::EnhancedPacket(epb) if epb.interface_id == 0 => {
                    assert_eq!(epb.data[9], 6, "TCP");
                    sequences.push(u32::from_be_bytes(epb.data[24..28].try_into().unwrap()));
                }
                Block::EnhancedPacket(epb) => assert_eq!(&epb.data[..], &frame[..]),
                Block::InterfaceDescription(idb) => linktypes.push(idb.linktype),
                _ => {}
            }
        }
        assert_eq!(sequences, [0, 10]);
        assert_eq!(linktypes, [DataLink::RAW, DataLink::ETHERNET]);
    }

    fn export_payload(export: &mut PcapngExport<Vec<u8>>, payload: &[u8]) {
        for record in crate::layout::Reassembly::new().payload(0, payload) {
            export.record(&record.unwrap()).unwrap();
        }
    }

    #[test]
    fn streams_become_interfaces_and_losses_drop_counts() {
        let mut payload = vec![0u8; 4096];
        let mut at = encode_packet(
            &mut payload,
            &datagram(1, b"first", "10.0.0.1:1000", "10.0.0.2:2000"),
        );
        at += encode_loss(
            &mut payload[at..],
            &Loss {
                stream: 1,
                timestamp_ns: 5,
                cause: LossCause::SocketOverflow,
                count: 4,
                bytes: 0,
            },
        );
        at += encode_packet(
            &mut payload[at..],
            &datagram(1, b"second", "10.0.0.1:1000", "10.0.0.2:2000"),
        );
        at += encode_packet(
            &mut payload[at..],
            &datagram(0, b"v6", "[fd00::1]:7", "[fd00::2]:8"),
        );
        let mut export = PcapngExport::new(Vec::new(), None).unwrap();
        export_payload(&mut export, &payload[..at]);
        let (bytes, summary) = export.finish().unwrap();
        assert_eq!((summary.packets, summary.dropped), (3, 4));
        let mut reader = PcapNgReader::new(&bytes[..]).unwrap();
        let mut packets = Vec::new();
        let mut statistics = Vec::new();
        while let Some(block) = reader.next_block() {
            match block.unwrap() {
                Block::EnhancedPacket(epb) => packets.push((
                    epb.interface_id,
                    epb.options.contains(&EnhancedPacketOption::DropCount(4)),
                    epb.data.len(),
                )),
                Block::InterfaceStatistics(isb) => statistics.push((
                    isb.options
                        .contains(&InterfaceStatisticsOption::IsbIfDrop(4)),
                    isb.options
                        .contains(&InterfaceStatisticsOption::IsbIfRecv(6)),
                )),
                _ => {}
            }
        }
        // Stream 1 came first: interface 0. Its second packet carries the drop count.
        assert_eq!(
            packets,
            [(0, false, 28 + 5), (0, true, 28 + 6), (1, false, 48 + 2)]
        );
        assert_eq!(
            statistics[0],
            (true, true),
            "drops and received, drops included"
        );
    }
}
