//! Each trim keeps what the readers use: the readers are run on an object as the API serves
//! it and on the same object trimmed, and must not tell them apart; and the large fields go.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tephra_controllers::job::policy;
use tephra_controllers::podgroup::build::{self as group, Inputs, OwnerInfo};
use tephra_scheduler::ClusterIndex;
use tephra_scheduler::whatif::{self, ClusterState};

use super::*;
use crate::api::keys;

fn decode<K: DeserializeOwned>(v: Value) -> K {
    match serde_json::from_value(v) {
        Ok(k) => k,
        Err(e) => panic!("test object does not decode: {e}"),
    }
}

fn trimmed<K: Trim + Clone>(k: &K) -> K {
    let mut t = k.clone();
    t.trim();
    t
}

fn json_len<K: serde::Serialize>(k: &K) -> usize {
    serde_json::to_string(k).map_or(0, |s| s.len())
}

const TIME: &str = "2026-12-01T10:00:00Z";

/// What the API server records of its writers, on any object.
fn managed() -> Value {
    json!([
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
         "time": TIME, "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "subresource": "status",
         "time": TIME, "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {}}}}
    ])
}

/// A pod with everything a reader looks at and much it does not: `volcano` schedules it,
/// it belongs to vcJob `train` (task `worker`), runs on `node-1` next to a sidecar, holds a
/// host port and a claim, and has `phase`, conditions and `containers` as given.
fn pod(name: &str, phase: &str, containers: Value) -> Pod {
    let probe = json!({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10});
    decode(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "ml", "uid": format!("uid-{name}"), "resourceVersion": "7",
            "creationTimestamp": TIME, "generateName": "train-worker-",
            "labels": {"app": "train", keys::TASK_SPEC: "worker", keys::PREEMPTABLE: "false"},
            "annotations": {
                keys::KUBE_GROUP_NAME_ANNOTATION: "train-pg", keys::TASK_SPEC: "worker",
                keys::JOB_NAME: "train", keys::JOB_VERSION: "0", keys::TASK_PRIORITY: "5",
                keys::SIM_RUN_SECONDS: "60", keys::PREEMPTABLE: "true",
                KUBECTL_LAST_APPLIED: "{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}",
            },
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "name": "train", "uid": "job-uid", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": managed(),
        },
        "spec": {
            "schedulerName": "volcano", "nodeName": "node-1", "priority": 100,
            "priorityClassName": "high", "nodeSelector": {"pool": "gpu"},
            "serviceAccountName": "trainer", "dnsPolicy": "ClusterFirst", "restartPolicy": "Never",
            "hostname": "train-worker-0", "subdomain": "train", "terminationGracePeriodSeconds": 30,
            "securityContext": {"runAsUser": 1000}, "imagePullSecrets": [{"name": "registry"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference":
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "train"}}, "topologyKey": "kubernetes.io/hostname"}]},
            },
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "train"}}}],
            "schedulingGates": [{"name": "example.com/quota"}],
            "overhead": {"cpu": "50m"},
            "containers": [{
                "name": "main", "image": "registry.example.com/train:v1",
                "command": ["python", "train.py"], "args": ["--epochs=10"],
                "env": [{"name": "RANK", "value": "0"}, {"name": "MASTER", "value": "train-master-0"}],
                "envFrom": [{"configMapRef": {"name": "train-env"}}],
                "ports": [{"containerPort": 8080}, {"containerPort": 29500, "hostPort": 29500, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
                              "limits": {"memory": "8Gi", "nvidia.com/gpu": "1"}},
                "livenessProbe": probe, "readinessProbe": probe,
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "token", "mountPath": "/var/run/secrets"}],
                "securityContext": {"readOnlyRootFilesystem": true},
                "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "Always",
            }],
            "initContainers": [
                {"name": "fetch", "image": "busybox", "command": ["sh", "-c", "fetch data"],
                 "resources": {"requests": {"cpu": "4"}}},
                {"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}}},
            ],
            "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "train-data"}},
                {"name": "config", "configMap": {"name": "train-config"}},
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
            ],
        },
        "status": {
            "phase": phase, "hostIP": "10.0.0.1", "podIP": "100.64.0.2", "qosClass": "Burstable",
            "podIPs": [{"ip": "100.64.0.2"}], "startTime": "2026-12-01T10:00:10Z",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": TIME}],
            "containerStatuses": containers,
            "initContainerStatuses": [{"name": "fetch", "ready": false, "restartCount": 1,
                "image": "busybox", "imageID": "busybox@sha256:0", "state": {"terminated":
                    {"exitCode": 0, "reason": "Completed", "finishedAt": "2026-12-01T10:00:09Z"}}}],
        }
    }))
}

