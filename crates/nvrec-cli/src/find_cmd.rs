//! `nvrec find`: the flows of a recording's window that a Community ID or an expression
//! names (`nvrec_app::find`); this parses and prints: a table, CSV or JSON.

use crate::args::EngineArg;
use crate::reading;
use anyhow::Result;
use clap::{ArgGroup, Args};
use nvrec::export::Window;
use nvrec::flow::{CommunityId, FlowEntry, FlowExpr, FlowKey, FlowQuery};
use nvrec::unit::{format_bytes, format_utc_ns};
use nvrec_app::find::{FindRead, FindReport, FindRequest};
use nvrec_app::window::{time_arg, TimeArg};
use nvrec_app::{Class, UsageError};
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("query").required(true).args(["community_id", "expr"])))]
pub struct FindArgs {
    /// The members of the set, or an archive (file://DIR, s3://BUCKET/PREFIX).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// The flow a sensor's log names by its Community ID (1:...), as Zeek's conn.log and
    /// Suricata's eve.json print it: both directions.
    #[arg(long, value_name = "ID")]
    community_id: Option<String>,
    /// The flows an expression matches, in the tcpdump spellings: host, net, port,
    /// portrange, proto, tcp, udp, icmp, icmp6, sctp, ip, ip6, vlan, arp, ether proto, src,
    /// dst, and, or, not, parentheses. One direction each.
    #[arg(long = "match", value_name = "EXPR")]
    expr: Option<String>,
    /// Which recording (default: the last).
    #[arg(long)]
    recording: Option<u32>,
    /// Look in mark N's window instead.
    #[arg(long, value_name = "N", conflicts_with = "recording")]
    mark: Option<u32>,
    /// Only packets received this long after the recording's start or later (500ms, 2m),
    /// or at this time in UTC or later (RFC 3339).
    #[arg(long, value_parser = time_arg)]
    from: Option<TimeArg>,
    /// Only packets received before this long after the recording's start, or before this
    /// time in UTC.
    #[arg(long, value_parser = time_arg)]
    to: Option<TimeArg>,
    /// The Community ID seed the sensors were given.
    #[arg(long, default_value_t = 0)]
    seed: u16,
    /// The flows as CSV: a header line, then a flow a line.
    #[arg(long)]
    csv: bool,
    /// Read every chunk of the window, not the flows' index (what the index's answer must
    /// equal).
    #[arg(long)]
    scan: bool,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
}

/// What is asked, checked before anything is opened.
fn query(args: &FindArgs) -> Result<FlowQuery, UsageError> {
    flow_query(
        args.community_id.as_deref(),
        args.expr.as_deref(),
        "--community-id",
    )
}

/// The flows a Community ID (given with `id_flag`) or a `--match` expression names.
pub fn flow_query(
    id: Option<&str>,
    expr: Option<&str>,
    id_flag: &str,
) -> Result<FlowQuery, UsageError> {
    match (id, expr) {
        (Some(id), _) => id
            .parse::<CommunityId>()
            .map(FlowQuery::CommunityId)
            .map_err(|error| UsageError(format!("{id_flag}: {error}"))),
        (None, Some(text)) => FlowExpr::parse(text)
            .map(FlowQuery::Expr)
            .map_err(|error| UsageError(format!("--match {text:?}: {error}"))),
        (None, None) => Err(UsageError(format!("give {id_flag} ID or --match EXPR"))),
    }
}

pub fn find(args: FindArgs, json: bool) -> Result<Class> {
    if json && args.csv {
        return Err(UsageError("--json and --csv: give one".into()).into());
    }
    let query = query(&args)?;
    let source = reading::open(&args.targets)?;
    let entry = source.pick(args.recording, args.mark)?;
    let (from_ns, to_ns) = nvrec_app::window::window_of(&entry, args.from, args.to)?;
    let request = FindRequest {
        query,
        window: Window { from_ns, to_ns },
        seed: args.seed,
        lookup: match args.scan {
            true => nvrec_app::find::Lookup::Scan,
            false => nvrec_app::find::Lookup::Index,
        },
    };
    let engine = args.engine.choice();
    let report = reading::with_progress("find", json || args.csv, |control, progress| {
        nvrec_app::find::find(&source, entry, &request, engine, control, progress)
    })?;
    if reading::stdout_gone() {
        return Ok(Class::Failed);
    }
    match (json, args.csv) {
        (true, _) => print_json(&report),
        (false, true) => print_csv(&report),
        (false, false) => print_table(&report),
    }
    Ok(report.class())
}

