//! `nvrec serve` end to end: the service binary on a Unix socket of a scratch directory, with
//! scratch file targets, driven over HTTP (hyper's client): recordings started, listed,
//! stopped and aborted; targets it was not given refused with nothing written; every option
//! of `record` that names a path refused, or (the capture filter) taken inline only; a
//! missing or wrong token refused; a client that goes away mid-request; SIGTERM; `nvrec
//! status`; the metrics checked by `promtool check metrics`; the dashboard in headless
//! Chromium; and the systemd notifications on a NOTIFY_SOCKET this test makes. Over TCP,
//! with curl as the client: a listener without a token refused at start, loopback
//! included, and one off loopback without TLS; a missing or wrong token refused; plain
//! HTTP to a TLS port refused; each refusal with nothing started.
//!
//! Tests that need TCP (Chromium cannot speak to a Unix socket) move their thread into a
//! network namespace of its own first, so the address exists only there; they skip, saying
//! why, where that is not permitted.

mod common;

use common::{json, nvrec, own_network, run, text, wait_for_capture, Scratch};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What this file's slowest tests, kept for the full run (`NVREC_FULL_TESTS=1`), cover.
const SLOW: &str = "the service's dashboard in Chromium, its options through the API, and a mark taken and released through it";

/// Where a test's service listens.
#[derive(Clone)]
enum Endpoint {
    Unix(PathBuf),
    Tcp(String),
    /// host:port of a TLS listener, which these tests ask with curl.
    Https(String),
}

/// A running `nvrec serve`, stopped with SIGTERM (and reaped) when dropped.
struct Service {
    child: Option<Child>,
    endpoint: Endpoint,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Service {
    /// Starts the service on `scratch`/s.sock with `args` (allowed targets and options).
    fn start(scratch: &Scratch, args: &[&str]) -> Service {
        Service::start_with(scratch, args, &[])
    }

    fn start_with(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Service {
        let socket = scratch.path("s.sock");
        let tcp = args.contains(&"--listen");
        let mut command = nvrec();
        command.arg("serve");
        if !tcp {
            command.arg("--socket").arg(&socket);
        }
        command
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("nvrec serve starts");
        // Its stderr, collected on a thread; the first line says where it listens.
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (listening_tx, listening_rx) = std::sync::mpsc::channel();
        {
            let stderr = std::sync::Arc::clone(&stderr);
            let pipe = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                    if let Some(at) = line.strip_prefix("nvrec serve: listening on ") {
                        let _ = listening_tx.send(at.to_string());
                    }
                    let mut all = stderr.lock().unwrap();
                    all.push_str(&line);
                    all.push('\n');
                }
            });
        }
        let at = listening_rx.recv_timeout(Duration::from_secs(20));
        let Ok(at) = at else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the service did not start listening: {}",
                stderr.lock().unwrap()
            );
        };
        let endpoint = if let Some(address) = at.strip_prefix("http://") {
            Endpoint::Tcp(address.to_string())
        } else if let Some(address) = at.strip_prefix("https://") {
            Endpoint::Https(address.to_string())
        } else {
            Endpoint::Unix(PathBuf::from(at))
        };
        Service {
            child: Some(child),
            endpoint,
            stderr,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_with_token(method, path, body, None)
    }

    fn call_with_token(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let (status, bytes) = self.call_raw(method, path, body, token, None);
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    fn call_raw(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
        accept: Option<&str>,
    ) -> (u16, Vec<u8>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut builder = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", "nvrec");
            if let Some(token) = token {
                builder = builder.header("authorization", format!("Bearer {token}"));
            }
            if let Some(accept) = accept {
                builder = builder.header("accept", accept);
            }
            let body = body.map(|b| b.to_string()).unwrap_or_default();
            let request = builder.body(Full::new(Bytes::from(body))).unwrap();
            let response = match &self.endpoint {
                Endpoint::Unix(path) => {
                    let stream = tokio::net::UnixStream::connect(path).await.unwrap();
                    send(TokioIo::new(stream), request).await
                }
                Endpoint::Tcp(address) => {
                    let stream = tokio::net::TcpStream::connect(address.as_str())
                        .await
                        .unwrap();
                    send(TokioIo::new(stream), request).await
                }
                Endpoint::Https(_) => panic!("a TLS listener is asked with curl (Curl)"),
            };
            let status = response.status().as_u16();
            let bytes = response.into_body().collect().await.unwrap().to_bytes();
            (status, bytes.to_vec())
        })
    }

    /// Sends SIGTERM and waits for the exit status.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill with the pid of a child this test started and has not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the service did not exit after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until the service has said `line` (a part of one) on stderr.
    fn wait_for_stderr(&self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.stderr().contains(line) {
            assert!(
                Instant::now() < deadline,
                "the service never said {line:?}: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The port of a TCP listener.
    fn port(&self) -> u16 {
        let (Endpoint::Tcp(address) | Endpoint::Https(address)) = &self.endpoint else {
            panic!("the service listens on a Unix socket")
        };
        address.rsplit_once(':').unwrap().1.parse().unwrap()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
    }
}

async fn send<T>(
    io: TokioIo<T>,
    request: hyper::Request<Full<Bytes>>,
) -> hyper::Response<hyper::body::Incoming>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(connection);
    sender.send_request(request).await.unwrap()
}

fn path_text(path: &Path) -> String {
    path.display().to_string()
}

/// Runs `work` on a thread moved into a network namespace of its own (the services it
/// starts live there too), named as the calling test so that a skip names it; `None`, the
/// skip reported, where that is not permitted.
fn in_own_network<T: Send>(work: impl FnOnce() -> T + Send) -> Option<T> {
    let mut thread = std::thread::Builder::new();
    if let Some(name) = std::thread::current().name() {
        thread = thread.name(name.to_string());
    }
    std::thread::scope(|scope| {
        thread
            .spawn_scoped(scope, || own_network().then(work))
            .expect("a thread")
            .join()
            .unwrap()
    })
}

/// Waits until `ready` holds for the service's view of recording `id`.
fn wait_for(service: &Service, id: u64, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, value) = service.call("GET", &format!("/v1/recordings/{id}"), None);
        assert_eq!(status, 200, "{value}");
        if ready(&value) {
            return value;
        }
        assert!(Instant::now() < deadline, "waited for {what}: {value}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_recording_started_stopped_and_aborted_through_the_api() {
    let scratch = Scratch::new("serve-api");
    let (a, b) = (scratch.path("a.img"), scratch.path("b.img"));
    let service = Service::start(
        &scratch,
        &[
            "--allow-target",
            &path_text(&a),
            "--allow-target",
            &path_text(&b),
        ],
    );
    // Nothing yet.
    let (status, list) = service.call("GET", "/v1/recordings", None);
    assert_eq!(status, 200);
    assert_eq!(list["recordings"], json!([]));

    // Start: paced pattern, as `nvrec record` would take it.
    let (status, started) = service.call(
        "POST",
        "/v1/recordings",
        Some(json!({
            "targets": [a, b],
            "source": "pattern",
            "seed": 5,
            "rate": "40M",
            "duration": "60s",
            "create_size": "64M",
            "ring": true,
            "label": "api-run",
        })),
    );
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_u64().unwrap();
    assert_eq!(started["label"], "api-run");
    // Once answered, the set lists it as recording: its entry and first checkpoint are
    // durable before the service says it began.
    let output = run(nvrec().args(["--json", "ls"]).arg(&a).arg(&b));
    assert!(output.status.success(), "{}", text(&output));
    let listed = json(&output);
    assert_eq!(
        listed["recordings"][0]["recording_id"], started["recording_id"],
        "{listed}"
    );
    assert_eq!(listed["recordings"][0]["state"], "recording", "{listed}");
    let running = wait_for(&service, id, "bytes recorded", |v| {
        v["bytes"].as_u64() > Some(0) && v["history"].as_array().is_some_and(|h| !h.is_empty())
    });
    assert_eq!(running["state"], "recording");
    let members = running["members"].as_array().unwrap();
    assert_eq!(members.len(), 2);
    assert!(members.iter().all(|m| m["state"] == "writing"));
    assert!(running["checkpoints"]["count"].is_u64());
    assert_eq!(running["lost"]["total_bytes"], 0);
    assert!(running["buffer"]["count"].as_u64() > Some(0));
    let (_, list) = service.call("GET", "/v1/recordings", None);
    assert_eq!(list["recordings"][0]["id"], id);

    // `nvrec status` sees it.
    let output = run(nvrec()
        .args(["status", "--socket"])
        .arg(scratch.path("s.sock")));
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("api-run"), "{}", text(&output));
    let output = run(nvrec()
        .args(["--json", "status", "--socket"])
        .arg(scratch.path("s.sock"))
        .arg(id.to_string()));
    assert_eq!(json(&output)["id"], id);

    // Stop: the CLI's Ctrl-C (flush, exit 0).
    let (status, stopped) = service.call("POST", &format!("/v1/recordings/{id}/stop"), None);
    assert_eq!(status, 200, "{stopped}");
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert_eq!(stopped["exit_code"], 0);
    let recording_id = stopped["report"]["recording_id"].as_u64().unwrap();
    // Stopping it again is refused.
    let (status, _) = service.call("POST", &format!("/v1/recordings/{id}/stop"), None);
    assert_eq!(status, 409);
    let (status, missing) = service.call("GET", "/v1/recordings/999", None);
    assert_eq!(status, 404, "{missing}");

    // A second recording, appended, aborted: the CLI's SIGTERM (exit 4).
    let (status, second) = service.call(
        "POST",
        "/v1/recordings",
        Some(json!({"targets": [a, b], "source": "pattern", "rate": "40M", "append": true, "label": "aborted"})),
    );
    assert_eq!(status, 201, "{second}");
    let second_id = second["id"].as_u64().unwrap();
    wait_for(&service, second_id, "bytes", |v| {
        v["bytes"].as_u64() > Some(0)
    });
    let (status, aborted) =
        service.call("POST", &format!("/v1/recordings/{second_id}/abort"), None);
    assert_eq!(status, 200, "{aborted}");
    assert_eq!(aborted["state"], "aborted", "{aborted}");
    assert_eq!(aborted["exit_code"], 4);

    // The volumes as `ls` shows them, and the drives (files: not NVMe, said so).
    let (status, volumes) = service.call("GET", "/v1/volumes", None);
    assert_eq!(status, 200);
    let recordings = volumes["volume_sets"][0]["recordings"].as_array().unwrap();
    assert_eq!(recordings.len(), 2, "{volumes}");
    assert_eq!(recordings[0]["name"], "api-run");
    assert_eq!(recordings[1]["state"], "aborted");
    let (status, drives) = service.call("GET", "/v1/drives", None);
    assert_eq!(status, 200);
    assert_eq!(drives["drives"][0]["nvme"], false);
    assert!(drives["drives"][0]["message"]
        .as_str()
        .unwrap()
        .contains("not an NVMe device"));

    // The same recording as one from the CLI: `verify` passes, `ls` and `replay` read it.
    let output = run(nvrec().args(["--json", "verify"]).args([&a, &b]));
    assert!(output.status.success(), "{}", text(&output));
    let replayed = scratch.path("replay.bin");
    let output = run(nvrec()
        .args([
            "replay",
            "--recording",
            &recording_id.to_string(),
            "--output",
        ])
        .arg(&replayed)
        .args([&a, &b]));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        std::fs::metadata(&replayed).unwrap().len(),
        stopped["report"]["stream_bytes"].as_u64().unwrap()
    );
}

