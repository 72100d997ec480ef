//! `gang`: a job is valid only with enough tasks, ready only when `minMember` are placed, and
//! never left below `minMember` by an eviction; at session close every job gets its
//! `Scheduled` or `Unschedulable` condition (`N/M tasks in gang unschedulable: ...`, N of its M
//! pods without a node).

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::framework::{Invalid, Plugin};
use crate::ix::{JobIx, TaskIx};
use crate::model::TaskStatus;
use crate::session::State;

/// The plugin.
#[derive(Debug)]
pub struct Gang;

/// Reason of the Unschedulable condition.
pub const NOT_ENOUGH_RESOURCES: &str = "NotEnoughResources";
/// Reason of the Scheduled condition.
pub const READY_REASON: &str = "tasks in gang are ready to be scheduled";

/// Keeps victims while every victim job stays at or above its `minMember` (Volcano's rule: a
/// job keeps its `minMember` ready pods, so a job of one pod with `minMember` 1 is never a
/// victim here; whether it may still be reclaimed is left to the next tier, see
/// [`crate::framework::Plugins::reclaimable`]).
pub fn gang_safe_victims(st: &State, victims: &[TaskIx]) -> Vec<TaskIx> {
    let mut taken: HashMap<JobIx, u32> = HashMap::new();
    let mut out = Vec::new();
    for &v in victims {
        let j = st.task_job[v];
        let occupied = st.ready_task_num(j);
        let min = st.jobs[j].min_available.max(0) as u32;
        let already = taken.get(&j).copied().unwrap_or(0);
        if occupied > already && occupied - already > min {
            *taken.entry(j).or_default() += 1;
            out.push(v);
        }
    }
    out
}

impl Plugin for Gang {
    fn name(&self) -> &'static str {
        "gang"
    }

    fn job_valid(&self, st: &State, j: JobIx) -> Option<Result<(), Invalid>> {
        if !st.check_task_valid(j) {
            return Some(Err(Invalid {
                reason: "NotEnoughPodsOfTask".into(),
                message: "Not enough valid pods of each task for gang-scheduling".into(),
            }));
        }
        if st.sub_groups_valid(j).is_err() {
            return Some(Err(Invalid {
                reason: "NotEnoughPodsOfTask".into(),
                message: "Not enough valid subGroups of each task for gang-scheduling".into(),
            }));
        }
        let valid = st.valid_task_num(j);
        let min = st.jobs[j].min_available;
        if (valid as i64) < min as i64 {
            return Some(Err(Invalid {
                reason: "NotEnoughTasks".into(),
                message: format!(
                    "Not enough valid tasks for gang-scheduling, valid: {valid}, min: {min}"
                ),
            }));
        }
        Some(Ok(()))
    }

    fn job_order(&self, st: &State, a: JobIx, b: JobIx) -> Option<Ordering> {
        // A job that is not ready yet goes first: finish gangs before growing ready ones.
        Some(st.is_ready(a).cmp(&st.is_ready(b)))
    }

    fn job_ready(&self, st: &State, j: JobIx) -> Option<bool> {
        Some(st.check_task_ready(j) && st.sub_groups_ready(j, false).is_ok() && st.is_ready(j))
    }

    fn job_pipelined(&self, st: &State, j: JobIx) -> i8 {
        if st.check_task_pipelined(j) && st.sub_groups_ready(j, true).is_ok() && st.is_pipelined(j)
        {
            1
        } else {
            -1
        }
    }

    fn preemptable(&self, st: &State, _: TaskIx, victims: &[TaskIx]) -> Option<Vec<TaskIx>> {
        Some(gang_safe_victims(st, victims))
    }

    fn reclaimable(&self, st: &State, _: TaskIx, victims: &[TaskIx]) -> Option<Vec<TaskIx>> {
        Some(gang_safe_victims(st, victims))
    }

    fn job_starving(&self, st: &State, j: JobIx) -> Option<bool> {
        Some(st.is_starving(j))
    }

    fn close(&mut self, st: &mut State) {
        for j in st.jobs.indices() {
            let job = &st.jobs[j];
            if job.tasks.is_empty() {
                continue;
            }
            if st.is_ready(j) {
                st.job_state[j].condition =
                    Some(("Scheduled".into(), READY_REASON.into(), String::new()));
                continue;
            }
            // A gang whose only unplaced tasks are being deleted, with enough scheduled, is
            // finishing, not stuck.
            let scheduled = job
                .tasks
                .iter()
                .filter(|&&t| st.tasks[t].status.is_scheduled())
                .count() as i64;
            let releasing_only = job.tasks.iter().all(|&t| {
                let s = st.tasks[t].status;
                s.is_scheduled() || s == TaskStatus::Releasing
            });
            if releasing_only && scheduled >= job.min_available as i64 {
                continue;
            }
            let message = format!(
                "{}/{} tasks in gang unschedulable: {}",
                st.unplaced(j),
                job.tasks.len(),
                st.fit_error(j)
            );
            st.job_state[j].condition =
                Some(("Unschedulable".into(), NOT_ENOUGH_RESOURCES.into(), message));
        }
    }
}
