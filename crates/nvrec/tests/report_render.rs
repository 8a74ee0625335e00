//! The HTML report renders in a real browser: a sample page with every kind of chart is
//! written to a temp file and loaded in headless Chromium. The page's own check script must
//! count every chart as drawn and none as failed, a label that looks like markup must stay
//! text, and a screenshot of the page must hold more than a blank page.
//!
//! Where Chromium is not installed the test says so and passes (`.ci/run` installs it).
//! `NVREC_KEEP_REPORT=DIR` keeps the page and its screenshot in DIR, to look at.

use nvrec::report::{
    render_html, Axis, AxisFormat, Band, BarChart, Chart, LineChart, Marker, Reference, Report,
    Scale, Section, Series, Table,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Peak rates from the streamer's TEST #08: chunks of 128 KiB, MiB/s written and read.
const SWEEP_MIB_PER_S: [(u64, f64, f64); 16] = [
    (1, 21.0, 495.0),
    (2, 1839.0, 724.0),
    (4, 2146.0, 835.0),
    (8, 2346.0, 1367.0),
    (16, 2453.0, 1411.0),
    (32, 2522.0, 1435.0),
    (64, 2551.0, 1446.0),
    (128, 944.0, 1452.0),
    (256, 1033.0, 1473.0),
    (512, 1144.0, 1484.0),
    (1024, 1096.0, 1489.0),
    (2048, 1117.0, 1478.0),
    (4096, 1025.0, 1494.0),
    (8192, 1055.0, 1491.0),
    (16384, 1041.0, 1493.0),
    (32768, 678.0, 1492.0),
];
const MIB: f64 = 1048576.0;
/// A label that would run script if it reached the page as markup.
const HOSTILE: &str = "<script>document.body.dataset.injected='1'</script><img src=x onerror=\"document.body.dataset.injected='2'\">";

use nvrec_testkit::TempDir;

fn peak_chart() -> LineChart {
    let mut chart = LineChart::new(
        "Average peak rate against transfer size",
        Axis::new("transfer size", Scale::Log2, AxisFormat::Bytes),
        Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS),
    );
    for (name, pick) in [("write", 1), ("read", 2)] {
        chart.series.push(Series {
            name: name.to_string(),
            points: SWEEP_MIB_PER_S
                .iter()
                .map(|&(chunks, write, read)| {
                    let rate = if pick == 1 { write } else { read };
                    ((chunks * 131072) as f64, rate * MIB)
                })
                .collect(),
        });
    }
    chart
}

/// One hour of 0.5 s windows: 2.8 GB/s until a cache cliff at 12 GiB written, then 1.6 GB/s
/// with a dip every few minutes, plus a few missing windows (NaN).
fn fill_chart() -> LineChart {
    let mut written_bytes = 0.0;
    let mut points = Vec::new();
    for window_index in 0..7200u32 {
        let rate = if written_bytes < 12.0 * 1024.0 * MIB {
            2.8e9
        } else if window_index % 400 == 0 {
            0.3e9
        } else {
            1.6e9 + 40e6 * f64::from(window_index % 7)
        };
        written_bytes += rate * 0.5;
        let value = if window_index % 1000 == 999 {
            f64::NAN
        } else {
            rate
        };
        points.push((f64::from(window_index) * 0.5, value));
    }
    let mut chart = LineChart::new(
        "Write rate over a whole-drive fill",
        Axis::new("time", Scale::Linear, AxisFormat::Seconds),
        Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS),
    );
    chart.series.push(Series {
        name: "write".to_string(),
        points,
    });
    chart.markers.push(Marker {
        x: 12.0 * 1024.0 * MIB / 2.8e9,
        label: "cache cliff at 12.0 GiB".to_string(),
    });
    chart.references.push(Reference {
        y: 1.6e9,
        label: "steady state 1.6 GB/s".to_string(),
    });
    chart.bands.push(Band {
        from_x: 600.0,
        to_x: 3600.0,
        label: "steady-state window".to_string(),
    });
    chart
}

