//! What the frameworks' operators write, as tephra takes it: the PodGroups and pods that
//! KubeRay's ray-operator v1.5.0, Kubeflow's training operator v1.8.1 (PyTorchJob), MPI
//! Operator v0.6.0 (MPIJob) and Spark Operator v2.3.0 make (fixtures in
//! `tests/data/frameworks/`, taken from runs against the real control plane) go through
//! tephra's admission webhooks, its scheduling session and the native engine's mirror. The
//! stories with the operators themselves run in `tests/cluster/run.sh`.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use tephra::api::PodGroup;
use tephra::scheduler::{SchedulerConf, run_session};
use tephra_controllers::native::{GroupClass, mirror};
use tephra_scheduler::testing::World;

use crate::admission_webhooks::{admit, app, base_view};

fn fixture(operator: &str, name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/frameworks")
        .join(operator)
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// An operator's PodGroup and its pods (`(file, copies)`: more of one kind are renamed
/// copies), as admission leaves them.
async fn admitted(operator: &str, pods: &[(&str, usize)]) -> (Value, Vec<Value>) {
    let (router, _) = app(base_view());
    let (pg, answer) = admit(
        &router,
        "podgroups",
        &fixture(operator, "podgroup.json"),
        "pg",
    )
    .await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let mut admitted = Vec::new();
    for (file, copies) in pods {
        for copy in 0..*copies {
            let mut p = fixture(operator, file);
            let name = format!("{}-{copy}", p["metadata"]["name"].as_str().unwrap_or("pod"));
            p["metadata"]["name"] = Value::from(name.clone());
            let (mut mutated, answer) = admit(&router, "pods", &p, &name).await;
            assert_eq!(answer["response"]["allowed"], true, "{answer}");
            mutated["metadata"]["uid"] = Value::from(format!("uid-{name}"));
            admitted.push(mutated);
        }
    }
    (pg, admitted)
}

/// Sessions (three: the first admits the gang, Pending → Inqueue, a later one places it)
/// over `nodes` nodes of `cpu` cores with the gang: its PodGroup's phase and how many of its
/// pods are placed.
fn sessions(pg: Value, pods: Vec<Value>, nodes: usize, cpu: u32) -> (String, usize) {
    sessions_in_order(pg, pods, nodes, cpu, false)
}

/// [`sessions`], the pods seen before their PodGroup when `pods_first`.
fn sessions_in_order(
    pg: Value,
    pods: Vec<Value>,
    nodes: usize,
    cpu: u32,
    pods_first: bool,
) -> (String, usize) {
    let mut w = World::default().nodes(nodes, cpu, 32);
    let pg: PodGroup = serde_json::from_value(pg).unwrap_or_else(|e| panic!("{e}"));
    let key = format!(
        "{}/{}",
        pg.metadata.namespace.as_deref().unwrap_or_default(),
        pg.metadata.name.as_deref().unwrap_or_default()
    );
    if !pods_first {
        w.index.apply_podgroup(&pg);
    }
    for p in pods {
        let p: Pod = serde_json::from_value(p).unwrap_or_else(|e| panic!("{e}"));
        w.index.apply_pod(&p);
    }
    if pods_first {
        w.index.apply_podgroup(&pg);
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let conf = SchedulerConf::builtin();
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
    let phase = w
        .index
        .podgroup(&key)
        .and_then(|pg| pg.status.as_ref()?.phase.as_ref().map(ToString::to_string))
        .unwrap_or_default();
    (phase, placed)
}

async fn placed(operator: &str, pods: &[(&str, usize)], nodes: usize, cpu: u32) -> usize {
    let (pg, pods) = admitted(operator, pods).await;
    sessions(pg, pods, nodes, cpu).1
}

#[tokio::test]
async fn operators_podgroups_without_a_queue_are_admitted_to_the_default_queue() {
    // KubeRay, the MPI Operator and the Spark Operator leave `spec.queue` empty unless told
    // one; Volcano's webhook makes it `default`, and so does tephra's. Their pods keep
    // `schedulerName: volcano` and name their group.
    for (operator, pod, min, group) in [
        ("kuberay", "head-pod.json", 3, "ray-noqueue-pg"),
        ("mpi", "launcher-pod.json", 3, "pi"),
        ("spark", "driver-pod.json", 1, "spark-pi-pg"),
    ] {
        let (pg, pods) = admitted(operator, &[(pod, 1)]).await;
        assert_eq!(pg["spec"]["queue"], "default", "{operator}: {pg}");
        assert_eq!(pg["spec"]["minMember"], min, "{operator}");
        let p = &pods[0];
        assert_eq!(p["spec"]["schedulerName"], "volcano", "{operator}");
        assert_eq!(
            p["metadata"]["annotations"]["scheduling.k8s.io/group-name"], group,
            "{operator}"
        );
    }
}

#[tokio::test]
async fn operators_gangs_are_placed_whole_or_not_at_all() {
    // KubeRay: a head of 1 cpu and two workers of 2: whole on two nodes of 4 cpu; on one,
    // only two of the three would fit, and none is placed.
    let ray = [("head-pod.json", 1), ("worker-pod.json", 2)];
    assert_eq!(placed("kuberay", &ray, 2, 4).await, 3);
    assert_eq!(placed("kuberay", &ray, 1, 4).await, 0);
    // A PyTorchJob's master and two workers of 1 cpu (minMember 3).
    let pytorch = [("master-pod.json", 1), ("worker-pod.json", 2)];
    assert_eq!(placed("training", &pytorch, 2, 2).await, 3);
    assert_eq!(placed("training", &pytorch, 1, 2).await, 0);
    // An MPIJob's two workers (the operator's pods) and its launcher (a batch Job's pod,
    // without a task name) of 1 cpu.
    let mpi = [("worker-pod.json", 2), ("launcher-pod.json", 1)];
    assert_eq!(placed("mpi", &mpi, 2, 2).await, 3);
    assert_eq!(placed("mpi", &mpi, 1, 2).await, 0);
}

#[tokio::test]
async fn a_gang_whose_podgroup_comes_after_its_pods_is_placed_whole() {
    // An MPIJob's launcher pod comes from a batch Job, and an operator's informer may lag:
    // pods naming a PodGroup the index has not seen wait for it, then run as one gang.
    let (pg, pods) = admitted("mpi", &[("worker-pod.json", 2), ("launcher-pod.json", 1)]).await;
    assert_eq!(sessions_in_order(pg.clone(), pods.clone(), 2, 2, true).1, 3);
    assert_eq!(sessions_in_order(pg, pods, 1, 2, true).1, 0);
}

#[tokio::test]
async fn a_pytorchjobs_podgroup_is_admitted_before_it_has_pods() {
    // The training operator makes a job's pods only once its PodGroup has left Pending:
    // the session must admit a gang from its minResources alone.
    let (pg, _) = admitted("training", &[]).await;
    assert_eq!(
        sessions(pg.clone(), Vec::new(), 2, 2),
        ("Inqueue".into(), 0)
    );
    // ... and not when the cluster cannot hold minResources (3 cpu).
    assert_eq!(sessions(pg, Vec::new(), 1, 2).0, "Pending");
}

#[tokio::test]
async fn a_spark_apps_driver_waits_for_room_for_its_executors() {
    // The Spark Operator's PodGroup has minMember 1 (the driver) and minResources for the
    // driver and every executor (3 cpu): the driver alone (1 cpu) starts only where the whole
    // application fits, or its executors would wait behind it.
    let driver = [("driver-pod.json", 1)];
    assert_eq!(placed("spark", &driver, 2, 2).await, 1);
    let (pg, pods) = admitted("spark", &driver).await;
    assert_eq!(sessions(pg, pods, 1, 2), ("Pending".into(), 0));
}

#[test]
fn an_operators_native_group_takes_its_pods_priority_class() {
    // A PyTorchJob's `schedulingPolicy.priorityClass` lands on its PodGroup only; its pods
    // keep their templates' (none here). kube-scheduler places a native group only when its
    // pods have its priority, so the group follows the pods.
    let mut pg: PodGroup = serde_json::from_value(fixture("training", "podgroup.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    pg.metadata.uid = Some("uid-pg".into());
    pg.spec.priority_class_name = Some("fw-high".into());
    let pod: Pod = serde_json::from_value(fixture("training", "master-pod.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let class = pod
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref());
    let m = mirror(&pg, None, GroupClass::Members(class)).unwrap_or_else(|| panic!("no mirror"));
    assert_eq!(m.pod_group.spec.priority_class_name, None);
    assert_eq!(
        m.pod_group.spec.scheduling_policy.gang.map(|g| g.min_count),
        Some(3)
    );
}
