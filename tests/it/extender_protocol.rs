//! The extender's four verbs, in process, with bodies exactly as kube-scheduler sends them
//! (`k8s.io/kube-scheduler/extender/v1` as Go marshals it: Go field names, `null` for the form
//! not used), against the embedded API and a running scheduler. The test plays kube-scheduler.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use tephra::api::PodGroup;
use tephra::cluster::Caches;
use tephra::extender::{self, Extender, ExtenderOptions};
use tephra::scheduler::{Scheduler, SchedulerConf, SchedulerOptions};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::common::counter_sum;

struct Env {
    _api: Arc<ApiServer>,
    client: Client,
    /// While set, the API answers the extender's Bindings 503, as a kube-apiserver that is
    /// restarting or shedding load (the test's own client is not affected).
    bindings_down: Arc<AtomicBool>,
    scheduler: Scheduler,
    router: Router,
    registry: prometheus::Registry,
    shutdown: CancellationToken,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

const HOLD: Duration = Duration::from_millis(800);
/// The gather window of the tests (`--bind-gather-timeout`).
const GATHER: Duration = Duration::from_millis(1500);

/// How a test's service is set up.
struct Options {
    sim_kubelet: bool,
    gather: Duration,
    bind_ahead: bool,
    /// Run the extender's nudger, which takes plan gates off placed pods (as a leader does).
    nudger: bool,
}

impl Default for Options {
    fn default() -> Self {
        // Binding ahead off by default here: most tests play kube-scheduler's binds one by one
        // to exercise the hold and the gather window, which binding ahead would short-cut.
        Self {
            sim_kubelet: false,
            gather: GATHER,
            bind_ahead: false,
            nudger: false,
        }
    }
}

async fn start(nodes: usize, sim_kubelet: bool) -> Env {
    start_opts(
        nodes,
        Options {
            sim_kubelet,
            ..Options::default()
        },
    )
    .await
}

async fn start_with(nodes: usize, sim_kubelet: bool, gather: Duration) -> Env {
    start_opts(
        nodes,
        Options {
            sim_kubelet,
            gather,
            ..Options::default()
        },
    )
    .await
}

async fn start_opts(nodes: usize, opts: Options) -> Env {
    let Options {
        sim_kubelet,
        gather,
        bind_ahead,
        nudger,
    } = opts;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shutdown = CancellationToken::new();
    let api = ApiServer::start(
        EmbeddedOptions {
            nodes,
            sim_kubelet,
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
    let (caches, mut feeds) = Caches::new();
    let registry = prometheus::Registry::new();
    let scheduler = Scheduler::new(
        SchedulerOptions {
            period: Duration::from_millis(100),
            ..SchedulerOptions::default()
        },
        SchedulerConf::builtin(),
        &registry,
    )
    .unwrap();
    scheduler.subscribe(&mut feeds);
    feeds.run(&client, &shutdown);
    caches.wait_synced(Duration::from_secs(10)).await.unwrap();
    scheduler.clone().spawn(client.clone(), shutdown.clone());
    let bindings_down = Arc::new(AtomicBool::new(false));
    let ext = Extender::new(
        flaky_bindings(api.clone(), bindings_down.clone()),
        scheduler.clone(),
        ExtenderOptions {
            bind_hold_timeout: HOLD,
            bind_gather_timeout: gather,
            bind_ahead,
            plan_wait: Duration::from_millis(500),
        },
        &registry,
    )
    .unwrap();
    let ext = Arc::new(ext);
    if nudger {
        ext.clone().spawn_nudger(shutdown.clone());
    }
    Env {
        _api: api,
        client,
        bindings_down,
        scheduler,
        router: extender::router(ext),
        registry,
        shutdown,
    }
}

/// A client of the embedded API whose Binding posts are answered 503 while `down` is set.
fn flaky_bindings(api: Arc<ApiServer>, down: Arc<AtomicBool>) -> Client {
    let router = embedded::router(api).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let down = down.load(Ordering::SeqCst)
                && req.method() == axum::http::Method::POST
                && req.uri().path().ends_with("/binding");
            async move {
                if down {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": "the server is currently unable to handle the request",
                        "reason": "ServiceUnavailable", "code": 503});
                    return axum::response::Response::builder()
                        .status(StatusCode::SERVICE_UNAVAILABLE)
                        .header("content-type", "application/json")
                        .body(axum::body::Body::from(status.to_string()))
                        .unwrap();
                }
                next.run(req).await
            }
        },
    ));
    Client::new(router, "default")
}

async fn post(env: &Env, path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap();
    let resp = env.router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// A PodGroup of `min` and `size` pods of `cpu` cores each.
async fn gang(c: &Client, name: &str, min: usize, size: usize, cpu: u32) -> Vec<Pod> {
    podgroup(c, name, min).await;
    let mut out = Vec::new();
    for i in 0..size {
        out.push(pod(c, &format!("{name}-{i}"), Some(name), cpu).await);
    }
    out
}

/// A gang of `size` one-cpu pods (minMember `size`) behind the plan gate, as the Job
/// controller creates them.
async fn gated_gang(c: &Client, name: &str, size: usize) -> Vec<Pod> {
    podgroup(c, name, size).await;
    let mut out = Vec::new();
    for i in 0..size {
        let gates = [tephra::api::keys::PLAN_GATE];
        out.push(pod_with(c, "volcano", &format!("{name}-{i}"), Some(name), 1, &gates).await);
    }
    out
}

/// A PodGroup of `min` in the default queue.
async fn podgroup(c: &Client, name: &str, min: usize) {
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min, "queue": "default"}
    }))
    .unwrap();
    Api::<PodGroup>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &pg)
        .await
        .unwrap();
}

