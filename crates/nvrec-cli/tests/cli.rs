//! End-to-end tests of the `nvrec` binary: files in a temp dir, loop devices the tests create
//! and detach themselves, real signals.

mod common;

use common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "progress lines and interrupts over seconds of a run";

#[test]
fn write_then_read_round_trip_with_json() {
    let scratch = Scratch::new("roundtrip");
    let target = scratch.path("t.img");
    let output = run(nvrec()
        .args(["--json", "write", "--size", "8M", "--seed", "42"])
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["outcome"], "complete");
    assert_eq!(report["bytes"], 8 << 20);
    assert_eq!(report["last_offset_bytes"], (8 << 20) - CHUNK);
    for field in [
        "elapsed_s",
        "rate_mib_per_s",
        "cpu_user_s",
        "cpu_system_s",
        "engine",
        "queue_depth",
        "chunk_size_bytes",
    ] {
        assert!(!report[field].is_null(), "{field} missing from {report}");
    }
    let output = run(nvrec()
        .args([
            "--json", "read", "--size", "8M", "--check", "pattern", "--seed", "42",
        ])
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["check"]["bad_chunk_count"], 0);
    // The wrong seed fails, names the seed that is there, and exits 1.
    let output = run(nvrec()
        .args(["read", "--size", "8M", "--check", "pattern", "--seed", "43"])
        .arg(&target));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output).contains("written with seed 0x2a"),
        "{}",
        text(&output)
    );
    // Human output names the engine and the last address.
    let output = run(nvrec()
        .args(["write", "--chunks", "4", "--engine", "threads"])
        .arg(&target));
    let shown = text(&output);
    assert!(
        shown.contains("engine        threads") && shown.contains("last address  0x60000"),
        "{shown}"
    );
}

#[test]
fn address_errors_exit_2_with_their_own_message_and_touch_nothing() {
    let scratch = Scratch::new("address");
    let target = scratch.path("t.img");
    assert!(run(nvrec().args(["write", "--size", "1M"]).arg(&target))
        .status
        .success());
    let before = file_digest(&target);
    let missing = scratch.path("never-created.img");
    let cases: [(&[&str], &Path, &str); 6] = [
        (
            &["read", "--last-offset", "0x100000"],
            &target,
            "beyond the target",
        ),
        (
            &["write", "--offset", "0x40000", "--last-offset", "0x20000"],
            &target,
            "greater than last address",
        ),
        (
            &["write", "--offset", "0x1000", "--chunks", "1"],
            &missing,
            "first address 0x1000 is not aligned",
        ),
        (
            &["read", "--last-offset", "0x20200"],
            &target,
            "last address 0x20200 is not aligned",
        ),
        (
            &["write", "--chunk-size", "100K", "--chunks", "1"],
            &missing,
            "not a power of two",
        ),
        (&["write", "--size", "100K"], &missing, "not a whole number"),
    ];
    for (args, path, message) in cases {
        let output = run(nvrec().args(args).arg(path));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(
            text(&output).contains(message),
            "{args:?}: expected '{message}' in {}",
            text(&output)
        );
    }
    assert_eq!(
        file_digest(&target),
        before,
        "a refused run touched the target"
    );
    assert!(!missing.exists(), "a refused run created its target");
    let output = run(nvrec()
        .args(["--json", "read", "--last-offset", "0x100000"])
        .arg(&target));
    assert_eq!(json(&output)["exit_code"], 2);
}

#[test]
fn stdin_round_trip_pads_the_short_final_chunk() {
    let scratch = Scratch::new("stdin");
    let target = scratch.path("t.img");
    let data = noise(2 * CHUNK + 1234, 7);
    let mut child = nvrec()
        .args(["--json", "write", "--source", "stdin", "--size", "1M"])
        .arg(&target)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["outcome"], "source_ended");
    assert_eq!(report["padded_bytes"], CHUNK - 1234);
    assert_eq!(report["chunk_count"], 3);
    // The early end is raised in the report, naming the short chunk.
    assert_eq!(report["early_end"]["chunk_index"], 2);
    assert_eq!(report["early_end"]["offset_bytes"], 2 * CHUNK);
    assert_eq!(report["early_end"]["filled_bytes"], 1234);
    let output = run(nvrec()
        .args(["read", "--chunks", "3", "--output", "-"])
        .arg(&target));
    assert!(output.status.success());
    assert_eq!(output.stdout.len(), 3 * CHUNK);
    assert_eq!(
        &output.stdout[..data.len()],
        &data[..],
        "the data comes back byte-exact"
    );
    assert!(
        output.stdout[data.len()..].iter().all(|&b| b == 0),
        "the padding is zeros"
    );
}

