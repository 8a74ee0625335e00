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

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Telemetry {
    pub interval_s: f64,
    pub devices: Vec<DeviceTelemetry>,
    /// Targets that were not sampled, with the reason.
    pub not_sampled: Vec<(String, String)>,
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
    over_warning: bool,
}

/// What the sampling thread hands back: each drive's telemetry, the events kept, the count of
/// events dropped.
type Sampling = (Vec<DeviceTelemetry>, Vec<HealthEvent>, u64);

/// The running monitor; [`HealthMonitor::stop`] ends it and returns the telemetry.
pub struct HealthMonitor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Sampling>>,
    interval: Duration,
    not_sampled: Vec<(String, String)>,
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

fn open_sampled(path: &Path) -> Result<Sampled, String> {
    if !super::is_nvme_path(path) {
        return Err("not an NVMe device".to_string());
    }
    let report: HealthReport = super::read_health(path).map_err(|error| error.to_string())?;
    let admin = Admin::open(path).map_err(|error| error.to_string())?;
    let media_first = physical_media_written(&admin);
    Ok(Sampled {
        admin,
        warning_kelvin: report.warning_temperature_kelvin,
        telemetry: DeviceTelemetry {
            device: path.display().to_string(),
            model: report.model,
            serial: report.serial,
            warning_temperature_celsius: (report.warning_temperature_kelvin != 0)
                .then(|| kelvin_to_celsius(report.warning_temperature_kelvin)),
            samples: Vec::new(),
            failed_sample_count: 0,
            temperature_min_celsius: None,
            temperature_max_celsius: None,
            throttled_seconds: 0,
            throttle_transitions: 0,
            host_written_bytes: 0,
            write_amplification: None,
            write_amplification_note: None,
        },
        first: None,
        last: None,
        media_first,
        over_warning: false,
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
            next += interval;
        }
        if stopping {
            break;
        }
        std::thread::sleep(Duration::from_millis(50).min(interval));
    }
    let devices = sampled.into_iter().map(summarize).collect();
    (devices, events, dropped)
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
    let name = device.telemetry.device.clone();
    let temperature = kelvin_to_celsius(log.composite_temperature_kelvin);
    let mut events = Vec::new();
    if let Some(last) = &device.last {
        if log.throttle_transitions() > last.throttle_transitions()
            || log.throttled_seconds() > last.throttled_seconds()
        {
            events.push(HealthEvent::StartedThrottling {
                device: name.clone(),
                t_s,
                temperature_celsius: temperature,
            });
        }
        let new_warnings = log.critical_warning & !last.critical_warning;
        if new_warnings != 0 {
            events.push(HealthEvent::CriticalWarning {
                device: name.clone(),
                t_s,
                warnings: log.critical_warning_names(),
            });
        }
    } else if log.critical_warning != 0 {
        events.push(HealthEvent::CriticalWarning {
            device: name.clone(),
            t_s,
            warnings: log.critical_warning_names(),
        });
    }
    let over =
        device.warning_kelvin != 0 && log.composite_temperature_kelvin >= device.warning_kelvin;
    if over && !device.over_warning {
        events.push(HealthEvent::CrossedWarningTemperature {
            device: name,
            t_s,
            temperature_celsius: temperature,
            warning_celsius: kelvin_to_celsius(device.warning_kelvin),
        });
    }
    device.over_warning = over;
    device.telemetry.samples.push(HealthSample::new(t_s, &log));
    if device.first.is_none() {
        device.first = Some(log.clone());
    }
    device.last = Some(log);
    events
}

fn summarize(mut device: Sampled) -> DeviceTelemetry {
    let telemetry = &mut device.telemetry;
    let temperatures = telemetry
        .samples
        .iter()
        .map(|sample| sample.composite_temperature_celsius);
    telemetry.temperature_min_celsius = temperatures.clone().reduce(f64::min);
    telemetry.temperature_max_celsius = temperatures.reduce(f64::max);
    if let (Some(first), Some(last)) = (&device.first, &device.last) {
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
        let media_last = physical_media_written(&device.admin);
        match (device.media_first, media_last) {
            (Some(media_first), Some(media_last)) if host > 0 => {
                telemetry.write_amplification =
                    Some(media_last.saturating_sub(media_first) as f64 / host as f64);
            }
            (Some(_), Some(_)) => {
                telemetry.write_amplification_note =
                    Some("the host wrote less than one data unit".to_string());
            }
            _ => {
                telemetry.write_amplification_note = Some(
                    "the drive does not expose media writes (no OCP extended SMART log)"
                        .to_string(),
                );
            }
        }
    }
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
        assert!(telemetry.not_sampled[0].1.contains("not an NVMe device"));
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
