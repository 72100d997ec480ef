//! The shared watch caches: each resource is watched once per process and every reader
//! (admission now; controllers and the scheduler as they land) reads the same
//! [`kube::runtime::reflector::Store`]s. Nothing on a request path calls the API.
//!
//! Custom resources are watched through [`DeserializeGuard`], so one malformed object in the
//! cluster is skipped (and logged) instead of breaking the whole watch.
//!
//! Each object is trimmed at the reflector to the fields some reader uses ([`super::trim`]):
//! a reader that starts using another field keeps it there. Pods, most of what a large
//! cluster holds, are stored packed unless tephra works on them ([`super::packed`]) and read
//! through [`Caches::pod`] and [`Caches::all_pods`]; the watch's subscribers get each event's
//! pod decoded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::InitialListStrategy;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::packed::{Stored, StoredPod};
use super::startup::{Class, INSTALL_CRDS, WARN_EVERY, WarnEvery, classify};
use super::trim::Trim;
use crate::admission::ClusterView;
use crate::api::{Command, CronJob, HyperNode, Job, PodGroup, Queue};

/// Errors of the cache layer.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The initial list did not complete in time (API down, RBAC missing, or a large
    /// cluster's list still arriving).
    #[error(
        "watch caches not synced within {after:?}, still listing: {} (is the API reachable, are the CRDs in manifests/crds installed and the RBAC in manifests/rbac.yaml applied?)",
        waiting.join(", ")
    )]
    SyncTimeout {
        /// How long was waited.
        after: Duration,
        /// The caches without their first list yet, so an operator sees where start-up waits
        /// (on a large cluster: `pods`).
        waiting: Vec<&'static str>,
    },
}

/// A callback run for every watch event of one resource, on the reflector's task, right after
/// the shared store has applied it. This is how an index of its own (the scheduler's snapshot,
/// say) is kept current from the same single watch: it must be quick and must not block.
pub type Subscriber<K> = Arc<dyn Fn(&watcher::Event<K>) + Send + Sync>;

/// The type a watched kind is stored as: itself, or the form named after `as`.
macro_rules! stored {
    ($ty:ty) => {
        $ty
    };
    ($ty:ty, $st:ty) => {
        $st
    };
}

