//! Workloads the guarantees are measured on, shared by the tests and the utilization
//! benchmark, and what a finished run shows (utilization, shares over a window).

use std::collections::BTreeMap;

use super::engine::Sim;
use super::scenario::{JobSpec, NodeSpec, QueueSpec, Scenario, TaskSpec};

/// Queues of the given weights, each backlogged with `per_queue` one-pod jobs of one cpu
/// running 5 to 8 s (in turn), all submitted at once, on `nodes` nodes of `cpus` cpus; the run
/// lasts `until_ms`.
pub fn backlogged_queues(
    weights: &[u32],
    nodes: u32,
    cpus: u32,
    per_queue: u32,
    until_ms: i64,
) -> Scenario {
    let queues: Vec<QueueSpec> = weights
        .iter()
        .enumerate()
        .map(|(i, w)| QueueSpec {
            name: format!("q{i}"),
            weight: *w,
            ..QueueSpec::default()
        })
        .collect();
    let mut jobs = Vec::new();
    for n in 0..per_queue {
        for q in &queues {
            jobs.push(JobSpec {
                name: format!("{}-{n}", q.name),
                queue: Some(q.name.clone()),
                min_available: Some(1),
                tasks: vec![TaskSpec {
                    name: "work".into(),
                    replicas: 1,
                    cpu: "1".into(),
                    memory: "256Mi".into(),
                    duration_ms: 5000 + (n as i64 % 4) * 1000,
                    ..TaskSpec::default()
                }],
                ..JobSpec::default()
            });
        }
    }
    Scenario {
        period_ms: 1000,
        until_ms,
        bind_ms: 0,
        conf: None,
        nodes: vec![NodeSpec {
            name: "node".into(),
            count: nodes,
            cpu: cpus.to_string(),
            memory: format!("{}Gi", cpus * 4),
            ..NodeSpec::default()
        }],
        hyper_nodes: Vec::new(),
        queues,
        jobs,
        other_pods: Vec::new(),
    }
}

/// The time-averaged share of the cluster's cpu bound in `[from_ms, to_ms)`, in total and by
/// queue.
#[derive(Clone, Debug, PartialEq)]
pub struct Usage {
    /// Bound cpu over allocatable cpu, 0 to 1.
    pub utilization: f64,
    /// Each queue's part of the allocatable cpu, 0 to 1.
    pub by_queue: BTreeMap<String, f64>,
}

/// What the finished run held over a window.
pub fn usage(sim: &Sim, from_ms: i64, to_ms: i64) -> Usage {
    let span = (to_ms - from_ms).max(1) as f64;
    let total = sim.total_milli_cpu.max(1.0) * span;
    let mut by_queue: BTreeMap<String, f64> = BTreeMap::new();
    let mut bound = 0.0;
    for i in &sim.intervals {
        let overlap = (i.to_ms.min(to_ms) - i.from_ms.max(from_ms)).max(0) as f64;
        let held = overlap * i.milli_cpu;
        bound += held;
        *by_queue.entry(i.queue.clone()).or_default() += held / total;
    }
    Usage {
        utilization: bound / total,
        by_queue,
    }
}
