//! The shared catalog: recorder nodes archiving into one PostgreSQL database
//! (`--catalog postgres://...`), a real server started by the test (initdb in a temp dir,
//! on a free port of 127.0.0.1, stopped and removed afterwards). It answers as the SQLite
//! catalog does, and is made again from the manifests alone. Skips, saying why, where no
//! PostgreSQL server is installed; `.ci/run` installs it and sets NVREC_NO_SKIP,
//! so that there a missing server fails instead.

mod common;

use common::*;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A PostgreSQL server of the test's own, removed on drop.
struct Postgres {
    scratch: Scratch,
    child: Child,
    url: String,
}

/// The directory of the server's programs: where `initdb` is on the PATH, else the newest
/// Debian cluster version's.
fn server_bin_dir() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|dir| dir.join("initdb").exists() && dir.join("postgres").exists())
    });
    on_path.or_else(|| {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
            .filter(|bin| bin.join("initdb").exists())
            .collect();
        versions.sort_by_key(|bin| {
            let version = bin
                .parent()
                .and_then(|v| v.file_name())
                .and_then(|v| v.to_str());
            version.and_then(|v| v.parse::<u32>().ok()).unwrap_or(0)
        });
        versions.pop()
    })
}

/// A command run as the `postgres` user when we are root (the server refuses to run as
/// root), else as ourselves.
fn as_server_user(program: &Path) -> Command {
    let mut command = Command::new(program);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let (uid, gid) = server_user();
        command.uid(uid).gid(gid);
    }
    command
}

/// The uid and gid of the `postgres` user.
fn server_user() -> (u32, u32) {
    let id = |flag: &str| {
        let output = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "no postgres user: {}",
            text(&output)
        );
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse::<u32>()
            .unwrap()
    };
    (id("-u"), id("-g"))
}

impl Postgres {
    fn start() -> Option<Postgres> {
        let Some(bin) = server_bin_dir() else {
            nvrec_testkit::skip(nvrec_testkit::POSTGRES, "no initdb or postgres found");
            return None;
        };
        let scratch = Scratch::new("postgres");
        let data = scratch.path("data");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let status = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&scratch.0)
                .status()
                .unwrap();
            assert!(status.success(), "chown to postgres");
        }
        let output = as_server_user(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "nvrec", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .output()
            .unwrap();
        assert!(output.status.success(), "initdb: {}", text(&output));
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(scratch.path("server.log")).unwrap();
        let child = as_server_user(&bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-k"])
            .arg(&scratch.0)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "lc_messages=C",
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let server = Postgres {
            url: format!("postgres://nvrec@127.0.0.1:{port}/postgres"),
            scratch,
            child,
        };
        server.wait_ready();
        Some(server)
    }

    /// Waits until the server says it takes connections (its log, which `-c` settings
    /// leave in English; pg_isready is not always beside the server's programs).
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let log = std::fs::read_to_string(self.scratch.path("server.log")).unwrap_or_default();
            if log.contains("ready to accept connections") {
                return;
            }
            assert!(Instant::now() < deadline, "PostgreSQL did not start: {log}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGINT: the server's fast shutdown.
        // SAFETY: kill takes a pid of our own child and a signal number.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let _ = self.child.wait();
    }
}

/// One recorder node: its drives, its archive directory and its local state.
struct Node {
    name: &'static str,
    targets: Vec<PathBuf>,
    archive: String,
    state: PathBuf,
}

impl Node {
    fn new(scratch: &Scratch, name: &'static str, data: &[&[u8]]) -> Node {
        let targets = vec![scratch.path(&format!("{name}.img"))];
        for (index, bytes) in data.iter().enumerate() {
            let label = format!("{name}-{index}");
            let mut extra = vec!["--label", &label, "--create-size", "64M"];
            if index > 0 {
                extra = vec!["--label", &label, "--append"];
            }
            let output = record_stdin(&targets, bytes, &extra);
            assert!(output.status.success(), "{}", text(&output));
        }
        Node {
            name,
            targets,
            archive: format!(
                "file://{}",
                scratch.path(&format!("archive-{name}")).display()
            ),
            state: scratch.path(&format!("state-{name}")),
        }
    }

