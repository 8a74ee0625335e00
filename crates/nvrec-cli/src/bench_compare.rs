//! `nvrec bench report --output FILE.html A.json B.json ...`: saved benches side by side.
//!
//! Reads the JSON that `bench ... --save` wrote (any mix of sweeps, fills, overwrites and
//! profiles) and draws one page: each kind's curves overlaid, one series a file (sweep rates
//! against transfer size, fill and overwrite bandwidth over time, profile bars), the fills'
//! plateaus in a table, and a table of each file's key rates with its difference in percent
//! against the first file's. `--csv` writes that table as rows. Then the pictures that set
//! drives side by side (`bench_drives`): continuous write and read, peak against continuous,
//! measured against rated (`--rated`), direct against page cache. Works on
//! `serde_json::Value` so that results saved by older versions (fields missing) still compare
//! on what they hold.

use crate::bench_drives;
use anyhow::{Context, Result};
use clap::Args;
use nvrec::report::{
    render_html, Axis, AxisFormat, BarChart, Chart, LineChart, Report, Scale, Section, Series,
    Table,
};
use nvrec_app::{Class, UsageError};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// JSON files saved by `bench ... --save`; the first is what the others are compared to.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The HTML page to write.
    #[arg(long)]
    output: PathBuf,
    /// Also write the table of differences as CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// A drive's rating in MB/s for the picture of measured against rated: READ,WRITE for
    /// every drive without a rating of its own, TARGET=READ,WRITE for one (the target as its
    /// benches name it, or as the pictures do). Repeat for several drives. A rating saved
    /// with a bench (its --rated) counts unless the report names the drive.
    #[arg(long, value_name = "[TARGET=]READ,WRITE")]
    rated: Vec<String>,
}

/// One saved bench.
struct Saved {
    /// The file's name, then the target's.
    label: String,
    value: Value,
}

/// A saved bench on several drives at once: its drives' runs together become [`Saved`]s of
/// their own, labelled `NAME drive N (TARGET)`; this keeps the figures for a section.
struct Together {
    label: String,
    value: Value,
}

/// What one file holds: one bench, or a bench on several drives at once.
enum Loaded {
    One(Saved),
    Several(Vec<Saved>, Together),
}

fn load(path: &PathBuf) -> Result<Loaded> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| UsageError(format!("cannot read {}: {error}", path.display())))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|error| UsageError(format!("{} is not JSON: {error}", path.display())))?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().to_string(),
    );
    if value.pointer("/schema").and_then(Value::as_str) == Some("nvrec.bench.together") {
        return Ok(several(&name, value));
    }
    if value.pointer("/meta/schema").and_then(Value::as_str) != Some("nvrec.bench") {
        return Err(UsageError(format!(
            "{} is not a saved bench (no meta.schema \"nvrec.bench\"): save one with `nvrec bench ... --save FILE`",
            path.display()
        ))
        .into());
    }
    let target = value
        .pointer("/meta/target/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    Ok(Loaded::One(Saved {
        label: format!("{name} ({target})"),
        value,
    }))
}

/// Each drive's run together as a saved bench of its own, and the figures.
fn several(name: &str, value: Value) -> Loaded {
    let saved = array(&value, "/drives")
        .iter()
        .enumerate()
        .map(|(index, drive)| {
            let target = drive
                .pointer("/target/name")
                .and_then(Value::as_str)
                .unwrap_or("?");
            Saved {
                label: format!("{name} drive {} ({target})", index + 1),
                value: drive["together"].clone(),
            }
        })
        .collect();
    Loaded::Several(
        saved,
        Together {
            label: name.to_string(),
            value,
        },
    )
}

fn bench_kind(saved: &Saved) -> &str {
    saved
        .value
        .pointer("/meta/bench")
        .and_then(Value::as_str)
        .unwrap_or("?")
}

fn number(value: &Value, pointer: &str) -> Option<f64> {
    value.pointer(pointer).and_then(Value::as_f64)
}

