//! Telemetry during long runs: a thread samples the SMART log of every NVMe device of a run
//! (default every 5 s), keeps the series, and reports events as they happen: a drive starts
//! throttling (a thermal-management transition count or time grows), crosses its warning
//! temperature, or raises a critical warning bit. At the end it summarizes each drive: the
//! temperature range, the seconds spent throttled, the bytes the host wrote during the run,
//! and the write amplification where the drive exposes its media writes.
//!
//! What it deliberately does not do: sample anything but NVMe devices (the others are listed
//! with the reason), or slow the run: it never touches the data path, and a failed sample is
//! counted and skipped.

use super::admin::Admin;
use super::page::{kelvin_to_celsius, SmartLog};
use super::{physical_media_written, read_smart, HealthReport};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Default sampling interval.
pub const INTERVAL_DEFAULT: Duration = Duration::from_secs(5);
/// Most events kept for the summary; later ones are still reported live, and counted.
const EVENT_COUNT_MAX: usize = 1000;

/// Called on the sampling thread for each event, as it happens (print a warning).
pub type EventSink = Box<dyn FnMut(&HealthEvent) + Send>;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HealthSample {
    /// Seconds since the monitor started.
    pub t_s: f64,
    pub composite_temperature_celsius: f64,
    pub sensor_temperatures_celsius: Vec<f64>,
    pub thermal_transition_count: [u32; 2],
    pub thermal_time_seconds: [u32; 2],
    pub data_units_written: u64,
    pub critical_warning: u8,
}

impl HealthSample {
    fn new(t_s: f64, log: &SmartLog) -> HealthSample {
        HealthSample {
            t_s,
            composite_temperature_celsius: kelvin_to_celsius(log.composite_temperature_kelvin),
            sensor_temperatures_celsius: log
                .temperature_sensors_kelvin
                .iter()
                .filter(|kelvin| **kelvin != 0)
                .map(|kelvin| kelvin_to_celsius(*kelvin))
                .collect(),
            thermal_transition_count: log.thermal_transition_count,
            thermal_time_seconds: log.thermal_time_seconds,
            data_units_written: u64::try_from(log.data_units_written).unwrap_or(u64::MAX),
            critical_warning: log.critical_warning,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum HealthEvent {
    StartedThrottling {
        device: String,
        t_s: f64,
        temperature_celsius: f64,
    },
    CrossedWarningTemperature {
        device: String,
        t_s: f64,
        temperature_celsius: f64,
        warning_celsius: f64,
    },
    CriticalWarning {
        device: String,
        t_s: f64,
        warnings: Vec<&'static str>,
    },
}

impl std::fmt::Display for HealthEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HealthEvent::StartedThrottling {
                device,
                t_s,
                temperature_celsius,
            } => write!(f, "{device} started throttling at {temperature_celsius:.0} °C ({t_s:.0} s in)"),
            HealthEvent::CrossedWarningTemperature {
                device,
                t_s,
                temperature_celsius,
                warning_celsius,
            } => write!(
                f,
                "{device} is at {temperature_celsius:.0} °C, above its warning temperature of {warning_celsius:.0} °C ({t_s:.0} s in)"
            ),
            HealthEvent::CriticalWarning {
                device,
                t_s,
                warnings,
            } => write!(f, "{device} raised a critical warning: {} ({t_s:.0} s in)", warnings.join(", ")),
        }
    }
}

/// A drive's telemetry over the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceTelemetry {
    pub device: String,
    pub model: String,
    pub serial: String,
    pub warning_temperature_celsius: Option<f64>,
    pub samples: Vec<HealthSample>,
    pub failed_sample_count: u64,
    pub temperature_min_celsius: Option<f64>,
    pub temperature_max_celsius: Option<f64>,
    /// Thermal-management seconds and transitions added during the run.
    pub throttled_seconds: u64,
    pub throttle_transitions: u64,
    /// What the host wrote during the run, from the data-units counter (1000 x 512 bytes
    /// resolution).
    pub host_written_bytes: u64,
    /// Media bytes written over host bytes written, where the drive exposes media writes.
    pub write_amplification: Option<f64>,
    /// Why there is no write amplification, when there is none.
    pub write_amplification_note: Option<String>,
}

