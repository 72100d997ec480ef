//! `tephra simulate` as a user runs it (the real binary) against `tephra serve --embedded`:
//! a job that must wait for a running one is predicted to start when that one's pods end, the
//! cluster is not written to, a dump read back gives the same answer, and bad input stops with
//! one line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tephra::api::{Command as BusCommand, Job, PodGroup, Queue};

use crate::common::served::{Embedded, eventually, kubeconfig};

/// How long the running job's pods run.
const RUN_SECONDS: u64 = 90;

pub(crate) fn tephra() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tephra"));
    // No cluster from the environment: only what the test passes.
    c.env_clear()
        .env("HOME", "/nonexistent-home")
        .env("PATH", "/usr/bin:/bin");
    c
}

pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tephra-simulate-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    dir
}

pub(crate) fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `tephra simulate ARGS` and returns its JSON output (it must succeed).
pub(crate) fn simulate_json(args: &[&str]) -> Vec<Value> {
    let out = tephra()
        .arg("simulate")
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "simulate {args:?}: {}",
        stderr_of(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "simulate {args:?} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

pub(crate) fn vcjob(name: &str, queue: &str, replicas: i32, cpu: &str, run_seconds: u64) -> Value {
    json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "volcano", "queue": queue, "minAvailable": replicas,
            "tasks": [{"name": "worker", "replicas": replicas, "template": {
                "metadata": {"annotations": {"simulation.tephra.io/run-seconds": run_seconds.to_string()}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                         "resources": {"requests": {"cpu": cpu}}}]}
            }}]
        }
    })
}

/// Runs `tephra simulate --dump` against the cluster of `kubeconfig`, writes the dump to
/// `dir/dump.yaml` and returns its path and text.
pub(crate) fn dump_into(dir: &Path, kubeconfig: &str) -> (PathBuf, Vec<u8>) {
    let dump = tephra()
        .args(["simulate", "--dump", "--kubeconfig", kubeconfig])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(dump.status.success(), "{}", stderr_of(&dump));
    let path = dir.join("dump.yaml");
    std::fs::write(&path, &dump.stdout).unwrap_or_else(|e| panic!("{e}"));
    (path, dump.stdout)
}

pub(crate) fn write_jobs(dir: &Path, jobs: &[Value]) -> String {
    let path = dir.join("jobs.yaml");
    let text: Vec<String> = jobs
        .iter()
        .map(|j| serde_saphyr::to_string(j).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    std::fs::write(&path, text.join("---\n")).unwrap_or_else(|e| panic!("{e}"));
    path.to_string_lossy().into_owned()
}

pub(crate) async fn create<K>(api: Api<K>, v: Value)
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"));
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", obj.name_any()));
}

/// `kind/namespace/name` → resourceVersion of every object of `K`.
async fn versions<K>(c: &Client, kind: &str, into: &mut BTreeMap<String, String>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(c.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing {kind}: {e}"));
    for o in list.items {
        into.insert(
            format!(
                "{kind}/{}/{}",
                o.namespace().unwrap_or_default(),
                o.name_any()
            ),
            o.resource_version().unwrap_or_default(),
        );
    }
}

/// Every object simulate reads (and the Commands it could have sent), by resourceVersion.
async fn everything(c: &Client) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    versions::<Node>(c, "node", &mut all).await;
    versions::<Pod>(c, "pod", &mut all).await;
    versions::<Queue>(c, "queue", &mut all).await;
    versions::<PodGroup>(c, "podgroup", &mut all).await;
    versions::<Job>(c, "vcjob", &mut all).await;
    versions::<PriorityClass>(c, "priorityclass", &mut all).await;
    versions::<BusCommand>(c, "command", &mut all).await;
    all
}

fn field<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name}: {rows:?}"))
}

