//! `bench overwrite`: what a ring recording costs once it wraps. The region is discarded,
//! written once, and written on over further laps, in one continuous sequential stream; the
//! rate before the wrap and after it are compared. It runs once without TRIM and once with
//! TRIM ahead of the write point (as `record --ring --trim` does), so the difference shows
//! what TRIM buys on this drive.

use super::driver::{self, Data, Workload, WorkloadResult};
use super::size::{size_at_most, Need};
use super::window::Window;
use super::{BenchError, BenchTarget, Lockstep, RunMeta};
use crate::control::{Control, Progress};
use crate::engine::{EngineChoice, IoOp};
use crate::unit::format_bytes;

/// Whether the ring discards ahead of its write point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OverwriteMode {
    NoTrim,
    Trim,
}

impl OverwriteMode {
    pub fn name(self) -> &'static str {
        match self {
            OverwriteMode::NoTrim => "without TRIM",
            OverwriteMode::Trim => "with TRIM ahead",
        }
    }
}

#[derive(Debug, Clone)]
pub struct OverwriteSettings {
    /// The ring: this many bytes from offset 0; `None`: the whole target.
    pub size_bytes: Option<u64>,
    /// Laps in all, the first included (2 = fill, then one lap of overwriting).
    pub laps: f64,
    pub io_size_bytes: u64,
    pub queue_depth: u32,
    pub window_s: f64,
    /// How far ahead of the write point TRIM runs; `None`: 1/16 of the ring.
    pub trim_ahead_bytes: Option<u64>,
    pub modes: Vec<OverwriteMode>,
    pub engine: EngineChoice,
    /// Benches on several drives at once start each measured workload together.
    pub lockstep: Lockstep,
}

