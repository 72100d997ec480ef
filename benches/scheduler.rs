//! Scheduling session benchmark: one session (enqueue + allocate + backfill, Volcano's default
//! configuration) over a large cluster, and how its time grows with nodes and with gangs.
//!
//! `cargo bench --bench scheduler` prints, per size: the index load time, the snapshot (the
//! part taken with the index locked, then the copy made after the lock is released), the
//! session and its actions, placements made, and resident memory. The headline case is
//! 5,000 nodes (8 cpu, 32 GiB), 50,000 running pods and 1,000 pending gangs of 10 pods in 10
//! queues. Set `TEPHRA_BENCH_QUICK=1` for the headline case only.
//!
//! The topology case: the same 5,000 nodes grouped by HyperNodes in three tiers (racks of 16
//! nodes, spines of 16 racks, one top), 1,000 pending gangs of 8 in `hard` mode of tier 1.
//! It checks that every placed gang is inside one rack, and holds the session to 500 ms.
//!
//! The pool and harness-gang cases hold up the scale harness's stream and gang workloads in
//! one session each (see their functions).

use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tephra::scheduler::runner::DEFAULT_ASSUME_TTL;
use tephra::scheduler::{Outcome, SchedulerConf, run_session};
use tephra_scheduler::testing::{self, World};

/// The allocator the `tephra` binary runs on, so these figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(0.0)
}

struct Row {
    nodes: usize,
    running: usize,
    gangs: usize,
    load_ms: f64,
    /// `ClusterIndex::snapshot_source`: what the extender's filter and the watches wait for.
    locked_ms: f64,
    /// `SnapshotSource::build`: the copy, made on the session's thread.
    copy_ms: f64,
    session_ms: f64,
    actions: Vec<(String, f64)>,
    placed: usize,
    rss: f64,
}

/// Nodes per rack and racks per spine in the topology case.
const RACK: usize = 16;
/// The topology case's session target, ms.
const TOPOLOGY_TARGET_MS: f64 = 500.0;

fn case(nodes: usize, running_per_node: usize, gangs: usize) -> Row {
    measure(nodes, running_per_node, gangs, 10, false).0
}

/// Racks (tier 1, `RACK` nodes each), spines (tier 2, `RACK` racks each) and one top (tier 3).
fn add_topology(w: &mut World, nodes: usize) {
    let mut racks = Vec::new();
    for (r, start) in (0..nodes).step_by(RACK).enumerate() {
        let members: Vec<String> = (start..nodes.min(start + RACK))
            .map(|i| format!("node-{i}"))
            .collect();
        let name = format!("rack-{r}");
        w.index
            .apply_hypernode(&testing::hypernode(&name, 1, "Node", &members));
        racks.push(name);
    }
    let mut spines = Vec::new();
    for (s, chunk) in racks.chunks(RACK).enumerate() {
        let name = format!("spine-{s}");
        w.index
            .apply_hypernode(&testing::hypernode(&name, 2, "HyperNode", chunk));
        spines.push(name);
    }
    w.index
        .apply_hypernode(&testing::hypernode("top", 3, "HyperNode", &spines));
}

/// One session over the case; with `topology`, also whether every placed gang is inside one
/// rack.
fn measure(
    nodes: usize,
    running_per_node: usize,
    gangs: usize,
    gang_size: usize,
    topology: bool,
) -> (Row, bool) {
    let start = Instant::now();
    let mut w = World::default();
    for i in 0..nodes {
        w.index
            .apply_node(&testing::node(&format!("node-{i}"), 8, 32, 110));
    }
    for q in 0..10 {
        w.index
            .apply_queue(&testing::queue(&format!("q{q}"), 1 + q % 3));
    }
    // Running gangs of 10 fill each node to half its cpu: 10 pods × 400m per node.
    let running = nodes * running_per_node;
    for g in 0..running / 10 {
        let name = format!("run{g}");
        w.index.apply_podgroup(&testing::with_phase(
            testing::podgroup("bench", &name, &format!("q{}", g % 10), 10, None),
            "Running",
        ));
        for i in 0..10 {
            let p = testing::pod("bench", &format!("{name}-{i}"), &name, 400, 1024);
            let n = (g * 10 + i) / running_per_node.max(1);
            w.index
                .apply_pod(&testing::running(p, &format!("node-{}", n % nodes)));
        }
    }
    if topology {
        add_topology(&mut w, nodes);
    }
    let size = gang_size as u32;
    for g in 0..gangs {
        let name = format!("pend{g}");
        let mut pg = testing::with_phase(
            testing::podgroup(
                "bench",
                &name,
                &format!("q{}", g % 10),
                size as i32,
                Some((size * 500, size * 1024)),
            ),
            "Pending",
        );
        if topology {
            pg.spec.network_topology = Some(tephra::api::scheduling::NetworkTopologySpec {
                mode: Some(tephra::api::scheduling::NetworkTopologyMode::Hard),
                highest_tier_allowed: Some(1),
                highest_tier_name: None,
            });
        }
        w.index.apply_podgroup(&pg);
        for i in 0..gang_size {
            w.index.apply_pod(&testing::pod(
                "bench",
                &format!("{name}-{i}"),
                &name,
                500,
                1024,
            ));
        }
    }
    let load_ms = start.elapsed().as_secs_f64() * 1000.0;
    let conf = SchedulerConf::builtin();
    let t = Instant::now();
    let source = w.index.snapshot_source();
    let locked_ms = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    let snap = source.build();
    let copy_ms = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    let out = run_session(
        snap,
        &conf,
        "bench",
        Time(k8s_openapi::jiff::Timestamp::now()),
    );
    let session_ms = t.elapsed().as_secs_f64() * 1000.0;
    // Every placed gang inside one rack: `node-i` is in rack `i / RACK`.
    let mut racks: std::collections::HashMap<&str, std::collections::BTreeSet<usize>> =
        std::collections::HashMap::new();
    for p in out.plan.placements.values() {
        let i: usize = p
            .node
            .trim_start_matches("node-")
            .parse()
            .unwrap_or(usize::MAX);
        racks.entry(p.job.as_str()).or_default().insert(i / RACK);
    }
    let inside = racks.values().all(|r| r.len() == 1);
    let row = Row {
        nodes,
        running,
        gangs,
        load_ms,
        locked_ms,
        copy_ms,
        session_ms,
        actions: out.figures.action_ms.clone(),
        placed: out.plan.placements.len(),
        rss: rss_mib(),
    };
    (row, inside)
}

