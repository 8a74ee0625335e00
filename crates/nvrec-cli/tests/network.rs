//! Recording from the network, end to end: UDP, TCP and capture sources, replay, verify,
//! export to PcapNg (read back by a reader of this file's own and, where installed, by
//! tshark and capinfos), replay onto the wire, kill -9, and the arguments refused.
//!
//! Each test moves its thread into a network namespace of its own and starts nvrec from
//! there, so every address used exists only in that namespace: a bare one (unshare) with
//! its loopback, or side B of a test network (`nvrec_netgen::TestNet`: two namespaces
//! joined by a veth pair) whose side A runs the traffic generator. The datagrams are the
//! generator's (sequence numbers and a pattern), checked by its checker. Tests skip, saying
//! why, where that is not permitted (not root).

mod common;

use common::*;
use nvrec_netgen::send::Until;
use nvrec_netgen::{Checker, SendOptions, Side, TestNet};
use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "UDP, TCP and capture recorded, replayed, exported and sent back on namespaces and veth pairs, over seconds of traffic";

/// A test network, this thread moved onto its side B (nvrec started from here records
/// there); None, with the reason printed, where one cannot be made.
fn test_network() -> Option<TestNet> {
    if let Some(reason) = TestNet::unavailable() {
        nvrec_testkit::skip(nvrec_testkit::NET_NAMESPACE, reason);
        return None;
    }
    let net = TestNet::new().expect("making the test network");
    net.enter(Side::B).expect("entering side B");
    Some(net)
}

/// Sends from side A with the generator and returns its report.
fn send_from_a(net: &TestNet, options: SendOptions) -> nvrec_netgen::SendReport {
    net.run_in(Side::A, move || nvrec_netgen::send(&options).unwrap())
        .unwrap()
        .join()
        .unwrap()
}

/// Starts `nvrec --json record` with `args` and waits until it listens on `probe` (and,
/// for UDP, on every address given with --source).
fn start_recorder(args: &[&str], probe: SocketAddr, tcp: bool) -> Child {
    let child = start_one(args, probe, tcp);
    if !tcp {
        for address in args.iter().filter_map(|arg| arg.strip_prefix("udp://")) {
            let address: SocketAddr = address.parse().unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while UdpSocket::bind(address).is_ok() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    child
}

fn start_one(args: &[&str], probe: SocketAddr, tcp: bool) -> Child {
    start_recorder_until(args, || match tcp {
        true => std::net::TcpListener::bind(probe).is_err(),
        false => UdpSocket::bind(probe).is_err(),
    })
}

fn finish(child: Child) -> serde_json::Value {
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    json(&output)
}

/// Datagram `sequence` of `stream`, `len` bytes: the generator's format.
fn datagram(stream: u8, sequence: u32, len: usize) -> Vec<u8> {
    nvrec_netgen::datagram::make(stream.into(), sequence.into(), len)
}

/// The datagrams of a replay of fixed-size datagrams, each checked against its pattern
/// and stream: the sequence numbers seen, in order.
fn sequences(replayed: &[u8], stream: u8, len: usize) -> Vec<u32> {
    assert_eq!(replayed.len() % len, 0);
    let template = nvrec_netgen::datagram::Template::new();
    replayed
        .chunks(len)
        .map(|data| match template.check(data) {
            nvrec_netgen::datagram::Verdict::Intact(header) => {
                assert_eq!(header.stream, u32::from(stream));
                header.sequence as u32
            }
            other => panic!("a replayed datagram is not as sent: {other:?}"),
        })
        .collect()
}

/// Counts the blocks of a PcapNg file by type, read here without any library, so that the
/// export is checked by a reader independent of the one that wrote it.
fn pcapng_blocks(bytes: &[u8]) -> std::collections::BTreeMap<u32, usize> {
    let mut counts = std::collections::BTreeMap::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        assert!(
            len >= 12 && len.is_multiple_of(4) && at + len <= bytes.len(),
            "block at {at}"
        );
        let trailer = u32::from_le_bytes(bytes[at + len - 4..at + len].try_into().unwrap());
        assert_eq!(trailer as usize, len, "block at {at} ends with its length");
        *counts.entry(kind).or_default() += 1;
        at += len;
    }
    assert_eq!(at, bytes.len(), "the file is whole blocks");
    counts
}

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const EPB: u32 = 6;
const ISB: u32 = 5;

/// tshark's and capinfos's word on a capture file, where they are installed: the number of
/// packets, which both must agree on.
fn wireshark_count(path: &std::path::Path) -> Option<usize> {
    // One line per frame: a summary line may be several for payloads a dissector's
    // heuristics take for another protocol.
    let output = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-e", "frame.number"])
        .output()
        .ok()?;
    assert!(output.status.success(), "tshark: {}", text(&output));
    assert!(
        output.stderr.is_empty() || !text(&output).contains("appears to"),
        "{}",
        text(&output)
    );
    let capinfos = Command::new("capinfos")
        .arg("-c")
        .arg("-M")
        .arg(path)
        .output()
        .ok()?;
    assert!(capinfos.status.success(), "capinfos: {}", text(&capinfos));
    let tshark_count = String::from_utf8_lossy(&output.stdout).lines().count();
    let capinfos_count: usize = String::from_utf8_lossy(&capinfos.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("Number of packets:"))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("capinfos: {}", text(&capinfos)));
    assert_eq!(tshark_count, capinfos_count, "tshark and capinfos agree");
    Some(tshark_count)
}

