//! `nvrec archive`, `nvrec catalog`, and reading archives in place: `ls`, `replay`, `verify`
//! and `export` take an archive URL (`file://DIR`, `s3://BUCKET/PREFIX`) where they take the
//! members of a volume set, through `nvrec_app::chunks::ChunkSource`.

use crate::args::EngineArg;
use nvrec::flow::CommunityId;
use std::net::IpAddr;

use anyhow::Result;
use clap::{Args, Subcommand};
use nvrec::unit::{format_bytes, format_utc_ns, parse_rate_bytes_per_s, parse_size_bytes};
use nvrec_app::archiving::ArchiveRequest;
use nvrec_app::{Class, UsageError};
use nvrec_archive::catalog::{Catalog, CatalogLocation, CatalogRow, Filter};
use nvrec_archive::free::Freed;
use nvrec_archive::store::Mode;
use nvrec_archive::upload::{self, ArchiveOptions, Outcome, RecordingReport};
use nvrec_archive::{Archive, ArchiveUrl};
use std::path::PathBuf;
use std::time::Duration;

fn size_arg(text: &str) -> Result<u64, String> {
    parse_size_bytes(text).map_err(|error| error.to_string())
}

fn duration_arg(text: &str) -> Result<Duration, String> {
    nvrec::unit::parse_duration(text).map_err(|error| error.to_string())
}

fn rate_arg(text: &str) -> Result<f64, String> {
    parse_rate_bytes_per_s(text).map_err(|error| error.to_string())
}

#[derive(Args, Debug)]
pub struct ArchiveArgs {
    /// The members of a volume set.
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Where the recordings go: file://DIR or s3://BUCKET/PREFIX (S3 settings from the AWS_
    /// environment variables; AWS_ENDPOINT_URL and AWS_ALLOW_HTTP=true for other servers).
    #[arg(long, value_name = "URL")]
    to: String,
    /// This recorder's name in the keys and the catalog. Default: the host name.
    #[arg(long)]
    node: Option<String>,
    /// Only this recording (default: every finished one).
    #[arg(long)]
    recording: Option<u32>,
    /// Upload no faster than this on average (e.g. 200MB/s), to leave the rest for others.
    /// Whatever the rate, reading and sending pause while a recorder running on the set
    /// has more than a quarter of its buffer pool in use, until it is down to a tenth.
    #[arg(long, value_parser = rate_arg)]
    max_rate: Option<f64>,
    /// Size of the segment objects (chunks are never split).
    #[arg(long, default_value = "64M", value_parser = size_arg)]
    segment_size: u64,
    /// Part size of S3 multipart uploads (5M at least).
    #[arg(long, default_value = "8M", value_parser = size_arg)]
    part_size: u64,
    /// Parts of a segment uploaded at once.
    #[arg(long, default_value_t = upload::PARTS_IN_FLIGHT_DEFAULT)]
    parts_in_flight: usize,
    /// The resume state (SQLite). Default: $XDG_STATE_HOME/nvrec/archive-state.sqlite.
    #[arg(long)]
    state: Option<PathBuf>,
    /// The catalog the archived recordings are added to: an SQLite file, or a PostgreSQL
    /// database shared by many recorders (postgres://USER:PASSWORD@HOST/DB). Default:
    /// $NVREC_CATALOG, else $XDG_STATE_HOME/nvrec/catalog.sqlite.
    #[arg(long, env = "NVREC_CATALOG", hide_env_values = true)]
    catalog: Option<String>,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
    /// Archive a recording still being written as it goes: each segment once it has filled,
    /// the rest and the manifest when the recording ends (default: leave it for a later run).
    #[arg(long)]
    follow: bool,
    /// With --follow: how often to look for newly filled segments.
    #[arg(long, default_value = "1s", value_parser = duration_arg, requires = "follow")]
    poll: Duration,
    /// Give a recording's space on the drives back once its archive is verified in the store
    /// (its data slots discarded: TRIM, or holes punched in a file; its entry stays and
    /// lists it, read it from the archive). Rings, recordings with holes and a running one
    /// are kept. No recording may be running on the set.
    #[arg(long)]
    delete_after_verify: bool,
}

#[derive(Args, Debug)]
pub struct CatalogArgs {
    #[command(subcommand)]
    command: CatalogCommand,
}

