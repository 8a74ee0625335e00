//! The pictures of `bench report` that set drives side by side, from saved benches of any
//! number of drives:
//! - continuous write and read, a pair of bars a drive (the NVMe Streamer's "average
//!   continuous performance": a fill's bytes over its time, and its read back);
//! - peak against continuous, for write and for read (the streamer's "peak vs continuous"):
//!   a sweep's peak beside a fill's continuous rate;
//! - measured against rated, for read and for write (the TySOM article's charts of measured
//!   against declared speed): the rating (`--rated`, of the report or saved with a bench)
//!   beside the sweep's peak and the fill's continuous rate;
//! - direct against page cache (the TySOM article's dd comparison): a direct sweep and a
//!   `--buffered` sweep of the same drive, at the largest transfer both made and against
//!   transfer size.
//!
//! A drive is a target as a bench names it: its path (or `sim`) with its model and serial,
//! so that two simulated drives of different models are two drives. Several benches of one
//! kind on a drive are averaged. A bench on several drives at once gives each drive's run
//! alone (its run while all ran where it has none).
//!
//! What it deliberately does not do: read files (`bench_compare` loads them), draw a picture
//! without the benches it needs (the page says which are missing), or judge a rate.

use anyhow::Result;
use nvrec::bench::Rated;
use nvrec::report::{Axis, AxisFormat, BarChart, Chart, LineChart, Scale, Section, Series, Table};
use nvrec_app::UsageError;
use serde_json::Value;
use std::collections::BTreeMap;

/// A drive's figure that a picture draws (`None`: the drive has no bench that measures it).
type DriveRate = fn(&DriveFigures) -> Option<f64>;
/// One rate of a transfer size of the direct against page cache picture.
type CacheRate = fn(&CachePoint) -> f64;
/// A picture's section, where some drive has what it needs.
type Picture = fn(&[DriveFigures]) -> Option<Section>;

/// One drive's run of one saved bench.
pub(crate) struct Run {
    /// Where it comes from: the file's name, and the drive's number in a bench on several.
    pub(crate) source: String,
    /// The bench's JSON in the one-drive schema (`nvrec.bench`).
    pub(crate) value: Value,
    /// The rating saved with it (`--rated` of the bench).
    pub(crate) rating: Option<Rated>,
}

impl Run {
    pub(crate) fn new(source: String, value: Value, rating_value: Option<&Value>) -> Run {
        let rating = rating_value.and_then(|rating| {
            Some(Rated {
                read_bytes_per_s: rating.pointer("/read_bytes_per_s")?.as_f64()?,
                write_bytes_per_s: rating.pointer("/write_bytes_per_s")?.as_f64()?,
            })
        });
        Run {
            source,
            value,
            rating,
        }
    }

    fn kind(&self) -> &str {
        self.value
            .pointer("/meta/bench")
            .and_then(Value::as_str)
            .unwrap_or("?")
    }

    fn buffered(&self) -> bool {
        self.value
            .pointer("/buffered")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// The ratings `bench report --rated` was given: `READ,WRITE` for every drive, or
/// `TARGET=READ,WRITE` for one.
#[derive(Debug, Default)]
pub(crate) struct Ratings {
    every: Option<Rated>,
    by_target: Vec<(String, Rated)>,
}

impl Ratings {
    /// Parses each `--rated`; two for every drive, or two for one target, are refused.
    pub(crate) fn parse(texts: &[String]) -> Result<Ratings> {
        let mut ratings = Ratings::default();
        for text in texts {
            let (target, rating) = match text.rsplit_once('=') {
                Some((target, rating)) => (Some(target.trim()), rating),
                None => (None, text.as_str()),
            };
            let rated = Rated::parse(rating).map_err(|error| UsageError(error.to_string()))?;
            match target {
                Some("") => {
                    return Err(UsageError(format!(
                        "--rated '{text}': name the drive before '=' (TARGET=READ,WRITE), or give READ,WRITE for every drive"
                    ))
                    .into())
                }
                Some(target) if ratings.by_target.iter().any(|(t, _)| t == target) => {
                    return Err(
                        UsageError(format!("--rated gives {target} two ratings")).into()
                    )
                }
                Some(target) => ratings.by_target.push((target.to_string(), rated)),
                None if ratings.every.is_some() => {
                    return Err(UsageError(
                        "--rated READ,WRITE for every drive is given twice: name the drive of each (TARGET=READ,WRITE)"
                            .to_string(),
                    )
                    .into())
                }
                None => ratings.every = Some(rated),
            }
        }
        Ok(ratings)
    }
}

/// Where a drive's rating came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RatingFrom {
    /// `bench report --rated TARGET=READ,WRITE`.
    ReportForTheDrive,
    /// `--rated` of one of the drive's benches, saved with it.
    Bench,
    /// `bench report --rated READ,WRITE`, for every drive without one of its own.
    ReportForEvery,
}

impl RatingFrom {
    fn describe(self) -> &'static str {
        match self {
            RatingFrom::ReportForTheDrive => "report --rated TARGET=",
            RatingFrom::Bench => "the bench's --rated",
            RatingFrom::ReportForEvery => "report --rated",
        }
    }
}