#[test]
fn udp_streams_round_trip_with_exact_counts() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let Some(net) = test_network() else { return };
    let scratch = Scratch::new("udp");
    let (a, b) = (scratch.path("a.img"), scratch.path("b.img"));
    let ports: [SocketAddr; 2] = [
        "10.231.0.2:5301".parse().unwrap(),
        "10.231.0.2:5302".parse().unwrap(),
    ];
    let child = start_recorder(
        &[
            "--source",
            "udp://10.231.0.2:5301",
            "--source",
            "udp://10.231.0.2:5302",
            "--duration",
            "3s",
            "--create-size",
            "256M",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
        ports[0],
        false,
    );
    const COUNT: u32 = 4000;
    const LEN: usize = 1200;
    // Two streams from the other namespace, over the veth pair, in GSO messages, paced.
    let mut options = SendOptions::new(ports[0]);
    options.streams = 2;
    options.until = Until::Count(COUNT.into());
    options.datagram_bytes = LEN;
    options.rate_bits_per_s = Some(1_000_000_000);
    let sent = send_from_a(&net, options);
    assert_eq!(sent.datagrams, 2 * u64::from(COUNT));
    assert!(sent.segments > 1, "sent with GSO");
    let report = finish(child);
    assert_eq!(report["network"]["datagrams"], 2 * COUNT as u64, "{report}");
    assert_eq!(report["network"]["dropped_socket"], 0);
    for stream in 0..2u8 {
        let output = run(nvrec()
            .args(["replay", "--stream", &stream.to_string(), "--output", "-"])
            .args([&a, &b]));
        assert!(output.status.success(), "{}", text(&output));
        let seen = sequences(&output.stdout, stream, LEN);
        assert_eq!(
            seen,
            (0..COUNT).collect::<Vec<_>>(),
            "stream {stream} whole and in order"
        );
        let mut checker = Checker::new();
        checker.fixed_size(&output.stdout, LEN);
        let check = checker.report_expecting(1, COUNT.into());
        assert!(check.is_perfect(), "{check:?}");
        assert_eq!(check.unique, u64::from(COUNT));
    }
    let verified = run(nvrec().args(["--json", "verify"]).args([&a, &b]));
    assert!(verified.status.success(), "{}", text(&verified));
    assert_eq!(
        json(&verified)["recordings"][0]["records"]["datagrams"],
        2 * COUNT as u64
    );

    let capture = scratch.path("udp.pcapng");
    let exported = run(nvrec()
        .args(["--json", "export", "--format", "pcapng", "--output"])
        .arg(&capture)
        .args([&a, &b]));
    assert!(exported.status.success(), "{}", text(&exported));
    assert_eq!(json(&exported)["export"]["packets"], 2 * COUNT as u64);
    let blocks = pcapng_blocks(&std::fs::read(&capture).unwrap());
    assert_eq!(blocks[&SHB], 1);
    assert_eq!(blocks[&IDB], 2, "an interface per stream");
    assert_eq!(blocks[&EPB], 2 * COUNT as usize);
    assert_eq!(blocks[&ISB], 2);
    match wireshark_count(&capture) {
        Some(packets) => assert_eq!(packets, 2 * COUNT as usize),
        None => eprintln!("note: tshark not installed; the export was read by this test only"),
    }
    // One stream only, and the window of the first half second.
    let one = scratch.path("one.pcapng");
    let exported = run(nvrec()
        .args(["--json", "export", "--stream", "1", "--output"])
        .arg(&one)
        .args([&a, &b]));
    assert!(exported.status.success(), "{}", text(&exported));
    assert_eq!(
        pcapng_blocks(&std::fs::read(&one).unwrap())[&EPB],
        COUNT as usize
    );
}