#[derive(Subcommand, Debug)]
enum CatalogCommand {
    /// List the catalog's recordings (of one archive with URL), by start time.
    Ls(CatalogLsArgs),
    /// Make the catalog's rows of an archive again from its manifests alone.
    Rebuild(CatalogRebuildArgs),
}

#[derive(Args, Debug)]
struct CatalogLsArgs {
    /// Only recordings of this archive.
    url: Option<String>,
    /// Only this node's recordings.
    #[arg(long)]
    node: Option<String>,
    /// Only recordings with this label.
    #[arg(long)]
    label: Option<String>,
    /// Only recordings that end at or after this time (UTC, 2026-11-26T10:00:00Z, or @SECONDS
    /// since the epoch).
    #[arg(long, value_parser = utc_arg)]
    from: Option<u64>,
    /// Only recordings that start before this time.
    #[arg(long, value_parser = utc_arg)]
    to: Option<u64>,
    /// Only recordings of at least this many stream bytes.
    #[arg(long, value_parser = size_arg)]
    min_size: Option<u64>,
    /// Only recordings that lost input or miss chunks.
    #[arg(long)]
    with_losses: bool,
    /// Only recordings of packets that hold this connection (its Community ID, 1:..., as
    /// Zeek and Suricata print it), from their flows: no data is read.
    #[arg(long, value_name = "ID", value_parser = community_id_arg)]
    community_id: Option<CommunityId>,
    /// Only recordings of packets with packets from or to this address.
    #[arg(long, value_name = "ADDRESS", value_parser = host_arg)]
    host: Option<IpAddr>,
    /// The catalog: an SQLite file, or a PostgreSQL database (postgres://...). Default:
    /// $NVREC_CATALOG, else $XDG_STATE_HOME/nvrec/catalog.sqlite.
    #[arg(long, env = "NVREC_CATALOG", hide_env_values = true)]
    catalog: Option<String>,
}

fn community_id_arg(text: &str) -> Result<CommunityId, String> {
    text.parse::<CommunityId>()
        .map_err(|error| error.to_string())
}

fn host_arg(text: &str) -> Result<IpAddr, String> {
    text.parse::<IpAddr>()
        .map_err(|_| format!("{text}: not an IPv4 or IPv6 address"))
}

#[derive(Args, Debug)]
struct CatalogRebuildArgs {
    /// The archive: file://DIR or s3://BUCKET/PREFIX.
    url: String,
    /// The catalog: an SQLite file, or a PostgreSQL database (postgres://...). Default:
    /// $NVREC_CATALOG, else $XDG_STATE_HOME/nvrec/catalog.sqlite.
    #[arg(long, env = "NVREC_CATALOG", hide_env_values = true)]
    catalog: Option<String>,
}

/// `2026-11-26T10:00:00Z` (or without the Z, or with a fraction of a second) or `@SECONDS`,
/// as nanoseconds since the Unix epoch.
pub fn parse_utc_ns(text: &str) -> Result<u64, String> {
    let bad = || {
        format!("{text:?}: give a UTC time as 2026-11-26T10:00:00Z, or @SECONDS since the epoch")
    };
    if let Some(seconds) = text.strip_prefix('@') {
        let seconds: f64 = seconds.parse().map_err(|_| bad())?;
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(bad());
        }
        return Ok((seconds * 1e9) as u64);
    }
    let text_ = text.trim_end_matches('Z');
    let (date, time) = text_.split_once(['T', ' ']).ok_or_else(bad)?;
    let mut date_parts = date.split('-').map(|p| p.parse::<u64>());
    let (Some(Ok(year)), Some(Ok(month)), Some(Ok(day)), None) = (
        date_parts.next(),
        date_parts.next(),
        date_parts.next(),
        date_parts.next(),
    ) else {
        return Err(bad());
    };
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut clock_parts = clock.split(':').map(|p| p.parse::<u64>());
    let (Some(Ok(hour)), Some(Ok(minute)), second, None) = (
        clock_parts.next(),
        clock_parts.next(),
        clock_parts.next(),
        clock_parts.next(),
    ) else {
        return Err(bad());
    };
    let second = match second {
        None => 0,
        Some(Ok(second)) => second,
        Some(Err(_)) => return Err(bad()),
    };
    if !(1970..=9999).contains(&year)
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
        || !fraction.chars().all(|c| c.is_ascii_digit())
        || fraction.len() > 9
    {
        return Err(bad());
    }
    // Days from the civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y % 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let nanos: u64 = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<9}").parse().map_err(|_| bad())?
    };
    Ok(((days * 86_400 + hour * 3_600 + minute * 60 + second) * 1_000_000_000) + nanos)
}

