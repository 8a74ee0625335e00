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
//! The rate the drives see is more than the rate recorded: every chunk starts with a
//! 128-byte header, and a capture packs whole records (a 64-byte header and the frame padded
//! to 8 bytes) into a chunk's payload, leaving its tail unused when the next record does not
//! fit. [`Format`] turns the recorded rate into the rate written (`disk_rate`), which the drive
//! count, the retention and the wear are computed from. The volume's own metadata (a few MiB
//! a drive) is left out.
//!
//! A retention asked for (`--retention 7d`) is a second drive count: enough drives of the given
//! capacity to hold that long at the disk rate. The plan takes the larger of the two. Its
//! over-provisioning advice is about the ring: one that writes every byte of a drive without
//! TRIM leaves the drive only its factory spare area and slows it down (`bench overwrite`
//! measures it), so the plan advises leaving [`OVER_PROVISIONING_ADVISED`] of each drive
//! unwritten and says what that costs in retention or drives.
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

/// The share of each drive the plan advises leaving unwritten in a ring recording.
pub const OVER_PROVISIONING_ADVISED: f64 = 0.10;

/// How a recording lays the stream out in chunks (see docs/FORMAT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Format {
    /// The recording's `--chunk-size`, header included.
    pub chunk_size_bytes: u64,
    /// For a capture: the size of every frame (records are packed whole into a payload).
    pub frame_size_bytes: Option<u64>,
}

impl Default for Format {
    fn default() -> Self {
        Format {
            chunk_size_bytes: 128 << 10,
            frame_size_bytes: None,
        }
    }
}

/// What the format costs: bytes of the stream a chunk holds, against its size.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FormatOverhead {
    pub chunk_size_bytes: u64,
    /// `chunk size - 128`: the bytes after the chunk header.
    pub payload_bytes_per_chunk: u64,
    pub frame_size_bytes: Option<u64>,
    /// `64 + frame size padded to 8`: one record of a capture.
    pub record_bytes: Option<u64>,
    /// `floor(payload / record bytes)`: whole records a payload holds.
    pub records_per_chunk: Option<u64>,
    /// Bytes of the stream (frames, for a capture) one chunk carries.
    pub stream_bytes_per_chunk: u64,
    /// `stream bytes per chunk / chunk size`.
    pub efficiency: f64,
}

