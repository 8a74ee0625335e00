//! `nvrec find` on a recording of captured frames whose flows the test knows: many flows of
//! IPv4 and IPv6, TCP, UDP, SCTP and ICMP, some VLAN-tagged, both directions, frames that
//! span chunks, frames that are not IP or too short to read, and losses the source
//! recorded. Each answer is held to three truths: what the test sent, tcpdump over the
//! whole recording exported as PcapNg, and the Community IDs of the reference
//! implementation (the `communityid` Python package). An expression that does not parse,
//! an ID that is not one and a recording of bytes are refused with exit 2. Also: a window
//! that starts inside a chunk, a ring that wrapped, and a capture archived while it
//! records (its flows indexed across the archive's passes), each answered from an archive
//! as from the drives.

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

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "finding flows in captures of seconds of traffic on a veth pair, and a window that starts inside a chunk";

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

/// Records as a network source frames them, each stamped with the wall clock as the
/// recorder takes it (a socket's receive time comes before its chunk's next one begins),
/// with a millisecond's pause every 100 (pacing): a recording whose packets and chunks share
/// one timeline, for windows.
struct StampingSource {
    inner: common::RecordSource,
    taken: u64,
}

impl nvrec::source::Source for StampingSource {
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        // The records this read takes, stamped now (every record's time is its header's
        // bytes 16..24).
        let mut at = 0;
        for record in self.inner.records.iter_mut() {
            if at + record.len() > buf.len() {
                break;
            }
            if self.taken % 100 == 99 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            record[16..24].copy_from_slice(&now.to_le_bytes());
            at += record.len();
            self.taken += 1;
        }
        self.inner.read_at(offset_bytes, buf)
    }

    fn may_block(&self) -> bool {
        self.inner.may_block()
    }

    fn packs_records(&self) -> bool {
        self.inner.packs_records()
    }

    fn ended(&self) -> bool {
        self.inner.ended()
    }
}