fn utc_arg(text: &str) -> Result<u64, String> {
    parse_utc_ns(text)
}

/// Where the archive's local files live: $XDG_STATE_HOME/nvrec, else ~/.local/state/nvrec.
fn state_dir() -> PathBuf {
    match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("nvrec"),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
            .join(".local/state/nvrec"),
    }
}

fn catalog_location(given: Option<String>) -> CatalogLocation {
    given.map_or_else(
        || CatalogLocation::File(state_dir().join("catalog.sqlite")),
        |text| CatalogLocation::parse(&text),
    )
}

/// This machine's name, made fit for a key.
fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}

pub fn archive(args: ArchiveArgs, json: bool) -> Result<Class> {
    let request = archive_request(args)?;
    request.check()?;
    let run = crate::reading::with_progress("archive", json, |control, progress| {
        nvrec_app::archiving::archive(&request, control, progress)
    })?;
    if json {
        outln!(
            "{}",
            serde_json::json!({
                "archive": request.url.to_string(),
                "node": request.options.node,
                "set_uuid": run.set_uuid,
                "recordings": run.recordings,
                "freed": run.freed.iter().map(|(id, outcome)| serde_json::json!({"recording_id": id, "outcome": outcome})).collect::<Vec<_>>(),
                "marks": run.marks,
            })
        );
    } else {
        for report in &run.recordings {
            print_archived(report, &request.url, run.freed(report.recording_id));
        }
        for mark in &run.marks {
            match &mark.kept_because {
                None => outln!(
                    "  mark {} of recording {}: released, its archive holds its window whole",
                    mark.mark_id,
                    mark.recording_id
                ),
                Some(why) => outln!(
                    "  mark {} of recording {}: kept on the drives: {why}",
                    mark.mark_id,
                    mark.recording_id
                ),
            }
        }
    }
    Ok(run.class())
}

/// The use case's request from the options.
fn archive_request(args: ArchiveArgs) -> Result<ArchiveRequest> {
    let url = ArchiveUrl::parse(&args.to).map_err(|error| UsageError(error.to_string()))?;
    let mut options = ArchiveOptions::new(args.node.unwrap_or_else(host_name));
    options.recording = args.recording;
    options.max_rate_bytes_per_s = args.max_rate;
    options.segment_size_bytes = args.segment_size;
    options.part_size_bytes = args.part_size;
    options.parts_in_flight = args.parts_in_flight;
    options.engine = args.engine.choice();
    if args.follow {
        options.live = upload::Live::Follow { poll: args.poll };
    }
    Ok(ArchiveRequest {
        targets: args.targets,
        url,
        options,
        state_path: args
            .state
            .unwrap_or_else(|| state_dir().join("archive-state.sqlite")),
        catalog: catalog_location(args.catalog),
        delete_after_verify: args.delete_after_verify,
    })
}

