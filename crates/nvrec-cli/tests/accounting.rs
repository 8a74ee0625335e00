//! Exact accounting of network recordings: what a source took and the recording does not
//! hold is counted, with its cause, so that the report and the recording agree to the
//! datagram: at a full target, and for TCP past 65 536 connections.
//!
//! Each test moves its thread into a network namespace of its own (loopback only) and
//! starts nvrec from there; they skip, saying why, where that is not permitted (not root).

mod common;

use common::*;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "seventy thousand TCP connections";

/// A target that fills: the recording ends (exit 5), and the datagrams it had taken and
/// could not store are counted not stored, so that those the report counts, less those,
/// are exactly the packets the export holds.
#[test]
fn a_full_target_counts_what_was_taken_and_not_stored() {
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("full-count");
    let target = scratch.path("f.img");
    let port: SocketAddr = "127.0.0.1:5801".parse().unwrap();
    let child = start_recorder_until(
        &[
            "--source",
            "udp://127.0.0.1:5801",
            "--create-size",
            "12M",
            target.to_str().unwrap(),
        ],
        || UdpSocket::bind(port).is_err(),
    );
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    for sequence in 0..40_000u64 {
        let datagram = nvrec_netgen::datagram::make(0, sequence, 1400);
        let _ = sender.send_to(&datagram, port);
        if sequence % 64 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(5),
        "target full: {}",
        text(&output)
    );
    let network = json(&output)["network"].clone();
    let taken = network["datagrams"].as_u64().unwrap();
    let not_stored = network["not_stored"].as_u64().unwrap();
    assert!(taken > 5000, "{network}");
    assert!(
        not_stored > 0,
        "a full target leaves chunks unwritten: {network}"
    );
    assert_eq!(network["not_stored_exact"], true, "{network}");
    let exported = run(nvrec()
        .args(["--json", "export", "--output"])
        .arg(scratch.path("f.pcapng"))
        .arg(&target));
    assert!(exported.status.success(), "{}", text(&exported));
    let export = &json(&exported)["export"];
    assert_eq!(
        export["packets"].as_u64().unwrap(),
        taken - not_stored,
        "report {network}, export {export}"
    );
    // Every drop the kernel reported is in the recording too, unless it came after the
    // stored end.
    assert!(export["dropped"].as_u64().unwrap() <= network["dropped_socket"].as_u64().unwrap() + 1);
}

/// 70 000 TCP connections, each sending its number and closing, from 8 clients at once:
/// every one is a stream in the recording (numbers of ended connections given again past
/// 65 536), none refused, and the report and the recording count the same reads.
#[test]
fn seventy_thousand_tcp_connections_are_all_recorded_and_counted() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    use std::io::{Read, Write};
    if !own_network() {
        return;
    }
    let scratch = Scratch::new("tcp-70k");
    let target = scratch.path("t.img");
    let address: SocketAddr = "127.0.0.1:5802".parse().unwrap();
    let child = start_recorder_until(
        &[
            "--source",
            "tcp://127.0.0.1:5802",
            "--create-size",
            "256M",
            target.to_str().unwrap(),
        ],
        // The probe sends nothing, and ends as the clients do: once the recorder closes it,
        // it has read its end.
        || {
            std::net::TcpStream::connect(address).is_ok_and(|mut probe| {
                let _ = probe.shutdown(std::net::Shutdown::Write);
                probe.read_to_end(&mut Vec::new()).is_ok()
            })
        },
    );
    const CONNECTIONS: u64 = 70_000;
    const CLIENTS: u64 = 8;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            std::thread::spawn(move || {
                for index in (client..CONNECTIONS).step_by(CLIENTS as usize) {
                    let mut connection = std::net::TcpStream::connect(address).unwrap();
                    connection.write_all(&index.to_le_bytes()).unwrap();
                    connection.shutdown(std::net::Shutdown::Write).unwrap();
                    // The recorder closes once it has read the end: no TIME_WAIT here, so
                    // the client ports last.
                    let mut rest = Vec::new();
                    connection.read_to_end(&mut rest).unwrap();
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    // Every connection, the probe's too, was closed by the recorder once it had read its end.
    // SAFETY: kill sends a signal to a process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let network = json(&output)["network"].clone();
    assert_eq!(network["refused_connections"], 0, "{network}");
    assert_eq!(network["not_stored"], 0, "{network}");
    // Per connection a read of its 8 bytes and an END; the probe's END alone.
    let reads = network["datagrams"].as_u64().unwrap();
    assert_eq!(reads, 2 * CONNECTIONS + 1, "{network}");
    let verified = run(nvrec().args(["--json", "verify"]).arg(&target));
    assert!(verified.status.success(), "{}", text(&verified));
    let records = &json(&verified)["recordings"][0]["records"];
    assert_eq!(records["datagrams"], reads, "{records}");
    assert_eq!(records["dropped"], 0, "{records}");
    let replayed = run(nvrec().args(["replay", "--output", "-"]).arg(&target));
    assert!(replayed.status.success(), "{}", text(&replayed));
    let mut numbers: Vec<u64> = replayed
        .stdout
        .chunks(8)
        .map(|bytes| u64::from_le_bytes(bytes.try_into().unwrap()))
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (0..CONNECTIONS).collect::<Vec<_>>());
}
