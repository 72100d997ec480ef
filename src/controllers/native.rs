//! The native gang engine's bridge (`--gang-engine native`): keeps, for every Volcano PodGroup,
//! the `scheduling.k8s.io/v1beta1` Workload and PodGroup kube-scheduler's gang cycle reads
//! (what they hold is decided in [`tephra_controllers::native`]).
//!
//! ```text
//!   Volcano PodGroup events (shared cache) ─┐
//!   native Workload / PodGroup events ──────┴▶ WorkQueue<"ns/name">
//!        ▼
//!   reconcile: mirror() ─▶ workload_change / pod_group_change ─▶ create or merge-patch
//!              admission() ─▶ hold back (annotate, native minCount out of reach, release
//!                             the session's placements) or readmit (clear, minCount back)
//! ```
//!
//! A gang kube-scheduler has said it cannot place for `--native-place-timeout`, none of its
//! pods bound, is held back ([`Admission`]); the sessions then see it as any waiting gang,
//! and once one that started after the hold places it, it is sent to kube-scheduler again.
//!
//! The native objects are watched here, not in the shared caches: a cluster without the API
//! would fail those watches forever. A native object deleted by hand is made again from its
//! event; when the Volcano PodGroup goes, the garbage collector removes both (they are owned
//! by it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::scheduling::v1beta1 as native;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::relist::queue_keys;
use super::workqueue::WorkQueue;
use super::{Action, ControllerConfig, ControllerMetrics, KubeOp, MetricLabel};
use crate::api::PodGroup;
use crate::cluster::events::{EventRecorder, EventType, object_ref};
use crate::cluster::{CacheFeeds, Caches};
use crate::scheduler::Scheduler;
use crate::scheduler::outcome::Verdict;
use crate::sync::lock;
use tephra_api::keys::NATIVE_UNPLACED;
use tephra_controllers::native::{
    Admission, Change, GangState, GroupClass, HELD, admission, hold, mirror, placement,
    pod_group_change, topology_key, unplaceable_since, unplaced_note, workload_change,
};

/// The native engine's settings, when it runs.
#[derive(Clone, Debug)]
pub struct NativeConfig {
    /// The session: its plan says which gangs it places, its index what it assumed.
    pub scheduler: Scheduler,
    /// `--native-place-timeout`.
    pub place_timeout: Duration,
}

/// How often a held-back gang looks for a session that placed it again.
const HELD_RECHECK: Duration = Duration::from_secs(2);

/// How often a gang not made by a vcJob looks for its first pod (its native objects wait for
/// one: their priority class is the pods').
const MEMBERS_RECHECK: Duration = Duration::from_secs(1);

/// The controller's name (metrics).
pub const NAME: &str = "native-bridge";

/// The field manager of tephra's writes to the native objects.
const FIELD_MANAGER: &str = "tephra";

/// Why a reconcile failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] KubeOp),
}

impl MetricLabel for NativeError {
    const FIRST: &'static str = "create-workload";

    fn metric_label(&self) -> &'static str {
        match self {
            NativeError::Kube(e) => e.op,
        }
    }
}

/// What a reconcile reads.
struct Context {
    client: Client,
    caches: Caches,
    workloads: Store<native::Workload>,
    pod_groups: Store<native::PodGroup>,
    config: NativeConfig,
    events: EventRecorder,
    /// Gang → the session count when it was held back, and when it was last sent again (Unix
    /// seconds: kube-scheduler's condition still says it could not place the gang from before).
    /// Lost on restart: a held gang then goes back at the next session that places it.
    held_at: Mutex<HashMap<String, u64>>,
    sent_at: Mutex<HashMap<String, i64>>,
    /// `--controller-config`'s label discovery: a hard tier's label key.
    discovery: Option<Arc<super::hypernode::discovery::DiscoveryFile>>,
    /// The warning that the cluster drops topology constraints was logged.
    said_no_topology: std::sync::atomic::AtomicBool,
}