fn array<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A saved bench's key rates, named so that the same bench of two files lines up.
fn key_rates(saved: &Saved) -> Vec<(String, f64)> {
    let value = &saved.value;
    let kind = bench_kind(saved);
    let mut rates: Vec<(String, Option<f64>)> = match kind {
        "sweep" | "fill" => [
            "peak_write_bytes_per_s",
            "peak_read_bytes_per_s",
            "mean_write_bytes_per_s",
            "sustained_write_bytes_per_s",
            "largest_write_bytes_per_s",
            "read_bytes_per_s",
        ]
        .iter()
        .map(|field| {
            let name = field.trim_end_matches("_bytes_per_s").replace('_', " ");
            (name, number(value, &format!("/summary/{field}")))
        })
        .collect(),
        _ => Vec::new(),
    };
    for (index, plateau) in array(value, "/analysis/plateaus").iter().enumerate() {
        let name = format!("plateau {}", index + 1);
        rates.push((name, number(plateau, "/rate_bytes_per_s")));
    }
    if let Some(average) = number(value, "/average/write_bytes_per_s") {
        rates.push(("average write over runs".to_string(), Some(average)));
    }
    for phase in array(value, "/phases") {
        let mode = phase["mode"].as_str().unwrap_or("?");
        for (when, field) in [
            ("before", "/rate_before_wrap_bytes_per_s"),
            ("after", "/rate_after_wrap_bytes_per_s"),
        ] {
            rates.push((format!("{mode} {when} the wrap"), number(phase, field)));
        }
    }
    for test in array(value, "/tests") {
        let name = test["name"].as_str().unwrap_or("?");
        let op = test["op"].as_str().unwrap_or("?");
        rates.push((format!("{name} {op}"), number(test, "/best_bytes_per_s")));
    }
    rates
        .into_iter()
        .filter_map(|(name, rate)| Some((format!("{kind}: {name}"), rate?)))
        .collect()
}

/// One row a rate: its name, then each file's value and difference against the first.
struct Difference {
    name: String,
    /// Per file; `None` where the file has no such rate.
    values: Vec<Option<f64>>,
}

impl Difference {
    /// Percent against the first file's value, where both are there.
    fn percent(&self, index: usize) -> Option<f64> {
        let first = self.values.first().copied().flatten()?;
        let value = self.values.get(index).copied().flatten()?;
        (first != 0.0).then(|| (value / first - 1.0) * 100.0)
    }
}

fn differences(saved: &[Saved]) -> Vec<Difference> {
    let per_file: Vec<Vec<(String, f64)>> = saved.iter().map(key_rates).collect();
    let mut names: Vec<String> = Vec::new();
    for (name, _) in per_file.iter().flatten() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
        .into_iter()
        .map(|name| Difference {
            values: per_file
                .iter()
                .map(|rates| rates.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
                .collect(),
            name,
        })
        .collect()
}

fn rate_axis() -> Axis {
    Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS)
}

/// Series of `(x, y)` from each element of the array at `pointer`.
fn points(value: &Value, pointer: &str, x: &str, y: &str) -> Vec<(f64, f64)> {
    array(value, pointer)
        .iter()
        .filter_map(|item| Some((number(item, x)?, number(item, y)?)))
        .collect()
}

/// The overlaid charts of one kind of bench.
fn charts(kind: &str, saved: &[&Saved]) -> Vec<Chart> {
    let line = |title: &str, x: Axis, series: Vec<Series>| {
        let mut chart = LineChart::new(title, x, rate_axis());
        chart.series = series;
        Chart::Line(chart)
    };
    let each = |name: &str, pointer: &str, x: &str, y: &str| -> Vec<Series> {
        saved
            .iter()
            .map(|s| Series {
                name: format!("{} {name}", s.label),
                points: points(&s.value, pointer, x, y),
            })
            .filter(|series| !series.points.is_empty())
            .collect()
    };
    let bytes_axis = || Axis::new("transfer (bytes)", Scale::Log2, AxisFormat::Bytes);
    let time_axis = || Axis::new("time (s)", Scale::Linear, AxisFormat::Seconds);
    match kind {
        "sweep" => {
            let mut series = each("write", "/points", "/bytes", "/write/mean_bytes_per_s");
            series.extend(each("read", "/points", "/bytes", "/read/mean_bytes_per_s"));
            vec![line(
                "Sweeps: rate against transfer size",
                bytes_axis(),
                series,
            )]
        }
        "fill" => {
            let mut series = each("write", "/write/windows", "/start_s", "/rate_bytes_per_s");
            series.extend(each(
                "read",
                "/read/windows",
                "/start_s",
                "/rate_bytes_per_s",
            ));
            vec![line("Fills: bandwidth over time", time_axis(), series)]
        }
        "overwrite" => {
            let series = saved
                .iter()
                .flat_map(|s| {
                    array(&s.value, "/phases").iter().map(|phase| Series {
                        name: format!("{} {}", s.label, phase["mode"].as_str().unwrap_or("?")),
                        points: points(phase, "/write/windows", "/start_s", "/rate_bytes_per_s"),
                    })
                })
                .collect();
            vec![line(
                "Overwrites: bandwidth over both laps",
                time_axis(),
                series,
            )]
        }
        _ => vec![profile_bars(saved)],
    }
}

