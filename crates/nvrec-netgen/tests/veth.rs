//! The generator over a real veth pair between two namespaces: counts exact at a paced
//! rate, several streams, the top rate with GSO, the namespaces gone after drop. Skipped,
//! saying why, without root or iproute2.

use nvrec_netgen::recv::Receiver;
use nvrec_netgen::send::Until;
use nvrec_netgen::{ReceiveOptions, SendOptions, Side, TestNet};
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

fn test_net() -> Option<TestNet> {
    if let Some(reason) = TestNet::unavailable() {
        nvrec_testkit::skip(nvrec_testkit::NET_NAMESPACE, reason);
        return None;
    }
    Some(TestNet::new().expect("making the test network"))
}

/// Starts a receiver on side B, sends from side A, returns both reports.
fn exchange(
    net: &TestNet,
    send: SendOptions,
    receive: ReceiveOptions,
) -> (nvrec_netgen::SendReport, nvrec_netgen::ReceiveReport) {
    let (bound_tx, bound_rx) = std::sync::mpsc::channel();
    let receiver = net
        .run_in(Side::B, move || {
            let receiver = Receiver::bind(receive).unwrap();
            bound_tx.send(()).unwrap();
            receiver.run().unwrap()
        })
        .unwrap();
    bound_rx.recv().unwrap();
    let sender = net
        .run_in(Side::A, move || nvrec_netgen::send(&send).unwrap())
        .unwrap();
    (sender.join().unwrap(), receiver.join().unwrap())
}

#[test]
fn a_paced_stream_crosses_the_pair_whole_and_in_order() {
    let Some(net) = test_net() else { return };
    let destination = SocketAddr::new(net.address(Side::B).into(), 7000);
    let mut send = SendOptions::new(destination);
    send.until = Until::Count(50_000);
    send.datagram_bytes = 1200;
    send.rate_bits_per_s = Some(2_000_000_000);
    let mut receive = ReceiveOptions::new(SocketAddr::new(net.address(Side::B).into(), 7000));
    receive.expect = Some(50_000);
    receive.idle = Duration::from_secs(2);
    let started = Instant::now();
    let (sent, received) = exchange(&net, send, receive);
    assert_eq!(sent.datagrams, 50_000);
    assert_eq!(received.check.unique, 50_000, "{received:?}");
    assert!(received.check.is_perfect(), "{received:?}");
    assert_eq!(received.dropped_socket, 0);
    // 60 MB at 2 Gbit/s take 0.24 s: the pacing held the sender back.
    assert!(sent.elapsed_s > 0.2, "{sent:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // Without GRO the same arrives one datagram per message.
    let mut send = SendOptions::new(destination);
    send.until = Until::Count(5000);
    send.segments = 1;
    let mut receive = ReceiveOptions::new(SocketAddr::new(net.address(Side::B).into(), 7000));
    receive.expect = Some(5000);
    receive.gro = false;
    let (sent, received) = exchange(&net, send, receive);
    assert_eq!(sent.segments, 1);
    assert!(
        received.check.is_perfect() && received.check.unique == 5000,
        "{received:?}"
    );
}

#[test]
fn several_streams_each_get_every_sequence_number() {
    let Some(net) = test_net() else { return };
    let destination = SocketAddr::new(net.address(Side::B).into(), 7100);
    let mut send = SendOptions::new(destination);
    send.until = Until::Count(10_000);
    send.streams = 3;
    send.datagram_bytes = 500;
    send.rate_bits_per_s = Some(1_000_000_000);
    // Three receivers, one port each; the sender numbers stream N to port 7100 + N.
    let handles: Vec<_> = (0..3u16)
        .map(|offset| {
            let mut receive =
                ReceiveOptions::new(SocketAddr::new(net.address(Side::B).into(), 7100 + offset));
            receive.expect = Some(10_000);
            receive.idle = Duration::from_secs(2);
            let receiver = net
                .run_in(Side::B, move || Receiver::bind(receive).unwrap())
                .unwrap()
                .join()
                .unwrap();
            std::thread::spawn(move || receiver.run().unwrap())
        })
        .collect();
    let sent = net
        .run_in(Side::A, move || nvrec_netgen::send(&send).unwrap())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(sent.datagrams, 30_000);
    assert_eq!(sent.datagrams_per_stream, 10_000);
    for (offset, handle) in handles.into_iter().enumerate() {
        let report = handle.join().unwrap();
        assert!(report.check.is_perfect(), "{report:?}");
        assert_eq!(report.check.streams.len(), 1);
        assert_eq!(report.check.streams[0].stream, offset as u32);
        assert_eq!(report.check.streams[0].next_sequence, 10_000);
    }
}

/// As fast as the pair takes, for a second: every datagram is accounted for (arrived, or
/// counted lost, and the kernel's drop counter agrees), and the rate is printed.
#[test]
fn the_top_rate_with_gso_is_accounted_for() {
    let Some(net) = test_net() else { return };
    let destination = SocketAddr::new(net.address(Side::B).into(), 7200);
    let mut send = SendOptions::new(destination);
    send.until = Until::Duration(Duration::from_secs(1));
    send.datagram_bytes = 1472;
    let mut receive = ReceiveOptions::new(destination);
    receive.idle = Duration::from_millis(500);
    let (sent, received) = exchange(&net, send, receive);
    eprintln!(
        "sent {:.1} Gbit/s ({} datagrams of 1472 bytes, {} per GSO message); received {:.1} Gbit/s, \
         {} lost ({} dropped by the receiving socket)",
        sent.rate_bits_per_s / 1e9,
        sent.datagrams,
        sent.segments,
        received.rate_bits_per_s / 1e9,
        received.check.lost,
        received.dropped_socket
    );
    assert!(sent.segments > 1);
    let lost = sent.datagrams - received.check.unique;
    assert_eq!(received.check.damaged + received.check.duplicates, 0);
    assert!(
        received.dropped_socket <= lost,
        "the socket dropped no more than went missing"
    );
}

#[test]
fn the_namespaces_are_gone_after_drop() {
    let Some(net) = test_net() else { return };
    let names = [
        net.namespace(Side::A).to_string(),
        net.namespace(Side::B).to_string(),
    ];
    // The address is there inside, and nowhere in this namespace.
    let inside = net
        .command(Side::A, "ip")
        .args(["-4", "addr", "show", "dev", "veth0"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&inside.stdout).contains("10.231.0.1/24"));
    drop(net);
    let listed = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    for name in names {
        assert!(!listed.contains(&name), "{name} left behind");
    }
}