/// Two answers alike: the same rows and sentences, the same times within `secs` (the two
/// were read a moment apart, and a running pod's remaining time is counted from "now").
fn assert_alike(a: &[Value], b: &[Value], secs: i64) {
    assert_eq!(a.len(), b.len(), "{a:?}\n{b:?}");
    for (x, y) in a.iter().zip(b) {
        let (xo, yo) = (x.as_object().unwrap(), y.as_object().unwrap());
        assert_eq!(xo.keys().collect::<Vec<_>>(), yo.keys().collect::<Vec<_>>());
        for (k, xv) in xo {
            let yv = &yo[k];
            match (xv.as_i64(), yv.as_i64()) {
                (Some(p), Some(q)) => assert!((p - q).abs() <= secs, "{k}: {xv} vs {yv}"),
                _ => assert_eq!(xv, yv, "{k}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_predicts_a_wait_for_a_running_job_without_writing_and_a_dump_agrees() {
    let (served, c) = Embedded::start(&[]).await;
    let dir = temp_dir("live");
    let kc = kubeconfig(&dir, &served.api_url);

    // Four nodes of 8 cpu (the three embedded ones and one made here), a queue, and a job
    // that takes 7 cpu on each of the four for 90 s.
    create::<Node>(
        Api::all(c.clone()),
        json!({"metadata": {"name": "made-1", "labels": {"kubernetes.io/hostname": "made-1"}},
               "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                          "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                          "conditions": [{"type": "Ready", "status": "True"}]}}),
    )
    .await;
    create::<Queue>(
        Api::all(c.clone()),
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": {"name": "research"}, "spec": {"weight": 1, "reclaimable": true}}),
    )
    .await;
    create::<Job>(
        Api::namespaced(c.clone(), "default"),
        vcjob("busy", "research", 4, "7", RUN_SECONDS),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    eventually(60, "the four pods of busy to run", || async {
        let list = pods
            .list(&ListParams::default().labels("volcano.sh/job-name=busy"))
            .await
            .ok()?;
        let running = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        (running == 4).then_some(())
    })
    .await;
    let running_since = Instant::now();
    // Let the controllers write what follows from the start before looking.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let before = everything(&c).await;

    // `after` needs two nodes with 4 cpu free: only when busy's pods end. `now` fits at once.
    let jobs = write_jobs(
        &dir,
        &[
            vcjob("after", "research", 2, "4", 30),
            vcjob("now", "research", 1, "1", 10),
        ],
    );
    let asked_at = running_since.elapsed().as_secs() as i64;
    let live = simulate_json(&["--kubeconfig", &kc, "-f", &jobs]);
    let after = field(&live, "after");
    let start = after["startAfterSeconds"]
        .as_i64()
        .unwrap_or_else(|| panic!("after never starts: {after}"));
    // busy's pods have RUN_SECONDS less what they ran already (startTime has whole seconds).
    let expected = RUN_SECONDS as i64 - asked_at;
    assert!(
        (expected - 4..=expected + 2).contains(&start),
        "after starts in {start}s, expected about {expected}s: {after}"
    );
    assert_eq!(
        after["finishAfterSeconds"].as_i64(),
        Some(start + 30),
        "{after}"
    );
    assert_eq!(after["namespace"], "default");
    let waits = after["waitsFor"].as_str().unwrap_or_default();
    assert!(waits.contains("default/busy"), "{waits}");
    let now = field(&live, "now");
    assert_eq!(now["startAfterSeconds"], 0, "{now}");
    assert_eq!(now["finishAfterSeconds"], 10, "{now}");
    assert_eq!(now["waitsFor"], "nothing: it starts at once");

    // The dump, read back, gives the same answer.
    let (dump_path, _) = dump_into(&dir, &kc);
    let from = simulate_json(&["--from", &dump_path.to_string_lossy(), "-f", &jobs]);
    assert_alike(&live, &from, 2);

    // Nothing was written: every object is at the version it had.
    let afterwards = everything(&c).await;
    assert_eq!(before, afterwards, "simulate changed the cluster");
    assert!(before.keys().any(|k| k.starts_with("pod/default/busy-")));
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_stops_simulate_with_one_line_naming_it() {
    let dir = temp_dir("bad");
    let pod = dir.join("pod.yaml");
    std::fs::write(&pod, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n").unwrap();
    let missing = dir.join("missing.yaml");
    let (pod, missing) = (pod.to_string_lossy(), missing.to_string_lossy());
    let dump = dir.join("not-a-dump.yaml");
    std::fs::write(&dump, "apiVersion: v1\nkind: List\nitems: []\n").unwrap();
    let dump = dump.to_string_lossy();
    for (args, needle) in [
        (
            vec!["--from", &*dump, "-f", &*missing],
            format!("{missing}: No such file or directory"),
        ),
        (
            vec!["--from", &*dump, "--add-nodes", "4x8"],
            "--add-nodes \"4x8\": expected COUNTxCPUcpu[,MEMORY], e.g. 4x8cpu or 4x8cpu,32Gi"
                .into(),
        ),
        (
            vec!["--from", &*dump, "-f", &*pod],
            format!(
                "{pod}: document 1 is \"Pod\" of \"v1\", not a Job of \"batch.volcano.sh/v1alpha1\""
            ),
        ),
        (
            vec!["--from", &*missing],
            format!("{missing}: No such file"),
        ),
        (
            vec!["--from", &*dump],
            format!("{dump}: not a cluster dump"),
        ),
        (
            vec![],
            "no cluster to read: pass --kubeconfig PATH or --from".into(),
        ),
    ] {
        let out = tephra()
            .arg("simulate")
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("tephra: error: {needle}")),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
