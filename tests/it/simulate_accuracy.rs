//! How right `tephra simulate` is: a run of `tephra serve --embedded` is recorded (the cluster
//! dumped with `simulate --dump` the moment before a workload is submitted, then each job's
//! observed start: when its `minAvailable`-th pod started) and replayed through `simulate
//! --from` the dump with the same jobs. The workloads are the benchmarks' two: a burst of gangs
//! that the cluster runs in waves, and two queues of weights 1 and 3 sharing it.
//!
//! The guarantee kept: the median error of the predicted start is within two scheduling
//! periods (2 s). Each run prints its errors (`--nocapture`): the median and p90 quoted in the
//! book's what-if page come from here.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
use tephra::api::{Job, Queue};

use crate::common::served::{Embedded, kubeconfig};
use crate::simulate::{create, dump_into, simulate_json, temp_dir, vcjob, write_jobs};

/// The scheduling period of `serve` and of the simulator (both default to one second).
const PERIOD_SECONDS: f64 = 1.0;

/// A workload: queues (name, weight) and vcJobs (name, queue, replicas = minAvailable, cpu per
/// pod, run seconds), submitted in this order.
struct Workload {
    name: &'static str,
    queues: Vec<(&'static str, i32)>,
    jobs: Vec<(String, &'static str, i32, &'static str, u64)>,
}

/// Nine gangs of four 2-cpu pods (8 cpu each) on 24 cpu: three run at a time, in three waves.
fn burst() -> Workload {
    Workload {
        name: "burst",
        queues: vec![("burst", 1)],
        jobs: (0..9)
            .map(|i| (format!("gang-{i}"), "burst", 4, "2", 5))
            .collect(),
    }
}

/// Two queues of weights 1 and 3, each with twelve one-pod jobs of 2 cpu, on 24 cpu: the
/// cluster holds twelve pods at a time, shared 1:3 while both have work waiting.
fn queue_share() -> Workload {
    let mut jobs = Vec::new();
    for i in 0..12 {
        jobs.push((format!("light-{i}"), "light", 1, "2", 5));
        jobs.push((format!("heavy-{i}"), "heavy", 1, "2", 5));
    }
    Workload {
        name: "queue-share",
        queues: vec![("light", 1), ("heavy", 3)],
        jobs,
    }
}

/// When each job's `minAvailable`-th pod started (the pods' `status.startTime`), once every
/// job has that many started; bounded by `secs`.
async fn observed_starts(c: &Client, w: &Workload, secs: u64) -> BTreeMap<String, Timestamp> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let list = pods
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing pods: {e}"));
        let mut started: BTreeMap<String, Vec<Timestamp>> = BTreeMap::new();
        for p in &list.items {
            let job = p.labels().get("volcano.sh/job-name").cloned();
            let start = p.status.as_ref().and_then(|s| s.start_time.as_ref());
            if let (Some(job), Some(t)) = (job, start) {
                started.entry(job).or_default().push(t.0);
            }
        }
        let done: BTreeMap<String, Timestamp> = w
            .jobs
            .iter()
            .filter_map(|(name, _, min, _, _)| {
                let mut ts = started.get(name)?.clone();
                ts.sort();
                ts.get(*min as usize - 1).map(|t| (name.clone(), *t))
            })
            .collect();
        if done.len() == w.jobs.len() {
            return done;
        }
        assert!(
            Instant::now() < deadline,
            "{}: only {} of {} jobs started within {secs}s",
            w.name,
            done.len(),
            w.jobs.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Records the workload on a fresh `serve --embedded`, replays it through simulate, and
/// returns (job, predicted, observed) start in seconds from the dump.
async fn record_and_replay(w: &Workload) -> Vec<(String, i64, i64)> {
    let (served, c) = Embedded::start(&[]).await;
    let dir = temp_dir(w.name);
    let kc = kubeconfig(&dir, &served.api_url);
    for (name, weight) in &w.queues {
        create::<Queue>(
            Api::all(c.clone()),
            serde_json::json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                               "metadata": {"name": name}, "spec": {"weight": weight}}),
        )
        .await;
    }
    // Let the queues open before the dump is taken.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (dump_path, dump) = dump_into(&dir, &kc);
    let jobs: Vec<Value> = w
        .jobs
        .iter()
        .map(|(name, queue, n, cpu, run)| vcjob(name, queue, *n, cpu, *run))
        .collect();
    for j in &jobs {
        create::<Job>(Api::namespaced(c.clone(), "default"), j.clone()).await;
    }
    let taken: Value = serde_saphyr::from_slice(&dump).unwrap_or_else(|e| panic!("{e}"));
    let taken_at: Timestamp = taken["takenAt"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no takenAt in the dump"));
    let observed = observed_starts(&c, w, 120).await;
    drop(served);

    let file = write_jobs(&dir, &jobs);
    let predicted = simulate_json(&["--from", &dump_path.to_string_lossy(), "-f", &file]);
    let _ = std::fs::remove_dir_all(&dir);
    w.jobs
        .iter()
        .map(|(name, ..)| {
            let row = predicted
                .iter()
                .find(|r| r["name"] == name.as_str())
                .unwrap_or_else(|| panic!("no prediction for {name}: {predicted:?}"));
            let p = row["startAfterSeconds"]
                .as_i64()
                .unwrap_or_else(|| panic!("{name} is predicted never to start: {row}"));
            let o = observed[name].as_second() - taken_at.as_second();
            (name.clone(), p, o)
        })
        .collect()
}

/// The median and 90th percentile of absolute errors (seconds).
fn median_p90(rows: &[(String, i64, i64)]) -> (f64, f64) {
    let mut errors: Vec<i64> = rows.iter().map(|(_, p, o)| (p - o).abs()).collect();
    errors.sort_unstable();
    let at = |q: f64| errors[((errors.len() - 1) as f64 * q).round() as usize] as f64;
    (at(0.5), at(0.9))
}

async fn accuracy_of(w: Workload) {
    let rows = record_and_replay(&w).await;
    let (median, p90) = median_p90(&rows);
    eprintln!(
        "{}: predicted vs observed start (s): {}",
        w.name,
        rows.iter()
            .map(|(n, p, o)| format!("{n} {p}/{o}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    eprintln!(
        "{}: {} jobs, median error {median} s, p90 {p90} s",
        w.name,
        rows.len()
    );
    assert!(
        median <= 2.0 * PERIOD_SECONDS,
        "{}: the median error {median} s is over two scheduling periods: {rows:?}",
        w.name
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_predicts_a_burst_of_gangs_within_two_periods() {
    accuracy_of(burst()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_predicts_two_queues_sharing_the_cluster_within_two_periods() {
    accuracy_of(queue_share()).await;
}
