//! `nvrec find` on a recording of captured frames whose flows the test knows: many flows of
//! IPv4 and IPv6, TCP, UDP, SCTP and ICMP, some VLAN-tagged, both directions, frames that
//! span chunks, frames that are not IP or too short to read, and losses the source
//! recorded. Each answer is held to three truths: what the test sent, tcpdump over the
//! whole recording exported as PcapNg, and the Community IDs of the reference
//! implementation (the `communityid` Python package). An expression that does not parse,
//! an ID that is not one and a recording of bytes are refused with exit 2.

mod common;

use common::{json, nvrec, run, text, Scratch};
use nvrec::control::{Control, Progress};
use nvrec::layout::{encode_loss, encode_packet, Content, Loss, LossCause, Packet};
use nvrec::recording::writer::{self, RecordOptions};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_SCTP: u8 = 132;
const BASE_NS: u64 = 1_790_000_000_000_000_000;

/// A connection of the test's traffic: `a` opens it, `b` answers.
#[derive(Debug, Clone)]
struct Flow {
    protocol: u8,
    a: (IpAddr, u16),
    b: (IpAddr, u16),
    vlan: Option<u16>,
}

impl Flow {
    /// The flow as `nvrec find` prints it, one direction.
    fn text(&self, reply: bool) -> String {
        let (from, to) = if reply {
            (self.b, self.a)
        } else {
            (self.a, self.b)
        };
        let name = match self.protocol {
            PROTO_TCP => "tcp",
            PROTO_UDP => "udp",
            PROTO_SCTP => "sctp",
            _ => "icmp",
        };
        let vlan = self
            .vlan
            .map_or(String::new(), |vlan| format!(" vlan {vlan}"));
        if self.protocol == PROTO_ICMP {
            let kind = if reply { 0 } else { 8 };
            return format!("icmp {} -> {} type {kind} code 0{vlan}", from.0, to.0);
        }
        let address = |(ip, port): (IpAddr, u16)| std::net::SocketAddr::new(ip, port).to_string();
        format!("{name} {} -> {}{vlan}", address(from), address(to))
    }
}

/// The test's flows: untagged IPv4 in 10.0.0.0/8 (which tcpdump filters as nvrec does),
/// tagged IPv4 in 172.16.0.0/16, IPv6 in 2001:db8::/32.
fn flows() -> Vec<Flow> {
    let mut flows = Vec::new();
    for index in 0..24u16 {
        let protocol = [
            PROTO_TCP, PROTO_UDP, PROTO_TCP, PROTO_SCTP, PROTO_ICMP, PROTO_UDP,
        ][usize::from(index % 6)];
        let (a, b, vlan): (IpAddr, IpAddr, Option<u16>) = match index % 4 {
            0 | 1 => (
                format!("10.0.{}.{}", index / 4, 10 + index)
                    .parse()
                    .unwrap(),
                format!("10.1.0.{}", 1 + index % 3).parse().unwrap(),
                None,
            ),
            2 => (
                format!("172.16.0.{}", 10 + index).parse().unwrap(),
                "172.16.1.1".parse().unwrap(),
                Some(100 + index / 4 % 2),
            ),
            _ => (
                format!("2001:db8::{:x}", 0x10 + index).parse().unwrap(),
                "2001:db8:1::1".parse().unwrap(),
                None,
            ),
        };
        let port = if protocol == PROTO_ICMP {
            0
        } else {
            40000 + index
        };
        let service = [80, 53, 443, 7, 0, 5353][usize::from(index % 6)];
        flows.push(Flow {
            protocol,
            a: (a, port),
            b: (b, service),
            vlan,
        });
    }
    flows
}

