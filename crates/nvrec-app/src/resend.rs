//! `replay --send-to`: a recording of datagrams sent again, one datagram per recorded one,
//! to a UDP destination; or a capture's frames, as recorded, onto an interface. Paced by
//! the receive times at the asked speed, the window and streams applied per datagram.

use crate::chunks::ChunkSource;
use crate::listing::state_text;
use crate::losses::loss_text;
use crate::outcome::{Class, UsageError};
use crate::replay::{
    read_passes, sleep_unless_interrupted, Pacer, PassSink, ReplayRequest, Selection,
};
use crate::sources::source_error;
use anyhow::{Context, Result};
use nvrec::control::{Control, ControlState, Progress};
use nvrec::layout::{Content, Reassembly, Record, RecordingEntry, RecordingFlags, Walk};
use nvrec::recording::reader::{Item, ReadSummary};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// Where a replay to the network sends, as `--send-to` names it.
pub enum Destination {
    Udp(SocketAddr),
    /// Captured frames, as recorded, onto this interface.
    Interface(String),
}

impl Destination {
    /// `udp://HOST:PORT` or `iface:IFACE`.
    pub fn parse(text: &str) -> Result<Destination, UsageError> {
        if let Some(interface) = text.strip_prefix("iface:") {
            if interface.is_empty() {
                return Err(UsageError(format!(
                    "--send-to {text}: name the interface, as iface:eth0"
                )));
            }
            return Ok(Destination::Interface(interface.to_string()));
        }
        udp_destination(text).map(Destination::Udp)
    }

    /// What is sent: "frames" or "datagrams".
    pub fn unit(&self) -> &'static str {
        match self {
            Destination::Interface(_) => "frames",
            Destination::Udp(_) => "datagrams",
        }
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::Udp(address) => write!(f, "udp://{address}"),
            Destination::Interface(interface) => write!(f, "iface:{interface}"),
        }
    }
}

fn udp_destination(text: &str) -> Result<SocketAddr, UsageError> {
    use std::net::ToSocketAddrs;
    let address = text.strip_prefix("udp://").ok_or_else(|| {
        UsageError(format!(
            "--send-to {text}: give udp://HOST:PORT or iface:IFACE"
        ))
    })?;
    address
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or_else(|| UsageError(format!("--send-to {text}: not an address and port")))
}

/// How a replay to the network went.
#[derive(Debug)]
pub struct ResendReport {
    pub entry: RecordingEntry,
    /// Times the selection was sent (`--loop`).
    pub passes: u64,
    pub sent: u64,
    pub sent_bytes: u64,
    /// Frames longer than the interface sends, not sent.
    pub too_large: u64,
    /// Records that are not frames, met when sending to an interface.
    pub skipped: u64,
    pub summary: ReadSummary,
    pub problems: Vec<String>,
}

impl ResendReport {
    pub fn class(&self) -> Class {
        Class::passed(self.summary.damage_count == 0 && self.summary.missing_chunk_count == 0)
    }

    pub fn state_text(&self) -> &'static str {
        state_text(&self.entry)
    }
}

/// Checks that the selected recording holds datagrams, before anything is opened to send.
pub fn check_recording(entry: &RecordingEntry) -> Result<(), UsageError> {
    if entry.flags.contains(RecordingFlags::RECORDS) {
        return Ok(());
    }
    Err(UsageError(format!(
        "recording {} holds a byte stream, not datagrams: --send-to replays datagrams",
        entry.recording_id
    )))
}

/// Sends `selection` of `source` to `destination`.
pub fn resend(
    source: &ChunkSource,
    selection: Selection,
    request: &ReplayRequest,
    destination: &Destination,
    control: &Control,
    progress: &Progress,
) -> Result<ResendReport> {
    let Selection {
        entry,
        from_ns,
        to_ns,
    } = selection;
    check_recording(&entry)?;
    let sender = DatagramSender::open(destination, request, control)?;
    let mut sink = ResendSink {
        sender,
        reassembly: Reassembly::new(),
        problems: Vec::new(),
        window: (from_ns, to_ns),
        speed: request.speed,
        start_ns: entry.start_ns,
    };
    let (summary, passes) = read_passes(
        source,
        &entry,
        request,
        (from_ns, to_ns),
        control,
        progress,
        &mut sink,
    )?;
    let ResendSink {
        mut sender,
        mut problems,
        ..
    } = sink;
    sender.flush();
    if let Some(error) = sender.error {
        return Err(anyhow::Error::new(error).context(format!("sending to {}", destination)));
    }
    let too_large = sender.too_large();
    if too_large > 0 {
        problems.push(format!(
            "{too_large} frames longer than the interface sends (GSO packets captured whole?) \
             were not sent"
        ));
    }
    if sender.skipped > 0 {
        problems.push(format!(
            "{} records are not captured frames and were not sent to an interface",
            sender.skipped
        ));
    }
    Ok(ResendReport {
        passes,
        entry,
        sent: sender.sent,
        sent_bytes: sender.sent_bytes,
        too_large,
        skipped: sender.skipped,
        summary,
        problems,
    })
}

/// The network end of a replay: the records of each chunk put back together and sent.
struct ResendSink<'a> {
    sender: DatagramSender<'a>,
    reassembly: Reassembly,
    problems: Vec<String>,
    /// The window, in nanoseconds since the epoch.
    window: (Option<u64>, Option<u64>),
    speed: Option<f64>,
    /// The recording's start: chunks go by their time on its timeline.
    start_ns: u64,
}

