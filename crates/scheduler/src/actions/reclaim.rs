//! `reclaim`: a queue below its deserved share takes back resources from reclaimable queues
//! above theirs, by evicting their running pods (the proportion plugin's rule, with the gang
//! and conformance plugins' protections).

use crate::session::Session;

use super::preempt::{Scope, run_with};

/// Runs the action.
pub fn run(ssn: &mut Session) {
    run_with(ssn, Scope::OtherQueues);
}
