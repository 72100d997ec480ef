//! End to end in `tephra serve --embedded` (the real binary) with both stand-ins: the
//! kube-scheduler stand-in calls tephra's extender over HTTPS exactly as kube-scheduler with
//! `manifests/scheduler-config.yaml` would, and the kubelet stand-in runs the bound pods.
//! A gang is a PodGroup plus pods carrying its group name (the vcJob controller is not built).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common;
use common::gangs::{Gang, by_gang, pg_phase};
use common::served::Embedded;

/// `serve --embedded` with 3 nodes, scheduling every 200 ms.
async fn served() -> (Embedded, Client) {
    Embedded::start(&["--embedded-nodes", "3", "--schedule-period", "200ms"]).await
}

/// How long a poll may see a gang partly bound: the extender posts a gang's Bindings together,
/// but they are separate API writes (Kubernetes has no multi-object transaction), so a poll
/// can land between them; a gang left partly bound (a failed member holding the others'
/// nodes) stays so for much longer.
const PARTIAL_WINDOW: Duration = Duration::from_secs(3);

/// Polls until every named gang is Completed, checking that no gang stays partly bound;
/// returns the order in which the gangs were bound.
async fn run_to_completion(c: &Client, gangs: &[(&str, usize)], limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let mut order = Vec::new();
    let mut partial_since: std::collections::HashMap<String, Instant> = Default::default();
    loop {
        let state = by_gang(c).await;
        for (g, size) in gangs {
            let (bound, _) = state.get(*g).copied().unwrap_or_default();
            if bound == 0 || bound == *size {
                partial_since.remove(*g);
            } else {
                let since = *partial_since
                    .entry(g.to_string())
                    .or_insert_with(Instant::now);
                assert!(
                    since.elapsed() < PARTIAL_WINDOW,
                    "gang {g} partly bound for {:?}: {state:?}",
                    since.elapsed()
                );
            }
            if bound == *size && !order.contains(&g.to_string()) {
                order.push(g.to_string());
            }
        }
        let mut done = true;
        for (g, _) in gangs {
            done &= pg_phase(c, g).await == "Completed";
        }
        if done {
            return order;
        }
        assert!(Instant::now() < deadline, "not completed: {state:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each story runs a whole `serve --embedded` with its stand-ins; three at once on a 2-core
/// machine measure the machine, not tephra (the kube-scheduler stand-in's backoff stretches
/// under CPU starvation), so they take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_runs_to_completed_through_the_stand_in_and_the_extender() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_served, c) = served().await;
    Gang {
        name: "train",
        queue: "default",
        size: 4,
        cpu: 1,
        run_seconds: 1,
        min_resources: false,
    }
    .create(&c)
    .await;
    run_to_completion(&c, &[("train", 4)], Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gangs_that_cannot_both_fit_run_one_after_the_other_each_whole() {
    let _one = ONE_AT_A_TIME.lock().await;
    // 3 nodes × 8 cpu; a 3-cpu pod fits twice per node: 6 slots, each gang needs 4.
    let (_served, c) = served().await;
    Gang {
        name: "first",
        queue: "default",
        size: 4,
        cpu: 3,
        run_seconds: 2,
        min_resources: false,
    }
    .create(&c)
    .await;
    Gang {
        name: "second",
        queue: "default",
        size: 4,
        cpu: 3,
        run_seconds: 2,
        min_resources: false,
    }
    .create(&c)
    .await;
    let order =
        run_to_completion(&c, &[("first", 4), ("second", 4)], Duration::from_secs(60)).await;
    assert_eq!(order.len(), 2, "{order:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_waits_pending_and_starts_when_a_node_is_added() {
    let _one = ONE_AT_A_TIME.lock().await;
    // 4 pods of 5 cpu: one per 8-cpu node, 3 nodes. A fourth node lets it start.
    let (_served, c) = served().await;
    Gang {
        name: "wide",
        queue: "default",
        size: 4,
        cpu: 5,
        run_seconds: 1,
        min_resources: false,
    }
    .create(&c)
    .await;
    // It waits, with the gang's reason on the pods (bounded generously: the other tests of
    // this binary run beside it).
    let deadline = Instant::now() + Duration::from_secs(60);
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    loop {
        let p = pods.get("wide-0").await.unwrap();
        let cond = p
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "PodScheduled");
        if let Some(cond) = cond {
            assert_eq!(cond.status, "False");
            assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
            if cond
                .message
                .as_deref()
                .unwrap_or("")
                .contains("tasks in gang unschedulable")
            {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no PodScheduled=False with the gang's reason"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(by_gang(&c).await.get("wide").map(|s| s.0), Some(0));
    // kube-scheduler writes the pod's condition before it records the Event.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    let failed: Vec<_> = common::served::eventually(20, "a FailedScheduling Event", || {
        let events = events.clone();
        async move {
            let failed: Vec<_> = events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
                .collect();
            (!failed.is_empty()).then_some(failed)
        }
    })
    .await;
    for e in &failed {
        // Recorded by the pods' own kube-scheduler profile, in kube-scheduler's words.
        let source = e.source.as_ref().and_then(|s| s.component.as_deref());
        assert_eq!(source, Some("volcano"), "{e:?}");
        let message = e.message.as_deref().unwrap_or_default();
        assert!(!message.contains(".."), "{message}");
    }

    let mut node: serde_json::Value =
        serde_json::to_value(Api::<Node>::all(c.clone()).get("node-1").await.unwrap()).unwrap();
    node["metadata"] = json!({"name": "node-4", "labels": {"kubernetes.io/hostname": "node-4"}});
    let node: Node = serde_json::from_value(node).unwrap();
    let status = json!({"status": node.status});
    let nodes: Api<Node> = Api::all(c.clone());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    // Whatever the create kept of the status, the kubelet would report it.
    let _ = nodes
        .patch_status("node-4", &PatchParams::default(), &Patch::Merge(&status))
        .await;
    run_to_completion(&c, &[("wide", 4)], Duration::from_secs(40)).await;
}
