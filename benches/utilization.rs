//! Utilization under contention: two queues of weights 1 and 3, each backlogged with far more
//! one-cpu pods (5 to 8 s each) than the cluster holds. Printed: the share of the cluster's cpu
//! bound on average over a window while both queues have work waiting, and each queue's part.
//!
//! 1. the simulator (`tephra::scheduler::sim`): the real session on a simulated clock, 6 nodes
//!    of 8 cpu, 320 pods per queue, window 10–55 s; and the simulator's own speed (sessions/s,
//!    and the saved scenarios of `crates/scheduler/tests/sim/` replayed, scenarios/s, on one core);
//! 2. `tephra serve --embedded` with its stand-ins: 6 nodes of 8 cpu, 320 vcJobs of one pod per
//!    queue (the kubelet stand-in ends each pod after its `simulation.tephra.io/run-seconds`),
//!    window 10–50 s after submission.
//!
//! 3. a big job on `serve --embedded`: a vcJob of 10,000 one-cpu replicas
//!    (`TEPHRA_BENCH_BIG_REPLICAS`) needing one, on 3 nodes of 8 cpu: how soon all 24 cpu are
//!    bound.
//!
//! `cargo bench --bench utilization`; `TEPHRA_BENCH_PARTS` picks parts (a comma list of
//! `simulator`, `embedded`, `big`; default all three); each embedded part is bounded by
//! `TEPHRA_BENCH_TIMEOUT` seconds (default 120).

#[path = "../tests/it/common/served.rs"]
#[allow(dead_code)]
mod served;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tephra::api::{Job, Queue};
use tephra::scheduler::sim::workloads::{backlogged_queues, usage};
use tephra::scheduler::sim::{Checker, Scenario, Sim};

/// The allocator the `tephra` binary runs on, so these figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const WEIGHTS: [u32; 2] = [1, 3];
const NODES: u32 = 6;
const PER_QUEUE: u32 = 320;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn simulator() {
    let until = 55_000;
    let start = Instant::now();
    let mut sim = Sim::new(backlogged_queues(&WEIGHTS, NODES, 8, PER_QUEUE, until))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut sessions = 0u32;
    while sim.next_session().is_some() {
        sessions += 1;
    }
    let took = start.elapsed().as_secs_f64();
    let u = usage(&sim, 10_000, until);
    println!(
        "simulator: queues 1:3, {NODES} nodes x 8 cpu, {PER_QUEUE} one-cpu pods per queue (5-8 s), window 10-55 s"
    );
    println!("  cpu bound on average   {:>6.1} %", u.utilization * 100.0);
    for (q, part) in &u.by_queue {
        println!(
            "  {q} held              {:>6.1} % of the cluster ({:.1} % of what was bound)",
            part * 100.0,
            part / u.utilization * 100.0
        );
    }
    println!(
        "  {sessions} sessions in {took:.2} s: {:.0} sessions/s",
        sessions as f64 / took
    );
    // The saved scenarios with every check after every session, replayed for about 3 s.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/scheduler/tests/sim");
    let mut scenarios: Vec<Scenario> = Vec::new();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "yaml")
            && let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(s) = Scenario::from_yaml(&text, &path.display().to_string())
        {
            scenarios.push(s);
        }
    }
    let start = Instant::now();
    let (mut runs, mut steps) = (0u64, 0u64);
    while start.elapsed() < Duration::from_secs(3) && !scenarios.is_empty() && runs < 100_000 {
        for s in &scenarios {
            let Ok(mut sim) = Sim::new(s.clone()) else {
                continue;
            };
            let mut checker = Checker::default();
            while let Some(rec) = sim.next_session() {
                checker.check(&sim, &rec);
                steps += 1;
            }
            runs += 1;
        }
    }
    let took = start.elapsed().as_secs_f64();
    println!(
        "  saved scenarios with every check: {:.0} scenarios/s, {:.0} session steps/s (one core)",
        runs as f64 / took,
        steps as f64 / took
    );
}