/// One transfer size of a direct sweep and a buffered one.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct CachePoint {
    pub(crate) bytes: u64,
    pub(crate) direct_write_bytes_per_s: f64,
    pub(crate) direct_read_bytes_per_s: f64,
    pub(crate) buffered_write_bytes_per_s: f64,
    pub(crate) buffered_read_bytes_per_s: f64,
}

/// What one drive's benches give the pictures; also `bench report --json`'s `drives`.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct DriveFigures {
    /// How the pictures name it (the target's file name, numbered where two share it).
    pub(crate) label: String,
    pub(crate) target: String,
    pub(crate) model: Option<String>,
    pub(crate) serial: Option<String>,
    /// The saved benches it comes from.
    pub(crate) sources: Vec<String>,
    pub(crate) fill_count: usize,
    /// A fill's bytes over its time (its runs' average with `--runs`), mean of the fills.
    pub(crate) continuous_write_bytes_per_s: Option<f64>,
    /// A fill's read back, mean of the fills that read back.
    pub(crate) continuous_read_bytes_per_s: Option<f64>,
    /// Direct sweeps (buffered ones are in `page_cache`).
    pub(crate) sweep_count: usize,
    /// A sweep's peak (the best transfer size's mean of runs), mean of the sweeps.
    pub(crate) peak_write_bytes_per_s: Option<f64>,
    pub(crate) peak_read_bytes_per_s: Option<f64>,
    pub(crate) rated: Option<Rated>,
    pub(crate) rated_from: Option<RatingFrom>,
    /// Each transfer size both a direct and a buffered sweep made, in size order; empty
    /// without both.
    pub(crate) page_cache: Vec<CachePoint>,
    /// How the buffered sweeps dropped the page cache (`fadvise`, `drop_caches`).
    pub(crate) page_cache_drop: Option<String>,
}

impl DriveFigures {
    /// The largest transfer size both sweeps made.
    fn largest_cache_point(&self) -> Option<&CachePoint> {
        self.page_cache.last()
    }
}

/// The drives of `runs`, in the order they first appear, with the ratings applied; a
/// `--rated TARGET=` that names no drive is refused.
pub(crate) fn drives(runs: &[Run], ratings: &Ratings) -> Result<Vec<DriveFigures>> {
    let mut keys: Vec<DriveKey> = Vec::new();
    let mut of_drive: Vec<Vec<&Run>> = Vec::new();
    for run in runs {
        let key = DriveKey::of(&run.value);
        match keys.iter().position(|k| *k == key) {
            Some(index) => of_drive[index].push(run),
            None => {
                keys.push(key);
                of_drive.push(vec![run]);
            }
        }
    }
    let labels = labels(&keys);
    for (target, _) in &ratings.by_target {
        if !keys
            .iter()
            .zip(&labels)
            .any(|(key, label)| key.name == *target || label == target)
        {
            return Err(UsageError(format!(
                "--rated {target}=...: no saved bench measured a drive of that name (the drives: {})",
                labels.join(", ")
            ))
            .into());
        }
    }
    Ok(keys
        .into_iter()
        .zip(labels)
        .zip(of_drive)
        .map(|((key, label), runs)| figures(key, label, &runs, ratings))
        .collect())
}

/// A drive as its benches name it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DriveKey {
    name: String,
    model: Option<String>,
    serial: Option<String>,
}

