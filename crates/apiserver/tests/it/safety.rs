//! No client request may take the embedded API down: regression tests for the crashes found
//! in review (foreground deletion of self-owned objects, cycles and long chains; a Binding of
//! a pod whose spec is not an object; the Priority admission step's message), webhook
//! registrations pointing off the machine, and a fuzz-style test that drives random object
//! shapes, owner graphs and numbers through every verb of a server listening on 127.0.0.1 and
//! checks that it keeps answering.

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions};
use tokio_util::sync::CancellationToken;

struct Server {
    api: Arc<ApiServer>,
    base: String,
    http: reqwest::Client,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn server(options: EmbeddedOptions) -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let api = ApiServer::start(options, stop.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(embedded::serve(api.clone(), listener, stop.clone()));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    Server {
        api,
        base,
        http,
        stop,
    }
}

impl Server {
    async fn send(&self, method: &str, path: &str, ct: &str, body: Option<Value>) -> (u16, Value) {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut r = self
            .http
            .request(m, format!("{}{path}", self.base))
            .header("content-type", ct);
        if let Some(b) = body {
            r = r.body(b.to_string());
        }
        let resp = r
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let code = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (code, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send("POST", path, "application/json", Some(body))
            .await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, "application/json", None).await
    }

    async fn healthy(&self) -> bool {
        self.get("/healthz").await.0 == 200
    }
}

fn quiet() -> EmbeddedOptions {
    EmbeddedOptions {
        nodes: 1,
        sim_kubelet: false,
        sim_controllers: false,
        ..Default::default()
    }
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn cm(name: &str, owners: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "ownerReferences": owners}})
}

fn owner_ref(name: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid,
           "blockOwnerDeletion": true, "controller": false})
}

fn foreground() -> Value {
    json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"})
}

