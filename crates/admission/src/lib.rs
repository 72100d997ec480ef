//! Volcano-compatible admission webhooks.
//!
//! ```text
//!  POST /jobs/mutate ──┐
//!  POST /pods/validate ┤  http.rs: bytes ─▶ review::parse ─▶ kind checks ┐
//!  ...  (table below)  ┘                                                   │
//!                                                                          ▼
//!        WEBHOOKS[path].review(&Request, &dyn ClusterView, &AdmissionConfig) -> Decision
//!          jobs::{mutate,validate}  pods  podgroups  queues  workloads
//!          hypernodes  jobflows  cronjobs                                  (pure)
//!                                                                          │
//!          review::respond: Allow / Deny(message, code) / Patch / Mutate ◀─┘
//!            Patch(ops): emitted directly (jobs, pods mutate) → base64 RFC 6902
//!            Mutate(object) → patch::diff(original, mutated) → base64 RFC 6902
//!            (no patch at all when nothing changes)
//! ```
//!
//! Every webhook is a pure function of the request, a read-only [`ClusterView`] (filled from the
//! shared watch caches, never a GET on the request path) and the [`AdmissionConfig`]. The
//! service binary's HTTP adapter only parses, dispatches, records metrics and writes the answer.
//!
//! This crate owns every admission decision. It may depend on `tephra-api`, `tephra-names`, `tephra-controllers` (cron schedules),
//! k8s-openapi's types, serde and JSON patching, never on a Kubernetes client, an HTTP stack or
//! an async runtime (the `pure_crates` test of the workspace root checks this).
//!
//! The kind checks: `request.kind` must be one the path serves, and `request.object` /
//! `oldObject` must not say they are of another group or kind ([`Webhook::check_object_kind`]).
//! The value rules Volcano leaves to its CRD schema are in [`bounds`].
//!
//! Public entry points: [`WEBHOOKS`] (every path with its decision) and [`review::parse`].

#![forbid(unsafe_code)]

pub mod bounds;
pub mod cronjobs;
pub mod hypernodes;
pub mod jobflows;
pub mod jobs;
pub mod patch;
pub mod podgroups;
pub mod pods;
pub mod queues;
pub mod review;
pub mod validation;
pub mod view;
pub mod workloads;

#[cfg(test)]
mod testutil;

use serde::Deserialize;
use serde_json::Value;

pub use review::{Decision, Object, Operation, Request, Verdict};
pub use view::{ClusterView, StaticView};

/// Why a review could not be handled at all (answered with HTTP 400 and this one-line reason).
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The body is not JSON.
    #[error("request body is not JSON: {0}")]
    NotJson(serde_json::Error),
    /// The body is JSON but not shaped like an AdmissionReview.
    #[error("request body is not an AdmissionReview: {0}")]
    NotAReview(serde_json::Error),
    /// `apiVersion` is not one we answer.
    #[error(
        "AdmissionReview apiVersion {0:?} is not supported: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1"
    )]
    ApiVersion(String),
    /// `kind` is not AdmissionReview.
    #[error("kind {0:?} is not AdmissionReview")]
    Kind(String),
    /// No `request`.
    #[error("AdmissionReview has no request")]
    NoRequest,
    /// No `request.uid`.
    #[error("AdmissionReview request has no uid")]
    NoUid,
    /// No `request.operation`.
    #[error("AdmissionReview request has no operation")]
    NoOperation,
    /// No `request.kind`, and no object to take it from.
    #[error("AdmissionReview request has no kind")]
    NoKind,
    /// The object is of a kind this path does not serve.
    #[error("{path} admits {expected}, not {got}")]
    WrongKind {
        /// The webhook path.
        path: &'static str,
        /// What it admits.
        expected: String,
        /// What came.
        got: String,
    },
    /// `request.object` (or `oldObject`) says it is of another kind than `request.kind`: a
    /// review that disagrees with itself is refused, never admitted as the kind it claims.
    #[error("{path} reviews {expected}, but request.{field} is {got}")]
    ObjectKind {
        /// The webhook path.
        path: &'static str,
        /// `request.kind`.
        expected: String,
        /// `object` or `oldObject`.
        field: &'static str,
        /// The object's own `apiVersion` and `kind`.
        got: String,
    },
}

