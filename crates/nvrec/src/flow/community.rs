//! Community ID, version 1: the name Zeek, Suricata and other sensors give a flow, so that
//! a connection in one tool's log is found in another's. The flow's two endpoints are put
//! in one order (whichever way a packet went, both directions get one ID), then hashed
//! with SHA-1 after a 16-bit seed: `1:` and the hash in base64.

use super::key::{IpFlow, PROTO_ICMP, PROTO_ICMPV6};
use base64::Engine as _;
use sha1::{Digest, Sha1};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// ICMP messages that have a counterpart (echo and echo reply, timestamp, information,
/// router solicitation and advertisement, address mask): a request and its reply are one
/// flow.
const ICMP_PAIRS: [(u16, u16); 5] = [(8, 0), (13, 14), (15, 16), (10, 9), (17, 18)];
/// The same for ICMPv6: echo, multicast listener query and report, router and neighbour
/// solicitation and advertisement, who-are-you, home agent address discovery.
const ICMPV6_PAIRS: [(u16, u16); 6] = [
    (128, 129),
    (130, 131),
    (133, 134),
    (135, 136),
    (139, 140),
    (144, 145),
];
/// The version a Community ID's text starts with.
const VERSION_PREFIX: &str = "1:";
const HASH_BYTES: usize = 20;

/// A flow's Community ID (version 1): the SHA-1 of its tuple, in one order for both
/// directions. Printed and parsed as Zeek and Suricata print it: `1:` and base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommunityId(pub [u8; HASH_BYTES]);

/// A text that is not a Community ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommunityIdError {
    #[error("{0:?} is not a Community ID: it starts with its version, \"1:\"")]
    NotVersionOne(String),
    #[error("{0:?} is not a Community ID: after \"1:\" comes the base64 of a 20-byte hash")]
    NotAHash(String),
}

impl CommunityId {
    /// The Community ID of `flow` with `seed` (0 unless the sensors that name flows were
    /// given another). A flow without ports (a later fragment, a protocol without them) is
    /// hashed without them, as the specification does for protocols without ports.
    pub fn of(flow: &IpFlow, seed: u16) -> CommunityId {
        let (ports, one_way) = port_equivalents(flow);
        let (source, destination) = (Octets::of(flow.source), Octets::of(flow.destination));
        let in_order = one_way
            || (source.as_slice(), ports.map(|p| p.0))
                < (destination.as_slice(), ports.map(|p| p.1));
        let (first, second, ports) = match in_order {
            true => (source, destination, ports),
            false => (destination, source, ports.map(|(from, to)| (to, from))),
        };
        let mut hash = Sha1::new();
        hash.update(seed.to_be_bytes());
        hash.update(first.as_slice());
        hash.update(second.as_slice());
        hash.update([flow.protocol, 0]);
        if let Some((from, to)) = ports {
            hash.update(from.to_be_bytes());
            hash.update(to.to_be_bytes());
        }
        CommunityId(hash.finalize().into())
    }
}

/// The ports the hash takes, and whether the flow is one way (never reordered). ICMP and
/// ICMPv6 take the message type and, for a message with a counterpart, the counterpart's
/// type, so that a request and its reply meet; other messages are one way, type and code.
fn port_equivalents(flow: &IpFlow) -> (Option<(u16, u16)>, bool) {
    let Some((first, second)) = flow.ports else {
        return (None, false);
    };
    let pairs: &[(u16, u16)] = match flow.protocol {
        PROTO_ICMP => &ICMP_PAIRS,
        PROTO_ICMPV6 => &ICMPV6_PAIRS,
        _ => return (Some((first, second)), false),
    };
    let counterpart = pairs.iter().find_map(|&(request, reply)| match first {
        _ if first == request => Some(reply),
        _ if first == reply => Some(request),
        _ => None,
    });
    match counterpart {
        Some(other) => (Some((first, other)), false),
        None => (Some((first, second)), true),
    }
}

/// An address's bytes as the hash takes them: 4 for IPv4, 16 for IPv6.
#[derive(Clone, Copy)]
struct Octets {
    bytes: [u8; 16],
    len: usize,
}

impl Octets {
    fn of(address: IpAddr) -> Octets {
        let mut bytes = [0u8; 16];
        match address {
            IpAddr::V4(v4) => {
                bytes[..4].copy_from_slice(&v4.octets());
                Octets { bytes, len: 4 }
            }
            IpAddr::V6(v6) => Octets {
                bytes: v6.octets(),
                len: 16,
            },
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl fmt::Display for CommunityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = base64::engine::general_purpose::STANDARD.encode(self.0);
        write!(f, "{VERSION_PREFIX}{text}")
    }
}

impl FromStr for CommunityId {
    type Err = CommunityIdError;

    fn from_str(text: &str) -> Result<CommunityId, CommunityIdError> {
        let Some(hash) = text.trim().strip_prefix(VERSION_PREFIX) else {
            return Err(CommunityIdError::NotVersionOne(text.to_string()));
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(hash)
            .map_err(|_| CommunityIdError::NotAHash(text.to_string()))?;
        let hash: [u8; HASH_BYTES] = bytes
            .try_into()
            .map_err(|_| CommunityIdError::NotAHash(text.to_string()))?;
        Ok(CommunityId(hash))
    }
}

#[cfg(test)]
mod tests {
    use super::super::key::{PROTO_SCTP, PROTO_TCP, PROTO_UDP};
    use super::*;

