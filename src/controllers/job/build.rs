//! The objects the job controller makes for a job, and the readiness test that gates pod
//! creation. Pure code: the controller's edge looks up what these functions need (pods in the
//! cache, PriorityClass values), calls them, and writes the results.
//!
//! ```text
//!   Job ──┬─▶ build_pod(task, i)        pod {job}-{task}-{i}   (spec §8)
//!         ├─▶ build_pod_group           PodGroup {job}-{uid}   (spec §9 create)
//!         │     └─ min_resources        priority-ordered gang resources
//!         ├─▶ pod_group_update(pg)      merge patch of spec    (spec §9 update)
//!         ├─▶ generated_claim_name(i)   {job}-pvc-{hash}       (spec §10)
//!         ├─▶ build_pvc                 PVC owned by the job
//!         └─▶ dependencies_ready(task)  dependsOn gate         (spec §7)
//! ```
//!
//! Departures from Volcano, each for the same reason (a retried or repeated sync must reach the
//! same result): generated volume and claim names come from hashes instead of random draws,
//! and tasks of equal priority keep their declaration order when `minResources` is computed.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

use fnv::FnvHasher;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;
use serde_json::{Map, Value};

use crate::api::batch::{Iteration, PartitionPolicySpec, VolumeSpec, pod_name};
use crate::api::scheduling::{NetworkTopologyMode, NetworkTopologySpec, SubGroupPolicySpec};
use crate::api::{Job, PodGroup, PodGroupSpec, ResourceList, TaskSpec, keys};
use crate::controllers::podgroup::resources::{self, Amounts};

/// Length of the hash suffix of generated volume and claim names (Volcano's random suffix
/// has the same length and alphabet).
const SUFFIX_LEN: usize = 12;

/// The alphabet of generated suffixes: digits and lower-case letters, valid in DNS labels.
const SUFFIX_ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// The job's name, empty when it has none (an object from the API always has one).
fn job_name(job: &Job) -> &str {
    job.metadata.name.as_deref().unwrap_or_default()
}

/// The PodGroup name pods are stamped with: `{job}-{uid}`. A job without a uid (never the case
/// for one read from the API) gets `{job}-`, which is what Volcano's string concatenation
/// gives.
fn group_name(job: &Job) -> String {
    job.pod_group_name()
        .unwrap_or_else(|| format!("{}-", job_name(job)))
}

/// A non-empty string value, `None` for an absent or empty one (Go does not tell them apart).
fn non_empty(s: Option<&String>) -> Option<&str> {
    s.map(String::as_str).filter(|v| !v.is_empty())
}

/// Twelve `[0-9a-z]` characters from the 64-bit FNV-1a hash of `parts` (each part followed by
/// a zero byte, so `("ab", "c")` and `("a", "bc")` differ). 36^12 < 2^64, so the twelve digits
/// use almost all of the hash.
fn hash_suffix(parts: &[&[u8]]) -> String {
    let mut h = FnvHasher::default();
    for p in parts {
        h.write(p);
        h.write_u8(0);
    }
    let mut v = h.finish();
    let mut out = String::with_capacity(SUFFIX_LEN);
    for _ in 0..SUFFIX_LEN {
        // Both indexes are < 36, so the conversions and the lookup cannot fail.
        let d = usize::try_from(v % 36).unwrap_or(0);
        out.push(char::from(SUFFIX_ALPHABET[d]));
        v /= 36;
    }
    out
}

/// The pod volume name of a job volume: `{job}-` + a hash of the claim name. Volcano draws a
/// random suffix each time it builds a pod; a hash makes a rebuilt pod (the same replica after
/// a restart, or a dry comparison with a stored one) come out the same.
fn volume_name(job: &Job, claim: &str) -> String {
    format!("{}-{}", job_name(job), hash_suffix(&[claim.as_bytes()]))
}

/// The claim a job volume mounts: its `volumeClaimName`, or, while that is still empty (the
/// job update that records a generated name has not come back through the cache yet), the
/// name [`generated_claim_name`] gives it, which is the name the PVC step writes.
fn claim_name_of(job: &Job, i: usize, volume: &VolumeSpec) -> String {
    match non_empty(volume.volume_claim_name.as_ref()) {
        Some(name) => name.to_string(),
        None => generated_claim_name(job, i),
    }
}

