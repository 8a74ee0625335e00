//! `nvrec status`: asks a running service (`nvrec serve`) how its recordings stand, over
//! its Unix socket or its TCP address (HTTPS through [`super::tls`], or plain HTTP on
//! loopback), with hyper's HTTP/1 client.

use anyhow::{Context, Result};
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use nvrec::unit::format_bytes;
use nvrec_app::{Class, UsageError};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The service's Unix socket.
    #[arg(long, default_value = super::SOCKET_DEFAULT, conflicts_with = "url")]
    socket: PathBuf,
    /// The service's TCP address instead, as https://HOST:PORT (or http://HOST:PORT for a
    /// service on loopback without TLS).
    #[arg(long)]
    url: Option<String>,
    /// With an https:// --url, trust the certificates in this PEM file (the one that
    /// signed the service's, or the service's own) instead of the system's trust store.
    #[arg(long, value_name = "FILE", requires = "url")]
    cacert: Option<PathBuf>,
    /// A file holding the service's token (sent as Authorization: Bearer TOKEN).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Only this recording (the service's id), with its members and checkpoints.
    id: Option<u64>,
}

/// Where a service listens.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Unix(PathBuf),
    /// host:port, plain HTTP
    Tcp(String),
    /// host:port over TLS, its certificate checked for `name` against `config`'s roots
    Tls {
        address: String,
        name: ServerName<'static>,
        config: Arc<ClientConfig>,
    },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
            Endpoint::Tcp(address) => write!(f, "http://{address}"),
            Endpoint::Tls { address, .. } => write!(f, "https://{address}"),
        }
    }
}

impl Endpoint {
    /// The endpoint `--url` names: `https://HOST:PORT` (trusting `ca_file`, or the system's
    /// store) or `http://HOST:PORT`.
    pub fn from_url(url: &str, ca_file: Option<&Path>) -> Result<Endpoint> {
        let usage = || {
            UsageError(format!(
                "--url {url}: give https://HOST:PORT (or http://HOST:PORT for a service on \
                 loopback without TLS)"
            ))
        };
        if let Some(rest) = url.strip_prefix("https://") {
            let address = rest.trim_end_matches('/');
            let host = match address.rsplit_once(':') {
                Some((host, port)) if port.parse::<u16>().is_ok() => host,
                _ => return Err(usage().into()),
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let name = ServerName::try_from(host.to_string()).map_err(|_| usage())?;
            let config = super::tls::client_config(ca_file)?;
            return Ok(Endpoint::Tls {
                address: address.to_string(),
                name,
                config,
            });
        }
        let address = url.strip_prefix("http://").ok_or_else(usage)?;
        if ca_file.is_some() {
            return Err(UsageError(format!(
                "--cacert is for an https:// --url; {url} is plain HTTP"
            ))
            .into());
        }
        Ok(Endpoint::Tcp(address.trim_end_matches('/').to_string()))
    }
}

/// One request; the status and the body, parsed as JSON.
pub async fn request(
    endpoint: &Endpoint,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<(u16, Value)> {
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "nvrec");
    if let Some(token) = token {
        builder = builder.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let body = match body {
        Some(value) => {
            builder = builder.header(hyper::header::CONTENT_TYPE, "application/json");
            Bytes::from(value.to_string())
        }
        None => Bytes::new(),
    };
    let request = builder.body(Full::new(body))?;
    let response = match endpoint {
        Endpoint::Unix(socket) => {
            let stream = tokio::net::UnixStream::connect(socket).await?;
            send(TokioIo::new(stream), request).await?
        }
        Endpoint::Tcp(address) => {
            let stream = tokio::net::TcpStream::connect(address.as_str()).await?;
            send(TokioIo::new(stream), request).await?
        }
        Endpoint::Tls {
            address,
            name,
            config,
        } => {
            let stream = super::tls::connect(Arc::clone(config), address, name.clone()).await?;
            send(TokioIo::new(stream), request).await?
        }
    };
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, value))
}

async fn send<T>(
    io: TokioIo<T>,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(connection);
    Ok(sender.send_request(request).await?)
}

