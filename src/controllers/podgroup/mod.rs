//! The PodGroup controller: a PodGroup for every gang of Volcano-scheduled pods that is not
//! already in one (plain pods, Deployments through their ReplicaSets, StatefulSets, DaemonSets,
//! batch Jobs), because the scheduler only sees pods that carry `scheduling.k8s.io/group-name`.
//!
//! ```text
//!   pod / ReplicaSet / StatefulSet / Deployment / PodGroup events
//!        │ (subscribers: owner of the gang → GroupKey)
//!        ▼
//!   WorkQueue<GroupKey> ─▶ reconcile: owner + its pods from the caches
//!        │                  replicas 0 → delete the PodGroup
//!        │                  build::build(first current pod, owner chain) → desired
//!        ├─▶ create, or build::update → one replace (409 → fresh GET, retry)
//!        └─▶ merge-patch the group name onto pods that lack it
//! ```
//!
//! * [`build`] (the `tephra-controllers` crate): pure, the PodGroup a pod and its owners call for, and update detection.
//! * [`resources`] (the same crate): pure, pod requests as Kubernetes counts them and `minResources`.
//!
//! Keys are gangs, not pods: the ten pods of a ReplicaSet arriving at once make one or two
//! reconciles, and one gang is never handled by two workers, so concurrent events cannot make
//! two PodGroups (the name is deterministic as well, and AlreadyExists counts as success).

pub use tephra_controllers::podgroup::{build, resources};

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::relist::queue_keys;
use super::workqueue::WorkQueue;
use super::{Action, ControllerConfig, ControllerMetrics, KubeOp, MetricLabel};
use crate::admission::ClusterView;
use crate::api::{PodGroup, keys};
use crate::cluster::events::{EventRecorder, EventType, object_ref};
use crate::cluster::{CacheFeeds, Caches, Index, Relist, status_code};
use crate::sync::lock;
use build::{Inputs, OwnerInfo};

/// Name of this controller (logs, metrics, Event source).
pub const NAME: &str = "podgroup-controller";
/// Event reason on a pod linked to another PodGroup than its owner's.
pub const REASON_GROUP_CONFLICT: &str = "PodGroupConflict";
/// How many times an update is retried on fresh data after a 409 within one reconcile.
const CONFLICT_RETRIES: usize = 3;
/// Pod annotations written concurrently within one reconcile.
const PATCH_CONCURRENCY: usize = 8;

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum PodGroupError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] KubeOp),
    /// The PodGroup kept changing under every retry.
    #[error("PodGroup {0} kept conflicting")]
    Conflict(String),
}

impl MetricLabel for PodGroupError {
    const FIRST: &'static str = "conflict";

    fn metric_label(&self) -> &'static str {
        match self {
            PodGroupError::Kube(e) => e.op,
            PodGroupError::Conflict(_) => "conflict",
        }
    }
}

/// What a gang is keyed by: its namespace and the object whose uid names its PodGroup.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupKey {
    /// Namespace of the pods and the PodGroup.
    pub namespace: String,
    /// The gang's owner.
    pub owner: GroupOwner,
}

/// The owner of a gang.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GroupOwner {
    /// An apps/v1 ReplicaSet (a Deployment's pods), by name.
    ReplicaSet(String),
    /// An apps/v1 StatefulSet, by name.
    StatefulSet(String),
    /// Any other controller (DaemonSet, batch Job, a custom controller).
    Controller {
        /// Its uid (names the PodGroup).
        uid: String,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// A pod without a controller, by name.
    Pod(String),
}

/// The gang key of a pod.
pub fn key_for_pod(pod: &Pod) -> GroupKey {
    let namespace = pod.namespace().unwrap_or_default();
    let owner = match build::controller_of(pod) {
        Some(r) if r.api_version.starts_with("apps/") && r.kind == "ReplicaSet" => {
            GroupOwner::ReplicaSet(r.name.clone())
        }
        Some(r) if r.api_version.starts_with("apps/") && r.kind == "StatefulSet" => {
            GroupOwner::StatefulSet(r.name.clone())
        }
        Some(r) => GroupOwner::Controller {
            uid: r.uid.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
        },
        None => GroupOwner::Pod(pod.name_any()),
    };
    GroupKey { namespace, owner }
}

