//! Bench results as HTML reports: which charts each bench gets, drawn by `nvrec::report`.
//! - sweep: peak write and read against transfer size (the streamer's first figure);
//! - fill: bandwidth over the fill with the cache cliff, later drops and the steady state
//!   marked, the slowest transfer per window, and peak versus continuous bars;
//! - overwrite: bandwidth over both rings with the wrap marked, and before/after bars;
//! - profile: CrystalDiskMark-style bars, or ATTO's rates against transfer size;
//! - with `--rated`, every bench: a table of its rates as percent of the drive's rating.
//!
//! Each returns the [`Report`]; the caller adds what is common and renders it.

use nvrec::bench::analysis::SeriesAnalysis;
use nvrec::bench::{
    FillResult, FillSummary, OverwriteResult, Profile, ProfileResult, RunMeta, SweepResult,
};
use nvrec::engine::IoOp;
use nvrec::nvme::monitor::Telemetry;
use nvrec::report::{
    Axis, AxisFormat, Band, BarChart, Chart, Level, LineChart, Marker, Reference, Report, Scale,
    Section, Series, Table,
};
use nvrec::unit::format_bytes;

fn metadata(meta: &RunMeta) -> Vec<(String, String)> {
    let target = &meta.target;
    let mut rows = vec![
        ("nvrec".to_string(), meta.nvrec_version.to_string()),
        ("started (UTC)".to_string(), meta.started_utc.clone()),
        (
            "host, kernel".to_string(),
            format!("{}, Linux {}", meta.hostname, meta.kernel),
        ),
        (
            "target".to_string(),
            format!(
                "{} ({}, {}, {}-byte blocks)",
                target.name,
                target.kind,
                format_bytes(target.capacity_bytes),
                target.logical_block_bytes
            ),
        ),
    ];
    let described: Vec<String> = [&target.model, &target.firmware, &target.serial]
        .iter()
        .filter_map(|fact| fact.as_ref().cloned())
        .collect();
    if !described.is_empty() {
        rows.push(("model, firmware, serial".to_string(), described.join(", ")));
    }
    rows.push((
        "engine".to_string(),
        format!("{} ({})", meta.engine, meta.engine_features),
    ));
    let settings: Vec<String> = meta
        .settings
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    rows.push(("settings".to_string(), settings.join(", ")));
    rows
}

fn mb(bytes_per_s: f64) -> String {
    format!("{:.0} MB/s", bytes_per_s / 1e6)
}

fn rate_axis() -> Axis {
    Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS)
}

pub fn sweep(result: &SweepResult) -> Report {
    let mut chart = LineChart::new(
        "Peak write and read against transfer size",
        Axis::new("transfer size (bytes)", Scale::Log2, AxisFormat::Bytes),
        rate_axis(),
    );
    for (name, pick) in [
        (
            "write",
            (|point: &nvrec::bench::SweepPoint| point.write.mean_bytes_per_s) as fn(&_) -> f64,
        ),
        ("read", |point: &nvrec::bench::SweepPoint| {
            point.read.mean_bytes_per_s
        }),
    ] {
        chart.series.push(Series {
            name: name.to_string(),
            points: result
                .points
                .iter()
                .map(|point| (point.bytes as f64, pick(point)))
                .collect(),
        });
    }
    let table = Table {
        caption: "Mean of the runs (min - max)".to_string(),
        header: ["chunks", "bytes", "write", "read"]
            .map(String::from)
            .to_vec(),
        rows: result
            .points
            .iter()
            .map(|point| {
                vec![
                    point.chunk_count.to_string(),
                    format_bytes(point.bytes),
                    format!(
                        "{} ({:.0} - {:.0})",
                        mb(point.write.mean_bytes_per_s),
                        point.write.min_bytes_per_s / 1e6,
                        point.write.max_bytes_per_s / 1e6
                    ),
                    format!(
                        "{} ({:.0} - {:.0})",
                        mb(point.read.mean_bytes_per_s),
                        point.read.min_bytes_per_s / 1e6,
                        point.read.max_bytes_per_s / 1e6
                    ),
                ]
            })
            .collect(),
    };
    let summary = &result.summary;
    Report {
        title: "nvrec bench sweep".to_string(),
        subtitle: format!(
            "peak write {} at {} chunks, peak read {} at {} chunks, {}",
            mb(summary.peak_write_bytes_per_s),
            summary.peak_write_chunk_count,
            mb(summary.peak_read_bytes_per_s),
            summary.peak_read_chunk_count,
            sweep_verified(summary.verified)
        ),
        metadata: metadata(&result.meta),
        sections: vec![Section {
            heading: "Average peak".to_string(),
            paragraphs: sweep_paragraphs(result),
            charts: vec![Chart::Line(chart)],
            tables: vec![table],
        }],
    }
}

