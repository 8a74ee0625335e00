//! What a bandwidth time series says about a drive: its plateaus (the stretches at one rate:
//! a DRAM buffer, the SLC cache, direct to TLC, folding, throttled), its peak, where it fell
//! and how fast it was after, whether and where it reached a steady state, its slowest moment,
//! and its stalls. Pure functions over [`Window`]s; no I/O, no clock.
//!
//! The rules, in the order they run:
//! 1. **Windows**: windows shorter than half the nominal length (the last one) are left out of
//!    detection; windows holding fewer than `window_bytes_min` bytes on average are merged in
//!    runs of equal length until they hold that much (a window of a few transfers measures
//!    its transfers' timing, not the drive's rate).
//! 2. **Too short**: fewer than `window_count_min` windows after that tell nothing about a
//!    drive; the analysis says so and how long a run would (see [`TooShort`]).
//! 3. **Peak**: the highest mean of three consecutive windows (one lucky window is not a peak).
//! 4. **Plateaus** ([`super::plateau`]): the run cut where its rate changed, each plateau
//!    lasting at least `drop_window_count` windows, its rate its bytes over its time.
//! 5. **Drops**: a plateau slower by more than `drop_fraction` than the one before it. The
//!    first drop is the **cliff** (with a DRAM buffer, its end; then the SLC cache's end is
//!    the first later drop); the rate before and after are the plateaus' rates.
//! 6. **Sustained rate**: the last plateau's rate (what the drive keeps doing once every
//!    buffer and cache it has is full); [`SeriesAnalysis::sustained_plateau_index`] names it.
//! 7. **Steady state** (after the SNIA PTS rule), searched in the sustained plateau: the first
//!    run of `steady_window_count` consecutive windows whose range (max - min) is within
//!    `steady_range_fraction` of their mean and whose least-squares line changes by no more
//!    than `steady_slope_fraction` of the mean across the run.
//! 8. **Stalls**, over the windows as logged: windows in which nothing completed, or whose
//!    slowest transfer took longer than `stall_latency_us` (default: ten times the median of
//!    the windows' slowest transfers, at least 50 ms).

use super::plateau::{self, bytes_before, median, Plateau, PlateauSettings, RunEnd};
use super::window::{merge_windows, Window};

/// The knobs of the rules above.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AnalysisSettings {
    pub drop_fraction: f64,
    /// Windows a plateau (and so a drop) must last.
    pub drop_window_count: usize,
    /// Relative difference of rates below which two stretches are one plateau.
    pub plateau_step_fraction: f64,
    pub steady_window_count: usize,
    pub steady_range_fraction: f64,
    pub steady_slope_fraction: f64,
    /// `None`: derived from the series (rule 8).
    pub stall_latency_us: Option<f64>,
    /// Windows a run needs to tell anything (rule 2).
    pub window_count_min: usize,
    /// Bytes a window holds at least, merging windows where they hold less (rule 1).
    pub window_bytes_min: u64,
}

impl Default for AnalysisSettings {
    /// Counted in windows, so the rules scale with the window length.
    fn default() -> AnalysisSettings {
        AnalysisSettings {
            drop_fraction: 0.2,
            drop_window_count: 4,
            plateau_step_fraction: 0.05,
            steady_window_count: 20,
            steady_range_fraction: 0.2,
            steady_slope_fraction: 0.1,
            stall_latency_us: None,
            window_count_min: WINDOW_COUNT_MIN,
            window_bytes_min: 0,
        }
    }
}