async fn pod(c: &Client, name: &str, group: Option<&str>, cpu: u32) -> Pod {
    pod_of(c, "volcano", name, group, cpu).await
}

/// A pod of scheduler `scheduler`.
async fn pod_of(c: &Client, scheduler: &str, name: &str, group: Option<&str>, cpu: u32) -> Pod {
    pod_with(c, scheduler, name, group, cpu, &[]).await
}

/// A pod of scheduler `scheduler` behind the scheduling gates `gates`.
async fn pod_with(
    c: &Client,
    scheduler: &str,
    name: &str,
    group: Option<&str>,
    cpu: u32,
    gates: &[&str],
) -> Pod {
    let mut annotations = json!({});
    if let Some(g) = group {
        annotations = json!({"scheduling.k8s.io/group-name": g});
    }
    let mut spec = json!({"schedulerName": scheduler, "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": cpu.to_string()}}}]});
    if !gates.is_empty() {
        spec["schedulingGates"] = gates.iter().map(|g| json!({ "name": g })).collect();
    }
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec
    }))
    .unwrap();
    Api::<Pod>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &p)
        .await
        .unwrap()
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap()
}

/// Waits (bounded) until every pod has an assumed placement; returns the nodes.
async fn planned(env: &Env, pods: &[Pod]) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let nodes: Vec<Option<String>> = {
            let idx = env.scheduler.index();
            pods.iter()
                .map(|p| idx.assumed_node(&uid(p)).map(str::to_string))
                .collect()
        };
        if nodes.iter().all(Option::is_some) {
            return nodes.into_iter().flatten().collect();
        }
        assert!(Instant::now() < deadline, "no plan for {nodes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The filter body in the `nodeCacheCapable: true` form, as Go marshals `ExtenderArgs`.
fn names_body(pod: &Pod, names: &[&str]) -> String {
    json!({"Pod": pod, "Nodes": null, "NodeNames": names}).to_string()
}

/// The filter body in the full form: a `v1.NodeList` with whole nodes, `NodeNames: null`.
fn nodes_body(pod: &Pod, names: &[&str]) -> String {
    let items: Vec<Value> = names
        .iter()
        .map(|n| json!({
            "metadata": {"name": n, "uid": format!("uid-{n}"), "labels": {"kubernetes.io/hostname": n}},
            "spec": {},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .collect();
    json!({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": null}).to_string()
}

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_keeps_the_planned_node_in_both_forms_and_prioritize_scores_it_highest() {
    let env = start(3, false).await;
    let pods = gang(&env.client, "g", 2, 2, 1).await;
    let nodes = planned(&env, &pods).await;

    let (status, r) = post(&env, "/scheduler/filter", names_body(&pods[0], &NODES)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(r["NodeNames"], json!([nodes[0]]), "{r}");
    assert_eq!(r["Nodes"], Value::Null);
    assert_eq!(r["Error"], "");
    // Every other node sent is accounted for, so kube-scheduler's message names them all.
    let failed = r["FailedNodes"].as_object().expect("FailedNodes");
    assert_eq!(failed.len(), NODES.len() - 1, "{r}");
    for (node, why) in failed {
        assert_ne!(node, &nodes[0]);
        assert_eq!(why, "node(s) not chosen for this pod by its gang's plan");
    }

    let (status, r) = post(&env, "/scheduler/filter", nodes_body(&pods[1], &NODES)).await;
    assert_eq!(status, StatusCode::OK);
    let items = r["Nodes"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{r}");
    assert_eq!(items[0]["metadata"]["name"], nodes[1]);
    // The node object is echoed as sent.
    assert_eq!(items[0]["metadata"]["uid"], format!("uid-{}", nodes[1]));
    assert_eq!(r["NodeNames"], Value::Null);

    let (status, r) = post(&env, "/scheduler/prioritize", names_body(&pods[0], &NODES)).await;
    assert_eq!(status, StatusCode::OK);
    let scores = r.as_array().unwrap();
    assert_eq!(scores.len(), 3);
    for s in scores {
        let score = s["Score"].as_i64().unwrap();
        assert!((0..=10).contains(&score));
        let expected = if s["Host"] == nodes[0] { 10 } else { 0 };
        assert_eq!(score, expected, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_replans_the_gang_within_the_nodes_sent() {
    let env = start(3, false).await;
    let pods = gang(&env.client, "g", 2, 2, 1).await;
    let nodes = planned(&env, &pods).await;
    // kube-scheduler sampled one node that is not the planned one.
    let other = NODES.iter().find(|n| **n != nodes[0]).unwrap();
    let (status, r) = post(&env, "/scheduler/filter", names_body(&pods[0], &[other])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(r["NodeNames"], json!([other]), "{r}");
    assert_eq!(
        env.scheduler.index().assumed_node(&uid(&pods[0])),
        Some(*other)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_cannot_fit_fails_every_node_with_the_podgroup_reason() {
    let env = start(3, false).await;
    // 4 pods of 5 cpu: one per 8-cpu node at most, 3 nodes.
    let pods = gang(&env.client, "big", 4, 4, 5).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let condition = loop {
        let pg = Api::<PodGroup>::namespaced(env.client.clone(), "default")
            .get("big")
            .await
            .unwrap();
        let msg = pg
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_.as_ref().map(|t| t.as_str()) == Some("Unschedulable"))
            .and_then(|c| c.message);
        if let Some(m) = msg.filter(|m| m.starts_with("1/4 ") || m.contains("Insufficient")) {
            break m;
        }
        assert!(Instant::now() < deadline, "no Unschedulable condition");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Once the plan has seen the pod (a session after its first filter), the answer is the
    // gang's reason on every node, without the closing period kube-scheduler adds itself.
    let condition = condition.trim_end_matches('.').to_string();
    let mut last = Value::Null;
    for _ in 0..20 {
        let (status, r) = post(&env, "/scheduler/filter", names_body(&pods[0], &NODES)).await;
        assert_eq!(status, StatusCode::OK);
        last = r;
        if last["FailedNodes"]["node-1"] == json!(condition) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["NodeNames"], json!([]), "{last}");
    for n in NODES {
        let reason = last["FailedNodes"][n].as_str().unwrap();
        assert!(reason.contains("tasks in gang unschedulable: "), "{reason}");
    }
    assert_eq!(last["FailedNodes"]["node-1"], json!(condition));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_pods_and_malformed_bodies_get_error_or_400_never_5xx() {
    let env = start(3, false).await;
    let ghost: Pod = serde_json::from_value(json!({
        "metadata": {"name": "ghost", "namespace": "default", "uid": "no-such-uid"},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]}
    }))
    .unwrap();
    let started = Instant::now();
    let (status, r) = post(&env, "/scheduler/filter", names_body(&ghost, &NODES)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() < Duration::from_secs(3), "bounded wait");
    assert_eq!(r["NodeNames"], json!([]));
    assert!(
        r["FailedNodes"]["node-1"]
            .as_str()
            .unwrap()
            .contains("not known")
    );

    let bodies: [&[u8]; 7] = [
        b"",
        b"{",
        b"[]",
        b"{\"Pod\": 3}",
        b"\xff\xfe",
        b"{\"NodeNames\": [\"node-1\"]}",
        b"{\"Pod\": {\"metadata\": {\"name\": 1}}, \"NodeNames\": null}",
    ];
    for verb in ["filter", "prioritize", "bind", "preempt"] {
        for b in bodies {
            let (status, _) = post(&env, &format!("/scheduler/{verb}"), b.to_vec()).await;
            assert!(
                status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
                "{verb} {:?}: {status}",
                String::from_utf8_lossy(b)
            );
        }
    }
    // A pod without a uid, and a request without nodes: Error in a 200.
    let (status, r) = post(
        &env,
        "/scheduler/filter",
        json!({"Pod": {"metadata": {"name": "x"}}, "Nodes": null, "NodeNames": ["node-1"]})
            .to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(!r["Error"].as_str().unwrap().is_empty());
    let (status, r) = post(
        &env,
        "/scheduler/filter",
        json!({"Pod": {"metadata": {"uid": "u"}}, "Nodes": null, "NodeNames": null}).to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(!r["Error"].as_str().unwrap().is_empty());

    // Binds of unknown pods: Error, HTTP 200.
    let (status, r) = post(
        &env,
        "/scheduler/bind",
        json!({"PodName": "ghost", "PodNamespace": "default", "PodUID": "no-such-uid", "Node": "node-1"}).to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(r["Error"].as_str().unwrap().contains("unknown"), "{r}");
}

async fn bind(env: &Env, p: &Pod, node: &str) -> Value {
    let body = json!({
        "PodName": p.metadata.name, "PodNamespace": "default",
        "PodUID": uid(p), "Node": node
    });
    post(env, "/scheduler/bind", body.to_string()).await.1
}

async fn bound_nodes(c: &Client) -> Vec<(String, Option<String>)> {
    let mut v: Vec<_> = Api::<Pod>::namespaced(c.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap_or_default(),
                p.spec.and_then(|s| s.node_name),
            )
        })
        .collect();
    v.sort();
    v
}

/// The pods and their nodes once at least `n` are bound (bounded wait): a flush answers each
/// request as its own Binding lands, so the rest of the gang may land a moment later.
async fn bound_at_least(env: &Env, n: usize) -> Vec<(String, Option<String>)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let bound = bound_nodes(&env.client).await;
        if bound.iter().filter(|(_, node)| node.is_some()).count() >= n
            || Instant::now() >= deadline
        {
            return bound;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (bounded) until `tephra_extender_gang_binds_total{outcome}` reaches `n`.
async fn gang_binds_reach(env: &Env, outcome: &str, n: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    while gang_binds(env, outcome) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gang_binds(env, outcome)
}

/// `tephra_extender_gang_binds_total` summed over gangs, for one outcome.
fn gang_binds(env: &Env, outcome: &str) -> f64 {
    counter_sum(
        &env.registry,
        "tephra_extender_gang_binds_total",
        "outcome",
        outcome,
    )
}

/// Binds each of `pods` to its node in `nodes`, all at once, and asserts every answer is an
/// `Error` naming each of `words` and that no pod of the namespace got a node.
async fn binds_fail(env: &Env, pods: &[Pod], nodes: &[String], words: &[&str]) {
    let answers =
        futures::future::join_all(pods.iter().zip(nodes).map(|(p, n)| bind(env, p, n))).await;
    for a in &answers {
        let e = a["Error"]
            .as_str()
            .unwrap_or_else(|| panic!("no Error: {a}"));
        for w in words {
            assert!(e.contains(w), "{a}");
        }
    }
    assert!(
        bound_nodes(&env.client)
            .await
            .iter()
            .all(|(_, n)| n.is_none()),
        "a pod was bound"
    );
}

/// Whether each of `pods` is assumed (placed, not bound) in the plan.
fn assumed(env: &Env, pods: &[Pod]) -> Vec<bool> {
    let idx = env.scheduler.index();
    pods.iter()
        .map(|p| idx.assumed_node(&uid(p)).is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_bind_is_atomic_three_of_four_bind_nothing_four_in_any_order_bind_all() {
    let env = start(3, false).await;
    let pods = gang(&env.client, "g", 4, 4, 1).await;
    let nodes = planned(&env, &pods).await;

    // Three binds arrive together; the fourth never does.
    let started = Instant::now();
    binds_fail(&env, &pods[..3], &nodes, &["nothing was bound", "kept"]).await;
    assert!(started.elapsed() >= HOLD && started.elapsed() < HOLD * 4);
    // Gathered: the placements stay while the gang may still gather...
    assert_eq!(assumed(&env, &pods[..3]), [true; 3]);
    assert_eq!(gang_binds(&env, "gather_expired"), 0.0);
    // ...and are released when the gather window (from the last arrival) passes. A session
    // may place them again at once, so the release is read from the binder's own series.
    let deadline = Instant::now() + GATHER * 3;
    while gang_binds(&env, "gather_expired") < 3.0 {
        assert!(
            Instant::now() < deadline,
            "gathered placements never released"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(started.elapsed() >= GATHER);
    assert!(
        bound_nodes(&env.client)
            .await
            .iter()
            .all(|(_, n)| n.is_none())
    );

    // A later session plans the gang again; now all four arrive, in reverse order.
    let nodes = planned(&env, &pods).await;
    let answers = futures::future::join_all((0..4).rev().map(|i| {
        let env = &env;
        let p = &pods[i];
        let n = nodes[i].clone();
        async move {
            tokio::time::sleep(Duration::from_millis(50 * (3 - i as u64))).await;
            bind(env, p, &n).await
        }
    }))
    .await;
    for a in &answers {
        assert_eq!(a["Error"], "", "{a}");
    }
    let bound = bound_at_least(&env, 4).await;
    assert!(bound.iter().all(|(_, n)| n.is_some()), "{bound:?}");

    // Asked again for the node it is bound to: success, nothing posted again (from the
    // binder's memory of its Binding, or from the cache once the watch shows it).
    let a = bind(&env, &pods[0], &nodes[0]).await;
    assert_eq!(a["Error"], "", "{a}");
    assert_eq!(gang_binds_reach(&env, "completed", 4.0).await, 4.0);
    // For another node: Error, not 5xx.
    let other = NODES.iter().find(|n| **n != nodes[0]).unwrap();
    let a = bind(&env, &pods[0], other).await;
    assert!(a["Error"].as_str().unwrap().contains("already"), "{a}");
}

/// The API server goes away while a gang's Bindings are posted: every bind is answered with an
/// error saying the placement is kept and nothing is bound. The members keep their node, so a
/// gang of higher priority that arrives meanwhile does not take the room (had the placements
/// been released, the next session would have given it to that gang, and a gang cut off
/// half-bound would stay partial until room freed up); once the API is back, kube-scheduler's
/// retries bind the whole gang where it was planned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_cut_off_by_an_unavailable_api_keep_the_gang_placed_for_the_retry() {
    // One node of 8 cpus; `g` fills it.
    let env = start(1, false).await;
    let pods = gang(&env.client, "g", 2, 2, 4).await;
    let nodes = planned(&env, &pods).await;

    env.bindings_down.store(true, Ordering::SeqCst);
    binds_fail(
        &env,
        &pods,
        &nodes,
        &["the API is unavailable", "placement is kept"],
    )
    .await;

    // A gang of higher priority, as big, arrives; sessions run.
    let classes: Api<PriorityClass> = Api::all(env.client.clone());
    let high: PriorityClass =
        serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 100})).unwrap();
    classes.create(&PostParams::default(), &high).await.unwrap();
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "h", "namespace": "default"},
        "spec": {"minMember": 2, "queue": "default", "priorityClassName": "high"}
    }))
    .unwrap();
    Api::<PodGroup>::namespaced(env.client.clone(), "default")
        .create(&PostParams::default(), &pg)
        .await
        .unwrap();
    let mut h = Vec::new();
    for i in 0..2 {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("h-{i}"),
                "annotations": {"scheduling.k8s.io/group-name": "h"}},
            "spec": {"schedulerName": "volcano", "priorityClassName": "high",
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "4"}}}]}
        }))
        .unwrap();
        h.push(
            Api::<Pod>::namespaced(env.client.clone(), "default")
                .create(&PostParams::default(), &p)
                .await
                .unwrap(),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while h
        .iter()
        .any(|p| env.scheduler.index().task(&uid(p)).is_none())
    {
        assert!(Instant::now() < deadline, "the index never saw gang h");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sessions = env.scheduler.session_count();
    while env.scheduler.session_count() < sessions + 3 {
        assert!(Instant::now() < deadline, "no session ran");
        env.scheduler.request_now();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (kept, taken) = {
        let idx = env.scheduler.index();
        let at = |p: &Pod| idx.assumed_node(&uid(p)).map(str::to_string);
        (
            pods.iter().map(at).collect::<Vec<_>>(),
            h.iter().map(at).collect::<Vec<_>>(),
        )
    };
    assert_eq!(kept, nodes.iter().cloned().map(Some).collect::<Vec<_>>());
    assert_eq!(taken, [None, None]);

    // The API is back: the retried binds go through, each pod on its planned node.
    env.bindings_down.store(false, Ordering::SeqCst);
    let answers = futures::future::join_all((0..2).map(|i| bind(&env, &pods[i], &nodes[i]))).await;
    for a in &answers {
        assert_eq!(a["Error"], "", "{a}");
    }
    let bound = bound_at_least(&env, 2).await;
    let on = |name: &str| {
        bound
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, node)| node.clone())
    };
    assert_eq!(
        [on("g-0"), on("g-1")],
        [Some(nodes[0].clone()), Some(nodes[1].clone())]
    );
    assert_eq!([on("h-0"), on("h-1")], [None, None]);
}

/// kube-scheduler places one pod per cycle: a gang's binds can arrive further apart than one
/// hold. Members whose hold timed out stay gathered, and the member that completes the gang
/// binds them all, each on its planned node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_whose_hold_timed_out_are_bound_when_the_rest_arrive_in_the_gather_window() {
    let env = start_with(3, false, Duration::from_secs(20)).await;
    let pods = gang(&env.client, "late", 4, 4, 1).await;
    let nodes = planned(&env, &pods).await;

    // Two arrive and time out; a third arrives alone later and times out too.
    let answers = futures::future::join_all((0..2).map(|i| bind(&env, &pods[i], &nodes[i]))).await;
    for a in &answers {
        assert!(a["Error"].as_str().unwrap().contains("kept"), "{a}");
    }
    let a = bind(&env, &pods[2], &nodes[2]).await;
    assert!(
        a["Error"]
            .as_str()
            .unwrap()
            .contains("binds for 3 of minMember 4"),
        "{a}"
    );
    assert!(
        bound_nodes(&env.client)
            .await
            .iter()
            .all(|(_, n)| n.is_none())
    );
    // kube-scheduler retries one of them: its new request joins, nothing is counted twice.
    let retried = tokio::spawn({
        let router = env.router.clone();
        let body = json!({"PodName": pods[0].metadata.name, "PodNamespace": "default",
            "PodUID": uid(&pods[0]), "Node": nodes[0]})
        .to_string();
        async move {
            let req = Request::post("/scheduler/bind")
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap();
            router.oneshot(req).await.unwrap().status()
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        bound_nodes(&env.client)
            .await
            .iter()
            .all(|(_, n)| n.is_none())
    );

    // The fourth completes the gang: all four are bound together, each on its planned node.
    let a = bind(&env, &pods[3], &nodes[3]).await;
    assert_eq!(a["Error"], "", "{a}");
    assert_eq!(retried.await.unwrap(), StatusCode::OK);
    let bound = bound_at_least(&env, 4).await;
    let want: Vec<(String, Option<String>)> = pods
        .iter()
        .zip(&nodes)
        .map(|(p, n)| (p.metadata.name.clone().unwrap(), Some(n.clone())))
        .collect();
    assert_eq!(bound, want);
}

/// Binding ahead: the session placed the whole gang, so the first member's bind binds every
/// member on its planned node at once; kube-scheduler's later binds for the others are
/// answered with success (same node) or refused (another node), and post nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_placed_whole_is_bound_ahead_at_its_first_bind() {
    let env = start_opts(
        3,
        Options {
            bind_ahead: true,
            ..Options::default()
        },
    )
    .await;
    let pods = gang(&env.client, "ahead", 4, 4, 1).await;
    let nodes = planned(&env, &pods).await;

    let started = Instant::now();
    let a = bind(&env, &pods[0], &nodes[0]).await;
    assert_eq!(a["Error"], "", "{a}");
    assert!(started.elapsed() < HOLD, "the first bind was held");
    let want: Vec<(String, Option<String>)> = pods
        .iter()
        .zip(&nodes)
        .map(|(p, n)| (p.metadata.name.clone().unwrap(), Some(n.clone())))
        .collect();
    assert_eq!(bound_at_least(&env, 4).await, want);
    assert_eq!(gang_binds(&env, "ahead"), 3.0);
    assert_eq!(gang_binds_reach(&env, "completed", 4.0).await, 4.0);

    // kube-scheduler reaches the others later: the same node is success, nothing posted again.
    for i in 1..4 {
        let a = bind(&env, &pods[i], &nodes[i]).await;
        assert_eq!(a["Error"], "", "{a}");
    }
    assert_eq!(gang_binds(&env, "completed"), 4.0);
    assert_eq!(gang_binds(&env, "failed"), 0.0);
    // Another node than the one it is bound to is refused.
    let other = NODES.iter().find(|n| **n != nodes[1]).unwrap();
    let a = bind(&env, &pods[1], other).await;
    assert!(
        a["Error"].as_str().unwrap().contains("already bound"),
        "{a}"
    );
}

/// Binding ahead, before kube-scheduler asks at all: once the session has placed a gated gang
/// and the API has answered the removal of every member's plan gate, the binder binds the
/// gang whole. No bind request is made here; every pod ends on the node the plan gave it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placed_gang_is_bound_once_its_plan_gates_are_off() {
    let env = start_opts(
        3,
        Options {
            bind_ahead: true,
            nudger: true,
            ..Options::default()
        },
    )
    .await;
    let pods = gated_gang(&env.client, "ungated", 4).await;
    // Placed, ungated and bound within a session or two: the placements are gone from the
    // plan by the time a test could read them, so the binds are checked against the pods.
    let bound = bound_at_least(&env, 4).await;
    assert!(bound.iter().all(|(_, n)| n.is_some()), "{bound:?}");
    assert_eq!(gang_binds(&env, "ahead"), 4.0);
    assert_eq!(gang_binds_reach(&env, "completed", 4.0).await, 4.0);
    // kube-scheduler, reaching a member afterwards, is told it is bound where it asks, and
    // refused elsewhere; nothing is posted again.
    let node = bound[2].1.clone().unwrap();
    let a = bind(&env, &pods[2], &node).await;
    assert_eq!(a["Error"], "", "{a}");
    let other = NODES.iter().find(|n| **n != node).unwrap();
    let a = bind(&env, &pods[2], other).await;
    assert!(
        a["Error"].as_str().unwrap().contains("already bound"),
        "{a}"
    );
    assert_eq!(gang_binds(&env, "completed"), 4.0);
}

/// With binding ahead off, the plan gates still come off, but the gang waits for
/// kube-scheduler's binds: nothing is bound by the gates alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_binding_ahead_ungated_pods_wait_for_kube_scheduler() {
    let env = start_opts(
        3,
        Options {
            nudger: true,
            ..Options::default()
        },
    )
    .await;
    let pods = gated_gang(&env.client, "waits", 2).await;
    let nodes = planned(&env, &pods).await;
    let api = Api::<Pod>::namespaced(env.client.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let gated = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.scheduling_gates.as_ref())
                    .is_some_and(|g| !g.is_empty())
            })
            .count();
        if gated == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{gated} pods still gated");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A few sessions later, still nothing bound.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        bound_nodes(&env.client)
            .await
            .iter()
            .all(|(_, n)| n.is_none())
    );
    // kube-scheduler's binds bind the gang.
    let (a, b) = tokio::join!(
        bind(&env, &pods[0], &nodes[0]),
        bind(&env, &pods[1], &nodes[1])
    );
    assert_eq!(a["Error"], "", "{a}");
    assert_eq!(b["Error"], "", "{b}");
    assert_eq!(
        bound_at_least(&env, 2)
            .await
            .iter()
            .filter(|(_, n)| n.is_some())
            .count(),
        2
    );
}

