//! Resident memory of `tephra serve` per node and per pod it watches. A `tephra apiserver` on
//! loopback is filled in two steps with objects shaped as a real cluster serves them (nodes
//! with their 50 images, node info and addresses; pods of Deployments with env, probes,
//! volumes, a projected token and a running status; one Deployment and one ReplicaSet per 10
//! pods, the Deployment carrying kubectl's last-applied annotation), and `tephra serve
//! --kubeconfig` (the only replica, so it runs all a leader runs) is started against it three
//! times: on the empty cluster, with the nodes, with the nodes and the pods. Each time, once
//! `/readyz` answers and `TEPHRA_MEM_SETTLE_SECS` (default 15) have passed, its resident memory
//! is read from `/proc`, with the time `/readyz` took to answer (every cache listed).
//!
//! `cargo bench --bench memory`; `TEPHRA_MEM_NODES` (default 1000) and `TEPHRA_MEM_PODS`
//! (default 20000) set the sizes, `TEPHRA_MEM_SCHEDULER` the pods' `schedulerName` (default
//! `default-scheduler`: pods tephra only counts; `volcano` makes them pods tephra works on,
//! which its PodGroup controller groups and its cache keeps whole), `TEPHRA_MEM_TRACE=1`
//! prints the resident memory every second while it settles, `TEPHRA_TEST_LOG=FILE` keeps
//! the last `serve`'s log. Every step is bounded
//! (`TEPHRA_BENCH_TIMEOUT` seconds for each load, default 300); the servers listen on
//! 127.0.0.1 only.

#[path = "../tests/it/common/served.rs"]
#[allow(dead_code)]
mod served;

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The allocator the `tephra` binary runs on (the bench's own; `serve` is the binary).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Pods per Deployment.
const REPLICAS: u64 = 10;
/// Images a kubelet reports in a node's status at most (its `nodeStatusMaxImages`).
const NODE_IMAGES: u64 = 50;
/// Writes in flight while loading.
const CONCURRENCY: usize = 16;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// 64 hex digits that differ with `seed`, for digests and container ids.
fn hex64(seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..4)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("{x:016x}")
        })
        .collect()
}

fn uuid(seed: u64) -> String {
    let h = hex64(seed);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

const TIME: &str = "2026-12-01T10:00:00Z";

/// Node `i` as a kubelet on a cloud VM registers and reports it.
fn node(i: u64) -> Value {
    let name = format!("node-{i}");
    let zone = ["a", "b", "c"][(i % 3) as usize];
    let ip = format!("10.{}.{}.{}", 20 + i / 65536, (i / 256) % 256, i % 256);
    let images: Vec<Value> = (0..NODE_IMAGES)
        .map(|k| {
            let repo = format!("registry.example.com/team-{}/service-{k}", k % 7);
            json!({"names": [format!("{repo}@sha256:{}", hex64(k)), format!("{repo}:v1.{k}.0")],
                   "sizeBytes": 20_000_000 + k * 1_234_567})
        })
        .collect();
    let condition = |t: &str, status: &str, reason: &str, message: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": TIME, "lastTransitionTime": TIME})
    };
    let resources = json!({"cpu": "16", "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
                           "hugepages-2Mi": "0", "memory": "65049108Ki", "pods": "110"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "m5.4xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": format!("eu-west-1{zone}"),
                "failure-domain.beta.kubernetes.io/region": "eu-west-1",
                "failure-domain.beta.kubernetes.io/zone": format!("eu-west-1{zone}"),
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{}\"}}", &hex64(i)[..17]),
            },
        },
        "spec": {
            "podCIDR": format!("100.{}.{}.0/24", 64 + i / 256, i % 256),
            "podCIDRs": [format!("100.{}.{}.0/24", 64 + i / 256, i % 256)],
            "providerID": format!("aws:///eu-west-1{zone}/i-{}", &hex64(i)[..17]),
        },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
                {"type": "InternalDNS", "address": format!("ip-{}.eu-west-1.compute.internal", ip.replace('.', "-"))},
            ],
            "allocatable": resources, "capacity": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64", "bootID": uuid(i + 1), "machineID": &hex64(i + 2)[..32],
                "systemUUID": uuid(i + 3), "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "5.10.225-213.878.amzn2.x86_64", "kubeProxyVersion": "v1.31.0",
                "kubeletVersion": "v1.31.0", "operatingSystem": "linux", "osImage": "Amazon Linux 2",
            },
            "volumesAttached": [{"name": format!("kubernetes.io/csi/ebs.csi.aws.com^vol-{}", &hex64(i + 4)[..17]), "devicePath": ""}],
            "volumesInUse": [format!("kubernetes.io/csi/ebs.csi.aws.com^vol-{}", &hex64(i + 4)[..17])],
        }
    })
}

