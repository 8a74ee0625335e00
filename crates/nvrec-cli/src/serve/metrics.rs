//! `GET /metrics`: the service's counters in the OpenMetrics text format (which Prometheus
//! scrapes), encoded by the `prometheus-client` crate.
//!
//! Prometheus asks for OpenMetrics (its `Accept` header says so) and gets it; any other
//! client (curl, `promtool check metrics`) gets the same metrics in Prometheus' classic text
//! format 0.0.4 ([`to_classic_text`]), whose counter families carry their `_total` name.
//!
//! Each scrape reads the live counters of every recording (the writer's atomics, see
//! `nvrec::recording::counters`) and the last drive health poll, and encodes them as they
//! are: nothing is kept between scrapes, and a scrape never waits for a recording or a drive.
//! Names follow Prometheus' conventions: `nvrec_` first, base units (bytes, seconds, ratios
//! of 0..1) in the name, `_total` on counters (the encoder adds it), labels for what tells
//! series apart (recording, member, path, cause, device).

use super::drives::{self, DriveStatus};
use super::registry::Recording;
use super::Service;
use nvrec::recording::counters::LossCause;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;

type Labels = Vec<(String, String)>;

/// One sample of a family.
#[derive(Debug, Clone)]
enum Value {
    Counter(f64),
    Gauge(f64),
    /// Buckets (upper bound in seconds, observations in this bucket alone: the encoder
    /// accumulates them), sum in seconds, count.
    Histogram(Vec<(f64, u64)>, f64, u64),
}

/// A metric family: name, help, type and its samples.
#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    samples: Vec<(Labels, Value)>,
}

/// Everything one scrape shows, read at once.
#[derive(Debug)]
struct Scrape {
    families: Vec<Family>,
}

/// Encodes one sample with the metric type its family declared.
struct Sample<'a>(&'a Value);

impl EncodeMetric for Sample<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.0 {
            Value::Counter(value) => encoder
                .encode_counter::<prometheus_client::encoding::NoLabelSet, f64, f64>(value, None),
            Value::Gauge(value) => encoder.encode_gauge(value),
            Value::Histogram(buckets, sum, count) => encoder
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    *sum, *count, buckets, None,
                ),
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.0 {
            Value::Counter(_) => MetricType::Counter,
            Value::Gauge(_) => MetricType::Gauge,
            Value::Histogram(..) => MetricType::Histogram,
        }
    }
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.families {
            if family.samples.is_empty() {
                continue;
            }
            let mut metric =
                encoder.encode_descriptor(family.name, family.help, None, family.kind)?;
            for (labels, value) in &family.samples {
                Sample(value).encode(metric.encode_family(labels)?)?;
            }
        }
        Ok(())
    }
}

fn family(name: &'static str, help: &'static str, kind: MetricType) -> Family {
    Family {
        name,
        help,
        kind,
        samples: Vec::new(),
    }
}

fn labels(pairs: &[(&str, String)]) -> Labels {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.clone()))
        .collect()
}

/// Families in the order they are shown.
struct Families {
    member_written: Family,
    member_writes: Family,
    member_latency: Family,
    member_in_flight: Family,
    member_queue_depth: Family,
    member_retired: Family,
    recording_running: Family,
    recording_input: Family,
    recording_recorded: Family,
    recording_durable: Family,
    recording_lost: Family,
    recording_dropped: Family,
    recording_buffer_occupancy: Family,
    recording_buffer_size: Family,
    recording_checkpoints: Family,
    recording_checkpoint_lag_seconds: Family,
    recording_checkpoint_lag_bytes: Family,
    recording_retirements: Family,
    drive_temperature: Family,
    drive_throttled: Family,
    drive_used: Family,
    drive_critical_warning: Family,
}

