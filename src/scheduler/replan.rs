//! Re-planning one gang within a given set of nodes, for the extender: kube-scheduler sent a
//! pod with candidate nodes that do not include the node the plan chose (it samples nodes, or
//! its own fit checks disagree, or the node is gone). The gang is planned again, alone, on a
//! snapshot cut down to those nodes, with the same session code as a full session, so the
//! answer is still all of the gang or none of it.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::outcome::{Verdict, run_session};
use super::runner::{DEFAULT_ASSUME_TTL, Scheduler};

/// What a re-plan decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replanned {
    /// The gang fits: pod uid → node for every member placed (now assumed).
    Placed(HashMap<String, String>),
    /// It does not fit whole within the nodes; the gang's reason
    /// (`N/M tasks in gang unschedulable: ...`).
    Unfit(String),
    /// The gang is not known (no PodGroup, or its queue is missing).
    Unknown,
}

/// Plans `job` again on `nodes` only. Members that are assumed but not in `keep` (binds in
/// flight keep theirs) are released first, so the gang is planned afresh; members bound or
/// running stay where they are. Blocking (a session): call from a blocking thread.
pub fn replan_gang(
    scheduler: &Scheduler,
    job: &str,
    nodes: &HashSet<String>,
    keep: &HashSet<String>,
) -> Replanned {
    let mut snapshot = {
        let mut idx = scheduler.index();
        let release: Vec<String> = idx
            .job_tasks(job)
            .filter(|t| t.assumed && !keep.contains(&t.uid))
            .map(|t| t.uid.clone())
            .collect();
        for uid in &release {
            idx.forget(uid);
        }
        idx.snapshot()
    };
    let Some(j) = snapshot.jobs.iter().position(|x| x.id == job) else {
        return Replanned::Unknown;
    };
    // The gang alone: other gangs' pods still count in their nodes' usage (the index keeps
    // usage per node), they are just not planned again here.
    let mut only = snapshot.jobs.swap_remove(j);
    let tasks: Vec<_> = only
        .tasks
        .iter()
        .filter_map(|&i| snapshot.tasks.get(i).cloned())
        .collect();
    only.tasks = (0..tasks.len()).collect();
    snapshot.jobs = vec![only];
    snapshot.tasks = tasks;
    snapshot.nodes.retain(|n| nodes.contains(&n.name));
    let conf = scheduler.conf();
    let outcome = run_session(
        snapshot,
        &conf,
        "replan",
        Time(k8s_openapi::jiff::Timestamp::now()),
    );
    match outcome.plan.gangs.get(job) {
        Some(Verdict::Ready) => {
            let now = Instant::now();
            let mut idx = scheduler.index();
            let mut placed = HashMap::new();
            for (uid, p) in &outcome.plan.placements {
                if idx.assume(uid, &p.node, DEFAULT_ASSUME_TTL, now) {
                    placed.insert(uid.clone(), p.node.clone());
                }
            }
            Replanned::Placed(placed)
        }
        Some(Verdict::Waiting(reason)) => Replanned::Unfit(reason.clone()),
        None => Replanned::Unknown,
    }
}
