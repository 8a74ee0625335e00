//! `nvrec export` in each format, every export opened by the format's own reader: the
//! `sigmf` Python package for SigMF (metadata validated, samples read back, annotations at
//! the losses), the `mcap` Python package for MCAP (every message, channel, time and loss),
//! tcpdump and tshark for a PcapNg cut by a BPF filter. Losses sit at known places: a paced
//! recording's gaps, which `replay --json` names independently, and loss records this test
//! writes into a recording of records itself. And the input refused, with exit 2 and
//! nothing written.
//!
//! The readers are installed when missing (pip, apt) where that works; otherwise the tests
//! skip through nvrec-testkit, naming what is missing.

mod common;

use common::{json, nvrec, run, text, Scratch};
use nvrec::control::{Control, Progress};
use nvrec::layout::{encode_loss, encode_packet, Content, Loss, LossCause, Packet};
use nvrec::recording::writer::{self, RecordOptions};
use serde_json::Value;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "a long export split in parts, SigMF with its losses";

/// Bytes of one ci16_le sample (I and Q).
const SAMPLE_BYTES: u64 = 4;

fn readers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/readers")
}

/// Runs a reader script; its JSON.
fn read_with(script: &str, args: &[&Path]) -> Value {
    let output = Command::new("python3")
        .arg(readers_dir().join(script))
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{script}: {}", text(&output));
    json(&output)
}

/// The gaps `replay --json` names: (bytes lost, stream offset where the gap ends).
fn gaps_replay_names(targets: &[PathBuf], scratch: &Scratch) -> (Vec<(u64, u64)>, PathBuf) {
    let kept = scratch.path("kept.bin");
    let output = run(nvrec()
        .args(["--json", "replay", "--output"])
        .arg(&kept)
        .args(targets));
    assert!(output.status.success(), "{}", text(&output));
    let gaps = common::replay_gaps(&json(&output));
    (gaps, kept)
}

/// A paced pattern recording of IQ samples that outruns its pool: gaps at places the
/// recorder chose, which replay names. Returns the targets, the recording's report, and
/// the gaps.
fn paced_iq_recording(scratch: &Scratch) -> (Vec<PathBuf>, Value, Vec<(u64, u64)>, PathBuf) {
    let targets = vec![scratch.path("a.img")];
    let output = run(nvrec()
        .args(["--json", "record", "--source", "pattern"])
        .args(["--rate", "20GB/s", "--size", "64M", "--buffer", "4M"])
        .args(["--queue-depth", "1", "--create-size", "160M"])
        .args(["--datatype", "ci16_le", "--sample-rate", "2.4e6"])
        .args(["--center-freq", "915e6", "--meta", "core:author=Ada"])
        .args(["--meta", "antenna:gain=3 dBi"])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let (gaps, kept) = gaps_replay_names(&targets, scratch);
    assert!(!gaps.is_empty(), "the recording lost input: {report}");
    (targets, report, gaps, kept)
}

fn export(targets: &[PathBuf], args: &[&str]) -> Value {
    let output = run(nvrec().args(["--json", "export"]).args(args).args(targets));
    assert!(output.status.success(), "{}", text(&output));
    json(&output)
}

/// The numbers `keys` of each segment of the metadata's list `list` (`captures`,
/// `annotations`), in order.
fn segments(read: &Value, list: &str, keys: &[&str]) -> Vec<Vec<u64>> {
    read[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|segment| {
            keys.iter()
                .map(|key| segment[key].as_u64().unwrap())
                .collect()
        })
        .collect()
}

const ANNOTATION_KEYS: [&str; 3] = [
    "core:sample_start",
    "core:sample_count",
    "nvrec:lost_samples",
];

/// SigMF, zero-filled: the package validates the metadata and reads back every sample equal
/// to the pattern with zeros in the gaps, and each loss is an annotation at the sample
/// index of its first lost byte, covering the samples lost. Kept as it is: the samples are
/// the recorded bytes, each loss an annotation (no samples) where the data resumes, with a
/// capture segment there at the stream's own index. A time window starts at a chunk, which
/// its capture segment's global index locates in the stream.
#[test]
fn sigmf_exports_read_back_with_each_loss_at_its_sample() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    if !common::python_imports("sigmf, numpy", "sigmf", nvrec_testkit::PYTHON_SIGMF) {
        return;
    }
    let scratch = Scratch::new("sigmf");
    let (targets, report, gaps, kept) = paced_iq_recording(&scratch);
    let stream_len =
        report["stream_bytes"].as_u64().unwrap() + report["lost_bytes"].as_u64().unwrap();
    let mut expected = vec![0u8; stream_len as usize];
    nvrec::pattern::Pattern::new(0).fill(0, &mut expected);
    for &(len, end) in &gaps {
        expected[(end - len) as usize..end as usize].fill(0);
    }
    let zero = check_zero_filled(&scratch, &targets, &gaps, &expected);
    check_from_the_archive(&scratch, &targets, &zero);
    check_as_kept(&scratch, &targets, &gaps, &kept);
    check_window(&scratch, &targets, &gaps, &expected);
}

