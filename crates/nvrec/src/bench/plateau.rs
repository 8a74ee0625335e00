//! Plateaus: the stretches of a run in which a drive wrote at one rate (a DRAM buffer, the SLC
//! cache, direct to TLC, folding, throttled). Pure functions over [`Window`]s.
//!
//! The method, in the order it runs:
//! 0. **Scale**: a device that regulates its rate in bursts longer than a window (a kernel
//!    throttle dispatching once per slice, a drive's thermal control loop) gives windows that
//!    swing between nothing and full speed around a steady rate, and windows near the burst
//!    period beat with it. Where neighbouring windows differ by more than
//!    [`WOBBLE_FRACTION_MAX`] of their rate on average, the windows are joined: where the
//!    device idles between bursts (windows below [`IDLE_FRACTION`] of the mean rate), from
//!    the start of one burst to the start of the next, in groups of as few bursts as hold
//!    steady, so that a plateau of a few bursts (a second of bursts 100 to 200 ms apart)
//!    keeps its windows; otherwise in pairs as far as [`SCALE_ROOM`] times
//!    `window_count_min` windows remain. The rest of the method runs on the joined windows.
//!    A drive whose windows hold steady keeps its windows.
//! 1. **Smoothing**: a running median of [`MEDIAN_WIDTH`] windows; a stall or a lucky window
//!    alone (up to two in a row) leaves no trace, a step stays where it is.
//! 2. **Noise**: the spread of the raw window rates from one window to the next relative to
//!    the smoothed rate (a drive's noise grows with its rate), as a standard deviation from
//!    the mean relative difference of neighbours, each counted up to
//!    [`NOISE_DIFFERENCE_MAX`]: a median would see none where most neighbours hold the same
//!    count of bursts or transfers and a few hold one more, and a stall is no noise.
//! 3. **Binary segmentation**: a stretch is split where splitting removes the most squared
//!    error of the smoothed series, provided both sides last `window_count_min` windows and
//!    their means differ by more than `step_fraction` of the higher and by more than
//!    [`NOISE_Z`] standard errors; each side is then split the same way.
//! 4. **Merging**: neighbours whose median raw rates differ by less than `step_fraction` become
//!    one (a window mixing two rates can make a short stretch look different on its mean).
//! 5. **Boundaries**: the change lies in the windows around a split, which start at the
//!    level before and end at the level after (medians of the raw rates); `x/r1 + (b - x)/r2
//!    = d` gives the byte where it happened, so it does not depend on where windows fall.
//!    On joined windows (step 0), a plateau that its boundaries leave shorter than
//!    `window_count_min - 1` windows (a joined window straddling a change, cut off between
//!    two segments) joins the neighbour closer in rate, and neighbours whose rates (bytes
//!    over time) differ by less than `step_fraction` become one. Windows that were not joined are
//!    short enough for a short plateau (a DRAM buffer) to be real.
//! 6. **Rates**: each plateau's rate is its bytes over its time, boundary to boundary, never
//!    one window; its spread is the 10th and 90th percentile of the windows (at the scale of
//!    step 0) wholly inside it.

use super::window::{merge_windows, Window};

/// Width of the running median, in windows.
pub const MEDIAN_WIDTH: usize = 5;
/// Standard errors by which two sides' means must differ for a split.
pub const NOISE_Z: f64 = 4.0;
/// Most a difference of neighbouring windows counts, relative to their level, in the noise.
pub const NOISE_DIFFERENCE_MAX: f64 = 0.5;
/// Mean relative difference of neighbouring windows' rates above which windows are joined
/// (step 0 of the method). A drive's noise of a few percent stays far below it; a window
/// that holds no burst next to one that holds a burst differs by 2.
pub const WOBBLE_FRACTION_MAX: f64 = 0.25;
/// A window below this fraction of the run's mean rate is idle: between two bursts.
pub const IDLE_FRACTION: f64 = 0.1;
/// Joining stops before fewer than this many times `window_count_min` windows would remain:
/// room for a few of the shortest plateaus.
pub const SCALE_ROOM: usize = 4;