/// The controller ownerReference to the job (shared by pods, PodGroup, PVCs and plugin
/// resources): `batch.volcano.sh/v1alpha1` `Job`, `controller` and `blockOwnerDeletion` set,
/// so garbage collection removes them with the job and foreground deletion waits for them.
pub fn owner_reference(job: &Job) -> OwnerReference {
    OwnerReference {
        api_version: Job::api_version(&()).into_owned(),
        kind: Job::kind(&()).into_owned(),
        name: job_name(job).to_string(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The pod for replica `index` of `task` (digest §8): name {job}-{task}-{index}, namespace, controller ownerRef → Job
/// (batch.volcano.sh/v1alpha1, controller, blockOwnerDeletion), template labels/annotations/spec copied, every label and
/// annotation Volcano adds (task-index, task-spec, group-name = Job::pod_group_name, job-name, job-namespace, queue-name,
/// job-version = status.version, template-uid, job-retry-count, numa policy, copied preemptable/cooldown/revocable-zone/jdb-*),
/// partition-id label for tasks with partitionPolicy, schedulerName/priorityClassName fallbacks, job volumes mounted
/// (volume name deterministic: `{job}-` + 12 [0-9a-z] chars derived from a hash of the claim name, so rebuilding a pod is
/// stable — a departure from Volcano's random names, say so in a comment), `forwarding` adds the job-forwarding label+annotation.
///
/// Only the template's labels, annotations and spec are taken; anything else in its metadata
/// (a name, finalizers) is not, as in Volcano. Keys the controller sets win over the same keys
/// in the template, because the controller and the scheduler rely on them. A job volume whose
/// claim name is still empty mounts the claim [`generated_claim_name`] gives it.
pub fn build_pod(job: &Job, task: &TaskSpec, index: i32, forwarding: bool) -> Pod {
    let name = job_name(job);
    let task_name = task.name();
    let template = task.template.clone().unwrap_or_default();
    let template_meta = template.metadata.unwrap_or_default();
    let mut spec = template.spec.unwrap_or_default();

    // The template's choice wins; the job's value fills a gap. With neither, the field stays
    // unset (the API server then defaults it), as in Volcano: the job webhook has already
    // given the job the configured scheduler name.
    if non_empty(spec.scheduler_name.as_ref()).is_none() {
        spec.scheduler_name = non_empty(job.spec.scheduler_name.as_ref()).map(str::to_string);
    }
    if non_empty(spec.priority_class_name.as_ref()).is_none() {
        spec.priority_class_name =
            non_empty(job.spec.priority_class_name.as_ref()).map(str::to_string);
    }

    // Job volumes: one pod volume per distinct claim (a claim listed twice would give the pod
    // two volumes for one PVC, which the webhook forbids anyway), mounted in every regular
    // container. Init containers do not get them, as in Volcano.
    let mut seen = BTreeSet::new();
    for (i, volume) in job.spec.volumes.iter().flatten().enumerate() {
        let claim = claim_name_of(job, i, volume);
        if !seen.insert(claim.clone()) {
            continue;
        }
        let volume_name = volume_name(job, &claim);
        spec.volumes.get_or_insert_default().push(Volume {
            name: volume_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim,
                read_only: None,
            }),
            ..Volume::default()
        });
        for c in &mut spec.containers {
            c.volume_mounts.get_or_insert_default().push(VolumeMount {
                name: volume_name.clone(),
                mount_path: volume.mount_path().to_string(),
                ..VolumeMount::default()
            });
        }
    }

    let task_key = if task_name.is_empty() {
        keys::DEFAULT_TASK_SPEC
    } else {
        task_name
    };
    let index_text = index.to_string();
    let queue = job.spec.queue();
    let status = job.status.as_ref();
    let version = status.and_then(|s| s.version).unwrap_or(0);
    let retries = status.and_then(|s| s.retry_count).unwrap_or(0);
    let job_annotations = job.metadata.annotations.as_ref();
    let job_labels = job.metadata.labels.as_ref();

    let mut annotations = template_meta.annotations.unwrap_or_default();
    let mut set = |k: &str, v: &str| {
        annotations.insert(k.to_string(), v.to_string());
    };
    set(keys::TASK_INDEX, &index_text);
    set(keys::TASK_SPEC, task_key);
    set(keys::KUBE_GROUP_NAME_ANNOTATION, &group_name(job));
    set(keys::JOB_NAME, name);
    set(keys::QUEUE_NAME, queue);
    set(keys::JOB_VERSION, &version.to_string());
    // Volcano builds this from the template name, which it sets to the task name (not the
    // `default` fallback), so an unnamed task gives `{job}-`.
    set(keys::TEMPLATE_UID, &format!("{name}-{task_name}"));
    set(keys::JOB_RETRY_COUNT, &retries.to_string());
    if let Some(policy) = &task.topology_policy
        && !policy.as_str().is_empty()
    {
        set(keys::NUMA_POLICY, policy.as_str());
    }
    // Scheduling hints written on the job travel to its pods; only one disruption budget form
    // is copied, the minimum winning over the maximum.
    let from_job = |k: &str| job_annotations.and_then(|a| a.get(k));
    for k in [keys::PREEMPTABLE, keys::COOLDOWN_TIME, keys::REVOCABLE_ZONE] {
        if let Some(v) = from_job(k) {
            set(k, v);
        }
    }
    if let Some(v) = from_job(keys::JDB_MIN_AVAILABLE) {
        set(keys::JDB_MIN_AVAILABLE, v);
    } else if let Some(v) = from_job(keys::JDB_MAX_UNAVAILABLE) {
        set(keys::JDB_MAX_UNAVAILABLE, v);
    }
    if forwarding {
        set(keys::JOB_FORWARDING, "true");
    }

    let mut labels = template_meta.labels.unwrap_or_default();
    let mut set = |k: &str, v: &str| {
        labels.insert(k.to_string(), v.to_string());
    };
    // These labels are what the svc plugin's Service and NetworkPolicy select on.
    set(keys::TASK_INDEX, &index_text);
    set(keys::JOB_NAME, name);
    set(keys::TASK_SPEC, task_key);
    set(
        keys::JOB_NAMESPACE,
        job.metadata.namespace.as_deref().unwrap_or_default(),
    );
    set(keys::QUEUE_NAME, queue);
    for k in [keys::PREEMPTABLE, keys::COOLDOWN_TIME] {
        if let Some(v) = job_labels.and_then(|l| l.get(k)) {
            set(k, v);
        }
    }
    if forwarding {
        set(keys::JOB_FORWARDING, "true");
    }
    if let Some(partition) = &task.partition_policy {
        set(
            keys::PARTITION_ID,
            &partition_id(partition, index).to_string(),
        );
    }

    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(name, task_name, index)),
            namespace: job.metadata.namespace.clone(),
            owner_references: Some(vec![owner_reference(job)]),
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The partition of replica `index`: consecutive runs of `partitionSize` replicas share one;
/// an invalid size (≤ 0, which the webhook rejects) puts every replica in partition 0.
fn partition_id(partition: &PartitionPolicySpec, index: i32) -> i32 {
    match partition.partition_size() {
        size if size <= 0 => 0,
        size => index / size,
    }
}

/// The job's PodGroup as created (digest §9 Create): name `{job}-{uid}`, labels/annotations copied from the job, controller
/// ownerRef, minMember, minTaskMember, queue, priorityClassName, minResources, networkTopology, subGroupPolicy. No status.
/// `priority_of(priority_class_name)` gives a PriorityClass value (None ⇒ 0).
///
/// Without a status the scheduler sees the group as Pending until it admits it. An empty
/// `minResources` or `subGroupPolicy` is left out rather than written as `{}` / `[]`; readers
/// treat both the same.
pub fn build_pod_group(job: &Job, priority_of: &dyn Fn(&str) -> Option<i32>) -> PodGroup {
    let min_resources = min_resources(job, priority_of);
    let sub_groups = sub_group_policies(job);
    PodGroup {
        metadata: ObjectMeta {
            name: Some(group_name(job)),
            namespace: job.metadata.namespace.clone(),
            labels: job.metadata.labels.clone(),
            annotations: job.metadata.annotations.clone(),
            owner_references: Some(vec![owner_reference(job)]),
            ..ObjectMeta::default()
        },
        spec: PodGroupSpec {
            min_member: Some(job.spec.min_available()),
            min_task_member: Some(
                job.tasks()
                    .iter()
                    .map(|t| (t.name().to_string(), min_task_member(t)))
                    .collect(),
            ),
            queue: Some(job.spec.queue().to_string()),
            priority_class_name: non_empty(job.spec.priority_class_name.as_ref())
                .map(str::to_string),
            min_resources: (!min_resources.is_empty()).then_some(min_resources),
            network_topology: job.spec.network_topology.as_ref().map(group_topology),
            sub_group_policy: (!sub_groups.is_empty()).then_some(sub_groups),
        },
        status: None,
    }
}

/// The gang size of one task in the PodGroup: its `minAvailable`; else, for a partitioned task
/// with both numbers set, `minPartitions × partitionSize`; else all its replicas.
fn min_task_member(task: &TaskSpec) -> i32 {
    if let Some(n) = task.min_available {
        return n;
    }
    match &task.partition_policy {
        Some(p) if p.min_partitions() != 0 && p.partition_size() != 0 => {
            p.min_partitions().saturating_mul(p.partition_size())
        }
        _ => task.replicas(),
    }
}

/// The job's topology for its PodGroup: the mode, and one tier bound — the numeric tier when
/// given, else the named one (the two are exclusive; the numeric one wins if both slipped in).
fn group_topology(nt: &NetworkTopologySpec) -> NetworkTopologySpec {
    NetworkTopologySpec {
        mode: nt.mode.clone(),
        highest_tier_allowed: nt.highest_tier_allowed,
        highest_tier_name: if nt.highest_tier_allowed.is_some() {
            None
        } else {
            non_empty(nt.highest_tier_name.as_ref()).map(str::to_string)
        },
    }
}

/// One sub-group policy per partitioned task, in task order: sub-groups of `partitionSize`
/// pods of that task (selected by `volcano.sh/task-spec`), split by `volcano.sh/partition-id`,
/// at least `minPartitions` of them, each under the partition's network topology.
fn sub_group_policies(job: &Job) -> Vec<SubGroupPolicySpec> {
    job.tasks()
        .iter()
        .filter_map(|task| {
            let p = task.partition_policy.as_ref()?;
            Some(SubGroupPolicySpec {
                name: Some(task.name().to_string()),
                network_topology: p.network_topology.clone(),
                sub_group_size: Some(p.partition_size()),
                min_sub_groups: Some(p.min_partitions()),
                label_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        keys::TASK_SPEC.to_string(),
                        task.name().to_string(),
                    )])),
                    match_expressions: None,
                }),
                match_label_keys: Some(vec![keys::PARTITION_ID.to_string()]),
            })
        })
        .collect()
}