fn running(name: &str) -> Pod {
    pod(
        name,
        "Running",
        json!([{"name": "main", "ready": true, "restartCount": 2, "started": true,
            "image": "registry.example.com/train:v1", "imageID": "registry.example.com/train@sha256:1",
            "containerID": "containerd://1", "state": {"running": {"startedAt": TIME}},
            "lastState": {"terminated": {"exitCode": 1, "message": "Traceback ...", "finishedAt": TIME}}}]),
    )
}

fn failed(name: &str) -> Pod {
    pod(
        name,
        "Failed",
        json!([{"name": "main", "ready": false, "restartCount": 2,
            "image": "registry.example.com/train:v1", "imageID": "registry.example.com/train@sha256:1",
            "state": {"terminated": {"exitCode": 3, "reason": "Error", "containerID": "containerd://1",
                "message": "Traceback (most recent call last): ...",
                "startedAt": "2026-12-01T10:00:10Z", "finishedAt": "2026-12-01T10:01:40Z"}}}]),
    )
}

fn succeeded(name: &str) -> Pod {
    pod(
        name,
        "Succeeded",
        json!([{"name": "main", "ready": false, "restartCount": 0, "image": "i", "imageID": "i",
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                "startedAt": "2026-12-01T10:00:10Z", "finishedAt": "2026-12-01T10:02:10Z"}}}]),
    )
}

/// A node as its kubelet reports it.
fn node(name: &str) -> Node {
    let images: Vec<Value> = (0..50)
        .map(|k| {
            json!({"names": [format!("registry.example.com/image-{k}@sha256:{k:064}"),
                                   format!("registry.example.com/image-{k}:v{k}")],
                        "sizeBytes": 1_000_000 + k})
        })
        .collect();
    decode(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "3",
            "labels": {"kubernetes.io/hostname": name, "pool": "gpu", "zone": "a", "rack": "r1"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": managed()},
        "spec": {"podCIDR": "100.64.0.0/24", "podCIDRs": ["100.64.0.0/24"],
                 "providerID": "aws:///a/i-0", "unschedulable": false,
                 "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "4"},
            "capacity": {"cpu": "16", "memory": "65Gi", "pods": "110", "nvidia.com/gpu": "4"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {"architecture": "amd64", "bootID": "b", "machineID": "m", "systemUUID": "s",
                "containerRuntimeVersion": "containerd://1.7", "kernelVersion": "5.10",
                "kubeProxyVersion": "v1.31.0", "kubeletVersion": "v1.31.0",
                "operatingSystem": "linux", "osImage": "Linux"},
            "volumesAttached": [{"name": "vol-1", "devicePath": ""}],
            "volumesInUse": ["vol-1"],
        }
    }))
}

fn queue() -> Queue {
    decode(
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "default", "resourceVersion": "1",
            "annotations": {KUBECTL_LAST_APPLIED: "{}"}},
        "spec": {"weight": 1, "reclaimable": true},
        "status": {"state": "Open"}}),
    )
}

fn podgroup() -> PodGroup {
    decode(
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "train-pg", "namespace": "ml", "uid": "pg-uid",
            "creationTimestamp": TIME,
            "annotations": {KUBECTL_LAST_APPLIED: "{}"}, "managedFields": managed()},
        "spec": {"minMember": 2, "queue": "default"},
        "status": {"phase": "Running"}}),
    )
}

fn vcjob() -> Job {
    decode(
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml", "uid": "job-uid",
            "creationTimestamp": TIME, "annotations": {KUBECTL_LAST_APPLIED: "{}"},
            "managedFields": managed()},
        "spec": {"minAvailable": 2, "schedulerName": "volcano", "queue": "default",
            "tasks": [{"name": "worker", "replicas": 3, "maxRetry": 2, "template": {"spec": {
                "containers": [{"name": "main", "image": "i",
                    "resources": {"requests": {"cpu": "2"}}}]}}}]},
        "status": {"state": {"phase": "Running"}}}),
    )
}