impl AdmissionError {
    /// A short, stable label for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            AdmissionError::NotJson(_) => "not_json",
            AdmissionError::NotAReview(_) => "not_a_review",
            AdmissionError::ApiVersion(_) => "api_version",
            AdmissionError::Kind(_) => "kind",
            AdmissionError::NoRequest => "no_request",
            AdmissionError::NoUid => "no_uid",
            AdmissionError::NoOperation => "no_operation",
            AdmissionError::NoKind => "no_kind",
            AdmissionError::WrongKind { .. } => "wrong_kind",
            AdmissionError::ObjectKind { .. } => "object_kind",
        }
    }
}

/// Settings of the webhooks (Volcano's webhook-manager flags that matter here).
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionConfig {
    /// Scheduler names this service serves (`--scheduler-name`); the first is the default
    /// written into vcJobs and workloads.
    pub scheduler_names: Vec<String>,
    /// Deepest allowed queue hierarchy below `root` (`--max-queue-depth`, 5).
    pub max_queue_depth: usize,
    /// Refuse to delete a queue with allocated pods (`--enable-queue-allocated-pods-check`).
    pub queue_allocated_pods_check: bool,
    /// Refuse changes to the root queue's resources (`--enable-root-queue-protection`).
    pub root_queue_protection: bool,
    /// Add the queue-allocation scheduling gate to pods that ask for it (Volcano's
    /// `SchedulingGatesQueueAdmission` feature gate, off by default).
    pub queue_allocation_gate: bool,
    /// Volcano's `--admission-conf` resource groups for pod mutation (empty: none).
    pub resource_groups: Vec<pods::ResourceGroup>,
    /// With the native gang engine: the kube-scheduler profile gang pods are sent to
    /// (`--native-scheduler-name`); `None` with the extender.
    pub native_scheduler: Option<String>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            scheduler_names: vec!["volcano".to_string()],
            max_queue_depth: 5,
            queue_allocated_pods_check: false,
            root_queue_protection: true,
            queue_allocation_gate: false,
            resource_groups: Vec::new(),
            native_scheduler: None,
        }
    }
}

impl AdmissionConfig {
    /// Whether `name` is one of our scheduler names.
    pub fn serves(&self, name: &str) -> bool {
        self.scheduler_names.iter().any(|n| n == name)
    }

    /// The scheduler name written as a default (the first configured, else `volcano`).
    pub fn default_scheduler(&self) -> &str {
        self.scheduler_names
            .first()
            .map(String::as_str)
            .unwrap_or("volcano")
    }
}

/// A webhook's decision function.
pub type ReviewFn = fn(&Request, &dyn ClusterView, &AdmissionConfig) -> Decision;

/// One served path.
pub struct Webhook {
    /// URL path, as in the contract.
    pub path: &'static str,
    /// The `(group, kind)` pairs it admits.
    pub kinds: &'static [(&'static str, &'static str)],
    /// The decision.
    pub review: ReviewFn,
}

/// Every webhook path tephra serves, with what it admits.
pub const WEBHOOKS: &[Webhook] = &[
    Webhook {
        path: "/jobs/mutate",
        kinds: &[("batch.volcano.sh", "Job")],
        review: |r, _, c| jobs::mutate::review(r, c),
    },
    Webhook {
        path: "/jobs/validate",
        kinds: &[("batch.volcano.sh", "Job")],
        review: jobs::validate::review,
    },
    Webhook {
        path: "/pods/mutate",
        kinds: &[("", "Pod")],
        review: |r, _, c| pods::mutate(r, c),
    },
    Webhook {
        path: "/pods/validate",
        kinds: &[("", "Pod")],
        review: |r, _, c| pods::validate(r, c),
    },
    Webhook {
        path: "/podgroups/mutate",
        kinds: &[("scheduling.volcano.sh", "PodGroup")],
        review: podgroups::mutate,
    },
    Webhook {
        path: "/podgroups/validate",
        kinds: &[("scheduling.volcano.sh", "PodGroup")],
        review: podgroups::validate,
    },
    Webhook {
        path: "/queues/mutate",
        kinds: &[("scheduling.volcano.sh", "Queue")],
        review: |r, _, _| queues::mutate(r),
    },
    Webhook {
        path: "/queues/validate",
        kinds: &[("scheduling.volcano.sh", "Queue")],
        review: queues::validate,
    },
    Webhook {
        path: "/deployments/mutate",
        kinds: &[("apps", "Deployment"), ("apps", "StatefulSet")],
        review: |r, _, c| workloads::mutate(r, c),
    },
    Webhook {
        path: "/deployments/validate",
        kinds: &[("apps", "Deployment"), ("apps", "StatefulSet")],
        review: workloads::validate,
    },
    Webhook {
        path: "/hypernodes/validate",
        kinds: &[("topology.volcano.sh", "HyperNode")],
        review: hypernodes::validate,
    },
    Webhook {
        path: "/cronjobs/validate",
        kinds: &[("batch.volcano.sh", "CronJob")],
        review: cronjobs::validate,
    },
    Webhook {
        path: "/jobflows/validate",
        kinds: &[("flow.volcano.sh", "JobFlow")],
        review: jobflows::validate,
    },
];

