//! A scheduling simulator: scenarios (a cluster, queues, a stream of gangs) played through the
//! real index and session on a simulated clock, and the guarantees a batch scheduler is
//! trusted for checked after every session.
//!
//! ```text
//!  scenario.yaml ──▶ Scenario ──▶ Sim (engine: clock, job controller, kube-scheduler, kubelet)
//!                                   │ every session: SessionRecord (snapshot, outcome)
//!                                   ▼
//!                        properties::Checker ──▶ Violation (named, with the evidence)
//! ```
//! Pure: no network, no wall clock, no randomness of its own; the same scenario replays the
//! same sessions. Random scenarios come from the property tests, which shrink a failure to a
//! small scenario and keep it under `tests/sim/` as a regression file.

pub mod engine;
pub mod properties;
pub mod scenario;
pub mod workloads;

pub use engine::{SessionRecord, Sim};
pub use properties::{Checker, Violation};
pub use scenario::{Scenario, ScenarioError};

#[cfg(test)]
mod tests;