/// The losses an answer names, in order.
fn sorted_losses(answer: &Value) -> Vec<String> {
    let mut losses: Vec<String> = answer["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|loss| loss.as_str().unwrap().to_string())
        .collect();
    losses.sort();
    losses
}

/// The needle: a connection of three packets, in the middle of a recording.
fn needle() -> Flow {
    Flow {
        protocol: PROTO_UDP,
        a: ("192.0.2.1".parse().unwrap(), 9999),
        b: ("192.0.2.2".parse().unwrap(), 53),
        vlan: None,
    }
}

/// `frames` frames of the test's flows (sizes from 60 bytes to jumbo frames of 9,000, so
/// that many span chunks), a millisecond apart from `BASE_NS`, with ARP frames, short
/// frames and loss records among them, recorded onto `target` through the library's writer;
/// with `needle`, its three packets in the middle.
fn record_flows(target: &Path, frames: u64, needle: Option<&Flow>) -> Sent {
    let options = RecordOptions {
        create_len_bytes: Some(64 << 20),
        label: "flows".into(),
        ..RecordOptions::default()
    };
    record_flows_with(target, frames, needle, options)
}

/// As [`record_flows`], recorded with `options`.
fn record_flows_with(
    target: &Path,
    frames: u64,
    needle: Option<&Flow>,
    options: RecordOptions,
) -> Sent {
    let (records, sent) = flow_records(frames, needle);
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

/// The records of [`record_flows`], and what they hold.
fn flow_records(frames: u64, needle: Option<&Flow>) -> (VecDeque<Vec<u8>>, Sent) {
    let flows = flows();
    let mut sent = Sent::default();
    let mut records = VecDeque::new();
    for index in 0..frames {
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
            _ if needle.is_some() && (frames / 2..frames / 2 + 3).contains(&index) => {
                let needle = needle.expect("matched");
                let reply = index == frames / 2 + 1;
                *sent.packets.entry(needle.text(reply)).or_default() += 1;
                frame(needle, reply, 200, index)
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
    (records, sent)
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
    let sent = record_flows(&target, 4000, None);

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

    // The packets themselves: an export cut by the same expression holds what `find`
    // counts, VLAN-tagged frames and frames that span chunks too.
    for expression in ["vlan 100 and tcp", "ip6 and udp", "arp", "host 10.1.0.2"] {
        let cut = scratch.path("cut.pcapng");
        let output = run(nvrec()
            .args(["export", "--match", expression, "--output"])
            .arg(&cut)
            .arg(&target));
        assert!(output.status.success(), "{}", text(&output));
        let answer = find(&target, &["--match", expression]);
        assert_eq!(
            tcpdump_count(&cut, ""),
            total_packets(&answer),
            "{expression}"
        );
        std::fs::remove_file(&cut).unwrap();
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
    let sent = record_flows(&target, 4000, None);
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
    record_flows(&target, 4000, None);
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
    // The same for an export cut by flows: refused, and nothing written.
    let out = scratch.path("never.pcapng");
    for (args, says) in [
        (["--match", "host 10.0.0.1 and"], "column 18"),
        (["--flow", "1:abc"], "20-byte hash"),
        (["--format", "mcap"], "--match and --flow"),
    ] {
        let mut command = nvrec();
        command.arg("export").args(args).arg("--output").arg(&out);
        if args[0] == "--format" {
            command.args(["--match", "tcp"]);
        }
        let output = run(command.arg(&target));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(text(&output).contains(says), "{args:?}: {}", text(&output));
        assert!(!out.exists(), "{args:?}: nothing written");
    }
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

/// The flows of every packet an answer holds, by Community ID (both directions summed).
fn packets_by_community_id(answer: &Value) -> BTreeMap<String, u64> {
    let mut by_id = BTreeMap::new();
    for flow in answer["flows"].as_array().unwrap() {
        if let Some(id) = flow["community_id"].as_str() {
            *by_id.entry(id.to_string()).or_default() += flow["packets"].as_u64().unwrap();
        }
    }
    by_id
}

/// DuckDB over the flows objects under `store`: packets by Community ID.
fn duckdb_packets_by_community_id(store: &Path) -> BTreeMap<String, u64> {
    let script = format!(
        "import duckdb\n\
         rows = duckdb.sql(\"select community_id, sum(packets) from read_parquet('{}/**/*.flows.parquet') \
         where community_id is not null group by community_id\").fetchall()\n\
         for id, packets in rows: print(id, packets)\n",
        store.display()
    );
    let output = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let (id, packets) = line.rsplit_once(' ').unwrap();
            (id.to_string(), packets.parse().unwrap())
        })
        .collect()
}

/// The files of the store under `dir` whose names end in `suffix`.
fn objects_ending(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(objects_ending(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The archive keeps each segment's flows beside it as Parquet. `find` over the archive
/// answers from them, reading only the chunks the flows asked for lie in, and gives what
/// the drives' whole scan gives, for the whole recording and for a window; DuckDB reads
/// the same flows from the objects; a damaged flows object sends `find` back to reading
/// every chunk, saying why, with the same answer.
/// `target` archived whole to a directory of `scratch` in segments of 5 MiB: its URL.
fn archive_whole(scratch: &Scratch, target: &Path) -> String {
    let url = format!("file://{}", scratch.path("store").display());
    let output = run(nvrec()
        .env("XDG_STATE_HOME", scratch.path("state"))
        .args([
            "archive",
            "--to",
            &url,
            "--segment-size",
            "5M",
            "--part-size",
            "5M",
        ])
        .arg(target));
    assert!(output.status.success(), "{}", text(&output));
    url
}

/// The queries an archive must answer as the drives do.
const SAME_QUERIES: [&[&str]; 3] = [
    &["--match", "ip or ip6"],
    &["--match", "not ip and not ip6"],
    &["--match", "vlan 101 and host 172.16.1.1"],
];

/// A recording whose index has many blocks (buckets of eight chunks): `find` from the index
/// answers as a scan of every chunk does, over the whole recording and over windows, each
/// query by expression and by Community ID; the needle from a few of its chunks.
#[test]
fn the_index_on_the_drives_answers_as_a_scan_does_over_many_buckets() {
    let scratch = Scratch::new("find-buckets");
    let target = scratch.path("flows.img");
    let sent = record_stamped(&target, 24_000);

    let all = find(&target, &["--match", "ip or ip6"]);
    assert_eq!(packets_by_flow(&all), sent.packets);
    assert_eq!(all["read"]["how"], "drive_index", "{}", all["read"]);
    assert!(
        all["read"]["blocks_read"].as_u64().unwrap() >= 15,
        "{}",
        all["read"]
    );
    let needle_id = all["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|flow| flow["flow"] == needle().text(false).as_str())
        .expect("the needle is found")["community_id"]
        .as_str()
        .unwrap()
        .to_string();
    let by_id: &[&str] = &["--community-id", &needle_id];
    let windows: [&[&str]; 4] = [
        &[],
        &["--from", "40ms"],
        &["--to", "90ms"],
        &["--from", "30ms", "--to", "60ms"],
    ];
    for query in SAME_QUERIES.iter().copied().chain([by_id]) {
        for window in windows {
            let args = [query, window].concat();
            let indexed = find(&target, &args);
            let scanned = find(&target, &[&args[..], &["--scan"]].concat());
            assert_eq!(indexed["read"]["how"], "drive_index", "{args:?}");
            assert_eq!(indexed["flows"], scanned["flows"], "{args:?}");
            assert_eq!(indexed["holes"], scanned["holes"], "{args:?}");
            assert_eq!(sorted_losses(&indexed), sorted_losses(&scanned), "{args:?}");
            if window.len() == 4 && query != by_id {
                // A window reads the blocks of its buckets, not the rest.
                let packets = total_packets(&indexed);
                assert!(packets > 0 && packets < total_packets(&all) / 2, "{args:?}");
                let blocks = indexed["read"]["blocks_read"].as_u64().unwrap();
                assert!(blocks < all["read"]["blocks_read"].as_u64().unwrap() / 2);
            }
        }
    }
    let needle = find(&target, by_id);
    assert_eq!(total_packets(&needle), 3);
    let read = &needle["read"];
    assert!(
        read["chunks_read"].as_u64().unwrap() * 10 < read["chunks_searched"].as_u64().unwrap(),
        "{read}"
    );

    // `nvrec index` holds every block to its chunks, and builds the flows again as
    // Parquet, which DuckDB reads.
    let parquet_dir = scratch.path("rebuilt");
    std::fs::create_dir_all(&parquet_dir).unwrap();
    let parquet = parquet_dir.join("flows.img.flows.parquet");
    let output = run(nvrec()
        .args(["--json", "index", "--parquet"])
        .arg(&parquet)
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    let checked = json(&output);
    let blocks = checked["blocks"].as_u64().unwrap();
    assert!(blocks >= 15, "{checked}");
    assert_eq!(checked["blocks_agree"].as_u64(), Some(blocks), "{checked}");
    assert_eq!(
        checked["packets"].as_u64(),
        Some(total_packets(&find(
            &target,
            &["--match", "ip or ip6 or not ip"]
        )))
    );
    let share = checked["index_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 0.05, "{checked}");
    if common::python_imports("duckdb", "duckdb", nvrec_testkit::PYTHON_DUCKDB) {
        assert_eq!(
            duckdb_packets_by_community_id(&parquet_dir),
            packets_by_community_id(&all)
        );
    }
}

/// Records `frames` of the test's flows (and the needle) with wall-clock times onto
/// `target`, indexed in buckets of eight chunks.
fn record_stamped(target: &Path, frames: u64) -> Sent {
    let (records, sent) = flow_records(frames, Some(&needle()));
    let options = RecordOptions {
        create_len_bytes: Some(64 << 20),
        label: "flows".into(),
        flow_index: writer::FlowIndex::Written {
            bucket_bytes: 1 << 20,
        },
        ..RecordOptions::default()
    };
    let mut source = StampingSource {
        inner: common::RecordSource { records },
        taken: 0,
    };
    writer::record(
        &[target.to_path_buf()],
        &mut source,
        &options,
        &Control::new(),
        &Progress::default(),
    )
    .expect("the frames are recorded");
    sent
}

/// Where chunk `sequence` lies in a target's `bytes` (a one-member set).
fn chunk_on(bytes: &[u8], sequence: u64) -> usize {
    let header_bytes = nvrec::layout::CHUNK_HEADER_SIZE_BYTES;
    (0..bytes.len() - header_bytes)
        .step_by(4096)
        .find(|&at| {
            nvrec::layout::decode_chunk_header(&bytes[at..at + header_bytes])
                .is_ok_and(|header| header.sequence == sequence)
        })
        .expect("the chunk is on the target")
}

/// Changes a byte of chunk `sequence`'s first index record on `target` (a one-member set):
/// its chunk sealed again over the change (`reseal`: a part written wrong, which only the
/// block's own CRC catches), or left to fail its chunk CRC.
fn damage_index_record(target: &Path, sequence: u64, reseal: bool) {
    let mut bytes = std::fs::read(target).unwrap();
    let header_bytes = nvrec::layout::CHUNK_HEADER_SIZE_BYTES;
    let chunk_bytes = 128 << 10;
    let at = chunk_on(&bytes, sequence);
    let slot = &mut bytes[at..at + chunk_bytes];
    let header = nvrec::layout::decode_chunk_header(slot).unwrap();
    let payload = &slot[header_bytes..];
    assert_eq!(
        nvrec::layout::index_records(payload).count(),
        1,
        "chunk {sequence} begins with a block"
    );
    // Past the record's header (64 bytes) and the part's (32): the block's own bytes.
    slot[header_bytes + 64 + 32 + 5] ^= 0x40;
    if reseal {
        header.encode_into(slot).unwrap();
    }
    std::fs::write(target, bytes).unwrap();
}

/// Rewrites chunk `sequence`'s block on `target` (a one-member set) so that it says its
/// first flow has one byte more than it has: a block that reads, and lies.
fn falsify_index_block(target: &Path, sequence: u64) {
    use nvrec::flow::index::{decode_part, PartsJoin};
    let mut bytes = std::fs::read(target).unwrap();
    let header_bytes = nvrec::layout::CHUNK_HEADER_SIZE_BYTES;
    let chunk_bytes = 128 << 10;
    let at = chunk_on(&bytes, sequence);
    let slot = &mut bytes[at..at + chunk_bytes];
    let header = nvrec::layout::decode_chunk_header(slot).unwrap();
    let payload = &slot[header_bytes..];
    let data = nvrec::layout::index_records(payload)
        .next()
        .unwrap()
        .to_vec();
    let part = decode_part(&data).unwrap();
    let mut block = PartsJoin::new().part(&part, 0).unwrap().unwrap();
    block.flows[0].bytes ^= 1;
    let parts = block.parts(data.len() + 64);
    assert_eq!(
        (parts.len(), parts[0].len()),
        (1, data.len()),
        "the same size"
    );
    let record = header_bytes + 64;
    slot[record..record + data.len()].copy_from_slice(&parts[0]);
    header.encode_into(slot).unwrap();
    std::fs::write(target, bytes).unwrap();
}

/// A block of the index that does not read (its part written wrong, or its chunk damaged)
/// is named, and the buckets before it are scanned: the answer is the scan's, the needle's
/// packets all found.
#[test]
fn a_damaged_index_block_is_named_and_what_it_covered_is_scanned() {
    let scratch = Scratch::new("find-damaged-index");
    let target = scratch.path("flows.img");
    let sent = record_stamped(&target, 24_000);
    let queries: [&[&str]; 2] = [&["--match", "ip or ip6"], &["--match", "udp port 9999"]];
    for (sequence, reseal, why) in [(120, true, "fails its CRC"), (80, false, "damaged chunk")] {
        let copy = scratch.path(&format!("damaged-{sequence}.img"));
        std::fs::copy(&target, &copy).unwrap();
        damage_index_record(&copy, sequence, reseal);
        // A damaged chunk is a hole in either answer: find fails, naming it.
        let find_any = |args: &[&str]| {
            let output = run(nvrec().arg("find").arg(&copy).args(args).arg("--json"));
            (output.status.code(), json(&output))
        };
        for query in queries {
            let (code, indexed) = find_any(query);
            let (scan_code, scanned) = find_any(&[query, &["--scan"]].concat());
            assert_eq!(indexed["read"]["how"], "drive_index", "{}", indexed["read"]);
            let notes = indexed["read"]["unindexed"].to_string();
            assert!(
                notes.contains("cannot be read") && notes.contains(why),
                "{notes}"
            );
            assert_eq!(indexed["flows"], scanned["flows"], "{sequence} {query:?}");
            if query == queries[0] {
                assert_eq!(code, scan_code, "{indexed}");
                assert_eq!(code == Some(0), reseal, "{indexed}");
                assert_eq!(indexed["holes"], scanned["holes"], "{sequence} {query:?}");
            } else {
                // The needle lies in none of the damaged chunk's packets, and the block of
                // that chunk's bucket says so: no hole in its answer, where a scan has one.
                assert_eq!(code, Some(0), "{indexed}");
                assert_eq!(total_packets(&indexed), 3);
            }
        }
        if reseal {
            // Nothing of the data was lost: every packet is found.
            let all = find(&copy, &["--match", "ip or ip6"]);
            assert_eq!(packets_by_flow(&all), sent.packets);
        }
        // `nvrec index` names the block it cannot read, and fails.
        let output = run(nvrec().args(["--json", "index"]).arg(&copy));
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        let checked = json(&output);
        assert_eq!(checked["blocks_unreadable"].as_u64(), Some(1), "{checked}");
        assert!(checked["unindexed"].to_string().contains(why), "{checked}");
    }
    // A block that reads and says what its chunks do not hold: `index` names it and fails;
    // find's answer is still the chunks' (it keys the chunks it reads again).
    let lying = scratch.path("lying.img");
    std::fs::copy(&target, &lying).unwrap();
    falsify_index_block(&lying, 96);
    let output = run(nvrec().args(["--json", "index"]).arg(&lying));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let checked = json(&output);
    let differ = checked["blocks_differ"].as_array().unwrap();
    assert_eq!(differ.len(), 1, "{checked}");
    assert_eq!(differ[0]["end_sequence"].as_u64(), Some(96), "{checked}");
    let all = find(&lying, &["--match", "ip or ip6"]);
    assert_eq!(packets_by_flow(&all), sent.packets);
}

/// A power cut while an indexed recording runs (a simulated disk: the writes it had not
/// flushed are dropped, torn at its sectors): on what the disk kept, `find` from the index
/// answers as a scan of every chunk does (the last bucket, whose block was never written,
/// scanned and named), whatever moment the power went.
#[test]
fn after_a_power_cut_the_index_answers_as_a_scan_does() {
    use nvrec::device::{Access, Safety};
    use nvrec::engine::SimDisks;
    use nvrec::recording::disk::Members;
    const DISK_BYTES: u64 = 16 << 20;
    let scratch = Scratch::new("find-power-cut");
    let mut tails = 0;
    for step in 0..8u64 {
        let sim = SimDisks::new(1, DISK_BYTES, 4096, 300 + step);
        sim.slow(0, 200e6);
        sim.crash_at(40 + 10 * step);
        let (records, _) = flow_records(6_000, Some(&needle()));
        let options = RecordOptions {
            chunk_size_bytes: 32 << 10,
            io_chunk_count: 2,
            queue_depth: 4,
            buffer_bytes: 16 * (32 << 10),
            sync_interval: std::time::Duration::from_millis(10),
            flow_index: writer::FlowIndex::Written {
                bucket_bytes: 128 << 10,
            },
            ..RecordOptions::default()
        };
        let _ = writer::record_on(
            Members::Sim(&sim),
            &mut common::RecordSource { records },
            &options,
            &Control::new(),
            &Progress::default(),
        );
        if !sim.crashed() {
            sim.crash();
        }
        let image = scratch.path(&format!("cut-{step}.img"));
        std::fs::write(&image, &sim.power_cut_images().expect("crashed")[0]).unwrap();
        let after = SimDisks::from_images(vec![std::fs::read(&image).unwrap()], 4096, step);
        if nvrec::recording::volume::open_members(Members::Sim(&after), Access::Read, Safety::Check)
            .is_err()
        {
            continue; // The cut came before the set was made.
        }
        for query in [&["--match", "ip or ip6"][..], &["--match", "udp port 9999"]] {
            let output = run(nvrec().arg("find").arg(&image).args(query).arg("--json"));
            let scanned = run(nvrec()
                .arg("find")
                .arg(&image)
                .args(query)
                .args(["--scan", "--json"]));
            if scanned.status.code() == Some(2) {
                break; // No recording on it yet.
            }
            assert_eq!(
                output.status.code(),
                scanned.status.code(),
                "{}",
                text(&output)
            );
            let (indexed, scanned) = (json(&output), json(&scanned));
            assert_eq!(indexed["read"]["how"], "drive_index", "step {step}");
            assert_eq!(indexed["flows"], scanned["flows"], "step {step} {query:?}");
            assert_eq!(indexed["holes"], scanned["holes"], "step {step} {query:?}");
            let blocks = indexed["read"]["blocks_read"].as_u64().unwrap();
            let tail = indexed["read"]["unindexed"]
                .to_string()
                .contains("come after");
            tails += usize::from(tail && blocks > 5);
        }
    }
    assert!(
        tails > 0,
        "some cut came after blocks were written, and left a bucket without one"
    );
}

/// A record the recorder could not key (one that does not decode, a writer's bug or a newer
/// source) leaves its bucket's block without it: `find` from the index reads that bucket
/// whole and names it, with the hole a scan names.
#[test]
fn a_bucket_with_records_the_recorder_could_not_key_is_scanned() {
    let scratch = Scratch::new("find-unkeyed");
    let target = scratch.path("flows.img");
    let (mut records, _) = flow_records(6_000, Some(&needle()));
    // A record of no known kind (9), in the middle.
    let mut bad = records[3_000].clone();
    bad[0] = 9;
    records.insert(3_000, bad);
    let options = RecordOptions {
        create_len_bytes: Some(64 << 20),
        label: "flows".into(),
        flow_index: writer::FlowIndex::Written {
            bucket_bytes: 1 << 20,
        },
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
    let find_any = |args: &[&str]| {
        let output = run(nvrec().arg("find").arg(&target).args(args).arg("--json"));
        (output.status.code(), json(&output))
    };
    let query: &[&str] = &["--match", "ip or ip6"];
    let (code, indexed) = find_any(query);
    let (scan_code, scanned) = find_any(&[query, &["--scan"]].concat());
    assert_eq!(indexed["read"]["how"], "drive_index", "{}", indexed["read"]);
    let notes = indexed["read"]["unindexed"].to_string();
    assert!(notes.contains("could not key"), "{notes}");
    assert_eq!((code, scan_code), (Some(1), Some(1)), "{indexed}");
    assert_eq!(indexed["holes"], scanned["holes"]);
    assert_eq!(indexed["flows"], scanned["flows"]);
}

#[test]
fn an_archive_answers_find_from_the_flows_beside_its_segments() {
    let scratch = Scratch::new("find-archive");
    let target = scratch.path("flows.img");
    let sent = record_flows(&target, 24_000, Some(&needle()));
    let url = archive_whole(&scratch, &target);
    let store = scratch.path("store");
    let flows_objects = objects_ending(&store, ".flows.parquet");
    assert!(flows_objects.len() >= 3, "{flows_objects:?}");
    let segments: Vec<_> = flows_objects
        .iter()
        .map(|path| {
            path.with_file_name(
                path.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .replace(".flows.parquet", ""),
            )
        })
        .collect();
    assert!(
        segments.iter().all(|segment| segment.is_file()),
        "a flows object beside each segment, and each beside one: {flows_objects:?}"
    );
    assert_eq!(
        objects_ending(&store, "")
            .iter()
            .filter(|p| p.to_string_lossy().contains("/seg-"))
            .count(),
        2 * flows_objects.len()
    );

    for query in SAME_QUERIES {
        let drives = find(&target, query);
        let scanned = find(&target, &[query, &["--scan"][..]].concat());
        let archive = find(Path::new(&url), query);
        assert_eq!(drives["read"]["how"], "drive_index", "{drives}");
        assert_eq!(scanned["read"]["how"], "scanned", "{scanned}");
        assert_eq!(archive["read"]["how"], "indexed", "{archive}");
        assert_eq!(archive["flows"], scanned["flows"], "{query:?}");
        assert_eq!(drives["flows"], scanned["flows"], "{query:?}");
        assert_eq!(archive["holes"], scanned["holes"], "{query:?}");
        assert_eq!(drives["holes"], scanned["holes"], "{query:?}");
    }
    // The needle, both directions by its Community ID, from a few of the chunks.
    let all = find(&target, &["--match", "ip or ip6"]);
    assert_eq!(packets_by_flow(&all), sent.packets);
    let needle_text = needle().text(false);
    let needle_id = all["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|flow| flow["flow"] == needle_text.as_str())
        .expect("the needle is found")["community_id"]
        .as_str()
        .unwrap()
        .to_string();
    let archive = find(Path::new(&url), &["--community-id", &needle_id]);
    let drives = find(&target, &["--community-id", &needle_id]);
    assert_eq!(archive["flows"], drives["flows"]);
    assert_eq!(total_packets(&archive), 3);
    let read = &archive["read"];
    assert!(
        read["chunks_read"].as_u64().unwrap() * 20 < read["chunks_searched"].as_u64().unwrap(),
        "{read}"
    );

    // The needle's packets exported from the archive: only its chunks read, the packets
    // those the drives' export holds.
    let from_archive = scratch.path("needle-archive.pcapng");
    let from_drives = scratch.path("needle-drives.pcapng");
    for (source, out) in [
        (Path::new(&url), &from_archive),
        (target.as_path(), &from_drives),
    ] {
        let output = run(nvrec()
            .args(["--json", "export", "--flow", &needle_id, "--output"])
            .arg(out)
            .arg(source));
        assert!(output.status.success(), "{}", text(&output));
        let report = json(&output);
        let expected = if source == target.as_path() {
            "drive_index"
        } else {
            "indexed"
        };
        assert_eq!(report["read"]["how"], expected, "{report}");
        let read = &report["read"];
        assert!(
            read["chunks_read"].as_u64().unwrap() * 20 < read["chunks_searched"].as_u64().unwrap(),
            "{read}"
        );
    }
    if common::tool("tcpdump", "tcpdump", nvrec_testkit::TCPDUMP) {
        assert_eq!(tcpdump_count(&from_archive, ""), 3);
        assert_eq!(tcpdump_count(&from_drives, ""), 3);
    }

    // The catalog says which recordings saw the needle, from the flows alone.
    let catalog_ls = |args: &[&str]| {
        let output = run(nvrec()
            .env("XDG_STATE_HOME", scratch.path("state"))
            .args(["--json", "catalog", "ls"])
            .args(args));
        assert!(output.status.success(), "{args:?}: {}", text(&output));
        json(&output)["recordings"].as_array().unwrap().len()
    };
    assert_eq!(catalog_ls(&["--community-id", &needle_id]), 1);
    assert_eq!(catalog_ls(&["--host", "192.0.2.2"]), 1);
    assert_eq!(catalog_ls(&["--host", "198.51.100.7"]), 0);
    assert_eq!(
        catalog_ls(&["--community-id", "1:AAAAAAAAAAAAAAAAAAAAAAAAAAA="]),
        0
    );

    // DuckDB reads the flows objects as they are.
    if common::python_imports("duckdb", "duckdb", nvrec_testkit::PYTHON_DUCKDB) {
        assert_eq!(
            duckdb_packets_by_community_id(&store),
            packets_by_community_id(&all)
        );
    }

    // A damaged flows object: named, and every chunk read instead.
    std::fs::write(&flows_objects[1], b"PAR1 not any more").unwrap();
    let query = ["--match", "ip or ip6"];
    let output = run(nvrec().arg("find").arg(&url).args(query));
    assert!(output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not the flows' index"), "{stderr}");
    let archive = find(Path::new(&url), &query);
    assert_eq!(archive["read"]["how"], "scanned", "{archive}");
    let why = archive["read"]["why_not_indexed"].as_str().unwrap();
    assert!(why.contains(".flows.parquet"), "{why}");
    assert_eq!(archive["flows"], all["flows"]);
}

/// Frames stamped when the recorder takes them, a few at a time and a little apart, as a
/// network source stamps what it receives: each lies in a chunk that began before it
/// arrived, so a window that starts between two packets of one chunk starts inside it.
struct Stamping {
    frames: VecDeque<Vec<u8>>,
    stamped: Vec<u64>,
}

impl nvrec::source::Source for Stamping {
    fn read_at(&mut self, _offset_bytes: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        std::thread::sleep(std::time::Duration::from_micros(20));
        let mut at = 0;
        for _ in 0..4 {
            let Some(frame) = self.frames.front() else {
                break;
            };
            let now_ns = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            let record = encoded_packet(now_ns, frame);
            if at + record.len() > buf.len() {
                break;
            }
            buf[at..at + record.len()].copy_from_slice(&record);
            at += record.len();
            self.stamped.push(now_ns);
            self.frames.pop_front();
        }
        Ok(at)
    }

    fn may_block(&self) -> bool {
        false
    }

    fn packs_records(&self) -> bool {
        true
    }

    fn ended(&self) -> bool {
        self.frames.is_empty()
    }
}

/// Packets in a PcapNg export, as its JSON report counts them.
fn exported_packets(source: &Path, from: &str, out: &Path) -> u64 {
    let output = run(nvrec()
        .args([
            "--json", "export", "--format", "pcapng", "--from", from, "--output",
        ])
        .arg(out)
        .arg(source));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    report["export"]["packets"]
        .as_u64()
        .unwrap_or_else(|| panic!("{report}"))
}

/// Enhanced Packet Blocks in a PcapNg file (block type 6), counted block by block.
fn pcapng_packets(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let (mut at, mut packets) = (0, 0);
    while at + 8 <= bytes.len() {
        packets += u64::from(word(at) == 6);
        at += word(at + 4) as usize;
    }
    packets
}

#[test]
fn a_window_that_starts_inside_a_chunk_keeps_the_packets_after_its_start() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("find-window-start");
    let target = scratch.path("stamped.img");
    let flows = flows();
    let frames: VecDeque<Vec<u8>> = (0..3000u64)
        .map(|index| frame(&flows[index as usize % flows.len()], false, 200, index))
        .collect();
    let mut source = Stamping {
        frames,
        stamped: Vec::new(),
    };
    let options = RecordOptions {
        create_len_bytes: Some(16 << 20),
        chunk_size_bytes: 16 << 10,
        label: "stamped".into(),
        ..RecordOptions::default()
    };
    writer::record(
        std::slice::from_ref(&target),
        &mut source,
        &options,
        &Control::new(),
        &Progress::default(),
    )
    .expect("the frames are recorded");
    let stamped = source.stamped;
    assert_eq!(stamped.len(), 3000);
    let whole = total_packets(&find(&target, &["--match", "ip or ip6"]));
    assert_eq!(whole, 3000);

    let url = archive_whole(&scratch, &target);

    // Windows from packets spread over the recording, most of them inside a chunk of
    // about 70 packets: every packet from the window's start on, on the drives and from
    // the archive, found and exported.
    let out = scratch.path("window.pcapng");
    for index in (5..3000).step_by(173) {
        let from_ns = stamped[index];
        let from = nvrec::unit::format_rfc3339_ns(from_ns);
        let expected = stamped.iter().filter(|&&t| t >= from_ns).count() as u64;
        let drives = find(&target, &["--match", "ip or ip6", "--from", &from]);
        assert_eq!(total_packets(&drives), expected, "find from packet {index}");
        let archive = find(Path::new(&url), &["--match", "ip or ip6", "--from", &from]);
        assert_eq!(
            total_packets(&archive),
            expected,
            "archive find from {index}"
        );
        assert_eq!(
            exported_packets(&target, &from, &out),
            expected,
            "export from packet {index}"
        );
        assert_eq!(
            exported_packets(Path::new(&url), &from, &out),
            expected,
            "archive export from packet {index}"
        );
        let output = run(nvrec()
            .args(["replay", "--from", &from, "--output"])
            .arg(&out)
            .arg(&target));
        assert!(output.status.success(), "{}", text(&output));
        assert_eq!(pcapng_packets(&out), expected, "replay from packet {index}");
    }
}

#[test]
fn a_ring_that_wrapped_answers_from_its_archive_as_from_its_drives() {
    let scratch = Scratch::new("find-ring");
    let target = scratch.path("ring.img");
    let options = RecordOptions {
        create_len_bytes: Some(12 << 20),
        fill: nvrec::recording::Fill::Ring { trim: false },
        label: "ring".into(),
        ..RecordOptions::default()
    };
    let sent = record_flows_with(&target, 24_000, None, options);
    let url = archive_whole(&scratch, &target);
    for query in SAME_QUERIES {
        let drives = find(&target, query);
        let archive = find(Path::new(&url), query);
        assert_eq!(archive["flows"], drives["flows"], "{query:?}: {archive}");
        // The packet the ring cut at its oldest chunk is of no flow's: the flows answer.
        assert_eq!(archive["read"]["how"], "indexed", "{archive}");
        assert_eq!(drives["holes"], serde_json::json!([]), "{drives}");
    }
    // The ring kept its newest: fewer packets than were sent, none it did not send.
    let kept = total_packets(&find(&target, &["--match", "ip or ip6"]));
    let all: u64 = sent.packets.values().sum();
    assert!(kept > 0 && kept < all, "{kept} of {all}");
}

/// A ring in buckets of eight chunks, wrapped: the blocks of what it overwrote are gone
/// with it, the rest answer as a scan of what the ring holds does; `nvrec index` finds
/// every block it can hold to chunks agreeing.
#[test]
fn a_wrapped_ring_answers_from_the_blocks_it_kept_as_a_scan_does() {
    let scratch = Scratch::new("find-ring-index");
    let target = scratch.path("ring.img");
    let options = RecordOptions {
        create_len_bytes: Some(12 << 20),
        fill: nvrec::recording::Fill::Ring { trim: false },
        label: "ring".into(),
        flow_index: writer::FlowIndex::Written {
            bucket_bytes: 1 << 20,
        },
        ..RecordOptions::default()
    };
    record_flows_with(&target, 24_000, Some(&needle()), options);
    for query in SAME_QUERIES
        .iter()
        .chain([&["--match", "udp port 9999"][..]].iter())
    {
        let indexed = find(&target, query);
        let scanned = find(&target, &[query, &["--scan"][..]].concat());
        assert_eq!(indexed["read"]["how"], "drive_index", "{}", indexed["read"]);
        assert!(
            indexed["read"]["blocks_read"].as_u64().unwrap() >= 3,
            "{}",
            indexed["read"]
        );
        assert_eq!(indexed["flows"], scanned["flows"], "{query:?}");
    }
    let output = run(nvrec().args(["--json", "index"]).arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    let checked = json(&output);
    assert!(
        checked["blocks_differ"].as_array().unwrap().is_empty(),
        "{checked}"
    );
    assert!(checked["blocks_agree"].as_u64().unwrap() >= 3, "{checked}");
}

/// `command` on `target`, started with its output piped.
/// `nvrec --json record` of a capture on `interface` for 4 s; the caller adds sizes.
fn capture_for_4s(interface: &str) -> Command {
    let mut command = nvrec();
    command.args(["--json", "record", "--source"]);
    command.arg(format!("capture:{interface}"));
    command.args(["--duration", "4s"]);
    command
}

fn started(command: &mut Command, target: &Path) -> std::process::Child {
    command
        .arg(target)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `ls --json` of `target` once it lists its recording as recording.
fn wait_until_recording(target: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let output = run(nvrec().args(["--json", "ls"]).arg(target));
        if output.status.success() && json(&output)["recordings"][0]["state"] == "recording" {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the recording did not start: {}",
            text(&output)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_capture_archived_while_it_records_is_indexed_across_passes_as_the_drives_answer() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    if !common::own_network() {
        return;
    }
    let scratch = Scratch::new("find-follow");
    let target = scratch.path("capture.img");
    // 16 KiB chunks, frames up to 60 KB: most chunk ends, so most segment ends between the
    // archive's passes, fall inside a packet.
    let recorder = started(
        capture_for_4s("lo").args(["--chunk-size", "16K", "--create-size", "512M"]),
        &target,
    );
    common::wait_for_capture();
    wait_until_recording(&target);
    let store = scratch.path("store");
    let url = format!("file://{}", store.display());
    let follower = started(
        nvrec()
            .env("XDG_STATE_HOME", scratch.path("state"))
            .args([
                "--json", "archive", "--to", &url, "--follow", "--poll", "200ms",
            ])
            .args(["--segment-size", "5M", "--part-size", "5M"]),
        &target,
    );
    // About 20 MB/s of datagrams from 200 B to 60 KB for 2.5 s, each seen twice on lo.
    let receiver = std::net::UdpSocket::bind("127.0.0.1:5601").unwrap();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_millis(2500);
    let sizes = [200, 1400, 9000, 30_000, 60_000];
    let mut sent = 0usize;
    while std::time::Instant::now() < until {
        let data = vec![sent as u8; sizes[sent % sizes.len()]];
        sender
            .send_to(&data, receiver.local_addr().unwrap())
            .unwrap();
        sent += 1;
        std::thread::sleep(std::time::Duration::from_micros(800));
    }
    let recorded = recorder.wait_with_output().unwrap();
    assert!(recorded.status.success(), "{}", text(&recorded));
    let followed = follower.wait_with_output().unwrap();
    assert!(followed.status.success(), "{}", text(&followed));
    let report = json(&followed);
    let recording = &report["recordings"][0];
    assert_eq!(recording["outcome"], "archived", "{report}");
    assert!(
        recording["segments_sent_live"].as_u64().unwrap() >= 3,
        "{report}"
    );

    let queries: [&[&str]; 2] = [&["--match", "ip or ip6"], &["--match", "udp and port 5601"]];
    for query in queries {
        let drives = find(&target, query);
        let archive = find(Path::new(&url), query);
        assert_eq!(archive["read"]["how"], "indexed", "{query:?}: {archive}");
        assert_eq!(archive["flows"], drives["flows"], "{query:?}");
        assert_eq!(archive["holes"], drives["holes"], "{query:?}");
    }
    let port = total_packets(&find(&target, &["--match", "udp and port 5601"]));
    assert!(port >= sent as u64, "{port} packets of {sent} datagrams");
}

#[test]
fn a_realistic_mix_captured_on_a_veth_pair_is_found_flow_by_flow_as_it_was_sent() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    use nvrec_netgen::{mix, Side, TestNet};
    if let Some(reason) = TestNet::unavailable() {
        nvrec_testkit::skip(nvrec_testkit::NET_NAMESPACE, reason);
        return;
    }
    let net = TestNet::new().expect("making the test network");
    net.enter(Side::B).expect("entering side B");
    let scratch = Scratch::new("find-mix");
    let target = scratch.path("mix.img");
    let recorder = started(
        capture_for_4s("veth1").args(["--create-size", "256M"]),
        &target,
    );
    common::wait_for_capture();
    let options = mix::MixOptions {
        interface: net.interface(Side::A).to_string(),
        seed: 44,
        flows: 3000,
        frames: 30_000,
        rate_fps: Some(25_000),
        wire_bytes: None,
    };
    let truth = net
        .run_in(Side::A, move || mix::send_mix(&options).unwrap())
        .unwrap()
        .join()
        .unwrap();
    let recorded = recorder.wait_with_output().unwrap();
    assert!(recorded.status.success(), "{}", text(&recorded));
    let report = json(&recorded);
    assert_eq!(report["network"]["dropped_socket"], 0, "{report}");
    assert!(truth.flows.len() > 2000, "{} directions", truth.flows.len());

    // Every direction the generator sent, with its frames and bytes (a VLAN tag the kernel
    // took off put back: its flow and its 4 bytes); nothing else in its addresses (the
    // link's own chatter, IPv6's neighbour discovery, is of other addresses).
    let answer = find(&target, &["--match", "ip or ip6"]);
    let found: BTreeMap<String, (u64, u64)> = answer["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|flow| {
            let text = flow["flow"].as_str().unwrap().to_string();
            (
                text,
                (
                    flow["packets"].as_u64().unwrap(),
                    flow["bytes"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    for sent in &truth.flows {
        assert_eq!(
            found.get(&sent.flow),
            Some(&(sent.packets, sent.bytes)),
            "{}",
            sent.flow
        );
    }
    let ours = |text: &str| {
        ["10.0.", "10.200.", "2001:db8:"]
            .iter()
            .any(|a| text.contains(a))
    };
    let sent: std::collections::BTreeSet<&str> =
        truth.flows.iter().map(|f| f.flow.as_str()).collect();
    let strays: Vec<&String> = found
        .keys()
        .filter(|text| ours(text) && !sent.contains(text.as_str()))
        .collect();
    assert!(strays.is_empty(), "flows never sent: {strays:?}");
}