/// The pod template of Deployment `d`, as `kubectl apply` leaves it after the API server's
/// defaults.
fn template(d: u64, hash: &str) -> Value {
    let app = format!("web-{d}");
    let env: Vec<Value> = (0..8)
        .map(|k| json!({"name": format!("APP_SETTING_{k}"), "value": format!("value-{k}-of-{app}")}))
        .chain([
            json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}),
            json!({"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}),
            json!({"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": format!("{app}-db"), "key": "password"}}}),
        ])
        .collect();
    let probe = |path: &str| {
        json!({"httpGet": {"path": path, "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 5,
               "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3})
    };
    json!({
        "metadata": {"labels": {"app": app, "pod-template-hash": hash,
                                "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop"},
                     "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
        "spec": {
            "containers": [{
                "name": "app", "image": format!("registry.example.com/shop/{app}:v1.2.3"),
                "args": ["--port=8080", "--metrics-port=9090", "--log-level=info"],
                "env": env,
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                          {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "livenessProbe": probe("/healthz"), "readinessProbe": probe("/ready"),
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                    "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }],
            "volumes": [{"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}}],
            "schedulerName": scheduler_name(), "serviceAccountName": "default",
            "serviceAccount": "default", "dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30, "securityContext": {"fsGroup": 2000, "runAsUser": 1000},
        }
    })
}

/// The pods' `schedulerName` (`TEPHRA_MEM_SCHEDULER`).
fn scheduler_name() -> String {
    std::env::var("TEPHRA_MEM_SCHEDULER").unwrap_or_else(|_| "default-scheduler".into())
}

fn deployment(d: u64) -> Value {
    let app = format!("web-{d}");
    let mut t = template(d, "");
    t["metadata"]["labels"]
        .as_object_mut()
        .map(|l| l.remove("pod-template-hash"));
    let applied = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app, "namespace": "default"},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": app}}, "template": t}});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": app, "namespace": "default", "labels": {"app": app},
            "annotations": {"deployment.kubernetes.io/revision": "1",
                "kubectl.kubernetes.io/last-applied-configuration": format!("{applied}\n")}},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": app}}, "template": t,
                 "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}
    })
}

fn replica_set(d: u64, hash: &str, owner: &Deployment) -> Value {
    let app = format!("web-{d}");
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": format!("{app}-{hash}"), "namespace": "default",
            "labels": {"app": app, "pod-template-hash": hash},
            "annotations": {"deployment.kubernetes.io/desired-replicas": REPLICAS.to_string(),
                            "deployment.kubernetes.io/max-replicas": (REPLICAS + 3).to_string(),
                            "deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": app,
                                 "uid": owner.uid().unwrap_or_default(), "controller": true,
                                 "blockOwnerDeletion": true}]},
        "spec": {"replicas": REPLICAS,
                 "selector": {"matchLabels": {"app": app, "pod-template-hash": hash}},
                 "template": template(d, hash)}
    })
}