fn print(r: &Row) {
    let actions: Vec<String> = r
        .actions
        .iter()
        .map(|(a, ms)| format!("{a} {ms:.0}"))
        .collect();
    println!(
        "| {:>5} | {:>6} | {:>5} | {:>8.0} | {:>6.1} | {:>6.0} | {:>8.0} | {:<32} | {:>6} | {:>6.0} |",
        r.nodes,
        r.running,
        r.gangs,
        r.load_ms,
        r.locked_ms,
        r.copy_ms,
        r.session_ms,
        actions.join(", "),
        r.placed,
        r.rss
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    println!(
        "| nodes | running | gangs | load ms | locked ms | copy ms | session ms | actions ms | placed | RSS MiB |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |");
    print(&case(5000, 10, 1000));
    let (row, inside) = measure(5000, 10, 1000, 8, true);
    print(&row);
    let ok = inside && row.session_ms <= TOPOLOGY_TARGET_MS;
    println!(
        "topology (hard, tier 1, gangs of 8): session {:.0} ms (target ≤ {TOPOLOGY_TARGET_MS:.0}), {} pods placed, every gang inside one rack: {} — {}",
        row.session_ms,
        row.placed,
        if inside { "yes" } else { "no" },
        if ok { "PASS" } else { "FAIL" }
    );
    let (ms, placed) = pool_case(false);
    let (full_ms, _) = pool_case(true);
    println!(
        "pool (2,000 nodes, a pool of 20 chosen by nodeSelector, 1,900 waiting gangs of 2, 4 and 8): session {ms:.0} ms placing {placed} pods with the pool empty, {full_ms:.0} ms with 2 of its 640 cpu free"
    );
    let (ms, placed, locked) = harness_gang_case();
    println!(
        "harness gang (2,000 nodes, 10,000 running pods not in gangs, 100 gangs of 100 pods labelled by index): session {ms:.0} ms placing {placed} pods; then, with them held, locked {locked:.2} ms"
    );
    if std::env::var_os("TEPHRA_BENCH_QUICK").is_some() {
        return;
    }
    for nodes in [500, 1000, 2000, 5000] {
        print(&case(nodes, 10, 1000));
    }
    for gangs in [100, 250, 500, 1000] {
        print(&case(5000, 10, gangs));
    }
}

/// The scale harness's stream, held up: 2,000 nodes (32 cpu), the 20 of them labelled
/// `pool=stream` the only ones its pods may use, and 1,900 gangs of 2, 4 and 8 one-cpu pods
/// waiting in ten queues, with the pool empty (`full == false`: 640 pods fit) or all but 2 cpu
/// of it held (then every larger gang places two pods, finds no room for its third and is
/// given up). Returns the session's ms and the pods placed.
fn pool_case(full: bool) -> (f64, usize) {
    use testing::{node, pod, podgroup, queue, running, with_phase};
    let mut w = World::default();
    for q in 0..10 {
        w.index.apply_queue(&queue(&format!("q{q}"), 1));
    }
    for i in 0..2000 {
        let mut n = node(&format!("node-{i}"), 32, 256, 110);
        if i < 20
            && let Some(labels) = n.metadata.labels.as_mut()
        {
            labels.insert("pool".into(), "stream".into());
        }
        w.index.apply_node(&n);
    }
    let in_pool = |mut p: k8s_openapi::api::core::v1::Pod| {
        if let Some(spec) = p.spec.as_mut() {
            spec.node_selector = Some([("pool".to_string(), "stream".to_string())].into());
        }
        p
    };
    if full {
        // 638 of the pool's 640 cpu: the last node keeps 2 free.
        for g in 0..319 {
            let name = format!("run-{g}");
            w.index.apply_podgroup(&with_phase(
                podgroup("bench", &name, "q0", 2, None),
                "Running",
            ));
            for i in 0..2 {
                let p = in_pool(pod("bench", &format!("{name}-{i}"), &name, 1000, 64));
                w.index
                    .apply_pod(&running(p, &format!("node-{}", (g * 2 + i) / 32)));
            }
        }
    }
    for g in 0..1900 {
        let name = format!("wait-{g}");
        let size = [2, 4, 8][g % 3];
        let pg = podgroup(
            "bench",
            &name,
            &format!("q{}", g % 10),
            size as i32,
            Some((1000 * size, 64 * size)),
        );
        w.index.apply_podgroup(&with_phase(pg, "Inqueue"));
        for i in 0..size {
            let mut p = in_pool(pod("bench", &format!("{name}-{i}"), &name, 1000, 64));
            as_vcjob_member(&mut p, &name, i);
            w.index.apply_pod(&p);
        }
    }
    let (ms, out) = timed_session(&w);
    (ms, out.plan.placements.len())
}

/// The scale harness's gang case, held up: 2,000 nodes (8 cpu), 10,000 running pods of 100m
/// that are not gangs', and 100 Inqueue gangs of 100 one-cpu pods (minMember 100), each pod
/// labelled by its job and index as a vcJob's are. Returns the session's ms, the pods placed
/// and the ms the next session then holds the index for, with those placements held.
fn harness_gang_case() -> (f64, usize, f64) {
    use testing::{node, pod, podgroup, queue, running, with_phase};
    let mut w = World::default();
    w.index.apply_queue(&queue("default", 1));
    for i in 0..2000 {
        let mut n = node(&format!("kwok-node-{i}"), 8, 32, 110);
        if let Some(labels) = n.metadata.labels.as_mut() {
            labels.insert("type".into(), "kwok".into());
        }
        w.index.apply_node(&n);
    }
    for i in 0..10_000 {
        let mut p = running(
            pod("existing", &format!("ex-{i}"), "", 100, 128),
            &format!("kwok-node-{}", i % 2000),
        );
        p.metadata.annotations = None;
        if let Some(s) = p.spec.as_mut() {
            s.scheduler_name = Some("default-scheduler".into());
        }
        w.index.apply_pod(&p);
    }
    for g in 0..100 {
        let name = format!("gang-{g}");
        let pg = podgroup(
            "scale-gang",
            &name,
            "default",
            100,
            Some((100_000, 100 * 1024)),
        );
        w.index.apply_podgroup(&with_phase(pg, "Inqueue"));
        for i in 0..100 {
            let mut p = pod(
                "scale-gang",
                &format!("{name}-worker-{i}"),
                &name,
                1000,
                1024,
            );
            as_vcjob_member(&mut p, &name, i);
            if let Some(s) = p.spec.as_mut() {
                s.node_selector = Some([("type".to_string(), "kwok".to_string())].into());
            }
            w.index.apply_pod(&p);
        }
    }
    let (session_ms, out) = timed_session(&w);
    // What a runner does with the outcome, then what the next session holds the lock for
    // (`ClusterIndex::begin_session`): while a burst's placements are held, this
    // is what the extender's filter may wait for, a few times a second.
    let now = Instant::now();
    for (uid, p) in &out.plan.placements {
        w.index.assume(uid, &p.node, DEFAULT_ASSUME_TTL, now);
    }
    let runs = 20;
    let t = Instant::now();
    for _ in 0..runs {
        std::hint::black_box(w.index.begin_session(Instant::now()));
    }
    let locked_ms = t.elapsed().as_secs_f64() * 1000.0 / f64::from(runs);
    (session_ms, out.plan.placements.len(), locked_ms)
}

/// Labels `p` by its job and index, as a vcJob's pods are: no two pods are alike in all.
fn as_vcjob_member(p: &mut k8s_openapi::api::core::v1::Pod, job: &str, index: impl ToString) {
    p.metadata.labels = Some(
        [
            ("volcano.sh/job-name".to_string(), job.to_string()),
            ("volcano.sh/task-index".to_string(), index.to_string()),
        ]
        .into(),
    );
}

/// One session over `w` with Volcano's default configuration: its ms and what it decided.
fn timed_session(w: &World) -> (f64, Outcome) {
    let t = Instant::now();
    let out = run_session(
        w.index.snapshot(),
        &SchedulerConf::builtin(),
        "bench",
        Time(k8s_openapi::jiff::Timestamp::now()),
    );
    (t.elapsed().as_secs_f64() * 1000.0, out)
}
