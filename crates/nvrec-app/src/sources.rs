//! What a use case reads from, as a user names it: a byte source (`pattern`, `zero`,
//! `stdin`, a file), network streams (`udp://`, `tcp://`, `capture:`), and the facts of a
//! byte stream's samples.

use crate::outcome::UsageError;
use anyhow::Result;
use nvrec::layout::{parse_center_freq_hz, parse_meta, parse_sample_rate_hz, SampleFormat, Signal};
use nvrec::net::{CaptureOptions, NetCounters};
use nvrec::source::SourceSpec;
use std::path::PathBuf;
use std::sync::Arc;

/// A byte source: the pattern, zeros, stdin or a file. Network sources give records, which
/// only `record` takes ([`parse_sources`]).
pub fn parse_source(text: &str, seed: u64) -> Result<SourceSpec, UsageError> {
    if is_network(text) {
        return Err(UsageError(format!(
            "--source {text}: a network source gives datagrams or frames, which only `nvrec record` takes"
        )));
    }
    Ok(match text {
        "pattern" => SourceSpec::Pattern { seed },
        "zero" | "zeros" => SourceSpec::Zero,
        "stdin" | "-" => SourceSpec::Stdin,
        path => SourceSpec::Path(PathBuf::from(path)),
    })
}

fn is_network(text: &str) -> bool {
    text.contains("://") || text.starts_with("capture:")
}

/// What `record` records: one byte source, or one or more network streams: UDP datagrams
/// (`udp://ADDR:PORT`, a stream each), TCP connections accepted (`tcp://ADDR:PORT`, a stream
/// per connection) or frames captured on interfaces (`capture:IFACE`, a stream each).
pub fn parse_sources(texts: &[String], seed: u64) -> Result<SourceSpec, UsageError> {
    let network = texts.iter().filter(|text| is_network(text)).count();
    if network == 0 {
        return match texts {
            [text] => parse_source(text, seed),
            _ => Err(UsageError(
                "several --source options record several network streams (udp://ADDR:PORT or \
                 capture:IFACE); a byte source (pattern, zero, stdin, a file) comes alone"
                    .into(),
            )),
        };
    }
    if network != texts.len() {
        return Err(UsageError(
            "network streams and a byte source cannot be recorded together".into(),
        ));
    }
    if texts.len() > u16::MAX as usize {
        return Err(UsageError("too many --source streams".into()));
    }
    if let Some(twice) = texts
        .iter()
        .enumerate()
        .find_map(|(at, text)| texts[..at].contains(text).then_some(text))
    {
        return Err(UsageError(format!("--source {twice} is given twice")));
    }
    if texts.iter().all(|text| text.starts_with("capture:")) {
        return capture_interfaces(texts).map(SourceSpec::Capture);
    }
    socket_sources(texts)
}

/// The interfaces of `capture:IFACE` sources.
fn capture_interfaces(texts: &[String]) -> Result<Vec<String>, UsageError> {
    texts
        .iter()
        .map(|text| match &text["capture:".len()..] {
            "" => Err(UsageError(format!(
                "--source {text}: name the interface, as capture:eth0"
            ))),
            name => Ok(name.to_string()),
        })
        .collect()
}

/// `udp://` or `tcp://` sources, all of one kind.
fn socket_sources(texts: &[String]) -> Result<SourceSpec, UsageError> {
    let scheme = texts[0].split("://").next().unwrap_or_default().to_string();
    let addresses = texts
        .iter()
        .map(|text| match text.split_once("://") {
            Some((kind, address)) if kind == scheme && matches!(kind, "udp" | "tcp") => {
                address.parse().map_err(|_| {
                    UsageError(format!(
                        "--source {text}: give {kind}://ADDRESS:PORT, such as {kind}://0.0.0.0:5000 \
                         or {kind}://[::]:5000"
                    ))
                })
            }
            _ => Err(UsageError(format!(
                "--source {text}: network sources are udp://ADDRESS:PORT, tcp://ADDRESS:PORT or \
                 capture:IFACE, one kind per recording"
            ))),
        })
        .collect::<Result<_, _>>()?;
    Ok(if scheme == "tcp" {
        SourceSpec::Tcp(addresses)
    } else {
        SourceSpec::Udp(addresses)
    })
}

/// An error opening a source: one the user can mend (a path that is not there, an address
/// in use) is a usage error.
pub fn source_error(error: std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind::{
        AddrInUse, AddrNotAvailable, InvalidInput, IsADirectory, NotFound, PermissionDenied,
    };
    match error.kind() {
        IsADirectory | NotFound | PermissionDenied | AddrInUse | AddrNotAvailable
        | InvalidInput => UsageError(error.to_string()).into(),
        _ => error.into(),
    }
}

/// A source to record, and a network source's counters to show.
pub type RecordSource = (Box<dyn nvrec::source::Source>, Option<Arc<NetCounters>>);

/// Opens what `record` records.
pub fn open_record_source(spec: &SourceSpec, capture: &CaptureOptions) -> Result<RecordSource> {
    Ok(match spec {
        SourceSpec::Udp(addresses) => {
            let udp = nvrec::net::UdpSource::bind(addresses).map_err(source_error)?;
            let counters = udp.counters();
            (Box::new(udp), Some(counters))
        }
        SourceSpec::Tcp(addresses) => {
            let tcp = nvrec::net::TcpSource::listen(addresses).map_err(source_error)?;
            let counters = tcp.counters();
            (Box::new(tcp), Some(counters))
        }
        SourceSpec::Capture(names) => {
            let capture =
                nvrec::net::CaptureSource::open_with(names, capture).map_err(source_error)?;
            let counters = capture.counters();
            (Box::new(capture), Some(counters))
        }
        _ => (nvrec::input::open_source(spec).map_err(source_error)?, None),
    })
}

/// What each sample of a byte stream is (an IQ stream from a radio), as asked: kept in the
/// recording's entry for `export --format sigmf`.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub datatype: Option<String>,
    pub sample_rate: Option<String>,
    pub center_freq: Option<String>,
    pub meta: Vec<String>,
}

impl Samples {
    /// The facts the recording keeps, checked: none without a datatype.
    pub fn signal(&self, source: &SourceSpec) -> Result<Option<Signal>, UsageError> {
        let usage = |error: nvrec::layout::SignalError| UsageError(error.to_string());
        let Some(datatype) = &self.datatype else {
            return Ok(None);
        };
        if source.is_records() {
            return Err(UsageError(
                "--datatype describes samples of a byte stream; a network source records \
                 datagrams and packets"
                    .into(),
            ));
        }
        let signal = Signal {
            format: SampleFormat::parse(datatype).map_err(usage)?,
            sample_rate_hz: parse_sample_rate_hz(self.sample_rate.as_deref().unwrap_or(""))
                .map_err(usage)?,
            center_freq_hz: self
                .center_freq
                .as_deref()
                .map(parse_center_freq_hz)
                .transpose()
                .map_err(usage)?,
            meta: self
                .meta
                .iter()
                .map(|text| parse_meta(text))
                .collect::<Result<_, _>>()
                .map_err(usage)?,
        };
        signal.validate().map_err(usage)?;
        Ok(Some(signal))
    }
}
