//! Self-contained HTML reports with SVG charts.
//!
//! A [`Report`] is plain data: metadata, then sections of paragraphs, charts and tables.
//! [`render_html`] turns it into one HTML page with inline CSS and inline SVG, so the file can
//! be mailed, archived or opened on a machine with no network. A few lines of inline script
//! check after loading that every chart drew something and record the count in
//! `document.body.dataset.chartsRendered` (or the failures in `chartsFailed`), so a headless
//! browser can prove the charts render.
//!
//! Every section has an id made from its heading ([`section_ids`]): a link to
//! `report.html#peak-against-continuous` shows that section alone (an inline style hides the
//! rest while a section is the link's target), which is how one picture of a page is shown,
//! linked or screenshotted.
//!
//! What it deliberately does not do: any I/O (callers write the string), load anything from
//! elsewhere (fonts, styles, scripts), or interpret bench results (`nvrec-cli` maps results to
//! charts). All text is escaped; nothing in a label can become markup.

mod svg;

pub use svg::{render_chart, Scale};

/// One page: a title, a table of facts about the run, then sections in order.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub title: String,
    pub subtitle: String,
    /// Shown as a two-column table under the title (version, kernel, target, settings).
    pub metadata: Vec<(String, String)>,
    pub sections: Vec<Section>,
}

/// A heading followed by its paragraphs, then its charts, then its tables.
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub heading: String,
    pub paragraphs: Vec<String>,
    pub charts: Vec<Chart>,
    pub tables: Vec<Table>,
}

/// A plain table; rows may be shorter than the header.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// One `<svg>` on the page.
#[derive(Debug, Clone)]
pub enum Chart {
    Line(LineChart),
    Bars(BarChart),
}

/// What an axis shows and how numbers on it are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AxisFormat {
    Plain,
    /// Bytes: `128K`, `1M`, `4G` (binary).
    Bytes,
    /// Bytes per second shown as MB/s (decimal, as drive makers quote).
    RateMbPerS,
    Seconds,
}

/// An axis: its label (with the unit, e.g. "MB/s"), scale and tick format.
#[derive(Debug, Clone)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    pub format: AxisFormat,
}

impl Axis {
    pub fn new(label: &str, scale: Scale, format: AxisFormat) -> Axis {
        Axis {
            label: label.to_string(),
            scale,
            format,
        }
    }
}

/// A named line of `(x, y)` points in x order; points that cannot be drawn on the chart's
/// scales (NaN, infinities, zero or less on a log scale) are skipped.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A vertical line at `x` with a label ("cache cliff at 12.3 GiB").
#[derive(Debug, Clone)]
pub struct Marker {
    pub x: f64,
    pub label: String,
}

/// A horizontal line at `y` with a label ("steady state 1600 MB/s").
#[derive(Debug, Clone)]
pub struct Reference {
    pub y: f64,
    pub label: String,
}

/// A shaded range of x ("steady-state window").
#[derive(Debug, Clone)]
pub struct Band {
    pub from_x: f64,
    pub to_x: f64,
    pub label: String,
}

/// A stretch of x at one level of y ("plateau 2: 1600 MB/s"): shaded, tones alternating
/// from one to the next, with the level drawn across it and labelled.
#[derive(Debug, Clone)]
pub struct Level {
    pub from_x: f64,
    pub to_x: f64,
    pub y: f64,
    pub label: String,
}

/// Lines over x, with levels, markers, reference lines and bands drawn over them.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub markers: Vec<Marker>,
    pub references: Vec<Reference>,
    pub bands: Vec<Band>,
    pub levels: Vec<Level>,
}

impl LineChart {
    pub fn new(title: &str, x: Axis, y: Axis) -> LineChart {
        LineChart {
            title: title.to_string(),
            x,
            y,
            series: Vec::new(),
            markers: Vec::new(),
            references: Vec::new(),
            bands: Vec::new(),
            levels: Vec::new(),
        }
    }
}