/// How the sweep ran, and through the page cache how its cache was dropped.
fn sweep_paragraphs(result: &SweepResult) -> Vec<String> {
    let mut paragraphs = vec![
        "Each transfer writes that many chunks from the start of the target, then reads them back checking the pattern; the rates are the mean of the runs.".to_string(),
    ];
    if result.buffered {
        let mut text = "Through the page cache (--buffered), not O_DIRECT: each write is timed until the drive has acknowledged its data (written back), each read comes after the range was dropped from the cache".to_string();
        if let Some(drop) = result.cache_drop {
            text += &format!(" by {}", drop.method.describe());
            if drop.cached_bytes_after > 0 {
                text += &format!(
                    "; {} of a range was still cached after a drop, so some reads may have come from memory",
                    format_bytes(drop.cached_bytes_after)
                );
            }
        }
        paragraphs.push(text + ".");
    }
    paragraphs
}

/// Whether a sweep's reads matched, as its text and its report say it.
pub(crate) fn sweep_verified(verified: bool) -> &'static str {
    if verified {
        "every read matched"
    } else {
        "READ-BACK MISMATCH"
    }
}

/// A chart of something against the time since the bench began.
fn over_time(title: &str, y: Axis) -> LineChart {
    LineChart::new(
        title,
        Axis::new("time (s)", Scale::Linear, AxisFormat::Seconds),
        y,
    )
}

fn window_series(name: &str, windows: &[nvrec::bench::Window]) -> Series {
    Series {
        name: name.to_string(),
        points: windows
            .iter()
            .map(|window| (window.start_s + window.duration_s, window.rate_bytes_per_s))
            .collect(),
    }
}

pub fn fill(result: &FillResult, telemetry: Option<&Telemetry>) -> Report {
    let summary = &result.summary;
    let mut charts = vec![
        Chart::Line(fill_bandwidth_chart(result)),
        Chart::Line(fill_latency_chart(result)),
    ];
    if let Some(telemetry) = telemetry.filter(|telemetry| !telemetry.devices.is_empty()) {
        charts.push(Chart::Line(temperature_chart(telemetry)));
    }
    if let Some(read) = &result.read {
        let mut read_chart = over_time("Read-back bandwidth", rate_axis());
        read_chart.series.push(window_series("read", &read.windows));
        charts.push(Chart::Line(read_chart));
    }
    charts.push(Chart::Bars(peak_bars(summary)));
    Report {
        title: "nvrec bench fill".to_string(),
        subtitle: format!(
            "{} written: peak {}, sustained {}",
            format_bytes(summary.bytes_written),
            mb(summary.peak_write_bytes_per_s),
            mb(summary.sustained_write_bytes_per_s)
        ),
        metadata: metadata(&result.meta),
        sections: vec![Section {
            heading: "Continuous write".to_string(),
            paragraphs: vec![fill_paragraph(result)],
            charts,
            tables: vec![Table {
                caption: "Summary".to_string(),
                header: vec!["".to_string(), "".to_string()],
                rows: fill_rows(result),
            }],
        }],
    }
}