/// What to change on an existing PodGroup (digest §9 Update: priorityClassName, minMember, minResources (semantic
/// equality via same_amounts), minTaskMember, subGroupPolicy; never queue, topology, labels, annotations), as a JSON merge
/// patch of `spec` (e.g. {"spec": {"minMember": 3}}), or None when nothing differs.
///
/// The patch names only what differs, so a concurrent writer of other fields is not undone:
/// - a field to clear is written as `null`;
/// - `minResources` is a map, which a merge patch merges: resources the stored list has and
///   the desired one lacks (including Volcano's quota-style keys such as `count/pods`) are
///   written as `null` so they go;
/// - `minTaskMember` lists only the tasks whose value differs; a task missing from `desired`
///   is left alone (a job cannot drop tasks, and Volcano never removes entries either);
/// - `subGroupPolicy` is a list, replaced whole when it differs. It is compared by name after
///   filling in the CRD defaults, so a stored object the API server defaulted still matches.
pub fn pod_group_update(existing: &PodGroup, desired: &PodGroup) -> Option<Value> {
    let (have, want) = (&existing.spec, &desired.spec);
    let mut spec = Map::new();

    let want_class = non_empty(want.priority_class_name.as_ref());
    if non_empty(have.priority_class_name.as_ref()) != want_class {
        spec.insert(
            "priorityClassName".into(),
            want_class.map_or(Value::Null, |c| Value::String(c.to_string())),
        );
    }

    if have.min_member() != want.min_member() {
        spec.insert("minMember".into(), Value::from(want.min_member()));
    }

    if !resources::same_amounts(have.min_resources.as_ref(), want.min_resources.as_ref()) {
        spec.insert(
            "minResources".into(),
            resource_patch(have.min_resources.as_ref(), want.min_resources.as_ref()),
        );
    }

    if let Some(wanted) = &want.min_task_member {
        let stored = have.min_task_member.as_ref();
        let changed: Map<String, Value> = wanted
            .iter()
            .filter(|(task, n)| stored.and_then(|m| m.get(*task)) != Some(*n))
            .map(|(task, n)| (task.clone(), Value::from(*n)))
            .collect();
        if !changed.is_empty() {
            spec.insert("minTaskMember".into(), Value::Object(changed));
        }
    }

    if sub_group_key(have.sub_group_policy.as_deref())
        != sub_group_key(want.sub_group_policy.as_deref())
    {
        let list = want.sub_group_policy.as_deref().unwrap_or_default();
        spec.insert(
            "subGroupPolicy".into(),
            if list.is_empty() {
                Value::Null
            } else {
                to_json(&list)
            },
        );
    }

    if spec.is_empty() {
        return None;
    }
    let mut root = Map::new();
    root.insert("spec".into(), Value::Object(spec));
    Some(Value::Object(root))
}

