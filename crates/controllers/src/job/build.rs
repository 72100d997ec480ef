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
use std::sync::Arc;

use fnv::FnvHasher;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kube::Resource;
use serde_json::{Map, Value};

use crate::podgroup::resources::{self, Amounts};
use tephra_api::batch::{Iteration, PartitionPolicySpec, VolumeSpec, pod_name};
use tephra_api::scheduling::{NetworkTopologyMode, NetworkTopologySpec, SubGroupPolicySpec};
use tephra_api::{Job, PodGroup, PodGroupSpec, ResourceList, TaskSpec, keys};

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

/// Puts `pod` behind the plan gate ([`keys::PLAN_GATE`]) when its scheduler is one of
/// `schedulers` and it asks for resources, so kube-scheduler first hears of it once a session
/// has placed it (the extender then removes the gate). A best-effort pod is left ungated: it
/// takes no room, and a scheduler configuration without `backfill` would never place it. A
/// pod that names its node is not scheduled at all (and the API refuses gates on it).
pub fn gate_until_placed(pod: &mut Pod, schedulers: &[String]) {
    let served = pod.spec.as_ref().is_some_and(|spec| {
        if spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
            return false;
        }
        let scheduler = spec
            .scheduler_name
            .as_deref()
            .unwrap_or("default-scheduler");
        schedulers.iter().any(|s| s == scheduler)
    });
    if !served || tephra_scheduler::resource::pod_request(pod).is_empty() {
        return;
    }
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    let gates = spec.scheduling_gates.get_or_insert_default();
    if !gates.iter().any(|g| g.name == keys::PLAN_GATE) {
        gates.push(k8s_openapi::api::core::v1::PodSchedulingGate {
            name: keys::PLAN_GATE.to_string(),
        });
    }
}

/// How many replicas of each task (in the job's order) make up the gang's minimum: the pods
/// kube-scheduler's own gang scheduling must place together (native engine); the others are
/// elastic and placed one by one as room allows.
///
/// The gang needs `minAvailable` pods, and each task its `minAvailable` when the job's
/// minimum covers them all (Volcano's scheduler checks task minimums only then): the first
/// replicas of each task by index fill those, and what the job needs beyond them comes from
/// the tasks in order. Replica `i` of task `t` is in the minimum when `i < gang_core(job)[t]`;
/// a replica recreated under the same index stays what it was.
pub fn gang_core(job: &Job) -> Vec<i32> {
    let tasks = job.tasks();
    let replicas: Vec<i32> = tasks.iter().map(|t| t.replicas().max(0)).collect();
    let task_mins: Vec<i32> = tasks
        .iter()
        .zip(&replicas)
        .map(|(t, r)| min_task_member(t).clamp(0, *r))
        .collect();
    let job_min = job.spec.min_available().max(0);
    let mut core = if task_mins.iter().sum::<i32>() <= job_min {
        task_mins
    } else {
        vec![0; tasks.len()]
    };
    let mut rest = job_min - core.iter().sum::<i32>();
    for (c, r) in core.iter_mut().zip(&replicas) {
        let more = rest.min(r - *c).max(0);
        *c += more;
        rest -= more;
    }
    core
}

/// The priority class every pod of the gang's minimum ([`gang_core`]) carries — each pod
/// takes its task template's class, else the job's — when they share one; `None` when they
/// differ or none has one. kube-scheduler places a native PodGroup only when its pods have the
/// group's priority, and a task may name a class of its own.
pub fn gang_core_priority_class(job: &Job) -> Option<String> {
    let job_class = non_empty(job.spec.priority_class_name.as_ref());
    let mut classes = job
        .tasks()
        .iter()
        .zip(gang_core(job))
        .filter(|(_, core)| *core > 0)
        .map(|(t, _)| {
            t.pod_spec()
                .and_then(|s| non_empty(s.priority_class_name.as_ref()))
                .or(job_class)
        });
    let first = classes.next()??;
    classes.all(|c| c == Some(first)).then(|| first.to_string())
}

/// Marks `pod` as beyond its gang's minimum ([`keys::ELASTIC`]; see [`gang_core`]).
pub fn mark_elastic(pod: &mut Pod) {
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(keys::ELASTIC.to_string(), "true".to_string());
}

/// The pod for replica `index` of `task`, as Volcano's job controller makes it.
///
/// - name `{job}-{task}-{index}` in the job's namespace, one controller ownerReference to the
///   job ([`owner_reference`]);
/// - the template's labels, annotations and spec;
/// - annotations `task-index`, `task-spec` (`default` for an unnamed task), the group name
///   `{job}-{uid}` ([`Job::pod_group_name`]), `job-name`, `queue-name`, `job-version`
///   (`status.version`), `template-uid` (`{job}-{task}`), `job-retry-count`
///   (`status.retryCount`), the NUMA policy of the task, and from the job's annotations
///   `preemptable`, `cooldown-time`, `revocable-zone` and one disruption budget
///   (`jdb-min-available`, else `jdb-max-unavailable`);
/// - labels `task-index`, `job-name`, `task-spec`, `job-namespace`, `queue-name`, from the
///   job's labels `preemptable` and `cooldown-time`, and `partition-id` for a partitioned task;
/// - `schedulerName` and `priorityClassName` from the job when the template has none;
/// - every job volume mounted in every regular container. The pod volume is named `{job}-`
///   plus 12 `[0-9a-z]` characters hashed from the claim name, where Volcano draws them at
///   random: a rebuilt pod comes out identical;
/// - with `forwarding` (the job's queue forwards to other clusters), label and annotation
///   `volcano.sh/job-forwarding: "true"`.
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