/// The write's rate per window with its plateaus, cliff, later drops, steady state and
/// sustained rate drawn over it.
fn fill_bandwidth_chart(result: &FillResult) -> LineChart {
    let analysis = &result.analysis;
    let summary = &result.summary;
    let mut bandwidth = over_time("Write bandwidth over the fill", rate_axis());
    bandwidth
        .series
        .push(window_series("write", &result.write.windows));
    for (index, plateau) in analysis.plateaus.iter().enumerate() {
        bandwidth.levels.push(Level {
            from_x: plateau.start_s,
            to_x: plateau.end_s,
            y: plateau.rate_bytes_per_s,
            label: format!("{}: {}", index + 1, mb(plateau.rate_bytes_per_s)),
        });
    }
    if let Some(cliff) = analysis.cliff {
        bandwidth.markers.push(Marker {
            x: cliff.at_s,
            label: format!("cache cliff after {}", format_bytes(cliff.at_bytes)),
        });
    }
    for drop in &analysis.later_drops {
        bandwidth.markers.push(Marker {
            x: drop.at_s,
            label: format!("drop to {}", mb(drop.rate_after_bytes_per_s)),
        });
    }
    if let Some(steady) = analysis.steady_state {
        bandwidth.bands.push(Band {
            from_x: steady.start_s,
            to_x: steady.end_s,
            label: "steady-state window".to_string(),
        });
    }
    bandwidth.references.push(Reference {
        y: summary.sustained_write_bytes_per_s,
        label: format!("sustained {}", mb(summary.sustained_write_bytes_per_s)),
    });
    bandwidth
}

fn fill_latency_chart(result: &FillResult) -> LineChart {
    let mut latency = over_time(
        "Slowest write per window",
        Axis::new("latency (ms)", Scale::Linear, AxisFormat::Plain),
    );
    latency.series.push(Series {
        name: "max latency (ms)".to_string(),
        points: result
            .write
            .windows
            .iter()
            .map(|window| {
                (
                    window.start_s + window.duration_s,
                    window.latency_max_us / 1000.0,
                )
            })
            .collect(),
    });
    latency
}

/// Each drive's temperature over the fill, with its warning threshold where it has one.
fn temperature_chart(telemetry: &Telemetry) -> LineChart {
    let mut temperature = over_time(
        "Drive temperature during the fill",
        Axis::new("°C", Scale::Linear, AxisFormat::Plain),
    );
    for device in &telemetry.devices {
        temperature.series.push(Series {
            name: device.device.clone(),
            points: device
                .samples
                .iter()
                .map(|sample| (sample.t_s, sample.composite_temperature_celsius))
                .collect(),
        });
        if let Some(warning) = device.warning_temperature_celsius {
            temperature.references.push(Reference {
                y: warning,
                label: format!("warning {warning:.0} °C"),
            });
        }
    }
    temperature
}

fn peak_bars(summary: &FillSummary) -> BarChart {
    let mut bar_values = vec![vec![
        summary.peak_write_bytes_per_s,
        summary.sustained_write_bytes_per_s,
    ]];
    let mut series_names = vec!["write".to_string()];
    if let Some(read) = summary.read_bytes_per_s {
        bar_values.push(vec![f64::NAN, read]);
        series_names.push("read".to_string());
    }
    BarChart {
        title: "Peak versus continuous".to_string(),
        categories: vec!["peak".to_string(), "continuous".to_string()],
        series_names,
        values: bar_values,
        y: rate_axis(),
    }
}

/// The summary table: the rates and findings, then a row a plateau, then what was short or
/// read back.
fn fill_rows(result: &FillResult) -> Vec<Vec<String>> {
    let analysis = &result.analysis;
    let summary = &result.summary;
    let mut rows = fill_rate_rows(summary, analysis);
    for (index, plateau) in analysis.plateaus.iter().enumerate() {
        rows.push(vec![
            format!("plateau {}", index + 1),
            format!(
                "{} from {} to {} ({:.2} - {:.2} s), windows p10 {} p90 {}",
                mb(plateau.rate_bytes_per_s),
                format_bytes(plateau.start_bytes),
                format_bytes(plateau.end_bytes),
                plateau.start_s,
                plateau.end_s,
                mb(plateau.rate_p10_bytes_per_s),
                mb(plateau.rate_p90_bytes_per_s)
            ),
        ]);
    }
    if let Some(short) = analysis.too_short {
        rows.push(vec![
            "too short".to_string(),
            format!(
                "{} windows of {} needed: run at least {:.1} s ({})",
                short.window_count,
                short.window_count_min,
                short.run_at_least_s,
                format_bytes(short.run_at_least_bytes)
            ),
        ]);
    }
    if let Some(verified) = summary.verified {
        rows.push(vec![
            "read back".to_string(),
            format!(
                "{}, {}",
                summary.read_bytes_per_s.map(mb).unwrap_or_default(),
                if verified {
                    "every byte matched"
                } else {
                    "MISMATCH"
                }
            ),
        ]);
    }
    rows
}

