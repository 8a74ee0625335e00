//! TLS for the service's TCP listener and for `nvrec status`: rustls on the ring provider
//! (the one the archive's S3 client already builds, and one that cross-compiles for
//! aarch64 musl with the C compiler alone), certificates and keys read from PEM files.
//!
//! The service reads its certificate chain and key once, before it listens: a file that is
//! missing, holds no PEM of the right kind, or a key that does not belong to the
//! certificate is a usage error at start, never a failure of the first client. Every
//! accepted connection shakes hands on a task of its own ([`TlsListener`]), so a client
//! that connects and says nothing holds no one else up; a connection whose handshake fails
//! (plain HTTP to the TLS port, a client that does not trust the certificate) is closed
//! before a byte of HTTP is read, so no request of it reaches the API.
//!
//! What it deliberately does not do: client certificates (the bearer token is the
//! credential, on every listener alike), reloading a renewed certificate while running
//! (restart the service), HTTP/2 (the service speaks HTTP/1.1 only).

use anyhow::Result;
use nvrec_app::UsageError;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{
    ClientConfig, Error, InconsistentKeys, InvalidMessage, RootCertStore, ServerConfig,
};
use tokio_rustls::server::TlsStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// How long a client has to complete its handshake after connecting.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many handshakes may be under way at once; further connections wait in the kernel's
/// accept queue until one ends.
const HANDSHAKES_MAX: usize = 64;
/// How many connections past their handshake may wait for the server to take them.
const HANDSHAKEN_QUEUE_MAX: usize = 16;

/// The protocol the service offers in the handshake (ALPN): HTTP/1.1, which is all it speaks.
const ALPN_HTTP_1_1: &[u8] = b"http/1.1";

/// The files of the service's TLS identity, as `--tls-cert` and `--tls-key` name them.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain, PEM: the service's certificate first, then any intermediates.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The service's TLS configuration from its certificate chain and key; every problem with
/// the files is a [`UsageError`] that names the option and the file.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>> {
    let cert_text = read_pem_file("--tls-cert", &files.cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| pem_error("--tls-cert", &files.cert, &error))?;
    if chain.is_empty() {
        return Err(UsageError(format!(
            "--tls-cert {}: no certificate in it (give a PEM file with -----BEGIN \
             CERTIFICATE-----, the service's own first)",
            files.cert.display()
        ))
        .into());
    }
    let key_text = read_pem_file("--tls-key", &files.key)?;
    let key = match PrivateKeyDer::from_pem_slice(&key_text) {
        Ok(key) => key,
        Err(pem::Error::NoItemsFound) => {
            return Err(UsageError(format!(
                "--tls-key {}: no private key in it (give a PEM file with -----BEGIN PRIVATE \
                 KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY, not encrypted)",
                files.key.display()
            ))
            .into())
        }
        Err(error) => return Err(pem_error("--tls-key", &files.key, &error)),
    };
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| anyhow::anyhow!("setting up TLS: {error}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| {
            let why = match error {
                Error::InconsistentKeys(InconsistentKeys::KeyMismatch) => {
                    "the key is not the certificate's (their public keys differ)".to_string()
                }
                error => error.to_string(),
            };
            UsageError(format!(
                "--tls-cert {} with --tls-key {}: {why}",
                files.cert.display(),
                files.key.display()
            ))
        })?;
    config.alpn_protocols = vec![ALPN_HTTP_1_1.to_vec()];
    Ok(Arc::new(config))
}

/// A client's TLS configuration: trusting the certificates in `ca_file` (PEM), or the
/// system's trust store without one.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let text = read_pem_file("--cacert", path)?;
            for cert in CertificateDer::pem_slice_iter(&text) {
                let cert = cert.map_err(|error| pem_error("--cacert", path, &error))?;
                roots
                    .add(cert)
                    .map_err(|error| UsageError(format!("--cacert {}: {error}", path.display())))?;
            }
            if roots.is_empty() {
                return Err(UsageError(format!(
                    "--cacert {}: no certificate in it (give a PEM file with -----BEGIN \
                     CERTIFICATE-----)",
                    path.display()
                ))
                .into());
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(UsageError(
                    "no trusted certificates in the system's store: give --cacert FILE, the \
                     certificate that signed the service's"
                        .to_string(),
                )
                .into());
            }
        }
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| anyhow::anyhow!("setting up TLS: {error}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_HTTP_1_1.to_vec()];
    Ok(Arc::new(config))
}

