//! `nvrec plan`: drives, buffer, retention and wear for a target rate.
//!
//! Parses the options (rates, sizes, percentages, a `bench fill` result), calls
//! [`nvrec::plan::plan`] and prints its answer: one row a number, with the number in decimal
//! and binary units and the formula that produced it, or the `Plan` as JSON. Every input the
//! arithmetic cannot use is a usage error (exit status 2). It does no arithmetic of its own.

use anyhow::Result;
use clap::Args;
use nvrec::device::pcie;
use nvrec::plan::{self, Endurance, OverProvisioningAdvice, Plan, PlanInput};
use nvrec::unit::{format_bytes, parse_duration, parse_rate_bytes_per_s, parse_size_bytes};
use nvrec_app::{Class, UsageError};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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
    /// Take the drive rate from a `nvrec bench fill --save` JSON (its sustained write rate),
    /// or from a `nvrec bench overwrite --save` JSON (its slowest rate after the wrap: the
    /// rate a ring lives at once it writes over itself).
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
    /// Share of the time spent recording, percent: it changes the wear only (the drive count,
    /// buffers and retention are for the time it records).
    #[arg(long, allow_hyphen_values = true)]
    wear_duty: Option<String>,
    /// The old name of --wear-duty (it warns).
    #[arg(
        long,
        hide = true,
        conflicts_with = "wear_duty",
        allow_hyphen_values = true
    )]
    duty: Option<String>,
    /// How long the drives must hold the recording, e.g. 7d, 12h, 1week: solves for the
    /// drives of --capacity that hold it at the rate (format overhead included).
    #[arg(long)]
    retention: Option<String>,
    /// The recording's chunk size: each chunk spends 128 bytes on its header.
    #[arg(long, default_value = "128K")]
    chunk_size: String,
    /// For a capture: the frame size. Each frame is a record with a 64-byte header, padded
    /// to 8 bytes, packed whole into a chunk's payload.
    #[arg(long)]
    frame_size: Option<String>,
    /// Share of each drive left unwritten (over-provisioning), percent: it shortens the
    /// retention. Without it the plan advises how much to leave.
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    over_provision: String,
    /// Check the PCIe links of these NVMe controllers (nvme0,nvme1 or `all`): warns where
    /// drives behind one uplink (a switch) need more than it carries at the per-drive share.
    #[arg(long, value_delimiter = ',')]
    pcie_drives: Vec<String>,
    /// Where sysfs is (for tests on a captured tree).
    #[arg(long, hide = true, default_value = "/sys")]
    sysfs_root: PathBuf,
}

