//! The gang scheduling session: from what the cluster holds, decide which gangs may start
//! (`enqueue`) and where every pod of a starting gang goes (`allocate`, `backfill`), all of a
//! gang or none of it, with queues sharing the cluster by weight. Volcano's session semantics
//! (`pkg/scheduler/`), behind kube-scheduler's extender API instead of a scheduler of its own.
//!
//! ```text
//!  watch events ──▶ index (ClusterIndex: nodes + usage, pods, PodGroups, Queues, assumed)
//!                     │ snapshot()  (a copy; the index keeps changing meanwhile)
//!                     ▼
//!  config ──▶ session::Session ── actions (enqueue → allocate → backfill [→ preempt, reclaim])
//!                     │           plugins (priority, gang, conformance, overcommit, drf,
//!                     │                    proportion, predicates, nodeorder, binpack)
//!                     ▼
//!              outcome::Outcome: plan (pod → node), PodGroup / Queue status, Events
//!                     │
//!  runner ────────────┴──▶ plan for the extender; writer applies status (one patch per change)
//! ```
//! Everything above the runner is pure and tested without a cluster.

pub mod actions;
pub mod config;
pub mod framework;
pub mod index;
pub mod metrics;
pub mod model;
pub mod outcome;
pub mod pending;

pub mod plugins;
pub mod replan;
pub mod resource;
pub mod runner;
pub mod session;
pub mod sim;
pub mod testing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_reclaim;

pub use config::{ConfigError, SchedulerConf};
pub use index::{ClusterIndex, Snapshot};
pub use outcome::{Outcome, Plan, run_session};
pub use runner::{Scheduler, SchedulerOptions};