/// The scheduler's view of `nodes` and `pods` (with the queue and the PodGroup), as text.
fn scheduler_view(nodes: &[Node], pods: &[Pod]) -> (String, String) {
    let mut index = ClusterIndex::new(vec!["volcano".into()]);
    index.apply_queue(&queue());
    index.apply_podgroup(&podgroup());
    for n in nodes {
        index.apply_node(n);
    }
    for p in pods {
        index.apply_pod(p);
    }
    let s = index.snapshot();
    (format!("{:?}", s.nodes), format!("{:?}", s.tasks))
}

#[test]
fn a_trimmed_pod_gives_every_reader_the_same_answers() {
    let pods = [
        running("train-worker-0"),
        succeeded("train-worker-1"),
        failed("train-worker-2"),
    ];
    let cut: Vec<Pod> = pods.iter().map(trimmed).collect();
    let nodes = [node("node-1")];

    // The scheduler: nodes' usage and host ports, each task with its constraints.
    let (nodes_full, tasks_full) = scheduler_view(&nodes, &pods);
    assert!(
        tasks_full.contains("29500"),
        "the host port is read: {tasks_full}"
    );
    assert_eq!(scheduler_view(&nodes, &cut), (nodes_full, tasks_full));

    // The Job controller: the requests of pod events and the task tests.
    let job = vcjob();
    for (full, t) in pods.iter().zip(&cut) {
        assert_eq!(policy::pod_added(t), policy::pod_added(full));
        assert_eq!(
            policy::pod_deleted(t, true),
            policy::pod_deleted(full, true)
        );
    }
    let (old, new) = (&pods[0], &pods[2]);
    let mut new = new.clone();
    new.metadata.resource_version = Some("8".into());
    let want = policy::pod_updated(Some(&job), old, &new, &|| vec![]);
    assert_eq!(want.as_ref().and_then(|r| r.exit_code), Some(3));
    let got = policy::pod_updated(Some(&job), &trimmed(old), &trimmed(&new), &|| vec![]);
    assert_eq!(got, want);
    let refs = |ps: &[Pod]| -> bool {
        let r: Vec<&Pod> = ps.iter().collect();
        policy::task_failed(&job, "worker", &r)
    };
    assert!(refs(&pods[..1]), "2 restarts of a task with maxRetry 2");
    assert_eq!(refs(&cut[..1]), refs(&pods[..1]));

    // The PodGroup controller: the PodGroup built from a pod.
    let owners = [OwnerInfo {
        kind: "ReplicaSet".into(),
        annotations: [(keys::QUEUE_NAME_ANNOTATION.to_string(), "q".to_string())].into(),
        ordered_pods: false,
    }];
    let inputs = |p| Inputs {
        pod: p,
        owners: &owners,
        namespace_queue: None,
        inherit: true,
    };
    assert_eq!(
        group::build(&inputs(&cut[0])),
        group::build(&inputs(&pods[0]))
    );

    // The web view's gang page.
    let (q, pg) = (queue(), podgroup());
    let page = |ps: &[Pod]| {
        let view = tephra_webview::View {
            now_s: 1_800_000_000,
            queues: vec![&q],
            pod_groups: vec![&pg],
            pods: ps.iter().collect(),
            figures: None,
        };
        tephra_webview::gang_page(&view, "ml", "train-pg")
    };
    assert_eq!(page(&cut), page(&pods));

    // The what-if: the scenario the cluster translates to.
    let scenario = |ns: &[Node], ps: &[Pod]| {
        let mut state = ClusterState::new(Time(
            Timestamp::from_second(1_795_000_000).unwrap_or(Timestamp::UNIX_EPOCH),
        ));
        state.nodes = ns.to_vec();
        state.pods = ps.to_vec();
        state.queues = vec![queue()];
        state.pod_groups = vec![podgroup()];
        state.jobs = vec![vcjob()];
        match whatif::translate(&state, &[], &whatif::Options::default()) {
            Ok(t) => (t.scenario, t.notes),
            Err(e) => panic!("{e}"),
        }
    };
    let cut_nodes: Vec<Node> = nodes.iter().map(trimmed).collect();
    assert_eq!(scenario(&cut_nodes, &cut), scenario(&nodes, &pods));
}

