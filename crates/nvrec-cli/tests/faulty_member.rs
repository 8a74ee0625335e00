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

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "a member that fails, dies, stalls, slows or loses its flushes on a FUSE-backed loop device, in real time";

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
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
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
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
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
    // The same failure in parts, for a program: the member, why, and the OS's errno.
    let failure = serde_json::json!({"kind": "member", "member": 1, "cause": "write_failed",
        "step": null, "recording_id": null, "errno": 5});
    assert_eq!(report["failure"], failure, "{report}");
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
/// the faulty member once it has taken 48 MiB of the recording.
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
    // The recording is underway: the faulty member has taken 48 MiB of it (about a second).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while pair.disk.stats().bytes_written < 48 << 20 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    fault(&pair.disk);
    child.wait_with_output().unwrap()
}

#[test]
fn a_member_that_stalls_for_3_s_costs_nothing_when_the_other_can_take_the_rate() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
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
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
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
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
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
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
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
        KillWhen::Durable((data.len() - CHUNK) as u64),
    );
    let listing = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    let recording = &listing["recordings"][0];
    assert_eq!(recording["state"], "interrupted", "{listing}");
    assert_eq!(recording["degraded"], true, "{listing}");
    check_replays_all_but_the_last_chunk(&targets, &data);
}

/// After a kill -9 of a recorder that had read all of `data`: `replay` gives it all but at
/// most the last chunk (its tail that no write had taken yet), byte for byte.
fn check_replays_all_but_the_last_chunk(targets: &[PathBuf], data: &[u8]) {
    let back = replay(targets);
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
    // About a MiB every 2-9 ms; the kill falls anywhere in the stream, by the bytes the
    // members have taken (whatever the machine's speed), or after it.
    let pause_ms = 2 + rng.below(8);
    let len = data.len() as u64;
    let kill_after_bytes = rng.below(len + len / 4);
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
    let written = || {
        disks
            .iter()
            .map(|disk| disk.stats().bytes_written)
            .sum::<u64>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while written() < kill_after_bytes.min(len) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    if kill_after_bytes >= len {
        // After the stream: all of it given to the recorder first.
        while !feeder.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
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
                .unwrap_or_else(|| nvrec_testkit::quick_or_full(3, 12));
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

// A dying member: a drive whose writes and flushes all fail at once (or only its flushes).
// A member that dies is retired and the recording goes on over the others (exit 6), whole;
// where no member is left, the recording ends with an error, and what its entry claims is
// every chunk that reached a drive.

/// Healthy file members and faulty loop-device members, each `size` bytes: the targets
/// are the healthy ones first, then the faulty ones. Fields drop in order: the loop devices
/// are detached, the disks unmounted, then the files removed.
struct Rig {
    devices: Vec<LoopDevice>,
    disks: Vec<FaultyDisk>,
    healthy: Vec<PathBuf>,
    scratch: Scratch,
    _backings: Vec<RemovedOnDrop>,
}

impl Rig {
    fn new(name: &str, healthy: usize, faulty: usize, size: u64) -> Option<Rig> {
        Rig::with(name, healthy, faulty, size, Options::default())
    }

    /// As [`Rig::new`], the faulty disks started with `options`.
    fn with(name: &str, healthy: usize, faulty: usize, size: u64, options: Options) -> Option<Rig> {
        if no_faulty_disks() {
            return None;
        }
        let scratch = Scratch::new(name);
        let healthy: Vec<PathBuf> = (0..healthy)
            .map(|i| {
                let path = scratch.path(&format!("healthy{i}.img"));
                std::fs::File::create(&path).unwrap().set_len(size).unwrap();
                path
            })
            .collect();
        let mut backings = Vec::new();
        let mut disks = Vec::new();
        for i in 0..faulty {
            let backing = PathBuf::from(format!(
                "/dev/shm/nvrec-faulty-{}-{name}-{i}.img",
                std::process::id()
            ));
            backings.push(RemovedOnDrop(backing.clone()));
            disks.push(FaultyDisk::start(&backing, size, options.clone()).unwrap());
        }
        // Attaching sends a flush of its own: flush rules are set after this.
        let devices = disks.iter().map(|d| d.attach_loop().unwrap()).collect();
        Some(Rig {
            devices,
            disks,
            healthy,
            scratch,
            _backings: backings,
        })
    }

    fn targets(&self) -> Vec<PathBuf> {
        self.healthy
            .iter()
            .cloned()
            .chain(self.devices.iter().map(|d| d.path().to_path_buf()))
            .collect()
    }

    /// The member index of faulty disk `i`.
    fn member_of(&self, i: usize) -> usize {
        self.healthy.len() + i
    }
}

/// What a paced pattern recording of `seconds` at `rate_bytes_per_s` sends.
fn due(rate_bytes_per_s: u64, seconds: u64) -> u64 {
    rate_bytes_per_s * seconds
}

/// A paced pattern recording (`--json`) onto `targets`, running.
fn spawn_pattern(
    targets: &[PathBuf],
    rate_bytes_per_s: u64,
    seconds: u64,
    extra: &[&str],
) -> std::process::Child {
    nvrec()
        .args(["--json", "record", "--source", "pattern"])
        .args(["--rate", &rate_bytes_per_s.to_string()])
        .args(["--duration", &format!("{seconds}s")])
        .args(extra)
        .args(targets)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` to end (killing it after 60 s: a recorder that hangs on a dead member
/// is a failure of its own) and returns what it said.
fn finish(mut child: std::process::Child) -> Output {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!(
                "the recorder did not end within 60 s (killed): {}",
                text(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The first recording as `ls --json` shows it now, if there is one.
fn listed_now(targets: &[PathBuf]) -> Option<serde_json::Value> {
    let output = run(nvrec().args(["--json", "ls"]).args(targets));
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let first = listed["recordings"].get(0)?.clone();
    Some(first)
}

/// Waits (at most 20 s) until `ls` shows the first recording running and `ready` holds of
/// it; returns the listing.
fn when_listed(
    targets: &[PathBuf],
    what: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(first) = listed_now(targets) {
            if first["state"] == "recording" && ready(&first) {
                return first;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ls never showed the running recording {what}: {:?}",
            listed_now(targets)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The set's newest checkpoint, where one names a running recording (None while there is
/// no set or none does). (`ls` shows a running recording as far as its chunks reach, past
/// its checkpoint.)
fn checkpointed(targets: &[PathBuf]) -> Option<nvrec::layout::Checkpoint> {
    let set = nvrec::recording::volume::open(
        targets,
        nvrec::device::Access::Read,
        nvrec::device::Safety::Check,
    )
    .ok()?;
    let checkpoint = set.newest_checkpoint().ok()??;
    (checkpoint.recording_id != 0).then_some(checkpoint)
}

/// Waits (at most 20 s) until the newest checkpoint names the running recording and `ready`
/// holds of it; returns it.
fn when_checkpointed(
    targets: &[PathBuf],
    what: &str,
    ready: impl Fn(&nvrec::layout::Checkpoint) -> bool,
) -> nvrec::layout::Checkpoint {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(checkpoint) = checkpointed(targets).filter(&ready) {
            return checkpoint;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint {what}: {:?}",
            checkpointed(targets)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `checkpoint` names `member` retired.
fn retires(checkpoint: &nvrec::layout::Checkpoint, member: u16) -> bool {
    checkpoint
        .retirements
        .iter()
        .any(|r| r.member_index == member)
}

/// Waits until a checkpoint names `member` retired, and checks that `recorder` still runs
/// then: the checkpoints go on over the other members.
fn when_retired(targets: &[PathBuf], member: u16, recorder: &mut std::process::Child) {
    when_checkpointed(targets, &format!("retires member {member}"), |c| {
        retires(c, member)
    });
    assert!(
        recorder.try_wait().unwrap().is_none(),
        "the first checkpoint that names member {member} retired came only as the recording \
         ended: no checkpoint was made while it was failing"
    );
}

/// Waits until a checkpoint has made some of the running recording durable.
fn when_some_is_durable(targets: &[PathBuf]) -> u64 {
    when_checkpointed(targets, "claims any of the recording", |c| {
        c.durable_stream_bytes > 0
    })
    .durable_stream_bytes
}

/// A paced pattern recording (see [`spawn_pattern`]) onto the rig, `fault` done to its
/// first faulty disk once a checkpoint has made some of the recording durable; what
/// `record` said.
fn faulted_once_durable(
    rig: &Rig,
    rate_bytes_per_s: u64,
    seconds: u64,
    extra: &[&str],
    fault: impl FnOnce(&FaultyDisk),
) -> Output {
    let targets = rig.targets();
    let child = spawn_pattern(&targets, rate_bytes_per_s, seconds, extra);
    when_some_is_durable(&targets);
    fault(&rig.disks[0]);
    finish(child)
}

fn u64_at(value: &serde_json::Value, key: &str) -> u64 {
    value[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {value}"))
}

/// Replays the first recording with its gaps as zeros and checks every byte: the pattern of
/// `seed` at its stream offset, zeros in each gap. Returns the recorded bytes replayed (the
/// replay's length less its zeros).
fn replay_is_the_pattern(targets: &[PathBuf], scratch: &Scratch, seed: u64) -> u64 {
    use std::io::Read;
    let path = scratch.path("replayed.bin");
    let output = run(nvrec()
        .args(["--json", "replay", "--gaps", "zero", "--output"])
        .arg(&path)
        .args(targets));
    assert_eq!(output.status.code(), Some(0), "replay: {}", text(&output));
    let report = json(&output);
    let len = std::fs::metadata(&path).unwrap().len();
    let gaps = replay_gaps(&report);
    let zero_filled: u64 = gaps
        .iter()
        .filter(|&&(_, end)| end <= len)
        .map(|&(gap, _)| gap)
        .sum();
    assert_eq!(report["zero_filled_bytes"], zero_filled, "{report}");
    let pattern = nvrec::pattern::Pattern::new(seed);
    let mut file = std::fs::File::open(&path).unwrap();
    let piece = 8usize << 20;
    let (mut got, mut want) = (vec![0u8; piece], vec![0u8; piece]);
    let mut offset = 0u64;
    while offset < len {
        let n = (len - offset).min(piece as u64) as usize;
        file.read_exact(&mut got[..n]).unwrap();
        pattern.fill(offset, &mut want[..n]);
        for &(gap, end) in &gaps {
            let (start, end) = ((end - gap).max(offset), end.min(offset + n as u64));
            if start < end {
                want[(start - offset) as usize..(end - offset) as usize].fill(0);
            }
        }
        if got[..n] != want[..n] {
            let at = (0..n).find(|&i| got[i] != want[i]).unwrap();
            panic!(
                "the replay differs from the pattern (seed {seed}, zeros in the gaps {gaps:?}) \
                 at stream offset {} of {len}: {report}",
                offset + at as u64
            );
        }
        offset += n as u64;
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    len - zero_filled
}

/// The first recording's entry against what its chunks say, and against `report` (what
/// `record --json` said): `ls` claims exactly what `ls --scan` finds (the same sequence
/// numbers and stream length, nothing unaccounted), `verify` is good, and the replay is the
/// pattern throughout with every recorded byte the report counts. Returns the listing.
fn entry_covers_every_chunk(
    targets: &[PathBuf],
    scratch: &Scratch,
    report: &serde_json::Value,
) -> serde_json::Value {
    let scanned = run(nvrec().args(["--json", "ls", "--scan"]).args(targets));
    let listing = json(&scanned);
    let entry = &listing["recordings"][0];
    let rows = listing["scan"].as_array().expect("ls --scan lists a scan");
    assert_eq!(rows.len(), 1, "one recording in the chunks: {listing}");
    let found = &rows[0]["found"];
    assert_eq!(rows[0]["in_table"], true, "{listing}");
    assert_eq!(
        entry["unaccounted_chunks"], 0,
        "nothing unaccounted: {listing}"
    );
    assert_eq!(
        entry["first_sequence"], found["first_sequence"],
        "the entry starts where the chunks do: {listing}"
    );
    assert_eq!(
        u64_at(entry, "end_sequence"),
        u64_at(found, "last_sequence") + 1,
        "the entry ends after the last chunk on the drives: {listing}"
    );
    assert_eq!(
        entry["stream_len_bytes"], found["stream_len_bytes"],
        "the entry's length is that of the chunks: {listing}"
    );
    assert_eq!(
        entry["bytes"], report["stream_bytes"],
        "the report says what the entry holds: {listing}\n{report}"
    );
    assert_eq!(
        entry["lost_bytes"], report["lost_bytes"],
        "{listing}\n{report}"
    );
    let output = run(nvrec().args(["--json", "verify"]).args(targets));
    assert_eq!(output.status.code(), Some(0), "verify: {}", text(&output));
    let verified = json(&output);
    let recording = &verified["recordings"][0];
    assert_eq!(recording["good"], true, "{verified}");
    assert_eq!(recording["pattern_error_count"], 0, "{verified}");
    assert_eq!(recording["missing_chunk_count"], 0, "{verified}");
    assert_eq!(recording["damage_count"], 0, "{verified}");
    assert_eq!(recording["unaccounted_chunks"], 0, "{verified}");
    assert_eq!(
        recording["payload_bytes"], report["stream_bytes"],
        "{verified}"
    );
    assert_eq!(recording["lost_bytes"], report["lost_bytes"], "{verified}");
    let seed = recording["pattern_seed"].as_u64().unwrap_or(0);
    let replayed = replay_is_the_pattern(targets, scratch, seed);
    assert_eq!(replayed, u64_at(report, "stream_bytes"), "{report}");
    entry.clone()
}

/// A paced recording that ended degraded with the members `retired` retired (each for an
/// EIO) and every byte of its `due_bytes` recorded, lost or overdue: the report, `ls`,
/// `ls --scan`, `verify` and `replay` agree.
fn check_degraded(rig: &Rig, output: &Output, retired: &[usize], due_bytes: u64) {
    let retired: Vec<(usize, i32)> = retired.iter().map(|&m| (m, libc::EIO)).collect();
    check_retired(rig, output, &retired, due_bytes);
}

/// As [`check_degraded`], each member of `retired` retired with its errno (0 for a
/// timeout).
fn check_retired(rig: &Rig, output: &Output, retired: &[(usize, i32)], due_bytes: u64) {
    let targets = rig.targets();
    assert_eq!(output.status.code(), Some(6), "degraded: {}", text(output));
    let report = json(output);
    eprintln!("  {}", summary(&report));
    assert_eq!(report["outcome"], "complete", "{report}");
    assert_eq!(report["degraded"], true, "{report}");
    assert!(report["error"].is_null(), "{report}");
    let mut named: Vec<(usize, i32)> = report["retirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                u64_at(r, "member_index") as usize,
                u64_at(r, "errno") as i32,
            )
        })
        .collect();
    named.sort_unstable();
    assert_eq!(named, retired, "the retired members and why: {report}");
    for retirement in report["retirements"].as_array().unwrap() {
        let member = u64_at(retirement, "member_index") as usize;
        assert_eq!(
            retirement["path"],
            targets[member].to_str().unwrap(),
            "{report}"
        );
    }
    assert_eq!(
        u64_at(&report, "stream_bytes")
            + u64_at(&report, "lost_bytes")
            + u64_at(&report, "overdue_bytes"),
        due_bytes,
        "recorded, lost and overdue add up to what the source sent: {report}"
    );
    let written: u64 = report["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| u64_at(m, "chunk_count"))
        .sum();
    assert_eq!(written, u64_at(&report, "chunk_count"), "{report}");
    let entry = entry_covers_every_chunk(&targets, &rig.scratch, &report);
    assert_eq!(entry["state"], "complete", "{entry}");
    let mut listed: Vec<usize> = entry["retirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| u64_at(r, "member_index") as usize)
        .collect();
    listed.sort_unstable();
    let members: Vec<usize> = retired.iter().map(|&(member, _)| member).collect();
    assert_eq!(listed, members, "ls names the retired members: {entry}");
}

/// A recording that ended with an error because its last member died: what it claims is
/// what the drives hold (see [`entry_covers_every_chunk`]), and the failure is reported.
fn check_failed_with_every_chunk_claimed(rig: &Rig, output: &Output) -> serde_json::Value {
    assert_eq!(output.status.code(), Some(1), "failed: {}", text(output));
    let report = json(output);
    eprintln!("  {}", summary(&report));
    assert_eq!(report["outcome"], "failed", "{report}");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|error| error.contains("Input/output error")),
        "{report}"
    );
    assert!(u64_at(&report, "stream_bytes") > 0, "{report}");
    let entry = entry_covers_every_chunk(&rig.targets(), &rig.scratch, &report);
    assert_ne!(entry["state"], "complete", "{entry}");
    report
}

const RATE: u64 = 300_000_000;

/// What a test prints of a `record --json` report (the error alone, where the recording
/// never began).
fn summary(report: &serde_json::Value) -> String {
    if report["outcome"].is_null() {
        return format!("error {}", report["error"]);
    }
    let members: Vec<String> = report["members"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| format!("{}", m["chunk_count"]))
        .collect();
    format!(
        "outcome {}, {} bytes recorded, {} lost, {} overdue, {} unrecorded, chunks per member [{}], \
         retirements {}, member errors {}, error {}",
        report["outcome"],
        report["stream_bytes"],
        report["lost_bytes"],
        report["overdue_bytes"],
        report["unrecorded_bytes"],
        members.join(", "),
        report["retirements"],
        report["member_errors"],
        report["error"]
    )
}

#[test]
fn a_member_that_dies_mid_recording_is_retired_and_every_byte_replays() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("dies", 1, 1, 1 << 30) else {
        return;
    };
    let targets = rig.targets();
    // Checkpoints every 500 ms, so that several fall after the death while it runs.
    let mut child = spawn_pattern(&targets, RATE, 3, &["--sync-interval", "500ms"]);
    // Once a checkpoint has claimed some of the recording, the faulty member dies.
    let durable = when_some_is_durable(&targets);
    rig.disks[0].dying();
    // The recording goes on over member 0: checkpoints name the retirement and claim more
    // than the last one before the death (the entry does not stop there).
    when_checkpointed(&targets, "claims more than before the death", |c| {
        retires(c, 1) && c.durable_stream_bytes > durable
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "no checkpoint past the death ({durable} bytes) while the recording ran"
    );
    let output = finish(child);
    assert!(rig.disks[0].stats().failed > 0, "the member did die");
    check_degraded(&rig, &output, &[1], due(RATE, 3));
    let report = json(&output);
    assert!(
        u64_at(&report["retirements"][0], "stream_offset_bytes") >= durable,
        "it died after the checkpoint: {report}"
    );
    assert!(
        report["members"][1]["chunk_count"].as_u64() > Some(0),
        "the member held some of the recording before it died: {report}"
    );
}

#[test]
fn a_member_that_dies_before_the_first_checkpoint_is_retired_and_every_byte_replays() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("dies-early", 1, 1, 1 << 30) else {
        return;
    };
    let targets = rig.targets();
    // Checkpoints every 2 s: the member dies between the one that starts the recording and
    // the first that claims any of it.
    let child = spawn_pattern(&targets, RATE, 3, &["--sync-interval", "2s"]);
    let first = when_checkpointed(&targets, "names the recording", |_| true);
    rig.disks[0].dying();
    assert_eq!(
        first.durable_stream_bytes, 0,
        "no checkpoint had claimed any of it yet: {first:?}"
    );
    let output = finish(child);
    check_degraded(&rig, &output, &[1], due(RATE, 3));
}

#[test]
fn a_second_member_that_dies_after_another_was_retired_leaves_the_last_to_carry_on() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("dies-second", 1, 2, 1 << 30) else {
        return;
    };
    // Member 1's writes fail early in its data area (round-robin, so that it surely gets
    // there); once it is retired, member 2 dies, and member 0 carries on alone.
    rig.disks[0].fail(Op::Write, DATA_AREA..DATA_AREA + (1 << 20), Errno::Eio);
    let targets = rig.targets();
    let mut child = spawn_pattern(&targets, RATE, 3, &["--stripe", "round-robin"]);
    when_some_is_durable(&targets);
    when_retired(&targets, 1, &mut child);
    rig.disks[1].dying();
    let output = finish(child);
    assert!(rig.disks[1].stats().failed > 0, "member 2 did die");
    check_degraded(&rig, &output, &[1, 2], due(RATE, 3));
    let report = json(&output);
    let when = |member: u64| {
        report["retirements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["member_index"] == member)
            .map(|r| u64_at(r, "retired_ns"))
            .unwrap()
    };
    assert!(when(1) <= when(2), "member 1 was retired first: {report}");
    // Its writes and flushes fail together: retired for whichever the writer met first.
    let cause = &report["retirements"][0]["cause"];
    assert!(
        cause == "write_failed" || cause == "flush_failed",
        "{report}"
    );
}

/// Two of three members dying within a millisecond of each other, mid-recording: both are
/// retired, the third carries on, and every byte replays (no hole between their runs of
/// redirected writes reads as damage).
#[test]
fn two_members_dying_together_leave_the_third_to_carry_on_and_every_byte_replays() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("die-together", 1, 2, 1 << 30) else {
        return;
    };
    let targets = rig.targets();
    let child = spawn_pattern(&targets, RATE, 3, &["--sync-interval", "500ms"]);
    when_some_is_durable(&targets);
    rig.disks[0].dying();
    rig.disks[1].dying();
    let output = finish(child);
    assert!(
        rig.disks.iter().all(|disk| disk.stats().failed > 0),
        "both died"
    );
    check_degraded(&rig, &output, &[1, 2], due(RATE, 3));
    let verified = verify(&targets);
    assert_eq!(verified["recordings"][0]["good"], true, "{verified}");
    assert_eq!(verified["recordings"][0]["damage_count"], 0, "{verified}");
}

#[test]
fn a_member_whose_flushes_fail_is_retired_though_its_writes_succeed() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("flushes", 1, 1, 1 << 30) else {
        return;
    };
    // Its writes still succeed, but none is ever made durable: the member is retired at
    // its next flush.
    let output = faulted_once_durable(&rig, RATE, 3, &[], FaultyDisk::fail_flushes);
    let stats = rig.disks[0].stats();
    assert!(stats.failed > 0, "a flush failed: {}", stats.to_json());
    check_degraded(&rig, &output, &[rig.member_of(0)], due(RATE, 3));
    // Retired for its flush, and said so (format 1.8), not for a write it never failed.
    let report = json(&output);
    assert_eq!(
        report["retirements"][0]["cause"], "flush_failed",
        "{report}"
    );
    let listed = run(nvrec().arg("ls").args(rig.targets()));
    assert!(
        text(&listed).contains(": flush failed ("),
        "{}",
        text(&listed)
    );
}

#[test]
fn a_member_whose_flushes_fail_holds_nothing_the_recording_needs_after_a_power_cut() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::with("flushes-cut", 1, 1, 1 << 30, tracking_unflushed()) else {
        return;
    };
    let output = faulted_once_durable(&rig, RATE, 3, &[], FaultyDisk::fail_flushes);
    // Exit 6 says every byte is on the other members: what the member wrote after its last
    // flush that succeeded was never durable there, and a power cut takes it.
    cut_power(&rig, &output);
    // And nothing at all is lost: exit 6 says every byte is on the other members.
    check_degraded(&rig, &output, &[1], due(RATE, 3));
}

/// Faulty disks that keep their writes in memory until a flush commits them, so that a
/// power cut takes what no flush made durable.
fn tracking_unflushed() -> Options {
    Options {
        durability: nvrec_faultydisk::Durability::TrackUnflushed {
            max_bytes: 768 << 20,
        },
        ..Options::default()
    }
}

/// A power cut on the rig's first faulty disk (started [`tracking_unflushed`]) after the
/// recording that `output` reports: it loses what the member wrote after its last flush
/// that succeeded. Never silent, at the least: whatever the cut took, `record` reported as
/// chunks the member never confirmed durable, and `verify` names it. Returns the chunks
/// `verify` finds missing.
fn cut_power(rig: &Rig, output: &Output) -> u64 {
    let member = rig.member_of(0);
    rig.disks[0].clear();
    let cut = rig.disks[0].power_cut(None).unwrap();
    let _ = std::process::Command::new("blockdev")
        .arg("--flushbufs")
        .arg(rig.devices[0].path())
        .status();
    eprintln!(
        "  the power cut lost {} unflushed bytes of member {member}",
        cut.sectors_dropped * 4096
    );
    let report = json(output);
    let unconfirmed: u64 = report["member_errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["member_index"] == member)
        .map(|e| u64_at(e, "unflushed_chunk_count"))
        .sum();
    let verified = json(&run(nvrec().args(["--json", "verify"]).args(rig.targets())));
    let missing = u64_at(&verified["recordings"][0], "missing_chunk_count");
    assert!(
        missing <= unconfirmed,
        "{missing} chunks lost to the cut, {unconfirmed} reported unconfirmed: {report}\n{verified}"
    );
    missing
}

#[test]
fn a_flush_that_fails_at_close_retires_the_member_or_is_reported() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("close", 1, 1, 256 << 20) else {
        return;
    };
    let targets = rig.targets();
    let disk = &rig.disks[0];
    let data = noise(24 << 20, 64);
    // No checkpoint runs between the one that starts the recording and its close: the n-th
    // flush after the input ends is the n-th of the close. Each run lets one more of them
    // through, until one runs with no flush failing.
    let mut past_the_last = false;
    for successes in 0..8u64 {
        disk.clear();
        let mut child = nvrec()
            .args([
                "--json",
                "record",
                "--source",
                "stdin",
                "--sync-interval",
                "60s",
            ])
            .args(if successes > 0 {
                &["--overwrite"][..]
            } else {
                &[]
            })
            .args(&targets)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        when_listed(&targets, "", |_| true);
        let failed_before = disk.stats().failed;
        disk.fail_flushes_after(successes);
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(&data);
        drop(stdin);
        let output = finish(child);
        let failed = disk.stats().failed - failed_before;
        disk.clear();
        let case = format!("{successes} flushes of the close let through, {failed} failed");
        let report = json(&output);
        eprintln!(
            "  {case}: exit {:?}, {}",
            output.status.code(),
            summary(&report)
        );
        let retired: Vec<u64> = report["retirements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| u64_at(r, "member_index"))
            .collect();
        let noted: Vec<u64> = report["member_errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| u64_at(e, "member_index"))
            .collect();
        if failed == 0 {
            assert_eq!(output.status.code(), Some(0), "{case}: {}", text(&output));
            assert!(retired.is_empty() && noted.is_empty(), "{case}: {report}");
            past_the_last = true;
        } else {
            // The first flush of the close makes the data durable before the entry claims
            // it: its failure retires the member. A later one may come after the entry was
            // closed, and is then reported as a member error; never silent either way.
            if successes == 0 {
                assert_eq!(output.status.code(), Some(6), "{case}: {}", text(&output));
            }
            if retired.is_empty() {
                // A failing drive all the same: exit 6, never 0.
                assert_eq!(output.status.code(), Some(6), "{case}: {}", text(&output));
                assert_eq!(noted, [1], "{case}: the failure is reported: {report}");
            } else {
                assert_eq!(output.status.code(), Some(6), "{case}: {}", text(&output));
                assert_eq!(retired, [1], "{case}: {report}");
                assert_eq!(report["retirements"][0]["errno"], libc::EIO, "{case}");
            }
        }
        assert_eq!(report["outcome"], "source_ended", "{case}: {report}");
        assert_eq!(
            report["stream_bytes"],
            data.len() as u64,
            "{case}: {report}"
        );
        assert_eq!(report["lost_bytes"], 0, "{case}: {report}");
        let listing = json(&run(nvrec()
            .args(["--json", "ls", "--scan"])
            .args(&targets)));
        let entry = &listing["recordings"][0];
        let found = &listing["scan"][0]["found"];
        assert_eq!(entry["state"], "complete", "{case}: {listing}");
        assert_eq!(entry["unaccounted_chunks"], 0, "{case}: {listing}");
        assert_eq!(
            u64_at(entry, "end_sequence"),
            u64_at(found, "last_sequence") + 1,
            "{case}: {listing}"
        );
        assert_eq!(entry["bytes"], data.len() as u64, "{case}: {listing}");
        let verified = run(nvrec().arg("verify").args(&targets));
        assert_eq!(
            verified.status.code(),
            Some(0),
            "{case}: {}",
            text(&verified)
        );
        let back = replay(&targets);
        assert_eq!(back.status.code(), Some(0), "{case}: {}", stderr(&back));
        assert!(back.stdout == data, "{case}: replay is byte-exact");
        if past_the_last {
            break;
        }
    }
    assert!(past_the_last, "a close that flushes more than 7 times?");
}

#[test]
fn the_only_member_dying_ends_the_recording_with_an_error_and_its_entry_covers_every_chunk() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("dies-alone", 0, 1, 1 << 30) else {
        return;
    };
    let output = faulted_once_durable(&rig, RATE, 3, &[], FaultyDisk::dying);
    let report = check_failed_with_every_chunk_claimed(&rig, &output);
    assert!(
        report["retirements"].as_array().unwrap().is_empty(),
        "the last member is not retired: {report}"
    );
}

#[test]
fn every_member_dying_ends_the_recording_with_an_error_and_its_entry_covers_every_chunk() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("dies-all", 0, 2, 1 << 30) else {
        return;
    };
    let targets = rig.targets();
    let mut child = spawn_pattern(&targets, RATE, 3, &["--sync-interval", "500ms"]);
    when_some_is_durable(&targets);
    // Member 0 dies and is retired; then the last one dies too.
    rig.disks[0].dying();
    when_retired(&targets, 0, &mut child);
    rig.disks[1].dying();
    let output = finish(child);
    let report = check_failed_with_every_chunk_claimed(&rig, &output);
    assert_eq!(report["retirements"][0]["member_index"], 0, "{report}");
    assert_eq!(report["retirements"][0]["errno"], libc::EIO, "{report}");
}

// The moments and combinations around a member's death: before the recording starts,
// inside a checkpoint, after a stall, together with a full drive, and under `repair`.

/// Runs `during` while `disk` dies at a flush: `successes` more flushes go through while
/// writes still succeed, the next one fails, and from then on (within a millisecond) every
/// write and flush fails too: a drive that dies at a flush.
fn dies_at_flush<R>(disk: &FaultyDisk, successes: u64, during: impl FnOnce() -> R) -> R {
    use std::sync::atomic::{AtomicBool, Ordering};
    let failed_before = disk.stats().failed;
    disk.fail_flushes_after(successes);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if disk.stats().failed > failed_before {
                    disk.dying();
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let result = during();
        done.store(true, Ordering::Relaxed);
        result
    })
}

/// Checks that the tools find no recording on `targets` (after a `record` that failed
/// before its recording began): `ls` finds no set, or one without recordings, and `verify`
/// and `replay` fail without a byte.
fn check_no_recording(targets: &[PathBuf], case: &str) {
    let listed = run(nvrec().args(["--json", "ls"]).args(targets));
    let listing = json(&listed);
    assert!(
        listing["recordings"]
            .as_array()
            .is_none_or(|recordings| recordings.is_empty()),
        "{case}: ls lists no recording: {listing}"
    );
    let verified = run(nvrec().arg("verify").args(targets));
    assert_ne!(
        verified.status.code(),
        Some(0),
        "{case}: {}",
        text(&verified)
    );
    let back = replay(targets);
    assert_ne!(back.status.code(), Some(0), "{case}: {}", stderr(&back));
    assert!(back.stdout.is_empty(), "{case}: replay gave bytes");
}

#[test]
fn a_member_dying_before_the_recording_starts_is_refused_at_format_or_retired_before_its_first_chunk(
) {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("dies-at-start", 1, 1, 256 << 20) else {
        return;
    };
    let targets = rig.targets();
    let disk = &rig.disks[0];
    let device = rig.devices[0].path().to_str().unwrap().to_string();
    let data = noise(8 << 20, 65);
    // First dead from the start (the first write of the format fails), then dying at the
    // n-th flush: the format's, the entry's that opens the recording, its first
    // checkpoint's; until the member dies after it took chunks.
    let (mut refused, mut retired_at_start) = (0, 0);
    for successes in [
        None,
        Some(0),
        Some(1),
        Some(2),
        Some(3),
        Some(4),
        Some(5),
        Some(6),
    ] {
        disk.clear();
        for target in &targets {
            wipe_ends(target);
        }
        let output = match successes {
            None => {
                disk.dying();
                record_stdin(&targets, &data, &[])
            }
            Some(n) => dies_at_flush(disk, n, || record_stdin(&targets, &data, &[])),
        };
        disk.clear();
        let case = match successes {
            None => "dead from the start".to_string(),
            Some(n) => format!("dying at the flush after {n}"),
        };
        let report = json(&output);
        eprintln!(
            "  {case}: exit {:?}, {}",
            output.status.code(),
            summary(&report)
        );
        if output.status.code() == Some(1) {
            // Refused: the error names the member and why, and nothing is a recording.
            let error = report["error"].as_str().unwrap_or_default();
            assert!(
                error.contains(&device) && error.contains("Input/output error"),
                "{case}: {report}"
            );
            check_no_recording(&targets, &case);
            refused += 1;
            continue;
        }
        // Retired, and the recording whole on the other member.
        assert_eq!(output.status.code(), Some(6), "{case}: {}", text(&output));
        let retirement = &report["retirements"][0];
        assert_eq!(retirement["member_index"], 1, "{case}: {report}");
        assert_eq!(retirement["errno"], libc::EIO, "{case}: {report}");
        assert_eq!(
            report["stream_bytes"],
            data.len() as u64,
            "{case}: {report}"
        );
        assert_eq!(report["lost_bytes"], 0, "{case}: {report}");
        let listing = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
        assert_eq!(
            listing["recordings"][0]["state"], "complete",
            "{case}: {listing}"
        );
        assert_eq!(verify(&targets)["recordings"][0]["good"], true, "{case}");
        let back = replay(&targets);
        assert!(back.status.success(), "{case}: {}", stderr(&back));
        assert!(back.stdout == data, "{case}: replay is byte-exact");
        if u64_at(retirement, "stream_offset_bytes") > 0 {
            break; // It died after it took chunks: past the start.
        }
        assert_eq!(report["members"][1]["chunk_count"], 0, "{case}: {report}");
        retired_at_start += 1;
    }
    assert!(
        refused > 0 && retired_at_start > 0,
        "{refused} refused, {retired_at_start} retired at the start"
    );
}

/// Waits until `disk` has had no flush for 150 ms (with checkpoints every 500 ms, the time
/// between two of them) and returns the generation of the set's newest checkpoint then.
fn between_checkpoints(disk: &FaultyDisk, targets: &[PathBuf]) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut fsyncs = disk.stats().fsyncs;
    let mut since = std::time::Instant::now();
    while since.elapsed() < Duration::from_millis(150) {
        assert!(
            std::time::Instant::now() < deadline,
            "the member never had a quiet moment"
        );
        std::thread::sleep(Duration::from_millis(5));
        let now = disk.stats().fsyncs;
        if now != fsyncs {
            (fsyncs, since) = (now, std::time::Instant::now());
        }
    }
    let generation = checkpointed(targets)
        .expect("a checkpoint names the recording")
        .generation;
    assert_eq!(
        disk.stats().fsyncs,
        fsyncs,
        "a checkpoint began while the test looked"
    );
    generation
}

/// The newest checkpoint `targets` hold (a member alone, or several), read as they are.
fn newest_on(targets: &[PathBuf]) -> nvrec::layout::Checkpoint {
    nvrec::recording::volume::open(
        targets,
        nvrec::device::Access::Read,
        nvrec::device::Safety::Check,
    )
    .unwrap()
    .newest_checkpoint()
    .unwrap()
    .expect("a checkpoint")
}

#[test]
fn a_member_dying_inside_a_checkpoint_is_retired_and_every_byte_replays() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    // A checkpoint flushes the member, then writes the checkpoint to it and flushes again.
    // The member dies at the first (the checkpoint goes nowhere) or at the second (it holds
    // the checkpoint, never confirmed).
    for within in [0u64, 1] {
        let Some(rig) = Rig::new(&format!("dies-in-checkpoint-{within}"), 1, 1, 1 << 30) else {
            return;
        };
        let targets = rig.targets();
        let disk = &rig.disks[0];
        let rate = 150_000_000;
        let child = spawn_pattern(&targets, rate, 2, &["--sync-interval", "500ms"]);
        when_some_is_durable(&targets);
        let before = between_checkpoints(disk, &targets);
        let output = dies_at_flush(disk, within, || finish(child));
        eprintln!("  dying at flush {within} of the checkpoint after generation {before}");
        check_degraded(&rig, &output, &[1], due(rate, 2));
        // Where it died: the member's own newest checkpoint is the one before (or, dying
        // at the second flush, the one it died in); the other member went on.
        let own = newest_on(&[rig.devices[0].path().to_path_buf()]).generation;
        assert_eq!(
            own,
            before + within,
            "the member died inside the checkpoint after {before}"
        );
        assert!(
            newest_on(&rig.healthy).generation > own,
            "checkpoints went on without it"
        );
    }
}

#[test]
fn a_member_stalled_past_the_timeout_whose_flushes_then_fail_loses_nothing_unreported() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::with("stall-flush", 1, 1, 1 << 30, tracking_unflushed()) else {
        return;
    };
    let targets = rig.targets();
    let rate = 150_000_000;
    // Retired for the timeout; its flushes, held by the stall, then fail.
    let output = faulted_once_durable(&rig, rate, 3, &["--member-timeout", "1s"], |disk| {
        disk.stall_for(Duration::from_millis(2500));
        disk.fail_flushes();
    });
    let stats = rig.disks[0].stats();
    assert!(
        stats.stalled > Duration::ZERO && stats.failed > 0,
        "{}",
        stats.to_json()
    );
    let report = json(&output);
    assert_eq!(report["retirements"][0]["cause"], "timeout", "{report}");
    let missing = cut_power(&rig, &output);
    if missing == 0 {
        check_retired(&rig, &output, &[(1, 0)], due(rate, 3));
        return;
    }
    // What the cut took was reported: exit 6 with the member's error, and `verify` and
    // `replay` say chunks are missing.
    eprintln!("  {missing} chunks lost to the cut: {}", summary(&report));
    assert_eq!(output.status.code(), Some(6), "{}", text(&output));
    let verified = run(nvrec().args(["--json", "verify"]).args(&targets));
    assert_eq!(verified.status.code(), Some(1), "{}", text(&verified));
    assert_eq!(json(&verified)["recordings"][0]["good"], false);
    let back = replay(&targets);
    assert_ne!(back.status.code(), Some(0), "{}", stderr(&back));
}

#[test]
fn a_full_member_whose_flushes_fail_too_loses_nothing_after_a_power_cut() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::with("full-flush", 1, 1, 1 << 30, tracking_unflushed()) else {
        return;
    };
    // Full from here on, and none of its flushes makes anything durable any more.
    let output = faulted_once_durable(&rig, RATE, 3, &[], |disk| {
        disk.fail(Op::Write, DATA_AREA..1 << 30, Errno::Enospc);
        disk.fail_flushes();
    });
    let report = json(&output);
    // Both faults start together: the member is retired by whichever the writer meets
    // first, a write that finds it full or a flush that fails (recorded as such, format
    // 1.8, with EIO). Either way it is retired and nothing is lost.
    let errno = match report["retirements"][0]["cause"].as_str() {
        Some("target_full") => libc::ENOSPC,
        Some("flush_failed") => libc::EIO,
        other => panic!("retired for {other:?}: {report}"),
    };
    assert_eq!(cut_power(&rig, &output), 0, "{report}");
    check_retired(&rig, &output, &[(1, errno)], due(RATE, 3));
}

/// The same before the first checkpoint claimed anything: everything the member completed
/// is in doubt, read back from it and written again to the other while the source goes on
/// at the rate. Nothing of the input is lost meanwhile, and nothing after a power cut.
#[test]
fn a_full_member_whose_flushes_fail_before_the_first_checkpoint_loses_no_input() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::with("full-flush-early", 1, 1, 1 << 30, tracking_unflushed()) else {
        return;
    };
    let targets = rig.targets();
    // Checkpoints every 2 s: the faults strike once the member holds 100 MB, unflushed.
    let child = spawn_pattern(&targets, RATE, 3, &["--sync-interval", "2s"]);
    let first = when_checkpointed(&targets, "names the recording", |_| true);
    let disk = &rig.disks[0];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while disk.stats().bytes_written < 100_000_000 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    disk.fail(Op::Write, DATA_AREA..1 << 30, Errno::Enospc);
    disk.fail_flushes();
    let newest = newest_on(&targets);
    assert_eq!(
        (first.durable_stream_bytes, newest.durable_stream_bytes),
        (0, 0),
        "no checkpoint had claimed any of it yet: {newest:?}"
    );
    let output = finish(child);
    let report = json(&output);
    let errno = match report["retirements"][0]["cause"].as_str() {
        Some("target_full") => libc::ENOSPC,
        Some("flush_failed") => libc::EIO,
        other => panic!("retired for {other:?}: {report}"),
    };
    assert_eq!(u64_at(&report, "lost_bytes"), 0, "{}", summary(&report));
    assert_eq!(cut_power(&rig, &output), 0, "{report}");
    check_retired(&rig, &output, &[(1, errno)], due(RATE, 3));
}

#[test]
fn repair_with_a_dying_member_after_kill_9_says_what_it_could_not_repair() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let _serial = one_at_a_time();
    let Some(rig) = Rig::new("repair-dying", 1, 1, 256 << 20) else {
        return;
    };
    let targets = rig.targets();
    let device = rig.devices[0].path().to_str().unwrap().to_string();
    let data = noise(40 << 20, 66);
    // No checkpoint after the one that opens the recording: its end is found from the
    // chunks on both members.
    let extra = ["--sync-interval", "5s", "--stripe", "round-robin"];
    let when = KillWhen::Written;
    record_then_kill(&targets, &extra, &data, Duration::from_millis(10), when);
    rig.disks[0].dying_with_reads();
    // Given every member: refused, naming the one that cannot be read.
    let repaired = run(nvrec().arg("repair").args(&targets));
    assert_ne!(repaired.status.code(), Some(0), "{}", text(&repaired));
    assert!(text(&repaired).contains(&device), "{}", text(&repaired));
    // Given the members that can be read: what it could not repair is said, never whole.
    let repaired = run(nvrec().args(["--json", "repair"]).arg(&rig.healthy[0]));
    assert_eq!(repaired.status.code(), Some(1), "{}", text(&repaired));
    let report = json(&repaired);
    assert_eq!(report["whole"], false, "{report}");
    assert_eq!(
        report["report"]["missing_members"],
        serde_json::json!([1]),
        "{report}"
    );
    assert_eq!(report["report"]["unrecovered_recording"], 1, "{report}");
    let said = run(nvrec().arg("repair").arg(&rig.healthy[0]));
    assert_eq!(said.status.code(), Some(1), "{}", text(&said));
    assert!(
        text(&said).contains("MISSING   member 1"),
        "{}",
        text(&said)
    );
    assert!(
        !text(&said).contains("nothing to repair"),
        "{}",
        text(&said)
    );
    // `verify` does not call the recording good while its chunks cannot be read.
    for given in [&targets[..], &rig.healthy[..]] {
        let verified = run(nvrec().args(["--json", "verify"]).args(given));
        assert_eq!(verified.status.code(), Some(1), "{}", text(&verified));
        assert_eq!(
            json(&verified)["recordings"][0]["good"],
            false,
            "{}",
            text(&verified)
        );
    }
    // The drive comes back: the repair cut nothing off, every byte recorded is there.
    rig.disks[0].clear();
    check_replays_all_but_the_last_chunk(&targets, &data);
    assert_eq!(verify(&targets)["recordings"][0]["good"], true);
}
