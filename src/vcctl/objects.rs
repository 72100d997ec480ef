//! The objects `tephra job|queue` write, built without I/O: the `bus.volcano.sh` Commands
//! exactly as Volcano's `vcctl` makes them, the vcJobs of a `job run -f` file, and the Queue of
//! `queue create`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use super::VcctlError;
use crate::api::bus::{Action, CommandFields};
use crate::api::{Command, Job, Queue, QueueSpec};

/// The namespace `vcctl queue operate` writes queue Commands into (queues have none).
pub const QUEUE_COMMAND_NAMESPACE: &str = "default";

/// A Command asking the controller of `target` to do `action`, as `vcctl` writes it: named
/// `<target>-<action in lower case>-<random>` by the API server, owned by its target (so it goes
/// when the target goes) and naming it in `target`.
pub fn command(target: OwnerReference, namespace: &str, action: Action) -> Command {
    let generate_name = format!("{}-{}-", target.name, action.as_str().to_lowercase());
    let owner = OwnerReference {
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..target
    };
    Command {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: Some(namespace.to_string()),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        },
        spec: CommandFields {
            action: Some(action),
            target: Some(owner),
            reason: None,
            message: None,
        },
    }
}

/// The owner reference of a vcJob (for [`command`]).
pub fn job_ref(job: &Job) -> OwnerReference {
    OwnerReference {
        api_version: crate::api::batch::API_VERSION.to_string(),
        kind: "Job".into(),
        name: job.metadata.name.clone().unwrap_or_default(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        ..OwnerReference::default()
    }
}

/// The owner reference of a Queue (for [`command`]).
pub fn queue_ref(queue: &Queue) -> OwnerReference {
    OwnerReference {
        api_version: crate::api::scheduling::API_VERSION.to_string(),
        kind: "Queue".into(),
        name: queue.metadata.name.clone().unwrap_or_default(),
        uid: queue.metadata.uid.clone().unwrap_or_default(),
        ..OwnerReference::default()
    }
}

/// The vcJobs of a `job run -f` file (YAML or JSON, one or more documents). A document without
/// a namespace gets `namespace`; a document that names another namespace than an explicit
/// `-n` is refused, as kubectl refuses it.
pub fn jobs_from_file(
    text: &str,
    file: &str,
    namespace: &str,
    explicit_namespace: bool,
) -> Result<Vec<Job>, VcctlError> {
    let bad = |reason: String| VcctlError::File {
        file: file.to_string(),
        reason,
    };
    // The parser's message carries a multi-line source excerpt; its first line names the place,
    // after an `error:` of its own that the CLI's prefix already says.
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default().trim();
        bad(first
            .strip_prefix("error:")
            .unwrap_or(first)
            .trim()
            .to_string())
    })?;
    let mut jobs = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        if api_version != crate::api::batch::API_VERSION || kind != "Job" {
            return Err(bad(format!(
                "document {} is {kind:?} of {api_version:?}, not a Job of {:?} (use kubectl apply for other objects)",
                i + 1,
                crate::api::batch::API_VERSION
            )));
        }
        let given = doc.clone();
        let mut job: Job = serde_path_to_error::deserialize(doc).map_err(|e| {
            let at = e.path().to_string();
            match at.as_str() {
                "." => bad(format!("document {}: {}", i + 1, e.inner())),
                _ => bad(format!("document {}: {at}: {}", i + 1, e.inner())),
            }
        })?;
        // As `kubectl apply` (strict field validation): a field the Job has no place for is
        // a mistake to point at, not something to drop in silence.
        let kept = serde_json::to_value(&job).unwrap_or(Value::Null);
        let unknown = unknown_fields(&given, &kept, "");
        if !unknown.is_empty() {
            let list: Vec<String> = unknown.iter().map(|f| format!("{f:?}")).collect();
            return Err(bad(format!(
                "document {}: strict decoding error: unknown field {}",
                i + 1,
                list.join(", unknown field ")
            )));
        }
        if job.metadata.name.as_deref().unwrap_or("").is_empty()
            && job.metadata.generate_name.is_none()
        {
            return Err(bad(format!("document {} has no metadata.name", i + 1)));
        }
        match job.metadata.namespace.as_deref() {
            Some(ns) if explicit_namespace && ns != namespace => {
                return Err(bad(format!(
                    "document {} is in namespace {ns:?}, which does not match -n {namespace:?}",
                    i + 1
                )));
            }
            Some(_) => {}
            None => job.metadata.namespace = Some(namespace.to_string()),
        }
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Err(bad("no vcJob in the file".into()));
    }
    Ok(jobs)
}

/// The fields of `given` (as written) that `kept` (the same document read into its type and
/// written back) lost: the ones the type has no place for, as `spec.tasks[0].fooBar`. A field
/// whose value is null or empty may be left out by the writing and does not count.
fn unknown_fields(given: &Value, kept: &Value, at: &str) -> Vec<String> {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    match (given, kept) {
        (Value::Object(g), Value::Object(k)) => g
            .iter()
            .flat_map(|(key, v)| {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match k.get(key) {
                    Some(kv) => unknown_fields(v, kv, &path),
                    None if empty(v) => Vec::new(),
                    None => vec![path],
                }
            })
            .collect(),
        (Value::Array(g), Value::Array(k)) => g
            .iter()
            .zip(k)
            .enumerate()
            .flat_map(|(i, (gv, kv))| unknown_fields(gv, kv, &format!("{at}[{i}]")))
            .collect(),
        _ => Vec::new(),
    }
}