/// One stretch of the run at one rate.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Plateau {
    pub start_bytes: u64,
    pub end_bytes: u64,
    pub start_s: f64,
    pub end_s: f64,
    /// Bytes over time from its start to its end.
    pub rate_bytes_per_s: f64,
    /// Spread of the rates of the windows wholly inside it, at the scale the run was cut at.
    pub rate_p10_bytes_per_s: f64,
    pub rate_p90_bytes_per_s: f64,
    /// Windows wholly inside it, at the scale the run was cut at.
    pub window_count: usize,
}

/// How the run is cut.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlateauSettings {
    /// Windows a plateau lasts at least.
    pub window_count_min: usize,
    /// Relative difference of rates below which two stretches are one plateau.
    pub step_fraction: f64,
}

/// Where the run ends: what the last plateau runs to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunEnd {
    pub bytes: u64,
    pub s: f64,
}

/// Cuts `windows` (of one length, in time order) into plateaus; the last runs to `end`.
pub fn plateaus(windows: &[Window], end: RunEnd, settings: &PlateauSettings) -> Vec<Plateau> {
    if windows.is_empty() {
        return Vec::new();
    }
    let joined = scaled(windows, settings);
    let was_joined = joined.len() != windows.len();
    let windows = &joined;
    let rates: Vec<f64> = windows.iter().map(|w| w.rate_bytes_per_s).collect();
    let segments = segment(&rates, settings);
    let mut boundaries = vec![Boundary {
        bytes: bytes_before(windows, 0),
        s: windows[0].start_s,
    }];
    for pair in segments.windows(2) {
        boundaries.push(locate(windows, &rates, pair[0], pair[1]));
    }
    boundaries.push(Boundary {
        bytes: end.bytes,
        s: end.s,
    });
    if was_joined {
        let durations: Vec<f64> = windows.iter().map(|w| w.duration_s).collect();
        let shortest_s = settings.window_count_min.saturating_sub(1) as f64 * median(&durations);
        dissolve_short(windows, &mut boundaries, shortest_s);
        join_equal_rates(windows, &mut boundaries, settings.step_fraction);
    }
    boundaries
        .windows(2)
        .map(|pair| plateau(windows, pair[0], pair[1]))
        .collect()
}