/// An Ethernet frame of `flow` (the answer where `reply`) with `payload_len` bytes after
/// its transport header.
fn frame(flow: &Flow, reply: bool, payload_len: usize, seed: u64) -> Vec<u8> {
    let (from, to) = if reply {
        (flow.b, flow.a)
    } else {
        (flow.a, flow.b)
    };
    let mut transport = match flow.protocol {
        PROTO_TCP => {
            let mut header = [from.1.to_be_bytes(), to.1.to_be_bytes()].concat();
            header.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
            header
        }
        PROTO_UDP => {
            let len = (8 + payload_len) as u16;
            [
                from.1.to_be_bytes(),
                to.1.to_be_bytes(),
                len.to_be_bytes(),
                [0, 0],
            ]
            .concat()
        }
        PROTO_SCTP => {
            let mut header = [from.1.to_be_bytes(), to.1.to_be_bytes()].concat();
            header.extend_from_slice(&[0; 8]);
            header
        }
        _ => vec![if reply { 0 } else { 8 }, 0, 0, 0, 0, 1, 0, 1],
    };
    transport.extend(common::noise(payload_len, seed));
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    if let Some(vlan) = flow.vlan {
        frame.extend_from_slice(&[0x81, 0x00]);
        frame.extend_from_slice(&vlan.to_be_bytes());
    }
    match (from.0, to.0) {
        (IpAddr::V4(source), IpAddr::V4(destination)) => {
            frame.extend_from_slice(&[0x08, 0x00]);
            let total = (20 + transport.len()) as u16;
            frame.extend_from_slice(&[0x45, 0]);
            frame.extend_from_slice(&total.to_be_bytes());
            frame.extend_from_slice(&[0, 0, 0x40, 0, 64, flow.protocol, 0, 0]);
            frame.extend_from_slice(&source.octets());
            frame.extend_from_slice(&destination.octets());
        }
        (IpAddr::V6(source), IpAddr::V6(destination)) => {
            frame.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            frame.extend_from_slice(&(transport.len() as u16).to_be_bytes());
            // ICMP over IPv6 is ICMPv6; the test's IPv6 flows never use it.
            frame.extend_from_slice(&[flow.protocol, 64]);
            frame.extend_from_slice(&source.octets());
            frame.extend_from_slice(&destination.octets());
        }
        _ => unreachable!("a flow's ends are of one family"),
    }
    frame.extend_from_slice(&transport);
    frame
}

/// What the test sent: per flow text (one direction), its packets.
#[derive(Default)]
struct Sent {
    packets: BTreeMap<String, u64>,
    /// Frames that are not IP (ARP) and too short to read.
    arp: u64,
    unreadable: u64,
    losses: u64,
}

fn encoded_packet(timestamp_ns: u64, data: &[u8]) -> Vec<u8> {
    let packet = Packet {
        stream: 0,
        content: Content::Ethernet,
        timestamp_ns,
        original_len: data.len() as u32,
        data,
        peer: None,
        local: None,
        end: false,
    };
    let mut record = vec![0u8; data.len() + 128];
    let len = encode_packet(&mut record, &packet);
    record.truncate(len);
    record
}

/// 4,000 frames of the test's flows (sizes from 60 bytes to jumbo frames of 9,000, so
/// that many span chunks), with ARP frames, short frames and loss records among them,
/// recorded onto `target` through the library's writer.
fn record_flows(target: &Path) -> Sent {
    let flows = flows();
    let mut sent = Sent::default();
    let mut records = VecDeque::new();
    for index in 0..4000u64 {
        let timestamp_ns = BASE_NS + index * 1_000_000;
        let data = match index {
            _ if index % 301 == 7 => {
                sent.arp += 1;
                let mut arp = vec![0xff; 6];
                arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
                arp.extend(std::iter::repeat_n(0u8, 28));
                arp
            }
            _ if index % 499 == 11 => {
                sent.unreadable += 1;
                vec![1u8; 10]
            }
            _ => {
                let flow = &flows[(index % flows.len() as u64) as usize];
                let reply = index / flows.len() as u64 % 3 == 1;
                let len = match index % 97 {
                    0 => 9000,
                    n => (n as usize * 131) % 1400 + 6,
                };
                *sent.packets.entry(flow.text(reply)).or_default() += 1;
                frame(flow, reply, len, index)
            }
        };
        if index % 1000 == 500 {
            let loss = Loss {
                stream: 0,
                timestamp_ns,
                cause: LossCause::CaptureDrop,
                count: 3,
                bytes: 0,
            };
            let mut record = vec![0u8; 128];
            let len = encode_loss(&mut record, &loss);
            record.truncate(len);
            records.push_back(record);
            sent.losses += 1;
        }
        records.push_back(encoded_packet(timestamp_ns, &data));
    }
    let options = RecordOptions {
        create_len_bytes: Some(64 << 20),
        label: "flows".into(),
        ..RecordOptions::default()
    };
    writer::record(
        &[target.to_path_buf()],
        &mut common::RecordSource { records },
        &options,
        &Control::new(),
        &Progress::default(),
    )
    .expect("the frames are recorded");
    sent
}