fn fill_rate_rows(summary: &FillSummary, analysis: &SeriesAnalysis) -> Vec<Vec<String>> {
    vec![
        vec![
            "bytes written".to_string(),
            format_bytes(summary.bytes_written),
        ],
        vec!["peak write".to_string(), mb(summary.peak_write_bytes_per_s)],
        vec!["mean write".to_string(), mb(summary.mean_write_bytes_per_s)],
        vec![
            "cache cliff".to_string(),
            analysis
                .cliff
                .map(|cliff| {
                    format!(
                        "after {} at {:.1} s: {} -> {}",
                        format_bytes(cliff.at_bytes),
                        cliff.at_s,
                        mb(cliff.rate_before_bytes_per_s),
                        mb(cliff.rate_after_bytes_per_s)
                    )
                })
                .unwrap_or_else(|| "none found".to_string()),
        ],
        vec![
            "steady state".to_string(),
            analysis
                .steady_state
                .map(|steady| {
                    format!(
                        "{} from {:.1} s",
                        mb(steady.rate_bytes_per_s),
                        steady.start_s
                    )
                })
                .unwrap_or_else(|| "not reached".to_string()),
        ],
        vec![
            "sustained write".to_string(),
            mb(summary.sustained_write_bytes_per_s),
        ],
        vec![
            "slowest window".to_string(),
            analysis
                .slowest_window
                .map(|window| format!("{} at {:.1} s", mb(window.rate_bytes_per_s), window.start_s))
                .unwrap_or_default(),
        ],
        vec!["stalls".to_string(), analysis.stalls.len().to_string()],
    ]
}

/// How the fill ran and how its findings are defined.
fn fill_paragraph(result: &FillResult) -> String {
    let analysis = &result.analysis;
    format!(
        "One sequential write of {} logged every {} s, then read back and compared. The cliff is the first drop of more than {:.0} % lasting {} windows; the steady state is the first {} windows after it whose range stays within {:.0} % of their mean and whose trend within {:.0} %.",
        format_bytes(result.summary.bytes_written),
        result
            .write
            .windows
            .first()
            .map(|window| window.duration_s)
            .unwrap_or(0.0),
        analysis.settings.drop_fraction * 100.0,
        analysis.settings.drop_window_count,
        analysis.settings.steady_window_count,
        analysis.settings.steady_range_fraction * 100.0,
        analysis.settings.steady_slope_fraction * 100.0
    )
}

pub fn overwrite(result: &OverwriteResult) -> Report {
    let mut bandwidth = LineChart::new(
        "Write bandwidth over the ring",
        Axis::new("bytes written", Scale::Linear, AxisFormat::Bytes),
        rate_axis(),
    );
    for phase in &result.phases {
        bandwidth.series.push(Series {
            name: phase.mode.name().to_string(),
            points: phase
                .write
                .windows
                .iter()
                .map(|window| (window.total_bytes as f64, window.rate_bytes_per_s))
                .collect(),
        });
    }
    bandwidth.markers.push(Marker {
        x: result.ring_bytes as f64,
        label: "wrap".to_string(),
    });
    let bars = BarChart {
        title: "Before and after the wrap".to_string(),
        categories: result
            .phases
            .iter()
            .map(|phase| phase.mode.name().to_string())
            .collect(),
        series_names: vec!["before the wrap".to_string(), "after the wrap".to_string()],
        values: vec![
            result
                .phases
                .iter()
                .map(|phase| phase.rate_before_wrap_bytes_per_s)
                .collect(),
            result
                .phases
                .iter()
                .map(|phase| phase.rate_after_wrap_bytes_per_s)
                .collect(),
        ],
        y: rate_axis(),
    };
    let rows = result
        .phases
        .iter()
        .map(|phase| {
            vec![
                phase.mode.name().to_string(),
                mb(phase.rate_before_wrap_bytes_per_s),
                mb(phase.rate_after_wrap_bytes_per_s),
                format!("{:.0} %", phase.after_over_before * 100.0),
            ]
        })
        .collect();
    Report {
        title: "nvrec bench overwrite".to_string(),
        subtitle: format!("a ring of {}", format_bytes(result.ring_bytes)),
        metadata: metadata(&result.meta),
        sections: vec![Section {
            heading: "Overwriting a ring".to_string(),
            paragraphs: vec![
                "The ring is discarded, written once, and written on; the rate before the wrap is the first lap, after it the rest.".to_string(),
            ],
            charts: vec![Chart::Line(bandwidth), Chart::Bars(bars)],
            tables: vec![Table {
                caption: "Rates".to_string(),
                header: ["mode", "before the wrap", "after", "after / before"]
                    .map(String::from)
                    .to_vec(),
                rows,
            }],
        }],
    }
}