/// A member that needs kube-scheduler before its Binding (here a PersistentVolumeClaim,
/// bound in kube-scheduler's PreBind) is never bound ahead: its gang waits for its own bind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_a_volume_claim_is_not_bound_ahead() {
    let env = start_opts(
        3,
        Options {
            bind_ahead: true,
            ..Options::default()
        },
    )
    .await;
    let mut pods = gang(&env.client, "claims", 2, 1, 1).await;
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "claims-1", "annotations": {"scheduling.k8s.io/group-name": "claims"}},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap();
    pods.push(
        Api::<Pod>::namespaced(env.client.clone(), "default")
            .create(&PostParams::default(), &p)
            .await
            .unwrap(),
    );
    let nodes = planned(&env, &pods).await;

    // The plain member's bind is held, times out and is kept gathered: the claim member is
    // placed and may still come.
    let a = bind(&env, &pods[0], &nodes[0]).await;
    assert!(a["Error"].as_str().unwrap().contains("kept"), "{a}");
    assert_eq!(gang_binds(&env, "ahead"), 0.0);
    assert!(
        bound_nodes(&env.client)
            .await
            .iter()
            .all(|(_, n)| n.is_none())
    );
    // Its own bind completes the gang: both are bound.
    let a = bind(&env, &pods[1], &nodes[1]).await;
    assert_eq!(a["Error"], "", "{a}");
    let bound = bound_at_least(&env, 2).await;
    assert!(bound.iter().all(|(_, n)| n.is_some()), "{bound:?}");
}

