//! PodGroup controller throughput: `TEPHRA_BENCH_RS` ReplicaSets
//! (default 1000) × `TEPHRA_BENCH_PODS` pods (default 10) created at once in the embedded API;
//! the time until every pod carries its group name and every PodGroup exists, and the requests
//! the controllers sent per pod. Run with `cargo bench --bench podgroup`.
//!
//! Two runs: `no webhook` (pods created bare: the controller creates the PodGroup and patches
//! every pod) and `named by /pods/mutate` (pods created with the group name the webhook would
//! inject: the controller only creates the PodGroup). Everything is in process (the kube
//! clients sit on the embedded API's router, no socket); the controllers have their own
//! client, wrapped to count its requests. Each run is bounded by `TEPHRA_BENCH_TIMEOUT` seconds
//! (default 120).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tephra::api::keys;
use tephra::cluster::Caches;
use tephra::controllers::{self, ControllerConfig};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions};
use tokio_util::sync::CancellationToken;

/// The allocator the `tephra` binary runs on, so these figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Default)]
struct Counts {
    /// Requests of the PodGroup controller and the shared watches (everything not below).
    total: AtomicU64,
    /// Of which writes.
    writes: AtomicU64,
    /// Queue status writes (the queue controller's count updates).
    queue_writes: AtomicU64,
}

/// A client on the router that counts what goes through it.
fn counted_client(api: &Arc<ApiServer>, counts: Arc<Counts>) -> Client {
    let svc = tower::ServiceBuilder::new()
        .map_request(move |req: http::Request<kube::client::Body>| {
            let write = req.method() != http::Method::GET;
            if req.uri().path().contains("/queues/") {
                if write {
                    counts.queue_writes.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                counts.total.fetch_add(1, Ordering::Relaxed);
                if write {
                    counts.writes.fetch_add(1, Ordering::Relaxed);
                }
            }
            req
        })
        .service(embedded::router(api.clone()));
    Client::new(svc, "default")
}

async fn run(label: &str, n_rs: u64, n_pods: u64, named: bool, timeout: Duration) -> bool {
    let api = ApiServer::new(EmbeddedOptions {
        nodes: 1,
        sim_kubelet: false,
        watch_history: 100_000,
        ..Default::default()
    });
    let driver = Client::new(embedded::router(api.clone()), "default");
    tephra::cluster::bootstrap::install_crds(&driver)
        .await
        .expect("CRDs");
    tephra::cluster::ensure_default_queues(&driver)
        .await
        .expect("queues");
    let counts = Arc::new(Counts::default());
    let client = counted_client(&api, counts.clone());
    let stop = CancellationToken::new();
    let (caches, mut feeds) = Caches::new();
    let registry = prometheus::Registry::new();
    let ctl = controllers::start(
        &client,
        &caches,
        &mut feeds,
        ControllerConfig::default(),
        &registry,
        &stop,
    )
    .expect("controllers");
    feeds.run(&client, &stop);
    caches
        .wait_synced(Duration::from_secs(10))
        .await
        .expect("synced");
    let baseline = counts.total.load(Ordering::Relaxed);
    let baseline_writes = counts.writes.load(Ordering::Relaxed);
    let baseline_queue = counts.queue_writes.load(Ordering::Relaxed);

    let start = Instant::now();
    // The ReplicaSet controller's work: each ReplicaSet, then its pods, all at once.
    let rss: Api<ReplicaSet> = Api::default_namespaced(driver.clone());
    let pods: Api<Pod> = Api::default_namespaced(driver.clone());
    futures::stream::iter(0..n_rs)
        .map(|r| {
            let (rss, pods) = (rss.clone(), pods.clone());
            async move {
                let name = format!("rs-{r:05}");
                let rs: ReplicaSet = serde_json::from_value(json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": name, "annotations": {keys::GROUP_MIN_MEMBER_ANNOTATION: n_pods.to_string()}},
                    "spec": {"replicas": n_pods, "selector": {"matchLabels": {"rs": name}},
                             "template": {"metadata": {"labels": {"rs": name}},
                                          "spec": {"containers": [{"name": "m", "image": "busybox"}]}}}
                }))
                .expect("rs json");
                let rs = rss.create(&PostParams::default(), &rs).await.expect("create rs");
                let uid = rs.uid().unwrap_or_default();
                for i in 0..n_pods {
                    let annotations = if named {
                        json!({keys::KUBE_GROUP_NAME_ANNOTATION: format!("podgroup-{uid}")})
                    } else {
                        json!({})
                    };
                    let pod: Pod = serde_json::from_value(json!({
                        "apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": format!("{name}-{i}"), "labels": {"rs": name},
                                     "annotations": annotations,
                                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                        "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
                        "spec": {"schedulerName": "volcano", "containers": [{"name": "m", "image": "busybox",
                                 "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}
                    }))
                    .expect("pod json");
                    pods.create(&PostParams::default(), &pod).await.expect("create pod");
                }
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
    let created = start.elapsed();

    let want_pods = (n_rs * n_pods) as usize;
    let mut done = false;
    while start.elapsed() < timeout {
        let pgs = caches.podgroups().state().len();
        let all_pods = caches.all_pods();
        let linked = all_pods
            .iter()
            .filter(|p| {
                p.annotations()
                    .contains_key(keys::KUBE_GROUP_NAME_ANNOTATION)
            })
            .count();
        if pgs == n_rs as usize && all_pods.len() == want_pods && linked == want_pods {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = start.elapsed();
    // Let trailing reconciles (PodGroup events) finish before counting.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let total = counts.total.load(Ordering::Relaxed) - baseline;
    let writes = counts.writes.load(Ordering::Relaxed) - baseline_writes;
    let queue_writes = counts.queue_writes.load(Ordering::Relaxed) - baseline_queue;
    let pods_n = want_pods as f64;
    println!(
        "{label:<22} {n_rs} RS x {n_pods} pods: {} in {:.2} s (the driver's creates took {:.2} s); PodGroup controller requests {total} ({:.3}/pod), of which writes {writes} ({:.3}/pod); queue status writes {queue_writes}",
        if done { "done" } else { "NOT DONE" },
        elapsed.as_secs_f64(),
        created.as_secs_f64(),
        total as f64 / pods_n,
        writes as f64 / pods_n,
    );
    ctl.join().await;
    stop.cancel();
    done
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let n_rs = env("TEPHRA_BENCH_RS", 1000);
    let n_pods = env("TEPHRA_BENCH_PODS", 10);
    let timeout = Duration::from_secs(env("TEPHRA_BENCH_TIMEOUT", 120));
    let workers = env("TEPHRA_BENCH_WORKERS", 2) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    println!("podgroup controller: {workers} tokio worker threads, in-process embedded API");
    let ok = rt.block_on(async {
        let a = run("no webhook", n_rs, n_pods, false, timeout).await;
        let b = run("named by /pods/mutate", n_rs, n_pods, true, timeout).await;
        a && b
    });
    if !ok {
        std::process::exit(1);
    }
}