/// Windows a run needs before its analysis says anything about the drive.
pub const WINDOW_COUNT_MIN: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Drop {
    /// Bytes written (from the start of the series) when the rate fell.
    pub at_bytes: u64,
    pub at_s: f64,
    pub rate_before_bytes_per_s: f64,
    pub rate_after_bytes_per_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SteadyState {
    pub start_s: f64,
    pub end_s: f64,
    pub start_bytes: u64,
    pub rate_bytes_per_s: f64,
    /// (max - min) / mean over the measurement windows.
    pub range_fraction: f64,
    /// Change of the fitted line across the measurement windows, over the mean.
    pub slope_fraction: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Stall {
    pub start_s: f64,
    pub position_bytes: u64,
    pub latency_max_us: f64,
    pub rate_bytes_per_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SlowestWindow {
    pub start_s: f64,
    pub position_bytes: u64,
    pub rate_bytes_per_s: f64,
}

/// A run too short to tell anything, and how long one would have to be.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TooShort {
    /// Windows the run gave after merging (rule 1).
    pub window_count: usize,
    pub window_count_min: usize,
    /// At the rate measured: run at least this long, writing this much.
    pub run_at_least_s: f64,
    pub run_at_least_bytes: u64,
}

/// Which number the sustained rate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SustainedBasis {
    /// The last plateau's rate.
    LastPlateau,
    /// No plateau (no full window): the mean of the whole run.
    WholeRun,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesAnalysis {
    pub settings: AnalysisSettings,
    /// Windows as logged.
    pub window_count: usize,
    /// Windows the rules ran on (rule 1), and their length.
    pub analysed_window_count: usize,
    pub analysed_window_s: f64,
    pub too_short: Option<TooShort>,
    pub plateaus: Vec<Plateau>,
    /// Index in `plateaus` of the one the sustained rate is.
    pub sustained_plateau_index: Option<usize>,
    pub peak_rate_bytes_per_s: f64,
    pub peak_at_s: f64,
    pub mean_rate_bytes_per_s: f64,
    pub cliff: Option<Drop>,
    /// Drops after the cliff.
    pub later_drops: Vec<Drop>,
    /// The rate of the plateau after the cliff.
    pub rate_after_cliff_bytes_per_s: Option<f64>,
    pub steady_state: Option<SteadyState>,
    pub sustained_rate_bytes_per_s: f64,
    pub sustained_basis: SustainedBasis,
    pub slowest_window: Option<SlowestWindow>,
    pub stall_latency_us: f64,
    pub stalls: Vec<Stall>,
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), value| {
        (sum + value, count + 1)
    });
    if count == 0 {
        0.0
    } else {
        sum / count as f64
    }
}

/// Rule 1: the full-length windows, merged in runs of `factor` where they hold fewer than
/// `bytes_min` bytes on average.
pub fn analysed_windows(all_windows: &[Window], bytes_min: u64) -> Vec<Window> {
    let nominal_s = all_windows
        .iter()
        .map(|window| window.duration_s)
        .fold(0.0, f64::max);
    let full: Vec<Window> = all_windows
        .iter()
        .copied()
        .filter(|window| window.duration_s >= 0.5 * nominal_s)
        .collect();
    let mean_bytes = mean(full.iter().map(|window| window.bytes as f64));
    if full.is_empty() || mean_bytes <= 0.0 || mean_bytes >= bytes_min as f64 {
        return full;
    }
    // A little under the ratio, so that a byte lost to rounding never asks for a window more.
    let factor = (bytes_min as f64 / mean_bytes - 1e-3).ceil() as usize;
    full.chunks_exact(factor).map(merge_windows).collect()
}

/// Rule 2.
fn too_short(
    windows: &[Window],
    all_windows: &[Window],
    mean_rate: f64,
    settings: &AnalysisSettings,
) -> Option<TooShort> {
    if windows.len() >= settings.window_count_min {
        return None;
    }
    let logged_s = all_windows
        .iter()
        .map(|window| window.duration_s)
        .fold(0.0, f64::max);
    let by_bytes_s = if mean_rate > 0.0 {
        settings.window_bytes_min as f64 / mean_rate
    } else {
        0.0
    };
    let count = settings.window_count_min as f64;
    let run_at_least_s = count * logged_s.max(by_bytes_s);
    let run_at_least_bytes =
        (run_at_least_s * mean_rate).max(count * settings.window_bytes_min as f64);
    Some(TooShort {
        window_count: windows.len(),
        window_count_min: settings.window_count_min,
        run_at_least_s,
        run_at_least_bytes: run_at_least_bytes.ceil() as u64,
    })
}

/// Rule 3: the highest mean of three consecutive windows, and when it started.
fn peak(windows: &[Window]) -> (f64, f64) {
    let (mut peak_rate, mut peak_at_s) = (0.0, 0.0);
    for start in 0..windows.len() {
        let end = (start + 3).min(windows.len());
        let rate = mean(windows[start..end].iter().map(|w| w.rate_bytes_per_s));
        if rate > peak_rate {
            (peak_rate, peak_at_s) = (rate, windows[start].start_s);
        }
    }
    (peak_rate, peak_at_s)
}

