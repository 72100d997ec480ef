//! `priority`: higher-priority jobs and tasks first; preemption only of lower priority.

use std::cmp::Ordering;

use crate::framework::Plugin;
use crate::ix::{JobIx, TaskIx};
use crate::session::State;

/// The plugin.
#[derive(Debug)]
pub struct Priority;

impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "priority"
    }

    fn task_order(&self, st: &State, a: TaskIx, b: TaskIx) -> Option<Ordering> {
        Some(st.tasks[b].priority.cmp(&st.tasks[a].priority))
    }

    fn job_order(&self, st: &State, a: JobIx, b: JobIx) -> Option<Ordering> {
        Some(st.jobs[b].priority.cmp(&st.jobs[a].priority))
    }

    fn preemptable(
        &self,
        st: &State,
        preemptor: TaskIx,
        victims: &[TaskIx],
    ) -> Option<Vec<TaskIx>> {
        let pj = st.task_job[preemptor];
        Some(
            victims
                .iter()
                .copied()
                .filter(|&v| {
                    let vj = st.task_job[v];
                    if vj == pj {
                        st.tasks[v].priority < st.tasks[preemptor].priority
                    } else {
                        st.jobs[vj].priority < st.jobs[pj].priority
                    }
                })
                .collect(),
        )
    }

    fn job_starving(&self, st: &State, job: JobIx) -> Option<bool> {
        Some(st.is_starving(job))
    }
}