/// The job's PodGroup as Volcano's job controller creates it: name `{job}-{uid}`,
/// the job's labels and annotations, a controller ownerReference to the job, and a spec of
/// `minMember` (job `minAvailable`), `minTaskMember` per task, `queue`, `priorityClassName`,
/// [`min_resources`], the job's network topology and one sub-group policy per partitioned task.
/// No status is set. `priority_of(class)` gives a PriorityClass's value (`None` counts as 0).
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
            // kubectl's copy of the whole applied job is not the PodGroup's business (and can
            // be most of its size); Volcano copies it too.
            annotations: job.metadata.annotations.clone().map(|mut a| {
                a.remove(keys::KUBECTL_LAST_APPLIED);
                a
            }),
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

/// What to change on an existing PodGroup to match `desired` (as Volcano's job controller updates it), as
/// a JSON merge patch such as `{"spec": {"minMember": 3}}`, or `None` when nothing differs.
///
/// Compared: `priorityClassName`, `minMember`, `minResources` (by amount, so `1000m` equals
/// `1`), `minTaskMember` and `subGroupPolicy`. Never touched: the queue (the PodGroup webhook
/// or a user may have set it), the network topology, labels and annotations, as in Volcano.
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

/// The PodGroup's `minResources` (Volcano's `calcPGMinResources`), with
/// plain resource names (`cpu`, `memory`, `pods`, extended resources).
///
/// The gang's resources are those of the pods the scheduler needs first, highest-priority
/// tasks first (priority = value of the template's PriorityClass, 0 when it has none or the
/// class is unknown). With `T` = Σ task `minAvailable` (absent ⇒ replicas) and `M` = job
/// `minAvailable`:
/// - `M < T`: the first `M` pods, taking each task's replicas in turn;
/// - `M ≥ T`: each task's `minAvailable` pods, then, while fewer than `M`, spare replicas
///   (`replicas − minAvailable`) in priority order.
///
/// Tasks of equal priority keep their declaration order. Volcano sorts with an unstable sort,
/// which lets them swap places between syncs, so the computed value (and with it the
/// PodGroup) could flip back and forth; a stable sort makes the result a function of the job
/// alone. Per-pod amounts are Kubernetes' effective pod
/// requests with plain names ([`resources::pod_requests`]), not Volcano's quota keys
/// (`requests.cpu`, `count/pods`), which the scheduler does not read.
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

/// The claim name for job volume `i` when the job names none: `{job}-pvc-` plus 12
/// `[0-9a-z]` characters hashed from the job UID and `i`.
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

/// The PVC for a job volume with a `volumeClaim` spec: named `claim_name`, in the job's
/// namespace, with a controller ownerReference to the job, and the volume's claim spec.
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

