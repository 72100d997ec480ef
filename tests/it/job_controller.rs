//! The Job controller end to end: `tephra serve --embedded` (the real binary, every webhook,
//! the scheduler, the kube-scheduler and kubelet stand-ins) driven through the kube client a
//! user's tools use. Pods "run" by the kubelet stand-in's annotations
//! (`simulation.tephra.io/run-seconds`, `simulation.tephra.io/exit-code`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::served::{self, Embedded, Proc, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tephra::api::batch::JobPhase;
use tephra::api::{Command, Job, PodGroup};

fn container(cpu: &str) -> Value {
    json!({"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}})
}

/// A task of `replicas` pods that run `secs` seconds and exit with `code` (`secs` None: they
/// run until killed).
fn task(name: &str, replicas: i32, secs: Option<f64>, code: i32) -> Value {
    let mut ann = json!({});
    if let Some(s) = secs {
        ann["simulation.tephra.io/run-seconds"] = json!(s.to_string());
        ann["simulation.tephra.io/exit-code"] = json!(code.to_string());
    }
    json!({
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": ann},
            "spec": {"restartPolicy": "Never", "containers": [container("100m")]}
        }
    })
}

fn job(name: &str, spec: Value) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("job {name}: {e}"))
}

async fn create(client: &Client, j: Job) -> Job {
    let api = Api::<Job>::namespaced(client.clone(), "default");
    // The webhooks read queues from tephra's watch cache, which can be a moment behind the
    // built-in queues created at start: such a refusal is retried briefly.
    let mut tries = 0;
    loop {
        match api.create(&PostParams::default(), &j).await {
            Ok(created) => return created,
            Err(e) if tries < 50 && common::gangs::queue_not_seen_yet(&e) => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("creating job {}: {e}", j.name_any()),
        }
    }
}

