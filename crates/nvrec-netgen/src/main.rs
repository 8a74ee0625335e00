//! `nvrec-netgen`: send sequence-numbered UDP datagrams at a rate, receive and check them,
//! or check a file of them (a replay's output). One JSON object on stdout; exit 0 when
//! what was checked is whole, 1 when something was lost, reordered, duplicated or damaged,
//! 2 for bad arguments.

use clap::{Parser, Subcommand};
use nvrec_netgen::send::Until;
use nvrec_netgen::{netns, Checker, ReceiveOptions, SendOptions};
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "nvrec-netgen", version, about)]
struct Cli {
    /// Run inside this network namespace (a name of `ip netns`).
    #[arg(long, global = true)]
    netns: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Send datagrams (sendmmsg with UDP GSO), paced at --rate.
    Send {
        /// Where to: ADDR:PORT (stream N goes to PORT+N).
        #[arg(long)]
        to: SocketAddr,
        /// Payload bits per second over all streams (k, M, G: powers of 1000); default:
        /// as fast as the path takes.
        #[arg(long, value_parser = parse_rate)]
        rate: Option<u64>,
        /// Stop after this long (500ms, 10s).
        #[arg(long, value_parser = parse_duration, conflicts_with = "count")]
        duration: Option<Duration>,
        /// Stop after this many datagrams per stream (default 1000 without --duration).
        #[arg(long)]
        count: Option<u64>,
        /// Bytes of each datagram's UDP payload.
        #[arg(long, default_value_t = 1400)]
        size: usize,
        /// Datagrams per GSO message (1: no GSO).
        #[arg(long, default_value_t = nvrec_netgen::send::SEGMENTS_MAX)]
        segments: usize,
        /// GSO messages per sendmmsg call.
        #[arg(long, default_value_t = 8)]
        batch: usize,
        /// Streams, each with its own sequence numbers, to consecutive ports.
        #[arg(long, default_value_t = 1)]
        streams: u32,
        /// Send without a UDP checksum (with --segments 1): frames complete as captured.
        #[arg(long)]
        no_checksum: bool,
    },
    /// Receive datagrams (recvmmsg with UDP GRO) and check them.
    Recv {
        #[arg(long)]
        bind: SocketAddr,
        /// Stop once this many distinct datagrams came; loss is counted against it.
        #[arg(long)]
        expect: Option<u64>,
        /// Streams expected (with --expect).
        #[arg(long, default_value_t = 1)]
        streams: u32,
        /// Stop after this long.
        #[arg(long, value_parser = parse_duration)]
        duration: Option<Duration>,
        /// Stop when nothing came for this long after the first datagram.
        #[arg(long, value_parser = parse_duration, default_value = "1s")]
        idle: Duration,
        /// Take datagrams one by one (no UDP GRO).
        #[arg(long)]
        no_gro: bool,
    },
    /// The reference receiver of the UDP bench: recvmmsg into O_DIRECT writes of the
    /// datagrams' data to --output, nothing else; prints what it took as JSON.
    Sink {
        #[arg(long)]
        bind: SocketAddr,
        /// The target written from offset 0 (a block device, or a file on a file system
        /// that takes O_DIRECT).
        #[arg(long)]
        output: PathBuf,
        /// Stop when nothing came for this long after the first datagram.
        #[arg(long, value_parser = parse_duration, default_value = "1s")]
        idle: Duration,
    },
    /// Send a realistic mix of Ethernet frames onto an interface (AF_PACKET): thousands of
    /// flows of TCP, UDP and ICMP over IPv4 and IPv6, some VLAN-tagged, 64 to 1518 bytes on
    /// the wire; prints the summary as JSON and writes the ground truth (each flow's frames
    /// and bytes, one direction each, as `nvrec find` names them) to --truth.
    Mix {
        #[arg(long)]
        interface: String,
        /// Frames to send.
        #[arg(long, default_value_t = 100_000)]
        count: u64,
        /// Connections (each of two directions).
        #[arg(long, default_value_t = 5000)]
        flows: u32,
        /// Frames per second (k, M: powers of 1000); default: as fast as the socket goes.
        #[arg(long, value_parser = parse_rate)]
        rate: Option<u64>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Every frame this many bytes on the wire (64 to 1518) instead of the mix of lengths.
        #[arg(long)]
        size: Option<usize>,
        /// The ground truth's JSON file.
        #[arg(long)]
        truth: PathBuf,
    },
    /// Check a file of datagrams of --size bytes each, back to back (what `nvrec replay`
    /// writes for a recording of them); '-' for stdin.
    Check {
        #[arg(long)]
        size: usize,
        /// Datagrams expected per stream (loss is counted against it).
        #[arg(long)]
        expect: Option<u64>,
        #[arg(long, default_value_t = 1)]
        streams: u32,
        file: PathBuf,
    },
}