/// One recording's archive, in lines.
fn print_archived(report: &RecordingReport, url: &ArchiveUrl, freed: Option<&Freed>) {
    let what = match report.outcome {
        Outcome::Archived => format!(
            "archived: {} segments ({} held by the manifest of its earlier entry, {} sent while recording, {} sent by an interrupted run, {} kept from before, {} resumed), {} in {} chunks, {} uploaded in {:.1} s, {:.1} MiB/s",
            report.segment_count,
            report.segments_held,
            report.segments_sent_live,
            report.segments_sent_before,
            report.segments_kept.saturating_sub(report.segments_sent_live),
            report.segments_resumed,
            format_bytes(report.archived_bytes),
            report.chunk_count,
            format_bytes(report.uploaded_bytes),
            report.elapsed_s,
            report.rate_mib_per_s
        ),
        Outcome::AlreadyArchived => format!(
            "already archived: {} segments, {}",
            report.segment_count,
            format_bytes(report.archived_bytes)
        ),
        Outcome::Recording => "still recording: left for a later run".into(),
        Outcome::Stopped => "stopped before its end: the next run resumes it".into(),
        Outcome::Kept => format!(
            "NOT ARCHIVED AGAIN: the archive holds {} segments, {} of it, left as they are: {}",
            report.segment_count,
            format_bytes(report.archived_bytes),
            report
                .kept_because
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        ),
    };
    outln!(
        "recording {} \"{}\" ({}): {what}",
        report.recording_id,
        report.label,
        report.state
    );
    if matches!(report.outcome, Outcome::Archived | Outcome::AlreadyArchived) {
        outln!("  manifest {url}/{}", report.manifest_key);
    }
    if report.backoff_s > 0.0 {
        outln!(
            "  paused {:.1} s while the recorder on this set was filling its buffers",
            report.backoff_s
        );
    }
    match freed {
        Some(Freed::Freed { bytes }) => outln!(
            "  archive verified in the store: {} freed on the drives (its entry stays; read it from the archive)",
            format_bytes(*bytes)
        ),
        Some(Freed::Kept { why }) => outln!("  kept on the drives: {why}"),
        None => {}
    }
    for loss in &report.overwritten {
        outln!("  LOST: {}", loss.line());
    }
    for hole in &report.holes {
        outln!(
            "  HOLE: {} chunks{}: {}",
            hole.chunk_count,
            hole.first_sequence
                .map(|s| format!(" from sequence {s}"))
                .unwrap_or_default(),
            hole.what
        );
    }
}

/// `nvrec ls URL`: the archive's recordings.
pub fn ls(url: &ArchiveUrl, json: bool) -> Result<Class> {
    let archive = Archive::open(url, Mode::Read)?;
    let (recordings, unreadable) = nvrec_archive::read::recordings(&archive)?;
    if json {
        let rows: Vec<serde_json::Value> = recordings
            .iter()
            .map(|r| {
                let m = &r.manifest;
                serde_json::json!({
                    "node": m.node,
                    "set_uuid": m.set_uuid,
                    "set_label": m.set_label,
                    "recording_id": m.recording_id,
                    "name": m.label,
                    "state": m.state,
                    "start": format_utc_ns(m.start_ns),
                    "end": format_utc_ns(m.end_ns),
                    "start_ns": m.start_ns,
                    "end_ns": m.end_ns,
                    "stream_len_bytes": m.stream_len_bytes,
                    "bytes": m.stream_len_bytes.saturating_sub(m.lost_bytes),
                    "lost_bytes": m.lost_bytes,
                    "losses": m.losses,
                    "holes": m.holes,
                    "retirements": m.retirements,
                    "chunk_count": m.chunk_count,
                    "segment_count": m.segments.len(),
                    "archived_bytes": m.archived_bytes,
                    "manifest_key": m.key(),
                })
            })
            .collect();
        let bad: Vec<serde_json::Value> = unreadable
            .iter()
            .map(|u| serde_json::json!({"key": u.key, "error": u.error.to_string()}))
            .collect();
        outln!(
            "{}",
            serde_json::json!({"archive": url.to_string(), "recordings": rows, "unreadable_manifests": bad})
        );
    } else {
        outln!("archive {url}");
        if recordings.is_empty() {
            outln!("no recordings");
        } else {
            print_listing_header(Listing::Archive);
            for r in &recordings {
                let m = &r.manifest;
                print_listing_row(&CatalogRow::of(&url.to_string(), m), Listing::Archive);
                for loss in m.overwritten() {
                    outln!("      LOST: {}", loss.line());
                }
                for hole in &m.holes {
                    outln!("      HOLE: {} chunks: {}", hole.chunk_count, hole.what);
                }
            }
        }
        for u in &unreadable {
            outln!("UNREADABLE MANIFEST {}: {}", u.key, u.error);
        }
    }
    Ok(if unreadable.is_empty() {
        Class::Done
    } else {
        Class::Failed
    })
}

