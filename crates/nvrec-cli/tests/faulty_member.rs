//! Recordings over a member that fails, stalls or slows down: a faulty block device (a FUSE
//! file under a loop device, `nvrec-faultydisk`) beside a healthy file. Every case checks
//! that nothing acknowledged is lost and that the failure is reported, never silent.
//! Needs root and /dev/fuse; skips, saying why, elsewhere.

mod common;

use common::*;
use nvrec_faultydisk::{Errno, FaultyDisk, LoopDevice, Op, Options};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

/// A healthy file member and a faulty loop-device member, each `size` bytes. Fields drop
/// in order: the loop device is detached, the disk unmounted, then the files removed.
struct Pair {
    device: LoopDevice,
    disk: FaultyDisk,
    healthy: PathBuf,
    _scratch: Scratch,
    _backing: RemovedOnDrop,
}

/// A file this test made outside its scratch directory, removed when dropped.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The cases judge loss under timing, so they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Pair {
    fn new(name: &str, size: u64) -> Option<Pair> {
        if no_faulty_disks() {
            return None;
        }
        let scratch = Scratch::new(name);
        let healthy = scratch.path("healthy.img");
        std::fs::File::create(&healthy)
            .unwrap()
            .set_len(size)
            .unwrap();
        let backing = PathBuf::from(format!(
            "/dev/shm/nvrec-faulty-{}-{name}.img",
            std::process::id()
        ));
        let removed = RemovedOnDrop(backing.clone());
        let disk = FaultyDisk::start(&backing, size, Options::default()).unwrap();
        let device = disk.attach_loop().unwrap();
        Some(Pair {
            device,
            disk,
            healthy,
            _scratch: scratch,
            _backing: removed,
        })
    }

    fn targets(&self) -> Vec<PathBuf> {
        vec![self.healthy.clone(), self.device.path().to_path_buf()]
    }
}

fn replay(targets: &[PathBuf]) -> Output {
    run(nvrec().args(["replay", "--output", "-"]).args(targets))
}

/// What a command said on stderr (replay's stdout is the stream).
fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn verify(targets: &[PathBuf]) -> serde_json::Value {
    let output = run(nvrec().args(["--json", "verify"]).args(targets));
    assert!(output.status.success(), "{}", text(&output));
    json(&output)
}

/// Where the data area of a member of this size surely has begun (the index area of a
/// small member takes well under 4 MiB).
const DATA_AREA: u64 = 8 << 20;

