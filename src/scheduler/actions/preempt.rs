//! `preempt`: within a queue, a starving gang (fewer than `minMember` placed) takes nodes from
//! lower-priority running pods of other gangs, never leaving a running gang below its
//! `minMember` unless the whole gang goes (the gang plugin's rule), never a critical pod (the
//! conformance plugin's). Evictions are committed only when the preemptor's gang then has its
//! places (pipelined); otherwise nothing is evicted.

use crate::scheduler::model::TaskStatus;
use crate::scheduler::session::{Session, Statement};

/// Runs the action.
pub fn run(ssn: &mut Session) {
    run_with(ssn, Scope::SameQueue);
}

/// Which victims a preemptor may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Same queue, other jobs (preempt).
    SameQueue,
    /// Other, reclaimable queues (reclaim).
    OtherQueues,
}

/// Shared by `preempt` and `reclaim`.
pub fn run_with(ssn: &mut Session, scope: Scope) {
    let mut jobs: Vec<usize> = (0..ssn.state.jobs.len())
        .filter(|&j| {
            let job = &ssn.state.jobs[j];
            !job.is_pending()
                && ssn.state.job_queue[j] != usize::MAX
                && ssn.plugins.job_valid(&ssn.state, j).is_ok()
                && ssn.plugins.job_starving(&ssn.state, j)
        })
        .collect();
    jobs.sort_by(|a, b| ssn.plugins.job_order(&ssn.state, *a, *b));
    for j in jobs {
        let q = ssn.state.job_queue[j];
        if !ssn.state.queues[q].is_open() {
            continue;
        }
        let mut tasks: Vec<usize> = ssn.state.jobs[j]
            .tasks
            .iter()
            .copied()
            .filter(|&t| {
                ssn.state.tasks[t].status == TaskStatus::Pending && !ssn.state.tasks[t].gated
            })
            .collect();
        tasks.sort_by(|a, b| ssn.plugins.task_order(&ssn.state, *a, *b));
        let mut stmt = Statement::default();
        for t in tasks {
            if !ssn.plugins.job_starving(&ssn.state, j) {
                break;
            }
            if scope == Scope::OtherQueues && !ssn.plugins.preemptive(&ssn.state, q, t) {
                continue;
            }
            place_by_evicting(ssn, &mut stmt, j, t, scope);
        }
        if ssn.plugins.job_pipelined(&ssn.state, j) && !stmt.ops.is_empty() {
            ssn.commit(stmt);
        } else {
            ssn.discard(stmt);
        }
    }
}

/// Finds a node where evicting allowed victims makes room for `t`, evicts the fewest needed
/// (lowest in task order first) and pipelines `t` there.
fn place_by_evicting(
    ssn: &mut Session,
    stmt: &mut Statement,
    j: usize,
    t: usize,
    scope: Scope,
) -> bool {
    let q = ssn.state.job_queue[j];
    for n in 0..ssn.state.nodes.len() {
        // Only nodes where resources are the only obstacle.
        if ssn.plugins.predicate(&ssn.state, t, n).is_err() {
            continue;
        }
        if ssn.state.fits_future_idle(t, n) {
            ssn.pipeline(stmt, t, n);
            return true;
        }
        let node_name = ssn.state.nodes[n].name.clone();
        let candidates: Vec<usize> = (0..ssn.state.tasks.len())
            .filter(|&v| {
                let task = &ssn.state.tasks[v];
                let vj = ssn.state.task_job[v];
                task.node.as_deref() == Some(node_name.as_str())
                    && matches!(task.status, TaskStatus::Running | TaskStatus::Bound)
                    && task.preemptable
                    && vj != usize::MAX
                    && vj != j
                    && match scope {
                        Scope::SameQueue => ssn.state.job_queue[vj] == q,
                        Scope::OtherQueues => ssn.state.job_queue[vj] != q,
                    }
            })
            .collect();
        if candidates.is_empty() {
            continue;
        }
        let mut victims = match scope {
            Scope::SameQueue => ssn.plugins.preemptable(&ssn.state, t, &candidates),
            Scope::OtherQueues => ssn.plugins.reclaimable(&ssn.state, t, &candidates),
        };
        // Least important first.
        victims.sort_by(|a, b| ssn.plugins.task_order(&ssn.state, *b, *a));
        let mut freed = ssn.state.nodes[n].future_idle();
        let mut chosen = Vec::new();
        for v in victims {
            if ssn.state.tasks[t].resreq.less_equal(&freed) {
                break;
            }
            freed.add(&ssn.state.tasks[v].resreq);
            chosen.push(v);
        }
        if !ssn.state.tasks[t].resreq.less_equal(&freed) {
            continue;
        }
        let reason = match scope {
            Scope::SameQueue => format!("preempted for {}", ssn.state.tasks[t].key()),
            Scope::OtherQueues => format!("reclaimed for {}", ssn.state.tasks[t].key()),
        };
        for v in chosen {
            ssn.evict(stmt, v, &reason);
        }
        ssn.pipeline(stmt, t, n);
        return true;
    }
    false
}
