//! The active faults and what they do to a request: hold it (stall), make it wait its turn
//! (slow), or fail it.
//!
//! Every request passes [`FaultState::admit`] before it touches data: first the stall, then
//! the rate limit, then the failures (dying, then the failure ranges; for an FSYNC, dying
//! and then the flush rule), so that a failure added during a stall applies to the requests
//! the stall held. Changes (inject, resume, clear) may come from any thread
//! while requests wait; waiting requests sleep on condition variables that those changes
//! signal, so `resume` and `clear` release them at once.
//!
//! The fast path, no fault at all, is two relaxed atomic loads and a read lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use crate::fault::{Errno, Fault, Op};
use crate::stats::{self, Counters};

/// A request as the faults see it: what it does and which bytes it touches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Access {
    /// `Op::Read` or `Op::Write`; `None` for a flush (FSYNC), which has no range.
    pub op: Option<Op>,
    /// First byte touched.
    pub offset: u64,
    /// Bytes touched.
    pub len: u64,
    /// Bytes moved, for the rate limit (0 for a discard or fsync).
    pub payload_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stall {
    Off,
    UntilResumed,
    Until(Instant),
}

#[derive(Debug)]
struct Pacer {
    /// 0 when not slowed.
    rate_bytes_per_s: u64,
    /// When the timeline is next free: a request starts its transfer no earlier.
    next_free: Instant,
    /// Bumped by `clear`, so that sleepers stop waiting for a rate that is gone.
    generation: u64,
}

/// The failures in force for reads and writes: read on every request.
#[derive(Debug, Default)]
struct Failing {
    /// `Fault::Fail` only, in the order added.
    ranges: Vec<Fault>,
    /// `Some(fail_reads)` while dying.
    dying: Option<bool>,
}

