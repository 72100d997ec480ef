//! rustls server configuration from PEM, and reloading it when the files rotate.
//!
//! The provider is always ring, passed explicitly rather than taken from the process default,
//! so no other provider can be picked up by accident; protocol versions are TLS 1.3 and 1.2.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use super::ServerError;
use crate::metrics::Metrics;

/// ALPN identifiers; without `h2` in the list a client cannot negotiate HTTP/2 over TLS.
const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// The contents of a certificate and key file, kept to notice when they change.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PemPair {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

/// Reads both files, naming the one that fails.
pub(crate) fn read_pair(cert: &Path, key: &Path) -> Result<PemPair, ServerError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| ServerError::ReadFile {
            path: path.to_path_buf(),
            source,
        })
    };
    Ok(PemPair {
        cert: read(cert)?,
        key: read(key)?,
    })
}

/// Sets `tephra_tls_certificate_expiry_timestamp_seconds` from a served PEM chain: the first
/// certificate is `serving`, the earliest end among the others (the CA, when the file carries
/// it, as `tephra certs` writes it) is `ca`. Unparsable certificates are skipped: rustls has
/// already accepted the chain, and a gauge is no reason to refuse it.
pub(crate) fn record_expiry(metrics: &Metrics, cert_pem: &[u8]) {
    let ends: Vec<f64> = CertificateDer::pem_slice_iter(cert_pem)
        .filter_map(Result::ok)
        .filter_map(|der| {
            x509_parser::parse_x509_certificate(der.as_ref())
                .ok()
                .map(|(_, c)| c.validity().not_after.timestamp() as f64)
        })
        .collect();
    if let Some((serving, rest)) = ends.split_first() {
        metrics
            .tls_cert_expiry
            .with_label_values(&["serving"])
            .set(*serving);
        if let Some(ca) = rest.iter().copied().reduce(f64::min) {
            metrics.tls_cert_expiry.with_label_values(&["ca"]).set(ca);
        }
    }
}