impl Default for OverwriteSettings {
    fn default() -> Self {
        OverwriteSettings {
            size_bytes: None,
            laps: 2.0,
            io_size_bytes: 1 << 20,
            queue_depth: 32,
            window_s: super::WINDOW_S_DEFAULT,
            trim_ahead_bytes: None,
            modes: vec![OverwriteMode::NoTrim, OverwriteMode::Trim],
            engine: EngineChoice::Auto,
            lockstep: Lockstep::alone(),
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct OverwritePhase {
    pub mode: OverwriteMode,
    /// Why the region could not be discarded before the phase, if it could not.
    pub prepare_note: Option<String>,
    pub rate_before_wrap_bytes_per_s: f64,
    pub rate_after_wrap_bytes_per_s: f64,
    /// After over before: 1 means overwriting costs nothing.
    pub after_over_before: f64,
    pub write: WorkloadResult,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct OverwriteResult {
    pub meta: RunMeta,
    pub ring_bytes: u64,
    pub phases: Vec<OverwritePhase>,
    pub stopped: bool,
}

/// The rates before and after the series passed `ring_bytes` (the wrap), from its windows.
fn split_at_wrap(windows: &[Window], ring_bytes: u64) -> (f64, f64) {
    let mut wrap_s = None;
    for window in windows {
        if window.total_bytes >= ring_bytes {
            let before_bytes = window.total_bytes - window.bytes;
            let into = (ring_bytes - before_bytes) as f64 / window.rate_bytes_per_s.max(1.0);
            wrap_s = Some(window.start_s + into.min(window.duration_s));
            break;
        }
    }
    let Some(wrap_s) = wrap_s else {
        return (0.0, 0.0);
    };
    let last = windows.last().expect("a window passed the wrap");
    let end_s = last.start_s + last.duration_s;
    let total = last.total_bytes;
    let before = if wrap_s > 0.0 {
        ring_bytes as f64 / wrap_s
    } else {
        0.0
    };
    let after = if end_s > wrap_s {
        (total - ring_bytes) as f64 / (end_s - wrap_s)
    } else {
        0.0
    };
    (before, after)
}

/// The smallest ring: two queues of I/O, so that a lap is more than what is in flight.
fn ring_bytes_min(settings: &OverwriteSettings) -> u64 {
    2 * settings.queue_depth as u64 * settings.io_size_bytes
}

/// What the overwrite needs of its target: the ring asked for, or, for the whole target,
/// the smallest ring.
fn need(settings: &OverwriteSettings, capacity_bytes: u64) -> Need<'static> {
    match settings.size_bytes {
        Some(size_bytes) => Need {
            bench: "overwrite",
            needed_bytes: size_bytes,
            why: "--size".to_string(),
            remedy: size_at_most(capacity_bytes),
        },
        None => Need {
            bench: "overwrite",
            needed_bytes: ring_bytes_min(settings),
            why: format!(
                "the smallest ring: two queues of {} I/Os of {}",
                settings.queue_depth,
                format_bytes(settings.io_size_bytes)
            ),
            remedy: "a smaller --queue-depth or --io-size".to_string(),
        },
    }
}

pub fn overwrite(
    target: &BenchTarget,
    settings: &OverwriteSettings,
    control: &Control,
    progress: &Progress,
    on_window: &mut dyn FnMut(OverwriteMode, &Window),
) -> Result<OverwriteResult, BenchError> {
    let io = settings.io_size_bytes;
    if io == 0 || !io.is_multiple_of(target.logical_block_bytes as u64) {
        return Err(BenchError::Settings(format!(
            "the I/O size {io} is not a multiple of the logical block size {}",
            target.logical_block_bytes
        )));
    }
    target.require(need(settings, target.capacity_bytes))?;
    let ring_bytes = settings.size_bytes.unwrap_or(target.capacity_bytes) / io * io;
    if ring_bytes < ring_bytes_min(settings) {
        return Err(BenchError::Settings(format!(
            "the ring ({ring_bytes} bytes) must hold at least two queues of I/O ({} bytes)",
            ring_bytes_min(settings)
        )));
    }
    if settings.laps.is_nan() || settings.laps <= 1.0 {
        return Err(BenchError::Settings(format!(
            "laps must be more than 1 to overwrite anything, not {}",
            settings.laps
        )));
    }
    let trim_ahead = settings
        .trim_ahead_bytes
        .unwrap_or(ring_bytes / 16)
        .max(io)
        .next_multiple_of(io)
        .min(ring_bytes / 2);
    let mut engine = target.open_engine(settings.engine, settings.queue_depth, io)?;
    let mut meta = RunMeta::new("overwrite", target, engine.as_ref());
    meta.settings = vec![
        ("ring".to_string(), ring_bytes.to_string()),
        ("laps".to_string(), settings.laps.to_string()),
        ("io_size".to_string(), io.to_string()),
        ("queue_depth".to_string(), settings.queue_depth.to_string()),
        ("trim_ahead".to_string(), trim_ahead.to_string()),
    ];
    let phase_bytes = ((ring_bytes as f64 * settings.laps) as u64) / io * io;
    driver::start_progress(progress, phase_bytes * settings.modes.len() as u64);
    let mut phases = Vec::new();
    let mut stopped = false;
    for mode in &settings.modes {
        // Start every phase from a discarded ring, so the first lap writes fresh space.
        let prepare_note = engine
            .discard(0, 0, ring_bytes)
            .err()
            .map(|error| format!("could not discard the ring first: {error}"));
        let mut workload = Workload::sequential(IoOp::Write, 0, ring_bytes, io);
        workload.wrap = true;
        workload.limit_bytes = Some(phase_bytes);
        workload.data = Data::Incompressible;
        workload.window_ns = Some((settings.window_s * 1e9) as u64);
        if *mode == OverwriteMode::Trim {
            workload.discard_ahead_bytes = Some(trim_ahead);
        }
        settings.lockstep.wait();
        let write = driver::run(
            engine.as_mut(),
            &workload,
            control,
            progress,
            &mut |window| on_window(*mode, window),
        )?;
        if let Some(source) = write.error {
            return Err(BenchError::Io {
                what: format!("overwriting {}", mode.name()),
                source,
            });
        }
        let (before, after) = split_at_wrap(&write.windows, ring_bytes);
        stopped |= write.stopped;
        phases.push(OverwritePhase {
            mode: *mode,
            prepare_note,
            rate_before_wrap_bytes_per_s: before,
            rate_after_wrap_bytes_per_s: after,
            after_over_before: if before > 0.0 { after / before } else { 0.0 },
            write,
        });
        if stopped {
            break;
        }
    }
    Ok(OverwriteResult {
        meta,
        ring_bytes,
        phases,
        stopped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_ahead_saves_the_simulated_overwrite_cost() {
        let spec = "sim:capacity=256M,cache=0,slow=1GB/s,overwrite=0.5,latency=0";
        let target = crate::bench::open_sim(spec);
        let settings = OverwriteSettings {
            window_s: 0.01,
            ..OverwriteSettings::default()
        };
        let result = overwrite(
            &target,
            &settings,
            &Control::new(),
            &Progress::default(),
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(result.phases.len(), 2);
        let no_trim = &result.phases[0];
        let trim = &result.phases[1];
        assert!(
            (no_trim.rate_before_wrap_bytes_per_s / 1e9 - 1.0).abs() < 0.02,
            "{}",
            no_trim.rate_before_wrap_bytes_per_s
        );
        assert!(
            (no_trim.after_over_before - 0.5).abs() < 0.02,
            "{}",
            no_trim.after_over_before
        );
        assert!(
            (trim.after_over_before - 1.0).abs() < 0.02,
            "{}",
            trim.after_over_before
        );
        assert!(trim.write.bytes_discarded >= 256 << 20);
    }

    #[test]
    fn a_ring_beyond_the_target_or_a_target_below_the_smallest_ring_is_refused() {
        let run = |spec: &str, settings: &OverwriteSettings| {
            overwrite(
                &crate::bench::open_sim(spec),
                settings,
                &Control::new(),
                &Progress::default(),
                &mut |_, _| {},
            )
        };
        let asked = OverwriteSettings {
            size_bytes: Some(64 << 20),
            ..OverwriteSettings::default()
        };
        match run("sim:capacity=32M", &asked) {
            Err(BenchError::TargetTooSmall(error)) => {
                assert_eq!(
                    (error.needed_bytes, error.available_bytes),
                    (64 << 20, 32 << 20)
                );
                assert_eq!(error.remedy, "a --size of at most 32 MiB");
            }
            other => panic!("expected a refusal, got {:?}", other.map(|r| r.ring_bytes)),
        }
        // The whole target, smaller than two queues of 32 I/Os of 1 MiB.
        match run("sim:capacity=16M", &OverwriteSettings::default()) {
            Err(BenchError::TargetTooSmall(error)) => {
                assert_eq!(
                    (error.needed_bytes, error.available_bytes),
                    (64 << 20, 16 << 20)
                );
                assert!(error.remedy.contains("--queue-depth"), "{error}");
            }
            other => panic!("expected a refusal, got {:?}", other.map(|r| r.ring_bytes)),
        }
        // A ring asked for within the target runs within it.
        let within = OverwriteSettings {
            size_bytes: Some(8 << 20),
            queue_depth: 2,
            modes: vec![OverwriteMode::NoTrim],
            ..OverwriteSettings::default()
        };
        assert_eq!(
            run("sim:capacity=32M", &within).unwrap().ring_bytes,
            8 << 20
        );
    }

    #[test]
    fn the_wrap_splits_the_series_where_the_ring_ends() {
        let window = |start_s: f64, bytes: u64, total_bytes: u64| Window {
            start_s,
            duration_s: 1.0,
            bytes,
            total_bytes,
            position_bytes: 0,
            rate_bytes_per_s: bytes as f64,
            latency_max_us: 0.0,
        };
        // 100 bytes/s for two seconds, then 50 bytes/s: the ring of 200 bytes wraps at 2 s.
        let windows = [
            window(0.0, 100, 100),
            window(1.0, 100, 200),
            window(2.0, 50, 250),
            window(3.0, 50, 300),
        ];
        assert_eq!(split_at_wrap(&windows, 200), (100.0, 50.0));
    }
}