/// Plain data with string map keys always serializes; `Null` is a formality.
fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The merge-patch value that turns `have` into `want`: `null` when nothing is wanted, else
/// every wanted quantity plus `null` for each stored key that is no longer wanted.
fn resource_patch(have: Option<&ResourceList>, want: Option<&ResourceList>) -> Value {
    let want = want.filter(|w| !w.is_empty());
    let Some(want) = want else {
        return Value::Null;
    };
    let mut out: Map<String, Value> = want
        .iter()
        .map(|(k, q)| (k.clone(), Value::String(q.0.clone())))
        .collect();
    for k in have.into_iter().flat_map(|h| h.keys()) {
        if !want.contains_key(k) {
            out.insert(k.clone(), Value::Null);
        }
    }
    Value::Object(out)
}

/// Sub-group policies by name, with the CRD defaults filled in and empty collections
/// dropped, so a policy read back from the API server equals the one built here.
fn sub_group_key(list: Option<&[SubGroupPolicySpec]>) -> BTreeMap<String, SubGroupPolicySpec> {
    list.unwrap_or_default()
        .iter()
        .map(|p| {
            let mut n = p.clone();
            n.sub_group_size = n.sub_group_size.or(Some(1));
            n.min_sub_groups = n.min_sub_groups.or(Some(0));
            if let Some(nt) = &mut n.network_topology {
                nt.mode = nt.mode.clone().or(Some(NetworkTopologyMode::Hard));
                if nt.highest_tier_name.as_deref() == Some("") {
                    nt.highest_tier_name = None;
                }
            }
            if let Some(sel) = &mut n.label_selector {
                if sel.match_labels.as_ref().is_some_and(BTreeMap::is_empty) {
                    sel.match_labels = None;
                }
                if sel.match_expressions.as_ref().is_some_and(Vec::is_empty) {
                    sel.match_expressions = None;
                }
            }
            if n.match_label_keys.as_ref().is_some_and(Vec::is_empty) {
                n.match_label_keys = None;
            }
            (n.name.clone().unwrap_or_default(), n)
        })
        .collect()
}

