//! A running recording's load, published for the other programs on the machine: how full
//! its buffer pool is. `nvrec archive` reads it and pauses while the recorder needs the
//! drives (its pool filling means the targets fall behind the input).
//!
//! One small file per volume set, `nvrec-load-SET_UUID` in `/dev/shm` (or
//! `$NVREC_LOAD_DIR`), replaced whole (written beside it, then renamed) every
//! [`PUBLISH_INTERVAL`] with the highest fill seen since the previous one, sampled every
//! [`SAMPLE_INTERVAL`] so that a short burst is not missed; removed when the recording
//! ends. A file that was not replaced for [`STALE_AFTER`], or whose process is gone,
//! means nothing: a recorder killed with -9 leaves it behind, and the next recording to
//! start removes it.
//!
//! The writer's data path knows nothing of this: a thread beside it reads the live
//! counters ([`super::counters`]) it already keeps. What this does not do: throttle
//! anyone. A reader decides what to do with the load.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::counters::RecordingCounters;

pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(5);
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(25);
pub const STALE_AFTER: Duration = Duration::from_secs(2);
/// First word of the file, and its version.
const MAGIC: &str = "nvrec-load-1";

/// A recording's load as published.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    pub pid: u32,
    /// Highest share of the buffer pool in use over the last interval, 0 to 1.
    pub peak_fill: f64,
    pub buffer_count: u32,
    /// When it was published (ms since the epoch).
    pub at_ms: u64,
    /// The most writes in flight over the last interval; None from a recorder that does
    /// not publish it.
    pub peak_in_flight: Option<u32>,
}

impl Load {
    fn encode(&self) -> String {
        let in_flight = self
            .peak_in_flight
            .map(|n| format!(" {n}"))
            .unwrap_or_default();
        format!(
            "{MAGIC} {} {:.4} {} {}{in_flight}\n",
            self.pid, self.peak_fill, self.buffer_count, self.at_ms
        )
    }

    fn decode(text: &str) -> Option<Load> {
        let mut words = text.split_ascii_whitespace();
        if words.next()? != MAGIC {
            return None;
        }
        let load = Load {
            pid: words.next()?.parse().ok()?,
            peak_fill: words.next()?.parse().ok()?,
            buffer_count: words.next()?.parse().ok()?,
            at_ms: words.next()?.parse().ok()?,
            peak_in_flight: words.next().and_then(|word| word.parse().ok()),
        };
        (load.peak_fill.is_finite() && (0.0..=1.0).contains(&load.peak_fill)).then_some(load)
    }
}

/// Where loads are published.
pub fn load_dir() -> PathBuf {
    std::env::var_os("NVREC_LOAD_DIR").map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

fn load_path(set_uuid: &str) -> PathBuf {
    load_dir().join(format!("nvrec-load-{set_uuid}"))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// The load of the recording running on set `set_uuid`, if one publishes it now: `None`
/// where there is no file, it is stale, or its process is gone.
pub fn read(set_uuid: &str) -> Option<Load> {
    let text = std::fs::read_to_string(load_path(set_uuid)).ok()?;
    let load = Load::decode(&text)?;
    let age_ms = now_ms().saturating_sub(load.at_ms);
    let alive = std::path::Path::new(&format!("/proc/{}", load.pid)).exists();
    (alive && age_ms <= STALE_AFTER.as_millis() as u64).then_some(load)
}

/// Writes `load` for set `set_uuid`, replacing what was there in one step.
pub fn write(set_uuid: &str, load: &Load) -> std::io::Result<()> {
    let path = load_path(set_uuid);
    let mut staging = path.clone().into_os_string();
    staging.push(format!(".{}", load.pid));
    std::fs::write(&staging, load.encode())?;
    std::fs::rename(&staging, &path)
}

/// Runs `run` while a thread beside it publishes the load of the recording whose counters
/// `counters` gets once the writer has opened the set; the file is removed at the end.
pub fn publish_while<R>(counters: &OnceLock<RecordingCounters>, run: impl FnOnce() -> R) -> R {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let publisher = std::thread::Builder::new()
            .name("nvrec-load".into())
            .spawn_scoped(scope, || publish_until(counters, &done));
        let result = {
            let _done = crate::control::SetOnDrop(&done);
            run()
        };
        if let Ok(publisher) = publisher {
            let _ = publisher.join();
        }
        result
    })
}

