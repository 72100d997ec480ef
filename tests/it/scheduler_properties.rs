//! Properties of the scheduling session over random clusters, queues and gangs: no gang is
//! planned below its `minMember`, no node is over-committed, no queue exceeds its capability,
//! and the same snapshot always gives the same plan.
//!
//! `cargo test` runs 256 cases; `cargo test --test it scheduler_properties:: -- --ignored` runs
//! 4,096.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;
use serde_json::json;
use tephra::scheduler::outcome::Verdict;
use tephra::scheduler::resource::Resource;
use tephra::scheduler::{SchedulerConf, run_session};
use tephra_scheduler::testing::{self, World};

#[derive(Clone, Debug)]
struct GangSpec {
    queue: usize,
    size: usize,
    min: usize,
    milli_cpu: u32,
    mem_mi: u32,
    inqueue: bool,
    running: usize,
}

#[derive(Clone, Debug)]
struct ClusterSpec {
    nodes: Vec<(u32, u32)>,
    queues: Vec<(i32, Option<u32>)>,
    gangs: Vec<GangSpec>,
}

fn cluster() -> impl Strategy<Value = ClusterSpec> {
    let nodes = prop::collection::vec((1u32..=16, 1u32..=64), 1..8);
    let queues = prop::collection::vec((1i32..=4, prop::option::of(1u32..=24)), 1..4);
    (nodes, queues).prop_flat_map(|(nodes, queues)| {
        let nq = queues.len();
        let gang = (
            0..nq,
            1usize..=6,
            0usize..=6,
            100u32..=4000,
            64u32..=8192,
            any::<bool>(),
            0usize..=3,
        )
            .prop_map(
                |(queue, size, min, milli_cpu, mem_mi, inqueue, running)| GangSpec {
                    queue,
                    size,
                    min: min.clamp(1, size),
                    milli_cpu,
                    mem_mi,
                    inqueue,
                    running: running.min(size),
                },
            );
        (
            Just(nodes),
            Just(queues),
            prop::collection::vec(gang, 0..12),
        )
            .prop_map(|(nodes, queues, gangs)| ClusterSpec {
                nodes,
                queues,
                gangs,
            })
    })
}

/// Builds the world; running pods are placed first-fit so the starting state is valid.
fn build(spec: &ClusterSpec) -> World {
    let mut w = World::default();
    for (i, (cpu, mem)) in spec.nodes.iter().enumerate() {
        w.index
            .apply_node(&testing::node(&format!("node-{i}"), *cpu, *mem, 110));
    }
    for (i, (weight, cap)) in spec.queues.iter().enumerate() {
        let mut q = testing::queue(&format!("q{i}"), *weight);
        if let Some(c) = cap {
            q.spec.capability =
                Some(serde_json::from_value(json!({"cpu": c.to_string()})).unwrap());
        }
        w.index.apply_queue(&q);
    }
    let mut free: Vec<(f64, f64)> = spec
        .nodes
        .iter()
        .map(|(c, m)| (*c as f64 * 1000.0, *m as f64 * 1024.0))
        .collect();
    for (g, gs) in spec.gangs.iter().enumerate() {
        let name = format!("g{g}");
        let queue = format!("q{}", gs.queue);
        let pg = testing::podgroup(
            "ns",
            &name,
            &queue,
            gs.min as i32,
            Some((gs.milli_cpu * gs.min as u32, gs.mem_mi * gs.min as u32)),
        );
        let phase = if gs.running >= gs.min {
            "Running"
        } else if gs.inqueue {
            "Inqueue"
        } else {
            "Pending"
        };
        w.index.apply_podgroup(&testing::with_phase(pg, phase));
        for i in 0..gs.size {
            let p = testing::pod("ns", &format!("{name}-{i}"), &name, gs.milli_cpu, gs.mem_mi);
            let fit = free
                .iter()
                .position(|(c, m)| *c >= gs.milli_cpu as f64 && *m >= gs.mem_mi as f64);
            match fit {
                Some(n) if i < gs.running => {
                    free[n].0 -= gs.milli_cpu as f64;
                    free[n].1 -= gs.mem_mi as f64;
                    w.index
                        .apply_pod(&testing::running(p, &format!("node-{n}")));
                }
                _ => w.index.apply_pod(&p),
            }
        }
    }
    w
}

fn check(spec: &ClusterSpec) -> Result<(), TestCaseError> {
    let w = build(spec);
    let conf = SchedulerConf::builtin();
    let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let snap = w.index.snapshot();
    let out = run_session(snap.clone(), &conf, "p", now.clone());
    let again = run_session(snap.clone(), &conf, "p", now);
    prop_assert_eq!(&out.plan.placements, &again.plan.placements, "reproducible");

    // Per node: what already runs there plus what the plan adds.
    let mut used: BTreeMap<String, Resource> = BTreeMap::new();
    let mut per_queue: BTreeMap<String, f64> = BTreeMap::new();
    let mut placed_per_job: BTreeMap<String, usize> = BTreeMap::new();
    for job in &snap.jobs {
        for &t in &job.tasks {
            let task = &snap.tasks[t];
            let node = match (&task.node, out.plan.placements.get(&task.uid)) {
                (Some(n), _) if task.status.occupies_node() => Some(n.clone()),
                (None, Some(p)) => {
                    *placed_per_job.entry(job.id.clone()).or_default() += 1;
                    Some(p.node.clone())
                }
                _ => None,
            };
            if let Some(n) = node {
                used.entry(n).or_default().add(&task.resreq);
                *per_queue.entry(job.queue.clone()).or_default() += task.resreq.milli_cpu;
            }
        }
    }
    for n in &snap.nodes {
        if let Some(u) = used.get(&n.name) {
            prop_assert!(
                u.less_equal(&n.allocatable),
                "node {} over-committed: {} > {}",
                n.name,
                u,
                n.allocatable
            );
        }
    }
    for job in &snap.jobs {
        if placed_per_job.contains_key(&job.id) {
            prop_assert_eq!(
                &out.plan.gangs[&job.id],
                &Verdict::Ready,
                "gang {} placed below minMember",
                job.id
            );
            let already = job
                .tasks
                .iter()
                .filter(|&&t| {
                    snap.tasks[t].status.is_allocated() || snap.tasks[t].status.is_completed()
                })
                .count();
            prop_assert!(already + placed_per_job[&job.id] >= job.min_available as usize);
        }
    }
    for (i, (_, cap)) in spec.queues.iter().enumerate() {
        let q = format!("q{i}");
        let placed_here = snap
            .jobs
            .iter()
            .any(|j| j.queue == q && placed_per_job.contains_key(&j.id));
        if let (Some(c), true) = (cap, placed_here) {
            let total = per_queue.get(&q).copied().unwrap_or(0.0);
            prop_assert!(
                total <= *c as f64 * 1000.0 + 0.1,
                "queue {q} over capability: {total}m > {c}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn sessions_keep_gangs_whole_nodes_and_queues_within_bounds(spec in cluster()) {
        check(&spec)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]
    #[test]
    #[ignore = "long run: cargo test --test it scheduler_properties:: -- --ignored"]
    fn sessions_keep_gangs_whole_nodes_and_queues_within_bounds_long(spec in cluster()) {
        check(&spec)?;
    }
}