/// Feeds 10 chunks on stdin, waits until nvrec blocks for more, sends the signals, and
/// returns the report and exit status.
fn interrupted_stdin_write(
    target: &Path,
    signals: &[i32],
) -> (serde_json::Value, Option<i32>, Vec<u8>) {
    let data = noise(10 * CHUNK, 11);
    let mut child = nvrec()
        .args(["--json", "write", "--source", "stdin", "--size", "4M"])
        .arg(target)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&data).unwrap();
    // It has read all of it and blocks for more.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while bytes_read_by(child.id()) < data.len() as u64 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    for &signal in signals {
        // SAFETY: kill has no memory-safety preconditions; the pid is our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        wait_signal_taken(child.id(), signal);
    }
    let output = child.wait_with_output().unwrap();
    drop(stdin);
    (json(&output), output.status.code(), data)
}

/// Waits until process `pid` has taken `signal` (it is no longer pending for it, in
/// `/proc/PID/status`), so that the next signal comes after it, as a user's second Ctrl-C.
fn wait_signal_taken(pid: u32, signal: i32) {
    let bit = 1u64 << (signal - 1);
    let pending = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        status.lines().any(|line| {
            let mask = line
                .strip_prefix("SigPnd:")
                .or_else(|| line.strip_prefix("ShdPnd:"));
            mask.and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
                .is_some_and(|mask| mask & bit != 0)
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while pending() {
        assert!(
            std::time::Instant::now() < deadline,
            "signal {signal} never taken"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn sigint_stops_writes_what_was_taken_and_touches_nothing_beyond() {
    let scratch = Scratch::new("sigint");
    let target = scratch.path("t.img");
    assert!(run(nvrec()
        .args(["write", "--size", "4M", "--seed", "9"])
        .arg(&target))
    .status
    .success());
    let (report, code, data) = interrupted_stdin_write(&target, &[libc::SIGINT]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["outcome"], "stopped");
    assert_eq!(
        report["last_offset_bytes"],
        9 * CHUNK,
        "all 10 chunks taken were written"
    );
    assert!(report["flush_s"].is_number(), "the flush ran");
    let output = run(nvrec()
        .args(["read", "--chunks", "10", "--output", "-"])
        .arg(&target));
    assert_eq!(
        output.stdout, data,
        "data up to the last address reads back intact"
    );
    let output = run(nvrec()
        .args([
            "read", "--offset", "0x140000", "--check", "pattern", "--seed", "9",
        ])
        .arg(&target));
    assert!(
        output.status.success(),
        "nothing beyond was touched: {}",
        text(&output)
    );
}

#[test]
fn sigterm_aborts_drops_what_was_not_submitted() {
    let scratch = Scratch::new("sigterm");
    let target = scratch.path("t.img");
    assert!(run(nvrec()
        .args(["write", "--size", "4M", "--seed", "9"])
        .arg(&target))
    .status
    .success());
    let (report, code, data) = interrupted_stdin_write(&target, &[libc::SIGTERM]);
    assert_eq!(code, Some(4), "{report}");
    assert_eq!(report["outcome"], "aborted");
    // 8 chunks make one 1 MiB I/O and went out; the 2 chunks of the next I/O were dropped.
    assert_eq!(report["last_offset_bytes"], 7 * CHUNK);
    assert_eq!(report["discarded_chunk_count"], 2);
    assert!(report["flush_s"].is_number(), "the flush ran");
    let output = run(nvrec()
        .args(["read", "--chunks", "8", "--output", "-"])
        .arg(&target));
    assert_eq!(
        output.stdout,
        data[..8 * CHUNK],
        "data up to the last address reads back intact"
    );
    let output = run(nvrec()
        .args([
            "read", "--offset", "0x100000", "--check", "pattern", "--seed", "9",
        ])
        .arg(&target));
    assert!(
        output.status.success(),
        "nothing beyond was touched: {}",
        text(&output)
    );
}

#[test]
fn selftest_passes_on_a_scratch_file_and_cleans_up() {
    let scratch = Scratch::new("selftest");
    let output = run(nvrec()
        .args(["selftest", "--size", "64M"])
        .current_dir(&scratch.0));
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    assert!(
        shown.contains("0 of 12 tests failed, 10 passed, 2 not applicable"),
        "{shown}"
    );
    assert!(
        shown.contains("TEST #09: PASS") && shown.contains("| chunks | write | read |"),
        "{shown}"
    );
    // A file has no PCIe link: the link tests are not applicable, not passed.
    assert!(
        shown.contains("TEST #00: N/A") && shown.contains("TEST #11: N/A"),
        "{shown}"
    );
    assert!(
        !scratch.path("nvrec-selftest.scratch").exists(),
        "the scratch file is removed"
    );
    let output = run(nvrec()
        .args(["--json", "selftest", "--size", "16M", "--engine", "threads"])
        .current_dir(&scratch.0));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["failed_count"], 0);
    assert_eq!(report["not_applicable_count"], 2);
    assert_eq!(report["tests"][0]["verdict"], "not_applicable");
    assert_eq!(report["tests"].as_array().map(Vec::len), Some(12));
    assert!(report["engine"]
        .as_str()
        .unwrap_or("")
        .starts_with("threads"));
}

#[test]
fn selftest_refuses_stop_after_and_its_help_does_not_offer_it() {
    let scratch = Scratch::new("selftest-stop-after");
    let target = scratch.path("t.img");
    for with_target in [false, true] {
        let output = run(nvrec()
            .args(["selftest", "--size", "16M", "--stop-after", "1s"])
            .args(with_target.then_some(&target))
            .current_dir(&scratch.0));
        let shown = text(&output);
        assert_eq!(output.status.code(), Some(2), "{shown}");
        assert!(
            shown.contains("selftest has no --stop-after") && shown.contains("smaller --size"),
            "{shown}"
        );
    }
    assert!(
        !target.exists() && !scratch.path("nvrec-selftest.scratch").exists(),
        "a refused self-test created its target"
    );
    // write and read still take it: a limit of 0 s stops them before their first chunk.
    for command in ["write", "read"] {
        let output = run(nvrec()
            .args(["--json", command, "--size", "4M", "--stop-after", "0s"])
            .arg(&target));
        assert!(output.status.success(), "{command}: {}", text(&output));
        let report = json(&output);
        assert_eq!(report["outcome"], "stopped", "{command}: {report}");
        assert_eq!(report["chunk_count"], 0, "{command}: {report}");
    }
    // The help offers what the command takes: --stop-after for write and read, not selftest.
    for (command, offered) in [("selftest", false), ("write", true), ("read", true)] {
        let output = run(nvrec().args([command, "--help"]));
        assert!(output.status.success(), "{}", text(&output));
        assert_eq!(
            text(&output).contains("--stop-after"),
            offered,
            "{command} --help: {}",
            text(&output)
        );
    }
}

#[test]
fn selftest_passes_on_a_loop_device() {
    let Some(device) = LoopDevice::new(256 << 20) else {
        return;
    };
    let output = run(nvrec().arg("selftest").arg(&device.device));
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    assert!(shown.contains("0 of 12 tests failed"), "{shown}");
    assert!(shown.contains("Loop device backed by"), "{shown}");
}

#[test]
fn a_loop_device_holding_a_filesystem_is_refused_unless_forced_and_never_while_mounted() {
    let Some(device) = LoopDevice::new(64 << 20) else {
        return;
    };
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&device.device)
        .status();
    if !matches!(mkfs, Ok(status) if status.success()) {
        nvrec_testkit::skip(
            nvrec_testkit::MKFS_EXT4,
            format_args!("mkfs.ext4 failed: {mkfs:?}"),
        );
        return;
    }
    let output = run(nvrec().args(["write", "--size", "1M"]).arg(&device.device));
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(
        text(&output).contains("ext4 filesystem"),
        "{}",
        text(&output)
    );
    assert!(text(&output).contains("--force"), "{}", text(&output));
    // Mounted, it is never written, --force or not, by write or record.
    let scratch = Scratch::new("mounted");
    let mount_point = scratch.path("mnt");
    std::fs::create_dir_all(&mount_point).unwrap();
    let mounted = Command::new("mount")
        .arg(&device.device)
        .arg(&mount_point)
        .status();
    if matches!(mounted, Ok(status) if status.success()) {
        std::fs::write(mount_point.join("kept.txt"), b"still here").unwrap();
        let write = run(nvrec()
            .args(["write", "--size", "1M", "--force"])
            .arg(&device.device));
        let record = run(nvrec()
            .args([
                "record",
                "--source",
                "zero",
                "--size",
                "1M",
                "--force",
                "--overwrite",
            ])
            .arg(&device.device));
        let unmounted = Command::new("umount").arg(&mount_point).status();
        assert!(matches!(unmounted, Ok(status) if status.success()));
        for output in [&write, &record] {
            assert_eq!(output.status.code(), Some(3), "{}", text(output));
            assert!(text(output).contains("mounted on"), "{}", text(output));
            assert!(
                text(output).contains("--force does not override"),
                "{}",
                text(output)
            );
        }
        let fsck = Command::new("e2fsck")
            .args(["-n", "-f"])
            .arg(&device.device)
            .output();
        if let Ok(fsck) = fsck {
            assert!(
                fsck.status.success(),
                "{}",
                String::from_utf8_lossy(&fsck.stdout)
            );
        }
    } else {
        eprintln!("mount refused here ({mounted:?}): the mounted case is not tested");
    }
    let output = run(nvrec()
        .args(["write", "--size", "1M", "--force"])
        .arg(&device.device));
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn a_range_beyond_a_device_is_an_address_error() {
    let Some(device) = LoopDevice::new(8 << 20) else {
        return;
    };
    let output = run(nvrec().args(["write", "--size", "16M"]).arg(&device.device));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("beyond the target"),
        "{}",
        text(&output)
    );
    let output = run(nvrec().args(["--json", "write"]).arg(&device.device));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        json(&output)["bytes"],
        8 << 20,
        "no range means the whole device"
    );
}

/// Runs nvrec under a seccomp filter that makes io_uring_setup fail with EPERM, as container
/// runtimes do: the real kernel path by which io_uring goes missing.
fn nvrec_without_io_uring() -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = nvrec();
    // SAFETY: the closure runs in the child between fork and exec and only makes two
    // syscalls (prctl, seccomp) on data that lives in its own stack frame.
    unsafe {
        command.pre_exec(|| {
            const LOAD_WORD_ABSOLUTE: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
            const JUMP_IF_EQUAL: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
            const RETURN: u16 = 0x06; // BPF_RET | BPF_K
            const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
            const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
            let filter = [
                // seccomp_data.nr is at offset 0.
                libc::sock_filter {
                    code: LOAD_WORD_ABSOLUTE,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                libc::sock_filter {
                    code: JUMP_IF_EQUAL,
                    jt: 0,
                    jf: 1,
                    k: libc::SYS_io_uring_setup as u32,
                },
                libc::sock_filter {
                    code: RETURN,
                    jt: 0,
                    jf: 0,
                    k: SECCOMP_RET_ERRNO | libc::EPERM as u32,
                },
                libc::sock_filter {
                    code: RETURN,
                    jt: 0,
                    jf: 0,
                    k: SECCOMP_RET_ALLOW,
                },
            ];
            let program = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut _,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::syscall(
                libc::SYS_seccomp,
                1, /* SECCOMP_SET_MODE_FILTER */
                0,
                &program as *const _,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

#[test]
fn without_io_uring_auto_falls_back_to_threads_and_says_why() {
    let scratch = Scratch::new("seccomp");
    let target = scratch.path("t.img");
    let output = run(nvrec_without_io_uring()
        .args(["--json", "write", "--size", "4M"])
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["engine"], "threads");
    let reason = report["engine_fallback_reason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("io_uring is unavailable"), "{reason}");
    let output = run(nvrec_without_io_uring()
        .args(["write", "--size", "4M", "--engine", "io_uring"])
        .arg(&target));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output).contains("io_uring is unavailable"),
        "{}",
        text(&output)
    );
    let output = run(nvrec_without_io_uring()
        .args(["read", "--size", "4M", "--check", "pattern"])
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("io_uring unavailable, used threads"),
        "{}",
        text(&output)
    );
    // A recording says it too, in its summary and in JSON.
    let member = scratch.path("member.img");
    std::fs::File::create(&member)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let output = run(nvrec_without_io_uring()
        .args(["record", "--source", "pattern", "--size", "4M"])
        .arg(&member));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("io_uring unavailable, used threads: io_uring is unavailable"),
        "{}",
        text(&output)
    );
    let output = run(nvrec_without_io_uring()
        .args([
            "--json", "record", "--append", "--source", "pattern", "--size", "4M",
        ])
        .arg(&member));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["engine"], "threads");
    assert!(
        report["engine_fallback_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("io_uring is unavailable"),
        "{report}"
    );
}

/// Runs `command` with its stdout a pipe whose reader is gone before it starts, so that its
/// first write there fails with EPIPE, as `nvrec ... | head -1` does once head has exited.
fn run_with_stdout_closed(command: &mut Command) -> std::process::Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = command
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(output.stdout.is_empty());
    output
}

/// Runs `command`, reads `keep` bytes of its stdout, then closes it (`| head -c KEEP`).
fn run_with_stdout_cut(command: &mut Command, keep: usize) -> (std::process::Output, Vec<u8>) {
    use std::io::Read;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut kept = vec![0u8; keep];
    child.stdout.take().unwrap().read_exact(&mut kept).unwrap();
    (child.wait_with_output().unwrap(), kept)
}

fn assert_quiet_sigpipe_status(output: &std::process::Output, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(141), "{what}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("error"),
        "{what}: not quiet: {stderr}"
    );
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_status_141() {
    let scratch = Scratch::new("epipe");
    let target = scratch.path("t.img");
    let output = run_with_stdout_closed(nvrec().args(["write", "--size", "4M"]).arg(&target));
    assert_quiet_sigpipe_status(&output, "write");
    // The self-test stops at its first line; the scratch file it made is removed.
    let output = run_with_stdout_closed(
        nvrec()
            .args(["selftest", "--size", "16M"])
            .current_dir(&scratch.0),
    );
    assert_quiet_sigpipe_status(&output, "selftest");
    assert!(!scratch.path("nvrec-selftest.scratch").exists());
    // Within the 4 MiB file: the self-test never grows a target.
    let output = run_with_stdout_closed(nvrec().args(["selftest", "--size", "4M"]).arg(&target));
    assert_quiet_sigpipe_status(&output, "selftest FILE");
    // A recording prints only when it is over: it is kept, and closed properly.
    let set = scratch.path("set.img");
    let output = run_with_stdout_closed(
        nvrec()
            .args(["record", "--source", "pattern", "--size", "16M"])
            .args(["--create-size", "64M"])
            .arg(&set),
    );
    assert_quiet_sigpipe_status(&output, "record");
    let output = run_with_stdout_closed(nvrec().arg("ls").arg(&set));
    assert_quiet_sigpipe_status(&output, "ls");
    let output =
        run_with_stdout_closed(nvrec().args(["plan", "--rate", "1G", "--drive-rate", "500M"]));
    assert_quiet_sigpipe_status(&output, "plan");
    let output = run(nvrec().args(["--json", "ls"]).arg(&set));
    assert!(output.status.success(), "{}", text(&output));
    let listed = json(&output);
    assert_eq!(listed["recordings"][0]["state"], "complete", "{listed}");
    assert_eq!(listed["recordings"][0]["bytes"], 16 << 20, "{listed}");
    // Stream data: the reader takes 100 bytes and goes away.
    let (output, kept) = run_with_stdout_cut(nvrec().arg("replay").arg(&set), 100);
    assert_quiet_sigpipe_status(&output, "replay | head -c 100");
    let mut expected = vec![0u8; 100];
    nvrec::pattern::Pattern::new(0).fill(0, &mut expected);
    assert_eq!(kept, expected, "replay's first bytes");
    let (output, _) = run_with_stdout_cut(
        nvrec()
            .args(["read", "--size", "4M", "--output", "-"])
            .arg(&target),
        100,
    );
    assert_quiet_sigpipe_status(&output, "read --output - | head -c 100");
}

/// A paced recording of about `seconds` of the pattern at 8 MiB/s, on a file in `scratch`.
fn paced_recording(scratch: &Scratch, seconds: u32) -> std::path::PathBuf {
    let set = scratch.path("paced.img");
    let output = run(nvrec()
        .args(["record", "--source", "pattern", "--rate", "8M"])
        .args(["--duration", &format!("{seconds}s"), "--create-size", "64M"])
        .arg(&set));
    assert!(output.status.success(), "{}", text(&output));
    set
}

/// Starts `command`, sends `signal` once `ready` says so (at most 20 s on), and returns
/// what it printed.
fn signalled(command: &mut Command, signal: i32, ready: impl Fn() -> bool) -> std::process::Output {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !ready() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    child.wait_with_output().unwrap()
}

/// Whether a replay to `out` has written some of it.
fn started(out: &Path) -> impl Fn() -> bool + '_ {
    move || std::fs::metadata(out).is_ok_and(|meta| meta.len() > 0)
}

#[test]
fn an_interrupted_replay_says_stopped_or_aborted_with_records_exit_statuses() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("replay-signal");
    let set = paced_recording(&scratch, 3);
    let out = scratch.path("out.bin");
    let replay = || {
        let mut command = nvrec();
        command
            .args(["--json", "replay", "--pace", "--output"])
            .arg(&out)
            .arg(&set);
        command
    };
    let output = run(&mut replay());
    assert!(output.status.success(), "{}", text(&output));
    let whole = json(&output);
    assert_eq!(whole["outcome"], "complete", "{whole}");
    assert_eq!(whole["recording_state"], "complete", "{whole}");
    let whole_bytes = whole["written_bytes"].as_u64().unwrap();
    for (signal, code, outcome) in [(libc::SIGINT, 0, "stopped"), (libc::SIGTERM, 4, "aborted")] {
        let _ = std::fs::remove_file(&out);
        let output = signalled(&mut replay(), signal, started(&out));
        assert_eq!(output.status.code(), Some(code), "{}", text(&output));
        let report = json(&output);
        assert_eq!(report["outcome"], outcome, "{report}");
        let written = report["written_bytes"].as_u64().unwrap();
        assert!(
            written > 0 && written < whole_bytes,
            "{written} of {whole_bytes}"
        );
        assert_eq!(std::fs::metadata(&out).unwrap().len(), written);
    }
    // The text report says it too, and never "complete" for the replay.
    let _ = std::fs::remove_file(&out);
    let output = signalled(
        nvrec()
            .args(["replay", "--pace", "--output"])
            .arg(&out)
            .arg(&set),
        libc::SIGINT,
        started(&out),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let shown = text(&output);
    assert!(
        shown.contains("replay stopped") && !shown.contains("replay complete"),
        "{shown}"
    );
}

/// A pseudo-terminal: the master and the path of its slave.
fn pseudo_terminal() -> (std::fs::File, std::path::PathBuf) {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt, grantpt, unlockpt and ptsname_r act on the descriptor opened
    // here, which the File then owns; ptsname_r writes at most `name.len()` bytes.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        let master_file = std::fs::File::from_raw_fd(master);
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let path = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        (master_file, std::path::PathBuf::from(path))
    }
}

#[test]
fn replay_refuses_a_terminal_as_output_unless_asked_with_output_dash() {
    let scratch = Scratch::new("replay-tty");
    let set = scratch.path("set.img");
    let data = noise(1000, 3);
    let mut child = nvrec()
        .args(["record", "--create-size", "16M"])
        .arg(&set)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    assert!(child.wait().unwrap().success());
    let (_master, slave) = pseudo_terminal();
    let terminal = || {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&slave)
            .unwrap()
    };
    let output = nvrec()
        .arg("replay")
        .arg(&set)
        .stdout(terminal())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let shown = text(&output);
    assert!(
        shown.contains("stdout is a terminal") && shown.contains("--output -"),
        "{shown}"
    );
    // Asked for: the 1000 bytes go to the terminal (its buffer holds them).
    let output = nvrec()
        .args(["replay", "--output", "-"])
        .arg(&set)
        .stdout(terminal())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("1000 bytes"), "{}", text(&output));
}

