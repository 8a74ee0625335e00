//! Packets that span chunks (format 1.4), end to end: datagrams of sizes that fit a chunk
//! badly fill the drive all the same and come back whole (replay, export, verify), and a
//! recording killed with a datagram half written holds every datagram whole or counts it
//! lost, never cut in silence.
//!
//! Each test moves its thread into a network namespace of its own (loopback only) and
//! starts nvrec from there; they skip, saying why, where that is not permitted (not root).

mod common;

use common::*;
use nvrec_netgen::datagram::{make, Template, Verdict};
use std::net::{SocketAddr, UdpSocket};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "datagrams that fit a chunk badly, over seconds of traffic";

/// Starts `nvrec --json record` with `args` and waits until it listens on `port`.
fn start_recorder(args: &[&str], port: SocketAddr) -> Child {
    start_recorder_until(args, || UdpSocket::bind(port).is_err())
}

/// The sequence numbers of a replay of datagrams of `len` bytes, each checked whole.
fn sequences(replayed: &[u8], len: usize) -> Vec<u64> {
    assert_eq!(replayed.len() % len, 0, "whole datagrams only");
    let template = Template::new();
    replayed
        .chunks(len)
        .map(|data| match template.check(data) {
            Verdict::Intact(header) => header.sequence,
            other => panic!("a replayed datagram is not as sent: {other:?}"),
        })
        .collect()
}

/// Datagrams of 44 800 bytes (32 × 1400, a GSO packet's worth: two fit a 128 KiB chunk
/// and a third did not, before 1.4) take no more of the drive than their records: at least
/// 95 % of the chunks written is record bytes, and every datagram comes back whole.
#[test]
fn datagrams_that_fit_a_chunk_badly_fill_it_and_come_back_whole() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("span-fill");
    let target = scratch.path("s.img");
    let port: SocketAddr = "127.0.0.1:5701".parse().unwrap();
    const LEN: usize = 44_800;
    const COUNT: u64 = 1500;
    let child = start_recorder(
        &[
            "--source",
            "udp://127.0.0.1:5701",
            "--duration",
            "5s",
            "--create-size",
            "512M",
            target.to_str().unwrap(),
        ],
        port,
    );
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    for sequence in 0..COUNT {
        sender.send_to(&make(0, sequence, LEN), port).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["network"]["datagrams"], COUNT, "{report}");
    assert_eq!(report["network"]["dropped_socket"], 0, "{report}");

    let replayed = run(nvrec().args(["replay", "--output", "-"]).arg(&target));
    assert!(replayed.status.success(), "{}", text(&replayed));
    assert_eq!(
        sequences(&replayed.stdout, LEN),
        (0..COUNT).collect::<Vec<_>>()
    );
    let verified = run(nvrec().args(["--json", "verify", "--strict"]).arg(&target));
    assert!(
        verified.status.success(),
        "nothing lost: {}",
        text(&verified)
    );
    let recording = &json(&verified)["recordings"][0];
    assert_eq!(recording["records"]["datagrams"], COUNT, "{recording}");
    let chunk_count = recording["chunk_count"].as_u64().unwrap();
    let payload_bytes = recording["payload_bytes"].as_u64().unwrap();
    let written_bytes = chunk_count * (128 << 10);
    let record_share = payload_bytes as f64 / written_bytes as f64;
    let data_share = (COUNT * LEN as u64) as f64 / written_bytes as f64;
    assert!(
        record_share >= 0.95 && data_share >= 0.95,
        "records {record_share:.4}, data {data_share:.4} of {chunk_count} chunks"
    );
    let capture = scratch.path("s.pcapng");
    let exported = run(nvrec()
        .args(["--json", "export", "--output"])
        .arg(&capture)
        .arg(&target));
    assert!(exported.status.success(), "{}", text(&exported));
    assert_eq!(json(&exported)["export"]["packets"], COUNT);
    assert_eq!(json(&exported)["export"]["dropped"], 0);
}