/// A flow's fields as the JSON and the CSV give them.
fn flow_json(flow: &FlowEntry) -> serde_json::Value {
    let ip = match &flow.key {
        FlowKey::Ip(ip) => Some(ip),
        _ => None,
    };
    serde_json::json!({
        "community_id": flow.community_id.map(|id| id.to_string()),
        "flow": flow.key.to_string(),
        "protocol": ip.map(|ip| ip.protocol),
        "source": ip.map(|ip| ip.source),
        "source_port": ip.and_then(|ip| ip.ports).map(|ports| ports.0),
        "destination": ip.map(|ip| ip.destination),
        "destination_port": ip.and_then(|ip| ip.ports).map(|ports| ports.1),
        "vlan": match flow.key {
            FlowKey::Ip(ip) => ip.vlan,
            FlowKey::NotIp { vlan, .. } => vlan,
            FlowKey::Unreadable => None,
        },
        "ethertype": match flow.key {
            FlowKey::NotIp { ethertype, .. } => Some(ethertype),
            _ => None,
        },
        "first_ns": flow.first_ns,
        "last_ns": flow.last_ns,
        "first": format_utc_ns(flow.first_ns),
        "last": format_utc_ns(flow.last_ns),
        "packets": flow.packets,
        "bytes": flow.bytes,
        "chunks": flow.chunks,
        "chunk_count": flow.chunk_count(),
    })
}

fn print_json(report: &FindReport) {
    let entry = &report.entry;
    let value = serde_json::json!({
        "recording_id": entry.mark_of.map_or(entry.recording_id, |of| of.recording_id),
        "mark_id": entry.mark_of.map(|_| entry.recording_id),
        "flows": report.flows.iter().map(flow_json).collect::<Vec<_>>(),
        "flows_in_window": report.flows_in_window,
        "packets_in_window": report.packets_in_window,
        "summary": report.summary,
        "holes": report.holes,
        "losses": report.losses,
        "read": report.read,
    });
    outln!("{value}");
}

const CSV_COLUMNS: [&str; 14] = [
    "community_id",
    "flow",
    "protocol",
    "source",
    "source_port",
    "destination",
    "destination_port",
    "vlan",
    "ethertype",
    "first_ns",
    "last_ns",
    "packets",
    "bytes",
    "chunk_count",
];

fn print_csv(report: &FindReport) {
    outln!("{}", CSV_COLUMNS.join(","));
    for flow in &report.flows {
        let value = flow_json(flow);
        let fields: Vec<String> = CSV_COLUMNS
            .iter()
            .map(|column| match &value[*column] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(text) => csv_field(text),
                other => other.to_string(),
            })
            .collect();
        outln!("{}", fields.join(","));
    }
    print_summary(report);
}

/// A text field, quoted where it holds a comma or a quote (RFC 4180).
fn csv_field(text: &str) -> String {
    match text.contains([',', '"']) {
        true => format!("\"{}\"", text.replace('"', "\"\"")),
        false => text.to_string(),
    }
}

fn print_table(report: &FindReport) {
    for flow in &report.flows {
        let id = flow
            .community_id
            .map_or("-".to_string(), |id| id.to_string());
        outln!(
            "{id}  {}  {} .. {}  {} packets  {}  {} chunks",
            flow.key,
            format_utc_ns(flow.first_ns),
            format_utc_ns(flow.last_ns),
            flow.packets,
            format_bytes(flow.bytes),
            flow.chunk_count()
        );
    }
    print_summary(report);
}

/// What was read and what the answer may lack, on stderr.
fn print_summary(report: &FindReport) {
    let read = match &report.read {
        FindRead::Scanned { why_not_indexed } => {
            if let Some(why) = why_not_indexed {
                errln!("nvrec find: every chunk read, not the flows' index: {why}");
            }
            format!("{} chunks read", report.summary.chunk_count)
        }
        FindRead::Indexed {
            segments_searched,
            flows_bytes_read,
            chunks_searched,
            chunks_read,
        } => format!(
            "from the flows of {segments_searched} segments ({}): {chunks_read} of their \
             {chunks_searched} chunks read",
            format_bytes(*flows_bytes_read)
        ),
        FindRead::DriveIndex {
            blocks_read,
            index_bytes_read,
            chunks_searched,
            chunks_read,
            unindexed,
            ..
        } => {
            for note in unindexed {
                errln!("nvrec find: {note}");
            }
            format!(
                "from the flow index ({blocks_read} blocks, {}): {chunks_read} of \
                 {chunks_searched} chunks read",
                format_bytes(*index_bytes_read)
            )
        }
    };
    errln!(
        "nvrec find: {} of {} flows in {} ({} packets), {read}",
        report.flows.len(),
        report.flows_in_window,
        nvrec_app::listing::entry_name(&report.entry),
        report.packets_in_window,
    );
    for hole in report.holes.iter().take(20) {
        errln!("  hole: {hole}");
    }
    for loss in report.losses.iter().take(20) {
        errln!("  lost before recording: {loss}");
    }
}