impl Format {
    /// The overhead, or why this format cannot hold the stream.
    pub fn overhead(&self) -> Result<FormatOverhead, PlanError> {
        let chunk = self.chunk_size_bytes;
        let header = crate::layout::CHUNK_HEADER_SIZE_BYTES as u64;
        if chunk <= header {
            return Err(PlanError::ChunkTooSmall(chunk));
        }
        let payload = chunk - header;
        let (record_bytes, records_per_chunk, stream_bytes) = match self.frame_size_bytes {
            None => (None, None, payload),
            Some(0) => return Err(PlanError::FrameSize { frame: 0, payload }),
            Some(frame) => {
                let record = crate::layout::record_bytes(frame as usize) as u64;
                if record > payload {
                    return Err(PlanError::FrameSize { frame, payload });
                }
                let records = payload / record;
                (Some(record), Some(records), records * frame)
            }
        };
        Ok(FormatOverhead {
            chunk_size_bytes: chunk,
            payload_bytes_per_chunk: payload,
            frame_size_bytes: self.frame_size_bytes,
            record_bytes,
            records_per_chunk,
            stream_bytes_per_chunk: stream_bytes,
            efficiency: stream_bytes as f64 / chunk as f64,
        })
    }
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
    /// Share of the time spent recording (1 = around the clock); it changes the wear only.
    pub wear_duty_fraction: f64,
    pub format: Format,
    /// How long the drives must hold the recording: solved for a drive count.
    pub retention_wanted_s: Option<f64>,
    /// Share of each drive left unwritten (0 = every byte recorded).
    pub over_provisioning_fraction: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("{what} must be a positive number, not {value}")]
    NotPositive { what: &'static str, value: f64 },
    #[error("the margin must be 0 % or more, not {0} %")]
    NegativeMargin(f64),
    #[error("the wear duty must be more than 0 % and at most 100 %, not {0} %")]
    Duty(f64),
    #[error("the over-provisioning must be 0 % or more and below 100 %, not {0} %")]
    OverProvisioning(f64),
    #[error("the drive count must be at least 1")]
    NoDrives,
    #[error(
        "a chunk of {0} bytes has no room after its 128-byte header: give a larger chunk size"
    )]
    ChunkTooSmall(u64),
    #[error("a frame of {frame} bytes does not fit a chunk's payload of {payload} bytes with its 64-byte record header: give a larger chunk size")]
    FrameSize { frame: u64, payload: u64 },
    #[error("a retention needs the drive capacity (--capacity)")]
    RetentionNeedsCapacity,
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
    pub format: FormatOverhead,
    /// `rate / format efficiency`: what the drives write, headers and unused tails included.
    pub disk_rate_bytes_per_s: f64,
    pub drive_rate_bytes_per_s: f64,
    pub margin_fraction: f64,
    /// `disk_rate × (1 + margin) / drive_rate`, before rounding up.
    pub drives_needed_exact: f64,
    /// `ceil(disk_rate × (1 + margin) / drive_rate)`: the drives the rate needs.
    pub drives_needed_for_rate: u32,
    pub retention_wanted_s: Option<f64>,
    /// `disk_rate × retention / usable capacity`, before rounding up.
    pub drives_needed_for_retention_exact: Option<f64>,
    pub drives_needed_for_retention: Option<u32>,
    /// The larger of the counts for the rate and for the retention.
    pub drives_needed: u32,
    /// The drives evaluated below: the count given, or the count needed.
    pub drive_count: u32,
    /// `disk_rate / drive_count`: what each drive must write.
    pub per_drive_rate_bytes_per_s: f64,
    /// `per_drive_rate / drive_rate`: above 1 the drives cannot keep up.
    pub drive_utilization: f64,
    /// `drive_count × drive_rate - disk_rate`: spare throughput.
    pub headroom_bytes_per_s: f64,
    pub keeps_up: bool,
    /// `(drive_count - 1) × drive_rate - disk_rate`: spare throughput once one drive has
    /// dropped out and the others take its share (negative: the loss of a drive loses data,
    /// however large the RAM buffer, because the backlog only grows).
    pub headroom_one_lost_bytes_per_s: f64,
    pub survives_one_drive_loss: bool,
    pub stall_s: Option<f64>,
    /// `rate × stall`: RAM that absorbs a stall of every drive at once.
    pub buffer_all_stall_bytes: Option<f64>,
    /// `rate / drive_count × stall`: RAM that absorbs one drive stalling while the others
    /// keep their share (adaptive striping moves it to drives with headroom when there is some).
    pub buffer_one_stall_bytes: Option<f64>,
    pub drive_capacity_bytes: Option<f64>,
    pub over_provisioning_fraction: f64,
    /// `capacity × (1 - over-provisioning)`: what a drive holds of the recording.
    pub usable_capacity_per_drive_bytes: Option<f64>,
    /// `drive_count × usable capacity`.
    pub total_capacity_bytes: Option<f64>,
    /// `total_capacity / disk_rate`: how long a linear recording lasts, or how far back a ring
    /// reaches.
    pub retention_s: Option<f64>,
    pub over_provisioning_advice: Option<OverProvisioningAdvice>,
    /// What to give `record --usable` (in percent of each drive) to carry the advice out.
    pub record_usable_percent: Option<f64>,
    pub wear_duty_fraction: f64,
    pub endurance: Option<Endurance>,
    /// DWPD × capacity × 365 × years, or the TBW: what one drive is rated to absorb.
    pub rated_bytes_per_drive: Option<f64>,
    /// `disk_rate × wear duty × 86400 / drive_count`.
    pub written_per_drive_per_day_bytes: f64,
    /// `rated_bytes / written_per_day / 365`.
    pub wear_out_years: Option<f64>,
    /// With DWPD: whether the drives wear out before their warranty ends.
    pub wears_out_before_warranty: Option<bool>,
}

