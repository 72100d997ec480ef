//! The scheduler's edge: the [`runner`] keeps the `tephra-scheduler` crate's index current from
//! the shared watch caches ([`feed`]), runs a session when something changed, publishes the
//! plan for the extender and writes PodGroup / Queue status, Events and evictions.
//!
//! ```text
//!  watch events ──▶ feed ──▶ ClusterIndex ──snapshot──▶ run_session (tephra-scheduler, pure)
//!                                                            │ Outcome
//!  runner ◀──────────────────────────────────────────────────┘
//!    ├──▶ plan (pod → node) for the extender; replan: one gang again on kube-scheduler's nodes
//!    └──▶ writer: one status patch per change, Events, evictions
//! ```
//!
//! The decision modules are the pure crate's, re-exported here so the edge and its callers
//! name them as one scheduler.

mod feed;
pub mod metrics;
pub mod replan;
pub mod runner;

#[cfg(test)]
pub use tephra_scheduler::testing;
pub use tephra_scheduler::{
    ClusterIndex, ConfigError, Outcome, Plan, SchedulerConf, Snapshot, actions, config, framework,
    index, model, outcome, pending, plugins, resource, run_session, session, sim,
};

pub use runner::{Scheduler, SchedulerOptions};