/// The uid that names a pod's PodGroup: its controller's, or its own.
fn group_uid(pod: &Pod) -> String {
    build::controller_of(pod)
        .map(|r| r.uid.clone())
        .or_else(|| pod.metadata.uid.clone())
        .unwrap_or_default()
}

/// What the subscriber needs of a pod the index had not seen before, to bring its gang up:
/// the gang's key, the scheduler that serves the pod, and whether the pod names a PodGroup
/// made by someone else. Kept instead of the pod, so a relist of every pod in the cluster is
/// not copied whole into this index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fresh {
    /// The pod's gang.
    pub key: GroupKey,
    /// The pod's name.
    pub name: String,
    /// The scheduler serving the pod ([`keys::served_scheduler`]).
    pub scheduler: String,
    /// It names a PodGroup this controller did not make ([`has_foreign_group`]).
    pub foreign: bool,
}

impl Fresh {
    /// The record of `pod`.
    pub fn of(pod: &Pod) -> Self {
        Self {
            key: key_for_pod(pod),
            name: pod.name_any(),
            scheduler: keys::served_scheduler(pod).to_string(),
            foreign: has_foreign_group(pod),
        }
    }
}

/// What [`PodIndex`] takes of a pod.
#[derive(Clone, Debug)]
pub struct IndexedPod {
    /// The uid that names its PodGroup ([`group_uid`]).
    group: String,
    fresh: Fresh,
}

/// Pods by the uid that names their PodGroup, so a reconcile reads its ten pods instead of
/// scanning every pod in the cluster: an [`Index`] of the pod watch, fed through a
/// [`Relist`]. It also notes the pods it had not seen before, for the subscriber to bring
/// their gangs up ([`PodIndex::take_fresh`]).
#[derive(Debug, Default)]
pub struct PodIndex {
    groups: HashMap<(String, String), BTreeSet<String>>,
    pods: HashMap<(String, String), String>,
    fresh: Vec<Fresh>,
}

impl PodIndex {
    /// Records a pod; `true` when it is new to the index.
    fn insert(&mut self, namespace: &str, name: &str, uid: &str) -> bool {
        let pk = (namespace.to_string(), name.to_string());
        if self.pods.get(&pk).is_some_and(|u| u == uid) {
            return false;
        }
        if let Some(old) = self.pods.insert(pk, uid.to_string()) {
            self.remove_from_group(namespace, name, &old);
        }
        self.groups
            .entry((namespace.to_string(), uid.to_string()))
            .or_default()
            .insert(name.to_string());
        true
    }

    /// Forgets a pod.
    fn remove(&mut self, namespace: &str, name: &str) {
        if let Some(uid) = self.pods.remove(&(namespace.to_string(), name.to_string())) {
            self.remove_from_group(namespace, name, &uid);
        }
    }

    fn remove_from_group(&mut self, namespace: &str, name: &str, uid: &str) {
        let gk = (namespace.to_string(), uid.to_string());
        if let Some(set) = self.groups.get_mut(&gk) {
            set.remove(name);
            if set.is_empty() {
                self.groups.remove(&gk);
            }
        }
    }

    /// Names of the pods of a gang.
    pub fn pods_of(&self, namespace: &str, uid: &str) -> Vec<String> {
        self.groups
            .get(&(namespace.to_string(), uid.to_string()))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The pods applied since the last call that the index had not seen before, and after a
    /// relist every pod listed (a relist may follow missed events, so each is looked at again).
    pub fn take_fresh(&mut self) -> Vec<Fresh> {
        std::mem::take(&mut self.fresh)
    }
}

impl Index<Pod> for PodIndex {
    type Taken = IndexedPod;

    fn take(p: &Pod) -> IndexedPod {
        IndexedPod {
            group: group_uid(p),
            fresh: Fresh::of(p),
        }
    }

    fn apply(&mut self, p: IndexedPod) {
        if self.insert(&p.fresh.key.namespace, &p.fresh.name, &p.group) {
            self.fresh.push(p.fresh);
        }
    }

    fn delete(&mut self, p: &Pod) {
        self.remove(&p.namespace().unwrap_or_default(), &p.name_any());
    }