/// Profiles as grouped bars: a category a test and direction, a bar a file.
fn profile_bars(saved: &[&Saved]) -> Chart {
    let rates: Vec<Vec<(String, f64)>> = saved.iter().map(|s| key_rates(s)).collect();
    let mut categories: Vec<String> = Vec::new();
    for (name, _) in rates.iter().flatten() {
        if !categories.contains(name) {
            categories.push(name.clone());
        }
    }
    let values = rates
        .iter()
        .map(|file| {
            categories
                .iter()
                .map(|name| {
                    file.iter()
                        .find(|(n, _)| n == name)
                        .map_or(f64::NAN, |r| r.1)
                })
                .collect()
        })
        .collect();
    Chart::Bars(BarChart {
        title: "Profiles: best of the runs".to_string(),
        categories,
        series_names: saved.iter().map(|s| s.label.clone()).collect(),
        values,
        y: rate_axis(),
    })
}

/// The fills' plateaus, a row each.
fn plateau_table(saved: &[&Saved]) -> Table {
    let mb = |bytes: Option<f64>| bytes.map_or("?".to_string(), |b| format!("{:.0}", b / 1e6));
    let rows = saved
        .iter()
        .flat_map(|s| {
            array(&s.value, "/analysis/plateaus")
                .iter()
                .enumerate()
                .map(|(index, plateau)| {
                    vec![
                        s.label.clone(),
                        (index + 1).to_string(),
                        mb(number(plateau, "/start_bytes")),
                        mb(number(plateau, "/end_bytes")),
                        mb(number(plateau, "/rate_bytes_per_s")),
                    ]
                })
                .collect::<Vec<_>>()
        })
        .collect();
    Table {
        caption: "Plateaus of each fill".to_string(),
        header: ["file", "plateau", "from MB", "to MB", "MB/s"]
            .map(String::from)
            .to_vec(),
        rows,
    }
}

fn difference_table(saved: &[Saved], rows: &[Difference]) -> Table {
    let mut header = vec!["rate (MB/s)".to_string()];
    header.extend(saved.iter().map(|s| s.label.clone()));
    let rows = rows
        .iter()
        .map(|row| {
            let mut cells = vec![row.name.clone()];
            cells.extend(row.values.iter().enumerate().map(|(index, value)| {
                match (value, row.percent(index)) {
                    (None, _) => "-".to_string(),
                    (Some(value), Some(percent)) if index > 0 => {
                        format!("{:.0} ({percent:+.1} %)", value / 1e6)
                    }
                    (Some(value), _) => format!("{:.0}", value / 1e6),
                }
            }));
            cells
        })
        .collect();
    Table {
        caption: "Key rates, and each file's difference against the first".to_string(),
        header,
        rows,
    }
}

fn csv(saved: &[Saved], rows: &[Difference]) -> String {
    let mut out = "rate,file,bytes_per_s,percent_vs_first\n".to_string();
    for row in rows {
        for (index, value) in row.values.iter().enumerate() {
            let Some(value) = value else { continue };
            let percent = row
                .percent(index)
                .map_or(String::new(), |p| format!("{p:.3}"));
            let _ = writeln!(
                out,
                "\"{}\",\"{}\",{value:.0},{percent}",
                row.name.replace('"', "\"\""),
                saved[index].label.replace('"', "\"\"")
            );
        }
    }
    out
}