/// Volcano's priority-ordered minResources (digest §9 calcPGMinResources), plain resource names (cpu, memory, pods, extended).
/// Ties in priority keep the tasks' declaration order (stable sort; Volcano's is unstable — say so).
///
/// The gang's resources are those of the pods the scheduler needs first, highest-priority
/// tasks first (priority = value of the template's PriorityClass, 0 when it has none or the
/// class is unknown). With `T` = Σ task `minAvailable` (absent ⇒ replicas) and `M` = job
/// `minAvailable`:
/// - `M < T`: the first `M` pods, taking each task's replicas in turn;
/// - `M ≥ T`: each task's `minAvailable` pods, then, while fewer than `M`, spare replicas
///   (`replicas − minAvailable`) in priority order.
///
/// Volcano's unstable sort lets tasks of equal priority swap places between syncs, so the
/// computed value (and with it the PodGroup) could flip back and forth; the stable order makes
/// the result a function of the job alone. Per-pod amounts are Kubernetes' effective pod
/// requests with plain names ([`resources::pod_requests`]), not Volcano's quota keys
/// (decisions.md).
pub fn min_resources(job: &Job, priority_of: &dyn Fn(&str) -> Option<i32>) -> ResourceList {
    let mut tasks: Vec<(i32, &TaskSpec)> = job
        .tasks()
        .iter()
        .map(|t| (task_priority(t, priority_of), t))
        .collect();
    // `sort_by_key` is stable: equal priorities keep declaration order.
    tasks.sort_by_key(|(p, _)| Reverse(*p));
    let tasks: Vec<&TaskSpec> = tasks.into_iter().map(|(_, t)| t).collect();

    let wanted = i64::from(job.spec.min_available());
    let total: i64 = tasks.iter().map(|t| i64::from(t.min_available())).sum();
    let picks = if wanted < total {
        first_pods(&tasks, wanted)
    } else {
        gang_then_spares(&tasks, wanted)
    };

    let mut sum = Amounts::new();
    for (task, count) in picks {
        if count <= 0 {
            continue;
        }
        let pod = Pod {
            spec: task.pod_spec().cloned(),
            ..Pod::default()
        };
        for (k, v) in resources::pod_requests(&pod) {
            *sum.entry(k).or_default() += v * i128::from(count);
        }
    }
    sum.into_iter()
        .filter(|(_, v)| *v != 0)
        .map(|(k, v)| {
            let q = resources::format_nano(&k, v);
            (k, q)
        })
        .collect()
}

