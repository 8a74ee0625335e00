//! `nvrec serve`: a long-running process that owns recordings, driven over HTTP.
//!
//! The service listens on a Unix socket, or on TCP with `--listen`: there always with a
//! bearer token, and off loopback always with TLS ([`tls`]), so that a TCP port lets no
//! more in than the socket's mode does. It checks the token when it has one, and may only
//! touch the targets it was started with (`--allow-target`).
//! A recording it starts is planned exactly as `nvrec record` plans one and runs on a thread
//! of its own exactly as `nvrec record` runs it ([`nvrec_app::record::run`]): the
//! HTTP side (axum on a small tokio runtime) only reads counters and sets stop and abort
//! requests, so it stays off the data path.
//!
//! SIGTERM or SIGINT stops every recording cleanly (as Ctrl-C stops `nvrec record`: what
//! was taken is written and flushed), waits for them, and exits; a second signal aborts
//! them instead. Under systemd (`NOTIFY_SOCKET` set) the service says READY=1 once it
//! listens, WATCHDOG=1 at half the watchdog interval while its event loop runs, and
//! STOPPING=1 when it begins to stop.
//!
//! What it deliberately does not do: read files or stdin as a source (a client could
//! otherwise copy any file the service can read onto a target), read any other file a
//! request names (a capture filter comes inline, as the program itself, never as a path
//! whose contents an error could show), or write any path it was not started with.

mod api;
pub mod client;
mod drives;
mod metrics;
mod registry;
mod tls;

use anyhow::{Context, Result};
use clap::Args;
use nvrec_app::{Class, UsageError};
use registry::Registry;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the service listens when neither `--socket` nor `--listen` is given.
pub const SOCKET_DEFAULT: &str = "/run/nvrec/nvrec.sock";

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Listen on this Unix socket (created with mode 0660; a stale one is replaced).
    #[arg(long, default_value = SOCKET_DEFAULT, conflicts_with = "listen")]
    socket: PathBuf,
    /// Listen on TCP at ADDRESS:PORT instead of a Unix socket. Needs --token-file, on
    /// loopback too (a port there is open to every user of the machine); any address but
    /// loopback also needs --tls-cert and --tls-key.
    #[arg(long, value_name = "ADDRESS:PORT")]
    listen: Option<SocketAddr>,
    /// A file holding the token every request must then carry (`Authorization: Bearer
    /// TOKEN`); surrounding white space is ignored.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Speak HTTPS on --listen with this certificate chain (PEM, the service's certificate
    /// first); required off loopback.
    #[arg(
        long,
        value_name = "FILE",
        requires_all = ["listen", "tls_key"],
        conflicts_with = "socket"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1, not encrypted).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// A target (file or block device) recordings may use; give it once per target. A
    /// request that names any other target is refused (403) and nothing happens.
    #[arg(long = "allow-target", value_name = "PATH", required = true, num_args = 1..)]
    allow_target: Vec<PathBuf>,
}

/// The targets the service may write.
#[derive(Debug)]
pub struct AllowedTargets {
    pub paths: Vec<PathBuf>,
}

/// What a path names, so that `./a`, `a`, a link to it and another node of the same block
/// device all count as the same target.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    Device(u64),
    File(u64, u64),
    Missing(PathBuf),
}

fn identity(path: &Path) -> Identity {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.file_type().is_block_device() => Identity::Device(metadata.rdev()),
        Ok(metadata) => Identity::File(metadata.dev(), metadata.ino()),
        Err(_) => {
            let parent = match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => parent,
                _ => Path::new("."),
            };
            let parent = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
            Identity::Missing(parent.join(path.file_name().unwrap_or_default()))
        }
    }
}

impl AllowedTargets {
    /// Whether `target` is one of the allowed targets (looked at now: a file the first
    /// recording created is still the allowed one).
    pub fn is_allowed(&self, target: &Path) -> bool {
        let wanted = identity(target);
        self.paths.iter().any(|allowed| identity(allowed) == wanted)
    }

    pub fn describe(&self) -> String {
        self.paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What every request handler shares.
#[derive(Debug)]
pub struct Service {
    pub token: Option<String>,
    pub allowed: AllowedTargets,
    pub registry: Registry,
    pub drives: drives::Drives,
    pub started: Instant,
    shutting_down: AtomicBool,
}

impl Service {
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

/// Where the service listens.
enum Listener {
    Unix(tokio::net::UnixListener, PathBuf),
    Tcp(tokio::net::TcpListener),
    Tls(tls::TlsListener),
}

/// Where and how the service takes connections, decided before anything listens.
enum Door {
    Unix(PathBuf),
    /// Plain HTTP: loopback only.
    Tcp(SocketAddr),
    Tls(SocketAddr, Arc<tokio_rustls::rustls::ServerConfig>),
}

/// Where and how to listen, from the options: a TCP listener always with a token (a
/// loopback port is open to every user of the machine, where the Unix socket's mode lets
/// only its owner and group in), and off loopback always with TLS (or the token and the
/// API would cross the network in clear text). Nothing listens yet.
fn door(args: &ServeArgs, token: Option<&str>) -> Result<Door> {
    let Some(address) = args.listen else {
        return Ok(Door::Unix(args.socket.clone()));
    };
    let loopback = address.ip().is_loopback();
    let files = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => None,
    };
    let mut missing = Vec::new();
    if token.is_none() {
        missing.push("--token-file FILE (a token: head -c 32 /dev/urandom | base64 > FILE)");
    }
    if files.is_none() && !loopback {
        missing.push("--tls-cert FILE and --tls-key FILE (PEM)");
    }
    if !missing.is_empty() {
        let why = if loopback {
            "every user of this machine can reach a TCP port, loopback included"
        } else if token.is_none() {
            "other machines can reach it"
        } else {
            "other machines can reach it, and the token and the API would cross the network \
             in clear text"
        };
        let instead = if token.is_none() {
            "or use the Unix socket (--socket, mode 0660)"
        } else {
            "or listen on 127.0.0.1 or the Unix socket"
        };
        return Err(UsageError(format!(
            "--listen {address}: {why}: give {}, {instead}",
            missing.join(", ")
        ))
        .into());
    }
    Ok(match files {
        Some(files) => Door::Tls(address, tls::server_config(&files)?),
        None => Door::Tcp(address),
    })
}

fn read_token(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| UsageError(format!("--token-file {}: {error}", path.display())))?;
    let token = text.trim().to_string();
    if token.is_empty() {
        return Err(UsageError(format!(
            "--token-file {} is empty: put a token in it (e.g. head -c 32 /dev/urandom | base64)",
            path.display()
        ))
        .into());
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UsageError(format!(
            "--token-file {}: the token may not contain white space",
            path.display()
        ))
        .into());
    }
    Ok(token)
}