/// Replica `j` of Deployment `d` on node `node`, as the ReplicaSet controller creates it
/// (with the service-account token volume the admission plugin adds).
fn pod(d: u64, j: u64, hash: &str, owner: &ReplicaSet, node: u64) -> Value {
    let t = template(d, hash);
    let rs = owner.name_any();
    let suffix = format!("{:05x}", d * REPLICAS + j);
    let mut spec = t["spec"].clone();
    let token = format!("kube-api-access-{}", &hex64(d * 100 + j + 7)[..5]);
    if let Some(v) = spec["volumes"].as_array_mut() {
        v.push(json!({"name": token, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}));
    }
    if let Some(m) = spec["containers"][0]["volumeMounts"].as_array_mut() {
        m.push(json!({"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}));
    }
    spec["nodeName"] = json!(format!("node-{node}"));
    spec["enableServiceLinks"] = json!(true);
    spec["preemptionPolicy"] = json!("PreemptLowerPriority");
    spec["priority"] = json!(0);
    spec["tolerations"] = json!([
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ]);
    let mut metadata = t["metadata"].clone();
    metadata["name"] = json!(format!("{rs}-{suffix}"));
    metadata["generateName"] = json!(format!("{rs}-"));
    metadata["namespace"] = json!("default");
    metadata["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
        "uid": owner.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true}]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

/// The status a kubelet writes for a running replica of Deployment `d`.
fn running(d: u64, j: u64, node: u64) -> Value {
    let condition = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": TIME});
    let host = format!(
        "10.{}.{}.{}",
        20 + node / 65536,
        (node / 256) % 256,
        node % 256
    );
    let ip = format!("100.{}.{}.{}", 64 + node / 256, node % 256, 2 + j);
    let image = format!("registry.example.com/shop/web-{d}");
    let conditions = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .map(condition);
    json!({"status": {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host, "hostIPs": [{"ip": host}], "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": TIME, "qosClass": "Burstable",
        "containerStatuses": [{
            "name": "app", "ready": true, "started": true, "restartCount": 0,
            "state": {"running": {"startedAt": TIME}}, "lastState": {},
            "image": format!("{image}:v1.2.3"), "imageID": format!("{image}@sha256:{}", hex64(d)),
            "containerID": format!("containerd://{}", hex64(d * 100 + j + 11)),
        }],
    }})
}

/// Runs `f` over `items`, [`CONCURRENCY`] at a time, within `timeout`; panics on a failure.
async fn each<I, F, Fut>(what: &str, items: I, timeout: Duration, f: F)
where
    I: IntoIterator<Item = u64>,
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let work = futures::stream::iter(items)
        .map(f)
        .buffer_unordered(CONCURRENCY)
        .for_each(|r| async move {
            if let Err(e) = r {
                panic!("{e}");
            }
        });
    if tokio::time::timeout(timeout, work).await.is_err() {
        panic!("loading {what} took over {timeout:?}");
    }
}

async fn load_nodes(c: &Client, nodes: u64, timeout: Duration) {
    let api: Api<Node> = Api::all(c.clone());
    each("nodes", 0..nodes, timeout, |i| {
        let api = api.clone();
        async move {
            let n: Node = serde_json::from_value(node(i)).map_err(|e| e.to_string())?;
            api.create(&PostParams::default(), &n)
                .await
                .map(|_| ())
                .map_err(|e| format!("node {i}: {e}"))
        }
    })
    .await;
}

async fn load_pods(c: &Client, nodes: u64, pods: u64, timeout: Duration) {
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(c.clone(), "default");
    let pod_api: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pp = PostParams::default();
    each("pods", 0..pods.div_ceil(REPLICAS), timeout, |d| {
        let (deployments, sets, pod_api, pp) = (
            deployments.clone(),
            sets.clone(),
            pod_api.clone(),
            pp.clone(),
        );
        async move {
            let bad = |e: String| format!("deployment {d}: {e}");
            let dep: Deployment =
                serde_json::from_value(deployment(d)).map_err(|e| bad(e.to_string()))?;
            let dep = deployments
                .create(&pp, &dep)
                .await
                .map_err(|e| bad(e.to_string()))?;
            let hash = &hex64(d + 99)[..10];
            let rs: ReplicaSet = serde_json::from_value(replica_set(d, hash, &dep))
                .map_err(|e| bad(e.to_string()))?;
            let rs = sets
                .create(&pp, &rs)
                .await
                .map_err(|e| bad(e.to_string()))?;
            for j in 0..REPLICAS.min(pods - d * REPLICAS) {
                let on = (d * REPLICAS + j) % nodes.max(1);
                let p: Pod = serde_json::from_value(pod(d, j, hash, &rs, on))
                    .map_err(|e| bad(e.to_string()))?;
                let p = pod_api
                    .create(&pp, &p)
                    .await
                    .map_err(|e| bad(e.to_string()))?;
                pod_api
                    .patch_status(
                        &p.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(running(d, j, on)),
                    )
                    .await
                    .map_err(|e| bad(e.to_string()))?;
            }
            Ok(())
        }
    })
    .await;
}

/// `VmRSS` and `VmHWM` (the peak) of `pid`, in KiB.
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// What one start of `tephra serve` measured.
#[derive(Clone, Copy)]
struct Reading {
    /// Resident memory after the settle time, MiB.
    rss: f64,
    /// Peak resident memory (`VmHWM`), MiB.
    peak: f64,
    /// From the start of the process to `/readyz` answering (every cache has its first
    /// list), seconds.
    ready: f64,
}

/// Starts `tephra serve` against `kubeconfig`, waits for `/readyz` and `settle`, and reads
/// its memory.
async fn measure(kubeconfig: &str, settle: Duration) -> Reading {
    let started = Instant::now();
    let metrics = format!("127.0.0.1:{}", served::free_port());
    let mut serve = served::Proc::spawn(
        &[
            "serve",
            "--kubeconfig",
            kubeconfig,
            "--leader-elect=false",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            &metrics,
        ],
        std::env::var_os("TEPHRA_TEST_LOG")
            .map(std::path::PathBuf::from)
            .as_deref(),
    );
    served::readyz(&metrics).await;
    let ready = started.elapsed().as_secs_f64();
    let until = Instant::now() + settle;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if std::env::var_os("TEPHRA_MEM_TRACE").is_some() {
            let rss = serve.pid().and_then(rss_kib).map_or(0, |r| r.0 / 1024);
            println!("  resident {rss} MiB");
        }
    }
    let (rss, peak) = serve
        .pid()
        .and_then(rss_kib)
        .unwrap_or_else(|| panic!("no /proc for tephra serve"));
    serve.stop();
    Reading {
        rss: rss as f64 / 1024.0,
        peak: peak as f64 / 1024.0,
        ready,
    }
}

fn main() {
    let nodes = env("TEPHRA_MEM_NODES", 1000).max(1);
    let pods = env("TEPHRA_MEM_PODS", 20_000);
    let settle = Duration::from_secs(env("TEPHRA_MEM_SETTLE_SECS", 15));
    let timeout = Duration::from_secs(env("TEPHRA_BENCH_TIMEOUT", 300));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    rt.block_on(async move {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (mut api, url, c) = served::apiserver(
            &[
                "--embedded-nodes",
                "0",
                "--no-sim-kubelet",
                "--no-sim-controllers",
            ],
            60,
        )
        .await;
        served::crds_and_namespace(&c, "default").await;
        let dir = std::env::temp_dir().join(format!("tephra-bench-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let kubeconfig = served::kubeconfig(&dir, &url);

        let empty = measure(&kubeconfig, settle).await;
        let started = Instant::now();
        load_nodes(&c, nodes, timeout).await;
        println!("{nodes} nodes loaded in {:.1?}", started.elapsed());
        let with_nodes = measure(&kubeconfig, settle).await;
        let started = Instant::now();
        load_pods(&c, nodes, pods, timeout).await;
        println!(
            "{pods} pods ({} Deployments and ReplicaSets) loaded in {:.1?}",
            pods.div_ceil(REPLICAS),
            started.elapsed()
        );
        let with_pods = measure(&kubeconfig, settle).await;

        println!("\n| cluster | resident | peak | ready |\n| --- | ---: | ---: | ---: |");
        for (what, r) in [
            ("empty".to_string(), empty),
            (format!("{nodes} nodes"), with_nodes),
            (format!("{nodes} nodes, {pods} pods"), with_pods),
        ] {
            println!(
                "| {what} | {:.0} MiB | {:.0} MiB | {:.1} s |",
                r.rss, r.peak, r.ready
            );
        }
        let per_nodes = (with_nodes.rss - empty.rss) * 1000.0 / nodes as f64;
        println!("\nper 1,000 nodes: {per_nodes:.1} MiB");
        if pods > 0 {
            let per_pods = (with_pods.rss - with_nodes.rss) * 10_000.0 / pods as f64;
            println!("per 10,000 pods (with their Deployments and ReplicaSets): {per_pods:.1} MiB");
        }
        api.stop();
        let _ = std::fs::remove_dir_all(&dir);
    });
}
