//! The translation of a cluster and the report, on small clusters written as API objects.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::*;

/// "Now" of every state here.
const NOW: &str = "2026-03-01T12:00:00Z";

fn at(offset_secs: i64) -> String {
    let now: Timestamp = NOW.parse().expect("time");
    Timestamp::from_second(now.as_second() + offset_secs)
        .expect("time")
        .to_string()
}

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("object")
}

fn node(name: &str, cpu: &str) -> Node {
    obj(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))
}

fn queue(name: &str) -> Queue {
    obj(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name}, "spec": {"weight": 1}, "status": {"state": "Open"}
    }))
}

/// A vcJob of one task of `replicas` pods of `cpu`, each running `run` seconds (annotation).
fn vcjob(name: &str, replicas: i32, cpu: &str, run: Option<u32>, created: i64) -> Job {
    let mut template = json!({
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": cpu}}}]}
    });
    if let Some(r) = run {
        template["metadata"] =
            json!({"annotations": {"simulation.tephra.io/run-seconds": r.to_string()}});
    }
    obj(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": at(created)},
        "spec": {"schedulerName": "volcano", "minAvailable": replicas,
                 "tasks": [{"name": "worker", "replicas": replicas, "template": template}]}
    }))
}

fn with_phase(mut job: Job, phase: &str) -> Job {
    job.status = Some(obj(json!({"state": {"phase": phase}})));
    job
}

/// A pod of `job`'s task `worker`, bound to `node` and running since `started` (seconds from
/// now), with a run-time annotation when given.
fn running_pod(job: &str, i: u32, node: &str, cpu: &str, run: Option<u32>, started: i64) -> Pod {
    let mut annotations = json!({"volcano.sh/task-spec": "worker", "volcano.sh/job-name": job,
                                 "scheduling.k8s.io/group-name": job});
    if let Some(r) = run {
        annotations["simulation.tephra.io/run-seconds"] = json!(r.to_string());
    }
    obj(json!({
        "metadata": {"name": format!("{job}-worker-{i}"), "namespace": "default",
                     "uid": format!("{job}-{i}"),
                     "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": "worker"},
                     "annotations": annotations},
        "spec": {"schedulerName": "volcano", "nodeName": node,
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running", "startTime": at(started)}
    }))
}

fn state() -> ClusterState {
    let mut s = ClusterState::new(Time(NOW.parse().expect("time")));
    s.queues = vec![queue("default"), queue("root")];
    s
}

/// One node of 8 cpu, on it `train` (one pod of 6 cpu, 100 s, started 40 s ago).
fn busy_cluster() -> ClusterState {
    let mut s = state();
    s.nodes = vec![node("n1", "8")];
    s.jobs = vec![with_phase(
        vcjob("train", 1, "6", Some(100), -50),
        "Running",
    )];
    s.pods = vec![running_pod("train", 0, "n1", "6", Some(100), -40)];
    s
}

