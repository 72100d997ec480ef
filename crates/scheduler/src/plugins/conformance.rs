//! `conformance`: never evicts critical pods (`system-cluster-critical`,
//! `system-node-critical`, anything in `kube-system`).

use crate::framework::Plugin;
use crate::ix::TaskIx;
use crate::session::State;

/// The plugin.
#[derive(Debug)]
pub struct Conformance;

fn keep(st: &State, victims: &[TaskIx]) -> Vec<TaskIx> {
    victims
        .iter()
        .copied()
        .filter(|&v| !st.tasks[v].critical)
        .collect()
}

impl Plugin for Conformance {
    fn name(&self) -> &'static str {
        "conformance"
    }

    fn preemptable(&self, st: &State, _: TaskIx, victims: &[TaskIx]) -> Option<Vec<TaskIx>> {
        Some(keep(st, victims))
    }

    fn reclaimable(&self, st: &State, _: TaskIx, victims: &[TaskIx]) -> Option<Vec<TaskIx>> {
        Some(keep(st, victims))
    }
}