/// `namespace/name` of an object.
fn key_of<K: Resource>(obj: &K) -> Option<String> {
    let meta = obj.meta();
    Some(format!(
        "{}/{}",
        meta.namespace.as_deref()?,
        meta.name.as_deref()?
    ))
}

/// The key of the object an event touches.
fn event_key<K: Resource>(ev: &watcher::Event<K>) -> Option<String> {
    match ev {
        watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o) => {
            key_of(o)
        }
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

async fn reconcile(ctx: Arc<Context>, key: String) -> Result<Action, NativeError> {
    let Some((namespace, name)) = key.split_once('/') else {
        return Ok(Action::AwaitChange);
    };
    let cached = ctx
        .caches
        .podgroups()
        .get(&ObjectRef::new(name).within(namespace));
    // Gone (the garbage collector removes its native objects) or not a PodGroup we can read.
    let Some(Ok(pg)) = cached.as_ref().map(|g| g.0.as_ref()) else {
        return Ok(Action::AwaitChange);
    };
    let labels = ctx.discovery.as_ref().and_then(|d| d.current());
    let key_of_tier = labels.and_then(|l| topology_key(pg, &l));
    // The group's priority class follows its pods' (it cannot change once made): a vcJob's
    // pods are known from the job before they exist; any other group's (a framework
    // operator's) are read from its first pod, so its native objects wait for one.
    let members_class = match vcjob_of(&ctx.caches, pg) {
        Some(job) => tephra_controllers::job::build::gang_core_priority_class(&job).map(Some),
        None => match first_member_class(&ctx, &key) {
            Some(class) => Some(class),
            None => return Ok(Action::RequeueAfter(MEMBERS_RECHECK)),
        },
    };
    let class = match &members_class {
        Some(class) => GroupClass::Members(class.as_deref()),
        None => GroupClass::PodGroup,
    };
    let Some(mut want) = mirror(pg, key_of_tier.as_deref(), class) else {
        return Ok(Action::AwaitChange);
    };
    // The Workload first: the PodGroup names it.
    let stored = ctx.workloads.get(&ObjectRef::new(name).within(namespace));
    let change = workload_change(&want.workload, stored.as_deref());
    write(&ctx.client, namespace, &want.workload, change, WORKLOAD_OPS).await?;
    let stored = ctx.pod_groups.get(&ObjectRef::new(name).within(namespace));
    if let Some(stored) = &stored
        && want.pod_group.spec.scheduling_constraints.is_some()
        && stored.spec.scheduling_constraints.is_none()
        && !ctx
            .said_no_topology
            .swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        // kube-apiserver drops a field whose feature gate is off.
        tracing::warn!(gang = %key, "native engine: the cluster dropped the PodGroup's topology constraint (feature gate TopologyAwareWorkloadScheduling off): kube-scheduler places gangs without their networkTopology");
    }
    let gang = gang_state(&ctx, &key, pg, stored.as_deref());
    if let Some(note) = unplaced_note(&gang) {
        let current = pg
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NATIVE_UNPLACED))
            .map(String::as_str);
        if current != note {
            annotate(&ctx.client, namespace, name, NATIVE_UNPLACED, note).await?;
        }
    }
    let next = match admission(&gang, ctx.config.place_timeout.as_secs()) {
        Admission::Wait => {
            hold(&mut want.pod_group);
            Action::RequeueAfter(HELD_RECHECK)
        }
        Admission::HoldBack => {
            hold_back(&ctx, &key, pg, stored.as_deref()).await?;
            hold(&mut want.pod_group);
            Action::RequeueAfter(HELD_RECHECK)
        }
        Admission::Readmit => {
            annotate(&ctx.client, namespace, name, HELD, None).await?;
            lock(&ctx.held_at).remove(&key);
            lock(&ctx.sent_at).insert(key.clone(), k8s_openapi::jiff::Timestamp::now().as_second());
            tracing::info!(gang = %key, "native engine: a session placed the held-back gang; sent to kube-scheduler again");
            Action::AwaitChange
        }
        Admission::SendAndRecheck(after) => Action::RequeueAfter(after),
        Admission::Send => Action::AwaitChange,
    };
    let change = pod_group_change(&want.pod_group, stored.as_deref());
    write(
        &ctx.client,
        namespace,
        &want.pod_group,
        change,
        POD_GROUP_OPS,
    )
    .await?;
    Ok(next)
}

