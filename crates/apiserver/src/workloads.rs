//! The controller-manager stand-in: what kube-controller-manager's deployment, replicaset,
//! statefulset and job controllers do, small, so that Deployments, StatefulSets and batch Jobs
//! applied to the embedded API get pods (Volcano's `group-min-member` examples are
//! Deployments) and `kubectl get deploy` / `kubectl rollout status` behave.
//!
//! - **Deployment** → one ReplicaSet per pod template (`NAME-HASH`, label `pod-template-hash`,
//!   annotation `deployment.kubernetes.io/revision`), rolled by `maxSurge`/`maxUnavailable`
//!   (`RollingUpdate`, default 25 %/25 %) or `Recreate`; status `replicas`, `updatedReplicas`,
//!   `readyReplicas`, `availableReplicas`, `unavailableReplicas`, `observedGeneration` and the
//!   `Available`/`Progressing` conditions.
//! - **ReplicaSet** → pods from its template (`generateName: NAME-`, a controller
//!   ownerReference), at most [`BURST`] created per pass; extra pods are deleted, the least
//!   useful first (unscheduled, then pending, then not ready, then newest).
//! - **StatefulSet** → pods `NAME-0` … `NAME-(N-1)` with `controller-revision-hash`,
//!   `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`; `OrderedReady`
//!   (one at a time, each waiting for the previous to be Ready; scale-down from the highest
//!   ordinal) or `Parallel`; `RollingUpdate` replaces outdated pods from the highest ordinal.
//! - **Job** (`batch/v1`) → pods up to `parallelism` until `completions` succeed (or, without
//!   `completions`, until one succeeds), `backoffLimit` failed pods fail it; status `active`,
//!   `ready`, `succeeded`, `failed`, `startTime`, `completionTime`, conditions `Complete` /
//!   `Failed` (with `SuccessCriteriaMet` / `FailureTarget` before them, as Kubernetes 1.31+).
//!
//! Pods are created through the same create path as clients' (admission webhooks see them),
//! as the internal caller (no injected faults). Deciding is done by pure functions of the
//! observed objects; [`run`] is a thin loop over the store's watches. Not done: ControllerRevision
//! objects, `minReadySeconds`, `progressDeadlineSeconds`, `revisionHistoryLimit`, Indexed jobs,
//! pod failure policies, `partition`, PersistentVolumeClaim templates.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::ops::{DeleteOptions, ObjectRef, WriteOptions};
use super::prepare::Endpoint;
use super::resources::ResourceInfo;
use super::store::{EventType, GroupResource, Stored};
use super::{ApiError, ApiServer, Caller, now_rfc3339};

/// Label of a Deployment's ReplicaSets and their pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// A ReplicaSet's revision within its Deployment.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// A StatefulSet pod's revision label.
pub const REVISION_HASH: &str = "controller-revision-hash";
/// A StatefulSet pod's own name, as a label.
pub const STS_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";
/// A StatefulSet pod's ordinal, as a label.
pub const POD_INDEX: &str = "apps.kubernetes.io/pod-index";
/// Most pods one controller creates in one pass (kube's `burstReplicas`).
pub const BURST: usize = 500;
/// Most replicas the stand-in keeps for one workload: a typo like `replicas: 2000000000` must
/// not fill the memory of the process (a warning is logged).
pub const MAX_REPLICAS: i64 = 100_000;

/// The workload kinds the stand-in drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `batch/v1` Job.
    Job,
}

impl Kind {
    fn group_resource(self) -> GroupResource {
        match self {
            Kind::Deployment => GroupResource::new("apps", "deployments"),
            Kind::ReplicaSet => GroupResource::new("apps", "replicasets"),
            Kind::StatefulSet => GroupResource::new("apps", "statefulsets"),
            Kind::Job => GroupResource::new("batch", "jobs"),
        }
    }

    /// The kind a controller ownerReference names (`apiVersion`, `kind`), if driven here.
    pub fn of_owner(api_version: &str, kind: &str) -> Option<Kind> {
        match (api_version, kind) {
            ("apps/v1", "Deployment") => Some(Kind::Deployment),
            ("apps/v1", "ReplicaSet") => Some(Kind::ReplicaSet),
            ("apps/v1", "StatefulSet") => Some(Kind::StatefulSet),
            ("batch/v1", "Job") => Some(Kind::Job),
            _ => None,
        }
    }

    fn api_version(self) -> &'static str {
        match self {
            Kind::Job => "batch/v1",
            _ => "apps/v1",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Deployment => "Deployment",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::StatefulSet => "StatefulSet",
            Kind::Job => "Job",
        }
    }
}

type Key = (Kind, String, String);

// ---------------------------------------------------------------------------------------------
// Pure decisions.

/// A stable short hash of a pod template, in kube's "safe" alphabet (no vowels, no look-alike
/// digits), so it can sit in names and labels.
pub fn template_hash(template: &Value) -> String {
    // FNV-1a over the canonical JSON (serde_json keeps object keys sorted).
    let mut h: u32 = 0x811c_9dc5;
    for b in template.to_string().bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    h.to_string()
        .bytes()
        .map(|d| ALPHA[usize::from(d - b'0') % ALPHA.len()] as char)
        .collect()
}

/// A replica count from a spec: absent is `default`, negative is 0, above [`MAX_REPLICAS`] is
/// cut to it.
pub fn replicas_of(v: Option<&Value>, default: i64) -> i64 {
    v.and_then(Value::as_i64)
        .unwrap_or(default)
        .clamp(0, MAX_REPLICAS)
}

/// An int-or-percent (`3`, `"25%"`) of `total`; percentages round up or down. Malformed values
/// are `fallback`. Checked: never overflows.
pub fn int_or_percent(v: Option<&Value>, total: i64, round_up: bool, fallback: i64) -> i64 {
    match v {
        None | Some(Value::Null) => fallback,
        Some(Value::Number(n)) => n.as_i64().unwrap_or(fallback).clamp(0, MAX_REPLICAS),
        Some(Value::String(s)) => {
            let Some(p) = s
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<i64>().ok())
            else {
                return s
                    .parse::<i64>()
                    .map_or(fallback, |n| n.clamp(0, MAX_REPLICAS));
            };
            let p = i128::from(p.clamp(0, 100));
            let scaled = i128::from(total) * p;
            let rounded = if round_up {
                (scaled + 99) / 100
            } else {
                scaled / 100
            };
            i64::try_from(rounded.clamp(0, i128::from(MAX_REPLICAS))).unwrap_or(MAX_REPLICAS)
        }
        Some(_) => fallback,
    }
}

