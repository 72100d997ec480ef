//! Start-up against an API that is flaky or not ready yet: `tephra serve` waits it out, says
//! what it waits for and how to fix it, and goes on once it can, instead of exiting into a
//! crash loop.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use tephra::api::Job;

use crate::common::served::{self, Proc};

/// `/readyz` on the metrics listener at `addr`: its status, `None` while nothing answers.
async fn readyz(addr: &str) -> Option<u16> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
        .get(format!("http://{addr}/readyz"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()
        .map(|r| r.status().as_u16())
}

/// Waits (bounded by `within`) until `/readyz` answers 200 or the process exits; true when
/// it became ready.
async fn ready_or_exit(proc: &mut Proc, metrics: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline && proc.running() {
        if readyz(metrics).await == Some(200) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn log_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Creates `job` in `default`, retrying for at most 20 s: the webhooks refuse a job whose
/// queue has not reached their cache yet, which it does a moment after it is made.
async fn create_job(c: &Client, job: &Job) {
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = jobs.create(&PostParams::default(), job).await {
        assert!(
            Instant::now() < deadline,
            "creating job {}: {e}",
            job.name_any()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The node pod `name` of `default` is placed on, waited for (at most 30 s) with `log`, the
/// serving process's, shown if it never is.
async fn node_of(c: &Client, name: &str, log: &Path) -> String {
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = pods.get_opt(name).await.ok().flatten();
        if let Some(n) = p.and_then(|p| p.spec?.node_name) {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "{name} was never placed:\n{}",
            log_text(log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts `serve --embedded` on fresh loopback ports with `extra` flags, logging to `log`;
/// the process, its API URL and its metrics address.
fn serve_embedded(extra: &[&str], log: &Path) -> (Proc, String, String) {
    let [metrics, api] = served::free_ports::<2>().map(|p| format!("127.0.0.1:{p}"));
    let mut args = vec![
        "serve",
        "--embedded",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        &metrics,
        "--embedded-api-listen",
        &api,
    ];
    args.extend_from_slice(extra);
    let proc = Proc::spawn(&args, Some(log));
    (proc, format!("http://{api}"), metrics)
}

/// Every write of start-up (CRDs, webhook configurations, built-in queues) meets injected
/// 500s and 409s and watches are cut, yet `serve --embedded` comes up ready whatever the draw.
/// Without the retries seed 7 exits: `installing CRD podgroups.scheduling.volcano.sh:
/// injected fault: write error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_embedded_comes_up_ready_whatever_faults_the_seed_draws() {
    let dir = std::env::temp_dir().join(format!("tephra-startup-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let seeds: Vec<u32> = (1..=50).collect();
    // One at a time: each start takes well under a second, and the other tests of this binary
    // run beside it on what may be two cores.
    for batch in seeds.chunks(1) {
        let mut starts: Vec<(u32, Proc, String)> = batch
            .iter()
            .map(|&seed| {
                let faults = format!("write-error=0.05,conflict=0.05,watch-cut=10,seed={seed}");
                let log = dir.join(format!("seed-{seed}.log"));
                let (proc, _, metrics) = serve_embedded(&["--faults", &faults], &log);
                (seed, proc, metrics)
            })
            .collect();
        for (seed, proc, metrics) in &mut starts {
            let ready = ready_or_exit(proc, metrics, Duration::from_secs(60)).await;
            let log = log_text(&dir.join(format!("seed-{seed}.log")));
            assert!(
                ready,
                "seed {seed}: serve --embedded did not become ready ({}):\n{log}",
                if proc.running() {
                    "still starting"
                } else {
                    "it exited"
                }
            );
            assert_eq!(
                proc.stop(),
                Some(0),
                "seed {seed}: exit after SIGTERM:\n{log}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `serve --kubeconfig` on a cluster without tephra's CRDs: it stays up with `/readyz` failing,
/// names the missing CRDs and the command that installs them, and is ready soon after they are
/// installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_waits_for_its_crds_and_goes_on_once_they_are_installed() {
    let dir = std::env::temp_dir().join(format!("tephra-startup-crds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let (_api, url, c) = served::apiserver(&[], 30).await;
    let kubeconfig = served::kubeconfig(&dir, &url);
    let metrics = format!("127.0.0.1:{}", served::free_port());
    let log = dir.join("serve.log");
    let mut serve = Proc::spawn(
        &[
            "serve",
            "--kubeconfig",
            &kubeconfig,
            "--leader-elect=false",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            &metrics,
        ],
        Some(&log),
    );

    // Up and answering, not ready, and saying why, for as long as the CRDs are missing.
    let fix = "tephra crds | kubectl apply -f -";
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log_text(&log).contains(fix) {
        assert!(serve.running(), "serve exited:\n{}", log_text(&log));
        assert!(
            Instant::now() < deadline,
            "no line names the fix:\n{}",
            log_text(&log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..20 {
        assert!(serve.running(), "serve exited:\n{}", log_text(&log));
        assert_eq!(readyz(&metrics).await, Some(503), "ready without CRDs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let warnings = log_text(&log)
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains(fix))
        .count();
    assert!(
        (1..=2).contains(&warnings),
        "the fix is said at WARN once per 30 s, not on every retry: {warnings} lines\n{}",
        log_text(&log)
    );

    // What `kubectl apply -f manifests/crds/` does.
    tephra::cluster::bootstrap::install_crds(&c)
        .await
        .unwrap_or_else(|e| panic!("installing the CRDs: {e}"));
    assert!(
        ready_or_exit(&mut serve, &metrics, Duration::from_secs(60)).await,
        "not ready after the CRDs were installed:\n{}",
        log_text(&log)
    );
    let queues: kube::Api<tephra::api::Queue> = kube::Api::all(c.clone());
    for name in ["default", "root"] {
        assert!(
            queues.get_opt(name).await.ok().flatten().is_some(),
            "built-in queue {name} missing"
        );
    }
    assert_eq!(serve.stop(), Some(0), "{}", log_text(&log));
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM while jobs are being made: everything that talks to the embedded API stops before
/// the API does, so no request fails on a closed API (there were `ERROR kube_client ...
/// client error (Connect)` lines), and the exit is 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_stops_the_embedded_api_last() {
    let dir = std::env::temp_dir().join(format!("tephra-startup-stop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let log = dir.join("serve.log");
    // kube_client's own lines too: they are what a failed request logs.
    let (mut serve, url, metrics) = serve_embedded(&["--log", "info"], &log);
    assert!(
        ready_or_exit(&mut serve, &metrics, Duration::from_secs(60)).await,
        "not ready:\n{}",
        log_text(&log)
    );
    let c = served::client(&url);
    let jobs: kube::Api<tephra::api::Job> = kube::Api::namespaced(c.clone(), "default");
    let creates = (0..20).map(|i| {
        let jobs = jobs.clone();
        async move {
            let job: tephra::api::Job = serde_json::from_value(serde_json::json!({
                "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "metadata": {"name": format!("load-{i}")},
                "spec": {"minAvailable": 2, "tasks": [{"name": "w", "replicas": 2, "template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox",
                                    "resources": {"requests": {"cpu": "100m"}}}]}}}]}
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            let _ = jobs.create(&kube::api::PostParams::default(), &job).await;
        }
    });
    futures::future::join_all(creates).await;
    // While the controllers and the stand-ins are busy with them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(serve.stop(), Some(0), "{}", log_text(&log));
    let text = log_text(&log);
    let errors: Vec<&str> = text.lines().filter(|l| l.contains(" ERROR ")).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--embedded-data DIR`: a restarted embedded mode finds the queue, the job and its pod it
/// had, and goes on writing after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_data_keeps_jobs_queues_and_pods_across_a_restart() {
    use tephra::api::Queue;
    let base = std::env::temp_dir().join(format!("tephra-startup-data-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let data = base.join("data");
    std::fs::create_dir_all(&base).unwrap_or_else(|e| panic!("{e}"));

    let log = base.join("first.log");
    let data_dir = data.to_string_lossy();
    let (mut first, url, metrics) = serve_embedded(&["--embedded-data", &data_dir], &log);
    assert!(
        ready_or_exit(&mut first, &metrics, Duration::from_secs(60)).await,
        "{}",
        log_text(&log)
    );
    assert!(log_text(&log).contains(&format!("kept in {}", data.display())));
    let c = served::client(&url);
    let queue: Queue = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "kept"}, "spec": {"weight": 2}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<Queue>::all(c.clone())
        .create(&PostParams::default(), &queue)
        .await
        .unwrap_or_else(|e| panic!("creating queue kept: {e}"));
    let job: Job = serde_json::from_value(serde_json::json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "kept", "namespace": "default"},
        "spec": {"queue": "kept", "minAvailable": 1, "tasks": [{"name": "t", "replicas": 1,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "100m"}}}]}}}]}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    create_job(&c, &job).await;
    let node = node_of(&c, "kept-t-0", &log).await;
    assert_eq!(first.stop(), Some(0), "{}", log_text(&log));

    let log = base.join("second.log");
    let (mut second, url, metrics) = serve_embedded(&["--embedded-data", &data_dir], &log);
    assert!(
        ready_or_exit(&mut second, &metrics, Duration::from_secs(60)).await,
        "{}",
        log_text(&log)
    );
    let c = served::client(&url);
    let q = Api::<Queue>::all(c.clone())
        .get_opt("kept")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("queue kept is gone:\n{}", log_text(&log)));
    assert_eq!(q.spec.weight, Some(2));
    let j = Api::<Job>::namespaced(c.clone(), "default")
        .get_opt("kept")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("job kept is gone"));
    assert_eq!(j.spec.queue(), "kept");
    let p = Api::<Pod>::namespaced(c.clone(), "default")
        .get_opt("kept-t-0")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("pod kept-t-0 is gone"));
    assert_eq!(p.spec.and_then(|s| s.node_name), Some(node));
    // New writes go on after the old ones: a second job is admitted and placed.
    let mut again = job.clone();
    again.metadata.name = Some("after".into());
    create_job(&c, &again).await;
    node_of(&c, "after-t-0", &log).await;
    assert_eq!(second.stop(), Some(0), "{}", log_text(&log));
    let _ = std::fs::remove_dir_all(&base);
}

/// A client of `api` and the path and query of every request it sends.
fn recorded_client(
    api: std::sync::Arc<tephra_apiserver::ApiServer>,
) -> (Client, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::ServiceBuilder::new()
        .map_request(move |req: http::Request<kube::client::Body>| {
            log.lock().unwrap().push(req.uri().to_string());
            req
        })
        .service(tephra_apiserver::router(api));
    (Client::new(service, "default"), seen)
}

/// The requests for pods among `seen`: (streaming lists, paged lists).
fn pod_lists(seen: &std::sync::Mutex<Vec<String>>) -> (usize, usize) {
    let seen = seen.lock().unwrap();
    let pods = seen.iter().filter(|u| u.starts_with("/api/v1/pods?"));
    let (mut streamed, mut paged) = (0, 0);
    for u in pods {
        if u.contains("sendInitialEvents=true") {
            streamed += 1;
        } else if !u.contains("watch=true") {
            paged += 1;
        }
    }
    (streamed, paged)
}

/// The watch caches take their first list as a streaming list (one watch that starts with
/// every object) from a server that serves them, and in pages from one that refuses them
/// (kube-apiserver with its `WatchList` feature off): either way they sync with what the
/// cluster held, and the watch after that list carries new objects. Until they sync, the
/// wait's error names the caches still listing.
#[tokio::test]
async fn the_caches_list_by_streaming_or_else_by_pages() {
    use tephra::cluster::caches::{CacheError, Caches};
    use tephra_apiserver::{ApiServer, EmbeddedOptions};
    use tokio_util::sync::CancellationToken;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let pod = |name: &str| -> Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}
        }))
        .unwrap()
    };
    for watch_list in [true, false] {
        let api = ApiServer::new(EmbeddedOptions {
            nodes: 2,
            sim_kubelet: false,
            sim_controllers: false,
            watch_list,
            ..Default::default()
        });
        let (client, seen) = recorded_client(api);
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        pods.create(&PostParams::default(), &pod("before"))
            .await
            .unwrap();
        let stop = CancellationToken::new();
        let caches = Caches::start(&client, &stop);

        // tephra's CRDs are not installed: their caches cannot list, the built-in kinds can.
        let Err(CacheError::SyncTimeout { waiting, after }) =
            caches.wait_synced(Duration::from_secs(2)).await
        else {
            panic!("the caches synced without tephra's CRDs");
        };
        assert!(
            waiting.starts_with(&["queues"]) && waiting.contains(&"jobs"),
            "{waiting:?}"
        );
        assert!(
            !waiting.contains(&"pods") && !waiting.contains(&"nodes"),
            "{waiting:?}"
        );
        let message = CacheError::SyncTimeout { after, waiting }.to_string();
        assert!(message.contains("still listing: queues, "), "{message}");

        tephra::cluster::bootstrap::install_crds(&client)
            .await
            .unwrap();
        caches
            .wait_synced(Duration::from_secs(20))
            .await
            .expect("the caches sync");
        assert!(caches.unsynced().is_empty());
        assert!(caches.pod("default", "before").is_some());
        assert_eq!(caches.nodes().state().len(), 2);
        let (streamed, paged) = pod_lists(&seen);
        if watch_list {
            assert_eq!((streamed, paged), (1, 0), "pods listed by streaming");
        } else {
            assert!(
                streamed == 1 && paged >= 1,
                "pods listed in pages after one refusal: {streamed}, {paged}"
            );
        }

        pods.create(&PostParams::default(), &pod("after"))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while caches.pod("default", "after").is_none() {
            assert!(
                Instant::now() < deadline,
                "a pod made after the list never reached the cache (watch_list {watch_list})"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.cancel();
    }
}