#[test]
fn an_empty_or_reversed_replay_window_is_refused_before_any_read() {
    let scratch = Scratch::new("replay-window");
    let set = paced_recording(&scratch, 1);
    let never = scratch.path("never-created.bin");
    let missing = scratch.path("no-such-member.img");
    for (from, to) in [("5s", "1s"), ("1s", "1s"), ("500ms", "0s")] {
        // A target that does not exist shows that nothing was opened or read first.
        for target in [&set, &missing] {
            let output = run(nvrec()
                .args(["replay", "--from", from, "--to", to, "--output"])
                .arg(&never)
                .arg(target));
            assert_eq!(output.status.code(), Some(2), "{}", text(&output));
            assert!(
                text(&output).contains("is not before --to"),
                "{}",
                text(&output)
            );
            assert!(!never.exists(), "a refused replay created its output");
        }
    }
    let output = run(nvrec()
        .args(["replay", "--from", "100ms", "--to", "600ms"])
        .arg(&set));
    assert!(output.status.success(), "{}", text(&output));
    assert!(!output.stdout.is_empty());
}

/// A window that holds none of a recording's time (after its end, before its start) is
/// refused by replay, export and verify alike: exit 2, the recording's span named, nothing
/// written; a window inside it still reads.
#[test]
fn a_window_outside_the_recording_is_refused_naming_its_span() {
    let scratch = Scratch::new("window-outside");
    let set = paced_recording(&scratch, 1);
    let listed = json(&run(nvrec().args(["--json", "ls"]).arg(&set)));
    let recording = &listed["recordings"][0];
    let (start, end) = (
        recording["start"].as_str().unwrap(),
        recording["end"].as_str().unwrap(),
    );
    let span = format!("recording 1 spans {start} to {end} UTC (");
    let output = scratch.path("never-created.out");
    let windows: [&[&str]; 4] = [
        &["--from", "10s"],
        &["--from", "1h", "--to", "2h"],
        &["--to", "2000-01-01T00:00:00Z"],
        &[
            "--from",
            "1999-01-01T00:00:00Z",
            "--to",
            "2000-01-01T00:00:00Z",
        ],
    ];
    for window in windows {
        let commands: [&[&str]; 3] = [
            &["replay", "--output"],
            &["export", "--format", "mcap", "--output"],
            &["verify"],
        ];
        for command in commands {
            let mut invocation = nvrec();
            invocation.args(command);
            if command.len() > 1 {
                invocation.arg(&output);
            }
            let result = run(invocation.args(window).arg(&set));
            let said = text(&result);
            assert_eq!(
                result.status.code(),
                Some(2),
                "{command:?} {window:?}: {said}"
            );
            assert!(said.contains(&span), "{command:?} {window:?}: {said}");
            assert!(said.contains("give a window within it"), "{said}");
            assert!(
                !output.exists(),
                "{command:?} {window:?} created its output"
            );
        }
    }
    // The ends of the recording itself are inside.
    for window in [
        ["--from", "0s", "--to", "100ms"],
        ["--from", "900ms", "--to", "1h"],
    ] {
        let result = run(nvrec().arg("verify").args(window).arg(&set));
        assert!(result.status.success(), "{window:?}: {}", text(&result));
    }
    // Over a set of two recordings, a window that holds neither names both spans; one
    // that holds time of the first only checks that one.
    let appended = run(nvrec()
        .args(["record", "--append", "--source", "pattern", "--size", "1M"])
        .arg(&set));
    assert!(appended.status.success(), "{}", text(&appended));
    let before_both = [
        "--from",
        "2000-01-01T00:00:00Z",
        "--to",
        "2000-01-02T00:00:00Z",
    ];
    for command in ["replay", "verify"] {
        let result = run(nvrec().arg(command).args(before_both).arg(&set));
        let said = text(&result);
        assert_eq!(result.status.code(), Some(2), "{command}: {said}");
        for id in [1, 2] {
            assert!(said.contains(&format!("recording {id} spans")), "{said}");
        }
    }
    let checked = json(&run(nvrec()
        .args(["--json", "verify", "--from", "500ms"])
        .arg(&set)));
    let ids: Vec<u64> = checked["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|recording| recording["recording_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [1], "{checked}");
}