/// Whether `task`'s `dependsOn` tasks are ready, so its pods may be created (as Volcano's job
/// controller decides it). `pod(name)` looks a pod of the job's namespace up in the cache. A
/// task without `dependsOn` is ready.
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
pub fn dependencies_ready(
    job: &Job,
    task: &TaskSpec,
    pod: &dyn Fn(&str) -> Option<Arc<Pod>>,
) -> bool {
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
fn task_ready(job: &Job, name: &str, pod: &dyn Fn(&str) -> Option<Arc<Pod>>) -> bool {
    let Some(dep) = job.spec.task(name) else {
        return false;
    };
    let Some(min) = dep.min_available else {
        return true;
    };
    let ready = (0..dep.replicas())
        .filter_map(|i| pod(&pod_name(job_name(job), name, i)))
        .filter(|p| pod_ready(p))
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use k8s_openapi::api::core::v1::ContainerStatus;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use serde_json::json;

    use super::*;

    const UID: &str = "7d3c1f0e-5b2a-4c11-9e0d-2f6a8b4c1d90";

    /// A two-task training job as a user would write it, after the job webhook's defaults,
    /// with a status the controller has written (version 2 after a restart).
    const TRAIN: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: train
  namespace: ml
  uid: 7d3c1f0e-5b2a-4c11-9e0d-2f6a8b4c1d90
  labels:
    team: vision
    volcano.sh/preemptable: "true"
  annotations:
    volcano.sh/preemptable: "false"
    volcano.sh/cooldown-time: 600s
    volcano.sh/revocable-zone: "*"
    volcano.sh/jdb-min-available: "2"
    volcano.sh/jdb-max-unavailable: "1"
    volcano.sh/sla-waiting-time: 1h
spec:
  schedulerName: volcano
  minAvailable: 3
  queue: research
  priorityClassName: normal
  maxRetry: 3
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  volumes:
    - mountPath: /data
      volumeClaimName: shared-data
    - mountPath: /scratch
      volumeClaim:
        accessModes: [ReadWriteOnce]
        storageClassName: fast
        resources:
          requests:
            storage: 1Gi
    - mountPath: /data-again
      volumeClaimName: shared-data
  tasks:
    - name: ps
      replicas: 1
      minAvailable: 1
      topologyPolicy: single-numa-node
      template:
        metadata:
          labels:
            role: ps
            volcano.sh/task-index: "99"
          annotations:
            note: keep
        spec:
          schedulerName: custom
          priorityClassName: high
          initContainers:
            - name: init
              image: busybox
          containers:
            - name: ps
              image: tf:2
              resources:
                requests:
                  cpu: "2"
                  memory: 4Gi
    - name: worker
      replicas: 4
      minAvailable: 2
      partitionPolicy:
        totalPartitions: 2
        partitionSize: 2
        minPartitions: 1
        networkTopology:
          mode: soft
          highestTierAllowed: 1
      template:
        spec:
          containers:
            - name: worker
              image: tf:2
              resources:
                requests:
                  cpu: "1"
                  memory: 2Gi
                limits:
                  nvidia.com/gpu: "1"
            - name: logs
              image: fluent-bit
status:
  version: 2
  retryCount: 1
  state:
    phase: Running
"#;

    fn train() -> Job {
        serde_saphyr::from_str(TRAIN).expect("test job parses")
    }

    fn task<'a>(job: &'a Job, name: &str) -> &'a TaskSpec {
        job.spec.task(name).expect("task exists")
    }

    /// PriorityClass values of the test cluster.
    fn classes(name: &str) -> Option<i32> {
        match name {
            "high" => Some(1000),
            "normal" => Some(100),
            "low" => Some(-10),
            _ => None,
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn quantities(list: &ResourceList) -> BTreeMap<String, String> {
        list.iter().map(|(k, q)| (k.clone(), q.0.clone())).collect()
    }

    fn job_from(value: serde_json::Value) -> Job {
        serde_json::from_value(value).expect("test job parses")
    }

    fn gang(min: i32, tasks: &[(i32, Option<i32>)]) -> Job {
        let tasks: Vec<serde_json::Value> = tasks
            .iter()
            .enumerate()
            .map(|(i, (replicas, min))| {
                let mut t = serde_json::json!({"name": format!("t{i}"), "replicas": replicas});
                if let Some(m) = min {
                    t["minAvailable"] = serde_json::json!(m);
                }
                t
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": {"minAvailable": min, "tasks": tasks}
        }))
        .unwrap()
    }

    #[test]
    fn the_gang_cores_priority_class_is_the_one_its_pods_share() {
        let mut job = gang(4, &[(4, None), (4, None)]);
        assert_eq!(gang_core_priority_class(&job), None);
        // Tasks naming a class of their own, the job none: the minimum is the first task's.
        for t in job.spec.tasks.as_mut().unwrap() {
            t.template = Some(
                serde_json::from_value(serde_json::json!({
                "spec": {"priorityClassName": "master", "containers": []}}))
                .unwrap(),
            );
        }
        assert_eq!(gang_core_priority_class(&job).as_deref(), Some("master"));
        // A minimum across two tasks of different classes has none in common.
        job.spec.min_available = Some(6);
        job.spec.tasks.as_mut().unwrap()[1]
            .template
            .as_mut()
            .unwrap()
            .spec
            .as_mut()
            .unwrap()
            .priority_class_name = None;
        assert_eq!(gang_core_priority_class(&job), None);
        // The second task inherits the job's class, which the first also names.
        job.spec.priority_class_name = Some("master".into());
        assert_eq!(gang_core_priority_class(&job).as_deref(), Some("master"));
    }

    #[test]
    fn the_gang_core_is_the_first_replicas_that_make_up_the_minimum() {
        // One task of 16 needing 2: replicas 0 and 1.
        assert_eq!(gang_core(&gang(2, &[(16, Some(2))])), vec![2]);
        // The job's minimum covers the tasks' minimums: each task its own, the rest in order.
        assert_eq!(
            gang_core(&gang(5, &[(2, Some(1)), (8, Some(2))])),
            vec![2, 3]
        );
        // It does not (task minimums default to replicas): the job's minimum, tasks in order.
        assert_eq!(gang_core(&gang(3, &[(2, None), (8, None)])), vec![2, 1]);
        // A minimum as large as the job: every replica.
        assert_eq!(gang_core(&gang(10, &[(2, None), (8, None)])), vec![2, 8]);
        assert_eq!(gang_core(&gang(50, &[(2, None)])), vec![2]);
        // No minimum: nothing to place whole.
        assert_eq!(gang_core(&gang(0, &[(4, Some(0))])), vec![0]);
    }

    #[test]
    fn owner_reference_is_a_blocking_controller_ref_to_the_job() {
        let r = owner_reference(&train());
        assert_eq!(
            r,
            OwnerReference {
                api_version: "batch.volcano.sh/v1alpha1".into(),
                kind: "Job".into(),
                name: "train".into(),
                uid: UID.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }
        );
    }

    #[test]
    fn pod_carries_every_label_and_annotation() {
        let job = train();
        let pod = build_pod(&job, task(&job, "ps"), 0, false);
        assert_eq!(pod.metadata.name.as_deref(), Some("train-ps-0"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(
            pod.metadata.owner_references,
            Some(vec![owner_reference(&job)])
        );
        let group = format!("train-{UID}");
        assert_eq!(
            pod.metadata.annotations,
            Some(map(&[
                ("note", "keep"),
                ("volcano.sh/task-index", "0"),
                ("volcano.sh/task-spec", "ps"),
                ("scheduling.k8s.io/group-name", &group),
                ("volcano.sh/job-name", "train"),
                ("volcano.sh/queue-name", "research"),
                ("volcano.sh/job-version", "2"),
                ("volcano.sh/template-uid", "train-ps"),
                ("volcano.sh/job-retry-count", "1"),
                ("volcano.sh/numa-topology-policy", "single-numa-node"),
                ("volcano.sh/preemptable", "false"),
                ("volcano.sh/cooldown-time", "600s"),
                ("volcano.sh/revocable-zone", "*"),
                ("volcano.sh/jdb-min-available", "2"),
            ]))
        );
        assert_eq!(
            pod.metadata.labels,
            Some(map(&[
                ("role", "ps"),
                // The controller's value replaces the template's.
                ("volcano.sh/task-index", "0"),
                ("volcano.sh/job-name", "train"),
                ("volcano.sh/task-spec", "ps"),
                ("volcano.sh/job-namespace", "ml"),
                ("volcano.sh/queue-name", "research"),
                ("volcano.sh/preemptable", "true"),
            ]))
        );
        assert_eq!(
            Some(group),
            job.pod_group_name(),
            "the group the PodGroup has"
        );
    }

    /// The names of a pod's scheduling gates.
    fn gates(pod: &Pod) -> Vec<String> {
        pod.spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .map(|g| g.iter().map(|g| g.name.clone()).collect())
            .unwrap_or_default()
    }

    /// A worker pod of `train` (scheduler `volcano`) asking for `cpu`, if any.
    fn worker_asking(cpu: Option<&str>) -> Pod {
        let job = train();
        let mut pod = build_pod(&job, task(&job, "worker"), 0, false);
        for c in &mut pod.spec.as_mut().expect("spec").containers {
            c.resources = cpu.map(|cpu| k8s_openapi::api::core::v1::ResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "cpu".to_string(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(cpu.into()),
                )])),
                ..Default::default()
            });
        }
        pod
    }

    #[test]
    fn pods_of_a_served_scheduler_that_ask_for_room_wait_behind_the_plan_gate() {
        let served = ["volcano".to_string()];
        let mut pod = worker_asking(Some("500m"));
        gate_until_placed(&mut pod, &served);
        assert_eq!(gates(&pod), vec![keys::PLAN_GATE.to_string()]);
        // Once: a second pass adds nothing.
        gate_until_placed(&mut pod, &served);
        assert_eq!(gates(&pod), vec![keys::PLAN_GATE.to_string()]);

        // Another scheduler's pods, or none served: nobody would remove the gate.
        let mut other = worker_asking(Some("500m"));
        gate_until_placed(&mut other, &["custom".to_string()]);
        gate_until_placed(&mut other, &[]);
        assert!(gates(&other).is_empty());

        // A pod that asks for nothing takes no room: never gated.
        let mut best_effort = worker_asking(None);
        gate_until_placed(&mut best_effort, &served);
        assert!(gates(&best_effort).is_empty());

        // A pod that names its node is never scheduled; kube-apiserver refuses gates on it.
        let mut pinned = worker_asking(Some("1"));
        pinned.spec.as_mut().expect("spec").node_name = Some("node-1".into());
        gate_until_placed(&mut pinned, &served);
        assert!(gates(&pinned).is_empty());

        // The template's own gates stay, ours after them.
        let mut gated = worker_asking(Some("1"));
        gated.spec.as_mut().expect("spec").scheduling_gates =
            Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: "example.com/quota".into(),
            }]);
        gate_until_placed(&mut gated, &served);
        assert_eq!(
            gates(&gated),
            vec!["example.com/quota".to_string(), keys::PLAN_GATE.to_string()]
        );
    }

    #[test]
    fn template_scheduler_and_priority_win_and_the_job_fills_gaps() {
        let job = train();
        let ps = build_pod(&job, task(&job, "ps"), 0, false);
        let spec = ps.spec.expect("spec");
        assert_eq!(spec.scheduler_name.as_deref(), Some("custom"));
        assert_eq!(spec.priority_class_name.as_deref(), Some("high"));

        let worker = build_pod(&job, task(&job, "worker"), 3, false);
        let spec = worker.spec.expect("spec");
        assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
        assert_eq!(spec.priority_class_name.as_deref(), Some("normal"));

        // Neither the job nor the template names one: left for the API server to default.
        let bare = job_from(json!({
            "metadata": {"name": "bare", "namespace": "ns", "uid": "u1"},
            "spec": {"tasks": [{"name": "t", "replicas": 1, "template": {"spec": {
                "schedulerName": "", "containers": [{"name": "c", "image": "i"}]}}}]}
        }));
        let spec = build_pod(&bare, task(&bare, "t"), 0, false)
            .spec
            .expect("spec");
        assert_eq!(spec.scheduler_name, None);
        assert_eq!(spec.priority_class_name, None);
    }

    #[test]
    fn job_volumes_are_mounted_in_regular_containers_only() {
        let job = train();
        let pod = build_pod(&job, task(&job, "ps"), 0, false);
        let spec = pod.spec.expect("spec");
        let volumes = spec.volumes.clone().unwrap_or_default();
        // Three job volumes, two distinct claims.
        assert_eq!(volumes.len(), 2);
        let claims: Vec<String> = volumes
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.clone())
            .collect();
        assert_eq!(
            claims,
            vec!["shared-data".to_string(), generated_claim_name(&job, 1)]
        );
        for v in &volumes {
            let suffix = v.name.strip_prefix("train-").expect("named after the job");
            assert_eq!(suffix.len(), 12);
            assert!(
                suffix
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
            );
        }
        assert_ne!(volumes[0].name, volumes[1].name);
        let mounts = spec.containers[0].volume_mounts.clone().unwrap_or_default();
        let got: Vec<(&str, &str)> = mounts
            .iter()
            .map(|m| (m.name.as_str(), m.mount_path.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (volumes[0].name.as_str(), "/data"),
                (volumes[1].name.as_str(), "/scratch")
            ]
        );
        let init = &spec.init_containers.as_ref().expect("init containers")[0];
        assert_eq!(
            init.volume_mounts, None,
            "init containers get no job volumes"
        );

        // Both containers of a worker get them.
        let worker = build_pod(&job, task(&job, "worker"), 1, false)
            .spec
            .expect("spec");
        for c in &worker.containers {
            assert_eq!(
                c.volume_mounts.as_ref().map(Vec::len),
                Some(2),
                "{}",
                c.name
            );
        }
        // Rebuilding gives the same pod (hash, not random names); volume names depend on
        // the claim only, so every pod of the job agrees.
        assert_eq!(build_pod(&job, task(&job, "ps"), 0, false).spec, Some(spec));
        assert_eq!(
            worker.volumes.map(|v| v[0].name.clone()),
            Some(volumes[0].name.clone())
        );
    }

    #[test]
    fn a_recorded_claim_name_is_mounted_and_matches_the_generated_one() {
        let mut job = train();
        let generated = generated_claim_name(&job, 1);
        let before = build_pod(&job, task(&job, "ps"), 0, false);
        if let Some(v) = job.spec.volumes.as_mut().and_then(|v| v.get_mut(1)) {
            v.volume_claim_name = Some(generated);
        }
        assert_eq!(build_pod(&job, task(&job, "ps"), 0, false), before);
    }

    #[test]
    fn partitioned_tasks_get_partition_ids() {
        let job = train();
        let worker = task(&job, "worker");
        let ids: Vec<String> = (0..4)
            .map(|i| {
                let pod = build_pod(&job, worker, i, false);
                pod.metadata.labels.expect("labels")[keys::PARTITION_ID].clone()
            })
            .collect();
        assert_eq!(ids, ["0", "0", "1", "1"]);
        let pod = build_pod(&job, worker, 3, false);
        assert_eq!(pod.metadata.name.as_deref(), Some("train-worker-3"));
        let annotations = pod.metadata.annotations.expect("annotations");
        assert!(!annotations.contains_key(keys::NUMA_POLICY));
        assert!(
            !annotations.contains_key(keys::PARTITION_ID),
            "a label only"
        );
        let ps = build_pod(&job, task(&job, "ps"), 0, false);
        assert!(
            !ps.metadata
                .labels
                .expect("labels")
                .contains_key(keys::PARTITION_ID)
        );

        // An invalid size puts everything in partition 0.
        let mut bad = worker.clone();
        if let Some(p) = bad.partition_policy.as_mut() {
            p.partition_size = Some(0);
        }
        let pod = build_pod(&job, &bad, 3, false);
        assert_eq!(
            pod.metadata.labels.expect("labels")[keys::PARTITION_ID],
            "0"
        );
    }

    #[test]
    fn forwarding_adds_label_and_annotation() {
        let job = train();
        let pod = build_pod(&job, task(&job, "worker"), 0, true);
        assert_eq!(
            pod.metadata.labels.expect("labels")[keys::JOB_FORWARDING],
            "true"
        );
        assert_eq!(
            pod.metadata.annotations.expect("annotations")[keys::JOB_FORWARDING],
            "true"
        );
        let plain = build_pod(&job, task(&job, "worker"), 0, false);
        assert!(
            !plain
                .metadata
                .labels
                .expect("labels")
                .contains_key(keys::JOB_FORWARDING)
        );
    }

    #[test]
    fn unnamed_task_and_fresh_job_defaults() {
        // No status yet, no queue, no task name, only the max-unavailable budget.
        let job = job_from(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "u",
                "annotations": {"volcano.sh/jdb-max-unavailable": "25%"}},
            "spec": {"tasks": [{"replicas": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "i"}]}}}]}
        }));
        let pod = build_pod(&job, &job.tasks()[0], 0, false);
        assert_eq!(pod.metadata.name.as_deref(), Some("j--0"));
        let a = pod.metadata.annotations.expect("annotations");
        assert_eq!(a[keys::TASK_SPEC], "default");
        assert_eq!(a[keys::TEMPLATE_UID], "j-");
        assert_eq!(a[keys::JOB_VERSION], "0");
        assert_eq!(a[keys::JOB_RETRY_COUNT], "0");
        assert_eq!(a[keys::QUEUE_NAME], "default");
        assert_eq!(a[keys::JDB_MAX_UNAVAILABLE], "25%");
        assert!(!a.contains_key(keys::PREEMPTABLE));
        assert_eq!(
            pod.metadata.labels.expect("labels")[keys::TASK_SPEC],
            "default"
        );
    }

    #[test]
    fn pod_group_of_a_two_task_job() {
        let job = train();
        let pg = build_pod_group(&job, &classes);
        assert_eq!(pg.metadata.name, Some(format!("train-{UID}")));
        assert_eq!(pg.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(pg.metadata.labels, job.metadata.labels);
        assert_eq!(pg.metadata.annotations, job.metadata.annotations);
        assert_eq!(
            pg.metadata.owner_references,
            Some(vec![owner_reference(&job)])
        );
        assert_eq!(pg.status, None);
        let got = serde_json::to_value(&pg.spec).expect("serializes");
        assert_eq!(
            got,
            json!({
                "minMember": 3,
                "minTaskMember": {"ps": 1, "worker": 2},
                "queue": "research",
                "priorityClassName": "normal",
                // ps (priority 1000) 1 pod + worker 2 pods.
                "minResources": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2", "pods": "3"},
                "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                "subGroupPolicy": [{
                    "name": "worker",
                    "networkTopology": {"mode": "soft", "highestTierAllowed": 1},
                    "subGroupSize": 2,
                    "minSubGroups": 1,
                    "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
                    "matchLabelKeys": ["volcano.sh/partition-id"],
                }],
            })
        );
    }

    #[test]
    fn pod_group_min_task_member_and_topology_variants() {
        let job = job_from(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "minAvailable": 4,
                "networkTopology": {"mode": "soft", "highestTierName": "spine"},
                "tasks": [
                    {"name": "parts", "replicas": 6,
                     "partitionPolicy": {"totalPartitions": 3, "partitionSize": 2, "minPartitions": 2},
                     "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
                    {"name": "nomin", "replicas": 5,
                     "partitionPolicy": {"totalPartitions": 5, "partitionSize": 1},
                     "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
                    {"name": "plain", "replicas": 3,
                     "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
                ]
            }
        }));
        let pg = build_pod_group(&job, &classes);
        assert_eq!(
            pg.spec.min_task_member,
            Some(BTreeMap::from([
                ("parts".to_string(), 4),
                ("nomin".to_string(), 5),
                ("plain".to_string(), 3)
            ]))
        );
        assert_eq!(
            pg.spec.network_topology,
            Some(NetworkTopologySpec {
                mode: Some(NetworkTopologyMode::Soft),
                highest_tier_allowed: None,
                highest_tier_name: Some("spine".into()),
            })
        );
        let names: Vec<_> = pg
            .spec
            .sub_group_policy
            .iter()
            .flatten()
            .map(|s| (s.name.clone(), s.sub_group_size, s.min_sub_groups))
            .collect();
        assert_eq!(
            names,
            vec![
                (Some("parts".into()), Some(2), Some(2)),
                (Some("nomin".into()), Some(1), Some(0))
            ]
        );
        assert_eq!(pg.spec.queue.as_deref(), Some("default"));
        assert_eq!(pg.spec.priority_class_name, None);
        // Containers without requests: only `pods` counts.
        assert_eq!(
            pg.spec.min_resources.as_ref().map(quantities),
            Some(map(&[("pods", "4")]))
        );
    }

    /// The PodGroup as the API server hands it back: defaults filled in, the scheduler's
    /// status and annotation added, quantities in another notation.
    fn stored(pg: &PodGroup) -> PodGroup {
        let mut v = serde_json::to_value(pg).expect("serializes");
        v["status"] = json!({"phase": "Running", "running": 3});
        v["metadata"]["annotations"]["volcano.sh/job-allocated-hypernode"] = json!("s0");
        v["spec"]["minResources"]["cpu"] = json!("4000m");
        v["spec"]["minResources"]["memory"] = json!("8192Mi");
        v["spec"]["subGroupPolicy"][0]["labelSelector"]["matchExpressions"] = json!([]);
        serde_json::from_value(v).expect("parses")
    }

    #[test]
    fn identical_pod_group_needs_no_update() {
        let job = train();
        let pg = build_pod_group(&job, &classes);
        assert_eq!(pod_group_update(&pg, &pg), None);
        assert_eq!(pod_group_update(&stored(&pg), &pg), None);
        // CRD defaults in sub-groups do not count as a difference.
        let mut defaulted = stored(&pg);
        if let Some(list) = defaulted.spec.sub_group_policy.as_mut() {
            list[0].network_topology = Some(NetworkTopologySpec {
                mode: None,
                highest_tier_allowed: Some(1),
                highest_tier_name: None,
            });
        }
        let mut soft_free = pg.clone();
        if let Some(list) = soft_free.spec.sub_group_policy.as_mut() {
            list[0].network_topology = Some(NetworkTopologySpec {
                mode: Some(NetworkTopologyMode::Hard),
                highest_tier_allowed: Some(1),
                highest_tier_name: None,
            });
        }
        assert_eq!(pod_group_update(&defaulted, &soft_free), None);
    }

    #[test]
    fn pod_group_update_patches_each_changed_field() {
        let job = train();
        let desired = build_pod_group(&job, &classes);
        let base = stored(&desired);
        let patch = |edit: &dyn Fn(&mut PodGroup)| {
            let mut existing = base.clone();
            edit(&mut existing);
            let out = pod_group_update(&existing, &desired);
            if let Some(p) = &out {
                // Applying the patch as the API server would leaves nothing to change.
                let mut applied = serde_json::to_value(&existing).expect("serializes");
                json_patch::merge(&mut applied, p);
                let applied: PodGroup = serde_json::from_value(applied).expect("parses");
                assert_eq!(pod_group_update(&applied, &desired), None, "{p}");
            }
            out
        };

        assert_eq!(
            patch(&|pg| pg.spec.priority_class_name = Some("low".into())),
            Some(json!({"spec": {"priorityClassName": "normal"}}))
        );
        assert_eq!(
            patch(&|pg| pg.spec.min_member = Some(5)),
            Some(json!({"spec": {"minMember": 3}}))
        );
        assert_eq!(
            patch(&|pg| pg.spec.min_member = None),
            Some(json!({"spec": {"minMember": 3}}))
        );
        // A Volcano-made PodGroup with quota keys: the keys tephra does not write go.
        assert_eq!(
            patch(&|pg| {
                let r = pg.spec.min_resources.get_or_insert_default();
                r.insert("count/pods".into(), Quantity("3".into()));
                r.insert("requests.cpu".into(), Quantity("4".into()));
            }),
            Some(json!({"spec": {"minResources": {
                "cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2", "pods": "3",
                "count/pods": null, "requests.cpu": null,
            }}}))
        );
        assert_eq!(
            patch(&|pg| pg.spec.min_task_member = None),
            Some(json!({"spec": {"minTaskMember": {"ps": 1, "worker": 2}}}))
        );
        assert_eq!(
            patch(&|pg| {
                pg.spec
                    .min_task_member
                    .get_or_insert_default()
                    .insert("worker".into(), 4);
            }),
            Some(json!({"spec": {"minTaskMember": {"worker": 2}}}))
        );
        assert_eq!(
            patch(&|pg| {
                if let Some(list) = pg.spec.sub_group_policy.as_mut() {
                    list[0].min_sub_groups = Some(2);
                }
            }),
            Some(json!({"spec": {"subGroupPolicy": [{
                "name": "worker",
                "networkTopology": {"mode": "soft", "highestTierAllowed": 1},
                "subGroupSize": 2,
                "minSubGroups": 1,
                "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
                "matchLabelKeys": ["volcano.sh/partition-id"],
            }]}}))
        );

        // Several at once.
        let both = patch(&|pg| {
            pg.spec.min_member = Some(1);
            pg.spec.priority_class_name = None;
        });
        assert_eq!(
            both,
            Some(json!({"spec": {"minMember": 3, "priorityClassName": "normal"}}))
        );

        // Never queue, topology, labels or annotations.
        assert_eq!(
            patch(&|pg| {
                pg.spec.queue = Some("elsewhere".into());
                pg.spec.network_topology = None;
                pg.metadata.labels = None;
                pg.metadata.annotations = Some(map(&[("x", "y")]));
            }),
            None
        );
    }

    #[test]
    fn pod_group_update_clears_what_is_no_longer_wanted() {
        let job = train();
        let existing = stored(&build_pod_group(&job, &classes));
        let mut plain = job.clone();
        plain.spec.priority_class_name = None;
        for t in plain.spec.tasks.iter_mut().flatten() {
            t.partition_policy = None;
            if let Some(spec) = t.template.as_mut().and_then(|t| t.spec.as_mut()) {
                for c in &mut spec.containers {
                    c.resources = None;
                }
            }
        }
        let desired = build_pod_group(&plain, &classes);
        assert_eq!(
            pod_group_update(&existing, &desired),
            Some(json!({"spec": {
                "priorityClassName": null,
                "minResources": {"pods": "3", "cpu": null, "memory": null, "nvidia.com/gpu": null},
                "subGroupPolicy": null,
            }}))
        );
        let mut applied = serde_json::to_value(&existing).expect("serializes");
        if let Some(p) = pod_group_update(&existing, &desired) {
            json_patch::merge(&mut applied, &p);
        }
        let applied: PodGroup = serde_json::from_value(applied).expect("parses");
        assert_eq!(applied.spec.sub_group_policy, None);
        assert_eq!(applied.spec.priority_class_name, None);
        assert_eq!(
            applied.spec.min_resources.as_ref().map(quantities),
            Some(map(&[("pods", "3")]))
        );
        assert_eq!(pod_group_update(&applied, &desired), None);
    }

    /// A job of tasks `(name, priority class, replicas, minAvailable, cpu per pod)`.
    fn ranked_job(min_available: i32, tasks: &[(&str, &str, i32, Option<i32>, &str)]) -> Job {
        let tasks: Vec<serde_json::Value> = tasks
            .iter()
            .map(|(name, class, replicas, min, cpu)| {
                let mut t = json!({"name": name, "replicas": replicas, "template": {"spec": {
                    "priorityClassName": class,
                    "containers": [{"name": "c", "image": "i",
                        "resources": {"requests": {"cpu": cpu}}}]}}});
                if let Some(m) = min {
                    t["minAvailable"] = json!(m);
                }
                t
            })
            .collect();
        job_from(json!({
            "metadata": {"name": "r", "namespace": "ns", "uid": "u"},
            "spec": {"minAvailable": min_available, "tasks": tasks}
        }))
    }

    fn min_res(job: &Job) -> BTreeMap<String, String> {
        quantities(&min_resources(job, &classes))
    }

    #[test]
    fn min_resources_takes_the_first_pods_when_the_gang_is_smaller() {
        // minAvailable 4 < Σ task minAvailable 5: the 3 high pods, then 1 low pod.
        let job = ranked_job(
            4,
            &[
                ("a", "low", 2, Some(2), "1"),
                ("b", "high", 3, Some(3), "2"),
            ],
        );
        assert_eq!(min_res(&job), map(&[("cpu", "7"), ("pods", "4")]));
        // Fewer than the first task's replicas: only that task.
        let job = ranked_job(
            2,
            &[
                ("a", "low", 2, Some(2), "1"),
                ("b", "high", 3, Some(3), "2"),
            ],
        );
        assert_eq!(min_res(&job), map(&[("cpu", "4"), ("pods", "2")]));
        // A gang of 0 needs nothing.
        let job = ranked_job(0, &[("a", "low", 2, Some(2), "1")]);
        assert!(min_res(&job).is_empty());
    }

    #[test]
    fn min_resources_sums_task_gangs_when_equal() {
        // minAvailable 3 == 1 + 2: each task's own minAvailable, whatever the order.
        let job = ranked_job(
            3,
            &[
                ("a", "low", 4, Some(1), "1"),
                ("b", "high", 4, Some(2), "500m"),
            ],
        );
        assert_eq!(min_res(&job), map(&[("cpu", "2"), ("pods", "3")]));
    }

    #[test]
    fn min_resources_fills_from_spare_replicas_by_priority() {
        // minAvailable 4 > Σ 2: gangs (b 1, a 1), then spares of b (priority high) first.
        let job = ranked_job(
            4,
            &[
                ("a", "low", 4, Some(1), "1"),
                ("b", "high", 3, Some(1), "2"),
            ],
        );
        assert_eq!(min_res(&job), map(&[("cpu", "7"), ("pods", "4")]));
        // Swap the priorities: a's spares come first.
        let job = ranked_job(
            4,
            &[
                ("a", "high", 4, Some(1), "1"),
                ("b", "low", 3, Some(1), "2"),
            ],
        );
        assert_eq!(min_res(&job), map(&[("cpu", "5"), ("pods", "4")]));
        // A task whose minAvailable equals its replicas has no spares; one without
        // minAvailable offers all its replicas as spares.
        let job = ranked_job(
            5,
            &[
                ("full", "high", 2, Some(2), "1"),
                ("open", "low", 3, None, "2"),
            ],
        );
        assert_eq!(min_res(&job), map(&[("cpu", "8"), ("pods", "5")]));
    }

    #[test]
    fn min_resources_ties_keep_declaration_order() {
        for (first, expect) in [("1", "1"), ("3", "3")] {
            let job = ranked_job(
                1,
                &[
                    ("a", "same", 1, Some(1), first),
                    ("b", "same", 1, Some(1), "2"),
                ],
            );
            assert_eq!(min_res(&job), map(&[("cpu", expect), ("pods", "1")]));
        }
        // An unknown class counts as 0, below a positive class and above a negative one.
        let job = ranked_job(
            1,
            &[
                ("neg", "low", 1, Some(1), "1"),
                ("unknown", "missing", 1, Some(1), "2"),
                ("pos", "normal", 1, Some(1), "3"),
            ],
        );
        assert_eq!(min_res(&job), map(&[("cpu", "3"), ("pods", "1")]));
    }

    #[test]
    fn claim_names_are_stable_and_distinct() {
        let job = train();
        let a = generated_claim_name(&job, 0);
        assert_eq!(a, generated_claim_name(&train(), 0));
        let suffix = a.strip_prefix("train-pvc-").expect("prefix");
        assert_eq!(suffix.len(), 12);
        assert!(
            suffix
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        );
        let names: BTreeSet<String> = (0..50).map(|i| generated_claim_name(&job, i)).collect();
        assert_eq!(names.len(), 50);
        // A re-created job of the same name gets other claims.
        let mut again = train();
        again.metadata.uid = Some("another-uid".into());
        assert_ne!(generated_claim_name(&again, 0), a);
    }

    #[test]
    fn pvc_is_owned_by_the_job() {
        let job = train();
        let volume = &job.spec.volumes.as_ref().expect("volumes")[1];
        let name = generated_claim_name(&job, 1);
        let pvc = build_pvc(&job, volume, &name);
        assert_eq!(pvc.metadata.name.as_deref(), Some(name.as_str()));
        assert_eq!(pvc.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(
            pvc.metadata.owner_references,
            Some(vec![owner_reference(&job)])
        );
        assert_eq!(pvc.spec, volume.volume_claim);
        let spec = pvc.spec.expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(pvc.status, None);
    }

    /// A job whose tasks wait on others: `a` (2 replicas, minAvailable 2), `b` (1, 1),
    /// `c` (2, no minAvailable), and waiters with different dependsOn.
    fn pipeline() -> Job {
        let tmpl = json!({"spec": {"containers": [{"name": "c", "image": "i"}]}});
        job_from(json!({
            "metadata": {"name": "pipe", "namespace": "ns", "uid": "u"},
            "spec": {"minAvailable": 1, "tasks": [
                {"name": "a", "replicas": 2, "minAvailable": 2, "template": tmpl},
                {"name": "b", "replicas": 1, "minAvailable": 1, "template": tmpl},
                {"name": "c", "replicas": 2, "template": tmpl},
                {"name": "all", "replicas": 1, "template": tmpl,
                 "dependsOn": {"name": ["a", "b"]}},
                {"name": "any", "replicas": 1, "template": tmpl,
                 "dependsOn": {"name": ["a", "b"], "iteration": "any"}},
                {"name": "any-one", "replicas": 1, "template": tmpl,
                 "dependsOn": {"name": ["a"], "iteration": "any"}},
                {"name": "on-c", "replicas": 1, "template": tmpl,
                 "dependsOn": {"name": ["c"]}},
                {"name": "on-ghost", "replicas": 1, "template": tmpl,
                 "dependsOn": {"name": ["ghost"]}},
                {"name": "on-none", "replicas": 1, "template": tmpl,
                 "dependsOn": {"name": []}},
            ]}
        }))
    }

    fn pod_in(phase: &str, ready: &[bool]) -> Pod {
        let statuses: Vec<ContainerStatus> = ready
            .iter()
            .enumerate()
            .map(|(i, r)| ContainerStatus {
                name: format!("c{i}"),
                ready: *r,
                ..ContainerStatus::default()
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "x"},
            "status": {"phase": phase, "containerStatuses": statuses},
        }))
        .expect("pod parses")
    }

    fn ready_with(job: &Job, pods: &HashMap<String, Pod>) -> BTreeMap<String, bool> {
        let lookup = |name: &str| pods.get(name).cloned().map(Arc::new);
        job.tasks()
            .iter()
            .map(|t| (t.name().to_string(), dependencies_ready(job, t, &lookup)))
            .collect()
    }

    #[test]
    fn dependencies_wait_for_ready_or_finished_pods() {
        let job = pipeline();
        let mut pods = HashMap::new();
        let r = ready_with(&job, &pods);
        assert!(r["a"] && r["b"] && r["c"], "no dependsOn: ready");
        assert!(!r["all"] && !r["any"] && !r["any-one"]);
        assert!(
            r["on-c"],
            "a dependency without minAvailable is always ready"
        );
        assert!(!r["on-ghost"], "an unknown task never becomes ready");
        assert!(r["on-none"], "an empty list waits for nothing");

        // a: one ready, one running with a container not ready; b: pending.
        pods.insert("pipe-a-0".into(), pod_in("Running", &[true, true]));
        pods.insert("pipe-a-1".into(), pod_in("Running", &[true, false]));
        pods.insert("pipe-b-0".into(), pod_in("Pending", &[false]));
        let r = ready_with(&job, &pods);
        assert!(!r["all"] && !r["any"] && !r["any-one"]);

        // b succeeds: `any` of two is enough, `all` still waits for a.
        pods.insert("pipe-b-0".into(), pod_in("Succeeded", &[false]));
        let r = ready_with(&job, &pods);
        assert!(r["any"]);
        assert!(!r["all"]);
        assert!(!r["any-one"], "`any` with one name is `all`");

        // a's second pod becomes ready.
        pods.insert("pipe-a-1".into(), pod_in("Running", &[true, true]));
        let r = ready_with(&job, &pods);
        assert!(r["all"] && r["any"] && r["any-one"]);

        // Failed pods do not count; Succeeded ones do.
        pods.insert("pipe-a-1".into(), pod_in("Failed", &[]));
        assert!(!ready_with(&job, &pods)["all"]);
        pods.insert("pipe-a-1".into(), pod_in("Succeeded", &[]));
        assert!(ready_with(&job, &pods)["all"]);

        // Pods beyond the task's replicas are not looked at.
        pods.remove("pipe-a-0");
        pods.insert("pipe-a-2".into(), pod_in("Running", &[true]));
        assert!(!ready_with(&job, &pods)["all"]);
    }
}
