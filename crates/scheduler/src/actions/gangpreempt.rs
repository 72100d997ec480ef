//! `gangpreempt`: a waiting gang of higher priority takes room from lower-priority gangs of
//! its queue whole-gang-wise: pods beyond their minimums first, whole gangs only when needed
//! (and allowed), inside one HyperNode, and only when the gang can then be placed (see
//! [`super::gangevict`]). Arguments: `maxDomains`, `allowWholeBundle`.

use crate::session::Session;

use super::gangevict::{Kind, run as evict};

/// Runs the action.
pub fn run(ssn: &mut Session) {
    evict(ssn, Kind::Preempt);
}
