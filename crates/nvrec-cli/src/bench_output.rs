//! What every bench writes: its JSON (stdout and `--save`), text, CSV, HTML report and the
//! figures against `--rated`, and its progress display.

use crate::bench_args::CommonArgs;
use crate::progress;
use anyhow::{Context, Result};
use nvrec::bench;
use nvrec::control::Progress;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// What a bench hands [`emit`]: its JSON, text, CSV, report, and its rates for `--rated`.
pub(crate) struct Outputs<'a> {
    pub(crate) value: serde_json::Value,
    pub(crate) text: String,
    pub(crate) csv: String,
    pub(crate) report: nvrec::report::Report,
    pub(crate) rates: &'a dyn bench::rated::RatedRates,
}

/// Adds the rates against `--rated` to every output, then writes the JSON (stdout and/or
/// file), the CSV and the report; prints the text when not JSON.
pub(crate) fn emit(common: &CommonArgs, json: bool, outputs: Outputs<'_>) -> Result<()> {
    let Outputs {
        mut value,
        mut text,
        csv,
        mut report,
        rates,
    } = outputs;
    if let Some(rated) = &common.rated {
        let figures = bench::of_rated(rated, rates);
        value["rated"] = serde_json::json!({ "rating": rated, "figures": figures });
        text += &rated_text(&figures);
        report
            .sections
            .push(crate::bench_report::rated_section(&figures));
    }
    write_outputs(common, json, &value, &text, &csv, &report)
}

/// Writes the JSON (stdout and/or `--save`), the CSV and the report; prints the text when
/// not JSON.
pub(crate) fn write_outputs(
    common: &CommonArgs,
    json: bool,
    value: &serde_json::Value,
    text: &str,
    csv: &str,
    report: &nvrec::report::Report,
) -> Result<()> {
    if let Some(path) = &common.save {
        write_file(path, &format!("{value:#}\n"))?;
    }
    if let Some(path) = &common.csv {
        write_file(path, csv)?;
    }
    if let Some(path) = &common.report {
        write_file(path, &nvrec::report::render_html(report))?;
    }
    if json {
        outln!("{value}");
    } else {
        out!("{text}");
        for (what, path) in [
            ("JSON", &common.save),
            ("CSV", &common.csv),
            ("report", &common.report),
        ] {
            if let Some(path) = path {
                outln!("{what} written to {}", path.display());
            }
        }
    }
    Ok(())
}

/// One line a rate: measured, rated, percent.
pub(crate) fn rated_text(figures: &[bench::RatedFigure]) -> String {
    let mut out = "of rated (--rated):\n".to_string();
    for figure in figures {
        let _ = writeln!(
            out,
            "  {:<24} {:>5} {:>6.1} % ({:.0} of {:.0} MB/s)",
            figure.name,
            figure.op.name(),
            figure.percent,
            figure.bytes_per_s / 1e6,
            figure.rated_bytes_per_s / 1e6
        );
    }
    out
}

pub(crate) fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

pub(crate) fn start_progress(
    label: &str,
    json: bool,
) -> (Arc<Progress>, progress::ProgressDisplay) {
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), label.to_string(), !json);
    (progress, display)
}