fn sigmf_export(targets: &[PathBuf], output: &Path, extra: &[&str]) {
    let output = output.to_str().unwrap();
    let args: Vec<&str> = ["--format", "sigmf", "--output", output]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    export(targets, &args);
}

/// Zero-filled: every sample equal to the pattern with zeros in the gaps, each gap an
/// annotation at its first sample covering its samples. Returns the export's base name.
fn check_zero_filled(
    scratch: &Scratch,
    targets: &[PathBuf],
    gaps: &[(u64, u64)],
    expected: &[u8],
) -> PathBuf {
    let zero = scratch.path("zero");
    sigmf_export(targets, &zero, &["--gaps", "zero"]);
    let expected_path = scratch.path("expected.raw");
    std::fs::write(&expected_path, expected).unwrap();
    let read = read_with("sigmf_read.py", &[&zero, &expected_path]);
    assert_eq!(read["samples_equal"], true, "{read}");
    assert_eq!(read["datatype"], "ci16_le");
    assert_eq!(read["sample_rate"], 2.4e6);
    assert_eq!(read["author"], "Ada");
    let at_gaps: Vec<Vec<u64>> = gaps
        .iter()
        .map(|&(len, end)| {
            vec![
                (end - len) / SAMPLE_BYTES,
                len / SAMPLE_BYTES,
                len / SAMPLE_BYTES,
            ]
        })
        .collect();
    assert_eq!(segments(&read, "annotations", &ANNOTATION_KEYS), at_gaps);
    assert_eq!(read["captures"][0]["core:frequency"], 915e6);
    zero
}

/// Archived (file://) and exported from the archive: the same two files as from the drives.
fn check_from_the_archive(scratch: &Scratch, targets: &[PathBuf], zero: &Path) {
    let url = format!("file://{}", scratch.path("archive").display());
    let output = run(nvrec()
        .env("XDG_STATE_HOME", scratch.path("state"))
        .args(["archive", "--to", &url, "--node", "n"])
        .args(targets));
    assert!(output.status.success(), "{}", text(&output));
    let archived = scratch.path("archived");
    sigmf_export(&[PathBuf::from(&url)], &archived, &["--gaps", "zero"]);
    for extension in ["sigmf-data", "sigmf-meta"] {
        assert!(
            std::fs::read(archived.with_extension(extension)).unwrap()
                == std::fs::read(zero.with_extension(extension)).unwrap(),
            "{extension} from the archive"
        );
    }
}

/// As kept: the samples are the recorded bytes, each gap an annotation of no samples where
/// the data resumes, with a capture segment there at the stream's own index.
fn check_as_kept(scratch: &Scratch, targets: &[PathBuf], gaps: &[(u64, u64)], kept: &Path) {
    let skip = scratch.path("skip");
    sigmf_export(targets, &skip, &[]);
    let read = read_with("sigmf_read.py", &[&skip, kept]);
    assert_eq!(read["samples_equal"], true, "{read}");
    let mut lost = 0;
    let mut in_file = Vec::new();
    let mut expected_captures = vec![vec![0, 0]];
    for &(len, end) in gaps {
        in_file.push(vec![
            (end - len - lost) / SAMPLE_BYTES,
            0,
            len / SAMPLE_BYTES,
        ]);
        lost += len;
        expected_captures.push(vec![(end - lost) / SAMPLE_BYTES, end / SAMPLE_BYTES]);
    }
    if gaps[0].1 == gaps[0].0 {
        expected_captures.remove(0); // A loss before the first sample: its segment starts at 0.
    }
    assert_eq!(segments(&read, "annotations", &ANNOTATION_KEYS), in_file);
    let captures = segments(
        &read,
        "captures",
        &["core:sample_start", "core:global_index"],
    );
    assert_eq!(captures, expected_captures);
}