/// Connects to `address` and shakes hands, checking that the certificate is valid for
/// `name`.
pub async fn connect(
    config: Arc<ClientConfig>,
    address: &str,
    name: ServerName<'static>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let stream = TcpStream::connect(address).await?;
    Ok(TlsConnector::from(config).connect(name, stream).await?)
}

/// The provider named rather than taken from the process default: the dependency graph
/// also builds rustls for the archive's S3 client, and the default is only unambiguous
/// while one provider is compiled in.
fn provider() -> Arc<tokio_rustls::rustls::crypto::CryptoProvider> {
    Arc::new(tokio_rustls::rustls::crypto::ring::default_provider())
}

fn read_pem_file(option: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|error| UsageError(format!("{option} {}: {error}", path.display())).into())
}

fn pem_error(option: &str, path: &Path, error: &pem::Error) -> anyhow::Error {
    UsageError(format!(
        "{option} {}: not a PEM file that can be read: {error}",
        path.display()
    ))
    .into()
}

/// A TCP listener whose connections come out of it only after a completed TLS handshake;
/// [`axum::serve`] takes it as it takes a plain `TcpListener`.
pub struct TlsListener {
    local_addr: SocketAddr,
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Starts accepting on `listener` (on the current runtime): each connection shakes hands
    /// on a task of its own, at most [`HANDSHAKES_MAX`] at a time, each within
    /// [`HANDSHAKE_TIMEOUT`]. A failed handshake is said on stderr, once a connection.
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let local_addr = listener.local_addr()?;
        let (sender, handshaken) = mpsc::channel(HANDSHAKEN_QUEUE_MAX);
        tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), sender));
        Ok(TlsListener {
            local_addr,
            handshaken,
        })
    }
}

async fn accept_loop(
    mut listener: TcpListener,
    acceptor: TlsAcceptor,
    sender: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let handshakes = Arc::new(Semaphore::new(HANDSHAKES_MAX));
    loop {
        let Ok(permit) = Arc::clone(&handshakes).acquire_owned().await else {
            return;
        };
        // axum's own accept: it retries, and waits out a lack of file descriptors.
        let (stream, peer) = tokio::select! {
            accepted = axum::serve::Listener::accept(&mut listener) => accepted,
            _ = sender.closed() => return,
        };
        let acceptor = acceptor.clone();
        let sender = sender.clone();
        tokio::spawn(async move {
            let shaken = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            drop(permit);
            match shaken {
                Ok(Ok(stream)) => {
                    let _ = sender.send((stream, peer)).await;
                }
                Ok(Err(error)) => {
                    errln!(
                        "nvrec serve: closed a connection from {peer} without a TLS handshake: {}",
                        handshake_error_text(&error)
                    );
                }
                Err(_) => {
                    errln!(
                        "nvrec serve: closed a connection from {peer}: no TLS handshake within {} s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    );
                }
            }
        });
    }
}

/// Why a handshake failed, in words; a client that sent plain HTTP (the usual mistake) is
/// named as such.
fn handshake_error_text(error: &std::io::Error) -> String {
    let tls_error = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<Error>());
    match tls_error {
        Some(Error::InvalidMessage(InvalidMessage::InvalidContentType)) => {
            "it did not speak TLS (plain HTTP to an https:// port?)".to_string()
        }
        _ => error.to_string(),
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(connection) => connection,
            // The accept loop ends only once this receiver is gone, so this is never
            // reached; waiting forever is what a listener with nothing to give does.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}
