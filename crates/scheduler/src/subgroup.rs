//! A gang's sub-groups: the PodGroup's `subGroupPolicy` (what a vcJob task's `partitionPolicy`
//! becomes), as Volcano's scheduler reads it.
//!
//! Each policy picks pods by `labelSelector` (every pod without one) and splits them by the
//! values of its `matchLabelKeys` (a pod lacking one is in none of the policy's sub-groups); a
//! pod belongs to the first policy that takes it. A sub-group is placed whole: `subGroupSize`
//! pods together or none of them (a partition). With `networkTopology`, a sub-group is placed
//! inside one HyperNode of the tier it allows (`hard`), or preferably so (`soft`). With
//! `minSubGroups`, the gang is ready only when at least that many of the policy's sub-groups
//! are.

use crate::ix::{JobIx, TaskIx};
use crate::model::{JobInfo, TaskInfo, TaskStatus};
use crate::plugins::interpod::selects;
use crate::session::State;
use tephra_api::scheduling::SubGroupPolicySpec;

/// One sub-group of a gang.
#[derive(Clone, Debug, PartialEq)]
pub struct SubGroup {
    /// Its policy's position in the PodGroup's `subGroupPolicy`.
    pub policy: usize,
    /// The policy's name and the match values, for messages (`worker-0`).
    pub name: String,
    /// `subGroupSize`: how many of its pods go together (1 when unset).
    pub size: u32,
    /// Its pods, in the job's order.
    pub tasks: Vec<TaskIx>,
}

/// The PodGroup's sub-group policies.
pub fn policies(job: &JobInfo) -> &[SubGroupPolicySpec] {
    job.podgroup
        .spec
        .sub_group_policy
        .as_deref()
        .unwrap_or_default()
}

/// The sub-groups of `job` over its `tasks`, in the order their first pods come (none without
/// a `subGroupPolicy`).
pub fn sub_groups(job: &JobInfo, tasks: &crate::ix::IxVec<TaskIx, TaskInfo>) -> Vec<SubGroup> {
    let policies = policies(job);
    if policies.is_empty() {
        return Vec::new();
    }
    let mut groups: Vec<SubGroup> = Vec::new();
    for &t in &job.tasks {
        let labels = &tasks[t].constraints.labels;
        let found = policies.iter().enumerate().find_map(|(i, p)| {
            let keys = p.match_label_keys.as_deref().unwrap_or_default();
            if keys.is_empty() {
                return None;
            }
            if p.label_selector.is_some() && !selects(p.label_selector.as_ref(), labels) {
                return None;
            }
            let values: Option<Vec<&str>> = keys
                .iter()
                .map(|k| labels.get(k).map(String::as_str).filter(|v| !v.is_empty()))
                .collect();
            Some((i, values?.join("-")))
        });
        let Some((policy, values)) = found else {
            continue;
        };
        let name = format!(
            "{}-{values}",
            policies[policy].name.as_deref().unwrap_or("")
        );
        match groups
            .iter_mut()
            .find(|g| g.policy == policy && g.name == name)
        {
            Some(g) => g.tasks.push(t),
            None => groups.push(SubGroup {
                policy,
                name,
                size: policies[policy].sub_group_size.unwrap_or(1).max(1) as u32,
                tasks: vec![t],
            }),
        }
    }
    groups
}

/// Pods of a sub-group counted as placed for readiness: on a node, promised one, done, or
/// asking for nothing.
fn placed(st: &State, t: TaskIx, pipelined: bool) -> bool {
    let task = &st.tasks[t];
    task.status.is_allocated()
        || task.status == TaskStatus::Succeeded
        || (pipelined && task.status == TaskStatus::Pipelined)
        || (task.status == TaskStatus::Pending && task.best_effort())
}

impl SubGroup {
    /// Enough of its pods placed (`pipelined`: or promised a node).
    pub fn is_ready(&self, st: &State, pipelined: bool) -> bool {
        self.placed(st, pipelined) >= self.size
    }

    /// How many of its pods are placed (`pipelined`: or promised a node).
    pub fn placed(&self, st: &State, pipelined: bool) -> u32 {
        self.tasks
            .iter()
            .filter(|&&t| placed(st, t, pipelined))
            .count() as u32
    }
}

impl State {
    /// Every policy with `minSubGroups` has that many sub-groups; otherwise the policy's name.
    pub fn sub_groups_valid(&self, j: JobIx) -> Result<(), String> {
        self.sub_groups_meet(j, |_| true)
    }

    /// Every policy with `minSubGroups` has that many sub-groups ready (`pipelined`: or
    /// promised); otherwise why not.
    pub fn sub_groups_ready(&self, j: JobIx, pipelined: bool) -> Result<(), String> {
        self.sub_groups_meet(j, |g| g.is_ready(self, pipelined))
    }

    fn sub_groups_meet(&self, j: JobIx, counts: impl Fn(&SubGroup) -> bool) -> Result<(), String> {
        let groups = &self.job_state[j].sub_groups;
        for (i, p) in policies(&self.jobs[j]).iter().enumerate() {
            let min = p.min_sub_groups.unwrap_or(0);
            if min <= 0 {
                continue;
            }
            let have = groups.iter().filter(|g| g.policy == i && counts(g)).count() as i32;
            if have < min {
                return Err(format!(
                    "{have} of the {min} sub-groups subGroupPolicy {} needs",
                    p.name.as_deref().unwrap_or("")
                ));
            }
        }
        Ok(())
    }
}
