//! A recorded packet's flow key, found from its bytes: Ethernet, VLAN tags (802.1Q and
//! 802.1ad, stacked), IPv4 (options, fragments), IPv6 (extension headers, fragments), and
//! the ports of TCP, UDP and SCTP or the type and code of ICMP and ICMPv6.

use crate::layout::{Content, Packet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// The EtherTypes of a VLAN tag: 802.1Q, 802.1ad, and the QinQ tag before it.
const ETHERTYPES_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];
/// An Ethernet header: two addresses and the EtherType.
const ETHERNET_HEADER_BYTES: usize = 14;
const VLAN_TAG_BYTES: usize = 4;
const IPV4_HEADER_BYTES: usize = 20;
const IPV6_HEADER_BYTES: usize = 40;
/// IPv6 extension headers followed at most on the way to the transport header: a packet
/// that chains more is keyed by its addresses without ports.
const IPV6_EXTENSIONS_MAX: usize = 8;
/// VLAN tags passed at most: a frame stacked deeper is unreadable.
const VLAN_TAGS_MAX: usize = 8;
/// The most of a frame [`key_of_frame`] reads: its headers (Ethernet, eight VLAN tags, an
/// IPv4 header with options, or IPv6's and eight extension headers of at most 2 KiB each,
/// then the ports), well within this. A reader that only keys keeps no more of a packet
/// that spans payloads (`layout::Reassembly::keeping`).
pub const KEY_BYTES_MAX: usize = 32 << 10;

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;
pub const PROTO_SCTP: u8 = 132;

/// Where a recorded packet belongs. Every packet has one, so that nothing recorded is
/// unfindable: an IP flow; for a frame that carries no IP packet, its EtherType; and
/// `Unreadable` for a frame too short or malformed to say either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlowKey {
    Ip(IpFlow),
    /// An Ethernet frame that is not IPv4 or IPv6 (ARP, LLDP, ...): its EtherType after any
    /// VLAN tags, and its outermost VLAN ID.
    NotIp {
        ethertype: u16,
        vlan: Option<u16>,
    },
    /// Too short or malformed to name an EtherType or an IP header, or a datagram recorded
    /// without its addresses.
    Unreadable,
}

/// A packet's IP flow, in the direction it travelled: from `source` to `destination`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpFlow {
    pub source: IpAddr,
    pub destination: IpAddr,
    /// The transport protocol: IPv4's protocol field, or the last IPv6 next header followed.
    pub protocol: u8,
    /// Source and destination ports for TCP, UDP and SCTP; type and code for ICMP and
    /// ICMPv6. None for other protocols, and for a packet that does not carry them: a
    /// fragment after the first, or a capture cut short before them. Such a packet is keyed
    /// by its addresses and protocol alone.
    pub ports: Option<(u16, u16)>,
    /// The outermost VLAN tag's VLAN ID, where the frame had one.
    pub vlan: Option<u16>,
}

/// The key of a recorded packet: a captured frame is parsed; a datagram or a TCP read is
/// keyed by its addresses, from the sender to the recorder.
pub fn key_of_packet(packet: &Packet<'_>) -> FlowKey {
    match packet.content {
        Content::Ethernet => key_of_frame(packet.data),
        Content::Udp => key_of_addresses(packet.peer, packet.local, PROTO_UDP),
        Content::Tcp => key_of_addresses(packet.peer, packet.local, PROTO_TCP),
    }
}

/// The key of a socket's data from `peer` to `local`; IPv4 addresses that a dual-stack
/// socket gave as IPv6 (`::ffff:a.b.c.d`) are keyed as the IPv4 ones they are.
fn key_of_addresses(peer: Option<SocketAddr>, local: Option<SocketAddr>, protocol: u8) -> FlowKey {
    let (Some(peer), Some(local)) = (peer, local) else {
        return FlowKey::Unreadable;
    };
    let (source, destination) = (peer.ip().to_canonical(), local.ip().to_canonical());
    if source.is_ipv4() != destination.is_ipv4() {
        return FlowKey::Unreadable;
    }
    FlowKey::Ip(IpFlow {
        source,
        destination,
        protocol,
        ports: Some((peer.port(), local.port())),
        vlan: None,
    })
}

