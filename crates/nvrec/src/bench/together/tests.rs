use super::*;
use crate::bench::{fill, open_sim, profile, FillSettings, Profile, ProfileSettings, TestShape};
use crate::control::{Control, Progress};

fn window(start_s: f64, bytes: u64, total_bytes: u64) -> Window {
    Window {
        start_s,
        duration_s: 1.0,
        bytes,
        total_bytes,
        position_bytes: total_bytes,
        rate_bytes_per_s: bytes as f64,
        latency_max_us: 0.0,
    }
}

/// `rate` bytes a second for `seconds` one-second windows.
fn steady(rate: u64, seconds: u64) -> Vec<Window> {
    (0..seconds)
        .map(|second| window(second as f64, rate, rate * (second + 1)))
        .collect()
}

fn spanned<'a>(name: &str, started_s: f64, windows: &'a [Window]) -> Figure<'a> {
    let elapsed_s = windows.last().map_or(0.0, |w| w.start_s + w.duration_s);
    let bytes = windows.last().map_or(0, |w| w.total_bytes);
    Figure {
        span: Some(Span {
            started_ns: (started_s * 1e9) as u64,
            elapsed_s,
            windows,
        }),
        ..Figure::rate(name.to_string(), IoOp::Write, bytes as f64 / elapsed_s)
    }
}

#[test]
fn the_aggregate_counts_only_the_interval_in_which_every_drive_ran() {
    // A: 100 B/s for 2 s from 0; B: 50 B/s for 4 s from 1 s. Both run from 1 s to 2 s:
    // A moves 100 bytes there, B 50.
    let fast = steady(100, 2);
    let slow = steady(50, 4);
    let together = vec![
        vec![spanned("write", 0.0, &fast)],
        vec![spanned("write", 1.0, &slow)],
    ];
    let alone = vec![
        vec![Figure::rate("write".into(), IoOp::Write, 120.0)],
        vec![Figure::rate("write".into(), IoOp::Write, 80.0)],
    ];
    let combined = combine(&together, Some(&alone));
    assert_eq!(combined.len(), 1);
    let write = &combined[0];
    assert_eq!(write.together_bytes_per_s, vec![100.0, 50.0]);
    assert!(
        (write.aggregate_bytes_per_s - 150.0).abs() < 1e-6,
        "{write:?}"
    );
    assert!((write.common_s.unwrap() - 1.0).abs() < 1e-9);
    assert_eq!(write.alone_bytes_per_s, Some(vec![120.0, 80.0]));
    assert_eq!(write.alone_sum_bytes_per_s, Some(200.0));
    assert!((write.share_percent.unwrap() - 75.0).abs() < 1e-6);
    // The series: A alone, then both, then B alone, over 5 s.
    let series = &write.aggregate_series;
    assert_eq!(series.len(), SERIES_POINT_COUNT);
    let at = |s: f64| series.iter().find(|point| point[0] >= s).unwrap()[1];
    for (seconds, expected) in [(0.5, 100.0), (1.5, 150.0), (3.0, 50.0)] {
        assert!(
            (at(seconds) - expected).abs() < 1e-6,
            "{seconds} s: {series:?}"
        );
    }
    // Every byte of both drives is in the series: 200 + 200 bytes.
    let step_s = series[1][0] - series[0][0];
    let bytes: f64 = series.iter().map(|point| point[1] * step_s).sum();
    assert!((bytes - 400.0).abs() < 1e-3, "{bytes}");
}

#[test]
fn a_window_is_counted_in_part_where_the_interval_cuts_it() {
    let windows = steady(100, 3);
    let span = Span {
        started_ns: 1_000_000_000,
        elapsed_s: 3.0,
        windows: &windows,
    };
    assert_eq!(span.bytes_at(0, 0.0), 0.0);
    assert_eq!(span.bytes_at(1_500_000_000, 0.0), 50.0);
    assert_eq!(span.bytes_at(3_250_000_000, 0.0), 225.0);
    assert_eq!(span.bytes_at(9_000_000_000, 0.0), 300.0);
    let unlogged = Span {
        windows: &[],
        ..span
    };
    assert_eq!(unlogged.bytes_at(2_000_000_000, 100.0), 100.0);
    assert_eq!(unlogged.bytes_at(9_000_000_000, 100.0), 300.0);
}

#[test]
fn runs_started_together_add_up_run_by_run_and_figures_missing_on_a_drive_are_left_out() {
    let drive = |runs: Vec<f64>, extra: bool| {
        let mut figures = vec![Figure {
            run_rates_bytes_per_s: runs.clone(),
            ..Figure::rate("SEQ1M Q8T1 read".into(), IoOp::Read, runs[0].max(runs[1]))
        }];
        if extra {
            figures.push(Figure::rate("RND4K Q1T1 read".into(), IoOp::Read, 1.0));
        }
        figures
    };
    // The best run together is the second (10 + 30), not the sum of each drive's best.
    let together = vec![drive(vec![20.0, 10.0], true), drive(vec![5.0, 30.0], false)];
    let combined = combine(&together, None);
    assert_eq!(combined.len(), 1);
    assert_eq!(combined[0].aggregate_bytes_per_s, 40.0);
    assert_eq!(combined[0].together_bytes_per_s, vec![20.0, 30.0]);
    assert_eq!(combined[0].alone_sum_bytes_per_s, None);
    assert_eq!(combined[0].share_percent, None);
}

