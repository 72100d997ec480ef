//! `/scheduler/filter`, decided from memory: the index (pods, nodes, assumed placements) and
//! the latest plan. No API call is made while kube-scheduler waits.
//!
//! * A gang pod keeps only the node its gang's plan assumed it on. When that node is not among
//!   the names sent (kube-scheduler sampled, or its own fit checks dropped it) or is gone, the
//!   handler re-plans the gang within the names sent ([`Decision::Replan`]).
//! * A gang that cannot fit whole fails every node sent with the gang's reason, the same words
//!   as its PodGroup condition (`N/M tasks in gang unschedulable: ...`).
//! * A pod the plan has not seen yet asks for a session first ([`Decision::NeedSession`]),
//!   unless its gang has fewer pods than `minMember` (no session could place it).
//! * A pod outside any gang keeps every node that passes the predicates.

use super::protocol::FailedNodesMap;
use crate::scheduler::ClusterIndex;
use crate::scheduler::model::{NodeInfo, TaskInfo};
use crate::scheduler::outcome::{Plan, Verdict};
use k8s_openapi::api::core::v1::Taint;

use crate::scheduler::plugins::predicates::{term_matches, tolerates, untolerated};
use crate::scheduler::resource::PODS;

/// What to answer, or what to do before answering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Answer now: the indices of the names kept, and the nodes failed with their reasons.
    Answer {
        /// Indices into the names sent.
        keep: Vec<usize>,
        /// Failed, preemption may help.
        failed: FailedNodesMap,
        /// Failed, preemption will not help.
        unresolvable: FailedNodesMap,
    },
    /// The pod or its gang is not in the plan yet: run a session, then decide again.
    NeedSession,
    /// The gang's planned node is not usable among the names sent: re-plan the gang within them.
    Replan {
        /// The gang.
        job: String,
    },
    /// The pod has no place but a member of its ready gang that kube-scheduler has not asked
    /// about yet, alike in what it asks, has one among the names sent: hand that placement
    /// over to the pod asking (then decide again).
    Transfer {
        /// The member whose placement is handed over.
        from: String,
        /// Index of its node in the names sent.
        node: usize,
    },
}

impl Decision {
    /// Fails every node sent with `reason`, its closing period left out: kube-scheduler ends
    /// its own `0/N nodes are available: …` message with one (a gang's reason ends with the
    /// session's `… Insufficient cpu.`, which read `Insufficient cpu..` there).
    fn fail_all(names: &[&str], reason: &str) -> Self {
        let reason = reason.trim_end_matches('.');
        Decision::Answer {
            keep: Vec::new(),
            failed: names
                .iter()
                .map(|n| ((*n).to_string(), reason.to_string()))
                .collect(),
            unresolvable: FailedNodesMap::new(),
        }
    }

    /// Keeps the one node `names[i]`; every other node sent is failed with `why`, so that
    /// kube-scheduler's message, should its own checks then fail the kept node, accounts for
    /// every node (`0/N nodes are available: 1 Insufficient cpu, N-1 <why>`). Above
    /// [`MAX_NAMED_FAILURES`] names the others are only left out (kube-scheduler drops a node
    /// missing from both the kept list and the failed maps): kube-scheduler itself sends at most
    /// its feasible-node sample (5 to 50 % of the nodes, at least 100), and a failed map of
    /// thousands of entries on every answer would cost more than the decision.
    fn keep_one(names: &[&str], i: usize, why: &str) -> Self {
        let failed = if names.len() <= MAX_NAMED_FAILURES {
            names
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != i)
                .map(|(_, n)| ((*n).to_string(), why.to_string()))
                .collect()
        } else {
            FailedNodesMap::new()
        };
        Decision::Answer {
            keep: vec![i],
            failed,
            unresolvable: FailedNodesMap::new(),
        }
    }
}

/// Up to how many names sent a kept pod's answer fails each other node by name.
pub const MAX_NAMED_FAILURES: usize = 1000;

/// Why a node other than the one a gang pod's plan chose is failed.
pub const NOT_THE_PLANNED_NODE: &str = "node(s) not chosen for this pod by its gang's plan";
/// Why a node other than the one a bound pod is on is failed.
pub const NOT_THE_BOUND_NODE: &str = "node(s) not the one this pod is bound to";

/// Why a pod of ours without `scheduling.k8s.io/group-name` gets no node.
pub const NO_GROUP_YET: &str = "pod is in no PodGroup yet: waiting for the PodGroup controller to set scheduling.k8s.io/group-name";