/// The priority class of a pod of gang `key` (`namespace/name` of its PodGroup), from the
/// session's index and the shared pod cache; `None` while the gang has no pod.
fn first_member_class(ctx: &Context, key: &str) -> Option<Option<String>> {
    let (namespace, name) = {
        let idx = ctx.config.scheduler.index();
        let task = idx.job_tasks(key).next()?;
        (task.namespace.clone(), task.name.clone())
    };
    let pod = ctx.caches.pod(&namespace, &name)?;
    Some(
        pod.spec
            .as_ref()
            .and_then(|s| s.priority_class_name.clone()),
    )
}

/// The vcJob that owns `pg`, from the shared cache.
fn vcjob_of(caches: &Caches, pg: &PodGroup) -> Option<crate::api::Job> {
    let owner = pg.metadata.owner_references.as_ref()?.iter().find(|o| {
        o.controller == Some(true)
            && o.kind == "Job"
            && o.api_version.starts_with("batch.volcano.sh/")
    })?;
    let namespace = pg.metadata.namespace.as_deref()?;
    let cached = caches
        .jobs()
        .get(&ObjectRef::new(&owner.name).within(namespace))?;
    let job = cached.0.as_ref().ok()?;
    (job.metadata.uid.as_deref() == Some(owner.uid.as_str())).then(|| job.clone())
}

/// What [`admission`] reads of gang `key`, from its Volcano and native PodGroups and the
/// session.
fn gang_state(
    ctx: &Context,
    key: &str,
    pg: &PodGroup,
    stored: Option<&native::PodGroup>,
) -> GangState {
    let held = pg
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(HELD));
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let scheduler = &ctx.config.scheduler;
    let bound = {
        let idx = scheduler.index();
        idx.job_tasks(key)
            .filter(|t| t.node.is_some() && !t.assumed)
            .count()
    };
    let placed_since_hold = held && {
        let held_at = lock(&ctx.held_at).get(key).copied().unwrap_or(0);
        // The session running at the hold may still have counted the old placements.
        scheduler.session_count() > held_at + 1
            && scheduler.plan().gangs.get(key) == Some(&Verdict::Ready)
    };
    GangState {
        held,
        placement: stored.map_or(tephra_controllers::native::Placement::Pending, placement),
        unplaceable_for: stored.and_then(unplaceable_since).map(|since| {
            let sent = lock(&ctx.sent_at).get(key).copied().unwrap_or(since);
            u64::try_from(now - since.max(sent)).unwrap_or(0)
        }),
        bound: i32::try_from(bound).unwrap_or(i32::MAX),
        placed_since_hold,
    }
}

/// Holds gang `key` back: marks its Volcano PodGroup (the caller then puts its native
/// PodGroup's `minCount` out of reach, and kube-scheduler leaves its pods waiting), releases
/// the placements the session assumed for it, and says why in an Event.
async fn hold_back(
    ctx: &Context,
    key: &str,
    pg: &PodGroup,
    stored: Option<&native::PodGroup>,
) -> Result<(), NativeError> {
    let (namespace, name) = key.split_once('/').unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    annotate(&ctx.client, namespace, name, HELD, Some(&now)).await?;
    let scheduler = &ctx.config.scheduler;
    {
        let mut idx = scheduler.index();
        let uids: Vec<String> = idx.job_tasks(key).map(|t| t.uid.clone()).collect();
        for uid in uids {
            idx.forget(&uid);
        }
    }
    lock(&ctx.held_at).insert(key.to_string(), scheduler.session_count());
    let said = match stored.map(placement) {
        Some(tephra_controllers::native::Placement::Unplaceable { message, .. }) => message,
        _ => String::new(),
    };
    let message = format!(
        "kube-scheduler could not place the gang within {:?} ({said}); held back, its room released until a session finds room again",
        ctx.config.place_timeout
    );
    tracing::info!(gang = %key, %message, "native engine: gang held back");
    let object = object_ref(
        crate::api::scheduling::API_VERSION,
        "PodGroup",
        Some(namespace),
        name,
        pg.metadata.uid.as_deref(),
    );
    if let Err(e) = ctx
        .events
        .record(&object, EventType::Warning, "NotPlaced", &message)
        .await
    {
        tracing::debug!(gang = %key, error = %crate::report::report(&e), "event not recorded");
    }
    Ok(())
}

