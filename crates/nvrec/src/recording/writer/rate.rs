//! A member's rate estimate, which adaptive striping goes by: bytes completed over the time
//! the member had writes in flight, the history halved now and then so that the estimate
//! follows a drive that slows down; and since when it has been idle (a member idle too long
//! gets a write, which measures it again). It owns its state; the member tells it when a
//! busy period begins and when a write completes.

use std::time::{Duration, Instant};

/// Busy time after which the estimate's history is halved.
const WINDOW_NS: u64 = 200_000_000;

#[derive(Debug, Default, Clone)]
pub(super) struct Rate {
    /// Bytes completed, and time spent with writes in flight (both halved together).
    bytes: u64,
    busy_ns: u64,
    /// Since when writes have been in flight (None while idle).
    busy_since: Option<Instant>,
    /// Since when nothing has been in flight (None before the first write completed).
    idle_since: Option<Instant>,
}

impl Rate {
    /// A write went out at `now` with nothing else in flight: a busy period begins.
    pub(super) fn busy_from(&mut self, now: Instant) {
        self.busy_since = Some(now);
        self.idle_since = None;
    }

    /// A write of `bytes` completed at `now`; `last`: nothing else is in flight now.
    pub(super) fn completed(&mut self, bytes: u64, last: bool, now: Instant) {
        self.bytes += bytes;
        if last {
            if let Some(since) = self.busy_since.take() {
                self.busy_ns += now.saturating_duration_since(since).as_nanos() as u64;
            }
            self.idle_since = Some(now);
        }
        if self.busy_ns > WINDOW_NS {
            self.busy_ns /= 2;
            self.bytes /= 2;
            if let Some(since) = self.busy_since.as_mut() {
                // The open busy period's share halves too.
                let open_ns = now.saturating_duration_since(*since).as_nanos() as u64;
                *since += Duration::from_nanos(open_ns / 2);
            }
        }
    }

    /// Bytes per second written while busy, once something has completed.
    pub(super) fn per_s(&self, now: Instant) -> Option<f64> {
        if self.bytes == 0 {
            return None;
        }
        let open_ns = self.busy_since.map_or(0, |since| {
            now.saturating_duration_since(since).as_nanos() as u64
        });
        let busy_ns = self.busy_ns + open_ns;
        (busy_ns > 0).then(|| self.bytes as f64 / (busy_ns as f64 / 1e9))
    }

    /// How long nothing has been in flight, as of `now` (None while busy, or before the
    /// first completion).
    pub(super) fn idle_for(&self, now: Instant) -> Option<Duration> {
        self.idle_since
            .map(|since| now.saturating_duration_since(since))
    }

    /// An estimate of `bytes` over `busy` seconds, busy since `now` (for tests of the
    /// stages that read it).
    #[cfg(test)]
    pub(super) fn measured(bytes: u64, busy: Duration, now: Instant) -> Rate {
        Rate {
            bytes,
            busy_ns: busy.as_nanos() as u64,
            busy_since: Some(now),
            idle_since: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn no_rate_until_a_write_completed_then_bytes_over_busy_time() {
        let start = Instant::now();
        let mut rate = Rate::default();
        assert_eq!(rate.per_s(start), None);
        rate.busy_from(start);
        assert_eq!(rate.per_s(start + 10 * MS), None, "nothing completed yet");
        rate.completed(1_000_000, false, start + 10 * MS);
        // Still busy: the open period counts up to now.
        let per_s = rate.per_s(start + 20 * MS).unwrap();
        assert!((per_s - 50e6).abs() < 1.0, "{per_s}");
        rate.completed(1_000_000, true, start + 20 * MS);
        // Idle: only the busy time counts, however long it then idles.
        let per_s = rate.per_s(start + 5000 * MS).unwrap();
        assert!((per_s - 100e6).abs() < 1.0, "{per_s}");
    }

    #[test]
    fn idle_time_counts_from_the_last_completion_and_ends_with_the_next_write() {
        let start = Instant::now();
        let mut rate = Rate::default();
        assert_eq!(rate.idle_for(start), None, "never written");
        rate.busy_from(start);
        rate.completed(4096, false, start + MS);
        assert_eq!(
            rate.idle_for(start + 2 * MS),
            None,
            "a write is still in flight"
        );
        rate.completed(4096, true, start + 3 * MS);
        assert_eq!(rate.idle_for(start + 103 * MS), Some(100 * MS));
        rate.busy_from(start + 200 * MS);
        assert_eq!(rate.idle_for(start + 300 * MS), None);
    }

    #[test]
    fn the_estimate_follows_a_drive_that_slows_down() {
        let mut now = Instant::now();
        let mut rate = Rate::default();
        // 1 s at 1 GB/s, 10 ms writes one at a time...
        for _ in 0..100 {
            rate.busy_from(now);
            now += 10 * MS;
            rate.completed(10_000_000, true, now);
        }
        let fast = rate.per_s(now).unwrap();
        assert!((fast - 1e9).abs() / 1e9 < 0.01, "{fast}");
        // ...then 1 s at 100 MB/s: the halved history lets the new rate show.
        for _ in 0..100 {
            rate.busy_from(now);
            now += 10 * MS;
            rate.completed(1_000_000, true, now);
        }
        let slow = rate.per_s(now).unwrap();
        assert!(slow < 1.2e8, "{slow}: still near the old rate");
    }
}
