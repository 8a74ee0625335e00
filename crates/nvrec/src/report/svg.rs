//! SVG for line and bar charts: scales, "nice" ticks, downsampling, and the drawing.
//!
//! Everything drawn from data carries `class="plot"` so the page's check script can find it.

use super::{escape, AxisFormat, BarChart, Chart, LineChart};
use std::fmt::Write;

/// How values map onto an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Powers of two are evenly spaced (transfer sizes).
    Log2,
    Log10,
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 56.0;
/// More points than this are reduced to the minimum and maximum of each pixel column.
pub const POINT_COUNT_MAX: usize = 4000;
/// Series colours: saturated and far apart in hue, readable on screen and on colour paper.
const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f",
];
/// Line dash patterns by series, so that lines stay apart when printed in grey.
const DASHES: [&str; 4] = ["", "8 3", "2 3", "10 3 2 3"];

/// Maps values in `min..=max` onto `from..=to` pixels.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    scale: Scale,
    min: f64,
    max: f64,
    from: f64,
    to: f64,
}

impl Mapping {
    fn transform(scale: Scale, value: f64) -> f64 {
        match scale {
            Scale::Linear => value,
            Scale::Log2 => value.log2(),
            Scale::Log10 => value.log10(),
        }
    }

    fn map(&self, value: f64) -> f64 {
        let (low, high) = (
            Self::transform(self.scale, self.min),
            Self::transform(self.scale, self.max),
        );
        let span = if high > low { high - low } else { 1.0 };
        self.from + (Self::transform(self.scale, value) - low) / span * (self.to - self.from)
    }
}

/// Whether a value can be drawn on a scale.
fn drawable(scale: Scale, value: f64) -> bool {
    value.is_finite() && (scale == Scale::Linear || value > 0.0)
}

/// About `target` tick values covering `min..=max`: 1-2-5 steps on linear scales, powers of
/// the base on log scales (every second or fourth one when there are many).
pub fn ticks(scale: Scale, min: f64, max: f64, target: usize) -> Vec<f64> {
    if !(min.is_finite() && max.is_finite()) || max < min {
        return Vec::new();
    }
    match scale {
        Scale::Linear => {
            let span = (max - min).max(f64::MIN_POSITIVE);
            let rough = span / target.max(1) as f64;
            let magnitude = 10f64.powf(rough.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|factor| factor * magnitude)
                .find(|step| *step >= rough)
                .unwrap_or(10.0 * magnitude);
            let first = (min / step).ceil() as i64;
            let last = (max / step).floor() as i64;
            // Rounded to the step's precision: 0.6, not 0.6000000000000001.
            (first..=last)
                .map(|index| {
                    let units = (index as f64 * step / magnitude * 1e6).round() / 1e6;
                    if magnitude < 1.0 {
                        units / (1.0 / magnitude).round()
                    } else {
                        units * magnitude
                    }
                })
                .collect()
        }
        Scale::Log2 | Scale::Log10 => {
            let base: f64 = if scale == Scale::Log2 { 2.0 } else { 10.0 };
            if min <= 0.0 {
                return Vec::new();
            }
            let first = (min.log(base) - 1e-9).ceil() as i32;
            let last = (max.log(base) + 1e-9).floor() as i32;
            let count = (last - first + 1).max(0) as usize;
            let stride = count.div_ceil(target.max(1) * 2).max(1);
            (first..=last)
                .filter(|power| ((power - first) as usize).is_multiple_of(stride))
                .map(|power| base.powi(power))
                .collect()
        }
    }
}

/// A tick label in the axis's format.
pub fn format_tick(format: AxisFormat, value: f64) -> String {
    match format {
        AxisFormat::Bytes => {
            let units = ["", "K", "M", "G", "T", "P"];
            let mut scaled = value;
            let mut unit = 0;
            while scaled.abs() >= 1024.0 && unit < units.len() - 1 {
                scaled /= 1024.0;
                unit += 1;
            }
            format!("{}{}", trim_number(scaled), units[unit])
        }
        AxisFormat::RateMbPerS => trim_number(value / 1e6),
        AxisFormat::Seconds => format!("{} s", trim_number(value)),
        AxisFormat::Plain => trim_number(value),
    }
}

fn trim_number(value: f64) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    let magnitude = value.abs();
    let text = if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Reduces a long series to the first, minimum, maximum and last point of each of `columns`
