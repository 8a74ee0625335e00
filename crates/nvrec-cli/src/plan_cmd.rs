//! `nvrec plan`: drives, buffer, retention and wear for a target rate.
//!
//! Parses the options (rates, sizes, percentages, a `bench fill` result), calls
//! [`nvrec::plan::plan`] and prints its answer: one row a number, with the number in decimal
//! and binary units and the formula that produced it, or the `Plan` as JSON. Every input the
//! arithmetic cannot use is a usage error (exit status 2). It does no arithmetic of its own.

use crate::{exit, Finished, UsageError};
use anyhow::Result;
use clap::Args;
use nvrec::plan::{self, Endurance, Plan, PlanInput};
use nvrec::unit::{format_bytes, parse_duration, parse_rate_bytes_per_s, parse_size_bytes};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    after_help = "RATES: 100Gbit/s or 100Gb/s (bits, x1000), 12.5GB/s (bytes, x1000), \
1.6G or 1.6GiB/s (bytes, x1024). With --margin 0 the drive count is the plain division rounded \
up: 100 Gbit/s at 1.6 GB/s per drive needs 8 drives."
)]
pub struct PlanArgs {
    /// The rate to record, e.g. 100Gbit/s or 12.5GB/s.
    #[arg(long, allow_hyphen_values = true)]
    rate: String,
    /// What one drive sustains, e.g. 1.6GB/s (its rate after the cache cliff).
    #[arg(
        long,
        required_unless_present = "from_bench",
        conflicts_with = "from_bench",
        allow_hyphen_values = true
    )]
    drive_rate: Option<String>,
    /// Take the drive rate from a `nvrec bench fill --save` JSON (its sustained write rate).
    #[arg(long)]
    from_bench: Option<PathBuf>,
    /// Extra drive throughput to plan for, percent.
    #[arg(long, default_value = "20", allow_hyphen_values = true)]
    margin: String,
    /// Evaluate this many drives instead of the number needed.
    #[arg(long)]
    drives: Option<u32>,
    /// A stall to ride out in RAM, e.g. 500ms or 2s.
    #[arg(long)]
    stall: Option<String>,
    /// Capacity of one drive, e.g. 30TB (for retention and DWPD).
    #[arg(long)]
    capacity: Option<String>,
    /// Rated drive writes per day (with --warranty).
    #[arg(long, conflicts_with = "tbw", allow_hyphen_values = true)]
    dwpd: Option<String>,
    /// Warranty length for --dwpd, e.g. 5y or 5 (years).
    #[arg(long, default_value = "5y", allow_hyphen_values = true)]
    warranty: String,
    /// Rated total bytes written, e.g. 54750TB.
    #[arg(long)]
    tbw: Option<String>,
    /// Share of the time spent recording, percent.
    #[arg(long, default_value = "100", allow_hyphen_values = true)]
    duty: String,
}

fn percent(text: &str, what: &str) -> Result<f64> {
    let number = text.trim().trim_end_matches('%').trim();
    let value: f64 = number
        .parse()
        .map_err(|_| UsageError(format!("{what} '{text}' is not a percentage")))?;
    Ok(value / 100.0)
}

fn rate(text: &str, what: &str) -> Result<f64> {
    if text.trim_start().starts_with('-') {
        return Err(UsageError(format!("{what} must be a positive rate, not {text}")).into());
    }
    parse_rate_bytes_per_s(text).map_err(|error| UsageError(format!("{what}: {error}")).into())
}

fn number(text: &str, what: &str) -> Result<f64> {
    text.trim()
        .parse()
        .map_err(|_| UsageError(format!("{what} '{text}' is not a number")).into())
}

/// A warranty in years: `5y`, `5 years` or `5`.
fn years(text: &str, what: &str) -> Result<f64> {
    let trimmed = text.trim();
    let number_text = ["years", "year", "yr", "y"]
        .iter()
        .find_map(|suffix| trimmed.strip_suffix(suffix))
        .unwrap_or(trimmed);
    number(number_text, what).map_err(|_| {
        UsageError(format!(
            "{what} '{text}' is not a number of years (5y or 5)"
        ))
        .into()
    })
}

fn size(text: &str, what: &str) -> Result<f64> {
    parse_size_bytes(text)
        .map(|bytes| bytes as f64)
        .map_err(|error| UsageError(format!("{what}: {error}")).into())
}

/// Which plateau of a fill the drive rate is, for the table and the JSON.
#[derive(Debug, Clone, serde::Serialize)]
struct TakenPlateau {
    /// Counted from 1.
    number: u64,
    count: usize,
    start_bytes: u64,
    end_bytes: u64,
    rate_bytes_per_s: f64,
}

/// The sustained plateau of a fill's analysis (the last one), if the JSON has plateaus.
fn sustained_plateau(value: &serde_json::Value) -> Option<TakenPlateau> {
    let plateaus = value.pointer("/analysis/plateaus")?.as_array()?;
    let index = value
        .pointer("/analysis/sustained_plateau_index")?
        .as_u64()?;
    let plateau = plateaus.get(index as usize)?;
    Some(TakenPlateau {
        number: index + 1,
        count: plateaus.len(),
        start_bytes: plateau["start_bytes"].as_u64()?,
        end_bytes: plateau["end_bytes"].as_u64()?,
        rate_bytes_per_s: plateau["rate_bytes_per_s"].as_f64()?,
    })
}

