//! The Job controller: drives every `batch.volcano.sh` Job through its life as Volcano's
//! does (`pkg/controllers/job/`), with the departures listed in the README.
//!
//! ```text
//!   watch events (jobs, pods, PodGroups, Commands) ──▶ Request ──▶ worker FNV-32(ns/name) % N
//!        ▼
//!   policy::apply_policies(job, request) ──▶ (action, delay) ── delay ──▶ delay::DelayedActions
//!        ▼
//!   state::step(phase, action) ──▶ Step (sync or kill, then a status rule)
//!        ▼
//!   the edge: build:: (pods, PodGroup, PVCs), plugins:: (resources, pod edits) ──▶ the API
//! ```
//!
//! Everything but the edge is pure code over plain objects, tested without a cluster.

pub mod build;
pub mod delay;
pub mod plugins;
pub mod policy;
pub mod request;
pub mod state;