/// `maxSurge` and `maxUnavailable` of a Deployment for `desired` replicas, as kube resolves
/// them (both 0 makes `maxUnavailable` 1).
pub fn fenceposts(strategy: &Value, desired: i64) -> (i64, i64) {
    let ru = strategy.get("rollingUpdate");
    let surge = int_or_percent(ru.and_then(|r| r.get("maxSurge")), desired, true, -1);
    let unavailable = int_or_percent(ru.and_then(|r| r.get("maxUnavailable")), desired, false, -1);
    let surge = if surge < 0 {
        int_or_percent(Some(&json!("25%")), desired, true, 1)
    } else {
        surge
    };
    let unavailable = if unavailable < 0 {
        int_or_percent(Some(&json!("25%")), desired, false, 0)
    } else {
        unavailable
    };
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable.min(desired))
    }
}

/// What a Deployment controller sees of one of its ReplicaSets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RsView {
    /// Name.
    pub name: String,
    /// `spec.replicas`.
    pub replicas: i64,
    /// `status.availableReplicas`.
    pub available: i64,
    /// Revision annotation.
    pub revision: i64,
}

/// The `spec.replicas` each ReplicaSet of a Deployment should get in this pass: `new` (the one
/// of the current template) and the others, by name. Pure; kube's rolling arithmetic
/// (`NewRSNewReplicas`, `reconcileOldReplicaSets`).
pub fn rollout_plan(
    desired: i64,
    recreate: bool,
    surge: i64,
    unavailable: i64,
    new: &RsView,
    olds: &[RsView],
    old_pods_left: bool,
) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    if recreate {
        for o in olds.iter().filter(|o| o.replicas != 0) {
            out.push((o.name.clone(), 0));
        }
        let target = if olds.iter().any(|o| o.replicas > 0) || old_pods_left {
            0
        } else {
            desired
        };
        if target != new.replicas {
            out.push((new.name.clone(), target));
        }
        return out;
    }
    let total: i64 = olds.iter().map(|o| o.replicas).sum::<i64>() + new.replicas;
    // Scale the new ReplicaSet up, within desired + maxSurge pods in all.
    let mut new_target = new.replicas;
    if new.replicas > desired {
        new_target = desired;
    } else if new.replicas < desired {
        let room = (desired + surge - total).max(0);
        new_target = (new.replicas + room).min(desired);
    }
    if new_target != new.replicas {
        out.push((new.name.clone(), new_target));
    }
    // Scale old ones down, keeping desired - maxUnavailable available: first replicas that
    // are not available (removing them costs no availability), then available ones, oldest
    // ReplicaSet first.
    let min_available = desired - unavailable;
    let new_unavailable = (new_target - new.available).max(0);
    let all = total - new.replicas + new_target;
    let mut olds: Vec<RsView> = olds.iter().filter(|o| o.replicas > 0).cloned().collect();
    olds.sort_by_key(|o| o.revision);
    let mut cleanup = (all - min_available - new_unavailable).max(0);
    for o in olds.iter_mut() {
        let cut = (o.replicas - o.available).max(0).min(cleanup);
        if cut > 0 {
            o.replicas -= cut;
            cleanup -= cut;
            out.push((o.name.clone(), o.replicas));
        }
    }
    let available: i64 = olds
        .iter()
        .map(|o| o.available.min(o.replicas))
        .sum::<i64>()
        + new.available;
    let mut scale_down = (available - min_available).max(0);
    for o in olds.iter_mut() {
        let cut = o.replicas.min(scale_down);
        if cut > 0 {
            o.replicas -= cut;
            scale_down -= cut;
            out.push((o.name.clone(), o.replicas));
        }
    }
    // One entry per ReplicaSet: the last decision wins.
    let mut dedup: Vec<(String, i64)> = Vec::new();
    for (n, r) in out {
        if let Some(e) = dedup.iter_mut().find(|(x, _)| *x == n) {
            e.1 = r;
        } else {
            dedup.push((n, r));
        }
    }
    dedup
}

/// What a controller sees of one of its pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    /// Name.
    pub name: String,
    /// `spec.nodeName` is set.
    pub scheduled: bool,
    /// `status.phase`.
    pub phase: String,
    /// The `Ready` condition is True.
    pub ready: bool,
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// `creationTimestamp` (RFC 3339 sorts as text).
    pub created: String,
    /// Labels that decide revisions (`controller-revision-hash`).
    pub revision: String,
}

impl PodView {
    fn of(s: &Stored, v: &Value) -> Self {
        let ready = v
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Ready")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            });
        Self {
            name: s.name.clone(),
            scheduled: s.node_name.is_some(),
            phase: s.phase.clone().unwrap_or_else(|| "Pending".into()),
            ready,
            deleting: s.deleting,
            created: v
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            revision: s
                .labels
                .iter()
                .find(|(k, _)| k == REVISION_HASH)
                .map(|(_, v)| v.clone())
                .unwrap_or_default(),
        }
    }

    /// Neither finished nor being deleted (kube's `FilterActivePods`).
    pub fn active(&self) -> bool {
        !self.deleting && self.phase != "Succeeded" && self.phase != "Failed"
    }
}

/// Which of `active` pods to delete to keep `want`: the least useful first (unscheduled,
/// pending, not ready, then the newest), as kube's `ActivePods` ordering. Pure.
pub fn pods_to_delete(active: &[PodView], want: usize) -> Vec<String> {
    if active.len() <= want {
        return vec![];
    }
    let mut ranked: Vec<&PodView> = active.iter().collect();
    ranked.sort_by(|a, b| {
        (a.scheduled, a.phase == "Running", a.ready)
            .cmp(&(b.scheduled, b.phase == "Running", b.ready))
            .then_with(|| b.created.cmp(&a.created))
            .then_with(|| b.name.cmp(&a.name))
    });
    ranked
        .into_iter()
        .take(active.len() - want)
        .map(|p| p.name.clone())
        .collect()
}

/// One StatefulSet step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StsAction {
    /// Create the pod of this ordinal.
    Create(i64),
    /// Delete this pod (scale-down, finished, or outdated).
    Delete(String),
}

