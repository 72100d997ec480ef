//! The scheduling session against the embedded API, through the same kube client code used for
//! a real cluster. The test plays kube-scheduler: it binds each pod to the node the session
//! placed it on (what the extender will answer), and the kubelet stand-in runs the pods.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tephra::api::{PodGroup, Queue};
use tephra::cluster::Caches;
use tephra::scheduler::{Scheduler, SchedulerConf, SchedulerOptions, config};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions};
use tokio_util::sync::CancellationToken;

use crate::common;
use common::gangs::{Gang, by_gang, pg_phase};

struct Cluster {
    _api: Arc<ApiServer>,
    client: Client,
    scheduler: Scheduler,
    shutdown: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start(nodes: usize, conf: SchedulerConf) -> Cluster {
    let cl = start_api(nodes).await;
    start_scheduler(cl, conf).await
}

/// The API alone, the scheduler not yet started (see [`start_scheduler`]).
async fn start_api(nodes: usize) -> (Arc<ApiServer>, Client, CancellationToken) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shutdown = CancellationToken::new();
    let api = ApiServer::start(
        EmbeddedOptions {
            nodes,
            ..Default::default()
        },
        shutdown.clone(),
    );
    let client = Client::new(embedded::router(api.clone()), "default");
    tephra::cluster::bootstrap::install_crds(&client)
        .await
        .unwrap();
    tephra::cluster::ensure_default_queues(&client)
        .await
        .unwrap();
    (api, client, shutdown)
}

async fn start_scheduler(
    (api, client, shutdown): (Arc<ApiServer>, Client, CancellationToken),
    conf: SchedulerConf,
) -> Cluster {
    let (caches, mut feeds) = Caches::new();
    let scheduler = Scheduler::new(
        SchedulerOptions {
            period: Duration::from_millis(100),
            ..SchedulerOptions::default()
        },
        conf,
        &prometheus::Registry::new(),
    )
    .unwrap();
    scheduler.subscribe(&mut feeds);
    feeds.run(&client, &shutdown);
    caches.wait_synced(Duration::from_secs(10)).await.unwrap();
    scheduler.clone().spawn(client.clone(), shutdown.clone());
    Cluster {
        _api: api,
        client,
        scheduler,
        shutdown,
    }
}

async fn queue(c: &Client, name: &str, weight: i32) {
    let q: Queue = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name}, "spec": {"weight": weight}
    }))
    .unwrap();
    Api::<Queue>::all(c.clone())
        .create(&PostParams::default(), &q)
        .await
        .unwrap();
}