fn sample_report() -> Report {
    let bars = BarChart {
        title: "Peak against continuous".to_string(),
        categories: vec!["write".to_string(), "read".to_string()],
        series_names: vec!["peak".to_string(), "continuous".to_string()],
        values: vec![
            vec![2551.0 * MIB, 1494.0 * MIB],
            vec![441.0 * MIB, 1702.0 * MIB],
        ],
        y: Axis::new("MB/s", Scale::Linear, AxisFormat::RateMbPerS),
    };
    let mut hostile = LineChart::new(
        HOSTILE,
        Axis::new(HOSTILE, Scale::Log10, AxisFormat::Plain),
        Axis::new(HOSTILE, Scale::Linear, AxisFormat::Plain),
    );
    hostile.series.push(Series {
        name: HOSTILE.to_string(),
        points: vec![(10.0, 1.0)],
    });
    hostile.markers.push(Marker {
        x: 10.0,
        label: HOSTILE.to_string(),
    });
    Report {
        title: "nvrec sample report".to_string(),
        subtitle: "the streamer's TEST #08 and a synthetic fill".to_string(),
        metadata: vec![
            ("nvrec version".to_string(), "test".to_string()),
            ("target".to_string(), HOSTILE.to_string()),
        ],
        sections: vec![
            Section {
                heading: "Peak".to_string(),
                paragraphs: vec!["Rates of 1 to 32768 chunks of 128 KiB.".to_string()],
                charts: vec![Chart::Line(peak_chart()), Chart::Bars(bars)],
                tables: vec![Table {
                    caption: "peak".to_string(),
                    header: vec!["chunks".to_string(), "write MiB/s".to_string()],
                    rows: SWEEP_MIB_PER_S
                        .iter()
                        .map(|(chunks, write, _)| vec![chunks.to_string(), write.to_string()])
                        .collect(),
                }],
            },
            Section {
                heading: "Continuous".to_string(),
                paragraphs: vec![HOSTILE.to_string()],
                charts: vec![Chart::Line(fill_chart()), Chart::Line(hostile)],
                tables: Vec::new(),
            },
        ],
    }
}

fn find_browser() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|out| out.status.success())
        })
}

/// Runs headless Chromium on the page with a profile of its own (tests run in parallel).
fn chromium(browser: &str, dir: &Path, page: &Path, extra: &[String]) -> std::process::Output {
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("running chromium")
}

/// The value of a `data-` attribute of the dumped DOM's body.
fn body_attribute(dom: &str, name: &str) -> Option<String> {
    let key = format!("{name}=\"");
    let start = dom.find(&key)? + key.len();
    dom[start..].split('"').next().map(str::to_string)
}

#[test]
fn sample_report_renders_in_headless_chromium() {
    let report = sample_report();
    let html = render_html(&report);
    let chart_count = report
        .sections
        .iter()
        .map(|section| section.charts.len())
        .sum::<usize>();
    assert_eq!(html.matches("<svg class=\"chart\"").count(), chart_count);
    // 7200 points are drawn as at most four per pixel column: the page stays light.
    assert!(html.len() < 200_000, "{} bytes", html.len());

    let Some(browser) = find_browser() else {
        nvrec_testkit::skip(nvrec_testkit::CHROMIUM, "no chromium on the PATH");
        return;
    };
    let dir = TempDir::new("report-render");
    let page = dir.0.join("sample.html");
    std::fs::write(&page, &html).expect("writing the page");

    let output = chromium(browser, &dir.0, &page, &["--dump-dom".to_string()]);
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rendered = body_attribute(&dom, "data-charts-rendered")
        .unwrap_or_else(|| panic!("the check script did not run:\n{dom}"));
    assert_eq!(rendered, chart_count.to_string(), "charts drawn");
    assert_eq!(
        body_attribute(&dom, "data-charts-failed").as_deref(),
        Some("0")
    );
    assert_eq!(body_attribute(&dom, "data-injected"), None, "markup ran");
    assert!(!dom.contains("<img"), "a label became an element");

    let screenshot = dir.0.join("sample.png");
    let output = chromium(
        browser,
        &dir.0,
        &page,
        &[
            format!("--screenshot={}", screenshot.display()),
            "--window-size=1200,2000".to_string(),
        ],
    );
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let png = std::fs::read(&screenshot).expect("the screenshot exists");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    // IHDR: width and height, big-endian, right after the signature and chunk header.
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), (1200, 2000));
    // A blank page of this size compresses to a few KiB; text and charts take far more.
    assert!(png.len() > 40_000, "{} bytes: nearly blank", png.len());
    if let Some(keep) = std::env::var_os("NVREC_KEEP_REPORT") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).expect("creating NVREC_KEEP_REPORT");
        std::fs::copy(&page, keep.join("sample.html")).expect("keeping the page");
        std::fs::copy(&screenshot, keep.join("sample.png")).expect("keeping the screenshot");
    }
}