/// Binds a Unix socket at `path`, replacing a stale one (no service answers there) but
/// nothing else.
fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if !metadata.file_type().is_socket() {
            return Err(UsageError(format!(
                "--socket {}: something that is not a socket is there; give another path",
                path.display()
            ))
            .into());
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(UsageError(format!(
                "--socket {}: a service already listens there",
                path.display()
            ))
            .into());
        }
        std::fs::remove_file(path)
            .with_context(|| format!("removing the stale socket {}", path.display()))?;
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {} for the socket", parent.display()))?;
    }
    let listener = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("listening on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    Ok(listener)
}

/// Tells systemd (when it started us: `NOTIFY_SOCKET` is set) how the service stands.
fn notify(states: &[sd_notify::NotifyState]) {
    if let Err(error) = sd_notify::notify(states) {
        errln!("nvrec serve: warning: telling systemd: {error}");
    }
}

pub fn run(args: ServeArgs) -> Result<Class> {
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    let door = door(&args, token.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("nvrec-serve")
        .enable_all()
        .build()
        .context("starting the service's runtime")?;
    runtime.block_on(serve(args, door, token))
}

async fn bind_tcp(address: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("listening on {address}"))
}

async fn serve(args: ServeArgs, door: Door, token: Option<String>) -> Result<Class> {
    let listener = match door {
        Door::Unix(path) => Listener::Unix(bind_unix(&path)?, path),
        Door::Tcp(address) => Listener::Tcp(bind_tcp(address).await?),
        Door::Tls(address, config) => Listener::Tls(
            tls::TlsListener::new(bind_tcp(address).await?, config)
                .with_context(|| format!("listening on {address}"))?,
        ),
    };
    let service = Arc::new(Service {
        token,
        drives: drives::start(args.allow_target.clone()),
        allowed: AllowedTargets {
            paths: args.allow_target,
        },
        registry: Registry::default(),
        started: Instant::now(),
        shutting_down: AtomicBool::new(false),
    });
    let where_ = match &listener {
        Listener::Unix(_, path) => path.display().to_string(),
        Listener::Tcp(listener) => format!("http://{}", listener.local_addr()?),
        Listener::Tls(listener) => {
            format!("https://{}", axum::serve::Listener::local_addr(listener)?)
        }
    };
    errln!("nvrec serve: listening on {where_}");
    let status = format!("listening on {where_}");
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&status),
    ]);
    if let Some(interval) = sd_notify::watchdog_enabled() {
        // Kicked from the event loop, so a service whose loop is stuck is restarted.
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval / 2);
            loop {
                ticks.tick().await;
                notify(&[sd_notify::NotifyState::Watchdog]);
            }
        });
    }
    let sampled = Arc::clone(&service);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        loop {
            ticks.tick().await;
            for recording in sampled.registry.running() {
                recording.sample();
            }
        }
    });
    let app = api::router(Arc::clone(&service));
    let shutdown = shutdown_signal(Arc::clone(&service));
    match listener {
        Listener::Unix(listener, path) => {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await;
            let _ = std::fs::remove_file(&path);
            served.context("serving")?;
        }
        Listener::Tcp(listener) => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
                .context("serving")?;
        }
        Listener::Tls(listener) => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
                .context("serving")?;
        }
    }
    errln!("nvrec serve: stopped");
    Ok(Class::Done)
}

/// Resolves once a SIGTERM or SIGINT has arrived and every recording has ended: the first
/// signal stops them (flush), a second aborts them.
async fn shutdown_signal(service: Arc<Service>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        errln!("nvrec serve: warning: cannot watch SIGTERM and SIGINT; stop it with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    service.shutting_down.store(true, Ordering::SeqCst);
    notify(&[
        sd_notify::NotifyState::Stopping,
        sd_notify::NotifyState::Status("stopping every recording (flush)"),
    ]);
    let running = service.registry.running();
    errln!(
        "nvrec serve: stopping {} recording(s) (a second signal aborts them)",
        running.len()
    );
    for recording in &running {
        recording.control.request_stop();
    }
    let ended = async {
        for recording in running.clone() {
            let _ = tokio::task::spawn_blocking(move || recording.join()).await;
        }
    };
    tokio::select! {
        _ = ended => {}
        _ = async {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        } => {
            errln!("nvrec serve: aborting every recording");
            for recording in &running {
                recording.control.request_abort();
            }
            for recording in running.clone() {
                let _ = tokio::task::spawn_blocking(move || recording.join()).await;
            }
        }
    }
}