#[test]
fn lockstep_starts_each_step_together_and_a_drive_that_ended_holds_nobody_back() {
    // Drive i takes 3 + i steps: every arrival at step k comes before any drive passes it.
    let log = Mutex::new(Vec::new());
    run_together(3, |drive, lockstep| {
        for step in 0..3 + drive {
            log.lock().unwrap().push(("arrive", step, drive));
            std::thread::sleep(std::time::Duration::from_millis(drive as u64));
            lockstep.wait();
            log.lock().unwrap().push(("pass", step, drive));
        }
    });
    let log = log.into_inner().unwrap();
    for step in 0..5 {
        let last_arrival = log
            .iter()
            .rposition(|(what, at, _)| *what == "arrive" && *at == step)
            .unwrap();
        let first_pass = log
            .iter()
            .position(|(what, at, _)| *what == "pass" && *at == step)
            .unwrap();
        assert!(last_arrival < first_pass, "step {step}: {log:?}");
    }
    assert_eq!(log.len(), 2 * (3 + 4 + 5));
}

#[test]
fn two_simulated_drives_filled_together_give_each_its_rate_and_their_sum() {
    // overwrite=1: the runs alone write the drives again at the same rate.
    let specs = [
        "sim:capacity=64M,cache=0,slow=2GB/s,read=3GB/s,latency=0,overwrite=1",
        "sim:capacity=64M,cache=0,slow=1GB/s,read=3GB/s,latency=0,overwrite=1",
    ];
    let targets: Vec<_> = specs.iter().map(|spec| open_sim(spec)).collect();
    let run = |index: usize, lockstep: Lockstep| {
        let settings = FillSettings {
            window_s: Some(0.001),
            lockstep,
            ..FillSettings::default()
        };
        fill(
            &targets[index],
            &settings,
            &Control::new(),
            &Progress::default(),
            &mut |_, _| {},
        )
        .unwrap()
    };
    let together = run_together(2, run);
    let alone: Vec<_> = (0..2).map(|index| run(index, Lockstep::alone())).collect();
    let facts = targets.iter().map(|target| target.info.clone()).collect();
    let result = TogetherResult::new("fill", facts, together, Some(alone));
    let write = &result.figures[0];
    assert_eq!(write.name, "write");
    let close = |a: f64, b: f64| (a / b - 1.0).abs() < 0.02;
    assert!(close(write.together_bytes_per_s[0], 2e9), "{write:?}");
    assert!(close(write.together_bytes_per_s[1], 1e9), "{write:?}");
    // Both write from 0 to the first drive's end: 2 + 1 GB/s.
    assert!(close(write.aggregate_bytes_per_s, 3e9), "{write:?}");
    assert!(
        close(write.alone_sum_bytes_per_s.unwrap(), 3e9),
        "{write:?}"
    );
    assert!(close(write.share_percent.unwrap(), 100.0), "{write:?}");
    let read = result
        .figures
        .iter()
        .find(|f| f.name == "read back")
        .unwrap();
    assert!(close(read.aggregate_bytes_per_s, 6e9), "{read:?}");
    assert_eq!(result.drives.len(), 2);
    assert!(result.drives.iter().all(|drive| drive.alone.is_some()));
    let value = serde_json::to_value(&result).unwrap();
    assert_eq!(value["schema"], "nvrec.bench.together");
    assert_eq!(value["drives"][1]["together"]["meta"]["bench"], "fill");
}

#[test]
fn a_profile_on_two_simulated_drives_has_each_test_for_both() {
    let targets = [
        open_sim("sim:capacity=64M,slow=1GB/s"),
        open_sim("sim:capacity=64M,slow=1GB/s"),
    ];
    let together = run_together(2, |index, lockstep| {
        let settings = ProfileSettings {
            profile: Profile::Custom,
            shapes: vec![TestShape::parse("SEQ1M-Q8T1").unwrap()],
            region_bytes: Some(16 << 20),
            duration_s: 0.01,
            runs: 2,
            lockstep,
            ..ProfileSettings::default()
        };
        profile(
            &targets[index],
            &settings,
            &Control::new(),
            &Progress::default(),
            &mut |_| {},
        )
        .unwrap()
    });
    let facts = targets.iter().map(|target| target.info.clone()).collect();
    let result = TogetherResult::new("profile", facts, together, None);
    let names: Vec<_> = result.figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["SEQ1M Q8T1 read", "SEQ1M Q8T1 write"]);
    for figure in &result.figures {
        let sum: f64 = figure.together_bytes_per_s.iter().sum();
        assert!(figure.aggregate_bytes_per_s <= sum * 1.000001, "{figure:?}");
        assert!(figure.aggregate_bytes_per_s > 0.0, "{figure:?}");
    }
}
