//! Tests of the Volcano API types (`tephra::api`) and of the CRDs generated from them.
//!
//! * round-trips of our own fixtures (tests/data/api/, every field of every kind) through
//!   JSON and YAML, and of every Job/Queue/PodGroup in Volcano's examples;
//! * the CRDs: the committed `manifests/crds/*.yaml` must equal what `tephra crds` renders,
//!   must carry every field path of Volcano's CRDs with the same type, the same names,
//!   scope, subresources, printer columns, defaults and bounds, and stay under 256 KiB.
//!
//! When the types change, regenerate the committed CRDs with
//!
//! ```text
//! TEPHRA_UPDATE_CRDS=1 cargo test --test it api_types::crd
//! ```
//!
//! and commit `manifests/crds/`.

use crate::common;
use std::collections::{BTreeMap, BTreeSet};

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tephra::api::batch::{Action, Event, JobPhase, NumaPolicy};
use tephra::api::scheduling::{NetworkTopologyMode, QueueState};
use tephra::api::{Command, Job, PodGroup, PodGroupSpec, Queue, crds};

const MAX_CRD_FILE_BYTES: usize = 256 * 1024;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn data(name: &str) -> PathBuf {
    repo().join("tests/data/api").join(name)
}

/// Volcano's own CRDs (`crds`) or examples (`examples`) when this machine has them (see
/// `common`); `None` after one `skipped:` line naming `test` otherwise.
fn volcano(dir: &str, test: &str) -> Option<PathBuf> {
    common::volcano_or_skip(&format!("volcano-{dir}"), test)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every YAML document of a file, as JSON values (empty documents dropped).
fn yaml_docs(path: &Path) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&read(path))
        .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn yaml_doc(path: &Path) -> Value {
    let mut docs = yaml_docs(path);
    assert_eq!(docs.len(), 1, "{} holds one document", path.display());
    docs.remove(0)
}

// -------------------------------------------------------------------------------------------
// Comparing values
// -------------------------------------------------------------------------------------------

/// Differences between what was read (`want`) and what was written back (`got`).
///
/// Strict unless `lenient`: then two things Go's own decoder also normalises are accepted, a
/// `null` written back as nothing, and a number written back as the same text in a string
/// (a resource quantity `cpu: 1` comes back as `cpu: "1"`, as it does from Volcano).
fn diff(want: &Value, got: &Value, path: &str, lenient: bool, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => diff(wv, gv, &p, lenient, out),
                    None if lenient && wv.is_null() => {}
                    None => out.push(format!("{p}: lost (was {wv})")),
                }
            }
            for (k, gv) in g {
                if !w.contains_key(k) {
                    out.push(format!("{path}.{k}: gained {gv}"));
                }
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                out.push(format!("{path}: {} items became {}", w.len(), g.len()));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                diff(wv, gv, &format!("{path}[{i}]"), lenient, out);
            }
        }
        (Value::Number(n), Value::String(s)) if lenient && n.to_string() == *s => {}
        (w, g) if w == g => {}
        (w, g) => out.push(format!("{path}: {w} became {g}")),
    }
}

fn assert_same(want: &Value, got: &Value, lenient: bool, what: &str) {
    let mut out = Vec::new();
    diff(want, got, "", lenient, &mut out);
    assert!(
        out.is_empty(),
        "{what} changed on the round-trip:\n  {}",
        out.join("\n  ")
    );
}

/// Reads `value` as `T` and writes it back through JSON and through YAML; both must equal the
/// input. Returns the typed object.
fn round_trip<T: DeserializeOwned + Serialize>(value: &Value, lenient: bool, what: &str) -> T {
    let typed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{what} does not deserialize: {e}"));

    let json = serde_json::to_string(&typed).unwrap();
    let again: T =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{what} JSON re-read: {e}"));
    let json_value: Value = serde_json::from_str(&serde_json::to_string(&again).unwrap()).unwrap();
    assert_same(value, &json_value, lenient, &format!("{what} (JSON)"));

    let yaml = serde_saphyr::to_string(&typed).unwrap();
    let from_yaml: T = serde_saphyr::from_str(&yaml)
        .unwrap_or_else(|e| panic!("{what} YAML re-read: {e}\n{yaml}"));
    let yaml_value = serde_json::to_value(&from_yaml).unwrap();
    assert_same(value, &yaml_value, lenient, &format!("{what} (YAML)"));
    typed
}