/// A window: half a millisecond from the first chunk kept after the first gap (the pattern
/// is paced at 20 GB/s, so a chunk is stamped at its stream offset / 20 GB/s). Its data is
/// the pattern from where its capture segment says.
fn check_window(scratch: &Scratch, targets: &[PathBuf], gaps: &[(u64, u64)], expected: &[u8]) {
    let after_gap_ns = gaps[0].1 / 20;
    let from = format!("{after_gap_ns}ns");
    let to = format!("{}ns", after_gap_ns + 500_000);
    let window = scratch.path("window");
    sigmf_export(
        targets,
        &window,
        &["--gaps", "zero", "--from", &from, "--to", &to],
    );
    let data = std::fs::read(scratch.path("window.sigmf-data")).unwrap();
    let meta: Value =
        serde_json::from_slice(&std::fs::read(scratch.path("window.sigmf-meta")).unwrap()).unwrap();
    let first = meta["captures"][0]["core:global_index"].as_u64().unwrap() * SAMPLE_BYTES;
    assert!(first > 0 && !data.is_empty() && data.len() < expected.len() / 2);
    assert!(
        data == expected[first as usize..first as usize + data.len()],
        "the window's samples are the stream's from its global index"
    );
}

/// MCAP of the same paced recording: the reader gives every chunk back as a message of
/// channel `stream 0`, concatenated the stream as kept, with the chunks' times, and each gap
/// as a `loss` metadata record at its stream offset, whatever the compression; the summary
/// indexes chunks, and a seek by time finds the message stamped then.
#[test]
fn mcap_of_a_byte_stream_gives_every_chunk_and_loss_back() {
    if !common::python_imports("mcap, numpy", "mcap", nvrec_testkit::PYTHON_MCAP) {
        return;
    }
    let scratch = Scratch::new("mcap-bytes");
    let (targets, report, gaps, kept) = paced_iq_recording(&scratch);
    for compression in ["zstd", "lz4", "none"] {
        let path = scratch.path(&format!("{compression}.mcap"));
        let exported = export(
            &targets,
            &[
                "--format",
                "mcap",
                "--compression",
                compression,
                "--output",
                path.to_str().unwrap(),
            ],
        );
        let out = scratch.path(compression);
        std::fs::create_dir_all(&out).unwrap();
        let read = read_with("mcap_read.py", &[&path, &out]);
        let messages = read["messages"].as_array().unwrap();
        assert_eq!(
            messages.len() as u64,
            read["message_count"].as_u64().unwrap()
        );
        assert_eq!(
            exported["export"]["messages"].as_u64().unwrap(),
            messages.len() as u64
        );
        assert_eq!(read["channels"].as_object().unwrap().len(), 1);
        let channel = read["channels"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        assert_eq!(read["channels"][&channel]["encoding"], "nvrec.bytes");
        assert_eq!(
            std::fs::read(out.join(format!("channel-{channel}.bin"))).unwrap(),
            std::fs::read(&kept).unwrap(),
            "the messages, in order, are the stream as kept"
        );
        let start_ns = report["start_ns"].as_u64().unwrap_or(0);
        for (index, message) in messages.iter().enumerate() {
            assert_eq!(
                message[1], index as u64,
                "sequence numbers count the messages"
            );
            assert!(message[2].as_u64().unwrap() >= start_ns);
            assert_eq!(message[2], message[3]);
        }
        let losses: Vec<(u64, u64)> = read["metadata"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                assert_eq!(m["name"], "loss");
                (
                    m["lost_bytes"].as_str().unwrap().parse().unwrap(),
                    m["stream_offset_bytes"]
                        .as_str()
                        .unwrap()
                        .parse::<u64>()
                        .unwrap()
                        + m["lost_bytes"].as_str().unwrap().parse::<u64>().unwrap(),
                )
            })
            .collect();
        assert_eq!(losses, gaps);
        assert!(
            read["chunk_count"].as_u64().unwrap() > 1,
            "{}",
            read["chunk_count"]
        );
        let expected_compression = if compression == "none" {
            ""
        } else {
            compression
        };
        assert_eq!(
            read["compression"],
            serde_json::json!([expected_compression])
        );
        let seek = read["seek_time"].as_u64().unwrap();
        let sought = read["sought"].as_array().unwrap();
        assert!(!sought.is_empty() && sought.iter().all(|m| m[2] == seek));
    }
}