impl DeviceTelemetry {
    /// A drive's telemetry before the first sample.
    fn new(device: String, model: String, serial: String, warning_kelvin: u16) -> DeviceTelemetry {
        DeviceTelemetry {
            device,
            model,
            serial,
            warning_temperature_celsius: (warning_kelvin != 0)
                .then(|| kelvin_to_celsius(warning_kelvin)),
            samples: Vec::new(),
            failed_sample_count: 0,
            temperature_min_celsius: None,
            temperature_max_celsius: None,
            throttled_seconds: 0,
            throttle_transitions: 0,
            host_written_bytes: 0,
            write_amplification: None,
            write_amplification_note: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Telemetry {
    pub interval_s: f64,
    pub devices: Vec<DeviceTelemetry>,
    /// Targets that were not sampled, with the reason.
    pub not_sampled: Vec<(String, NotSampled)>,
    pub events: Vec<HealthEvent>,
    /// Events beyond the ones kept.
    pub dropped_event_count: u64,
}

struct Sampled {
    admin: Admin,
    telemetry: DeviceTelemetry,
    warning_kelvin: u16,
    first: Option<SmartLog>,
    last: Option<SmartLog>,
    media_first: Option<u64>,
    state: EventState,
}

/// What the sampling thread hands back: each drive's telemetry, the events kept, the count of
/// events dropped.
type Sampling = (Vec<DeviceTelemetry>, Vec<HealthEvent>, u64);

/// The running monitor; [`HealthMonitor::stop`] ends it and returns the telemetry.
pub struct HealthMonitor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Sampling>>,
    interval: Duration,
    not_sampled: Vec<(String, NotSampled)>,
}

impl HealthMonitor {
    /// Starts sampling every NVMe device among `paths` every `interval`; `on_event` hears of
    /// each event as it happens. Files and other devices are listed as not sampled, with why.
    pub fn start(paths: &[PathBuf], interval: Duration, on_event: EventSink) -> HealthMonitor {
        let mut sampled = Vec::new();
        let mut not_sampled = Vec::new();
        for path in paths {
            match open_sampled(path) {
                Ok(one) => sampled.push(one),
                Err(why) => not_sampled.push((path.display().to_string(), why)),
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = if sampled.is_empty() {
            None
        } else {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("nvrec-health".to_string())
                .spawn(move || sample_loop(sampled, interval, &stop, on_event))
                .ok()
        };
        HealthMonitor {
            stop,
            thread,
            interval,
            not_sampled,
        }
    }

    /// Whether any target is being sampled.
    pub fn is_sampling(&self) -> bool {
        self.thread.is_some()
    }

    /// Takes a last sample, stops, and summarizes.
    pub fn stop(mut self) -> Telemetry {
        self.stop.store(true, Ordering::Relaxed);
        let (devices, events, dropped) = match self.thread.take() {
            Some(thread) => thread.join().unwrap_or_default(),
            None => Default::default(),
        };
        Telemetry {
            interval_s: self.interval.as_secs_f64(),
            devices,
            not_sampled: std::mem::take(&mut self.not_sampled),
            events,
            dropped_event_count: dropped,
        }
    }
}

/// Why a target is not sampled; in JSON, its message.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotSampled {
    #[error("not an NVMe device")]
    NotNvme,
    #[error(transparent)]
    Health(Arc<super::NvmeError>),
    #[error(transparent)]
    Admin(Arc<super::admin::AdminError>),
}

impl PartialEq for NotSampled {
    fn eq(&self, other: &NotSampled) -> bool {
        self.to_string() == other.to_string()
    }
}

impl serde::Serialize for NotSampled {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

fn open_sampled(path: &Path) -> Result<Sampled, NotSampled> {
    if !super::is_nvme_path(path) {
        return Err(NotSampled::NotNvme);
    }
    let report: HealthReport =
        super::read_health(path).map_err(|error| NotSampled::Health(Arc::new(error)))?;
    let admin = Admin::open(path).map_err(|error| NotSampled::Admin(Arc::new(error)))?;
    let media_first = physical_media_written(&admin);
    Ok(Sampled {
        admin,
        warning_kelvin: report.warning_temperature_kelvin,
        telemetry: DeviceTelemetry::new(
            path.display().to_string(),
            report.model,
            report.serial,
            report.warning_temperature_kelvin,
        ),
        first: None,
        last: None,
        media_first,
        state: EventState::default(),
    })
}

fn sample_loop(
    mut sampled: Vec<Sampled>,
    interval: Duration,
    stop: &AtomicBool,
    mut on_event: EventSink,
) -> Sampling {
    let started = Instant::now();
    let mut events = Vec::new();
    let mut dropped = 0u64;
    let mut next = Instant::now();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping || Instant::now() >= next {
            let t_s = started.elapsed().as_secs_f64();
            for device in &mut sampled {
                for event in sample_once(device, t_s) {
                    on_event(&event);
                    if events.len() < EVENT_COUNT_MAX {
                        events.push(event);
                    } else {
                        dropped += 1;
                    }
                }
            }
            // After a slow sample, the next one comes an interval later, not in a burst.
            next += interval;
            let now = Instant::now();
            if next < now {
                next = now + interval;
            }
        }
        if stopping {
            break;
        }
        std::thread::sleep(Duration::from_millis(50).min(interval));
    }
    let devices = sampled.into_iter().map(summarize).collect();
    (devices, events, dropped)
}

/// Whether a drive was over its warning temperature, and throttling, at the last sample: what
/// [`detect_events`] needs to report the start of a condition once rather than every sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct EventState {
    over_warning: bool,
    throttling: bool,
}

/// The events `current` shows after `previous` (`None` for the first sample) on a drive whose
/// warning composite temperature is `warning_kelvin` (0 = not reported), updating `state`.
///
/// - Started throttling: a thermal-management transition count grew (a new entry into
///   throttling, reported every time), or a thermal-management time grew after a sample
///   interval in which it did not (a throttling episode that began without a counted
///   transition, reported once per episode rather than every interval it lasts).
/// - Crossed warning temperature: composite >= WCTEMP now, and not at the last sample.
/// - Critical warning: bits set that were not set at the last sample (any set bit on the first
///   sample); the event names every bit set now.
fn detect_events(
    device: &str,
    t_s: f64,
    previous: Option<&SmartLog>,
    current: &SmartLog,
    warning_kelvin: u16,
    state: &mut EventState,
) -> Vec<HealthEvent> {
    let temperature = kelvin_to_celsius(current.composite_temperature_kelvin);
    let mut events = Vec::new();
    let (new_transitions, time_grew, new_warnings) = match previous {
        Some(last) => (
            current.throttle_transitions() > last.throttle_transitions(),
            current.throttled_seconds() > last.throttled_seconds(),
            current.critical_warning & !last.critical_warning,
        ),
        None => (false, false, current.critical_warning),
    };
    if new_transitions || (time_grew && !state.throttling) {
        events.push(HealthEvent::StartedThrottling {
            device: device.to_string(),
            t_s,
            temperature_celsius: temperature,
        });
    }
    state.throttling = new_transitions || time_grew;
    if new_warnings != 0 {
        events.push(HealthEvent::CriticalWarning {
            device: device.to_string(),
            t_s,
            warnings: current.critical_warning_names(),
        });
    }
    let over = warning_kelvin != 0 && current.composite_temperature_kelvin >= warning_kelvin;
    if over && !state.over_warning {
        events.push(HealthEvent::CrossedWarningTemperature {
            device: device.to_string(),
            t_s,
            temperature_celsius: temperature,
            warning_celsius: kelvin_to_celsius(warning_kelvin),
        });
    }
    state.over_warning = over;
    events
}

/// Takes one sample and returns the events it shows.
fn sample_once(device: &mut Sampled, t_s: f64) -> Vec<HealthEvent> {
    let log = match read_smart(&device.admin) {
        Ok(log) => log,
        Err(_) => {
            device.telemetry.failed_sample_count += 1;
            return Vec::new();
        }
    };
    let events = detect_events(
        &device.telemetry.device,
        t_s,
        device.last.as_ref(),
        &log,
        device.warning_kelvin,
        &mut device.state,
    );
    device.telemetry.samples.push(HealthSample::new(t_s, &log));
    if device.first.is_none() {
        device.first = Some(log.clone());
    }
    device.last = Some(log);
    events
}

/// Note for a run whose drive does not expose media writes.
const MEDIA_WRITES_NOT_EXPOSED: &str =
    "not exposed: the drive has no OCP extended SMART log (media writes)";

/// Fills the summary fields of `telemetry` from its samples, the first and last SMART logs,
/// and the media bytes written (OCP log) at the start and the end.
fn summarize_into(
    telemetry: &mut DeviceTelemetry,
    first: Option<&SmartLog>,
    last: Option<&SmartLog>,
    media_first: Option<u64>,
    media_last: Option<u64>,
) {
    let temperatures = telemetry
        .samples
        .iter()
        .map(|sample| sample.composite_temperature_celsius);
    telemetry.temperature_min_celsius = temperatures.clone().reduce(f64::min);
    telemetry.temperature_max_celsius = temperatures.reduce(f64::max);
    let (Some(first), Some(last)) = (first, last) else {
        telemetry.write_amplification_note = Some("no sample was taken".to_string());
        return;
    };
    telemetry.throttled_seconds = last
        .throttled_seconds()
        .saturating_sub(first.throttled_seconds());
    telemetry.throttle_transitions = last
        .throttle_transitions()
        .saturating_sub(first.throttle_transitions());
    let host = last
        .data_written_bytes()
        .saturating_sub(first.data_written_bytes());
    telemetry.host_written_bytes = u64::try_from(host).unwrap_or(u64::MAX);
    match (media_first, media_last) {
        (Some(media_first), Some(media_last)) if host > 0 => {
            telemetry.write_amplification =
                Some(media_last.saturating_sub(media_first) as f64 / host as f64);
        }
        (Some(_), Some(_)) => {
            telemetry.write_amplification_note =
                Some("the host wrote less than one data unit".to_string());
        }
        _ => {
            telemetry.write_amplification_note = Some(MEDIA_WRITES_NOT_EXPOSED.to_string());
        }
    }
}

fn summarize(mut device: Sampled) -> DeviceTelemetry {
    let media_last = if device.last.is_some() {
        physical_media_written(&device.admin)
    } else {
        None
    };
    summarize_into(
        &mut device.telemetry,
        device.first.as_ref(),
        device.last.as_ref(),
        device.media_first,
        media_last,
    );
    device.telemetry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_other_devices_are_not_sampled() {
        let monitor = HealthMonitor::start(
            &[PathBuf::from("/dev/null"), std::env::temp_dir()],
            Duration::from_millis(10),
            Box::new(|_| {}),
        );
        assert!(!monitor.is_sampling());
        let telemetry = monitor.stop();
        assert!(telemetry.devices.is_empty());
        assert_eq!(telemetry.not_sampled.len(), 2);
        assert!(matches!(telemetry.not_sampled[0].1, NotSampled::NotNvme));
        let json = serde_json::to_value(&telemetry).unwrap();
        assert_eq!(json["not_sampled"][0][1], "not an NVMe device");
    }

    /// A SMART log with the fields the monitor watches.
    fn log(kelvin: u16, transitions: [u32; 2], throttle_s: [u32; 2], warning: u8) -> SmartLog {
        let zeros = [0u8; crate::nvme::page::SMART_LOG_BYTES];
        let log = crate::nvme::page::decode_smart_log(&zeros).unwrap();
        SmartLog {
            critical_warning: warning,
            composite_temperature_kelvin: kelvin,
            thermal_transition_count: transitions,
            thermal_time_seconds: throttle_s,
            ..log
        }
    }

    fn names(events: &[HealthEvent]) -> Vec<&'static str> {
        events
            .iter()
            .map(|event| match event {
                HealthEvent::StartedThrottling { .. } => "throttling",
                HealthEvent::CrossedWarningTemperature { .. } => "warning",
                HealthEvent::CriticalWarning { .. } => "critical",
            })
            .collect()
    }

    #[test]
    fn events_mark_the_start_of_each_condition() {
        // (composite K, transitions, throttle seconds, critical warning, events expected)
        type Step = (u16, [u32; 2], [u32; 2], u8, &'static [&'static str]);
        let steps: [Step; 9] = [
            (330, [0, 0], [0, 0], 0, &[]),
            (340, [0, 0], [0, 0], 0, &[]),
            (343, [0, 0], [0, 0], 0, &["warning"]), // reaches WCTEMP 343 K
            (345, [1, 0], [3, 0], 0, &["throttling"]), // a new transition
            (346, [1, 0], [8, 0], 0, &[]),          // the same episode goes on
            (342, [1, 0], [8, 0], 0, &[]),          // cools below WCTEMP, stops
            (344, [1, 0], [9, 0], 0, &["throttling", "warning"]), // time grows again
            (344, [1, 1], [9, 4], 0b10, &["throttling", "critical"]), // heavier throttling
            (344, [1, 1], [9, 4], 0b110, &["critical"]), // one more bit
        ];
        let mut state = EventState::default();
        let mut previous: Option<SmartLog> = None;
        for (index, (kelvin, transitions, seconds, warning, expected)) in steps.iter().enumerate() {
            let current = log(*kelvin, *transitions, *seconds, *warning);
            let events = detect_events(
                "/dev/nvme0n1",
                index as f64,
                previous.as_ref(),
                &current,
                343,
                &mut state,
            );
            assert_eq!(names(&events), *expected, "step {index}");
            previous = Some(current);
        }
    }

