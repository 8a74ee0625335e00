//! Time as the recording code reads it: the machine's clocks, or a virtual clock that only
//! moves when the code waits.
//!
//! The writer, the reader and the durability coordinator never call `Instant::now` or
//! `thread::sleep` themselves: they ask the [`Clock`] their members come with. Real targets
//! give [`Clock::Real`]; simulated disks give [`Clock::Virtual`], on which a wait (a sleep,
//! a simulated I/O's latency) advances time at once instead of passing it, so that a run on
//! simulated disks takes no real time for its stalls and timeouts, and the same seed gives
//! the same sequence of events every time.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where time comes from.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The machine's monotonic and wall clocks; sleeping sleeps.
    #[default]
    Real,
    /// Virtual time, shared by every handle cloned from one [`Clock::new_virtual`].
    Virtual(Arc<VirtualTime>),
}

/// A virtual clock: a fixed origin and the virtual nanoseconds since it.
#[derive(Debug)]
pub struct VirtualTime {
    origin: Instant,
    origin_wall_ns: u64,
    elapsed_ns: AtomicU64,
    /// How far the wall clock has been set away from the monotonic one ([`Clock::step_wall`]).
    wall_step_ns: AtomicI64,
}

/// The wall time a virtual clock starts at (2026-01-01T00:00:00Z): a fixed instant, so
/// that what a simulated run writes (chunk timestamps, entry times) repeats too.
const VIRTUAL_EPOCH_NS: u64 = 1_767_225_600_000_000_000;

impl Clock {
    /// A virtual clock at its origin.
    pub fn new_virtual() -> Clock {
        Clock::Virtual(Arc::new(VirtualTime {
            origin: Instant::now(),
            origin_wall_ns: VIRTUAL_EPOCH_NS,
            elapsed_ns: AtomicU64::new(0),
            wall_step_ns: AtomicI64::new(0),
        }))
    }

    pub fn is_virtual(&self) -> bool {
        matches!(self, Clock::Virtual(_))
    }

    /// The monotonic now.
    pub fn now(&self) -> Instant {
        match self {
            Clock::Real => Instant::now(),
            Clock::Virtual(time) => time.origin + Duration::from_nanos(time.elapsed()),
        }
    }

    /// Time since `earlier` (zero where `earlier` is later).
    pub fn since(&self, earlier: Instant) -> Duration {
        self.now().saturating_duration_since(earlier)
    }

    /// Nanoseconds since the Unix epoch, the on-disk format's clock.
    pub fn wall_ns(&self) -> u64 {
        match self {
            Clock::Real => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
            Clock::Virtual(time) => (time.origin_wall_ns + time.elapsed())
                .wrapping_add_signed(time.wall_step_ns.load(Ordering::SeqCst)),
        }
    }

    /// Sets the wall clock `by_ns` forward (back when negative), as an NTP step or an
    /// operator does, while the monotonic clock goes on unmoved: a virtual clock's test of
    /// what a recording makes of it. The real clocks are the system's and are never set.
    pub fn step_wall(&self, by_ns: i64) {
        if let Clock::Virtual(time) = self {
            time.wall_step_ns.fetch_add(by_ns, Ordering::SeqCst);
        }
    }

    /// Waits `duration`: sleeps on the real clock, moves the virtual one on by as much.
    pub fn sleep(&self, duration: Duration) {
        match self {
            Clock::Real => std::thread::sleep(duration),
            Clock::Virtual(time) => {
                time.elapsed_ns
                    .fetch_add(duration.as_nanos() as u64, Ordering::SeqCst);
            }
        }
    }

    /// Waits until `deadline` (at once where it has passed).
    pub fn sleep_until(&self, deadline: Instant) {
        match self {
            Clock::Real => std::thread::sleep(deadline.saturating_duration_since(Instant::now())),
            Clock::Virtual(time) => {
                let target = deadline.saturating_duration_since(time.origin).as_nanos() as u64;
                time.elapsed_ns.fetch_max(target, Ordering::SeqCst);
            }
        }
    }
}

impl VirtualTime {
    fn elapsed(&self) -> u64 {
        self.elapsed_ns.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_moves_only_when_waited_on() {
        let clock = Clock::new_virtual();
        let start = clock.now();
        let wall = clock.wall_ns();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(clock.now(), start, "real time passing moves nothing");
        clock.sleep(Duration::from_secs(3));
        assert_eq!(clock.since(start), Duration::from_secs(3));
        assert_eq!(clock.wall_ns() - wall, 3_000_000_000);
        clock.sleep_until(start + Duration::from_secs(2));
        assert_eq!(
            clock.since(start),
            Duration::from_secs(3),
            "never backwards"
        );
        clock.sleep_until(start + Duration::from_secs(5));
        assert_eq!(clock.since(start), Duration::from_secs(5));
    }

    #[test]
    fn clones_share_one_virtual_time_and_the_epoch_is_fixed() {
        let clock = Clock::new_virtual();
        let other = clock.clone();
        other.sleep(Duration::from_millis(7));
        assert_eq!(clock.wall_ns(), VIRTUAL_EPOCH_NS + 7_000_000);
        assert!(!Clock::Real.is_virtual() && clock.is_virtual());
    }

    #[test]
    fn the_real_clock_passes_real_time() {
        let clock = Clock::Real;
        let start = clock.now();
        clock.sleep(Duration::from_millis(2));
        assert!(clock.since(start) >= Duration::from_millis(2));
        assert!(clock.wall_ns() > VIRTUAL_EPOCH_NS);
    }
}