/// A task's scheduling priority: the value of its template's PriorityClass. The job-level
/// class is not consulted, as in Volcano (pods get it only as a fallback at creation).
fn task_priority(task: &TaskSpec, priority_of: &dyn Fn(&str) -> Option<i32>) -> i32 {
    task.pod_spec()
        .and_then(|s| non_empty(s.priority_class_name.as_ref()))
        .and_then(priority_of)
        .unwrap_or(0)
}

/// The first `count` pods in task order, each task giving at most its replicas.
fn first_pods<'a>(tasks: &[&'a TaskSpec], mut count: i64) -> Vec<(&'a TaskSpec, i64)> {
    let mut picks = Vec::new();
    for task in tasks {
        if count <= 0 {
            break;
        }
        let take = count.min(i64::from(task.replicas()));
        picks.push((*task, take));
        count -= take.max(0);
    }
    picks
}

/// Each task's own `minAvailable` (as far as `wanted` reaches), then spare replicas in task
/// order until `wanted` pods are covered.
fn gang_then_spares<'a>(tasks: &[&'a TaskSpec], wanted: i64) -> Vec<(&'a TaskSpec, i64)> {
    let mut picks = Vec::new();
    let mut covered = 0i64;
    // 1. The task gangs. A task without `minAvailable` (the webhook always sets it) has no
    //    gang of its own; its replicas only count as spares.
    for task in tasks {
        if covered >= wanted {
            break;
        }
        let Some(min) = task.min_available else {
            continue;
        };
        let take = i64::from(min).min(wanted - covered);
        picks.push((*task, take));
        covered += take;
    }
    // 2. Spares, higher priority first.
    for task in tasks {
        if covered >= wanted {
            break;
        }
        let replicas = i64::from(task.replicas());
        // A `minAvailable` above `replicas` (rejected by the webhook) leaves no spares; Volcano
        // would count the negative difference and raise the number still wanted.
        let spare = match task.min_available {
            Some(min) => (replicas - i64::from(min)).max(0),
            None => replicas,
        };
        let take = spare.min(wanted - covered);
        if take > 0 {
            picks.push((*task, take));
            covered += take;
        }
    }
    picks
}