/// Datagrams of 60 000 bytes in 64 KiB chunks: nearly every chunk ends with the first
/// fragment of one. Killed with -9 while they arrive, the recording ends after its last
/// durable chunk, so with a datagram half written: what replays is every datagram before it,
/// whole and in order, and that one is counted lost (one packet, 60 000 bytes, read only in
/// part) by export, verify and replay alike.
#[test]
fn a_recording_killed_mid_datagram_holds_it_whole_or_counts_it_lost() {
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("span-kill");
    let target = scratch.path("k.img");
    let port: SocketAddr = "127.0.0.1:5702".parse().unwrap();
    const LEN: usize = 60_000;
    let mut child = start_recorder(
        &[
            "--source",
            "udp://127.0.0.1:5702",
            "--chunk-size",
            "64K",
            "--create-size",
            "512M",
            target.to_str().unwrap(),
        ],
        port,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sending = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut sequence = 0u64;
            // About 100 MB/s, which the recorder keeps up with: no socket drops.
            while !stop.load(Ordering::Relaxed) {
                let _ = sender.send_to(&make(0, sequence, LEN), port);
                sequence += 1;
                std::thread::sleep(Duration::from_micros(600));
            }
            sequence
        })
    };
    // Killed once 200 datagrams are durable (about 0.12 s of sending).
    wait_recorded(std::slice::from_ref(&target), 200 * LEN as u64);
    child.kill().unwrap();
    let _ = child.wait();
    stop.store(true, Ordering::Relaxed);
    let sent = sending.join().unwrap();

    let replayed = run(nvrec()
        .args(["--json", "replay", "--output"])
        .arg(scratch.path("k.out"))
        .arg(&target));
    let report = json(&replayed);
    let seen = sequences(&std::fs::read(scratch.path("k.out")).unwrap(), LEN);
    assert!(
        seen.len() > 100,
        "what was durable is there: {}",
        seen.len()
    );
    assert!((seen.len() as u64) < sent);
    assert_eq!(
        seen,
        (0..seen.len() as u64).collect::<Vec<_>>(),
        "a prefix, in order"
    );
    let problems = report["problems"].to_string();
    assert_eq!(
        problems.matches("read only in part").count(),
        1,
        "the datagram cut by the kill is named: {report}"
    );
    let exported = run(nvrec()
        .args(["--json", "export", "--output"])
        .arg(scratch.path("k.pcapng"))
        .arg(&target));
    assert!(exported.status.success(), "{}", text(&exported));
    let export = &json(&exported)["export"];
    assert_eq!(export["packets"], seen.len() as u64, "{export}");
    assert_eq!(
        export["dropped"], 1,
        "the datagram cut by the kill: {export}"
    );
    let verified = run(nvrec().args(["--json", "verify"]).arg(&target));
    assert!(
        verified.status.success(),
        "whole, its loss listed: {}",
        text(&verified)
    );
    let records = &json(&verified)["recordings"][0]["records"];
    assert_eq!(records["datagrams"], seen.len() as u64, "{records}");
    assert_eq!(records["dropped"], 1, "{records}");
    assert_eq!(records["by_cause"][0]["cause"], "partial", "{records}");
    assert_eq!(records["by_cause"][0]["bytes"], LEN as u64, "{records}");
    // --strict: any loss is a failure.
    let strict = run(nvrec().args(["verify", "--strict"]).arg(&target));
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict));
    assert!(
        text(&strict).contains("LOSSES (--strict)"),
        "{}",
        text(&strict)
    );
    // ls --losses reads the records and shows the loss with its cause.
    let listed = run(nvrec().args(["ls", "--losses"]).arg(&target));
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(
        text(&listed).contains("LOST 1 datagrams or frames in 1 losses (only part read 1 in 1"),
        "{}",
        text(&listed)
    );
}
