//! Live counters of a running recording, read by a monitor on another thread.
//!
//! The writer keeps its own state in plain fields; these atomics are a copy of what a
//! monitor wants to see while it runs (the service's `/metrics` and dashboard): per member
//! the bytes written, the writes in flight, a write-latency histogram and whether it was
//! retired; per recording the input lost by cause, the buffers in use and the checkpoints
//! made. The writer only stores and adds (`Relaxed`): no lock, no allocation, and nothing
//! here ever waits for a reader. A monitor reads a consistent-enough snapshot, each value on
//! its own.
//!
//! What this module deliberately does not do: format, name or export anything (that is the
//! caller's business, e.g. Prometheus names live in the CLI's service).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the write-latency buckets, in nanoseconds (the last bucket, +Inf, is
/// implicit): 50 µs to 10 s, about three a decade, the range from a RAM-backed loop device
/// to a drive that stalls until the member timeout.
pub const LATENCY_BUCKET_BOUNDS_NS: [u64; 17] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// A histogram of durations with the fixed buckets of [`LATENCY_BUCKET_BOUNDS_NS`].
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    /// Per bucket (not cumulative); the last one counts what exceeds every bound.
    buckets: [AtomicU64; LATENCY_BUCKET_BOUNDS_NS.len() + 1],
    sum_ns: AtomicU64,
}

/// A histogram as read.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySnapshot {
    /// (upper bound in ns, observations above the bound before it and at most this one);
    /// the last bucket, bound `None`, holds what exceeds every bound.
    pub buckets: Vec<(Option<u64>, u64)>,
    pub sum_ns: u64,
    /// Observations: the buckets' sum.
    pub count: u64,
}

