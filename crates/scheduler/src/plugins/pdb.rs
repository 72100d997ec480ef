//! `pdb`: preemption and reclaim never take a pod whose eviction would break a
//! PodDisruptionBudget. Of the victims offered, a pod is kept off the list when, for some
//! budget of its namespace whose selector matches its labels, the evictions already made in
//! this session plus those chosen before it in the list would exceed the budget's
//! `status.disruptionsAllowed`. Pods the budget already lists as disrupted are not counted
//! again. As in Volcano, a budget with no selector or an empty one matches no pod.
//!
//! Volcano's plugin speaks only when its tier is the one deciding victims; tephra applies it
//! to the victims whichever tier chose them (a budget is a promise to the workload's owner,
//! not one opinion among the plugins'), and counts evictions across the whole session, where
//! Volcano counts only within one call.

use std::collections::BTreeSet;

use crate::framework::Plugin;
use crate::ix::TaskIx;
use crate::model::{BudgetInfo, TaskInfo, TaskStatus};
use crate::plugins::interpod::selects;
use crate::session::State;

/// The plugin, with the pods this session has evicted so far.
#[derive(Debug, Default)]
pub struct Pdb {
    evicted: BTreeSet<TaskIx>,
}

/// Does budget `b` cover pod `t`?
fn covers(b: &BudgetInfo, t: &TaskInfo) -> bool {
    let Some(sel) = &b.selector else {
        return false;
    };
    let empty = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    b.namespace == t.namespace
        && !empty
        && !b.disrupted.contains(&t.name)
        && selects(Some(sel), &t.constraints.labels)
}

impl Pdb {
    /// The victims no budget forbids, taken in order.
    fn within_budgets(&self, st: &State, victims: &[TaskIx]) -> Vec<TaskIx> {
        if st.budgets.is_empty() {
            return victims.to_vec();
        }
        let mut left: Vec<i64> = st
            .budgets
            .iter()
            .map(|b| {
                let spent = self
                    .evicted
                    .iter()
                    .filter(|&&t| covers(b, &st.tasks[t]))
                    .count() as i64;
                i64::from(b.allowed) - spent
            })
            .collect();
        let mut out = Vec::new();
        for &v in victims {
            let task = &st.tasks[v];
            let hit: Vec<usize> = (0..st.budgets.len())
                .filter(|&i| covers(&st.budgets[i], task))
                .collect();
            if hit.iter().all(|&i| left[i] > 0) {
                for i in hit {
                    left[i] -= 1;
                }
                out.push(v);
            }
        }
        out
    }
}

impl Plugin for Pdb {
    fn name(&self) -> &'static str {
        "pdb"
    }

    fn on_allocate(&mut self, _st: &State, t: TaskIx) {
        // An eviction undone gives its pod back.
        self.evicted.remove(&t);
    }

    fn on_deallocate(&mut self, st: &State, t: TaskIx) {
        if st.tasks[t].status == TaskStatus::Releasing {
            self.evicted.insert(t);
        }
    }

    fn preemptable(&self, st: &State, _p: TaskIx, victims: &[TaskIx]) -> Option<Vec<TaskIx>> {
        Some(self.within_budgets(st, victims))
    }

    fn reclaimable(&self, st: &State, _r: TaskIx, victims: &[TaskIx]) -> Option<Vec<TaskIx>> {
        Some(self.within_budgets(st, victims))
    }
}