#[test]
fn an_api_recording_replays_byte_for_byte_as_the_cli_s() {
    let scratch = Scratch::new("serve-same");
    let (a, b) = (scratch.path("a.img"), scratch.path("b.img"));
    let (c, d) = (scratch.path("c.img"), scratch.path("d.img"));
    // The CLI's recording.
    let output = run(nvrec()
        .args([
            "record", "--source", "pattern", "--seed", "9", "--size", "6M",
        ])
        .args(["--create-size", "32M", "--label", "same"])
        .args([&c, &d]));
    assert!(output.status.success(), "{}", text(&output));
    // The service's, with the same options.
    let service = Service::start(
        &scratch,
        &[
            "--allow-target",
            &path_text(&a),
            "--allow-target",
            &path_text(&b),
        ],
    );
    let (status, started) = service.call(
        "POST",
        "/v1/recordings",
        Some(
            json!({"targets": [a, b], "source": "pattern", "seed": 9, "size": "6M",
                    "create_size": "32M", "label": "same"}),
        ),
    );
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_u64().unwrap();
    let ended = wait_for(&service, id, "the end", |v| v.get("exit_code").is_some());
    assert_eq!(ended["state"], "complete", "{ended}");
    for targets in [[&a, &b], [&c, &d]] {
        let output = run(nvrec().arg("verify").args(targets));
        assert!(output.status.success(), "{}", text(&output));
    }
    let replay = |targets: [&PathBuf; 2], name: &str| {
        let out = scratch.path(name);
        let output = run(nvrec().args(["replay", "--output"]).arg(&out).args(targets));
        assert!(output.status.success(), "{}", text(&output));
        std::fs::read(out).unwrap()
    };
    let from_api = replay([&a, &b], "api.bin");
    let from_cli = replay([&c, &d], "cli.bin");
    assert_eq!(from_api.len(), 6 << 20);
    assert!(
        from_api == from_cli,
        "the API's recording differs from the CLI's"
    );
}

#[test]
fn a_mark_taken_and_released_through_the_api_is_kept_then_given_back() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let scratch = Scratch::new("serve-marks");
    let target = scratch.path("ring.img");
    let service = Service::start(&scratch, &["--allow-target", &path_text(&target)]);
    let (status, started) = service.call(
        "POST",
        "/v1/recordings",
        Some(
            json!({"targets": [target], "source": "pattern", "ring": true, "rate": "40MB/s",
                    "duration": "4s", "create_size": "64M", "sync_interval": "100ms"}),
        ),
    );
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_u64().unwrap();
    wait_for(&service, id, "its first second", |v| {
        v["bytes"].as_u64().unwrap_or(0) > 40_000_000
    });
    let marks = format!("/v1/recordings/{id}/marks");
    // A signal to the service is not a recording's: refused.
    let (status, refused) = service.call(
        "POST",
        "/v1/recordings",
        Some(
            json!({"targets": [target], "source": "pattern", "ring": true,
                    "mark_on_signal": true}),
        ),
    );
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("/marks"),
        "{refused}"
    );
    // Bad input: 400, nothing taken.
    let (status, refused) = service.call("POST", &marks, Some(json!({"before": "soon"})));
    assert_eq!(status, 400, "{refused}");
    let (status, refused) = service.call("POST", &marks, Some(json!({"before": "10m"})));
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("needs"),
        "{refused}"
    );
    let (status, taken) = service.call(
        "POST",
        &marks,
        Some(json!({"before": "200ms", "after": "200ms", "label": "api"})),
    );
    assert_eq!(status, 200, "{taken}");
    assert_eq!(taken["mark_id"], 2, "{taken}");
    assert_eq!(taken["label"], "api", "{taken}");
    // Its after-window over, the set lists it kept.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = json(&run(nvrec().args(["--json", "ls"]).arg(&target)));
        if listed["marks"][0]["state"] == "kept" {
            break;
        }
        assert!(Instant::now() < deadline, "never kept: {listed}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, released) = service.call("POST", &format!("{marks}/2/release"), None);
    assert_eq!(status, 200, "{released}");
    assert_eq!(released["released"], true, "{released}");
    let ended = wait_for(&service, id, "the end", |v| v.get("exit_code").is_some());
    let (status, late) = service.call("POST", &marks, Some(json!({})));
    assert_eq!(status, 409, "{late} after {ended}");
    let listed = run(nvrec().args(["--json", "ls"]).arg(&target));
    let listed = json(&listed);
    assert_eq!(listed["marks"][0]["state"], "released", "{listed}");
    assert_eq!(listed["marks"][0]["label"], "api", "{listed}");
}