/// The StatefulSet controller's next steps for `want` replicas, pods by ordinal. Pure.
pub fn statefulset_plan(
    want: i64,
    parallel: bool,
    rolling: bool,
    update_revision: &str,
    pods: &[(i64, PodView)],
) -> Vec<StsAction> {
    let mut out = Vec::new();
    let at = |i: i64| pods.iter().find(|(o, _)| *o == i).map(|(_, p)| p);
    // Finished pods are replaced (deleted now, created again next pass).
    for (_, p) in pods {
        if !p.deleting && (p.phase == "Succeeded" || p.phase == "Failed") {
            out.push(StsAction::Delete(p.name.clone()));
        }
    }
    if !out.is_empty() {
        return out;
    }
    let mut created = 0usize;
    for i in 0..want {
        match at(i) {
            None => {
                if created >= BURST {
                    break;
                }
                out.push(StsAction::Create(i));
                created += 1;
                if !parallel {
                    break;
                }
            }
            Some(p) if !parallel && (!p.ready || p.deleting) => break,
            Some(_) => {}
        }
    }
    if !out.is_empty() {
        return out;
    }
    let mut extra: Vec<&(i64, PodView)> = pods.iter().filter(|(o, _)| *o >= want).collect();
    extra.sort_by_key(|(o, _)| std::cmp::Reverse(*o));
    if !extra.is_empty() {
        if parallel {
            out.extend(
                extra
                    .iter()
                    .filter(|(_, p)| !p.deleting)
                    .map(|(_, p)| StsAction::Delete(p.name.clone())),
            );
        } else if pods.iter().all(|(_, p)| !p.deleting) {
            out.push(StsAction::Delete(extra[0].1.name.clone()));
        }
        return out;
    }
    let settled = pods
        .iter()
        .filter(|(o, _)| *o < want)
        .all(|(_, p)| p.ready && !p.deleting);
    if rolling && settled {
        let mut outdated: Vec<&(i64, PodView)> = pods
            .iter()
            .filter(|(o, p)| *o < want && p.revision != update_revision)
            .collect();
        outdated.sort_by_key(|(o, _)| std::cmp::Reverse(*o));
        if let Some((_, p)) = outdated.first() {
            out.push(StsAction::Delete(p.name.clone()));
        }
    }
    out
}

/// The ordinal of a StatefulSet pod name (`web-3` of `web` → 3).
pub fn ordinal(set: &str, pod: &str) -> Option<i64> {
    pod.strip_prefix(set)?
        .strip_prefix('-')?
        .parse::<i64>()
        .ok()
        .filter(|o| *o >= 0)
}

/// The Job controller's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobStep {
    /// Create this many pods.
    Create(usize),
    /// Delete these pods.
    Delete(Vec<String>),
    /// The job is done: this condition type (`Complete` or `Failed`), reason, message; its
    /// active pods are deleted.
    Finish(&'static str, &'static str, &'static str),
    /// Nothing to do but the status.
    Wait,
}

/// The Job controller's step from its spec and pods. Pure.
pub fn job_step(spec: &Value, pods: &[PodView]) -> JobStep {
    let parallelism = replicas_of(spec.get("parallelism"), 1);
    let completions = spec
        .get("completions")
        .and_then(Value::as_i64)
        .map(|c| c.clamp(0, MAX_REPLICAS));
    let backoff = spec
        .get("backoffLimit")
        .and_then(Value::as_i64)
        .unwrap_or(6)
        .max(0);
    let suspend = spec.get("suspend").and_then(Value::as_bool) == Some(true);
    let active: Vec<PodView> = pods.iter().filter(|p| p.active()).cloned().collect();
    let succeeded = count(pods, |p| p.phase == "Succeeded");
    let failed = count(pods, |p| p.phase == "Failed");
    if failed > backoff {
        return JobStep::Finish(
            "Failed",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        );
    }
    let done = match completions {
        Some(c) => succeeded >= c,
        None => succeeded >= 1 && active.is_empty(),
    };
    if done {
        return JobStep::Finish(
            "Complete",
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        );
    }
    let want = if suspend {
        0
    } else {
        match completions {
            Some(c) => parallelism.min(c - succeeded),
            None if succeeded > 0 => 0,
            None => parallelism,
        }
    };
    let have = i64::try_from(active.len()).unwrap_or(i64::MAX);
    if have < want {
        JobStep::Create(usize::try_from(want - have).unwrap_or(0).min(BURST))
    } else if have > want {
        JobStep::Delete(pods_to_delete(&active, usize::try_from(want).unwrap_or(0)))
    } else {
        JobStep::Wait
    }
}

fn count(pods: &[PodView], f: impl Fn(&PodView) -> bool) -> i64 {
    i64::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(i64::MAX)
}

