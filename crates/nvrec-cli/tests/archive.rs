//! End-to-end tests of archives: `nvrec archive` to a directory (file://) and to a real S3
//! server (Garage, single node on 127.0.0.1, started by the test in a temp dir on free
//! ports and killed afterwards), then `ls`, `replay`, `verify`, `export` and `catalog` from
//! there; kill -9 during an archive and a server killed mid-upload, then resumed; objects
//! corrupted on purpose. The Garage tests skip, saying why, where no `garage` is installed
//! (`.ci/run` installs it).

mod common;

use common::*;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "archiving rings and marks while they record, killed and resumed, against a real S3 server or a directory";

/// A scratch dir with the archive's local files (state and catalog) kept inside it.
struct Setup {
    scratch: Scratch,
}

impl Setup {
    fn new(name: &str) -> Setup {
        Setup {
            scratch: Scratch::new(name),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.scratch.path(name)
    }

    fn files(&self, names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(|name| self.path(name)).collect()
    }

    /// nvrec with its state and catalog in the scratch dir.
    fn nvrec(&self) -> Command {
        let mut command = nvrec();
        command.env("XDG_STATE_HOME", self.path("state"));
        command
    }

    fn archive(&self, url: &str, targets: &[PathBuf], extra: &[&str]) -> Output {
        run(self
            .nvrec()
            .args(["--json", "archive", "--to", url, "--node", "bench-7"])
            .args(extra)
            .args(targets))
    }
}

fn stdout_of(output: &Output) -> &[u8] {
    &output.stdout
}

/// Records `data` from stdin (64 MiB files), and a second recording after it.
fn two_recordings(setup: &Setup, targets: &[PathBuf], first: &[u8], second: &[u8]) {
    let output = record_stdin(targets, first, &["--create-size", "64M", "--label", "one"]);
    assert!(output.status.success(), "{}", text(&output));
    let output = record_stdin(targets, second, &["--append", "--label", "two"]);
    assert!(output.status.success(), "{}", text(&output));
    let _ = setup;
}

/// The objects under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_directory_archive_replays_byte_exact_verifies_and_lists() {
    let setup = Setup::new("arch-file");
    let targets = setup.files(&["a.img", "b.img"]);
    let first = noise(37_000_000 + 12_345, 5);
    let second = noise(3_000_000, 6);
    two_recordings(&setup, &targets, &first, &second);
    let url = format!("file://{}", setup.path("archive").display());
    let output = setup.archive(
        &url,
        &targets,
        &["--segment-size", "8M", "--part-size", "5M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recordings = report["recordings"].as_array().unwrap();
    assert_eq!(recordings.len(), 2, "{report}");
    for recording in recordings {
        assert_eq!(recording["outcome"], "archived", "{report}");
    }
    // 37 MB in segments of at most 8 MiB.
    assert_eq!(recordings[0]["segment_count"], 5, "{report}");
    // Every object the manifests name is there, and nothing else.
    let objects = files_under(&setup.path("archive"));
    assert_eq!(
        objects
            .iter()
            .filter(|o| o.ends_with("manifest.json"))
            .count(),
        2,
        "{objects:?}"
    );
    assert_eq!(
        objects.iter().filter(|o| o.contains("/seg-")).count(),
        6,
        "{objects:?}"
    );
    assert!(
        objects.iter().all(|o| o.starts_with("bench-7/")),
        "{objects:?}"
    );

    // Read in place: byte-exact, verified, listed.
    for (id, data) in [("1", &first), ("2", &second)] {
        let output = run(setup.nvrec().args(["replay", "--recording", id, &url]));
        assert!(output.status.success(), "{}", text(&output));
        assert!(
            stdout_of(&output) == &data[..],
            "recording {id} differs from the archive"
        );
    }
    let output = run(setup.nvrec().args(["verify", &url]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("recording 1 (complete): OK"),
        "{}",
        text(&output)
    );
    let output = run(setup.nvrec().args(["--json", "ls", &url]));
    assert!(output.status.success(), "{}", text(&output));
    let listing = json(&output);
    assert_eq!(listing["recordings"][0]["bytes"], first.len());
    assert_eq!(listing["recordings"][1]["name"], "two");
    assert_eq!(listing["recordings"][1]["node"], "bench-7");

    // Again: nothing sent, nothing changed.
    let before: Vec<_> = objects
        .iter()
        .map(|o| {
            std::fs::metadata(setup.path("archive").join(o))
                .unwrap()
                .modified()
                .unwrap()
        })
        .collect();
    let output = setup.archive(
        &url,
        &targets,
        &["--segment-size", "8M", "--part-size", "5M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(
        report["recordings"][0]["outcome"], "already_archived",
        "{report}"
    );
    assert_eq!(
        report["recordings"][1]["outcome"], "already_archived",
        "{report}"
    );
    let after: Vec<_> = objects
        .iter()
        .map(|o| {
            std::fs::metadata(setup.path("archive").join(o))
                .unwrap()
                .modified()
                .unwrap()
        })
        .collect();
    assert_eq!(before, after);

    // The catalog lists both; made again from the manifests alone, it lists the same.
    let output = run(setup.nvrec().args(["--json", "catalog", "ls", &url]));
    assert!(output.status.success(), "{}", text(&output));
    let catalog = json(&output);
    assert_eq!(
        catalog["recordings"].as_array().unwrap().len(),
        2,
        "{catalog}"
    );
    std::fs::remove_dir_all(setup.path("state/nvrec")).unwrap();
    let output = run(setup.nvrec().args(["catalog", "ls", &url]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let output = run(setup.nvrec().args(["--json", "catalog", "rebuild", &url]));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(setup
        .nvrec()
        .args(["--json", "catalog", "ls", "--label", "two", &url]));
    let rebuilt = json(&output);
    let rows = rebuilt["recordings"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rebuilt}");
    assert_eq!(rows[0]["recording_id"], 2);
    assert_eq!(rows[0]["stream_len_bytes"], second.len());
    assert_eq!(rows[0]["node"], "bench-7");
    let output = run(setup
        .nvrec()
        .args(["--json", "catalog", "ls", "--node", "elsewhere"]));
    assert_eq!(json(&output)["recordings"].as_array().unwrap().len(), 0);
}

#[test]
fn a_time_window_from_the_archive_is_the_window_from_the_drives() {
    let setup = Setup::new("arch-window");
    let targets = setup.files(&["a.img"]);
    let output = run(nvrec()
        .args([
            "record",
            "--source",
            "pattern",
            "--rate",
            "20MB/s",
            "--duration",
            "2s",
            "--create-size",
            "128M",
        ])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let url = format!("file://{}", setup.path("archive").display());
    let output = setup.archive(
        &url,
        &targets,
        &["--segment-size", "5M", "--part-size", "5M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let window = ["--from", "0.5s", "--to", "1.2s"];
    let from_drives = run(nvrec().arg("replay").args(window).args(&targets));
    assert!(from_drives.status.success(), "{}", text(&from_drives));
    let from_archive = run(setup.nvrec().arg("replay").args(window).arg(&url));
    assert!(from_archive.status.success(), "{}", text(&from_archive));
    assert!(
        from_drives.stdout.len() > 5_000_000,
        "{}",
        from_drives.stdout.len()
    );
    assert!(
        from_drives.stdout.len() < 20_000_000,
        "{}",
        from_drives.stdout.len()
    );
    assert!(
        from_drives.stdout == from_archive.stdout,
        "the windows differ"
    );
    // Pattern recordings verify from the archive too, their pattern checked.
    let output = run(setup.nvrec().args(["verify", &url]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("pattern checked"),
        "{}",
        text(&output)
    );
}

#[test]
fn corrupted_objects_fail_verify_and_replay_loudly() {
    let setup = Setup::new("arch-corrupt");
    let targets = setup.files(&["a.img"]);
    let data = noise(12_000_000, 9);
    let output = record_stdin(&targets, &data, &["--create-size", "32M"]);
    assert!(output.status.success(), "{}", text(&output));
    let archive = setup.path("archive");
    let url = format!("file://{}", archive.display());
    let output = setup.archive(
        &url,
        &targets,
        &["--segment-size", "5M", "--part-size", "5M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let objects = files_under(&archive);
    let segment = archive.join(objects.iter().find(|o| o.ends_with("seg-000001")).unwrap());
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[1_000_000] ^= 0x40;
    std::fs::write(&segment, &bytes).unwrap();
    let output = run(setup.nvrec().args(["verify", &url]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("BAD"), "{}", text(&output));
    // Rewritten in place, the object is no longer the one uploaded: HEAD says so too.
    let output = run(setup.nvrec().args(["verify", "--stored", &url]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("entity tag"), "{}", text(&output));
    let output = run(setup.nvrec().args(["--json", "verify", &url]));
    let report = json(&output);
    assert_eq!(report["good"], false);
    let first_bad = report["recordings"][0]["first_bad"].as_str().unwrap();
    assert!(first_bad.contains("seg-000001"), "{first_bad}");
    assert!(first_bad.contains("checksum mismatch"), "{first_bad}");
    // Replay gives back every chunk but the damaged one, and says which.
    let output = run(setup.nvrec().args(["replay", &url]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("does not decode"),
        "{}",
        text(&output)
    );
    assert!(output.stdout.len() < data.len());
    assert!(output.stdout.len() >= data.len() - 128 * 1024);

    // A segment cut short, and one gone.
    std::fs::write(&segment, &bytes[..bytes.len() / 2]).unwrap();
    let output = run(setup.nvrec().args(["verify", &url]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let output = run(setup.nvrec().args(["--json", "verify", "--stored", &url]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let first_bad = json(&output)["recordings"][0]["first_bad"].to_string();
    assert!(
        first_bad.contains("bytes, the manifest says"),
        "{first_bad}"
    );
    std::fs::remove_file(&segment).unwrap();
    let output = run(setup.nvrec().args(["verify", &url]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("object missing"),
        "{}",
        text(&output)
    );
    let output = run(setup.nvrec().args(["verify", "--stored", &url]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("missing from the store"),
        "{}",
        text(&output)
    );

    // A damaged manifest is named, never skipped silently.
    let manifest = archive.join(
        objects
            .iter()
            .find(|o| o.ends_with("manifest.json"))
            .unwrap(),
    );
    std::fs::write(&manifest, b"{ not json").unwrap();
    for command in [&["ls"][..], &["verify"], &["verify", "--stored"]] {
        let output = run(setup.nvrec().args(command).arg(&url));
        assert_eq!(
            output.status.code(),
            Some(1),
            "{command:?}: {}",
            text(&output)
        );
        assert!(
            text(&output).contains("UNREADABLE MANIFEST"),
            "{command:?}: {}",
            text(&output)
        );
    }
}

#[test]
fn verify_stored_passes_a_whole_archive_and_is_refused_for_drives() {
    let setup = Setup::new("arch-stored");
    let targets = setup.files(&["a.img"]);
    let output = record_stdin(&targets, &noise(3_000_000, 4), &["--create-size", "16M"]);
    assert!(output.status.success(), "{}", text(&output));
    let url = format!("file://{}", setup.path("archive").display());
    let output = setup.archive(&url, &targets, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let output = run(setup.nvrec().args(["--json", "verify", "--stored", &url]));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["good"], true, "{report}");
    assert_eq!(report["recordings"][0]["good"], true, "{report}");
    let output = run(setup.nvrec().args(["verify", "--stored"]).args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

/// Publishes, as a recorder running on the set would, that its buffer pool is
/// `peak_fill` full (a live process: this one; refreshed by the caller).
fn publish_load(dir: &Path, set_uuid: &str, peak_fill: f64) {
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let path = dir.join(format!("nvrec-load-{set_uuid}"));
    let staging = dir.join("staging");
    let line = format!(
        "nvrec-load-1 {} {peak_fill} 64 {at_ms}\n",
        std::process::id()
    );
    std::fs::write(&staging, line).unwrap();
    std::fs::rename(&staging, &path).unwrap();
}

#[test]
fn archive_pauses_while_the_recorder_on_the_set_fills_its_buffers() {
    let setup = Setup::new("arch-backoff");
    let targets = setup.files(&["a.img"]);
    let output = record_stdin(&targets, &noise(8_000_000, 5), &["--create-size", "16M"]);
    assert!(output.status.success(), "{}", text(&output));
    let set_uuid = json(&run(nvrec().args(["--json", "ls"]).args(&targets)))["set_uuid"]
        .as_str()
        .unwrap()
        .to_string();
    let loads = setup.path("loads");
    std::fs::create_dir_all(&loads).unwrap();
    // The recorder's pool is 90 % full for 1.5 s, then down to 10 %.
    publish_load(&loads, &set_uuid, 0.9);
    let archive = setup
        .nvrec()
        .env("NVREC_LOAD_DIR", &loads)
        .args(["--json", "archive", "--node", "n"])
        .args([
            "--to",
            &format!("file://{}", setup.path("archive").display()),
        ])
        .args(&targets)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let busy_until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < busy_until {
        publish_load(&loads, &set_uuid, 0.9);
        std::thread::sleep(Duration::from_millis(100));
    }
    publish_load(&loads, &set_uuid, 0.1);
    let output = archive.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let recording = &json(&output)["recordings"][0];
    assert_eq!(recording["outcome"], "archived", "{recording}");
    let paused = recording["backoff_s"].as_f64().unwrap();
    assert!(paused >= 1.0, "paused {paused} s of the recorder's 1.5 s");
    // A load that is stale (its recorder killed -9) holds nothing back.
    std::fs::write(
        loads.join(format!("nvrec-load-{set_uuid}")),
        format!("nvrec-load-1 {} 1.0 64 1000\n", std::process::id()),
    )
    .unwrap();
    let output = run(setup
        .nvrec()
        .env("NVREC_LOAD_DIR", &loads)
        .args(["--json", "archive", "--node", "n2"])
        .args([
            "--to",
            &format!("file://{}", setup.path("archive2").display()),
        ])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["recordings"][0]["backoff_s"], 0.0);
}

#[test]
fn bad_archive_arguments_are_refused_before_anything_is_written() {
    let setup = Setup::new("arch-usage");
    let targets = setup.files(&["a.img"]);
    let output = record_stdin(&targets, &noise(1000, 1), &["--create-size", "16M"]);
    assert!(output.status.success(), "{}", text(&output));
    let dir = setup.path("archive");
    let url = format!("file://{}", dir.display());
    for (args, why) in [
        (vec!["--to", "ftp://x"], "file://DIR or s3://"),
        (vec!["--to", "s3://"], "name the bucket"),
        (vec!["--to", url.as_str(), "--node", "a/b"], "node name"),
        (vec!["--to", url.as_str(), "--part-size", "1M"], "5 MiB"),
        (vec!["--to", url.as_str(), "--max-rate", "0"], "above 0"),
        (
            vec!["--to", url.as_str(), "--recording", "9"],
            "recording 9",
        ),
    ] {
        let output = run(setup.nvrec().arg("archive").args(&args).args(&targets));
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
        assert!(text(&output).contains(why), "{args:?}: {}", text(&output));
    }
    assert!(!dir.exists() || files_under(&dir).is_empty());
    let output = run(setup
        .nvrec()
        .args(["ls", &format!("file://{}", setup.path("none").display())]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let output = run(setup.nvrec().args(["ls", &url]).arg(&targets[0]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

#[test]
fn kill_9_during_an_archive_to_a_directory_then_resume() {
    let setup = Setup::new("arch-kill");
    let targets = setup.files(&["a.img", "b.img"]);
    let data = noise(60_000_000, 11);
    let output = record_stdin(&targets, &data, &["--create-size", "64M"]);
    assert!(output.status.success(), "{}", text(&output));
    let archive = setup.path("archive");
    let url = format!("file://{}", archive.display());
    // Slowly (10 MB/s), so that the kill comes in the middle.
    let mut child = setup
        .nvrec()
        .args([
            "archive",
            "--to",
            &url,
            "--node",
            "n1",
            "--segment-size",
            "5M",
            "--part-size",
            "5M",
        ])
        .args(["--max-rate", "10MB/s"])
        .args(&targets)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    // Whole segments only: the file store writes each one under a staging name (`#`) first.
    while files_under_or_none(&archive)
        .iter()
        .filter(|o| o.contains("/seg-") && !o.contains('#'))
        .count()
        < 3
    {
        assert!(Instant::now() < deadline, "no segment came");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let objects = files_under(&archive);
    assert!(
        !objects.iter().any(|o| o.ends_with("manifest.json")),
        "{objects:?}"
    );
    let output = run(setup
        .nvrec()
        .args([
            "--json",
            "archive",
            "--to",
            &url,
            "--node",
            "n1",
            "--segment-size",
            "5M",
            "--part-size",
            "5M",
        ])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recording = &report["recordings"][0];
    assert_eq!(recording["outcome"], "archived", "{report}");
    assert!(
        recording["segments_kept"].as_u64().unwrap() >= 2,
        "{report}"
    );
    assert!(
        recording["uploaded_bytes"].as_u64().unwrap()
            < recording["archived_bytes"].as_u64().unwrap(),
        "{report}"
    );
    // Exactly the segments the manifest names (12: 60 MB in 5 MiB), no temp files left.
    let objects = files_under(&archive);
    let segment_count = recording["segment_count"].as_u64().unwrap() as usize;
    assert_eq!(objects.len(), segment_count + 1, "{objects:?}");
    let output = run(setup.nvrec().args(["replay", &url]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stdout == data, "the resumed archive differs");
}

fn files_under_or_none(dir: &Path) -> Vec<String> {
    if dir.exists() {
        files_under(dir)
    } else {
        Vec::new()
    }
}

// ---------------------------------------------------------------------------------------------
// Garage: a real S3 server.

const BUCKET: &str = "nvrec-test";

/// A single-node Garage on 127.0.0.1, in a temp dir of its own, on free ports; killed and
/// removed on drop.
struct Garage {
    dir: Scratch,
    config: PathBuf,
    child: Option<Child>,
    s3_port: u16,
    key_id: String,
    secret: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn garage_cli(config: &Path, args: &[&str]) -> Output {
    Command::new("garage")
        .arg("-c")
        .arg(config)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("garage runs")
}

impl Garage {
    /// None, saying why, where garage is not installed.
    fn start() -> Option<Garage> {
        if Command::new("garage").arg("--version").output().is_err() {
            nvrec_testkit::skip(nvrec_testkit::GARAGE, "no `garage` on the PATH");
            return None;
        }
        let dir = Scratch::new("garage");
        let s3_port = free_port();
        let rpc_port = free_port();
        let config = dir.path("garage.toml");
        let secret: String = noise(32, u64::from(s3_port))
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(
            &config,
            format!(
                "metadata_dir = \"{meta}\"\n\
                 data_dir = \"{data}\"\n\
                 db_engine = \"sqlite\"\n\
                 replication_factor = 1\n\
                 rpc_bind_addr = \"127.0.0.1:{rpc_port}\"\n\
                 rpc_public_addr = \"127.0.0.1:{rpc_port}\"\n\
                 rpc_secret = \"{secret}\"\n\
                 [s3_api]\n\
                 s3_region = \"garage\"\n\
                 api_bind_addr = \"127.0.0.1:{s3_port}\"\n\
                 root_domain = \".s3.garage.localhost\"\n",
                meta = dir.path("meta").display(),
                data = dir.path("data").display(),
            ),
        )
        .unwrap();
        let mut garage = Garage {
            dir,
            config,
            child: None,
            s3_port,
            key_id: String::new(),
            secret: String::new(),
        };
        garage.run_server();
        let node = garage.cli(&["node", "id", "-q"]);
        let node = node.trim().split('@').next().unwrap().to_string();
        garage.cli(&["layout", "assign", "-z", "dc1", "-c", "1G", &node]);
        garage.cli(&["layout", "apply", "--version", "1"]);
        garage.cli(&["bucket", "create", BUCKET]);
        let key = garage.cli(&["key", "create", "nvrec-test-key"]);
        let field = |name: &str| {
            key.lines()
                .find_map(|line| line.trim().strip_prefix(name))
                .map(|rest| rest.trim_start_matches(':').trim().to_string())
                .unwrap_or_else(|| panic!("no {name} in: {key}"))
        };
        garage.key_id = field("Key ID");
        garage.secret = field("Secret key");
        garage.cli(&[
            "bucket",
            "allow",
            "--read",
            "--write",
            "--owner",
            BUCKET,
            "--key",
            "nvrec-test-key",
        ]);
        Some(garage)
    }

    /// Starts the server (again) and waits until it answers.
    fn run_server(&mut self) {
        let log = std::fs::File::create(self.dir.path("server.log")).unwrap();
        let child = Command::new("garage")
            .arg("-c")
            .arg(&self.config)
            .arg("server")
            .env("RUST_LOG", "warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let output = garage_cli(&self.config, &["status"]);
            if output.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "garage did not come up: {}\n{}",
                text(&output),
                std::fs::read_to_string(self.dir.path("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn kill_server(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn cli(&self, args: &[&str]) -> String {
        let output = garage_cli(&self.config, args);
        assert!(
            output.status.success(),
            "garage {args:?}: {}",
            text(&output)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// nvrec with the S3 settings of this server.
    fn nvrec(&self, setup: &Setup) -> Command {
        let mut command = setup.nvrec();
        command
            .env("AWS_ACCESS_KEY_ID", &self.key_id)
            .env("AWS_SECRET_ACCESS_KEY", &self.secret)
            .env("AWS_DEFAULT_REGION", "garage")
            .env(
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.s3_port),
            )
            .env("AWS_ALLOW_HTTP", "true");
        command
    }

    /// Waits until the S3 API serves the bucket (the layout takes a moment to apply).
    fn wait_for_s3(&self, setup: &Setup, url: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let output = run(self.nvrec(setup).args(["ls", url]));
            if output.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "S3 API not ready: {}",
                text(&output)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Bytes of object data the server holds: the files of its data directory, where each
    /// block of an uploaded part lands as it arrives.
    fn stored_bytes(&self) -> u64 {
        fn under(dir: &Path) -> u64 {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return 0;
            };
            entries
                .flatten()
                .map(|entry| match entry.metadata() {
                    Ok(meta) if meta.is_dir() => under(&entry.path()),
                    Ok(meta) => meta.len(),
                    Err(_) => 0,
                })
                .sum()
        }
        under(&self.dir.path("data"))
    }

    /// Waits until the server holds at least `bytes` of object data, while `archive` runs.
    fn wait_stored(&self, bytes: u64, archive: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.stored_bytes() < bytes {
            assert!(
                archive.try_wait().unwrap().is_none(),
                "the archive ended before the server held {bytes} bytes"
            );
            assert!(
                Instant::now() < deadline,
                "the server holds {} of {bytes} bytes after 60 s",
                self.stored_bytes()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What the server holds when a test cuts an upload off: a whole part of `S3_SIZES` (5M)
/// and a block of the next, so that the resumed archive has a part to keep.
const A_PART_AND_MORE: u64 = 6 << 20;

impl Drop for Garage {
    fn drop(&mut self) {
        self.kill_server();
    }
}

const S3_SIZES: [&str; 4] = ["--segment-size", "16M", "--part-size", "5M"];

#[test]
fn garage_round_trip_replays_byte_exact_and_verifies() {
    let Some(garage) = Garage::start() else {
        return;
    };
    let setup = Setup::new("arch-s3");
    let targets = setup.files(&["a.img", "b.img"]);
    let first = noise(41_000_000 + 777, 21);
    let second = noise(2_000_000, 22);
    two_recordings(&setup, &targets, &first, &second);
    let url = format!("s3://{BUCKET}/lab");
    garage.wait_for_s3(&setup, &url);
    let output = run(garage
        .nvrec(&setup)
        .args(["--json", "archive", "--to", &url, "--node", "bench-7"])
        .args(S3_SIZES)
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["recordings"][0]["outcome"], "archived", "{report}");
    assert_eq!(report["recordings"][0]["segment_count"], 3, "{report}");
    for (id, data) in [("1", &first), ("2", &second)] {
        let output = run(garage
            .nvrec(&setup)
            .args(["replay", "--recording", id, &url]));
        assert!(output.status.success(), "{}", text(&output));
        assert!(
            output.stdout == *data,
            "recording {id} differs from the archive in S3"
        );
    }
    let output = run(garage.nvrec(&setup).args(["verify", &url]));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(garage.nvrec(&setup).args(["--json", "ls", &url]));
    let listing = json(&output);
    assert_eq!(
        listing["recordings"].as_array().unwrap().len(),
        2,
        "{listing}"
    );
    // Archived again: nothing sent.
    let output = run(garage
        .nvrec(&setup)
        .args(["--json", "archive", "--to", &url, "--node", "bench-7"])
        .args(S3_SIZES)
        .args(&targets));
    let report = json(&output);
    assert_eq!(
        report["recordings"][0]["outcome"], "already_archived",
        "{report}"
    );
    // The catalog made again from the bucket alone.
    std::fs::remove_dir_all(setup.path("state/nvrec")).unwrap();
    let output = run(garage
        .nvrec(&setup)
        .args(["--json", "catalog", "rebuild", &url]));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["rebuilt"]["recording_count"], 2);
}

/// Archives slowly in the background, to be interrupted.
fn slow_archive(garage: &Garage, setup: &Setup, url: &str, targets: &[PathBuf]) -> Child {
    garage
        .nvrec(setup)
        .args([
            "archive",
            "--to",
            url,
            "--node",
            "n1",
            "--max-rate",
            "8MB/s",
        ])
        .args(S3_SIZES)
        .args(targets)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(setup.path("slow.log")).unwrap())
        .spawn()
        .unwrap()
}

#[test]
fn garage_kill_9_during_an_archive_then_resume() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let Some(garage) = Garage::start() else {
        return;
    };
    let setup = Setup::new("arch-s3-kill");
    let targets = setup.files(&["a.img"]);
    let data = noise(40_000_000, 31);
    let output = record_stdin(&targets, &data, &["--create-size", "64M"]);
    assert!(output.status.success(), "{}", text(&output));
    let url = format!("s3://{BUCKET}/kill");
    garage.wait_for_s3(&setup, &url);
    let mut child = slow_archive(&garage, &setup, &url, &targets);
    // The first segment (16 MiB) part of the way through its parts.
    garage.wait_stored(A_PART_AND_MORE, &mut child);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let output = run(garage
        .nvrec(&setup)
        .args(["--json", "archive", "--to", &url, "--node", "n1"])
        .args(S3_SIZES)
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recording = &report["recordings"][0];
    assert_eq!(recording["outcome"], "archived", "{report}");
    assert!(
        recording["segments_resumed"].as_u64().unwrap()
            + recording["segments_kept"].as_u64().unwrap()
            >= 1,
        "{report}"
    );
    assert!(recording["parts_kept"].as_u64().unwrap() >= 1, "{report}");
    assert!(
        recording["uploaded_bytes"].as_u64().unwrap()
            < recording["archived_bytes"].as_u64().unwrap(),
        "{report}"
    );
    let output = run(garage.nvrec(&setup).args(["replay", &url]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stdout == data, "the resumed archive differs");
    let output = run(garage.nvrec(&setup).args(["verify", &url]));
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn garage_killed_mid_upload_then_resumed() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let Some(mut garage) = Garage::start() else {
        return;
    };
    let setup = Setup::new("arch-s3-down");
    let targets = setup.files(&["a.img"]);
    let data = noise(40_000_000, 41);
    let output = record_stdin(&targets, &data, &["--create-size", "64M"]);
    assert!(output.status.success(), "{}", text(&output));
    let url = format!("s3://{BUCKET}/down");
    garage.wait_for_s3(&setup, &url);
    let mut child = slow_archive(&garage, &setup, &url, &targets);
    garage.wait_stored(A_PART_AND_MORE, &mut child);
    garage.kill_server();
    // The archive fails (after its retries), saying so, and writes no manifest.
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        std::fs::read_to_string(setup.path("slow.log")).unwrap()
    );
    garage.run_server();
    garage.wait_for_s3(&setup, &url);
    let output = run(garage
        .nvrec(&setup)
        .args(["--json", "archive", "--to", &url, "--node", "n1"])
        .args(S3_SIZES)
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["recordings"][0]["outcome"], "archived", "{report}");
    let output = run(garage.nvrec(&setup).args(["replay", &url]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stdout == data, "the resumed archive differs");
    let output = run(garage.nvrec(&setup).args(["verify", &url]));
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn follow_archives_a_recording_while_it_is_written_and_it_loses_nothing() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-follow");
    let targets = setup.files(&["a.img", "b.img"]);
    let url = format!("file://{}", setup.path("archive").display());
    // 4 s of pattern at 20 MB/s: 80 MB, 16 segments of 5 MiB while it runs.
    let recorder = nvrec()
        .args([
            "--json",
            "record",
            "--source",
            "pattern",
            "--rate",
            "20MB/s",
            "--duration",
            "4s",
        ])
        .args(["--create-size", "96M"])
        .args(&targets)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the recording shows in ls as recording, and publishes its load.
    let deadline = Instant::now() + Duration::from_secs(20);
    let load = loop {
        let output = run(nvrec().args(["--json", "ls"]).args(&targets));
        if output.status.success() {
            let listed = json(&output);
            let load = Path::new("/dev/shm").join(format!(
                "nvrec-load-{}",
                listed["set_uuid"].as_str().unwrap()
            ));
            if listed["recordings"][0]["state"] == "recording"
                && std::fs::read_to_string(&load)
                    .is_ok_and(|line| line.contains(&format!(" {} ", recorder.id())))
            {
                break load;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the recording did not start: {}",
            text(&output)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = setup.archive(
        &url,
        &targets,
        &[
            "--follow",
            "--poll",
            "200ms",
            "--segment-size",
            "5M",
            "--part-size",
            "5M",
        ],
    );
    let recorded = recorder.wait_with_output().unwrap();
    assert!(recorded.status.success(), "{}", text(&recorded));
    assert_eq!(json(&recorded)["lost_bytes"], 0, "{}", text(&recorded));
    assert!(
        !load.exists(),
        "the ended recorder's load is still published"
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recording = &report["recordings"][0];
    assert_eq!(recording["outcome"], "archived", "{report}");
    assert_eq!(recording["state"], "complete", "{report}");
    assert!(
        recording["segments_sent_live"].as_u64().unwrap() >= 5,
        "{report}"
    );
    // The segments sent while it ran are those of the ended recording: kept, not sent again.
    assert!(
        recording["segments_kept"].as_u64().unwrap()
            >= recording["segments_sent_live"].as_u64().unwrap(),
        "{report}"
    );
    let from_drives = run(nvrec().arg("replay").args(&targets));
    assert!(from_drives.status.success(), "{}", text(&from_drives));
    let from_archive = run(setup.nvrec().args(["replay", &url]));
    assert!(from_archive.status.success(), "{}", text(&from_archive));
    assert!(
        from_drives.stdout.len() > 70_000_000,
        "{}",
        from_drives.stdout.len()
    );
    assert!(
        from_drives.stdout == from_archive.stdout,
        "the followed archive differs"
    );
    let output = run(setup.nvrec().args(["verify", &url]));
    assert!(output.status.success(), "{}", text(&output));
}

/// Bytes of a file the filesystem holds (holes not counted).
fn allocated_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn delete_after_verify_frees_only_what_the_archive_holds() {
    let setup = Setup::new("arch-free");
    let targets = setup.files(&["a.img", "b.img"]);
    let first = noise(30_000_000, 51);
    let second = noise(6_000_000, 52);
    two_recordings(&setup, &targets, &first, &second);
    let before: u64 = targets.iter().map(|t| allocated_bytes(t)).sum();
    let url = format!("file://{}", setup.path("archive").display());
    let output = setup.archive(
        &url,
        &targets,
        &[
            "--recording",
            "1",
            "--delete-after-verify",
            "--segment-size",
            "8M",
            "--part-size",
            "5M",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let freed = &report["freed"][0];
    assert_eq!(freed["recording_id"], 1, "{report}");
    let freed_bytes = freed["outcome"]["freed"]["bytes"].as_u64().unwrap();
    assert!(freed_bytes >= first.len() as u64, "{report}");
    assert!(
        freed_bytes < first.len() as u64 + 2 * 1024 * 1024,
        "{report}"
    );
    let after: u64 = targets.iter().map(|t| allocated_bytes(t)).sum();
    assert!(
        before - after >= first.len() as u64 * 9 / 10,
        "{before} -> {after}"
    );
    // Recording 1 is read from the archive; recording 2, never archived, is whole on the drives.
    let output = run(setup.nvrec().args(["replay", "--recording", "1", &url]));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        output.stdout == first,
        "the archive of the freed recording differs"
    );
    let output = run(nvrec().args(["replay", "--recording", "2"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        output.stdout == second,
        "the recording after the freed one was touched"
    );
    // On the drives it is listed as reclaimed (format 1.6), freed with its archive whole,
    // and refused with when and why; the set's verify checks the rest.
    let output = run(nvrec().args(["verify", "--recording", "1"]).args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("was reclaimed"), "{}", text(&output));
    let listing = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    let freed_entry = &listing["recordings"][0];
    assert_eq!(freed_entry["state"], "reclaimed", "{listing}");
    assert_eq!(freed_entry["reclaimed"]["cause"], "freed", "{listing}");
    assert_eq!(freed_entry["reclaimed"]["archived"], true, "{listing}");
    assert!(run(nvrec().arg("verify").args(&targets)).status.success());
    // Once its archive is damaged, nothing more is freed: recording 2 archived with a
    // segment that is not what was uploaded is kept.
    let output = setup.archive(
        &url,
        &targets,
        &[
            "--recording",
            "2",
            "--segment-size",
            "8M",
            "--part-size",
            "5M",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    let segment = files_under(&setup.path("archive"))
        .into_iter()
        .find(|o| o.contains("rec-000002/seg-"))
        .unwrap();
    std::fs::write(setup.path("archive").join(segment), b"short").unwrap();
    let output = setup.archive(
        &url,
        &targets,
        &["--recording", "2", "--delete-after-verify"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let output = run(nvrec().args(["replay", "--recording", "2"]).args(&targets));
    assert!(
        output.stdout == second,
        "a recording whose archive is damaged was freed"
    );
}

/// Starts a ring recording of pattern at 20 MB/s for `duration` onto a `size` file member,
/// and returns once `ls` shows it recording.
fn start_ring(targets: &[PathBuf], duration: &str, size: &str) -> Child {
    let mut args = vec!["--source", "pattern", "--rate", "20MB/s", "--ring"];
    args.extend(["--duration", duration, "--create-size", size]);
    let paths: Vec<&str> = targets.iter().map(|t| t.to_str().unwrap()).collect();
    args.extend(&paths);
    start_recorder_until(&args, || {
        let output = run(nvrec().args(["--json", "ls"]).args(targets));
        output.status.success() && json(&output)["recordings"][0]["state"] == "recording"
    })
}

/// Waits for a recording started by [`start_ring`]; it lost nothing, and wrapped: its
/// stream is half as long again as the member.
fn ring_recorded(recorder: Child, size_bytes: u64) -> u64 {
    let recorded = recorder.wait_with_output().unwrap();
    assert!(recorded.status.success(), "{}", text(&recorded));
    let report = json(&recorded);
    assert_eq!(report["lost_bytes"], 0, "{report}");
    let stream_len = report["stream_bytes"].as_u64().unwrap();
    assert!(stream_len > size_bytes * 3 / 2, "{report}");
    stream_len
}

/// Checks a ring's archive against its pattern: `ls` of the URL says every stream byte
/// either archived or lost, with the ranges lost (overwritten) adding up; `replay --gaps
/// zero` gives the pattern where the archive holds the stream and zeros in exactly those
/// ranges (from its first chunk on); `verify` calls it OK only where nothing is lost, else LOSSY naming each range.
/// Returns the ranges lost.
fn check_ring_archive(setup: &Setup, url: &str, stream_len: u64) -> Vec<(u64, u64)> {
    check_ring_archive_of(setup, url, 1, stream_len)
}

/// [`check_ring_archive`] of recording `recording_id` in an archive that may hold others.
fn check_ring_archive_of(
    setup: &Setup,
    url: &str,
    recording_id: u32,
    stream_len: u64,
) -> Vec<(u64, u64)> {
    let recording = recording_id.to_string();
    let output = run(setup.nvrec().args(["--json", "ls", url]));
    assert!(output.status.success(), "{}", text(&output));
    let listed = json(&output);
    let row = listed_row(&listed, recording_id);
    assert_eq!(row["stream_len_bytes"], stream_len, "{listed}");
    let lost_bytes = row["lost_bytes"].as_u64().unwrap();
    assert_eq!(
        row["bytes"].as_u64().unwrap() + lost_bytes,
        stream_len,
        "{listed}"
    );
    let lost: Vec<(u64, u64)> = row["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|loss| {
            assert_eq!(
                loss["cause"], "overwritten on the drives before archived",
                "{listed}"
            );
            let end = loss["stream_offset_bytes"].as_u64().unwrap();
            (end - loss["gap_bytes"].as_u64().unwrap(), end)
        })
        .collect();
    assert_eq!(
        lost.iter().map(|(start, end)| end - start).sum::<u64>(),
        lost_bytes,
        "{listed}"
    );
    let output =
        run(setup
            .nvrec()
            .args(["replay", "--recording", &recording, "--gaps", "zero", url]));
    assert!(output.status.success(), "{}", text(&output));
    let mut expected = vec![0u8; stream_len as usize];
    nvrec::pattern::Pattern::new(0).fill(0, &mut expected);
    for &(start, end) in &lost {
        expected[start as usize..end as usize].fill(0);
    }
    // A replay starts at the first chunk there is, and ends at the last: a range lost at
    // the start or at the end is not filled.
    let first = lost
        .first()
        .filter(|range| range.0 == 0)
        .map_or(0, |range| range.1);
    let end = lost
        .last()
        .filter(|range| range.1 == stream_len)
        .map_or(stream_len, |range| range.0);
    let expected = &expected[first as usize..end.max(first) as usize];
    assert_eq!(output.stdout.len(), expected.len());
    assert!(
        output.stdout == expected,
        "the archive is not the pattern outside the ranges it names lost"
    );
    for (start, end) in &lost {
        let said = text(&output);
        assert!(
            said.contains(&format!("lost: stream bytes {start}..{end} ")),
            "{said}"
        );
    }
    let output = run(setup
        .nvrec()
        .args(["verify", "--recording", &recording, url]));
    assert!(output.status.success(), "{}", text(&output));
    let said = text(&output);
    assert!(said.contains("pattern checked"), "{said}");
    assert_eq!(said.contains("): OK,"), lost.is_empty(), "{said}");
    for (start, end) in &lost {
        assert!(
            said.contains(&format!("LOST: stream bytes {start}..{end} ")),
            "{said}"
        );
    }
    let output = run(setup
        .nvrec()
        .args(["verify", "--strict", "--recording", &recording, url]));
    assert_eq!(
        output.status.success(),
        lost.is_empty(),
        "{}",
        text(&output)
    );
    lost
}

#[test]
fn follow_archives_a_ring_that_wraps_whole_while_it_records() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-follow");
    let targets = setup.files(&["a.img"]);
    let url = format!("file://{}", setup.path("archive").display());
    // 9 s at 20 MB/s on a 96 MiB member: not quite two laps, and what the archive sends
    // may lag the recorder by 4 s before the ring comes round to it.
    let recorder = start_ring(&targets, "9s", "96M");
    let output = setup.archive(
        &url,
        &targets,
        &[
            "--follow",
            "--poll",
            "200ms",
            "--segment-size",
            "5M",
            "--part-size",
            "5M",
        ],
    );
    let stream_len = ring_recorded(recorder, 96 << 20);
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recording = &report["recordings"][0];
    assert_eq!(recording["state"], "complete (ring)", "{report}");
    assert!(
        recording["segments_sent_live"].as_u64().unwrap() >= 10,
        "{report}"
    );
    assert_eq!(
        recording["overwritten"].as_array().unwrap().len(),
        0,
        "{report}"
    );
    assert!(check_ring_archive(&setup, &url, stream_len).is_empty());
}

#[test]
fn a_ring_the_archive_cannot_keep_up_with_names_the_ranges_it_lacks() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-behind");
    let targets = setup.files(&["a.img"]);
    let url = format!("file://{}", setup.path("archive").display());
    // 4 s at 20 MB/s on a 24 MiB member, archived at a quarter of that.
    let recorder = start_ring(&targets, "4s", "24M");
    let output = setup.archive(
        &url,
        &targets,
        &[
            "--follow",
            "--poll",
            "200ms",
            "--max-rate",
            "5MB/s",
            "--segment-size",
            "5M",
            "--part-size",
            "5M",
        ],
    );
    let stream_len = ring_recorded(recorder, 24 << 20);
    // What the archive was there to keep is not all in it: exit 1, the ranges named.
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report = json(&output);
    let named = report["recordings"][0]["overwritten"]
        .as_array()
        .unwrap()
        .len();
    let lost = check_ring_archive(&setup, &url, stream_len);
    assert_eq!(named, lost.len(), "{report}");
    // Some of it went while the ring ran: the archive holds its start, then lacks ranges.
    assert!(lost.iter().any(|&(start, _)| start > 0), "{lost:?}");
    assert!(lost.iter().all(|&(_, end)| end < stream_len), "{lost:?}");
}

#[test]
fn a_ring_archived_after_it_ended_names_its_overwritten_start_as_lost() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-after");
    let targets = setup.files(&["a.img"]);
    let url = format!("file://{}", setup.path("archive").display());
    let recorder = start_ring(&targets, "3s", "24M");
    let stream_len = ring_recorded(recorder, 24 << 20);
    let output = setup.archive(
        &url,
        &targets,
        &["--segment-size", "5M", "--part-size", "5M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let lost = check_ring_archive(&setup, &url, stream_len);
    assert_eq!(lost.len(), 1, "{lost:?}");
    let (start, end) = lost[0];
    assert_eq!(start, 0);
    // The drives held less than a lap: the rest of the stream was overwritten there.
    assert!(stream_len - end <= 24 << 20, "{lost:?} of {stream_len}");
    assert!(stream_len - end > 16 << 20, "{lost:?} of {stream_len}");
}

/// The whole segment objects of an archive in a directory (not the staging files a killed
/// run may leave): key, inode and bytes. The directory store writes each object aside and
/// renames it into place, so an object sent again is a new file, whatever its bytes.
fn segment_objects(dir: &Path) -> Vec<(String, u64, Vec<u8>)> {
    use std::os::unix::fs::MetadataExt;
    files_under_or_none(dir)
        .into_iter()
        .filter(|key| key.contains("/seg-") && !key.contains('#'))
        .map(|key| {
            let path = dir.join(&key);
            let inode = std::fs::metadata(&path).unwrap().ino();
            let bytes = std::fs::read(&path).unwrap();
            (key, inode, bytes)
        })
        .collect()
}

/// Starts `archive --follow` (`follow` its options) of the ring on `targets` into the
/// directory `archive`, and kills it (SIGKILL) once the store holds whole segment
/// `index`. Returns the segments it left there.
fn follow_killed_at_segment(
    setup: &Setup,
    archive: &Path,
    targets: &[PathBuf],
    follow: &[&str],
    index: u32,
) -> Vec<(String, u64, Vec<u8>)> {
    let url = format!("file://{}", archive.display());
    let mut child = setup
        .nvrec()
        .args(["archive", "--to", &url, "--node", "bench-7"])
        .args(follow)
        .args(targets)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_segment(archive, index, &mut child);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = segment_objects(archive);
    let keys: Vec<&str> = left.iter().map(|(key, _, _)| key.as_str()).collect();
    assert!(
        !files_under(archive)
            .iter()
            .any(|key| key.ends_with("manifest.json")),
        "{keys:?}"
    );
    // Numbered from 0 without a gap.
    for (number, key) in keys.iter().enumerate() {
        assert!(key.ends_with(&format!("/seg-{number:06}")), "{keys:?}");
    }
    left
}

/// Checks that the segments a killed run `left` in the directory `archive` are still
/// there, never written again (the same files with the same bytes), but for the last one:
/// the killed run may have stored it without having written that down, and then it went
/// again. Returns the payload bytes of the stream they hold (before the last one).
fn left_untouched(archive: &Path, left: &[(String, u64, Vec<u8>)]) -> u64 {
    let now = segment_objects(archive);
    let (last, kept) = left.split_last().expect("segments were left");
    let mut payload_bytes = 0;
    for (key, inode, bytes) in kept {
        let found = now.iter().find(|(k, _, _)| k == key);
        let Some((_, inode_now, bytes_now)) = found else {
            panic!("{key} is gone from the store");
        };
        assert!(bytes_now == bytes, "{key} was replaced by other bytes");
        assert_eq!(inode_now, inode, "{key} was written again");
        payload_bytes += segment_payload_bytes(bytes);
    }
    assert!(
        now.iter().any(|(key, _, _)| key == &last.0),
        "{} is gone",
        last.0
    );
    payload_bytes
}

/// Payload bytes of the chunks in a segment object (128-byte header, then payload).
fn segment_payload_bytes(bytes: &[u8]) -> u64 {
    let mut offset = 0;
    let mut payload_bytes = 0;
    while offset < bytes.len() {
        let header = nvrec::layout::decode_chunk_header(&bytes[offset..]).unwrap();
        payload_bytes += u64::from(header.payload_len_bytes);
        offset += 128 + header.payload_len_bytes as usize;
    }
    payload_bytes
}

const FOLLOW_RING: [&str; 7] = [
    "--follow",
    "--poll",
    "200ms",
    "--segment-size",
    "5M",
    "--part-size",
    "5M",
];

/// A ring followed by `archive --follow`, which is killed (SIGKILL) once the ring has come
/// round over the first segments it sent, then started again with the same arguments: the
/// second run goes on where the archive stands (the killed run's segments neither read nor
/// sent again, nothing named lost at the start), and the archive is whole.
#[test]
fn a_killed_follow_of_a_ring_resumes_where_its_archive_stands() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-kill");
    let targets = setup.files(&["a.img"]);
    let archive = setup.path("archive");
    let url = format!("file://{}", archive.display());
    // 8 s at 20 MB/s on a 48 MiB member: 3.3 laps. Killed once 11 segments of 5 MiB are
    // sent, more than the member holds: the ring has written over the first ones by then.
    let recorder = start_ring(&targets, "8s", "48M");
    let left = follow_killed_at_segment(&setup, &archive, &targets, &FOLLOW_RING, 10);
    let output = setup.archive(&url, &targets, &FOLLOW_RING);
    let stream_len = ring_recorded(recorder, 48 << 20);
    left_untouched(&archive, &left);
    assert!(check_ring_archive(&setup, &url, stream_len).is_empty());
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recording = &report["recordings"][0];
    assert_eq!(recording["state"], "complete (ring)", "{report}");
    // It went on from the killed run's segments (all but perhaps the last, see
    // left_untouched), and sent only what followed them.
    let before = recording["segments_sent_before"].as_u64().unwrap();
    assert!(
        (left.len() as u64 - 1..=left.len() as u64).contains(&before),
        "{report}"
    );
    let left_bytes: u64 = left[..before as usize]
        .iter()
        .map(|s| s.2.len() as u64)
        .sum();
    assert_eq!(
        recording["uploaded_bytes"].as_u64().unwrap() + left_bytes,
        recording["archived_bytes"].as_u64().unwrap(),
        "{report}"
    );
    // The store holds what the manifest names, nothing else.
    let objects = segment_objects(&archive);
    assert_eq!(recording["segment_count"], objects.len(), "{report}");
}

/// As above, but the ring ends while its archive is down, and overwrites what the killed
/// run had not sent yet: the next run goes on where the archive stands and names exactly
/// that range lost, nothing before it.
#[test]
fn a_ring_that_ends_while_its_killed_follow_is_down_lacks_only_what_it_overwrote() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-kill-end");
    let targets = setup.files(&["a.img"]);
    let archive = setup.path("archive");
    let url = format!("file://{}", archive.display());
    // 4 s at 20 MB/s on a 24 MiB member: 3.3 laps, killed after 4 segments (20 MiB).
    let recorder = start_ring(&targets, "4s", "24M");
    let left = follow_killed_at_segment(&setup, &archive, &targets, &FOLLOW_RING, 3);
    let stream_len = ring_recorded(recorder, 24 << 20);
    let output = setup.archive(&url, &targets, &FOLLOW_RING);
    let sent_bytes = left_untouched(&archive, &left);
    let lost = check_ring_archive(&setup, &url, stream_len);
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recording = &report["recordings"][0];
    let before = recording["segments_sent_before"].as_u64().unwrap();
    assert!(
        (left.len() as u64 - 1..=left.len() as u64).contains(&before),
        "{report}"
    );
    // One range lost: from where the killed run's segments end (the last of them
    // included where it went on after it) to the oldest chunk the ring kept.
    assert_eq!(lost.len(), 1, "{lost:?}");
    let last_bytes = segment_payload_bytes(&left.last().unwrap().2);
    let start = lost[0].0;
    assert!(
        start == sent_bytes || before == left.len() as u64 && start == sent_bytes + last_bytes,
        "{lost:?}: the killed run sent {sent_bytes} + {last_bytes} bytes"
    );
    assert!(
        stream_len - lost[0].1 <= 24 << 20,
        "{lost:?} of {stream_len}"
    );
}

/// A killed follow of a ring whose store has since lost one of the segments it sent: the
/// next run goes on after the last segment before it that the store holds (the resume state
/// is believed only as far as the store bears it out), and names what the ring overwrote
/// from there lost, cut into segments again under the keys after it.
#[test]
fn a_resumed_ring_archive_goes_on_after_the_segments_the_store_still_holds() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-kill-gone");
    let targets = setup.files(&["a.img"]);
    let archive = setup.path("archive");
    let url = format!("file://{}", archive.display());
    let recorder = start_ring(&targets, "4s", "24M");
    let left = follow_killed_at_segment(&setup, &archive, &targets, &FOLLOW_RING, 3);
    let stream_len = ring_recorded(recorder, 24 << 20);
    std::fs::remove_file(archive.join(&left[1].0)).unwrap();
    let output = setup.archive(&url, &targets, &FOLLOW_RING);
    let sent_bytes = left_untouched(&archive, &left[..2]);
    let lost = check_ring_archive(&setup, &url, stream_len);
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recording = &report["recordings"][0];
    assert_eq!(recording["segments_sent_before"], 1, "{report}");
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].0, sent_bytes, "{lost:?}");
    let objects = segment_objects(&archive);
    assert_eq!(recording["segment_count"], objects.len(), "{report}");
}

/// The row of recording `recording_id` in `ls --json` (of an archive or of drives).
fn listed_row(listed: &serde_json::Value, recording_id: u32) -> &serde_json::Value {
    listed["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["recording_id"] == recording_id)
        .unwrap_or_else(|| panic!("no recording {recording_id} in the archive: {listed}"))
}

/// `archive --follow` of the ring on `targets` into the directory `archive`, started in the
/// background, its report going to `report` (a pipe nobody reads meanwhile could fill).
fn start_follow(setup: &Setup, archive: &Path, targets: &[PathBuf], report: &Path) -> Child {
    let url = format!("file://{}", archive.display());
    setup
        .nvrec()
        .args(["--json", "archive", "--to", &url, "--node", "bench-7"])
        .args(FOLLOW_RING)
        .args(targets)
        .stdout(std::fs::File::create(report).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (at most 30 s) until the directory `archive` holds segment `index` whole, while
/// the run `child` that sends it goes on.
fn wait_for_segment(archive: &Path, index: u32, child: &mut Child) {
    let segment = format!("/seg-{index:06}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !segment_objects(archive)
        .iter()
        .any(|(key, _, _)| key.ends_with(&segment))
    {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the archive ended ({status}) before segment {index} was in the store");
        }
        assert!(Instant::now() < deadline, "segment {index} never came");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The recording `recording_id` as `ls --json` of the drives lists it. (`ls` exits 1 once
/// a later ring wrote over an earlier recording: the listing says which, and nothing else
/// may be wrong.)
fn listed_on_drives(targets: &[PathBuf], recording_id: u32) -> serde_json::Value {
    let output = run(nvrec().args(["--json", "ls"]).args(targets));
    let listed = json(&output);
    let rows = listed["recordings"].as_array().cloned().unwrap_or_default();
    let written_over = rows.iter().any(|row| row["written_over"].is_string());
    match output.status.code() {
        Some(0) => assert!(!written_over, "{}", text(&output)),
        Some(1) => assert!(written_over, "{}", text(&output)),
        _ => panic!("{}", text(&output)),
    }
    listed_row(&listed, recording_id).clone()
}

/// A ring followed by `archive --follow` whose recorder is killed (SIGKILL): the follow
/// ends with it and writes the manifest of the ring as a reader recovers it. The next ring
/// on the set (`record --append --ring`) recovers the crashed one first (its entry's next
/// revision, closed at the same end) and goes round the member over its chunks. The archive
/// run after that keeps what the archive held of the crashed ring: the same segment
/// objects, never written again, every byte and range it held (the replay the pattern
/// there), nothing named lost that it held, its manifest now of the recovered entry.
#[test]
fn a_crashed_ring_recovered_by_the_next_ring_keeps_what_its_archive_held() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-crash");
    let targets = setup.files(&["a.img"]);
    let archive = setup.path("archive");
    let url = format!("file://{}", archive.display());
    // A ring of 20 MB/s on a 48 MiB member that would run for a minute, killed once its
    // follow has sent 11 segments of 5 MiB, more than the member holds: it has wrapped.
    let mut recorder = start_ring(&targets, "60s", "48M");
    let report = setup.path("follow.json");
    let mut follow = start_follow(&setup, &archive, &targets, &report);
    wait_for_segment(&archive, 10, &mut follow);
    recorder.kill().unwrap(); // SIGKILL
    recorder.wait().unwrap();
    wait_unlocked(&targets);
    // The follow sees the ring end, and archives it to its recovered end.
    let status = follow.wait().unwrap();
    let followed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(status.success(), "{followed}");
    assert_eq!(
        followed["recordings"][0]["state"], "interrupted",
        "{followed}"
    );
    let output = run(setup.nvrec().args(["--json", "ls", &url]));
    let held = listed_row(&json(&output), 1).clone();
    let held_segments = segment_objects(&archive);
    assert_eq!(held["segment_count"], held_segments.len(), "{held}");
    // The 11 sent while it recorded, and the rest (one at least) after its end.
    assert!(held_segments.len() > 11, "{held}");

    // The next ring recovers the crashed one, and in 2.5 s (50 MB) goes round the member
    // over its chunks.
    let output = run(nvrec()
        .args([
            "--json", "record", "--append", "--ring", "--source", "pattern",
        ])
        .args(["--rate", "20MB/s", "--duration", "2500ms"])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let crashed = listed_on_drives(&targets, 1);
    assert_eq!(crashed["state"], "interrupted", "{crashed}");
    let stream_len = crashed["stream_len_bytes"].as_u64().unwrap();
    assert_eq!(held["stream_len_bytes"], stream_len, "{held}\n{crashed}");

    let output = setup.archive(
        &url,
        &targets,
        &["--segment-size", "5M", "--part-size", "5M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let again = &report["recordings"][0];
    assert_eq!(again["recording_id"], 1, "{report}");
    // Nothing of it read again from the drives, nothing sent again: its manifest written
    // again for its entry as recovery closed it, with the segments it held.
    assert_eq!(again["outcome"], "archived", "{report}");
    assert_eq!(again["segments_held"], held_segments.len(), "{report}");
    assert_eq!(again["uploaded_bytes"], 0, "{report}");
    // The segment objects it held are those of the follow, never written again.
    let now = segment_objects(&archive);
    for (key, inode, bytes) in &held_segments {
        let found = now.iter().find(|(k, _, _)| k == key);
        let Some((_, inode_now, bytes_now)) = found else {
            panic!("{key} is gone from the store");
        };
        assert!(bytes_now == bytes, "{key} was replaced by other bytes");
        assert_eq!(inode_now, inode, "{key} was written again");
    }
    let output = run(setup.nvrec().args(["--json", "ls", &url]));
    let listed = json(&output);
    let kept = listed_row(&listed, 1);
    for count in ["bytes", "chunk_count", "segment_count", "archived_bytes"] {
        assert!(
            kept[count].as_u64().unwrap() >= held[count].as_u64().unwrap(),
            "{count}: {held}\n{kept}"
        );
    }
    assert_eq!(kept["losses"], held["losses"], "{held}\n{kept}");
    // The replay of what it holds is the pattern; what it names lost, it named before.
    check_ring_archive_of(&setup, &url, 1, stream_len);
    // The manifest is of the entry as the drives hold it now: archived already.
    let output = setup.archive(&url, &targets, &["--recording", "1"]);
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(
        report["recordings"][0]["outcome"], "already_archived",
        "{report}"
    );
}

/// As above, but the follow is killed (SIGKILL) first, while the ring records, and the
/// recorder after it: the archive lacks the ring's newest part, and the next ring writes
/// over all of the crashed one before an archive runs again. That run goes on after the
/// segments the killed follow sent (never written again) and names the rest of the crashed
/// ring's stream lost, overwritten on the drives before archived, not chunks missing.
#[test]
fn a_crashed_ring_the_next_ring_wrote_over_names_what_its_archive_lacks_overwritten() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-crash-tail");
    let targets = setup.files(&["a.img"]);
    let archive = setup.path("archive");
    let url = format!("file://{}", archive.display());
    let mut recorder = start_ring(&targets, "60s", "48M");
    // The follow killed once 4 segments of 5 MiB are sent; the recorder once 40 MB of
    // its stream are durable, half as much again.
    let left = follow_killed_at_segment(&setup, &archive, &targets, &FOLLOW_RING, 3);
    let deadline = Instant::now() + Duration::from_secs(30);
    while listed_on_drives(&targets, 1)["stream_len_bytes"]
        .as_u64()
        .unwrap()
        < 40_000_000
    {
        assert!(Instant::now() < deadline, "the ring never reached 40 MB");
        std::thread::sleep(Duration::from_millis(20));
    }
    recorder.kill().unwrap(); // SIGKILL
    recorder.wait().unwrap();
    wait_unlocked(&targets);
    // 3 s at 20 MB/s: more than the 48 MiB member holds.
    let output = run(nvrec()
        .args([
            "--json", "record", "--append", "--ring", "--source", "pattern",
        ])
        .args(["--rate", "20MB/s", "--duration", "3s"])
        .args(&targets));
    assert!(output.status.success(), "{}", text(&output));
    let crashed = listed_on_drives(&targets, 1);
    assert_eq!(crashed["state"], "interrupted", "{crashed}");
    let stream_len = crashed["stream_len_bytes"].as_u64().unwrap();

    let output = setup.archive(
        &url,
        &targets,
        &["--segment-size", "5M", "--part-size", "5M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let recording = &report["recordings"][0];
    assert_eq!(recording["recording_id"], 1, "{report}");
    assert!(
        recording["holes"].as_array().unwrap().is_empty(),
        "{report}"
    );
    let before = recording["segments_sent_before"].as_u64().unwrap();
    assert!(
        (left.len() as u64 - 1..=left.len() as u64).contains(&before),
        "{report}"
    );
    let sent_bytes = left_untouched(&archive, &left);
    // One range lost: from where the killed run's segments end to the ring's end.
    let lost = check_ring_archive_of(&setup, &url, 1, stream_len);
    assert_eq!(lost.len(), 1, "{lost:?}");
    let last_bytes = segment_payload_bytes(&left.last().unwrap().2);
    let (start, end) = lost[0];
    assert!(
        start == sent_bytes || before == left.len() as u64 && start == sent_bytes + last_bytes,
        "{lost:?}: the killed run sent {sent_bytes} + {last_bytes} bytes"
    );
    assert_eq!(end, stream_len, "{lost:?}");
}

#[test]
fn a_one_second_window_of_an_archived_ring_takes_three_requests() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-window");
    let targets = setup.files(&["a.img"]);
    let url = format!("file://{}", setup.path("archive").display());
    // 4 s at 20 MB/s on a 48 MiB member: it wrapped, and keeps its last 2.4 s or so.
    let recorder = start_ring(&targets, "4s", "48M");
    ring_recorded(recorder, 48 << 20);
    let output = setup.archive(&url, &targets, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let window = ["--from", "2.2s", "--to", "3.2s"];
    let from_drives = run(nvrec().arg("replay").args(window).args(&targets));
    assert!(from_drives.status.success(), "{}", text(&from_drives));
    assert!(
        from_drives.stdout.len() > 15_000_000,
        "{}",
        text(&from_drives)
    );
    let replayed = setup.path("window.bin");
    let output = run(setup
        .nvrec()
        .args(["--json", "replay", "--output"])
        .arg(&replayed)
        .args(window)
        .arg(&url));
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        std::fs::read(&replayed).unwrap() == from_drives.stdout,
        "the window from the archive differs"
    );
    // A LIST and the manifest's GET find it, one ranged GET of the one segment reads it.
    let report = json(&output);
    assert_eq!(report["archive_requests"], 3, "{report}");
    // The same window of smaller segments: one ranged GET for each segment it touches.
    let small = format!("file://{}", setup.path("small").display());
    let output = setup.archive(
        &small,
        &targets,
        &["--segment-size", "5M", "--part-size", "5M"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let output = run(setup
        .nvrec()
        .args(["--json", "replay", "--output"])
        .arg(&replayed)
        .args(window)
        .arg(&small));
    assert!(output.status.success(), "{}", text(&output));
    assert!(std::fs::read(&replayed).unwrap() == from_drives.stdout);
    let requests = json(&output)["archive_requests"].as_u64().unwrap();
    // 20 MB in 5 MiB segments: four or five of them.
    assert!((6..=7).contains(&requests), "{requests}");
}

/// A mark (format 1.7) is kept on the drives until it is released or archived: a ring
/// archived with `--follow` holds the mark's window, and `--delete-after-verify` then
/// releases the mark (flagged as held by its archive); the window reads from the archive.
#[test]
fn a_mark_whose_window_the_archive_holds_is_released_after_verify() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-mark");
    let targets = setup.files(&["a.img"]);
    let url = format!("file://{}", setup.path("archive").display());
    // 6 s at 20 MB/s on a 48 MiB member: two laps and a half, the mark taken at 1.5 s.
    let recorder = start_ring(&targets, "6s", "48M");
    let marker = {
        let targets = targets.clone();
        std::thread::spawn(move || {
            // 1.5 s of input recorded first.
            wait_recorded(&targets, 30_000_000);
            run(nvrec()
                .args(["mark", "--before", "300ms", "--after", "300ms"])
                .args(&targets))
        })
    };
    let follow = [
        "--follow",
        "--poll",
        "200ms",
        "--segment-size",
        "5M",
        "--part-size",
        "5M",
    ];
    let output = setup.archive(&url, &targets, &follow);
    let stream_len = ring_recorded(recorder, 48 << 20);
    let marked = marker.join().unwrap();
    assert!(marked.status.success(), "{}", text(&marked));
    assert!(output.status.success(), "{}", text(&output));
    assert!(check_ring_archive(&setup, &url, stream_len).is_empty());

    let output = setup.archive(&url, &targets, &["--delete-after-verify"]);
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    assert_eq!(report["marks"][0]["mark_id"], 2, "{report}");
    assert!(report["marks"][0]["kept_because"].is_null(), "{report}");
    let listed = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    assert_eq!(
        listed["marks"][0]["state"], "released (archived)",
        "{listed}"
    );
    assert_eq!(listed["marks"][0]["archived"], true, "{listed}");
    let output = run(nvrec().args(["verify", "--mark", "2"]).args(&targets));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

/// A ring archived only after it ended lacks a mark's window that the ring had jumped
/// over: the mark stays kept, and the run says why.
#[test]
fn a_mark_the_archive_lacks_stays_kept_and_says_why() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let setup = Setup::new("arch-ring-mark-kept");
    let targets = setup.files(&["a.img"]);
    let url = format!("file://{}", setup.path("archive").display());
    let recorder = start_ring(&targets, "6s", "48M");
    // 1.5 s of input recorded first.
    wait_recorded(&targets, 30_000_000);
    let marked = run(nvrec()
        .args(["mark", "--before", "300ms", "--after", "300ms"])
        .args(&targets));
    assert!(marked.status.success(), "{}", text(&marked));
    ring_recorded(recorder, 48 << 20);
    let extra = [
        "--delete-after-verify",
        "--segment-size",
        "5M",
        "--part-size",
        "5M",
    ];
    let output = setup.archive(&url, &targets, &extra);
    assert!(output.status.success(), "{}", text(&output));
    let report = json(&output);
    let why = report["marks"][0]["kept_because"].as_str().unwrap_or("");
    assert!(why.contains("not in the archive"), "{report}");
    let listed = json(&run(nvrec().args(["--json", "ls"]).args(&targets)));
    assert_eq!(listed["marks"][0]["state"], "kept", "{listed}");
    let output = run(nvrec().args(["verify", "--mark", "2"]).args(&targets));
    assert!(output.status.success(), "{}", text(&output));
}

/// An Ethernet frame of a UDP datagram from 10.9.0.`host`:`port` to 10.9.1.1:53, with
/// `len` bytes of data.
fn udp_frame(host: u8, port: u16, len: usize) -> Vec<u8> {
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    frame.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 9, 0, host]);
    frame.extend_from_slice(&[10, 9, 1, 1]);
    frame.extend_from_slice(&port.to_be_bytes());
    frame.extend_from_slice(&[0, 53, 0, 0, 0, 0]);
    frame.resize(frame.len() + len, 7);
    frame
}

/// DuckDB (its Python package, through s3fs) reads the flows objects of a recording of
/// packets archived to Garage from the bucket itself, and sums by Community ID the packets
/// `nvrec find` finds, there and on the drives (from their flow index).
#[test]
fn duckdb_reads_the_flows_from_the_bucket_as_find_finds_them() {
    let Some(garage) = Garage::start() else {
        return;
    };
    if !common::python_imports("duckdb", "duckdb", nvrec_testkit::PYTHON_DUCKDB)
        || !common::python_imports("s3fs", "s3fs", nvrec_testkit::PYTHON_S3FS)
    {
        return;
    }
    let setup = Setup::new("arch-s3-flows");
    let target = setup.path("packets.img");
    let records: std::collections::VecDeque<Vec<u8>> = (0..40_000u64)
        .map(|index| {
            let data = udp_frame(
                (index % 37) as u8,
                4000 + (index % 101) as u16,
                200 + (index % 900) as usize,
            );
            let packet = nvrec::layout::Packet {
                stream: 0,
                content: nvrec::layout::Content::Ethernet,
                timestamp_ns: 1_790_000_000_000_000_000 + index * 100_000,
                original_len: data.len() as u32,
                data: &data,
                peer: None,
                local: None,
                end: false,
            };
            let mut record = vec![0u8; data.len() + 128];
            let len = nvrec::layout::encode_packet(&mut record, &packet);
            record.truncate(len);
            record
        })
        .collect();
    let options = nvrec::recording::writer::RecordOptions {
        create_len_bytes: Some(96 << 20),
        label: "packets".into(),
        ..Default::default()
    };
    nvrec::recording::writer::record(
        std::slice::from_ref(&target),
        &mut common::RecordSource { records },
        &options,
        &nvrec::control::Control::new(),
        &nvrec::control::Progress::default(),
    )
    .expect("the frames are recorded");
    let url = format!("s3://{BUCKET}/flows");
    garage.wait_for_s3(&setup, &url);
    let output = run(garage
        .nvrec(&setup)
        .args(["--json", "archive", "--to", &url, "--node", "bench-7"])
        .args(S3_SIZES)
        .arg(&target));
    assert!(output.status.success(), "{}", text(&output));
    let by_id = |answer: &serde_json::Value| -> std::collections::BTreeMap<String, u64> {
        let mut packets = std::collections::BTreeMap::new();
        for flow in answer["flows"].as_array().unwrap() {
            let id = flow["community_id"].as_str().unwrap().to_string();
            *packets.entry(id).or_default() += flow["packets"].as_u64().unwrap();
        }
        packets
    };
    let found = |source: &str| {
        let output = run(garage
            .nvrec(&setup)
            .args(["--json", "find", "--match", "udp", source]));
        assert!(output.status.success(), "{}", text(&output));
        json(&output)
    };
    let archived = found(&url);
    let drives = found(target.to_str().unwrap());
    assert_eq!(archived["read"]["how"], "indexed", "{}", archived["read"]);
    assert_eq!(drives["read"]["how"], "drive_index", "{}", drives["read"]);
    assert_eq!(by_id(&archived), by_id(&drives));
    // The bucket's own objects, as an engine reads them (s3fs under a protocol of its own,
    // so that DuckDB does not look for its httpfs extension).
    let script = format!(
        "import duckdb, s3fs\n\
         class Garage(s3fs.S3FileSystem):\n    protocol = 'garage'\n\
         fs = Garage(key='{key}', secret='{secret}', client_kwargs={{'endpoint_url': 'http://127.0.0.1:{port}', 'region_name': 'garage'}})\n\
         con = duckdb.connect()\n\
         con.register_filesystem(fs)\n\
         rows = con.sql(\"select community_id, sum(packets) from read_parquet('garage://{BUCKET}/flows/**/*.flows.parquet') where community_id is not null group by community_id\").fetchall()\n\
         for id, packets in rows: print(id, packets)\n",
        key = garage.key_id,
        secret = garage.secret,
        port = garage.s3_port,
    );
    let output = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let duckdb: std::collections::BTreeMap<String, u64> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let (id, packets) = line.rsplit_once(' ').unwrap();
            (id.to_string(), packets.parse().unwrap())
        })
        .collect();
    // Every (host, port) pair of the 37 and the 101 (coprime) is a flow of its own.
    assert_eq!(duckdb.len(), 37 * 101, "{duckdb:?}");
    assert_eq!(duckdb, by_id(&drives));
}