    fn flow(protocol: u8, source: &str, destination: &str, ports: Option<(u16, u16)>) -> IpFlow {
        IpFlow {
            source: source.parse().unwrap(),
            destination: destination.parse().unwrap(),
            protocol,
            ports,
            vlan: None,
        }
    }

    fn id(flow: &IpFlow) -> String {
        CommunityId::of(flow, 0).to_string()
    }

    /// The flow the other way.
    fn back(flow: &IpFlow) -> IpFlow {
        IpFlow {
            source: flow.destination,
            destination: flow.source,
            ports: flow.ports.map(|(from, to)| (to, from)),
            ..*flow
        }
    }

    /// Values from the reference implementation (the `communityid` Python package, 1.5.0),
    /// each checked both ways where the flow has two.
    #[test]
    fn ids_are_the_reference_implementations_both_ways() {
        let cases = [
            (
                flow(
                    PROTO_TCP,
                    "128.232.110.120",
                    "66.35.250.204",
                    Some((34855, 80)),
                ),
                "1:LQU9qZlK+B5F3KDmev6m5PMibrg=",
            ),
            (
                flow(PROTO_UDP, "192.168.1.52", "8.8.8.8", Some((54585, 53))),
                "1:d/FP5EW3wiY1vCndhwleRRKHowQ=",
            ),
            (
                flow(PROTO_SCTP, "192.168.170.8", "192.168.170.56", Some((7, 80))),
                "1:jQgCxbku+pNGw8WPbEc/TS/uTpQ=",
            ),
            (
                flow(PROTO_TCP, "2001:db8::1", "2001:db8::2", Some((1234, 443))),
                "1:2h29Psz1danTKrAdwKC8Zw31l2Y=",
            ),
            (
                flow(46, "10.0.0.1", "10.0.0.2", None),
                "1:dCjRyIB3edOtrQeRTaUbPd5raRE=",
            ),
            // The same address on both ends: ordered by port.
            (
                flow(PROTO_TCP, "10.0.0.1", "10.0.0.1", Some((80, 1234))),
                "1:WaobEo3Uyp/JjlL9QX3lvrl1Oag=",
            ),
        ];
        for (flow, expected) in &cases {
            assert_eq!(id(flow), *expected, "{flow}");
            assert_eq!(id(&back(flow)), *expected, "{flow} the other way");
        }
    }

    #[test]
    fn an_icmp_request_and_its_reply_share_an_id_and_a_one_way_message_does_not() {
        let echo = flow(PROTO_ICMP, "192.168.0.89", "192.168.0.1", Some((8, 0)));
        let reply = flow(PROTO_ICMP, "192.168.0.1", "192.168.0.89", Some((0, 0)));
        assert_eq!(id(&echo), "1:X0snYXpgwiv9TZtqg64sgzUn6Dk=");
        assert_eq!(id(&reply), "1:X0snYXpgwiv9TZtqg64sgzUn6Dk=");
        let unreachable = flow(PROTO_ICMP, "10.0.0.2", "10.0.0.1", Some((3, 1)));
        assert_eq!(id(&unreachable), "1:JHjlyD5IJJjl3wHWOMj46lLWZag=");
        let other_way = flow(PROTO_ICMP, "10.0.0.1", "10.0.0.2", Some((3, 1)));
        assert_eq!(id(&other_way), "1:gkoOC4ouXvyYq0Ek/WqwbLoqcxM=");
        let solicit = flow(
            PROTO_ICMPV6,
            "fe80::200:86ff:fe05:80da",
            "fe80::260:97ff:fe07:69ea",
            Some((135, 0)),
        );
        assert_eq!(id(&solicit), "1:dGHyGvjMfljg6Bppwm3bg0LO8TY=");
    }

    #[test]
    fn a_seed_changes_the_id() {
        let tcp = flow(
            PROTO_TCP,
            "128.232.110.120",
            "66.35.250.204",
            Some((34855, 80)),
        );
        let seeded = CommunityId::of(&tcp, 1).to_string();
        assert_eq!(seeded, "1:3V71V58M3Ksw/yuFALMcW0LAHvc=");
    }

    #[test]
    fn an_id_reads_back_as_printed_and_anything_else_is_refused() {
        let tcp = flow(PROTO_TCP, "10.0.0.1", "10.0.0.2", Some((1, 2)));
        let community = CommunityId::of(&tcp, 0);
        assert_eq!(community.to_string().parse::<CommunityId>(), Ok(community));
        assert!(matches!(
            "LQU9qZlK+B5F3KDmev6m5PMibrg=".parse::<CommunityId>(),
            Err(CommunityIdError::NotVersionOne(_))
        ));
        for bad in ["1:not base64!", "1:AAAA", "1:"] {
            assert!(
                matches!(
                    bad.parse::<CommunityId>(),
                    Err(CommunityIdError::NotAHash(_))
                ),
                "{bad}"
            );
        }
    }
}