#[test]
fn tcp_connections_are_streams_that_replay_byte_exact() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("tcp");
    let target = scratch.path("t.img");
    let address: SocketAddr = "127.0.0.1:5401".parse().unwrap();
    let child = start_recorder(
        &[
            "--source",
            "tcp://127.0.0.1:5401",
            "--duration",
            "3s",
            "--create-size",
            "256M",
            target.to_str().unwrap(),
        ],
        address,
        true,
    );
    let first = noise(20 << 20, 11);
    let second = noise(300_000, 12);
    let mut connection = TcpStream::connect(address).unwrap();
    connection.write_all(&first).unwrap();
    drop(connection);
    let mut connection = TcpStream::connect(address).unwrap();
    connection.write_all(&second).unwrap();
    drop(connection);
    let report = finish(child);
    assert_eq!(
        report["network"]["bytes"],
        (first.len() + second.len()) as u64,
        "{report}"
    );
    for (stream, data) in [(0, &first), (1, &second)] {
        let output = run(nvrec()
            .args(["replay", "--stream", &stream.to_string(), "--output", "-"])
            .arg(&target));
        assert!(output.status.success(), "{}", text(&output));
        assert!(
            output.stdout == *data,
            "connection {stream} replays as sent"
        );
    }
    let capture = scratch.path("tcp.pcapng");
    let exported = run(nvrec()
        .args(["export", "--output"])
        .arg(&capture)
        .arg(&target));
    assert!(exported.status.success(), "{}", text(&exported));
    let blocks = pcapng_blocks(&std::fs::read(&capture).unwrap());
    assert_eq!(blocks[&IDB], 2);
    if let Some(packets) = wireshark_count(&capture) {
        assert_eq!(packets, blocks[&EPB]);
    }
}

#[test]
fn a_capture_keeps_every_frame_or_counts_it_dropped_and_replays_as_pcapng() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("capture");
    let target = scratch.path("c.img");
    let receiver = UdpSocket::bind("127.0.0.1:5501").unwrap();
    let child = nvrec()
        .args([
            "--json",
            "record",
            "--source",
            "capture:lo",
            "--duration",
            "3s",
            "--create-size",
            "256M",
        ])
        .arg(&target)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Frames before the capture runs are not the recording's.
    wait_for_capture();
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    const COUNT: usize = 3000;
    for sequence in 0..COUNT as u32 {
        sender
            .send_to(&datagram(0, sequence, 700), receiver.local_addr().unwrap())
            .unwrap();
    }
    let report = finish(child);
    // The loopback shows each frame twice (sent, received); nothing else runs here.
    let kept = report["network"]["datagrams"].as_u64().unwrap();
    let dropped = report["network"]["dropped_socket"].as_u64().unwrap();
    assert_eq!(kept + dropped, 2 * COUNT as u64, "{report}");
    let replayed = scratch.path("replayed.pcapng");
    let output = run(nvrec()
        .args(["replay", "--output"])
        .arg(&replayed)
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    let blocks = pcapng_blocks(&std::fs::read(&replayed).unwrap());
    assert_eq!(blocks[&EPB] as u64, kept);
    if let Some(packets) = wireshark_count(&replayed) {
        assert_eq!(packets as u64, kept);
    }
}

/// The data of the Enhanced Packet Blocks of a PcapNg file, read here without any library.
fn pcapng_packets(bytes: &[u8]) -> Vec<Vec<u8>> {
    pcapng_blocks(bytes);
    let mut packets = Vec::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        if kind == EPB {
            let captured = u32::from_le_bytes(bytes[at + 20..at + 24].try_into().unwrap()) as usize;
            packets.push(bytes[at + 28..at + 28 + captured].to_vec());
        }
        at += len;
    }
    packets
}

