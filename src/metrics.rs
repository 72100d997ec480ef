//! One Prometheus registry for the whole process.
//!
//! Every subsystem registers its series into the [`Metrics::registry`] it is handed, instead of
//! the `prometheus` crate's global default registry, so tests can build independent instances
//! and assert on exact counts. `/metrics` on both listeners renders [`Metrics::render`].
//!
//! Series owned here: HTTP request count and duration by route and status, TLS certificate
//! reloads, and the process collector (CPU, resident memory, open fds, start time) on Linux.
//!
//! Label cardinality is bounded by the callers: `route` is the matched route template (or
//! `unmatched`), never the raw path, and `method` is one of the standard methods or `OTHER`.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

/// Errors from building or rendering metrics.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A series could not be created or registered (duplicate name, bad label set).
    #[error("registering metric: {0}")]
    Register(#[from] prometheus::Error),
}

/// Latency buckets (seconds) for request handlers: admission and extender answers are expected in
/// well under a millisecond, so the low end is fine-grained.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// The process-wide registry plus the HTTP series every listener records.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// `tephra_http_requests_total{route, method, status}`.
    pub http_requests: IntCounterVec,
    /// `tephra_http_request_duration_seconds{route, method, status}`.
    pub http_duration: HistogramVec,
    /// `tephra_tls_cert_reloads_total{result}`: `ok` when rotated certificate files were loaded,
    /// `error` when changed files could not be loaded (the previous pair keeps serving).
    pub tls_cert_reloads: IntCounterVec,
    /// `tephra_tls_certificate_expiry_timestamp_seconds{kind}`: when the certificate served
    /// (`serving`) and the earliest-expiring CA of its chain (`ca`, when the chain has one) end,
    /// as Unix seconds; set at start and on every reload.
    pub tls_cert_expiry: prometheus::GaugeVec,
    /// `tephra_leader_is_leader`: 1 while this replica runs the leader-only tasks (always 1
    /// with leader election off), else 0.
    pub leader: prometheus::IntGauge,
    /// `tephra_tls_ca_bundle_certificates`: CAs in the bundle `--tls-mode self` serves under
    /// and publishes (2 while a CA rotation's overlap lasts); absent in files mode.
    pub tls_ca_bundle: prometheus::IntGauge,
    /// `tephra_tls_self_steps_total{step}`: rotation steps the leader took in `--tls-mode self`
    /// (`publish`, `add_ca`, `renew_serving`, `drop_ca`, `restore`).
    pub tls_self_steps: IntCounterVec,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A fresh registry with the HTTP series and (on Linux) the process collector registered.
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let http_requests = IntCounterVec::new(
            Opts::new(
                "tephra_http_requests_total",
                "HTTP requests answered, by route and status.",
            ),
            &["route", "method", "status"],
        )?;
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "tephra_http_request_duration_seconds",
                "Time from request to response headers, by route and status.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["route", "method", "status"],
        )?;
        let tls_cert_reloads = IntCounterVec::new(
            Opts::new(
                "tephra_tls_cert_reloads_total",
                "Serving certificate reloads after the files changed, by result.",
            ),
            &["result"],
        )?;
        registry.register(Box::new(http_requests.clone()))?;
        registry.register(Box::new(http_duration.clone()))?;
        registry.register(Box::new(tls_cert_reloads.clone()))?;
        let tls_cert_expiry = prometheus::GaugeVec::new(
            Opts::new(
                "tephra_tls_certificate_expiry_timestamp_seconds",
                "When the served certificate (kind=serving) and its chain's CA (kind=ca) expire, Unix seconds.",
            ),
            &["kind"],
        )?;
        let leader = prometheus::IntGauge::new(
            "tephra_leader_is_leader",
            "1 while this replica leads (runs the controllers, the session and the extender's answers), else 0.",
        )?;
        let tls_ca_bundle = prometheus::IntGauge::new(
            "tephra_tls_ca_bundle_certificates",
            "CAs in the self-managed CA bundle (2 during a CA rotation's overlap: restart kube-scheduler within it).",
        )?;
        let tls_self_steps = IntCounterVec::new(
            Opts::new(
                "tephra_tls_self_steps_total",
                "Self-managed certificate steps taken by the leader, by step.",
            ),
            &["step"],
        )?;
        registry.register(Box::new(tls_cert_expiry.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        registry.register(Box::new(tls_ca_bundle.clone()))?;
        registry.register(Box::new(tls_self_steps.clone()))?;
        // Present from the start (at 0) so an alert on `increase(...{result="error"})` has a series.
        for result in ["ok", "error"] {
            tls_cert_reloads.with_label_values(&[result]);
        }
        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        Ok(Self {
            registry,
            http_requests,
            http_duration,
            tls_cert_reloads,
            tls_cert_expiry,
            leader,
            tls_ca_bundle,
            tls_self_steps,
        })
    }

    /// The registry subsystems add their own series to.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Every series in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec only fails on metric families with invalid names, which
        // `register` already refuses; an empty page is the safe answer if it ever happens.
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .is_err()
        {
            buf.clear();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_http_series_after_a_request_is_recorded() {
        let m = Metrics::new().unwrap();
        m.http_requests
            .with_label_values(&["/healthz", "GET", "200"])
            .inc();
        m.http_duration
            .with_label_values(&["/healthz", "GET", "200"])
            .observe(0.0002);
        let text = m.render();
        assert!(
            text.contains(
                r#"tephra_http_requests_total{method="GET",route="/healthz",status="200"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains("tephra_http_request_duration_seconds_bucket"),
            "{text}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_metrics_are_exported() {
        let text = Metrics::new().unwrap().render();
        for name in [
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_cpu_seconds_total",
            "process_start_time_seconds",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
    }

    #[test]
    fn two_instances_do_not_share_counts() {
        let a = Metrics::new().unwrap();
        let b = Metrics::new().unwrap();
        a.http_requests
            .with_label_values(&["/x", "GET", "404"])
            .inc();
        assert!(!b.render().contains("route=\"/x\""));
    }
}
