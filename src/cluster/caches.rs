//! The shared watch caches: each resource is watched once per process and every reader
//! (admission now; controllers and the scheduler as they land) reads the same
//! [`kube::runtime::reflector::Store`]s. Nothing on a request path calls the API.
//!
//! Custom resources are watched through [`DeserializeGuard`], so one malformed object in the
//! cluster is skipped (and logged) instead of breaking the whole watch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::admission::ClusterView;
use crate::api::Queue;

/// Errors of the cache layer.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The initial list did not complete in time (API down, RBAC missing).
    #[error(
        "watch caches not synced within {0:?} (is the API reachable, are the CRDs in manifests/crds installed and the RBAC in manifests/rbac.yaml applied?)"
    )]
    SyncTimeout(Duration),
}

/// The read side of every shared cache.
#[derive(Clone)]
pub struct Caches {
    queues: Store<DeserializeGuard<Queue>>,
    namespaces: Store<Namespace>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("queues", &self.queues.state().len())
            .field("namespaces", &self.namespaces.state().len())
            .finish()
    }
}

/// The write side of [`Caches`]: the reflector writers, waiting for [`CacheFeeds::run`]. Split
/// from the readers so the readers can be handed out (to the admission router) before the API
/// they watch is up, as in embedded mode, where the CRDs are installed after the HTTPS listener
/// is bound.
pub struct CacheFeeds {
    queues: reflector::store::Writer<DeserializeGuard<Queue>>,
    namespaces: reflector::store::Writer<Namespace>,
}

impl std::fmt::Debug for CacheFeeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheFeeds").finish_non_exhaustive()
    }
}

/// Runs one reflector until `shutdown`, logging (not failing on) watch errors: the watcher's
/// default backoff retries them, and the store keeps serving the last known state meanwhile.
fn spawn_reflector<K>(writer: reflector::store::Writer<K>, api: Api<K>, shutdown: CancellationToken)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    )
    .touched_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                next = stream.next() => match next {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => tracing::warn!(%kind, error = %crate::report::report(&e), "watch error; retrying"),
                    None => break,
                },
            }
        }
    });
}

impl CacheFeeds {
    /// Starts every watch on `client`; they run until `shutdown` is cancelled.
    pub fn run(self, client: &Client, shutdown: &CancellationToken) {
        spawn_reflector(self.queues, Api::all(client.clone()), shutdown.clone());
        spawn_reflector(self.namespaces, Api::all(client.clone()), shutdown.clone());
    }
}

impl Caches {
    /// Empty caches and the feeds that will fill them.
    pub fn new() -> (Self, CacheFeeds) {
        let (queues, qw) = reflector::store();
        let (namespaces, nw) = reflector::store();
        (
            Self { queues, namespaces },
            CacheFeeds {
                queues: qw,
                namespaces: nw,
            },
        )
    }

    /// [`Caches::new`] with the feeds started on `client` at once.
    pub fn start(client: &Client, shutdown: &CancellationToken) -> Self {
        let (caches, feeds) = Self::new();
        feeds.run(client, shutdown);
        caches
    }

    /// Waits until every cache has its initial list, or `timeout`.
    pub async fn wait_synced(&self, timeout: Duration) -> Result<(), CacheError> {
        let all = async {
            // An error means the writer was dropped (shutdown): nothing left to wait for.
            let _ = self.queues.wait_until_ready().await;
            let _ = self.namespaces.wait_until_ready().await;
        };
        tokio::time::timeout(timeout, all)
            .await
            .map_err(|_| CacheError::SyncTimeout(timeout))
    }

    fn valid_queues(&self) -> impl Iterator<Item = Queue> + '_ {
        self.queues
            .state()
            .into_iter()
            .filter_map(|g| g.0.as_ref().ok().cloned())
            .collect::<Vec<_>>()
            .into_iter()
    }
}

impl ClusterView for Caches {
    fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        let key = reflector::ObjectRef::new(name);
        let guard = self.queues.get(&key)?;
        guard.0.as_ref().ok().map(|q| Arc::new(q.clone()))
    }

    fn child_queues(&self, parent: &str) -> Vec<Arc<Queue>> {
        self.valid_queues()
            .filter(|q| q.spec.parent.as_deref() == Some(parent))
            .map(Arc::new)
            .collect()
    }

    fn queues(&self) -> Vec<Arc<Queue>> {
        self.valid_queues().map(Arc::new).collect()
    }

    fn namespace_annotations(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let ns = self.namespaces.get(&reflector::ObjectRef::new(name))?;
        Some(ns.metadata.annotations.clone().unwrap_or_default())
    }
}