    fn reset(&mut self, all: Vec<IndexedPod>) {
        self.groups.clear();
        self.pods.clear();
        for p in &all {
            self.insert(&p.fresh.key.namespace, &p.fresh.name, &p.group);
        }
        self.fresh.extend(all.into_iter().map(|p| p.fresh));
    }
}

/// Everything a reconcile needs.
pub struct Context {
    client: Client,
    caches: Caches,
    config: ControllerConfig,
    index: Arc<Mutex<PodIndex>>,
    recorder: EventRecorder,
    metrics: ControllerMetrics,
    /// Pods already reported for a foreign group name (one Event each, not one per event).
    reported: Mutex<HashSet<String>>,
    /// What this controller wrote and the cache may not show yet (the watch lags behind the
    /// write): pods it linked (by uid) and PodGroups it created or updated. Without it, a
    /// reconcile right after another would patch the same pods again (a 409 on the stale
    /// resourceVersion, then a retry) and create the same PodGroup again (AlreadyExists,
    /// then a GET). Entries go once the cache has caught up, or the pod is deleted.
    written: Arc<Mutex<Written>>,
}

/// Whether `cached` is a version from before `written`. resourceVersions are opaque to
/// clients in principle; kube-apiserver's (etcd revisions) and the embedded API's are
/// increasing integers, and anything else counts as caught up (the cache wins).
fn older(cached: &PodGroup, written: &PodGroup) -> bool {
    let rv = |p: &PodGroup| p.metadata.resource_version.as_deref()?.parse::<u64>().ok();
    matches!((rv(cached), rv(written)), (Some(c), Some(w)) if c < w)
}

/// What [`Context::podgroup`] found of a PodGroup.
#[derive(Debug)]
enum Current {
    /// Neither the cache nor this controller's own writes have it.
    Missing,
    /// Stored, but it does not decode as a PodGroup (someone else's, or a newer schema).
    Undecodable,
    /// The PodGroup (boxed: it is large, the other answers are empty).
    Found(Box<PodGroup>),
}

/// See [`Context`]'s `written`.
#[derive(Debug, Default)]
struct Written {
    pods: HashSet<String>,
    podgroups: HashMap<(String, String), PodGroup>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

fn group_name_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(keys::KUBE_GROUP_NAME_ANNOTATION)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// Whether a pod's group name is one the controller did not choose (a vcJob, a user's own
/// PodGroup, LeaderWorkerSet): such pods are left alone.
fn has_foreign_group(pod: &Pod) -> bool {
    group_name_of(pod).is_some_and(|g| g != build::group_name(pod))
}

impl Context {
    fn serves(&self, pod: &Pod) -> bool {
        let name = crate::api::keys::served_scheduler(pod);
        self.config.scheduler_names.iter().any(|s| s == name)
    }

    fn pods(&self, namespace: &str, uid: &str) -> Vec<Arc<Pod>> {
        let names = lock(&self.index).pods_of(namespace, uid);
        names
            .iter()
            .filter_map(|n| self.caches.pod(namespace, n))
            .collect()
    }

    /// The PodGroup as the cache has it, or as this controller last wrote it while the cache
    /// has not caught up.
    fn podgroup(&self, namespace: &str, name: &str) -> Current {
        let key = (namespace.to_string(), name.to_string());
        let cached = self
            .caches
            .podgroups()
            .get(&ObjectRef::<DeserializeGuard<PodGroup>>::new(name).within(namespace));
        let mut w = lock(&self.written);
        if let Some(mine) = w.podgroups.get(&key) {
            match cached.as_ref().map(|g| g.0.as_ref()) {
                Some(Ok(c)) if !older(c, mine) => {
                    w.podgroups.remove(&key);
                }
                // Not listed yet, or still a version before the write.
                Some(Ok(_)) | None => return Current::Found(Box::new(mine.clone())),
                Some(Err(_)) => {
                    w.podgroups.remove(&key);
                }
            }
        }
        match cached.as_ref().map(|g| g.0.as_ref()) {
            None => Current::Missing,
            Some(Ok(pg)) => Current::Found(Box::new(pg.clone())),
            Some(Err(_)) => Current::Undecodable,
        }
    }

    fn remember_podgroup(&self, pg: PodGroup) {
        let key = (pg.namespace().unwrap_or_default(), pg.name_any());
        lock(&self.written).podgroups.insert(key, pg);
    }