/// Removes the loads that mean nothing any more (their recorder killed with -9, so never
/// removed): stale, or of a process that is gone.
fn sweep_dead() {
    let Ok(dir) = std::fs::read_dir(load_dir()) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(set_uuid) = name.to_str().and_then(|n| n.strip_prefix("nvrec-load-")) else {
            continue;
        };
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if Load::decode(&text).is_some() && read(set_uuid).is_none() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The publisher's loop. Failing to publish (no /dev/shm) only means nobody backs off.
fn publish_until(counters: &OnceLock<RecordingCounters>, done: &AtomicBool) {
    sweep_dead();
    let mut published: Option<String> = None;
    let mut peak = 0u32;
    let mut peak_in_flight = 0u32;
    let mut last = std::time::Instant::now();
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(SAMPLE_INTERVAL);
        let Some(counters) = counters.get() else {
            continue;
        };
        peak = peak.max(counters.buffers_in_use());
        peak_in_flight = peak_in_flight.max(counters.writes_in_flight());
        if last.elapsed() < PUBLISH_INTERVAL {
            continue;
        }
        let load = Load {
            pid: std::process::id(),
            peak_fill: (f64::from(peak) / f64::from(counters.buffer_count.max(1))).min(1.0),
            buffer_count: counters.buffer_count,
            at_ms: now_ms(),
            peak_in_flight: Some(peak_in_flight),
        };
        if write(&counters.set_uuid, &load).is_ok() {
            published = Some(counters.set_uuid.clone());
        }
        peak = 0;
        peak_in_flight = 0;
        last = std::time::Instant::now();
    }
    if let Some(set_uuid) = published {
        let _ = std::fs::remove_file(load_path(&set_uuid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that panics stops the publisher beside it, and the panic reaches the caller.
    #[test]
    fn a_run_that_panics_stops_the_publisher() {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let counters = OnceLock::new();
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                publish_while(&counters, || panic!("a defect"))
            }));
            let _ = sender.send(ended.is_err());
        });
        let panicked = receiver.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(panicked, Ok(true), "publish_while never ended");
    }

    #[test]
    fn a_load_reads_back_while_fresh_and_alive_and_not_after() {
        let set = format!("test-{}-fresh", std::process::id());
        let mut load = Load {
            pid: std::process::id(),
            peak_fill: 0.625,
            buffer_count: 64,
            at_ms: now_ms(),
            peak_in_flight: Some(3),
        };
        write(&set, &load).unwrap();
        assert_eq!(read(&set), Some(load));
        // One from a recorder that does not say what it has in flight reads too.
        let older = Load {
            peak_in_flight: None,
            ..load
        };
        write(&set, &older).unwrap();
        assert_eq!(read(&set), Some(older));
        // Stale: published too long ago.
        load.at_ms -= STALE_AFTER.as_millis() as u64 + 1000;
        write(&set, &load).unwrap();
        assert_eq!(read(&set), None);
        // Its process is gone (no such pid).
        load.at_ms = now_ms();
        load.pid = u32::MAX;
        write(&set, &load).unwrap();
        assert_eq!(read(&set), None);
        // (A sweep running beside this test may have removed it already.)
        let _ = std::fs::remove_file(load_path(&set));
        assert_eq!(read(&set), None);
    }

    #[test]
    fn a_starting_recording_sweeps_away_dead_loads_only() {
        let alive = format!("test-{}-sweep-alive", std::process::id());
        let dead = format!("test-{}-sweep-dead", std::process::id());
        let load = Load {
            pid: std::process::id(),
            peak_fill: 0.5,
            buffer_count: 8,
            at_ms: now_ms(),
            peak_in_flight: Some(0),
        };
        write(&alive, &load).unwrap();
        write(
            &dead,
            &Load {
                pid: u32::MAX,
                ..load
            },
        )
        .unwrap();
        sweep_dead();
        assert_eq!(read(&alive), Some(load));
        assert!(!load_path(&dead).exists());
        std::fs::remove_file(load_path(&alive)).unwrap();
    }

    #[test]
    fn damaged_files_mean_nothing() {
        for text in [
            "",
            "nvrec-load-1 1 2.5 64 0",
            "other 1 0.5 64 0",
            "nvrec-load-1 x",
        ] {
            assert_eq!(Load::decode(text), None, "{text:?}");
        }
    }
}