#[test]
fn zero_sizes_and_io_sizes_that_are_not_whole_chunks_are_refused_not_replaced() {
    let scratch = Scratch::new("sizes");
    let target = scratch.path("t.img");
    assert!(run(nvrec().args(["write", "--size", "4M"]).arg(&target))
        .status
        .success());
    let missing = scratch.path("never-created.img");
    let below = "is smaller than the chunk size 131072";
    let cases: &[(&[&str], &Path, &str)] = &[
        (
            &["write", "--size", "0"],
            &missing,
            "a size or chunk count of 0",
        ),
        (
            &["write", "--chunks", "0"],
            &missing,
            "a size or chunk count of 0",
        ),
        (
            &["read", "--size", "0"],
            &target,
            "a size or chunk count of 0",
        ),
        (
            &["read", "--chunks", "0"],
            &target,
            "a size or chunk count of 0",
        ),
        (
            &["write", "--size", "1M", "--io-size", "0"],
            &missing,
            below,
        ),
        (
            &["write", "--size", "1M", "--io-size", "3K"],
            &missing,
            below,
        ),
        (
            &["write", "--size", "1M", "--io-size", "64K"],
            &missing,
            below,
        ),
        (
            &["write", "--size", "1M", "--io-size", "192K"],
            &missing,
            "is not a multiple of the chunk size",
        ),
        (&["read", "--io-size", "64K"], &target, below),
        (&["selftest", "--io-size", "3K"], &missing, below),
        (&["selftest", "--size", "0"], &missing, "--size 0"),
        (
            &["record", "--io-size", "0", "--create-size", "16M"],
            &missing,
            below,
        ),
        (
            &["record", "--io-size", "64K", "--create-size", "16M"],
            &missing,
            below,
        ),
        (
            &["record", "--size", "0", "--create-size", "16M"],
            &missing,
            "--size 0 records nothing",
        ),
    ];
    for (args, path, message) in cases {
        for json in [false, true] {
            let output = run(nvrec()
                .args(json.then_some("--json"))
                .args(*args)
                .arg(path)
                .stdin(Stdio::null()));
            assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
            assert!(
                text(&output).contains(message),
                "{args:?}: expected '{message}' in {}",
                text(&output)
            );
            assert!(
                !text(&output).contains("0xffffffffffffffff"),
                "{args:?}: {}",
                text(&output)
            );
        }
    }
    assert!(!missing.exists(), "a refused run created its target");
    // Without --io-size, chunks larger than 1 MiB take I/Os of one chunk.
    let output = run(nvrec()
        .args(["--json", "write", "--chunk-size", "2M", "--size", "4M"])
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["io_size_bytes"], 2 << 20);
}

