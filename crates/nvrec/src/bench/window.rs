//! A logging window of a bench: what completed in it, and several merged into one. The
//! bench's driver logs them; its analysis and plateau finding read them.

/// What completed in one logging window.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Window {
    /// Start of the window, seconds since the workload started.
    pub start_s: f64,
    pub duration_s: f64,
    pub bytes: u64,
    /// Bytes completed since the workload started, at the end of this window.
    pub total_bytes: u64,
    /// For sequential workloads: how far into the region the completed transfers reach (the
    /// position on the drive, which differs from `total_bytes` once a ring wraps).
    pub position_bytes: u64,
    pub rate_bytes_per_s: f64,
    /// The slowest transfer seen completing in the window; 0 when none completed.
    pub latency_max_us: f64,
}

/// One window covering consecutive `windows` (at least one).
pub fn merge_windows(windows: &[Window]) -> Window {
    let last = windows[windows.len() - 1];
    let bytes: u64 = windows.iter().map(|window| window.bytes).sum();
    let duration_s: f64 = windows.iter().map(|window| window.duration_s).sum();
    Window {
        start_s: windows[0].start_s,
        duration_s,
        bytes,
        total_bytes: last.total_bytes,
        position_bytes: last.position_bytes,
        rate_bytes_per_s: bytes as f64 / duration_s,
        latency_max_us: windows
            .iter()
            .map(|window| window.latency_max_us)
            .fold(0.0, f64::max),
    }
}