/// A pod for `owner` from its `template`: template labels and annotations plus `labels`, a
/// controller ownerReference, and either `name` or `generateName: PREFIX-`.
pub fn pod_from_template(
    template: &Value,
    owner: &OwnerInfo,
    name: Option<&str>,
    labels: &[(&str, String)],
) -> Value {
    let meta = template.get("metadata").and_then(Value::as_object);
    let mut lbls: Map<String, Value> = meta
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in labels {
        lbls.insert((*k).to_string(), json!(v));
    }
    let mut metadata = json!({
        "namespace": owner.namespace,
        "labels": lbls,
        "ownerReferences": [owner.reference()],
    });
    match name {
        Some(n) => metadata["name"] = json!(n),
        None => metadata["generateName"] = json!(format!("{}-", owner.name)),
    }
    if let Some(a) = meta
        .and_then(|m| m.get("annotations"))
        .filter(|a| a.is_object())
    {
        metadata["annotations"] = a.clone();
    }
    let spec = template
        .get("spec")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

/// The owner of objects a controller creates.
#[derive(Clone, Debug)]
pub struct OwnerInfo {
    /// Kind.
    pub kind: Kind,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Uid.
    pub uid: String,
}

impl OwnerInfo {
    fn of(kind: Kind, s: &Stored) -> Self {
        Self {
            kind,
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            uid: s.uid.clone(),
        }
    }

    /// The controller ownerReference to this owner.
    pub fn reference(&self) -> Value {
        json!({
            "apiVersion": self.kind.api_version(), "kind": self.kind.name(),
            "name": self.name, "uid": self.uid,
            "controller": true, "blockOwnerDeletion": true,
        })
    }
}

/// A condition as the controllers write them.
fn condition(t: &str, status: bool, reason: &str, message: &str, now: &str) -> Value {
    json!({
        "type": t, "status": if status { "True" } else { "False" },
        "reason": reason, "message": message,
        "lastUpdateTime": now, "lastTransitionTime": now,
    })
}

/// Keeps the transition time of a condition whose status did not change (so an unchanged
/// status writes nothing).
fn keep_times(old: Option<&Value>, mut new: Vec<Value>) -> Vec<Value> {
    let olds = old.and_then(Value::as_array);
    for c in &mut new {
        let same = olds.and_then(|o| {
            o.iter().find(|x| {
                x.get("type") == c.get("type")
                    && x.get("status") == c.get("status")
                    && x.get("reason") == c.get("reason")
            })
        });
        if let Some(prev) = same {
            for k in ["lastUpdateTime", "lastTransitionTime", "lastProbeTime"] {
                match prev.get(k) {
                    Some(t) => c[k] = t.clone(),
                    None => {
                        if let Some(o) = c.as_object_mut() {
                            o.remove(k);
                        }
                    }
                }
            }
        }
    }
    new
}

// ---------------------------------------------------------------------------------------------
// The loop.

/// Runs the stand-in until `shutdown`.
pub async fn run(api: Arc<ApiServer>, shutdown: CancellationToken) {
    let watched = [
        GroupResource::new("", "pods"),
        Kind::ReplicaSet.group_resource(),
        Kind::Deployment.group_resource(),
        Kind::StatefulSet.group_resource(),
        Kind::Job.group_resource(),
    ];
    loop {
        let (tx, mut rx) = mpsc::channel::<Option<Key>>(10_000);
        let stop = shutdown.child_token();
        let mut dirty: BTreeSet<Key> = BTreeSet::new();
        for gr in &watched {
            let Ok(start) = api.store.watch(gr, None) else {
                return;
            };
            for ev in &start.initial {
                enqueue(&mut dirty, gr, &ev.obj);
            }
            let (tx, stop, gr) = (tx.clone(), stop.clone(), gr.clone());
            let mut events = start.rx;
            tokio::spawn(async move {
                loop {
                    let ev = tokio::select! {
                        _ = stop.cancelled() => return,
                        r = events.recv() => r,
                    };
                    let keys = match ev {
                        Ok(ev) => keys_of(&gr, &ev.obj, ev.kind),
                        // Lagged: start over from a fresh listing.
                        Err(RecvError::Lagged(_)) => vec![None],
                        Err(RecvError::Closed) => return,
                    };
                    for k in keys {
                        if tx.send(k).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
        drop(tx);
        let mut restart = false;
        while !restart {
            while let Some(key) = dirty.pop_first() {
                if shutdown.is_cancelled() {
                    stop.cancel();
                    return;
                }
                if let Err(e) = reconcile(&api, &key).await {
                    tracing::debug!(kind = ?key.0, namespace = %key.1, name = %key.2, error = %e, "controller stand-in will retry");
                    retry_later(&api, key, &shutdown);
                }
            }
            let first = tokio::select! {
                _ = shutdown.cancelled() => { stop.cancel(); return; }
                k = rx.recv() => k,
            };
            let Some(first) = first else {
                stop.cancel();
                return;
            };
            // Coalesce what is already queued (bounded).
            let mut batch = vec![first];
            while batch.len() < 10_000
                && let Ok(k) = rx.try_recv()
            {
                batch.push(k);
            }
            for k in batch {
                match k {
                    Some(k) => {
                        dirty.insert(k);
                    }
                    None => restart = true,
                }
            }
        }
        stop.cancel();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A failed pass (a conflict, a webhook down) is tried once more a second later; later events
/// on the object or its pods trigger further passes.
fn retry_later(api: &Arc<ApiServer>, key: Key, shutdown: &CancellationToken) {
    let (api, shutdown) = (api.clone(), shutdown.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                if let Err(e) = reconcile(&api, &key).await {
                    tracing::warn!(kind = ?key.0, namespace = %key.1, name = %key.2, error = %e, "controller stand-in pass failed");
                }
            }
        }
    });
}

fn enqueue(dirty: &mut BTreeSet<Key>, gr: &GroupResource, obj: &Stored) {
    for k in keys_of(gr, obj, EventType::Added).into_iter().flatten() {
        dirty.insert(k);
    }
}

/// The workloads an event concerns: the object itself (a workload) and its controller owner.
fn keys_of(gr: &GroupResource, obj: &Stored, kind: EventType) -> Vec<Option<Key>> {
    let mut out = Vec::new();
    let own = [
        Kind::Deployment,
        Kind::ReplicaSet,
        Kind::StatefulSet,
        Kind::Job,
    ]
    .into_iter()
    .find(|k| k.group_resource() == *gr);
    if let Some(k) = own
        && kind != EventType::Deleted
    {
        out.push(Some((k, obj.namespace.clone(), obj.name.clone())));
    }
    for o in obj.owners.iter().filter(|o| o.controller) {
        if let Some(k) = Kind::of_owner(&o.api_version, &o.kind) {
            out.push(Some((k, obj.namespace.clone(), o.name.clone())));
        }
    }
    out
}

async fn reconcile(api: &Arc<ApiServer>, key: &Key) -> Result<(), ApiError> {
    let (kind, ns, name) = key;
    let Some(obj) = api.store.get(&kind.group_resource(), ns, name) else {
        return Ok(());
    };
    if obj.deleting {
        return Ok(());
    }
    let v = obj.value()?;
    match kind {
        Kind::Deployment => deployment(api, &obj, &v).await,
        Kind::ReplicaSet => replicaset(api, &obj, &v).await,
        Kind::StatefulSet => statefulset(api, &obj, &v).await,
        Kind::Job => job(api, &obj, &v).await,
    }
}

/// The objects of `gr` whose controller owner is `owner_uid`, with their JSON.
fn owned(api: &ApiServer, owner_uid: &str, gr: &GroupResource) -> Vec<(Arc<Stored>, Value)> {
    api.store
        .dependents(owner_uid)
        .into_iter()
        .filter(|k| k.gr == *gr)
        .filter_map(|k| api.store.get(&k.gr, &k.namespace, &k.name))
        .filter(|s| s.owners.iter().any(|o| o.controller && o.uid == owner_uid))
        .filter_map(|s| s.value().ok().map(|v| (s, v)))
        .collect()
}

fn res(
    api: &ApiServer,
    group: &str,
    version: &str,
    plural: &str,
) -> Result<Arc<ResourceInfo>, ApiError> {
    api.resource(group, version, plural)
}

fn warn_cut(kind: Kind, s: &Stored, v: Option<&Value>) {
    if v.and_then(Value::as_i64).is_some_and(|r| r > MAX_REPLICAS) {
        tracing::warn!(kind = ?kind, namespace = %s.namespace, name = %s.name, max = MAX_REPLICAS, "replicas above the stand-in's limit; keeping the limit");
    }
}

async fn create_pods(api: &ApiServer, pods: Vec<Value>) -> Result<(), ApiError> {
    let res = res(api, "", "v1", "pods")?;
    for p in pods {
        let ns = p
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match api
            .create(Caller::Internal, &res, &ns, p, &WriteOptions::default())
            .await
        {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn delete_pods(api: &ApiServer, ns: &str, names: &[String]) -> Result<(), ApiError> {
    let res = res(api, "", "v1", "pods")?;
    for n in names {
        match api
            .delete(
                ObjectRef::new(Caller::Internal, &res, ns, n),
                &DeleteOptions::default(),
            )
            .await
        {
            Ok(_) | Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `status` through the status endpoint (nothing is written when it is unchanged).
async fn write_status(
    api: &ApiServer,
    kind: Kind,
    s: &Stored,
    status: Value,
) -> Result<(), ApiError> {
    let gr = kind.group_resource();
    let r = res(api, &gr.group, "v1", &gr.resource)?;
    let uid = s.uid.clone();
    api.modify(
        ObjectRef::new(Caller::Internal, &r, &s.namespace, &s.name).at(Endpoint::Status),
        &WriteOptions::default(),
        |old| {
            if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                return Err(ApiError::conflict(&r, &s.name, "object replaced"));
            }
            let mut new = old.clone();
            new["status"] = status.clone();
            Ok(new)
        },
    )
    .await
    .map(|_| ())
}

/// Sets `spec.replicas` of a ReplicaSet.
async fn scale_rs(api: &ApiServer, ns: &str, name: &str, replicas: i64) -> Result<(), ApiError> {
    let r = res(api, "apps", "v1", "replicasets")?;
    api.modify(
        ObjectRef::new(Caller::Internal, &r, ns, name),
        &WriteOptions::default(),
        |old| {
            let mut new = old.clone();
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("replicas".into(), json!(replicas));
            }
            Ok(new)
        },
    )
    .await
    .map(|_| ())
}

fn int_at(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

async fn deployment(api: &Arc<ApiServer>, d: &Stored, v: &Value) -> Result<(), ApiError> {
    let spec = v.get("spec").cloned().unwrap_or_default();
    warn_cut(Kind::Deployment, d, spec.get("replicas"));
    let desired = replicas_of(spec.get("replicas"), 1);
    let template = spec
        .get("template")
        .filter(|t| t.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let hash = template_hash(&template);
    let rs_gr = Kind::ReplicaSet.group_resource();
    let rss = owned(api, &d.uid, &rs_gr);
    let view = |s: &Stored, v: &Value| RsView {
        name: s.name.clone(),
        replicas: replicas_of(v.pointer("/spec/replicas"), 1),
        available: int_at(v, "/status/availableReplicas"),
        revision: v
            .pointer(&format!(
                "/metadata/annotations/{}",
                REVISION.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0),
    };
    let is_new = |s: &Stored| {
        s.labels
            .iter()
            .any(|(k, x)| k == POD_TEMPLATE_HASH && *x == hash)
    };
    let new = rss.iter().find(|(s, _)| is_new(s));
    let olds: Vec<RsView> = rss
        .iter()
        .filter(|(s, _)| !is_new(s))
        .map(|(s, v)| view(s, v))
        .collect();
    let strategy = spec.get("strategy").cloned().unwrap_or_default();
    let recreate = strategy.get("type").and_then(Value::as_str) == Some("Recreate");
    let (surge, unavailable) = fenceposts(&strategy, desired);
    let paused = spec.get("paused").and_then(Value::as_bool) == Some(true);
    if !paused {
        let new_view = match new {
            Some((s, v)) => view(s, v),
            None => {
                let revision = olds.iter().map(|o| o.revision).max().unwrap_or(0) + 1;
                let empty = RsView {
                    name: format!("{}-{hash}", d.name),
                    replicas: 0,
                    available: 0,
                    revision,
                };
                let old_pods = olds.iter().any(|o| o.replicas > 0);
                let first = rollout_plan(
                    desired,
                    recreate,
                    surge,
                    unavailable,
                    &empty,
                    &olds,
                    old_pods,
                )
                .into_iter()
                .find(|(n, _)| *n == empty.name)
                .map_or(0, |(_, r)| r);
                create_rs(api, d, &template, &hash, revision, first).await?;
                return Ok(());
            }
        };
        let old_pods_left = recreate
            && rss
                .iter()
                .filter(|(s, _)| !is_new(s))
                .any(|(_, v)| int_at(v, "/status/replicas") > 0);
        for (name, replicas) in rollout_plan(
            desired,
            recreate,
            surge,
            unavailable,
            &new_view,
            &olds,
            old_pods_left,
        ) {
            scale_rs(api, &d.namespace, &name, replicas).await?;
        }
    }
    // Status from the ReplicaSets as they are now.
    let rss = owned(api, &d.uid, &rs_gr);
    let sum = |p: &str| rss.iter().map(|(_, v)| int_at(v, p)).sum::<i64>();
    let updated = rss
        .iter()
        .find(|(s, _)| is_new(s))
        .map_or(0, |(_, v)| int_at(v, "/status/replicas"));
    let (replicas, ready, available) = (
        sum("/status/replicas"),
        sum("/status/readyReplicas"),
        sum("/status/availableReplicas"),
    );
    let now = now_rfc3339();
    let min_ok = available >= desired - unavailable;
    let complete = updated == desired && replicas == desired && available >= desired;
    let new_name = format!("{}-{hash}", d.name);
    let conditions = vec![
        condition(
            "Available",
            min_ok,
            if min_ok {
                "MinimumReplicasAvailable"
            } else {
                "MinimumReplicasUnavailable"
            },
            if min_ok {
                "Deployment has minimum availability."
            } else {
                "Deployment does not have minimum availability."
            },
            &now,
        ),
        condition(
            "Progressing",
            true,
            if complete {
                "NewReplicaSetAvailable"
            } else {
                "ReplicaSetUpdated"
            },
            &if complete {
                format!("ReplicaSet \"{new_name}\" has successfully progressed.")
            } else {
                format!("ReplicaSet \"{new_name}\" is progressing.")
            },
            &now,
        ),
    ];
    let mut status = json!({
        "observedGeneration": int_at(v, "/metadata/generation"),
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": keep_times(v.pointer("/status/conditions"), conditions),
    });
    let unavailable_now = (desired - available).max(0);
    if unavailable_now > 0 {
        status["unavailableReplicas"] = json!(unavailable_now);
    }
    write_status(api, Kind::Deployment, d, drop_zeros(status)).await
}

/// kube-controller-manager omits zero counts (`omitempty`).
fn drop_zeros(mut status: Value) -> Value {
    if let Some(o) = status.as_object_mut() {
        o.retain(|k, v| k == "observedGeneration" || k == "replicas" || v != &json!(0));
    }
    status
}

async fn create_rs(
    api: &ApiServer,
    d: &Stored,
    template: &Value,
    hash: &str,
    revision: i64,
    replicas: i64,
) -> Result<(), ApiError> {
    let mut template = template.clone();
    if !template.get("metadata").is_some_and(Value::is_object) {
        template["metadata"] = json!({});
    }
    let mut labels = template
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(POD_TEMPLATE_HASH.into(), json!(hash));
    template["metadata"]["labels"] = json!(labels);
    let mut selector = d
        .value()?
        .pointer("/spec/selector")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let mut match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    match_labels.insert(POD_TEMPLATE_HASH.into(), json!(hash));
    selector["matchLabels"] = json!(match_labels);
    let owner = OwnerInfo::of(Kind::Deployment, d);
    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{}-{hash}", d.name), "namespace": d.namespace,
            "labels": labels,
            "annotations": {REVISION: revision.to_string()},
            "ownerReferences": [owner.reference()],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    });
    let r = res(api, "apps", "v1", "replicasets")?;
    match api
        .create(
            Caller::Internal,
            &r,
            &d.namespace,
            rs,
            &WriteOptions::default(),
        )
        .await
    {
        Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn replicaset(api: &Arc<ApiServer>, rs: &Stored, v: &Value) -> Result<(), ApiError> {
    warn_cut(Kind::ReplicaSet, rs, v.pointer("/spec/replicas"));
    let want = replicas_of(v.pointer("/spec/replicas"), 1);
    let pods: Vec<PodView> = owned(api, &rs.uid, &GroupResource::new("", "pods"))
        .iter()
        .map(|(s, v)| PodView::of(s, v))
        .collect();
    let active: Vec<PodView> = pods.iter().filter(|p| p.active()).cloned().collect();
    let want_n = usize::try_from(want).unwrap_or(0);
    if active.len() < want_n {
        let owner = OwnerInfo::of(Kind::ReplicaSet, rs);
        let template = v.pointer("/spec/template").cloned().unwrap_or_default();
        let n = (want_n - active.len()).min(BURST);
        create_pods(
            api,
            (0..n)
                .map(|_| pod_from_template(&template, &owner, None, &[]))
                .collect(),
        )
        .await?;
    } else if active.len() > want_n {
        delete_pods(api, &rs.namespace, &pods_to_delete(&active, want_n)).await?;
    }
    let pods: Vec<PodView> = owned(api, &rs.uid, &GroupResource::new("", "pods"))
        .iter()
        .map(|(s, v)| PodView::of(s, v))
        .filter(PodView::active)
        .collect();
    let n = i64::try_from(pods.len()).unwrap_or(i64::MAX);
    let ready = count(&pods, |p| p.ready);
    let status = json!({
        "replicas": n,
        "fullyLabeledReplicas": n,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": int_at(v, "/metadata/generation"),
    });
    write_status(api, Kind::ReplicaSet, rs, drop_zeros(status)).await
}

async fn statefulset(api: &Arc<ApiServer>, sts: &Stored, v: &Value) -> Result<(), ApiError> {
    warn_cut(Kind::StatefulSet, sts, v.pointer("/spec/replicas"));
    let want = replicas_of(v.pointer("/spec/replicas"), 1);
    let template = v.pointer("/spec/template").cloned().unwrap_or_default();
    let update_revision = format!("{}-{}", sts.name, template_hash(&template));
    let parallel = v
        .pointer("/spec/podManagementPolicy")
        .and_then(Value::as_str)
        == Some("Parallel");
    let rolling = v
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        != Some("OnDelete");
    let pods_of = || -> Vec<(i64, PodView)> {
        owned(api, &sts.uid, &GroupResource::new("", "pods"))
            .iter()
            .filter_map(|(s, v)| ordinal(&sts.name, &s.name).map(|o| (o, PodView::of(s, v))))
            .collect()
    };
    let pods = pods_of();
    let owner = OwnerInfo::of(Kind::StatefulSet, sts);
    let service = v
        .pointer("/spec/serviceName")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut creates = Vec::new();
    let mut deletes = Vec::new();
    for a in statefulset_plan(want, parallel, rolling, &update_revision, &pods) {
        match a {
            StsAction::Create(i) => {
                let name = format!("{}-{i}", sts.name);
                let mut p = pod_from_template(
                    &template,
                    &owner,
                    Some(&name),
                    &[
                        (REVISION_HASH, update_revision.clone()),
                        (STS_POD_NAME, name.clone()),
                        (POD_INDEX, i.to_string()),
                    ],
                );
                if let Some(spec) = p.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.insert("hostname".into(), json!(name));
                    if !service.is_empty() {
                        spec.insert("subdomain".into(), json!(service));
                    }
                }
                creates.push(p);
            }
            StsAction::Delete(n) => deletes.push(n),
        }
    }
    create_pods(api, creates).await?;
    delete_pods(api, &sts.namespace, &deletes).await?;
    let pods: Vec<PodView> = pods_of()
        .into_iter()
        .map(|(_, p)| p)
        .filter(|p| !p.deleting)
        .collect();
    let n = i64::try_from(pods.len()).unwrap_or(i64::MAX);
    let ready = count(&pods, |p| p.ready);
    let updated = count(&pods, |p| p.revision == update_revision);
    let previous = v
        .pointer("/status/currentRevision")
        .and_then(Value::as_str)
        .unwrap_or(&update_revision)
        .to_string();
    let current_revision = if updated == want && ready == want {
        update_revision.clone()
    } else {
        previous
    };
    let current = count(&pods, |p| p.revision == current_revision);
    let status = json!({
        "observedGeneration": int_at(v, "/metadata/generation"),
        "replicas": n,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "currentReplicas": current,
        "updatedReplicas": updated,
        "currentRevision": current_revision,
        "updateRevision": update_revision,
        "collisionCount": 0,
    });
    write_status(api, Kind::StatefulSet, sts, status).await
}

async fn job(api: &Arc<ApiServer>, j: &Stored, v: &Value) -> Result<(), ApiError> {
    let finished = v
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                matches!(
                    c.get("type").and_then(Value::as_str),
                    Some("Complete" | "Failed")
                ) && c.get("status").and_then(Value::as_str) == Some("True")
            })
        });
    let pods_of = || -> Vec<PodView> {
        owned(api, &j.uid, &GroupResource::new("", "pods"))
            .iter()
            .map(|(s, v)| PodView::of(s, v))
            .collect()
    };
    let pods = pods_of();
    if finished {
        let active: Vec<String> = pods
            .iter()
            .filter(|p| p.active())
            .map(|p| p.name.clone())
            .collect();
        return delete_pods(api, &j.namespace, &active).await;
    }
    let spec = v.get("spec").cloned().unwrap_or_default();
    let step = job_step(&spec, &pods);
    let mut finish = None;
    match &step {
        JobStep::Create(n) => {
            let owner = OwnerInfo::of(Kind::Job, j);
            let template = spec.get("template").cloned().unwrap_or_default();
            let labels = [
                ("batch.kubernetes.io/controller-uid", j.uid.clone()),
                ("batch.kubernetes.io/job-name", j.name.clone()),
                ("controller-uid", j.uid.clone()),
                ("job-name", j.name.clone()),
            ];
            create_pods(
                api,
                (0..*n)
                    .map(|_| pod_from_template(&template, &owner, None, &labels))
                    .collect(),
            )
            .await?;
        }
        JobStep::Delete(names) => delete_pods(api, &j.namespace, names).await?,
        JobStep::Finish(t, reason, message) => finish = Some((*t, *reason, *message)),
        JobStep::Wait => {}
    }
    let pods = pods_of();
    let now = now_rfc3339();
    let mut status = v
        .get("status")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let active: Vec<&PodView> = pods.iter().filter(|p| p.active()).collect();
    let suspended = spec.get("suspend").and_then(Value::as_bool) == Some(true);
    if status.get("startTime").is_none() && !suspended {
        status["startTime"] = json!(now);
    }
    status["active"] = json!(active.len());
    status["ready"] = json!(active.iter().filter(|p| p.ready).count());
    status["succeeded"] = json!(count(&pods, |p| p.phase == "Succeeded"));
    status["failed"] = json!(count(&pods, |p| p.phase == "Failed"));
    status["terminating"] = json!(count(&pods, |p| p.deleting));
    status["uncountedTerminatedPods"] = json!({});
    if let Some((t, reason, message)) = finish {
        let mut conds = status
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let criteria = if t == "Complete" {
            "SuccessCriteriaMet"
        } else {
            "FailureTarget"
        };
        for ct in [criteria, t] {
            conds.push(
                json!({"type": ct, "status": "True", "reason": reason, "message": message,
                "lastProbeTime": now, "lastTransitionTime": now}),
            );
        }
        status["conditions"] = json!(conds);
        if t == "Complete" {
            status["completionTime"] = json!(now);
        }
    }
    let status = drop_job_zeros(status);
    write_status(api, Kind::Job, j, status).await?;
    if finish.is_some() {
        let active: Vec<String> = active.iter().map(|p| p.name.clone()).collect();
        delete_pods(api, &j.namespace, &active).await?;
    }
    Ok(())
}

/// The Job status fields kube omits when zero.
fn drop_job_zeros(mut status: Value) -> Value {
    if let Some(o) = status.as_object_mut() {
        for k in ["active", "succeeded", "failed", "terminating"] {
            if o.get(k) == Some(&json!(0)) {
                o.remove(k);
            }
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, scheduled: bool, phase: &str, ready: bool, created: &str) -> PodView {
        PodView {
            name: name.into(),
            scheduled,
            phase: phase.into(),
            ready,
            deleting: false,
            created: created.into(),
            revision: String::new(),
        }
    }

    fn rs(name: &str, replicas: i64, available: i64, revision: i64) -> RsView {
        RsView {
            name: name.into(),
            replicas,
            available,
            revision,
        }
    }

    #[test]
    fn template_hashes_are_stable_safe_and_differ_by_template() {
        let a = template_hash(&json!({"spec": {"containers": [{"image": "a"}]}}));
        let b = template_hash(&json!({"spec": {"containers": [{"image": "b"}]}}));
        assert_eq!(
            a,
            template_hash(&json!({"spec": {"containers": [{"image": "a"}]}}))
        );
        assert_ne!(a, b);
        assert!(
            a.bytes()
                .all(|c| b"bcdfghjklmnpqrstvwxz2456789".contains(&c)),
            "{a}"
        );
    }

    #[test]
    fn surge_and_unavailable_resolve_like_kube() {
        assert_eq!(fenceposts(&json!({}), 4), (1, 1));
        assert_eq!(fenceposts(&json!({}), 10), (3, 2));
        assert_eq!(
            fenceposts(
                &json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
                3
            ),
            (0, 1)
        );
        assert_eq!(
            fenceposts(
                &json!({"rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 2}}),
                3
            ),
            (3, 2)
        );
        // Huge and malformed numbers are bounded, not overflowed.
        assert_eq!(
            int_or_percent(Some(&json!("1000000000000%")), i64::MAX, true, 0),
            MAX_REPLICAS
        );
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, true, 0), 3);
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, false, 0), 2);
        assert_eq!(int_or_percent(Some(&json!(1e300)), 5, true, 7), 7);
        assert_eq!(replicas_of(Some(&json!(i64::MAX)), 1), MAX_REPLICAS);
        assert_eq!(replicas_of(Some(&json!(-3)), 1), 0);
    }

    #[test]
    fn a_new_deployment_scales_its_first_replicaset_to_desired() {
        let plan = rollout_plan(3, false, 1, 0, &rs("new", 0, 0, 1), &[], false);
        assert_eq!(plan, vec![("new".to_string(), 3)]);
    }

    #[test]
    fn a_rolling_update_surges_then_retires_old_replicas_as_new_ones_become_available() {
        // 3 desired, surge 1, unavailable 0: one new pod first, nothing old goes yet.
        let old = [rs("old", 3, 3, 1)];
        let plan = rollout_plan(3, false, 1, 0, &rs("new", 0, 0, 2), &old, false);
        assert_eq!(plan, vec![("new".to_string(), 1)]);
        // The new pod is available: one old one can go.
        let plan = rollout_plan(3, false, 1, 0, &rs("new", 1, 1, 2), &old, false);
        assert_eq!(plan, vec![("old".to_string(), 2)]);
        // Not yet available: the old ones stay.
        let plan = rollout_plan(3, false, 1, 0, &rs("new", 1, 0, 2), &old, false);
        assert!(plan.is_empty(), "{plan:?}");
        // Done: everything new.
        let plan = rollout_plan(
            3,
            false,
            1,
            0,
            &rs("new", 3, 3, 2),
            &[rs("old", 0, 0, 1)],
            false,
        );
        assert!(plan.is_empty(), "{plan:?}");
    }

    #[test]
    fn recreate_empties_the_old_replicasets_before_the_new_one_grows() {
        let old = [rs("old", 2, 2, 1)];
        let plan = rollout_plan(2, true, 0, 0, &rs("new", 0, 0, 2), &old, true);
        assert_eq!(plan, vec![("old".to_string(), 0)]);
        let plan = rollout_plan(
            2,
            true,
            0,
            0,
            &rs("new", 0, 0, 2),
            &[rs("old", 0, 0, 1)],
            true,
        );
        assert!(plan.is_empty(), "old pods still terminating: {plan:?}");
        let plan = rollout_plan(
            2,
            true,
            0,
            0,
            &rs("new", 0, 0, 2),
            &[rs("old", 0, 0, 1)],
            false,
        );
        assert_eq!(plan, vec![("new".to_string(), 2)]);
    }

    #[test]
    fn the_least_useful_pods_are_deleted_first() {
        let pods = [
            pod("ready-old", true, "Running", true, "2024-01-01T00:00:00Z"),
            pod("ready-new", true, "Running", true, "2024-01-02T00:00:00Z"),
            pod("pending", true, "Pending", false, "2024-01-01T00:00:00Z"),
            pod(
                "unscheduled",
                false,
                "Pending",
                false,
                "2024-01-01T00:00:00Z",
            ),
        ];
        assert_eq!(pods_to_delete(&pods, 4), Vec::<String>::new());
        assert_eq!(pods_to_delete(&pods, 2), vec!["unscheduled", "pending"]);
        assert_eq!(
            pods_to_delete(&pods, 1),
            vec!["unscheduled", "pending", "ready-new"]
        );
    }

    #[test]
    fn ordered_ready_statefulsets_create_one_pod_at_a_time() {
        assert_eq!(
            statefulset_plan(3, false, true, "r", &[]),
            vec![StsAction::Create(0)]
        );
        let mut p0 = pod("web-0", true, "Running", false, "t");
        p0.revision = "r".into();
        assert!(statefulset_plan(3, false, true, "r", &[(0, p0.clone())]).is_empty());
        p0.ready = true;
        assert_eq!(
            statefulset_plan(3, false, true, "r", &[(0, p0.clone())]),
            vec![StsAction::Create(1)]
        );
        // Parallel: every missing ordinal at once.
        assert_eq!(
            statefulset_plan(3, true, true, "r", &[]),
            vec![
                StsAction::Create(0),
                StsAction::Create(1),
                StsAction::Create(2)
            ]
        );
    }

    #[test]
    fn statefulsets_scale_down_from_the_highest_ordinal_and_roll_outdated_pods() {
        let mk = |i: i64, rev: &str| {
            let mut p = pod(&format!("web-{i}"), true, "Running", true, "t");
            p.revision = rev.into();
            (i, p)
        };
        let pods = [mk(0, "r"), mk(1, "r"), mk(2, "r")];
        assert_eq!(
            statefulset_plan(1, false, true, "r", &pods),
            vec![StsAction::Delete("web-2".into())]
        );
        let mut par = statefulset_plan(1, true, true, "r", &pods);
        par.sort_by_key(|a| format!("{a:?}"));
        assert_eq!(
            par,
            vec![
                StsAction::Delete("web-1".into()),
                StsAction::Delete("web-2".into())
            ]
        );
        let old = [mk(0, "old"), mk(1, "old"), mk(2, "new")];
        assert_eq!(
            statefulset_plan(3, false, true, "new", &old),
            vec![StsAction::Delete("web-1".into())]
        );
        assert!(
            statefulset_plan(3, false, false, "new", &old).is_empty(),
            "OnDelete"
        );
        assert_eq!(ordinal("web", "web-12"), Some(12));
        assert_eq!(ordinal("web", "webx-1"), None);
        assert_eq!(ordinal("web", "web--1"), None);
    }

    #[test]
    fn jobs_run_parallelism_pods_until_completions_succeed() {
        let spec = json!({"parallelism": 2, "completions": 3});
        assert_eq!(job_step(&spec, &[]), JobStep::Create(2));
        let done = pod("a", true, "Succeeded", false, "t");
        let run = pod("b", true, "Running", true, "t");
        assert_eq!(
            job_step(&spec, &[done.clone(), run.clone()]),
            JobStep::Create(1)
        );
        let three = [
            done.clone(),
            pod("c", true, "Succeeded", false, "t"),
            pod("d", true, "Succeeded", false, "t"),
        ];
        assert!(matches!(
            job_step(&spec, &three),
            JobStep::Finish("Complete", ..)
        ));
        // Without completions: one success and nothing running completes it.
        assert!(matches!(
            job_step(&json!({}), &[done]),
            JobStep::Finish("Complete", ..)
        ));
        // backoffLimit failed pods fail it.
        let failed: Vec<PodView> = (0..3)
            .map(|i| pod(&format!("f{i}"), true, "Failed", false, "t"))
            .collect();
        assert!(matches!(
            job_step(&json!({"backoffLimit": 2}), &failed),
            JobStep::Finish("Failed", "BackoffLimitExceeded", _)
        ));
        assert_eq!(
            job_step(&json!({"suspend": true}), &[run]),
            JobStep::Delete(vec!["b".into()])
        );
    }

    #[test]
    fn pods_from_templates_carry_labels_and_a_controller_reference() {
        let owner = OwnerInfo {
            kind: Kind::ReplicaSet,
            namespace: "ns".into(),
            name: "web-abc".into(),
            uid: "u1".into(),
        };
        let t = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}}, "spec": {"containers": []}});
        let p = pod_from_template(&t, &owner, None, &[("x", "y".into())]);
        assert_eq!(p["metadata"]["generateName"], "web-abc-");
        assert_eq!(p["metadata"]["labels"], json!({"app": "web", "x": "y"}));
        assert_eq!(p["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(p["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        // A malformed template still makes an object-shaped pod.
        let odd = pod_from_template(&json!({"metadata": 5, "spec": "x"}), &owner, Some("n"), &[]);
        assert_eq!(odd["spec"], json!({}));
        assert_eq!(odd["metadata"]["name"], "n");
    }
}
