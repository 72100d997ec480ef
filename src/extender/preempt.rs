//! `/scheduler/preempt`: kube-scheduler proposes victims per node for a pod it could not place.
//!
//! A pod of a gang gets none: its preemption is the session's `preempt` and `reclaim` actions,
//! which choose victims for the gang as a whole (only until it reaches `minMember`) and evict
//! them themselves, as Volcano's session does. kube-scheduler's own preemption runs once per
//! pending pod, so accepting it too would evict for every pod of the gang beyond its minimum,
//! and on top of the session's choice (Volcano's preemption specs saw the low-priority job
//! lose every pod where Volcano leaves it half). An empty answer is kube-scheduler's "not a
//! candidate": the pod waits for the session's plan.
//!
//! For a pod outside any gang, a node's victims are accepted only if every gang they touch
//! keeps at least `minMember` members placed, or loses all of them (a whole gang may go; half
//! of one may not: the rest would hold their nodes without being able to run). Nodes whose
//! victims would break a gang are left out of the answer.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::protocol::{ExtenderPreemptionResult, MetaVictims};
use crate::api::keys;
use crate::scheduler::ClusterIndex;

/// The victims accepted, per node, from `proposed` (both wire forms arrive here as
/// [`MetaVictims`]) for the preemptor `pod` (the request's `Pod`, as sent).
pub fn accept(
    pod: &RawValue,
    proposed: BTreeMap<String, MetaVictims>,
    idx: &ClusterIndex,
) -> ExtenderPreemptionResult {
    let mut out = ExtenderPreemptionResult::default();
    // A preemptor that cannot be read is judged as a pod outside any gang.
    let preemptor: Preemptor = serde_json::from_str(pod.get()).unwrap_or_default();
    if preemptor.in_a_gang(idx) {
        return out;
    }
    for (node, victims) in proposed {
        if keeps_gangs_whole(&victims, idx) {
            out.node_name_to_meta_victims.insert(node, victims);
        }
    }
    out
}

/// What the extender reads of the preemptor kube-scheduler sends.
#[derive(Debug, Default, Deserialize)]
struct Preemptor {
    #[serde(default)]
    metadata: PreemptorMeta,
}

#[derive(Debug, Default, Deserialize)]
struct PreemptorMeta {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

impl Preemptor {
    /// A pod of a gang: it names its PodGroup (the pod as sent says so even before the
    /// index has caught up with it, which under load it may not have), or the index knows it
    /// as a gang's.
    fn in_a_gang(&self, idx: &ClusterIndex) -> bool {
        self.metadata
            .annotations
            .get(keys::KUBE_GROUP_NAME_ANNOTATION)
            .is_some_and(|g| !g.is_empty())
            || idx
                .task(&self.metadata.uid)
                .is_some_and(|t| t.job.is_some())
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extender::protocol::MetaPod;
    use crate::scheduler::testing::{World, pod};

    fn raw(uid: &str) -> Box<RawValue> {
        RawValue::from_string(serde_json::json!({"metadata": {"uid": uid}}).to_string()).unwrap()
    }

    fn one_victim(uid: &str) -> BTreeMap<String, MetaVictims> {
        let victims = MetaVictims {
            pods: vec![MetaPod { uid: uid.into() }],
            num_pdb_violations: 0,
        };
        BTreeMap::from([("node-0".to_string(), victims)])
    }

    #[test]
    fn a_gang_preemptor_gets_no_victims_from_kube_scheduler() {
        // A running gang of 4 with minMember 1: losing one pod keeps it whole.
        let mut w = World::default()
            .nodes(1, 4, 16)
            .running_gang("ns", "low", "default", 4, 1000, 512, 1);
        let mut pg = (*w.index.podgroup("ns/low").unwrap().as_ref()).clone();
        pg.spec.min_member = Some(1);
        w.index.apply_podgroup(&pg);
        let victim = "uid-ns-low-task-0";
        // A pending pod of another gang: its preemption is the session's.
        w.index
            .apply_pod(&pod("ns", "high-task-0", "high", 1000, 512));
        let r = accept(&raw("uid-ns-high-task-0"), one_victim(victim), &w.index);
        assert!(r.node_name_to_meta_victims.is_empty(), "{r:?}");
        // A gang pod the index has not seen yet: its annotation says it is a gang's.
        let unseen = RawValue::from_string(
            serde_json::json!({"metadata": {"uid": "not-indexed-yet",
                "annotations": {"scheduling.k8s.io/group-name": "high"}}})
            .to_string(),
        )
        .unwrap();
        let r = accept(&unseen, one_victim(victim), &w.index);
        assert!(r.node_name_to_meta_victims.is_empty(), "{r:?}");
        // A pod outside any gang still gets victims that keep gangs whole.
        let r = accept(&raw("uid-of-a-plain-pod"), one_victim(victim), &w.index);
        assert_eq!(r.node_name_to_meta_victims["node-0"].pods[0].uid, victim);
        // An unreadable preemptor is judged as a plain pod, never refused with an error.
        let r = accept(
            &RawValue::from_string("[]".into()).unwrap(),
            one_victim(victim),
            &w.index,
        );
        assert_eq!(r.node_name_to_meta_victims.len(), 1);
    }
}