/// The page: a section per kind of bench, a section per bench on several drives at once,
/// the drive pictures, then the differences.
fn report(
    saved: &[Saved],
    several: &[Together],
    drives: &[bench_drives::DriveFigures],
    rows: &[Difference],
) -> Report {
    let mut kinds: Vec<&str> = Vec::new();
    for s in saved {
        if !kinds.contains(&bench_kind(s)) {
            kinds.push(bench_kind(s));
        }
    }
    let mut sections: Vec<Section> = kinds
        .iter()
        .map(|kind| {
            let of_kind: Vec<&Saved> = saved.iter().filter(|s| bench_kind(s) == *kind).collect();
            Section {
                heading: format!("{kind}: {} files", of_kind.len()),
                paragraphs: Vec::new(),
                charts: charts(kind, &of_kind),
                tables: if *kind == "fill" {
                    vec![plateau_table(&of_kind)]
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    sections.extend(several.iter().map(together_section));
    sections.extend(bench_drives::sections(drives));
    sections.push(Section {
        heading: "Differences".to_string(),
        paragraphs: vec![format!("Against {}.", saved[0].label)],
        charts: Vec::new(),
        tables: vec![difference_table(saved, rows)],
    });
    Report {
        title: format!("nvrec bench report: {} saved benches", saved.len()),
        subtitle: String::new(),
        metadata: saved
            .iter()
            .enumerate()
            .map(|(index, s)| (format!("file {}", index + 1), s.label.clone()))
            .collect(),
        sections,
    }
}

/// Each drive's run of every file, for the drive pictures: a bench on several drives at
/// once gives each drive's run alone (its run while all ran where it has none).
fn drive_runs(loaded: &[Loaded]) -> Vec<bench_drives::Run> {
    let mut runs = Vec::new();
    for file in loaded {
        match file {
            Loaded::One(one) => runs.push(bench_drives::Run::new(
                one.label.clone(),
                one.value.clone(),
                one.value.pointer("/rated/rating"),
            )),
            Loaded::Several(_, together) => {
                for (index, drive) in array(&together.value, "/drives").iter().enumerate() {
                    let run = if drive["alone"].is_object() {
                        &drive["alone"]
                    } else {
                        &drive["together"]
                    };
                    runs.push(bench_drives::Run::new(
                        format!("{} drive {}", together.label, index + 1),
                        run.clone(),
                        drive.pointer("/rated/rating"),
                    ));
                }
            }
        }
    }
    runs
}

/// Every file's saved benches, and the figures of those on several drives.
fn flatten(loaded: Vec<Loaded>) -> (Vec<Saved>, Vec<Together>) {
    let mut saved = Vec::new();
    let mut several = Vec::new();
    for file in loaded {
        match file {
            Loaded::One(one) => saved.push(one),
            Loaded::Several(drives, together) => {
                saved.extend(drives);
                several.push(together);
            }
        }
    }
    (saved, several)
}

/// The page `bench ... --report` writes for a bench on several drives at once: each drive's
/// curves overlaid, the aggregate, the sum alone and the share.
pub fn together_report(value: &Value) -> Report {
    let bench = value["bench"].as_str().unwrap_or("bench");
    let (saved, several) = flatten(vec![several(bench, value.clone())]);
    let rows = differences(&saved);
    let mut page = report(&saved, &several, &[], &rows);
    page.title = format!("nvrec bench {bench} on {} drives at once", saved.len());
    // Here each saved bench is a drive's run while all ran, not a file.
    for section in &mut page.sections {
        if let Some(kind) = section.heading.strip_suffix(" files") {
            section.heading = format!("{kind} drives, each while all ran");
        }
    }
    for (key, _) in &mut page.metadata {
        *key = key.replace("file", "drive");
    }
    page
}

pub fn run(args: ReportArgs, json: bool) -> Result<Class> {
    let ratings = bench_drives::Ratings::parse(&args.rated)?;
    let loaded = args.files.iter().map(load).collect::<Result<Vec<_>>>()?;
    let drives = bench_drives::drives(&drive_runs(&loaded), &ratings)?;
    let (saved, several) = flatten(loaded);
    if saved.is_empty() {
        return Err(UsageError("the files hold no bench".to_string()).into());
    }
    let rows = differences(&saved);
    let html = render_html(&report(&saved, &several, &drives, &rows));
    std::fs::write(&args.output, html)
        .with_context(|| format!("writing {}", args.output.display()))?;
    if let Some(path) = &args.csv {
        std::fs::write(path, csv(&saved, &rows))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|row| {
                let percent: Vec<Option<f64>> =
                    (0..row.values.len()).map(|i| row.percent(i)).collect();
                serde_json::json!({ "rate": row.name, "bytes_per_s": row.values, "percent_vs_first": percent })
            })
            .collect();
        let files: Vec<&str> = saved.iter().map(|s| s.label.as_str()).collect();
        outln!(
            "{}",
            serde_json::json!({ "files": files, "differences": rows, "drives": drives })
        );
    } else {
        outln!(
            "{} saved benches compared; report written to {}",
            saved.len(),
            args.output.display()
        );
    }
    Ok(Class::Done)
}

/// A bench on several drives at once: the figures as bars (each drive together, the
/// aggregate, the sum alone), each rate logged over time with its aggregate, and a table.
fn together_section(together: &Together) -> Section {
    let figures = array(&together.value, "/figures");
    let drives = array(&together.value, "/drives");
    let mut series_names: Vec<String> = (1..=drives.len()).map(|n| format!("drive {n}")).collect();
    series_names.extend(["aggregate".to_string(), "sum alone".to_string()]);
    let values = (0..series_names.len())
        .map(|series| {
            figures
                .iter()
                .map(|figure| together_value(figure, series, drives.len()).unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    let mut charts = vec![Chart::Bars(BarChart {
        title: format!(
            "{}: each drive together, the aggregate, the sum alone",
            together.label
        ),
        categories: figures.iter().map(figure_name).collect(),
        series_names: series_names.clone(),
        values,
        y: rate_axis(),
    })];
    charts.extend(
        figures
            .iter()
            .filter_map(|figure| aggregate_chart(together, figure)),
    );
    Section {
        heading: format!("{}: {} drives at once", together.label, drives.len()),
        paragraphs: vec![format!(
            "The bench ran on every drive at the same time, then on each alone. The aggregate \
             is what the drives moved together while all were running; the share is the \
             aggregate over the sum of the drives alone (less than 100 % is what running \
             together cost: a shared link, switch or the CPU). Drives: {}.",
            drives
                .iter()
                .enumerate()
                .map(|(index, drive)| format!(
                    "{} {}",
                    index + 1,
                    drive
                        .pointer("/target/name")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )],
        charts,
        tables: vec![together_table(&series_names, figures, drives.len())],
    }
}

fn figure_name(figure: &Value) -> String {
    format!(
        "{} ({})",
        figure["name"].as_str().unwrap_or("?"),
        figure["op"].as_str().unwrap_or("?")
    )
}

/// Series `series` of a figure: a drive together, then the aggregate, then the sum alone.
fn together_value(figure: &Value, series: usize, drive_count: usize) -> Option<f64> {
    match series {
        drive if drive < drive_count => number(figure, &format!("/together_bytes_per_s/{drive}")),
        drive if drive == drive_count => number(figure, "/aggregate_bytes_per_s"),
        _ => number(figure, "/alone_sum_bytes_per_s"),
    }
}

/// A rate logged over time: each drive's windows and the aggregate.
fn aggregate_chart(together: &Together, figure: &Value) -> Option<Chart> {
    let aggregate: Vec<(f64, f64)> = array(figure, "/aggregate_series")
        .iter()
        .filter_map(|point| Some((point[0].as_f64()?, point[1].as_f64()?)))
        .collect();
    if aggregate.is_empty() {
        return None;
    }
    let op = figure["op"].as_str().unwrap_or("write");
    let pointer = if op == "read" {
        "/together/read/windows"
    } else {
        "/together/write/windows"
    };
    let mut chart = LineChart::new(
        &format!(
            "{}: {} of each drive and the aggregate",
            together.label,
            figure_name(figure)
        ),
        Axis::new("time (s)", Scale::Linear, AxisFormat::Seconds),
        rate_axis(),
    );
    for (index, drive) in array(&together.value, "/drives").iter().enumerate() {
        chart.series.push(Series {
            name: format!("drive {}", index + 1),
            points: points(drive, pointer, "/start_s", "/rate_bytes_per_s"),
        });
    }
    chart.series.push(Series {
        name: "aggregate".to_string(),
        points: aggregate,
    });
    Some(Chart::Line(chart))
}

fn together_table(series_names: &[String], figures: &[Value], drive_count: usize) -> Table {
    let mut header = vec!["MB/s".to_string()];
    header.extend(series_names.iter().cloned());
    header.push("share".to_string());
    let mb = |value: Option<f64>| value.map_or("-".to_string(), |v| format!("{:.0}", v / 1e6));
    let rows = figures
        .iter()
        .map(|figure| {
            let mut cells = vec![figure_name(figure)];
            cells.extend(
                (0..series_names.len())
                    .map(|series| mb(together_value(figure, series, drive_count))),
            );
            cells.push(
                number(figure, "/share_percent")
                    .map_or("-".to_string(), |share| format!("{share:.1} %")),
            );
            cells
        })
        .collect();
    Table {
        caption: "Each drive together, the aggregate, the sum of the drives alone, and the share"
            .to_string(),
        header,
        rows,
    }
}
