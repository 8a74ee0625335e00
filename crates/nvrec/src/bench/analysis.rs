//! What a bandwidth time series says about a drive: its peak, where its cache ran out and how
//! fast it was after, whether and where it reached a steady state, its slowest moment, and
//! its stalls. Pure functions over [`Window`]s; no I/O, no clock.
//!
//! The rules, in the order they run:
//! 1. Windows shorter than half the nominal length (the last one) are left out of detection.
//! 2. **Peak**: the highest mean of three consecutive windows (one lucky window is not a peak).
//! 3. **Sustained drops**: walking forward, the *level* is the median of the windows since the
//!    last drop; window `i` starts a drop when the median of windows `i+1 ..= i+k` is below
//!    `(1 - drop_fraction)` of the level. Medians make a single stalled window neither a drop
//!    nor a shift of the level. The first drop is the **cache cliff**; later ones are reported
//!    as drops (throttling, a second cache tier).
//! 4. **Cliff position**: the transition window mixes the two rates; assuming it wrote `x`
//!    bytes at the level before and the rest at the level after, `x/r1 + (b - x)/r2 = d`
//!    gives the byte position inside the window, so the estimate does not depend on where the
//!    window boundaries fall.
//! 5. **Steady state** (after the SNIA PTS rule): the first run of `steady_window_count`
//!    consecutive windows after the cliff whose range (max - min) is within
//!    `steady_range_fraction` of their mean and whose least-squares line changes by no more
//!    than `steady_slope_fraction` of the mean across the run.
//! 6. **Sustained rate**: the steady-state mean when there is one, else the mean after the
//!    cliff, else the mean of the whole run.
//! 7. **Stalls**: windows in which nothing completed, or whose slowest transfer took longer
//!    than `stall_latency_us` (default: ten times the median of the windows' slowest
//!    transfers, at least 50 ms).

use super::driver::Window;

/// The knobs of the rules above.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AnalysisSettings {
    pub drop_fraction: f64,
    /// Windows a drop must last (k in rule 3).
    pub drop_window_count: usize,
    pub steady_window_count: usize,
    pub steady_range_fraction: f64,
    pub steady_slope_fraction: f64,
    /// `None`: derived from the series (rule 7).
    pub stall_latency_us: Option<f64>,
}

impl Default for AnalysisSettings {
    /// Counted in windows, so the rules scale with `--window`: at the default 0.5 s a drop
    /// must last 2 s and a steady state 10 s.
    fn default() -> AnalysisSettings {
        AnalysisSettings {
            drop_fraction: 0.2,
            drop_window_count: 4,
            steady_window_count: 20,
            steady_range_fraction: 0.2,
            steady_slope_fraction: 0.1,
            stall_latency_us: None,
        }
    }
}

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