/// Every resource tephra watches, once per process. A macro keeps the reader struct, the
/// writer struct, the subscriber lists and the start-up in step: adding a resource is one line.
macro_rules! caches {
    ($( $(#[$doc:meta])* $field:ident : $ty:ty $(as $st:ty)? => $api:ident ),* $(,)?) => {
        /// The read side of every shared cache.
        #[derive(Clone)]
        pub struct Caches {
            $( $(#[$doc])* $field: Store<stored!($ty $(, $st)?)>, )*
        }

        impl std::fmt::Debug for Caches {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut d = f.debug_struct("Caches");
                $( d.field(stringify!($field), &self.$field.state().len()); )*
                d.finish()
            }
        }

        /// The write side of [`Caches`]: the reflector writers and the event subscribers,
        /// waiting for [`CacheFeeds::run`]. Split from the readers so the readers can be handed
        /// out (to the admission router, the scheduler) before the API they watch is up, as in
        /// embedded mode, where the CRDs are installed after the HTTPS listener is bound.
        pub struct CacheFeeds {
            $( $field: (reflector::store::Writer<stored!($ty $(, $st)?)>, Vec<Subscriber<$ty>>), )*
        }

        impl CacheFeeds {
            $(
                #[doc = concat!("Calls `f` for every watch event of `", stringify!($field), "`.")]
                pub fn $field(&mut self, f: Subscriber<$ty>) {
                    self.$field.1.push(f);
                }
            )*

            /// Starts every watch on `client`; they run until `shutdown` is cancelled.
            pub fn run(self, client: &Client, shutdown: &CancellationToken) {
                // One gate for every watch: a cluster without tephra's CRDs fails several of
                // them at once, and one line says so.
                let warn = Arc::new(std::sync::Mutex::new(WarnEvery::new(WARN_EVERY)));
                $(
                    spawn_reflector(self.$field.0, self.$field.1, Api::$api(client.clone()), warn.clone(), shutdown.clone());
                )*
            }
        }

        impl Caches {
            /// Empty caches and the feeds that will fill them.
            pub fn new() -> (Self, CacheFeeds) {
                $( let $field = reflector::store(); )*
                (
                    Self { $( $field: $field.0, )* },
                    CacheFeeds { $( $field: ($field.1, Vec::new()), )* },
                )
            }

            /// Waits until every cache has its initial list, or `timeout`.
            ///
            /// kube's `Store::wait_until_ready` wakes only the task that polled it last (one
            /// oneshot receiver behind a mutex), so with several waiters (`/readyz`, each
            /// controller) the others would sleep until their timeout: the stores are re-polled
            /// every 50 ms instead.
            pub async fn wait_synced(&self, timeout: Duration) -> Result<(), CacheError> {
                let deadline = tokio::time::Instant::now() + timeout;
                loop {
                    let all = async {
                        // An error means the writer was dropped (shutdown): nothing left to wait for.
                        $( let _ = self.$field.wait_until_ready().await; )*
                    };
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    if tokio::time::timeout(left.min(Duration::from_millis(50)), all).await.is_ok() {
                        return Ok(());
                    }
                    if left.is_zero() {
                        return Err(CacheError::SyncTimeout { after: timeout, waiting: self.unsynced() });
                    }
                }
            }

            /// The caches whose first list has not completed yet.
            pub fn unsynced(&self) -> Vec<&'static str> {
                let mut waiting = Vec::new();
                $(
                    // Polled once and dropped: answers "ready now?" without waiting.
                    if self.$field.wait_until_ready().now_or_never().is_none() {
                        waiting.push(stringify!($field));
                    }
                )*
                waiting
            }

            $(
                #[doc = concat!("The shared store of `", stringify!($field), "`.")]
                pub fn $field(&self) -> &Store<stored!($ty $(, $st)?)> {
                    &self.$field
                }
            )*
        }
    };
}

caches! {
    queues: DeserializeGuard<Queue> => all,
    namespaces: Namespace => all,
    /// Packed ([`StoredPod`]): read them through [`Caches::pod`] and [`Caches::all_pods`].
    pods: Pod as StoredPod => all,
    nodes: Node => all,
    podgroups: DeserializeGuard<PodGroup> => all,
    priority_classes: PriorityClass => all,
    resource_quotas: ResourceQuota => all,
    pod_disruption_budgets: PodDisruptionBudget => all,
    replica_sets: ReplicaSet => all,
    stateful_sets: StatefulSet => all,
    deployments: Deployment => all,
    daemon_sets: DaemonSet => all,
    batch_jobs: BatchJob => all,
    jobs: DeserializeGuard<Job> => all,
    commands: DeserializeGuard<Command> => all,
    cronjobs: DeserializeGuard<CronJob> => all,
    hypernodes: DeserializeGuard<HyperNode> => all,
}

impl std::fmt::Debug for CacheFeeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheFeeds").finish_non_exhaustive()
    }
}

/// A store of `K` (cluster-wide) fed by a watch of its own, with `subscriber` run after each
/// event: for what only one configuration reads (the native gang engine's objects), which the
/// shared caches must not watch on clusters that do not serve it.
pub fn own_store<K>(
    client: &Client,
    subscriber: Subscriber<K>,
    shutdown: &CancellationToken,
) -> Store<K>
where
    K: Resource + Trim + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store();
    let warn = Arc::new(std::sync::Mutex::new(WarnEvery::new(WARN_EVERY)));
    spawn_reflector(
        writer,
        vec![subscriber],
        Api::all(client.clone()),
        warn,
        shutdown.clone(),
    );
    store
}

