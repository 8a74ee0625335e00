//! `nvrec plan`: drives, buffer, retention and wear for a target rate.

use crate::{exit, Finished, UsageError};
use anyhow::{Context, Result};
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
    #[arg(long)]
    rate: String,
    /// What one drive sustains, e.g. 1.6GB/s (its rate after the cache cliff).
    #[arg(
        long,
        required_unless_present = "from_bench",
        conflicts_with = "from_bench"
    )]
    drive_rate: Option<String>,
    /// Take the drive rate from a `nvrec bench fill --save` JSON (its sustained write rate).
    #[arg(long)]
    from_bench: Option<PathBuf>,
    /// Extra drive throughput to plan for, percent.
    #[arg(long, default_value = "20")]
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
    #[arg(long, conflicts_with = "tbw")]
    dwpd: Option<f64>,
    /// Warranty length in years, for --dwpd.
    #[arg(long, default_value_t = 5.0)]
    warranty: f64,
    /// Rated total bytes written, e.g. 54750TB.
    #[arg(long)]
    tbw: Option<String>,
    /// Share of the time spent recording, percent.
    #[arg(long, default_value = "100")]
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
    parse_rate_bytes_per_s(text).map_err(|error| UsageError(format!("{what}: {error}")).into())
}

fn size(text: &str, what: &str) -> Result<f64> {
    parse_size_bytes(text)
        .map(|bytes| bytes as f64)
        .map_err(|error| UsageError(format!("{what}: {error}")).into())
}

/// The sustained write rate recorded by `bench fill`.
fn drive_rate_from_bench(path: &PathBuf) -> Result<f64> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the bench result {}", path.display()))?;
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
    value
        .pointer("/summary/sustained_write_bytes_per_s")
        .and_then(|rate| rate.as_f64())
        .filter(|rate| *rate > 0.0)
        .ok_or_else(|| {
            UsageError(format!(
                "{} has no positive summary.sustained_write_bytes_per_s",
                path.display()
            ))
            .into()
        })
}

pub fn run(args: PlanArgs, json: bool) -> Result<Finished> {
    let drive_rate = match (&args.drive_rate, &args.from_bench) {
        (Some(text), _) => rate(text, "--drive-rate")?,
        (None, Some(path)) => drive_rate_from_bench(path)?,
        (None, None) => return Err(UsageError("give --drive-rate or --from-bench".into()).into()),
    };
    let capacity = args
        .capacity
        .as_deref()
        .map(|text| size(text, "--capacity"))
        .transpose()?;
    let endurance = match (args.dwpd, &args.tbw) {
        (Some(dwpd), _) => Some(Endurance::Dwpd {
            dwpd,
            warranty_years: args.warranty,
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
        println!("{}", serde_json::to_value(plan)?);
    } else {
        print!("{}", text(&plan));
    }
    Ok(Finished(exit::OK))
}

fn rate_text(bytes_per_s: f64) -> String {
    format!(
        "{:.2} GB/s ({:.1} Gbit/s, {:.0} MiB/s)",
        bytes_per_s / 1e9,
        bytes_per_s * 8.0 / 1e9,
        bytes_per_s / 1048576.0
    )
}

fn bytes_text(bytes: f64) -> String {
    if bytes >= 1e12 {
        format!("{:.2} TB ({})", bytes / 1e12, format_bytes(bytes as u64))
    } else {
        format!("{:.2} GB ({})", bytes / 1e9, format_bytes(bytes as u64))
    }
}

fn duration_text(seconds: f64) -> String {
    if seconds >= 86_400.0 {
        format!("{:.1} days ({:.1} h)", seconds / 86_400.0, seconds / 3600.0)
    } else if seconds >= 3600.0 {
        format!("{:.1} h", seconds / 3600.0)
    } else {
        format!("{:.0} min", seconds / 60.0)
    }
}

fn text(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "target rate        {}",
        rate_text(plan.rate_bytes_per_s)
    );
    let _ = writeln!(
        out,
        "per-drive rate     {}",
        rate_text(plan.drive_rate_bytes_per_s)
    );
    let _ = writeln!(
        out,
        "drives needed      {}   = ceil(rate x (1 + {:.0} % margin) / drive rate)",
        plan.drives_needed,
        plan.margin_fraction * 100.0
    );
    let _ = writeln!(
        out,
        "with {} drives     each writes {} = {:.0} % of what it sustains; headroom {}{}",
        plan.drive_count,
        rate_text(plan.per_drive_rate_bytes_per_s),
        plan.drive_utilization * 100.0,
        rate_text(plan.headroom_bytes_per_s.abs()),
        if plan.keeps_up {
            String::new()
        } else {
            " SHORT: these drives cannot keep up".to_string()
        }
    );
    if let (Some(stall), Some(all), Some(one)) = (
        plan.stall_s,
        plan.buffer_all_stall_bytes,
        plan.buffer_one_stall_bytes,
    ) {
        let _ = writeln!(
            out,
            "RAM buffer         {} rides out a {stall} s stall of every drive (rate x stall); {} one drive's (its share x stall)",
            bytes_text(all),
            bytes_text(one)
        );
    }
    if let (Some(total), Some(retention)) = (plan.total_capacity_bytes, plan.retention_s) {
        let _ = writeln!(
            out,
            "retention          {} on {} drives = {} of recording (capacity / rate)",
            duration_text(retention),
            plan.drive_count,
            bytes_text(total)
        );
    }
    let _ = writeln!(
        out,
        "written per drive  {} a day at {:.0} % duty",
        bytes_text(plan.written_per_drive_per_day_bytes),
        plan.duty_fraction * 100.0
    );
    if let (Some(rated), Some(years)) = (plan.rated_bytes_per_drive, plan.wear_out_years) {
        let warranty = match plan.endurance {
            Some(Endurance::Dwpd {
                dwpd,
                warranty_years,
            }) => format!(" ({dwpd} DWPD over {warranty_years} years)"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "endurance          rated {} per drive{warranty}: worn out after {:.2} years{}",
            bytes_text(rated),
            years,
            match plan.wears_out_before_warranty {
                Some(true) => ", before the warranty ends",
                _ => "",
            }
        );
    }
    out
}
