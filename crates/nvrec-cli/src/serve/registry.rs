//! The recordings a service owns: each one runs on a thread of its own, exactly as `nvrec
//! record` runs it ([`nvrec_app::record::run`]); the service only reads its counters and
//! sets its stop or abort request.
//!
//! Nothing here runs on the data path: the HTTP side locks a recording's small state (its
//! outcome, its rate history) for microseconds, and the recording thread takes that lock
//! once, when it ends.

use nvrec::control::{Control, ControlState};
use nvrec::recording::counters::{LossCause, RecordingCounters};
use nvrec::recording::failure::Parts;
use nvrec::unit::format_utc_ns;
use nvrec_app::record::{self, RecordHandle, RecordPlan, RecordRun};
use nvrec_app::{error_text, Class};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Rate samples kept per recording: one a second for five minutes.
pub const HISTORY_SAMPLE_COUNT_MAX: usize = 300;
/// Ended recordings kept listed (the oldest is forgotten first).
const ENDED_COUNT_MAX: usize = 100;

/// One sample of a recording's rates, taken by the service's sampler.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    /// Seconds since the epoch.
    pub time_s: f64,
    /// Stream bytes recorded per second since the previous sample.
    pub rate_bytes_per_s: f64,
    /// Per member: bytes written per second since the previous sample.
    pub member_rates_bytes_per_s: Vec<f64>,
    /// Buffers in use, as a fraction of the pool.
    pub buffer_fill: f64,
    pub lost_bytes: u64,
}

/// What the sampler remembers between samples.
#[derive(Debug, Default)]
struct SamplerState {
    last: Option<(Instant, u64, Vec<u64>)>,
    history: VecDeque<Sample>,
}

/// How a recording ended.
#[derive(Debug, Clone)]
pub struct Ended {
    pub class: Class,
    pub outcome: String,
    /// The report `nvrec record --json` prints, or the error.
    pub report: Value,
    pub ended_ns: u64,
}

impl Ended {
    /// How `run` ended, with the report `nvrec record --json` prints, or the error.
    fn of(run: RecordRun) -> Ended {
        let class = run.class();
        let ended_ns = nvrec::recording::volume::now_ns();
        match run.report {
            Ok(report) => {
                let mut value = serde_json::to_value(&report).unwrap_or(Value::Null);
                value["telemetry"] = serde_json::to_value(&run.telemetry).unwrap_or(Value::Null);
                value["scheduling"] = serde_json::to_value(&run.scheduling).unwrap_or(Value::Null);
                Ended {
                    class,
                    outcome: serde_json::to_value(report.outcome)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    report: value,
                    ended_ns,
                }
            }
            Err(error) => Ended {
                class,
                outcome: "failed".into(),
                report: json!({
                    "error": error_text(&error),
                    "failure": nvrec_app::recording_failure(&error).map(Parts::of),
                }),
                ended_ns,
            },
        }
    }
}