    fn forget_podgroup(&self, namespace: &str, name: &str) {
        lock(&self.written)
            .podgroups
            .remove(&(namespace.to_string(), name.to_string()));
    }

    fn namespace_queue(&self, namespace: &str) -> Option<String> {
        self.caches
            .namespace_annotations(namespace)?
            .get(keys::QUEUE_NAME_ANNOTATION)
            .cloned()
    }
}

fn owner_info<K: Resource>(kind: &str, obj: &K) -> OwnerInfo {
    OwnerInfo {
        kind: kind.to_string(),
        annotations: obj.meta().annotations.clone().unwrap_or_default(),
        ordered_pods: false,
    }
}

/// The owner chain of a ReplicaSet, highest precedence first: its Deployment, then itself.
/// The Deployment comes first because a ReplicaSet's annotations are copies the Deployment
/// controller makes of the Deployment's, and those copies lag behind a change the user makes
/// on the Deployment.
fn replica_set_owners(ctx: &Context, rs: &ReplicaSet) -> Vec<OwnerInfo> {
    let mut owners = Vec::new();
    let ns = rs.namespace().unwrap_or_default();
    if let Some(d) = rs
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == "Deployment")
        && let Some(dep) = ctx
            .caches
            .deployments()
            .get(&ObjectRef::new(&d.name).within(&ns))
        && dep.uid().as_deref() == Some(d.uid.as_str())
    {
        owners.push(owner_info("Deployment", dep.as_ref()));
    }
    owners.push(owner_info("ReplicaSet", rs));
    owners
}

/// One reconcile of a gang.
pub async fn reconcile(key: GroupKey, ctx: Arc<Context>) -> Result<Action, PodGroupError> {
    let ns = key.namespace.as_str();
    match &key.owner {
        GroupOwner::ReplicaSet(name) => {
            let Some(rs) = ctx
                .caches
                .replica_sets()
                .get(&ObjectRef::new(name).within(ns))
            else {
                // Gone: garbage collection removes its PodGroup.
                return Ok(Action::AwaitChange);
            };
            let uid = rs.uid().unwrap_or_default();
            let replicas = rs.spec.replicas.unwrap_or(1);
            let owners = replica_set_owners(&ctx, &rs);
            let pods = ctx.pods(ns, &uid);
            sync_gang(&ctx, ns, &uid, Some(replicas), &pods, None, &owners).await
        }
        GroupOwner::StatefulSet(name) => {
            let Some(sts) = ctx
                .caches
                .stateful_sets()
                .get(&ObjectRef::new(name).within(ns))
            else {
                return Ok(Action::AwaitChange);
            };
            let uid = sts.uid().unwrap_or_default();
            let replicas = sts.spec.replicas.unwrap_or(1);
            let revision = stateful_set_revision(&sts);
            let owners = vec![OwnerInfo {
                // Unset is what the API server defaults to: OrderedReady.
                ordered_pods: sts
                    .spec
                    .pod_management_policy
                    .as_deref()
                    .is_none_or(|p| p == "OrderedReady"),
                ..owner_info("StatefulSet", sts.as_ref())
            }];
            let pods = ctx.pods(ns, &uid);
            sync_gang(
                &ctx,
                ns,
                &uid,
                Some(replicas),
                &pods,
                revision.as_deref(),
                &owners,
            )
            .await
        }
        GroupOwner::Controller { uid, kind, name } => {
            let owners = other_owner(&ctx, ns, kind, name, uid);
            let pods = ctx.pods(ns, uid);
            sync_gang(&ctx, ns, uid, None, &pods, None, &owners).await
        }
        GroupOwner::Pod(name) => {
            let Some(pod) = ctx.caches.pod(ns, name) else {
                return Ok(Action::AwaitChange);
            };
            if build::controller_of(&pod).is_some() {
                return Ok(Action::AwaitChange);
            }
            let uid = pod.uid().unwrap_or_default();
            sync_gang(&ctx, ns, &uid, None, &[pod], None, &[]).await
        }
    }
}

/// `status.updateRevision` of a StatefulSet: only its pods stand for the gang during a rolling
/// update.
fn stateful_set_revision(sts: &StatefulSet) -> Option<String> {
    sts.status
        .as_ref()
        .and_then(|s| s.update_revision.clone())
        .filter(|r| !r.is_empty())
}

/// The owner chain of a pod whose controller is a DaemonSet, a batch Job or something else.
fn other_owner(ctx: &Context, ns: &str, kind: &str, name: &str, uid: &str) -> Vec<OwnerInfo> {
    let found = match kind {
        "DaemonSet" => ctx
            .caches
            .daemon_sets()
            .get(&ObjectRef::new(name).within(ns))
            .filter(|o| o.uid().as_deref() == Some(uid))
            .map(|o| owner_info(kind, o.as_ref())),
        "Job" => ctx
            .caches
            .batch_jobs()
            .get(&ObjectRef::new(name).within(ns))
            .filter(|o| o.uid().as_deref() == Some(uid))
            .map(|o| owner_info(kind, o.as_ref())),
        _ => None,
    };
    found.into_iter().collect()
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Brings one gang's PodGroup and its pods' group names up to date.
async fn sync_gang(
    ctx: &Context,
    ns: &str,
    uid: &str,
    replicas: Option<i32>,
    pods: &[Arc<Pod>],
    revision: Option<&str>,
    owners: &[OwnerInfo],
) -> Result<Action, PodGroupError> {
    let pg_name = keys::workload_pod_group_name(Some(uid), uid);
    if replicas == Some(0) {
        // Scaled to zero: the gang is gone (both `if`s are independent, as in Volcano, since
        // a rollout can show replicas 0 then 1).
        return delete_podgroup(ctx, ns, &pg_name).await;
    }
    let live: Vec<&Pod> = pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.metadata.deletion_timestamp.is_none() && ctx.serves(p))
        .collect();
    let (ours, foreign): (Vec<&Pod>, Vec<&Pod>) = live.iter().partition(|p| !has_foreign_group(p));
    if ours.is_empty() {
        // Nothing of ours: either no pods yet (their creation brings us back) or another
        // controller (LeaderWorkerSet, a vcJob, the user) grouped them.
        return Ok(Action::AwaitChange);
    }
    let current = |p: &&&Pod| {
        revision.is_none_or(|rev| {
            p.labels()
                .get(keys::CONTROLLER_REVISION_HASH)
                .is_some_and(|h| h == rev)
        })
    };
    // The first current, unfinished pod stands for the gang (oldest first, so the choice
    // does not flip between reconciles).
    let mut candidates: Vec<&&Pod> = ours.iter().filter(current).collect();
    candidates.sort_by_key(|p| (is_terminal(p), p.creation_timestamp(), p.name_any()));
    if let Some(template) = candidates.first() {
        let ns_queue = ctx.namespace_queue(ns);
        let desired = build::build(&Inputs {
            pod: template,
            owners,
            namespace_queue: ns_queue.as_deref(),
            inherit: ctx.config.inherit_owner_annotations,
        });
        ensure_podgroup(ctx, ns, &pg_name, desired).await?;
    } else if matches!(ctx.podgroup(ns, &pg_name), Current::Missing) {
        // Only pods of an old revision: no template to build from yet.
        return Ok(Action::AwaitChange);
    }
    link_pods(ctx, ns, &pg_name, &ours).await?;
    report_foreign(ctx, &pg_name, &foreign).await;
    Ok(Action::AwaitChange)
}

async fn delete_podgroup(ctx: &Context, ns: &str, name: &str) -> Result<Action, PodGroupError> {
    if matches!(ctx.podgroup(ns, name), Current::Missing) {
        return Ok(Action::AwaitChange);
    }
    let api: Api<PodGroup> = Api::namespaced(ctx.client.clone(), ns);
    ctx.forget_podgroup(ns, name);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {
            ctx.metrics.podgroups.with_label_values(&["deleted"]).inc();
            tracing::info!(
                namespace = ns,
                podgroup = name,
                "deleted PodGroup of a workload scaled to 0"
            );
            Ok(Action::AwaitChange)
        }
        Err(e) if status_code(&e) == Some(404) => Ok(Action::AwaitChange),
        Err(e) => Err(KubeOp::new("delete", name, e).into()),
    }
}