/// equal x ranges, keeping its shape on screen at a fraction of the size.
pub fn downsample(points: &[(f64, f64)], columns: usize) -> Vec<(f64, f64)> {
    if points.len() <= POINT_COUNT_MAX || columns == 0 {
        return points.to_vec();
    }
    let (x_min, x_max) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(low, high), (x, _)| {
            (low.min(*x), high.max(*x))
        });
    let span = (x_max - x_min).max(f64::MIN_POSITIVE);
    let mut out = Vec::with_capacity(columns * 4);
    let mut column_points: Vec<(f64, f64)> = Vec::new();
    let mut current = 0usize;
    let flush = |column_points: &mut Vec<(f64, f64)>, out: &mut Vec<(f64, f64)>| {
        if column_points.is_empty() {
            return;
        }
        let first = column_points[0];
        let last = *column_points.last().expect("not empty");
        let low = *column_points
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("not empty");
        let high = *column_points
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("not empty");
        let mut keep = vec![first, low, high, last];
        keep.sort_by(|a, b| a.0.total_cmp(&b.0));
        keep.dedup();
        out.extend(keep);
        column_points.clear();
    };
    for point in points {
        let column =
            (((point.0 - x_min) / span) * columns as f64).min(columns as f64 - 1.0) as usize;
        if column != current {
            flush(&mut column_points, &mut out);
            current = column;
        }
        column_points.push(*point);
    }
    flush(&mut column_points, &mut out);
    out
}

/// One chart as an `<svg>` element; `index` names it in `data-chart`.
pub fn render_chart(chart: &Chart, index: usize) -> String {
    match chart {
        Chart::Line(chart) => render_line(chart, index),
        Chart::Bars(chart) => render_bars(chart, index),
    }
}

fn open_svg(out: &mut String, title: &str, description: &str, index: usize) {
    let _ = write!(
        out,
        "<svg class=\"chart\" data-chart=\"{index}\" role=\"img\" aria-label=\"{}\" \
         xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" \
         height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"600\">{}</text>",
        escape(description),
        WIDTH / 2.0,
        escape(title)
    );
}

/// The ` stroke-dasharray="..."` attribute of a series, empty for the first.
fn dash_attribute(series_index: usize) -> String {
    match DASHES[series_index % DASHES.len()] {
        "" => String::new(),
        dashes => format!(" stroke-dasharray=\"{dashes}\""),
    }
}

/// How the legend shows a series: a line sample (with its dashes) or a filled square.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Swatch {
    Line,
    Square,
}

fn legend(out: &mut String, names: &[String], swatch: Swatch) {
    let mut x = LEFT;
    for (index, name) in names.iter().enumerate() {
        let color = PALETTE[index % PALETTE.len()];
        match swatch {
            Swatch::Square => {
                let _ = write!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"32\" width=\"12\" height=\"12\" fill=\"{color}\"/>"
                );
            }
            Swatch::Line => {
                let _ = write!(
                    out,
                    "<line x1=\"{x:.1}\" x2=\"{:.1}\" y1=\"38\" y2=\"38\" stroke=\"{color}\" \
                     stroke-width=\"2.5\"{}/>",
                    x + 22.0,
                    dash_attribute(index)
                );
            }
        }
        let swatch_width = if swatch == Swatch::Line { 26.0 } else { 16.0 };
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"42\">{}</text>",
            x + swatch_width,
            escape(name)
        );
        x += swatch_width + 12.0 + 7.0 * name.chars().count() as f64;
    }
}

/// What a screen reader says for a chart: its title, kind, axes and series.
fn description(title: &str, kind: &str, what: &str, names: &[String]) -> String {
    let mut text = format!("{title}. {kind} of {what}");
    if !names.is_empty() {
        text.push_str(": ");
        text.push_str(&names.join(", "));
    }
    text
}

fn y_axis(out: &mut String, mapping: &Mapping, axis: &super::Axis) {
    for tick in ticks(axis.scale, mapping.min, mapping.max, 6) {
        let y = mapping.map(tick);
        let _ = write!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            escape(&format_tick(axis.format, tick))
        );
    }
    let _ = write!(
        out,
        "<text transform=\"translate(18 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        (TOP + HEIGHT - BOTTOM) / 2.0,
        escape(&axis.label)
    );
}

/// Tones of the shaded levels, alternating.
const LEVEL_TONES: [&str; 2] = ["#1f77b4", "#ff7f0e"];