// -------------------------------------------------------------------------------------------
// Round-trips of our fixtures
// -------------------------------------------------------------------------------------------

#[test]
fn job_fixture_round_trips_and_reads_as_written() {
    let value = yaml_doc(&data("job-full.yaml"));
    let job: Job = round_trip(&value, false, "job-full.yaml");

    assert_eq!(job.metadata.name.as_deref(), Some("full-job"));
    assert_eq!(job.spec.queue(), "gpu-queue");
    // An explicit `maxRetry: 0` is kept as written; reading it applies Volcano's default.
    assert_eq!(job.spec.max_retry, Some(0));
    assert_eq!(job.spec.max_retry(), 3);
    assert_eq!(job.total_replicas(), 5);
    assert_eq!(job.tasks()[1].min_available(), 2);
    assert_eq!(job.tasks()[0].topology_policy, Some(NumaPolicy::BestEffort));
    let policies = job.spec.policies();
    assert_eq!(policies[0].event, Some(Event::PodEvicted));
    assert_eq!(policies[1].action, Some(Action::AbortJob));
    assert_eq!(
        policies[1].all_events().cloned().collect::<Vec<_>>(),
        vec![Event::PodFailed, Event::TaskFailed]
    );
    let timeout = policies[1].timeout.as_ref().unwrap().to_std().unwrap();
    assert_eq!(timeout, std::time::Duration::from_secs(300));
    assert_eq!(policies[2].exit_code, Some(137));
    assert_eq!(job.phase(), Some(&JobPhase::Running));
    let status = job.status.as_ref().unwrap();
    assert_eq!(
        status.conditions.as_ref().unwrap()[1].status,
        Some(JobPhase::Running)
    );
    assert_eq!(
        status.task_status_count.as_ref().unwrap()["worker"]
            .phase
            .as_ref()
            .unwrap()["Pending"],
        1
    );
    assert_eq!(
        job.spec.network_topology.as_ref().unwrap().mode,
        Some(NetworkTopologyMode::Soft)
    );
}

#[test]
fn podgroup_fixture_round_trips() {
    let value = yaml_doc(&data("podgroup-full.yaml"));
    let pg: PodGroup = round_trip(&value, false, "podgroup-full.yaml");
    assert_eq!(pg.spec.min_member(), 3);
    assert_eq!(pg.spec.queue(), "gpu-queue");
    assert_eq!(pg.spec.min_resources.as_ref().unwrap()["memory"].0, "4Gi");
    assert_eq!(pg.phase().as_str(), "Running");
    let cond = &pg.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!(
        cond.transition_id.as_deref(),
        Some("6f1b6e3c-2c1a-4b43-9f3c-1d2e3f4a5b6c")
    );
}

#[test]
fn queue_fixture_round_trips() {
    let value = yaml_doc(&data("queue-full.yaml"));
    let q: Queue = round_trip(&value, false, "queue-full.yaml");
    assert_eq!(q.spec.weight(), 8);
    assert_eq!(q.spec.type_.as_deref(), Some("gpu"));
    assert!(q.is_open());
    assert_eq!(q.state(), Some(&QueueState::Open));
}

#[test]
fn command_fixture_round_trips_with_top_level_fields() {
    let value = yaml_doc(&data("command-full.yaml"));
    let cmd: Command = round_trip(&value, false, "command-full.yaml");
    assert_eq!(cmd.action(), Some(&Action::AbortJob));
    assert!(cmd.targets_job());
    assert!(!cmd.targets_queue());
    assert_eq!(cmd.spec.reason.as_deref(), Some("UserRequest"));
    // No `spec` on the wire: the fields sit at the top level, as in Volcano.
    let written = serde_json::to_value(&cmd).unwrap();
    assert!(written.get("spec").is_none());
    assert_eq!(written["action"], "AbortJob");
    assert_eq!(written["target"]["kind"], "Job");
}