fn only(p: &Prediction, name: &str) -> JobPrediction {
    p.jobs
        .iter()
        .find(|j| j.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no row for {name}: {p:?}"))
}

#[test]
fn a_job_that_needs_the_running_jobs_room_starts_when_its_pods_end() {
    let tried = [vcjob("next", 1, "4", Some(30), 0)];
    let p = predict(&busy_cluster(), &tried, &Options::default()).expect("predicts");
    assert_eq!(p.jobs.len(), 1, "{p:?}");
    let next = only(&p, "next");
    assert!(next.tried);
    // `train` has 60 of its 100 s left.
    assert_eq!(next.start_after_seconds, Some(60), "{next:?}");
    assert_eq!(next.finish_after_seconds, Some(90), "{next:?}");
    assert!(next.admitted_after_seconds.is_some_and(|a| a <= 60));
    assert!(
        next.waits_for
            .contains("it starts once pods of default/train end"),
        "{}",
        next.waits_for
    );
    assert!(next.delays.is_empty());
}

#[test]
fn a_job_that_fits_starts_now_and_finishes_after_its_run_time() {
    let tried = [vcjob("small", 2, "1", Some(20), 0)];
    let p = predict(&busy_cluster(), &tried, &Options::default()).expect("predicts");
    let small = only(&p, "small");
    assert_eq!(small.start_after_seconds, Some(0));
    assert_eq!(small.finish_after_seconds, Some(20));
    assert_eq!(small.waits_for, "nothing: it starts at once");
}

#[test]
fn a_gang_too_big_for_the_cluster_never_starts_and_says_why() {
    let tried = [vcjob("huge", 3, "6", Some(20), 0)];
    let opts = Options {
        horizon_ms: 600_000,
        ..Options::default()
    };
    let p = predict(&busy_cluster(), &tried, &opts).expect("predicts");
    let huge = only(&p, "huge");
    assert_eq!(huge.start_after_seconds, None);
    assert_eq!(huge.finish_after_seconds, None);
    assert!(
        huge.waits_for.ends_with("(not started within 10m)"),
        "{}",
        huge.waits_for
    );
    // The session's own words lead the sentence.
    assert!(
        huge.waits_for.len() > "(not started within 10m)".len() + 5,
        "{}",
        huge.waits_for
    );
}

#[test]
fn added_nodes_let_a_waiting_job_start_now() {
    let tried = [vcjob("next", 1, "4", Some(30), 0)];
    let opts = Options {
        add_nodes: vec![ExtraNodes::parse("1x8cpu").expect("parses")],
        ..Options::default()
    };
    let p = predict(&busy_cluster(), &tried, &opts).expect("predicts");
    assert_eq!(only(&p, "next").start_after_seconds, Some(0));
}

#[test]
fn a_tried_job_that_takes_the_room_of_a_waiting_one_names_it_and_by_how_much() {
    let mut s = busy_cluster();
    // Waiting for all 8 cpu: it starts when `train` ends, 60 s from now.
    s.jobs.push(vcjob("big", 1, "8", Some(10), -5));
    let alone = predict(&s, &[], &Options::default()).expect("predicts");
    assert_eq!(only(&alone, "big").start_after_seconds, Some(60));
    assert!(!only(&alone, "big").tried);
    // A 2-cpu job of 100 s fits now, and holds 2 cpu until 100 s from now.
    let tried = [vcjob("side", 1, "2", Some(100), 0)];
    let p = predict(&s, &tried, &Options::default()).expect("predicts");
    let side = only(&p, "side");
    assert_eq!(side.start_after_seconds, Some(0));
    assert_eq!(
        side.delays,
        vec![Delay {
            name: "big".into(),
            namespace: "default".into(),
            by_seconds: Some(40)
        }]
    );
    assert_eq!(only(&p, "big").start_after_seconds, Some(100));
    // Tried jobs come first.
    assert_eq!(p.jobs[0].name, "side");
}

#[test]
fn the_queue_default_and_the_jobs_history_give_run_times_without_an_annotation() {
    let mut s = busy_cluster();
    // `train` has no annotation now: its run time comes from the queue's default.
    s.pods = vec![running_pod("train", 0, "n1", "6", None, -40)];
    let tried = [vcjob("next", 1, "4", None, 0)];
    let mut opts = Options::default();
    opts.run_seconds.add("default=100").expect("parses");
    let p = predict(&s, &tried, &opts).expect("predicts");
    let next = only(&p, "next");
    assert_eq!(next.start_after_seconds, Some(60));
    assert_eq!(next.finish_after_seconds, Some(160));
    // Without a default, a finished run of the same job is its history.
    let mut s = busy_cluster();
    let mut done: Pod = running_pod("next", 0, "n1", "4", None, -1000);
    done.metadata.name = Some("next-worker-old".into());
    done.status = Some(obj(json!({
        "phase": "Succeeded", "startTime": at(-1000),
        "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": false,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "startedAt": at(-1000), "finishedAt": at(-955)}}}]
    })));
    s.pods.push(done);
    s.jobs
        .push(with_phase(vcjob("next", 1, "4", None, -2000), "Completed"));
    let p = predict(&s, &tried, &Options::default()).expect("predicts");
    let next = only(&p, "next");
    assert_eq!(next.start_after_seconds, Some(60));
    assert_eq!(next.finish_after_seconds, Some(105));
}

#[test]
fn a_pod_without_any_run_time_runs_on_past_the_horizon() {
    let mut s = busy_cluster();
    s.pods = vec![running_pod("train", 0, "n1", "6", None, -40)];
    let opts = Options {
        horizon_ms: 3_600_000,
        ..Options::default()
    };
    let p = predict(&s, &[vcjob("next", 1, "4", Some(5), 0)], &opts).expect("predicts");
    let next = only(&p, "next");
    assert_eq!(next.start_after_seconds, None);
    assert!(
        next.waits_for.ends_with("(not started within 1h)"),
        "{}",
        next.waits_for
    );
}

