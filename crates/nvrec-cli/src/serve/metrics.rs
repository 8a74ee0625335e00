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
use nvrec::recording::counters::{LossCause, MemberCounters, RecordingCounters};
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

/// Families in the order they are shown: the members', the recordings', the drives'.
struct Families {
    member: MemberFamilies,
    recording: RecordingFamilies,
    drive: DriveFamilies,
}

impl Families {
    fn new() -> Families {
        Families {
            member: MemberFamilies::new(),
            recording: RecordingFamilies::new(),
            drive: DriveFamilies::new(),
        }
    }

    fn into_vec(self) -> Vec<Family> {
        let mut all = self.member.into_vec();
        all.extend(self.recording.into_vec());
        all.extend(self.drive.into_vec());
        all
    }

    fn add_recording(&mut self, recording: &Recording) {
        let Some(counters) = recording.counters() else {
            return; // Not begun: nothing to count yet.
        };
        self.recording.add(recording, counters);
        let id = recording.id.to_string();
        for (index, member) in counters.members.iter().enumerate() {
            self.member.add(&id, index, member);
        }
    }

    fn add_drive(&mut self, status: &DriveStatus) {
        self.drive.add(status);
    }
}

impl Family {
    fn push(&mut self, labels: Labels, value: Value) {
        self.samples.push((labels, value));
    }
}

fn gauge_of(flag: bool) -> Value {
    Value::Gauge(if flag { 1.0 } else { 0.0 })
}

/// Each member's writes, latency and queue, labelled with its recording and path.
struct MemberFamilies {
    written: Family,
    writes: Family,
    latency: Family,
    in_flight: Family,
    queue_depth: Family,
    retired: Family,
}

impl MemberFamilies {
    fn new() -> MemberFamilies {
        use MetricType::{Counter, Gauge, Histogram};
        MemberFamilies {
            written: family(
                "nvrec_member_written_bytes",
                "Bytes of completed writes to the member (whole chunks, headers included).",
                Counter,
            ),
            writes: family(
                "nvrec_member_writes",
                "Writes completed on the member.",
                Counter,
            ),
            latency: family(
                "nvrec_member_write_latency_seconds",
                "Time from submission to completion of each write to the member.",
                Histogram,
            ),
            in_flight: family(
                "nvrec_member_queue_depth_in_use",
                "Writes in flight on the member now.",
                Gauge,
            ),
            queue_depth: family(
                "nvrec_member_queue_depth",
                "Writes the member may have in flight.",
                Gauge,
            ),
            retired: family(
                "nvrec_member_retired",
                "1 once the member failed and was retired from the recording.",
                Gauge,
            ),
        }
    }

    fn into_vec(self) -> Vec<Family> {
        vec![
            self.written,
            self.writes,
            self.latency,
            self.in_flight,
            self.queue_depth,
            self.retired,
        ]
    }

    fn add(&mut self, recording_id: &str, index: usize, member: &MemberCounters) {
        let member_labels = labels(&[
            ("recording", recording_id.to_string()),
            ("member", index.to_string()),
            ("path", member.path.display().to_string()),
        ]);
        self.written.push(
            member_labels.clone(),
            Value::Counter(member.written_bytes() as f64),
        );
        self.writes.push(
            member_labels.clone(),
            Value::Counter(member.write_count() as f64),
        );
        let latency = member.latency.snapshot();
        self.latency.push(
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
        self.in_flight.push(
            member_labels.clone(),
            Value::Gauge(member.in_flight() as f64),
        );
        self.queue_depth.push(
            member_labels.clone(),
            Value::Gauge(member.queue_depth as f64),
        );
        self.retired
            .push(member_labels, gauge_of(member.is_retired()));
    }
}

/// Each recording's bytes in, recorded, durable and lost, its buffers and checkpoints.
struct RecordingFamilies {
    running: Family,
    input: Family,
    recorded: Family,
    durable: Family,
    lost: Family,
    dropped: Family,
    buffer_occupancy: Family,
    buffer_size: Family,
    checkpoints: Family,
    checkpoint_lag_seconds: Family,
    checkpoint_lag_bytes: Family,
    retirements: Family,
}

impl RecordingFamilies {
    fn new() -> RecordingFamilies {
        use MetricType::{Counter, Gauge};
        RecordingFamilies {
            running: family(
                "nvrec_recording_running",
                "1 while the recording runs, 0 once it has ended.",
                Gauge,
            ),
            input: family(
                "nvrec_recording_input_bytes",
                "Stream bytes the input delivered: recorded and lost.",
                Counter,
            ),
            recorded: family(
                "nvrec_recording_recorded_bytes",
                "Stream bytes written to the members, in order (the completed frontier).",
                Counter,
            ),
            durable: family(
                "nvrec_recording_durable_bytes",
                "Stream bytes a checkpoint has made durable.",
                Counter,
            ),
            lost: family(
                "nvrec_recording_lost_bytes",
                "Input bytes lost, by cause (marked in the recording as gaps).",
                Counter,
            ),
            dropped: family(
                "nvrec_recording_kernel_dropped_datagrams",
                "Datagrams or frames the kernel dropped before the recorder read them.",
                Counter,
            ),
            buffer_occupancy: family(
                "nvrec_recording_buffer_occupancy_ratio",
                "Buffers of the pool in use (filled, or being written), from 0 to 1.",
                Gauge,
            ),
            buffer_size: family(
                "nvrec_recording_buffer_size_bytes",
                "Size of the recording's buffer pool.",
                Gauge,
            ),
            checkpoints: family(
                "nvrec_recording_checkpoints",
                "Checkpoints made durable.",
                Counter,
            ),
            checkpoint_lag_seconds: family(
                "nvrec_recording_checkpoint_lag_seconds",
                "Time since the last durable checkpoint (what a crash now would lose).",
                Gauge,
            ),
            checkpoint_lag_bytes: family(
                "nvrec_recording_checkpoint_lag_bytes",
                "Recorded stream bytes not yet made durable by a checkpoint.",
                Gauge,
            ),
            retirements: family(
                "nvrec_recording_retirements",
                "Members retired from the recording after a failure.",
                Counter,
            ),
        }
    }

