//! Binding the listeners, serving until cancelled, and draining.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use axum_server::{Control, Handle};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::tls::{
    ManagedReloader, PemPair, Reloader, client_verifier, read_pair, record_expiry,
    server_config_with,
};
use super::{
    ServerConfig, ServerError, ServerState, TLS_CONDITION, TlsSource, metrics_router, router,
};
use crate::certs;

/// A connection that has not sent its first request within this time is closed (slow-loris
/// clients would otherwise hold sockets open indefinitely). The TLS handshake has its own
/// 10 s bound in axum-server.
const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 streams per connection when HTTP/2 is enabled; hyper's Rapid Reset mitigation
/// (a bound on pending-accept reset streams) applies on top.
const H2_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Extra time, past the drain timeout, to wait for listener tasks after forcing them closed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Both listeners bound and the TLS material loaded, not yet serving. Made by [`bind`], started
/// by [`BoundServer::run`].
pub struct BoundServer {
    config: ServerConfig,
    state: ServerState,
    app: Router,
    /// Routes the metrics listener serves beside the health paths (the web view).
    metrics_extra: Router,
    https: TcpListener,
    metrics: Option<TcpListener>,
    tls: RustlsConfig,
    reloader: Option<Reloader>,
    managed: Option<ManagedReloader>,
}

impl std::fmt::Debug for BoundServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundServer")
            .field("https", &self.https_addr())
            .field("metrics", &self.metrics_addr())
            .finish_non_exhaustive()
    }
}

/// Loads (or makes) the certificate and binds both listeners, so every start-up error — bad
/// files, address in use — surfaces here as one [`ServerError`] before anything is served.
/// The bound addresses are also recorded in `state` (port 0 resolves here).
pub fn bind(
    config: ServerConfig,
    extra: Router,
    state: ServerState,
) -> Result<BoundServer, ServerError> {
    let state = state.with_limits(config.limits);
    let client = config
        .client_ca
        .as_deref()
        .map(client_verifier)
        .transpose()?;
    let mut managed = None;
    let (tls_config, reloader) = match &config.tls {
        TlsSource::Managed(source) => {
            let pair = {
                let p = source.0.borrow();
                PemPair {
                    cert: p.cert_pem.clone(),
                    key: p.key_pem.clone(),
                }
            };
            let label = PathBuf::from("<tls-mode self>");
            let tls =
                server_config_with(&pair, &label, &label, config.enable_http2, client.clone())?;
            record_expiry(state.metrics(), &pair.cert);
            state.set_self_signed_ca(None);
            managed = Some(ManagedReloader {
                source: source.clone(),
                enable_http2: config.enable_http2,
                client,
            });
            (tls, None)
        }
        TlsSource::Files { cert, key } => {
            let pair = read_pair(cert, key)?;
            let tls = server_config_with(&pair, cert, key, config.enable_http2, client.clone())?;
            record_expiry(state.metrics(), &pair.cert);
            let reloader = Reloader {
                cert: cert.clone(),
                key: key.clone(),
                current: pair,
                enable_http2: config.enable_http2,
                interval: config.cert_reload_interval,
                client,
            };
            state.set_self_signed_ca(None);
            (tls, Some(reloader))
        }
        TlsSource::SelfSigned => {
            let mut names = self_signed_names(config.listen.ip());
            names.extend(config.self_signed_names.iter().cloned());
            let bundle = certs::self_signed(&names)?;
            tracing::info!(
                names = %names.join(","),
                "no --tls-cert/--tls-key given: serving a self-signed certificate made at start \
                 (clients must trust its CA; use `tephra certs` or cert-manager in a cluster)"
            );
            let pair = PemPair {
                cert: bundle.cert_pem.clone().into_bytes(),
                key: bundle.key_pem.clone().into_bytes(),
            };
            let label = PathBuf::from("<self-signed>");
            let tls = server_config_with(&pair, &label, &label, config.enable_http2, client)?;
            let chain = format!("{}{}", bundle.cert_pem, bundle.ca_cert_pem);
            record_expiry(state.metrics(), chain.as_bytes());
            state.set_self_signed_ca(Some(bundle.ca_cert_pem.clone()));
            (tls, None)
        }
    };

    let https = bind_tcp("https", config.listen)?;
    let metrics = config
        .metrics_listen
        .map(|addr| bind_tcp("metrics", addr))
        .transpose()?;
    let https_addr = local_addr("https", config.listen, &https)?;
    let metrics_addr = match (&metrics, config.metrics_listen) {
        (Some(l), Some(addr)) => Some(local_addr("metrics", addr, l)?),
        _ => None,
    };
    state.set_addrs(https_addr, metrics_addr);

    Ok(BoundServer {
        app: router(extra, state.clone()),
        metrics_extra: Router::new(),
        config,
        state,
        https,
        metrics,
        tls: RustlsConfig::from_config(tls_config),
        reloader,
        managed,
    })
}

