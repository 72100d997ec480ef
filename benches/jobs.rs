//! Job controller throughput: `TEPHRA_BENCH_JOBS` vcJobs (default
//! 1000) of `TEPHRA_BENCH_PODS` pods (default 4, in one task) submitted at once to the real
//! `tephra serve --embedded` (every webhook on, the scheduler, the kube-scheduler and kubelet
//! stand-ins). Measured: the time until every pod exists and every job is Running, jobs/s,
//! and the Job controller's API writes per job (from its `tephra_job_writes_total` series).
//! Run with `cargo bench --bench jobs`; bounded by `TEPHRA_BENCH_TIMEOUT` seconds (default 300).
//! `TEPHRA_BENCH_METRICS=FILE` writes tephra's metrics page at the end, to see where the calls went.
//! `TEPHRA_BENCH_PODGROUPS=1` also follows PodGroups (made, admitted) to see where a slow start
//! waits; off by default, as the extra watch loads the server being measured.
//! `TEPHRA_BENCH_SERVE_ARGS` adds flags to `tephra serve` (space-separated), to compare settings.

#[path = "../tests/it/common/served.rs"]
#[allow(dead_code)]
mod served;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tephra::api::batch::JobPhase;
use tephra::api::scheduling::PodGroupPhase;
use tephra::api::{Job, PodGroup};

/// The allocator the `tephra` binary runs on, so these figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn job(i: u64, pods: u64) -> Job {
    let spec = json!({
        "minAvailable": pods,
        "tasks": [{
            "name": "w",
            "replicas": pods,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
            }]}}
        }]
    });
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": format!("bench-{i}"), "namespace": "default"},
        "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("job: {e}"))
}

/// What the bench's watches have seen: each pod's (bound, Running), the Running jobs.
#[derive(Default)]
struct Progress {
    pods: HashMap<String, (bool, bool)>,
    running_jobs: HashSet<String>,
    /// PodGroups and whether each has left Pending (followed with `TEPHRA_BENCH_PODGROUPS`).
    podgroups: HashMap<String, bool>,
}

/// Feeds every event of `api`'s watch into `progress` through `apply(progress, object, gone)`.
async fn follow<K>(api: Api<K>, progress: Arc<Mutex<Progress>>, apply: fn(&mut Progress, &K, bool))
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
    while let Some(ev) = events.next().await {
        let Ok(ev) = ev else { continue };
        let Ok(mut p) = progress.lock() else { return };
        match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => apply(&mut p, &o, false),
            watcher::Event::Delete(o) => apply(&mut p, &o, true),
            _ => {}
        }
    }
}

/// The sum of a counter family's samples in a Prometheus text page.
fn counter_sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// CPU seconds (user + system) `pid` has used so far, from `/proc/PID/stat`; `None` where
/// there is no procfs. Less sensitive to other load on the machine than wall time.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name, which may itself hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the name.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SC_CLK_TCK is 100 on every Linux this runs on.
    Some(ticks / 100.0)
}