    fn into_vec(self) -> Vec<Family> {
        vec![
            self.running,
            self.input,
            self.recorded,
            self.durable,
            self.lost,
            self.dropped,
            self.buffer_occupancy,
            self.buffer_size,
            self.checkpoints,
            self.checkpoint_lag_seconds,
            self.checkpoint_lag_bytes,
            self.retirements,
        ]
    }

    fn add(&mut self, recording: &Recording, counters: &RecordingCounters) {
        let base = labels(&[
            ("recording", recording.id.to_string()),
            ("name", recording.label.clone()),
        ]);
        let running = recording.ended().is_none();
        let progress = &recording.handle.progress;
        let recorded = progress.done_bytes.load(Ordering::Relaxed);
        let durable = progress.durable_bytes.load(Ordering::Relaxed);
        let lost = progress.lost_bytes.load(Ordering::Relaxed);
        self.running.push(base.clone(), gauge_of(running));
        self.input
            .push(base.clone(), Value::Counter((recorded + lost) as f64));
        self.recorded
            .push(base.clone(), Value::Counter(recorded as f64));
        self.durable
            .push(base.clone(), Value::Counter(durable as f64));
        for cause in LossCause::ALL {
            let mut with_cause = base.clone();
            with_cause.push(("cause".into(), cause.name().into()));
            self.lost.push(
                with_cause,
                Value::Counter(counters.lost_bytes(cause) as f64),
            );
        }
        if let Some(network) = &recording.handle.network.get() {
            self.dropped.push(
                base.clone(),
                Value::Counter(network.snapshot().dropped_socket as f64),
            );
        }
        self.buffer_occupancy.push(
            base.clone(),
            Value::Gauge(counters.buffers_in_use() as f64 / counters.buffer_count.max(1) as f64),
        );
        self.buffer_size
            .push(base.clone(), Value::Gauge(counters.buffer_bytes as f64));
        self.checkpoints.push(
            base.clone(),
            Value::Counter(counters.checkpoint_count() as f64),
        );
        let lag_s = if running {
            nvrec::recording::volume::now_ns().saturating_sub(counters.durable_at_ns()) as f64 / 1e9
        } else {
            0.0
        };
        self.checkpoint_lag_seconds
            .push(base.clone(), Value::Gauge(lag_s));
        self.checkpoint_lag_bytes.push(
            base.clone(),
            Value::Gauge(recorded.saturating_sub(durable) as f64),
        );
        self.retirements.push(
            base,
            Value::Counter(counters.members.iter().filter(|m| m.is_retired()).count() as f64),
        );
    }
}

/// Each NVMe drive's last health poll.
struct DriveFamilies {
    temperature: Family,
    throttled: Family,
    used: Family,
    critical_warning: Family,
}

impl DriveFamilies {
    fn new() -> DriveFamilies {
        use MetricType::{Counter, Gauge};
        DriveFamilies {
            temperature: family(
                "nvrec_drive_temperature_celsius",
                "Composite temperature of the NVMe drive.",
                Gauge,
            ),
            throttled: family(
                "nvrec_drive_throttled_seconds",
                "Time the drive spent throttled for temperature (its SMART log's count).",
                Counter,
            ),
            used: family(
                "nvrec_drive_endurance_used_ratio",
                "The drive's estimate of its life used (percentage used / 100; may exceed 1).",
                Gauge,
            ),
            critical_warning: family(
                "nvrec_drive_critical_warning",
                "The drive's critical warning bits (0: none).",
                Gauge,
            ),
        }
    }

    fn into_vec(self) -> Vec<Family> {
        vec![
            self.temperature,
            self.throttled,
            self.used,
            self.critical_warning,
        ]
    }

    fn add(&mut self, status: &DriveStatus) {
        let DriveStatus::Nvme(report) = status else {
            return; // Files and other devices have no SMART data.
        };
        let device = labels(&[
            ("device", report.device.clone()),
            ("model", report.model.trim().to_string()),
            ("serial", report.serial.trim().to_string()),
        ]);
        self.temperature.push(
            device.clone(),
            Value::Gauge(report.smart.composite_temperature_celsius),
        );
        self.throttled.push(
            device.clone(),
            Value::Counter(drives::throttled_seconds(report) as f64),
        );
        self.used.push(
            device.clone(),
            Value::Gauge(report.smart.percentage_used as f64 / 100.0),
        );
        self.critical_warning
            .push(device, Value::Gauge(report.smart.critical_warning as f64));
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
