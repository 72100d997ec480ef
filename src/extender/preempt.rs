//! `/scheduler/preempt`: kube-scheduler proposes victims per node; a node's victims are
//! accepted only if every gang they touch keeps at least `minMember` members placed, or loses
//! all of them (a whole gang may go; half of one may not: the rest would hold their nodes
//! without being able to run). Nodes whose victims would break a gang are left out of the
//! answer, which kube-scheduler reads as "not a candidate".

use std::collections::{BTreeMap, HashMap, HashSet};

use super::protocol::{ExtenderPreemptionResult, MetaVictims};
use crate::scheduler::ClusterIndex;

/// The victims accepted, per node, from `proposed` (both wire forms arrive here as
/// [`MetaVictims`]).
pub fn accept(
    proposed: BTreeMap<String, MetaVictims>,
    idx: &ClusterIndex,
) -> ExtenderPreemptionResult {
    let mut out = ExtenderPreemptionResult::default();
    for (node, victims) in proposed {
        if keeps_gangs_whole(&victims, idx) {
            out.node_name_to_meta_victims.insert(node, victims);
        }
    }
    out
}

/// `true` when evicting `victims` leaves every gang they touch at or above its `minMember`,
/// or takes every placed member of it.
pub fn keeps_gangs_whole(victims: &MetaVictims, idx: &ClusterIndex) -> bool {
    let mut per_job: HashMap<&str, HashSet<&str>> = HashMap::new();
    for v in &victims.pods {
        // A victim the index does not know belongs to no gang we schedule.
        if let Some(job) = idx.task(&v.uid).and_then(|t| t.job.as_deref()) {
            per_job.entry(job).or_default().insert(v.uid.as_str());
        }
    }
    per_job.into_iter().all(|(job, gone)| {
        let placed: Vec<&str> = idx
            .job_tasks(job)
            .filter(|t| t.status.occupies_node() || t.status.is_scheduled())
            .filter(|t| !t.status.is_completed())
            .map(|t| t.uid.as_str())
            .collect();
        let left = placed.iter().filter(|u| !gone.contains(*u)).count();
        let min = idx
            .podgroup(job)
            .map_or(0, |pg| pg.spec.min_member.unwrap_or(0))
            .max(0) as usize;
        left == 0 || left >= min
    })
}