#[test]
fn a_target_given_twice_is_refused_by_name_before_anything_is_written() {
    let scratch = Scratch::new("twice");
    let set = scratch.path("a.img");
    let record = ["record", "--source", "pattern", "--size", "1M"];
    let same_names: [&[std::path::PathBuf]; 3] = [
        &[set.clone(), set.clone()],
        &[set.clone(), scratch.0.join(".").join("a.img")],
        &[scratch.path("b.img"), set.clone(), set.clone()],
    ];
    for targets in same_names {
        let output = run(nvrec()
            .args(record)
            .args(["--create-size", "16M"])
            .args(targets));
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        assert!(text(&output).contains("given twice"), "{}", text(&output));
        assert!(!set.exists() && !scratch.path("b.img").exists());
    }
    assert!(run(nvrec()
        .args(record)
        .args(["--create-size", "16M"])
        .arg(&set))
    .status
    .success());
    let before = file_digest(&set);
    let link = scratch.path("link.img");
    std::os::unix::fs::symlink(&set, &link).unwrap();
    let output = run(nvrec().args(record).arg(&set).arg(&link));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("are the same target, given twice"),
        "{}",
        text(&output)
    );
    assert_eq!(
        file_digest(&set),
        before,
        "a refused record touched the set"
    );
    // A block device twice is named as such, not as held by another program.
    let Some(device) = LoopDevice::new(64 << 20) else {
        return;
    };
    let output = run(nvrec().args(record).arg(&device.device).arg(&device.device));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("given twice") && !text(&output).contains("another program"),
        "{}",
        text(&output)
    );
}