#[test]
fn targets_not_allowed_are_refused_and_nothing_is_written() {
    let scratch = Scratch::new("serve-refuse");
    let allowed = scratch.path("allowed.img");
    let other = scratch.path("other.img");
    std::fs::write(&other, vec![0x5a; 1 << 20]).unwrap();
    let service = Service::start(&scratch, &["--allow-target", &path_text(&allowed)]);
    for targets in [
        vec![other.clone()],
        vec![allowed.clone(), other.clone()],
        vec![scratch.path("new.img")],
    ] {
        let (status, refused) = service.call(
            "POST",
            "/v1/recordings",
            Some(json!({"targets": targets, "source": "pattern", "size": "1M", "create_size": "16M", "overwrite": true})),
        );
        assert_eq!(status, 403, "{refused}");
        assert!(
            refused["error"]
                .as_str()
                .unwrap()
                .contains("is not a target of this service"),
            "{refused}"
        );
    }
    // Nothing happened: no file created, the other file untouched, no recording listed.
    assert!(!allowed.exists());
    assert!(!scratch.path("new.img").exists());
    assert_eq!(std::fs::read(&other).unwrap(), vec![0x5a; 1 << 20]);
    let (_, list) = service.call("GET", "/v1/recordings", None);
    assert_eq!(list["recordings"], json!([]));
    // The same target under another name is the allowed one.
    let (status, _) = service.call(
        "POST",
        "/v1/recordings",
        Some(
            json!({"targets": [scratch.0.join(".").join("allowed.img")], "source": "pattern",
                    "size": "1M", "create_size": "16M"}),
        ),
    );
    assert_eq!(status, 201);

    // Bad requests: the CLI's message, 400, nothing started.
    for (body, says) in [
        (
            json!({"targets": [allowed], "source": "pattern", "size": "0"}),
            "--size 0 records nothing",
        ),
        (
            json!({"targets": [allowed], "source": "pattern", "colour": "red"}),
            "unexpected argument '--colour'",
        ),
        (
            json!({"targets": [allowed], "source": "pattern", "chunk_size": "6K"}),
            "a multiple of 4 KiB from 8 KiB to 64 MiB",
        ),
        (json!({"targets": [allowed]}), "no stdin"),
        (json!(["not", "an", "object"]), "JSON object"),
    ] {
        let (status, refused) = service.call("POST", "/v1/recordings", Some(body.clone()));
        assert_eq!(status, 400, "{body}: {refused}");
        assert!(
            refused["error"].as_str().unwrap().contains(says),
            "{body}: {refused}"
        );
    }
    // A file as the source would copy it onto a target: refused.
    let (status, refused) = service.call(
        "POST",
        "/v1/recordings",
        Some(json!({"targets": [allowed], "source": path_text(&other)})),
    );
    assert_eq!(status, 403, "{refused}");
    let (_, list) = service.call("GET", "/v1/recordings", None);
    assert_eq!(list["recordings"].as_array().unwrap().len(), 1);
}

/// Every option of `nvrec record`, as `record --help` lists it, and whether it names a path
/// (a file the service could be made to read or write). A new option fails
/// `every_path_option_of_record_is_refused_or_inline_through_the_api` until it is classed
/// here and, if it names a path, tried there.
const RECORD_OPTIONS: &[(&str, bool)] = &[
    ("TARGETS", true),
    ("source", true),
    ("filter-bpf", true),
    ("capture-threads", false),
    ("snaplen", false),
    ("seed", false),
    ("size", false),
    ("duration", false),
    ("rate", false),
    ("chunk-size", false),
    ("io-size", false),
    ("queue-depth", false),
    ("buffer", false),
    ("stripe", false),
    ("ring", false),
    ("trim", false),
    ("usable", false),
    ("append", false),
    // An archive's URL: a directory (file://) is refused, as every path is.
    ("reclaim", true),
    ("keep", false),
    // Marks (format 1.7): a share, a signal, an address to listen at, two durations.
    ("max-marked", false),
    ("mark-on-signal", false),
    ("mark-udp", false),
    ("mark-before", false),
    ("mark-after", false),
    // Whether a recording of packets indexes its flows (format 1.9): on or off.
    ("flow-index", false),
    ("overwrite", false),
    ("label", false),
    ("sync-interval", false),
    // A size; what it creates are targets, which the allowed list covers.
    ("create-size", false),
    ("engine", false),
    ("on-member-failure", false),
    ("member-timeout", false),
    ("force", false),
    // What a byte stream's samples are, kept in the entry for a SigMF export.
    ("datatype", false),
    ("sample-rate", false),
    ("center-freq", false),
    ("meta", false),
    ("realtime", false),
    ("realtime-priority", false),
    ("health-interval", false),
    ("no-health", false),
    // The CLI's own: not options of a request.
    ("json", false),
    ("help", false),
];

/// `udp dst port PORT` over IPv4 as a classic BPF program, one `[code, jt, jf, k]` a line:
/// the EtherType, the protocol, the destination port after the IP header; accept or drop.
fn udp_port_program(port: u32) -> Vec<[i64; 4]> {
    vec![
        [40, 0, 0, 12],
        [21, 0, 6, 0x0800],
        [48, 0, 0, 23],
        [21, 0, 4, 17],
        [177, 0, 0, 14],
        [72, 0, 0, 16],
        [21, 0, 1, i64::from(port)],
        [6, 0, 0, 262144],
        [6, 0, 0, 0],
    ]
}

/// The same program as `tcpdump -ddd` prints it: the count, then one instruction a line.
fn ddd_text(program: &[[i64; 4]]) -> String {
    let mut text = format!("{}\n", program.len());
    for [code, jt, jf, k] in program {
        text.push_str(&format!("{code} {jt} {jf} {k}\n"));
    }
    text
}