/// A vcJob of `replicas` one-cpu pods needing one; each runs `seconds` when given (the kubelet
/// stand-in's annotation), else until deleted.
fn vcjob(name: &str, queue: &str, replicas: u32, seconds: Option<u32>) -> Job {
    let annotations = match seconds {
        Some(s) => json!({"simulation.tephra.io/run-seconds": s.to_string()}),
        None => json!({}),
    };
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minAvailable": 1,
            "queue": queue,
            "tasks": [{
                "name": "w",
                "replicas": replicas,
                "template": {
                    "metadata": {"annotations": annotations},
                    "spec": {"restartPolicy": "Never", "containers": [{
                        "name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}
                    }]}
                }
            }]
        }
    }))
    .unwrap_or_else(|e| panic!("job: {e}"))
}

/// Follows the pods of namespace `default` by watch: per pod name, whether it holds a node now
/// (bound, not finished, not deleted). A watch, not repeated LISTs, which would load the
/// server being measured.
fn follow_pods(client: &kube::Client) -> (Arc<Mutex<HashMap<String, bool>>>, JoinHandle<()>) {
    let holding: Arc<Mutex<HashMap<String, bool>>> = Arc::default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let h = holding.clone();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()));
        while let Some(ev) = events.next().await {
            let Ok(ev) = ev else { continue };
            let Ok(mut h) = h.lock() else { return };
            let mut see = |p: &Pod, gone: bool| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
                let holds = !gone && bound && !matches!(phase, Some("Succeeded" | "Failed"));
                h.insert(p.metadata.name.clone().unwrap_or_default(), holds);
            };
            match ev {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => see(&p, false),
                watcher::Event::Delete(p) => see(&p, true),
                _ => {}
            }
        }
    });
    (holding, task)
}

