//! Network-topology-aware gangs end to end: `tephra serve --embedded` (the real binary) with
//! HyperNodes written through the kube client, vcJobs asking for `networkTopology`, and the
//! pods as the kube-scheduler stand-in binds them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tephra::api::{HyperNode, Job, PodGroup};

use crate::common::served::{Embedded, eventually};

fn hypernode(name: &str, tier: i64, kind: &str, members: &[&str]) -> HyperNode {
    let members: Vec<serde_json::Value> = members
        .iter()
        .map(|m| json!({"type": kind, "selector": {"exactMatch": {"name": m}}}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members}
    }))
    .unwrap()
}

/// The cluster's node names, sorted.
async fn node_names(client: &kube::Client) -> Vec<String> {
    let mut nodes: Vec<String> = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    nodes.sort();
    nodes
}

/// A vcJob of `replicas` pods of 3 cpus, all needed, in `mode` up to tier 1.
fn job(name: &str, replicas: i32, mode: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minAvailable": replicas,
            "networkTopology": {"mode": mode, "highestTierAllowed": 1},
            "tasks": [{
                "name": "w",
                "replicas": replicas,
                "template": {"spec": {"containers": [{
                    "name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "3"}}
                }]}}
            }]
        }
    }))
    .unwrap()
}

/// The nodes the job's pods are bound to, once all `n` are.
async fn bound_nodes(pods: &Api<Pod>, job: &str, n: usize) -> BTreeSet<String> {
    eventually(60, &format!("{n} pods of {job} bound"), || async {
        let lp = ListParams::default().labels(&format!("volcano.sh/job-name={job}"));
        let list = pods.list(&lp).await.ok()?;
        let nodes: Vec<String> = list
            .items
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        (nodes.len() == n).then(|| nodes.into_iter().collect())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangs_with_a_network_topology_run_inside_one_rack_or_wait_saying_why() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Four nodes of 8 cpus in two racks under a spine.
    let (mut served, client) = Embedded::start(&["--embedded-nodes", "4"]).await;
    let hypernodes: Api<HyperNode> = Api::all(client.clone());
    let nodes = node_names(&client).await;
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    let rack_of: BTreeMap<String, &str> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), if i < 2 { "rack-a" } else { "rack-b" }))
        .collect();
    for hn in [
        hypernode("rack-a", 1, "Node", &[&nodes[0], &nodes[1]]),
        hypernode("rack-b", 1, "Node", &[&nodes[2], &nodes[3]]),
        hypernode("spine", 2, "HyperNode", &["rack-a", "rack-b"]),
    ] {
        hypernodes
            .create(&PostParams::default(), &hn)
            .await
            .unwrap();
    }

    // Their node counts, through the spine's member racks.
    for (name, want) in [("rack-a", 2), ("rack-b", 2), ("spine", 4)] {
        eventually(30, &format!("{name}'s nodeCount {want}"), || async {
            let hn = hypernodes.get(name).await.ok()?;
            (hn.status?.node_count? == want).then_some(())
        })
        .await;
    }

    // Four pods of 3 cpus: spread by default over four nodes, here two per node in one rack.
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &job("fits", 4, "hard"))
        .await
        .unwrap();
    let used = bound_nodes(&pods, "fits", 4).await;
    let racks: BTreeSet<&str> = used.iter().map(|n| rack_of[n]).collect();
    assert_eq!(racks.len(), 1, "pods on {used:?}");

    // Six more need 18 cpus; each rack has 16 at most: a hard gang waits and says why.
    jobs.create(&PostParams::default(), &job("too-big", 6, "hard"))
        .await
        .unwrap();
    let podgroups: Api<PodGroup> = Api::namespaced(client.clone(), "default");
    let msg = eventually(60, "too-big's condition", || async {
        let list = podgroups.list(&ListParams::default()).await.ok()?;
        let pg = list.items.into_iter().find(|pg| {
            pg.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("too-big"))
        })?;
        let conds = pg.status?.conditions?;
        let msg = conds.last()?.message.clone()?;
        msg.contains("no HyperNode of tier 1 or lower has room")
            .then_some(msg)
    })
    .await;
    assert!(msg.contains("network topology mode hard"), "{msg}");
    let lp = ListParams::default().labels("volcano.sh/job-name=too-big");
    let placed = pods
        .list(&lp)
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
        .count();
    assert_eq!(placed, 0, "a hard gang that fits no rack has no pod bound");
    served.proc.stop();
}