/// What to leave unwritten on each drive of a ring, and what it costs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(tag = "advice", rename_all = "snake_case")]
pub enum OverProvisioningAdvice {
    /// The over-provisioning given is at least the advised share.
    Enough { fraction: f64 },
    /// The retention asked for leaves this share of the drives unused: record with a size
    /// limit of `recorded_bytes_per_drive` and the rest is over-provisioning.
    SpareCovers {
        spare_fraction: f64,
        recorded_bytes_per_drive: f64,
    },
    /// Leaving the advised share unwritten needs this many drives for the retention.
    AddDrives {
        advised_fraction: f64,
        drive_count: u32,
    },
    /// No retention asked: leaving the advised share unwritten shortens the retention to this.
    Reserve {
        advised_fraction: f64,
        retention_s: f64,
    },
}

impl OverProvisioningAdvice {
    /// The share of each drive to give `record --usable`, in whole percent: the rest is
    /// the over-provisioning advised, or given. Where the retention asked leaves the spare,
    /// rounded up so that the retention still fits; else down, so that the spare does.
    pub fn usable_percent(&self) -> f64 {
        let share = match *self {
            OverProvisioningAdvice::Enough { fraction } => 1.0 - fraction,
            OverProvisioningAdvice::SpareCovers { spare_fraction, .. } => 1.0 - spare_fraction,
            OverProvisioningAdvice::AddDrives {
                advised_fraction, ..
            }
            | OverProvisioningAdvice::Reserve {
                advised_fraction, ..
            } => 1.0 - advised_fraction,
        };
        match self {
            OverProvisioningAdvice::SpareCovers { .. } => (share * 100.0 - 1e-9).ceil(),
            _ => (share * 100.0 + 1e-9).floor(),
        }
        .clamp(1.0, 100.0)
    }
}