/// The key of an Ethernet frame as a capture kept it (perhaps cut short).
pub fn key_of_frame(frame: &[u8]) -> FlowKey {
    let Some(mut ethertype) = be16(frame, ETHERNET_HEADER_BYTES - 2) else {
        return FlowKey::Unreadable;
    };
    let mut at = ETHERNET_HEADER_BYTES;
    let mut vlan = None;
    let mut tags = 0;
    while ETHERTYPES_VLAN.contains(&ethertype) {
        let (Some(tag), Some(inner)) = (be16(frame, at), be16(frame, at + 2)) else {
            return FlowKey::Unreadable;
        };
        tags += 1;
        if tags > VLAN_TAGS_MAX {
            return FlowKey::Unreadable;
        }
        vlan.get_or_insert(tag & 0x0fff);
        ethertype = inner;
        at += VLAN_TAG_BYTES;
    }
    let packet = &frame[at..];
    let flow = match ethertype {
        ETHERTYPE_IPV4 => ipv4(packet),
        ETHERTYPE_IPV6 => ipv6(packet),
        _ => return FlowKey::NotIp { ethertype, vlan },
    };
    match flow {
        Some(flow) => FlowKey::Ip(IpFlow { vlan, ..flow }),
        None => FlowKey::Unreadable,
    }
}

/// The big-endian u16 at `at` of `bytes`, if they hold it.
fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let two = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([two[0], two[1]]))
}

/// The flow of an IPv4 packet (no VLAN), or None for one whose header is not there.
fn ipv4(packet: &[u8]) -> Option<IpFlow> {
    let header = packet.get(..IPV4_HEADER_BYTES)?;
    let header_bytes = usize::from(header[0] & 0x0f) * 4;
    if header[0] >> 4 != 4 || header_bytes < IPV4_HEADER_BYTES {
        return None;
    }
    let fragment_offset = be16(header, 6)? & 0x1fff;
    let protocol = header[9];
    let source: [u8; 4] = header[12..16].try_into().ok()?;
    let destination: [u8; 4] = header[16..20].try_into().ok()?;
    let transport = packet.get(header_bytes..).unwrap_or_default();
    Some(IpFlow {
        source: Ipv4Addr::from(source).into(),
        destination: Ipv4Addr::from(destination).into(),
        protocol,
        ports: (fragment_offset == 0)
            .then(|| ports(protocol, transport))
            .flatten(),
        vlan: None,
    })
}

/// The flow of an IPv6 packet (no VLAN), or None for one whose header is not there.
fn ipv6(packet: &[u8]) -> Option<IpFlow> {
    let header = packet.get(..IPV6_HEADER_BYTES)?;
    if header[0] >> 4 != 6 {
        return None;
    }
    let source: [u8; 16] = header[8..24].try_into().ok()?;
    let destination: [u8; 16] = header[24..40].try_into().ok()?;
    let (protocol, transport) = ipv6_transport(header[6], &packet[IPV6_HEADER_BYTES..]);
    Some(IpFlow {
        source: Ipv6Addr::from(source).into(),
        destination: Ipv6Addr::from(destination).into(),
        protocol,
        ports: transport.and_then(|transport| ports(protocol, transport)),
        vlan: None,
    })
}

/// Follows IPv6 extension headers from `next` on to the transport header: its protocol
/// and its bytes, or no bytes where it cannot be reached (a fragment after the first: its
/// protocol is the fragment header's; a chain cut short, or longer than followed).
fn ipv6_transport(mut next: u8, mut rest: &[u8]) -> (u8, Option<&[u8]>) {
    for _ in 0..IPV6_EXTENSIONS_MAX {
        let length = match next {
            // Hop-by-hop, routing, destination options, mobility, HIP, shim6: in 8 bytes,
            // not counting the first 8.
            0 | 43 | 60 | 135 | 139 | 140 => rest.get(1).map(|&units| (usize::from(units) + 1) * 8),
            // Fragment: 8 bytes; a fragment after the first holds no transport header.
            44 => match (rest.first(), be16(rest, 2)) {
                (Some(&protocol), Some(offset)) if offset >> 3 != 0 => return (protocol, None),
                (Some(_), Some(_)) => Some(8),
                _ => None,
            },
            // Authentication header: in 4 bytes, not counting the first 8.
            51 => rest.get(1).map(|&units| (usize::from(units) + 2) * 4),
            _ => return (next, Some(rest)),
        };
        let (Some(length), Some(&following)) = (length, rest.first()) else {
            return (next, None);
        };
        let Some(after) = rest.get(length..) else {
            return (next, None);
        };
        (next, rest) = (following, after);
    }
    (next, None)
}