/// The HyperNodes label discovery made, as (tier, label value, node count) — once their
/// counts are written and nothing else is there.
async fn discovered(hypernodes: &Api<HyperNode>) -> BTreeSet<(i64, String, i64)> {
    let list = hypernodes.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter_map(|h| {
            let labels = h.metadata.labels?;
            (labels.get("volcano.sh/network-topology-source")? == "label").then_some(())?;
            let value = labels
                .get("example.com/rack")
                .or(labels.get("example.com/spine"))?
                .clone();
            Some((h.spec.tier?, value, h.status?.node_count?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_discovery_makes_hypernodes_from_node_labels_and_gangs_use_them() {
    let dir = std::env::temp_dir().join(format!("tephra-discovery-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("volcano-controller.conf");
    std::fs::write(
        &conf,
        "networkTopologyDiscovery:\n\
         - source: label\n  enabled: true\n  config:\n    networkTopologyTypes:\n      \
         fabric:\n      - nodeLabel: example.com/spine\n      - nodeLabel: example.com/rack\n      \
         - nodeLabel: kubernetes.io/hostname\n",
    )
    .unwrap();
    let conf_arg = conf.display().to_string();
    let (mut served, client) =
        Embedded::start(&["--embedded-nodes", "4", "--controller-config", &conf_arg]).await;
    let hypernodes: Api<HyperNode> = Api::all(client.clone());
    let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let nodes = node_names(&client).await;
    let label = |node: &str, rack: Option<&str>| {
        let nodes_api = nodes_api.clone();
        let patch = json!({"metadata": {"labels": {
            "example.com/rack": rack, "example.com/spine": "s0"
        }}});
        let node = node.to_string();
        async move {
            nodes_api
                .patch(
                    &node,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .unwrap();
        }
    };
    for (i, n) in nodes.iter().enumerate() {
        label(n, Some(if i < 2 { "r0" } else { "r1" })).await;
    }
    let want: BTreeSet<(i64, String, i64)> = [
        (1, "r0".to_string(), 2),
        (1, "r1".to_string(), 2),
        (2, "s0".to_string(), 4),
    ]
    .into();
    let hn = hypernodes.clone();
    eventually(30, "two racks and a spine discovered", || async {
        (discovered(&hn).await == want).then_some(())
    })
    .await;

    // A hard gang of four 3-cpu pods lands inside one discovered rack.
    let rack_of: BTreeMap<&String, &str> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n, if i < 2 { "r0" } else { "r1" }))
        .collect();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &job("fits", 4, "hard"))
        .await
        .unwrap();
    let used = bound_nodes(&pods, "fits", 4).await;
    let racks: BTreeSet<&str> = used.iter().map(|n| rack_of[n]).collect();
    assert_eq!(racks.len(), 1, "pods on {used:?}");

    // Relabelled: one node moves to r1; the two left in r0 lose their rack label, and r0's
    // HyperNode goes (the nodes keep the spine label, but a node stops at the first tier it
    // lacks).
    label(&nodes[0], Some("r1")).await;
    label(&nodes[1], None).await;
    let want: BTreeSet<(i64, String, i64)> =
        [(1, "r1".to_string(), 3), (2, "s0".to_string(), 3)].into();
    eventually(30, "r0 gone, r1 with three nodes", || async {
        (discovered(&hn).await == want).then_some(())
    })
    .await;
    served.proc.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_partition_of_a_vcjob_task_runs_inside_one_rack() {
    let (mut served, client) = Embedded::start(&["--embedded-nodes", "4"]).await;
    let hypernodes: Api<HyperNode> = Api::all(client.clone());
    let nodes = node_names(&client).await;
    // Racks of two nodes paired across the name order (0 with 2, 1 with 3), so a spread
    // that follows the node order puts neighbours in different racks.
    let rack_of: BTreeMap<String, &str> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), if i % 2 == 0 { "rack-a" } else { "rack-b" }))
        .collect();
    for hn in [
        hypernode("rack-a", 1, "Node", &[&nodes[0], &nodes[2]]),
        hypernode("rack-b", 1, "Node", &[&nodes[1], &nodes[3]]),
    ] {
        hypernodes
            .create(&PostParams::default(), &hn)
            .await
            .unwrap();
    }
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "parts", "namespace": "default"},
        "spec": {
            "minAvailable": 4,
            "tasks": [{
                "name": "w",
                "replicas": 4,
                "partitionPolicy": {
                    "totalPartitions": 2, "partitionSize": 2,
                    "networkTopology": {"mode": "hard", "highestTierAllowed": 1}
                },
                "template": {"spec": {"containers": [{
                    "name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "3"}}
                }]}}
            }]
        }
    }))
    .unwrap();
    Api::<Job>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &job)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    bound_nodes(&pods, "parts", 4).await;
    let list = pods
        .list(&ListParams::default().labels("volcano.sh/job-name=parts"))
        .await
        .unwrap();
    let mut racks: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for p in &list.items {
        let part = p.metadata.labels.as_ref().unwrap()["volcano.sh/partition-id"].clone();
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        racks.entry(part).or_default().insert(rack_of[&node]);
    }
    assert_eq!(racks.len(), 2, "{racks:?}");
    assert!(racks.values().all(|r| r.len() == 1), "{racks:?}");
    served.proc.stop();
}