/// Parses `cpu=4,memory=8Gi` into a resource list.
pub fn parse_resources(s: &str) -> Result<BTreeMap<String, Quantity>, String> {
    let mut out = BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .filter(|(k, v)| !k.trim().is_empty() && !v.trim().is_empty())
            .ok_or_else(|| format!("{pair:?} is not NAME=QUANTITY (e.g. cpu=4,memory=8Gi)"))?;
        if crate::api::quantity::parse(v.trim()).is_none() {
            return Err(format!("{k}={v}: not a quantity (e.g. 4, 500m, 8Gi)"));
        }
        out.insert(k.trim().to_string(), Quantity(v.trim().to_string()));
    }
    Ok(out)
}

/// What `tephra queue create` asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewQueue {
    /// The queue's name.
    pub name: String,
    /// `spec.weight`.
    pub weight: i32,
    /// `spec.parent` (unset: the admission webhook makes it `root`).
    pub parent: Option<String>,
    /// `spec.capability`.
    pub capability: BTreeMap<String, Quantity>,
    /// `spec.reclaimable`.
    pub reclaimable: Option<bool>,
}

/// The Queue object of [`NewQueue`].
pub fn queue(q: &NewQueue) -> Queue {
    Queue::named(
        &q.name,
        QueueSpec {
            weight: Some(q.weight),
            parent: q.parent.clone(),
            capability: (!q.capability.is_empty()).then(|| q.capability.clone()),
            reclaimable: q.reclaimable,
            ..QueueSpec::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_commands_are_written_as_vcctl_writes_them() {
        let job = Job::test("train").with_uid("u-1");
        let cmd = command(job_ref(&job), "team", Action::AbortJob);
        let v = serde_json::to_value(&cmd).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "bus.volcano.sh/v1alpha1",
                "kind": "Command",
                "metadata": {
                    "generateName": "train-abortjob-",
                    "namespace": "team",
                    "ownerReferences": [{
                        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
                        "uid": "u-1", "controller": true, "blockOwnerDeletion": true
                    }]
                },
                "action": "AbortJob",
                "target": {
                    "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
                    "uid": "u-1", "controller": true, "blockOwnerDeletion": true
                }
            })
        );
        assert!(cmd.targets_job());
    }

    #[test]
    fn queue_commands_target_the_queue() {
        let mut q = Queue::test("research");
        q.metadata.uid = Some("q-1".into());
        let cmd = command(queue_ref(&q), QUEUE_COMMAND_NAMESPACE, Action::CloseQueue);
        assert!(cmd.targets_queue());
        assert_eq!(
            cmd.metadata.generate_name.as_deref(),
            Some("research-closequeue-")
        );
        assert_eq!(cmd.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(cmd.target().unwrap().uid, "q-1");
    }

    const TWO: &str = "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: a\nspec:\n  tasks: []\n---\napiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: b\n  namespace: other\nspec: {}\n";

    #[test]
    fn job_files_get_the_namespace_unless_they_name_one() {
        let jobs = jobs_from_file(TWO, "f.yaml", "team", false).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].metadata.namespace.as_deref(), Some("team"));
        assert_eq!(jobs[1].metadata.namespace.as_deref(), Some("other"));
        let err = jobs_from_file(TWO, "f.yaml", "team", true)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "f.yaml: document 2 is in namespace \"other\", which does not match -n \"team\""
        );
    }

    #[test]
    fn job_files_with_other_kinds_or_bad_fields_are_refused_by_name() {
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n";
        let err = jobs_from_file(cm, "cm.yaml", "default", false)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cm.yaml: document 1 is \"ConfigMap\" of \"v1\""),
            "{err}"
        );
        let bad = "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: x\nspec:\n  minAvailable: lots\n";
        let err = jobs_from_file(bad, "b.yaml", "default", false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("spec.minAvailable"), "{err}");
        let typo = "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: x\n  labels: {}\nspec:\n  fooBar: 1\n  minAvailable: 1\n  tasks:\n  - name: t\n    replicas: 1\n    template:\n      spec:\n        containers:\n        - name: c\n          image: busybox\n          imagePullPolicyy: Always\n";
        let err = jobs_from_file(typo, "t.yaml", "default", false)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "t.yaml: document 1: strict decoding error: unknown field \"spec.fooBar\", unknown field \"spec.tasks[0].template.spec.containers[0].imagePullPolicyy\""
        );
        let err = jobs_from_file("", "e.yaml", "default", false)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "e.yaml: no vcJob in the file");
        let err = jobs_from_file(": : :", "y.yaml", "default", false).unwrap_err();
        assert!(matches!(err, VcctlError::File { .. }));
        // "tephra: error: " comes first: the parser's own "error:" is not said again.
        let err = jobs_from_file("x: [", "b.yaml", "default", false)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("b.yaml: line 1 column ") && !err.contains("error"),
            "{err}"
        );
    }

    #[test]
    fn resources_parse_and_refuse_bad_quantities() {
        let r = parse_resources("cpu=4, memory=8Gi").unwrap();
        assert_eq!(r["cpu"].0, "4");
        assert_eq!(r["memory"].0, "8Gi");
        assert!(parse_resources("cpu").is_err());
        assert!(parse_resources("cpu=lots").is_err());
        assert!(parse_resources("").unwrap().is_empty());
    }

    #[test]
    fn new_queue_object() {
        let q = queue(&NewQueue {
            name: "q".into(),
            weight: 3,
            reclaimable: Some(false),
            ..NewQueue::default()
        });
        let v = serde_json::to_value(&q).unwrap();
        assert_eq!(v["spec"]["weight"], 3);
        // As `kubectl create` makes it: the CRD's own annotations stay on the CRD.
        assert!(v["metadata"].get("annotations").is_none(), "{v}");
        assert_eq!(v["spec"]["reclaimable"], false);
        assert!(v["spec"].get("capability").is_none());
    }
}
