//! The actions a session runs, in configured order, each with Volcano's semantics.

use super::session::Session;

pub mod allocate;
pub mod backfill;
pub mod enqueue;
pub mod gangevict;
pub mod gangpreempt;
pub mod gangreclaim;
pub mod preempt;
pub mod reclaim;
pub mod subgroup;
pub mod topology;

/// Runs one action by name; unknown names were refused when the configuration was read.
pub fn run(ssn: &mut Session, name: &str) {
    match name {
        "enqueue" => enqueue::run(ssn),
        "allocate" => allocate::run(ssn),
        "backfill" => backfill::run(ssn),
        "preempt" => preempt::run(ssn),
        "reclaim" => reclaim::run(ssn),
        "gangpreempt" => gangpreempt::run(ssn),
        "gangreclaim" => gangreclaim::run(ssn),
        _ => {}
    }
}

/// Picks and removes the best element of `items` under `better` (a strict "a before b").
/// Linear, so the order is recomputed with the state as it is now (shares change as tasks are
/// placed), which is what Volcano's re-pushed heaps achieve.
pub(crate) fn pop_best<T: Copy>(
    items: &mut Vec<T>,
    mut cmp: impl FnMut(T, T) -> std::cmp::Ordering,
) -> Option<T> {
    if items.is_empty() {
        return None;
    }
    let mut best = 0;
    for i in 1..items.len() {
        if cmp(items[i], items[best]) == std::cmp::Ordering::Less {
            best = i;
        }
    }
    Some(items.swap_remove(best))
}