impl Families {
    fn new() -> Families {
        use MetricType::{Counter, Gauge, Histogram};
        Families {
            member_written: family(
                "nvrec_member_written_bytes",
                "Bytes of completed writes to the member (whole chunks, headers included).",
                Counter,
            ),
            member_writes: family(
                "nvrec_member_writes",
                "Writes completed on the member.",
                Counter,
            ),
            member_latency: family(
                "nvrec_member_write_latency_seconds",
                "Time from submission to completion of each write to the member.",
                Histogram,
            ),
            member_in_flight: family(
                "nvrec_member_queue_depth_in_use",
                "Writes in flight on the member now.",
                Gauge,
            ),
            member_queue_depth: family(
                "nvrec_member_queue_depth",
                "Writes the member may have in flight.",
                Gauge,
            ),
            member_retired: family(
                "nvrec_member_retired",
                "1 once the member failed and was retired from the recording.",
                Gauge,
            ),
            recording_running: family(
                "nvrec_recording_running",
                "1 while the recording runs, 0 once it has ended.",
                Gauge,
            ),
            recording_input: family(
                "nvrec_recording_input_bytes",
                "Stream bytes the input delivered: recorded and lost.",
                Counter,
            ),
            recording_recorded: family(
                "nvrec_recording_recorded_bytes",
                "Stream bytes written to the members, in order (the completed frontier).",
                Counter,
            ),
            recording_durable: family(
                "nvrec_recording_durable_bytes",
                "Stream bytes a checkpoint has made durable.",
                Counter,
            ),
            recording_lost: family(
                "nvrec_recording_lost_bytes",
                "Input bytes lost, by cause (marked in the recording as gaps).",
                Counter,
            ),
            recording_dropped: family(
                "nvrec_recording_kernel_dropped_datagrams",
                "Datagrams or frames the kernel dropped before the recorder read them.",
                Counter,
            ),
            recording_buffer_occupancy: family(
                "nvrec_recording_buffer_occupancy_ratio",
                "Buffers of the pool in use (filled, or being written), from 0 to 1.",
                Gauge,
            ),
            recording_buffer_size: family(
                "nvrec_recording_buffer_size_bytes",
                "Size of the recording's buffer pool.",
                Gauge,
            ),
            recording_checkpoints: family(
                "nvrec_recording_checkpoints",
                "Checkpoints made durable.",
                Counter,
            ),
            recording_checkpoint_lag_seconds: family(
                "nvrec_recording_checkpoint_lag_seconds",
                "Time since the last durable checkpoint (what a crash now would lose).",
                Gauge,
            ),
            recording_checkpoint_lag_bytes: family(
                "nvrec_recording_checkpoint_lag_bytes",
                "Recorded stream bytes not yet made durable by a checkpoint.",
                Gauge,
            ),
            recording_retirements: family(
                "nvrec_recording_retirements",
                "Members retired from the recording after a failure.",
                Counter,
            ),
            drive_temperature: family(
                "nvrec_drive_temperature_celsius",
                "Composite temperature of the NVMe drive.",
                Gauge,
            ),
            drive_throttled: family(
                "nvrec_drive_throttled_seconds",
                "Time the drive spent throttled for temperature (its SMART log's count).",
                Counter,
            ),
            drive_used: family(
                "nvrec_drive_endurance_used_ratio",
                "The drive's estimate of its life used (percentage used / 100; may exceed 1).",
                Gauge,
            ),
            drive_critical_warning: family(
                "nvrec_drive_critical_warning",
                "The drive's critical warning bits (0: none).",
                Gauge,
            ),
        }
    }

    fn into_vec(self) -> Vec<Family> {
        vec![
            self.member_written,
            self.member_writes,
            self.member_latency,
            self.member_in_flight,
            self.member_queue_depth,
            self.member_retired,
            self.recording_running,
            self.recording_input,
            self.recording_recorded,
            self.recording_durable,
            self.recording_lost,
            self.recording_dropped,
            self.recording_buffer_occupancy,
            self.recording_buffer_size,
            self.recording_checkpoints,
            self.recording_checkpoint_lag_seconds,
            self.recording_checkpoint_lag_bytes,
            self.recording_retirements,
            self.drive_temperature,
            self.drive_throttled,
            self.drive_used,
            self.drive_critical_warning,
        ]
    }