/// Frames sent across the veth pair, captured on side B: with the test network quiet
/// (no ARP, no IPv6), the frames kept plus those the kernel says it dropped are exactly the
/// frames sent, and every kept frame holds the generator's datagrams intact. Sent as GSO
/// messages, a frame is a whole 64 KiB packet (the veth pair does not split it), kept whole.
#[test]
fn a_capture_on_the_veth_pair_accounts_for_every_frame() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let Some(net) = test_network() else { return };
    const LEN: usize = 1400;
    // A socket for the datagrams (never read: the kernel drops what does not fit), so that
    // side B sends no ICMP "port unreachable" back across the pair.
    let _sink = UdpSocket::bind(SocketAddr::new(net.address(Side::B).into(), 5550)).unwrap();
    for (segments, messages) in [(1usize, 3000u64), (44, 300)] {
        let scratch = Scratch::new("veth-capture");
        let target = scratch.path("c.img");
        let child = nvrec()
            .args([
                "--json",
                "record",
                "--source",
                "capture:veth1",
                "--duration",
                "3s",
                "--create-size",
                "512M",
            ])
            .arg(&target)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Frames before the capture runs are not the recording's.
        wait_for_capture();
        let mut options = SendOptions::new(SocketAddr::new(net.address(Side::B).into(), 5550));
        options.until = Until::Count(segments as u64 * messages);
        options.datagram_bytes = LEN;
        options.segments = segments;
        options.batch = 1;
        options.rate_bits_per_s = Some(2_000_000_000);
        let sent = send_from_a(&net, options);
        assert_eq!(sent.segments, segments);
        let report = finish(child);
        let kept = report["network"]["datagrams"].as_u64().unwrap();
        let dropped = report["network"]["dropped_socket"].as_u64().unwrap();
        assert_eq!(kept + dropped, messages, "GSO {segments}: {report}");
        assert_eq!(report["network"]["truncated"], 0, "{report}");
        let capture = scratch.path("c.pcapng");
        let exported = run(nvrec()
            .args(["export", "--output"])
            .arg(&capture)
            .arg(&target));
        assert!(exported.status.success(), "{}", text(&exported));
        let frames = pcapng_packets(&std::fs::read(&capture).unwrap());
        assert_eq!(frames.len() as u64, kept);
        let mut checker = Checker::new();
        for frame in &frames {
            // Ethernet (14), IPv4 (20), UDP (8), then the datagrams back to back.
            assert_eq!(frame.len(), 42 + segments * LEN);
            checker.fixed_size(&frame[42..], LEN);
        }
        let check = checker.report();
        assert_eq!(
            check.damaged + check.foreign + check.duplicates,
            0,
            "{check:?}"
        );
        assert_eq!(check.unique, kept * segments as u64);
        if dropped == 0 {
            assert!(check.is_perfect(), "{check:?}");
        }
        if let Some(packets) = wireshark_count(&capture) {
            assert_eq!(packets as u64, kept);
        }
    }
}