#[test]
fn refused_runs_create_nothing_and_a_directory_is_no_source() {
    let scratch = Scratch::new("refused");
    let directory = scratch.path("dir");
    std::fs::create_dir(&directory).unwrap();
    let created = scratch.path("created.img");
    // A directory as the source: refused before any target is created or formatted.
    let output = run(nvrec()
        .args(["record", "--create-size", "16M", "--source"])
        .arg(&directory)
        .arg(&created));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("is a directory"),
        "{}",
        text(&output)
    );
    let set = scratch.path("set.img");
    assert!(run(nvrec()
        .args(["record", "--source", "pattern", "--size", "1M"])
        .args(["--create-size", "16M"])
        .arg(&set))
    .status
    .success());
    let before = file_digest(&set);
    let output = run(nvrec()
        .arg("record")
        .arg("--source")
        .arg(&directory)
        .arg(&set));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert_eq!(file_digest(&set), before, "the set was formatted");
    let output = run(nvrec()
        .args(["write", "--size", "1M", "--source"])
        .arg(&directory)
        .arg(&created));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    // Refusals after a target file was made leave no file behind.
    let cases: [(&[&str], Vec<std::path::PathBuf>); 3] = [
        // The second target is a directory: the first had been created.
        (
            &["record", "--source", "pattern", "--create-size", "16M"],
            vec![created.clone(), directory.clone()],
        ),
        // Too small to hold a volume.
        (
            &["record", "--source", "pattern", "--create-size", "100K"],
            vec![created.clone()],
        ),
        // A source that does not exist.
        (
            &["write", "--size", "1M", "--source", "no-such-source"],
            vec![created.clone()],
        ),
    ];
    for (args, targets) in cases {
        let output = run(nvrec().args(args).args(&targets).current_dir(&scratch.0));
        assert!(!output.status.success(), "{args:?}: {}", text(&output));
        assert!(!created.exists(), "{args:?} left {}", created.display());
    }
}