#[test]
fn unknown_enum_values_from_a_newer_volcano_round_trip() {
    let value = yaml_doc(&data("job-unknown-values.yaml"));
    let job: Job = round_trip(&value, false, "job-unknown-values.yaml");
    let policy = &job.spec.policies()[0];
    assert_eq!(policy.event, Some(Event::Other("PodPreempted".into())));
    assert_eq!(policy.action, Some(Action::Other("SuspendJob".into())));
    assert!(!policy.action.as_ref().unwrap().is_known());
    assert_eq!(job.phase().map(|p| p.as_str()), Some("Suspended"));
    assert_eq!(
        job.tasks()[0].topology_policy.as_ref().unwrap(),
        "numa-aware"
    );
}

/// Fields the CRD requires are still optional in Rust: a job missing them reaches the
/// webhook as an object it can read and reject with a reason, and round-trips unchanged.
#[test]
fn jobs_missing_crd_required_fields_still_parse() {
    let value = serde_json::json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "volumes": [{"volumeClaimName": "pvc"}],
            "tasks": [{"name": "t", "partitionPolicy": {"minPartitions": 1}}]
        },
        "status": {"conditions": [{"lastTransitionTime": "2026-01-02T03:04:05Z"}]}
    });
    let job: Job = round_trip(&value, false, "job without required fields");
    assert_eq!(job.spec.volumes.as_ref().unwrap()[0].mount_path(), "");
    let partition = job.tasks()[0].partition_policy.as_ref().unwrap();
    assert_eq!(
        (partition.total_partitions(), partition.partition_size()),
        (0, 0)
    );
}

#[test]
fn plugin_without_arguments_reads_as_no_arguments() {
    let job: Job = serde_saphyr::from_str(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\nspec:\n  plugins:\n    ssh:\n    svc: []\n",
    )
    .unwrap();
    let plugins = job.spec.plugins.unwrap();
    assert_eq!(plugins["ssh"], Vec::<String>::new());
    assert_eq!(plugins["svc"], Vec::<String>::new());
}