/// What the test's recording of records holds, as sent.
#[derive(Default)]
struct Sent {
    /// Per stream: (receive time, data) of each packet, in order.
    packets: Vec<Vec<(u64, Vec<u8>)>>,
    /// (stream, time, count) of each loss record.
    losses: Vec<(u16, u64, u64)>,
    /// Frames of stream 1 to or from UDP port 5000.
    udp_5000: usize,
}

/// An Ethernet frame with IPv4 and UDP (or TCP) headers between two ports, and a payload.
fn frame(tcp: bool, source_port: u16, destination_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let l4_len = if tcp { 20 } else { 8 } + payload.len();
    let total = (20 + l4_len) as u16;
    frame.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64]);
    frame.extend_from_slice(&[if tcp { 6 } else { 17 }, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    frame.extend_from_slice(&source_port.to_be_bytes());
    frame.extend_from_slice(&destination_port.to_be_bytes());
    if tcp {
        frame.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        frame.extend_from_slice(&(l4_len as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
    }
    frame.extend_from_slice(payload);
    frame
}

/// Three streams over 3000 records: UDP datagrams (stream 0), captured frames to and from
/// several ports, UDP and TCP (stream 1), TCP reads (stream 2), with loss records at known
/// places on each; recorded onto `targets` through the library's writer.
fn record_of_records(targets: &[PathBuf]) -> Sent {
    let peer: SocketAddr = "10.0.0.1:4000".parse().unwrap();
    let local: SocketAddr = "10.0.0.2:5000".parse().unwrap();
    let base_ns = 1_790_000_000_000_000_000u64;
    let mut sent = Sent {
        packets: vec![Vec::new(); 3],
        ..Sent::default()
    };
    let mut records = VecDeque::new();
    for index in 0..3000u64 {
        let stream = (index % 3) as u16;
        let timestamp_ns = base_ns + index * 1_000_000;
        if index % 500 == 250 {
            let loss = Loss {
                stream,
                timestamp_ns,
                cause: [
                    LossCause::SocketOverflow,
                    LossCause::CaptureDrop,
                    LossCause::RecorderOverrun,
                ][stream as usize],
                count: index / 100,
                bytes: 0,
            };
            let mut record = vec![0u8; 128];
            let len = encode_loss(&mut record, &loss);
            record.truncate(len);
            records.push_back(record);
            sent.losses.push((stream, timestamp_ns, loss.count));
        }
        let payload = common::noise(40 + (index as usize * 37) % 1400, index);
        let (content, data) = match stream {
            0 => (Content::Udp, payload),
            1 => {
                let ports = [(4000, 5000), (5000, 4000), (4000, 5001), (6000, 7000)];
                let (source_port, destination_port) = ports[(index / 3 % 4) as usize];
                let tcp = index / 3 % 5 == 0;
                if !tcp && (source_port == 5000 || destination_port == 5000) {
                    sent.udp_5000 += 1;
                }
                (
                    Content::Ethernet,
                    frame(tcp, source_port, destination_port, &payload),
                )
            }
            _ => (Content::Tcp, payload),
        };
        let addressed = content != Content::Ethernet;
        let packet = Packet {
            stream,
            content,
            timestamp_ns,
            original_len: data.len() as u32,
            data: &data,
            peer: addressed.then_some(peer),
            local: addressed.then_some(local),
            end: false,
        };
        let mut record = vec![0u8; data.len() + 128];
        let len = encode_packet(&mut record, &packet);
        record.truncate(len);
        records.push_back(record);
        sent.packets[stream as usize].push((timestamp_ns, data));
    }
    let options = RecordOptions {
        create_len_bytes: Some(64 << 20),
        label: "records".into(),
        ..RecordOptions::default()
    };
    writer::record(
        targets,
        &mut common::RecordSource { records },
        &options,
        &Control::new(),
        &Progress::default(),
    )
    .expect("the records are recorded");
    sent
}

/// MCAP of a recording of records: a channel per stream with what it holds, every datagram,
/// read and frame a message with its receive time and its data, in order, and every loss
/// record a `loss` metadata record with its stream, time and count.
#[test]
fn mcap_of_records_gives_every_message_channel_time_and_loss_back() {
    if !common::python_imports("mcap, numpy", "mcap", nvrec_testkit::PYTHON_MCAP) {
        return;
    }
    let scratch = Scratch::new("mcap-records");
    let targets = vec![scratch.path("r.img")];
    let sent = record_of_records(&targets);
    let path = scratch.path("r.mcap");
    export(
        &targets,
        &["--format", "mcap", "--output", path.to_str().unwrap()],
    );
    let out = scratch.path("channels");
    std::fs::create_dir_all(&out).unwrap();
    let read = read_with("mcap_read.py", &[&path, &out]);
    let channels = read["channels"].as_object().unwrap();
    assert_eq!(channels.len(), 3);
    for (id, channel) in channels {
        let stream: usize = channel["metadata"]["stream"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let encoding = ["nvrec.udp", "nvrec.ethernet", "nvrec.tcp"][stream];
        assert_eq!(channel["encoding"], encoding);
        assert_eq!(channel["topic"], format!("stream {stream}"));
        let messages: Vec<&Value> = read["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m[0].as_u64().map(|n| n.to_string()).as_deref() == Some(id.as_str()))
            .collect();
        let expected = &sent.packets[stream];
        assert_eq!(messages.len(), expected.len(), "stream {stream}");
        for (index, (message, (timestamp_ns, data))) in messages.iter().zip(expected).enumerate() {
            assert_eq!(message[1], index as u64);
            assert_eq!(message[2], *timestamp_ns);
            assert_eq!(message[4], data.len() as u64);
        }
        let all: Vec<u8> = expected.iter().flat_map(|(_, data)| data.clone()).collect();
        assert!(std::fs::read(out.join(format!("channel-{id}.bin"))).unwrap() == all);
    }
    let losses: Vec<(u16, u64, u64)> = read["metadata"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let number = |key: &str| m[key].as_str().unwrap().parse::<u64>().unwrap();
            (
                number("stream") as u16,
                number("timestamp_ns"),
                number("count"),
            )
        })
        .collect();
    assert_eq!(losses, sent.losses);
}

/// A capture cut by a BPF filter: `tcpdump -ddd 'udp port 5000'` applied by export keeps
/// exactly the frames tcpdump keeps from the unfiltered export (and those the test sent),
/// tshark reads the same number back, and the list form of the program cuts the same.
#[test]
fn a_pcapng_cut_by_a_bpf_filter_keeps_what_tcpdump_keeps() {
    if !common::tool("tcpdump", "tcpdump", nvrec_testkit::TCPDUMP)
        || !common::tool("tshark", "tshark", nvrec_testkit::TSHARK)
    {
        return;
    }
    let scratch = Scratch::new("filter");
    let targets = vec![scratch.path("r.img")];
    let sent = record_of_records(&targets);
    let expression = "udp port 5000";
    let ddd = Command::new("tcpdump")
        .args(["-ddd", expression])
        .output()
        .unwrap();
    assert!(ddd.status.success(), "{}", text(&ddd));
    let program = scratch.path("udp5000.bpf");
    std::fs::write(&program, &ddd.stdout).unwrap();
    let list: Vec<String> = String::from_utf8_lossy(&ddd.stdout)
        .lines()
        .skip(1)
        .map(|line| {
            format!(
                "[{}]",
                line.split_whitespace().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    let program_list = scratch.path("udp5000.json");
    std::fs::write(&program_list, format!("[{}]", list.join(", "))).unwrap();

    let whole = scratch.path("whole.pcapng");
    export(
        &targets,
        &["--stream", "1", "--output", whole.to_str().unwrap()],
    );
    let by_tcpdump = Command::new("tcpdump")
        .args(["-n", "-r"])
        .arg(&whole)
        .arg(expression)
        .output()
        .unwrap();
    assert!(by_tcpdump.status.success(), "{}", text(&by_tcpdump));
    let tcpdump_count = String::from_utf8_lossy(&by_tcpdump.stdout).lines().count();
    assert_eq!(tcpdump_count, sent.udp_5000);

    for program in [&program, &program_list] {
        let cut = scratch.path("cut.pcapng");
        let exported = export(
            &targets,
            &[
                "--stream",
                "1",
                "--filter-bpf",
                program.to_str().unwrap(),
                "--output",
                cut.to_str().unwrap(),
            ],
        );
        assert_eq!(exported["export"]["packets"], tcpdump_count as u64);
        assert_eq!(
            exported["export"]["filtered_out"],
            (sent.packets[1].len() - tcpdump_count) as u64
        );
        assert_eq!(tshark_frames(&cut, Some("udp.port == 5000")), tcpdump_count);
        assert_eq!(
            tshark_frames(&cut, None),
            tcpdump_count,
            "nothing else is in the cut"
        );
    }
}

/// The frames tshark reads from `path` (that `display_filter` keeps, if any).
fn tshark_frames(path: &Path, display_filter: Option<&str>) -> usize {
    let output = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-e", "frame.number"])
        .args(
            display_filter
                .map(|filter| ["-Y", filter])
                .into_iter()
                .flatten(),
        )
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout).lines().count()
}

/// Records a mebibyte of the pattern onto a new file `target`, with `extra` arguments.
fn record_pattern(extra: &[&str], target: &Path) -> std::process::Output {
    run(nvrec()
        .args(["record", "--source", "pattern", "--size", "1M"])
        .args(["--create-size", "16M"])
        .args(extra)
        .arg(target))
}

/// A datatype SigMF does not have is refused (exit 2) before any target is created.
#[test]
fn a_datatype_sigmf_lacks_is_refused_before_anything_is_created() {
    let scratch = Scratch::new("datatype");
    let made = scratch.path("made.img");
    let output = record_pattern(&["--datatype", "cf16_le", "--sample-rate", "1e6"], &made);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("not a SigMF datatype"),
        "{}",
        text(&output)
    );
    assert!(!made.exists(), "nothing was created");
    let output = record_pattern(&["--datatype", "ci16_le", "--sample-rate", "0"], &made);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(!made.exists(), "nothing was created");
}

/// Bad input exits 2 with a message that says what is wrong, and writes nothing: a filter
/// on a byte stream, SigMF of a recording of records or of one without a datatype, an
/// output that cannot be created, SigMF or MCAP to stdout, options of another format, a
/// filter that is not a program.
#[test]
fn bad_export_input_exits_2_and_writes_nothing() {
    let scratch = Scratch::new("refused");
    let bytes = vec![scratch.path("bytes.img")];
    let output = record_pattern(&[], &bytes[0]);
    assert!(output.status.success(), "{}", text(&output));
    let records = vec![scratch.path("records.img")];
    record_of_records(&records);
    let program = scratch.path("p.bpf");
    std::fs::write(&program, "1\n6 0 0 262144\n").unwrap();
    let bad_program = scratch.path("bad.bpf");
    std::fs::write(&bad_program, "2\n21 5 0 1\n6 0 0 0\n").unwrap();
    let out = scratch.path("out");
    let out_text = out.to_str().unwrap();
    let cases: Vec<(&[PathBuf], Vec<&str>, &str)> = vec![
        (
            &bytes,
            vec!["--filter-bpf", program.to_str().unwrap()],
            "holds a byte stream",
        ),
        (&records, vec!["--format", "sigmf"], "not samples"),
        (
            &bytes,
            vec!["--format", "sigmf"],
            "--datatype and --sample-rate",
        ),
        (
            &bytes,
            vec!["--format", "mcap", "--gaps", "zero"],
            "--gaps zero",
        ),
        (
            &records,
            vec!["--compression", "lz4"],
            "--compression is for MCAP",
        ),
        (
            &records,
            vec![
                "--format",
                "mcap",
                "--filter-bpf",
                program.to_str().unwrap(),
            ],
            "takes no filter",
        ),
        (
            &records,
            vec!["--filter-bpf", bad_program.to_str().unwrap()],
            "jumps past the end",
        ),
        (
            &records,
            vec!["--filter-bpf", "/nonexistent.bpf"],
            "/nonexistent.bpf",
        ),
    ];
    for (targets, args, says) in cases {
        let output = run(nvrec()
            .arg("export")
            .args(&args)
            .args(["--output", out_text])
            .args(targets));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(text(&output).contains(says), "{args:?}: {}", text(&output));
        assert_eq!(
            std::fs::read_dir(&scratch.0).unwrap().count(),
            4,
            "{args:?} wrote nothing"
        );
    }
    for format in ["mcap", "sigmf"] {
        let output = run(nvrec()
            .args(["export", "--format", format, "--output", "-"])
            .args(&bytes));
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    }
    let unwritable = scratch.path("no/such/dir/out.pcapng");
    let output = run(nvrec()
        .arg("export")
        .arg("--output")
        .arg(&unwritable)
        .args(&records));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("creating"), "{}", text(&output));
    assert_eq!(std::fs::read_dir(&scratch.0).unwrap().count(), 4);
}

/// `--split`: by size, a capture's PcapNg comes out in numbered parts that tshark reads
/// one by one and that hold every packet of the whole export between them; by time, a
/// paced byte stream's MCAP comes out in parts holding every chunk; stdout and a split of
/// nothing are refused (exit 2).
#[test]
fn a_split_export_is_numbered_whole_parts_that_add_up_to_the_whole() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    if !common::tool("tshark", "tshark", nvrec_testkit::TSHARK) {
        return;
    }
    let scratch = Scratch::new("split");
    let targets = vec![scratch.path("r.img")];
    record_of_records(&targets);
    let whole = scratch.path("whole.pcapng");
    let exported = export(&targets, &["--output", whole.to_str().unwrap()]);
    let packets = exported["export"]["packets"].as_u64().unwrap();
    let base = scratch.path("cut.pcapng");
    let split = export(
        &targets,
        &["--split", "64K", "--output", base.to_str().unwrap()],
    );
    let parts = split["parts"].as_array().unwrap();
    assert!(parts.len() >= 3, "{split}");
    let mut read = 0;
    for (index, part) in parts.iter().enumerate() {
        let path = scratch.path(&format!("cut-{:04}.pcapng", index + 1));
        assert_eq!(part["path"].as_str().unwrap(), path.to_str().unwrap());
        let frames = tshark_frames(&path, None);
        assert_eq!(frames as u64, part["exported"]["packets"].as_u64().unwrap());
        read += frames as u64;
    }
    assert_eq!(read, packets, "the parts hold every packet once");

    let paced = scratch.path("paced.img");
    let output = record_pattern(&["--rate", "4M", "--chunk-size", "16K"], &paced);
    assert!(output.status.success(), "{}", text(&output));
    let mcap = scratch.path("t.mcap");
    let by_time = export(
        std::slice::from_ref(&paced),
        &[
            "--format",
            "mcap",
            "--split",
            "100ms",
            "--output",
            mcap.to_str().unwrap(),
        ],
    );
    let parts = by_time["parts"].as_array().unwrap();
    assert!(parts.len() >= 2, "{by_time}");
    let messages: u64 = parts
        .iter()
        .map(|part| part["exported"]["messages"].as_u64().unwrap())
        .sum();
    let whole = export(
        std::slice::from_ref(&paced),
        &[
            "--format",
            "mcap",
            "--output",
            scratch.path("w.mcap").to_str().unwrap(),
        ],
    );
    assert_eq!(messages, whole["export"]["messages"].as_u64().unwrap());
    for refused in [
        &["--split", "1M", "--output", "-"][..],
        &["--split", "0s", "--output", "x"][..],
    ] {
        let output = run(nvrec().arg("export").args(refused).args(&targets));
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    }
    assert!(!scratch.path("x-0001.pcapng").exists() && !Path::new("x-0001").exists());
}