fn validate(input: &PlanInput) -> Result<(), PlanError> {
    PlanError::check_positive("the target rate", input.rate_bytes_per_s)?;
    PlanError::check_positive("the drive rate", input.drive_rate_bytes_per_s)?;
    if !(input.margin_fraction.is_finite() && input.margin_fraction >= 0.0) {
        return Err(PlanError::NegativeMargin(input.margin_fraction * 100.0));
    }
    if !(input.wear_duty_fraction > 0.0 && input.wear_duty_fraction <= 1.0) {
        return Err(PlanError::Duty(input.wear_duty_fraction * 100.0));
    }
    let op = input.over_provisioning_fraction;
    if !(op.is_finite() && (0.0..1.0).contains(&op)) {
        return Err(PlanError::OverProvisioning(op * 100.0));
    }
    for (what, value) in [
        ("the stall", input.stall_s),
        ("the drive capacity", input.drive_capacity_bytes),
        ("the retention", input.retention_wanted_s),
    ] {
        if let Some(value) = value {
            PlanError::check_positive(what, value)?;
        }
    }
    if input.retention_wanted_s.is_some() && input.drive_capacity_bytes.is_none() {
        return Err(PlanError::RetentionNeedsCapacity);
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
    Ok(())
}

/// `ceil(exact)`, at least 1, with a hair of tolerance so that 12.8 GB/s at 1.6 GB/s is 8
/// drives, not 9 by rounding.
fn drives_for(exact: f64) -> u32 {
    (exact - 1e-9).ceil().max(1.0) as u32
}

/// The advice for a ring over `usable` bytes a drive of `capacity`.
fn over_provisioning_advice(
    input: &PlanInput,
    disk_rate: f64,
    drive_count: u32,
    capacity: f64,
) -> OverProvisioningAdvice {
    let advised = OVER_PROVISIONING_ADVISED;
    if input.over_provisioning_fraction >= advised - 1e-12 {
        return OverProvisioningAdvice::Enough {
            fraction: input.over_provisioning_fraction,
        };
    }
    let drives = drive_count as f64;
    match input.retention_wanted_s {
        Some(retention) => {
            let recorded = disk_rate * retention / drives;
            let spare = 1.0 - recorded / capacity;
            if spare >= advised - 1e-12 {
                OverProvisioningAdvice::SpareCovers {
                    spare_fraction: spare,
                    recorded_bytes_per_drive: recorded,
                }
            } else {
                let exact = disk_rate * retention / (capacity * (1.0 - advised));
                OverProvisioningAdvice::AddDrives {
                    advised_fraction: advised,
                    drive_count: drives_for(exact).max(drive_count),
                }
            }
        }
        None => OverProvisioningAdvice::Reserve {
            advised_fraction: advised,
            retention_s: drives * capacity * (1.0 - advised) / disk_rate,
        },
    }
}

/// Works out the plan; errors name the input that cannot work.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    validate(input)?;
    let format = input.format.overhead()?;
    let rate = input.rate_bytes_per_s;
    let disk_rate = rate / format.efficiency;
    let needed_exact = disk_rate * (1.0 + input.margin_fraction) / input.drive_rate_bytes_per_s;
    let usable = input
        .drive_capacity_bytes
        .map(|capacity| capacity * (1.0 - input.over_provisioning_fraction));
    let retention_exact = input
        .retention_wanted_s
        .zip(usable)
        .map(|(retention, usable)| disk_rate * retention / usable);
    let for_retention = retention_exact.map(drives_for);
    let drives_needed = drives_for(needed_exact).max(for_retention.unwrap_or(1));
    let drive_count = input.drive_count.unwrap_or(drives_needed);
    if drive_count == 0 {
        return Err(PlanError::NoDrives);
    }
    let drives = drive_count as f64;
    let per_drive = disk_rate / drives;
    let utilization = per_drive / input.drive_rate_bytes_per_s;
    let total_capacity = usable.map(|usable| usable * drives);
    let advice = input
        .drive_capacity_bytes
        .map(|capacity| over_provisioning_advice(input, disk_rate, drive_count, capacity));
    let written_per_drive_per_day = disk_rate * input.wear_duty_fraction * DAY_S / drives;
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
    let drive_rate = input.drive_rate_bytes_per_s;
    Ok(Plan {
        rate_bytes_per_s: rate,
        format,
        disk_rate_bytes_per_s: disk_rate,
        drive_rate_bytes_per_s: drive_rate,
        margin_fraction: input.margin_fraction,
        drives_needed_exact: needed_exact,
        drives_needed_for_rate: drives_for(needed_exact),
        retention_wanted_s: input.retention_wanted_s,
        drives_needed_for_retention_exact: retention_exact,
        drives_needed_for_retention: for_retention,
        drives_needed,
        drive_count,
        per_drive_rate_bytes_per_s: per_drive,
        drive_utilization: utilization,
        headroom_bytes_per_s: drives * drive_rate - disk_rate,
        keeps_up: utilization <= 1.0 + 1e-12,
        headroom_one_lost_bytes_per_s: (drives - 1.0) * drive_rate - disk_rate,
        survives_one_drive_loss: (drives - 1.0) * drive_rate >= disk_rate * (1.0 - 1e-12),
        stall_s: input.stall_s,
        buffer_all_stall_bytes: input.stall_s.map(|stall| rate * stall),
        buffer_one_stall_bytes: input.stall_s.map(|stall| rate / drives * stall),
        drive_capacity_bytes: input.drive_capacity_bytes,
        over_provisioning_fraction: input.over_provisioning_fraction,
        usable_capacity_per_drive_bytes: usable,
        total_capacity_bytes: total_capacity,
        retention_s: total_capacity.map(|capacity| capacity / disk_rate),
        over_provisioning_advice: advice,
        record_usable_percent: advice.map(|advice| advice.usable_percent()),
        wear_duty_fraction: input.wear_duty_fraction,
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
            wear_duty_fraction: 1.0,
            format: Format::default(),
            retention_wanted_s: None,
            over_provisioning_fraction: 0.0,
        }
    }

    /// What the default format adds: 128 KiB chunks carry 128 KiB - 128 bytes of stream.
    const CHUNK_OVERHEAD: f64 = 131_072.0 / 130_944.0;

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
                (plan.drives_needed_exact - exact * CHUNK_OVERHEAD).abs() < 1e-5,
                "{drive_rate}"
            );
        }
        // An exact fit is not rounded up.
        let exact = PlanInput {
            rate_bytes_per_s: 12.8e9 / CHUNK_OVERHEAD,
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
            wear_duty_fraction: 1.0 / 3.0,
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
            // The headers take their share of the drives too.
            let headers_gb_per_s = (plan.disk_rate_bytes_per_s - RATE_100_GBE) / 1e9;
            assert!(
                (plan.headroom_one_lost_bytes_per_s / 1e9 - headroom_gb_per_s + headers_gb_per_s)
                    .abs()
                    < 1e-9,
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
                wear_duty_fraction: 1.5,
                ..input(1.6e9)
            },
            PlanInput {
                over_provisioning_fraction: 1.0,
                ..input(1.6e9)
            },
            PlanInput {
                retention_wanted_s: Some(3600.0),
                ..input(1.6e9)
            },
            PlanInput {
                format: Format {
                    chunk_size_bytes: 128,
                    frame_size_bytes: None,
                },
                ..input(1.6e9)
            },
            PlanInput {
                format: Format {
                    chunk_size_bytes: 4096,
                    frame_size_bytes: Some(4096),
                },
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

    #[test]
    fn the_format_overhead_by_chunk_and_frame_size() {
        // (chunk, frame, records a chunk, stream bytes a chunk)
        let cases = [
            (128 << 10, None, None, 130_944),
            (4096, None, None, 3968),
            // 64 + 1504 = 1568 bytes a record, 83 of them in 130944 bytes.
            (128 << 10, Some(1500), Some(83), 83 * 1500),
            // A jumbo frame: 64 + 9000 = 9064, 14 a payload.
            (128 << 10, Some(9000), Some(14), 14 * 9000),
            // Minimum Ethernet frames: the header is as large as the frame.
            (128 << 10, Some(64), Some(1023), 1023 * 64),
            (1 << 20, Some(1500), Some(668), 668 * 1500),
        ];
        for (chunk, frame, records, stream) in cases {
            let format = Format {
                chunk_size_bytes: chunk,
                frame_size_bytes: frame,
            };
            let overhead = format.overhead().unwrap();
            assert_eq!(overhead.payload_bytes_per_chunk, chunk - 128);
            assert_eq!(overhead.records_per_chunk, records, "{chunk} {frame:?}");
            assert_eq!(overhead.stream_bytes_per_chunk, stream, "{chunk} {frame:?}");
            assert_eq!(overhead.efficiency, stream as f64 / chunk as f64);
        }
        // 100 GbE of 1500-byte frames writes 12.5 GB/s x 131072 / 124500 = 13.16 GB/s.
        let capture = PlanInput {
            format: Format {
                chunk_size_bytes: 128 << 10,
                frame_size_bytes: Some(1500),
            },
            ..input(1.6e9)
        };
        let plan = plan(&capture).unwrap();
        assert!((plan.disk_rate_bytes_per_s / 1e9 - 13.1598).abs() < 1e-4);
        assert_eq!(plan.drives_needed, 9, "8.22 drives");
        let too_large = Format {
            chunk_size_bytes: 128 << 10,
            frame_size_bytes: Some(130_900),
        };
        assert_eq!(
            too_large.overhead(),
            Err(PlanError::FrameSize {
                frame: 130_900,
                payload: 130_944
            })
        );
    }

    #[test]
    fn solves_the_drive_count_for_a_retention() {
        let disk_rate = RATE_100_GBE * CHUNK_OVERHEAD;
        // (retention s, capacity, over-provisioning, drives)
        let cases = [
            (
                7.0 * DAY_S,
                30e12,
                0.0,
                (disk_rate * 7.0 * DAY_S / 30e12).ceil(),
            ),
            // 100 GbE for a week onto 30 TB drives: 252.2, so 253.
            (7.0 * DAY_S, 30e12, 0.0, 253.0),
            (DAY_S, 30e12, 0.0, 37.0),
            // A tenth of each drive left unwritten: 36.03 / 0.9 = 40.03.
            (DAY_S, 30e12, 0.1, 41.0),
            // Eight hours fit the seed's twelve drives; the rate needs 8 of them.
            (8.0 * 3600.0, 30e12, 0.0, 13.0),
            (3600.0, 30e12, 0.0, 8.0),
        ];
        for (retention, capacity, op, drives) in cases {
            let plan = plan(&PlanInput {
                retention_wanted_s: Some(retention),
                drive_capacity_bytes: Some(capacity),
                over_provisioning_fraction: op,
                ..input(1.6e9)
            })
            .unwrap();
            assert_eq!(plan.drives_needed, drives as u32, "{retention} s, {op}");
            assert!(plan.retention_s.unwrap() >= retention * (1.0 - 1e-9));
        }
    }

    #[test]
    fn advises_over_provisioning_for_a_ring() {
        let twelve = PlanInput {
            drive_count: Some(12),
            drive_capacity_bytes: Some(30e12),
            ..input(1.6e9)
        };
        let disk_rate = RATE_100_GBE * CHUNK_OVERHEAD;
        let advice = |input: PlanInput| plan(&input).unwrap().over_provisioning_advice.unwrap();
        match advice(twelve) {
            OverProvisioningAdvice::Reserve { retention_s, .. } => {
                assert!((retention_s - 12.0 * 27e12 / disk_rate).abs() < 1e-6)
            }
            other => panic!("{other:?}"),
        }
        let seven_hours = PlanInput {
            retention_wanted_s: Some(7.0 * 3600.0),
            ..twelve
        };
        match advice(seven_hours) {
            OverProvisioningAdvice::SpareCovers {
                spare_fraction,
                recorded_bytes_per_drive,
            } => {
                assert!((recorded_bytes_per_drive - disk_rate * 25_200.0 / 12.0).abs() < 1.0);
                assert!((spare_fraction - 0.1241).abs() < 1e-3, "{spare_fraction}");
            }
            other => panic!("{other:?}"),
        }
        let nearly_full = PlanInput {
            retention_wanted_s: Some(7.9 * 3600.0),
            ..twelve
        };
        assert_eq!(
            advice(nearly_full),
            OverProvisioningAdvice::AddDrives {
                advised_fraction: OVER_PROVISIONING_ADVISED,
                drive_count: 14
            }
        );
        let given = PlanInput {
            over_provisioning_fraction: 0.2,
            ..twelve
        };
        assert_eq!(
            advice(given),
            OverProvisioningAdvice::Enough { fraction: 0.2 }
        );
        assert_eq!(plan(&input(1.6e9)).unwrap().over_provisioning_advice, None);
    }

    #[test]
    fn the_advice_says_what_to_give_record_usable() {
        let spare = OverProvisioningAdvice::SpareCovers {
            spare_fraction: 0.1241,
            recorded_bytes_per_drive: 1e12,
        };
        // Up where the retention needs the space, down where the spare does.
        assert_eq!(spare.usable_percent(), 88.0);
        let reserve = OverProvisioningAdvice::Reserve {
            advised_fraction: OVER_PROVISIONING_ADVISED,
            retention_s: 1.0,
        };
        assert_eq!(reserve.usable_percent(), 90.0);
        assert_eq!(
            OverProvisioningAdvice::Enough { fraction: 0.255 }.usable_percent(),
            74.0
        );
        let twelve = PlanInput {
            drive_count: Some(12),
            drive_capacity_bytes: Some(30e12),
            ..input(1.6e9)
        };
        assert_eq!(plan(&twelve).unwrap().record_usable_percent, Some(90.0));
        assert_eq!(plan(&input(1.6e9)).unwrap().record_usable_percent, None);
    }
}
