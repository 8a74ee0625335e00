//! Stalls and slowness through a loop device with O_DIRECT: a timed stall holds a write for
//! about its duration, `resume` releases a held write, and a rate limit makes a write of M
//! bytes take about M / rate.
//!
//! The bounds are loose (a loaded 2-core machine), but tight enough to tell a stall or a
//! limit from its absence.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{errno, rig, timed, write};
use nvrec_faultydisk::Durability;

const MIB: u64 = 1 << 20;

#[test]
fn stall_for_delays_a_write_by_about_that_long() {
    let Some(rig) = rig("stall-for", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    let (_, unstalled) = timed(|| write(&rig.device, 0, 65536, 1).unwrap());
    rig.disk.stall_for(Duration::from_secs(1));
    let (result, stalled) = timed(|| write(&rig.device, 0, 65536, 2));
    assert_eq!(errno(&result), 0);
    eprintln!("unstalled write {unstalled:?}, stalled write {stalled:?}");
    assert!(stalled >= Duration::from_millis(900), "{stalled:?}");
    assert!(stalled < Duration::from_millis(2500), "{stalled:?}");
    let stats = rig.disk.stats();
    assert!(stats.stalled >= Duration::from_millis(900), "{stats:?}");
    assert!(stats.faults.is_empty(), "the stall ended: {stats:?}");
    rig.finish();
}

#[test]
fn resume_releases_a_stalled_write() {
    let Some(rig) = rig("stall-resume", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    rig.disk.stall();
    let device = rig.device.try_clone().unwrap();
    let started = Instant::now();
    let writer = thread::spawn(move || {
        let result = write(&device, MIB, 65536, 3);
        (errno(&result), started.elapsed())
    });
    wait_until(|| rig.disk.stats().stalled_now >= 1);
    thread::sleep(Duration::from_millis(300));
    assert!(!writer.is_finished(), "the write went through a stall");
    assert_eq!(rig.disk.stats().faults, vec!["stall"]);
    let resumed = started.elapsed();
    rig.disk.resume();
    let (status, finished) = writer.join().unwrap();
    assert_eq!(status, 0);
    assert!(finished >= resumed, "{finished:?} < {resumed:?}");
    assert!(finished - resumed < Duration::from_secs(1), "{finished:?}");
    assert_eq!(rig.disk.stats().stalled_now, 0);
    rig.finish();
}

#[test]
fn slow_limits_a_write_to_about_its_rate() {
    let Some(rig) = rig("slow", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    let rate_bytes_per_s = 4 * MIB;
    rig.disk.slow(rate_bytes_per_s);
    let len = 2 * MIB as usize;
    let (result, took) = timed(|| write(&rig.device, 0, len, 4));
    assert_eq!(errno(&result), 0);
    let expected = Duration::from_secs_f64(len as f64 / rate_bytes_per_s as f64);
    eprintln!("{len} bytes at {rate_bytes_per_s} B/s: {took:?}, expected {expected:?}");
    assert!(took >= expected.mul_f64(0.9), "{took:?}");
    assert!(
        took < expected.mul_f64(2.0) + Duration::from_millis(300),
        "{took:?}"
    );
    rig.disk.clear();
    let (_, fast) = timed(|| write(&rig.device, 0, len, 5).unwrap());
    assert!(fast < expected / 2, "still slow after clear: {fast:?}");
    rig.finish();
}

fn wait_until(condition: impl Fn() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out");
        thread::sleep(Duration::from_millis(5));
    }
}
