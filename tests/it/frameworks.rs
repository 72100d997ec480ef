//! What the frameworks' operators write, as tephra takes it: the PodGroup and pods KubeRay's
//! ray-operator v1.5.0 makes for a RayCluster (fixtures in `tests/data/frameworks/kuberay/`,
//! taken from a run against the real control plane) go through tephra's admission webhooks
//! and its scheduling session. The stories with the operator itself run in
//! `tests/cluster/run.sh`.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use tephra::api::PodGroup;
use tephra::scheduler::{SchedulerConf, run_session};
use tephra_scheduler::testing::World;

use crate::admission_webhooks::{admit, app, base_view};

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/frameworks/kuberay")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// KubeRay's PodGroup and its three pods (the head, two workers) as admission leaves them.
async fn admitted() -> (Value, Vec<Value>) {
    let (router, _) = app(base_view());
    let (pg, answer) = admit(&router, "podgroups", &fixture("podgroup.json"), "pg").await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let worker = fixture("worker-pod.json");
    let mut second = worker.clone();
    second["metadata"]["name"] = Value::from("noqueue-workers-worker-second");
    let mut pods = Vec::new();
    for (i, p) in [fixture("head-pod.json"), worker, second]
        .into_iter()
        .enumerate()
    {
        let (mut mutated, answer) = admit(&router, "pods", &p, &format!("pod-{i}")).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        mutated["metadata"]["uid"] = Value::from(format!("uid-{i}"));
        pods.push(mutated);
    }
    (pg, pods)
}

#[tokio::test]
async fn kuberays_podgroup_without_a_queue_is_admitted_to_the_default_queue() {
    // KubeRay leaves `spec.queue` empty unless the RayCluster has a `volcano.sh/queue-name`
    // label; Volcano's webhook makes it `default`, and so does tephra's.
    let (pg, pods) = admitted().await;
    assert_eq!(pg["spec"]["queue"], "default", "{pg}");
    assert_eq!(pg["spec"]["minMember"], 3);
    for p in &pods {
        assert_eq!(
            p["spec"]["schedulerName"], "volcano",
            "left as the operator set it"
        );
        assert_eq!(
            p["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
            "ray-noqueue-pg"
        );
    }
}

/// A session over `nodes` nodes of `cpu` cores with KubeRay's gang: how many of its pods
/// are placed.
async fn placed_on(nodes: usize, cpu: u32) -> usize {
    let (pg, pods) = admitted().await;
    let mut w = World::default().nodes(nodes, cpu, 32);
    let pg: PodGroup = serde_json::from_value(pg).unwrap_or_else(|e| panic!("{e}"));
    w.index.apply_podgroup(&pg);
    for p in pods {
        let p: Pod = serde_json::from_value(p).unwrap_or_else(|e| panic!("{e}"));
        w.index.apply_pod(&p);
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let conf = SchedulerConf::builtin();
    // The first session admits the gang (Pending → Inqueue), a later one places it.
    let mut placed = 0;
    for i in 0..3 {
        let out = run_session(w.index.snapshot(), &conf, &format!("s{i}"), now.clone());
        for u in &out.podgroups {
            if let Some(pg) = w.index.podgroup(&format!("{}/{}", u.namespace, u.name)) {
                let mut pg = (**pg).clone();
                pg.status = Some(u.status.clone());
                w.index.apply_podgroup(&pg);
            }
        }
        placed = placed.max(out.plan.placements.len());
    }
    placed
}

#[tokio::test]
async fn kuberays_gang_is_placed_whole_or_not_at_all() {
    // The head (1 cpu) and two workers (2 cpu each): whole on two nodes of 4 cpu.
    assert_eq!(placed_on(2, 4).await, 3);
    // On one node of 4 cpu only two of the three would fit: none is placed.
    assert_eq!(placed_on(1, 4).await, 0);
}