/// Each level shaded over its x range, its y drawn across it and labelled above.
fn levels(out: &mut String, chart: &LineChart, x_map: &Mapping, y_map: &Mapping) {
    let (x_min, x_max) = (x_map.min, x_map.max);
    for (index, level) in chart.levels.iter().enumerate() {
        let drawn = [level.from_x, level.to_x]
            .iter()
            .all(|x| drawable(chart.x.scale, *x))
            && drawable(chart.y.scale, level.y);
        if !drawn {
            continue;
        }
        let from = x_map.map(level.from_x.max(x_min));
        let to = x_map.map(level.to_x.min(x_max));
        if to <= from {
            continue;
        }
        let tone = LEVEL_TONES[index % LEVEL_TONES.len()];
        let y = y_map.map(level.y);
        let _ = write!(
            out,
            "<g class=\"level\"><rect x=\"{from:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" \
             fill=\"{tone}\" fill-opacity=\"0.07\"/><line x1=\"{from:.1}\" x2=\"{to:.1}\" \
             y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{tone}\" stroke-width=\"2\"/><text x=\"{:.1}\" \
             y=\"{:.1}\" fill=\"#333\">{}</text></g>",
            to - from,
            HEIGHT - BOTTOM - TOP,
            from + 3.0,
            (y - 6.0).max(TOP + 12.0),
            escape(&level.label)
        );
    }
}

fn render_line(chart: &LineChart, index: usize) -> String {
    let mut out = String::new();
    let names: Vec<String> = chart
        .series
        .iter()
        .map(|series| series.name.clone())
        .collect();
    let what = format!("{} against {}", chart.y.label, chart.x.label);
    open_svg(
        &mut out,
        &chart.title,
        &description(&chart.title, "Line chart", &what, &names),
        index,
    );
    let points = drawable_points(chart);
    let Some((x_map, y_map)) = line_mappings(chart, &points) else {
        no_data(&mut out);
        return out;
    };
    levels(&mut out, chart, &x_map, &y_map);
    bands(&mut out, chart, &x_map);
    y_axis(&mut out, &y_map, &chart.y);
    x_axis(&mut out, &x_map, &chart.x);
    for (series_index, series_points) in points.iter().enumerate() {
        series_line(&mut out, series_index, series_points, &x_map, &y_map);
    }
    references(&mut out, chart, &y_map);
    markers(&mut out, chart, &x_map);
    legend(&mut out, &names, Swatch::Line);
    out.push_str("</svg>");
    out
}

/// Closes a chart that has nothing to draw with a note that says so.
fn no_data(out: &mut String) {
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">no data</text></svg>",
        WIDTH / 2.0,
        HEIGHT / 2.0
    );
}

/// Each series' points that its axes' scales can draw.
fn drawable_points(chart: &LineChart) -> Vec<Vec<(f64, f64)>> {
    let (x_scale, y_scale) = (chart.x.scale, chart.y.scale);
    chart
        .series
        .iter()
        .map(|series| {
            series
                .points
                .iter()
                .copied()
                .filter(|(x, y)| drawable(x_scale, *x) && drawable(y_scale, *y))
                .collect()
        })
        .collect()
}

/// The axes' mappings over the points and the references, with room above the highest and
/// around a lone x value; `None` when there is no point.
fn line_mappings(chart: &LineChart, points: &[Vec<(f64, f64)>]) -> Option<(Mapping, Mapping)> {
    let (x_scale, y_scale) = (chart.x.scale, chart.y.scale);
    let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points.iter().flatten() {
        (x_min, x_max, y_min, y_max) = (x_min.min(*x), x_max.max(*x), y_min.min(*y), y_max.max(*y));
    }
    for reference in &chart.references {
        if drawable(y_scale, reference.y) {
            y_max = y_max.max(reference.y);
        }
    }
    if x_min > x_max {
        return None;
    }
    if y_scale == Scale::Linear {
        y_min = y_min.min(0.0);
        y_max = if y_max > y_min {
            y_max * 1.08
        } else {
            y_min + 1.0
        };
    } else if y_max <= y_min {
        (y_min, y_max) = (y_min / 2.0, y_max * 2.0);
    }
    if x_max <= x_min {
        // One x value: widen the axis around it so that it sits in the middle.
        (x_min, x_max) = if x_scale == Scale::Linear {
            let half_span = if x_min == 0.0 {
                1.0
            } else {
                x_min.abs() / 10.0
            };
            (x_min - half_span, x_max + half_span)
        } else {
            (x_min / 2.0, x_max * 2.0)
        };
    }
    let x_map = Mapping {
        scale: x_scale,
        min: x_min,
        max: x_max,
        from: LEFT,
        to: WIDTH - RIGHT,
    };
    let y_map = Mapping {
        scale: y_scale,
        min: y_min,
        max: y_max,
        from: HEIGHT - BOTTOM,
        to: TOP,
    };
    Some((x_map, y_map))
}