fn parse_rate(text: &str) -> Result<u64, String> {
    let (number, scale) = match text.as_bytes().last() {
        Some(b'k' | b'K') => (&text[..text.len() - 1], 1e3),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 1e6),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 1e9),
        _ => (text, 1.0),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text}: not a rate (10G, 500M)"))?;
    if !value.is_finite() || value <= 0.0 {
        return Err(format!("{text}: a rate above zero"));
    }
    Ok((value * scale) as u64)
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(number) = text.strip_suffix("ms") {
        (number, 1e-3)
    } else if let Some(number) = text.strip_suffix("us") {
        (number, 1e-6)
    } else if let Some(number) = text.strip_suffix('s') {
        (number, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text}: not a duration (500ms, 10s)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{text}: a duration of zero or more"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("nvrec-netgen: {error}");
            ExitCode::from(match error.kind() {
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::NotFound => 2,
                _ => 1,
            })
        }
    }
}

fn run(cli: Cli) -> std::io::Result<bool> {
    if let Some(name) = &cli.netns {
        netns::enter_namespace(name).map_err(|error| {
            std::io::Error::new(error.kind(), format!("entering namespace {name}: {error}"))
        })?;
    }
    match cli.command {
        Command::Send {
            to,
            rate,
            duration,
            count,
            size,
            segments,
            batch,
            streams,
            no_checksum,
        } => {
            let mut options = SendOptions::new(to);
            options.rate_bits_per_s = rate;
            options.until = match duration {
                Some(duration) => Until::Duration(duration),
                None => Until::Count(count.unwrap_or(1000)),
            };
            options.datagram_bytes = size;
            options.segments = segments;
            options.batch = batch;
            options.streams = streams;
            options.no_checksum = no_checksum;
            print_report(&nvrec_netgen::send(&options)?);
            Ok(true)
        }
        Command::Recv {
            bind,
            expect,
            streams,
            duration,
            idle,
            no_gro,
        } => {
            let mut options = ReceiveOptions::new(bind);
            options.expect = expect;
            options.streams = streams;
            options.duration = duration;
            options.idle = idle;
            options.gro = !no_gro;
            receive(options)
        }
        Command::Sink { bind, output, idle } => {
            let options = nvrec_netgen::sink::SinkOptions {
                bind,
                output,
                idle,
                receive_buffer_bytes: 256 << 20,
            };
            let report = nvrec_netgen::sink::sink(&options)?;
            print_report(&report);
            Ok(report.dropped_socket == 0)
        }
        Command::Check {
            size,
            expect,
            streams,
            file,
        } => check(size, expect, streams, &file),
        Command::Mix {
            interface,
            count,
            flows,
            rate,
            seed,
            size,
            truth,
        } => {
            let options = nvrec_netgen::mix::MixOptions {
                interface,
                seed,
                flows,
                frames: count,
                rate_fps: rate,
                wire_bytes: size,
            };
            let sent = nvrec_netgen::mix::send_mix(&options)?;
            let json = serde_json::to_string_pretty(&sent).map_err(std::io::Error::other)?;
            std::fs::write(&truth, json).map_err(|error| {
                std::io::Error::new(error.kind(), format!("{}: {error}", truth.display()))
            })?;
            print_report(&serde_json::json!({
                "frames": sent.frames,
                "bytes": sent.bytes,
                "flows": sent.flows.len(),
                "elapsed_s": sent.elapsed_s,
                "truth": truth,
            }));
            Ok(true)
        }
    }
}

/// Binds, says where it listens (on stderr), receives and reports.
fn receive(options: ReceiveOptions) -> std::io::Result<bool> {
    let receiver = nvrec_netgen::recv::Receiver::bind(options)?;
    eprintln!("nvrec-netgen: listening on {}", receiver.local_address()?);
    let report = receiver.run()?;
    print_report(&report);
    Ok(report.check.is_perfect() && report.dropped_socket == 0)
}

/// Checks the datagrams of `size` bytes each in `file` (`-`: stdin) and reports.
fn check(size: usize, expect: Option<u64>, streams: u32, file: &Path) -> std::io::Result<bool> {
    if size < nvrec_netgen::datagram::HEADER_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "--size: at least 16 bytes",
        ));
    }
    let mut input: Box<dyn Read> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(file).map_err(|error| {
            std::io::Error::new(error.kind(), format!("{}: {error}", file.display()))
        })?)
    };
    let mut checker = Checker::new();
    let mut buffer = vec![0u8; size * 1024];
    loop {
        let mut filled = 0;
        while filled < buffer.len() {
            match input.read(&mut buffer[filled..])? {
                0 => break,
                count => filled += count,
            }
        }
        if filled == 0 {
            break;
        }
        checker.fixed_size(&buffer[..filled], size);
        if filled < buffer.len() {
            break;
        }
    }
    let report = match expect {
        Some(expect) => checker.report_expecting(streams, expect),
        None => checker.report(),
    };
    print_report(&report);
    Ok(report.is_perfect())
}

/// The one JSON object on stdout.
fn print_report(report: &impl serde::Serialize) {
    println!("{}", serde_json::to_string(report).unwrap());
}
