//! `backfill`: places best-effort tasks (no requests) of admitted, valid gangs on any node the
//! plugin predicates allow (inside the gang's HyperNode when its network topology is hard); a
//! gang's placements are committed once it is ready.

use crate::ix::{JobIx, NodeIx, QueueIx, TaskIx};
use crate::model::TaskStatus;
use crate::session::{FitErrors, Session, Statement};

use super::allocate::best_node;
use super::topology;

/// Runs the action.
pub fn run(ssn: &mut Session) {
    // Each admitted, valid job of a known queue, with that queue.
    let mut jobs: Vec<(JobIx, QueueIx)> = ssn
        .state
        .jobs
        .indices()
        .filter_map(|j| {
            let q = ssn.state.job_queue[j]?;
            (!ssn.state.jobs[j].is_pending() && ssn.plugins.job_valid(&ssn.state, j).is_ok())
                .then_some((j, q))
        })
        .collect();
    jobs.sort_by(|(a, qa), (b, qb)| {
        ssn.plugins
            .queue_order(&ssn.state, *qa, *qb)
            .then_with(|| ssn.plugins.job_order(&ssn.state, *a, *b))
    });
    for (j, _) in jobs {
        let mut tasks: Vec<TaskIx> = ssn.state.jobs[j]
            .tasks
            .iter()
            .copied()
            .filter(|&t| {
                let task = &ssn.state.tasks[t];
                task.best_effort()
                    && !task.gated
                    && matches!(task.status, TaskStatus::Pending | TaskStatus::Pipelined)
            })
            .collect();
        if tasks.is_empty() {
            continue;
        }
        tasks.sort_by(|a, b| ssn.plugins.task_order(&ssn.state, *a, *b));
        let mut stmt = Statement::default();
        for t in tasks {
            if ssn.state.tasks[t].status == TaskStatus::Pipelined {
                // Un-pipeline: it is placed for real below.
                if let Some(n) = ssn.state.tasks[t]
                    .node
                    .as_ref()
                    .and_then(|n| ssn.state.node_index.get(n))
                    .copied()
                {
                    let req = ssn.state.tasks[t].resreq.clone();
                    ssn.state.nodes[n].pipelined.sub(&req);
                    ssn.state.nodes[n].task_count = ssn.state.nodes[n].task_count.saturating_sub(1);
                }
                ssn.state.tasks[t].node = None;
                ssn.state.set_status(t, TaskStatus::Pending);
            }
            let mut errors = FitErrors::default();
            let feasible: Vec<NodeIx> = ssn
                .state
                .nodes
                .indices()
                .filter(|&n| match ssn.plugins.predicate(&ssn.state, t, n) {
                    Ok(()) => true,
                    Err(u) => {
                        errors.set(&ssn.state.nodes[n].name, u.reason);
                        false
                    }
                })
                .collect();
            if feasible.is_empty() {
                ssn.state.job_state[j].fit_errors.insert(t, errors);
                continue;
            }
            let feasible = match topology::allowed_nodes(&ssn.state, j) {
                Some(allowed) => feasible
                    .into_iter()
                    .filter(|n| allowed.binary_search(n).is_ok())
                    .collect(),
                None => feasible,
            };
            if feasible.is_empty() {
                ssn.state.job_state[j].fit_errors.insert(
                    t,
                    FitErrors::because(
                        "no HyperNode the gang's network topology allows has a node for it".into(),
                    ),
                );
                continue;
            }
            let best = best_node(ssn, t, &feasible);
            ssn.allocate(&mut stmt, t, best);
        }
        if ssn.plugins.job_ready(&ssn.state, j) {
            ssn.commit(stmt);
            // Tasks the gang had allocated but not committed (kept by a pipelined turn) go
            // too, now that the gang is whole.
            let held: Vec<TaskIx> = ssn.state.jobs[j]
                .tasks
                .iter()
                .copied()
                .filter(|&t| ssn.state.tasks[t].status == TaskStatus::Allocated)
                .collect();
            for t in held {
                if let Some(node) = ssn.state.tasks[t].node.clone() {
                    ssn.state.set_status(t, TaskStatus::Binding);
                    ssn.state.placements.push((t, node));
                }
            }
        } else {
            ssn.discard(stmt);
        }
    }
}