#[test]
fn a_trimmed_pod_loses_what_no_reader_uses() {
    let full = failed("p");
    let t = trimmed(&full);
    let spec = t.spec.clone().unwrap_or_default();
    let main = &spec.containers[0];
    assert_eq!(main.name, "main");
    assert!(main.image.is_none() && main.env.is_none() && main.env_from.is_none());
    assert!(main.command.is_none() && main.args.is_none() && main.volume_mounts.is_none());
    assert!(main.liveness_probe.is_none() && main.readiness_probe.is_none());
    assert!(main.resources.is_some());
    let ports = main.ports.clone().unwrap_or_default();
    assert_eq!(ports.len(), 1, "only the host port stays");
    let init = spec.init_containers.clone().unwrap_or_default();
    assert_eq!(init[1].restart_policy.as_deref(), Some("Always"));
    assert!(spec.ephemeral_containers.is_none());
    let volumes: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.clone())
        .collect();
    assert_eq!(volumes, ["data"], "only the claim stays");
    assert!(spec.service_account_name.is_none() && spec.security_context.is_none());
    let meta = &t.metadata;
    assert!(meta.managed_fields.is_none());
    let annotations = meta.annotations.clone().unwrap_or_default();
    assert!(!annotations.contains_key(KUBECTL_LAST_APPLIED));
    assert_eq!(annotations.len(), 7, "every other annotation stays");
    let status = t.status.clone().unwrap_or_default();
    assert!(status.pod_ip.is_none() && status.host_ip.is_none() && status.qos_class.is_none());
    let main = &status.container_statuses.unwrap_or_default()[0];
    assert!(main.image.is_empty() && main.image_id.is_empty() && main.last_state.is_none());
    let terminated = main.state.as_ref().and_then(|s| s.terminated.clone());
    let terminated = terminated.unwrap_or_default();
    assert_eq!((terminated.exit_code, terminated.message), (3, None));
    // This pod sets most of what the readers read; on a usual workload pod the part kept is
    // far smaller (the memory bench measures it).
    let (before, after) = (json_len(&full), json_len(&t));
    assert!(
        after * 3 < before * 2,
        "a third of the pod goes: {after} of {before} bytes kept"
    );
}

#[test]
fn an_annotation_map_emptied_by_the_trim_stays() {
    // The Job controller's out-of-sync mark adds `/metadata/annotations` when the cached pod
    // has none, which would replace the pod's annotations on the server.
    let mut p: Pod = decode(json!({"metadata": {"name": "p",
        "annotations": {KUBECTL_LAST_APPLIED: "{}"}}}));
    p.trim();
    assert_eq!(p.metadata.annotations, Some(Default::default()));
    let mut p: Pod = decode(json!({"metadata": {"name": "p"}}));
    p.trim();
    assert_eq!(p.metadata.annotations, None);
}

#[test]
fn a_trimmed_node_keeps_what_the_scheduler_and_hypernodes_read() {
    let full = node("node-1");
    let t = trimmed(&full);
    assert_eq!(
        scheduler_view(std::slice::from_ref(&t), &[]),
        scheduler_view(std::slice::from_ref(&full), &[])
    );
    assert_eq!(
        t.metadata.labels, full.metadata.labels,
        "HyperNodes are found by label"
    );
    let status = t.status.clone().unwrap_or_default();
    assert!(status.images.is_none() && status.node_info.is_none() && status.addresses.is_none());
    assert!(status.volumes_attached.is_none() && status.volumes_in_use.is_none());
    assert!(status.capacity.is_none(), "allocatable is there");
    assert_eq!(status.conditions.map(|c| c.len()), Some(2));
    assert!(
        t.spec
            .as_ref()
            .is_some_and(|s| s.pod_cidr.is_none() && s.taints.is_some())
    );
    assert!(t.metadata.managed_fields.is_none());
    let (before, after) = (json_len(&full), json_len(&t));
    assert!(after * 4 < before, "{after} of {before} bytes");

    // Without allocatable the readers fall back to capacity: it stays.
    let mut bare = full.clone();
    if let Some(s) = bare.status.as_mut() {
        s.allocatable = None;
    }
    let cut = trimmed(&bare);
    assert!(cut.status.is_some_and(|s| s.capacity.is_some()));
    assert_eq!(
        scheduler_view(&[trimmed(&bare)], &[]),
        scheduler_view(&[bare], &[])
    );
}

