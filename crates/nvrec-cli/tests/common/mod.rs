//! Helpers shared by the end-to-end tests: scratch dirs, loop devices, running nvrec.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

pub const CHUNK: usize = 128 << 10;

pub fn nvrec() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nvrec"))
}

/// True, with the skip reported, where faulty disks (FUSE under a loop device) cannot be made
/// here; the test then returns.
pub fn no_faulty_disks() -> bool {
    let Some(why) = nvrec_faultydisk::skip_reason() else {
        return false;
    };
    // SAFETY: geteuid has no preconditions.
    let need = if unsafe { libc::geteuid() } != 0 {
        nvrec_testkit::ROOT
    } else if !Path::new("/dev/fuse").exists() {
        nvrec_testkit::FUSE
    } else {
        nvrec_testkit::LOSETUP
    };
    nvrec_testkit::skip(need, why);
    true
}

pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nvrec-cli-{}-{}-{name}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loop device over a file in /dev/shm, detached on drop.
pub struct LoopDevice {
    pub device: PathBuf,
    pub backing: PathBuf,
}

impl LoopDevice {
    /// None (with the reason printed) where loop devices cannot be made here.
    pub fn new(size_bytes: u64) -> Option<LoopDevice> {
        LoopDevice::make(size_bytes, Backing::Sparse)
    }

    /// Like [`LoopDevice::new`], over a file written through once: the memory behind it is
    /// then the machine's own, so the device's speed is not that of the first touch of fresh
    /// memory (a few hundred MB/s in a virtual machine).
    pub fn new_filled(size_bytes: u64) -> Option<LoopDevice> {
        LoopDevice::make(size_bytes, Backing::Filled)
    }

    fn make(size_bytes: u64, backing_kind: Backing) -> Option<LoopDevice> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            nvrec_testkit::skip(nvrec_testkit::ROOT, "loop devices need root");
            return None;
        }
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let backing = PathBuf::from(format!(
            "/dev/shm/nvrec-cli-test-{}-{}.img",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let mut file = std::fs::File::create(&backing).unwrap();
        match backing_kind {
            Backing::Sparse => file.set_len(size_bytes).unwrap(),
            Backing::Filled => {
                let zeros = vec![0u8; 8 << 20];
                let mut left = size_bytes;
                while left > 0 {
                    let length = left.min(zeros.len() as u64) as usize;
                    file.write_all(&zeros[..length]).unwrap();
                    left -= length as u64;
                }
            }
        }
        drop(file);
        let output = Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(&backing)
            .output();
        match output {
            Ok(output) if output.status.success() => {
                let device = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
                Some(LoopDevice { device, backing })
            }
            other => {
                let _ = std::fs::remove_file(&backing);
                nvrec_testkit::skip(
                    nvrec_testkit::LOSETUP,
                    format_args!("losetup failed: {other:?}"),
                );
                None
            }
        }
    }

    /// The device's `major:minor`.
    pub fn numbers(&self) -> String {
        let name = self.device.file_name().unwrap().to_string_lossy();
        std::fs::read_to_string(format!("/sys/class/block/{name}/dev"))
            .unwrap()
            .trim()
            .to_string()
    }
}