/// A recording the service started.
#[derive(Debug)]
pub struct Recording {
    pub id: u64,
    pub label: String,
    pub targets: Vec<String>,
    pub source: String,
    pub rate_bytes_per_s: Option<f64>,
    pub started_ns: u64,
    pub control: Arc<Control>,
    pub handle: RecordHandle,
    ended: Mutex<Option<Ended>>,
    sampler: Mutex<SamplerState>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Recording {
    pub fn ended(&self) -> Option<Ended> {
        self.ended.lock().expect("recording state").clone()
    }

    pub fn counters(&self) -> Option<&RecordingCounters> {
        self.handle.counters.get()
    }

    /// Whether the recording has begun (its open entry and first checkpoint are durable,
    /// so that `ls` of its set lists it as recording) or has already ended.
    pub fn has_begun(&self) -> bool {
        self.counters().is_some_and(|c| c.has_begun()) || self.ended().is_some()
    }

    /// The state in one word.
    pub fn state(&self) -> String {
        if let Some(ended) = self.ended() {
            return ended.outcome;
        }
        match (self.control.state(), self.counters().is_some()) {
            (ControlState::Abort, _) => "aborting",
            (ControlState::Stop, _) => "stopping",
            (ControlState::Run, true) => "recording",
            (ControlState::Run, false) => "starting",
        }
        .to_string()
    }

    /// Takes a rate sample (called once a second for running recordings).
    pub fn sample(&self) {
        let Some(counters) = self.counters() else {
            return;
        };
        let now = Instant::now();
        let done = self.handle.progress.done_bytes.load(Ordering::Relaxed);
        let written: Vec<u64> = counters.members.iter().map(|m| m.written_bytes()).collect();
        let mut sampler = self.sampler.lock().expect("sampler state");
        if let Some((then, done_then, written_then)) = &sampler.last {
            let seconds = now.duration_since(*then).as_secs_f64().max(1e-3);
            let sample = Sample {
                time_s: nvrec::recording::volume::now_ns() as f64 / 1e9,
                rate_bytes_per_s: done.saturating_sub(*done_then) as f64 / seconds,
                member_rates_bytes_per_s: written
                    .iter()
                    .zip(written_then)
                    .map(|(now, then)| now.saturating_sub(*then) as f64 / seconds)
                    .collect(),
                buffer_fill: counters.buffers_in_use() as f64 / counters.buffer_count.max(1) as f64,
                lost_bytes: self.handle.progress.lost_bytes.load(Ordering::Relaxed),
            };
            if sampler.history.len() == HISTORY_SAMPLE_COUNT_MAX {
                sampler.history.pop_front();
            }
            sampler.history.push_back(sample);
        }
        sampler.last = Some((now, done, written));
    }

    pub fn history(&self) -> Vec<Sample> {
        let sampler = self.sampler.lock().expect("sampler state");
        sampler.history.iter().cloned().collect()
    }

    fn last_sample(&self) -> Option<Sample> {
        let sampler = self.sampler.lock().expect("sampler state");
        sampler.history.back().cloned()
    }

    /// The recording as the API shows it.
    pub fn json(&self, with_history: bool) -> Value {
        let progress = &self.handle.progress;
        let done_bytes = progress.done_bytes.load(Ordering::Relaxed);
        let durable_bytes = progress.durable_bytes.load(Ordering::Relaxed);
        let lost_bytes = progress.lost_bytes.load(Ordering::Relaxed);
        let counters = self.counters();
        let ended = self.ended();
        let now_ns = nvrec::recording::volume::now_ns();
        let mut lost = json!({ "total_bytes": lost_bytes });
        if let Some(counters) = counters {
            for cause in LossCause::ALL {
                lost[format!("{}_bytes", cause.name())] = json!(counters.lost_bytes(cause));
            }
        }
        if let Some(network) = &self.handle.network.get() {
            let counts = network.snapshot();
            lost["kernel_dropped_datagrams"] = json!(counts.dropped_socket);
        }
        let last = self.last_sample();
        let members: Vec<Value> = counters
            .map(|counters| {
                counters
                    .members
                    .iter()
                    .enumerate()
                    .map(|(index, member)| {
                        let latency = member.latency.snapshot();
                        json!({
                            "index": index,
                            "path": member.path.display().to_string(),
                            "state": if member.is_retired() { "retired" } else if ended.is_some() { "closed" } else { "writing" },
                            "written_bytes": member.written_bytes(),
                            "write_count": member.write_count(),
                            "in_flight": member.in_flight(),
                            "queue_depth": member.queue_depth,
                            "rate_bytes_per_s": last.as_ref().and_then(|s| s.member_rates_bytes_per_s.get(index)).copied().unwrap_or(0.0),
                            "write_latency_mean_s": if latency.count > 0 { latency.sum_ns as f64 / latency.count as f64 / 1e9 } else { 0.0 },
                        })
                    })
                    .collect()
            })
            .unwrap_or_else(|| {
                self.targets
                    .iter()
                    .enumerate()
                    .map(|(index, path)| json!({"index": index, "path": path, "state": "starting"}))
                    .collect()
            });
        let mut value = json!({
            "id": self.id,
            "state": self.state(),
            "label": self.label,
            "targets": self.targets,
            "source": self.source,
            "paced_rate_bytes_per_s": self.rate_bytes_per_s,
            "started": format_utc_ns(self.started_ns),
            "started_ns": self.started_ns,
            "recording_id": counters.map(|c| c.recording_id),
            "set_uuid": counters.map(|c| c.set_uuid.clone()),
            "bytes": done_bytes,
            "total_bytes": progress.total_bytes.load(Ordering::Relaxed),
            "rate_bytes_per_s": match (&ended, &last) {
                (None, Some(sample)) => sample.rate_bytes_per_s,
                _ => 0.0,
            },
            "lost": lost,
            "buffer": counters.map(|c| json!({
                "count": c.buffer_count,
                "in_use": c.buffers_in_use(),
                "bytes": c.buffer_bytes,
                "fill": c.buffers_in_use() as f64 / c.buffer_count.max(1) as f64,
            })),
            "members": members,
            "checkpoints": counters.map(|c| json!({
                "count": c.checkpoint_count(),
                "durable_bytes": durable_bytes,
                "last_durable": format_utc_ns(c.durable_at_ns()),
                "lag_bytes": done_bytes.saturating_sub(durable_bytes),
                "lag_s": if ended.is_some() { 0.0 } else { now_ns.saturating_sub(c.durable_at_ns()) as f64 / 1e9 },
            })),
            "network": self.handle.network.get().as_ref().map(|n| n.snapshot()),
        });
        if let Some(ended) = &ended {
            value["exit_code"] = json!(ended.class.exit_status());
            value["ended"] = json!(format_utc_ns(ended.ended_ns));
            value["report"] = ended.report.clone();
        }
        if with_history {
            value["history"] = json!(self.history());
        }
        value
    }

    /// Waits (off the async threads) until the recording thread has ended.
    pub fn join(&self) {
        let thread = self.thread.lock().expect("recording thread").take();
        match thread {
            Some(thread) => {
                let _ = thread.join();
            }
            // Another caller joins it: wait for the outcome it leaves.
            None => {
                while self.ended().is_none() {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

/// Every recording of the service, running and ended.
#[derive(Debug, Default)]
pub struct Registry {
    next_id: AtomicU64,
    recordings: Mutex<Vec<Arc<Recording>>>,
}

impl Registry {
    /// Starts `plan` on a thread of its own, which opens its source and records. (A source
    /// stays on the thread that reads it.)
    pub fn start(&self, plan: RecordPlan) -> std::io::Result<Arc<Recording>> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let recording = Arc::new(Recording {
            id,
            label: plan.options.label.clone(),
            targets: plan
                .targets
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            source: plan.source_spec.describe(),
            rate_bytes_per_s: plan.options.rate_bytes_per_s,
            started_ns: nvrec::recording::volume::now_ns(),
            control: Arc::new(Control::new()),
            handle: RecordHandle::default(),
            ended: Mutex::new(None),
            sampler: Mutex::new(SamplerState::default()),
            thread: Mutex::new(None),
        });
        let running = Arc::clone(&recording);
        let thread = std::thread::Builder::new()
            .name(format!("nvrec-rec-{id}"))
            .spawn(move || {
                // A defect that panics ends the recording as failed, never one the service
                // shows running for ever.
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    match record::open_source(&plan, &running.handle) {
                        Ok(source) => record::run(
                            &plan,
                            source,
                            &running.handle,
                            &running.control,
                            crate::telemetry::warnings(),
                        ),
                        Err(error) => RecordRun::not_started(error),
                    }
                }))
                .unwrap_or_else(|panic| {
                    RecordRun::failed(anyhow::anyhow!(
                        "the recorder failed: {}",
                        panic_text(panic.as_ref())
                    ))
                });
                let ended = Ended::of(run);
                *running.ended.lock().expect("recording state") = Some(ended);
            })?;
        *recording.thread.lock().expect("recording thread") = Some(thread);
        let mut recordings = self.recordings.lock().expect("registry");
        recordings.push(Arc::clone(&recording));
        // Forget the oldest ended recordings beyond the bound.
        let ended_count = recordings.iter().filter(|r| r.ended().is_some()).count();
        if ended_count > ENDED_COUNT_MAX {
            let mut excess = ended_count - ENDED_COUNT_MAX;
            recordings.retain(|r| {
                if excess > 0 && r.ended().is_some() {
                    excess -= 1;
                    false
                } else {
                    true
                }
            });
        }
        Ok(recording)
    }

    /// Forgets a recording that failed before it began (its error went to the client).
    pub fn forget(&self, id: u64) {
        self.recordings
            .lock()
            .expect("registry")
            .retain(|r| r.id != id);
    }

    pub fn get(&self, id: u64) -> Option<Arc<Recording>> {
        self.recordings
            .lock()
            .expect("registry")
            .iter()
            .find(|r| r.id == id)
            .cloned()
    }

    pub fn all(&self) -> Vec<Arc<Recording>> {
        self.recordings.lock().expect("registry").clone()
    }

    pub fn running(&self) -> Vec<Arc<Recording>> {
        self.all()
            .into_iter()
            .filter(|r| r.ended().is_none())
            .collect()
    }
}

/// Waits until `recording` has begun or ended, at most `limit`.
pub async fn wait_begun(recording: &Recording, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !recording.has_begun() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until `recording` has ended, at most `limit`.
pub async fn wait_ended(recording: &Recording, limit: Duration) {
    let deadline = Instant::now() + limit;
    while recording.ended().is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What a panic said, for the failure it becomes.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => text.to_string(),
        (_, Some(text)) => text.clone(),
        _ => "a panic".into(),
    }
}
