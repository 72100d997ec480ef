//! Gang-aware eviction end to end: `tephra serve --embedded` (the real binary) with a
//! scheduler configuration naming `gangpreempt`, gangs written through the kube client, and
//! the victims evicted through the API's eviction subresource.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tephra::api::PodGroup;

use crate::common::served::{Embedded, eventually};

const CONF: &str = "actions: \"enqueue, allocate, gangpreempt, backfill\"\ntiers:\n\
- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n\
- plugins:\n  - name: overcommit\n  - name: drf\n  - name: predicates\n  \
- name: proportion\n  - name: nodeorder\n";

/// A gang `name` of `size` pods of `cpu` cores, needing `min`, at PriorityClass `class`.
async fn gang(client: &kube::Client, name: &str, size: usize, min: i32, cpu: &str, class: &str) {
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), "default");
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min, "priorityClassName": class}
    }))
    .unwrap();
    pgs.create(&PostParams::default(), &pg).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..size {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": format!("{name}-{i}"), "namespace": "default",
                "labels": {"gang": name},
                "annotations": {"scheduling.k8s.io/group-name": name}
            },
            "spec": {
                "schedulerName": "volcano", "priorityClassName": class,
                "containers": [{"name": "c", "image": "busybox",
                                "resources": {"requests": {"cpu": cpu}}}]
            }
        }))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
}

/// Running pods of gang `name`, by name and uid.
async fn running(pods: &Api<Pod>, name: &str) -> BTreeMap<String, String> {
    let list = pods
        .list(&ListParams::default().labels(&format!("gang={name}")))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .filter_map(|p| Some((p.metadata.name?, p.metadata.uid?)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_gang_takes_surplus_pods_and_leaves_a_gang_at_its_minimum_whole() {
    let dir = std::env::temp_dir().join(format!("tephra-gangevict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("scheduler.yaml");
    std::fs::write(&conf, CONF).unwrap();
    let conf_arg = conf.display().to_string();
    // Two nodes of 8 cpus.
    let (mut served, client) =
        Embedded::start(&["--embedded-nodes", "2", "--config", &conf_arg]).await;
    let classes: Api<PriorityClass> = Api::all(client.clone());
    for (name, value) in [("low", 1), ("high", 100)] {
        let pc: PriorityClass =
            serde_json::from_value(json!({"metadata": {"name": name}, "value": value})).unwrap();
        classes.create(&PostParams::default(), &pc).await.unwrap();
    }
    // The cluster full: `tight` needs both its 4-cpu pods, `loose` one of its four 2-cpu pods.
    gang(&client, "tight", 2, 2, "4", "low").await;
    gang(&client, "loose", 4, 1, "2", "low").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let tight = eventually(60, "tight and loose running", || async {
        let (t, l) = (running(&pods, "tight").await, running(&pods, "loose").await);
        (t.len() == 2 && l.len() == 4).then_some(t)
    })
    .await;

    // `high` needs 4 cpus: loose's pods beyond its minimum make the room; tight stays whole.
    gang(&client, "high", 2, 2, "2", "high").await;
    eventually(90, "high running", || async {
        (running(&pods, "high").await.len() == 2).then_some(())
    })
    .await;
    assert_eq!(
        running(&pods, "tight").await,
        tight,
        "tight's pods were never evicted"
    );
    let loose = running(&pods, "loose").await;
    assert!(
        !loose.is_empty() && loose.len() < 4,
        "loose keeps its minimum: {loose:?}"
    );
    served.proc.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