/// [`bind`] then [`BoundServer::run`]: serves `extra` plus the health and metrics routes over
/// HTTPS (and the plain metrics listener) until `shutdown` is cancelled, then drains.
pub async fn serve(
    config: ServerConfig,
    extra: Router,
    state: ServerState,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    bind(config, extra, state)?.run(shutdown).await
}

impl BoundServer {
    /// The HTTPS listener's address.
    pub fn https_addr(&self) -> SocketAddr {
        self.https.local_addr().unwrap_or(self.config.listen)
    }

    /// The plain-HTTP metrics listener's address, if there is one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        let configured = self.config.metrics_listen?;
        Some(
            self.metrics
                .as_ref()
                .and_then(|l| l.local_addr().ok())
                .unwrap_or(configured),
        )
    }

    /// Serves `routes` on the metrics listener too, beside the health paths and `/metrics`
    /// (ignored when there is no metrics listener).
    pub fn with_metrics_routes(mut self, routes: Router) -> Self {
        self.metrics_extra = routes;
        self
    }

    /// The state shared with the handlers (readiness, metrics, addresses).
    pub fn state(&self) -> &ServerState {
        &self.state
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, marks the server not ready,
    /// and lets in-flight requests finish for at most [`ServerConfig::drain_timeout`] before
    /// closing what is left. Returns `Ok` after a requested shutdown, an error if a listener
    /// failed on its own.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServerError> {
        let BoundServer {
            config,
            state,
            app,
            metrics_extra,
            https,
            metrics,
            tls,
            reloader,
            managed,
        } = self;
        let control = Control::new();
        let https_handle: Handle<SocketAddr> = Handle::with_control(control.clone());

        let mut https_server = axum_server::from_tcp_rustls(https, tls.clone())
            .map_err(|source| ServerError::Serve {
                listener: "https",
                source,
            })?
            .handle(https_handle.clone())
            .first_request_timeout(FIRST_REQUEST_TIMEOUT)
            .accept_error_handler(|peer, err| {
                // TLS handshake failures (old protocol versions, untrusted clients, scanners)
                // land here; they are the client's problem, not the server's.
                let peer = peer.map_or_else(|| "unknown".to_string(), ToString::to_string);
                tracing::debug!(%peer, error = %crate::report::report(err), "connection not accepted");
            });
        if config.enable_http2 {
            https_server
                .http_builder()
                .http2()
                .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS);
        } else {
            https_server = https_server.http1_only();
        }
        let mut https_task = tokio::spawn(https_server.serve(app.into_make_service()));

        let mut metrics_task = match metrics {
            Some(listener) => {
                let server = axum_server::from_tcp(listener)
                    .map_err(|source| ServerError::Serve {
                        listener: "metrics",
                        source,
                    })?
                    .handle(Handle::with_control(control.clone()))
                    .first_request_timeout(FIRST_REQUEST_TIMEOUT)
                    .http1_only();
                Some(tokio::spawn(server.serve(
                    metrics_router(metrics_extra, state.clone()).into_make_service(),
                )))
            }
            None => None,
        };

        let stop_background = CancellationToken::new();
        let reload_task = reloader.map(|r| {
            tokio::spawn(r.run(
                tls.clone(),
                state.metrics().clone(),
                stop_background.clone(),
            ))
        });

        let managed_task = managed.map(|r| {
            tokio::spawn(r.run(
                tls.clone(),
                state.metrics().clone(),
                stop_background.clone(),
            ))
        });

        // Readiness is flipped in this task only, so it cannot turn true after draining began.
        let listening = https_handle.listening();
        tokio::pin!(listening);
        let mut announced = false;
        let early = loop {
            tokio::select! {
                _ = shutdown.cancelled() => break None,
                addr = &mut listening, if !announced => {
                    announced = true;
                    if let Some(addr) = addr {
                        state.set_condition(TLS_CONDITION, true);
                        tracing::info!(%addr, http2 = config.enable_http2, "serving HTTPS");
                    }
                }
                r = &mut https_task => break Some(("https", r)),
                Some(r) = join_opt(&mut metrics_task) => break Some(("metrics", r)),
            }
        };

        // Stop advertising readiness first, so load balancers stop sending while we drain.
        state.set_condition(TLS_CONDITION, false);
        stop_background.cancel();
        control.graceful_shutdown(Some(config.drain_timeout));
        tracing::info!(drain_timeout = ?config.drain_timeout, "draining connections");

        let early_listener = early.as_ref().map(|(name, _)| *name);
        let wait_all = async {
            let https_result = match early_listener {
                Some("https") => None,
                _ => Some(("https", (&mut https_task).await)),
            };
            let metrics_result = match (&mut metrics_task, early_listener) {
                (Some(_), Some("metrics")) | (None, _) => None,
                (Some(task), _) => Some(("metrics", task.await)),
            };
            if let Some(task) = reload_task {
                let _ = task.await;
            }
            if let Some(task) = managed_task {
                let _ = task.await;
            }
            (https_result, metrics_result)
        };
        let finished = tokio::time::timeout(config.drain_timeout + STOP_GRACE, wait_all).await;

        if let Some((listener, result)) = early {
            // A listener that ended while nobody asked it to is an error even when it says Ok.
            return Err(match flatten(listener, result) {
                Err(e) => e,
                Ok(()) => ServerError::Stopped {
                    listener,
                    reason: "returned without being asked to stop".into(),
                },
            });
        }
        match finished {
            Ok((https_result, metrics_result)) => {
                for (listener, result) in https_result.into_iter().chain(metrics_result) {
                    flatten(listener, result)?;
                }
                tracing::info!("server stopped");
                Ok(())
            }
            Err(_) => {
                // axum-server closes connections itself when the drain time is up; reaching
                // this means a task did not notice. Force it and report a clean stop anyway:
                // the caller asked for shutdown and shutdown has happened.
                control.shutdown();
                https_task.abort();
                if let Some(task) = metrics_task {
                    task.abort();
                }
                tracing::warn!("listeners did not stop within the drain time; closed them");
                Ok(())
            }
        }
    }
}

