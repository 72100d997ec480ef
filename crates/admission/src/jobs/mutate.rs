//! `/jobs/mutate` (CREATE): Volcano's vcJob defaults.
//!
//! In Volcano's order: `queue: default`, the served `schedulerName`, `maxRetry: 3` (an
//! explicit 0 too), per task (name `default{i}`, `ClusterFirstWithHostNet` for host-network
//! pods without a DNS policy, `minAvailable` from the partition policy or `replicas`,
//! `maxRetry: 3`), the job `minAvailable` as the sum of the tasks' (after their defaults), and
//! the plugins the distributed-framework plugins depend on (`svc`, and `ssh` for `mpi`).
//! The changes are made on the request's JSON so fields tephra does not model pass untouched.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use crate::AdmissionConfig;
use crate::decode;
use crate::patch::{MapOnly, Ops};
use crate::review::{Decision, Operation, Request};
use tephra_api::batch::DEFAULT_MAX_RETRY;
use tephra_api::keys::{DEFAULT_QUEUE, DEFAULT_TASK_SPEC, plugins};

/// The decision for one `/jobs/mutate` request.
pub fn review(req: &Request, cfg: &AdmissionConfig) -> Decision {
    if req.operation != Operation::Create {
        return Decision::bad_request("expect operation to be 'CREATE'");
    }
    let job: MapOnly<DefaultsView<'_>> = match decode(req) {
        Ok(j) => j,
        Err(d) => return d,
    };
    Decision::patch(defaults(&job, cfg))
}

/// The parts of a vcJob the defaults depend on. Decoding only these (serde skips the rest, pod
/// templates included) costs a fraction of decoding a whole [`tephra_api::Job`] or a `Value`,
/// which was most of this webhook's time; the whole object is checked by `/jobs/validate`.
/// Strings are borrowed from the review where they need no unescaping.
#[derive(Debug, Default, Deserialize)]
pub struct DefaultsView<'a> {
    /// `None` when `spec` is absent or `null`: the patch must then create it first.
    #[serde(borrow, default)]
    spec: Option<MapOnly<SpecView<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecView<'a> {
    #[serde(borrow, default)]
    queue: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    scheduler_name: Option<std::borrow::Cow<'a, str>>,
    max_retry: Option<i32>,
    min_available: Option<i32>,
    #[serde(borrow, default)]
    tasks: Option<Vec<MapOnly<TaskView<'a>>>>,
    #[serde(borrow, default)]
    plugins: Option<BTreeMap<std::borrow::Cow<'a, str>, IgnoredAny>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskView<'a> {
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
    replicas: Option<i32>,
    min_available: Option<i32>,
    max_retry: Option<i32>,
    partition_policy: Option<PartitionView>,
    #[serde(borrow, default)]
    template: Option<MapOnly<TemplateView<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartitionView {
    partition_size: Option<i32>,
    min_partitions: Option<i32>,
}

#[derive(Debug, Default, Deserialize)]
struct TemplateView<'a> {
    #[serde(borrow, default)]
    spec: Option<MapOnly<PodView<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodView<'a> {
    host_network: Option<bool>,
    #[serde(borrow, default)]
    dns_policy: Option<std::borrow::Cow<'a, str>>,
}

fn is_empty(s: Option<&std::borrow::Cow<'_, str>>) -> bool {
    s.is_none_or(|s| s.is_empty())
}

