//! Embedded mode as a whole cluster: pods that name no scheduler (a plain ReplicaSet, Volcano's
//! `gang/nginx` example) are placed by the kube-scheduler stand-in as kube-scheduler's default
//! profile would place them, and a pod naming a scheduler nobody runs is told so.

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::common::served::{Embedded, eventually};

async fn make(c: &Client, name: &str, spec: Value) {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "nginx",
        "resources": {"requests": spec.get("cpu").cloned().map_or(json!({"cpu": "1"}), |c| json!({"cpu": c}))}}]);
    if let Some(o) = spec.as_object_mut() {
        o.remove("cpu");
    }
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    Api::<Pod>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
}

async fn node_of(c: &Client, name: &str) -> Option<String> {
    Api::<Pod>::namespaced(c.clone(), "default")
        .get_opt(name)
        .await
        .ok()
        .flatten()?
        .spec?
        .node_name
}

/// The `PodScheduled=False` message of a pod the stand-in could not place.
async fn unschedulable(c: &Client, name: &str) -> Option<String> {
    let pod = Api::<Pod>::namespaced(c.clone(), "default")
        .get_opt(name)
        .await
        .ok()
        .flatten()?;
    pod.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
        .message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_the_default_scheduler_are_placed_as_kube_scheduler_would() {
    let (_s, c) = Embedded::start(&[]).await;
    // Taint node-3, as a user keeps a node for some pods.
    let nodes: Api<Node> = Api::all(c.clone());
    nodes
        .patch(
            "node-3",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": [{"key": "team", "value": "ml", "effect": "NoSchedule"}]}})),
        )
        .await
        .unwrap_or_else(|e| panic!("tainting node-3: {e}"));

    make(&c, "plain", json!({})).await;
    make(
        &c,
        "selected",
        json!({"nodeSelector": {"kubernetes.io/hostname": "node-2"}}),
    )
    .await;
    make(
        &c,
        "affine",
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["node-1", "node-2"]}]}]}}},
            "tolerations": [{"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]}),
    )
    .await;
    make(
        &c,
        "kept-out",
        json!({"nodeSelector": {"kubernetes.io/hostname": "node-3"}}),
    )
    .await;
    make(&c, "too-big", json!({"cpu": "64"})).await;
    make(&c, "elsewhere", json!({"schedulerName": "my-scheduler"})).await;

    let plain = eventually(30, "plain placed", || node_of(&c, "plain")).await;
    assert_ne!(
        plain, "node-3",
        "the tainted node took a pod that does not tolerate it"
    );
    assert_eq!(
        eventually(30, "selected placed", || node_of(&c, "selected")).await,
        "node-2"
    );
    assert_eq!(
        eventually(30, "affine placed", || node_of(&c, "affine")).await,
        "node-3"
    );
    let why = eventually(30, "kept-out refused", || unschedulable(&c, "kept-out")).await;
    assert!(
        why.contains("1 node(s) had untolerated taint {team: ml}")
            && why.contains("2 node(s) didn't match Pod's node affinity/selector"),
        "{why}"
    );
    let why = eventually(30, "too-big refused", || unschedulable(&c, "too-big")).await;
    assert!(why.contains("Insufficient cpu"), "{why}");
    assert_eq!(node_of(&c, "kept-out").await, None);

    // Nobody runs my-scheduler: the pod stays Pending, and one Warning says why.
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    let said = eventually(30, "a NoScheduler Event", || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("NoScheduler"))
    })
    .await;
    assert_eq!(said.type_.as_deref(), Some("Warning"));
    assert_eq!(said.involved_object.name.as_deref(), Some("elsewhere"));
    assert!(
        said.message.as_deref().is_some_and(
            |m| m.contains("\"my-scheduler\"") && m.contains("default-scheduler, volcano")
        ),
        "{said:?}"
    );
    assert_eq!(node_of(&c, "elsewhere").await, None);
    // FailedScheduling for default-scheduler pods comes from that profile.
    let failed = events
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .items
        .into_iter()
        .find(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.involved_object.name.as_deref() == Some("too-big")
        });
    assert_eq!(
        failed
            .and_then(|e| e.source)
            .and_then(|s| s.component)
            .as_deref(),
        Some("default-scheduler")
    );
}