/// The sustained write rate recorded by `bench fill`: its sustained plateau's rate, or, in a
/// JSON from before plateaus, `summary.sustained_write_bytes_per_s`.
fn drive_rate_from_bench(path: &PathBuf) -> Result<(f64, Option<TakenPlateau>)> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        UsageError(format!(
            "--from-bench: cannot read {}: {error}",
            path.display()
        ))
    })?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|error| UsageError(format!("{} is not JSON: {error}", path.display())))?;
    let bench = value
        .pointer("/meta/bench")
        .and_then(|bench| bench.as_str());
    if bench != Some("fill") {
        return Err(UsageError(format!(
            "{} is not a `nvrec bench fill` result (it says bench {:?}); plan needs the sustained rate of a fill",
            path.display(),
            bench.unwrap_or("nothing")
        ))
        .into());
    }
    if let Some(plateau) = sustained_plateau(&value).filter(|p| p.rate_bytes_per_s > 0.0) {
        return Ok((plateau.rate_bytes_per_s, Some(plateau)));
    }
    value
        .pointer("/summary/sustained_write_bytes_per_s")
        .and_then(|rate| rate.as_f64())
        .filter(|rate| *rate > 0.0)
        .map(|rate| (rate, None))
        .ok_or_else(|| {
            UsageError(format!(
                "{} has no positive summary.sustained_write_bytes_per_s (the fill found no \
                 steady state?); give the rate with --drive-rate",
                path.display()
            ))
            .into()
        })
}

pub fn run(args: PlanArgs, json: bool) -> Result<Finished> {
    let mut taken = None;
    let (drive_rate, drive_rate_source) = match (&args.drive_rate, &args.from_bench) {
        (Some(text), _) => (rate(text, "--drive-rate")?, "--drive-rate".to_string()),
        (None, Some(path)) => {
            let (drive_rate, plateau) = drive_rate_from_bench(path)?;
            let mut source = format!("sustained write in {}", path.display());
            if let Some(plateau) = &plateau {
                source += &format!(
                    ": plateau {} of {} (the last, {} to {})",
                    plateau.number,
                    plateau.count,
                    format_bytes(plateau.start_bytes),
                    format_bytes(plateau.end_bytes)
                );
            }
            taken = plateau;
            (drive_rate, source)
        }
        (None, None) => return Err(UsageError("give --drive-rate or --from-bench".into()).into()),
    };
    let capacity = args
        .capacity
        .as_deref()
        .map(|text| size(text, "--capacity"))
        .transpose()?;
    let endurance = match (args.dwpd, &args.tbw) {
        (Some(dwpd), _) => Some(Endurance::Dwpd {
            dwpd: number(dwpd.as_str(), "--dwpd")?,
            warranty_years: years(&args.warranty, "--warranty")?,
        }),
        (None, Some(tbw)) => Some(Endurance::Tbw {
            bytes: size(tbw, "--tbw")?,
        }),
        (None, None) => None,
    };
    let input = PlanInput {
        rate_bytes_per_s: rate(&args.rate, "--rate")?,
        drive_rate_bytes_per_s: drive_rate,
        margin_fraction: percent(&args.margin, "--margin")?,
        drive_count: args.drives,
        stall_s: args
            .stall
            .as_deref()
            .map(|text| {
                parse_duration(text)
                    .map(|duration| duration.as_secs_f64())
                    .map_err(|error| UsageError(format!("--stall: {error}")))
            })
            .transpose()?,
        drive_capacity_bytes: capacity,
        endurance,
        duty_fraction: percent(&args.duty, "--duty")?,
    };
    let plan = plan::plan(&input).map_err(|error| UsageError(error.to_string()))?;
    if json {
        let mut value = serde_json::to_value(plan)?;
        value["drive_rate_source"] = drive_rate_source.into();
        value["drive_rate_plateau"] = serde_json::to_value(&taken)?;
        outln!("{}", value);
    } else {
        out!("{}", text(&plan, &drive_rate_source));
    }
    Ok(Finished(exit::OK))
}

/// `12.50 GB/s (100.0 Gbit/s, 11921 MiB/s)`; negative rates get a sign.
fn rate_text(bytes_per_s: f64) -> String {
    let sign = if bytes_per_s < 0.0 { "-" } else { "" };
    let magnitude = bytes_per_s.abs();
    format!(
        "{sign}{:.2} GB/s ({sign}{:.1} Gbit/s, {sign}{:.0} MiB/s)",
        magnitude / 1e9,
        magnitude * 8.0 / 1e9,
        magnitude / 1048576.0
    )
}

