//! `nvrec bench report --output FILE.html A.json B.json ...`: saved benches side by side.
//!
//! Reads the JSON that `bench ... --save` wrote (any mix of sweeps, fills, overwrites and
//! profiles) and draws one page: each kind's curves overlaid, one series a file (sweep rates
//! against transfer size, fill and overwrite bandwidth over time, profile bars), the fills'
//! plateaus in a table, and a table of each file's key rates with its difference in percent
//! against the first file's. `--csv` writes that table as rows. Works on `serde_json::Value`
//! so that results saved by older versions (fields missing) still compare on what they hold.

use crate::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use nvrec::report::{
    render_html, Axis, AxisFormat, BarChart, Chart, LineChart, Report, Scale, Section, Series,
    Table,
};
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
}

/// One saved bench.
struct Saved {
    /// The file's name, then the target's.
    label: String,
    value: Value,
}

fn load(path: &PathBuf) -> Result<Saved> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| UsageError(format!("cannot read {}: {error}", path.display())))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|error| UsageError(format!("{} is not JSON: {error}", path.display())))?;
    if value.pointer("/meta/schema").and_then(Value::as_str) != Some("nvrec.bench") {
        return Err(UsageError(format!(
            "{} is not a saved bench (no meta.schema \"nvrec.bench\"): save one with `nvrec bench ... --save FILE`",
            path.display()
        ))
        .into());
    }
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().to_string(),
    );
    let target = value
        .pointer("/meta/target/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    Ok(Saved {
        label: format!("{name} ({target})"),
        value,
    })
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

/// The page: a section per kind of bench, then the differences.
fn report(saved: &[Saved], rows: &[Difference]) -> Report {
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

pub fn run(args: ReportArgs, json: bool) -> Result<crate::Finished> {
    let saved = args.files.iter().map(load).collect::<Result<Vec<_>>>()?;
    let rows = differences(&saved);
    let html = render_html(&report(&saved, &rows));
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
            serde_json::json!({ "files": files, "differences": rows })
        );
    } else {
        outln!(
            "{} saved benches compared; report written to {}",
            saved.len(),
            args.output.display()
        );
    }
    Ok(crate::Finished(crate::exit::OK))
}