#[test]
fn a_member_whose_writes_fail_is_retired_and_the_recording_stays_whole() {
    let _serial = one_at_a_time();
    let Some(pair) = Pair::new("eio", 256 << 20) else {
        return;
    };
    pair.disk
        .fail(Op::Write, DATA_AREA..DATA_AREA + (1 << 20), Errno::Eio);
    let targets = pair.targets();
    let data = noise(80 << 20, 61);
    // Round-robin, so that the faulty member surely reaches the failing range.
    let rr = ["--stripe", "round-robin"];
    let output = record_stdin(&targets, &data, &rr);
    assert_eq!(output.status.code(), Some(6), "degraded: {}", text(&output));
    let report = json(&output);
    assert_eq!(report["degraded"], true, "{report}");
    let retirement = &report["retirements"][0];
    assert_eq!(retirement["member_index"], 1, "{report}");
    assert_eq!(retirement["cause"], "write_failed");
    assert_eq!(retirement["errno"], libc::EIO);
    assert!(
        retirement["redirect_chunk_count"].as_u64().unwrap() > 0,
        "{report}"
    );
    // The members' counts add up to the chunks written, once each.
    let written: u64 = report["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["chunk_count"].as_u64().unwrap())
        .sum();
    assert_eq!(written, report["chunk_count"].as_u64().unwrap(), "{report}");
    let back = replay(&targets);
    assert!(back.status.success(), "{}", stderr(&back));
    assert!(back.stdout == data, "replay is byte-exact");
    let verified = verify(&targets);
    assert_eq!(verified["recordings"][0]["degraded"], true);
    assert!(verified["recordings"][0]["redirected_chunk_count"].as_u64() > Some(0));
    let listing = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    let retirement = &listing["recordings"][0]["retirements"][0];
    assert_eq!(retirement["member_index"], 1, "{listing}");
    assert!(retirement["why"].as_str().unwrap().contains("write failed"));
    // ENOSPC reads as a full target.
    pair.disk.clear();
    pair.disk
        .fail(Op::Write, DATA_AREA..DATA_AREA + (1 << 20), Errno::Enospc);
    let again: Vec<&str> = rr.iter().copied().chain(["--overwrite"]).collect();
    let output = record_stdin(&targets, &data, &again);
    assert_eq!(output.status.code(), Some(6), "{}", text(&output));
    assert_eq!(json(&output)["retirements"][0]["cause"], "target_full");
    assert!(replay(&targets).stdout == data);
}

#[test]
fn on_member_failure_stop_ends_the_recording_with_an_error_and_claims_only_what_came_before() {
    let _serial = one_at_a_time();
    let Some(pair) = Pair::new("stop", 256 << 20) else {
        return;
    };
    pair.disk
        .fail(Op::Write, DATA_AREA..DATA_AREA + (1 << 20), Errno::Eio);
    let targets = pair.targets();
    let data = noise(80 << 20, 62);
    let output = record_stdin(
        &targets,
        &data,
        &["--on-member-failure", "stop", "--stripe", "round-robin"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["outcome"], "failed", "{report}");
    assert!(report["error"]
        .as_str()
        .unwrap()
        .contains("Input/output error"));
    let listing = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    assert_eq!(listing["recordings"][0]["state"], "aborted", "{listing}");
    // The recording ends where its writes stopped being whole: before the failed write.
    // It claims exactly that, and what was taken past it is counted as unrecorded.
    let back = replay(&targets);
    assert_eq!(back.status.code(), Some(0), "{}", stderr(&back));
    assert!(back.stdout.len() >= CHUNK, "the start is there");
    assert!(back.stdout.len() < data.len());
    assert!(back.stdout[..] == data[..back.stdout.len()]);
    assert_eq!(report["stream_bytes"], back.stdout.len() as u64, "{report}");
    assert!(report["unrecorded_bytes"].as_u64().unwrap() > 0, "{report}");
    let verified = run(nvrec().arg("verify").args(&targets));
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
}

/// A paced pattern recording of `seconds` at `rate` onto `pair`, with `fault` applied to
/// the faulty member after one second.
fn paced_with(
    pair: &Pair,
    rate: &str,
    seconds: u32,
    extra: &[&str],
    fault: impl FnOnce(&FaultyDisk),
) -> Output {
    let child = nvrec()
        .args(["--json", "record", "--source", "pattern", "--rate", rate])
        .args(["--duration", &format!("{seconds}s")])
        .args(extra)
        .args(pair.targets())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    fault(&pair.disk);
    child.wait_with_output().unwrap()
}

#[test]
fn a_member_that_stalls_for_3_s_costs_nothing_when_the_other_can_take_the_rate() {
    let _serial = one_at_a_time();
    let Some(pair) = Pair::new("stall", 1 << 30) else {
        return;
    };
    let output = paced_with(&pair, "150MB/s", 5, &[], |disk| {
        disk.stall_for(Duration::from_secs(3))
    });
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["lost_bytes"], 0, "{report}");
    assert_eq!(
        report["degraded"], false,
        "a 3 s stall is under the timeout"
    );
    assert!(
        pair.disk.stats().stalled > Duration::ZERO,
        "the member did stall"
    );
    let verified = verify(&pair.targets());
    assert_eq!(verified["recordings"][0]["pattern_error_count"], 0);
}

#[test]
fn a_member_stalled_past_the_timeout_is_retired_and_nothing_is_lost() {
    let _serial = one_at_a_time();
    let Some(pair) = Pair::new("timeout", 1 << 30) else {
        return;
    };
    let output = paced_with(&pair, "150MB/s", 4, &["--member-timeout", "1s"], |disk| {
        disk.stall_for(Duration::from_secs(4))
    });
    assert_eq!(output.status.code(), Some(6), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["lost_bytes"], 0, "{report}");
    assert_eq!(report["retirements"][0]["cause"], "timeout", "{report}");
    let verified = verify(&pair.targets());
    assert_eq!(verified["recordings"][0]["good"], true, "{verified}");
    assert_eq!(verified["recordings"][0]["degraded"], true);
}

#[test]
fn a_member_slowed_to_a_tenth_of_the_rate_costs_nothing() {
    let _serial = one_at_a_time();
    let Some(pair) = Pair::new("slow", 1 << 30) else {
        return;
    };
    let output = paced_with(&pair, "100MB/s", 4, &[], |disk| disk.slow(10_000_000));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["lost_bytes"], 0, "{report}");
    let members = report["members"].as_array().unwrap();
    let (fast, slow) = (
        members[0]["bytes"].as_u64().unwrap(),
        members[1]["bytes"].as_u64().unwrap(),
    );
    assert!(
        slow < fast,
        "the slow member took less: {slow} against {fast}"
    );
    assert_eq!(verify(&pair.targets())["recordings"][0]["good"], true);
}

