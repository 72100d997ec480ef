//! `conformance`: never evicts critical pods (`system-cluster-critical`,
//! `system-node-critical`, anything in `kube-system`).

use crate::framework::Plugin;
use crate::session::State;

/// The plugin.
#[derive(Debug)]
pub struct Conformance;

fn keep(st: &State, victims: &[usize]) -> Vec<usize> {
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

    fn preemptable(&self, st: &State, _: usize, victims: &[usize]) -> Option<Vec<usize>> {
        Some(keep(st, victims))
    }

    fn reclaimable(&self, st: &State, _: usize, victims: &[usize]) -> Option<Vec<usize>> {
        Some(keep(st, victims))
    }
}
