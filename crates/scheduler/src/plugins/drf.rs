//! `drf` (dominant resource fairness): the job with the smallest dominant share of the cluster
//! goes first; preemption only from jobs whose share stays above the preemptor's.

use std::cmp::Ordering;

use crate::framework::Plugin;
use crate::ix::{Ix, IxVec, JobIx, TaskIx};
use crate::resource::Resource;
use crate::session::State;

/// Shares closer than this are equal (Volcano's `shareDelta`).
const SHARE_DELTA: f64 = 0.000_001;

/// The plugin: each job's allocation and dominant share.
#[derive(Debug, Default)]
pub struct Drf {
    allocated: IxVec<JobIx, Resource>,
    share: IxVec<JobIx, f64>,
}

impl Drf {
    fn update(&mut self, st: &State, j: JobIx) {
        self.share[j] = self.allocated[j].share_of(&st.total);
    }
}

impl Plugin for Drf {
    fn name(&self) -> &'static str {
        "drf"
    }

    fn open(&mut self, st: &State) {
        self.allocated = st.job_state.iter().map(|s| s.allocated.clone()).collect();
        self.share = IxVec::from_elem(0.0, st.jobs.len());
        for j in st.jobs.indices() {
            self.update(st, j);
        }
    }

    fn job_order(&self, _: &State, a: JobIx, b: JobIx) -> Option<Ordering> {
        let (x, y) = (self.share[a], self.share[b]);
        if (x - y).abs() < SHARE_DELTA {
            Some(Ordering::Equal)
        } else {
            x.partial_cmp(&y)
        }
    }

    fn on_allocate(&mut self, st: &State, t: TaskIx) {
        let j = st.task_job[t];
        if j.index() < self.allocated.len() {
            self.allocated[j].add(&st.tasks[t].resreq);
            self.update(st, j);
        }
    }

    fn on_deallocate(&mut self, st: &State, t: TaskIx) {
        let j = st.task_job[t];
        if j.index() < self.allocated.len() {
            self.allocated[j].sub(&st.tasks[t].resreq);
            self.update(st, j);
        }
    }

    fn preemptable(
        &self,
        st: &State,
        preemptor: TaskIx,
        victims: &[TaskIx],
    ) -> Option<Vec<TaskIx>> {
        let pj = st.task_job[preemptor];
        let ls = self.allocated[pj]
            .plus(&st.tasks[preemptor].resreq)
            .share_of(&st.total);
        Some(
            victims
                .iter()
                .copied()
                .filter(|&v| {
                    let vj = st.task_job[v];
                    if vj == pj {
                        return true;
                    }
                    let rs = self.allocated[vj]
                        .minus(&st.tasks[v].resreq)
                        .share_of(&st.total);
                    ls < rs || (ls - rs).abs() <= SHARE_DELTA
                })
                .collect(),
        )
    }
}