/// Plays kube-scheduler once: binds every pending pod the session placed. Returns how many.
async fn bind_planned(cl: &Cluster) -> usize {
    let pods: Api<Pod> = Api::namespaced(cl.client.clone(), "default");
    let list = pods.list(&ListParams::default()).await.unwrap();
    let mut bound = 0;
    for p in list.items {
        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
            continue;
        }
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let node = cl.scheduler.index().assumed_node(&uid).map(str::to_string);
        let Some(node) = node else { continue };
        let name = p.metadata.name.clone().unwrap_or_default();
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}
        });
        let r: Result<serde_json::Value, _> = pods
            .create_subresource("binding", &name, &PostParams::default(), &binding)
            .await;
        if r.is_ok() {
            bound += 1;
        }
    }
    bound
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gangs_that_cannot_both_fit_run_one_after_the_other_each_whole() {
    // 3 nodes × 8 cpu = 24 cpu; each gang needs 4 × 4 = 16 cpu.
    let cl = start(3, SchedulerConf::builtin()).await;
    Gang {
        name: "first",
        queue: "default",
        size: 4,
        cpu: 4,
        run_seconds: 2,
        min_resources: true,
    }
    .create(&cl.client)
    .await;
    Gang {
        name: "second",
        queue: "default",
        size: 4,
        cpu: 4,
        run_seconds: 2,
        min_resources: true,
    }
    .create(&cl.client)
    .await;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut order: Vec<String> = Vec::new();
    let mut pending_seen = false;
    while Instant::now() < deadline {
        bind_planned(&cl).await;
        let state = by_gang(&cl.client).await;
        for (g, (placed, done)) in &state {
            // Never a partial gang on the nodes.
            assert!(
                *placed == 0 || *placed == 4,
                "gang {g} partly placed: {state:?}"
            );
            if *placed == 4 && !order.contains(g) {
                order.push(g.clone());
            }
            if *placed == 0 && order.len() == 1 && *done == 0 {
                // The other gang waits whole, and says why.
                if pg_phase(&cl.client, g).await == "Pending" {
                    pending_seen = true;
                }
            }
        }
        if state.values().all(|(_, done)| *done == 4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(order.len(), 2, "both gangs ran: {order:?}");
    assert!(
        pending_seen,
        "the second gang was seen Pending while the first ran"
    );
    let state = by_gang(&cl.client).await;
    assert!(state.values().all(|(_, done)| *done == 4), "{state:?}");
    // The first gang's PodGroup ends Completed, as Volcano's scheduler writes it.
    let first = &order[0];
    let mut phase = String::new();
    for _ in 0..50 {
        phase = pg_phase(&cl.client, first).await;
        if phase == "Completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(phase, "Completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_too_big_waits_with_a_reason_in_its_condition_and_events() {
    let cl = start(1, SchedulerConf::builtin()).await;
    Gang {
        name: "huge",
        queue: "default",
        size: 4,
        cpu: 4,
        run_seconds: 1,
        min_resources: true,
    }
    .create(&cl.client)
    .await;
    let pgs: Api<PodGroup> = Api::namespaced(cl.client.clone(), "default");
    let mut message = String::new();
    for _ in 0..100 {
        let pg = pgs.get("huge").await.unwrap();
        if let Some(c) = pg
            .status
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().next())
        {
            message = c.message.unwrap_or_default();
            // The pods are created one by one after the PodGroup.
            if message.starts_with("4/4") {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Not admitted: 16 cpu on an 8-cpu cluster (overcommit 1.2 → 9.6).
    assert!(
        message.contains("4/4 tasks in gang unschedulable"),
        "{message}"
    );
    assert!(
        message.contains("resource in cluster is overused"),
        "{message}"
    );
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(cl.client.clone(), "default");
    let mut reasons = Vec::new();
    for _ in 0..50 {
        reasons = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("huge"))
            .filter_map(|e| e.message)
            .collect::<Vec<_>>();
        if !reasons.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        reasons.iter().any(|m| m.contains("the gang needs cpu 16,")),
        "an Event says how much the gang needs: {reasons:?}"
    );
    // Sessions keep running, but the same reason is not recorded again and again.
    let count = || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("huge"))
            .count()
    };
    // Let the gang's messages settle (its pods were created one by one).
    let mut n = count().await;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let m = count().await;
        if m == n {
            break;
        }
        n = m;
    }
    let before = cl.scheduler.session_count();
    for _ in 0..5 {
        cl.scheduler.request();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cl.scheduler.session_count() >= before + 3, "sessions ran");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(count().await, n, "no repeated Events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_weighted_one_to_three_share_a_full_cluster_one_to_three() {
    // Without overcommit, every gang is admitted and proportion alone divides the cluster.
    let conf = config::parse(
        "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n",
        "test",
    )
    .unwrap();
    // Everything exists before the first session: fairness is over what is asked for, and a
    // queue alone in an early session would get the whole cluster (as in Volcano).
    let api = start_api(3).await;
    queue(&api.1, "q1", 1).await;
    queue(&api.1, "q3", 3).await;
    for i in 0..12 {
        Gang {
            name: &format!("a{i:02}"),
            queue: "q1",
            size: 2,
            cpu: 1,
            run_seconds: 60,
            min_resources: true,
        }
        .create(&api.1)
        .await;
        Gang {
            name: &format!("b{i:02}"),
            queue: "q3",
            size: 2,
            cpu: 1,
            run_seconds: 60,
            min_resources: true,
        }
        .create(&api.1)
        .await;
    }
    let cl = start_scheduler(api, conf).await;
    let mut last = (0, 0);
    for _ in 0..100 {
        bind_planned(&cl).await;
        let state = by_gang(&cl.client).await;
        let a: usize = state
            .iter()
            .filter(|(g, _)| g.starts_with('a'))
            .map(|(_, v)| v.0)
            .sum();
        let b: usize = state
            .iter()
            .filter(|(g, _)| g.starts_with('b'))
            .map(|(_, v)| v.0)
            .sum();
        last = (a, b);
        if a + b == 24 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // 24 cpu: 6 for weight 1, 18 for weight 3.
    assert_eq!(last, (6, 18));
}

/// The `resourcequota` plugin through the embedded API: a ResourceQuota written with the kube
/// client reaches the scheduler's watch, and of two gangs only the one the quota holds is
/// admitted; the other waits, its condition naming the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_quota_admits_only_the_gangs_it_holds() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let conf = config::parse(
        "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  \
         - name: gang\n  - name: resourcequota\n- plugins:\n  - name: predicates\n  \
         - name: proportion\n",
        "test",
    )
    .unwrap();
    let cl = start(3, conf).await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "team", "namespace": "default"},
        "spec": {"hard": {"cpu": "10"}}
    }))
    .unwrap();
    Api::<ResourceQuota>::namespaced(cl.client.clone(), "default")
        .create(&PostParams::default(), &quota)
        .await
        .unwrap();
    // Let the scheduler's watch see the quota before the gangs come.
    let deadline = Instant::now() + Duration::from_secs(10);
    while cl.scheduler.index().snapshot().quotas.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the quota never reached the scheduler"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for name in ["first", "second"] {
        Gang {
            name,
            queue: "default",
            size: 4,
            cpu: 2,
            run_seconds: 30,
            min_resources: true,
        }
        .create(&cl.client)
        .await;
    }
    let pgs: Api<PodGroup> = Api::namespaced(cl.client.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(20);
    let (admitted, waiting) = loop {
        bind_planned(&cl).await;
        let mut admitted = Vec::new();
        let mut waiting = None;
        for name in ["first", "second"] {
            let pg = pgs.get(name).await.unwrap();
            let status = pg.status.unwrap_or_default();
            let msg = status
                .conditions
                .unwrap_or_default()
                .into_iter()
                .filter_map(|c| c.message)
                .find(|m| m.contains("resource quota default/team insufficient"));
            match (status.phase.map(|p| p.as_str().to_string()), msg) {
                (Some(p), None) if p == "Running" || p == "Inqueue" => admitted.push(name),
                (_, Some(m)) => waiting = Some(m),
                _ => {}
            }
        }
        if admitted.len() == 1 && waiting.is_some() {
            break (admitted, waiting);
        }
        assert!(
            Instant::now() < deadline,
            "expected one gang admitted and one waiting on the quota: {admitted:?} {waiting:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(admitted.len(), 1);
    let msg = waiting.unwrap_or_default();
    assert!(msg.contains("the gang needs cpu 8"), "{msg}");
}