/// The claim name for job volume `i` that has none: `{job}-pvc-` + 12 [0-9a-z] chars derived from the job UID and `i`
/// (deterministic so a retried sync never makes a second PVC; Volcano draws random names).
///
/// Volcano draws names until one is unused, then records it in the job; if that job update
/// fails, the next sync draws another name and creates a second PVC. A name fixed by the job
/// UID and the volume's position makes the retry find the PVC it made before. The UID keeps a
/// re-created job of the same name from adopting the old job's claims.
pub fn generated_claim_name(job: &Job, i: usize) -> String {
    let uid = job.metadata.uid.as_deref().unwrap_or_default();
    let index = i.to_string();
    format!(
        "{}-pvc-{}",
        job_name(job),
        hash_suffix(&[uid.as_bytes(), index.as_bytes()])
    )
}

/// The PVC for a job volume with a `volumeClaim` spec: name, namespace, controller ownerRef → Job, the spec.
///
/// The owner reference means the PVC goes with the job through garbage collection; the
/// controller itself never deletes PVCs. A volume without `volumeClaim` gives an empty spec,
/// which the API server rejects; the caller creates PVCs only for volumes that have one.
pub fn build_pvc(job: &Job, volume: &VolumeSpec, claim_name: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim_name.to_string()),
            namespace: job.metadata.namespace.clone(),
            owner_references: Some(vec![owner_reference(job)]),
            ..ObjectMeta::default()
        },
        spec: volume.volume_claim.clone(),
        status: None,
    }
}

/// dependsOn readiness (digest §7): `pod(name)` looks a pod up in the cache. Tasks without dependsOn are ready.
///
/// With `iteration: any` and at least two names, one ready dependency is enough; otherwise
/// every named task must be ready (so an empty list is ready). A dependency is ready when at
/// least its `minAvailable` of its expected pods (`{job}-{dep}-{i}`, `i < replicas`) have
/// Succeeded or are Running with every reported container ready; a dependency without
/// `minAvailable` is always ready. Missing pods do not count.
///
/// A dependency naming no task of the job (the webhook rejects that) is not ready: Volcano
/// crashes on it, and creating the pods anyway would ignore the order the user asked for.
/// Volcano's special case "the pod is missing because the job itself is gone ⇒ ready" has no
/// counterpart: a deleted job is not synced.
pub fn dependencies_ready(job: &Job, task: &TaskSpec, pod: &dyn Fn(&str) -> Option<Pod>) -> bool {
    let Some(depends) = &task.depends_on else {
        return true;
    };
    let names = depends.name.as_deref().unwrap_or_default();
    if names.len() > 1 && depends.iteration == Some(Iteration::Any) {
        names.iter().any(|n| task_ready(job, n, pod))
    } else {
        names.iter().all(|n| task_ready(job, n, pod))
    }
}

/// Whether task `name` of the job has at least its `minAvailable` pods done or serving.
fn task_ready(job: &Job, name: &str, pod: &dyn Fn(&str) -> Option<Pod>) -> bool {
    let Some(dep) = job.spec.task(name) else {
        return false;
    };
    let Some(min) = dep.min_available else {
        return true;
    };
    let ready = (0..dep.replicas())
        .filter_map(|i| pod(&pod_name(job_name(job), name, i)))
        .filter(pod_ready)
        .count();
    i64::try_from(ready).unwrap_or(i64::MAX) >= i64::from(min)
}

/// Succeeded, or Running with every container status `ready`. A Running pod that reports no
/// container statuses passes, as in Volcano (the kubelet reports them with the phase).
fn pod_ready(p: &Pod) -> bool {
    let Some(status) = &p.status else {
        return false;
    };
    match status.phase.as_deref() {
        Some("Succeeded") => true,
        Some("Running") => status.container_statuses.iter().flatten().all(|c| c.ready),
        _ => false,
    }
}
