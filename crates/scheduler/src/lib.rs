//! The gang scheduling session: from what the cluster holds, decide which gangs may start
//! (`enqueue`) and where every pod of a starting gang goes (`allocate`, `backfill`), all of a
//! gang or none of it, with queues sharing the cluster by weight. Volcano's session semantics
//! (`pkg/scheduler/`), as functions of plain data.
//!
//! ```text
//!  objects ──▶ index (ClusterIndex: nodes + usage, pods, PodGroups, Queues, HyperNodes,
//!                     │ assumed; topology:: HyperNodes resolved to their nodes)
//!                     │ snapshot()  (a copy; the index keeps changing meanwhile)
//!                     ▼
//!  config ──▶ session::Session ── actions (enqueue → allocate → backfill [→ preempt, reclaim];
//!                     │            actions::topology keeps a gang inside one HyperNode)
//!                     │           plugins (priority, gang, conformance, overcommit, drf,
//!                     │                    proportion, predicates, nodeorder, binpack)
//!                     ▼
//!              outcome::Outcome: plan (pod → node), PodGroup / Queue status, Events
//! ```
//!
//! [`sim`] runs the same session over simulated time (a job controller, kube-scheduler and a
//! kubelet played in memory) and checks the scheduling guarantees as named properties;
//! [`whatif`] plays a real cluster's state through it (`tephra simulate`).
//!
//! This crate owns every scheduling decision. It may depend on `tephra-api`, k8s-openapi's
//! types and serde, never on a Kubernetes client, an HTTP stack or an async runtime: the service binary feeds the index from its watch caches
//! and carries the outcome out (the `pure_crates` test of the workspace root checks this).
#![forbid(unsafe_code)]

pub mod actions;
pub mod config;
pub mod framework;
pub mod index;
pub mod ix;
pub mod kind_fits;
pub mod model;
pub mod outcome;
pub mod pending;
pub mod plugins;
pub mod resource;
pub mod session;
pub mod sim;
pub mod subgroup;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_native;
#[cfg(test)]
mod tests_reclaim;
#[cfg(test)]
mod tests_topology;
pub mod topology;
pub mod whatif;

pub use config::{ConfigError, SchedulerConf};
pub use index::{ClusterIndex, PodDigest, Snapshot, SnapshotSource};
pub use outcome::{Outcome, Plan, run_session};