/// Which number the sustained rate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SustainedBasis {
    SteadyState,
    AfterCliff,
    WholeRun,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesAnalysis {
    pub settings: AnalysisSettings,
    pub window_count: usize,
    pub peak_rate_bytes_per_s: f64,
    pub peak_at_s: f64,
    pub mean_rate_bytes_per_s: f64,
    pub cliff: Option<Drop>,
    /// Sustained drops after the cliff.
    pub later_drops: Vec<Drop>,
    /// Mean rate from the cliff to the next drop or the end.
    pub rate_after_cliff_bytes_per_s: Option<f64>,
    pub steady_state: Option<SteadyState>,
    pub sustained_rate_bytes_per_s: f64,
    pub sustained_basis: SustainedBasis,
    pub slowest_window: Option<SlowestWindow>,
    pub stall_latency_us: f64,
    pub stalls: Vec<Stall>,
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
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

/// Bytes written before window `index` starts.
fn bytes_before(windows: &[Window], index: usize) -> u64 {
    windows[index]
        .total_bytes
        .saturating_sub(windows[index].bytes)
}

/// Analyses a write (or read) bandwidth series.
pub fn analyse(all_windows: &[Window], settings: &AnalysisSettings) -> SeriesAnalysis {
    let nominal_s = all_windows
        .iter()
        .map(|window| window.duration_s)
        .fold(0.0, f64::max);
    let windows: Vec<Window> = all_windows
        .iter()
        .copied()
        .filter(|window| window.duration_s >= 0.5 * nominal_s)
        .collect();
    let rates: Vec<f64> = windows
        .iter()
        .map(|window| window.rate_bytes_per_s)
        .collect();
    let total_bytes: u64 = all_windows.iter().map(|window| window.bytes).sum();
    let total_s: f64 = all_windows.iter().map(|window| window.duration_s).sum();
    let mean_rate = if total_s > 0.0 {
        total_bytes as f64 / total_s
    } else {
        0.0
    };

    // Rule 2: peak.
    let (mut peak_rate, mut peak_at_s) = (0.0, 0.0);
    for start in 0..rates.len() {
        let end = (start + 3).min(rates.len());
        let rate = mean(rates[start..end].iter().copied());
        if rate > peak_rate {
            (peak_rate, peak_at_s) = (rate, windows[start].start_s);
        }
    }

    // Rule 3 and 4: sustained drops.
    let k = settings.drop_window_count.max(1);
    let mut drops: Vec<(Drop, usize)> = Vec::new();
    let mut segment_start = 0;
    let mut index = 1;
    while index + k < rates.len() {
        let level = median(&mut rates[segment_start..index].to_vec());
        let after = median(&mut rates[index + 1..=index + k].to_vec());
        if level > 0.0 && after < (1.0 - settings.drop_fraction) * level {
            // The first windows of those k may still be mixed or at the level: the rate after
            // is measured on the k windows beyond them where the series is long enough.
            let after = if index + 2 * k < rates.len() {
                median(&mut rates[index + k + 1..=index + 2 * k].to_vec())
            } else {
                after
            };
            if after >= (1.0 - settings.drop_fraction) * level {
                // The rate came back: a stall longer than a window, not a sustained drop.
                index += 1;
                continue;
            }
            // The change lies somewhere in windows index ..= index + k, which start at the
            // level and end at the rate after: solve for where over the whole span.
            let span = &windows[index..=index + k];
            let span_bytes: f64 = span.iter().map(|window| window.bytes as f64).sum();
            let span_s: f64 = span.iter().map(|window| window.duration_s).sum();
            let inside = if after > 0.0 {
                ((span_s - span_bytes / after) / (1.0 / level - 1.0 / after)).clamp(0.0, span_bytes)
            } else {
                span_bytes
            };
            let at_bytes = bytes_before(&windows, index) + inside as u64;
            let transition = (index..=index + k)
                .find(|position| windows[*position].total_bytes >= at_bytes)
                .unwrap_or(index + k);
            drops.push((
                Drop {
                    at_bytes,
                    at_s: windows[index].start_s + inside / level,
                    rate_before_bytes_per_s: level,
                    rate_after_bytes_per_s: after,
                },
                transition,
            ));
            // The new level is measured over k windows before it may drop again.
            segment_start = transition + 1;
            index = segment_start + k;
        } else {
            index += 1;
        }
    }
    let cliff = drops.first().map(|(drop, _)| *drop);
    let after_cliff_start = drops.first().map(|(_, index)| index + 1);
    let after_cliff_end = drops.get(1).map(|(_, index)| *index).unwrap_or(rates.len());
    let rate_after_cliff = after_cliff_start
        .filter(|start| *start < after_cliff_end)
        .map(|start| mean(rates[start..after_cliff_end].iter().copied()));

    // Rule 5: steady state.
    let m = settings.steady_window_count.max(2);
    let search_start = after_cliff_start.unwrap_or(0);
    let mut steady_state = None;
    for start in search_start..rates.len().saturating_sub(m - 1) {
        let run = &rates[start..start + m];
        let run_mean = mean(run.iter().copied());
        if run_mean <= 0.0 {
            continue;
        }
        let (low, high) = run.iter().fold((f64::MAX, f64::MIN), |(low, high), rate| {
            (low.min(*rate), high.max(*rate))
        });
        let range_fraction = (high - low) / run_mean;
        let slope = least_squares_slope(run);
        let slope_fraction = (slope * (m - 1) as f64).abs() / run_mean;
        if range_fraction <= settings.steady_range_fraction
            && slope_fraction <= settings.steady_slope_fraction
        {
            let last = &windows[start + m - 1];
            steady_state = Some(SteadyState {
                start_s: windows[start].start_s,
                end_s: last.start_s + last.duration_s,
                start_bytes: bytes_before(&windows, start),
                rate_bytes_per_s: run_mean,
                range_fraction,
                slope_fraction,
            });
            break;
        }
    }

    // Rule 6.
    let (sustained_rate, sustained_basis) = match (steady_state, rate_after_cliff) {
        (Some(steady), _) => (steady.rate_bytes_per_s, SustainedBasis::SteadyState),
        (None, Some(rate)) => (rate, SustainedBasis::AfterCliff),
        (None, None) => (mean_rate, SustainedBasis::WholeRun),
    };

    let slowest_window = windows
        .iter()
        .min_by(|a, b| a.rate_bytes_per_s.total_cmp(&b.rate_bytes_per_s))
        .map(|window| SlowestWindow {
            start_s: window.start_s,
            position_bytes: window.position_bytes,
            rate_bytes_per_s: window.rate_bytes_per_s,
        });

    // Rule 7: stalls.
    let stall_latency_us = settings.stall_latency_us.unwrap_or_else(|| {
        let mut latencies: Vec<f64> = windows
            .iter()
            .filter(|window| window.bytes > 0)
            .map(|window| window.latency_max_us)
            .collect();
        (10.0 * median(&mut latencies)).max(50_000.0)
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

    SeriesAnalysis {
        settings: *settings,
        window_count: all_windows.len(),
        peak_rate_bytes_per_s: peak_rate,
        peak_at_s,
        mean_rate_bytes_per_s: mean_rate,
        cliff,
        later_drops: drops.iter().skip(1).map(|(drop, _)| *drop).collect(),
        rate_after_cliff_bytes_per_s: rate_after_cliff,
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
        assert_eq!(analysis.sustained_basis, SustainedBasis::SteadyState);
        assert!((analysis.sustained_rate_bytes_per_s / (1.6 * gb) - 1.0).abs() < 0.001);
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
        let windows: Vec<Window> = (0..40)
            .map(|index| {
                let rate = 1e9 * (1.0 + 0.01 * index as f64);
                Window {
                    start_s: index as f64 * 0.5,
                    duration_s: 0.5,
                    bytes: (rate * 0.5) as u64,
                    total_bytes: 0,
                    position_bytes: 0,
                    rate_bytes_per_s: rate,
                    latency_max_us: 1.0,
                }
            })
            .collect();
        let analysis = analyse(&windows, &AnalysisSettings::default());
        assert_eq!(analysis.steady_state, None);
        assert_eq!(analysis.sustained_basis, SustainedBasis::WholeRun);
    }

    #[test]
    fn empty_and_tiny_series_do_not_panic() {
        let settings = AnalysisSettings::default();
        let analysis = analyse(&[], &settings);
        assert_eq!(analysis.peak_rate_bytes_per_s, 0.0);
        let windows = series(&[(1e8, 1e9)], 0.5);
        let analysis = analyse(&windows, &settings);
        assert!((analysis.peak_rate_bytes_per_s / 1e9 - 1.0).abs() < 1e-9);
    }
}