/// The audit of `record`'s options through the API: each that names a path (the targets,
/// `source`, `filter_bpf`) is refused with nothing created and nothing of any file in the
/// answer, or, for the capture filter, taken inline only. `filter_bpf` once named a file the
/// service read (answering 400 with `/etc/shadow`'s first line): now it is the program
/// itself, as tcpdump's text or a list of instructions, and a path is refused unread. Where
/// this thread may have a network of its own, both inline forms filter a real capture of
/// the loopback through the service.
#[test]
fn every_path_option_of_record_is_refused_or_inline_through_the_api() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    // Every option `record` has is classed above.
    let help = run(nvrec().args(["record", "--help"]));
    assert!(help.status.success(), "{}", text(&help));
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let mut listed: Vec<String> = help
        .lines()
        .filter_map(|line| {
            let option = line
                .strip_prefix("      --")
                .or_else(|| line.strip_prefix("  -h, --"))?;
            Some(option.split([' ', ',']).next()?.to_string())
        })
        .collect();
    if help.lines().any(|line| line.trim() == "<TARGETS>...") {
        listed.push("TARGETS".into());
    }
    listed.sort();
    let mut classed: Vec<String> = RECORD_OPTIONS.iter().map(|(o, _)| o.to_string()).collect();
    classed.sort();
    assert_eq!(
        listed, classed,
        "class every option of `nvrec record` in RECORD_OPTIONS (does it name a path?), and try each that does here"
    );

    let scratch = Scratch::new("serve-paths");
    let allowed = scratch.path("allowed.img");
    // A file with a first line like /etc/shadow's, which no answer may show.
    let secret = scratch.path("secret");
    let secret_text = "root:$6$SECRET-SALT$SECRET-HASH:19000:0:99999:7:::\nsecond SECRET line\n";
    std::fs::write(&secret, secret_text).unwrap();
    let service = Service::start(&scratch, &["--allow-target", &path_text(&allowed)]);
    let capture = |extra: Value| -> Value {
        let mut body = json!({"targets": [allowed], "source": "capture:lo", "create_size": "16M"});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        body
    };
    let shadow = "/etc/shadow";
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        // The targets: only those the service was started with.
        (
            "a target that is a file it was not given",
            json!({"targets": [secret], "source": "pattern", "size": "1M", "create_size": "16M", "overwrite": true}),
            403,
            "is not a target of this service",
        ),
        (
            "/etc/shadow as a target",
            json!({"targets": [shadow], "source": "pattern", "size": "1M", "force": true, "overwrite": true}),
            403,
            "is not a target of this service",
        ),
        (
            "a new file as a target",
            json!({"targets": [scratch.path("new.img")], "source": "pattern", "size": "1M", "create_size": "16M"}),
            403,
            "is not a target of this service",
        ),
        // The source: never a file.
        (
            "a file as the source",
            json!({"targets": [allowed], "source": secret, "create_size": "16M"}),
            403,
            "reads no files",
        ),
        (
            "/etc/shadow as the source",
            json!({"targets": [allowed], "source": shadow, "create_size": "16M"}),
            403,
            "reads no files",
        ),
        // The capture filter: the program itself, never a path.
        (
            "filter_bpf naming /etc/shadow",
            capture(json!({"filter_bpf": shadow})),
            400,
            "never a file",
        ),
        (
            "filter_bpf naming a file",
            capture(json!({"filter_bpf": secret})),
            400,
            "never a file",
        ),
        (
            "filter-bpf naming /etc/shadow",
            capture(json!({"filter-bpf": shadow})),
            400,
            "never a file",
        ),
        (
            "filter_bpf naming a relative path",
            capture(json!({"filter_bpf": "udp5000.bpf"})),
            400,
            "never a file",
        ),
        (
            "filter_bpf as an object naming a file",
            capture(json!({"filter_bpf": {"file": shadow}})),
            400,
            "never a file",
        ),
        (
            "filter_bpf as a list naming a file",
            capture(json!({"filter_bpf": [shadow]})),
            400,
            "is not [code, jt, jf, k]",
        ),
        (
            "a key that carries --filter-bpf=/etc/shadow",
            capture(json!({"filter-bpf=/etc/shadow": true})),
            400,
            "is not the name of an option",
        ),
        // The archive retention asks: an object store, never a directory.
        (
            "reclaim archived= naming a directory",
            json!({"targets": [allowed], "source": "pattern", "size": "1M", "create_size": "16M",
                   "append": true, "reclaim": format!("archived=file://{}", scratch.0.display())}),
            403,
            "reads no files",
        ),
        (
            "reclaim archived= naming /etc",
            json!({"targets": [allowed], "source": "pattern", "size": "1M", "append": true,
                   "reclaim": "archived=file:///etc"}),
            403,
            "reads no files",
        ),
        (
            "filter_bpf naming /etc/shadow with the pattern source",
            json!({"targets": [allowed], "source": "pattern", "size": "1M", "create_size": "16M", "filter_bpf": shadow}),
            400,
            "never a file",
        ),
    ];
    let tried: Vec<&str> = cases
        .iter()
        .flat_map(|(_, body, _, _)| body.as_object().unwrap().keys())
        .map(|key| key.split('=').next().unwrap())
        .map(|key| match key {
            "targets" => "TARGETS",
            "filter_bpf" => "filter-bpf",
            other => other,
        })
        .collect();
    for (option, names_a_path) in RECORD_OPTIONS {
        if *names_a_path {
            assert!(tried.contains(option), "{option} names a path: try it here");
        }
    }
    for (what, body, status, says) in &cases {
        let (got, answer) = service.call("POST", "/v1/recordings", Some(body.clone()));
        assert_eq!(got, *status, "{what}: {answer}");
        let message = answer["error"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{what}: {answer}");
        for read in ["root:", "SECRET", "second"] {
            assert!(
                !answer.to_string().contains(read),
                "{what}: the answer quotes a file: {answer}"
            );
        }
    }
    // Nothing happened: nothing created, the file untouched, no recording listed.
    assert!(!allowed.exists(), "a refused request created the target");
    assert!(!scratch.path("new.img").exists());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), secret_text);
    let (_, list) = service.call("GET", "/v1/recordings", None);
    assert_eq!(list["recordings"], json!([]));

    // Inline, either form passes the checks: what fails is opening an interface that does
    // not exist, after the filter was taken. A bad program is refused with what is wrong.
    let program = udp_port_program(5000);
    for filter in [json!(ddd_text(&program)), json!(program)] {
        let body = capture(json!({"source": "capture:nvrec-none0", "filter_bpf": filter}));
        let (status, answer) = service.call("POST", "/v1/recordings", Some(body));
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("capture:nvrec-none0: no such network interface"),
            "{answer}"
        );
    }
    for (filter, says) in [
        (
            json!([[6, 0, 0]]),
            "filter_bpf: instruction 0 is not [code, jt, jf, k]",
        ),
        (json!([]), "filter_bpf: 0 instructions"),
        (
            json!("2\n6 0 0 0\n"),
            "filter_bpf: line 1 says 2 instructions",
        ),
        (json!(ddd_text(&program)), "are for --source capture:IFACE"),
    ] {
        let mut body = capture(json!({ "filter_bpf": filter }));
        if says.contains("capture:IFACE") {
            body["source"] = json!("pattern");
        }
        let (status, answer) = service.call("POST", "/v1/recordings", Some(body));
        assert_eq!(status, 400, "{answer}");
        assert!(answer["error"].as_str().unwrap().contains(says), "{answer}");
    }
    assert!(!allowed.exists(), "a refused request created the target");
    drop(service);

    // A real capture of this thread's own loopback through the service, filtered by each
    // form: only the port it names is kept.
    in_own_network(|| {
        let scratch = Scratch::new("serve-paths-capture");
        let target = scratch.path("c.img");
        let service = Service::start(&scratch, &["--allow-target", &path_text(&target)]);
        let receivers: Vec<std::net::UdpSocket> = [5000, 5001]
            .iter()
            .map(|port| std::net::UdpSocket::bind(("127.0.0.1", *port)).unwrap())
            .collect();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        const COUNT: u64 = 200;
        let forms = [
            (5000, json!(ddd_text(&udp_port_program(5000)))),
            (5001, json!(udp_port_program(5001))),
        ];
        for (round, (port, filter)) in forms.into_iter().enumerate() {
            let (status, started) = service.call(
                "POST",
                "/v1/recordings",
                Some(json!({"targets": [target], "source": "capture:lo",
                            "filter_bpf": filter, "create_size": "64M",
                            "append": round > 0, "label": format!("port {port}")})),
            );
            assert_eq!(status, 201, "{started}");
            let id = started["id"].as_u64().unwrap();
            // Frames before the capture runs are not the recording's.
            wait_for_capture();
            // As many to the other port, which the filter drops.
            for sequence in 0..COUNT {
                for receiver in &receivers {
                    let datagram = format!("{sequence:>100}");
                    sender
                        .send_to(datagram.as_bytes(), receiver.local_addr().unwrap())
                        .unwrap();
                }
            }
            // Then one more to the port, sent last: once it is counted, every frame sent
            // before it has been seen by the filter (the loopback keeps their order).
            sender.send_to(b"last", ("127.0.0.1", port)).unwrap();
            // The loopback shows each frame twice (sent, received).
            let seen = |v: &Value| {
                v["network"]["datagrams"].as_u64().unwrap_or(0)
                    + v["network"]["dropped_socket"].as_u64().unwrap_or(0)
            };
            wait_for(&service, id, "the frames of the port", |v| {
                seen(v) >= 2 * (COUNT + 1)
            });
            let (status, stopped) =
                service.call("POST", &format!("/v1/recordings/{id}/stop"), None);
            assert_eq!(status, 200, "{stopped}");
            assert_eq!(stopped["exit_code"], 0, "{stopped}");
            assert_eq!(
                seen(&stopped),
                2 * (COUNT + 1),
                "port {port}: only its frames pass: {stopped}"
            );
        }
        let output = run(nvrec().arg("verify").arg(&target));
        assert!(output.status.success(), "{}", text(&output));
    });
}