/// The ports (ICMP's type and code) at the start of a transport header, where the
/// protocol has them and the bytes hold them.
fn ports(protocol: u8, transport: &[u8]) -> Option<(u16, u16)> {
    match protocol {
        PROTO_TCP | PROTO_UDP | PROTO_SCTP => Some((be16(transport, 0)?, be16(transport, 2)?)),
        PROTO_ICMP | PROTO_ICMPV6 => {
            let two = transport.get(..2)?;
            Some((u16::from(two[0]), u16::from(two[1])))
        }
        _ => None,
    }
}

/// The name tcpdump gives an IP protocol, where it has a short one.
pub fn protocol_name(protocol: u8) -> Option<&'static str> {
    match protocol {
        PROTO_ICMP => Some("icmp"),
        PROTO_TCP => Some("tcp"),
        PROTO_UDP => Some("udp"),
        PROTO_ICMPV6 => Some("icmp6"),
        PROTO_SCTP => Some("sctp"),
        _ => None,
    }
}

impl fmt::Display for IpFlow {
    /// `tcp 10.0.0.1:40000 -> 10.0.0.2:80`, `icmp 10.0.0.1 -> 10.0.0.2 type 8 code 0`,
    /// `proto 47 10.0.0.1 -> 10.0.0.2`, and ` vlan 100` after it where tagged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match protocol_name(self.protocol) {
            Some(name) => write!(f, "{name} ")?,
            None => write!(f, "proto {} ", self.protocol)?,
        }
        let icmp = matches!(self.protocol, PROTO_ICMP | PROTO_ICMPV6);
        match self.ports {
            Some((kind, code)) if icmp => write!(
                f,
                "{} -> {} type {kind} code {code}",
                self.source, self.destination
            )?,
            Some((from, to)) => write!(
                f,
                "{} -> {}",
                SocketAddr::new(self.source, from),
                SocketAddr::new(self.destination, to)
            )?,
            None => write!(f, "{} -> {}", self.source, self.destination)?,
        }
        match self.vlan {
            Some(vlan) => write!(f, " vlan {vlan}"),
            None => Ok(()),
        }
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowKey::Ip(flow) => fmt::Display::fmt(flow, f),
            FlowKey::NotIp {
                ethertype,
                vlan: Some(vlan),
            } => write!(f, "ethertype {ethertype:#06x} vlan {vlan}"),
            FlowKey::NotIp {
                ethertype,
                vlan: None,
            } => write!(f, "ethertype {ethertype:#06x}"),
            FlowKey::Unreadable => f.write_str("unreadable"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A4: [u8; 4] = [10, 0, 0, 1];
    const B4: [u8; 4] = [10, 0, 0, 2];

    /// A frame with `tags` ((TPID, TCI) each, outermost first) before `ethertype`.
    fn frame(tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut frame = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        for (tpid, tci) in tags {
            frame.extend_from_slice(&tpid.to_be_bytes());
            frame.extend_from_slice(&tci.to_be_bytes());
        }
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(payload);
        frame
    }

    /// An IPv4 packet with `options_words` 4-byte words of options and the fragment
    /// offset (in 8 bytes) given.
    fn ipv4_packet(protocol: u8, options_words: u8, fragment: u16, transport: &[u8]) -> Vec<u8> {
        let mut packet = vec![0x45 + options_words, 0, 0, 0, 0, 0];
        packet.extend_from_slice(&fragment.to_be_bytes());
        packet.extend_from_slice(&[64, protocol, 0, 0]);
        packet.extend_from_slice(&A4);
        packet.extend_from_slice(&B4);
        packet.extend(std::iter::repeat_n(1u8, usize::from(options_words) * 4));
        packet.extend_from_slice(transport);
        packet
    }

    fn ipv6_packet(next: u8, rest: &[u8]) -> Vec<u8> {
        let mut packet = vec![0x60, 0, 0, 0, 0, 0, next, 64];
        packet.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        packet.extend_from_slice(&"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets());
        packet.extend_from_slice(rest);
        packet
    }

    fn ports_bytes(from: u16, to: u16) -> Vec<u8> {
        [from.to_be_bytes(), to.to_be_bytes(), [0, 0], [0, 0]].concat()
    }

    fn v4(protocol: u8, ports: Option<(u16, u16)>, vlan: Option<u16>) -> FlowKey {
        FlowKey::Ip(IpFlow {
            source: Ipv4Addr::from(A4).into(),
            destination: Ipv4Addr::from(B4).into(),
            protocol,
            ports,
            vlan,
        })
    }

    fn v6(protocol: u8, ports: Option<(u16, u16)>) -> FlowKey {
        FlowKey::Ip(IpFlow {
            source: "2001:db8::1".parse().unwrap(),
            destination: "2001:db8::2".parse().unwrap(),
            protocol,
            ports,
            vlan: None,
        })
    }

    #[test]
    fn an_ipv4_tcp_frame_is_keyed_by_its_five_tuple() {
        let packet = ipv4_packet(PROTO_TCP, 0, 0, &ports_bytes(34855, 80));
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV4, &packet));
        assert_eq!(key, v4(PROTO_TCP, Some((34855, 80)), None));
        assert_eq!(key.to_string(), "tcp 10.0.0.1:34855 -> 10.0.0.2:80");
    }

    #[test]
    fn stacked_vlan_tags_are_passed_and_the_outermost_named() {
        let packet = ipv4_packet(PROTO_UDP, 0, 0, &ports_bytes(5000, 53));
        let tags = [(0x88a8, 0x2000 | 100), (0x8100, 200)];
        let key = key_of_frame(&frame(&tags, ETHERTYPE_IPV4, &packet));
        assert_eq!(key, v4(PROTO_UDP, Some((5000, 53)), Some(100)));
        assert_eq!(key.to_string(), "udp 10.0.0.1:5000 -> 10.0.0.2:53 vlan 100");
        // Eight tags are passed; a ninth makes the frame unreadable, so that a key never
        // reads past KEY_BYTES_MAX.
        let eight = [(0x8100, 7); 8];
        let key = key_of_frame(&frame(&eight, ETHERTYPE_IPV4, &packet));
        assert_eq!(key, v4(PROTO_UDP, Some((5000, 53)), Some(7)));
        let nine = [(0x8100, 7); 9];
        let key = key_of_frame(&frame(&nine, ETHERTYPE_IPV4, &packet));
        assert_eq!(key, FlowKey::Unreadable);
    }

    #[test]
    fn ipv4_options_are_passed_and_a_later_fragment_has_no_ports() {
        let with_options = ipv4_packet(PROTO_SCTP, 2, 0, &ports_bytes(7, 80));
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV4, &with_options));
        assert_eq!(key, v4(PROTO_SCTP, Some((7, 80)), None));
        // Offset 185 (1,480 bytes on): bytes that look like ports are the datagram's data.
        let later = ipv4_packet(PROTO_UDP, 0, 185, &ports_bytes(1, 2));
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV4, &later));
        assert_eq!(key, v4(PROTO_UDP, None, None));
        // The first fragment (more fragments, offset 0) has them.
        let first = ipv4_packet(PROTO_UDP, 0, 0x2000, &ports_bytes(1, 2));
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV4, &first));
        assert_eq!(key, v4(PROTO_UDP, Some((1, 2)), None));
    }

    #[test]
    fn icmp_is_keyed_by_type_and_code() {
        let packet = ipv4_packet(PROTO_ICMP, 0, 0, &[8, 0, 0xf7, 0xff]);
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV4, &packet));
        assert_eq!(key, v4(PROTO_ICMP, Some((8, 0)), None));
        assert_eq!(key.to_string(), "icmp 10.0.0.1 -> 10.0.0.2 type 8 code 0");
    }

    #[test]
    fn ipv6_extension_headers_are_followed_to_the_transport() {
        // Hop-by-hop (8 bytes), then a first fragment (offset 0), then TCP.
        let mut rest = vec![44, 0, 0, 0, 0, 0, 0, 0];
        rest.extend_from_slice(&[PROTO_TCP, 0, 0, 1, 0, 0, 0, 9]);
        rest.extend_from_slice(&ports_bytes(1234, 443));
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV6, &ipv6_packet(0, &rest)));
        assert_eq!(key, v6(PROTO_TCP, Some((1234, 443))));
        assert_eq!(
            key.to_string(),
            "tcp [2001:db8::1]:1234 -> [2001:db8::2]:443"
        );
        // A later fragment: the fragment header's protocol, no ports.
        let mut later = vec![PROTO_UDP, 0, 0x05, 0xc8, 0, 0, 0, 9];
        later.extend_from_slice(&ports_bytes(1, 2));
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV6, &ipv6_packet(44, &later)));
        assert_eq!(key, v6(PROTO_UDP, None));
        // A destination options header that claims more than the capture kept.
        let cut = [PROTO_UDP, 4, 0, 0];
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV6, &ipv6_packet(60, &cut)));
        assert_eq!(key, v6(60, None));
    }

    #[test]
    fn every_frame_has_a_key_however_short_or_foreign() {
        let arp = frame(&[(0x8100, 7)], 0x0806, &[0; 28]);
        assert_eq!(
            key_of_frame(&arp),
            FlowKey::NotIp {
                ethertype: 0x0806,
                vlan: Some(7)
            }
        );
        assert_eq!(key_of_frame(&arp).to_string(), "ethertype 0x0806 vlan 7");
        assert_eq!(key_of_frame(&[0; 10]), FlowKey::Unreadable);
        assert_eq!(
            key_of_frame(&frame(&[], ETHERTYPE_IPV4, &[0x45; 12])),
            FlowKey::Unreadable
        );
        assert_eq!(
            key_of_frame(&frame(&[(0x8100, 1)], 0, &[])[..15]),
            FlowKey::Unreadable
        );
        // Not version 4 behind an IPv4 EtherType.
        let mut wrong = ipv4_packet(PROTO_TCP, 0, 0, &ports_bytes(1, 2));
        wrong[0] = 0x65;
        assert_eq!(
            key_of_frame(&frame(&[], ETHERTYPE_IPV4, &wrong)),
            FlowKey::Unreadable
        );
        // A capture cut short inside the TCP header's ports.
        let cut = ipv4_packet(PROTO_TCP, 0, 0, &[0x88]);
        let key = key_of_frame(&frame(&[], ETHERTYPE_IPV4, &cut));
        assert_eq!(key, v4(PROTO_TCP, None, None));
        // Every length of a real frame, cut anywhere: a key, never a panic.
        let whole = frame(
            &[(0x8100, 3)],
            ETHERTYPE_IPV6,
            &ipv6_packet(0, &[PROTO_TCP, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4]),
        );
        for len in 0..=whole.len() {
            let _ = key_of_frame(&whole[..len]);
        }
    }

    #[test]
    fn a_datagram_is_keyed_from_its_sender_to_the_recorder() {
        let data = [0u8; 4];
        let packet = Packet {
            stream: 0,
            content: Content::Udp,
            timestamp_ns: 0,
            original_len: 4,
            data: &data,
            peer: Some("[::ffff:10.0.0.1]:5000".parse().unwrap()),
            local: Some("10.0.0.2:9000".parse().unwrap()),
            end: false,
        };
        assert_eq!(
            key_of_packet(&packet),
            v4(PROTO_UDP, Some((5000, 9000)), None)
        );
        let unaddressed = Packet {
            peer: None,
            ..packet
        };
        assert_eq!(key_of_packet(&unaddressed), FlowKey::Unreadable);
        let tcp = Packet {
            content: Content::Tcp,
            ..packet
        };
        assert_eq!(key_of_packet(&tcp), v4(PROTO_TCP, Some((5000, 9000)), None));
    }
}
