//! `/scheduler/prioritize`: scores on the extender scale (0..=10). A gang pod's planned node
//! gets the top score and every other node 0, so kube-scheduler's own scores (weighted far
//! below the extender's) cannot outvote the plan; a pod outside any gang scores by free
//! capacity (least requested, as kube-scheduler's default), so its answer still spreads load.

use super::filter::fits;
use super::protocol::{HostPriority, MAX_EXTENDER_PRIORITY};
use crate::scheduler::ClusterIndex;
use crate::scheduler::outcome::Plan;
use crate::scheduler::resource::share;

/// Scores `names` for pod `uid`. An unknown pod scores 0 everywhere (its filter already failed
/// or is about to).
pub fn scores(uid: &str, names: &[&str], idx: &ClusterIndex, plan: &Plan) -> Vec<HostPriority> {
    let task = idx.task(uid);
    let planned = idx
        .assumed_node(uid)
        .or_else(|| task.and_then(|t| t.node.as_deref()))
        .or_else(|| plan.placements.get(uid).map(|p| p.node.as_str()));
    names
        .iter()
        .map(|name| {
            let score = match (task, planned) {
                (Some(t), _) if t.job.is_none() => idx
                    .node(name)
                    .filter(|n| fits(t, n).is_ok())
                    .map_or(0, |n| {
                        let mut after = n.used.clone();
                        after.add(&t.resreq);
                        let free_cpu = 1.0 - share(after.milli_cpu, n.allocatable.milli_cpu);
                        let free_mem = 1.0 - share(after.memory, n.allocatable.memory);
                        let s = (free_cpu + free_mem) / 2.0 * MAX_EXTENDER_PRIORITY as f64;
                        (s.round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
                    }),
                (_, Some(p)) if p == *name => MAX_EXTENDER_PRIORITY,
                _ => 0,
            };
            HostPriority {
                host: (*name).to_string(),
                score,
            }
        })
        .collect()
}
