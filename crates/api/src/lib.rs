//! Volcano's API types, re-implemented in Rust, and the CRDs generated from them.
//!
//! This crate owns the wire shapes every other part of tephra agrees on. It may depend on
//! serde, k8s-openapi and kube's derive macros, never on a client, a runtime or the network
//! (the `pure_crates` integration test of the workspace root checks that).
//!
//! ```text
//!   batch.volcano.sh/v1alpha1        scheduling.volcano.sh/v1beta1        bus.volcano.sh/v1alpha1
//!   ┌──────────────┐  controller    ┌──────────────┐  spec.queue   ┌─────────┐   ┌──────────┐
//!   │ Job (vcjob)  │ ─────────────▶ │ PodGroup (pg)│ ────────────▶ │ Queue(q)│   │ Command  │
//!   │  tasks[]     │  minMember,    │  minMember   │               │ weight, │   │ action,  │
//!   │   template ──┼─▶ pods         │  minResources│               │ state   │   │ target ──┼─▶ Job / Queue
//!   └──────────────┘                └──────────────┘               └─────────┘   └──────────┘
//! ```
//!
//! * [`batch`], [`scheduling`], [`bus`]: the resource types. JSON field names are Volcano's
//!   exactly and every field is optional on the wire, so a manifest written for Volcano
//!   deserializes and serializes back without gaining or losing a field.
//! * [`keys`]: every well-known label, annotation, event reason and name Volcano uses.
//! * [`crds`]: the CustomResourceDefinitions (what `tephra crds` prints, and
//!   `manifests/crds/` holds).
//! * [`extender`]: kube-scheduler's extender API (filter, prioritize, bind, preempt), as
//!   kube-scheduler sends and reads it.
//! * [`events`]: the `core/v1` Event tephra writes on the objects it acts on.
//! * [`quantity`]: Kubernetes quantities (`500m`, `2Gi`) read as numbers.
//! * `testing` (feature `testing`, for tests only): small builders
//!   (`Job::test("j").in_queue("q").task("t", 2)`).
//!
//! String-valued enumerations (phases, actions, events, ...) are Rust enums with an
//! `Other(String)` fallback: a value written for a newer Volcano still parses and round-trips.

#![forbid(unsafe_code)]

pub mod batch;
pub mod bus;
pub mod crds;
pub mod cronjob;
pub mod events;
pub mod extender;
pub mod keys;
pub mod quantity;
pub mod scheduling;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod topology;

mod common;

pub use batch::{Job, JobSpec, JobStatus, TaskSpec};
pub use bus::Command;
pub use common::{Duration, ResourceList};
pub use cronjob::{CronJob, CronJobSpec, CronJobStatus};
pub use scheduling::{PodGroup, PodGroupSpec, PodGroupStatus, Queue, QueueSpec, QueueStatus};
pub use topology::{HyperNode, HyperNodeSpec, HyperNodeStatus};

/// Errors of the `api` module: (de)serialising manifests, writing CRD files, parsing durations.
#[derive(Debug, thiserror::Error)]
pub enum TypesError {
    /// A value could not be written as YAML.
    #[error("cannot render YAML: {0}")]
    YamlSerialize(#[from] serde_saphyr::SerializeError),
    /// A value could not be converted through JSON.
    #[error("JSON conversion failed: {0}")]
    Json(#[from] serde_json::Error),
    /// A CRD manifest file could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file or directory that failed.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A string that should be a Go duration (`90s`, `1h30m`) is not one.
    #[error("invalid duration {0:?}: expected a Go duration such as \"90s\" or \"1h30m\"")]
    InvalidDuration(String),
}

impl TypesError {
    /// A short, stable label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            TypesError::YamlSerialize(_) => "yaml",
            TypesError::Json(_) => "json",
            TypesError::Io { .. } => "io",
            TypesError::InvalidDuration(_) => "duration",
        }
    }
}
