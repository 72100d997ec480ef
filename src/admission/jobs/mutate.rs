//! `/jobs/mutate` (CREATE): Volcano's vcJob defaults.
//!
//! In Volcano's order: `queue: default`, the served `schedulerName`, `maxRetry: 3` (an
//! explicit 0 too), per task (name `default{i}`, `ClusterFirstWithHostNet` for host-network
//! pods without a DNS policy, `minAvailable` from the partition policy or `replicas`,
//! `maxRetry: 3`), the job `minAvailable` as the sum of the tasks' (after their defaults), and
//! the plugins the distributed-framework plugins depend on (`svc`, and `ssh` for `mpi`).
//! The changes are made on the request's JSON so fields tephra does not model pass untouched.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use crate::admission::review::{Decision, Operation, Request};
use crate::admission::{AdmissionConfig, decode, patch, working_copy};
use crate::api::batch::DEFAULT_MAX_RETRY;
use crate::api::keys::{DEFAULT_QUEUE, DEFAULT_TASK_SPEC, plugins};

/// The decision for one `/jobs/mutate` request.
pub fn review(req: &Request, cfg: &AdmissionConfig) -> Decision {
    if req.operation != Operation::Create {
        return Decision::bad_request("expect operation to be 'CREATE'");
    }
    let job: DefaultsView = match decode(req) {
        Ok(j) => j,
        Err(d) => return d,
    };
    let mut obj = working_copy(req);
    apply_defaults(&job, &mut obj, cfg);
    Decision::mutate(obj)
}

/// The parts of a vcJob the defaults depend on. Decoding only these (serde skips the rest, pod
/// templates included) costs a fraction of decoding a whole [`crate::api::Job`], which is most
/// of this webhook's time; the whole object is checked by `/jobs/validate`.
#[derive(Debug, Default, Deserialize)]
pub struct DefaultsView {
    #[serde(default)]
    spec: SpecView,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecView {
    queue: Option<String>,
    scheduler_name: Option<String>,
    max_retry: Option<i32>,
    min_available: Option<i32>,
    tasks: Option<Vec<TaskView>>,
    plugins: Option<BTreeMap<String, IgnoredAny>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskView {
    name: Option<String>,
    replicas: Option<i32>,
    min_available: Option<i32>,
    max_retry: Option<i32>,
    partition_policy: Option<PartitionView>,
    template: Option<TemplateView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartitionView {
    partition_size: Option<i32>,
    min_partitions: Option<i32>,
}

#[derive(Debug, Default, Deserialize)]
struct TemplateView {
    spec: Option<PodView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodView {
    host_network: Option<bool>,
    dns_policy: Option<String>,
}

/// Writes the defaults of `job` into its JSON form `obj`.
pub fn apply_defaults(job: &DefaultsView, obj: &mut Value, cfg: &AdmissionConfig) {
    let spec = &job.spec;
    if spec.queue.as_deref().unwrap_or_default().is_empty() {
        patch::set(obj, &["spec"], "queue", json!(DEFAULT_QUEUE));
    }
    if spec
        .scheduler_name
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        patch::set(
            obj,
            &["spec"],
            "schedulerName",
            json!(cfg.default_scheduler()),
        );
    }
    if spec.max_retry.unwrap_or(0) == 0 {
        patch::set(obj, &["spec"], "maxRetry", json!(DEFAULT_MAX_RETRY));
    }

    let mut sum_min_available: i64 = 0;
    for (i, task) in spec.tasks.iter().flatten().enumerate() {
        let Some(t) = obj
            .pointer_mut(&format!("/spec/tasks/{i}"))
            .filter(|t| t.is_object())
        else {
            continue;
        };
        if task.name.as_deref().unwrap_or_default().is_empty() {
            patch::set(t, &[], "name", json!(format!("{DEFAULT_TASK_SPEC}{i}")));
        }
        if let Some(pod) = task.template.as_ref().and_then(|t| t.spec.as_ref())
            && pod.host_network == Some(true)
            && pod.dns_policy.as_deref().unwrap_or_default().is_empty()
        {
            patch::set(
                t,
                &["template", "spec"],
                "dnsPolicy",
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
                patch::set(t, &[], "minAvailable", json!(m));
                m
            }
        };
        sum_min_available += i64::from(min_available);
        if task.max_retry.unwrap_or(0) == 0 {
            patch::set(t, &[], "maxRetry", json!(DEFAULT_MAX_RETRY));
        }
    }

    if spec.min_available.unwrap_or(0) == 0 {
        let total = i32::try_from(sum_min_available).unwrap_or(i32::MAX);
        patch::set(obj, &["spec"], "minAvailable", json!(total));
    }

    if let Some(present) = spec.plugins.as_ref() {
        let needs_svc = [
            plugins::TENSORFLOW,
            plugins::MPI,
            plugins::PYTORCH,
            plugins::RAY,
        ]
        .iter()
        .any(|p| present.contains_key(*p));
        if needs_svc && !present.contains_key(plugins::SVC) {
            patch::set(obj, &["spec", "plugins"], plugins::SVC, json!([]));
        }
        if present.contains_key(plugins::MPI) && !present.contains_key(plugins::SSH) {
            patch::set(obj, &["spec", "plugins"], plugins::SSH, json!([]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::review::Verdict;
    use crate::admission::testutil::request;

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
        match mutate_with(spec, &AdmissionConfig::default()).verdict {
            Verdict::Mutate(v) => v["spec"].clone(),
            other => panic!("{other:?}"),
        }
    }

    fn mutate_with(spec: Value, cfg: &AdmissionConfig) -> Decision {
        review(&request("Job", "CREATE", job(spec)), cfg)
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
        let d = mutate_with(json!({"tasks": [task(Some("a"), 1)]}), &cfg);
        let Verdict::Mutate(v) = d.verdict else {
            panic!()
        };
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
}