/// A capture sent back onto the wire from the other side: frames recorded on side B's
/// interface (over two capture threads), replayed by side A onto its interface with
/// --send-to iface:, arrive at a receiver on side B whole, once each and in order.
#[test]
fn a_capture_replayed_onto_an_interface_reaches_a_receiver_on_the_other_side() {
    let Some(net) = test_network() else { return };
    let scratch = Scratch::new("iface");
    let target = scratch.path("c.img");
    const COUNT: u64 = 2000;
    const LEN: usize = 1000;
    let port = SocketAddr::new(net.address(Side::B).into(), 5560);
    let sink = UdpSocket::bind(port).unwrap();
    let child = nvrec()
        .args([
            "--json",
            "record",
            "--source",
            "capture:veth1",
            "--capture-threads",
            "2",
            "--duration",
            "2s",
            "--create-size",
            "256M",
        ])
        .arg(&target)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Two threads: the capture takes frames once both are in their fanout group.
    wait_recording(std::slice::from_ref(&target));
    let mut options = SendOptions::new(port);
    options.until = Until::Count(COUNT);
    options.datagram_bytes = LEN;
    options.segments = 1;
    // With the checksum left to offload, the frames captured on a veth interface would not
    // have it filled in, and side B would drop them when they come back.
    options.no_checksum = true;
    options.rate_bits_per_s = Some(100_000_000);
    send_from_a(&net, options);
    let report = finish(child);
    assert_eq!(report["network"]["datagrams"], COUNT, "{report}");
    drop(sink);
    let mut receive = nvrec_netgen::ReceiveOptions::new(port);
    receive.expect = Some(COUNT);
    receive.idle = Duration::from_secs(3);
    receive.duration = Some(Duration::from_secs(30));
    let receiver = nvrec_netgen::recv::Receiver::bind(receive).unwrap();
    let receiving = std::thread::spawn(move || receiver.run().unwrap());
    let replayed = run(net
        .command(Side::A, env!("CARGO_BIN_EXE_nvrec"))
        .args(["--json", "replay", "--pace", "--send-to", "iface:veth0"])
        .arg(&target));
    assert!(replayed.status.success(), "{}", text(&replayed));
    let replay = json(&replayed);
    assert_eq!(replay["sent_datagrams"], COUNT, "{replay}");
    assert_eq!(replay["too_large"], 0);
    let received = receiving.join().unwrap();
    assert!(received.check.is_perfect(), "{received:?}");
    assert_eq!(received.check.unique, COUNT);
    // Paced: 2000 datagrams of 1000 bytes at 100 Mbit/s took 0.16 s to record.
    assert!(received.elapsed_s > 0.1, "{received:?}");
    // An interface that is not there, and a recording of datagrams to an interface.
    let output = run(nvrec()
        .args(["replay", "--send-to", "iface:no-such-interface"])
        .arg(&target));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let output = run(nvrec().args(["replay", "--send-to", "iface:"]).arg(&target));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

#[test]
fn a_recording_killed_mid_stream_exports_what_it_holds() {
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("kill");
    let target = scratch.path("k.img");
    let port: SocketAddr = "127.0.0.1:5601".parse().unwrap();
    let mut child = start_recorder(
        &[
            "--source",
            "udp://127.0.0.1:5601",
            "--sync-interval",
            "100ms",
            "--create-size",
            "256M",
            target.to_str().unwrap(),
        ],
        port,
        false,
    );
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    for sequence in 0..20_000u32 {
        sender.send_to(&datagram(0, sequence, 1000), port).unwrap();
    }
    // Some of it durable: a checkpoint claims datagrams.
    wait_recorded(std::slice::from_ref(&target), 1);
    child.kill().unwrap();
    let _ = child.wait();
    let capture = scratch.path("k.pcapng");
    let exported = run(nvrec()
        .args(["--json", "export", "--output"])
        .arg(&capture)
        .arg(&target));
    assert!(exported.status.success(), "{}", text(&exported));
    let packets = json(&exported)["export"]["packets"].as_u64().unwrap();
    assert!(packets > 0, "what was durable is there");
    assert_eq!(
        pcapng_blocks(&std::fs::read(&capture).unwrap())[&EPB] as u64,
        packets
    );
    if let Some(count) = wireshark_count(&capture) {
        assert_eq!(count as u64, packets);
    }
    // What came back is a prefix of what was sent, in order.
    let output = run(nvrec().args(["replay", "--output", "-"]).arg(&target));
    let seen = sequences(&output.stdout, 0, 1000);
    assert_eq!(seen, (0..seen.len() as u32).collect::<Vec<_>>());
    // The flow index covers what the killed recording holds: its last bucket, whose block
    // was never written, is scanned and named; the answer is a scan's.
    let find = |extra: &[&str]| {
        let output = run(nvrec()
            .args(["--json", "find", "--match", "udp"])
            .args(extra)
            .arg(&target));
        (output.status.code(), json(&output))
    };
    let ((code, indexed), (scan_code, scanned)) = (find(&[]), find(&["--scan"]));
    // A datagram cut by the kill (its first part stored, not the rest) is named by both.
    assert_eq!(code, scan_code, "{indexed}");
    assert_eq!(indexed["holes"], scanned["holes"]);
    assert_eq!(indexed["read"]["how"], "drive_index", "{}", indexed["read"]);
    assert!(
        indexed["read"]["unindexed"].to_string().contains("scanned"),
        "{}",
        indexed["read"]
    );
    assert_eq!(indexed["flows"], scanned["flows"]);
    assert_eq!(indexed["flows"][0]["packets"].as_u64(), Some(packets));
}

/// A recording of datagrams sent back onto the wire, to a receiver in the other namespace:
/// every datagram once, in order, as sent; with --pace, over the time they took to arrive.
#[test]
fn replay_sends_the_datagrams_back_onto_the_wire() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let Some(net) = test_network() else { return };
    let scratch = Scratch::new("send");
    let target = scratch.path("s.img");
    let port: SocketAddr = "10.231.0.2:5701".parse().unwrap();
    let child = start_recorder(
        &[
            "--source",
            "udp://10.231.0.2:5701",
            "--duration",
            "3s",
            "--create-size",
            "128M",
            target.to_str().unwrap(),
        ],
        port,
        false,
    );
    const COUNT: u64 = 2000;
    const LEN: usize = 900;
    // 2000 datagrams of 900 bytes at 20 Mbit/s: 0.72 s.
    let mut options = SendOptions::new(port);
    options.until = Until::Count(COUNT);
    options.datagram_bytes = LEN;
    options.segments = 4;
    options.batch = 1;
    options.rate_bits_per_s = Some(20_000_000);
    let sent = send_from_a(&net, options);
    assert!(sent.elapsed_s > 0.6, "{sent:?}");
    let report = finish(child);
    assert_eq!(report["network"]["datagrams"], COUNT, "{report}");
    for pace in [false, true] {
        let destination = SocketAddr::new(net.address(Side::A).into(), 5702);
        let mut receive = nvrec_netgen::ReceiveOptions::new(destination);
        receive.expect = Some(COUNT);
        receive.idle = Duration::from_secs(3);
        receive.duration = Some(Duration::from_secs(30));
        let receiver = net
            .run_in(Side::A, move || {
                nvrec_netgen::recv::Receiver::bind(receive).unwrap()
            })
            .unwrap()
            .join()
            .unwrap();
        let receiving = std::thread::spawn(move || receiver.run().unwrap());
        let mut replay = nvrec();
        replay
            .args(["--json", "replay", "--send-to"])
            .arg(format!("udp://{destination}"))
            .arg(&target);
        if pace {
            replay.arg("--pace");
        }
        let started = Instant::now();
        let replayed = run(&mut replay);
        let took = started.elapsed();
        assert!(replayed.status.success(), "{}", text(&replayed));
        assert_eq!(
            json(&replayed)["sent_datagrams"],
            COUNT,
            "{}",
            text(&replayed)
        );
        let received = receiving.join().unwrap();
        assert!(received.check.is_perfect(), "pace {pace}: {received:?}");
        assert_eq!(received.check.unique, COUNT);
        assert_eq!(received.check.bytes, COUNT * LEN as u64);
        if pace {
            assert!(
                took.as_secs_f64() > 0.6 && received.elapsed_s > 0.6,
                "paced like the original 0.72 s: took {took:?}, arrived over {} s",
                received.elapsed_s
            );
        }
    }
}

