//! `nvrec archive`, `nvrec catalog`, and reading archives in place: `ls`, `replay`, `verify`
//! and `export` take an archive URL (`file://DIR`, `s3://BUCKET/PREFIX`) where they take the
//! members of a volume set, through [`ChunkSource`].

use crate::{exit, progress, signal, EngineArg, Finished, UsageError};
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nvrec::control::{Control, ControlState, Progress};
use nvrec::device::{Access, Safety};
use nvrec::layout::RecordingEntry;
use nvrec::recording::reader::{self, Item, ReadSummary};
use nvrec::recording::volume::{self, VolumeSet};
use nvrec::unit::{format_bytes, format_utc_ns, parse_rate_bytes_per_s, parse_size_bytes};
use nvrec_archive::catalog::{Catalog, CatalogLocation, CatalogRow, Filter};
use nvrec_archive::free::{self, Freed};
use nvrec_archive::read::ArchivedRecording;
use nvrec_archive::state::State;
use nvrec_archive::store::Mode;
use nvrec_archive::upload::{self, ArchiveOptions, Outcome};
use nvrec_archive::Manifest;
use nvrec_archive::{Archive, ArchiveUrl};
use std::path::PathBuf;
use std::sync::Arc;
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
    /// The catalog: an SQLite file, or a PostgreSQL database (postgres://...). Default:
    /// $NVREC_CATALOG, else $XDG_STATE_HOME/nvrec/catalog.sqlite.
    #[arg(long, env = "NVREC_CATALOG", hide_env_values = true)]
    catalog: Option<String>,
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

/// The archive URL among `targets`, if they name one: exactly one URL, and nothing else.
pub fn url_of(targets: &[PathBuf]) -> Result<Option<ArchiveUrl>, UsageError> {
    let urls: Vec<&str> = targets
        .iter()
        .filter_map(|t| t.to_str())
        .filter(|t| ArchiveUrl::looks_like_url(t))
        .collect();
    match (urls.as_slice(), targets.len()) {
        ([], _) => Ok(None),
        ([url], 1) => ArchiveUrl::parse(url)
            .map(Some)
            .map_err(|error| UsageError(error.to_string())),
        _ => Err(UsageError(
            "an archive URL comes alone: read one archive, or the members of one volume set".into(),
        )),
    }
}

/// Where a reader's chunks come from: a volume set's members, or an archive.
pub enum ChunkSource {
    Set(VolumeSet),
    Archive {
        archive: Archive,
        recordings: Vec<ArchivedRecording>,
        /// Manifests that could not be read, each "KEY: why": what they describe is not
        /// among `recordings`, so whoever checks the archive must count them as bad.
        unreadable: Vec<String>,
    },
}

impl ChunkSource {
    /// Opens `targets`: an archive URL, or the members of a volume set.
    pub fn open(targets: &[PathBuf]) -> Result<ChunkSource> {
        match url_of(targets)? {
            Some(url) => {
                let archive = Archive::open(&url, Mode::Read)?;
                let (recordings, unreadable) = nvrec_archive::read::recordings(&archive)?;
                for bad in &unreadable {
                    errln!("nvrec: {}: unreadable manifest: {}", bad.key, bad.error);
                }
                Ok(ChunkSource::Archive {
                    archive,
                    recordings,
                    unreadable: unreadable
                        .iter()
                        .map(|bad| format!("{}: {}", bad.key, bad.error))
                        .collect(),
                })
            }
            None => Ok(ChunkSource::Set(volume::open(
                targets,
                Access::Read,
                Safety::Check,
            )?)),
        }
    }

    /// Manifests of an archive that could not be read (none for a volume set).
    pub fn unreadable(&self) -> &[String] {
        match self {
            ChunkSource::Set(_) => &[],
            ChunkSource::Archive { unreadable, .. } => unreadable,
        }
    }

    /// Checks, for an archive, that the store holds every object of each of `entries` as
    /// it was uploaded, by HEAD requests (see [`nvrec_archive::free::verify_stored`]):
    /// `None` for a volume set, else per entry what is wrong, if anything.
    pub fn check_stored(&self, entries: &[RecordingEntry]) -> Option<Vec<Option<String>>> {
        let ChunkSource::Archive {
            archive,
            recordings,
            ..
        } = self
        else {
            return None;
        };
        Some(
            entries
                .iter()
                .map(|entry| {
                    let recording = archived(recordings, entry);
                    nvrec_archive::free::verify_stored(archive, &recording.manifest)
                        .err()
                        .map(|error| error.to_string())
                })
                .collect(),
        )
    }