/// Each band shaded over its x range and labelled at its top.
fn bands(out: &mut String, chart: &LineChart, x_map: &Mapping) {
    let (x_min, x_max) = (x_map.min, x_map.max);
    for band in &chart.bands {
        if !(drawable(x_map.scale, band.from_x) && drawable(x_map.scale, band.to_x)) {
            continue;
        }
        let (from, to) = (
            x_map.map(band.from_x.max(x_min)),
            x_map.map(band.to_x.min(x_max)),
        );
        if to > from {
            let _ = write!(
                out,
                "<rect x=\"{from:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#2ca02c\" \
                 fill-opacity=\"0.08\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#2a7a2a\">{}</text>",
                to - from,
                HEIGHT - BOTTOM - TOP,
                from + 4.0,
                TOP + 14.0,
                escape(&band.label)
            );
        }
    }
}

/// The x grid lines with their ticks, the x label and the plot's frame.
fn x_axis(out: &mut String, x_map: &Mapping, axis: &super::Axis) {
    for tick in ticks(x_map.scale, x_map.min, x_map.max, 8) {
        let x = x_map.map(tick);
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{:.1}\" stroke=\"#f0f0f0\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            HEIGHT - BOTTOM,
            HEIGHT - BOTTOM + 18.0,
            escape(&format_tick(axis.format, tick))
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#999\"/>",
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 12.0,
        escape(&axis.label),
        WIDTH - RIGHT - LEFT,
        HEIGHT - BOTTOM - TOP
    );
}

/// One series as a path, downsampled to a point a pixel column; a lone point as a circle,
/// and the points of a short series marked.
fn series_line(
    out: &mut String,
    series_index: usize,
    series_points: &[(f64, f64)],
    x_map: &Mapping,
    y_map: &Mapping,
) {
    let columns = (WIDTH - LEFT - RIGHT) as usize;
    let color = PALETTE[series_index % PALETTE.len()];
    let reduced = downsample(series_points, columns);
    if reduced.len() == 1 {
        let (x, y) = reduced[0];
        let _ = write!(
            out,
            "<circle class=\"plot\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>",
            x_map.map(x),
            y_map.map(y)
        );
        return;
    }
    if reduced.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<path class=\"plot\" fill=\"none\" stroke-width=\"1.6\" stroke=\"{color}\"{} d=\"",
        dash_attribute(series_index)
    );
    for (point_index, (x, y)) in reduced.iter().enumerate() {
        let _ = write!(
            out,
            "{}{:.1} {:.1}",
            if point_index == 0 { "M" } else { " L" },
            x_map.map(*x),
            y_map.map(*y)
        );
    }
    out.push_str("\"/>");
    if reduced.len() <= 40 {
        for (x, y) in &reduced {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{color}\"/>",
                x_map.map(*x),
                y_map.map(*y)
            );
        }
    }
}

/// Each reference drawn as a dashed line across the plot, labelled at its right end.
fn references(out: &mut String, chart: &LineChart, y_map: &Mapping) {
    for reference in &chart.references {
        if !drawable(y_map.scale, reference.y) {
            continue;
        }
        let y = y_map.map(reference.y);
        let _ = write!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#444\" \
             stroke-dasharray=\"6 4\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#333\">{}</text>",
            WIDTH - RIGHT,
            WIDTH - RIGHT - 4.0,
            y - 5.0,
            escape(&reference.label)
        );
    }
}

/// Each marker within the x range drawn as a dashed upright line, labelled near the top.
fn markers(out: &mut String, chart: &LineChart, x_map: &Mapping) {
    for marker in &chart.markers {
        if !drawable(x_map.scale, marker.x) || marker.x < x_map.min || marker.x > x_map.max {
            continue;
        }
        let x = x_map.map(marker.x);
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{:.1}\" stroke=\"#d62728\" \
             stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#b11\">{}</text>",
            HEIGHT - BOTTOM,
            x + 4.0,
            TOP + 28.0,
            escape(&marker.label)
        );
    }
}