/// Sets (or, with `None`, removes) annotation `key` of a Volcano PodGroup ([`HELD`],
/// [`NATIVE_UNPLACED`]).
async fn annotate(
    client: &Client,
    namespace: &str,
    name: &str,
    key: &str,
    value: Option<&str>,
) -> Result<(), NativeError> {
    let api: Api<PodGroup> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if crate::cluster::status_code(&e) == Some(404) => Ok(()),
        Err(e) => Err(KubeOp::new("annotate-podgroup", format!("{namespace}/{name}"), e).into()),
    }
}

/// The names (errors metric, logs) of creating and of patching one kind.
type Ops = (&'static str, &'static str);
const WORKLOAD_OPS: Ops = ("create-workload", "patch-workload");
const POD_GROUP_OPS: Ops = ("create-podgroup", "patch-podgroup");

/// Applies one [`Change`] of `obj`. A create answered 409 means the cache had not seen the
/// object yet (its event queues the key again); a patch answered 404 means it was deleted
/// meanwhile (its delete event does).
async fn write<K>(
    client: &Client,
    namespace: &str,
    obj: &K,
    change: Change,
    (create, patch_op): Ops,
) -> Result<(), KubeOp>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let name = obj.meta().name.clone().unwrap_or_default();
    let (op, result) = match change {
        Change::Keep => return Ok(()),
        Change::Create => {
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PostParams::default()
            };
            (create, api.create(&params, obj).await.map(drop))
        }
        Change::Patch(patch) => {
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            };
            let patched = api.patch(&name, &params, &Patch::Merge(&patch)).await;
            (patch_op, patched.map(drop))
        }
    };
    match result {
        Ok(()) => {
            tracing::debug!(%namespace, %name, op, "native object written");
            Ok(())
        }
        Err(e) if matches!(crate::cluster::status_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(KubeOp::new(op, format!("{namespace}/{name}"), e)),
    }
}

pub(crate) fn start(
    client: &Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    config: &ControllerConfig,
    native: &NativeConfig,
    metrics: &ControllerMetrics,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let queue: WorkQueue<String> = WorkQueue::new(shutdown.clone());
    // Every watch's keys from a relist wait for its end, when the store holds what was listed.
    feeds.podgroups(queue_keys(queue.clone(), |ev| match ev {
        watcher::Event::Apply(g) | watcher::Event::InitApply(g) => key_of(g),
        _ => None,
    }));
    let workloads = crate::cluster::caches::own_store::<native::Workload>(
        client,
        queue_keys(queue.clone(), event_key),
        shutdown,
    );
    let pod_groups = crate::cluster::caches::own_store::<native::PodGroup>(
        client,
        queue_keys(queue.clone(), event_key),
        shutdown,
    );
    let ctx = Arc::new(Context {
        client: client.clone(),
        caches: caches.clone(),
        workloads,
        pod_groups,
        config: native.clone(),
        events: EventRecorder::new(client.clone(), "tephra-native-bridge"),
        held_at: Mutex::new(HashMap::new()),
        sent_at: Mutex::new(HashMap::new()),
        discovery: config.hypernode_discovery.clone(),
        said_no_topology: std::sync::atomic::AtomicBool::new(false),
    });
    super::spawn_workers(
        NAME,
        queue,
        caches.clone(),
        &config.leadership,
        config.workers,
        metrics.clone(),
        shutdown.clone(),
        move |key: String| reconcile(ctx.clone(), key),
    )
}