pub fn catalog(args: CatalogArgs, json: bool) -> Result<Class> {
    match args.command {
        CatalogCommand::Rebuild(args) => {
            let url =
                ArchiveUrl::parse(&args.url).map_err(|error| UsageError(error.to_string()))?;
            let archive = Archive::open(&url, Mode::Read)?;
            let location = catalog_location(args.catalog);
            let mut catalog = Catalog::open(&location)?;
            let rebuilt = catalog.rebuild(&archive)?;
            if json {
                outln!(
                    "{}",
                    serde_json::json!({"archive": url.to_string(), "catalog": location, "rebuilt": rebuilt})
                );
            } else {
                outln!(
                    "catalog {location}: {} recordings of {url}",
                    rebuilt.recording_count
                );
                for (key, why) in &rebuilt.unreadable {
                    outln!("  UNREADABLE MANIFEST {key}: {why}");
                }
            }
            Ok(if rebuilt.unreadable.is_empty() {
                Class::Done
            } else {
                Class::Failed
            })
        }
        CatalogCommand::Ls(args) => {
            let archive_url = match &args.url {
                Some(text) => Some(
                    ArchiveUrl::parse(text)
                        .map_err(|error| UsageError(error.to_string()))?
                        .to_string(),
                ),
                None => None,
            };
            if let (Some(from), Some(to)) = (args.from, args.to) {
                if from >= to {
                    return Err(UsageError(
                        "--from is not before --to: the window holds nothing".into(),
                    )
                    .into());
                }
            }
            let location = catalog_location(args.catalog);
            if !location.exists() {
                return Err(UsageError(format!(
                    "no catalog at {location}: `nvrec archive` makes it, `nvrec catalog rebuild URL` makes it from an archive"
                ))
                .into());
            }
            let catalog = Catalog::open(&location)?;
            let rows = catalog.list(&Filter {
                archive_url,
                node: args.node,
                label: args.label,
                from_ns: args.from,
                to_ns: args.to,
                min_bytes: args.min_size,
                with_losses: args.with_losses,
                community_id: args.community_id,
                host: args.host,
            })?;
            if json {
                outln!(
                    "{}",
                    serde_json::json!({"catalog": location, "recordings": rows})
                );
            } else if rows.is_empty() {
                outln!("no recordings");
            } else {
                print_listing_header(Listing::Catalog);
                for row in &rows {
                    print_listing_row(row, Listing::Catalog);
                }
            }
            Ok(Class::Done)
        }
    }
}

/// Which listing of archived recordings a line belongs to: `ls URL` (its last columns are
/// the segments and the name) or `catalog ls` (the holes, the name and the archive).
#[derive(Clone, Copy)]
enum Listing {
    Archive,
    Catalog,
}

fn print_listing_header(listing: Listing) {
    let (count, last) = match listing {
        Listing::Archive => ("segs", "name"),
        Listing::Catalog => ("holes", "name / archive"),
    };
    outln!(
        "{:<16} {:<8} {:>4}  {:<16} {:<23} {:>10} {:>12} {:>12} {count:>6}  {last}",
        "node",
        "set",
        "id",
        "state",
        "start (UTC)",
        "duration",
        "bytes",
        "lost bytes",
    );
}

fn print_listing_row(row: &CatalogRow, listing: Listing) {
    let (count, last) = match listing {
        Listing::Archive => (row.segment_count, row.label.clone()),
        Listing::Catalog => (
            row.hole_count,
            format!("{} / {}", row.label, row.archive_url),
        ),
    };
    outln!(
        "{:<16} {:<8} {:>4}  {:<16} {:<23} {:>9.1}s {:>12} {:>12} {count:>6}  {last}",
        row.node,
        row.set_uuid.get(..8).unwrap_or(&row.set_uuid),
        row.recording_id,
        row.state,
        format_utc_ns(row.start_ns),
        row.end_ns.saturating_sub(row.start_ns) as f64 / 1e9,
        row.stream_len_bytes.saturating_sub(row.lost_bytes),
        row.lost_bytes,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_parse_as_the_epoch_counts_them() {
        assert_eq!(parse_utc_ns("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_utc_ns("2000-03-01T00:00:00Z").unwrap(),
            951_868_800 * 1_000_000_000
        );
        assert_eq!(
            parse_utc_ns("2026-11-26T10:00:00.5Z").unwrap(),
            1_795_687_200 * 1_000_000_000 + 500_000_000
        );
        assert_eq!(parse_utc_ns("@1.5").unwrap(), 1_500_000_000);
        for bad in ["", "2026-13-01T00:00:00Z", "yesterday", "@-1", "2026-11-26"] {
            assert!(parse_utc_ns(bad).is_err(), "{bad}");
        }
    }
}