fn render_bars(chart: &BarChart, index: usize) -> String {
    let mut out = String::new();
    let what = format!("{} for {}", chart.y.label, chart.categories.join(", "));
    open_svg(
        &mut out,
        &chart.title,
        &description(&chart.title, "Bar chart", &what, &chart.series_names),
        index,
    );
    let y_max = chart
        .values
        .iter()
        .flatten()
        .copied()
        .filter(|value| value.is_finite())
        .fold(0.0, f64::max);
    if chart.categories.is_empty() || y_max <= 0.0 {
        no_data(&mut out);
        return out;
    }
    let y_map = Mapping {
        scale: Scale::Linear,
        min: 0.0,
        max: y_max * 1.12,
        from: HEIGHT - BOTTOM,
        to: TOP,
    };
    y_axis(&mut out, &y_map, &chart.y);
    let plot_width = WIDTH - LEFT - RIGHT;
    let group_width = plot_width / chart.categories.len() as f64;
    let series_count = chart.values.len().max(1);
    let bar_width = group_width * 0.8 / series_count as f64;
    for (category_index, category) in chart.categories.iter().enumerate() {
        let group_x = LEFT + group_width * category_index as f64;
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            group_x + group_width / 2.0,
            HEIGHT - BOTTOM + 18.0,
            escape(category)
        );
        for (series_index, values) in chart.values.iter().enumerate() {
            let Some(value) = values
                .get(category_index)
                .copied()
                .filter(|v| v.is_finite())
            else {
                continue;
            };
            let x = group_x + group_width * 0.1 + bar_width * series_index as f64;
            let top = y_map.map(value.max(0.0));
            let color = PALETTE[series_index % PALETTE.len()];
            let _ = write!(
                out,
                "<rect class=\"plot\" x=\"{x:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
                 fill=\"{color}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\">{}</text>",
                (bar_width - 2.0).max(1.0),
                (HEIGHT - BOTTOM - top).max(0.5),
                x + bar_width / 2.0,
                top - 3.0,
                escape(&format_tick(chart.y.format, value))
            );
        }
    }
    let _ = write!(
        out,
        "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>",
        WIDTH - RIGHT,
        HEIGHT - BOTTOM,
        HEIGHT - BOTTOM
    );
    legend(&mut out, &chart.series_names, Swatch::Square);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Axis, Series};
    use super::*;

    #[test]
    fn scales_map_values_onto_pixels() {
        // (scale, min, max, value, where it lands as a fraction of 0..=1000 pixels)
        let cases = [
            (Scale::Linear, 0.0, 10.0, 0.0, 0.0),
            (Scale::Linear, 0.0, 10.0, 2.5, 0.25),
            (Scale::Linear, -5.0, 5.0, 0.0, 0.5),
            (Scale::Linear, 0.0, 10.0, 10.0, 1.0),
            // 128 KiB to 4 GiB spans 15 doublings; 1 MiB is 3 of them.
            (Scale::Log2, 131072.0, 4294967296.0, 1048576.0, 3.0 / 15.0),
            (Scale::Log2, 131072.0, 4294967296.0, 4294967296.0, 1.0),
            (Scale::Log10, 1.0, 1000.0, 10.0, 1.0 / 3.0),
            (Scale::Log10, 1.0, 1000.0, 100.0, 2.0 / 3.0),
            // A degenerate range does not divide by zero.
            (Scale::Linear, 3.0, 3.0, 3.0, 0.0),
        ];
        for (scale, min, max, value, fraction) in cases {
            let mapping = Mapping {
                scale,
                min,
                max,
                from: 0.0,
                to: 1000.0,
            };
            let pixel = mapping.map(value);
            assert!(
                (pixel - fraction * 1000.0).abs() < 1e-6,
                "{scale:?} {min}..{max}: {value} -> {pixel}"
            );
        }
        // Pixels may run downwards (y axes): the minimum lands at `from`.
        let down = Mapping {
            scale: Scale::Linear,
            min: 0.0,
            max: 100.0,
            from: 400.0,
            to: 50.0,
        };
        assert_eq!((down.map(0.0), down.map(100.0)), (400.0, 50.0));
        // Only positive finite values go on log scales.
        for (scale, value, ok) in [
            (Scale::Linear, -1.0, true),
            (Scale::Linear, f64::NAN, false),
            (Scale::Linear, f64::INFINITY, false),
            (Scale::Log2, 0.0, false),
            (Scale::Log10, -1.0, false),
            (Scale::Log10, 1e-3, true),
        ] {
            assert_eq!(drawable(scale, value), ok, "{scale:?} {value}");
        }
    }

    #[test]
    fn charts_describe_themselves_and_tell_series_apart() {
        let mut chart = LineChart::new(
            "Peak",
            Axis::new("transfer size", Scale::Log2, AxisFormat::Bytes),
            Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS),
        );
        for name in ["write", "read"] {
            chart.series.push(Series {
                name: name.into(),
                points: vec![(131072.0, 1e9), (1048576.0, 2e9)],
            });
        }
        let svg = render_chart(&Chart::Line(chart), 7);
        assert!(svg.starts_with("<svg class=\"chart\" data-chart=\"7\" role=\"img\""));
        assert!(
            svg.contains(
                "aria-label=\"Peak. Line chart of MB/s against transfer size: write, read\""
            ),
            "{svg}"
        );
        // The second series is dashed, in the plot and in the legend.
        assert_eq!(svg.matches("stroke-dasharray=\"8 3\"").count(), 2, "{svg}");
        assert!(svg.contains(">128K<") && svg.contains(">1M<"), "{svg}");
    }

    #[test]
    fn linear_ticks_step_by_one_two_or_five() {
        assert_eq!(
            ticks(Scale::Linear, 0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(
            ticks(Scale::Linear, 0.0, 3000.0, 6),
            vec![0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0]
        );
        assert_eq!(ticks(Scale::Linear, 0.0, 0.7, 6), vec![0.0, 0.2, 0.4, 0.6]);
        assert!(ticks(Scale::Linear, f64::NAN, 1.0, 5).is_empty());
    }

    #[test]
    fn log_ticks_are_powers_and_thin_out() {
        let sizes = ticks(Scale::Log2, 131072.0, 4294967296.0, 8);
        assert_eq!(sizes.first(), Some(&131072.0));
        assert!(sizes.len() <= 16 && sizes.len() >= 8, "{sizes:?}");
        assert!(sizes.iter().all(|value| value.log2().fract() == 0.0));
        assert_eq!(
            ticks(Scale::Log10, 1.0, 1000.0, 5),
            vec![1.0, 10.0, 100.0, 1000.0]
        );
        assert!(ticks(Scale::Log2, 0.0, 10.0, 5).is_empty());
    }

    #[test]
    fn tick_labels_read_like_sizes_and_rates() {
        assert_eq!(format_tick(AxisFormat::Bytes, 131072.0), "128K");
        assert_eq!(format_tick(AxisFormat::Bytes, 4294967296.0), "4G");
        assert_eq!(format_tick(AxisFormat::Bytes, 1536.0), "1.5K");
        assert_eq!(format_tick(AxisFormat::RateMbPerS, 2.8e9), "2800");
        assert_eq!(format_tick(AxisFormat::Seconds, 0.5), "0.5 s");
        assert_eq!(format_tick(AxisFormat::Plain, 0.0), "0");
    }

    #[test]
    fn long_series_shrink_but_keep_their_extremes() {
        let points: Vec<(f64, f64)> = (0..100_000)
            .map(|index| {
                (
                    index as f64,
                    if index == 54_321 {
                        1e6
                    } else {
                        (index % 7) as f64
                    },
                )
            })
            .collect();
        let reduced = downsample(&points, 800);
        assert!(reduced.len() <= 800 * 4, "{}", reduced.len());
        assert!(reduced.contains(&(54_321.0, 1e6)));
        assert_eq!(reduced.first(), points.first());
        assert_eq!(reduced.last(), points.last());
        assert!(reduced.windows(2).all(|pair| pair[0].0 <= pair[1].0));
        // An hour of 0.5 s windows is over the limit and comes down to a few per column.
        let hour: Vec<(f64, f64)> = (0..7200)
            .map(|index| (index as f64 * 0.5, 1.6e9 + (index % 13) as f64 * 1e7))
            .collect();
        let reduced = downsample(&hour, 850);
        assert!(reduced.len() <= 850 * 4 && reduced.len() < hour.len() / 2);
        let (low, high) = reduced.iter().fold((f64::MAX, f64::MIN), |(low, high), p| {
            (low.min(p.1), high.max(p.1))
        });
        assert_eq!((low, high), (1.6e9, 1.6e9 + 12.0 * 1e7));
        // At or below the limit a series is drawn as it is.
        let limit: Vec<(f64, f64)> = (0..POINT_COUNT_MAX).map(|i| (i as f64, 0.0)).collect();
        assert_eq!(downsample(&limit, 10).len(), POINT_COUNT_MAX);
        let short = vec![(0.0, 1.0), (1.0, 2.0)];
        assert_eq!(downsample(&short, 800), short);
    }

    #[test]
    fn levels_are_shaded_in_turn_and_labelled() {
        let mut chart = LineChart::new(
            "fill",
            super::super::Axis::new("s", Scale::Linear, AxisFormat::Seconds),
            super::super::Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS),
        );
        chart.series.push(super::super::Series {
            name: "write".to_string(),
            points: vec![(0.0, 2.8e9), (1.0, 2.8e9), (2.0, 1.6e9), (3.0, 1.6e9)],
        });
        for (index, (from_x, to_x, y)) in [(0.0, 1.5, 2.8e9), (1.5, 3.0, 1.6e9), (4.0, 5.0, 1e9)]
            .into_iter()
            .enumerate()
        {
            chart.levels.push(super::super::Level {
                from_x,
                to_x,
                y,
                label: format!("{}: <{:.0}>", index + 1, y / 1e6),
            });
        }
        let svg = render_chart(&Chart::Line(chart), 0);
        // The third lies beyond the data and is left out.
        assert_eq!(svg.matches("<g class=\"level\">").count(), 2, "{svg}");
        assert!(
            svg.contains("1: &lt;2800&gt;") && svg.contains("2: &lt;1600&gt;"),
            "{svg}"
        );
        assert!(
            svg.contains(LEVEL_TONES[0]) && svg.contains(LEVEL_TONES[1]),
            "{svg}"
        );
    }

    /// Draws `chart` with one more series of the one point `point`.
    fn with_one_point(mut chart: LineChart, point: (f64, f64), index: usize) -> String {
        chart.series.push(Series {
            name: "one".into(),
            points: vec![point],
        });
        render_chart(&Chart::Line(chart), index)
    }

    /// Asserts that `svg` draws a lone point as a circle whose attributes begin `attributes`.
    fn assert_one_circle(svg: &str, attributes: &str) {
        assert!(
            svg.contains(&format!("<circle class=\"plot\" {attributes}")),
            "{svg}"
        );
    }

    #[test]
    fn odd_data_draws_without_panicking() {
        let axis = || Axis::new("v", Scale::Log2, AxisFormat::Bytes);
        let mut chart = LineChart::new(
            "odd",
            axis(),
            Axis::new("r", Scale::Linear, AxisFormat::RateMbPerS),
        );
        chart.series.push(Series {
            name: "nan".into(),
            points: vec![
                (f64::NAN, 1.0),
                (0.0, 1.0),
                (-1.0, 2.0),
                (f64::INFINITY, 3.0),
            ],
        });
        let empty = render_chart(&Chart::Line(chart.clone()), 0);
        assert!(empty.contains("no data") && !empty.contains("class=\"plot\""));
        let single = with_one_point(chart, (4096.0, 1e9), 1);
        // One point sits in the middle of the plot, on either kind of axis.
        let middle_x = format!("cx=\"{:.1}\"", (LEFT + WIDTH - RIGHT) / 2.0);
        assert_one_circle(&single, &middle_x);
        let linear = LineChart::new(
            "one",
            Axis::new("x", Scale::Linear, AxisFormat::Plain),
            Axis::new("y", Scale::Log10, AxisFormat::Plain),
        );
        let single = with_one_point(linear, (5e9, 100.0), 2);
        let middle_y = format!("cy=\"{:.1}\"", (TOP + HEIGHT - BOTTOM) / 2.0);
        assert_one_circle(&single, &format!("{middle_x} {middle_y}"));
        let bars = BarChart {
            title: "bars".into(),
            categories: vec!["SEQ1M Q8T1".into(), "RND4K Q1T1".into()],
            series_names: vec!["read".into(), "write".into()],
            values: vec![vec![3e9, 5e7], vec![2e9, f64::NAN]],
            y: Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS),
        };
        let svg = render_chart(&Chart::Bars(bars), 2);
        assert_eq!(svg.matches("<rect class=\"plot\"").count(), 3);
    }
}