#[test]
fn after_kill_9_a_degraded_recording_comes_back_with_its_retirement() {
    let _serial = one_at_a_time();
    let Some(pair) = Pair::new("kill9", 256 << 20) else {
        return;
    };
    pair.disk
        .fail(Op::Write, DATA_AREA..DATA_AREA + (1 << 20), Errno::Eio);
    let targets = pair.targets();
    let data = noise(40 << 20, 63);
    record_then_kill(
        &targets,
        &["--sync-interval", "100ms", "--stripe", "round-robin"],
        &data,
        Duration::from_millis(10),
    );
    let listing = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    let recording = &listing["recordings"][0];
    assert_eq!(recording["state"], "interrupted", "{listing}");
    assert_eq!(recording["degraded"], true, "{listing}");
    let back = replay(&targets);
    assert!(back.status.success(), "{}", text(&back));
    assert!(
        back.stdout.len() + CHUNK >= data.len(),
        "{} of {}",
        back.stdout.len(),
        data.len()
    );
    assert!(back.stdout[..] == data[..back.stdout.len()]);
}

/// A small seeded generator for the crash cases (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// Zeros over the first and last 8 MiB of `device` (the superblocks and the index area),
/// flushed.
fn wipe_ends(device: &std::path::Path) {
    use std::io::{Seek, SeekFrom};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(device)
        .unwrap();
    let len = file.seek(SeekFrom::End(0)).unwrap();
    let zeros = vec![0u8; 8 << 20];
    for at in [0, len.saturating_sub(zeros.len() as u64)] {
        file.seek(SeekFrom::Start(at)).unwrap();
        file.write_all(&zeros).unwrap();
    }
    file.sync_all().unwrap();
}