/// Runs one reflector until `shutdown`, feeding the store and then every subscriber, and
/// logging (not failing on) watch errors: the watcher's default backoff retries them, and the
/// store keeps serving the last known state meanwhile. Every object is trimmed to what
/// tephra reads ([`super::trim`]) before the store or a subscriber sees it.
///
/// The first list is a streaming list (a watch that starts with every object, then a
/// bookmark): the API server streams objects from its watch cache while they are decoded
/// here, instead of answering one page of 500 after another, which on a cluster of 150,000
/// pods is most of start-up. A server that rejects it (the `WatchList` feature off, older
/// than Kubernetes 1.27) is listed in pages instead, from then on.
fn spawn_reflector<K, S>(
    mut writer: reflector::store::Writer<S>,
    subscribers: Vec<Subscriber<K>>,
    api: Api<K>,
    warn: Arc<std::sync::Mutex<WarnEvery>>,
    shutdown: CancellationToken,
) where
    K: Resource + Trim + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    S: Stored<K>,
    S::DynamicType: Eq + std::hash::Hash + Clone,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    tokio::spawn(async move {
        let mut config = watcher::Config::default().streaming_lists();
        loop {
            let stream = watcher(api.clone(), config.clone())
                .default_backoff()
                .modify(Trim::trim);
            let mut stream = std::pin::pin!(stream);
            let fallback = loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    next = stream.next() => match next {
                        Some(Ok(event)) => {
                            S::apply(&mut writer, &event);
                            for s in &subscribers {
                                s(&event);
                            }
                        }
                        Some(Err(e))
                            if config.initial_list_strategy == InitialListStrategy::StreamingList
                                && streaming_rejected(&e) =>
                        {
                            break e;
                        }
                        Some(Err(e)) => report_watch_error(&kind, &e, &warn),
                        None => return,
                    },
                }
            };
            tracing::info!(
                %kind,
                error = %crate::report::report(&fallback),
                "the API server does not serve streaming lists; listing in pages"
            );
            config = watcher::Config::default();
        }
    });
}

/// Whether a watch error is the API server refusing a streaming list's parameters
/// (`sendInitialEvents`): 422 when its `WatchList` feature is off, 400 from servers that
/// validate the parameters otherwise. Anything else is retried as it is.
fn streaming_rejected(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 400 || s.code == 422)
}

/// Logs a watch error at WARN at most once per [`WARN_EVERY`] over all watches (each retries
/// every few seconds), naming the fix when the API does not serve the kind: on a cluster
/// where tephra's CRDs are not installed yet.
fn report_watch_error(kind: &str, e: &watcher::Error, warn: &std::sync::Mutex<WarnEvery>) {
    let class = match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => classify(e),
        watcher::Error::WatchError(s) if s.code == 404 => Class::Missing,
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => Class::Transient,
    };
    let error = crate::report::report(e);
    let due = crate::sync::lock(warn).due(std::time::Instant::now());
    if !due {
        tracing::debug!(%kind, %error, "watch error; retrying");
    } else if class == Class::Missing {
        tracing::warn!(%kind, %error, "watch: waiting for the cluster: {INSTALL_CRDS}");
    } else {
        tracing::warn!(%kind, %error, "watch error; retrying");
    }
}

impl Caches {
    /// [`Caches::new`] with the feeds started on `client` at once.
    pub fn start(client: &Client, shutdown: &CancellationToken) -> Self {
        let (caches, feeds) = Self::new();
        feeds.run(client, shutdown);
        caches
    }

    /// The cached pod `namespace/name` (shared, or unpacked when kept packed).
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods
            .get(&reflector::ObjectRef::new(name).within(namespace))?
            .get()
    }

    /// Every cached pod: a parse of each packed one, for the readers that need them all (the
    /// web view's pages and what-if).
    pub fn all_pods(&self) -> Vec<Arc<Pod>> {
        self.pods.state().iter().filter_map(|p| p.get()).collect()
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
