//! Benchmarks of the embedded API: loading, listing, creating and watching. Run with
//! `cargo bench --bench embedded` (optimized build); sizes can be lowered with
//! `EMB_NODES`, `EMB_PODS`, `EMB_WATCH_SECS`. Everything is in process (no sockets): writes go
//! through the same create/patch path as REST requests, LISTs and watches through the axum
//! router (HTTP semantics, JSON bodies) exactly as a kube `Client` sees them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tephra_apiserver::ops::{ObjectRef, WriteOptions};
use tephra_apiserver::patching::PatchKind;
use tephra_apiserver::prepare::Endpoint;
use tephra_apiserver::{self as embedded, ApiServer, Caller, EmbeddedOptions};
use tower::ServiceExt;

/// The allocator the `tephra` binary runs on, so these figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn pod(i: usize, nodes: usize) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i:06}"), "namespace": format!("ns-{}", i % 10),
                     "labels": {"app": format!("bench-{}", i % 10), "tier": "batch", "volcano.sh/job-name": format!("job-{}", i / 100)},
                     "annotations": {"scheduling.k8s.io/group-name": format!("pg-{}", i / 100)}},
        "spec": {"schedulerName": "volcano", "nodeName": format!("node-{}", i % nodes + 1),
                 "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"],
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn run_parallel<F, Fut>(total: usize, workers: usize, f: F) -> Duration
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let f = Arc::new(f);
    let start = Instant::now();
    let mut handles = Vec::new();
    for w in 0..workers {
        let f = f.clone();
        handles.push(tokio::spawn(async move {
            let mut i = w;
            while i < total {
                f(i).await;
                i += workers;
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
    start.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let nodes = env("EMB_NODES", 5_000);
    let pods = env("EMB_PODS", 150_000);
    let watch_secs = env("EMB_WATCH_SECS", 5);
    println!("embedded API benchmark: {nodes} nodes, {pods} pods, 2 worker threads");
    let rss0 = rss_mib();

    // 1. Load.
    let start = Instant::now();
    let api = ApiServer::new(EmbeddedOptions {
        nodes,
        sim_kubelet: false,
        ..Default::default()
    });
    let nodes_time = start.elapsed();
    let ns_res = api.resource("", "v1", "namespaces").unwrap();
    for n in 0..10 {
        api.create(
            Caller::Client,
            &ns_res,
            "",
            json!({"metadata": {"name": format!("ns-{n}")}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    }
    let pods_res = api.resource("", "v1", "pods").unwrap();
    let (a, r) = (api.clone(), pods_res.clone());
    let load = run_parallel(pods, 4, move |i| {
        let (a, r) = (a.clone(), r.clone());
        async move {
            let p = pod(i, nodes);
            let ns = format!("ns-{}", i % 10);
            a.create(Caller::Client, &r, &ns, p, &WriteOptions::default())
                .await
                .unwrap();
        }
    })
    .await;
    let total = nodes_time + load;
    println!(
        "load: {nodes} nodes in {:.2}s + {pods} pods in {:.2}s = {:.2}s ({:.0} pod creates/s), RSS {:.0} MiB (start {:.0} MiB)",
        nodes_time.as_secs_f64(),
        load.as_secs_f64(),
        total.as_secs_f64(),
        pods as f64 / load.as_secs_f64(),
        rss_mib(),
        rss0
    );

    // 2. LIST by label selector through the router (JSON body as a client receives it).
    let router = embedded::router(api.clone());
    for (what, query) in [
        ("all pods (tier=batch)", "tier%3Dbatch"),
        ("10% (app=bench-3)", "app%3Dbench-3"),
        (
            "set-based (app in (bench-1,bench-2),tier)",
            "app+in+%28bench-1%2Cbench-2%29%2Ctier",
        ),
    ] {
        let mut best = Duration::MAX;
        let mut bytes = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let resp = router
                .clone()
                .oneshot(
                    Request::get(format!("/api/v1/pods?labelSelector={query}"))
                        .body(Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            best = best.min(t.elapsed());
            bytes = body.len();
        }
        println!(
            "LIST {what}: {:.0} ms ({:.1} MB body), best of 3",
            best.as_secs_f64() * 1000.0,
            bytes as f64 / 1e6
        );
    }

    // 3. Write throughput on the loaded store: create pods, patch status.
    let extra = 20_000;
    let (a, r) = (api.clone(), pods_res.clone());
    let t = run_parallel(extra, 4, move |i| {
        let (a, r) = (a.clone(), r.clone());
        async move {
            let mut p = pod(pods + i, nodes);
            p["metadata"]["namespace"] = json!("default");
            a.create(Caller::Client, &r, "default", p, &WriteOptions::default())
                .await
                .unwrap();
        }
    })
    .await;
    println!(
        "write: {extra} pod creates in {:.2}s = {:.0}/s",
        t.as_secs_f64(),
        extra as f64 / t.as_secs_f64()
    );
    let (a, r) = (api.clone(), pods_res.clone());
    let t = run_parallel(extra, 4, move |i| {
        let (a, r) = (a.clone(), r.clone());
        async move {
            let name = format!("pod-{:06}", pods + i);
            let body = json!({"status": {"phase": "Running", "podIP": format!("10.1.{}.{}", i / 250 % 250, i % 250)}}).to_string();
            a.patch(ObjectRef::new(Caller::Client, &r, "default", &name).at(Endpoint::Status), PatchKind::Merge, body.as_bytes(), &WriteOptions::default())
                .await
                .unwrap();
        }
    })
    .await;
    println!(
        "write: {extra} status patches in {:.2}s = {:.0}/s",
        t.as_secs_f64(),
        extra as f64 / t.as_secs_f64()
    );

    // Same through a kube Client on the router (HTTP request/response path included).
    let client = kube::Client::new(router.clone(), "default");
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let n = 5_000;
    let c2 = cms.clone();
    let t = run_parallel(n, 8, move |i| {
        let c = c2.clone();
        async move {
            let cm: ConfigMap = serde_json::from_value(
                json!({"metadata": {"name": format!("kc-{i}")}, "data": {"k": "v"}}),
            )
            .unwrap();
            c.create(&PostParams::default(), &cm).await.unwrap();
        }
    })
    .await;
    println!(
        "write via kube Client (in process): {n} creates in {:.2}s = {:.0}/s",
        t.as_secs_f64(),
        n as f64 / t.as_secs_f64()
    );

    // 4. Watch latency: 10 watchers, 2,000 writes/s.
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::new(Mutex::new(HashMap::new()));
    let lat: Arc<Mutex<Vec<Duration>>> = Arc::new(Mutex::new(Vec::new()));
    let writes = 2_000 * watch_secs;
    let mut watchers = Vec::new();
    let rv = api.resource_version().to_string();
    for _ in 0..10 {
        let stream = cms
            .watch(
                &WatchParams::default().timeout((watch_secs + 10) as u32),
                &rv,
            )
            .await
            .unwrap();
        let (sent, lat) = (sent.clone(), lat.clone());
        watchers.push(tokio::spawn(async move {
            let mut s = stream.boxed();
            let mut seen = 0;
            while let Some(Ok(ev)) = s.next().await {
                if let WatchEvent::Added(cm) = ev {
                    let name = cm.metadata.name.unwrap_or_default();
                    if let Some(t0) = sent.lock().unwrap().get(&name).copied() {
                        lat.lock().unwrap().push(t0.elapsed());
                        seen += 1;
                        if seen == writes {
                            return;
                        }
                    }
                }
            }
        }));
    }
    let cm_res = api.resource("", "v1", "configmaps").unwrap();
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let mut i = 0;
    while i < writes {
        tick.tick().await;
        for _ in 0..2 {
            let name = format!("w-{i}");
            sent.lock().unwrap().insert(name.clone(), Instant::now());
            api.create(
                Caller::Client,
                &cm_res,
                "default",
                json!({"metadata": {"name": name}}),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
            i += 1;
        }
    }
    let write_time = start.elapsed();
    for w in watchers {
        let _ = tokio::time::timeout(Duration::from_secs(30), w).await;
    }
    let mut l = lat.lock().unwrap().clone();
    l.sort();
    println!(
        "watch: {writes} writes in {:.2}s ({:.0}/s) to 10 watchers: {} deliveries, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        write_time.as_secs_f64(),
        writes as f64 / write_time.as_secs_f64(),
        l.len(),
        percentile(&l, 0.5).as_secs_f64() * 1000.0,
        percentile(&l, 0.99).as_secs_f64() * 1000.0,
        l.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
    );
    println!("final RSS {:.0} MiB", rss_mib());
}