#[test]
fn a_missing_or_wrong_token_is_refused() {
    let scratch = Scratch::new("serve-token");
    let target = scratch.path("t.img");
    let token_file = scratch.path("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let service = Service::start(
        &scratch,
        &[
            "--allow-target",
            &path_text(&target),
            "--token-file",
            &path_text(&token_file),
        ],
    );
    let body =
        json!({"targets": [target], "source": "pattern", "size": "1M", "create_size": "16M"});
    for token in [None, Some("wrong"), Some("s3cret-token2"), Some("")] {
        for (method, path, body) in [
            ("GET", "/v1/recordings", None),
            ("GET", "/metrics", None),
            ("GET", "/v1/drives", None),
            ("POST", "/v1/recordings", Some(body.clone())),
        ] {
            let (status, refused) = service.call_with_token(method, path, body, token);
            assert_eq!(status, 401, "{method} {path} with {token:?}: {refused}");
            assert!(refused["error"].as_str().unwrap().contains("token"));
        }
    }
    assert!(!target.exists(), "a refused request wrote the target");
    let (status, list) =
        service.call_with_token("GET", "/v1/recordings", None, Some("s3cret-token"));
    assert_eq!(status, 200);
    assert_eq!(list["recordings"], json!([]));
    let (status, started) =
        service.call_with_token("POST", "/v1/recordings", Some(body), Some("s3cret-token"));
    assert_eq!(status, 201, "{started}");
    // The dashboard's page holds no data and needs no token; its requests do.
    let (status, page) = service.call_raw("GET", "/", None, None, None);
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&page).contains("<html"));
    // `nvrec status` sends the token from its file.
    let output = run(nvrec()
        .args(["--json", "status", "--socket"])
        .arg(scratch.path("s.sock"))
        .arg("--token-file")
        .arg(&token_file));
    assert!(output.status.success(), "{}", text(&output));
    let output = run(nvrec()
        .args(["status", "--socket"])
        .arg(scratch.path("s.sock")));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("401"), "{}", text(&output));
}