fn find(target: &Path, args: &[&str]) -> Value {
    let output = run(nvrec().arg("find").arg(target).args(args).arg("--json"));
    assert!(output.status.success(), "find {args:?}: {}", text(&output));
    json(&output)
}

/// Packets of every flow an answer holds, by flow text.
fn packets_by_flow(answer: &Value) -> BTreeMap<String, u64> {
    answer["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|flow| {
            (
                flow["flow"].as_str().unwrap().to_string(),
                flow["packets"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn total_packets(answer: &Value) -> u64 {
    packets_by_flow(answer).values().sum()
}

/// What the test sent of the flows `keep` (given a flow's text) keeps.
fn sent_where(sent: &Sent, keep: impl Fn(&str) -> bool) -> BTreeMap<String, u64> {
    sent.packets
        .iter()
        .filter(|(flow, _)| keep(flow))
        .map(|(flow, count)| (flow.clone(), *count))
        .collect()
}

/// The packets tcpdump keeps of `pcapng` with `expression`.
fn tcpdump_count(pcapng: &Path, expression: &str) -> u64 {
    let output = Command::new("tcpdump")
        .args(["-n", "-r"])
        .arg(pcapng)
        .arg(expression)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout).lines().count() as u64
}

#[test]
fn find_answers_what_was_sent_and_what_tcpdump_keeps_of_the_export() {
    let scratch = Scratch::new("find");
    let target = scratch.path("flows.img");
    let sent = record_flows(&target);

    // Every flow, both directions, with the packets sent; the rest under their own keys.
    let all = find(&target, &["--match", "ip or ip6"]);
    assert_eq!(packets_by_flow(&all), sent.packets);
    assert_eq!(
        all["losses"].as_array().unwrap().len() as u64,
        sent.losses,
        "{all}"
    );
    assert!(all["holes"].as_array().unwrap().is_empty(), "{all}");
    let others = find(&target, &["--match", "not ip and not ip6"]);
    let flows = others["flows"].as_array().unwrap();
    let count_of = |name: &str| {
        flows
            .iter()
            .filter(|flow| flow["flow"].as_str().unwrap().starts_with(name))
            .map(|flow| flow["packets"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(count_of("ethertype 0x0806"), sent.arp, "{others}");
    assert_eq!(count_of("unreadable"), sent.unreadable, "{others}");
    assert_eq!(
        all["packets_in_window"].as_u64().unwrap(),
        total_packets(&all) + sent.arp + sent.unreadable
    );

    // Expressions, against what was sent.
    let tagged = find(&target, &["--match", "vlan 100 and tcp"]);
    let expected = sent_where(&sent, |flow| {
        flow.starts_with("tcp") && flow.ends_with("vlan 100")
    });
    assert!(!expected.is_empty());
    assert_eq!(packets_by_flow(&tagged), expected);
    let answers = find(
        &target,
        &["--match", "src net 10.1.0.0/16 and (udp or sctp)"],
    );
    let expected = sent_where(&sent, |flow| {
        (flow.starts_with("udp 10.1.") || flow.starts_with("sctp 10.1.")) && !flow.contains("vlan")
    });
    assert!(!expected.is_empty());
    assert_eq!(packets_by_flow(&answers), expected);

    // Against tcpdump over the whole recording exported (untagged traffic, which tcpdump
    // filters without a `vlan` first).
    if !common::tool("tcpdump", "tcpdump", nvrec_testkit::TCPDUMP) {
        return;
    }
    let whole = scratch.path("whole.pcapng");
    let output = run(nvrec()
        .args(["export", "--output"])
        .arg(&whole)
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    for expression in [
        "net 10.0.0.0/8 and tcp",
        "host 10.1.0.2",
        "(dst port 53 or src port 443) and not vlan",
        "ip6 and udp",
        "icmp and net 10.0.0.0/8",
        "src host 10.1.0.1 and not port 80",
        "vlan 101 and host 172.16.1.1",
        "arp",
    ] {
        let answer = find(&target, &["--match", expression]);
        assert_eq!(
            total_packets(&answer),
            tcpdump_count(&whole, expression),
            "{expression}: {answer}"
        );
    }
}

/// The reference implementation's Community ID of each flow, by its text (both
/// directions).
fn reference_ids(flows: &[Flow]) -> BTreeMap<String, String> {
    let mut script = String::from("import communityid as c\nid = c.CommunityID()\n");
    for flow in flows {
        let call = match flow.protocol {
            PROTO_TCP => "make_tcp",
            PROTO_UDP => "make_udp",
            PROTO_SCTP => "make_sctp",
            _ => "make_icmp",
        };
        let (ports_a, ports_b) = match flow.protocol {
            PROTO_ICMP => (8, 0),
            _ => (flow.a.1, flow.b.1),
        };
        script.push_str(&format!(
            "print(id.calc(c.FlowTuple.{call}('{}', '{}', {ports_a}, {ports_b})))\n",
            flow.a.0, flow.b.0
        ));
    }
    let output = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let ids: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(ids.len(), flows.len());
    let mut by_flow = BTreeMap::new();
    for (flow, id) in flows.iter().zip(ids) {
        by_flow.insert(flow.text(false), id.clone());
        by_flow.insert(flow.text(true), id);
    }
    by_flow
}

#[test]
fn community_ids_are_the_reference_implementations_and_find_both_directions() {
    if !common::python_imports(
        "communityid",
        "communityid",
        nvrec_testkit::PYTHON_COMMUNITYID,
    ) {
        return;
    }
    let scratch = Scratch::new("community");
    let target = scratch.path("flows.img");
    let sent = record_flows(&target);
    let expected = reference_ids(&flows());
    let all = find(&target, &["--match", "ip or ip6"]);
    let mut checked = 0;
    for flow in all["flows"].as_array().unwrap() {
        let text = flow["flow"].as_str().unwrap();
        assert_eq!(
            flow["community_id"].as_str(),
            expected.get(text).map(String::as_str),
            "{text}"
        );
        checked += 1;
    }
    assert_eq!(checked, sent.packets.len());
    // A Community ID finds both directions of its connection, and only them.
    for flow in flows().iter().step_by(5) {
        let id = &expected[&flow.text(false)];
        let answer = find(&target, &["--community-id", id]);
        let expected = sent_where(&sent, |text| {
            text == flow.text(false) || text == flow.text(true)
        });
        assert_eq!(packets_by_flow(&answer), expected, "{id}");
    }
}

#[test]
fn what_find_cannot_take_is_refused_with_exit_2() {
    let scratch = Scratch::new("find-refused");
    let target = scratch.path("flows.img");
    record_flows(&target);
    let refused = |args: &[&str], says: &str| {
        let output = run(nvrec().arg("find").arg(&target).args(args));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(text(&output).contains(says), "{args:?}: {}", text(&output));
    };
    refused(&["--match", "host 10.0.0.1 and"], "column 18");
    refused(&["--match", "port 99999"], "column 6");
    refused(
        &["--community-id", "2:LQU9qZlK+B5F3KDmev6m5PMibrg="],
        "\"1:\"",
    );
    refused(&["--community-id", "1:abc"], "20-byte hash");
    refused(&[], "--community-id");
    // A recording of bytes holds no flows.
    let bytes = scratch.path("bytes.img");
    let output = run(nvrec()
        .args([
            "record",
            "--source",
            "pattern",
            "--size",
            "1M",
            "--create-size",
            "16M",
        ])
        .arg(&bytes));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec().arg("find").arg(&bytes).args(["--match", "tcp"]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("byte stream"), "{}", text(&output));
}