impl LatencyHistogram {
    pub fn observe(&self, duration: Duration) {
        let ns = duration.as_nanos().min(u64::MAX as u128) as u64;
        let index = LATENCY_BUCKET_BOUNDS_NS
            .iter()
            .position(|&bound| ns <= bound)
            .unwrap_or(LATENCY_BUCKET_BOUNDS_NS.len());
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LatencySnapshot {
        let buckets: Vec<(Option<u64>, u64)> = LATENCY_BUCKET_BOUNDS_NS
            .iter()
            .map(|&bound| Some(bound))
            .chain(std::iter::once(None))
            .zip(&self.buckets)
            .map(|(bound, bucket)| (bound, bucket.load(Ordering::Relaxed)))
            .collect();
        LatencySnapshot {
            // The buckets' sum, so that the count and the +Inf bucket always agree, whatever
            // order the loads saw the adds in.
            count: buckets.iter().map(|&(_, count)| count).sum(),
            buckets,
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }
}

/// One member's counters.
#[derive(Debug)]
pub struct MemberCounters {
    pub path: PathBuf,
    /// Writes this member may have in flight.
    pub queue_depth: u32,
    written_bytes: AtomicU64,
    write_count: AtomicU64,
    in_flight: AtomicU32,
    retired: AtomicBool,
    pub latency: LatencyHistogram,
}

impl MemberCounters {
    pub fn new(path: PathBuf, queue_depth: u32) -> MemberCounters {
        MemberCounters {
            path,
            queue_depth,
            written_bytes: AtomicU64::new(0),
            write_count: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            retired: AtomicBool::new(false),
            latency: LatencyHistogram::default(),
        }
    }

    /// Bytes of completed writes (whole chunk slots, headers included).
    pub fn written_bytes(&self) -> u64 {
        self.written_bytes.load(Ordering::Relaxed)
    }

    pub fn write_count(&self) -> u64 {
        self.write_count.load(Ordering::Relaxed)
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    pub(crate) fn submitted(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A write completed after `latency`; `bytes` is 0 for one that failed.
    pub(crate) fn completed(&self, bytes: u64, latency: Duration) {
        let _ = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if bytes > 0 {
            self.written_bytes.fetch_add(bytes, Ordering::Relaxed);
            self.write_count.fetch_add(1, Ordering::Relaxed);
            self.latency.observe(latency);
        }
    }

    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
        self.in_flight.store(0, Ordering::Relaxed);
    }
}

/// Why input was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossCause {
    /// A paced input found no free buffer: every buffer was filled or being written.
    NoBuffer,
    /// A paced input fell further behind its schedule than the recorder lets it (the
    /// recorder was busy elsewhere, or too slow for the rate).
    BehindRate,
}

impl LossCause {
    pub const ALL: [LossCause; 2] = [LossCause::NoBuffer, LossCause::BehindRate];

    /// Its place in [`LossCause::ALL`].
    pub fn index(self) -> usize {
        match self {
            LossCause::NoBuffer => 0,
            LossCause::BehindRate => 1,
        }
    }

    /// A stable name (labels, JSON).
    pub fn name(self) -> &'static str {
        match self {
            LossCause::NoBuffer => "no_buffer",
            LossCause::BehindRate => "behind_rate",
        }
    }
}

/// A running recording's counters, filled in by the writer once the set is open.
#[derive(Debug)]
pub struct RecordingCounters {
    pub recording_id: u32,
    pub set_uuid: String,
    pub members: Vec<MemberCounters>,
    pub buffer_count: u32,
    pub buffer_bytes: u64,
    buffers_in_use: AtomicU32,
    /// Writes handed to the drives and not completed yet.
    writes_in_flight: AtomicU32,
    lost_no_buffer_bytes: AtomicU64,
    lost_behind_rate_bytes: AtomicU64,
    checkpoint_count: AtomicU64,
    /// Wall clock (ns since the epoch) of the last durable checkpoint; the start until one.
    durable_at_ns: AtomicU64,
    /// The recording's open entry and first checkpoint are durable: a reader of the set
    /// lists it as recording.
    begun: std::sync::atomic::AtomicBool,
}

impl RecordingCounters {
    pub fn new(
        recording_id: u32,
        set_uuid: String,
        members: Vec<MemberCounters>,
        buffer_count: u32,
        buffer_bytes: u64,
        start_ns: u64,
    ) -> RecordingCounters {
        RecordingCounters {
            recording_id,
            set_uuid,
            members,
            buffer_count,
            buffer_bytes,
            buffers_in_use: AtomicU32::new(0),
            writes_in_flight: AtomicU32::new(0),
            lost_no_buffer_bytes: AtomicU64::new(0),
            lost_behind_rate_bytes: AtomicU64::new(0),
            checkpoint_count: AtomicU64::new(0),
            durable_at_ns: AtomicU64::new(start_ns),
            begun: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether the recording's open entry and first checkpoint are durable: from then on
    /// `ls` of its set lists it as recording.
    pub fn has_begun(&self) -> bool {
        self.begun.load(Ordering::Acquire)
    }

    pub(crate) fn began(&self) {
        self.begun.store(true, Ordering::Release);
    }

    pub fn buffers_in_use(&self) -> u32 {
        self.buffers_in_use.load(Ordering::Relaxed)
    }

    pub fn writes_in_flight(&self) -> u32 {
        self.writes_in_flight.load(Ordering::Relaxed)
    }

    pub fn lost_bytes(&self, cause: LossCause) -> u64 {
        match cause {
            LossCause::NoBuffer => &self.lost_no_buffer_bytes,
            LossCause::BehindRate => &self.lost_behind_rate_bytes,
        }
        .load(Ordering::Relaxed)
    }

    pub fn checkpoint_count(&self) -> u64 {
        self.checkpoint_count.load(Ordering::Relaxed)
    }

    /// When the last checkpoint became durable (ns since the epoch), or the start.
    pub fn durable_at_ns(&self) -> u64 {
        self.durable_at_ns.load(Ordering::Relaxed)
    }

    /// What the writer holds now: buffers out of its pool, and writes in flight.
    pub(crate) fn set_in_use(&self, buffers: u32, writes: u32) {
        self.buffers_in_use.store(buffers, Ordering::Relaxed);
        self.writes_in_flight.store(writes, Ordering::Relaxed);
    }

    pub(crate) fn lost(&self, cause: LossCause, bytes: u64) {
        match cause {
            LossCause::NoBuffer => &self.lost_no_buffer_bytes,
            LossCause::BehindRate => &self.lost_behind_rate_bytes,
        }
        .fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn checkpoint_durable(&self, at_ns: u64) {
        self.checkpoint_count.fetch_add(1, Ordering::Relaxed);
        self.durable_at_ns.store(at_ns, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_bounded() {
        let histogram = LatencyHistogram::default();
        for us in [10, 60, 60, 900, 20_000_000] {
            histogram.observe(Duration::from_micros(us));
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count, 5);
        assert_eq!(snapshot.buckets.len(), LATENCY_BUCKET_BOUNDS_NS.len() + 1);
        // 10 µs; the two of 60 µs; 900 µs.
        assert_eq!(snapshot.buckets[0], (Some(50_000), 1));
        assert_eq!(snapshot.buckets[1], (Some(100_000), 2));
        assert_eq!(snapshot.buckets[4], (Some(1_000_000), 1));
        // 20 s exceeds every bound: only the last bucket holds it.
        assert_eq!(snapshot.buckets.last(), Some(&(None, 1)));
        assert_eq!(snapshot.sum_ns, (10 + 120 + 900 + 20_000_000) * 1000);
    }

    #[test]
    fn member_counts_only_successful_writes() {
        let member = MemberCounters::new(PathBuf::from("/x"), 8);
        member.submitted();
        member.submitted();
        member.completed(1 << 20, Duration::from_millis(1));
        member.completed(0, Duration::from_millis(1));
        assert_eq!(member.in_flight(), 0);
        assert_eq!(member.written_bytes(), 1 << 20);
        assert_eq!(member.write_count(), 1);
        assert_eq!(member.latency.snapshot().count, 1);
        // Never below zero, whatever a retirement did to the count.
        member.completed(0, Duration::ZERO);
        assert_eq!(member.in_flight(), 0);
    }
}