/// How a loop device's backing file is made.
#[derive(Debug, Clone, Copy)]
enum Backing {
    Sparse,
    Filled,
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        // udev may still be probing the device after a write; retry the detach briefly.
        for _ in 0..20 {
            let detached = Command::new("losetup").arg("-d").arg(&self.device).status();
            if matches!(detached, Ok(status) if status.success()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = std::fs::remove_file(&self.backing);
    }
}

/// A blkio cgroup (v1) that limits writes to one device, its limit changed at will; removed on
/// drop. Only direct I/O is throttled (buffered writes reach the device from writeback, outside
/// the cgroup), and only that of processes placed in the cgroup before they submit it.
pub struct Throttle {
    cgroup: PathBuf,
    numbers: String,
}

impl Throttle {
    /// None (with the reason printed) where no blkio cgroup can be made or take a limit.
    pub fn new(device: &LoopDevice, bytes_per_s: u64) -> Option<Throttle> {
        let hierarchy = Path::new("/sys/fs/cgroup/blkio");
        if !hierarchy.join("blkio.throttle.write_bps_device").exists() {
            nvrec_testkit::skip(
                nvrec_testkit::BLKIO_CGROUP,
                format_args!("no cgroup v1 blkio hierarchy at {}", hierarchy.display()),
            );
            return None;
        }
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let cgroup = hierarchy.join(format!(
            "nvrec-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        if let Err(error) = std::fs::create_dir(&cgroup) {
            nvrec_testkit::skip(
                nvrec_testkit::BLKIO_CGROUP,
                format_args!("cannot make a blkio cgroup: {error}"),
            );
            return None;
        }
        let throttle = Throttle {
            cgroup,
            numbers: device.numbers(),
        };
        if let Err(error) = throttle.set(bytes_per_s) {
            nvrec_testkit::skip(
                nvrec_testkit::BLKIO_CGROUP,
                format_args!("the blkio cgroup takes no write limit: {error}"),
            );
            return None;
        }
        Some(throttle)
    }

    /// Limits the cgroup's writes to the device to `bytes_per_s`.
    pub fn set(&self, bytes_per_s: u64) -> std::io::Result<()> {
        std::fs::write(
            self.cgroup.join("blkio.throttle.write_bps_device"),
            format!("{} {bytes_per_s}", self.numbers),
        )
    }

    /// Bytes the kernel has let the cgroup write to the device so far.
    pub fn written_bytes(&self) -> u64 {
        let counts =
            std::fs::read_to_string(self.cgroup.join("blkio.throttle.io_service_bytes")).unwrap();
        let key = format!("{} Write ", self.numbers);
        counts
            .lines()
            .find_map(|line| line.strip_prefix(&key))
            .map_or(0, |bytes| bytes.trim().parse().unwrap())
    }

    /// `nvrec args`, placed in the cgroup before it starts, its stdout and stderr going to
    /// files (a pipe nobody reads while the test watches would fill and stall it).
    pub fn spawn(&self, args: &[&str], stdout: &Path, stderr: &Path) -> std::process::Child {
        let script = format!(
            "echo $$ > {}/cgroup.procs && exec \"$@\"",
            self.cgroup.display()
        );
        Command::new("sh")
            .args(["-c", &script, "sh", env!("CARGO_BIN_EXE_nvrec")])
            .args(args)
            .stdout(std::fs::File::create(stdout).unwrap())
            .stderr(std::fs::File::create(stderr).unwrap())
            .spawn()
            .unwrap()
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        // The cgroup is empty once its processes have exited; retry briefly while the kernel
        // finishes with the last one.
        for _ in 0..20 {
            if std::fs::remove_dir(&self.cgroup).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub fn run(command: &mut Command) -> Output {
    command.output().expect("nvrec runs")
}

pub fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "not JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The gaps a `replay --json` report names, in order: (bytes lost, stream offset where the
/// gap ends).
pub fn replay_gaps(report: &serde_json::Value) -> Vec<(u64, u64)> {
    report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|problem| {
            let words: Vec<&str> = problem.as_str()?.split_whitespace().collect();
            match words[..] {
                ["gap:", len, "bytes", "lost", "before", "stream", "offset", end] => {
                    Some((len.parse().unwrap(), end.parse().unwrap()))
                }
                _ => None,
            }
        })
        .collect()
}

#[allow(unused_imports)]
pub use nvrec_testkit::noise;

pub fn file_digest(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

/// Records `data` from stdin onto `targets` with extra arguments (`--json` report).
pub fn record_stdin(targets: &[PathBuf], data: &[u8], extra: &[&str]) -> Output {
    let mut child = nvrec()
        .args(["--json", "record", "--source", "stdin"])
        .args(extra)
        .args(targets)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A closed pipe (the recorder stopped early) is the test's to judge, not a panic here.
    let _ = stdin.write_all(data);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// A recorder reading stdin onto `targets`, and the pipe to feed it.
fn stdin_recorder(targets: &[PathBuf], extra: &[&str]) -> (std::process::Child, ChildStdin) {
    recorder_on_stdin(nvrec().args(["record"]), targets, extra, Stdio::null())
}

/// `nvrec --json record --source stdin EXTRA TARGETS`, its report piped back and its input
/// the caller's to write.
pub fn json_stdin_recorder(
    targets: &[PathBuf],
    extra: &[&str],
) -> (std::process::Child, ChildStdin) {
    recorder_on_stdin(
        nvrec().args(["--json", "record"]),
        targets,
        extra,
        Stdio::piped(),
    )
}

fn recorder_on_stdin(
    command: &mut Command,
    targets: &[PathBuf],
    extra: &[&str],
    stdout: Stdio,
) -> (std::process::Child, ChildStdin) {
    let mut child = command
        .args(["--source", "stdin"])
        .args(extra)
        .args(targets)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    (child, stdin)
}

/// Kills a recorder with SIGKILL (its stdin still open, so that it never sees an end) and
/// waits until its targets are let go ([`wait_unlocked`]).
fn kill_recorder(mut child: std::process::Child, stdin: ChildStdin, targets: &[PathBuf]) {
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    drop(stdin);
    wait_unlocked(targets);
}

/// Waits (at most 20 s) until no recorder holds `targets`: a dead process's io_uring (and
/// the files it holds, with their recording locks) is torn down after the process is
/// reaped, later still on a slow or failing device, and until then `ls` rightly shows the
/// recording as running.
pub fn wait_unlocked(targets: &[PathBuf]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let locked = |path: &PathBuf| {
        std::fs::File::open(path).is_ok_and(|file| nvrec::device::is_recording(&file))
    };
    while targets.iter().any(locked) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// As [`record_then_kill`], but the kill comes once `ls` shows the recording durable up to
/// at least `durable_bytes` of its stream (or after 30 s): what a loaded machine has not
/// yet written by then is not what a test of recovery is about.
pub fn record_then_kill_when_durable(
    targets: &[PathBuf],
    extra: &[&str],
    data: &[u8],
    durable_bytes: u64,
) {
    let (child, mut stdin) = stdin_recorder(targets, extra);
    stdin.write_all(data).unwrap();
    wait_durable(targets, durable_bytes, Duration::from_secs(30));
    kill_recorder(child, stdin, targets);
}

/// Waits until `ls` shows the first recording on `targets` durable up to at least `bytes`
/// of its stream, or `limit` has passed.
fn wait_durable(targets: &[PathBuf], bytes: u64, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        let output = run(nvrec().args(["--json", "ls"]).args(targets));
        let durable = serde_json::from_slice::<serde_json::Value>(&output.stdout)
            .ok()
            .and_then(|listed| listed["recordings"][0]["stream_len_bytes"].as_u64());
        if durable.is_some_and(|durable| durable >= bytes) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What `ls` lists of the newest recording on `targets` while it runs: its bytes durable
/// so far (None where no recording runs there, or `ls` fails).
pub fn recorded_now(targets: &[PathBuf]) -> Option<u64> {
    let output = run(nvrec().args(["--json", "ls"]).args(targets));
    if !output.status.success() {
        return None;
    }
    let listed = json(&output);
    let newest = listed["recordings"].as_array()?.last()?.clone();
    (newest["state"] == "recording").then(|| newest["bytes"].as_u64().unwrap_or(0))
}

/// Waits (at most 20 s) until `ls` lists the newest recording on `targets` as running with
/// at least `bytes` durable: a mark's before-window is there to keep, or a window has gone
/// so far. Returns the bytes listed.
pub fn wait_recorded(targets: &[PathBuf], bytes: u64) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = recorded_now(targets);
        if let Some(durable) = now.filter(|&durable| durable >= bytes) {
            return durable;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never {bytes} bytes recorded (now {now:?})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// When [`record_then_kill`] kills the recorder, once it has read all of its input.
#[derive(Debug, Clone, Copy)]
pub enum KillWhen {
    /// Once `ls` shows this much of the stream durable (a short sync interval checkpoints
    /// it): a state the recorder reached, however loaded the machine.
    Durable(u64),
    /// Before the next checkpoint, once no write is in flight (a long sync interval: what
    /// was written past the last checkpoint is for recovery's forward search to find). The
    /// recorder's published load says so.
    Written,
    /// Before the next checkpoint, once the targets hold the stream up to this offset, as
    /// their chunk headers say (read from the files as any reader would). For a ring's
    /// writer that waits on a quiet pipe (for up to a sync interval): it takes no completion
    /// meanwhile, so what it publishes is what it saw before the wait.
    OnTargets(u64),
}

/// Records `data` from stdin in 1 MiB pieces with a pause after each, waits until the
/// recorder has read all of it (a loaded machine may leave it behind its input), then until
/// `when`, then kills the recorder with SIGKILL.
pub fn record_then_kill(
    targets: &[PathBuf],
    extra: &[&str],
    data: &[u8],
    pause: Duration,
    when: KillWhen,
) {
    let (mut child, mut stdin) = stdin_recorder(targets, extra);
    for piece in data.chunks(1 << 20) {
        stdin.write_all(piece).unwrap();
        std::thread::sleep(pause);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while bytes_read_by(child.id()) < data.len() as u64 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    match when {
        KillWhen::Durable(bytes) => wait_durable(targets, bytes, Duration::from_secs(30)),
        KillWhen::Written => wait_written(targets, Duration::from_secs(30)),
        KillWhen::OnTargets(end) => wait_on_targets(targets, end, Duration::from_secs(30)),
    }
    let ended = child.try_wait().unwrap();
    assert!(
        ended.is_none(),
        "the recorder ended before it was killed: {ended:?}"
    );
    kill_recorder(child, stdin, targets);
}

/// Waits until the recorder of `targets` has no write in flight: every chunk it hands
/// to the drives before its next checkpoint is written (in a ring, a buffer may wait for
/// that checkpoint; the one being filled waits for more input). Its load, published every
/// 25 ms with the most writes in flight since the one before, shows none twice after this
/// call began.
/// Waits until a chunk on `targets` ends at or past stream offset `end`: every 4 KiB of each
/// file read, its chunk headers decoded. A recording's chunk slots lie on 4 KiB boundaries.
fn wait_on_targets(targets: &[PathBuf], end: u64, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let reached = targets.iter().map(|target| stream_end_on(target)).max();
        if reached.is_some_and(|reached| reached >= end) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the targets held the stream to {reached:?} of {end} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Where the furthest chunk on `target` ends in its stream (0 with none).
fn stream_end_on(target: &Path) -> u64 {
    let bytes = std::fs::read(target).unwrap();
    let header = nvrec::layout::CHUNK_HEADER_SIZE_BYTES;
    (0..bytes.len().saturating_sub(header))
        .step_by(4096)
        .filter_map(|at| nvrec::layout::decode_chunk_header(&bytes[at..at + header]).ok())
        .map(|chunk| chunk.stream_offset_bytes + chunk.payload_len_bytes as u64)
        .max()
        .unwrap_or(0)
}

fn wait_written(targets: &[PathBuf], limit: Duration) {
    use nvrec::recording::load;
    let listed = json(&run(nvrec().args(["--json", "ls"]).args(targets)));
    let set_uuid = listed["set_uuid"].as_str().expect("a set").to_string();
    let mut last_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let deadline = std::time::Instant::now() + limit;
    let mut quiet = 0;
    while quiet < 2 {
        let now = load::read(&set_uuid);
        assert!(
            std::time::Instant::now() < deadline,
            "the recorder of {set_uuid} kept writes in flight for {limit:?}: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
        let Some(now) = now.filter(|now| now.at_ms > last_ms) else {
            continue;
        };
        last_ms = now.at_ms;
        quiet = if now.peak_in_flight == Some(0) {
            quiet + 1
        } else {
            0
        };
    }
}

/// Bytes process `pid` has read so far, by any read call (`rchar` of /proc/PID/io); 0 if
/// it cannot be told.
pub fn bytes_read_by(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|line| line.strip_prefix("rchar: "))
                .and_then(|value| value.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Waits until a packet socket of this thread's network namespace is bound to an interface
/// and running (`/proc/thread-self/net/packet`): a capture started from here is then taking
/// frames. A fixed sleep is not enough on a loaded machine, where a recorder's start (its
/// targets made and formatted first) can take longer than any guess.
pub fn wait_for_capture() {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let table = std::fs::read_to_string("/proc/thread-self/net/packet").unwrap_or_default();
        // sk RefCnt Type Proto Iface R Rmem User Inode: bound (Iface > 0) and running (R = 1).
        let capturing = table.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 5 && fields[4] != "0" && fields[5] == "1"
        });
        if capturing {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no capture running after 30 s:\n{table}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a recorder on `targets` runs: its writer publishes its load, which it does
/// only once its source is open (a capture's threads all in their fanout group, taking
/// frames: before that, a socket that is bound takes none).
pub fn wait_recording(targets: &[PathBuf]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let listed = run(nvrec().args(["--json", "ls"]).args(targets));
        let set_uuid = listed
            .status
            .success()
            .then(|| json(&listed)["set_uuid"].as_str().map(str::to_string))
            .flatten();
        if set_uuid.is_some_and(|uuid| nvrec::recording::load::read(&uuid).is_some()) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no recorder running on {targets:?} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Moves this thread (and what it starts) into a fresh network namespace with its loopback
/// up; false, with the reason printed, where that is not permitted.
pub fn own_network() -> bool {
    // SAFETY: unshare takes a flag; it moves only the calling thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        nvrec_testkit::skip(
            nvrec_testkit::NET_NAMESPACE,
            format_args!("unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error()),
        );
        return false;
    }
    let up = Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .is_ok_and(|status| status.success());
    if !up {
        nvrec_testkit::skip(
            nvrec_testkit::NET_NAMESPACE,
            "could not bring the namespace's loopback up (iproute2?)",
        );
    }
    up
}

/// Headless Chromium loads the page, runs its check script, and the count of charts that drew
/// something must equal the charts in the file.
pub fn rendered_chart_count(html: &Path) -> Option<(usize, usize)> {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|out| out.status.success())
        });
    let Some(browser) = browser else {
        nvrec_testkit::skip(nvrec_testkit::CHROMIUM, "no chromium on the PATH");
        return None;
    };
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&output.stdout);
    let attribute = |name: &str| -> usize {
        let key = format!("{name}=\"");
        let start = dom
            .find(&key)
            .unwrap_or_else(|| panic!("{name} missing: the check script did not run\n{dom}"))
            + key.len();
        dom[start..].split('"').next().unwrap().parse().unwrap()
    };
    Some((
        attribute("data-charts-rendered"),
        attribute("data-charts-failed"),
    ))
}

/// Starts `nvrec --json record` with `args` (output piped) and waits until `bound` says it
/// listens; a recorder that does not within 10 s is killed and the test fails.
pub fn start_recorder_until(args: &[&str], bound: impl Fn() -> bool) -> std::process::Child {
    let mut child = nvrec()
        .arg("--json")
        .arg("record")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !bound() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the recorder never listened");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Records, as a network source frames them, handed to the recorder in order.
pub struct RecordSource {
    pub records: std::collections::VecDeque<Vec<u8>>,
}

impl nvrec::source::Source for RecordSource {
    fn read_at(&mut self, _offset_bytes: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut at = 0;
        while let Some(record) = self.records.front() {
            if at + record.len() > buf.len() {
                break;
            }
            buf[at..at + record.len()].copy_from_slice(record);
            at += record.len();
            self.records.pop_front();
        }
        Ok(at)
    }

    fn may_block(&self) -> bool {
        false
    }

    fn packs_records(&self) -> bool {
        true
    }

    fn ended(&self) -> bool {
        self.records.is_empty()
    }
}

/// Whether Python imports `modules` (`"sigmf, numpy"`), installing `package` with pip
/// first when it does not.
pub fn python_imports(modules: &str, package: &str, need: nvrec_testkit::Need) -> bool {
    let imports = || {
        Command::new("python3")
            .args(["-c", &format!("import {modules}")])
            .output()
            .is_ok_and(|output| output.status.success())
    };
    // A Debian Python refuses pip's installs without --break-system-packages.
    for extra in [None, Some("--break-system-packages")] {
        if imports() {
            break;
        }
        let _ = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", package])
            .args(extra)
            .output();
    }
    if imports() {
        return true;
    }
    nvrec_testkit::skip(need, format!("python3 cannot import {modules}"));
    false
}

/// Whether `tool` runs, installing `package` with apt first when it does not.
pub fn tool(tool: &str, package: &str, need: nvrec_testkit::Need) -> bool {
    let runs = || Command::new(tool).arg("--version").output().is_ok();
    if !runs() {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq", package])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output();
    }
    if runs() {
        return true;
    }
    nvrec_testkit::skip(need, format!("{tool} is not installed"));
    false
}