/// Polls until `f` holds, every 20 ms for at most `secs`.
async fn eventually(what: &str, secs: u64, mut f: impl AsyncFnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// A ConfigMap naming its own uid as a blocking owner, deleted in foreground, used to overflow
/// the stack and abort the process.
#[tokio::test]
async fn foreground_deletion_of_a_self_owned_object_completes() {
    let s = server(quiet()).await;
    let (code, created) = s.post(CMS, cm("self", json!([]))).await;
    assert_eq!(code, 201, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let (code, body) = s
        .send(
            "PATCH",
            &format!("{CMS}/self"),
            "application/merge-patch+json",
            Some(json!({"metadata": {"ownerReferences": [owner_ref("self", &uid)]}})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = s
        .send(
            "DELETE",
            &format!("{CMS}/self"),
            "application/json",
            Some(foreground()),
        )
        .await;
    assert!(code == 200 || code == 202, "{code} {body}");
    eventually("the self-owned ConfigMap is gone", 5, async || {
        s.get(&format!("{CMS}/self")).await.0 == 404
    })
    .await;
    assert!(s.healthy().await);
}

/// Two ConfigMaps owning each other (both blocking) are both deleted in foreground.
#[tokio::test]
async fn foreground_deletion_of_an_ownership_cycle_completes() {
    let s = server(quiet()).await;
    let a = s.post(CMS, cm("a", json!([]))).await.1;
    let a_uid = a["metadata"]["uid"].as_str().unwrap().to_string();
    let b = s
        .post(CMS, cm("b", json!([owner_ref("a", &a_uid)])))
        .await
        .1;
    let b_uid = b["metadata"]["uid"].as_str().unwrap().to_string();
    let (code, body) = s
        .send(
            "PATCH",
            &format!("{CMS}/a"),
            "application/merge-patch+json",
            Some(json!({"metadata": {"ownerReferences": [owner_ref("b", &b_uid)]}})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = s
        .send(
            "DELETE",
            &format!("{CMS}/a"),
            "application/json",
            Some(foreground()),
        )
        .await;
    assert!(code == 200 || code == 202, "{code} {body}");
    eventually("both members of the cycle are gone", 5, async || {
        s.get(&format!("{CMS}/a")).await.0 == 404 && s.get(&format!("{CMS}/b")).await.0 == 404
    })
    .await;
}

/// A long chain of dependents deleted in foreground from its head: no recursion (the old
/// recursive code overflowed the stack far below this depth), done off the request's worker.
/// `TEPHRA_GC_CHAIN=100000` runs the 100k chain (slow in a debug build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_of_a_long_chain_of_dependents_completes() {
    let n: usize = std::env::var("TEPHRA_GC_CHAIN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let s = server(quiet()).await;
    let mut prev: Option<(String, String)> = None;
    let started = Instant::now();
    for i in 0..n {
        let name = format!("c{i}");
        let owners = match &prev {
            Some((n, u)) => json!([owner_ref(n, u)]),
            None => json!([]),
        };
        let mut obj = cm(&name, owners);
        obj["metadata"]["namespace"] = json!("default");
        let stored = s.api.seed("", "configmaps", obj).unwrap();
        prev = Some((name, stored.uid.clone()));
    }
    eprintln!("seeded {n} ConfigMaps in {:?}", started.elapsed());
    let started = Instant::now();
    let (code, body) = s
        .send(
            "DELETE",
            &format!("{CMS}/c0"),
            "application/json",
            Some(foreground()),
        )
        .await;
    assert!(code == 200 || code == 202, "{code} {body}");
    eprintln!(
        "foreground delete of the chain answered in {:?}",
        started.elapsed()
    );
    eventually("the whole chain is gone", 300, async || {
        s.api.count("", "configmaps") == 0
    })
    .await;
    assert!(s.healthy().await);
}

/// `POST pods/NAME/binding` for a pod whose `spec` is not an object used to panic.
#[tokio::test]
async fn binding_a_pod_whose_spec_is_not_an_object_is_an_error_not_a_panic() {
    let s = server(quiet()).await;
    let pods = "/api/v1/namespaces/default/pods";
    let (code, body) = s
        .post(
            pods,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "odd"},
                           "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    // Make the stored spec a string, whichever way the API lets a client do it.
    let odd = s
        .send(
            "PATCH",
            &format!("{pods}/odd"),
            "application/json-patch+json",
            Some(json!([{"op": "replace", "path": "/spec", "value": "not an object"}])),
        )
        .await;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "odd"},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
    let (code, body) = s.post(&format!("{pods}/odd/binding"), binding).await;
    if odd.0 == 200 {
        assert_eq!(code, 422, "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap_or_default()
                .contains("spec"),
            "{body}"
        );
    } else {
        // The patch was refused: the binding of the intact pod works.
        assert_eq!(code, 201, "{body}");
    }
    assert!(s.healthy().await);
}

/// The Priority admission step named the pod `""` (it read `spec.generateName`).
#[tokio::test]
async fn an_unknown_priority_class_names_the_pod() {
    let s = server(quiet()).await;
    let (code, body) = s
        .post(
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
                   "spec": {"priorityClassName": "nope", "containers": [{"name": "c", "image": "i"}]}}),
        )
        .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "pods \"p1\" is forbidden: no PriorityClass with name nope was found"
    );
}

/// A webhook registration pointing off the machine is refused with a message.
#[tokio::test]
async fn webhooks_off_loopback_are_refused() {
    let s = server(quiet()).await;
    let config = |url: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "w"},
               "webhooks": [{"name": "w.example.com", "admissionReviewVersions": ["v1"],
                             "sideEffects": "None",
                             "clientConfig": {"url": url},
                             "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                        "apiVersions": ["v1"], "resources": ["configmaps"]}]}]})
    };
    let path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    let (code, body) = s.post(path, config("https://169.254.169.254/latest")).await;
    assert_eq!(code, 422, "{body}");
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("webhooks[0].clientConfig.url") && msg.contains("loopback"),
        "{msg}"
    );
    let (code, body) = s.post(path, config("https://127.0.0.1:1/validate")).await;
    assert_eq!(code, 201, "{body}");
}

// ---------------------------------------------------------------------------------------------
// Fuzz-style: random shapes, owner graphs and numbers through every verb.
// ---------------------------------------------------------------------------------------------

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(i64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(u64::MAX)),
        Just(json!(1e308)),
        Just(json!(-1e308)),
        Just(json!(0.5)),
        any::<i32>().prop_map(|n| json!(n)),
    ]
}

fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1e30".to_string()),
        Just("-5".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("18446744073709551616".to_string()),
        Just("0.01".to_string()),
        Just("".to_string()),
        any::<u16>().prop_map(|n| n.to_string()),
    ]
}