/// Grouped bars: for each category, one bar per series (`values[series][category]`).
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    pub categories: Vec<String>,
    pub series_names: Vec<String>,
    pub values: Vec<Vec<f64>>,
    pub y: Axis,
}

/// Escapes text for HTML and SVG content and attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;\
max-width:1100px;color:#222;padding:0 1em}h1{margin-bottom:.2em}.subtitle{color:#555;margin-top:0}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;\
text-align:left;font-variant-numeric:tabular-nums}th{background:#f3f3f3}caption{text-align:left;\
font-weight:600;padding:.3em 0}svg.chart{display:block;margin:1em 0;max-width:100%;height:auto;\
background:#fff;border:1px solid #e3e3e3}.meta td:first-child{color:#555}\
footer{color:#777;font-size:.85em;margin-top:3em}\
body:has(section:target)>:not(section:target){display:none}\
@media print{body{margin:0;max-width:none;print-color-adjust:exact;-webkit-print-color-adjust:exact}\
svg.chart{border:none}svg.chart,table{break-inside:avoid}h2{break-after:avoid}}";

const CHECK_SCRIPT: &str = "addEventListener('load',function(){var ok=0,bad=0;\
document.querySelectorAll('svg.chart').forEach(function(svg){var drawn=svg.querySelectorAll('.plot');\
var area=0;drawn.forEach(function(e){var b=e.getBBox();area+=b.width*b.height+b.width+b.height;});\
if(drawn.length>0&&area>0){ok++;}else{bad++;}});document.body.dataset.chartsRendered=String(ok);\
document.body.dataset.chartsFailed=String(bad);});";

/// The whole page.
pub fn render_html(report: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&report.title),
        escape(&report.title)
    );
    if !report.subtitle.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"subtitle\">{}</p>",
            escape(&report.subtitle)
        );
    }
    if !report.metadata.is_empty() {
        out.push_str("<table class=\"meta\">\n");
        for (key, value) in &report.metadata {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(key),
                escape(value)
            );
        }
        out.push_str("</table>\n");
    }
    let mut chart_index = 0;
    for (section, id) in report.sections.iter().zip(section_ids(&report.sections)) {
        let _ = writeln!(
            out,
            "<section id=\"{id}\">\n<h2>{}</h2>",
            escape(&section.heading)
        );
        for paragraph in &section.paragraphs {
            let _ = writeln!(out, "<p>{}</p>", escape(paragraph));
        }
        for chart in &section.charts {
            out.push_str(&render_chart(chart, chart_index));
            out.push('\n');
            chart_index += 1;
        }
        for table in &section.tables {
            render_table(table, &mut out);
        }
        out.push_str("</section>\n");
    }
    let _ = write!(
        out,
        "<footer>Made by nvrec {}.</footer>\n<script>{CHECK_SCRIPT}</script>\n</body></html>\n",
        env!("CARGO_PKG_VERSION")
    );
    out
}

/// Each section's id: its heading in lower case, every run of other characters than ASCII
/// letters and digits a single `-` (`Peak against continuous` is `peak-against-continuous`),
/// `section` where nothing is left, and `-2`, `-3` ... added to a repeated one. Only letters,
/// digits and `-`, so an id needs no escaping.
pub fn section_ids(sections: &[Section]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::with_capacity(sections.len());
    for section in sections {
        let mut id = String::new();
        for c in section.heading.chars() {
            if c.is_ascii_alphanumeric() {
                id.push(c.to_ascii_lowercase());
            } else if !id.is_empty() && !id.ends_with('-') {
                id.push('-');
            }
        }
        let id = match id.trim_end_matches('-') {
            "" => "section".to_string(),
            trimmed => trimmed.to_string(),
        };
        let mut unique = id.clone();
        let mut count = 1;
        while ids.contains(&unique) {
            count += 1;
            unique = format!("{id}-{count}");
        }
        ids.push(unique);
    }
    ids
}

