//! `enqueue`: admits Pending gangs (phase → Inqueue) queue by queue, best job first, while the
//! enqueue plugins (overcommit, proportion) agree there is room for their `minResources`.

use std::collections::BTreeMap;

use crate::ix::{JobIx, QueueIx};
use crate::session::Session;
use tephra_api::scheduling::PodGroupPhase;

use super::pop_best;

/// Runs the action.
pub fn run(ssn: &mut Session) {
    let mut by_queue: BTreeMap<QueueIx, Vec<JobIx>> = BTreeMap::new();
    for (j, job) in ssn.state.jobs.iter_enumerated() {
        let Some(q) = ssn.state.job_queue[j] else {
            continue;
        };
        if !job.is_pending() {
            continue;
        }
        by_queue.entry(q).or_default().push(j);
    }
    let mut queues: Vec<QueueIx> = by_queue.keys().copied().collect();
    // Each pass takes one job from the best queue: bounded by the number of jobs.
    while let Some(q) = pop_best(&mut queues, |a, b| {
        ssn.plugins.queue_order(&ssn.state, a, b)
    }) {
        let Some(jobs) = by_queue.get_mut(&q) else {
            continue;
        };
        let Some(j) = pop_best(jobs, |a, b| ssn.plugins.job_order(&ssn.state, a, b)) else {
            continue;
        };
        let admit = ssn.state.jobs[j].min_resources.is_none()
            || ssn.plugins.job_enqueueable(&mut ssn.state, j);
        if admit {
            ssn.plugins.job_enqueued(&ssn.state, j);
            ssn.state.jobs[j].phase = PodGroupPhase::Inqueue;
            ssn.state.job_state[j].enqueued = true;
            ssn.state.job_state[j].job_fit_error = None;
        } else {
            ssn.state.job_state[j].enqueue_refused = true;
        }
        if !by_queue.get(&q).is_none_or(Vec::is_empty) {
            queues.push(q);
        }
    }
}