/// The patch operations that default `job`, in Volcano's order. Every operation is an `add`
/// below an object the decode saw (`spec` is created first when it is absent or `null`), so
/// the operations apply to the original as they stand.
pub fn defaults(job: &DefaultsView<'_>, cfg: &AdmissionConfig) -> Ops {
    let mut ops = Ops::new();
    let no_spec = SpecView::default();
    let spec = match job.spec.as_deref() {
        Some(s) => s,
        None => {
            ops.add(&["spec"], json!({}));
            &no_spec
        }
    };
    if is_empty(spec.queue.as_ref()) {
        ops.add(&["spec", "queue"], json!(DEFAULT_QUEUE));
    }
    if is_empty(spec.scheduler_name.as_ref()) {
        ops.add(&["spec", "schedulerName"], json!(cfg.default_scheduler()));
    }
    if spec.max_retry.unwrap_or(0) == 0 {
        ops.add(&["spec", "maxRetry"], json!(DEFAULT_MAX_RETRY));
    }

    let mut sum_min_available: i64 = 0;
    let mut index = String::new();
    for (i, task) in spec.tasks.iter().flatten().enumerate() {
        index.clear();
        // Writing to a String cannot fail.
        let _ = write!(index, "{i}");
        if is_empty(task.name.as_ref()) {
            ops.add(
                &["spec", "tasks", &index, "name"],
                json!(format!("{DEFAULT_TASK_SPEC}{i}")),
            );
        }
        if let Some(pod) = task.template.as_deref().and_then(|t| t.spec.as_deref())
            && pod.host_network == Some(true)
            && is_empty(pod.dns_policy.as_ref())
        {
            ops.add(
                &["spec", "tasks", &index, "template", "spec", "dnsPolicy"],
                json!("ClusterFirstWithHostNet"),
            );
        }
        let min_available = match task.min_available {
            Some(m) => m,
            None => {
                // Only a partition policy with minPartitions > 0 gives the gang size; without
                // it the task's gang is all its replicas.
                let m = match task.partition_policy.as_ref() {
                    Some(p) if p.min_partitions.unwrap_or(0) > 0 => p
                        .min_partitions
                        .unwrap_or(0)
                        .saturating_mul(p.partition_size.unwrap_or(0)),
                    _ => task.replicas.unwrap_or(0),
                };
                ops.add(&["spec", "tasks", &index, "minAvailable"], json!(m));
                m
            }
        };
        sum_min_available += i64::from(min_available);
        if task.max_retry.unwrap_or(0) == 0 {
            ops.add(
                &["spec", "tasks", &index, "maxRetry"],
                json!(DEFAULT_MAX_RETRY),
            );
        }
    }

    if spec.min_available.unwrap_or(0) == 0 {
        let total = i32::try_from(sum_min_available).unwrap_or(i32::MAX);
        // Re-adding an explicit 0 as 0 would be an operation that changes nothing.
        if spec.min_available.is_none() || total != 0 {
            ops.add(&["spec", "minAvailable"], json!(total));
        }
    }

    if let Some(present) = spec.plugins.as_ref() {
        let has = |name: &str| present.keys().any(|k| k == name);
        let needs_svc = [
            plugins::TENSORFLOW,
            plugins::MPI,
            plugins::PYTORCH,
            plugins::RAY,
        ]
        .iter()
        .any(|p| has(p));
        if needs_svc && !has(plugins::SVC) {
            ops.add(&["spec", "plugins", plugins::SVC], Value::Array(Vec::new()));
        }
        if has(plugins::MPI) && !has(plugins::SSH) {
            ops.add(&["spec", "plugins", plugins::SSH], Value::Array(Vec::new()));
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch;
    use crate::review::Verdict;
    use crate::testutil::{applied, request};

    fn job(spec: Value) -> Value {
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
               "metadata": {"name": "j", "namespace": "ns"}, "spec": spec})
    }

    fn task(name: Option<&str>, replicas: i32) -> Value {
        let mut t = json!({"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}});
        if let Some(n) = name {
            t["name"] = json!(n);
        }
        t
    }

    fn mutated(spec: Value) -> Value {
        let req = request("Job", "CREATE", job(spec));
        let d = review(&req, &AdmissionConfig::default());
        applied(&req, &d)["spec"].clone()
    }

    #[test]
    fn fills_every_default_of_a_bare_job() {
        let s = mutated(json!({"tasks": [task(None, 2), task(Some("w"), 3)]}));
        assert_eq!(s["queue"], "default");
        assert_eq!(s["schedulerName"], "volcano");
        assert_eq!(s["maxRetry"], 3);
        assert_eq!(s["tasks"][0]["name"], "default0");
        assert_eq!(s["tasks"][1]["name"], "w");
        assert_eq!(s["tasks"][0]["minAvailable"], 2);
        assert_eq!(s["tasks"][1]["minAvailable"], 3);
        assert_eq!(s["tasks"][0]["maxRetry"], 3);
        assert_eq!(s["minAvailable"], 5);
        assert!(s.get("plugins").is_none());
    }

    #[test]
    fn keeps_what_is_set() {
        let mut t = task(Some("a"), 4);
        t["minAvailable"] = json!(1);
        t["maxRetry"] = json!(7);
        let spec = json!({"queue": "q", "schedulerName": "other", "maxRetry": 5, "minAvailable": 2, "tasks": [t]});
        let s = mutated(spec.clone());
        assert_eq!(s, spec);
    }

    #[test]
    fn explicit_zero_max_retry_becomes_three() {
        let s = mutated(json!({"maxRetry": 0, "tasks": [task(Some("a"), 1)]}));
        assert_eq!(s["maxRetry"], 3);
    }

    #[test]
    fn scheduler_name_is_the_first_configured() {
        let cfg = AdmissionConfig {
            scheduler_names: vec!["tephra".into(), "volcano".into()],
            ..AdmissionConfig::default()
        };
        let req = request("Job", "CREATE", job(json!({"tasks": [task(Some("a"), 1)]})));
        let v = applied(&req, &review(&req, &cfg));
        assert_eq!(v["spec"]["schedulerName"], "tephra");
    }

    #[test]
    fn host_network_gets_cluster_first_with_host_net() {
        let mut t = task(Some("a"), 1);
        t["template"]["spec"]["hostNetwork"] = json!(true);
        let s = mutated(json!({"tasks": [t.clone()]}));
        assert_eq!(
            s["tasks"][0]["template"]["spec"]["dnsPolicy"],
            "ClusterFirstWithHostNet"
        );
        t["template"]["spec"]["dnsPolicy"] = json!("Default");
        let s = mutated(json!({"tasks": [t]}));
        assert_eq!(s["tasks"][0]["template"]["spec"]["dnsPolicy"], "Default");
    }

    #[test]
    fn partition_policy_sets_task_min_available() {
        let mut t = task(Some("a"), 6);
        t["partitionPolicy"] =
            json!({"totalPartitions": 3, "partitionSize": 2, "minPartitions": 2});
        let s = mutated(json!({"tasks": [t.clone()]}));
        assert_eq!(s["tasks"][0]["minAvailable"], 4);
        assert_eq!(s["minAvailable"], 4);
        // minPartitions 0 (the CRD default) falls back to replicas.
        t["partitionPolicy"]["minPartitions"] = json!(0);
        let s = mutated(json!({"tasks": [t]}));
        assert_eq!(s["tasks"][0]["minAvailable"], 6);
    }

    #[test]
    fn plugin_dependencies_are_added() {
        for fw in ["tensorflow", "pytorch", "ray"] {
            let s = mutated(json!({"plugins": {fw: []}, "tasks": [task(Some("a"), 1)]}));
            assert_eq!(s["plugins"]["svc"], json!([]), "{fw}");
            assert!(s["plugins"].get("ssh").is_none(), "{fw}");
        }
        let s = mutated(json!({"plugins": {"mpi": ["--master=m"]}, "tasks": [task(Some("m"), 1)]}));
        assert_eq!(
            s["plugins"],
            json!({"mpi": ["--master=m"], "svc": [], "ssh": []})
        );
        let s = mutated(
            json!({"plugins": {"mpi": [], "svc": ["--x"], "ssh": ["--y"]}, "tasks": [task(Some("a"), 1)]}),
        );
        assert_eq!(
            s["plugins"],
            json!({"mpi": [], "svc": ["--x"], "ssh": ["--y"]})
        );
        let s = mutated(json!({"plugins": {"env": []}, "tasks": [task(Some("a"), 1)]}));
        assert_eq!(s["plugins"], json!({"env": []}));
    }

    #[test]
    fn only_create_is_mutated() {
        let d = review(
            &request("Job", "UPDATE", job(json!({"tasks": []}))),
            &AdmissionConfig::default(),
        );
        assert!(d.denial().unwrap().contains("CREATE"));
    }

    /// The defaults as a mutation of a `Value` copy (how this webhook worked before it emitted
    /// operations): the reference the direct operations are checked against.
    fn reference(obj: &Value, cfg: &AdmissionConfig) -> Value {
        let mut out = obj.clone();
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let int = |v: &Value, k: &str| v.get(k).and_then(Value::as_i64);
        if text(&spec, "queue").is_empty() {
            patch::set(&mut out, &["spec"], "queue", json!(DEFAULT_QUEUE));
        }
        if text(&spec, "schedulerName").is_empty() {
            patch::set(
                &mut out,
                &["spec"],
                "schedulerName",
                json!(cfg.default_scheduler()),
            );
        }
        if int(&spec, "maxRetry").unwrap_or(0) == 0 {
            patch::set(&mut out, &["spec"], "maxRetry", json!(DEFAULT_MAX_RETRY));
        }
        let mut sum = 0i64;
        let tasks = spec
            .get("tasks")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, task) in tasks.iter().enumerate() {
            let Some(t) = out.pointer_mut(&format!("/spec/tasks/{i}")) else {
                continue;
            };
            if text(task, "name").is_empty() {
                patch::set(t, &[], "name", json!(format!("{DEFAULT_TASK_SPEC}{i}")));
            }
            let pod = task
                .pointer("/template/spec")
                .cloned()
                .unwrap_or(Value::Null);
            if pod.get("hostNetwork") == Some(&json!(true)) && text(&pod, "dnsPolicy").is_empty() {
                patch::set(
                    t,
                    &["template", "spec"],
                    "dnsPolicy",
                    json!("ClusterFirstWithHostNet"),
                );
            }
            let m = match int(task, "minAvailable") {
                Some(m) => m,
                None => {
                    let pp = task.get("partitionPolicy").cloned().unwrap_or(Value::Null);
                    let m = match int(&pp, "minPartitions") {
                        Some(mp) if mp > 0 => mp * int(&pp, "partitionSize").unwrap_or(0),
                        _ => int(task, "replicas").unwrap_or(0),
                    };
                    patch::set(t, &[], "minAvailable", json!(m));
                    m
                }
            };
            sum += m;
            if int(task, "maxRetry").unwrap_or(0) == 0 {
                patch::set(t, &[], "maxRetry", json!(DEFAULT_MAX_RETRY));
            }
        }
        if int(&spec, "minAvailable").unwrap_or(0) == 0 {
            patch::set(&mut out, &["spec"], "minAvailable", json!(sum));
        }
        if let Some(present) = spec.get("plugins").and_then(Value::as_object) {
            let needs_svc = ["tensorflow", "mpi", "pytorch", "ray"]
                .iter()
                .any(|p| present.contains_key(*p));
            if needs_svc && !present.contains_key("svc") {
                patch::set(&mut out, &["spec", "plugins"], "svc", json!([]));
            }
            if present.contains_key("mpi") && !present.contains_key("ssh") {
                patch::set(&mut out, &["spec", "plugins"], "ssh", json!([]));
            }
        }
        out
    }

    /// Every job the tests here mutate, and more shapes: absent, null and explicit fields.
    fn cases() -> Vec<Value> {
        let mut hn = task(None, 2);
        hn["template"]["spec"]["hostNetwork"] = json!(true);
        let mut hn_set = hn.clone();
        hn_set["template"]["spec"]["dnsPolicy"] = json!("Default");
        let mut pp = task(Some("p"), 6);
        pp["partitionPolicy"] =
            json!({"totalPartitions": 3, "partitionSize": 2, "minPartitions": 2});
        let mut pp0 = pp.clone();
        pp0["partitionPolicy"]["minPartitions"] = json!(0);
        let mut full = task(Some("a"), 4);
        full["minAvailable"] = json!(1);
        full["maxRetry"] = json!(7);
        let mut nulls = task(None, 1);
        nulls["name"] = Value::Null;
        nulls["minAvailable"] = Value::Null;
        nulls["maxRetry"] = json!(0);
        let specs = [
            json!({"tasks": [task(None, 2), task(Some("w"), 3)]}),
            json!({"queue": "q", "schedulerName": "other", "maxRetry": 5, "minAvailable": 2, "tasks": [full.clone()]}),
            json!({"maxRetry": 0, "queue": "", "schedulerName": "", "tasks": [task(Some("a"), 1)]}),
            json!({"tasks": [hn, hn_set]}),
            json!({"tasks": [pp, pp0]}),
            json!({"plugins": {"mpi": ["--master=m"]}, "tasks": [task(Some("m"), 1)]}),
            json!({"plugins": {"tensorflow": []}, "tasks": [task(Some("a"), 1)]}),
            json!({"plugins": {"mpi": [], "svc": ["--x"], "ssh": ["--y"]}, "tasks": [task(Some("a"), 1)]}),
            json!({"plugins": {"env": []}, "tasks": [task(Some("a"), 1)]}),
            json!({"plugins": null, "tasks": null}),
            json!({"minAvailable": 0, "tasks": []}),
            json!({"minAvailable": null, "tasks": [task(Some("z"), 0)]}),
            json!({"tasks": [nulls]}),
            json!({"tasks": [task(Some("a/b~c"), -1)]}),
            json!({}),
            Value::Null,
        ];
        let mut out: Vec<Value> = specs.into_iter().map(job).collect();
        let mut no_spec = job(json!({}));
        no_spec.as_object_mut().unwrap().remove("spec");
        out.push(no_spec);
        out
    }

    #[test]
    fn direct_operations_apply_to_the_reference_mutation_and_only_change_something() {
        let cfgs = [
            AdmissionConfig::default(),
            AdmissionConfig {
                scheduler_names: vec!["tephra".into()],
                ..AdmissionConfig::default()
            },
        ];
        for cfg in &cfgs {
            for input in cases() {
                let req = request("Job", "CREATE", input.clone());
                let d = review(&req, cfg);
                let Verdict::Patch(ops) = &d.verdict else {
                    panic!("{input}: {d:?}")
                };
                let want = reference(&input, cfg);
                assert_eq!(applied(&req, &d), want, "{input}");
                // Minimal: no operation when nothing changes, and no operation that changes
                // nothing (each one, applied alone in order, alters the document).
                assert_eq!(ops.is_empty(), want == input, "{input}: {ops:?}");
                crate::testutil::assert_every_op_changes(&input, ops);
            }
        }
    }
}