/// A workload of `kind` as kubectl applied it: a pod template, the PodGroup annotations its
/// pods' gangs inherit, and kubectl's copy.
fn workload<K: DeserializeOwned>(api_version: &str, kind: &str, extra: Value) -> K {
    let mut spec = json!({"replicas": 3, "selector": {"matchLabels": {"app": "w"}},
        "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [
            {"name": "c", "image": "i", "env": [{"name": "A", "value": "b"}]}]}}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    decode(json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": "w", "namespace": "ml", "uid": "w-uid",
            "annotations": {keys::QUEUE_NAME_ANNOTATION: "q", keys::GROUP_MIN_MEMBER_ANNOTATION: "3",
                "volcano.sh/preemptable": "false", KUBECTL_LAST_APPLIED: "{\"kind\":\"x\"}"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d",
                "uid": "d-uid", "controller": true}],
            "managedFields": managed()},
        "spec": spec,
        "status": {"replicas": 3, "updateRevision": "w-1"}}))
}

#[test]
fn trimmed_workloads_keep_what_the_podgroup_controller_reads() {
    let kept = |meta: &ObjectMeta, full: &ObjectMeta| {
        let mut want = full.annotations.clone().unwrap_or_default();
        want.remove(KUBECTL_LAST_APPLIED);
        assert_eq!(meta.annotations.clone().unwrap_or_default(), want);
        assert_eq!(meta.uid, full.uid);
        assert_eq!(meta.owner_references, full.owner_references);
        assert!(meta.managed_fields.is_none());
    };
    let rs: ReplicaSet = workload("apps/v1", "ReplicaSet", json!({}));
    let t = trimmed(&rs);
    kept(&t.metadata, &rs.metadata);
    assert_eq!((t.spec.replicas, t.spec.template), (Some(3), None));

    let d: Deployment = workload("apps/v1", "Deployment", json!({}));
    let t = trimmed(&d);
    kept(&t.metadata, &d.metadata);
    assert_eq!(t.spec.template, PodTemplateSpec::default());

    let s: StatefulSet = workload(
        "apps/v1",
        "StatefulSet",
        json!({"podManagementPolicy": "Parallel", "serviceName": "w",
            "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}),
    );
    let t = trimmed(&s);
    kept(&t.metadata, &s.metadata);
    let spec = t.spec.clone();
    assert_eq!(spec.replicas, Some(3));
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    assert_eq!(
        (spec.template, spec.volume_claim_templates),
        (PodTemplateSpec::default(), None)
    );
    assert_eq!(
        t.status.and_then(|s| s.update_revision).as_deref(),
        Some("w-1")
    );

    let ds: DaemonSet = workload("apps/v1", "DaemonSet", json!({}));
    let t = trimmed(&ds);
    kept(&t.metadata, &ds.metadata);
    assert_eq!(t.spec.template, PodTemplateSpec::default());

    let j: BatchJob = workload("batch/v1", "Job", json!({}));
    let t = trimmed(&j);
    kept(&t.metadata, &j.metadata);
    assert_eq!(t.spec.map(|s| s.template), Some(PodTemplateSpec::default()));
}

#[test]
fn kinds_written_back_whole_keep_every_annotation() {
    let job = vcjob();
    let t = trimmed(&job);
    assert!(t.metadata.managed_fields.is_none());
    assert_eq!(t.metadata.annotations, job.metadata.annotations);
    assert_eq!(t.spec, job.spec);
    let pg = podgroup();
    let t = trimmed(&pg);
    assert!(t.metadata.managed_fields.is_none());
    assert_eq!(t.metadata.annotations, pg.metadata.annotations);

    // A queue is only patched: kubectl's copy goes, the rest stays.
    let q = queue();
    let t = trimmed(&q);
    assert_eq!(t.metadata.annotations, Some(Default::default()));
    assert_eq!((t.spec, t.status), (q.spec, q.status));
}

#[test]
fn custom_resources_are_trimmed_through_their_guard() {
    let mut guarded: DeserializeGuard<PodGroup> = decode(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml", "resourceVersion": "3",
            "managedFields": managed()},
        "spec": {"minMember": 2}}));
    guarded.trim();
    match &guarded.0 {
        Ok(pg) => {
            assert!(pg.metadata.managed_fields.is_none());
            assert_eq!(pg.metadata.resource_version.as_deref(), Some("3"));
            assert_eq!(pg.spec.min_member, Some(2));
        }
        Err(e) => panic!("did not decode: {e}"),
    }
}

/// Trimming a trimmed object changes nothing.
#[test]
fn trimming_twice_changes_nothing() {
    let once = trimmed(&running("p"));
    assert_eq!(trimmed(&once), once);
    let once = trimmed(&node("n"));
    assert_eq!(trimmed(&once), once);
}