/// Creates the PodGroup, or brings the stored one up to date with one replace.
async fn ensure_podgroup(
    ctx: &Context,
    ns: &str,
    name: &str,
    desired: PodGroup,
) -> Result<(), PodGroupError> {
    let api: Api<PodGroup> = Api::namespaced(ctx.client.clone(), ns);
    let mut current = match ctx.podgroup(ns, name) {
        // Stored but not decodable: leave it to its author rather than overwrite it.
        Current::Undecodable => return Ok(()),
        Current::Found(pg) => *pg,
        Current::Missing => match api.create(&PostParams::default(), &desired).await {
            Ok(created) => {
                ctx.remember_podgroup(created);
                ctx.metrics.podgroups.with_label_values(&["created"]).inc();
                tracing::debug!(namespace = ns, podgroup = name, "created PodGroup");
                return Ok(());
            }
            // The cache was behind: someone (a previous run) made it; compare with it.
            Err(e) if status_code(&e) == Some(409) => {
                api.get(name).await.map_err(KubeOp::on("get", name))?
            }
            Err(e) => return Err(KubeOp::new("create", name, e).into()),
        },
    };
    for _ in 0..CONFLICT_RETRIES {
        let Some(updated) = build::update(&current, &desired) else {
            return Ok(());
        };
        match api.replace(name, &PostParams::default(), &updated).await {
            Ok(stored) => {
                ctx.remember_podgroup(stored);
                ctx.metrics.podgroups.with_label_values(&["updated"]).inc();
                tracing::info!(namespace = ns, podgroup = name, "updated PodGroup");
                return Ok(());
            }
            Err(e) if status_code(&e) == Some(409) => {
                current = api.get(name).await.map_err(KubeOp::on("get", name))?;
            }
            Err(e) => return Err(KubeOp::new("update", name, e).into()),
        }
    }
    Err(PodGroupError::Conflict(name.to_string()))
}