#[test]
fn builders_make_the_objects_they_say() {
    let job = Job::test("j")
        .in_namespace("ns")
        .in_queue("q")
        .task("a", 2)
        .task("b", 3)
        .min_available(4)
        .policy(Event::PodFailed, Action::RestartJob)
        .plugin("svc", &[]);
    assert_eq!(job.total_replicas(), 5);
    assert_eq!(job.spec.queue(), "q");
    assert_eq!(job.spec.task("b").unwrap().replicas(), 3);
    assert_eq!(job.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(job.pod_group_name(), None, "no uid yet");
    let job = job.with_uid("1234-abcd");
    assert_eq!(job.pod_group_name().as_deref(), Some("j-1234-abcd"));
    assert_eq!(tephra::api::batch::pod_name("j", "a", 1), "j-a-1");
    assert_eq!(
        tephra::api::keys::workload_pod_group_name(Some("rs-uid"), "pod-uid"),
        "podgroup-rs-uid"
    );
    assert_eq!(
        tephra::api::keys::workload_pod_group_name(None, "pod-uid"),
        "podgroup-pod-uid"
    );
    let value = serde_json::to_value(&job).unwrap();
    assert_eq!(value["apiVersion"], "batch.volcano.sh/v1alpha1");
    assert_eq!(
        value["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        "1"
    );
    let _: Job = round_trip(&value, false, "built job");

    let cmd = Command::for_queue("c", "default", "q", "uid-1", Action::CloseQueue);
    assert!(cmd.targets_queue());
    let _: Command = round_trip(&serde_json::to_value(&cmd).unwrap(), false, "built command");
}

/// Every field our schema declares (outside the embedded Kubernetes types) appears in our
/// fixture of that kind, so the round-trip tests really cover every field.
#[test]
fn fixtures_cover_every_field_of_the_schema() {
    for (fixture, crd) in [
        ("job-full.yaml", "jobs.batch.volcano.sh"),
        ("podgroup-full.yaml", "podgroups.scheduling.volcano.sh"),
        ("queue-full.yaml", "queues.scheduling.volcano.sh"),
        ("command-full.yaml", "commands.bus.volcano.sh"),
    ] {
        let schema = our_schema(crd);
        let mut declared = BTreeSet::new();
        schema_paths_until_k8s(&schema, String::new(), &mut declared);
        let value = yaml_doc(&data(fixture));
        let mut present = BTreeSet::new();
        present_paths(&schema, &value, String::new(), &mut present);
        let missing: Vec<_> = declared.difference(&present).collect();
        assert!(missing.is_empty(), "{fixture} does not cover {missing:?}");
    }
}

/// Schema paths, not descending into embedded Kubernetes types (whose own round-trip is
/// k8s-openapi's business) nor into `metadata`.
fn schema_paths_until_k8s(schema: &Value, path: String, out: &mut BTreeSet<String>) {
    const K8S: &[&str] = &[
        ".metadata",
        "template",
        "volumeClaim",
        "labelSelector",
        "target",
    ];
    if !path.is_empty() {
        out.insert(path.clone());
    }
    if K8S.iter().any(|k| path.ends_with(k)) {
        return;
    }
    for (child, sub) in children(schema) {
        schema_paths_until_k8s(sub, format!("{path}{child}"), out);
    }
}

fn present_paths(schema: &Value, value: &Value, path: String, out: &mut BTreeSet<String>) {
    if !path.is_empty() {
        out.insert(path.clone());
    }
    if let (Some(props), Some(obj)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for (k, sub) in props {
            if let Some(v) = obj.get(k) {
                present_paths(sub, v, format!("{path}.{k}"), out);
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), value.as_array()) {
        for v in arr {
            present_paths(items, v, format!("{path}[]"), out);
        }
    }
    if let (Some(ap), Some(obj)) = (
        schema.get("additionalProperties").filter(|a| a.is_object()),
        value.as_object(),
    ) {
        for v in obj.values() {
            present_paths(ap, v, format!("{path}{{}}"), out);
        }
    }
}

// -------------------------------------------------------------------------------------------
// Volcano's examples
// -------------------------------------------------------------------------------------------

#[test]
fn every_volcano_example_job_queue_and_podgroup_round_trips() {
    let Some(dir) = volcano(
        "examples",
        "every_volcano_example_job_queue_and_podgroup_round_trips",
    ) else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();

    // Fields of Volcano's examples that are not Kubernetes fields at all (typos in the
    // examples): the API server prunes them and Go's decoder drops them, so tephra may too.
    const NOT_KUBERNETES_FIELDS: &[&str] = &[
        ".spec.tasks[0].template.spec.priorityClass",
        ".spec.tasks[1].template.spec.priorityClass",
    ];

    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        for (i, doc) in yaml_docs(file).iter().enumerate() {
            let what = format!("{name} document {i}");
            let mut doc = doc.clone();
            if name == "kubecon-2019-china__task-priority__elastic-job.yaml" {
                for path in NOT_KUBERNETES_FIELDS {
                    remove_path(&mut doc, path);
                }
            }
            let doc = &doc;
            let api_version = doc["apiVersion"].as_str().unwrap_or_default();
            let kind = doc["kind"].as_str().unwrap_or_default();
            match (api_version, kind) {
                ("batch.volcano.sh/v1alpha1", "Job") => {
                    let _: Job = round_trip(doc, true, &what);
                    *seen.entry("Job").or_default() += 1;
                }
                ("scheduling.volcano.sh/v1beta1", "Queue") => {
                    let _: Queue = round_trip(doc, true, &what);
                    *seen.entry("Queue").or_default() += 1;
                }
                ("scheduling.volcano.sh/v1beta1", "PodGroup") => {
                    let _: PodGroup = round_trip(doc, true, &what);
                    *seen.entry("PodGroup").or_default() += 1;
                }
                // The retired group Volcano's PodGroup grew from (kube-batch): same spec.
                ("scheduling.incubator.k8s.io/v1alpha1", "PodGroup") => {
                    let _: PodGroupSpec = round_trip(&doc["spec"], true, &what);
                    *seen.entry("incubator PodGroup").or_default() += 1;
                }
                ("bus.volcano.sh/v1alpha1", "Command") => {
                    let _: Command = round_trip(doc, true, &what);
                    *seen.entry("Command").or_default() += 1;
                }
                _ => {}
            }
        }
    }
    // The examples hold 24 Jobs, 5 Queues and 1 (kube-batch) PodGroup: none may be skipped.
    assert_eq!(seen.get("Job"), Some(&24), "{seen:?}");
    assert_eq!(seen.get("Queue"), Some(&5), "{seen:?}");
    assert_eq!(seen.get("incubator PodGroup"), Some(&1), "{seen:?}");
}

/// Removes `.a.b[2].c` from `value` (the path must exist: the example must still hold it).
fn remove_path(value: &mut Value, path: &str) {
    let pointer: String = path
        .replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|s| format!("/{s}"))
        .collect();
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    let removed = value
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .and_then(|o| o.remove(last));
    assert!(removed.is_some(), "{path} is not in the example any more");
}

// -------------------------------------------------------------------------------------------
// kube::Resource
// -------------------------------------------------------------------------------------------

#[test]
fn resources_have_volcanos_paths_for_kube_api() {
    assert_eq!(
        Job::url_path(&(), Some("ns")),
        "/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs"
    );
    assert_eq!(
        PodGroup::url_path(&(), Some("ns")),
        "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups"
    );
    assert_eq!(
        Queue::url_path(&(), None),
        "/apis/scheduling.volcano.sh/v1beta1/queues"
    );
    assert_eq!(
        Command::url_path(&(), Some("ns")),
        "/apis/bus.volcano.sh/v1alpha1/namespaces/ns/commands"
    );
    assert_eq!(Command::kind(&()), "Command");

    // These must type-check: every kind works with kube::Api (Queue is cluster scoped).
    fn _typecheck(client: kube::Client) {
        let _: kube::Api<Job> = kube::Api::namespaced(client.clone(), "ns");
        let _: kube::Api<PodGroup> = kube::Api::namespaced(client.clone(), "ns");
        let _: kube::Api<Queue> = kube::Api::all(client.clone());
        let _: kube::Api<Command> = kube::Api::namespaced(client, "ns");
    }
}

// -------------------------------------------------------------------------------------------
// CRDs
// -------------------------------------------------------------------------------------------

fn manifests_dir() -> PathBuf {
    repo().join("manifests/crds")
}

#[test]
fn crd_manifests_match_what_tephra_crds_renders() {
    let files = crds::manifest_files().unwrap();
    if std::env::var_os("TEPHRA_UPDATE_CRDS").is_some() {
        crds::write_manifests(&manifests_dir()).unwrap();
    }
    let expected: BTreeSet<String> = files.iter().map(|(n, _)| n.clone()).collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(manifests_dir())
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        on_disk, expected,
        "manifests/crds/ holds other files than `tephra crds` renders; regenerate with \
         `TEPHRA_UPDATE_CRDS=1 cargo test --test it api_types::crd` (and delete stale files)"
    );
    for (name, text) in &files {
        let committed = read(&manifests_dir().join(name));
        assert!(
            committed == *text,
            "manifests/crds/{name} is out of date with the types in src/api/; regenerate with \
             `TEPHRA_UPDATE_CRDS=1 cargo test --test it api_types::crd` and commit it"
        );
    }

    // The stream `tephra crds` prints is the files, and reads back as the same CRDs.
    let stream = crds::render_yaml().unwrap();
    assert_eq!(
        stream,
        files.iter().map(|(_, t)| t.as_str()).collect::<String>()
    );
    let parsed: Vec<CustomResourceDefinition> = serde_saphyr::from_str_multiple(&stream).unwrap();
    assert_eq!(parsed, crds::all());
}

