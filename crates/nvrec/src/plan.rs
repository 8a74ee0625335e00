//! Capacity planning: how many drives a target rate needs, the RAM buffer that rides out a
//! stall, how long the drives hold a recording, and how long they last.
//!
//! Pure arithmetic over [`PlanInput`]; every formula is in the doc of the field it fills, so
//! the CLI can print it beside the number. Rates are bytes per second, sizes bytes, times
//! seconds; a year is 365 days, as warranties count them.
//!
//! Two buffers answer two questions: `rate × stall` is the RAM that rides out every drive
//! stalling at once (nothing reaches the drives for `stall` seconds); `rate / drives × stall`
//! is the RAM for one drive stalling while the others keep writing their share. A drive that
//! drops out for good is not a buffer question: the other `drives - 1` must carry the whole
//! rate or the backlog grows without bound, so the plan reports the headroom left after one
//! loss instead.
//!
//! What it deliberately does not do: measure anything (the per-drive rate comes from the
//! user or from `bench fill`'s sustained rate), or model write amplification beyond what the
//! drive's own rating (DWPD or TBW) already assumes.

/// Seconds in a day and in a (warranty) year.
pub const DAY_S: f64 = 86_400.0;
pub const YEAR_S: f64 = 365.0 * DAY_S;

/// How the drive's endurance is rated.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Endurance {
    /// Drive writes per day over a warranty of so many years.
    Dwpd { dwpd: f64, warranty_years: f64 },
    /// Total bytes written over the warranty.
    Tbw { bytes: f64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanInput {
    pub rate_bytes_per_s: f64,
    /// What one drive sustains (not its burst rate: see `bench fill`).
    pub drive_rate_bytes_per_s: f64,
    /// Extra drive throughput asked for, as a fraction (0.2 = 20 %).
    pub margin_fraction: f64,
    /// Evaluate this many drives instead of the number needed.
    pub drive_count: Option<u32>,
    /// A stall to ride out with RAM.
    pub stall_s: Option<f64>,
    pub drive_capacity_bytes: Option<f64>,
    pub endurance: Option<Endurance>,
    /// Share of the time spent recording (1 = around the clock).
    pub duty_fraction: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("{what} must be a positive number, not {value}")]
    NotPositive { what: &'static str, value: f64 },
    #[error("the margin must be 0 % or more, not {0} %")]
    NegativeMargin(f64),
    #[error("the duty must be more than 0 % and at most 100 %, not {0} %")]
    Duty(f64),
    #[error("the drive count must be at least 1")]
    NoDrives,
}

impl PlanError {
    fn check_positive(what: &'static str, value: f64) -> Result<(), PlanError> {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(PlanError::NotPositive { what, value })
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Plan {
    pub rate_bytes_per_s: f64,
    pub drive_rate_bytes_per_s: f64,
    pub margin_fraction: f64,
    /// `rate × (1 + margin) / drive_rate`, before rounding up.
    pub drives_needed_exact: f64,
    /// `ceil(rate × (1 + margin) / drive_rate)`.
    pub drives_needed: u32,
    /// The drives evaluated below: the count given, or the count needed.
    pub drive_count: u32,
    /// `rate / drive_count`: what each drive must write.
    pub per_drive_rate_bytes_per_s: f64,
    /// `per_drive_rate / drive_rate`: above 1 the drives cannot keep up.
    pub drive_utilization: f64,
    /// `drive_count × drive_rate - rate`: spare throughput.
    pub headroom_bytes_per_s: f64,
    pub keeps_up: bool,
    /// `(drive_count - 1) × drive_rate - rate`: spare throughput once one drive has dropped
    /// out and the others take its share (negative: the loss of a drive loses data, however
    /// large the RAM buffer, because the backlog only grows).
    pub headroom_one_lost_bytes_per_s: f64,
    pub survives_one_drive_loss: bool,
    pub stall_s: Option<f64>,
    /// `rate × stall`: RAM that absorbs a stall of every drive at once.
    pub buffer_all_stall_bytes: Option<f64>,
    /// `per_drive_rate × stall`: RAM that absorbs one drive stalling while the others keep
    /// their share (adaptive striping moves it to drives with headroom when there is some).
    pub buffer_one_stall_bytes: Option<f64>,
    pub drive_capacity_bytes: Option<f64>,
    /// `drive_count × capacity`.
    pub total_capacity_bytes: Option<f64>,
    /// `total_capacity / rate`: how long a linear recording lasts, or how far back a ring reaches.
    pub retention_s: Option<f64>,
    pub duty_fraction: f64,
    pub endurance: Option<Endurance>,
    /// DWPD × capacity × 365 × years, or the TBW: what one drive is rated to absorb.
    pub rated_bytes_per_drive: Option<f64>,
    /// `rate × duty × 86400 / drive_count`.
    pub written_per_drive_per_day_bytes: f64,
    /// `rated_bytes / written_per_day / 365`.
    pub wear_out_years: Option<f64>,
    /// With DWPD: whether the drives wear out before their warranty ends.
    pub wears_out_before_warranty: Option<bool>,
}

/// Works out the plan; errors name the input that cannot work.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    PlanError::check_positive("the target rate", input.rate_bytes_per_s)?;
    PlanError::check_positive("the drive rate", input.drive_rate_bytes_per_s)?;
    if !(input.margin_fraction.is_finite() && input.margin_fraction >= 0.0) {
        return Err(PlanError::NegativeMargin(input.margin_fraction * 100.0));
    }
    if !(input.duty_fraction > 0.0 && input.duty_fraction <= 1.0) {
        return Err(PlanError::Duty(input.duty_fraction * 100.0));
    }
    if let Some(stall_s) = input.stall_s {
        PlanError::check_positive("the stall", stall_s)?;
    }
    if let Some(capacity) = input.drive_capacity_bytes {
        PlanError::check_positive("the drive capacity", capacity)?;
    }
    match input.endurance {
        Some(Endurance::Dwpd {
            dwpd,
            warranty_years,
        }) => {
            PlanError::check_positive("DWPD", dwpd)?;
            PlanError::check_positive("the warranty", warranty_years)?;
            if input.drive_capacity_bytes.is_none() {
                return Err(PlanError::NotPositive {
                    what: "the drive capacity (DWPD needs it)",
                    value: 0.0,
                });
            }
        }
        Some(Endurance::Tbw { bytes }) => PlanError::check_positive("TBW", bytes)?,
        None => {}
    }
    let rate = input.rate_bytes_per_s;
    let needed_exact = rate * (1.0 + input.margin_fraction) / input.drive_rate_bytes_per_s;
    // A hair of tolerance so that 12.8 GB/s at 1.6 GB/s is 8 drives, not 9 by rounding.
    let drives_needed = ((needed_exact - 1e-9).ceil().max(1.0)) as u32;
    let drive_count = input.drive_count.unwrap_or(drives_needed);
    if drive_count == 0 {
        return Err(PlanError::NoDrives);
    }
    let drives = drive_count as f64;
    let per_drive = rate / drives;
    let utilization = per_drive / input.drive_rate_bytes_per_s;
    let total_capacity = input.drive_capacity_bytes.map(|capacity| capacity * drives);
    let written_per_drive_per_day = rate * input.duty_fraction * DAY_S / drives;
    let rated = match input.endurance {
        Some(Endurance::Dwpd {
            dwpd,
            warranty_years,
        }) => input
            .drive_capacity_bytes
            .map(|capacity| dwpd * capacity * 365.0 * warranty_years),
        Some(Endurance::Tbw { bytes }) => Some(bytes),
        None => None,
    };
    let wear_out_years = rated.map(|rated| rated / written_per_drive_per_day / 365.0);
    let wears_out_before_warranty = match (input.endurance, wear_out_years) {
        (Some(Endurance::Dwpd { warranty_years, .. }), Some(years)) => Some(years < warranty_years),
        _ => None,
    };
    Ok(Plan {
        rate_bytes_per_s: rate,
        drive_rate_bytes_per_s: input.drive_rate_bytes_per_s,
        margin_fraction: input.margin_fraction,
        drives_needed_exact: needed_exact,
        drives_needed,
        drive_count,
        per_drive_rate_bytes_per_s: per_drive,
        drive_utilization: utilization,
        headroom_bytes_per_s: drives * input.drive_rate_bytes_per_s - rate,
        keeps_up: utilization <= 1.0 + 1e-12,
        headroom_one_lost_bytes_per_s: (drives - 1.0) * input.drive_rate_bytes_per_s - rate,
        survives_one_drive_loss: (drives - 1.0) * input.drive_rate_bytes_per_s
            >= rate * (1.0 - 1e-12),
        stall_s: input.stall_s,
        buffer_all_stall_bytes: input.stall_s.map(|stall| rate * stall),
        buffer_one_stall_bytes: input.stall_s.map(|stall| per_drive * stall),
        drive_capacity_bytes: input.drive_capacity_bytes,
        total_capacity_bytes: total_capacity,
        retention_s: total_capacity.map(|capacity| capacity / rate),
        duty_fraction: input.duty_fraction,
        endurance: input.endurance,
        rated_bytes_per_drive: rated,
        written_per_drive_per_day_bytes: written_per_drive_per_day,
        wear_out_years,
        wears_out_before_warranty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 100 Gbit/s, as the seed's 100 GbE capture.
    const RATE_100_GBE: f64 = 100e9 / 8.0;

    fn input(drive_rate: f64) -> PlanInput {
        PlanInput {
            rate_bytes_per_s: RATE_100_GBE,
            drive_rate_bytes_per_s: drive_rate,
            margin_fraction: 0.0,
            drive_count: None,
            stall_s: None,
            drive_capacity_bytes: None,
            endurance: None,
            duty_fraction: 1.0,
        }
    }

    #[test]
    fn reproduces_the_seed_drive_counts() {
        // (drive rate, exact quotient, drives): the seed's 100 GbE recorder at 12.5 GB/s.
        for (drive_rate, exact, drives) in [
            (1.6e9, 7.8125, 8),
            (2.2e9, 5.681818, 6),
            (1.3e9, 9.615385, 10),
            (3.2e9, 3.90625, 4),
        ] {
            let plan = plan(&input(drive_rate)).unwrap();
            assert_eq!(plan.drives_needed, drives, "{drive_rate}");
            assert!(
                (plan.drives_needed_exact - exact).abs() < 1e-6,
                "{drive_rate}"
            );
        }
        // An exact fit is not rounded up.
        let exact = PlanInput {
            rate_bytes_per_s: 12.8e9,
            ..input(1.6e9)
        };
        assert_eq!(plan(&exact).unwrap().drives_needed, 8);
        // The margin adds drives: 12.5 x 1.2 / 1.6 = 9.4.
        let margin = PlanInput {
            margin_fraction: 0.2,
            ..input(1.6e9)
        };
        assert_eq!(plan(&margin).unwrap().drives_needed, 10);
        // The seed recommends 5 of its Gen4 drive at 3.2 GB/s: 4 fit exactly, a 20 %
        // margin makes it 5 (12.5 x 1.2 / 3.2 = 4.7).
        let gen4 = PlanInput {
            margin_fraction: 0.2,
            ..input(3.2e9)
        };
        assert_eq!(plan(&gen4).unwrap().drives_needed, 5);
    }

    #[test]
    fn reproduces_the_seed_retention_and_wear() {
        let twelve = PlanInput {
            drive_count: Some(12),
            drive_capacity_bytes: Some(30e12),
            endurance: Some(Endurance::Dwpd {
                dwpd: 1.0,
                warranty_years: 5.0,
            }),
            ..input(1.6e9)
        };
        let plan = plan(&twelve).unwrap();
        let hours = plan.retention_s.unwrap() / 3600.0;
        assert!((hours - 8.0).abs() < 0.01, "{hours}");
        let years = plan.wear_out_years.unwrap();
        assert!((1.6..=1.7).contains(&years), "{years}");
        assert_eq!(plan.wears_out_before_warranty, Some(true));
        assert!(plan.keeps_up);
        // TBW gives the same answer: 1 DWPD x 30 TB x 365 x 5 = 54.75 PB.
        let tbw = PlanInput {
            endurance: Some(Endurance::Tbw { bytes: 54.75e15 }),
            ..twelve
        };
        assert!((super::plan(&tbw).unwrap().wear_out_years.unwrap() - years).abs() < 1e-9);
        // Recording a third of the time makes them last three times as long.
        let duty = PlanInput {
            duty_fraction: 1.0 / 3.0,
            ..twelve
        };
        assert!((super::plan(&duty).unwrap().wear_out_years.unwrap() / years - 3.0).abs() < 1e-9);
    }

    #[test]
    fn buffers_and_headroom() {
        let stall = PlanInput {
            stall_s: Some(0.5),
            drive_count: Some(5),
            ..input(2.2e9)
        };
        let plan = plan(&stall).unwrap();
        assert!((plan.buffer_all_stall_bytes.unwrap() - 6.25e9).abs() < 1.0);
        assert!((plan.buffer_one_stall_bytes.unwrap() - 1.25e9).abs() < 1.0);
        assert!(!plan.keeps_up, "5 x 2.2 GB/s < 12.5 GB/s");
        assert!(plan.headroom_bytes_per_s < 0.0);
    }

    #[test]
    fn losing_one_drive() {
        // (drives, drive rate, headroom with one lost in GB/s, survives)
        let cases = [
            (8, 1.6e9, -1.3, false),
            (9, 1.6e9, 0.3, true),
            (12, 1.6e9, 5.1, true),
            (6, 2.2e9, -1.5, false),
            (1, 20e9, -12.5, false),
        ];
        for (drives, drive_rate, headroom_gb_per_s, survives) in cases {
            let plan = plan(&PlanInput {
                drive_count: Some(drives),
                ..input(drive_rate)
            })
            .unwrap();
            assert!(
                (plan.headroom_one_lost_bytes_per_s / 1e9 - headroom_gb_per_s).abs() < 1e-9,
                "{drives} x {drive_rate}: {}",
                plan.headroom_one_lost_bytes_per_s
            );
            assert_eq!(
                plan.survives_one_drive_loss, survives,
                "{drives} x {drive_rate}"
            );
        }
    }

    #[test]
    fn refuses_what_cannot_work() {
        let cases = [
            PlanInput {
                rate_bytes_per_s: 0.0,
                ..input(1.6e9)
            },
            input(-1.0),
            input(f64::NAN),
            PlanInput {
                margin_fraction: -0.1,
                ..input(1.6e9)
            },
            PlanInput {
                duty_fraction: 1.5,
                ..input(1.6e9)
            },
            PlanInput {
                drive_count: Some(0),
                ..input(1.6e9)
            },
            PlanInput {
                endurance: Some(Endurance::Dwpd {
                    dwpd: 1.0,
                    warranty_years: 5.0,
                }),
                ..input(1.6e9)
            },
        ];
        for case in cases {
            assert!(plan(&case).is_err(), "{case:?}");
        }
    }
}