impl Webhook {
    /// Checks that the request is about a kind this path admits.
    pub fn check_kind(&self, req: &Request) -> Result<(), AdmissionError> {
        if self
            .kinds
            .iter()
            .any(|(g, k)| req.kind.group == *g && req.kind.kind == *k)
        {
            return Ok(());
        }
        let expected = self
            .kinds
            .iter()
            .map(|(g, k)| {
                if g.is_empty() {
                    (*k).to_string()
                } else {
                    format!("{g} {k}")
                }
            })
            .collect::<Vec<_>>()
            .join(" or ");
        Err(AdmissionError::WrongKind {
            path: self.path,
            expected,
            got: req.kind.to_string(),
        })
    }

    /// Checks that `request.object` and `request.oldObject` do not claim another kind than
    /// `request.kind` (already checked to be one this path admits). An object without
    /// `apiVersion`/`kind` is taken to be what the request says; a present one must agree in
    /// group and kind (not version: the API server may convert between versions).
    pub fn check_object_kind(&self, req: &Request) -> Result<(), AdmissionError> {
        let objects = [
            ("object", req.object.as_ref()),
            ("oldObject", req.old_object.as_ref()),
        ];
        for (field, obj) in objects {
            let Some(obj) = obj else { continue };
            let (api_version, kind) = obj.type_meta();
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            let kind_differs = !kind.is_empty() && kind != req.kind.kind;
            let group_differs = !api_version.is_empty() && group != req.kind.group;
            if kind_differs || group_differs {
                let got = match (api_version.is_empty(), kind.is_empty()) {
                    (false, false) => format!("{api_version} {kind}"),
                    (true, false) => kind,
                    _ => format!("of apiVersion {api_version}"),
                };
                return Err(AdmissionError::ObjectKind {
                    path: self.path,
                    expected: req.kind.to_string(),
                    field,
                    got,
                });
            }
        }
        Ok(())
    }
}

/// Decodes `request.object` as `T` (which may borrow from it). A missing or unreadable object is a well-formed review
/// about a bad object: answered `allowed: false` (code 400) with the reason.
pub(crate) fn decode<'a, T: Deserialize<'a>>(req: &'a Request) -> Result<T, Decision> {
    let Some(obj) = req.object.as_ref() else {
        return Err(Decision::bad_request(format!(
            "{} request for {} has no object",
            req.operation.as_str(),
            req.kind.kind
        )));
    };
    decode_object(obj, &req.kind.kind)
}

/// A copy of `request.object` for a mutation to change (`null` if absent, which [`decode`]
/// has already refused).
pub(crate) fn working_copy(req: &Request) -> Value {
    req.object
        .as_ref()
        .map_or(Value::Null, |o| o.value().clone())
}

/// Decodes `request.oldObject` as `T`.
pub(crate) fn decode_old<'a, T: Deserialize<'a>>(req: &'a Request) -> Result<T, Decision> {
    let Some(obj) = req.old_object.as_ref() else {
        return Err(Decision::bad_request(format!(
            "{} request for {} has no oldObject",
            req.operation.as_str(),
            req.kind.kind
        )));
    };
    decode_object(obj, &req.kind.kind)
}

fn decode_object<'a, T: Deserialize<'a>>(
    obj: &'a review::Object,
    kind: &str,
) -> Result<T, Decision> {
    obj.decode()
        .map_err(|e| Decision::bad_request(format!("cannot decode the {kind} object: {e}")))
}