    fn add_recording(&mut self, recording: &Recording) {
        let Some(counters) = recording.counters() else {
            return; // Not begun: nothing to count yet.
        };
        let id = recording.id.to_string();
        let base = labels(&[("recording", id.clone()), ("name", recording.label.clone())]);
        let running = recording.ended().is_none();
        let progress = &recording.handle.progress;
        let recorded = progress.done_bytes.load(Ordering::Relaxed);
        let durable = progress.durable_bytes.load(Ordering::Relaxed);
        let lost = progress.lost_bytes.load(Ordering::Relaxed);
        let push = |family: &mut Family, labels: Labels, value: Value| {
            family.samples.push((labels, value));
        };
        push(
            &mut self.recording_running,
            base.clone(),
            Value::Gauge(if running { 1.0 } else { 0.0 }),
        );
        push(
            &mut self.recording_input,
            base.clone(),
            Value::Counter((recorded + lost) as f64),
        );
        push(
            &mut self.recording_recorded,
            base.clone(),
            Value::Counter(recorded as f64),
        );
        push(
            &mut self.recording_durable,
            base.clone(),
            Value::Counter(durable as f64),
        );
        for cause in LossCause::ALL {
            let mut with_cause = base.clone();
            with_cause.push(("cause".into(), cause.name().into()));
            push(
                &mut self.recording_lost,
                with_cause,
                Value::Counter(counters.lost_bytes(cause) as f64),
            );
        }
        if let Some(network) = &recording.handle.network.get() {
            push(
                &mut self.recording_dropped,
                base.clone(),
                Value::Counter(network.snapshot().dropped_socket as f64),
            );
        }
        push(
            &mut self.recording_buffer_occupancy,
            base.clone(),
            Value::Gauge(counters.buffers_in_use() as f64 / counters.buffer_count.max(1) as f64),
        );
        push(
            &mut self.recording_buffer_size,
            base.clone(),
            Value::Gauge(counters.buffer_bytes as f64),
        );
        push(
            &mut self.recording_checkpoints,
            base.clone(),
            Value::Counter(counters.checkpoint_count() as f64),
        );
        let lag_s = if running {
            nvrec::recording::volume::now_ns().saturating_sub(counters.durable_at_ns()) as f64 / 1e9
        } else {
            0.0
        };
        push(
            &mut self.recording_checkpoint_lag_seconds,
            base.clone(),
            Value::Gauge(lag_s),
        );
        push(
            &mut self.recording_checkpoint_lag_bytes,
            base.clone(),
            Value::Gauge(recorded.saturating_sub(durable) as f64),
        );
        push(
            &mut self.recording_retirements,
            base.clone(),
            Value::Counter(counters.members.iter().filter(|m| m.is_retired()).count() as f64),
        );
        for (index, member) in counters.members.iter().enumerate() {
            let member_labels = labels(&[
                ("recording", id.clone()),
                ("member", index.to_string()),
                ("path", member.path.display().to_string()),
            ]);
            push(
                &mut self.member_written,
                member_labels.clone(),
                Value::Counter(member.written_bytes() as f64),
            );
            push(
                &mut self.member_writes,
                member_labels.clone(),
                Value::Counter(member.write_count() as f64),
            );
            let latency = member.latency.snapshot();
            push(
                &mut self.member_latency,
                member_labels.clone(),
                Value::Histogram(
                    latency
                        .buckets
                        .iter()
                        .map(|&(bound_ns, count)| {
                            (bound_ns.map_or(f64::INFINITY, |ns| ns as f64 / 1e9), count)
                        })
                        .collect(),
                    latency.sum_ns as f64 / 1e9,
                    latency.count,
                ),
            );
            push(
                &mut self.member_in_flight,
                member_labels.clone(),
                Value::Gauge(member.in_flight() as f64),
            );
            push(
                &mut self.member_queue_depth,
                member_labels.clone(),
                Value::Gauge(member.queue_depth as f64),
            );
            push(
                &mut self.member_retired,
                member_labels,
                Value::Gauge(if member.is_retired() { 1.0 } else { 0.0 }),
            );
        }
    }

    fn add_drive(&mut self, status: &DriveStatus) {
        let DriveStatus::Nvme(report) = status else {
            return; // Files and other devices have no SMART data.
        };
        let device = labels(&[
            ("device", report.device.clone()),
            ("model", report.model.trim().to_string()),
            ("serial", report.serial.trim().to_string()),
        ]);
        self.drive_temperature.samples.push((
            device.clone(),
            Value::Gauge(report.smart.composite_temperature_celsius),
        ));
        self.drive_throttled.samples.push((
            device.clone(),
            Value::Counter(drives::throttled_seconds(report) as f64),
        ));
        self.drive_used.samples.push((
            device.clone(),
            Value::Gauge(report.smart.percentage_used as f64 / 100.0),
        ));
        self.drive_critical_warning
            .samples
            .push((device, Value::Gauge(report.smart.critical_warning as f64)));
    }
}

/// The service's metrics as one OpenMetrics text.
pub fn encode(service: &Service) -> Result<String, std::fmt::Error> {
    let mut families = Families::new();
    for recording in service.registry.all() {
        families.add_recording(&recording);
    }
    for status in service.drives.lock().expect("drive statuses").iter() {
        families.add_drive(status);
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape {
        families: families.into_vec(),
    }));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

/// The OpenMetrics text of [`encode`] in Prometheus' classic text format (0.0.4): a
/// counter's family is named as its samples are (`..._total`), and the `# UNIT` and `# EOF`
/// lines, which that format does not have, are left out.
pub fn to_classic_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rewritten = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        match rewritten {
            Some(line) => text.push_str(&line),
            None => text.push_str(line),
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_text_names_counter_families_as_their_samples() {
        let openmetrics = "# HELP a_bytes Bytes.\n# TYPE a_bytes counter\n# UNIT a_bytes bytes\n\
                           a_bytes_total{x=\"1\"} 3.0\n# HELP b Gauge.\n# TYPE b gauge\nb 1\n# EOF\n";
        assert_eq!(
            to_classic_text(openmetrics),
            "# HELP a_bytes_total Bytes.\n# TYPE a_bytes_total counter\n\
             a_bytes_total{x=\"1\"} 3.0\n# HELP b Gauge.\n# TYPE b gauge\nb 1\n"
        );
    }
}
