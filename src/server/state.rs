//! What the health, readiness and metrics handlers share with the listeners.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::Limits;
use crate::metrics::Metrics;
use crate::sync::lock;

/// The readiness condition [`super::serve`] owns: true while the HTTPS listener accepts
/// connections, false before it is bound and again once draining starts.
pub const TLS_CONDITION: &str = "tls";

/// Cloneable state behind `/healthz`, `/readyz` and `/metrics`.
///
/// Readiness is the conjunction of named conditions. The server registers [`TLS_CONDITION`];
/// other subsystems may add theirs (for example "caches synced") with
/// [`ServerState::set_condition`], and `/readyz` names the ones still false.
#[derive(Clone, Debug)]
pub struct ServerState {
    inner: Arc<Inner>,
    limits: Limits,
}

#[derive(Debug)]
struct Inner {
    metrics: Metrics,
    conditions: Mutex<BTreeMap<String, bool>>,
    ready_tx: watch::Sender<bool>,
    addrs: Mutex<Addrs>,
}

#[derive(Debug, Default)]
struct Addrs {
    https: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
    ca_pem: Option<String>,
}

impl ServerState {
    /// New state around the process's metrics; not ready until the TLS listener is serving.
    pub fn new(metrics: Metrics) -> Self {
        let (ready_tx, _) = watch::channel(false);
        let mut conditions = BTreeMap::new();
        conditions.insert(TLS_CONDITION.to_string(), false);
        Self {
            inner: Arc::new(Inner {
                metrics,
                conditions: Mutex::new(conditions),
                ready_tx,
                addrs: Mutex::new(Addrs::default()),
            }),
            limits: Limits::default(),
        }
    }

    /// The same state with other request limits; [`super::router`] reads them when it builds
    /// the layers, and [`super::serve`] sets them from [`super::ServerConfig::limits`].
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The request limits the routers apply.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The process-wide metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Sets (or adds) a readiness condition. `/readyz` is 200 only when every condition is true.
    pub fn set_condition(&self, name: &str, ready: bool) {
        let all_ready = {
            let mut conditions = lock(&self.inner.conditions);
            conditions.insert(name.to_string(), ready);
            conditions.values().all(|v| *v)
        };
        self.inner.ready_tx.send_replace(all_ready);
    }

    /// True when every readiness condition holds.
    pub fn is_ready(&self) -> bool {
        *self.inner.ready_tx.borrow()
    }

    /// The conditions that are currently false, sorted by name.
    pub fn not_ready(&self) -> Vec<String> {
        lock(&self.inner.conditions)
            .iter()
            .filter(|(_, ready)| !**ready)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Resolves once the state is ready (immediately if it already is).
    pub async fn wait_ready(&self) {
        let mut rx = self.inner.ready_tx.subscribe();
        // The sender lives in `self`, so `wait_for` cannot fail while we hold it.
        let _ = rx.wait_for(|ready| *ready).await;
    }

    /// The address the HTTPS listener is bound to, once bound (useful with port 0).
    pub fn https_addr(&self) -> Option<SocketAddr> {
        lock(&self.inner.addrs).https
    }

    /// The address the plain-HTTP metrics listener is bound to, once bound.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        lock(&self.inner.addrs).metrics
    }

    /// In self-signed mode, the PEM of the CA that signed the serving certificate, so in-process
    /// clients (the embedded scheduler stand-in) can verify the server instead of skipping it.
    pub fn self_signed_ca_pem(&self) -> Option<String> {
        lock(&self.inner.addrs).ca_pem.clone()
    }

    pub(crate) fn set_addrs(&self, https: SocketAddr, metrics: Option<SocketAddr>) {
        let mut addrs = lock(&self.inner.addrs);
        addrs.https = Some(https);
        addrs.metrics = metrics;
    }

    pub(crate) fn set_self_signed_ca(&self, pem: Option<String>) {
        lock(&self.inner.addrs).ca_pem = pem;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_condition_holds() {
        let s = ServerState::new(Metrics::new().unwrap());
        assert!(!s.is_ready());
        assert_eq!(s.not_ready(), vec![TLS_CONDITION.to_string()]);
        s.set_condition("caches", false);
        s.set_condition(TLS_CONDITION, true);
        assert!(!s.is_ready());
        assert_eq!(s.not_ready(), vec!["caches".to_string()]);
        s.set_condition("caches", true);
        assert!(s.is_ready());
        s.clone().set_condition(TLS_CONDITION, false);
        assert!(!s.is_ready(), "clones share the flag");
    }
}
