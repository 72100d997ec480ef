//! `nodeorder`: kube-scheduler's scores, weighted by the plugin's arguments
//! (`leastrequested.weight` 1, `mostrequested.weight` 0, `balancedresource.weight` 1,
//! `nodeaffinity.weight` 2, `tainttoleration.weight` 3). Each score is on kube-scheduler's
//! 0..=100 scale before weighting.

use crate::config::PluginOption;
use crate::framework::Plugin;
use crate::ix::{NodeIx, TaskIx};
use crate::session::State;

use super::predicates::{term_matches, tolerates};

/// The plugin with its weights.
#[derive(Debug)]
pub struct NodeOrder {
    least: f64,
    most: f64,
    balanced: f64,
    affinity: f64,
    taint: f64,
}

impl NodeOrder {
    /// Reads the weights.
    pub fn new(o: &PluginOption) -> Self {
        Self {
            least: o.float_arg("leastrequested.weight", 1.0),
            most: o.float_arg("mostrequested.weight", 0.0),
            balanced: o.float_arg("balancedresource.weight", 1.0),
            affinity: o.float_arg("nodeaffinity.weight", 2.0),
            taint: o.float_arg("tainttoleration.weight", 3.0),
        }
    }
}

/// cpu and memory fractions requested on the node after placing the task.
fn fractions(st: &State, t: TaskIx, n: NodeIx) -> (f64, f64) {
    let node = &st.nodes[n];
    let req = &st.tasks[t].resreq;
    let frac = |used: f64, want: f64, cap: f64| {
        if cap <= 0.0 {
            1.0
        } else {
            ((used + want) / cap).min(1.0)
        }
    };
    (
        frac(
            node.used.milli_cpu,
            req.milli_cpu,
            node.allocatable.milli_cpu,
        ),
        frac(node.used.memory, req.memory, node.allocatable.memory),
    )
}

impl Plugin for NodeOrder {
    fn name(&self) -> &'static str {
        "nodeorder"
    }

    fn node_score(&self, st: &State, t: TaskIx, n: NodeIx) -> f64 {
        let (cpu, mem) = fractions(st, t, n);
        let mut score = 0.0;
        if self.least != 0.0 {
            score += self.least * ((1.0 - cpu) + (1.0 - mem)) / 2.0 * 100.0;
        }
        if self.most != 0.0 {
            score += self.most * (cpu + mem) / 2.0 * 100.0;
        }
        if self.balanced != 0.0 {
            score += self.balanced * (1.0 - (cpu - mem).abs()) * 100.0;
        }
        let task = &st.tasks[t];
        let node = &st.nodes[n];
        if self.affinity != 0.0 && !task.constraints.preferred_terms.is_empty() {
            let total: i32 = task
                .constraints
                .preferred_terms
                .iter()
                .map(|(w, _)| *w)
                .sum();
            let matched: i32 = task
                .constraints
                .preferred_terms
                .iter()
                .filter(|(_, term)| term_matches(term, &node.name, &node.labels))
                .map(|(w, _)| *w)
                .sum();
            if total > 0 {
                score += self.affinity * matched as f64 / total as f64 * 100.0;
            }
        }
        if self.taint != 0.0 {
            let intolerable = node
                .taints
                .iter()
                .filter(|taint| taint.effect == "PreferNoSchedule")
                .filter(|taint| {
                    !task
                        .constraints
                        .tolerations
                        .iter()
                        .any(|tol| tolerates(tol, taint))
                })
                .count();
            score += self.taint * 100.0 / (1.0 + intolerable as f64);
        }
        score
    }
}