#[test]
fn an_os_error_is_printed_once() {
    for json in [false, true] {
        let output = run(nvrec().args(json.then_some("--json")).args([
            "write",
            "--size",
            "1M",
            "/proc/no-such-dir/t.img",
        ]));
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        let shown = text(&output);
        assert_eq!(shown.matches("os error 2").count(), 1, "{shown}");
        assert!(
            shown.contains("could not open /proc/no-such-dir/t.img"),
            "{shown}"
        );
    }
}

#[test]
fn without_a_terminal_a_long_run_prints_a_progress_line_every_few_seconds() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("progress");
    let set = scratch.path("set.img");
    let output = run(nvrec()
        .args([
            "record",
            "--source",
            "pattern",
            "--rate",
            "4M",
            "--duration",
            "6s",
        ])
        .args(["--create-size", "64M"])
        .arg(&set));
    assert!(output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("nvrec record: ") && line.contains("elapsed"))
        .collect();
    assert_eq!(lines.len(), 1, "one line after 5 s: {stderr}");
    // The rate is the paced rate, measured over the last seconds.
    let rate: f64 = lines[0]
        .split(", ")
        .find_map(|part| part.strip_suffix(" MiB/s"))
        .and_then(|rate| rate.parse().ok())
        .unwrap_or_else(|| panic!("no rate in {}", lines[0]));
    assert!((3.0..=5.0).contains(&rate), "{}", lines[0]);
    // With --json, stderr stays quiet.
    let output = run(nvrec()
        .args(["--json", "record", "--source", "pattern", "--rate", "4M"])
        .args(["--duration", "6s", "--create-size", "64M"])
        .arg(scratch.path("quiet.img")));
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stderr.is_empty(), "{}", text(&output));
}