/// One seeded crash: a recording from stdin onto two tracked faulty members, killed with
/// SIGKILL at a seeded moment, then a power cut on both (writes not flushed are lost, or
/// with odd seeds torn sector by sector). Everything the surviving checkpoint calls durable
/// must come back, and nothing replay gives may differ from the input.
fn crash_case(seed: u64, disks: &[FaultyDisk; 2], devices: &[PathBuf]) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    // Every other case runs on slow members, so that writes are still in flight when a
    // checkpoint is made and when the recorder dies.
    // No set of an earlier case may survive this one's power cut: a recorder killed while
    // formatting leaves nothing flushed, and the old set would come back.
    for device in devices {
        wipe_ends(device);
    }
    for disk in disks {
        disk.clear();
        if seed % 4 < 2 {
            disk.slow(30_000_000 + rng.below(100_000_000));
        }
    }
    let data = noise((4 + rng.below(28) as usize) << 20, seed);
    // About a MiB every 2-9 ms; the kill falls anywhere in the stream's time, or after it.
    let pause_ms = 2 + rng.below(8);
    let feed_ms = (data.len() as u64 >> 20) * (pause_ms + 1);
    let kill_at = Duration::from_millis(100 + rng.below(feed_ms + feed_ms / 4));
    let mut child = nvrec()
        .args(["record", "--source", "stdin", "--sync-interval", "50ms"])
        // A small pool starts at once (a large one is touched page by page first).
        .args(["--buffer", "16M"])
        .args(devices)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The input keeps coming while the recorder dies, so that the kill (mostly) falls on
    // writes in flight and data not yet flushed: a checkpoint that claimed more than had
    // completed and was flushed would show after the power cut.
    let mut stdin = child.stdin.take().unwrap();
    let input = data.clone();
    let feeder = std::thread::spawn(move || {
        for piece in input.chunks(1 << 20) {
            if stdin.write_all(piece).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(pause_ms));
        }
    });
    std::thread::sleep(kill_at);
    child.kill().unwrap();
    child.wait().unwrap();
    feeder.join().unwrap();
    let torn = (seed % 2 == 1).then_some(seed);
    for disk in disks {
        disk.clear();
    }
    for disk in disks {
        disk.power_cut(torn).unwrap();
    }
    let set = match nvrec::recording::volume::open(
        devices,
        nvrec::device::Access::Read,
        nvrec::device::Safety::Check,
    ) {
        Ok(set) => set,
        // Killed while formatting: nothing was acknowledged yet.
        Err(_) => return,
    };
    // Acknowledged: what the newest checkpoint calls durable, or, once the recording was
    // closed (the checkpoint then names no recording), the whole closed recording.
    let checkpoint = set.newest_checkpoint().unwrap();
    let closed = set
        .recordings()
        .unwrap()
        .into_iter()
        .find(|e| e.state == nvrec::layout::RecordingState::Closed)
        .map(|e| e.stream_len_bytes);
    let acknowledged = match checkpoint {
        Some(c) if c.recording_id != 0 => c.durable_stream_bytes,
        _ => closed.unwrap_or(0),
    };
    let back = replay(devices);
    eprintln!(
        "  {} of {} bytes sent acknowledged, {} back{}",
        acknowledged,
        data.len(),
        back.stdout.len(),
        if back.status.success() {
            String::new()
        } else {
            format!(": {}", stderr(&back).trim())
        }
    );
    let case = format!("crash case seed {seed} (NVREC_CRASH_SEED={seed} repeats it)");
    if acknowledged == 0 && !back.status.success() {
        return; // No recording yet.
    }
    assert!(back.status.success(), "{case}: {}", stderr(&back));
    assert!(
        back.stdout.len() as u64 >= acknowledged,
        "{case}: {} bytes back, {acknowledged} acknowledged",
        back.stdout.len()
    );
    assert!(
        back.stdout[..] == data[..back.stdout.len()],
        "{case}: replay differs from the input"
    );
}

#[test]
fn power_cuts_after_kill_9_lose_nothing_a_checkpoint_acknowledged() {
    let _serial = one_at_a_time();
    if no_faulty_disks() {
        return;
    }
    let scratch = Scratch::new("crash");
    let options = || Options {
        durability: nvrec_faultydisk::Durability::TrackUnflushed {
            max_bytes: 512 << 20,
        },
        ..Options::default()
    };
    let disks = [0, 1].map(|i| {
        let backing = scratch.path(&format!("member{i}.img"));
        FaultyDisk::start(&backing, 128 << 20, options()).unwrap()
    });
    let loops: Vec<LoopDevice> = disks.iter().map(|d| d.attach_loop().unwrap()).collect();
    let devices: Vec<PathBuf> = loops.iter().map(|l| l.path().to_path_buf()).collect();
    let seeds: Vec<u64> = match std::env::var("NVREC_CRASH_SEED") {
        Ok(seed) => vec![seed.parse().expect("NVREC_CRASH_SEED is a number")],
        Err(_) => {
            let count = std::env::var("NVREC_CRASH_CASES")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(12u64);
            let base = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            (0..count).map(|i| base * 100 + i).collect()
        }
    };
    for seed in seeds {
        eprintln!("crash case seed {seed}");
        crash_case(seed, &disks, &devices);
    }
    drop(loops);
}
