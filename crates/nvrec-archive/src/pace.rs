//! How fast the archive goes: an average rate (`--max-rate`), and pauses while a recorder
//! running on the same set needs the drives (its buffer pool fills: see
//! [`nvrec::recording::load`]). Both the reading of the drives and the sending wait.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nvrec::control::{Control, ControlState};
use nvrec::recording::load;

/// Above this share of the recorder's buffer pool in use, the archive pauses...
const BACKOFF_HIGH_FILL: f64 = 0.25;
/// ...until the pool is back to this share or less, and for this long at least: a
/// recorder at 80 % of the drives' rate drains a backlog slowly, and an archive that came
/// back at once filled it again (measured: bench/archive's paced row lost data at 0.5/0.25
/// and no minimum).
const BACKOFF_LOW_FILL: f64 = 0.1;
const BACKOFF_PAUSE_MIN: Duration = Duration::from_millis(250);
/// How often the recorder's load is looked at, while running and while paused.
const BACKOFF_POLL: Duration = Duration::from_millis(10);

/// Paces one archive run. Shared by its reading thread and its sending tasks.
pub(crate) struct Pacer<'a> {
    rate_bytes_per_s: Option<f64>,
    started: Instant,
    sent_bytes: Mutex<u64>,
    /// The set whose recorder's load is watched, and what stops a pause early.
    backoff: Option<(String, &'a Control)>,
    /// When the load was last looked at.
    looked: Mutex<Option<Instant>>,
    /// Time spent paused for the recorder (not counted against the rate).
    paused_ns: AtomicU64,
}

/// A pause for the recorder, begun at `since`: the pacer counts it when it is dropped.
struct Pause<'p, 'a> {
    pacer: &'p Pacer<'a>,
    since: Instant,
}

impl Pause<'_, '_> {
    /// Whether the pause goes on: the pool is not yet down to the low mark, or the pause is
    /// shorter than its minimum (and no stop was asked for).
    fn goes_on(&self) -> bool {
        let pacer = self.pacer;
        pacer
            .backoff
            .as_ref()
            .is_some_and(|(_, control)| control.state() == ControlState::Run)
            && (self.since.elapsed() < BACKOFF_PAUSE_MIN || pacer.recorder_above(BACKOFF_LOW_FILL))
    }
}

impl Drop for Pause<'_, '_> {
    fn drop(&mut self) {
        self.pacer
            .paused_ns
            .fetch_add(self.since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

impl<'a> Pacer<'a> {
    /// A pacer to `rate_bytes_per_s` on average (none: unbounded), pausing while the
    /// recorder of set `backoff.0` needs the drives, unless `backoff.1` stops.
    pub(crate) fn new(
        rate_bytes_per_s: Option<f64>,
        backoff: Option<(String, &'a Control)>,
    ) -> Pacer<'a> {
        Pacer {
            rate_bytes_per_s,
            started: Instant::now(),
            sent_bytes: Mutex::new(0),
            backoff,
            looked: Mutex::new(None),
            paused_ns: AtomicU64::new(0),
        }
    }

    /// Time spent paused for the recorder so far.
    pub(crate) fn paused(&self) -> Duration {
        Duration::from_nanos(self.paused_ns.load(Ordering::Relaxed))
    }

    /// Whether the recorder's pool is above `fill` now (false when none publishes a load).
    fn recorder_above(&self, fill: f64) -> bool {
        self.backoff.as_ref().is_some_and(|(set_uuid, _)| {
            load::read(set_uuid).is_some_and(|load| load.peak_fill > fill)
        })
    }

    /// A pause, if one must begin now: the load is looked at no more often than
    /// [`BACKOFF_POLL`].
    fn pause(&self) -> Option<Pause<'_, 'a>> {
        let (_, control) = self.backoff.as_ref()?;
        {
            let mut looked = self.looked.lock().expect("pacer lock");
            if looked.is_some_and(|at| at.elapsed() < BACKOFF_POLL) {
                return None;
            }
            *looked = Some(Instant::now());
        }
        (control.state() == ControlState::Run && self.recorder_above(BACKOFF_HIGH_FILL)).then(
            || Pause {
                pacer: self,
                since: Instant::now(),
            },
        )
    }

    /// Blocks while the recorder needs the drives (the reading side).
    pub(crate) fn hold(&self) {
        if let Some(pause) = self.pause() {
            while pause.goes_on() {
                std::thread::sleep(BACKOFF_POLL);
            }
        }
    }

    /// Waits while the recorder needs the drives, then until `len_bytes` more may go.
    pub(crate) async fn take(&self, len_bytes: u64) {
        if let Some(pause) = self.pause() {
            while pause.goes_on() {
                tokio::time::sleep(BACKOFF_POLL).await;
            }
        }
        let Some(rate) = self.rate_bytes_per_s else {
            return;
        };
        let due = {
            let mut sent = self.sent_bytes.lock().expect("pacer lock");
            *sent += len_bytes;
            self.started + self.paused() + Duration::from_secs_f64(*sent as f64 / rate)
        };
        // Bytes due by now go at once; later ones wait for their time.
        let allowance = Duration::from_secs_f64((len_bytes as f64 / rate).min(1.0));
        if let Some(wait) = due.checked_duration_since(Instant::now() + allowance) {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pacer_holds_the_average_rate() {
        let pacer = Pacer::new(Some(50e6), None);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let started = Instant::now();
        runtime.block_on(async {
            for _ in 0..10 {
                pacer.take(5_000_000).await;
            }
        });
        // 50 MB at 50 MB/s: the last 5 MB may go at once, the rest waits.
        let elapsed = started.elapsed().as_secs_f64();
        assert!(elapsed >= 0.85, "{elapsed}");
    }
}