#[test]
fn devices_names_the_nvrec_set_a_device_holds() {
    let Some(device) = LoopDevice::new(64 << 20) else {
        return;
    };
    let recorded = run(nvrec()
        .args([
            "record", "--source", "zero", "--size", "4M", "--label", "on loop",
        ])
        .arg(&device.device));
    assert!(recorded.status.success(), "{}", text(&recorded));
    let shown = run(nvrec().arg("devices"));
    let listing = String::from_utf8_lossy(&shown.stdout).to_string();
    let line = listing
        .lines()
        .find(|line| line.contains(&*device.device.to_string_lossy()))
        .unwrap_or_else(|| panic!("{} not listed:\n{listing}", device.device.display()));
    assert!(
        line.contains("nvrec set") && line.contains("\"on loop\""),
        "{line}"
    );
    assert!(line.contains("member 0 of 1, 1 recording"), "{line}");
    assert!(!line.ends_with("free"), "{line}");
    let value = json(&run(nvrec().args(["--json", "devices"])));
    let entry = value["block_devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["path"] == device.device.to_string_lossy().as_ref())
        .expect("listed in JSON");
    assert_eq!(entry["usage"]["nvrec"]["label"], "on loop", "{entry}");
    assert_eq!(
        entry["usage"]["nvrec"]["recordings"][0][2],
        4 << 20,
        "{entry}"
    );
}