#[test]
fn crd_files_fit_client_side_kubectl_apply() {
    for (name, text) in crds::manifest_files().unwrap() {
        assert!(
            text.len() < MAX_CRD_FILE_BYTES,
            "{name} is {} bytes, over the 256 KiB kubectl's last-applied annotation can hold",
            text.len()
        );
    }
}

fn our_crd(name: &str) -> CustomResourceDefinition {
    crds::all()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no CRD {name}"))
}

fn our_schema(name: &str) -> Value {
    let crd = our_crd(name);
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    serde_json::to_value(schema).unwrap()
}

/// Volcano's CRDs, or `None` (after the skip line for `test`) without the fixtures.
fn volcano_crds(test: &str) -> Option<Vec<Value>> {
    let dir = volcano("crds", test)?;
    let mut out = Vec::new();
    for file in [
        "batch.volcano.sh_jobs.yaml",
        "scheduling.volcano.sh_podgroups.yaml",
        "scheduling.volcano.sh_queues.yaml",
        "bus.volcano.sh_commands.yaml",
    ] {
        out.push(yaml_doc(&dir.join(file)));
    }
    Some(out)
}

/// `(path suffix, child schema)` of a schema node: `.name` for properties, `[]` for items,
/// `{}` for additionalProperties.
fn children(schema: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        out.extend(props.iter().map(|(k, v)| (format!(".{k}"), v)));
    }
    if let Some(items) = schema.get("items") {
        out.push(("[]".into(), items));
    }
    if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        out.push(("{}".into(), ap));
    }
    out
}

