//! The HTTPS listener and everything every route gets: health, readiness, metrics, limits.
//!
//! ```text
//!  --listen (HTTPS, rustls/ring, TLS 1.2+1.3, http/1.1 [+ h2 with enable_http2])
//!    │  edge: metrics by matched route ─ timeout (504) ─ 405/413 → JSON
//!    │   └─ catch panic (500 JSON) ─ body cap (413 JSON) ─ routes:
//!    │         /healthz /readyz /metrics  +  `extra` (admission, extender)  +  JSON 404
//!  --metrics-listen (plain HTTP): /healthz /readyz /metrics, same edge and 404
//! ```
//!
//! [`router`] builds the HTTPS app around the routes other modules own; [`serve`] binds both
//! listeners and runs them until a [`CancellationToken`] fires, then drains. [`bind`] +
//! [`BoundServer::run`] is the same in two steps, for callers (tests, the embedded stand-ins)
//! that need the bound addresses first.
//!
//! [`CancellationToken`]: tokio_util::sync::CancellationToken

mod health;
mod listen;
mod router;
mod signals;
mod state;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use listen::{BoundServer, bind, serve};
pub use router::{error_response, metrics_router, router};
pub use signals::cancel_on_signals;
pub use state::{ServerState, TLS_CONDITION};

use crate::certs::CertError;

/// Reads and checks a certificate/key pair exactly as the HTTPS listener will load it, so
/// `serve` can report a bad file before it starts anything.
pub fn check_tls_files(
    cert: &std::path::Path,
    key: &std::path::Path,
    enable_http2: bool,
) -> Result<(), ServerError> {
    let pair = tls::read_pair(cert, key)?;
    tls::server_config(&pair, cert, key, enable_http2).map(|_| ())
}

/// Default cap on request bodies. kube-apiserver limits objects to about 3 MiB, and an
/// AdmissionReview of an UPDATE carries the object twice (`object` and `oldObject`), so 6 MiB
/// is the smallest cap that never refuses a review the API server could send.
pub const DEFAULT_BODY_LIMIT: usize = 6 * 1024 * 1024;

/// Default per-request timeout: the longest `timeoutSeconds` Kubernetes allows for a webhook is
/// 30 s; past it nobody is waiting for the answer.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the serving certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsSource {
    /// PEM files (`--tls-cert`, `--tls-key`), reloaded when their contents change.
    Files {
        /// Certificate chain, leaf first.
        cert: PathBuf,
        /// PKCS#8, PKCS#1 or SEC1 private key.
        key: PathBuf,
    },
    /// A CA and serving certificate made at start for `localhost`, `127.0.0.1` and `::1` (plus
    /// the listen IP when it is a specific one). Fine for `--embedded` and trying things out;
    /// clusters need files whose CA is in the webhook configurations' `caBundle`.
    SelfSigned,
    /// A pair kept by `--tls-mode self` (see [`crate::selftls`]), swapped into the listener
    /// each time the channel changes.
    Managed(ManagedTls),
}

/// A serving certificate chain (leaf first) and its private key, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct ServingPair {
    /// The chain.
    pub cert_pem: Vec<u8>,
    /// The key.
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for ServingPair {
    // Never print the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingPair")
            .field("cert_pem", &String::from_utf8_lossy(&self.cert_pem))
            .finish_non_exhaustive()
    }
}

/// The receiving end of a serving pair that changes while the server runs.
#[derive(Clone, Debug)]
pub struct ManagedTls(pub tokio::sync::watch::Receiver<ServingPair>);

impl PartialEq for ManagedTls {
    fn eq(&self, other: &Self) -> bool {
        self.0.same_channel(&other.0)
    }
}

impl Eq for ManagedTls {}

/// Limits applied to every request on both listeners.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest time a handler may take before the client gets a 504.
    pub request_timeout: Duration,
    /// Largest request body accepted; bigger ones get a 413.
    pub body_limit: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