/// Rule 5: each plateau slower than the one before by more than `drop_fraction`.
pub fn drops(plateaus: &[Plateau], drop_fraction: f64) -> Vec<(Drop, usize)> {
    (1..plateaus.len())
        .filter(|index| {
            plateaus[*index].rate_bytes_per_s
                < (1.0 - drop_fraction) * plateaus[index - 1].rate_bytes_per_s
        })
        .map(|index| {
            let (before, after) = (plateaus[index - 1], plateaus[index]);
            let drop = Drop {
                at_bytes: after.start_bytes,
                at_s: after.start_s,
                rate_before_bytes_per_s: before.rate_bytes_per_s,
                rate_after_bytes_per_s: after.rate_bytes_per_s,
            };
            (drop, index)
        })
        .collect()
}

/// Rule 7: the first steady run of windows starting at or after `from_s`.
fn steady_state(
    windows: &[Window],
    from_s: f64,
    settings: &AnalysisSettings,
) -> Option<SteadyState> {
    let m = settings.steady_window_count.max(2);
    let first = windows
        .iter()
        .position(|window| window.start_s >= from_s - 1e-9)?;
    let rates: Vec<f64> = windows.iter().map(|w| w.rate_bytes_per_s).collect();
    (first..rates.len().saturating_sub(m - 1)).find_map(|start| {
        let run = &rates[start..start + m];
        let run_mean = mean(run.iter().copied());
        if run_mean <= 0.0 {
            return None;
        }
        let (low, high) = run.iter().fold((f64::MAX, f64::MIN), |(low, high), rate| {
            (low.min(*rate), high.max(*rate))
        });
        let range_fraction = (high - low) / run_mean;
        let slope_fraction = (least_squares_slope(run) * (m - 1) as f64).abs() / run_mean;
        let steady = range_fraction <= settings.steady_range_fraction
            && slope_fraction <= settings.steady_slope_fraction;
        let last = &windows[start + m - 1];
        steady.then(|| SteadyState {
            start_s: windows[start].start_s,
            end_s: last.start_s + last.duration_s,
            start_bytes: bytes_before(windows, start),
            rate_bytes_per_s: run_mean,
            range_fraction,
            slope_fraction,
        })
    })
}

/// Rule 8.
fn stalls(all_windows: &[Window], settings: &AnalysisSettings) -> (f64, Vec<Stall>) {
    let stall_latency_us = settings.stall_latency_us.unwrap_or_else(|| {
        let latencies: Vec<f64> = all_windows
            .iter()
            .filter(|window| window.bytes > 0)
            .map(|window| window.latency_max_us)
            .collect();
        (10.0 * median(&latencies)).max(50_000.0)
    });
    let stalls = all_windows
        .iter()
        .filter(|window| window.bytes == 0 || window.latency_max_us > stall_latency_us)
        .map(|window| Stall {
            start_s: window.start_s,
            position_bytes: window.position_bytes,
            latency_max_us: window.latency_max_us,
            rate_bytes_per_s: window.rate_bytes_per_s,
        })
        .collect();
    (stall_latency_us, stalls)
}

/// Analyses a write (or read) bandwidth series.
pub fn analyse(all_windows: &[Window], settings: &AnalysisSettings) -> SeriesAnalysis {
    let windows = analysed_windows(all_windows, settings.window_bytes_min);
    let total_bytes: u64 = all_windows.iter().map(|window| window.bytes).sum();
    let total_s: f64 = all_windows.iter().map(|window| window.duration_s).sum();
    let mean_rate = if total_s > 0.0 {
        total_bytes as f64 / total_s
    } else {
        0.0
    };
    let (peak_rate, peak_at_s) = peak(&windows);
    let end = RunEnd {
        bytes: all_windows.last().map_or(0, |window| window.total_bytes),
        s: all_windows
            .last()
            .map_or(0.0, |window| window.start_s + window.duration_s),
    };
    let plateaus = plateau::plateaus(
        &windows,
        end,
        &PlateauSettings {
            window_count_min: settings.drop_window_count.max(1),
            step_fraction: settings.plateau_step_fraction,
        },
    );
    let drops = drops(&plateaus, settings.drop_fraction);
    let sustained_plateau_index = plateaus.len().checked_sub(1);
    let sustained = sustained_plateau_index.map(|index| plateaus[index]);
    let (sustained_rate, sustained_basis) = match sustained {
        Some(plateau) => (plateau.rate_bytes_per_s, SustainedBasis::LastPlateau),
        None => (mean_rate, SustainedBasis::WholeRun),
    };
    let steady_state =
        sustained.and_then(|plateau| steady_state(&windows, plateau.start_s, settings));
    let slowest_window = windows
        .iter()
        .min_by(|a, b| a.rate_bytes_per_s.total_cmp(&b.rate_bytes_per_s))
        .map(|window| SlowestWindow {
            start_s: window.start_s,
            position_bytes: window.position_bytes,
            rate_bytes_per_s: window.rate_bytes_per_s,
        });
    let (stall_latency_us, stalls) = stalls(all_windows, settings);
    SeriesAnalysis {
        settings: *settings,
        window_count: all_windows.len(),
        analysed_window_count: windows.len(),
        analysed_window_s: windows.first().map_or(0.0, |window| window.duration_s),
        too_short: too_short(&windows, all_windows, mean_rate, settings),
        peak_rate_bytes_per_s: peak_rate,
        peak_at_s,
        mean_rate_bytes_per_s: mean_rate,
        cliff: drops.first().map(|(drop, _)| *drop),
        later_drops: drops.iter().skip(1).map(|(drop, _)| *drop).collect(),
        rate_after_cliff_bytes_per_s: drops
            .first()
            .map(|(_, index)| plateaus[*index].rate_bytes_per_s),
        plateaus,
        sustained_plateau_index,
        steady_state,
        sustained_rate_bytes_per_s: sustained_rate,
        sustained_basis,
        slowest_window,
        stall_latency_us,
        stalls,
    }
}

