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
use tephra_scheduler::ix::IxVec;

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
        idx.snapshot_source()
    }
    .build();
    let Some(j) = snapshot.jobs.iter().position(|x| x.id == job) else {
        return Replanned::Unknown;
    };
    // The gang alone: other gangs' pods still count in their nodes' usage (the index keeps
    // usage per node), they are just not planned again here. Admitted gangs whose pods are
    // not all created yet stay too (no session can place them): the room allocate holds for
    // them must hold in a re-plan as well, or a ready gang re-planned here could grow into it.
    let mut all = std::mem::take(&mut snapshot.jobs).into_vec();
    let only = all.swap_remove(j);
    let unborn = all.into_iter().filter(|x| {
        x.phase == crate::api::scheduling::PodGroupPhase::Inqueue
            && x.min_resources.is_some()
            && (x.tasks.len() as i64) < x.min_available as i64
    });
    let mut jobs = IxVec::new();
    let mut tasks = IxVec::new();
    for mut x in std::iter::once(only).chain(unborn) {
        let mine: Vec<_> = x
            .tasks
            .iter()
            .filter_map(|&i| snapshot.tasks.get(i).cloned())
            .collect();
        x.tasks = mine.into_iter().map(|t| tasks.push(t)).collect();
        jobs.push(x);
    }
    snapshot.jobs = jobs;
    snapshot.tasks = tasks;
    snapshot.retain_nodes(|n| nodes.contains(&n.name));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::config::SchedulerConf;
    use crate::scheduler::runner::SchedulerOptions;
    use crate::scheduler::testing::World;

    #[test]
    fn a_replan_keeps_the_room_held_for_an_admitted_gang_without_pods() {
        // 8 cpu; gang `a` (8 one-cpu pods, minimum 2) is re-planned while gang `b` (minimum
        // 2 cpu) is admitted and its pods are not created yet: `a` grows to 6, not 8.
        let registry = prometheus::Registry::new();
        let s = Scheduler::new(
            SchedulerOptions::default(),
            SchedulerConf::builtin(),
            &registry,
        )
        .unwrap();
        let w = World::default()
            .nodes(2, 4, 16)
            .gang("ns", "a", "default", 8, 2, 1000, 1024, "Inqueue")
            .gang("ns", "b", "default", 0, 2, 1000, 1024, "Inqueue");
        *s.index() = w.index;
        let nodes: HashSet<String> = ["node-0", "node-1"].map(String::from).into();
        match replan_gang(&s, "ns/a", &nodes, &HashSet::new()) {
            Replanned::Placed(placed) => assert_eq!(placed.len(), 6, "{placed:?}"),
            other => panic!("{other:?}"),
        }
    }
}