/// A hold whose gang cannot reach minMember even with every member the plan has placed
/// releases its placements at the hold timeout instead of keeping them for the gather window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_that_cannot_gather_releases_at_the_hold_timeout() {
    let env = start_opts(
        3,
        Options {
            bind_ahead: true,
            ..Options::default()
        },
    )
    .await;
    let pods = gang(&env.client, "short", 3, 3, 1).await;
    let nodes = planned(&env, &pods).await;
    // The third member goes away: the gang can no longer reach minMember 3.
    Api::<Pod>::namespaced(env.client.clone(), "default")
        .delete(
            pods[2].metadata.name.as_deref().unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while env.scheduler.index().task(&uid(&pods[2])).is_some() {
        assert!(
            Instant::now() < deadline,
            "the deletion never reached the index"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    let answers = futures::future::join_all((0..2).map(|i| bind(&env, &pods[i], &nodes[i]))).await;
    assert!(started.elapsed() < GATHER, "held past the hold timeout");
    for a in &answers {
        let e = a["Error"].as_str().unwrap();
        assert!(
            e.contains("released") && e.contains("cannot reach minMember"),
            "{a}"
        );
    }
    assert_eq!(assumed(&env, &pods[..2]), [false; 2]);
    assert!(
        bound_nodes(&env.client)
            .await
            .iter()
            .all(|(_, n)| n.is_none())
    );
}

/// Two bind requests for one pod at once (kube-scheduler retrying a bind whose answer it
/// missed) post one Binding and are both answered with success, not a 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_binds_of_one_pod_post_one_binding_and_both_succeed() {
    let env = start(3, false).await;
    let p = pod(&env.client, "twice", None, 1).await;
    // The binder answers from the index: wait (bounded) until the watch has brought the pod.
    let deadline = Instant::now() + Duration::from_secs(5);
    while env.scheduler.index().task(&uid(&p)).is_none() {
        assert!(Instant::now() < deadline, "the pod never reached the index");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answers = futures::future::join_all((0..2).map(|_| bind(&env, &p, "node-2"))).await;
    for a in &answers {
        assert_eq!(a["Error"], "", "{a}");
    }
    let bound = bound_nodes(&env.client).await;
    assert_eq!(bound, [("twice".to_string(), Some("node-2".to_string()))]);
}

/// With `--bind-gather-timeout 0s` a timed-out hold releases its placements at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_gather_window_a_timed_out_hold_releases_at_once() {
    let env = start_with(3, false, Duration::ZERO).await;
    let pods = gang(&env.client, "g0", 3, 3, 1).await;
    let nodes = planned(&env, &pods).await;
    let answers = futures::future::join_all((0..2).map(|i| bind(&env, &pods[i], &nodes[i]))).await;
    for a in &answers {
        let e = a["Error"].as_str().unwrap();
        assert!(
            e.contains("nothing was bound") && e.contains("released"),
            "{a}"
        );
    }
    assert_eq!(assumed(&env, &pods[..2]), [false; 2]);
    assert!(
        bound_nodes(&env.client)
            .await
            .iter()
            .all(|(_, n)| n.is_none())
    );
}

/// A pod of tephra's scheduler outside any PodGroup waits for the PodGroup controller (not
/// running here) to put it in one, as Volcano's scheduler ignores such pods; a pod of another
/// scheduler that reaches the extender gets every node that fits it and binds at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_outside_gangs_wait_for_a_podgroup_unless_another_scheduler_owns_them() {
    let env = start(3, false).await;
    let known = |p: &Pod| {
        let (env, uid) = (&env, uid(p));
        async move {
            let deadline = Instant::now() + Duration::from_secs(5);
            while env.scheduler.index().task(&uid).is_none() {
                assert!(Instant::now() < deadline, "pod {uid} never indexed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let ours = pod(&env.client, "solo", None, 1).await;
    known(&ours).await;
    let (_, r) = post(&env, "/scheduler/filter", names_body(&ours, &NODES)).await;
    assert_eq!(r["NodeNames"], json!([]), "{r}");
    for n in NODES {
        assert_eq!(
            r["FailedNodes"][n],
            tephra::extender::filter::NO_GROUP_YET,
            "{r}"
        );
    }

    let p = pod_of(&env.client, "default-scheduler", "theirs", None, 1).await;
    known(&p).await;
    let (_, r) = post(&env, "/scheduler/filter", names_body(&p, &NODES)).await;
    assert_eq!(r["NodeNames"], json!(NODES), "{r}");
    let big = pod_of(&env.client, "default-scheduler", "huge", None, 64).await;
    known(&big).await;
    let (_, r) = post(&env, "/scheduler/filter", names_body(&big, &NODES)).await;
    assert_eq!(r["NodeNames"], json!([]), "{r}");
    assert_eq!(r["FailedNodes"]["node-2"], "Insufficient cpu");
    let a = bind(&env, &p, "node-2").await;
    assert_eq!(a["Error"], "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempt_accepts_only_victims_that_keep_gangs_whole_in_both_forms() {
    let env = start(3, false).await;
    let pods = gang(&env.client, "g", 2, 3, 1).await;
    let nodes = planned(&env, &pods).await;
    let answers =
        futures::future::join_all(pods.iter().zip(&nodes).map(|(p, n)| bind(&env, p, n))).await;
    for a in &answers {
        assert_eq!(a["Error"], "", "{a}");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let all_bound = {
            let idx = env.scheduler.index();
            pods.iter().all(|p| {
                idx.task(&uid(p))
                    .is_some_and(|t| !t.assumed && t.node.is_some())
            })
        };
        if all_bound {
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let preemptor = pod(&env.client, "vip", None, 1).await;
    let meta = |uids: &[String]| json!({"Pods": uids.iter().map(|u| json!({"UID": u})).collect::<Vec<_>>(), "NumPDBViolations": 0});
    // One victim leaves 2 ≥ minMember 2; two leave 1 < 2; all three take the whole gang.
    let one = vec![uid(&pods[0])];
    let two = vec![uid(&pods[0]), uid(&pods[1])];
    let all: Vec<String> = pods.iter().map(uid).collect();
    let body = json!({
        "Pod": preemptor, "NodeNameToVictims": null,
        "NodeNameToMetaVictims": {"node-1": meta(&one), "node-2": meta(&two), "node-3": meta(&all)}
    });
    let (status, r) = post(&env, "/scheduler/preempt", body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let accepted = r["NodeNameToMetaVictims"].as_object().unwrap();
    assert!(
        accepted.contains_key("node-1") && accepted.contains_key("node-3"),
        "{r}"
    );
    assert!(!accepted.contains_key("node-2"), "{r}");

    // The full form: whole victim pods.
    let body = json!({
        "Pod": preemptor,
        "NodeNameToVictims": {
            "node-1": {"Pods": [pods[0]], "NumPDBViolations": 0},
            "node-2": {"Pods": [pods[0], pods[1]], "NumPDBViolations": 1}
        },
        "NodeNameToMetaVictims": null
    });
    let (status, r) = post(&env, "/scheduler/preempt", body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let accepted = r["NodeNameToMetaVictims"].as_object().unwrap();
    assert_eq!(accepted.len(), 1, "{r}");
    assert_eq!(accepted["node-1"]["Pods"][0]["UID"], json!(uid(&pods[0])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_asked_about_takes_the_place_of_one_not_asked_about_yet() {
    // One 8-cpu node and a job of 12 one-cpu pods that needs one: the plan places 8, in its own
    // order; kube-scheduler asks first about a pod the plan left out. It gets the place of a
    // member not asked about yet, instead of "no place in the plan yet" while the cluster
    // waits for kube-scheduler to reach the planned ones.
    let env = start(1, false).await;
    let pods = gang(&env.client, "big", 1, 12, 1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let placed = |env: &Env| {
        let idx = env.scheduler.index();
        pods.iter()
            .filter(|p| idx.assumed_node(&uid(p)).is_some())
            .count()
    };
    while placed(&env) < 8 {
        assert!(Instant::now() < deadline, "placed {}", placed(&env));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let unplanned = {
        let idx = env.scheduler.index();
        pods.iter()
            .find(|p| idx.assumed_node(&uid(p)).is_none())
            .cloned()
            .expect("a member left out")
    };
    let (status, r) = post(
        &env,
        "/scheduler/filter",
        names_body(&unplanned, &["node-1"]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(r["NodeNames"], json!(["node-1"]), "{r}");
    assert_eq!(r["Error"], "");
    assert_eq!(placed(&env), 8, "the place was handed over, not added");
    assert_eq!(
        env.scheduler.index().assumed_node(&uid(&unplanned)),
        Some("node-1")
    );
    let families = env.registry.gather();
    let transferred = families
        .iter()
        .find(|f| f.name() == "tephra_extender_placements_transferred_total")
        .map(|f| f.get_metric()[0].get_counter().get_value())
        .unwrap_or(0.0);
    assert_eq!(transferred, 1.0);
}

/// A gang kept inside one HyperNode is never split by kube-scheduler's candidates: sent only a
/// node of the other rack for one member (a re-plan of the gang on that node alone), the filter
/// answers no node, with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_gang_is_never_split_by_the_nodes_sent() {
    use tephra::api::HyperNode;
    let env = start(4, false).await;
    let racks = [
        ("rack-a", ["node-1", "node-2"]),
        ("rack-b", ["node-3", "node-4"]),
    ];
    for (name, members) in racks {
        let members: Vec<Value> = members
            .iter()
            .map(|m| json!({"type": "Node", "selector": {"exactMatch": {"name": m}}}))
            .collect();
        let hn: HyperNode = serde_json::from_value(json!({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name}, "spec": {"tier": 1, "members": members}
        }))
        .unwrap();
        Api::<HyperNode>::all(env.client.clone())
            .create(&PostParams::default(), &hn)
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.scheduler.index().snapshot().topology.domains.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the scheduler never saw the HyperNodes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 2, "queue": "default",
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    }))
    .unwrap();
    Api::<PodGroup>::namespaced(env.client.clone(), "default")
        .create(&PostParams::default(), &pg)
        .await
        .unwrap();
    // Two pods of 5 cpus: one per 8-cpu node, so the gang needs both nodes of a rack.
    let pods = vec![
        pod(&env.client, "g-0", Some("g"), 5).await,
        pod(&env.client, "g-1", Some("g"), 5).await,
    ];
    let rack = |n: &str| {
        if n == "node-1" || n == "node-2" {
            'a'
        } else {
            'b'
        }
    };
    let nodes = planned(&env, &pods).await;
    assert_eq!(rack(&nodes[0]), rack(&nodes[1]), "{nodes:?}");
    let far = if rack(&nodes[0]) == 'a' {
        "node-3"
    } else {
        "node-1"
    };

    // Only a node of the other rack for g-0: both pods cannot go there, and one there with one
    // here would split the gang.
    let (status, r) = post(&env, "/scheduler/filter", names_body(&pods[0], &[far])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(r["NodeNames"], json!([]), "{r}");
    let reason = r["FailedNodes"][far].as_str().unwrap_or_default();
    assert!(
        reason.contains("no HyperNode of tier 1 or lower has room for the gang"),
        "{r}"
    );
}
