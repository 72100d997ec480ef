//! The native gang engine's bridge (`--gang-engine native`): keeps, for every Volcano PodGroup,
//! the `scheduling.k8s.io/v1beta1` Workload and PodGroup kube-scheduler's gang cycle reads
//! (what they hold is decided in [`tephra_controllers::native`]).
//!
//! ```text
//!   Volcano PodGroup events (shared cache) ─┐
//!   native Workload / PodGroup events ──────┴▶ WorkQueue<"ns/name">
//!        ▼
//!   reconcile: mirror() ─▶ workload_change / pod_group_change ─▶ create or merge-patch
//! ```
//!
//! The native objects are watched here, not in the shared caches: a cluster without the API
//! would fail those watches forever. A native object deleted by hand is made again from its
//! event; when the Volcano PodGroup goes, the garbage collector removes both (they are owned
//! by it).

use std::sync::Arc;

use k8s_openapi::api::scheduling::v1beta1 as native;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::workqueue::WorkQueue;
use super::{Action, ControllerConfig, ControllerMetrics, KubeOp, MetricLabel};
use crate::cluster::{CacheFeeds, Caches};
use tephra_controllers::native::{Change, mirror, pod_group_change, workload_change};

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

/// Queues the key of every object an event touches.
fn queue_event<K: Resource>(queue: &WorkQueue<String>, ev: &watcher::Event<K>) {
    match ev {
        watcher::Event::Apply(o) | watcher::Event::Delete(o) | watcher::Event::InitApply(o) => {
            if let Some(key) = key_of(o) {
                queue.add(key);
            }
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
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
    let Some(want) = mirror(pg, None) else {
        return Ok(Action::AwaitChange);
    };
    // The Workload first: the PodGroup names it.
    let stored = ctx.workloads.get(&ObjectRef::new(name).within(namespace));
    let change = workload_change(&want.workload, stored.as_deref());
    write(&ctx.client, namespace, &want.workload, change, "workload").await?;
    let stored = ctx.pod_groups.get(&ObjectRef::new(name).within(namespace));
    let change = pod_group_change(&want.pod_group, stored.as_deref());
    write(&ctx.client, namespace, &want.pod_group, change, "podgroup").await?;
    Ok(Action::AwaitChange)
}

/// Applies one [`Change`] of `obj`. A create answered 409 means the cache had not seen the
/// object yet (its event queues the key again); a patch answered 404 means it was deleted
/// meanwhile (its delete event does).
async fn write<K>(
    client: &Client,
    namespace: &str,
    obj: &K,
    change: Change,
    what: &'static str,
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
            (create_op(what), api.create(&params, obj).await.map(drop))
        }
        Change::Patch(patch) => {
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            };
            (
                patch_op(what),
                api.patch(&name, &params, &Patch::Merge(&patch))
                    .await
                    .map(drop),
            )
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

fn create_op(what: &str) -> &'static str {
    if what == "workload" {
        "create-workload"
    } else {
        "create-podgroup"
    }
}

fn patch_op(what: &str) -> &'static str {
    if what == "workload" {
        "patch-workload"
    } else {
        "patch-podgroup"
    }
}

pub(crate) fn start(
    client: &Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    config: &ControllerConfig,
    metrics: &ControllerMetrics,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let queue: WorkQueue<String> = WorkQueue::new(shutdown.clone());
    {
        let queue = queue.clone();
        feeds.podgroups(Arc::new(move |ev| match ev {
            watcher::Event::Apply(g) | watcher::Event::InitApply(g) => {
                if let Some(key) = key_of(g) {
                    queue.add(key);
                }
            }
            _ => {}
        }));
    }
    let workloads = {
        let queue = queue.clone();
        crate::cluster::caches::own_store::<native::Workload>(
            client,
            Arc::new(move |ev| queue_event(&queue, ev)),
            shutdown,
        )
    };
    let pod_groups = {
        let queue = queue.clone();
        crate::cluster::caches::own_store::<native::PodGroup>(
            client,
            Arc::new(move |ev| queue_event(&queue, ev)),
            shutdown,
        )
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        caches: caches.clone(),
        workloads,
        pod_groups,
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