/// Slope of the least-squares line through `(i, values[i])`, per window.
fn least_squares_slope(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if values.len() < 2 {
        return 0.0;
    }
    let x_mean = (n - 1.0) / 2.0;
    let y_mean = mean(values.iter().copied());
    let (mut numerator, mut denominator) = (0.0, 0.0);
    for (index, value) in values.iter().enumerate() {
        let dx = index as f64 - x_mean;
        numerator += dx * (value - y_mean);
        denominator += dx * dx;
    }
    numerator / denominator
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series of `window_s` windows from a list of (bytes, rate) segments: the drive writes
    /// `bytes` at `rate`, then the next segment; windows cut the timeline evenly.
    fn series(segments: &[(f64, f64)], window_s: f64) -> Vec<Window> {
        let mut windows = Vec::new();
        let (mut t, mut total) = (0.0f64, 0.0f64);
        let mut boundaries = Vec::new(); // (time at end of segment, bytes at end, rate)
        for (bytes, rate) in segments {
            t += bytes / rate;
            total += bytes;
            boundaries.push((t, total, *rate));
        }
        let bytes_at = |time: f64| {
            let mut previous = (0.0, 0.0);
            for (end_t, end_bytes, rate) in &boundaries {
                if time <= *end_t {
                    return previous.1 + (time - previous.0) * rate;
                }
                previous = (*end_t, *end_bytes);
            }
            previous.1
        };
        let mut start = 0.0;
        while start < t - 1e-12 {
            let end = (start + window_s).min(t);
            let before = bytes_at(start);
            let after = bytes_at(end);
            windows.push(Window {
                start_s: start,
                duration_s: end - start,
                bytes: (after - before) as u64,
                total_bytes: after as u64,
                position_bytes: after as u64,
                rate_bytes_per_s: (after - before) / (end - start),
                latency_max_us: 1000.0,
            });
            start = end;
        }
        windows
    }

    #[test]
    fn finds_the_cliff_inside_a_window_and_both_rates() {
        let gb = 1e9;
        // 30 GB of cache at 2.8 GB/s, then 170 GB at 1.6 GB/s; 0.5 s windows.
        let windows = series(&[(30.0 * gb, 2.8 * gb), (170.0 * gb, 1.6 * gb)], 0.5);
        let analysis = analyse(&windows, &AnalysisSettings::default());
        let cliff = analysis.cliff.expect("a cliff");
        assert!(
            (cliff.at_bytes as f64 / (30.0 * gb) - 1.0).abs() < 0.001,
            "{cliff:?}"
        );
        assert!((cliff.rate_before_bytes_per_s / (2.8 * gb) - 1.0).abs() < 0.001);
        assert!((cliff.rate_after_bytes_per_s / (1.6 * gb) - 1.0).abs() < 0.001);
        assert!((analysis.peak_rate_bytes_per_s / (2.8 * gb) - 1.0).abs() < 0.001);
        let steady = analysis.steady_state.expect("steady");
        assert!(steady.start_s >= cliff.at_s);
        assert_eq!(analysis.sustained_basis, SustainedBasis::LastPlateau);
        assert_eq!(analysis.sustained_plateau_index, Some(1));
        assert!((analysis.sustained_rate_bytes_per_s / (1.6 * gb) - 1.0).abs() < 0.001);
        assert_eq!(analysis.plateaus[0].end_bytes, cliff.at_bytes);
        assert_eq!(analysis.too_short, None);
        assert!(analysis.later_drops.is_empty());
        assert!(analysis.stalls.is_empty());
    }

    #[test]
    fn a_flat_series_has_no_cliff_and_is_steady_from_the_start() {
        let windows = series(&[(20e9, 2e9)], 0.5);
        let analysis = analyse(&windows, &AnalysisSettings::default());
        assert_eq!(analysis.cliff, None);
        assert_eq!(analysis.steady_state.unwrap().start_s, 0.0);
        assert!((analysis.sustained_rate_bytes_per_s / 2e9 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_single_stalled_window_is_a_stall_not_a_cliff() {
        let mut windows = series(&[(40e9, 2e9)], 0.5);
        windows[10].bytes = 0;
        windows[10].rate_bytes_per_s = 0.0;
        windows[11].latency_max_us = 400_000.0;
        let analysis = analyse(&windows, &AnalysisSettings::default());
        assert_eq!(analysis.cliff, None);
        assert_eq!(analysis.stalls.len(), 2);
        assert_eq!(analysis.slowest_window.unwrap().start_s, 5.0);
    }

    #[test]
    fn throttling_after_the_cliff_is_a_later_drop() {
        let gb = 1e9;
        let windows = series(
            &[
                (10.0 * gb, 3.0 * gb),
                (30.0 * gb, 1.5 * gb),
                (20.0 * gb, 0.75 * gb),
            ],
            0.5,
        );
        let analysis = analyse(&windows, &AnalysisSettings::default());
        assert!((analysis.cliff.unwrap().at_bytes as f64 / (10.0 * gb) - 1.0).abs() < 0.001);
        assert_eq!(analysis.later_drops.len(), 1);
        let throttle = analysis.later_drops[0];
        assert!(
            (throttle.at_bytes as f64 / (40.0 * gb) - 1.0).abs() < 0.001,
            "{throttle:?}"
        );
        assert!((analysis.rate_after_cliff_bytes_per_s.unwrap() / (1.5 * gb) - 1.0).abs() < 0.02);
    }

    #[test]
    fn a_ramp_is_not_steady() {
        // Rate climbing 1 % per window: the slope rule refuses it, the range rule alone would not.
        let mut total_bytes = 0;
        let windows: Vec<Window> = (0..40)
            .map(|index| {
                let rate = 1e9 * (1.0 + 0.01 * index as f64);
                total_bytes += (rate * 0.5) as u64;
                Window {
                    start_s: index as f64 * 0.5,
                    duration_s: 0.5,
                    bytes: (rate * 0.5) as u64,
                    total_bytes,
                    position_bytes: 0,
                    rate_bytes_per_s: rate,
                    latency_max_us: 1.0,
                }
            })
            .collect();
        let analysis = analyse(&windows, &AnalysisSettings::default());
        assert_eq!(analysis.steady_state, None);
        // A staircase: 40 % up in steps of at least 5 %, the sustained rate at its top.
        assert!(analysis.plateaus.len() >= 2, "{:#?}", analysis.plateaus);
        assert!(
            analysis.sustained_rate_bytes_per_s > 1.25e9,
            "{:#?}",
            analysis.plateaus
        );
    }

    #[test]
    fn the_rate_before_the_cliff_is_the_plateau_not_a_burst_at_the_start() {
        // 800 MB/s for 1.5 GiB then 300 MB/s, the first window a burst at 950 MB/s.
        let gib = (1u64 << 30) as f64;
        let mut windows = series(&[(1.5 * gib, 800e6), (2.5 * gib, 300e6)], 0.1);
        windows[0].bytes = 95_000_000;
        windows[0].rate_bytes_per_s = 950e6;
        let analysis = analyse(&windows, &AnalysisSettings::default());
        let cliff = analysis.cliff.unwrap();
        assert!(
            (cliff.at_bytes as f64 / (1.5 * gib) - 1.0).abs() < 0.01,
            "{cliff:?}"
        );
        assert!(
            (cliff.rate_before_bytes_per_s / 800e6 - 1.0).abs() < 0.01,
            "{cliff:?}"
        );
        assert!(
            (cliff.rate_after_bytes_per_s / 300e6 - 1.0).abs() < 0.01,
            "{cliff:?}"
        );
        assert_eq!(analysis.plateaus.len(), 2);
    }

    #[test]
    fn the_drops_come_from_the_plateaus() {
        let gb = 1e9;
        // DRAM, SLC, direct to TLC, folding: three drops, the first at the DRAM's end.
        let model = [
            (1.0 * gb, 6.0 * gb),
            (30.0 * gb, 2.8 * gb),
            (100.0 * gb, 1.6 * gb),
            (40.0 * gb, 0.8 * gb),
        ];
        let analysis = analyse(&series(&model, 0.1), &AnalysisSettings::default());
        assert_eq!(analysis.plateaus.len(), 4);
        assert_eq!(
            analysis.cliff.unwrap().at_bytes,
            analysis.plateaus[1].start_bytes
        );
        let later: Vec<u64> = analysis.later_drops.iter().map(|d| d.at_bytes).collect();
        assert_eq!(
            later,
            [
                analysis.plateaus[2].start_bytes,
                analysis.plateaus[3].start_bytes
            ]
        );
        assert_eq!(analysis.sustained_plateau_index, Some(3));
        assert_eq!(
            analysis.sustained_rate_bytes_per_s,
            analysis.plateaus[3].rate_bytes_per_s
        );
        assert_eq!(
            analysis.rate_after_cliff_bytes_per_s,
            Some(analysis.plateaus[1].rate_bytes_per_s)
        );
        // A step under the drop fraction is a plateau but not a drop.
        let analysis = analyse(
            &series(&[(20.0 * gb, 2.0 * gb), (20.0 * gb, 1.8 * gb)], 0.1),
            &AnalysisSettings::default(),
        );
        assert_eq!((analysis.plateaus.len(), analysis.cliff), (2, None));
    }

    #[test]
    fn windows_holding_too_little_are_merged() {
        // 100 windows of 1 MB; at least 4 MB a window: 25 windows of 4 MB.
        let windows = series(&[(100e6, 1e9)], 0.001);
        let settings = AnalysisSettings {
            window_bytes_min: 4_000_000,
            window_count_min: 20,
            ..AnalysisSettings::default()
        };
        let analysis = analyse(&windows, &settings);
        assert_eq!(analysis.window_count, 100);
        assert_eq!(analysis.analysed_window_count, 25);
        assert!((analysis.analysed_window_s - 0.004).abs() < 1e-9);
        assert_eq!(analysis.too_short, None);
    }

    #[test]
    fn a_short_run_says_how_long_to_run() {
        // 10 windows of 0.1 s at 1 GB/s; 50 windows needed: 5 s, 5 GB.
        let windows = series(&[(1e9, 1e9)], 0.1);
        let too_short = analyse(&windows, &AnalysisSettings::default())
            .too_short
            .unwrap();
        assert_eq!(
            (too_short.window_count, too_short.window_count_min),
            (10, 50)
        );
        assert!(
            (too_short.run_at_least_s - 5.0).abs() < 1e-6,
            "{too_short:?}"
        );
        assert!((too_short.run_at_least_bytes as f64 / 5e9 - 1.0).abs() < 1e-6);
        // Windows that must hold 200 MB: 50 of them, 10 GB at 1 GB/s.
        let settings = AnalysisSettings {
            window_bytes_min: 200_000_000,
            ..AnalysisSettings::default()
        };
        let too_short = analyse(&windows, &settings).too_short.unwrap();
        assert_eq!(too_short.window_count, 5);
        assert!(
            (too_short.run_at_least_s - 10.0).abs() < 1e-6,
            "{too_short:?}"
        );
    }

    #[test]
    fn empty_and_tiny_series_do_not_panic() {
        let settings = AnalysisSettings::default();
        let analysis = analyse(&[], &settings);
        assert_eq!(analysis.peak_rate_bytes_per_s, 0.0);
        assert_eq!(analysis.sustained_basis, SustainedBasis::WholeRun);
        let windows = series(&[(1e8, 1e9)], 0.5);
        let analysis = analyse(&windows, &settings);
        assert!((analysis.peak_rate_bytes_per_s / 1e9 - 1.0).abs() < 1e-9);
    }
}