/// Decimal first, as drive makers count, then binary: `6.25 GB (5.82 GiB)`.
fn bytes_text(bytes: f64) -> String {
    let (scaled, unit) = if bytes >= 1e15 {
        (bytes / 1e15, "PB")
    } else if bytes >= 1e12 {
        (bytes / 1e12, "TB")
    } else if bytes >= 1e9 {
        (bytes / 1e9, "GB")
    } else {
        (bytes / 1e6, "MB")
    };
    format!("{scaled:.2} {unit} ({})", format_bytes(bytes as u64))
}

fn duration_text(seconds: f64) -> String {
    if seconds >= 86_400.0 {
        format!("{:.1} days ({:.1} h)", seconds / 86_400.0, seconds / 3600.0)
    } else if seconds >= 3600.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else {
        format!("{:.1} min", seconds / 60.0)
    }
}

/// The human answer: one row a number, `name  value  formula`, and a closing verdict.
fn text(plan: &Plan, drive_rate_source: &str) -> String {
    let mut rows: Vec<(&str, String, String)> = Vec::new();
    let drives = plan.drive_count;
    rows.push((
        "target rate",
        rate_text(plan.rate_bytes_per_s),
        "--rate".to_string(),
    ));
    rows.push((
        "drive rate",
        rate_text(plan.drive_rate_bytes_per_s),
        drive_rate_source.to_string(),
    ));
    rows.push((
        "drives needed",
        plan.drives_needed.to_string(),
        format!(
            "ceil(rate x (1 + {:.0} % margin) / drive rate) = ceil({:.2})",
            plan.margin_fraction * 100.0,
            plan.drives_needed_exact
        ),
    ));
    if drives != plan.drives_needed {
        rows.push((
            "drives evaluated",
            drives.to_string(),
            "--drives".to_string(),
        ));
    }
    rows.push((
        "per-drive share",
        rate_text(plan.per_drive_rate_bytes_per_s),
        format!("rate / {drives} drives"),
    ));
    rows.push((
        "drive utilization",
        format!("{:.0} %", plan.drive_utilization * 100.0),
        "per-drive share / drive rate".to_string(),
    ));
    rows.push((
        "headroom",
        rate_text(plan.headroom_bytes_per_s),
        format!("{drives} x drive rate - rate"),
    ));
    rows.push((
        "one drive lost",
        rate_text(plan.headroom_one_lost_bytes_per_s),
        format!(
            "{} x drive rate - rate: the others take its share",
            drives.saturating_sub(1)
        ),
    ));
    if let (Some(stall_s), Some(all), Some(one)) = (
        plan.stall_s,
        plan.buffer_all_stall_bytes,
        plan.buffer_one_stall_bytes,
    ) {
        rows.push((
            "RAM, all stall",
            bytes_text(all),
            format!("rate x {stall_s} s: every drive stalls at once"),
        ));
        rows.push((
            "RAM, one stalls",
            bytes_text(one),
            format!("per-drive share x {stall_s} s: one drive stalls"),
        ));
    }
    if let (Some(capacity), Some(total), Some(retention)) = (
        plan.drive_capacity_bytes,
        plan.total_capacity_bytes,
        plan.retention_s,
    ) {
        rows.push((
            "total capacity",
            bytes_text(total),
            format!("{drives} x {}", bytes_text(capacity)),
        ));
        rows.push((
            "retention",
            duration_text(retention),
            "total capacity / rate".to_string(),
        ));
    }
    rows.push((
        "written per drive",
        format!("{} a day", bytes_text(plan.written_per_drive_per_day_bytes)),
        format!(
            "rate x {:.0} % duty x 86400 s / {drives} drives",
            plan.duty_fraction * 100.0
        ),
    ));
    if let (Some(rated), Some(wear_out_years)) = (plan.rated_bytes_per_drive, plan.wear_out_years) {
        let rated_formula = match plan.endurance {
            Some(Endurance::Dwpd {
                dwpd,
                warranty_years,
            }) => format!("{dwpd} DWPD x capacity x 365 x {warranty_years} years"),
            _ => "--tbw".to_string(),
        };
        rows.push(("rated writes", bytes_text(rated), rated_formula));
        rows.push((
            "wear-out",
            format!("{wear_out_years:.2} years"),
            "rated writes / written per drive a day / 365".to_string(),
        ));
    }
    let name_width = rows.iter().map(|row| row.0.len()).max().unwrap_or(0);
    let value_width = rows
        .iter()
        .map(|row| row.1.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (name, value, formula) in &rows {
        let _ = writeln!(out, "{name:<name_width$}  {value:<value_width$}  {formula}");
    }
    if plan.keeps_up {
        let _ = writeln!(
            out,
            "\n{drives} drives keep up, each at {:.0} % of what it sustains{}.",
            plan.drive_utilization * 100.0,
            if plan.survives_one_drive_loss {
                ", and still keep up after losing one"
            } else {
                "; losing one would lose data"
            }
        );
    } else {
        let _ = writeln!(
            out,
            "\nSHORT: {drives} drives sustain {} less than the target rate; use {} or more.",
            rate_text(-plan.headroom_bytes_per_s),
            plan.drives_needed
        );
    }
    if plan.wears_out_before_warranty == Some(true) {
        let _ = writeln!(
            out,
            "The drives reach their rated writes before their warranty ends."
        );
    }
    out
}