/// `nvrec serve ARGS` refused at start: exit 2, a message that names everything `wanted`,
/// and nothing listened on.
fn assert_refused_at_start(args: &[&str], wanted: &[&str]) {
    let mut child = nvrec()
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nvrec serve starts");
    // A service that was not refused would serve on: it is killed, and the test fails.
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!("{args:?} was not refused: {}", text(&output));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let said = text(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {said}");
    for wanted in wanted {
        assert!(said.contains(wanted), "{args:?}: no {wanted:?} in {said}");
    }
    assert!(!said.contains("listening on"), "{args:?}: {said}");
}

/// `--json` shapes a command's report; the service prints none (its API answers in JSON),
/// so it is refused, not ignored, wherever it stands on the line.
#[test]
fn json_is_refused_by_the_service_which_prints_no_report() {
    let scratch = Scratch::new("serve-json");
    let socket = scratch.path("nvrec.sock");
    let target = path_text(&scratch.path("t.img"));
    assert_refused_at_start(
        &[
            "--json",
            "--socket",
            &path_text(&socket),
            "--allow-target",
            &target,
        ],
        &["--json means nothing", "nvrec --json status"],
    );
    assert!(!socket.exists(), "a refused service made its socket");
    let output = run(nvrec()
        .args(["--json", "serve", "--socket"])
        .arg(&socket)
        .args(["--allow-target", &target]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert_eq!(json(&output)["exit_code"], 2);
}

#[test]
fn a_tcp_listener_needs_a_token_and_off_loopback_tls() {
    let scratch = Scratch::new("serve-door");
    let target = scratch.path("t.img");
    let target = path_text(&target);
    let token_file = scratch.path("token");
    std::fs::write(&token_file, "door-token\n").unwrap();
    let token_file = path_text(&token_file);
    // Without a token, on loopback too: every user of the machine can reach a TCP port.
    for (address, wanted) in [
        ("127.0.0.1:0", &["--token-file"][..]),
        ("[::1]:0", &["--token-file"]),
        // Off loopback, TLS is asked for in the same breath.
        ("0.0.0.0:0", &["--token-file", "--tls-cert", "--tls-key"]),
        (
            "10.1.2.3:8470",
            &["--token-file", "--tls-cert", "--tls-key"],
        ),
    ] {
        assert_refused_at_start(&["--listen", address, "--allow-target", &target], wanted);
    }
    // With a token, off loopback, but in clear text.
    for address in ["0.0.0.0:0", "[::]:0", "10.1.2.3:8470"] {
        assert_refused_at_start(
            &[
                "--listen",
                address,
                "--token-file",
                &token_file,
                "--allow-target",
                &target,
            ],
            &["--tls-cert", "--tls-key", "clear text"],
        );
    }
    // A certificate needs its key, and TLS needs TCP.
    assert_refused_at_start(
        &[
            "--listen",
            "0.0.0.0:0",
            "--token-file",
            &token_file,
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--allow-target",
            &target,
        ],
        &["--tls-key"],
    );
    assert_refused_at_start(
        &[
            "--socket",
            &path_text(&scratch.path("s.sock")),
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--tls-key",
            "/nonexistent/key.pem",
            "--allow-target",
            &target,
        ],
        &["--socket", "--tls-cert"],
    );
    let output = run(nvrec().args(["serve", "--socket", "/tmp/x.sock"]));
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(!Path::new(&target).exists());
    assert!(!scratch.path("s.sock").exists());

    // Files that are no certificate or key, or that do not belong together.
    let Some(certificates) = Certificates::make(&scratch) else {
        return;
    };
    let (cert, key) = (path_text(&certificates.cert), path_text(&certificates.key));
    let ca_key = path_text(&certificates.ca_key);
    let missing = path_text(&scratch.path("missing.pem"));
    for (cert, key, wanted) in [
        (missing.as_str(), key.as_str(), "No such file"),
        (cert.as_str(), missing.as_str(), "No such file"),
        (key.as_str(), key.as_str(), "no certificate in it"),
        (cert.as_str(), cert.as_str(), "no private key in it"),
        (token_file.as_str(), key.as_str(), "no certificate in it"),
        (
            cert.as_str(),
            ca_key.as_str(),
            "the key is not the certificate's",
        ),
    ] {
        assert_refused_at_start(
            &[
                "--listen",
                "0.0.0.0:0",
                "--token-file",
                &token_file,
                "--tls-cert",
                cert,
                "--tls-key",
                key,
                "--allow-target",
                &target,
            ],
            &[wanted],
        );
    }
    assert!(!Path::new(&target).exists());
}

/// A CA and a certificate it signed for 127.0.0.1 and localhost, made with the openssl
/// command in a scratch directory.
struct Certificates {
    ca: PathBuf,
    ca_key: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Certificates {
    /// `None`, the skip reported, without the openssl command.
    fn make(scratch: &Scratch) -> Option<Certificates> {
        if Command::new("openssl").arg("version").output().is_err() {
            nvrec_testkit::skip(
                nvrec_testkit::OPENSSL,
                "openssl not found: no certificate for the TLS listener",
            );
            return None;
        }
        let certificates = Certificates {
            ca: scratch.path("ca.pem"),
            ca_key: scratch.path("ca.key"),
            cert: scratch.path("cert.pem"),
            key: scratch.path("key.pem"),
        };
        let request = scratch.path("cert.csr");
        let extensions = scratch.path("cert.ext");
        std::fs::write(
            &extensions,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        let openssl = |command: &mut Command| {
            let output = run(command);
            assert!(output.status.success(), "{command:?}: {}", text(&output));
        };
        let new_p256_key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            Command::new("openssl")
                .args(["req", "-x509", "-days", "2", "-subj", "/CN=nvrec test CA"])
                .args(new_p256_key)
                .arg("-keyout")
                .arg(&certificates.ca_key)
                .arg("-out")
                .arg(&certificates.ca),
        );
        openssl(
            Command::new("openssl")
                .args(["req", "-subj", "/CN=localhost"])
                .args(new_p256_key)
                .arg("-keyout")
                .arg(&certificates.key)
                .arg("-out")
                .arg(&request),
        );
        openssl(
            Command::new("openssl")
                .args(["x509", "-req", "-days", "2", "-set_serial", "1"])
                .arg("-in")
                .arg(&request)
                .arg("-CA")
                .arg(&certificates.ca)
                .arg("-CAkey")
                .arg(&certificates.ca_key)
                .arg("-extfile")
                .arg(&extensions)
                .arg("-out")
                .arg(&certificates.cert),
        );
        Some(certificates)
    }
}

/// What curl got: its exit status, the HTTP status (0 where none came), the body, and what
/// it said on stderr.
struct Curled {
    exit: i32,
    status: u16,
    body: String,
    said: String,
}

impl Curled {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| Value::String(self.body.clone()))
    }
}

/// Whether curl runs here; false, the skip reported, where it does not.
fn curl_present() -> bool {
    if Command::new("curl").arg("--version").output().is_err() {
        nvrec_testkit::skip(nvrec_testkit::CURL, "curl not found: no client for TCP");
        return false;
    }
    true
}

/// `METHOD BASE/PATH` with curl, carrying `token` (as `Authorization: Bearer`) and `body`
/// (JSON) when given, and `extra` options.
fn curl(
    base: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
    extra: &[&str],
) -> Curled {
    let mut command = Command::new("curl");
    command
        .args([
            "-sS",
            "--max-time",
            "60",
            "-w",
            "\n%{http_code}",
            "-X",
            method,
        ])
        .args(extra);
    if let Some(token) = token {
        command
            .arg("-H")
            .arg(format!("Authorization: Bearer {token}"));
    }
    if let Some(body) = body {
        command
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(body.to_string());
    }
    let output = run(command.arg(format!("{base}{path}")));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    Curled {
        exit: output.status.code().unwrap_or(-1),
        status: status.trim().parse().unwrap_or(0),
        body: body.to_string(),
        said: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn curl_without_the_right_token_is_refused_on_loopback() {
    if !curl_present() {
        return;
    }
    let scratch = Scratch::new("serve-curl-token");
    let target = scratch.path("t.img");
    let token_file = scratch.path("token");
    std::fs::write(&token_file, "curl-token\n").unwrap();
    in_own_network(|| {
        let service = Service::start(
            &scratch,
            &[
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &path_text(&token_file),
                "--allow-target",
                &path_text(&target),
            ],
        );
        let base = format!("http://127.0.0.1:{}", service.port());
        let body =
            json!({"targets": [target], "source": "pattern", "size": "1M", "create_size": "16M"});
        for token in [None, Some("wrong"), Some("curl-token2"), Some("")] {
            for (method, path, body) in [
                ("GET", "/v1/recordings", None),
                ("GET", "/metrics", None),
                ("POST", "/v1/recordings", Some(&body)),
            ] {
                let curled = curl(&base, method, path, token, body, &[]);
                assert_eq!(
                    curled.status, 401,
                    "{method} {path} with {token:?}: {} {}",
                    curled.body, curled.said
                );
                assert!(curled.json()["error"].as_str().unwrap().contains("token"));
            }
        }
        // Nothing was started, nothing written.
        assert!(!target.exists(), "a refused request wrote the target");
        let listed = curl(
            &base,
            "GET",
            "/v1/recordings",
            Some("curl-token"),
            None,
            &[],
        );
        assert_eq!(listed.status, 200, "{} {}", listed.body, listed.said);
        assert_eq!(listed.json()["recordings"], json!([]));
        let started = curl(
            &base,
            "POST",
            "/v1/recordings",
            Some("curl-token"),
            Some(&body),
            &[],
        );
        assert_eq!(started.status, 201, "{} {}", started.body, started.said);
        assert!(target.exists());
    });
}

#[test]
fn a_tls_listener_refuses_plain_http_and_answers_curl_that_trusts_its_ca() {
    if !curl_present() {
        return;
    }
    let scratch = Scratch::new("serve-tls");
    let Some(certificates) = Certificates::make(&scratch) else {
        return;
    };
    let token = "tls-token";
    let token_file = scratch.path("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let ca = path_text(&certificates.ca);
    in_own_network(|| {
        // Off loopback TLS is required; on loopback it is taken when given.
        for (listen, name) in [("0.0.0.0:0", "any"), ("127.0.0.1:0", "loopback")] {
            let target = scratch.path(&format!("{name}.img"));
            let service = Service::start(
                &scratch,
                &[
                    "--listen",
                    listen,
                    "--token-file",
                    &path_text(&token_file),
                    "--tls-cert",
                    &path_text(&certificates.cert),
                    "--tls-key",
                    &path_text(&certificates.key),
                    "--allow-target",
                    &path_text(&target),
                ],
            );
            assert!(
                matches!(service.endpoint, Endpoint::Https(_)),
                "{listen}: {}",
                service.stderr()
            );
            let port = service.port();
            let plain = format!("http://127.0.0.1:{port}");
            let https = format!("https://127.0.0.1:{port}");
            let trusted = ["--cacert", ca.as_str()];
            let body = json!({"targets": [target], "source": "pattern", "size": "1M",
                              "create_size": "16M"});

            // Plain HTTP, with the right token, asking for a recording: no handshake, so no
            // request reaches the API.
            let curled = curl(
                &plain,
                "POST",
                "/v1/recordings",
                Some(token),
                Some(&body),
                &[],
            );
            assert_ne!(curled.exit, 0, "{listen}: plain HTTP got {}", curled.body);
            assert_eq!(
                curled.status, 0,
                "{listen}: {} {}",
                curled.body, curled.said
            );
            service.wait_for_stderr("did not speak TLS (plain HTTP to an https:// port?)");
            // A client that does not trust the certificate ends the handshake itself.
            let curled = curl(
                &https,
                "POST",
                "/v1/recordings",
                Some(token),
                Some(&body),
                &[],
            );
            assert_eq!(curled.exit, 60, "{listen}: {} {}", curled.body, curled.said);
            // Trusting it, without the token or with a wrong one: 401.
            for wrong in [None, Some("wrong")] {
                for (method, body) in [("GET", None), ("POST", Some(&body))] {
                    let curled = curl(&https, method, "/v1/recordings", wrong, body, &trusted);
                    assert_eq!(
                        curled.status, 401,
                        "{listen}: {method} with {wrong:?}: {} {}",
                        curled.body, curled.said
                    );
                }
            }
            // Nothing was started, nothing written.
            assert!(
                !target.exists(),
                "{listen}: a refused request wrote the target"
            );
            let listed = curl(&https, "GET", "/v1/recordings", Some(token), None, &trusted);
            assert_eq!(
                listed.status, 200,
                "{listen}: {} {}",
                listed.body, listed.said
            );
            assert_eq!(listed.json()["recordings"], json!([]), "{listen}");
            // With both, by the certificate's other name too: a recording starts.
            let by_name = format!("https://localhost:{port}");
            let listed = curl(
                &by_name,
                "GET",
                "/v1/recordings",
                Some(token),
                None,
                &trusted,
            );
            assert_eq!(
                listed.status, 200,
                "{listen}: {} {}",
                listed.body, listed.said
            );
            let started = curl(
                &https,
                "POST",
                "/v1/recordings",
                Some(token),
                Some(&body),
                &trusted,
            );
            assert_eq!(
                started.status, 201,
                "{listen}: {} {}",
                started.body, started.said
            );
            assert!(target.exists());

            // `nvrec status` over TLS: it trusts the CA it is given and carries the token.
            let output = run(nvrec()
                .args([
                    "--json",
                    "status",
                    "--url",
                    &https,
                    "--cacert",
                    &ca,
                    "--token-file",
                ])
                .arg(&token_file));
            assert!(output.status.success(), "{listen}: {}", text(&output));
            let recordings = json(&output)["recordings"].as_array().unwrap().len();
            assert_eq!(recordings, 1, "{listen}: {}", text(&output));
            // Not trusting the certificate, or in plain HTTP, it gets nothing.
            for url in [https.as_str(), plain.as_str()] {
                let output = run(nvrec()
                    .args(["status", "--url", url, "--token-file"])
                    .arg(&token_file));
                assert!(
                    !output.status.success(),
                    "{listen} {url}: {}",
                    text(&output)
                );
            }
        }
    });
}

#[test]
fn the_service_survives_clients_that_go_away_and_sigterm_stops_every_recording() {
    let scratch = Scratch::new("serve-term");
    let (a, b) = (scratch.path("a.img"), scratch.path("b.img"));
    let mut service = Service::start(
        &scratch,
        &[
            "--allow-target",
            &path_text(&a),
            "--allow-target",
            &path_text(&b),
        ],
    );
    let socket = scratch.path("s.sock");
    // A client that sends half a request and goes away.
    {
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream
            .write_all(
                b"POST /v1/recordings HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{\"targ",
            )
            .unwrap();
    }
    // One that starts a recording and leaves before it has read the answer.
    let body = json!({"targets": [a], "source": "pattern", "rate": "20M", "create_size": "64M",
                      "ring": true, "label": "left"})
    .to_string();
    let mut leaving = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    write!(
        leaving,
        "POST /v1/recordings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // The service still answers others, and the recording runs; then the client leaves.
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        let (status, list) = service.call("GET", "/v1/recordings", None);
        assert_eq!(status, 200);
        if let Some(first) = list["recordings"].as_array().unwrap().first() {
            if first["bytes"].as_u64() > Some(0) {
                break first.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no recording from the client that left: {list}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(leaving);
    let id = first["id"].as_u64().unwrap();
    let before = first["bytes"].as_u64().unwrap();
    wait_for(&service, id, "more bytes after the client left", |v| {
        v["state"] == "recording" && v["bytes"].as_u64() > Some(before)
    });
    assert_eq!(first["label"], "left");
    // A second recording, on the other target, with no end of its own.
    let (status, second) = service.call(
        "POST",
        "/v1/recordings",
        Some(json!({"targets": [b], "source": "pattern", "rate": "20M", "create_size": "64M", "ring": true})),
    );
    assert_eq!(status, 201, "{second}");
    wait_for(&service, second["id"].as_u64().unwrap(), "bytes", |v| {
        v["bytes"].as_u64() > Some(0)
    });
    // SIGTERM: both stop cleanly (flushed, closed entries), and the service exits 0.
    let status = service.terminate();
    assert!(status.success(), "{status:?}: {}", service.stderr());
    assert!(!socket.exists(), "the socket is removed at exit");
    for target in [&a, &b] {
        let output = run(nvrec().args(["--json", "ls"]).arg(target));
        assert!(output.status.success(), "{}", text(&output));
        assert_eq!(
            json(&output)["recordings"][0]["state"],
            "complete (ring)",
            "{}",
            text(&output)
        );
        let output = run(nvrec().arg("verify").arg(target));
        assert!(output.status.success(), "{}", text(&output));
    }
}

#[test]
fn metrics_pass_promtool() {
    let scratch = Scratch::new("serve-metrics");
    let (a, b) = (scratch.path("a.img"), scratch.path("b.img"));
    let service = Service::start(
        &scratch,
        &[
            "--allow-target",
            &path_text(&a),
            "--allow-target",
            &path_text(&b),
        ],
    );
    let (status, started) = service.call(
        "POST",
        "/v1/recordings",
        // Members in turn, so that both have written by the first checkpoint.
        Some(
            json!({"targets": [a, b], "source": "pattern", "rate": "40M", "create_size": "64M",
                    "ring": true, "stripe": "round-robin"}),
        ),
    );
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_u64().unwrap();
    wait_for(&service, id, "writes on both members", |v| {
        v["members"]
            .as_array()
            .is_some_and(|m| m.iter().all(|m| m["written_bytes"].as_u64() > Some(0)))
    });
    let (status, body) = service.call_raw("GET", "/metrics", None, None, None);
    assert_eq!(status, 200);
    let metrics = String::from_utf8(body).unwrap();
    let value = |name: &str, labels: &str| -> f64 {
        metrics
            .lines()
            .find(|line| line.starts_with(name) && line.contains(labels))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} {labels} in:\n{metrics}"))
    };
    for member in ["0", "1"] {
        let labels = format!("member=\"{member}\"");
        assert!(value("nvrec_member_written_bytes_total", &labels) > 0.0);
        assert!(value("nvrec_member_write_latency_seconds_count", &labels) > 0.0);
        assert!(value("nvrec_member_queue_depth_in_use", &labels) >= 0.0);
        assert_eq!(value("nvrec_member_retired", &labels), 0.0);
    }
    assert!(value("nvrec_recording_input_bytes_total", "recording=\"1\"") > 0.0);
    assert_eq!(
        value("nvrec_recording_lost_bytes_total", "cause=\"no_buffer\""),
        0.0
    );
    assert_eq!(
        value("nvrec_recording_lost_bytes_total", "cause=\"behind_rate\""),
        0.0
    );
    assert!(value("nvrec_recording_buffer_occupancy_ratio", "recording=\"1\"") <= 1.0);
    assert!(value("nvrec_recording_checkpoint_lag_seconds", "recording=\"1\"") >= 0.0);
    assert!(value("nvrec_recording_checkpoints_total", "recording=\"1\"") >= 1.0);
    // Prometheus asks for OpenMetrics and gets it.
    let (status, body) = service.call_raw(
        "GET",
        "/metrics",
        None,
        None,
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    );
    assert_eq!(status, 200);
    let openmetrics = String::from_utf8(body).unwrap();
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    assert!(openmetrics.contains("# TYPE nvrec_member_written_bytes counter"));

    let Ok(mut promtool) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        nvrec_testkit::skip(
            nvrec_testkit::PROMTOOL,
            "promtool not found: the metrics were not run through promtool check metrics",
        );
        return;
    };
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let output = promtool.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}\n{metrics}",
        text(&output)
    );
}

#[test]
fn systemd_hears_ready_and_watchdog() {
    let scratch = Scratch::new("serve-notify");
    let notify_path = scratch.path("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let target = scratch.path("t.img");
    let mut service = Service::start_with(
        &scratch,
        &["--allow-target", &path_text(&target)],
        &[
            ("NOTIFY_SOCKET", &path_text(&notify_path)),
            ("WATCHDOG_USEC", "200000"),
        ],
    );
    let mut heard = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(heard.iter().any(|m: &String| m.contains("READY=1"))
        && heard.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 2)
    {
        assert!(Instant::now() < deadline, "heard only {heard:?}");
        let mut buffer = [0u8; 4096];
        let length = notify.recv(&mut buffer).expect("a notification");
        heard.push(String::from_utf8_lossy(&buffer[..length]).into_owned());
    }
    // Ready comes first: once it is said, the service answers.
    assert!(heard[0].contains("READY=1"), "{heard:?}");
    let (status, _) = service.call("GET", "/v1/recordings", None);
    assert_eq!(status, 200);
    let status = service.terminate();
    assert!(status.success());
    let mut stopping = false;
    notify
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buffer = [0u8; 4096];
    while let Ok(length) = notify.recv(&mut buffer) {
        stopping |= String::from_utf8_lossy(&buffer[..length]).contains("STOPPING=1");
    }
    assert!(stopping, "no STOPPING=1 at SIGTERM");
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/systemd/nvrec.service");
    let unit_text = std::fs::read_to_string(&unit).unwrap();
    for line in [
        "Type=notify",
        "WatchdogSec=",
        "LimitMEMLOCK=infinity",
        "KillMode=mixed",
    ] {
        assert!(
            unit_text.contains(line),
            "{line} missing from {}",
            unit.display()
        );
    }
    let analyze = Path::new("/usr/bin/systemd-analyze");
    if !analyze.exists() {
        nvrec_testkit::skip(
            nvrec_testkit::SYSTEMD_ANALYZE,
            format_args!("{} not found", analyze.display()),
        );
        return;
    }
    // The unit names /usr/bin/nvrec; verify wants the binary there, so a copy of the unit
    // points at the binary just built.
    let scratch = Scratch::new("serve-unit");
    let copy = scratch.path("nvrec.service");
    std::fs::write(
        &copy,
        unit_text.replace("/usr/bin/nvrec", env!("CARGO_BIN_EXE_nvrec")),
    )
    .unwrap();
    let output = Command::new(analyze)
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .unwrap();
    let said = text(&output);
    assert!(output.status.success(), "systemd-analyze verify: {said}");
    assert!(
        !said.contains("nvrec.service:"),
        "systemd-analyze has something to say about the unit: {said}"
    );
}

/// Chromium's output for `url` once the page has polled (`--dump-dom`), or a screenshot.
fn chromium(browser: &str, dir: &Path, url: &str, extra: &[String]) -> std::process::Output {
    Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--window-size=1280,900",
            "--virtual-time-budget=4000",
        ])
        .arg(format!("--user-data-dir={}", dir.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("running chromium")
}

#[test]
fn the_dashboard_draws_a_running_recording_in_chromium() {
    if nvrec_testkit::kept_for_full_run(SLOW) {
        return;
    }
    let Some(browser) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok())
    else {
        nvrec_testkit::skip(
            nvrec_testkit::CHROMIUM,
            "none of chromium, chromium-browser, google-chrome runs",
        );
        return;
    };
    let scratch = Scratch::new("serve-dashboard");
    let (a, b) = (scratch.path("a.img"), scratch.path("b.img"));
    // The network of this thread's own: Chromium speaks TCP, and the address is ours alone.
    let result = in_own_network(|| {
        let token_file = scratch.path("token");
        std::fs::write(&token_file, "dash-token").unwrap();
        let service = Service::start(
            &scratch,
            &[
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &path_text(&token_file),
                "--allow-target",
                &path_text(&a),
                "--allow-target",
                &path_text(&b),
            ],
        );
        let (status, started) = service.call_with_token(
            "POST",
            "/v1/recordings",
            Some(
                json!({"targets": [a, b], "source": "pattern", "rate": "30M",
                        "create_size": "64M", "ring": true, "label": "dashboard"}),
            ),
            Some("dash-token"),
        );
        assert_eq!(status, 201, "{started}");
        // A few seconds of history to draw.
        let id = started["id"].as_u64().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let path = format!("/v1/recordings/{id}");
            let (_, status) = service.call_with_token("GET", &path, None, Some("dash-token"));
            if status["history"].as_array().is_some_and(|h| h.len() >= 4) {
                break;
            }
            assert!(Instant::now() < deadline, "no history to draw: {status}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let Endpoint::Tcp(address) = &service.endpoint else {
            unreachable!()
        };
        let url = format!("http://{address}/#token=dash-token");
        let profile = scratch.path("profile");
        let dom = chromium(browser, &profile, &url, &["--dump-dom".to_string()]);
        let shot = scratch.path("dashboard.png");
        let screenshot = chromium(
            browser,
            &profile,
            &url,
            &[format!("--screenshot={}", shot.display())],
        );
        (dom, screenshot, std::fs::read(&shot).unwrap_or_default())
    });
    let Some((dom, screenshot, png)) = result else {
        return;
    };
    let dom_text = String::from_utf8_lossy(&dom.stdout).into_owned();
    assert!(dom.status.success(), "chromium: {}", text(&dom));
    // The page polled, found the recording, and drew its members' rates and buffer fill.
    let attribute = |name: &str| -> Vec<u64> {
        let key = format!("{name}=\"");
        dom_text
            .match_indices(&key)
            .filter_map(|(at, _)| {
                let rest = &dom_text[at + key.len()..];
                rest[..rest.find('"')?].parse().ok()
            })
            .collect()
    };
    assert!(
        attribute("data-polls").first() > Some(&0),
        "the page never polled: {dom_text}"
    );
    assert!(dom_text.contains("data-state=\"recording\""), "{dom_text}");
    let series = attribute("data-series");
    let points = attribute("data-points");
    assert_eq!(series.first(), Some(&2), "a line per member: {dom_text}");
    assert!(
        points.iter().all(|&p| p >= 2),
        "charts without points: {points:?}"
    );
    assert!(
        dom_text.matches("class=\"series\"").count() >= 3,
        "{dom_text}"
    );
    assert!(dom_text.contains("not an NVMe device"), "{dom_text}");
    // The screenshot: a PNG of the page, not a blank one.
    assert!(
        screenshot.status.success(),
        "chromium: {}",
        text(&screenshot)
    );
    assert!(png.starts_with(b"\x89PNG"), "no screenshot");
    assert!(
        png.len() > 20_000,
        "a near-empty screenshot: {} bytes",
        png.len()
    );
    if let Ok(dir) = std::env::var("NVREC_KEEP_DASHBOARD") {
        std::fs::write(Path::new(&dir).join("dashboard.png"), &png).unwrap();
    }
}