fn main() {
    let jobs = env("TEPHRA_BENCH_JOBS", 1000);
    let pods = env("TEPHRA_BENCH_PODS", 4);
    let timeout = Duration::from_secs(env("TEPHRA_BENCH_TIMEOUT", 300));
    let nodes = ((jobs * pods) / 100 + 2).to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    rt.block_on(async move {
        let metrics_port = served::free_port();
        let metrics = format!("127.0.0.1:{metrics_port}");
        let extra = std::env::var("TEPHRA_BENCH_SERVE_ARGS").unwrap_or_default();
        let mut args = vec!["--embedded-nodes", &nodes, "--metrics-listen", &metrics];
        args.extend(extra.split_whitespace());
        let (served, client) = served::Embedded::start(&args).await;
        let api: Api<Job> = Api::namespaced(client.clone(), "default");
        // `Embedded::start` waited for `/readyz`, which holds until the vcJob webhook's queue
        // cache has the built-in queues: every job below is admitted from the first one.
        let pid = served.proc.pid();
        let cpu_before = pid.and_then(cpu_seconds);
        // The bench's own watches decode every pod event on the same cores: reported apart.
        let own_before = cpu_seconds(std::process::id());
        let start = Instant::now();
        let created: Vec<Result<(), String>> = futures::stream::iter(0..jobs)
            .map(|i| {
                let api = api.clone();
                async move {
                    api.create(&PostParams::default(), &job(i, pods))
                        .await
                        .map(|_| ())
                        .map_err(|e| format!("bench-{i}: {e}"))
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        let submitted = start.elapsed();
        let failed: Vec<&String> = created.iter().filter_map(|c| c.as_ref().err()).collect();
        assert!(
            failed.is_empty(),
            "every job was admitted: {} of {jobs} were refused, the first: {}",
            failed.len(),
            failed.first().map_or("", |e| e.as_str())
        );
        // Watches (not repeated LISTs, which would load the server being measured) follow
        // every pod's existence, binding and phase and every job's phase.
        let progress = Arc::new(Mutex::new(Progress::default()));
        let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let pods_task = tokio::spawn(follow(pod_api, progress.clone(), |p: &mut Progress, pod: &Pod, gone| {
            let key = pod.metadata.name.clone().unwrap_or_default();
            if gone {
                p.pods.remove(&key);
                return;
            }
            let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            p.pods.insert(key, (bound, running));
        }));
        let jobs_task = tokio::spawn(follow(api.clone(), progress.clone(), |p: &mut Progress, job: &Job, gone| {
            let key = job.metadata.name.clone().unwrap_or_default();
            if gone {
                p.running_jobs.remove(&key);
            } else if job.phase() == Some(&JobPhase::Running) {
                p.running_jobs.insert(key);
            } else {
                p.running_jobs.remove(&key);
            }
        }));
        let pgs_task = (env("TEPHRA_BENCH_PODGROUPS", 0) == 1).then(|| {
            let pg_api: Api<PodGroup> = Api::namespaced(client.clone(), "default");
            tokio::spawn(follow(pg_api, progress.clone(), |p: &mut Progress, pg: &PodGroup, gone| {
                let key = pg.metadata.name.clone().unwrap_or_default();
                if gone {
                    p.podgroups.remove(&key);
                } else {
                    p.podgroups.insert(key, pg.phase() != PodGroupPhase::Pending);
                }
            }))
        });
        // When every pod existed (the Job controller's part), was bound (the scheduler and the
        // kube-scheduler stand-in) and every job was Running (with the kubelet's starts).
        let (mut all_created, mut all_bound) = (None, None);
        let mut next_line = Duration::ZERO;
        println!("  {:>6}  {:>6} {:>6} {:>6}  {:>6}  {:>6} {:>6}", "t (s)", "pods", "bound", "run", "jobs", "pgs", "admit");
        let (running, pod_count) = loop {
            let (pod_count, bound, run, running, pgs, admitted) = match progress.lock() {
                Ok(p) => {
                    let bound = p.pods.values().filter(|(b, _)| *b).count() as u64;
                    let run = p.pods.values().filter(|(_, r)| *r).count() as u64;
                    let admitted = p.podgroups.values().filter(|a| **a).count();
                    (p.pods.len() as u64, bound, run, p.running_jobs.len() as u64, p.podgroups.len(), admitted)
                }
                Err(_) => (0, 0, 0, 0, 0, 0),
            };
            let now = start.elapsed();
            if all_created.is_none() && pod_count >= jobs * pods {
                all_created = Some(now);
            }
            if all_bound.is_none() && bound >= jobs * pods {
                all_bound = Some(now);
            }
            if now >= next_line {
                println!("  {:>6.1}  {pod_count:>6} {bound:>6} {run:>6}  {running:>6}  {pgs:>6} {admitted:>6}", now.as_secs_f64());
                next_line += Duration::from_secs(1);
            }
            if (running == jobs && pod_count >= jobs * pods) || now > timeout {
                break (running, pod_count);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        pods_task.abort();
        jobs_task.abort();
        if let Some(t) = pgs_task {
            t.abort();
        }
        let elapsed = start.elapsed();
        let cpu = match (pid.and_then(cpu_seconds), cpu_before) {
            (Some(after), Some(before)) => Some(after - before),
            _ => None,
        };
        let own = cpu_seconds(std::process::id()).zip(own_before).map(|(a, b)| a - b);
        let page = reqwest::get(format!("http://{metrics}/metrics"))
            .await
            .and_then(|r| r.error_for_status());
        let page = match page {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if let Ok(path) = std::env::var("TEPHRA_BENCH_METRICS") {
            // The whole metrics page, to see where a slow run spent its calls.
            if let Err(e) = std::fs::write(&path, &page) {
                eprintln!("writing {path}: {e}");
            }
        }
        let writes = counter_sum(&page, "tephra_job_writes_total");
        let status = page
            .lines()
            .find(|l| l.starts_with("tephra_job_writes_total{op=\"status\"}"))
            .and_then(|l| l.rsplit(' ').next().map(str::to_string))
            .unwrap_or_default();
        println!("jobs controller bench: {jobs} jobs x {pods} pods, serve --embedded (webhooks, scheduler, stand-ins), {nodes} nodes");
        println!("  submitted in        {:>8.2} s", submitted.as_secs_f64());
        if let Some(c) = all_created {
            println!("  all pods created in {:>8.2} s  ({:.1} jobs/s)", c.as_secs_f64(), jobs as f64 / c.as_secs_f64());
        }
        if let Some(b) = all_bound {
            println!("  all pods bound in   {:>8.2} s  ({:.1} pods/s)", b.as_secs_f64(), (jobs * pods) as f64 / b.as_secs_f64());
        }
        println!("  all Running in      {:>8.2} s  ({running}/{jobs} jobs Running, {pod_count} pods)", elapsed.as_secs_f64());
        println!("  jobs/s              {:>8.1}", running as f64 / elapsed.as_secs_f64());
        println!("  pods/s              {:>8.1}", pod_count as f64 / elapsed.as_secs_f64());
        if let Some(cpu) = cpu {
            println!("  tephra CPU          {cpu:>8.2} s  ({:.2} ms per job)", cpu * 1000.0 / jobs as f64);
        }
        if let Some(own) = own {
            println!("  bench's own CPU     {own:>8.2} s  (its watches and submissions)");
        }
        println!("  controller writes   {:>8.2} per job (status writes {status} in all)", writes / jobs as f64);
        if running < jobs {
            eprintln!("timed out after {timeout:?}; jobs not Running (as the API lists them):");
            let list = api.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
            for j in list.iter().filter(|j| j.phase() != Some(&JobPhase::Running)).take(10) {
                let status = serde_json::to_string(&j.status).unwrap_or_default();
                eprintln!("  {}: {status}", j.metadata.name.as_deref().unwrap_or_default());
            }
            // exit() skips destructors: stop the server first so it does not outlive the bench.
            drop(served);
            std::process::exit(1);
        }
    });
}