/// The uplinks that cap the plan's per-drive share on the drives of `--pcie-drives`.
fn pcie_check(
    args: &PlanArgs,
    plan: &Plan,
) -> Result<Option<(Vec<pcie::UplinkGroup>, Vec<pcie::UplinkCap>)>> {
    if args.pcie_drives.is_empty() {
        return Ok(None);
    }
    let groups = pcie::uplink_groups(&args.sysfs_root);
    let known: Vec<&str> = groups
        .iter()
        .flat_map(|group| group.drives.iter().map(|drive| drive.controller.as_str()))
        .collect();
    let wanted: Vec<String> = args
        .pcie_drives
        .iter()
        .filter(|name| name.as_str() != "all")
        .map(|name| name.trim_start_matches("/dev/").to_string())
        .collect();
    if let Some(missing) = wanted.iter().find(|name| !known.contains(&name.as_str())) {
        return Err(UsageError(format!(
            "--pcie-drives: {missing} is not an NVMe controller on the PCI bus here (found: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ))
        .into());
    }
    let caps = pcie::uplink_caps(&groups, &wanted, plan.per_drive_rate_bytes_per_s);
    Ok(Some((groups, caps)))
}

fn uplink_caps_text(caps: &[pcie::UplinkCap]) -> String {
    let mut out = String::new();
    for cap in caps {
        let _ = writeln!(
            out,
            "WARNING: uplink {} carries {:.2} GB/s, but its drives ({}) need {:.2} GB/s at the \
             per-drive share: spread the drives over more uplinks or root ports.",
            cap.uplink,
            cap.limit_bytes_per_s / 1e9,
            cap.drives.join(", "),
            cap.wanted_bytes_per_s / 1e9
        );
    }
    out
}

/// `--wear-duty`, or the old `--duty` with a warning; 100 % when neither is given.
fn wear_duty(args: &PlanArgs) -> Result<f64> {
    if let Some(text) = &args.duty {
        errln!("nvrec: warning: --duty is now --wear-duty (it changes the wear only)");
        return percent(text, "--wear-duty");
    }
    percent(args.wear_duty.as_deref().unwrap_or("100"), "--wear-duty")
}

fn retention(text: &str) -> Result<f64> {
    humantime::parse_duration(text.trim())
        .map(|duration| duration.as_secs_f64())
        .map_err(|error| {
            UsageError(format!(
                "--retention '{text}' is not a duration (7d, 12h, 1week): {error}"
            ))
            .into()
        })
}

fn format(args: &PlanArgs) -> Result<plan::Format> {
    let whole = |text: &str, what: &str| -> Result<u64> {
        parse_size_bytes(text).map_err(|error| UsageError(format!("{what}: {error}")).into())
    };
    Ok(plan::Format {
        chunk_size_bytes: whole(&args.chunk_size, "--chunk-size")?,
        frame_size_bytes: args
            .frame_size
            .as_deref()
            .map(|text| whole(text, "--frame-size"))
            .transpose()?,
    })
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

/// The slowest rate after the wrap among an overwrite bench's phases, and that phase's
/// mode: a ring records at it once it has gone round.
fn rate_after_wrap(path: &Path, value: &serde_json::Value) -> Result<(f64, String)> {
    value
        .pointer("/phases")
        .and_then(|phases| phases.as_array())
        .into_iter()
        .flatten()
        .filter_map(|phase| {
            let rate = phase["rate_after_wrap_bytes_per_s"].as_f64()?;
            let mode = phase["mode"].as_str().unwrap_or("?").to_string();
            (rate > 0.0).then_some((rate, mode))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .ok_or_else(|| {
            UsageError(format!(
                "{} has no phase with a positive rate_after_wrap_bytes_per_s (the overwrite \
                 never wrapped?); give the rate with --drive-rate",
                path.display()
            ))
            .into()
        })
}

/// The drive rate a bench recorded: a fill's sustained plateau's rate (or, in a JSON from
/// before plateaus, `summary.sustained_write_bytes_per_s`), or an overwrite's slowest rate
/// after the wrap, with the mode of its phase.
fn drive_rate_from_bench(path: &PathBuf) -> Result<(f64, Option<TakenPlateau>, Option<String>)> {
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
    match bench {
        Some("fill") => {}
        Some("overwrite") => return rate_after_wrap(path, &value).map(|r| (r.0, None, Some(r.1))),
        _ => {
            return Err(UsageError(format!(
                "{} is not a `nvrec bench fill` result (it says bench {:?}); plan needs the \
                 sustained rate of a fill, or the rate after the wrap of an overwrite",
                path.display(),
                bench.unwrap_or("nothing")
            ))
            .into())
        }
    }
    if let Some(plateau) = sustained_plateau(&value).filter(|p| p.rate_bytes_per_s > 0.0) {
        return Ok((plateau.rate_bytes_per_s, Some(plateau), None));
    }
    value
        .pointer("/summary/sustained_write_bytes_per_s")
        .and_then(|rate| rate.as_f64())
        .filter(|rate| *rate > 0.0)
        .map(|rate| (rate, None, None))
        .ok_or_else(|| {
            UsageError(format!(
                "{} has no positive summary.sustained_write_bytes_per_s (the fill found no \
                 steady state?); give the rate with --drive-rate",
                path.display()
            ))
            .into()
        })
}

pub fn run(args: PlanArgs, json: bool) -> Result<Class> {
    let mut taken = None;
    let (drive_rate, drive_rate_source) = match (&args.drive_rate, &args.from_bench) {
        (Some(text), _) => (rate(text, "--drive-rate")?, "--drive-rate".to_string()),
        (None, Some(path)) => {
            let (drive_rate, plateau, mode) = drive_rate_from_bench(path)?;
            let mut source = match mode {
                Some(mode) => format!(
                    "rate after the wrap of an overwrite ({mode}, the slowest phase) in {}",
                    path.display()
                ),
                None => format!("sustained write in {}", path.display()),
            };
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
    let endurance = match (&args.dwpd, &args.tbw) {
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
        wear_duty_fraction: wear_duty(&args)?,
        format: format(&args)?,
        retention_wanted_s: args.retention.as_deref().map(retention).transpose()?,
        over_provisioning_fraction: percent(&args.over_provision, "--over-provision")?,
    };
    let plan = plan::plan(&input).map_err(|error| UsageError(error.to_string()))?;
    let pcie = pcie_check(&args, &plan)?;
    if json {
        let mut value = serde_json::to_value(plan)?;
        value["drive_rate_source"] = drive_rate_source.into();
        value["drive_rate_plateau"] = serde_json::to_value(&taken)?;
        if let Some((groups, caps)) = &pcie {
            value["pcie_uplinks"] = serde_json::to_value(groups)?;
            value["uplink_caps"] = serde_json::to_value(caps)?;
        }
        outln!("{}", value);
    } else {
        out!("{}", text(&plan, &drive_rate_source));
        if let Some((_, caps)) = &pcie {
            out!("{}", uplink_caps_text(caps));
        }
    }
    Ok(Class::Done)
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

type Row = (&'static str, String, String);

/// The format's rows: what a chunk carries and the rate the drives write.
fn format_rows(plan: &Plan, rows: &mut Vec<Row>) {
    let format = &plan.format;
    let carried = match (format.frame_size_bytes, format.record_bytes, format.records_per_chunk) {
        (Some(frame), Some(record), Some(records)) => format!(
            "{records} records of {record} B (64 + {frame} padded to 8) in {} B of payload, / {} B chunk",
            format.payload_bytes_per_chunk, format.chunk_size_bytes
        ),
        _ => format!(
            "({} B chunk - 128 B header) / {} B chunk",
            format.chunk_size_bytes, format.chunk_size_bytes
        ),
    };
    rows.push((
        "format efficiency",
        format!("{:.2} %", format.efficiency * 100.0),
        carried,
    ));
    rows.push((
        "disk rate",
        rate_text(plan.disk_rate_bytes_per_s),
        "rate / format efficiency".to_string(),
    ));
}

/// The drive counts: for the rate, for the retention, and the one evaluated.
fn drive_rows(plan: &Plan, drive_rate_source: &str, rows: &mut Vec<Row>) {
    rows.push((
        "drive rate",
        rate_text(plan.drive_rate_bytes_per_s),
        drive_rate_source.to_string(),
    ));
    let for_rate = format!(
        "ceil(disk rate x (1 + {:.0} % margin) / drive rate) = ceil({:.2})",
        plan.margin_fraction * 100.0,
        plan.drives_needed_exact
    );
    if let (Some(exact), Some(count), Some(retention)) = (
        plan.drives_needed_for_retention_exact,
        plan.drives_needed_for_retention,
        plan.retention_wanted_s,
    ) {
        rows.push((
            "drives for rate",
            plan.drives_needed_for_rate.to_string(),
            for_rate,
        ));
        rows.push((
            "drives for retention",
            count.to_string(),
            format!(
                "ceil(disk rate x {} / usable capacity) = ceil({exact:.2})",
                duration_text(retention)
            ),
        ));
        rows.push((
            "drives needed",
            plan.drives_needed.to_string(),
            "the larger of the two".to_string(),
        ));
    } else {
        rows.push(("drives needed", plan.drives_needed.to_string(), for_rate));
    }
    if plan.drive_count != plan.drives_needed {
        rows.push((
            "drives evaluated",
            plan.drive_count.to_string(),
            "--drives".to_string(),
        ));
    }
}

/// Throughput left over and the RAM for stalls.
fn throughput_rows(plan: &Plan, rows: &mut Vec<Row>) {
    let drives = plan.drive_count;
    rows.push((
        "per-drive share",
        rate_text(plan.per_drive_rate_bytes_per_s),
        format!("disk rate / {drives} drives"),
    ));
    rows.push((
        "drive utilization",
        format!("{:.0} %", plan.drive_utilization * 100.0),
        "per-drive share / drive rate".to_string(),
    ));
    rows.push((
        "headroom",
        rate_text(plan.headroom_bytes_per_s),
        format!("{drives} x drive rate - disk rate"),
    ));
    rows.push((
        "one drive lost",
        rate_text(plan.headroom_one_lost_bytes_per_s),
        format!(
            "{} x drive rate - disk rate: the others take its share",
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
            format!("rate / {drives} x {stall_s} s: one drive stalls"),
        ));
    }
}

/// Capacity, retention and the over-provisioning row.
fn capacity_rows(plan: &Plan, rows: &mut Vec<Row>) {
    let (Some(capacity), Some(usable), Some(total), Some(retention)) = (
        plan.drive_capacity_bytes,
        plan.usable_capacity_per_drive_bytes,
        plan.total_capacity_bytes,
        plan.retention_s,
    ) else {
        return;
    };
    if plan.over_provisioning_fraction > 0.0 {
        rows.push((
            "usable per drive",
            bytes_text(usable),
            format!(
                "{} x (1 - {:.0} % over-provisioning)",
                bytes_text(capacity),
                plan.over_provisioning_fraction * 100.0
            ),
        ));
    }
    rows.push((
        "total capacity",
        bytes_text(total),
        format!("{} x {}", plan.drive_count, bytes_text(usable)),
    ));
    rows.push((
        "retention",
        duration_text(retention),
        "total capacity / disk rate".to_string(),
    ));
}

/// Written per drive, rated writes and the wear-out.
fn wear_rows(plan: &Plan, rows: &mut Vec<Row>) {
    rows.push((
        "written per drive",
        format!("{} a day", bytes_text(plan.written_per_drive_per_day_bytes)),
        format!(
            "disk rate x {:.0} % wear duty x 86400 s / {} drives",
            plan.wear_duty_fraction * 100.0,
            plan.drive_count
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
}

/// The over-provisioning advice as a sentence.
fn over_provisioning_text(advice: &OverProvisioningAdvice) -> String {
    match *advice {
        OverProvisioningAdvice::Enough { fraction } => format!(
            "{:.0} % of each drive stays unwritten (record --usable {:.0}%): room for the drive \
             to clean up in a ring.",
            fraction * 100.0,
            advice.usable_percent()
        ),
        OverProvisioningAdvice::SpareCovers {
            recorded_bytes_per_drive,
            ..
        } => format!(
            "The retention needs {} a drive: record a ring of that size (record --usable {:.0}%) \
             and the other {:.0} % of each drive is over-provisioning.",
            bytes_text(recorded_bytes_per_drive),
            advice.usable_percent(),
            100.0 - advice.usable_percent()
        ),
        OverProvisioningAdvice::AddDrives {
            advised_fraction,
            drive_count,
        } => format!(
            "A ring over every byte slows the drives down (bench overwrite): leaving {:.0} % \
             of each unwritten (record --usable {:.0}%) needs {drive_count} drives for the \
             retention.",
            advised_fraction * 100.0,
            advice.usable_percent()
        ),
        OverProvisioningAdvice::Reserve {
            advised_fraction,
            retention_s,
        } => format!(
            "A ring over every byte slows the drives down (bench overwrite): leaving {:.0} % \
             of each unwritten (plan --over-provision {:.0}, record --usable {:.0}%) keeps {} of \
             retention.",
            advised_fraction * 100.0,
            advised_fraction * 100.0,
            advice.usable_percent(),
            duration_text(retention_s)
        ),
    }
}

/// The human answer: one row a number, `name  value  formula`, and a closing verdict.
fn text(plan: &Plan, drive_rate_source: &str) -> String {
    let mut rows: Vec<Row> = vec![(
        "target rate",
        rate_text(plan.rate_bytes_per_s),
        "--rate".to_string(),
    )];
    format_rows(plan, &mut rows);
    drive_rows(plan, drive_rate_source, &mut rows);
    throughput_rows(plan, &mut rows);
    capacity_rows(plan, &mut rows);
    wear_rows(plan, &mut rows);
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
    out.push_str(&verdict_text(plan));
    out
}

/// The closing sentences: whether the drives keep up, wear out, and want over-provisioning.
fn verdict_text(plan: &Plan) -> String {
    let drives = plan.drive_count;
    let mut out = String::new();
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
    if let (Some(wanted), Some(retention)) = (plan.retention_wanted_s, plan.retention_s) {
        if retention < wanted * (1.0 - 1e-9) {
            let _ = writeln!(
                out,
                "SHORT: {drives} drives hold {}, less than the {} asked; use {} or more.",
                duration_text(retention),
                duration_text(wanted),
                plan.drives_needed
            );
        }
    }
    if plan.wears_out_before_warranty == Some(true) {
        let _ = writeln!(
            out,
            "The drives reach their rated writes before their warranty ends."
        );
    }
    if let Some(advice) = &plan.over_provisioning_advice {
        let _ = writeln!(out, "{}", over_provisioning_text(advice));
    }
    out
}