/// Decides a filter request for pod `uid` over `names`. `may_wait` is true while no session has
/// run since the extender first saw this pod: a pod without a place then asks for one instead
/// of failing.
pub fn decide(
    uid: &str,
    names: &[&str],
    idx: &ClusterIndex,
    plan: &Plan,
    may_wait: bool,
    may_give: &dyn Fn(&str, &str) -> bool,
) -> Decision {
    let Some(task) = idx.task(uid) else {
        if may_wait {
            return Decision::NeedSession;
        }
        return Decision::fail_all(names, "pod is not known to the scheduler yet");
    };
    let Some(job) = task.job.as_deref() else {
        if idx.is_ours(uid) {
            // As Volcano's scheduler, which sees only pods in a PodGroup: a pod of ours without
            // one waits for the PodGroup controller to make it and name it on the pod (that
            // update requeues the pod in kube-scheduler). Placing it at once would run it
            // outside any gang, and its PodGroup would show Pending while it runs.
            return Decision::fail_all(names, NO_GROUP_YET);
        }
        return predicates_only(task, names, idx);
    };
    if let Some(node) = task.node.as_deref().filter(|_| !task.assumed) {
        // Already bound: only its own node can be right.
        return match names.iter().position(|n| *n == node) {
            Some(i) => Decision::keep_one(names, i, NOT_THE_BOUND_NODE),
            None => Decision::fail_all(names, &format!("pod is already bound to {node}")),
        };
    }
    // The assumed placement is the plan in force for this pod: a session assumes what it places
    // before it publishes the plan, and an expired placement is released from the index.
    if let Some(node) = idx.assumed_node(uid) {
        // Stale when the node is gone or the pod changed so that the node no longer suits it.
        let usable = idx
            .node(node)
            .is_some_and(|n| node_constraints(task, n).is_ok());
        return match names.iter().position(|n| *n == node) {
            Some(i) if usable => Decision::keep_one(names, i, NOT_THE_PLANNED_NODE),
            _ => Decision::Replan {
                job: job.to_string(),
            },
        };
    }
    if let Some(Verdict::Ready) = plan.gangs.get(job)
        && let Some((from, node)) = donor(task, job, names, idx, may_give)
    {
        // kube-scheduler asks for its pods in its own order, not the plan's: a placement held
        // for a member it has not reached (a big job's members wait in its queue by the
        // thousand) would otherwise keep room the member asking now could use.
        return Decision::Transfer { from, node };
    }
    if may_wait {
        // A gang with fewer pods than minMember cannot be placed by any session, so waiting for
        // one would only hold kube-scheduler's scheduling cycle (one at a time) for nothing:
        // while pods of a gang are still being created, each would wait a whole session. The
        // reason of the session that last saw the gang is its PodGroup condition's words.
        if let Some(Verdict::Waiting(reason)) = plan.gangs.get(job)
            && short_of_members(idx, job)
        {
            return Decision::fail_all(names, reason);
        }
        return Decision::NeedSession;
    }
    match plan.gangs.get(job) {
        Some(Verdict::Waiting(reason)) => Decision::fail_all(names, reason),
        Some(Verdict::Ready) => Decision::fail_all(
            names,
            &format!("gang {job} is ready; this pod has no place in the plan yet"),
        ),
        None if idx.podgroup(job).is_none() => {
            Decision::fail_all(names, &format!("podgroup {job} not found"))
        }
        None => Decision::fail_all(names, &format!("gang {job} is not planned yet")),
    }
}

/// A member of `job` placed (assumed, not bound) that `may_give` lets go (kube-scheduler has
/// not asked about it since its placement was made, the binder has not taken it), whose
/// placement suits `task` just as well (the same requests and node constraints; neither uses
/// pod (anti-)affinity or anything else only kube-scheduler checks), on a node among `names`:
/// its uid and the node's index in `names`.
fn donor(
    task: &TaskInfo,
    job: &str,
    names: &[&str],
    idx: &ClusterIndex,
    may_give: &dyn Fn(&str, &str) -> bool,
) -> Option<(String, usize)> {
    let plain = |t: &TaskInfo| {
        let c = &t.constraints;
        c.anti_affinity.is_empty() && !c.needs_kube_scheduler && c.host_ports.is_empty()
    };
    if !plain(task) {
        return None;
    }
    let alike = |t: &TaskInfo| {
        let (a, b) = (&t.constraints, &task.constraints);
        t.resreq == task.resreq
            && a.node_selector == b.node_selector
            && a.required_terms == b.required_terms
            && a.tolerations == b.tolerations
            && a.node_name == b.node_name
    };
    idx.job_tasks(job)
        .filter(|t| t.uid != task.uid && t.assumed && plain(t) && alike(t))
        .filter(|t| may_give(job, &t.uid))
        .find_map(|t| {
            let node = idx.assumed_node(&t.uid)?;
            let i = names.iter().position(|n| *n == node)?;
            let usable = idx
                .node(node)
                .is_some_and(|n| node_constraints(task, n).is_ok());
            usable.then(|| (t.uid.clone(), i))
        })
}