/// Any JSON value, a few levels deep, with the numbers above.
fn shape() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        "[a-z]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                "[a-z]{1,8}|replicas|spec|status|metadata|containers",
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[derive(Clone, Debug)]
enum Op {
    Create {
        res: usize,
        name: u8,
        body: Value,
        owners: Vec<u8>,
        run: String,
    },
    Replace {
        res: usize,
        name: u8,
        body: Value,
        sub: bool,
    },
    Patch {
        res: usize,
        name: u8,
        kind: usize,
        body: Value,
    },
    Delete {
        res: usize,
        name: u8,
        policy: usize,
    },
    DeleteAll {
        res: usize,
    },
    Get {
        res: usize,
        name: u8,
        query: String,
    },
    Bind {
        name: u8,
        node: String,
    },
    Evict {
        name: u8,
    },
    Scale {
        res: usize,
        name: u8,
        replicas: Value,
    },
}

/// Resources: (collection path, apiVersion, kind).
const RESOURCES: [(&str, &str, &str); 6] = [
    ("/api/v1/namespaces/default/configmaps", "v1", "ConfigMap"),
    ("/api/v1/namespaces/default/pods", "v1", "Pod"),
    (
        "/apis/apps/v1/namespaces/default/deployments",
        "apps/v1",
        "Deployment",
    ),
    (
        "/apis/apps/v1/namespaces/default/replicasets",
        "apps/v1",
        "ReplicaSet",
    ),
    (
        "/apis/apps/v1/namespaces/default/statefulsets",
        "apps/v1",
        "StatefulSet",
    ),
    ("/apis/batch/v1/namespaces/default/jobs", "batch/v1", "Job"),
];

fn op() -> impl Strategy<Value = Op> {
    let res = 0..RESOURCES.len();
    let name = 0u8..4;
    prop_oneof![
        3 => (res.clone(), name.clone(), shape(), prop::collection::vec(0u8..4, 0..3), number_text())
            .prop_map(|(res, name, body, owners, run)| Op::Create { res, name, body, owners, run }),
        1 => (res.clone(), name.clone(), shape(), any::<bool>())
            .prop_map(|(res, name, body, sub)| Op::Replace { res, name, body, sub }),
        2 => (res.clone(), name.clone(), 0usize..3, shape())
            .prop_map(|(res, name, kind, body)| Op::Patch { res, name, kind, body }),
        2 => (res.clone(), name.clone(), 0usize..4).prop_map(|(res, name, policy)| Op::Delete { res, name, policy }),
        1 => res.clone().prop_map(|res| Op::DeleteAll { res }),
        1 => (res.clone(), name.clone(), prop_oneof![
            Just(String::new()),
            Just("?limit=18446744073709551616".to_string()),
            Just("?limit=1&continue=zz".to_string()),
            Just("?labelSelector=a%20in%20(".to_string()),
            Just("?fieldSelector=spec.nodeName%3D%3Dx".to_string()),
            Just("?watch=true&timeoutSeconds=0".to_string()),
            Just("?watch=1&timeoutSeconds=1&resourceVersion=99999999999999999999".to_string()),
        ]).prop_map(|(res, name, query)| Op::Get { res, name, query }),
        1 => (name.clone(), "node-1|node-9|".prop_map(String::from)).prop_map(|(name, node)| Op::Bind { name, node }),
        1 => name.clone().prop_map(|name| Op::Evict { name }),
        1 => (2usize..5, name, number()).prop_map(|(res, name, replicas)| Op::Scale { res, name, replicas }),
    ]
}