/// Writes the group name onto every pod of the gang that lacks it: a merge patch pinned to the
/// pod's resourceVersion, so a name written meanwhile (by the webhook or anyone) is never
/// overwritten; a 409 retries the gang on fresh data.
async fn link_pods(
    ctx: &Context,
    ns: &str,
    pg_name: &str,
    pods: &[&Pod],
) -> Result<(), PodGroupError> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let todo: Vec<(String, String, Option<String>)> = {
        let mut w = lock(&ctx.written);
        pods.iter()
            .filter_map(|p| {
                let uid = p.uid().unwrap_or_default();
                if group_name_of(p).is_some() {
                    // The cache shows the name: nothing to remember any more.
                    w.pods.remove(&uid);
                    return None;
                }
                (!w.pods.contains(&uid)).then(|| (p.name_any(), uid, p.resource_version()))
            })
            .collect()
    };
    let results: Vec<Result<(), PodGroupError>> = futures::stream::iter(todo)
        .map(|(name, uid, rv)| {
            let api = api.clone();
            async move {
                let patch = json!({"metadata": {
                    "resourceVersion": rv,
                    "annotations": {keys::KUBE_GROUP_NAME_ANNOTATION: pg_name}}});
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {
                        lock(&ctx.written).pods.insert(uid);
                        Ok(())
                    }
                    Err(e) if status_code(&e) == Some(404) => Ok(()),
                    Err(e) => Err(KubeOp::new("patch-pod", name, e).into()),
                }
            }
        })
        .buffer_unordered(PATCH_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// A pod of the gang linked to another group: an Event and a log line, once per pod; never
/// overwritten.
async fn report_foreign(ctx: &Context, pg_name: &str, pods: &[&Pod]) {
    for pod in pods {
        let uid = pod.uid().unwrap_or_default();
        let first = lock(&ctx.reported).insert(uid.clone());
        if !first {
            continue;
        }
        let theirs = group_name_of(pod).unwrap_or_default();
        let message =
            format!("pod is in PodGroup {theirs:?}, not its owner's {pg_name:?}; left unchanged");
        tracing::warn!(namespace = ?pod.namespace(), pod = %pod.name_any(), "{message}");
        let r = object_ref(
            "v1",
            "Pod",
            pod.namespace().as_deref(),
            &pod.name_any(),
            Some(&uid),
        );
        if let Err(e) = ctx
            .recorder
            .record(&r, EventType::Warning, REASON_GROUP_CONFLICT, &message)
            .await
        {
            tracing::debug!(error = %crate::report::report(&e), "could not record Event");
        }
    }
}

/// The PodGroup controller's gang key of a PodGroup it made, from its controller owner.
fn key_for_podgroup(pg: &PodGroup) -> Option<GroupKey> {
    if !pg.name_any().starts_with(keys::PODGROUP_NAME_PREFIX) {
        return None;
    }
    let r = pg
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))?;
    let owner = match (r.api_version.as_str(), r.kind.as_str()) {
        (v, "ReplicaSet") if v.starts_with("apps/") => GroupOwner::ReplicaSet(r.name.clone()),
        (v, "StatefulSet") if v.starts_with("apps/") => GroupOwner::StatefulSet(r.name.clone()),
        ("v1", "Pod") => GroupOwner::Pod(r.name.clone()),
        _ => GroupOwner::Controller {
            uid: r.uid.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
        },
    };
    Some(GroupKey {
        namespace: pg.namespace().unwrap_or_default(),
        owner,
    })
}

