//! The admission webhooks' edge: [`http`] turns an HTTPS request into a review for the
//! `tephra-admission` crate's pure decisions and its answer back into a response, recording
//! [`metrics`] on the way.
//!
//! ```text
//!  POST /jobs/mutate … ─▶ http: bytes ─▶ review::parse ─▶ kind checks ─▶ WEBHOOKS[path].review
//!                                                                          (tephra-admission)
//!  response ◀─ review::respond ◀─ Decision ◀───────────────────────────────────┘
//! ```
//!
//! The decision modules are the pure crate's, re-exported here so callers name them as one
//! admission.

pub mod http;
pub mod metrics;

use std::sync::Arc;

pub use http::router;
pub use metrics::AdmissionMetrics;
pub use tephra_admission::{
    AdmissionConfig, AdmissionError, ClusterView, Decision, Object, Operation, Request, ReviewFn,
    StaticView, Verdict, WEBHOOKS, Webhook, bounds, hypernodes, jobflows, jobs, patch, podgroups,
    pods, queues, review, validation, view, workloads,
};

/// Everything the handlers need: settings, the cluster view and the metrics.
pub struct AdmissionContext {
    /// Webhook settings.
    pub config: AdmissionConfig,
    /// Read-only lookups (queues, namespaces), fed from the watch caches.
    pub view: Arc<dyn ClusterView + Send + Sync>,
    /// Request counts and latency.
    pub metrics: AdmissionMetrics,
}

impl std::fmt::Debug for AdmissionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionContext")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