fn render_table(table: &Table, out: &mut String) {
    use std::fmt::Write;
    out.push_str("<table>");
    if !table.caption.is_empty() {
        let _ = write!(out, "<caption>{}</caption>", escape(&table.caption));
    }
    out.push_str("\n<tr>");
    for cell in &table.header {
        let _ = write!(out, "<th>{}</th>", escape(cell));
    }
    out.push_str("</tr>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_cannot_become_markup() {
        assert_eq!(
            escape("<script>a&'b\"</script>"),
            "&lt;script&gt;a&amp;&#39;b&quot;&lt;/script&gt;"
        );
        let mut chart = LineChart::new(
            "<script>alert(1)</script>",
            Axis::new("x<", Scale::Linear, AxisFormat::Plain),
            Axis::new("y>", Scale::Linear, AxisFormat::Plain),
        );
        chart.series.push(Series {
            name: "<b>bold</b>".to_string(),
            points: vec![(0.0, 1.0), (1.0, 2.0)],
        });
        chart.markers.push(Marker {
            x: 0.5,
            label: "\"><img src=x>".to_string(),
        });
        let report = Report {
            title: "<title>".to_string(),
            subtitle: String::new(),
            metadata: vec![("<k1>".to_string(), "<v1>".to_string())],
            sections: vec![Section {
                heading: "<h9>".to_string(),
                paragraphs: vec!["<p9>".to_string()],
                charts: vec![Chart::Line(chart)],
                tables: vec![Table {
                    caption: "<c9>".to_string(),
                    header: vec!["<th9>".to_string()],
                    rows: vec![vec!["<td9>".to_string()]],
                }],
            }],
        };
        let html = render_html(&report);
        for bad in [
            "<script>alert",
            "<b>bold",
            "<img",
            "<k1>",
            "<v1>",
            "<h9>",
            "<p9>",
            "<c9>",
            "<th9>",
            "<td9>",
        ] {
            assert!(!html.contains(bad), "{bad} got through");
        }
        // Exactly the one script of our own.
        assert_eq!(html.matches("<script>").count(), 1);
    }

    #[test]
    fn sections_have_ids_from_their_headings_each_once() {
        let sections: Vec<Section> = [
            "Peak against continuous",
            "Direct I/O against the page cache",
            "Peak against continuous",
            "<>",
            "  fill: 2 files ",
        ]
        .iter()
        .map(|heading| Section {
            heading: heading.to_string(),
            ..Section::default()
        })
        .collect();
        assert_eq!(
            section_ids(&sections),
            [
                "peak-against-continuous",
                "direct-i-o-against-the-page-cache",
                "peak-against-continuous-2",
                "section",
                "fill-2-files",
            ]
        );
        let html = render_html(&Report {
            sections,
            ..Report::default()
        });
        assert!(html.contains("<section id=\"direct-i-o-against-the-page-cache\">"));
        // A section that is the link's target is shown alone.
        assert!(html.contains("body:has(section:target)>:not(section:target){display:none}"));
    }

    #[test]
    fn page_needs_nothing_from_elsewhere() {
        let mut chart = LineChart::new(
            "t",
            Axis::new("x", Scale::Linear, AxisFormat::Seconds),
            Axis::new("y", Scale::Linear, AxisFormat::RateMbPerS),
        );
        chart.series.push(Series {
            name: "s".into(),
            points: vec![(0.0, 1e9), (1.0, 2e9)],
        });
        let html = render_html(&Report {
            title: "t".into(),
            sections: vec![Section {
                heading: "h".into(),
                charts: vec![Chart::Line(chart)],
                ..Section::default()
            }],
            ..Report::default()
        });
        // The SVG namespace is a name, not a fetch; nothing else may point outside the page.
        let without_namespace = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        for reference in ["http:", "https:", "//", "src=", "href=", "@import", "url("] {
            assert!(
                !without_namespace.contains(reference),
                "{reference} in the page"
            );
        }
        assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
        assert!(html.contains("dataset.chartsRendered"));
    }
}