#[test]
fn the_translation_keeps_running_pods_other_pods_and_cordons() {
    let mut s = busy_cluster();
    let mut cordoned = node("n2", "4");
    cordoned.spec = Some(obj(json!({"unschedulable": true})));
    let mut down = node("n3", "4");
    down.status = Some(obj(json!({"allocatable": {"cpu": "4", "memory": "1Gi"},
                                 "conditions": [{"type": "Ready", "status": "False"}]})));
    s.nodes.extend([cordoned, down]);
    s.pods.push(obj(json!({
        "metadata": {"name": "dns", "namespace": "kube-system",
                     "annotations": {"simulation.tephra.io/run-seconds": "50"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "dns",
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
        "status": {"phase": "Running", "startTime": at(-20)}
    })));
    let t = translate(&s, &[], &Options::default()).expect("translates");
    let names: Vec<&str> = t.scenario.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2"]);
    assert_eq!(t.notes, ["node n3 is not Ready and is left out"]);
    assert!(
        t.scenario.nodes[1]
            .taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable")
    );
    assert_eq!(t.roles, [JobRole::Running]);
    let train = &t.scenario.jobs[0];
    assert_eq!(
        train.present,
        [crate::sim::scenario::PresentPod {
            task: "worker".into(),
            node: Some("n1".into()),
            remaining_ms: 60_000,
        }]
    );
    assert_eq!(train.arrival_ms, -50_000);
    assert_eq!(t.scenario.other_pods.len(), 1);
    let dns = &t.scenario.other_pods[0];
    assert_eq!((dns.node.as_str(), dns.cpu.as_str()), ("n1", "100m"));
    assert_eq!(dns.remaining_ms, 30_000);
}

#[test]
fn a_job_to_try_that_cannot_be_simulated_is_refused_with_why() {
    let s = busy_cluster();
    let e = predict(&s, &[vcjob("train", 1, "1", None, 0)], &Options::default())
        .expect_err("name in use");
    assert_eq!(
        e.to_string(),
        "job default/train: a vcJob of this name is already in the cluster (Running); give \
         the one to try another name"
    );
    let mut other_queue = vcjob("x", 1, "1", None, 0);
    other_queue.spec.queue = Some("nope".into());
    let e = predict(&s, &[other_queue], &Options::default()).expect_err("no queue");
    assert_eq!(
        e.to_string(),
        "job default/x: its queue nope does not exist in the cluster"
    );
    let mut no_tasks = vcjob("y", 1, "1", None, 0);
    no_tasks.spec.tasks = None;
    let e = predict(&s, &[no_tasks], &Options::default()).expect_err("no tasks");
    assert_eq!(e.to_string(), "job default/y: it has no tasks");
}

#[test]
fn add_nodes_values_are_read_or_refused_clearly() {
    assert_eq!(
        ExtraNodes::parse("4x8cpu").expect("parses"),
        ExtraNodes {
            count: 4,
            cpu: "8".into(),
            memory: "32768Mi".into()
        }
    );
    assert_eq!(
        ExtraNodes::parse("2x500mcpu,16Gi").expect("parses"),
        ExtraNodes {
            count: 2,
            cpu: "500m".into(),
            memory: "16Gi".into()
        }
    );
    for (bad, why) in [
        ("4", "expected COUNTxCPUcpu[,MEMORY]"),
        ("4x8", "expected COUNTxCPUcpu[,MEMORY]"),
        ("0x8cpu", "the count must be"),
        ("ax8cpu", "the count must be"),
        ("4xfastcpu", "the cpu must be"),
        ("4x8cpu,lots", "the memory must be"),
    ] {
        let e = ExtraNodes::parse(bad).expect_err(bad).to_string();
        assert!(e.starts_with(&format!("--add-nodes {bad:?}: ")), "{e}");
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn default_run_seconds_are_per_queue_or_for_all() {
    let mut r = RunSeconds::default();
    r.add("300").expect("parses");
    r.add("gpu=3600").expect("parses");
    assert_eq!(r.of("gpu"), Some(3600.0));
    assert_eq!(r.of("other"), Some(300.0));
    for bad in ["-5", "gpu=", "=5", "soon"] {
        let e = r.add(bad).expect_err(bad).to_string();
        assert!(e.starts_with("--default-run-seconds"), "{e}");
    }
}

#[test]
fn a_dump_reads_back_what_it_writes_and_a_foreign_file_is_refused() {
    let mut s = busy_cluster();
    s.pods[0].metadata.managed_fields = Some(vec![Default::default()]);
    s.strip();
    assert!(s.pods[0].metadata.managed_fields.is_none());
    let text = s.to_yaml().expect("renders");
    let again = ClusterState::from_yaml(&text, "dump.yaml").expect("reads back");
    assert_eq!(again, s);
    let e = ClusterState::from_yaml("apiVersion: v1\nkind: List\nitems: []\n", "x.yaml")
        .expect_err("not a dump");
    assert!(
        e.to_string().starts_with("x.yaml: not a cluster dump"),
        "{e}"
    );
}

#[test]
fn the_table_has_a_row_per_job_with_times_from_now() {
    let tried = [vcjob("next", 1, "4", Some(30), 0)];
    let p = predict(&busy_cluster(), &tried, &Options::default()).expect("predicts");
    let t = table(&p);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 2, "{t}");
    assert!(
        lines[0].starts_with("NAMESPACE   NAME   QUEUE     JOB     ADMITTED"),
        "{t}"
    );
    assert!(lines[1].contains("in 1m   in 1m30s   -"), "{t}");
}