/// A verifier requiring client certificates signed by one of the CAs in `path` (`--client-ca`).
pub(crate) fn client_verifier(
    path: &Path,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, ServerError> {
    let invalid = |reason: String| ServerError::InvalidCert {
        path: path.to_path_buf(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|source| ServerError::ReadFile {
        path: path.to_path_buf(),
        source,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots
            .add(cert.map_err(|e| invalid(e.to_string()))?)
            .map_err(|e| invalid(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(invalid("no PEM CERTIFICATE block found".into()));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| invalid(e.to_string()))
}

/// A rustls server config from PEM; `cert_name`/`key_name` only label errors.
pub(crate) fn server_config(
    pair: &PemPair,
    cert_name: &Path,
    key_name: &Path,
    enable_http2: bool,
) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    server_config_with(pair, cert_name, key_name, enable_http2, None)
}

/// [`server_config`], requiring client certificates `client` verifies when given.
pub(crate) fn server_config_with(
    pair: &PemPair,
    cert_name: &Path,
    key_name: &Path,
    enable_http2: bool,
    client: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let certs = CertificateDer::pem_slice_iter(&pair.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ServerError::InvalidCert {
            path: cert_name.to_path_buf(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(ServerError::InvalidCert {
            path: cert_name.to_path_buf(),
            reason: "no PEM CERTIFICATE block found".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&pair.key).map_err(|e| ServerError::InvalidKey {
        path: key_name.to_path_buf(),
        reason: match e {
            rustls::pki_types::pem::Error::NoItemsFound => "no PEM private key block found".into(),
            other => other.to_string(),
        },
    })?;
    let tls_err = |source| ServerError::TlsConfig {
        cert: cert_name.to_path_buf(),
        key: key_name.to_path_buf(),
        source,
    };
    let builder = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
    .map_err(tls_err)?;
    let builder = match client {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(tls_err)?;
    config.alpn_protocols = if enable_http2 {
        vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()]
    } else {
        vec![ALPN_HTTP11.to_vec()]
    };
    Ok(Arc::new(config))
}

/// Watches a certificate/key pair and swaps it into the live listener when it changes.
///
/// Contents are compared rather than mtimes: Kubernetes updates a mounted Secret by swapping a
/// `..data` symlink, and cert-manager may rewrite identical bytes; comparing two small files
/// every interval is cheap and catches both. A pair that fails to load (for example a new key
/// read before its new certificate landed) is logged and counted, the previous pair keeps
/// serving, and the next change is tried again.
pub(crate) struct Reloader {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub current: PemPair,
    pub enable_http2: bool,
    pub interval: Duration,
    /// `--client-ca`'s verifier, kept across reloads.
    pub client: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
}

impl Reloader {
    pub(crate) async fn run(
        mut self,
        live: RustlsConfig,
        metrics: Metrics,
        stop: CancellationToken,
    ) {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await; // the first tick is immediate; the files were just loaded
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let (cert, key) = (self.cert.clone(), self.key.clone());
            let read = tokio::task::spawn_blocking(move || read_pair(&cert, &key)).await;
            let pair = match read {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => {
                    tracing::warn!(error = %crate::report::report(&e), "certificate reload: keeping the current pair");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %crate::report::report(&e), "certificate reload task failed");
                    continue;
                }
            };
            if pair == self.current {
                continue;
            }
            match server_config_with(
                &pair,
                &self.cert,
                &self.key,
                self.enable_http2,
                self.client.clone(),
            ) {
                Ok(config) => {
                    live.reload_from_config(config);
                    metrics.tls_cert_reloads.with_label_values(&["ok"]).inc();
                    record_expiry(&metrics, &pair.cert);
                    tracing::info!(cert = %self.cert.display(), "serving certificate reloaded");
                }
                Err(e) => {
                    metrics.tls_cert_reloads.with_label_values(&["error"]).inc();
                    tracing::warn!(error = %crate::report::report(&e), "certificate files changed but cannot be used; keeping the current pair");
                }
            }
            self.current = pair;
        }
    }
}

/// Swaps the pair `--tls-mode self` keeps into the live listener each time it changes.
pub(crate) struct ManagedReloader {
    pub source: super::ManagedTls,
    pub enable_http2: bool,
    /// `--client-ca`'s verifier, kept across reloads.
    pub client: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
}

impl ManagedReloader {
    pub(crate) async fn run(
        mut self,
        live: RustlsConfig,
        metrics: Metrics,
        stop: CancellationToken,
    ) {
        let label = PathBuf::from("<tls-mode self>");
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = self.source.0.changed() => if changed.is_err() { return },
            }
            let pair = {
                let p = self.source.0.borrow_and_update();
                PemPair {
                    cert: p.cert_pem.clone(),
                    key: p.key_pem.clone(),
                }
            };
            match server_config_with(
                &pair,
                &label,
                &label,
                self.enable_http2,
                self.client.clone(),
            ) {
                Ok(config) => {
                    live.reload_from_config(config);
                    metrics.tls_cert_reloads.with_label_values(&["ok"]).inc();
                    record_expiry(&metrics, &pair.cert);
                    tracing::info!("serving certificate swapped (self-managed)");
                }
                Err(e) => {
                    metrics.tls_cert_reloads.with_label_values(&["error"]).inc();
                    tracing::warn!(error = %crate::report::report(&e), "self-managed certificate cannot be used; keeping the current pair");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> PemPair {
        let b = crate::certs::self_signed(&["localhost".into()]).unwrap();
        PemPair {
            cert: b.cert_pem.into_bytes(),
            key: b.key_pem.into_bytes(),
        }
    }

    #[test]
    fn alpn_offers_h2_only_when_enabled() {
        let p = pair();
        let c = server_config(&p, Path::new("c"), Path::new("k"), false).unwrap();
        assert_eq!(c.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let c = server_config(&p, Path::new("c"), Path::new("k"), true).unwrap();
        assert_eq!(c.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    }

    #[test]
    fn errors_name_the_file_at_fault() {
        let good = pair();
        let bad_cert = PemPair {
            cert: b"not a certificate".to_vec(),
            key: good.key.clone(),
        };
        let e = server_config(
            &bad_cert,
            Path::new("/x/tls.crt"),
            Path::new("/x/tls.key"),
            false,
        )
        .unwrap_err();
        assert_eq!(e.metric_label(), "invalid_cert");
        assert!(e.to_string().contains("/x/tls.crt"), "{e}");

        let bad_key = PemPair {
            cert: good.cert.clone(),
            key: b"-----BEGIN NOTHING-----\n-----END NOTHING-----\n".to_vec(),
        };
        let e = server_config(
            &bad_key,
            Path::new("/x/tls.crt"),
            Path::new("/x/tls.key"),
            false,
        )
        .unwrap_err();
        assert_eq!(e.metric_label(), "invalid_key");
        assert!(e.to_string().contains("/x/tls.key"), "{e}");

        let other = pair();
        let mismatch = PemPair {
            cert: good.cert.clone(),
            key: other.key,
        };
        let e = server_config(
            &mismatch,
            Path::new("/x/tls.crt"),
            Path::new("/x/tls.key"),
            false,
        )
        .unwrap_err();
        assert_eq!(e.metric_label(), "tls_config");
        assert!(!e.to_string().contains('\n'));

        let e = read_pair(
            Path::new("/nonexistent/tls.crt"),
            Path::new("/nonexistent/tls.key"),
        )
        .err()
        .unwrap();
        assert!(
            e.to_string()
                .starts_with("cannot read TLS file /nonexistent/tls.crt"),
            "{e}"
        );
    }
}