type ListenerResult = Result<std::io::Result<()>, tokio::task::JoinError>;

fn flatten(listener: &'static str, result: ListenerResult) -> Result<(), ServerError> {
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(ServerError::Serve { listener, source }),
        Err(join) => Err(ServerError::Stopped {
            listener,
            reason: join.to_string(),
        }),
    }
}

/// Awaits an optional task; never resolves when there is none.
async fn join_opt(task: &mut Option<JoinHandle<std::io::Result<()>>>) -> Option<ListenerResult> {
    match task {
        Some(task) => Some(task.await),
        None => std::future::pending().await,
    }
}

fn bind_tcp(listener: &'static str, addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr).map_err(|source| ServerError::Bind {
        listener,
        addr,
        source,
    })
}

fn local_addr(
    listener: &'static str,
    addr: SocketAddr,
    l: &TcpListener,
) -> Result<SocketAddr, ServerError> {
    l.local_addr().map_err(|source| ServerError::Bind {
        listener,
        addr,
        source,
    })
}

/// Names the self-signed certificate covers: loopback by name and address, plus the listen
/// address when it is a specific one (a client dialling that IP can then verify it).
fn self_signed_names(listen_ip: IpAddr) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        Ipv4Addr::LOCALHOST.to_string(),
        Ipv6Addr::LOCALHOST.to_string(),
    ];
    if !listen_ip.is_unspecified() && !listen_ip.is_loopback() {
        names.push(listen_ip.to_string());
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_names_cover_loopback_and_a_specific_listen_ip() {
        let n = self_signed_names("0.0.0.0".parse().unwrap());
        assert_eq!(n, vec!["localhost", "127.0.0.1", "::1"]);
        let n = self_signed_names("10.1.2.3".parse().unwrap());
        assert!(n.contains(&"10.1.2.3".to_string()));
    }
}