/// Joins neighbouring plateaus whose rates (bytes over time, boundary to boundary) differ by
/// less than `step_fraction` of the higher, closest first: on joined windows, a stretch of a
/// few bursts can differ from its neighbour in its windows' median and not in its rate.
fn join_equal_rates(windows: &[Window], boundaries: &mut Vec<Boundary>, step_fraction: f64) {
    loop {
        let rates: Vec<f64> = boundaries
            .windows(2)
            .map(|pair| plateau(windows, pair[0], pair[1]).rate_bytes_per_s)
            .collect();
        let closest = (1..rates.len())
            .map(|index| {
                let (a, b) = (rates[index - 1], rates[index]);
                (index, (a - b).abs() / a.max(b).max(f64::MIN_POSITIVE))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match closest {
            Some((index, difference)) if difference < step_fraction => {
                boundaries.remove(index);
            }
            _ => return,
        }
    }
}

/// Joins each plateau that its boundaries left shorter than `shortest_s` (a window that
/// straddles a change, cut off between two segments) to the neighbour closer in rate,
/// shortest first.
fn dissolve_short(windows: &[Window], boundaries: &mut Vec<Boundary>, shortest_s: f64) {
    let rate = |from: Boundary, to: Boundary| plateau(windows, from, to).rate_bytes_per_s;
    while boundaries.len() > 2 {
        let Some(index) = (0..boundaries.len() - 1)
            .filter(|&i| boundaries[i + 1].s - boundaries[i].s < shortest_s)
            .min_by(|&a, &b| {
                let length = |i: usize| boundaries[i + 1].s - boundaries[i].s;
                length(a).total_cmp(&length(b))
            })
        else {
            return;
        };
        let own = rate(boundaries[index], boundaries[index + 1]);
        let distance =
            |neighbour: Option<f64>| neighbour.map_or(f64::INFINITY, |r| (r - own).abs());
        let left = (index > 0).then(|| rate(boundaries[index - 1], boundaries[index]));
        let right = (index + 2 < boundaries.len())
            .then(|| rate(boundaries[index + 1], boundaries[index + 2]));
        // Dropping its start joins it to the left; dropping its end, to the right.
        if distance(left) <= distance(right) {
            boundaries.remove(index);
        } else {
            boundaries.remove(index + 1);
        }
    }
}

/// The windows as they are where they hold steady; else burst to burst where the device
/// idles between bursts, as few bursts a window as hold steady; else joined in pairs as far
/// as enough remain (step 0 of the method).
pub fn scaled(windows: &[Window], settings: &PlateauSettings) -> Vec<Window> {
    let least = SCALE_ROOM * settings.window_count_min.max(2);
    let mut scaled = windows.to_vec();
    if steady(&scaled) {
        return scaled;
    }
    if let Some(joined) = burst_cycles(windows, least) {
        return joined;
    }
    while scaled.len() / 2 >= least {
        scaled = scaled.chunks(2).map(merge_windows).collect();
    }
    scaled
}

fn steady(windows: &[Window]) -> bool {
    let rates: Vec<f64> = windows.iter().map(|w| w.rate_bytes_per_s).collect();
    wobble(&rates) <= WOBBLE_FRACTION_MAX
}

/// The windows joined from the start of one burst to the start of the next (a window that
/// ends an idle stretch: below [`IDLE_FRACTION`] of the run's mean rate), then in groups of
/// as few such cycles as hold steady; `None` where the device does not idle between bursts
/// or no grouping holds steady with `least` windows left. Each window then holds whole
/// bursts, so its rate is the device's over that time however long its bursts are, and a
/// stretch of a few bursts can be a plateau.
fn burst_cycles(windows: &[Window], least: usize) -> Option<Vec<Window>> {
    let bytes: u64 = windows.iter().map(|w| w.bytes).sum();
    let seconds: f64 = windows.iter().map(|w| w.duration_s).sum();
    let idle_below = IDLE_FRACTION * bytes as f64 / seconds;
    let idle = |w: &Window| w.rate_bytes_per_s < idle_below;
    let mut starts = vec![0];
    starts.extend((1..windows.len()).filter(|&i| idle(&windows[i - 1]) && !idle(&windows[i])));
    // The last burst's cycle ends with the run, not at a next burst: it joins the one before.
    if starts.len() > 1 {
        starts.pop();
    }
    starts.push(windows.len());
    let lengths: Vec<f64> = starts
        .windows(2)
        .map(|pair| (pair[1] - pair[0]) as f64)
        .collect();
    // A stretch without idle windows (bursts closer than a window) is cut at the usual
    // length of a cycle.
    let usual = (median(&lengths).round() as usize).max(1);
    let cycles: Vec<Window> = starts
        .windows(2)
        .filter(|pair| pair[1] > pair[0])
        .flat_map(|pair| {
            let cycle = &windows[pair[0]..pair[1]];
            let pieces = if cycle.len() > 2 * usual {
                usual
            } else {
                cycle.len()
            };
            cycle.chunks(pieces).map(merge_windows).collect::<Vec<_>>()
        })
        .collect();
    (1..)
        .map(|group| cycles.chunks(group).map(merge_windows).collect::<Vec<_>>())
        .take_while(|joined| joined.len() >= least)
        .find(|joined| steady(joined))
}

/// The mean relative difference of neighbouring rates, each over the pair's mean (so at most
/// 2); pairs of idle windows are left out, as they say nothing about a rate.
pub fn wobble(rates: &[f64]) -> f64 {
    let differences: Vec<f64> = rates
        .windows(2)
        .filter(|pair| pair[0] + pair[1] > 0.0)
        .map(|pair| 2.0 * (pair[0] - pair[1]).abs() / (pair[0] + pair[1]))
        .collect();
    if differences.is_empty() {
        return 0.0;
    }
    differences.iter().sum::<f64>() / differences.len() as f64
}

/// Half-open ranges of window indices, in order, covering `0..rates.len()`.
pub fn segment(rates: &[f64], settings: &PlateauSettings) -> Vec<(usize, usize)> {
    let smoothed = running_median(rates, MEDIAN_WIDTH);
    let noise = noise_fraction(rates, &smoothed);
    let prefix = Prefix::new(&smoothed);
    let mut done = Vec::new();
    let mut todo = vec![(0, rates.len())];
    while let Some(range) = todo.pop() {
        match best_split(&prefix, range, noise, settings) {
            Some(at) => {
                todo.push((at, range.1));
                todo.push((range.0, at));
            }
            None => done.push(range),
        }
    }
    done.sort_unstable();
    merge_close(rates, done, settings.step_fraction)
}

/// The running median of `width` (odd) values centred on each, cut short at the ends.
pub fn running_median(values: &[f64], width: usize) -> Vec<f64> {
    let half = width / 2;
    (0..values.len())
        .map(|index| {
            let from = index.saturating_sub(half);
            let to = (index + half + 1).min(values.len());
            median(&values[from..to])
        })
        .collect()
}

/// The standard deviation of the values about a level that changes rarely (`smoothed`), as a
/// fraction of that level: the mean absolute difference of neighbours over the level, scaled
/// for a normal distribution (E|x - y| = 2σ/√π). Relative, so that a fast stretch's wobble
/// does not hide a step between two slower ones. Each difference counts up to
/// [`NOISE_DIFFERENCE_MAX`]: a stall, which the smoothing removes, adds to the noise no more
/// than a window that holds one burst more than its neighbour.
fn noise_fraction(values: &[f64], smoothed: &[f64]) -> f64 {
    let differences: Vec<f64> = values
        .windows(2)
        .zip(smoothed)
        .filter(|(_, level)| **level > 0.0)
        .map(|(pair, level)| ((pair[1] - pair[0]).abs() / level).min(NOISE_DIFFERENCE_MAX))
        .collect();
    if differences.is_empty() {
        return 0.0;
    }
    let mean = differences.iter().sum::<f64>() / differences.len() as f64;
    mean * std::f64::consts::PI.sqrt() / 2.0
}

/// Prefix sums for the mean and squared error of any stretch in O(1).
struct Prefix {
    sum: Vec<f64>,
}

impl Prefix {
    fn new(values: &[f64]) -> Prefix {
        let mut sum = Vec::with_capacity(values.len() + 1);
        sum.push(0.0);
        for value in values {
            sum.push(sum.last().copied().unwrap_or(0.0) + value);
        }
        Prefix { sum }
    }

    fn mean(&self, from: usize, to: usize) -> f64 {
        (self.sum[to] - self.sum[from]) / (to - from) as f64
    }
}

/// Where to split `range`, if anywhere (step 3 of the method).
fn best_split(
    prefix: &Prefix,
    (from, to): (usize, usize),
    noise_fraction: f64,
    settings: &PlateauSettings,
) -> Option<usize> {
    let least = settings.window_count_min.max(2);
    if to - from < 2 * least {
        return None;
    }
    let gain = |at: usize| {
        let (left, right) = ((at - from) as f64, (to - at) as f64);
        let difference = prefix.mean(from, at) - prefix.mean(at, to);
        left * right / (left + right) * difference * difference
    };
    let at = (from + least..=to - least).max_by(|a, b| gain(*a).total_cmp(&gain(*b)))?;
    let (left, right) = (prefix.mean(from, at), prefix.mean(at, to));
    let difference = (left - right).abs();
    let standard_error = noise_fraction
        * (left * left / (at - from) as f64 + right * right / (to - at) as f64).sqrt();
    let step = difference > settings.step_fraction * left.abs().max(right.abs());
    (step && difference > NOISE_Z * standard_error).then_some(at)
}

/// Joins neighbours whose median raw rates differ by less than `step_fraction` of the higher,
/// closest first (step 4 of the method).
fn merge_close(
    rates: &[f64],
    mut segments: Vec<(usize, usize)>,
    step_fraction: f64,
) -> Vec<(usize, usize)> {
    loop {
        let closest = (1..segments.len())
            .map(|index| {
                let a = median(&rates[segments[index - 1].0..segments[index - 1].1]);
                let b = median(&rates[segments[index].0..segments[index].1]);
                (
                    index,
                    (a - b).abs() / a.abs().max(b.abs()).max(f64::MIN_POSITIVE),
                )
            })
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match closest {
            Some((index, difference)) if difference < step_fraction => {
                segments[index - 1].1 = segments[index].1;
                segments.remove(index);
            }
            _ => return segments,
        }
    }
}

/// A point of the run: bytes written and seconds since the start.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Boundary {
    bytes: u64,
    s: f64,
}

/// Windows on each side of a split that the change is searched in.
const SPAN_SIDE: usize = 2;

/// Where between two segments the rate changed (step 5 of the method).
fn locate(
    windows: &[Window],
    rates: &[f64],
    before: (usize, usize),
    after: (usize, usize),
) -> Boundary {
    let level_before = median(&rates[before.0..before.1]);
    let level_after = median(&rates[after.0..after.1]);
    let from = before.1.saturating_sub(SPAN_SIDE).max(before.0);
    let to = (after.0 + SPAN_SIDE).min(after.1);
    let span = &windows[from..to];
    let span_bytes: f64 = span.iter().map(|w| w.bytes as f64).sum();
    let span_s: f64 = span.iter().map(|w| w.duration_s).sum();
    let inside = if level_before > 0.0 && level_after > 0.0 && level_before != level_after {
        ((span_s - span_bytes / level_after) / (1.0 / level_before - 1.0 / level_after))
            .clamp(0.0, span_bytes)
    } else {
        bytes_before(windows, after.0).saturating_sub(bytes_before(windows, from)) as f64
    };
    let start_s = windows[from].start_s;
    let inside_s = if level_before > 0.0 {
        (inside / level_before).min(span_s)
    } else {
        windows[after.0].start_s - start_s
    };
    Boundary {
        bytes: bytes_before(windows, from) + inside.round() as u64,
        s: start_s + inside_s,
    }
}

/// The plateau between two boundaries (step 6 of the method).
fn plateau(windows: &[Window], start: Boundary, end: Boundary) -> Plateau {
    let bytes = end.bytes.saturating_sub(start.bytes);
    let seconds = end.s - start.s;
    let rate = if seconds > 0.0 {
        bytes as f64 / seconds
    } else {
        0.0
    };
    // A little slack so that a window ending exactly at a boundary counts as inside.
    let slack_s = 1e-9 * end.s.abs().max(1.0);
    let mut inside: Vec<f64> = windows
        .iter()
        .filter(|w| w.start_s + slack_s >= start.s && w.start_s + w.duration_s <= end.s + slack_s)
        .map(|w| w.rate_bytes_per_s)
        .collect();
    inside.sort_by(f64::total_cmp);
    Plateau {
        start_bytes: start.bytes,
        end_bytes: end.bytes,
        start_s: start.s,
        end_s: end.s,
        rate_bytes_per_s: rate,
        rate_p10_bytes_per_s: percentile(&inside, 0.1).unwrap_or(rate),
        rate_p90_bytes_per_s: percentile(&inside, 0.9).unwrap_or(rate),
        window_count: inside.len(),
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], fraction: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The median; 0 for nothing.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

/// Bytes written before window `index` starts.
pub fn bytes_before(windows: &[Window], index: usize) -> u64 {
    windows[index]
        .total_bytes
        .saturating_sub(windows[index].bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: PlateauSettings = PlateauSettings {
        window_count_min: 4,
        step_fraction: 0.05,
    };

    /// Windows of `window_s` over a drive that writes each `(bytes, rate)` in turn.
    pub(crate) fn series(segments: &[(f64, f64)], window_s: f64) -> Vec<Window> {
        let mut ends = Vec::new();
        let (mut t, mut total) = (0.0f64, 0.0f64);
        for (bytes, rate) in segments {
            t += bytes / rate;
            total += bytes;
            ends.push((t, total, *rate));
        }
        let bytes_at = |time: f64| {
            let mut previous = (0.0, 0.0);
            for (end_t, end_bytes, rate) in &ends {
                if time <= *end_t {
                    return previous.1 + (time - previous.0) * rate;
                }
                previous = (*end_t, *end_bytes);
            }
            previous.1
        };
        let mut windows = Vec::new();
        let mut start = 0.0;
        let mut index = 0;
        while start < t - 1e-12 {
            let end = ((index + 1) as f64 * window_s).min(t);
            let (before, after) = (bytes_at(start), bytes_at(end));
            windows.push(Window {
                start_s: start,
                duration_s: end - start,
                bytes: after.round() as u64 - before.round() as u64,
                total_bytes: after.round() as u64,
                position_bytes: after.round() as u64,
                rate_bytes_per_s: (after - before) / (end - start),
                latency_max_us: 1000.0,
            });
            start = end;
            index += 1;
        }
        windows
    }

    fn cut(windows: &[Window]) -> Vec<Plateau> {
        let last = windows.last().unwrap();
        let end = RunEnd {
            bytes: last.total_bytes,
            s: last.start_s + last.duration_s,
        };
        plateaus(windows, end, &SETTINGS)
    }

    /// Every plateau's bounds and rate within `tolerance` of the model's `(bytes, rate)`.
    fn assert_matches(found: &[Plateau], model: &[(f64, f64)], tolerance: f64) {
        assert_eq!(found.len(), model.len(), "{found:#?}");
        let (mut bytes, mut seconds) = (0.0, 0.0);
        for (plateau, (length, rate)) in found.iter().zip(model) {
            let close = |a: f64, b: f64| (a - b).abs() <= tolerance * b.abs().max(1.0);
            assert!(close(plateau.start_bytes as f64, bytes), "{plateau:?}");
            assert!(close(plateau.start_s, seconds), "{plateau:?}");
            bytes += length;
            seconds += length / rate;
            assert!(close(plateau.end_bytes as f64, bytes), "{plateau:?}");
            assert!(close(plateau.end_s, seconds), "{plateau:?}");
            assert!(close(plateau.rate_bytes_per_s, *rate), "{plateau:?}");
        }
    }

    #[test]
    fn one_to_four_plateaus_come_out_exactly() {
        let gb = 1e9;
        let models: [&[(f64, f64)]; 4] = [
            &[(40.0 * gb, 2.0 * gb)],
            &[(30.0 * gb, 2.8 * gb), (170.0 * gb, 1.6 * gb)],
            &[
                (3.0 * gb, 6.0 * gb),
                (30.0 * gb, 2.8 * gb),
                (100.0 * gb, 1.6 * gb),
            ],
            &[
                (3.0 * gb, 6.0 * gb),
                (30.0 * gb, 2.8 * gb),
                (100.0 * gb, 1.6 * gb),
                (40.0 * gb, 0.8 * gb),
            ],
        ];
        for model in models {
            let found = cut(&series(model, 0.1));
            assert_matches(&found, model, 1e-3);
            for plateau in &found {
                assert!(plateau.rate_p10_bytes_per_s <= plateau.rate_p90_bytes_per_s);
                assert!(plateau.window_count >= 4);
            }
        }
    }

    #[test]
    fn outlier_windows_and_a_short_burst_are_not_plateaus() {
        let gb = 1e9;
        let model = [(30.0 * gb, 2.0 * gb), (30.0 * gb, 1.0 * gb)];
        let mut windows = series(&model, 0.25);
        // A stall, two lucky windows in a row, and a short burst in the first window.
        for (index, factor) in [(20, 0.0), (80, 1.5), (81, 1.5), (0, 1.3)] {
            let window = &mut windows[index];
            window.rate_bytes_per_s *= factor;
            window.bytes = (window.bytes as f64 * factor) as u64;
        }
        let found = cut(&windows);
        assert_eq!(found.len(), 2, "{found:#?}");
        // The boundary is unmoved; the rates hold the outliers' bytes, a window's worth.
        assert!((found[0].end_bytes as f64 / (30.0 * gb) - 1.0).abs() < 1e-3);
        assert!((found[0].rate_bytes_per_s / (2.0 * gb) - 1.0).abs() < 0.03);
        assert!((found[1].rate_bytes_per_s / (1.0 * gb) - 1.0).abs() < 0.03);
        assert_eq!(found[0].rate_p90_bytes_per_s, 2.0 * gb);
    }

    #[test]
    fn a_dip_in_the_middle_is_its_own_plateau() {
        let gb = 1e9;
        let model = [
            (20.0 * gb, 1.6 * gb),
            (4.0 * gb, 0.8 * gb),
            (20.0 * gb, 1.6 * gb),
        ];
        assert_matches(&cut(&series(&model, 0.1)), &model, 1e-3);
    }

    #[test]
    fn noise_alone_makes_no_plateau() {
        // ±8 % in a fixed pseudo-random order around 1 GB/s.
        let mut state = 7u64;
        let windows: Vec<Window> = (0..300)
            .map(|index| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let rate = 1e9 * (0.92 + 0.16 * (state >> 11) as f64 / (1u64 << 53) as f64);
                Window {
                    start_s: index as f64 * 0.1,
                    duration_s: 0.1,
                    bytes: (rate * 0.1) as u64,
                    total_bytes: 0,
                    position_bytes: 0,
                    rate_bytes_per_s: rate,
                    latency_max_us: 1.0,
                }
            })
            .collect();
        assert_eq!(
            segment(
                &windows
                    .iter()
                    .map(|w| w.rate_bytes_per_s)
                    .collect::<Vec<_>>(),
                &SETTINGS
            ),
            vec![(0, 300)]
        );
    }

    /// Windows of `window_s` over a device that a throttle lets write each `(bytes, rate)` in
    /// turn, dispatching every `slice_s` what the slice allows, at `burst_rate`.
    fn bursty(
        segments: &[(f64, f64)],
        slice_s: f64,
        burst_rate: f64,
        window_s: f64,
    ) -> Vec<Window> {
        let seconds: f64 = segments.iter().map(|(length, rate)| length / rate).sum();
        let slices: Vec<f64> = (0..=(seconds / slice_s).ceil() as usize + 1)
            .map(|index| index as f64 * slice_s)
            .collect();
        bursty_slices(segments, &slices, burst_rate, window_s)
    }

    /// As [`bursty`], with slices that start at the times given (in order, from 0, past the
    /// end of the run).
    fn bursty_slices(
        segments: &[(f64, f64)],
        slice_starts_s: &[f64],
        burst_rate: f64,
        window_s: f64,
    ) -> Vec<Window> {
        let allowed = |time: f64| {
            let (mut t, mut bytes) = (0.0, 0.0);
            for (length, rate) in segments {
                let seconds = length / rate;
                if time <= t + seconds {
                    return bytes + (time - t) * rate;
                }
                (t, bytes) = (t + seconds, bytes + length);
            }
            bytes
        };
        let dispatched = |time: f64| {
            let index = slice_starts_s.partition_point(|start| *start <= time);
            let (slice_start, slice_end) = (slice_starts_s[index - 1], slice_starts_s[index]);
            let slice_bytes = allowed(slice_end) - allowed(slice_start);
            allowed(slice_start) + (burst_rate * (time - slice_start)).min(slice_bytes)
        };
        let total: f64 = segments.iter().map(|(length, _)| length).sum();
        let mut windows = Vec::new();
        let mut start = 0.0;
        while dispatched(start) < total - 1.0 {
            let end = start + window_s;
            let (before, after) = (dispatched(start).round(), dispatched(end).round());
            windows.push(Window {
                start_s: start,
                duration_s: window_s,
                bytes: (after - before) as u64,
                total_bytes: after as u64,
                position_bytes: after as u64,
                rate_bytes_per_s: (after - before) / window_s,
                latency_max_us: 1000.0,
            });
            start = end;
        }
        windows
    }

    #[test]
    fn a_short_first_plateau_of_a_device_writing_in_bursts_is_kept() {
        // A ten-second fill of a device that delivers in bursts, one every 100 to 200 ms
        // (a fixed pseudo-random order): about a second at 800 MB/s, then 400 MB/s. Windows
        // as a fill of ten seconds logs them (16 to 32 ms).
        let mb = 1e6;
        let model: &[(f64, f64)] = &[(800.0 * mb, 800.0 * mb), (3600.0 * mb, 400.0 * mb)];
        for seed in [1u64, 7, 42] {
            let mut state = seed;
            let mut starts = vec![0.0];
            while *starts.last().unwrap() < 12.0 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let slice_s = 0.1 + 0.1 * (state >> 11) as f64 / (1u64 << 53) as f64;
                starts.push(starts.last().unwrap() + slice_s);
            }
            for window_s in [0.016, 0.02, 0.032] {
                let windows = bursty_slices(model, &starts, 3000.0 * mb, window_s);
                let found = cut(&windows);
                assert_eq!(found.len(), 2, "seed {seed}, {window_s} s: {found:#?}");
                // Within a burst: the boundary and the rates to a slice's worth.
                assert_matches(&found, model, 0.15);
            }
        }
    }

    #[test]
    fn a_throttle_dispatching_in_bursts_gives_its_steps_not_its_bursts() {
        // A throttle that dispatches what each slice allows at once (3 GB/s), seen through
        // windows shorter than its slice: most windows hold nothing, some a burst, and
        // windows near the slice's length beat with it.
        let mb = 1e6;
        let models: [&[(f64, f64)]; 3] = [
            &[(2000.0 * mb, 300.0 * mb)],
            &[(1600.0 * mb, 800.0 * mb), (1100.0 * mb, 300.0 * mb)],
            &[
                (1600.0 * mb, 400.0 * mb),
                (800.0 * mb, 200.0 * mb),
                (400.0 * mb, 100.0 * mb),
            ],
        ];
        for model in models {
            for slice_s in [0.02, 0.05, 0.1] {
                for window_s in [0.016, 0.024, 0.032, 0.047] {
                    let windows = bursty(model, slice_s, 3000.0 * mb, window_s);
                    let rates: Vec<f64> = windows.iter().map(|w| w.rate_bytes_per_s).collect();
                    // Windows that hold nothing or a burst: neighbours differ by more than
                    // the rate.
                    if slice_s > 2.0 * window_s {
                        assert!(wobble(&rates) > 1.0, "{slice_s} {window_s}");
                    }
                    assert_matches(&cut(&windows), model, 0.08);
                }
            }
        }
    }

    #[test]
    fn steady_windows_are_not_joined() {
        let gb = 1e9;
        let windows = series(&[(30.0 * gb, 2.0 * gb), (30.0 * gb, 1.0 * gb)], 0.1);
        assert_eq!(scaled(&windows, &SETTINGS), windows);
        assert_eq!(wobble(&[0.0, 0.0, 1.0, 1.0]), 1.0);
        assert_eq!(wobble(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(
            running_median(&[1.0, 9.0, 1.0, 1.0, 5.0, 5.0, 5.0], 5),
            vec![1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0]
        );
        let sorted: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&sorted, 0.1), Some(1.0));
        assert_eq!(percentile(&sorted, 0.9), Some(9.0));
        assert_eq!(percentile(&[], 0.5), None);
        assert!(plateaus(&[], RunEnd { bytes: 0, s: 0.0 }, &SETTINGS).is_empty());
    }
}
