//! `gangreclaim`: a queue below its deserved share takes room back from reclaimable queues
//! above theirs whole-gang-wise: pods beyond their gangs' minimums first, whole gangs only
//! when needed (and allowed), inside one HyperNode, and only when the waiting gang can then be
//! placed (see [`super::gangevict`]). Arguments: `maxDomains`, `allowWholeBundle`.

use crate::session::Session;

use super::gangevict::{Kind, run as evict};

/// Runs the action.
pub fn run(ssn: &mut Session) {
    evict(ssn, Kind::Reclaim);
}