impl PassSink for ResendSink<'_> {
    fn begin_pass(&mut self) {
        self.sender.pacer = Pacer::new(self.speed);
        self.reassembly = Reassembly::new();
    }

    fn item(&mut self, item: Item<'_>) -> bool {
        let (from_ns, to_ns) = self.window;
        match item {
            Item::Chunk { header, payload } => {
                if to_ns.is_some_and(|to| header.time_ns(self.start_ns) >= to) {
                    return false;
                }
                let records = self.reassembly.payload(header.stream_offset_bytes, payload);
                self.sender
                    .payload(records, from_ns, to_ns, &mut self.problems)
            }
            hole => {
                self.problems.extend(hole.hole_text());
                true
            }
        }
    }

    fn end_pass(&mut self) -> bool {
        let left = self.reassembly.finish();
        self.problems.extend(left.map(|loss| loss_text(&loss)));
        self.sender.error.is_none()
    }
}

/// Where a datagram sender sends.
enum Output {
    Udp {
        socket: UdpSocket,
        destination: SocketAddr,
    },
    Interface(nvrec::net::FrameSender),
}

/// Sends the datagrams (or frames) of payloads of records.
struct DatagramSender<'a> {
    output: Output,
    skipped: u64,
    /// Only these streams (all when empty).
    streams: &'a [u16],
    pacer: Pacer,
    control: &'a Control,
    sent: u64,
    sent_bytes: u64,
    error: Option<std::io::Error>,
}

impl<'a> DatagramSender<'a> {
    fn open(
        destination: &Destination,
        request: &'a ReplayRequest,
        control: &'a Control,
    ) -> Result<DatagramSender<'a>> {
        let output = match destination {
            Destination::Interface(interface) => {
                Output::Interface(nvrec::net::FrameSender::open(interface).map_err(source_error)?)
            }
            Destination::Udp(destination) => {
                let bind: SocketAddr = if destination.is_ipv4() {
                    "0.0.0.0:0".parse()?
                } else {
                    "[::]:0".parse()?
                };
                let socket = UdpSocket::bind(bind).context("opening a UDP socket to send from")?;
                Output::Udp {
                    socket,
                    destination: *destination,
                }
            }
        };
        Ok(DatagramSender {
            output,
            skipped: 0,
            streams: &request.streams,
            pacer: Pacer::new(request.speed),
            control,
            sent: 0,
            sent_bytes: 0,
            error: None,
        })
    }

    fn too_large(&self) -> u64 {
        match &self.output {
            Output::Interface(frames) => frames.report().too_large,
            Output::Udp { .. } => 0,
        }
    }

    /// Sends the datagrams of one payload received in the window; false to stop.
    fn payload(
        &mut self,
        records: Walk<'_>,
        from_ns: Option<u64>,
        to_ns: Option<u64>,
        problems: &mut Vec<String>,
    ) -> bool {
        for record in records {
            let packet = match record {
                Ok(Record::Packet(packet)) => packet,
                Ok(Record::Loss(loss)) => {
                    problems.push(loss_text(&loss));
                    continue;
                }
                Err(error) => {
                    problems.push(format!("a record does not decode: {error}"));
                    break;
                }
            };
            if from_ns.is_some_and(|from| packet.timestamp_ns < from)
                || !(self.streams.is_empty() || self.streams.contains(&packet.stream))
                || packet.data.is_empty() && packet.end
            {
                continue;
            }
            if to_ns.is_some_and(|to| packet.timestamp_ns >= to) {
                return false;
            }
            if matches!(self.output, Output::Interface(_)) && packet.content != Content::Ethernet {
                self.skipped += 1;
                continue;
            }
            if !self.wait_for(packet.timestamp_ns) || !self.send(packet.data) {
                return false;
            }
        }
        true
    }

    /// Paced, waits until the datagram is due; false when interrupted.
    fn wait_for(&mut self, timestamp_ns: u64) -> bool {
        match self.pacer.wait_for(timestamp_ns) {
            Some(wait) => {
                // Frames queued so far are due now: out with them before the pause.
                self.flush();
                self.error.is_none() && sleep_unless_interrupted(wait, self.control)
            }
            None => self.control.state() == ControlState::Run,
        }
    }

    /// Sends what is queued (frames go out in batches).
    fn flush(&mut self) {
        if let Output::Interface(frames) = &mut self.output {
            let before = frames.report();
            if let Err(error) = frames.flush() {
                self.error.get_or_insert(error);
            }
            let after = frames.report();
            self.sent += after.frames - before.frames;
            self.sent_bytes += after.bytes - before.bytes;
        }
    }

    /// Sends one datagram, waiting out a full transmit queue (ENOBUFS); false on failure.
    fn send(&mut self, data: &[u8]) -> bool {
        let result = match &mut self.output {
            Output::Udp {
                socket,
                destination,
            } => send_datagram(socket, *destination, data, self.control).inspect(|&sent| {
                self.sent += u64::from(sent);
                self.sent_bytes += if sent { data.len() as u64 } else { 0 };
            }),
            Output::Interface(frames) => {
                let before = frames.report();
                frames.send(data).map(|()| {
                    let after = frames.report();
                    self.sent += after.frames - before.frames;
                    self.sent_bytes += after.bytes - before.bytes;
                    true
                })
            }
        };
        result.unwrap_or_else(|error| {
            self.error = Some(error);
            false
        })
    }
}

/// Sends one datagram, waiting out a full transmit queue (ENOBUFS). Ok(false): interrupted.
fn send_datagram(
    socket: &UdpSocket,
    destination: SocketAddr,
    data: &[u8],
    control: &Control,
) -> std::io::Result<bool> {
    loop {
        match socket.send_to(data, destination) {
            Ok(_) => return Ok(true),
            Err(error) if error.raw_os_error() == Some(libc::ENOBUFS) => {
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {
                if control.state() != ControlState::Run {
                    return Ok(false);
                }
            }
            Err(error) => return Err(error),
        }
    }
}