pub fn profile(result: &ProfileResult) -> Report {
    let tests_of = |op: IoOp| result.tests.iter().filter(move |test| test.op == op);
    let chart = if result.profile == Profile::Atto {
        let mut chart = LineChart::new(
            "ATTO: rate against transfer size (queue depth 4)",
            Axis::new("transfer size (bytes)", Scale::Log2, AxisFormat::Bytes),
            rate_axis(),
        );
        for (name, op) in [("write", IoOp::Write), ("read", IoOp::Read)] {
            chart.series.push(Series {
                name: name.to_string(),
                points: tests_of(op)
                    .map(|test| (test.shape.io_size_bytes as f64, test.best_bytes_per_s))
                    .collect(),
            });
        }
        Chart::Line(chart)
    } else {
        let categories: Vec<String> = tests_of(IoOp::Read).map(|test| test.name.clone()).collect();
        let values = [IoOp::Read, IoOp::Write]
            .iter()
            .map(|op| {
                categories
                    .iter()
                    .map(|name| {
                        tests_of(*op)
                            .find(|test| &test.name == name)
                            .map(|test| test.best_bytes_per_s)
                            .unwrap_or(f64::NAN)
                    })
                    .collect()
            })
            .collect();
        Chart::Bars(BarChart {
            title: format!("{}: best of the runs", result.profile.name()),
            categories,
            series_names: vec!["read".to_string(), "write".to_string()],
            values,
            y: rate_axis(),
        })
    };
    let rows = result
        .tests
        .iter()
        .map(|test| {
            vec![
                test.name.clone(),
                test.op.name().to_string(),
                format!("{:.1}", test.best_mb_per_s),
                format!("{:.1}", test.mean_bytes_per_s / 1e6),
                format!("{:.1}", test.best_mib_per_s),
                format!("{:.0}", test.best_iops),
                format!("{:.0}", test.latency_mean_us),
            ]
        })
        .collect();
    let mut paragraphs = vec![format!(
        "Test region {}; {}.",
        format_bytes(result.region_bytes),
        if result.profile == Profile::Atto {
            "each transfer size writes the region then reads it at queue depth 4"
        } else {
            "each test runs for the set duration, reads first on data written beforehand"
        }
    )];
    if !result.skipped.is_empty() {
        paragraphs.push(format!("Skipped: {}.", result.skipped.join("; ")));
    }
    Report {
        title: format!("nvrec bench profile {}", result.profile.name()),
        subtitle: String::new(),
        metadata: metadata(&result.meta),
        sections: vec![Section {
            heading: "Results".to_string(),
            paragraphs,
            charts: vec![chart],
            tables: vec![Table {
                caption: "Best and mean of the runs".to_string(),
                header: [
                    "test",
                    "op",
                    "best MB/s",
                    "mean MB/s",
                    "best MiB/s",
                    "IOPS",
                    "latency us",
                ]
                .map(String::from)
                .to_vec(),
                rows,
            }],
        }],
    }
}

/// The rates of a bench against the drive's rating (`--rated`).
pub fn rated_section(figures: &[nvrec::bench::RatedFigure]) -> Section {
    let rows = figures
        .iter()
        .map(|figure| {
            vec![
                figure.name.clone(),
                figure.op.name().to_string(),
                mb(figure.bytes_per_s),
                mb(figure.rated_bytes_per_s),
                format!("{:.1} %", figure.percent),
            ]
        })
        .collect();
    Section {
        heading: "Against the rating".to_string(),
        paragraphs: vec![
            "Each rate as a percent of what the drive is rated for (--rated READ,WRITE in MB/s)."
                .to_string(),
        ],
        charts: Vec::new(),
        tables: vec![Table {
            caption: "Percent of rated".to_string(),
            header: ["figure", "op", "measured", "rated", "of rated"]
                .map(String::from)
                .to_vec(),
            rows,
        }],
    }
}