/// Everything [`serve`] needs to know; [`ServerConfig::default`] matches the CLI defaults.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// HTTPS address (`--listen`, default `0.0.0.0:8443`).
    pub listen: SocketAddr,
    /// The serving certificate.
    pub tls: TlsSource,
    /// Plain-HTTP address for `/metrics` and the probes (`--metrics-listen`, default
    /// `0.0.0.0:8080`); `None` serves them on the HTTPS listener only.
    pub metrics_listen: Option<SocketAddr>,
    /// Offer HTTP/2 (ALPN `h2`). Off by default: HTTP/2 Rapid Reset (CVE-2023-44487) is why
    /// webhook servers in the Kubernetes ecosystem ship HTTP/1.1 only, and kube-apiserver talks
    /// HTTP/1.1 to webhooks happily.
    pub enable_http2: bool,
    /// Request timeout and body cap.
    pub limits: Limits,
    /// How long in-flight requests may take to finish after shutdown is requested. Kubernetes
    /// sends SIGKILL 30 s after SIGTERM by default, so this stays below that.
    pub drain_timeout: Duration,
    /// How often certificate files are checked for rotation ([`TlsSource::Files`] only).
    pub cert_reload_interval: Duration,
    /// More DNS names for the self-signed certificate ([`TlsSource::SelfSigned`] only), e.g.
    /// the webhook Service names the embedded API verifies (`tephra.tephra-system.svc`).
    pub self_signed_names: Vec<String>,
    /// `--client-ca`: PEM CA certificate(s); when set, the HTTPS listener requires a client
    /// certificate signed by one of them (the metrics listener is unaffected).
    pub client_ca: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], 8443)),
            tls: TlsSource::SelfSigned,
            metrics_listen: Some(SocketAddr::from(([0, 0, 0, 0], 8080))),
            enable_http2: false,
            limits: Limits::default(),
            drain_timeout: Duration::from_secs(20),
            cert_reload_interval: Duration::from_secs(30),
            self_signed_names: Vec::new(),
            client_ca: None,
        }
    }
}

/// Why the server could not start or stopped on its own. Every message is one line naming the
/// address or file at fault, fit for a CLI error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// An address could not be bound (in use, not local, no permission).
    #[error("cannot listen on {addr} ({listener}): {source}")]
    Bind {
        /// `https` or `metrics`.
        listener: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// A certificate or key file could not be read.
    #[error("cannot read TLS file {}: {source}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A certificate file holds no usable PEM certificate.
    #[error("invalid TLS certificate file {}: {reason}", path.display())]
    InvalidCert {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A key file holds no usable PEM private key.
    #[error("invalid TLS key file {}: {reason}", path.display())]
    InvalidKey {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Certificate and key parse but rustls refuses them together (key does not match the
    /// certificate, unsupported key type).
    #[error("TLS certificate {} and key {} cannot be used together: {source}", cert.display(), key.display())]
    TlsConfig {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// The self-signed pair could not be made.
    #[error("making a self-signed certificate: {0}")]
    SelfSigned(#[from] CertError),
    /// A listener failed while serving.
    #[error("{listener} listener failed: {source}")]
    Serve {
        /// `https` or `metrics`.
        listener: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A listener task ended without being asked to (it panicked or returned early).
    #[error("{listener} listener stopped unexpectedly: {reason}")]
    Stopped {
        /// `https` or `metrics`.
        listener: &'static str,
        /// What happened.
        reason: String,
    },
}

impl ServerError {
    /// A short, fixed label for metrics and log fields.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ServerError::Bind { .. } => "bind",
            ServerError::ReadFile { .. } => "read_file",
            ServerError::InvalidCert { .. } => "invalid_cert",
            ServerError::InvalidKey { .. } => "invalid_key",
            ServerError::TlsConfig { .. } => "tls_config",
            ServerError::SelfSigned(_) => "self_signed",
            ServerError::Serve { .. } => "serve",
            ServerError::Stopped { .. } => "stopped",
        }
    }
}