impl DriveKey {
    fn of(value: &Value) -> DriveKey {
        let text = |pointer: &str| {
            value
                .pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        DriveKey {
            name: text("/meta/target/name").unwrap_or_else(|| "?".to_string()),
            model: text("/meta/target/model"),
            serial: text("/meta/target/serial"),
        }
    }
}

/// Short names for the pictures' categories: the target's file name, numbered where
/// several drives share it (two simulated drives are `sim 1` and `sim 2`).
fn labels(keys: &[DriveKey]) -> Vec<String> {
    let short = |key: &DriveKey| {
        std::path::Path::new(&key.name).file_name().map_or_else(
            || key.name.clone(),
            |name| name.to_string_lossy().to_string(),
        )
    };
    let shorts: Vec<String> = keys.iter().map(short).collect();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    shorts
        .iter()
        .map(|name| {
            if shorts.iter().filter(|other| *other == name).count() == 1 {
                return name.clone();
            }
            let number = seen.entry(name).or_insert(0);
            *number += 1;
            format!("{name} {number}")
        })
        .collect()
}

fn number(value: &Value, pointer: &str) -> Option<f64> {
    value.pointer(pointer).and_then(Value::as_f64)
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let values: Vec<f64> = values.filter(|value| value.is_finite()).collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// A fill's continuous write: its runs' average where it has one, else its own.
fn fill_write(value: &Value) -> Option<f64> {
    number(value, "/average/write_bytes_per_s")
        .or_else(|| number(value, "/summary/mean_write_bytes_per_s"))
}

fn fill_read(value: &Value) -> Option<f64> {
    number(value, "/average/read_bytes_per_s")
        .or_else(|| number(value, "/summary/read_bytes_per_s"))
}

fn figures(key: DriveKey, label: String, runs: &[&Run], ratings: &Ratings) -> DriveFigures {
    let of = |kind: &str, buffered: bool| -> Vec<&Value> {
        runs.iter()
            .filter(|run| run.kind() == kind && run.buffered() == buffered)
            .map(|run| &run.value)
            .collect()
    };
    let fills = of("fill", false);
    let sweeps = of("sweep", false);
    let buffered_sweeps = of("sweep", true);
    let (rated, rated_from) = rating(&key, &label, runs, ratings);
    let page_cache_drop = buffered_sweeps
        .iter()
        .filter_map(|sweep| sweep.pointer("/cache_drop/method").and_then(Value::as_str))
        .max()
        .map(str::to_string);
    DriveFigures {
        label,
        target: key.name,
        model: key.model,
        serial: key.serial,
        sources: runs.iter().map(|run| run.source.clone()).collect(),
        fill_count: fills.len(),
        continuous_write_bytes_per_s: mean(fills.iter().filter_map(|f| fill_write(f))),
        continuous_read_bytes_per_s: mean(fills.iter().filter_map(|f| fill_read(f))),
        sweep_count: sweeps.len(),
        peak_write_bytes_per_s: mean(
            sweeps
                .iter()
                .filter_map(|s| number(s, "/summary/peak_write_bytes_per_s")),
        ),
        peak_read_bytes_per_s: mean(
            sweeps
                .iter()
                .filter_map(|s| number(s, "/summary/peak_read_bytes_per_s")),
        ),
        rated,
        rated_from,
        page_cache: cache_points(&sweeps, &buffered_sweeps),
        page_cache_drop,
    }
}

/// The drive's rating: the report's for this drive, else one saved with its benches, else
/// the report's for every drive.
fn rating(
    key: &DriveKey,
    label: &str,
    runs: &[&Run],
    ratings: &Ratings,
) -> (Option<Rated>, Option<RatingFrom>) {
    if let Some((_, rated)) = ratings
        .by_target
        .iter()
        .find(|(target, _)| *target == key.name || target == label)
    {
        return (Some(*rated), Some(RatingFrom::ReportForTheDrive));
    }
    if let Some(rated) = runs.iter().find_map(|run| run.rating) {
        return (Some(rated), Some(RatingFrom::Bench));
    }
    match ratings.every {
        Some(rated) => (Some(rated), Some(RatingFrom::ReportForEvery)),
        None => (None, None),
    }
}

/// Each transfer size's mean write and read over `sweeps`.
fn sweep_means(sweeps: &[&Value]) -> BTreeMap<u64, (f64, f64)> {
    let mut sums: BTreeMap<u64, (f64, f64, usize)> = BTreeMap::new();
    for sweep in sweeps {
        for point in sweep
            .pointer("/points")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
        {
            let (Some(bytes), Some(write), Some(read)) = (
                point.pointer("/bytes").and_then(Value::as_u64),
                number(point, "/write/mean_bytes_per_s"),
                number(point, "/read/mean_bytes_per_s"),
            ) else {
                continue;
            };
            let sum = sums.entry(bytes).or_insert((0.0, 0.0, 0));
            *sum = (sum.0 + write, sum.1 + read, sum.2 + 1);
        }
    }
    sums.into_iter()
        .map(|(bytes, (write, read, count))| (bytes, (write / count as f64, read / count as f64)))
        .collect()
}

fn cache_points(direct: &[&Value], buffered: &[&Value]) -> Vec<CachePoint> {
    let buffered = sweep_means(buffered);
    sweep_means(direct)
        .into_iter()
        .filter_map(|(bytes, (direct_write, direct_read))| {
            let (buffered_write, buffered_read) = buffered.get(&bytes)?;
            Some(CachePoint {
                bytes,
                direct_write_bytes_per_s: direct_write,
                direct_read_bytes_per_s: direct_read,
                buffered_write_bytes_per_s: *buffered_write,
                buffered_read_bytes_per_s: *buffered_read,
            })
        })
        .collect()
}

fn rate_axis() -> Axis {
    Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS)
}

fn mb(value: Option<f64>) -> String {
    value.map_or("-".to_string(), |v| format!("{:.0}", v / 1e6))
}

fn percent(measured: Option<f64>, of: Option<f64>) -> String {
    match (measured, of) {
        (Some(measured), Some(of)) if of > 0.0 => format!("{:.1} %", measured / of * 100.0),
        _ => "-".to_string(),
    }
}

/// Bars of `drives`: a category a drive, a series a `(name, value)` of each.
fn bars(title: &str, drives: &[&DriveFigures], series: &[(&str, DriveRate)]) -> Chart {
    Chart::Bars(BarChart {
        title: title.to_string(),
        categories: drives.iter().map(|drive| drive.label.clone()).collect(),
        series_names: series.iter().map(|(name, _)| name.to_string()).collect(),
        values: series
            .iter()
            .map(|(_, value)| {
                drives
                    .iter()
                    .map(|drive| value(drive).unwrap_or(f64::NAN))
                    .collect()
            })
            .collect(),
        y: rate_axis(),
    })
}

/// The drive pictures' sections, each where some drive has what it needs, and a section of
/// the drives saying what each picture needs that is missing.
pub(crate) fn sections(drives: &[DriveFigures]) -> Vec<Section> {
    if drives.is_empty() {
        return Vec::new();
    }
    let mut missing: Vec<String> = Vec::new();
    let mut sections = vec![drives_section(drives)];
    let pictures: [(Picture, &str); 4] = [
        (
            continuous_section,
            "continuous write and read needs a fill (bench fill --save)",
        ),
        (
            peak_section,
            "peak against continuous needs a sweep and a fill of the same drive",
        ),
        (
            rated_section,
            "measured against rated needs a rating (--rated of the bench, or of the report: READ,WRITE or TARGET=READ,WRITE) and a sweep or a fill",
        ),
        (
            cache_section,
            "direct against page cache needs a sweep and a bench sweep --buffered of the same drive",
        ),
    ];
    for (picture, needs) in pictures {
        match picture(drives) {
            Some(section) => sections.push(section),
            None => missing.push(needs.to_string()),
        }
    }
    if !missing.is_empty() {
        sections[0]
            .paragraphs
            .push(format!("Not drawn: {}.", missing.join("; ")));
    }
    sections
}

fn drives_section(drives: &[DriveFigures]) -> Section {
    let rows = drives
        .iter()
        .map(|drive| {
            vec![
                drive.label.clone(),
                drive.target.clone(),
                [&drive.model, &drive.serial]
                    .iter()
                    .filter_map(|fact| fact.as_deref())
                    .collect::<Vec<_>>()
                    .join(", "),
                drive.sources.join(", "),
            ]
        })
        .collect();
    Section {
        heading: "Drives".to_string(),
        paragraphs: vec![
            "The drives the saved benches measured, as the pictures below name them. Of a bench on several drives together, each drive's run alone counts."
                .to_string(),
        ],
        charts: Vec::new(),
        tables: vec![Table {
            caption: "Drives and their benches".to_string(),
            header: ["drive", "target", "model, serial", "benches"]
                .map(String::from)
                .to_vec(),
            rows,
        }],
    }
}

fn continuous_section(drives: &[DriveFigures]) -> Option<Section> {
    let with: Vec<&DriveFigures> = drives
        .iter()
        .filter(|drive| drive.continuous_write_bytes_per_s.is_some())
        .collect();
    if with.is_empty() {
        return None;
    }
    let chart = bars(
        "Average continuous write and read",
        &with,
        &[
            ("write", |d| d.continuous_write_bytes_per_s),
            ("read", |d| d.continuous_read_bytes_per_s),
        ],
    );
    let rows = with
        .iter()
        .map(|drive| {
            vec![
                drive.label.clone(),
                mb(drive.continuous_write_bytes_per_s),
                mb(drive.continuous_read_bytes_per_s),
                drive.fill_count.to_string(),
            ]
        })
        .collect();
    Some(Section {
        heading: "Continuous write and read".to_string(),
        paragraphs: vec![
            "Each drive written whole (or --size) in one stream by bench fill, then read back and compared: bytes over time, the NVMe Streamer's average continuous performance. A fill with --runs gives its runs' average; several fills of a drive, their mean."
                .to_string(),
        ],
        charts: vec![chart],
        tables: vec![Table {
            caption: "Continuous rates (MB/s)".to_string(),
            header: ["drive", "write", "read", "fills"].map(String::from).to_vec(),
            rows,
        }],
    })
}

fn peak_section(drives: &[DriveFigures]) -> Option<Section> {
    let with: Vec<&DriveFigures> = drives
        .iter()
        .filter(|drive| {
            drive.peak_write_bytes_per_s.is_some() && drive.continuous_write_bytes_per_s.is_some()
        })
        .collect();
    if with.is_empty() {
        return None;
    }
    let charts = vec![
        bars(
            "Write: peak (sweep) against continuous (fill)",
            &with,
            &[
                ("peak write", |d| d.peak_write_bytes_per_s),
                ("continuous write", |d| d.continuous_write_bytes_per_s),
            ],
        ),
        bars(
            "Read: peak (sweep) against continuous (fill)",
            &with,
            &[
                ("peak read", |d| d.peak_read_bytes_per_s),
                ("continuous read", |d| d.continuous_read_bytes_per_s),
            ],
        ),
    ];
    let rows = with
        .iter()
        .flat_map(|drive| {
            [
                (
                    "write",
                    drive.peak_write_bytes_per_s,
                    drive.continuous_write_bytes_per_s,
                ),
                (
                    "read",
                    drive.peak_read_bytes_per_s,
                    drive.continuous_read_bytes_per_s,
                ),
            ]
            .map(|(op, peak, continuous)| {
                vec![
                    drive.label.clone(),
                    op.to_string(),
                    mb(peak),
                    mb(continuous),
                    percent(continuous, peak),
                ]
            })
        })
        .collect();
    Some(Section {
        heading: "Peak against continuous".to_string(),
        paragraphs: vec![
            "The peak is the best transfer size of bench sweep (the mean of its runs): what the drive does while its caches take the data. The continuous rate is bench fill's over the whole drive: what a recording gets for as long as it runs."
                .to_string(),
        ],
        charts,
        tables: vec![Table {
            caption: "Peak and continuous (MB/s), and the continuous rate as a share of the peak"
                .to_string(),
            header: ["drive", "op", "peak", "continuous", "of peak"]
                .map(String::from)
                .to_vec(),
            rows,
        }],
    })
}

fn rated_section(drives: &[DriveFigures]) -> Option<Section> {
    let with: Vec<&DriveFigures> = drives
        .iter()
        .filter(|drive| {
            drive.rated.is_some()
                && (drive.peak_write_bytes_per_s.is_some()
                    || drive.continuous_write_bytes_per_s.is_some())
        })
        .collect();
    if with.is_empty() {
        return None;
    }
    let charts = vec![
        bars(
            "Read: measured against rated",
            &with,
            &[
                ("rated read", |d| d.rated.map(|r| r.read_bytes_per_s)),
                ("peak read (sweep)", |d| d.peak_read_bytes_per_s),
                ("continuous read (fill)", |d| d.continuous_read_bytes_per_s),
            ],
        ),
        bars(
            "Write: measured against rated",
            &with,
            &[
                ("rated write", |d| d.rated.map(|r| r.write_bytes_per_s)),
                ("peak write (sweep)", |d| d.peak_write_bytes_per_s),
                ("continuous write (fill)", |d| {
                    d.continuous_write_bytes_per_s
                }),
            ],
        ),
    ];
    let rows = with
        .iter()
        .flat_map(|drive| {
            let rated = drive.rated.expect("drives with a rating");
            let from = drive.rated_from.map_or("", RatingFrom::describe);
            [
                (
                    "read",
                    rated.read_bytes_per_s,
                    drive.peak_read_bytes_per_s,
                    drive.continuous_read_bytes_per_s,
                ),
                (
                    "write",
                    rated.write_bytes_per_s,
                    drive.peak_write_bytes_per_s,
                    drive.continuous_write_bytes_per_s,
                ),
            ]
            .map(|(op, rated, peak, continuous)| {
                vec![
                    drive.label.clone(),
                    op.to_string(),
                    mb(Some(rated)),
                    mb(peak),
                    percent(peak, Some(rated)),
                    mb(continuous),
                    percent(continuous, Some(rated)),
                    from.to_string(),
                ]
            })
        })
        .collect();
    let unrated: Vec<&str> = drives
        .iter()
        .filter(|drive| drive.rated.is_none())
        .map(|drive| drive.label.as_str())
        .collect();
    let mut paragraphs = vec![
        "What each drive is rated for (the datasheet's MB/s, given with --rated) beside what it measured: the sweep's peak, which is what ratings quote, and the fill's continuous rate. A rating given to the report for a drive (TARGET=READ,WRITE) comes first, then one saved with its benches, then one given to the report for every drive."
            .to_string(),
    ];
    if !unrated.is_empty() {
        paragraphs.push(format!(
            "No rating for {}: give the report --rated TARGET=READ,WRITE.",
            unrated.join(", ")
        ));
    }
    Some(Section {
        heading: "Measured against rated".to_string(),
        paragraphs,
        charts,
        tables: vec![Table {
            caption: "Rated and measured (MB/s), and each as a percent of the rating".to_string(),
            header: [
                "drive",
                "op",
                "rated",
                "peak",
                "of rated",
                "continuous",
                "of rated",
                "rating from",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }],
    })
}

fn cache_section(drives: &[DriveFigures]) -> Option<Section> {
    let with: Vec<&DriveFigures> = drives
        .iter()
        .filter(|drive| !drive.page_cache.is_empty())
        .collect();
    if with.is_empty() {
        return None;
    }
    let at = |pick: fn(&CachePoint) -> f64| {
        move |drive: &DriveFigures| -> Option<f64> { drive.largest_cache_point().map(pick) }
    };
    let mut charts = vec![Chart::Bars(BarChart {
        title: "Direct I/O against the page cache, at the largest transfer of both sweeps"
            .to_string(),
        categories: with.iter().map(|drive| drive.label.clone()).collect(),
        series_names: [
            "direct write",
            "page cache write",
            "direct read",
            "page cache read",
        ]
        .map(String::from)
        .to_vec(),
        values: [
            at(|p| p.direct_write_bytes_per_s),
            at(|p| p.buffered_write_bytes_per_s),
            at(|p| p.direct_read_bytes_per_s),
            at(|p| p.buffered_read_bytes_per_s),
        ]
        .iter()
        .map(|value| {
            with.iter()
                .map(|drive| value(drive).unwrap_or(f64::NAN))
                .collect()
        })
        .collect(),
        y: rate_axis(),
    })];
    for drive in &with {
        let mut chart = LineChart::new(
            &format!(
                "{}: direct I/O and the page cache against transfer size",
                drive.label
            ),
            Axis::new("transfer size (bytes)", Scale::Log2, AxisFormat::Bytes),
            rate_axis(),
        );
        let series: [(&str, CacheRate); 4] = [
            ("direct write", |p| p.direct_write_bytes_per_s),
            ("page cache write", |p| p.buffered_write_bytes_per_s),
            ("direct read", |p| p.direct_read_bytes_per_s),
            ("page cache read", |p| p.buffered_read_bytes_per_s),
        ];
        for (name, pick) in series {
            chart.series.push(Series {
                name: name.to_string(),
                points: drive
                    .page_cache
                    .iter()
                    .map(|point| (point.bytes as f64, pick(point)))
                    .collect(),
            });
        }
        charts.push(Chart::Line(chart));
    }
    let rows = with
        .iter()
        .filter_map(|drive| {
            let point = drive.largest_cache_point()?;
            Some(vec![
                drive.label.clone(),
                nvrec::unit::format_bytes(point.bytes),
                mb(Some(point.direct_write_bytes_per_s)),
                mb(Some(point.buffered_write_bytes_per_s)),
                percent(
                    Some(point.buffered_write_bytes_per_s),
                    Some(point.direct_write_bytes_per_s),
                ),
                mb(Some(point.direct_read_bytes_per_s)),
                mb(Some(point.buffered_read_bytes_per_s)),
                percent(
                    Some(point.buffered_read_bytes_per_s),
                    Some(point.direct_read_bytes_per_s),
                ),
                drive.page_cache_drop.clone().unwrap_or_default(),
            ])
        })
        .collect();
    Some(Section {
        heading: "Direct against page cache".to_string(),
        paragraphs: vec![
            "The same sweep of a drive with O_DIRECT (bench sweep) and through the page cache (bench sweep --buffered, dd without oflag=direct and iflag=direct). Through the page cache each transfer's range is dropped from the cache first, and a write is timed until the drive has its data (written back), as a direct write completes then; so both measure the drive, and the difference is what the page cache costs."
                .to_string(),
        ],
        charts,
        tables: vec![Table {
            caption: "At the largest transfer both sweeps made (MB/s); the page cache as a percent of direct I/O"
                .to_string(),
            header: [
                "drive",
                "transfer",
                "direct write",
                "page cache write",
                "of direct",
                "direct read",
                "page cache read",
                "of direct",
                "cache dropped by",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(source: &str, value: Value) -> Run {
        let rating = value.pointer("/rated/rating").cloned();
        Run::new(source.to_string(), value, rating.as_ref())
    }

    fn fill(name: &str, write: f64, read: f64) -> Value {
        json!({"meta": {"bench": "fill", "target": {"name": name}},
               "summary": {"mean_write_bytes_per_s": write, "read_bytes_per_s": read}})
    }

    fn sweep(name: &str, buffered: bool, points: &[(u64, f64, f64)]) -> Value {
        let points: Vec<Value> = points
            .iter()
            .map(|(bytes, write, read)| {
                json!({"bytes": bytes, "write": {"mean_bytes_per_s": write},
                       "read": {"mean_bytes_per_s": read}})
            })
            .collect();
        json!({"meta": {"bench": "sweep", "target": {"name": name}}, "buffered": buffered,
               "summary": {"peak_write_bytes_per_s": 3e9, "peak_read_bytes_per_s": 3.5e9},
               "points": points})
    }

    #[test]
    fn drives_gather_their_benches_and_average_each_kind() {
        let runs = vec![
            run("a.json", fill("/dev/nvme0n1", 1e9, 3e9)),
            run("b.json", fill("/dev/nvme0n1", 2e9, 3.2e9)),
            run("c.json", fill("/dev/nvme1n1", 0.5e9, 2e9)),
            run(
                "d.json",
                sweep("/dev/nvme0n1", false, &[(1 << 20, 2e9, 3e9)]),
            ),
        ];
        let drives = drives(&runs, &Ratings::default()).unwrap();
        assert_eq!(drives.len(), 2);
        assert_eq!(drives[0].label, "nvme0n1");
        assert_eq!(drives[0].fill_count, 2);
        assert_eq!(drives[0].continuous_write_bytes_per_s, Some(1.5e9));
        assert_eq!(drives[0].continuous_read_bytes_per_s, Some(3.1e9));
        assert_eq!(drives[0].peak_write_bytes_per_s, Some(3e9));
        assert_eq!(drives[1].peak_write_bytes_per_s, None);
        assert_eq!(drives[0].sources, ["a.json", "b.json", "d.json"]);
        let sections = sections(&drives);
        let headings: Vec<&str> = sections.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(
            headings,
            [
                "Drives",
                "Continuous write and read",
                "Peak against continuous"
            ]
        );
        // Only nvme0n1 has a sweep and a fill.
        let Chart::Bars(write) = &sections[2].charts[0] else {
            panic!("bars")
        };
        assert_eq!(write.categories, ["nvme0n1"]);
        assert_eq!(write.values, [vec![3e9], vec![1.5e9]]);
        assert!(sections[0].paragraphs[1].contains("measured against rated needs a rating"));
    }

    #[test]
    fn simulated_drives_of_different_models_are_numbered() {
        let sim = |model: &str| {
            json!({"meta": {"bench": "fill", "target": {"name": "sim", "model": model}},
                   "summary": {"mean_write_bytes_per_s": 1e9}})
        };
        let runs = vec![
            run("a.json", sim("fast")),
            run("b.json", sim("slow")),
            run("c.json", sim("fast")),
        ];
        let drives = drives(&runs, &Ratings::default()).unwrap();
        let labels: Vec<&str> = drives.iter().map(|d| d.label.as_str()).collect();
        assert_eq!(labels, ["sim 1", "sim 2"]);
        assert_eq!(drives[0].fill_count, 2);
    }

    #[test]
    fn ratings_of_the_report_for_a_drive_come_before_the_benches_and_those_before_every() {
        let mut rated_fill = fill("/dev/nvme1n1", 1e9, 2e9);
        rated_fill["rated"] =
            json!({"rating": {"read_bytes_per_s": 5e9, "write_bytes_per_s": 4e9}});
        let runs = vec![
            run("a.json", fill("/dev/nvme0n1", 1e9, 3e9)),
            run("b.json", rated_fill),
            run("c.json", fill("/tmp/x.img", 1e9, 3e9)),
        ];
        let ratings =
            Ratings::parse(&["3500,3000".to_string(), "x.img=7000,6000".to_string()]).unwrap();
        let drives = drives(&runs, &ratings).unwrap();
        let of = |index: usize| {
            (
                drives[index].rated.unwrap().read_bytes_per_s,
                drives[index].rated_from.unwrap(),
            )
        };
        assert_eq!(of(0), (3.5e9, RatingFrom::ReportForEvery));
        assert_eq!(of(1), (5e9, RatingFrom::Bench));
        assert_eq!(of(2), (7e9, RatingFrom::ReportForTheDrive));
        let sections = sections(&drives);
        let rated = sections
            .iter()
            .find(|s| s.heading == "Measured against rated")
            .unwrap();
        let Chart::Bars(read) = &rated.charts[0] else {
            panic!("bars")
        };
        assert_eq!(read.values[0], [3.5e9, 5e9, 7e9]);
        assert_eq!(rated.tables[0].rows[0][4], "-", "no sweep, no peak");
        assert_eq!(rated.tables[0].rows[0][6], "85.7 %", "3000 of 3500 read");
    }

    #[test]
    fn bad_ratings_are_refused() {
        for (texts, says) in [
            (vec!["3500"], "--rated '3500'"),
            (vec!["3500,3000", "1,1"], "given twice"),
            (vec!["a=1,1", "a=2,2"], "two ratings"),
            (vec!["=1,1"], "name the drive"),
        ] {
            let texts: Vec<String> = texts.into_iter().map(String::from).collect();
            let error = Ratings::parse(&texts).unwrap_err().to_string();
            assert!(error.contains(says), "{texts:?}: {error}");
        }
        let ratings = Ratings::parse(&["nvme9n1=1,1".to_string()]).unwrap();
        let runs = vec![run("a.json", fill("/dev/nvme0n1", 1e9, 3e9))];
        let error = drives(&runs, &ratings).unwrap_err().to_string();
        assert!(
            error.contains("nvme9n1") && error.contains("nvme0n1"),
            "{error}"
        );
    }

    #[test]
    fn the_page_cache_is_set_beside_direct_io_at_the_sizes_both_made() {
        let runs = vec![
            run(
                "direct.json",
                sweep(
                    "/tmp/x.img",
                    false,
                    &[
                        (1 << 20, 2e9, 3e9),
                        (2 << 20, 2.2e9, 3.1e9),
                        (4 << 20, 2.4e9, 3.2e9),
                    ],
                ),
            ),
            run(
                "buffered.json",
                sweep(
                    "/tmp/x.img",
                    true,
                    &[(1 << 20, 1e9, 1e9), (2 << 20, 1.1e9, 0.9e9)],
                ),
            ),
        ];
        let drives = drives(&runs, &Ratings::default()).unwrap();
        assert_eq!(drives.len(), 1);
        assert_eq!(drives[0].sweep_count, 1, "the buffered sweep is no peak");
        let points = &drives[0].page_cache;
        assert_eq!(points.len(), 2);
        let largest = drives[0].largest_cache_point().unwrap();
        assert_eq!(largest.bytes, 2 << 20);
        assert_eq!(
            (
                largest.direct_write_bytes_per_s,
                largest.buffered_read_bytes_per_s
            ),
            (2.2e9, 0.9e9)
        );
        let sections = sections(&drives);
        let cache = sections
            .iter()
            .find(|s| s.heading == "Direct against page cache")
            .unwrap();
        assert_eq!(
            cache.charts.len(),
            2,
            "the bars, and the drive's line chart"
        );
        assert_eq!(cache.tables[0].rows[0][4], "50.0 %");
    }
}
