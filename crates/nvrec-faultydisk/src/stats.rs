//! Counters of what the disk was asked to do and what the faults did to it.
//!
//! Requests bump atomics; [`Stats`] is a snapshot of them, printed as JSON for the control
//! file. The JSON is written by hand: flat, numbers and a list of fault lines, nothing to
//! escape but what `json_string` handles.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A snapshot of the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Read requests received.
    pub reads: u64,
    /// Write requests received.
    pub writes: u64,
    /// Bytes returned by successful reads.
    pub bytes_read: u64,
    /// Bytes accepted by successful writes.
    pub bytes_written: u64,
    /// FSYNC requests received (the loop device's flushes): each commits unflushed writes.
    pub fsyncs: u64,
    /// FLUSH requests received (a `close` of the file): these commit nothing.
    pub flushes: u64,
    /// Discards and zeroings (`fallocate` punch-hole or zero-range) received.
    pub discards: u64,
    /// Requests answered with an error, injected or not.
    pub failed: u64,
    /// Time requests spent held by a stall, summed over requests.
    pub stalled: Duration,
    /// Requests held by a stall right now, on the delay threads.
    pub stalled_now: u64,
    /// Requests waiting for a delay thread right now (while a stall or a rate limit is in
    /// force, requests are served off the FUSE threads, by a few threads; the rest queue).
    pub queued_now: u64,
    /// Time requests spent waiting for their turn under `slow`, summed over requests.
    pub slowed: Duration,
    /// Power cuts done.
    pub power_cuts: u64,
    /// Bytes held in the unflushed-write overlay (whole 4 KiB sectors).
    pub unflushed_bytes: u64,
    /// Writes failed because the overlay was full.
    pub overlay_overflows: u64,
    /// The active faults, as the control lines that make them.
    pub faults: Vec<String>,
}

impl Stats {
    /// The snapshot as one JSON object, ending with a newline.
    pub fn to_json(&self) -> String {
        let numbers = [
            ("reads", self.reads),
            ("writes", self.writes),
            ("bytes_read", self.bytes_read),
            ("bytes_written", self.bytes_written),
            ("fsyncs", self.fsyncs),
            ("flushes", self.flushes),
            ("discards", self.discards),
            ("failed", self.failed),
            ("stalled_ns", duration_ns(self.stalled)),
            ("stalled_now", self.stalled_now),
            ("queued_now", self.queued_now),
            ("slowed_ns", duration_ns(self.slowed)),
            ("power_cuts", self.power_cuts),
            ("unflushed_bytes", self.unflushed_bytes),
            ("overlay_overflows", self.overlay_overflows),
        ];
        let mut fields: Vec<String> = numbers
            .iter()
            .map(|(name, value)| format!("\"{name}\":{value}"))
            .collect();
        let faults: Vec<String> = self.faults.iter().map(|f| json_string(f)).collect();
        fields.push(format!("\"faults\":[{}]", faults.join(",")));
        format!("{{{}}}\n", fields.join(","))
    }
}

fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The live counters, bumped by requests.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub fsyncs: AtomicU64,
    pub flushes: AtomicU64,
    pub discards: AtomicU64,
    pub failed: AtomicU64,
    pub stalled_ns: AtomicU64,
    pub stalled_now: AtomicU64,
    pub queued_now: AtomicU64,
    pub slowed_ns: AtomicU64,
    pub power_cuts: AtomicU64,
    pub overlay_overflows: AtomicU64,
}

/// Adds one to a counter.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds `n` to a counter.
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Adds a duration in nanoseconds to a counter.
pub(crate) fn add_duration(counter: &AtomicU64, duration: Duration) {
    add(counter, duration_ns(duration));
}

impl Counters {
    /// The counters' values; the caller fills in the overlay and the faults.
    pub fn snapshot(&self) -> Stats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Stats {
            reads: get(&self.reads),
            writes: get(&self.writes),
            bytes_read: get(&self.bytes_read),
            bytes_written: get(&self.bytes_written),
            fsyncs: get(&self.fsyncs),
            flushes: get(&self.flushes),
            discards: get(&self.discards),
            failed: get(&self.failed),
            stalled: Duration::from_nanos(get(&self.stalled_ns)),
            stalled_now: get(&self.stalled_now),
            queued_now: get(&self.queued_now),
            slowed: Duration::from_nanos(get(&self.slowed_ns)),
            power_cuts: get(&self.power_cuts),
            unflushed_bytes: 0,
            overlay_overflows: get(&self.overlay_overflows),
            faults: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_every_counter_and_the_faults() {
        let stats = Stats {
            reads: 3,
            stalled: Duration::from_millis(2),
            faults: vec!["stall".to_string(), "say \"hi\"".to_string()],
            ..Stats::default()
        };
        let json = stats.to_json();
        assert!(json.starts_with("{\"reads\":3,\"writes\":0,"), "{json}");
        assert!(json.contains("\"stalled_ns\":2000000,"), "{json}");
        assert!(
            json.ends_with("\"faults\":[\"stall\",\"say \\\"hi\\\"\"]}\n"),
            "{json}"
        );
    }
}