/// A body for a resource: the random shape, made an object of the right kind with a name (so
/// requests get past decoding and reach the interesting code), optionally with owners.
fn object(res: usize, name: u8, mut body: Value, owners: &[(String, String)], run: &str) -> Value {
    let (_, api_version, kind) = RESOURCES[res];
    if !body.is_object() {
        body = json!({"spec": body});
    }
    let o = body.as_object_mut().unwrap();
    o.insert("apiVersion".into(), json!(api_version));
    o.insert("kind".into(), json!(kind));
    let mut meta = match o.remove("metadata") {
        Some(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    meta.insert("name".into(), json!(format!("o{name}")));
    meta.insert(
        "annotations".into(),
        json!({"simulation.tephra.io/run-seconds": run, "simulation.tephra.io/exit-code": run}),
    );
    if !owners.is_empty() {
        let refs: Vec<Value> = owners
            .iter()
            .map(|(n, u)| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": u, "blockOwnerDeletion": true}))
            .collect();
        meta.insert("ownerReferences".into(), json!(refs));
    }
    o.insert("metadata".into(), Value::Object(meta));
    body
}

async fn apply(s: &Server, op: &Op) -> u16 {
    let item = |res: usize, name: u8| format!("{}/o{name}", RESOURCES[res].0);
    match op {
        Op::Create { res, name, body, owners, run } => {
            // Owners are configmaps o0..o3 that exist now (their real uids), or made-up uids.
            let mut refs = Vec::new();
            for o in owners {
                let (c, v) = s.get(&item(0, *o)).await;
                let uid = if c == 200 {
                    v["metadata"]["uid"].as_str().unwrap_or("x").to_string()
                } else {
                    format!("00000000-0000-4000-8000-00000000000{o}")
                };
                refs.push((format!("o{o}"), uid));
            }
            s.post(RESOURCES[*res].0, object(*res, *name, body.clone(), &refs, run)).await.0
        }
        Op::Replace { res, name, body, sub } => {
            let path = if *sub { format!("{}/status", item(*res, *name)) } else { item(*res, *name) };
            s.send("PUT", &path, "application/json", Some(object(*res, *name, body.clone(), &[], "1")))
                .await
                .0
        }
        Op::Patch { res, name, kind, body } => {
            let (ct, b) = match kind {
                0 => ("application/merge-patch+json", body.clone()),
                1 => ("application/strategic-merge-patch+json", body.clone()),
                _ => (
                    "application/json-patch+json",
                    json!([{"op": "replace", "path": "/spec", "value": body}]),
                ),
            };
            s.send("PATCH", &item(*res, *name), ct, Some(b)).await.0
        }
        Op::Delete { res, name, policy } => {
            let body = match policy {
                0 => json!({}),
                1 => json!({"propagationPolicy": "Foreground"}),
                2 => json!({"propagationPolicy": "Orphan"}),
                _ => json!({"propagationPolicy": "Background", "gracePeriodSeconds": i64::MAX}),
            };
            s.send("DELETE", &item(*res, *name), "application/json", Some(body)).await.0
        }
        Op::DeleteAll { res } => {
            s.send("DELETE", RESOURCES[*res].0, "application/json", None).await.0
        }
        Op::Get { res, name, query } => {
            let path = if query.contains("watch") || query.contains("limit") || query.contains("Selector") {
                format!("{}{query}", RESOURCES[*res].0)
            } else {
                item(*res, *name)
            };
            s.get(&path).await.0
        }
        Op::Bind { name, node } => {
            s.post(
                &format!("{}/binding", item(1, *name)),
                json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": format!("o{name}")},
                       "target": {"kind": "Node", "name": node}}),
            )
            .await
            .0
        }
        Op::Evict { name } => {
            s.post(
                &format!("{}/eviction", item(1, *name)),
                json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": format!("o{name}")}}),
            )
            .await
            .0
        }
        Op::Scale { res, name, replicas } => {
            s.send(
                "PATCH",
                &format!("{}/scale", item(*res, *name)),
                "application/merge-patch+json",
                Some(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .0
        }
    }
}

#[test]
fn random_requests_never_take_the_server_down() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Every stand-in on: the kubelet runs pods (with random run-seconds), the controller
    // manager acts on random Deployments, StatefulSets and Jobs.
    let s = rt.block_on(server(EmbeddedOptions {
        nodes: 2,
        ..Default::default()
    }));
    let config = ProptestConfig {
        cases: 40,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(ops in prop::collection::vec(op(), 1..12))| {
        rt.block_on(async {
            for op in &ops {
                let code = apply(&s, op).await;
                // 500 is what a caught panic answers; 504 a hung handler.
                prop_assert!(code != 500 && code != 504, "{op:?} answered {code}");
            }
            prop_assert!(s.healthy().await, "the server stopped answering after {ops:?}");
            Ok(())
        })?;
    });
}