    fn nvrec(&self) -> Command {
        let mut command = nvrec();
        command.env("XDG_STATE_HOME", &self.state);
        command
    }

    fn archive_into(&self, catalog: &str) {
        let output = run(self
            .nvrec()
            .args([
                "--json",
                "archive",
                "--to",
                &self.archive,
                "--node",
                self.name,
            ])
            .args(["--catalog", catalog])
            .args(&self.targets));
        assert!(output.status.success(), "{}", text(&output));
    }
}

fn catalog_rows(catalog: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let output = run(nvrec()
        .args(["--json", "catalog", "ls", "--catalog", catalog])
        .args(extra));
    assert!(output.status.success(), "{}", text(&output));
    json(&output)["recordings"].as_array().unwrap().clone()
}

#[test]
fn nodes_share_one_postgres_catalog_that_answers_as_sqlite_and_rebuilds_from_manifests() {
    let Some(server) = Postgres::start() else {
        return;
    };
    let scratch = Scratch::new("pg-catalog");
    let a = Node::new(
        &scratch,
        "node-a",
        &[&noise(3 << 20, 1), &noise(1 << 20, 2)],
    );
    let b = Node::new(&scratch, "node-b", &[&noise(2 << 20, 3)]);
    a.archive_into(&server.url);
    b.archive_into(&server.url);
    // Archiving again replaces a node's rows; it adds none.
    a.archive_into(&server.url);

    let all = catalog_rows(&server.url, &[]);
    assert_eq!(all.len(), 3, "{all:?}");
    // A node set up once, by the environment, finds the same catalog; its help shows no
    // password.
    let output = run(nvrec()
        .args(["--json", "catalog", "ls"])
        .env("NVREC_CATALOG", &server.url));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["recordings"].as_array().unwrap(), &all);
    let help = run(nvrec().args(["catalog", "ls", "--help"]).env(
        "NVREC_CATALOG",
        "postgres://nvrec:hunter2@db.lab/recordings",
    ));
    assert!(!text(&help).contains("hunter2"), "{}", text(&help));
    let of_b = catalog_rows(&server.url, &["--node", "node-b"]);
    assert_eq!(of_b.len(), 1);
    assert_eq!(of_b[0]["stream_len_bytes"], 2 << 20);
    assert_eq!(of_b[0]["label"], "node-b-0");
    let large = catalog_rows(&server.url, &["--min-size", "2M"]);
    assert_eq!(large.len(), 2, "{large:?}");
    let of_a = catalog_rows(&server.url, &["--node", "node-a"]);
    assert_eq!(of_a.len(), 2);
    let start = of_a[1]["start_ns"].as_u64().unwrap();
    let window = format!("@{}", start as f64 / 1e9);
    assert!(
        catalog_rows(&server.url, &["--node", "node-a", "--from", &window])
            .iter()
            .any(|row| row["label"] == "node-a-1")
    );

    // The same archives rebuilt into an SQLite catalog give the same rows.
    let sqlite = scratch.path("catalog.sqlite").display().to_string();
    for node in [&a, &b] {
        let output = run(nvrec().args([
            "--json",
            "catalog",
            "rebuild",
            &node.archive,
            "--catalog",
            &sqlite,
        ]));
        assert!(output.status.success(), "{}", text(&output));
    }
    assert_eq!(catalog_rows(&sqlite, &[]), all);

    // Node a's rows dropped from the server, then made again from its manifests alone.
    let output = run(nvrec().args([
        "--json",
        "catalog",
        "rebuild",
        &format!("file://{}", scratch.path("archive-node-a").display()),
        "--catalog",
        &server.url,
    ]));
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(json(&output)["rebuilt"]["recording_count"], 2);
    assert_eq!(catalog_rows(&server.url, &[]), all);
}

#[test]
fn an_unreachable_catalog_server_fails_the_run_without_showing_its_password() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Nothing listens on a port just let go of.
    let url = format!("postgres://nvrec:hunter2@127.0.0.1:{port}/postgres");
    let output = run(nvrec().args(["catalog", "ls", "--catalog", &url]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let said = text(&output);
    assert!(said.contains(&format!("127.0.0.1:{port}")), "{said}");
    assert!(!said.contains("hunter2"), "{said}");
}