    #[test]
    fn a_warning_already_set_is_reported_on_the_first_sample() {
        let mut state = EventState::default();
        let events = detect_events("d", 0.0, None, &log(300, [5, 0], [60, 0], 1), 0, &mut state);
        match &events[..] {
            [HealthEvent::CriticalWarning { warnings, .. }] => {
                assert_eq!(warnings, &["available_spare"])
            }
            other => panic!("{other:?}"),
        }
        // No threshold reported (0): never "crossed".
        let events = detect_events("d", 1.0, None, &log(400, [0, 0], [0, 0], 0), 0, &mut state);
        assert!(events.is_empty(), "{events:?}");
    }

    fn telemetry_with(temperatures_kelvin: &[u16]) -> DeviceTelemetry {
        let mut telemetry =
            DeviceTelemetry::new("/dev/nvme0n1".to_string(), String::new(), String::new(), 0);
        telemetry.samples = temperatures_kelvin
            .iter()
            .enumerate()
            .map(|(index, kelvin)| {
                HealthSample::new(index as f64, &log(*kelvin, [0, 0], [0, 0], 0))
            })
            .collect();
        telemetry
    }

    #[test]
    fn the_summary_takes_deltas_over_the_run() {
        let mut first = log(320, [2, 0], [100, 5], 0);
        first.data_units_written = 1_000;
        let mut last = log(350, [4, 1], [130, 7], 0);
        last.data_units_written = 3_000;
        let mut telemetry = telemetry_with(&[320, 350, 335]);
        summarize_into(
            &mut telemetry,
            Some(&first),
            Some(&last),
            Some(1 << 30),
            Some((1 << 30) + 2_048_000_000),
        );
        assert!((telemetry.temperature_min_celsius.unwrap() - 46.85).abs() < 1e-9);
        assert!((telemetry.temperature_max_celsius.unwrap() - 76.85).abs() < 1e-9);
        assert_eq!(telemetry.throttled_seconds, 32);
        assert_eq!(telemetry.throttle_transitions, 3);
        assert_eq!(telemetry.host_written_bytes, 2_000 * 512_000);
        assert_eq!(telemetry.write_amplification, Some(2.0));
        assert_eq!(telemetry.write_amplification_note, None);

        let mut telemetry = telemetry_with(&[320]);
        summarize_into(&mut telemetry, Some(&first), Some(&last), None, None);
        assert_eq!(telemetry.write_amplification, None);
        assert!(telemetry
            .write_amplification_note
            .as_deref()
            .unwrap()
            .starts_with("not exposed"));

        let mut telemetry = telemetry_with(&[]);
        summarize_into(&mut telemetry, None, None, None, None);
        assert_eq!(telemetry.temperature_min_celsius, None);
        assert_eq!(telemetry.host_written_bytes, 0);
    }

    #[test]
    fn counters_that_go_backwards_do_not_underflow() {
        // A drive reset between samples (or a counter wrap) must not panic the summary.
        let first = log(320, [9, 9], [900, 900], 0);
        let last = log(320, [0, 0], [0, 0], 0);
        let mut telemetry = telemetry_with(&[320]);
        summarize_into(&mut telemetry, Some(&first), Some(&last), Some(10), Some(5));
        assert_eq!(
            (telemetry.throttled_seconds, telemetry.throttle_transitions),
            (0, 0)
        );
    }

    #[test]
    fn events_read_like_warnings() {
        let event = HealthEvent::CrossedWarningTemperature {
            device: "/dev/nvme0n1".to_string(),
            t_s: 12.0,
            temperature_celsius: 79.6,
            warning_celsius: 75.0,
        };
        assert_eq!(
            event.to_string(),
            "/dev/nvme0n1 is at 80 °C, above its warning temperature of 75 °C (12 s in)"
        );
    }
}