async fn embedded(timeout: Duration) {
    let nodes = NODES.to_string();
    let (served, client) = served::Embedded::start(&["--embedded-nodes", &nodes]).await;
    let queues: Api<Queue> = Api::all(client.clone());
    let names = ["wq-a", "wq-b"];
    for (name, weight) in names.iter().zip(WEIGHTS) {
        let q: Queue = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {"weight": weight}
        }))
        .unwrap_or_else(|e| panic!("queue: {e}"));
        queues
            .create(&PostParams::default(), &q)
            .await
            .unwrap_or_else(|e| panic!("queue {name}: {e}"));
    }
    // The vcJob webhook admits jobs of Open queues: wait for the queue controller.
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in names {
        while Instant::now() < deadline {
            let open = queues
                .get(name)
                .await
                .ok()
                .and_then(|q| {
                    q.state()
                        .map(|s| *s == tephra::api::scheduling::QueueState::Open)
                })
                .unwrap_or(false);
            if open {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let (holding, follow) = follow_pods(&client);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    let load_start = load();
    let all: Vec<(String, &str, u32)> = (0..PER_QUEUE)
        .flat_map(|i| {
            names
                .iter()
                .map(move |q| (format!("{q}-{i}"), *q, 5 + i % 4))
        })
        .collect();
    let created: Vec<Result<(), String>> = futures::stream::iter(all)
        .map(|(name, queue, secs)| {
            let jobs = jobs.clone();
            async move {
                jobs.create(&PostParams::default(), &vcjob(&name, queue, 1, Some(secs)))
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("{name}: {e}"))
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    if let Some(Err(e)) = created.iter().find(|c| c.is_err()) {
        panic!("a vcJob was refused: {e}");
    }
    let submitted = start.elapsed();
    // Samples every 100 ms until the window's end: bound cpus per queue.
    let (from, to) = (Duration::from_secs(10), Duration::from_secs(50));
    let mut samples: Vec<[f64; 2]> = Vec::new();
    let mut lines = Duration::ZERO;
    while start.elapsed() < to && start.elapsed() < timeout {
        let now = start.elapsed();
        let by_queue = match holding.lock() {
            Ok(h) => {
                let mut b = [0.0; 2];
                for (name, holds) in h.iter() {
                    if *holds {
                        b[usize::from(name.starts_with("wq-b"))] += 1.0;
                    }
                }
                b
            }
            Err(_) => [0.0; 2],
        };
        if now >= lines {
            println!(
                "  {:>5.1} s  wq-a {:>3}  wq-b {:>3}  (of {} cpu)",
                now.as_secs_f64(),
                by_queue[0],
                by_queue[1],
                NODES * 8
            );
            lines += Duration::from_secs(5);
        }
        if now >= from {
            samples.push(by_queue);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    follow.abort();
    let total = (NODES * 8) as f64;
    let n = samples.len().max(1) as f64;
    let a: f64 = samples.iter().map(|s| s[0]).sum::<f64>() / n;
    let b: f64 = samples.iter().map(|s| s[1]).sum::<f64>() / n;
    println!(
        "serve --embedded: queues wq-a:wq-b = 1:3, {NODES} nodes x 8 cpu, {PER_QUEUE} one-pod vcJobs per queue (5-8 s), submitted in {:.1} s, window 10-50 s, load {load_start} / {}",
        submitted.as_secs_f64(),
        load()
    );
    println!(
        "  cpu bound on average   {:>6.1} %",
        (a + b) / total * 100.0
    );
    println!(
        "  wq-a held {:>5.1} cpu, wq-b {:>5.1} cpu: {:.1} % / {:.1} % of what was bound (weights: 25 / 75)",
        a,
        b,
        a / (a + b).max(1e-9) * 100.0,
        b / (a + b).max(1e-9) * 100.0
    );
    drop(served);
}

/// A vcJob of `replicas` one-cpu pods needing one, on 3 nodes of 8 cpu: how soon its pods hold
/// all 24 cpu (kube-scheduler's stand-in asks about the pods in its own order while the Job
/// controller is still making them).
async fn big_job(replicas: u32, timeout: Duration) {
    let (served, client) = served::Embedded::start(&["--embedded-nodes", "3"]).await;
    let job = vcjob("big", "default", replicas, None);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let (holding, follow) = follow_pods(&client);
    let start = Instant::now();
    jobs.create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("big job: {e}"));
    let mut full = None;
    let mut made_then = 0;
    // When the Job controller had made enough pods to fill the cluster: from then on the
    // room is there for them.
    let mut enough_made = None;
    while start.elapsed() < timeout {
        let (made, bound) = match holding.lock() {
            Ok(h) => (h.len(), h.values().filter(|b| **b).count()),
            Err(_) => (0, 0),
        };
        if made >= 24 && enough_made.is_none() {
            enough_made = Some(start.elapsed());
        }
        if bound >= 24 {
            full = Some(start.elapsed());
            made_then = made;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    follow.abort();
    match full {
        Some(t) => println!(
            "big job: {replicas} one-cpu replicas, minAvailable 1, 3 nodes x 8 cpu: all 24 cpu bound {:.1} s after submission, {:.1} s after its 24th pod was made ({made_then} pods made by then), load {}",
            t.as_secs_f64(),
            t.saturating_sub(enough_made.unwrap_or_default())
                .as_secs_f64(),
            load()
        ),
        None => {
            println!("big job: {replicas} replicas: the cluster was not full within {timeout:?}")
        }
    }
    drop(served);
}

fn main() {
    let parts =
        std::env::var("TEPHRA_BENCH_PARTS").unwrap_or_else(|_| "simulator,embedded,big".into());
    let part = |name: &str| parts.split(',').any(|p| p.trim() == name);
    println!("load average at start: {}", load());
    if part("simulator") {
        simulator();
    }
    let timeout = Duration::from_secs(
        std::env::var("TEPHRA_BENCH_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    if part("embedded") {
        rt.block_on(embedded(timeout));
    }
    if part("big") {
        let replicas: u32 = std::env::var("TEPHRA_BENCH_BIG_REPLICAS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10_000);
        rt.block_on(big_job(replicas, timeout));
    }
}
