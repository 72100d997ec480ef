//! What tephra's controllers decide, as functions of plain objects: the edges in the service
//! binary read the shared caches, call these, and write what they return.
//!
//! ```text
//!   cronjob:   schedule:: cron expressions and their next times; plan:: what a CronJob is due
//!   hypernode: the node counts HyperNodes hold
//!   native:    the scheduling.k8s.io Workload and PodGroup mirroring a Volcano PodGroup
//!   job:       request ─▶ policy::apply_policies ─▶ (action, delay) ─▶ state::step ─▶ Step
//!              build:: pods, PodGroup, PVCs of a vcJob; plugins:: (env, svc, ssh, mpi,
//!              pytorch, tensorflow, ray, hcclrank) edit them; status:: counts and conditions
//!   podgroup:  build:: the PodGroup a plain workload's pod calls for; resources:: pod requests
//!   queue:     state:: a Queue's next state and status, its hierarchy
//! ```
//!
//! This crate owns those decisions. It may depend on `tephra-api`, `tephra-scheduler` (how a
//! pod's requests count), k8s-openapi's types, serde and the ssh plugin's key generation,
//! never on a Kubernetes client, an HTTP stack or an async runtime (the `pure_crates` test of
//! the workspace root checks this).
#![forbid(unsafe_code)]

pub mod cronjob;
pub mod hypernode;
pub mod job;
pub mod native;
pub mod podgroup;
pub mod queue;