/// The faults in force, shared by every request and every controller.
#[derive(Debug)]
pub(crate) struct FaultState {
    fails: RwLock<Failing>,
    /// Flushes still let through before each later one fails; `None` without a flush rule.
    /// Locked by flushes only, which are rare.
    flush_rule: Mutex<Option<u64>>,
    stall: Mutex<Stall>,
    stall_changed: Condvar,
    stalling: AtomicBool,
    pacer: Mutex<Pacer>,
    pacer_changed: Condvar,
    slowing: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind, still consistent.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FaultState {
    pub fn new() -> FaultState {
        FaultState {
            fails: RwLock::new(Failing::default()),
            flush_rule: Mutex::new(None),
            stall: Mutex::new(Stall::Off),
            stall_changed: Condvar::new(),
            stalling: AtomicBool::new(false),
            pacer: Mutex::new(Pacer {
                rate_bytes_per_s: 0,
                next_free: Instant::now(),
                generation: 0,
            }),
            pacer_changed: Condvar::new(),
            slowing: AtomicBool::new(false),
        }
    }

    /// Whether a request may have to wait: then it is served off the FUSE threads, so that
    /// the control file stays answerable.
    pub fn delaying(&self) -> bool {
        self.stalling.load(Ordering::Relaxed) || self.slowing.load(Ordering::Relaxed)
    }

    pub fn inject(&self, fault: Fault) {
        match fault {
            Fault::Fail { .. } => self.write_fails().ranges.push(fault),
            Fault::FailFlush { after } => *lock(&self.flush_rule) = Some(after),
            Fault::Dying { fail_reads } => self.write_fails().dying = Some(fail_reads),
            Fault::Stall { duration } => {
                let stall = match duration {
                    None => Stall::UntilResumed,
                    Some(duration) => Stall::Until(Instant::now() + duration),
                };
                self.set_stall(stall);
            }
            Fault::Slow { rate_bytes_per_s } => {
                assert!(rate_bytes_per_s > 0, "a rate of 0 is a stall");
                let mut pacer = lock(&self.pacer);
                pacer.rate_bytes_per_s = rate_bytes_per_s;
                pacer.next_free = Instant::now();
                self.slowing.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Ends a stall.
    pub fn resume(&self) {
        self.set_stall(Stall::Off);
    }

    /// Removes every fault and releases every waiting request.
    pub fn clear(&self) {
        *self.write_fails() = Failing::default();
        *lock(&self.flush_rule) = None;
        self.set_stall(Stall::Off);
        let mut pacer = lock(&self.pacer);
        pacer.rate_bytes_per_s = 0;
        pacer.generation += 1;
        self.slowing.store(false, Ordering::Relaxed);
        self.pacer_changed.notify_all();
    }

    /// The faults in force, as values (an expired stall is not listed).
    pub fn faults(&self) -> Vec<Fault> {
        let (mut faults, dying) = {
            let fails = self.read_fails();
            (fails.ranges.clone(), fails.dying)
        };
        if let Some(after) = *lock(&self.flush_rule) {
            faults.push(Fault::FailFlush { after });
        }
        if let Some(fail_reads) = dying {
            faults.push(Fault::Dying { fail_reads });
        }
        match *lock(&self.stall) {
            Stall::Off => {}
            Stall::UntilResumed => faults.push(Fault::Stall { duration: None }),
            Stall::Until(end) => {
                let left = end.saturating_duration_since(Instant::now());
                if !left.is_zero() {
                    faults.push(Fault::Stall {
                        duration: Some(left),
                    });
                }
            }
        }
        let rate_bytes_per_s = lock(&self.pacer).rate_bytes_per_s;
        if rate_bytes_per_s > 0 {
            faults.push(Fault::Slow { rate_bytes_per_s });
        }
        faults
    }

    /// Lets a request through the faults: waits out a stall and its turn under a rate
    /// limit, then answers the errno it must fail with, if any.
    pub fn admit(&self, access: Access, counters: &Counters) -> Option<Errno> {
        if self.stalling.load(Ordering::Relaxed) {
            self.wait_stall(counters);
        }
        if self.slowing.load(Ordering::Relaxed) && access.payload_bytes > 0 {
            self.pace(access.payload_bytes, counters);
        }
        let Some(op) = access.op else {
            return self.admit_flush();
        };
        let fails = self.read_fails();
        match fails.dying {
            Some(_) if op == Op::Write => return Some(Errno::Eio),
            Some(true) if op == Op::Read => return Some(Errno::Eio),
            _ => {}
        }
        let end = access.offset.saturating_add(access.len);
        fails.ranges.iter().find_map(|fault| match fault {
            Fault::Fail {
                op: failing,
                range,
                errno,
            } if failing.covers(op) && range.start < end && access.offset < range.end => {
                Some(*errno)
            }
            _ => None,
        })
    }

    /// A flush's failure: EIO while dying, or once the flush rule has let its count through.
    fn admit_flush(&self) -> Option<Errno> {
        if self.read_fails().dying.is_some() {
            return Some(Errno::Eio);
        }
        match &mut *lock(&self.flush_rule) {
            None => None,
            Some(0) => Some(Errno::Eio),
            Some(after) => {
                *after -= 1;
                None
            }
        }
    }

    fn set_stall(&self, stall: Stall) {
        let mut current = lock(&self.stall);
        *current = stall;
        self.stalling.store(stall != Stall::Off, Ordering::Relaxed);
        self.stall_changed.notify_all();
    }

    fn wait_stall(&self, counters: &Counters) {
        let arrived = Instant::now();
        let mut stall = lock(&self.stall);
        if *stall == Stall::Off {
            return;
        }
        stats::bump(&counters.stalled_now);
        loop {
            stall = match *stall {
                Stall::Off => break,
                Stall::UntilResumed => self.wait(&self.stall_changed, stall, None),
                Stall::Until(end) => {
                    let now = Instant::now();
                    if now >= end {
                        *stall = Stall::Off;
                        self.stalling.store(false, Ordering::Relaxed);
                        break;
                    }
                    self.wait(&self.stall_changed, stall, Some(end - now))
                }
            };
        }
        counters.stalled_now.fetch_sub(1, Ordering::Relaxed);
        stats::add_duration(&counters.stalled_ns, arrived.elapsed());
    }

    /// Reserves the request's slot on the rate's timeline and sleeps until its end.
    fn pace(&self, bytes: u64, counters: &Counters) {
        let arrived = Instant::now();
        let mut pacer = lock(&self.pacer);
        if pacer.rate_bytes_per_s == 0 {
            return;
        }
        let transfer = Duration::from_secs_f64(bytes as f64 / pacer.rate_bytes_per_s as f64);
        let end = pacer.next_free.max(arrived) + transfer;
        pacer.next_free = end;
        let generation = pacer.generation;
        while pacer.generation == generation {
            let now = Instant::now();
            if now >= end {
                break;
            }
            pacer = self.wait(&self.pacer_changed, pacer, Some(end - now));
        }
        stats::add_duration(&counters.slowed_ns, arrived.elapsed());
    }

    fn wait<'a, T>(
        &self,
        changed: &Condvar,
        guard: MutexGuard<'a, T>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, T> {
        let result = match timeout {
            None => changed.wait(guard).map_err(|p| p.into_inner()),
            Some(timeout) => changed
                .wait_timeout(guard, timeout)
                .map(|(guard, _)| guard)
                .map_err(|p| p.into_inner().0),
        };
        result.unwrap_or_else(|guard| guard)
    }

    fn read_fails(&self) -> std::sync::RwLockReadGuard<'_, Failing> {
        self.fails.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_fails(&self) -> std::sync::RwLockWriteGuard<'_, Failing> {
        self.fails.write().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    fn write(offset: u64, len: u64) -> Access {
        Access {
            op: Some(Op::Write),
            offset,
            len,
            payload_bytes: len,
        }
    }

    #[test]
    fn failures_apply_to_intersecting_requests_of_their_kind() {
        let state = FaultState::new();
        let counters = Counters::default();
        state.inject(Fault::Fail {
            op: Op::Write,
            range: 8192..12288,
            errno: Errno::Enospc,
        });
        assert_eq!(state.admit(write(4096, 4096), &counters), None);
        assert_eq!(
            state.admit(write(4096, 4097), &counters),
            Some(Errno::Enospc)
        );
        assert_eq!(state.admit(write(12287, 1), &counters), Some(Errno::Enospc));
        assert_eq!(state.admit(write(12288, 4096), &counters), None);
        let read = Access {
            op: Some(Op::Read),
            ..write(8192, 4096)
        };
        assert_eq!(state.admit(read, &counters), None);
        state.clear();
        assert_eq!(state.admit(write(8192, 4096), &counters), None);
    }

    fn read(offset: u64, len: u64) -> Access {
        Access {
            op: Some(Op::Read),
            ..write(offset, len)
        }
    }

    fn flush() -> Access {
        Access {
            op: None,
            offset: 0,
            len: 0,
            payload_bytes: 0,
        }
    }

    #[test]
    fn a_flush_rule_fails_flushes_after_its_count_and_nothing_else() {
        let state = FaultState::new();
        let counters = Counters::default();
        assert_eq!(state.admit(flush(), &counters), None, "no rule");
        state.inject(Fault::FailFlush { after: 2 });
        assert_eq!(state.faults(), vec![Fault::FailFlush { after: 2 }]);
        assert_eq!(state.admit(flush(), &counters), None, "first let through");
        assert_eq!(state.faults(), vec![Fault::FailFlush { after: 1 }]);
        assert_eq!(state.admit(write(0, 4096), &counters), None, "writes work");
        assert_eq!(state.admit(read(0, 4096), &counters), None, "reads work");
        assert_eq!(state.admit(flush(), &counters), None, "second let through");
        for _ in 0..3 {
            assert_eq!(state.admit(flush(), &counters), Some(Errno::Eio));
        }
        assert_eq!(state.faults(), vec![Fault::FailFlush { after: 0 }]);
        assert_eq!(state.admit(write(0, 4096), &counters), None);

        // A new rule replaces the old one.
        state.inject(Fault::FailFlush { after: 1 });
        assert_eq!(state.admit(flush(), &counters), None);
        assert_eq!(state.admit(flush(), &counters), Some(Errno::Eio));
        state.clear();
        assert_eq!(state.admit(flush(), &counters), None, "cleared");
        assert_eq!(state.faults(), vec![]);
    }

    #[test]
    fn dying_fails_writes_and_flushes_and_reads_only_when_asked() {
        let state = FaultState::new();
        let counters = Counters::default();
        state.inject(Fault::Fail {
            op: Op::Write,
            range: 0..4096,
            errno: Errno::Enospc,
        });
        state.inject(Fault::Dying { fail_reads: false });
        assert_eq!(
            state.admit(write(1 << 30, 4096), &counters),
            Some(Errno::Eio)
        );
        assert_eq!(
            state.admit(write(0, 4096), &counters),
            Some(Errno::Eio),
            "dying decides before the ranges"
        );
        let discard = Access {
            payload_bytes: 0,
            ..write(8192, 1 << 20)
        };
        assert_eq!(state.admit(discard, &counters), Some(Errno::Eio));
        assert_eq!(state.admit(flush(), &counters), Some(Errno::Eio));
        assert_eq!(state.admit(read(0, 4096), &counters), None, "reads work");
        assert_eq!(
            state.faults(),
            vec![
                Fault::Fail {
                    op: Op::Write,
                    range: 0..4096,
                    errno: Errno::Enospc,
                },
                Fault::Dying { fail_reads: false }
            ]
        );

        state.inject(Fault::Dying { fail_reads: true });
        assert_eq!(state.admit(read(0, 4096), &counters), Some(Errno::Eio));
        assert_eq!(state.admit(write(0, 4096), &counters), Some(Errno::Eio));
        assert_eq!(state.admit(flush(), &counters), Some(Errno::Eio));

        // Dying fails flushes without using up a flush rule's count.
        state.inject(Fault::FailFlush { after: 1 });
        assert_eq!(state.admit(flush(), &counters), Some(Errno::Eio));
        assert!(state.faults().contains(&Fault::FailFlush { after: 1 }));

        state.clear();
        assert_eq!(state.admit(write(1 << 30, 4096), &counters), None);
        assert_eq!(state.admit(read(0, 4096), &counters), None);
        assert_eq!(state.admit(flush(), &counters), None);
        assert_eq!(state.faults(), vec![]);
    }

    #[test]
    fn a_timed_stall_ends_by_itself_and_resume_ends_any() {
        let state = Arc::new(FaultState::new());
        let counters = Arc::new(Counters::default());
        state.inject(Fault::Stall {
            duration: Some(Duration::from_millis(50)),
        });
        let start = Instant::now();
        state.admit(write(0, 1), &counters);
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert!(!state.delaying());

        state.inject(Fault::Stall { duration: None });
        let waiter = {
            let (state, counters) = (state.clone(), counters.clone());
            thread::spawn(move || state.admit(write(0, 1), &counters))
        };
        while counters.stalled_now.load(Ordering::Relaxed) == 0 {
            thread::sleep(Duration::from_millis(1));
        }
        state.resume();
        assert_eq!(waiter.join().unwrap(), None);
        assert_eq!(counters.stalled_now.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn slow_serializes_requests_on_one_timeline() {
        let state = FaultState::new();
        let counters = Counters::default();
        state.inject(Fault::Slow {
            rate_bytes_per_s: 100_000,
        });
        // Four requests at once, 20 000 bytes at 100 000 B/s: on one timeline the last ends
        // after 200 ms, where each on a rate of its own would end after 50. (Only a lower
        // bound: a loaded machine may take any time longer.)
        let start = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| state.admit(write(0, 5_000), &counters));
            }
        });
        let elapsed = start.elapsed();
        assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
        assert_eq!(
            state.faults(),
            vec![Fault::Slow {
                rate_bytes_per_s: 100_000
            }]
        );
    }
}