fn all_paths<'a>(schema: &'a Value, path: String, out: &mut BTreeMap<String, &'a Value>) {
    for (child, sub) in children(schema) {
        let p = format!("{path}{child}");
        all_paths(sub, p.clone(), out);
        out.insert(p, sub);
    }
    if path.is_empty() {
        out.insert(String::new(), schema);
    }
}

/// Within the embedded Kubernetes types we need the same shape, not the same validations.
fn in_embedded_k8s_type(path: &str) -> bool {
    path.contains(".template.") || path.contains(".volumeClaim.")
}

#[test]
fn crds_have_every_field_of_volcanos_with_the_same_type_and_rules() {
    let Some(crds) = volcano_crds("crds_have_every_field_of_volcanos_with_the_same_type_and_rules")
    else {
        return;
    };
    let mut problems = Vec::new();
    for volcano in crds {
        let name = volcano["metadata"]["name"].as_str().unwrap().to_string();
        let ours = our_schema(&name);
        let theirs = &volcano["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let mut their_paths = BTreeMap::new();
        all_paths(theirs, String::new(), &mut their_paths);
        let mut our_paths = BTreeMap::new();
        all_paths(&ours, String::new(), &mut our_paths);
        assert!(
            their_paths.len() > 5,
            "{name}: Volcano's schema was not read"
        );

        for (path, t) in &their_paths {
            let Some(o) = our_paths.get(path) else {
                problems.push(format!("{name}: {path} missing"));
                continue;
            };
            if t.get("type") != o.get("type") {
                problems.push(format!(
                    "{name}: {path} has type {:?}, Volcano's {:?}",
                    o.get("type"),
                    t.get("type")
                ));
            }
            if t.get("x-kubernetes-int-or-string").is_some()
                && o.get("x-kubernetes-int-or-string") != Some(&Value::Bool(true))
            {
                problems.push(format!("{name}: {path} is not int-or-string"));
            }
            if in_embedded_k8s_type(path) {
                continue;
            }
            for rule in [
                "default",
                "minimum",
                "maximum",
                "maxLength",
                "minLength",
                "minItems",
                "pattern",
            ] {
                let (tv, ov) = (t.get(rule), o.get(rule));
                let same = match (tv, ov) {
                    (Some(Value::Number(a)), Some(Value::Number(b))) => a.as_f64() == b.as_f64(),
                    (a, b) => a == b,
                };
                if tv.is_some() && !same {
                    problems.push(format!("{name}: {path} {rule} is {ov:?}, Volcano's {tv:?}"));
                }
            }
            if let Some(te) = t.get("enum")
                && o.get("enum") != Some(te)
            {
                problems.push(format!(
                    "{name}: {path} enum is {:?}, Volcano's {te}",
                    o.get("enum")
                ));
            }
            // Requiring more than Volcano would reject objects Volcano accepts. The one
            // exception is the root `spec`: tephra's types cannot read a Job without one.
            let their_req: BTreeSet<&str> = req(t);
            for r in req(o) {
                let root_spec = path.is_empty() && r == "spec";
                if !their_req.contains(r) && !root_spec {
                    problems.push(format!("{name}: {path} requires {r}, Volcano's does not"));
                }
            }
            for r in their_req {
                if !req(o).contains(r) {
                    problems.push(format!(
                        "{name}: {path} does not require {r}, Volcano's does"
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "CRD schema differs from Volcano's:\n  {}",
        problems.join("\n  ")
    );
}

fn req(schema: &Value) -> BTreeSet<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn crds_have_volcanos_names_scope_subresources_and_columns() {
    let Some(crds) = volcano_crds("crds_have_volcanos_names_scope_subresources_and_columns") else {
        return;
    };
    for volcano in crds {
        let name = volcano["metadata"]["name"].as_str().unwrap().to_string();
        let ours = serde_json::to_value(our_crd(&name)).unwrap();
        for field in ["group", "names", "scope"] {
            assert_eq!(
                ours["spec"][field], volcano["spec"][field],
                "{name}: spec.{field}"
            );
        }
        assert_eq!(
            ours["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{name}: helm keep annotation"
        );
        let (ov, tv) = (&ours["spec"]["versions"], &volcano["spec"]["versions"]);
        assert_eq!(
            ov.as_array().unwrap().len(),
            tv.as_array().unwrap().len(),
            "{name}: versions"
        );
        for field in ["name", "served", "storage", "subresources"] {
            assert_eq!(ov[0][field], tv[0][field], "{name}: versions[0].{field}");
        }
        let columns = |v: &Value| -> Vec<Value> {
            v["additionalPrinterColumns"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|mut c| {
                    c.as_object_mut().unwrap().remove("description");
                    c
                })
                .collect()
        };
        // Volcano's columns, in order, with tephra's additions (the Queue's STATE) between.
        let ours = columns(&ov[0]);
        let mut rest = ours.iter();
        for c in columns(&tv[0]) {
            assert!(
                rest.any(|o| *o == c),
                "{name}: printer column {c} missing or out of order in {ours:?}"
            );
        }
    }
}

/// Every node of our schemas is structural: it has a type (or is int-or-string / preserves
/// unknown fields), and objects and arrays say what they hold.
#[test]
fn crd_schemas_are_structural() {
    for crd in crds::all() {
        let name = crd.metadata.name.clone().unwrap();
        let schema = our_schema(&name);
        let mut paths = BTreeMap::new();
        all_paths(&schema, String::new(), &mut paths);
        for (path, node) in paths {
            let typed = node.get("type").is_some()
                || node.get("x-kubernetes-int-or-string").is_some()
                || node.get("x-kubernetes-preserve-unknown-fields").is_some();
            assert!(typed, "{name}: {path} has no type: {node}");
            assert!(
                node.get("nullable").is_none(),
                "{name}: {path} is nullable (nulls must be pruned and defaulted as in Volcano)"
            );
            for forbidden in ["$ref", "oneOf", "title"] {
                assert!(
                    node.get(forbidden).is_none(),
                    "{name}: {path} has {forbidden}"
                );
            }
            if node.get("type") == Some(&Value::from("array")) {
                assert!(
                    node.get("items").is_some(),
                    "{name}: {path} array without items"
                );
            }
        }
    }
}