pub fn status(args: StatusArgs, json: bool) -> Result<Class> {
    let endpoint = match &args.url {
        Some(url) => Endpoint::from_url(url, args.cacert.as_deref())?,
        None => Endpoint::Unix(args.socket.clone()),
    };
    let token = match &args.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|error| UsageError(format!("--token-file {}: {error}", path.display())))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let path = match args.id {
        Some(id) => format!("/v1/recordings/{id}"),
        None => "/v1/recordings".to_string(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the client's runtime")?;
    let (status, value) = runtime
        .block_on(request(&endpoint, "GET", &path, token.as_deref(), None))
        .with_context(|| format!("asking the service at {endpoint} (is `nvrec serve` running?)"))?;
    if status != 200 {
        let message = value["error"].as_str().unwrap_or("no message").to_string();
        return Err(anyhow::anyhow!(
            "the service at {endpoint} answered {status}: {message}"
        ));
    }
    if json {
        outln!("{value}");
        return Ok(Class::Done);
    }
    let recordings = match args.id {
        Some(_) => vec![value],
        None => value["recordings"].as_array().cloned().unwrap_or_default(),
    };
    if recordings.is_empty() {
        outln!("no recordings in the service at {endpoint}");
    }
    for recording in &recordings {
        print_recording(recording, args.id.is_some());
    }
    Ok(Class::Done)
}

fn print_recording(recording: &Value, detail: bool) {
    let bytes = recording["bytes"].as_u64().unwrap_or(0);
    let lost = recording["lost"]["total_bytes"].as_u64().unwrap_or(0);
    outln!(
        "{:>4}  {:<12} {:>12} {:>10.1} MiB/s  lost {}  {}  {}",
        recording["id"],
        recording["state"].as_str().unwrap_or("?"),
        format_bytes(bytes),
        recording["rate_bytes_per_s"].as_f64().unwrap_or(0.0) / 1048576.0,
        lost,
        recording["label"].as_str().unwrap_or(""),
        recording["targets"]
            .as_array()
            .map(|targets| targets
                .iter()
                .filter_map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(" "))
            .unwrap_or_default()
    );
    if !detail {
        return;
    }
    for member in recording["members"].as_array().into_iter().flatten() {
        outln!(
            "      member {} {}: {}, {} written, {:.1} MiB/s, {}/{} in flight",
            member["index"],
            member["path"].as_str().unwrap_or("?"),
            member["state"].as_str().unwrap_or("?"),
            format_bytes(member["written_bytes"].as_u64().unwrap_or(0)),
            member["rate_bytes_per_s"].as_f64().unwrap_or(0.0) / 1048576.0,
            member["in_flight"],
            member["queue_depth"]
        );
    }
    if let Some(buffer) = recording["buffer"].as_object() {
        outln!(
            "      buffer {} of {} in use ({})",
            buffer["in_use"],
            buffer["count"],
            format_bytes(buffer["bytes"].as_u64().unwrap_or(0))
        );
    }
    let checkpoints = &recording["checkpoints"];
    if checkpoints.is_object() {
        outln!(
            "      checkpoints {}, durable {}, last {} ({:.1} s ago)",
            checkpoints["count"],
            format_bytes(checkpoints["durable_bytes"].as_u64().unwrap_or(0)),
            checkpoints["last_durable"].as_str().unwrap_or("-"),
            checkpoints["lag_s"].as_f64().unwrap_or(0.0)
        );
    }
    if let Some(error) = recording["report"]["error"].as_str() {
        outln!("      error: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_the_endpoint_or_is_a_usage_error() {
        let Endpoint::Tcp(address) = Endpoint::from_url("http://127.0.0.1:8470/", None).unwrap()
        else {
            panic!("not plain TCP")
        };
        assert_eq!(address, "127.0.0.1:8470");
        for (url, ca_file) in [
            ("127.0.0.1:8470", None),
            ("ftp://127.0.0.1:8470", None),
            ("https://127.0.0.1", None),
            ("https://127.0.0.1:port", None),
            ("https://:8470", None),
            (
                "http://127.0.0.1:8470",
                Some(Path::new("/etc/nvrec/ca.pem")),
            ),
            (
                "https://127.0.0.1:8470",
                Some(Path::new("/nonexistent/ca.pem")),
            ),
        ] {
            let error = Endpoint::from_url(url, ca_file).unwrap_err();
            assert_eq!(Class::of_error(&error), Class::Usage, "{url}: {error}");
        }
    }
}