#[test]
fn network_arguments_that_cannot_work_are_refused_before_anything_is_written() {
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("refused");
    let target = scratch.path("never.img");
    let cases: &[&[&str]] = &[
        &["--source", "udp://nonsense"],
        &["--source", "udp://10.99.99.99:5000"],
        &["--source", "udp://127.0.0.1:5000", "--source", "pattern"],
        &[
            "--source",
            "udp://127.0.0.1:5000",
            "--source",
            "tcp://127.0.0.1:5001",
        ],
        &[
            "--source",
            "udp://127.0.0.1:5000",
            "--source",
            "udp://127.0.0.1:5000",
        ],
        &["--source", "udp://127.0.0.1:5000", "--rate", "1G"],
        &["--source", "capture:no-such-interface"],
        &["--source", "capture:"],
        &["--source", "http://127.0.0.1:80"],
        &["--source", "udp://127.0.0.1:5000", "--capture-threads", "2"],
        &["--source", "capture:lo", "--capture-threads", "0"],
        &["--source", "capture:lo", "--snaplen", "300K"],
        &["--source", "capture:lo", "--filter-bpf", "/nonexistent.bpf"],
    ];
    for case in cases {
        let output = run(nvrec()
            .arg("record")
            .args(*case)
            .args(["--create-size", "64M"])
            .arg(&target));
        assert_eq!(output.status.code(), Some(2), "{case:?}: {}", text(&output));
        assert!(!target.exists(), "{case:?} created the target");
    }
    let write = run(nvrec()
        .args(["write", "--source", "udp://127.0.0.1:5000", "--size", "1M"])
        .arg(&target));
    assert_eq!(write.status.code(), Some(2), "{}", text(&write));
    // A byte recording has nothing to export.
    let bytes = scratch.path("bytes.img");
    let recorded = record_stdin(
        std::slice::from_ref(&bytes),
        &noise(1 << 20, 3),
        &["--create-size", "64M"],
    );
    assert!(recorded.status.success(), "{}", text(&recorded));
    let output = run(nvrec()
        .args(["export", "--output"])
        .arg(scratch.path("x.pcapng"))
        .arg(&bytes));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

/// A time window is found from the chunk timestamps (the chunks before it are not read)
/// and cut exactly at the datagrams' own receive times.
#[test]
fn an_export_window_holds_the_datagrams_received_in_it() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("window");
    let (a, b) = (scratch.path("a.img"), scratch.path("b.img"));
    let port: SocketAddr = "127.0.0.1:5801".parse().unwrap();
    let child = start_recorder(
        &[
            "--source",
            "udp://127.0.0.1:5801",
            "--duration",
            "3s",
            "--sync-interval",
            "100ms",
            "--create-size",
            "256M",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
        port,
        false,
    );
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    for sequence in 0..1000u32 {
        sender.send_to(&datagram(0, sequence, 1000), port).unwrap();
    }
    // A gap in the traffic itself, not a wait for the recorder: the windows below cut at
    // 1 s between the two bursts.
    std::thread::sleep(Duration::from_millis(1500));
    for sequence in 1000..2000u32 {
        sender.send_to(&datagram(0, sequence, 1000), port).unwrap();
    }
    finish(child);
    for (window, expected) in [
        (["--from", "1s"], 1000u64),
        (["--to", "1s"], 1000),
        (["--from", "2900ms"], 0),
    ] {
        let capture = scratch.path("w.pcapng");
        let output = run(nvrec()
            .args(["--json", "export", "--output"])
            .arg(&capture)
            .args(window)
            .args([&a, &b]));
        assert!(output.status.success(), "{window:?}: {}", text(&output));
        assert_eq!(json(&output)["export"]["packets"], expected, "{window:?}");
        let blocks = pcapng_blocks(&std::fs::read(&capture).unwrap());
        assert_eq!(blocks.get(&EPB).copied().unwrap_or(0) as u64, expected);
    }
    let output = run(nvrec()
        .args(["replay", "--from", "1s", "--output", "-"])
        .args([&a, &b]));
    assert!(output.status.success(), "{}", text(&output));
    let seen = sequences(&output.stdout, 0, 1000);
    assert_eq!(
        seen.first(),
        Some(&1000),
        "the window starts with the second burst"
    );
    assert_eq!(seen.last(), Some(&1999));
}

/// Datagrams the kernel took in before a stop are recorded, not left in the socket: the
/// recorder is frozen (SIGSTOP) while they arrive, then asked to stop (SIGINT) and thawed.
#[test]
fn a_stop_records_what_the_socket_already_holds() {
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("drain");
    let target = scratch.path("d.img");
    let port: SocketAddr = "127.0.0.1:5901".parse().unwrap();
    let child = start_recorder(
        &[
            "--source",
            "udp://127.0.0.1:5901",
            "--create-size",
            "256M",
            target.to_str().unwrap(),
        ],
        port,
        false,
    );
    let pid = child.id() as libc::pid_t;
    // SAFETY: signals to the recorder this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    for sequence in 0..3000u32 {
        sender.send_to(&datagram(0, sequence, 1000), port).unwrap();
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(pid, libc::SIGINT);
        libc::kill(pid, libc::SIGCONT);
    }
    let report = finish(child);
    assert_eq!(report["outcome"], "stopped", "{report}");
    assert_eq!(report["network"]["datagrams"], 3000, "{report}");
    let output = run(nvrec().args(["replay", "--output", "-"]).arg(&target));
    assert_eq!(
        sequences(&output.stdout, 0, 1000),
        (0..3000).collect::<Vec<_>>()
    );
}
