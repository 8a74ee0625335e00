//! Drive health sampled during long runs (`record`, `bench fill`, `selftest`): the options,
//! live warnings on stderr, and the summary lines.

use clap::Args;
use nvrec::nvme::monitor::{HealthMonitor, Telemetry, INTERVAL_DEFAULT};
use nvrec::unit::format_bytes;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct TelemetryArgs {
    /// How often to sample the SMART log of NVMe targets during the run.
    #[arg(long, value_parser = crate::args::duration_arg, default_value = "5s")]
    health_interval: Duration,
    /// Do not sample drive health during the run.
    #[arg(long)]
    no_health: bool,
}

impl Default for TelemetryArgs {
    fn default() -> Self {
        TelemetryArgs {
            health_interval: INTERVAL_DEFAULT,
            no_health: false,
        }
    }
}

impl TelemetryArgs {
    /// How often to sample; none: not at all.
    pub fn interval(&self) -> Option<Duration> {
        (!self.no_health).then_some(self.health_interval)
    }
}

/// Where drive health warnings of a run go: stderr, as they happen.
pub fn warnings() -> nvrec::nvme::monitor::EventSink {
    Box::new(|event| errln!("nvrec: warning: {event}"))
}

/// Starts sampling the NVMe devices among `paths`; warnings go to stderr as they happen.
pub fn start(paths: &[PathBuf], args: &TelemetryArgs) -> Option<HealthMonitor> {
    if args.no_health || nvrec::nvme::nvme_paths(paths).is_empty() {
        return None;
    }
    let interval = args.health_interval.max(Duration::from_millis(100));
    Some(HealthMonitor::start(paths, interval, warnings()))
}

pub fn finish(monitor: Option<HealthMonitor>) -> Option<Telemetry> {
    monitor.map(HealthMonitor::stop)
}

/// Summary lines for the human report.
pub fn text(telemetry: &Telemetry) -> String {
    let mut out = String::new();
    for device in &telemetry.devices {
        let range = match (
            device.temperature_min_celsius,
            device.temperature_max_celsius,
        ) {
            (Some(low), Some(high)) => format!("{low:.0}-{high:.0} °C"),
            _ => "no samples".to_string(),
        };
        let _ = writeln!(
            out,
            "  health {}: {range}, throttled {} s ({} transitions), host wrote {}{}",
            device.device,
            device.throttled_seconds,
            device.throttle_transitions,
            format_bytes(device.host_written_bytes),
            device
                .write_amplification
                .map(|factor| format!(", write amplification {factor:.2}"))
                .unwrap_or_default()
        );
    }
    for (path, why) in &telemetry.not_sampled {
        let _ = writeln!(out, "  health {path}: not sampled ({why})");
    }
    out
}