/// `true` when `job` has fewer pods than its `minMember`, so no session can make it ready.
pub(crate) fn short_of_members(idx: &ClusterIndex, job: &str) -> bool {
    let Some(pg) = idx.podgroup(job) else {
        return false;
    };
    let min = usize::try_from(pg.spec.min_member.unwrap_or(0)).unwrap_or(0);
    idx.job_tasks(job).count() < min
}

/// Every node sent that passes the predicates and has room (pods outside any gang).
fn predicates_only(task: &TaskInfo, names: &[&str], idx: &ClusterIndex) -> Decision {
    let mut keep = Vec::new();
    let mut failed = FailedNodesMap::new();
    let mut unresolvable = FailedNodesMap::new();
    for (i, name) in names.iter().enumerate() {
        match idx.node(name) {
            None => {
                unresolvable.insert((*name).to_string(), "node(s) not found".into());
            }
            Some(node) => match fits(task, node) {
                Ok(()) => keep.push(i),
                Err(Unfit::Resolvable(r)) => {
                    failed.insert((*name).to_string(), r);
                }
                Err(Unfit::Unresolvable(r)) => {
                    unresolvable.insert((*name).to_string(), r);
                }
            },
        }
    }
    Decision::Answer {
        keep,
        failed,
        unresolvable,
    }
}

/// Why a node does not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfit {
    /// Evicting pods could make room.
    Resolvable(String),
    /// Evicting pods would not help.
    Unresolvable(String),
}

/// The session's node predicates and resource fit, for one pod on one node. Kept in step with
/// `scheduler::plugins::predicates` (same checks, same reasons).
pub fn fits(task: &TaskInfo, node: &NodeInfo) -> Result<(), Unfit> {
    node_constraints(task, node)?;
    let max_pods = node.allocatable.get(PODS) / 1000.0;
    if max_pods > 0.0 && f64::from(node.task_count) >= max_pods {
        return Err(Unfit::Resolvable("Too many pods".into()));
    }
    let mut want = task.resreq.clone();
    want.scalars.remove(PODS);
    if let Some(r) = want.first_exceeding(&node.idle()) {
        return Err(Unfit::Resolvable(format!("Insufficient {r}")));
    }
    Ok(())
}

/// The predicates that do not depend on what else runs on the node: readiness, cordon, node
/// name, selector and affinity, taints.
pub fn node_constraints(task: &TaskInfo, node: &NodeInfo) -> Result<(), Unfit> {
    let c = &task.constraints;
    if !node.ready {
        return Err(Unfit::Unresolvable("node(s) were not ready".into()));
    }
    let cordon = Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
        ..Taint::default()
    };
    if node.unschedulable && !c.tolerations.iter().any(|t| tolerates(t, &cordon)) {
        return Err(Unfit::Unresolvable("node(s) were unschedulable".into()));
    }
    if let Some(name) = &c.node_name
        && name != &node.name
    {
        return Err(Unfit::Unresolvable(
            "node(s) didn't match the requested node name".into(),
        ));
    }
    if !c
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        || (!c.required_terms.is_empty()
            && !c
                .required_terms
                .iter()
                .any(|t| term_matches(t, &node.name, &node.labels)))
    {
        return Err(Unfit::Unresolvable(
            "node(s) didn't match Pod's node affinity/selector".into(),
        ));
    }
    if let Some(taint) = untolerated(&node.taints, &c.tolerations) {
        return Err(Unfit::Unresolvable(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint.key,
            taint.value.as_deref().unwrap_or("")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::config::SchedulerConf;
    use crate::scheduler::outcome::run_session;
    use crate::scheduler::testing::World;

    #[test]
    fn a_waiting_gangs_reason_reaches_kube_scheduler_without_its_closing_period() {
        // 2 nodes of 4 cpu; a gang of 3 × 2.5 cpu fits the total but not the nodes.
        let w = World::default()
            .nodes(2, 4, 16)
            .gang("ns", "big", "default", 3, 3, 2500, 64, "Inqueue");
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let out = run_session(w.index.snapshot(), &SchedulerConf::builtin(), "s1", now);
        let Some(Verdict::Waiting(why)) = out.plan.gangs.get("ns/big") else {
            panic!("the gang waits: {:?}", out.plan.gangs);
        };
        assert!(why.ends_with("Insufficient cpu."), "{why}");
        let d = decide(
            "uid-ns-big-task-0",
            &["node-0"],
            &w.index,
            &out.plan,
            false,
            &|_, _| false,
        );
        let Decision::Answer { failed, keep, .. } = d else {
            panic!("an answer: {d:?}");
        };
        assert!(keep.is_empty());
        assert_eq!(
            failed.get("node-0"),
            Some(&why.trim_end_matches('.').to_string())
        );
        assert!(failed["node-0"].ends_with("Insufficient cpu"));
    }
}