async fn get(client: &Client, name: &str) -> Option<Job> {
    Api::<Job>::namespaced(client.clone(), "default")
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

fn phase(j: &Job) -> Option<JobPhase> {
    j.phase().cloned()
}

/// Waits until job `name` is in `want`, and returns it.
async fn wait_phase(client: &Client, name: &str, want: JobPhase, secs: u64) -> Job {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let job = get(client, name).await;
        if let Some(j) = job.as_ref().filter(|j| phase(j).as_ref() == Some(&want)) {
            return j.clone();
        }
        if Instant::now() >= deadline {
            // Say where it stopped: the job's status, its pods and its PodGroup's phase.
            let pods: Vec<String> = pods_of(client, name)
                .await
                .iter()
                .map(|p| {
                    let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                    format!("{} {} on {node:?}", p.name_any(), pod_phase(p))
                })
                .collect();
            let groups: Vec<String> = Api::<PodGroup>::namespaced(client.clone(), "default")
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .iter()
                .filter(|g| g.name_any().starts_with(&format!("{name}-")))
                .map(|g| format!("{} {:?}", g.name_any(), g.status.as_ref().map(|s| &s.phase)))
                .collect();
            panic!(
                "timed out after {secs} s waiting for job {name} to be {want}; status: {:?}; pods: {pods:?}; podgroups: {groups:?}",
                job.and_then(|j| j.status)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn pods_of(client: &Client, job: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default().labels(&format!("volcano.sh/job-name={job}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

fn pod_phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn env_of(p: &Pod) -> BTreeMap<String, String> {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.env.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            // Values from a ConfigMap read as `configmap:<name>/<key>`.
            let from = e
                .value_from
                .and_then(|v| v.config_map_key_ref)
                .map(|r| format!("configmap:{}/{}", r.name, r.key));
            (e.name, e.value.or(from).unwrap_or_default())
        })
        .collect()
}

async fn command(client: &Client, job: &Job, action: &str) {
    let cmd: Command = serde_json::from_value(json!({
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": format!("{}-{}-", job.name_any(), action.to_lowercase()), "namespace": "default"},
        "action": action,
        "target": {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": job.name_any(),
            "uid": job.uid().unwrap_or_default(),
        }
    }))
    .unwrap_or_else(|e| panic!("command: {e}"));
    Api::<Command>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cmd)
        .await
        .unwrap_or_else(|e| panic!("creating command {action}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_task_job_runs_to_completed_with_volcanos_pods_and_podgroup() {
    let (_s, c) = Embedded::start(&[]).await;
    let j = create(
        &c,
        job(
            "two-tasks",
            json!({
                "minAvailable": 3,
                "tasks": [task("master", 1, Some(1.0), 0), task("worker", 2, Some(1.5), 0)]
            }),
        ),
    )
    .await;
    let uid = j.uid().unwrap_or_default();
    let running = wait_phase(&c, "two-tasks", JobPhase::Running, 30).await;
    assert_eq!(
        running.status.as_ref().and_then(|s| s.min_available),
        Some(3)
    );

    // The PodGroup Volcano's controller makes: {job}-{uid}, minMember = minAvailable.
    let pg = Api::<PodGroup>::namespaced(c.clone(), "default")
        .get(&format!("two-tasks-{uid}"))
        .await
        .unwrap_or_else(|e| panic!("PodGroup: {e}"));
    assert_eq!(pg.spec.min_member, Some(3));
    assert_eq!(pg.spec.queue.as_deref(), Some("default"));
    assert!(
        pg.owner_references()
            .iter()
            .any(|r| r.kind == "Job" && r.uid == uid)
    );

    let pods = pods_of(&c, "two-tasks").await;
    let names: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
    let want: BTreeSet<String> = [
        "two-tasks-master-0",
        "two-tasks-worker-0",
        "two-tasks-worker-1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(names, want);
    for p in &pods {
        let a = p.annotations();
        assert_eq!(
            a.get("scheduling.k8s.io/group-name"),
            Some(&format!("two-tasks-{uid}"))
        );
        assert_eq!(
            a.get("volcano.sh/job-name").map(String::as_str),
            Some("two-tasks")
        );
        assert_eq!(
            a.get("volcano.sh/queue-name").map(String::as_str),
            Some("default")
        );
        assert_eq!(
            a.get("volcano.sh/job-version").map(String::as_str),
            Some("0")
        );
        assert!(a.contains_key("volcano.sh/task-spec"));
        assert!(p.labels().contains_key("volcano.sh/task-index"));
        assert_eq!(
            p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
            Some("volcano")
        );
        assert!(
            p.owner_references()
                .iter()
                .any(|r| r.controller == Some(true) && r.uid == uid)
        );
    }

    let done = wait_phase(&c, "two-tasks", JobPhase::Completed, 30).await;
    let st = done.status.clone().unwrap_or_default();
    assert_eq!(st.succeeded, Some(3), "{st:?}");
    let conds: Vec<_> = st
        .conditions
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.status)
        .collect();
    for p in [JobPhase::Pending, JobPhase::Running, JobPhase::Completed] {
        assert!(conds.contains(&p), "condition {p} missing: {conds:?}");
    }
    let reason = st
        .state
        .as_ref()
        .and_then(|s| s.reason.clone())
        .unwrap_or_default();
    assert!(!reason.is_empty(), "the transition says why");
    let tasks = st.task_status_count.unwrap_or_default();
    assert_eq!(
        tasks
            .get("worker")
            .and_then(|t| t.phase.as_ref())
            .and_then(|p| p.get("Succeeded")),
        Some(&2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_failures_restart_the_job_until_max_retry_then_it_fails() {
    let (_s, c) = Embedded::start(&[]).await;
    create(
        &c,
        job(
            "retry",
            json!({
                "maxRetry": 2,
                "policies": [{"event": "PodFailed", "action": "RestartJob"}],
                "tasks": [task("w", 2, Some(0.5), 1)]
            }),
        ),
    )
    .await;
    let failed = wait_phase(&c, "retry", JobPhase::Failed, 60).await;
    let st = failed.status.unwrap_or_default();
    assert_eq!(st.retry_count, Some(2), "{st:?}");
    assert!(
        st.version.unwrap_or(0) >= 2,
        "each restart is a new version: {st:?}"
    );
    // The last retry keeps its finished pods for debugging.
    let pods = pods_of(&c, "retry").await;
    assert!(
        pods.iter().any(|p| pod_phase(p) == "Failed"),
        "failed pods of the last retry are kept: {:?}",
        pods.iter()
            .map(|p| (p.name_any(), pod_phase(p).to_string()))
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exit_code_policy_aborts_the_job() {
    let (_s, c) = Embedded::start(&[]).await;
    create(
        &c,
        job(
            "exit3",
            json!({
                "policies": [{"exitCode": 3, "action": "AbortJob"}],
                "tasks": [task("w", 1, Some(0.3), 3), task("other", 1, None, 0)]
            }),
        ),
    )
    .await;
    let aborted = wait_phase(&c, "exit3", JobPhase::Aborted, 60).await;
    assert_eq!(aborted.status.as_ref().and_then(|s| s.running), Some(0));
    // The running pod of the other task was killed; the failed one is kept.
    let pods = eventually(20, "the other task's pod to go", || async {
        let pods = pods_of(&c, "exit3").await;
        (!pods.iter().any(|p| p.name_any() == "exit3-other-0")).then_some(pods)
    })
    .await;
    assert!(pods.iter().all(|p| pod_phase(p) == "Failed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_pending_too_long_aborts_the_job_after_the_timeout() {
    let (_s, c) = Embedded::start(&[]).await;
    let mut huge = task("huge", 1, None, 0);
    huge["minAvailable"] = json!(0);
    huge["template"]["spec"]["containers"] = json!([container("1000")]);
    huge["policies"] = json!([{"event": "PodPending", "action": "AbortJob", "timeout": "2s"}]);
    let started = Instant::now();
    create(
        &c,
        job(
            "stuck",
            json!({"minAvailable": 1, "tasks": [task("ok", 1, None, 0), huge]}),
        ),
    )
    .await;
    wait_phase(&c, "stuck", JobPhase::Running, 30).await;
    wait_phase(&c, "stuck", JobPhase::Aborted, 30).await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the abort waited for the timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_then_resume_by_command() {
    let (_s, c) = Embedded::start(&[]).await;
    let j = create(&c, job("cmd", json!({"tasks": [task("w", 2, None, 0)]}))).await;
    wait_phase(&c, "cmd", JobPhase::Running, 30).await;
    command(&c, &j, "AbortJob").await;
    wait_phase(&c, "cmd", JobPhase::Aborted, 30).await;
    eventually(20, "the aborted job's pods to go", || async {
        pods_of(&c, "cmd").await.is_empty().then_some(())
    })
    .await;
    // Each Command runs once and is deleted.
    let cmds = Api::<Command>::namespaced(c.clone(), "default");
    eventually(10, "the Command to be deleted", || async {
        cmds.list(&ListParams::default())
            .await
            .ok()
            .filter(|l| l.items.is_empty())
    })
    .await;
    command(&c, &j, "ResumeJob").await;
    let resumed = wait_phase(&c, "cmd", JobPhase::Running, 30).await;
    assert_eq!(resumed.status.as_ref().and_then(|s| s.retry_count), Some(1));
    assert_eq!(pods_of(&c, "cmd").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_depends_on_another_starts_after_it_runs() {
    let (_s, c) = Embedded::start(&[]).await;
    let mut b = task("b", 1, None, 0);
    b["dependsOn"] = json!({"name": ["a"]});
    // minAvailable 1, as in Volcano's task-start-dependency example: the gang must be able
    // to start before the dependent task's pods exist.
    create(
        &c,
        job(
            "deps",
            json!({"minAvailable": 1, "tasks": [task("a", 1, None, 0), b]}),
        ),
    )
    .await;
    // The moment b's pod exists, a's pod is running.
    let a_phase = eventually(30, "task b's pod", || async {
        let pods = pods_of(&c, "deps").await;
        pods.iter().any(|p| p.name_any() == "deps-b-0").then(|| {
            pods.iter()
                .find(|p| p.name_any() == "deps-a-0")
                .map(|p| pod_phase(p).to_string())
                .unwrap_or_default()
        })
    })
    .await;
    assert_eq!(a_phase, "Running");
    wait_phase(&c, "deps", JobPhase::Running, 30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_partition_replaces_only_that_partitions_pods() {
    let (_s, c) = Embedded::start(&[]).await;
    let mut w = task("w", 4, None, 0);
    w["partitionPolicy"] = json!({"totalPartitions": 2, "partitionSize": 2});
    w["policies"] = json!([{"event": "PodEvicted", "action": "RestartPartition"}]);
    create(&c, job("parts", json!({"tasks": [w]}))).await;
    wait_phase(&c, "parts", JobPhase::Running, 30).await;
    let before: BTreeMap<String, (String, String)> = eventually(30, "4 running pods", || async {
        let pods = pods_of(&c, "parts").await;
        (pods.len() == 4 && pods.iter().all(|p| pod_phase(p) == "Running")).then(|| {
            pods.iter()
                .map(|p| {
                    let part = p
                        .labels()
                        .get("volcano.sh/partition-id")
                        .cloned()
                        .unwrap_or_default();
                    (p.name_any(), (p.uid().unwrap_or_default(), part))
                })
                .collect()
        })
    })
    .await;
    assert_eq!(before["parts-w-0"].1, "0");
    assert_eq!(before["parts-w-1"].1, "0");
    assert_eq!(before["parts-w-2"].1, "1");
    // Evict a pod of partition 0.
    Api::<Pod>::namespaced(c.clone(), "default")
        .delete("parts-w-1", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete: {e}"));
    let after: BTreeMap<String, String> = eventually(30, "partition 0 replaced", || async {
        let pods = pods_of(&c, "parts").await;
        let m: BTreeMap<String, String> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
            .collect();
        (m.len() == 4
            && m["parts-w-0"] != before["parts-w-0"].0
            && m["parts-w-1"] != before["parts-w-1"].0)
            .then_some(m)
    })
    .await;
    assert_eq!(
        after["parts-w-2"], before["parts-w-2"].0,
        "partition 1 untouched"
    );
    assert_eq!(
        after["parts-w-3"], before["parts-w-3"].0,
        "partition 1 untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_make_their_resources_and_env_and_deleting_the_job_removes_everything() {
    let (_s, c) = Embedded::start(&[]).await;
    let j = create(
        &c,
        job(
            "pt",
            json!({
                "plugins": {"svc": [], "ssh": [], "env": [], "pytorch": ["--master=master", "--worker=worker", "--port=23456"]},
                "tasks": [task("master", 1, None, 0), task("worker", 2, None, 0)]
            }),
        ),
    )
    .await;
    let uid = j.uid().unwrap_or_default();
    let running = wait_phase(&c, "pt", JobPhase::Running, 30).await;
    let controlled = running
        .status
        .and_then(|s| s.controlled_resources)
        .unwrap_or_default();
    for p in ["plugin-svc", "plugin-ssh", "plugin-env", "plugin-pytorch"] {
        assert!(
            controlled.contains_key(p),
            "{p} missing from {controlled:?}"
        );
    }
    let svc = Api::<Service>::namespaced(c.clone(), "default")
        .get("pt")
        .await
        .unwrap_or_else(|e| panic!("Service: {e}"));
    assert_eq!(
        svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()),
        Some("None")
    );
    let cm = Api::<ConfigMap>::namespaced(c.clone(), "default")
        .get("pt-svc")
        .await
        .unwrap_or_else(|e| panic!("ConfigMap: {e}"));
    let data = cm.data.unwrap_or_default();
    assert_eq!(data.get("VC_WORKER_NUM").map(String::as_str), Some("2"));
    assert_eq!(
        data.get("VC_WORKER_HOSTS").map(String::as_str),
        Some("pt-worker-0.pt,pt-worker-1.pt")
    );
    Api::<NetworkPolicy>::namespaced(c.clone(), "default")
        .get("pt")
        .await
        .unwrap_or_else(|e| panic!("NetworkPolicy: {e}"));
    let secret = Api::<Secret>::namespaced(c.clone(), "default")
        .get("pt-ssh")
        .await
        .unwrap_or_else(|e| panic!("Secret: {e}"));
    let keys: BTreeSet<String> = secret.data.unwrap_or_default().into_keys().collect();
    for k in ["id_rsa", "id_rsa.pub", "authorized_keys", "config"] {
        assert!(
            keys.contains(k),
            "{k} missing from the ssh Secret: {keys:?}"
        );
    }

    let pods = pods_of(&c, "pt").await;
    let w1 = pods
        .iter()
        .find(|p| p.name_any() == "pt-worker-1")
        .unwrap_or_else(|| panic!("pt-worker-1 missing"));
    let env = env_of(w1);
    assert_eq!(env.get("VK_TASK_INDEX").map(String::as_str), Some("1"));
    assert_eq!(env.get("VC_TASK_INDEX").map(String::as_str), Some("1"));
    assert_eq!(
        env.get("MASTER_ADDR").map(String::as_str),
        Some("pt-master-0.pt")
    );
    assert_eq!(env.get("MASTER_PORT").map(String::as_str), Some("23456"));
    assert_eq!(env.get("WORLD_SIZE").map(String::as_str), Some("3"));
    assert_eq!(env.get("RANK").map(String::as_str), Some("2"));
    assert_eq!(
        env.get("VC_MASTER_HOSTS").map(String::as_str),
        Some("configmap:pt-svc/VC_MASTER_HOSTS")
    );
    let spec = w1.spec.clone().unwrap_or_default();
    assert_eq!(spec.hostname.as_deref(), Some("pt-worker-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("pt"));

    // Deleting the job removes its pods, PodGroup and plugin resources.
    Api::<Job>::namespaced(c.clone(), "default")
        .delete("pt", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("delete job: {e}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pods = pods_of(&c, "pt").await;
        let pg = Api::<PodGroup>::namespaced(c.clone(), "default")
            .get_opt(&format!("pt-{uid}"))
            .await
            .ok()
            .flatten();
        let svc = Api::<Service>::namespaced(c.clone(), "default")
            .get_opt("pt")
            .await
            .ok()
            .flatten();
        let cm = Api::<ConfigMap>::namespaced(c.clone(), "default")
            .get_opt("pt-svc")
            .await
            .ok()
            .flatten();
        let sec = Api::<Secret>::namespaced(c.clone(), "default")
            .get_opt("pt-ssh")
            .await
            .ok()
            .flatten();
        let np = Api::<NetworkPolicy>::namespaced(c.clone(), "default")
            .get_opt("pt")
            .await
            .ok()
            .flatten();
        let left: Vec<String> = pods
            .iter()
            .map(|p| format!("pod {}", p.name_any()))
            .chain(pg.map(|o| format!("podgroup {}", o.name_any())))
            .chain(svc.map(|o| format!("service {}", o.name_any())))
            .chain(cm.map(|o| format!("configmap {}", o.name_any())))
            .chain(sec.map(|o| format!("secret {}", o.name_any())))
            .chain(np.map(|o| format!("networkpolicy {}", o.name_any())))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the job's objects were still there 30 s after it was deleted: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_serve_mid_job_loses_nothing_and_duplicates_nothing() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("tephra-job-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let (_api, url, c) = served::apiserver(&[], 30).await;
    let kubeconfig = served::kubeconfig(&dir, &url);
    // tephra's namespace, as manifests/namespace.yaml makes it: its leader election Lease lives
    // there.
    served::crds_and_namespace(&c, "tephra-system").await;
    let serve_args = [
        "serve",
        "--kubeconfig",
        &kubeconfig,
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
    ];
    let mut serve = Proc::spawn(&serve_args, None);
    served::ready(&c).await;

    // No webhooks outside embedded mode: the job is written fully.
    let mut spec = json!({
        "minAvailable": 3, "queue": "default", "schedulerName": "volcano", "maxRetry": 3,
        "tasks": [task("a", 1, Some(4.0), 0), task("b", 2, Some(4.0), 0)]
    });
    spec["tasks"][0]["minAvailable"] = json!(1);
    spec["tasks"][1]["minAvailable"] = json!(2);
    create(&c, job("survivor", spec)).await;
    let first: BTreeMap<String, String> = eventually(30, "the job's 3 pods", || async {
        served::bind_all(&c).await;
        let pods = pods_of(&c, "survivor").await;
        (pods.len() == 3).then(|| {
            pods.iter()
                .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
                .collect()
        })
    })
    .await;
    // Stop serve mid-job, start it again against the same API.
    assert_eq!(serve.stop(), Some(0), "serve drains and exits 0 on SIGTERM");
    let _serve2 = Proc::spawn(&serve_args, None);
    let done = eventually(60, "the job to complete after the restart", || async {
        served::bind_all(&c).await;
        get(&c, "survivor")
            .await
            .filter(|j| phase(j) == Some(JobPhase::Completed))
    })
    .await;
    let last: BTreeMap<String, String> = pods_of(&c, "survivor")
        .await
        .iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();
    assert_eq!(
        first, last,
        "the same three pods ran the job, none was made twice"
    );
    let st = done.status.unwrap_or_default();
    assert_eq!(st.succeeded, Some(3));
    assert_eq!(st.version, Some(0), "no restart happened");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_volumes_get_their_claims_and_a_missing_claim_keeps_the_job_pending() {
    let (_s, c) = Embedded::start(&[]).await;
    let j = create(
        &c,
        job(
            "vols",
            json!({
                "volumes": [
                    {"mountPath": "/data", "volumeClaim": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}},
                    {"mountPath": "/shared", "volumeClaimName": "mine"}
                ],
                "tasks": [task("w", 1, None, 0)]
            }),
        ),
    )
    .await;
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(c.clone(), "default");
    // The generated claim is written into the job and created, owned by the job.
    let claim = eventually(20, "a generated claim name in the job", || async {
        get(&c, "vols").await.and_then(|j| {
            j.spec.volumes.as_ref()?[0]
                .volume_claim_name
                .clone()
                .filter(|n| n.starts_with("vols-pvc-"))
        })
    })
    .await;
    let pvc = eventually(20, "the generated PVC", || async {
        pvcs.get_opt(&claim).await.ok().flatten()
    })
    .await;
    assert!(
        pvc.owner_references()
            .iter()
            .any(|r| r.kind == "Job" && Some(&r.uid) == j.metadata.uid.as_ref())
    );
    // "mine" does not exist: the job waits in Pending (Volcano would give up after 15
    // retries and terminate it), saying why in an Event.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    eventually(20, "a PVCError Event", || async {
        events
            .list(&ListParams::default())
            .await
            .ok()
            .and_then(|l| {
                l.items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("PVCError"))
            })
    })
    .await;
    assert_eq!(
        get(&c, "vols").await.and_then(|j| phase(&j)),
        Some(JobPhase::Pending)
    );
    let mine: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "mine"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    pvcs.create(&PostParams::default(), &mine)
        .await
        .unwrap_or_else(|e| panic!("creating the PVC: {e}"));
    wait_phase(&c, "vols", JobPhase::Running, 40).await;
    let pod = Api::<Pod>::namespaced(c.clone(), "default")
        .get("vols-w-0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let spec = pod.spec.unwrap_or_default();
    let claims: BTreeSet<String> = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.persistent_volume_claim.map(|p| p.claim_name))
        .collect();
    assert_eq!(claims, [claim, "mine".to_string()].into_iter().collect());
    let mounts: BTreeSet<String> = spec.containers[0]
        .volume_mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_path)
        .collect();
    assert!(
        mounts.contains("/data") && mounts.contains("/shared"),
        "{mounts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_is_deleted_after_its_ttl() {
    let (_s, c) = Embedded::start(&[]).await;
    create(
        &c,
        job(
            "short",
            json!({"ttlSecondsAfterFinished": 3, "tasks": [task("w", 1, Some(0.2), 0)]}),
        ),
    )
    .await;
    // lastTransitionTime has whole seconds, so the job may be deleted up to a second before
    // TTL after it finished (Volcano's GC counts the same way); a TTL of 3 s leaves the
    // poll below at least 2 s to see it Completed, even on a loaded machine.
    let done = wait_phase(&c, "short", JobPhase::Completed, 30).await;
    let finished_at = done
        .status
        .and_then(|s| s.state)
        .and_then(|s| s.last_transition_time)
        .unwrap_or_else(|| panic!("no lastTransitionTime"));
    eventually(20, "the job to be deleted", || async {
        get(&c, "short").await.is_none().then_some(())
    })
    .await;
    let gone_after = k8s_openapi::jiff::Timestamp::now().duration_since(finished_at.0);
    assert!(
        gone_after.as_secs_f64() >= 3.0,
        "deleted {gone_after:?} after finishing, before the TTL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_a_running_job_adds_and_removes_pods() {
    let (_s, c) = Embedded::start(&[]).await;
    create(
        &c,
        job(
            "scale",
            json!({"minAvailable": 1, "tasks": [task("w", 2, None, 0)]}),
        ),
    )
    .await;
    wait_phase(&c, "scale", JobPhase::Running, 30).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let replicas = |n: i32| {
        let ops: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/spec/tasks/0/replicas", "value": n},
            {"op": "replace", "path": "/spec/tasks/0/minAvailable", "value": 1}
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        kube::api::Patch::<()>::Json(ops)
    };
    jobs.patch("scale", &kube::api::PatchParams::default(), &replicas(3))
        .await
        .unwrap_or_else(|e| panic!("scale up: {e}"));
    eventually(30, "a third pod", || async {
        let names: BTreeSet<String> = pods_of(&c, "scale")
            .await
            .iter()
            .map(|p| p.name_any())
            .collect();
        names.contains("scale-w-2").then_some(())
    })
    .await;
    jobs.patch("scale", &kube::api::PatchParams::default(), &replicas(1))
        .await
        .unwrap_or_else(|e| panic!("scale down: {e}"));
    eventually(30, "only scale-w-0 left", || async {
        let live: Vec<String> = pods_of(&c, "scale")
            .await
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect();
        (live == ["scale-w-0"]).then_some(())
    })
    .await;
    wait_phase(&c, "scale", JobPhase::Running, 10).await;
    // The job was Running all along: its counts catch up with the deletions a moment later.
    eventually(10, "status.running 1", || async {
        let j = get(&c, "scale").await?;
        (j.status.and_then(|s| s.running) == Some(1)).then_some(())
    })
    .await;
}

/// A job whose processing keeps failing (here the mpi plugin cannot read its `--port`) is
/// retried with backoff and, after `--max-requeue` failures in a row, terminated with
/// Volcano's `ExecuteAction` Event, instead of being retried for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_failing_past_max_requeue_is_terminated_with_an_event() {
    use k8s_openapi::api::core::v1::Event;
    let (_s, c) = Embedded::start(&["--max-requeue", "3"]).await;
    create(
        &c,
        job(
            "badport",
            json!({
                "plugins": {"mpi": ["--port=ssh"]},
                "tasks": [task("master", 1, None, 0), task("worker", 1, None, 0)]
            }),
        ),
    )
    .await;
    let done = wait_phase(&c, "badport", JobPhase::Terminated, 60).await;
    assert!(
        pods_of(&c, "badport").await.is_empty(),
        "a job that never got through its plugins has no pods"
    );
    let events = Api::<Event>::namespaced(c.clone(), "default");
    let events = eventually(10, "the retry-limit Event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let mine: Vec<Event> = list
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("badport"))
            .collect();
        mine.iter()
            .any(|e| e.reason.as_deref() == Some("ExecuteAction"))
            .then_some(mine)
    })
    .await;
    let limit = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("ExecuteAction"))
        .and_then(|e| e.message.clone())
        .unwrap_or_default();
    assert!(
        limit.contains("retry limit reached"),
        "the Event says why: {limit:?}"
    );
    let plugin_error = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("PluginError"))
        .count();
    assert_eq!(
        plugin_error, 1,
        "one PluginError Event per failure streak, not per retry"
    );
    assert_eq!(
        done.status
            .as_ref()
            .and_then(|s| s.retry_count)
            .unwrap_or(0),
        0,
        "retries of processing are not the job's restarts"
    );
}

/// Volcano's "Dynamic Job scale up and down" (jobp): a Running job of the svc plugin has its
/// whole spec replaced with more, then fewer, replicas; as soon as the new minimum of pods is
/// running, the hosts ConfigMap already lists exactly the new replicas (Volcano's spec reads it
/// the moment its 100 ms poll sees the pods, so the list must not trail them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_a_svc_job_rewrites_its_hosts_before_the_new_pods_run() {
    let (server, c) = Embedded::start(&[]).await;
    let spec = |min: i32, replicas: i32| {
        let mut t = task("default", replicas, None, 0);
        t["minAvailable"] = json!(min);
        json!({"minAvailable": min, "plugins": {"svc": []}, "tasks": [t]})
    };
    create(&c, job("scaled", spec(2, 2))).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let configmaps: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let hosts = |n: usize| {
        let names: Vec<String> = (0..n)
            .map(|i| format!("scaled-default-{i}.scaled"))
            .collect();
        BTreeMap::from([
            ("default.host".to_string(), names.join("\n")),
            ("VC_DEFAULT_HOSTS".to_string(), names.join(",")),
            ("VC_DEFAULT_NUM".to_string(), n.to_string()),
        ])
    };
    let running = |min: usize| {
        let c = c.clone();
        async move {
            eventually(30, &format!("{min} running pods"), || async {
                let n = pods_of(&c, "scaled")
                    .await
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter(|p| matches!(pod_phase(p), "Running" | "Succeeded"))
                    .count();
                (n >= min).then_some(())
            })
            .await
        }
    };
    running(2).await;
    let configmap_writes = || {
        let addr = server.metrics.clone();
        async move {
            let page = reqwest::get(format!("http://{addr}/metrics"))
                .await
                .and_then(|r| r.error_for_status())
                .unwrap_or_else(|e| panic!("metrics: {e}"))
                .text()
                .await
                .unwrap_or_else(|e| panic!("metrics: {e}"));
            page.lines()
                .find(|l| l.starts_with("tephra_job_writes_total{op=\"configmap\"}"))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        }
    };
    for (min, replicas) in [(4, 4), (1, 1), (0, 0), (2, 2)] {
        let writes_before = configmap_writes().await;
        // As Volcano's e2eutil.UpdateJob: the spec as created (defaults and all), with new
        // counts, replaces the whole spec.
        let mut whole =
            serde_json::to_value(&get(&c, "scaled").await.expect("the job exists").spec)
                .unwrap_or_else(|e| panic!("{e}"));
        whole["minAvailable"] = json!(min);
        whole["tasks"][0]["replicas"] = json!(replicas);
        whole["tasks"][0]["minAvailable"] = json!(min);
        let ops: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/spec", "value": whole}
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        jobs.patch(
            "scaled",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::<()>::Json(ops),
        )
        .await
        .unwrap_or_else(|e| panic!("scaling to {replicas}: {e}"));
        // As Volcano's spec: the first 100 ms poll that sees enough pods running reads the map.
        tokio::time::sleep(Duration::from_millis(100)).await;
        running(min as usize).await;
        let cm = configmaps
            .get("scaled-svc")
            .await
            .unwrap_or_else(|e| panic!("hosts ConfigMap: {e}"));
        assert_eq!(
            cm.data.unwrap_or_default(),
            hosts(replicas as usize),
            "hosts after scaling to {replicas}"
        );
        // One API call rewrites the map: its hosts must be in place before the new pods.
        assert_eq!(
            configmap_writes().await - writes_before,
            1,
            "ConfigMap writes for scaling to {replicas}"
        );
    }
}

/// A svc job scaled while it is still Pending (its gang cannot be placed) gets its hosts
/// rewritten at once, not only once it runs: Volcano's scaling specs scale a job the moment
/// its pods run, which can be before the controller has seen them run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_a_pending_svc_job_rewrites_its_hosts() {
    let (_s, c) = Embedded::start(&[]).await;
    let mut t = task("default", 3, None, 0);
    // More cpu than the cluster has: the gang is never admitted and the job stays Pending.
    t["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1000");
    create(
        &c,
        job(
            "stuck",
            json!({"minAvailable": 3, "plugins": {"svc": []}, "tasks": [t]}),
        ),
    )
    .await;
    let configmaps: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let num = |n: &'static str| {
        let configmaps = configmaps.clone();
        async move {
            eventually(20, &format!("VC_DEFAULT_NUM {n}"), || async {
                let cm = configmaps.get("stuck-svc").await.ok()?;
                (cm.data?.get("VC_DEFAULT_NUM")?.as_str() == n).then_some(())
            })
            .await
        }
    };
    num("3").await;
    let current = get(&c, "stuck").await.expect("the job exists");
    assert_eq!(current.phase(), Some(&JobPhase::Pending));
    let mut whole = serde_json::to_value(&current.spec).unwrap_or_else(|e| panic!("{e}"));
    whole["minAvailable"] = json!(2);
    whole["tasks"][0]["replicas"] = json!(2);
    whole["tasks"][0]["minAvailable"] = json!(2);
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec", "value": whole}
    ]))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<Job>::namespaced(c.clone(), "default")
        .patch(
            "stuck",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::<()>::Json(ops),
        )
        .await
        .unwrap_or_else(|e| panic!("scaling: {e}"));
    num("2").await;
    assert_eq!(
        get(&c, "stuck").await.and_then(|j| j.phase().cloned()),
        Some(JobPhase::Pending),
        "the job is still Pending: the hosts followed the spec before it ran"
    );
}

/// Volcano's "PG controller Create volcano rc" (jobp): a pod of the volcano scheduler outside
/// any PodGroup runs only once the PodGroup controller has put it in one, so the moment it runs
/// its PodGroup exists and has left Pending (Volcano's spec checks exactly then, once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_volcano_pod_runs_inside_its_podgroup() {
    let (_s, c) = Embedded::start(&[]).await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "plain", "namespace": "default", "labels": {"schedulerName": "volcano"}},
        "spec": {"schedulerName": "volcano", "containers": [container("100m")]}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating the pod: {e}"));
    let running = eventually(30, "the pod running", || async {
        let p = pods.get("plain").await.ok()?;
        (pod_phase(&p) == "Running").then_some(p)
    })
    .await;
    let groups = Api::<PodGroup>::namespaced(c.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing PodGroups: {e}"))
        .items;
    let group = running
        .annotations()
        .get("scheduling.k8s.io/group-name")
        .cloned()
        .unwrap_or_else(|| panic!("the running pod names no PodGroup: {running:?}"));
    let pg = groups
        .iter()
        .find(|g| g.name_any() == group)
        .unwrap_or_else(|| panic!("no PodGroup {group}; there are {groups:?}"));
    let phase = pg.status.as_ref().and_then(|s| s.phase.clone());
    assert!(
        phase.as_ref().is_some_and(|p| p.as_str() != "Pending"),
        "PodGroup {group} is {phase:?} while its pod runs"
    );
}

/// Volcano's "Schedule Multiple Jobs" (schedulingbase): three jobs created back to back, each
/// as many one-cpu pods as the cluster has cpus with a minimum of 2, all start: no job's pods
/// beyond its minimum take the room another job was admitted with; then they fill the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_jobs_as_big_as_the_cluster_all_start() {
    // Two nodes of 8 cpu: 16 one-cpu pods fill them.
    let (_s, c) = Embedded::start(&["--embedded-nodes", "2"]).await;
    let spec = || {
        let mut t = task("t", 16, None, 0);
        t["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1");
        json!({"minAvailable": 2, "tasks": [t]})
    };
    for name in ["mqj-1", "mqj-2", "mqj-3"] {
        create(&c, job(name, spec())).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut running = BTreeMap::new();
        for name in ["mqj-1", "mqj-2", "mqj-3"] {
            let pods = pods_of(&c, name).await;
            let n = pods.iter().filter(|p| pod_phase(p) == "Running").count();
            running.insert(name, (n, pods.len()));
        }
        if running.values().all(|(n, _)| *n >= 2) {
            // Then the gangs grow into the rest of the cluster.
            let full = Instant::now() + Duration::from_secs(30);
            loop {
                let mut pods = Vec::new();
                for name in ["mqj-1", "mqj-2", "mqj-3"] {
                    pods.extend(pods_of(&c, name).await);
                }
                if pods.iter().filter(|p| pod_phase(p) == "Running").count() == 16 {
                    return;
                }
                if Instant::now() >= full {
                    let states: Vec<String> = pods
                        .iter()
                        .map(|p| {
                            let st = p.status.as_ref();
                            let scheduled = st
                                .and_then(|s| s.conditions.as_ref())
                                .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
                                .map(|c| format!("{} {:?}", c.status, c.message));
                            let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                            format!("{} {} {node:?} {scheduled:?}", p.name_any(), pod_phase(p))
                        })
                        .collect();
                    panic!("not all 16 cpus in use after 30 s: {states:#?}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        if Instant::now() >= deadline {
            let groups: Vec<String> = Api::<PodGroup>::namespaced(c.clone(), "default")
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .iter()
                .map(|g| format!("{} {:?}", g.name_any(), g.status))
                .collect();
            let mut why = Vec::new();
            for (name, _) in running.iter().filter(|(_, (n, _))| *n < 2) {
                for p in pods_of(&c, name).await.iter().take(3) {
                    let conditions = p.status.as_ref().and_then(|s| s.conditions.clone());
                    why.push(format!("{}: {conditions:?}", p.name_any()));
                }
            }
            panic!(
                "after 60 s, (running, pods) by job: {running:?}; podgroups: {groups:#?}; pods short of their minimum: {why:#?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn gate_names(p: &Pod) -> Vec<String> {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .map(|g| g.iter().map(|g| g.name.clone()).collect())
        .unwrap_or_default()
}

/// A gang pod reaches kube-scheduler only once the plan has a node for it: the members of an
/// admitted job that do not fit wait behind the plan gate (kube-scheduler never turns them
/// down, so they collect no backoff); once room frees, the gate comes off and they run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_pods_wait_behind_the_plan_gate_until_placed_and_are_never_turned_down() {
    // One node of 8 cpu: `first` holds 6 until it is deleted; `second` (4 pods, needing 1)
    // fits 2 of its pods beside it.
    let (_s, c) = Embedded::start(&["--embedded-nodes", "1"]).await;
    let one_cpu = |replicas: i32| {
        let mut t = task("t", replicas, Some(600.0), 0);
        t["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1");
        t
    };
    let running = |pods: &[Pod]| pods.iter().filter(|p| pod_phase(p) == "Running").count();
    create(
        &c,
        job("first", json!({"minAvailable": 6, "tasks": [one_cpu(6)]})),
    )
    .await;
    eventually(30, "first running", || async {
        (running(&pods_of(&c, "first").await) == 6).then_some(())
    })
    .await;
    create(
        &c,
        job("second", json!({"minAvailable": 1, "tasks": [one_cpu(4)]})),
    )
    .await;
    let waiting = eventually(30, "2 of second running, 2 waiting", || async {
        let pods = pods_of(&c, "second").await;
        let unbound: Vec<Pod> = pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none())
            .cloned()
            .collect();
        (pods.len() == 4 && running(&pods) == 2 && unbound.len() == 2).then_some(unbound)
    })
    .await;
    for p in &waiting {
        assert_eq!(
            gate_names(p),
            vec![tephra::api::keys::PLAN_GATE.to_string()],
            "{} has no place: behind the plan gate",
            p.name_any()
        );
    }
    // Room frees: the gates come off and the pods run.
    Api::<Job>::namespaced(c.clone(), "default")
        .delete("first", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting first: {e}"));
    let pods = eventually(60, "all of second running", || async {
        let pods = pods_of(&c, "second").await;
        (running(&pods) == 4).then_some(pods)
    })
    .await;
    for p in &pods {
        assert!(gate_names(p).is_empty(), "{} ungated", p.name_any());
    }
    // kube-scheduler (the stand-in) never turned one down.
    let names: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    let turned_down: Vec<String> = events
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.involved_object
                    .name
                    .as_ref()
                    .is_some_and(|n| names.contains(n))
        })
        .map(|e| e.message.unwrap_or_default())
        .collect();
    assert!(turned_down.is_empty(), "{turned_down:?}");
}

/// A job far bigger than the cluster fills it: 10,000 and 50,000 one-cpu replicas needing
/// one on 3 nodes of 8 cpu. Members not handed to kube-scheduler yet hold no room that members
/// it has could use: kube-scheduler is handed only pods the plan placed, so the 24 cpu fill
/// while the Job controller is still making pods, and none is turned down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_ten_and_fifty_thousand_replicas_fill_the_cluster() {
    for replicas in [10_000, 50_000] {
        let (_s, c) = Embedded::start(&["--embedded-nodes", "3"]).await;
        let mut t = task("t", replicas, None, 0);
        t["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1");
        create(&c, job("big", json!({"minAvailable": 1, "tasks": [t]}))).await;
        let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
        let lp = ListParams::default().labels("volcano.sh/job-name=big");
        let list = eventually(120, "24 of big's pods running", || async {
            let l = pods.list(&lp).await.ok()?;
            let running = l.items.iter().filter(|p| pod_phase(p) == "Running").count();
            (running >= 24).then_some(l.items)
        })
        .await;
        let unbound = |p: &&Pod| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none();
        assert_eq!(
            list.len() - list.iter().filter(unbound).count(),
            24,
            "{replicas}: exactly the cluster's 24 cpu"
        );
        let handed_over = list
            .iter()
            .filter(unbound)
            .filter(|p| gate_names(p).is_empty())
            .count();
        assert_eq!(
            handed_over, 0,
            "{replicas}: pods handed to kube-scheduler without a place"
        );
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
        let turned_down = events
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
            .count();
        assert_eq!(turned_down, 0, "{replicas}: no pod of big was turned down");
    }
}

/// A queue deleted under its jobs (here: with the validating webhooks removed, which would
/// refuse it): the PodGroup's condition says the queue does not exist, instead of what it
/// said while the queue was there, and the job gets one QueueNotFound Event for the streak,
/// not one per retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_queue_is_deleted_is_told_so_once() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use k8s_openapi::api::core::v1::Event;
    let (_s, c) = Embedded::start(&[]).await;
    let queues: Api<tephra::api::Queue> = Api::all(c.clone());
    let q: tephra::api::Queue =
        serde_json::from_value(json!({"metadata": {"name": "gone"}, "spec": {"weight": 1}}))
            .unwrap_or_else(|e| panic!("{e}"));
    queues
        .create(&PostParams::default(), &q)
        .await
        .unwrap_or_else(|e| panic!("creating queue gone: {e}"));
    // More than the cluster holds: the gang stays Pending, its PodGroup saying why.
    let mut spec = json!({"queue": "gone", "minAvailable": 1, "tasks": [task("t", 1, None, 0)]});
    spec["tasks"][0]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "100"}});
    create(&c, job("orphan", spec)).await;
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    let conditions = || async {
        pgs.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|pg| pg.name_any().starts_with("orphan-"))?
            .status?
            .conditions?
            .into_iter()
            .filter_map(|c| c.message)
            .reduce(|a, b| format!("{a}; {b}"))
    };
    let before = eventually(30, "the PodGroup saying why it waits", conditions).await;
    assert!(!before.contains("does not exist"), "{before}");
    Api::<ValidatingWebhookConfiguration>::all(c.clone())
        .delete("tephra-validating-webhooks", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("removing the validating webhooks: {e}"));
    queues
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting queue gone: {e}"));
    eventually(30, "the condition naming the missing queue", || async {
        conditions()
            .await
            .filter(|m| m.contains("queue gone does not exist"))
    })
    .await;
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    let not_found = || async {
        events
            .list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter(|e| e.reason.as_deref() == Some("QueueNotFound"))
                    .map(|e| (e.message.unwrap_or_default(), e.count.unwrap_or(1)))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let first = eventually(30, "a QueueNotFound Event", || async {
        let e = not_found().await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert!(
        first[0].0.contains("Queue gone does not exist"),
        "{first:?}"
    );
    // The job is retried meanwhile (a few times within these seconds); the Event stays one.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let later = not_found().await;
    assert_eq!(later.len(), 1, "{later:?}");
    assert_eq!(later[0].1, 1, "the Event was repeated: {later:?}");
}