    /// The archive's URL, for an archive.
    pub fn archive_url(&self) -> Option<String> {
        match self {
            ChunkSource::Set(_) => None,
            ChunkSource::Archive { archive, .. } => Some(archive.url().to_string()),
        }
    }

    pub fn set(&self) -> Option<&VolumeSet> {
        match self {
            ChunkSource::Set(set) => Some(set),
            ChunkSource::Archive { .. } => None,
        }
    }

    /// The recordings, as readers see them.
    pub fn recordings(&self) -> Result<Vec<RecordingEntry>> {
        match self {
            ChunkSource::Set(set) => Ok(nvrec::recording::reader::listed(set)?),
            ChunkSource::Archive { recordings, .. } => {
                Ok(recordings.iter().map(|r| r.entry.clone()).collect())
            }
        }
    }

    /// Recording `id` (default: the last). In an archive of several volume sets, an id
    /// that more than one holds must be told apart (its manifest key) and is refused.
    pub fn select(&self, id: Option<u32>) -> Result<RecordingEntry> {
        let entries = self.recordings()?;
        if let (ChunkSource::Archive { recordings, .. }, Some(id)) = (self, id) {
            let matching: Vec<&ArchivedRecording> = recordings
                .iter()
                .filter(|r| r.entry.recording_id == id)
                .collect();
            if matching.len() > 1 {
                return Err(UsageError(format!(
                    "recording {id} is in the archive {} times: {}; give the archive URL down to \
                     one node and set (URL/NODE/SET-UUID)",
                    matching.len(),
                    matching
                        .iter()
                        .map(|r| r.manifest.key())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into());
            }
        }
        Ok(reader::select(&entries, id)?)
    }

    /// A member, as messages name it.
    pub fn describe_member(&self, index: usize) -> String {
        match self {
            ChunkSource::Set(set) => volume::describe_member(set, index),
            ChunkSource::Archive { archive, .. } => {
                format!("member {index}, archived in {}", archive.url())
            }
        }
    }

    /// Reads `entry` from the first chunk at or after `from_ns`, as
    /// [`reader::read_recording_from`] does.
    pub fn read_from(
        &self,
        entry: &RecordingEntry,
        engine: EngineArg,
        from_ns: Option<u64>,
        control: &Control,
        progress: &Progress,
        each: &mut dyn FnMut(Item<'_>) -> bool,
    ) -> Result<ReadSummary> {
        match self {
            ChunkSource::Set(set) => Ok(reader::read_recording_from(
                set,
                entry,
                engine.choice(),
                from_ns,
                control,
                progress,
                each,
            )?),
            ChunkSource::Archive {
                archive,
                recordings,
                ..
            } => {
                let recording = archived(recordings, entry);
                Ok(nvrec_archive::read::read_recording(
                    archive, recording, from_ns, control, progress, each,
                )?)
            }
        }
    }
}

/// The archived recording that `entry` (one of the archive's own entries) came from.
fn archived<'a>(
    recordings: &'a [ArchivedRecording],
    entry: &RecordingEntry,
) -> &'a ArchivedRecording {
    recordings
        .iter()
        .find(|r| r.entry.set_uuid == entry.set_uuid && r.entry.recording_id == entry.recording_id)
        .expect("entries of an archive come from its manifests")
}

pub fn archive(args: ArchiveArgs, json: bool) -> Result<Finished> {
    let url = ArchiveUrl::parse(&args.to).map_err(|error| UsageError(error.to_string()))?;
    if url == ArchiveUrl::Memory {
        return Err(UsageError(format!(
            "--to {url}: an archive in memory is gone when nvrec ends; give file://DIR or s3://BUCKET/PREFIX"
        ))
        .into());
    }
    let mut options = ArchiveOptions::new(args.node.unwrap_or_else(host_name));
    options.recording = args.recording;
    options.max_rate_bytes_per_s = args.max_rate;
    options.segment_size_bytes = args.segment_size;
    options.part_size_bytes = args.part_size;
    options.parts_in_flight = args.parts_in_flight;
    options.engine = args.engine.choice();
    if args.follow {
        if args.poll.is_zero() {
            return Err(UsageError("--poll must be longer than 0".into()).into());
        }
        options.live = upload::Live::Follow { poll: args.poll };
    }
    // Everything about the arguments first, before the drives or the store are touched.
    options_check(&options)?;
    // Freeing writes the members (a discard): opened for writing, which a running
    // recording refuses.
    let access = if args.delete_after_verify {
        Access::Write
    } else {
        Access::Read
    };
    let set = volume::open(&args.targets, access, Safety::Check)?;
    let archive = Archive::open(&url, Mode::Write)?;
    let state_path = args
        .state
        .unwrap_or_else(|| state_dir().join("archive-state.sqlite"));
    let state = State::open(&state_path)?;
    let catalog = Catalog::open(&catalog_location(args.catalog))?;
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), "archive".into(), !json);
    let reports = upload::archive_set(
        &archive,
        &set,
        &state,
        Some(&catalog),
        &options,
        &signal::CONTROL,
        &progress,
    )
    .with_context(|| format!("archiving to {url}"))?;
    drop(display);
    let holes = reports.iter().any(|r| !r.holes.is_empty());
    let mut freed: Vec<(u32, Freed)> = Vec::new();
    if args.delete_after_verify {
        let entries = reader::recordings(&set)?;
        for report in &reports {
            if !matches!(report.outcome, Outcome::Archived | Outcome::AlreadyArchived) {
                continue;
            }
            let Some(entry) = entries
                .iter()
                .find(|e| e.recording_id == report.recording_id)
            else {
                continue;
            };
            let manifest =
                Manifest::decode(&report.manifest_key, &archive.get(&report.manifest_key)?)?;
            let outcome =
                free::free_recording(&archive, &set, entry, &manifest).with_context(|| {
                    format!(
                        "freeing recording {} after its archive",
                        report.recording_id
                    )
                })?;
            freed.push((report.recording_id, outcome));
        }
    }
    if json {
        outln!(
            "{}",
            serde_json::json!({
                "archive": url.to_string(),
                "node": options.node,
                "set_uuid": set.set_uuid.to_string(),
                "recordings": reports,
                "freed": freed.iter().map(|(id, outcome)| serde_json::json!({"recording_id": id, "outcome": outcome})).collect::<Vec<_>>(),
            })
        );
    } else {
        for report in &reports {
            let what = match report.outcome {
                Outcome::Archived => format!(
                    "archived: {} segments ({} sent while recording, {} kept from before, {} resumed), {} in {} chunks, {} uploaded in {:.1} s, {:.1} MiB/s",
                    report.segment_count,
                    report.segments_sent_live,
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
            match freed.iter().find(|(id, _)| *id == report.recording_id) {
                Some((_, Freed::Freed { bytes })) => outln!(
                    "  archive verified in the store: {} freed on the drives (its entry stays; read it from the archive)",
                    format_bytes(*bytes)
                ),
                Some((_, Freed::Kept { why })) => outln!("  kept on the drives: {why}"),
                None => {}
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
    }
    Ok(Finished(match signal::CONTROL.state() {
        ControlState::Abort => exit::ABORTED,
        _ if holes => exit::FAILURE,
        _ => exit::OK,
    }))
}

fn options_check(options: &ArchiveOptions) -> Result<(), UsageError> {
    nvrec_archive::manifest::check_node(&options.node).map_err(|e| UsageError(e.to_string()))?;
    if options.part_size_bytes < 5 << 20 {
        return Err(UsageError(format!(
            "--part-size {}: S3 takes parts of 5 MiB and more",
            format_bytes(options.part_size_bytes)
        )));
    }
    if options.segment_size_bytes < options.part_size_bytes {
        return Err(UsageError(format!(
            "--segment-size {} is smaller than --part-size {}",
            format_bytes(options.segment_size_bytes),
            format_bytes(options.part_size_bytes)
        )));
    }
    if options.parts_in_flight == 0 {
        return Err(UsageError("--parts-in-flight must be 1 or more".into()));
    }
    if options
        .max_rate_bytes_per_s
        .is_some_and(|rate| !(rate.is_finite() && rate > 0.0))
    {
        return Err(UsageError("--max-rate must be above 0".into()));
    }
    Ok(())
}

/// `nvrec ls URL`: the archive's recordings.
pub fn ls(url: &ArchiveUrl, json: bool) -> Result<Finished> {
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
                for hole in &m.holes {
                    outln!("      HOLE: {} chunks: {}", hole.chunk_count, hole.what);
                }
            }
        }
        for u in &unreadable {
            outln!("UNREADABLE MANIFEST {}: {}", u.key, u.error);
        }
    }
    Ok(Finished(if unreadable.is_empty() {
        exit::OK
    } else {
        exit::FAILURE
    }))
}

pub fn catalog(args: CatalogArgs, json: bool) -> Result<Finished> {
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
            Ok(Finished(if rebuilt.unreadable.is_empty() {
                exit::OK
            } else {
                exit::FAILURE
            }))
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
            Ok(Finished(exit::OK))
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