/// Registers the subscribers and starts the workers.
pub(crate) fn start(
    client: &Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    config: &ControllerConfig,
    metrics: &ControllerMetrics,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let queue: WorkQueue<GroupKey> = WorkQueue::new(shutdown.clone());
    let index = Arc::new(Mutex::new(PodIndex::default()));
    let written = Arc::new(Mutex::new(Written::default()));
    let names = config.scheduler_names.clone();
    {
        let (queue, index, written) = (queue.clone(), index.clone(), written.clone());
        let relist = Mutex::new(Relist::default());
        feeds.pods(Arc::new(move |ev| {
            if let watcher::Event::Delete(p) = ev {
                lock(&written).pods.remove(&p.uid().unwrap_or_default());
            }
            let fresh = {
                let mut relist = lock(&relist);
                let staged = relist.stage::<_, PodIndex>(ev);
                let mut idx = lock(&index);
                staged.apply_to(&mut *idx);
                idx.take_fresh()
            };
            // New pods, and served pods still without a group name, bring their gang up.
            let lacking = match ev {
                watcher::Event::Apply(p) if group_name_of(p).is_none() => Some(Fresh::of(p)),
                _ => None,
            };
            for f in fresh.into_iter().chain(lacking) {
                if names.contains(&f.scheduler) && !f.foreign {
                    queue.add(f.key);
                }
            }
        }));
    }
    // A relist's keys wait for its end, when the store holds what was listed.
    feeds.replica_sets(queue_keys::<ReplicaSet, _, _>(
        queue.clone(),
        |ev| match ev {
            watcher::Event::Apply(rs) | watcher::Event::InitApply(rs) => Some(GroupKey {
                namespace: rs.namespace().unwrap_or_default(),
                owner: GroupOwner::ReplicaSet(rs.name_any()),
            }),
            _ => None,
        },
    ));
    feeds.stateful_sets(queue_keys::<StatefulSet, _, _>(
        queue.clone(),
        |ev| match ev {
            watcher::Event::Apply(s) | watcher::Event::InitApply(s) => Some(GroupKey {
                namespace: s.namespace().unwrap_or_default(),
                owner: GroupOwner::StatefulSet(s.name_any()),
            }),
            _ => None,
        },
    ));
    {
        // A Deployment's annotations are part of its ReplicaSets' PodGroups.
        let (queue, caches) = (queue.clone(), caches.clone());
        feeds.deployments(Arc::new(move |ev| {
            let watcher::Event::Apply(d) = ev else {
                return;
            };
            let (ns, uid) = (d.namespace(), d.uid());
            for rs in caches.replica_sets().state() {
                let owned = rs.namespace() == ns
                    && rs
                        .owner_references()
                        .iter()
                        .any(|r| r.controller == Some(true) && Some(&r.uid) == uid.as_ref());
                if owned {
                    queue.add(GroupKey {
                        namespace: rs.namespace().unwrap_or_default(),
                        owner: GroupOwner::ReplicaSet(rs.name_any()),
                    });
                }
            }
        }));
    }
    {
        // A PodGroup deleted by hand is made again; one that appears late in the cache
        // (after an AlreadyExists) is compared again.
        let queue = queue.clone();
        feeds.podgroups(Arc::new(move |ev| {
            if let watcher::Event::Delete(DeserializeGuard(Ok(pg)))
            | watcher::Event::Apply(DeserializeGuard(Ok(pg))) = ev
                && let Some(k) = key_for_podgroup(pg)
            {
                queue.add(k);
            }
        }));
    }
    let ctx = Arc::new(Context {
        client: client.clone(),
        caches: caches.clone(),
        config: config.clone(),
        index,
        recorder: EventRecorder::new(client.clone(), NAME),
        metrics: metrics.clone(),
        reported: Mutex::new(HashSet::new()),
        written,
    });
    super::spawn_workers(
        NAME,
        queue,
        caches.clone(),
        &config.leadership,
        config.workers,
        metrics.clone(),
        shutdown.clone(),
        move |key| reconcile(key, ctx.clone()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(owner: serde_json::Value, annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "pu",
                          "ownerReferences": owner, "annotations": annotations},
            "spec": {"containers": [{"name": "m"}]}
        }))
        .unwrap()
    }

    #[test]
    fn keys_follow_the_controller() {
        let rs = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]);
        assert_eq!(
            key_for_pod(&pod(rs, json!({}))).owner,
            GroupOwner::ReplicaSet("rs".into())
        );
        let sts = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "uid": "u", "controller": true}]);
        assert_eq!(
            key_for_pod(&pod(sts, json!({}))).owner,
            GroupOwner::StatefulSet("s".into())
        );
        let job = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}]);
        assert!(
            matches!(key_for_pod(&pod(job, json!({}))).owner, GroupOwner::Controller { ref uid, .. } if uid == "ju")
        );
        assert_eq!(
            key_for_pod(&pod(json!([]), json!({}))).owner,
            GroupOwner::Pod("p".into())
        );
    }

    #[test]
    fn foreign_group_names() {
        let rs = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}]);
        let k = keys::KUBE_GROUP_NAME_ANNOTATION;
        assert!(!has_foreign_group(&pod(rs.clone(), json!({}))));
        assert!(
            !has_foreign_group(&pod(rs.clone(), json!({k: "podgroup-u"}))),
            "the webhook's name is ours"
        );
        assert!(has_foreign_group(&pod(rs, json!({k: "lws-group"}))));
    }

    #[test]
    fn pod_index_tracks_gangs_and_relists() {
        // Pods of one batch Job: their PodGroup is named by the Job's uid.
        let member = |name: &str| {
            let owner = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": true}]);
            let mut p = pod(owner, json!({}));
            p.metadata.name = Some(name.into());
            p
        };
        let names = |fresh: Vec<Fresh>| fresh.into_iter().map(|f| f.name).collect::<Vec<_>>();
        let mut i = PodIndex::default();
        let mut relist = Relist::default();
        relist.feed(&mut i, &watcher::Event::Apply(member("a")));
        assert_eq!(names(i.take_fresh()), ["a"]);
        relist.feed(&mut i, &watcher::Event::Apply(member("a")));
        assert!(i.take_fresh().is_empty(), "seen before");
        relist.feed(&mut i, &watcher::Event::Apply(member("b")));
        assert_eq!(names(i.take_fresh()), ["b"]);
        assert_eq!(i.pods_of("ns", "u1"), vec!["a", "b"]);
        relist.feed(&mut i, &watcher::Event::Delete(member("a")));
        assert_eq!(i.pods_of("ns", "u1"), vec!["b"]);
        assert!(i.take_fresh().is_empty());
        let p = pod(json!([]), json!({}));
        relist.feed(&mut i, &watcher::Event::Init);
        relist.feed(&mut i, &watcher::Event::InitApply(p));
        // Until the relist is done the old view stands.
        assert_eq!(i.pods_of("ns", "u1"), vec!["b"]);
        relist.feed(&mut i, &watcher::Event::InitDone);
        let fresh = i.take_fresh();
        assert_eq!(fresh.len(), 1, "every listed pod is looked at again");
        assert!(
            i.pods_of("ns", "u1").is_empty(),
            "relist replaced the index"
        );
        assert_eq!(i.pods_of("ns", "pu"), vec!["p"]);
    }
}
