//! The controllers that run inside `tephra serve`, on the shared watch caches.
//!
//! ```text
//!   cluster::CacheFeeds ── subscribers (pods, replica sets, stateful sets, deployments,
//!        │                  podgroups, queues, commands) map each watch event to keys
//!        ▼
//!   workqueue::WorkQueue<K>  keyed, deduplicated, one worker per key, backoff on errors
//!        ▼
//!   reconcile(key, ctx) ── reads cluster::Caches ── decides in pure code
//!        │                  (podgroup::build, queue::state) ── writes at the edge
//!        ▼
//!   the API (PodGroups, pod annotations, Queue status, Command deletion)
//! ```
//!
//! * [`podgroup`]: PodGroups for plain pods, Deployments (ReplicaSets), StatefulSets and other
//!   controllers' pods that ask for the Volcano scheduler.
//! * [`queue`]: every Queue's `status.state` and PodGroup counts; queue Commands.
//! * [`job`]: vcJobs; [`cronjob`]: vcJobs made on a schedule from CronJobs.
//! * [`hypernode`]: every HyperNode's `status.nodeCount`.
//! * [`native`]: with the native gang engine, the `scheduling.k8s.io` Workload and PodGroup
//!   of every PodGroup.
//!
//! [`start`] starts both as one unit whose [`Controllers`] handle stops them (what leader
//! election will switch on and off).

pub mod cronjob;
pub mod hypernode;
pub mod job;
pub mod native;
pub mod podgroup;
pub mod queue;
mod relist;
pub mod workqueue;

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::{CacheFeeds, Caches};
use crate::leader::Leadership;
use crate::metrics::LATENCY_BUCKETS;
use workqueue::WorkQueue;

/// What the controllers are configured with (from `tephra serve`'s flags).
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// `--scheduler-name`: only pods asking for one of these get PodGroups.
    pub scheduler_names: Vec<String>,
    /// `--inherit-owner-annotations`: owners' `volcano.sh/` annotations (and min-member,
    /// queue) reach the PodGroup.
    pub inherit_owner_annotations: bool,
    /// Workers per controller.
    pub workers: usize,
    /// How often every Queue is re-checked even without events.
    pub queue_resync: Duration,
    /// The Job controller's settings.
    pub job: job::JobConfig,
    /// `--controller-config`: the HyperNode discovery it enables, re-read when it changes.
    pub hypernode_discovery: Option<Arc<hypernode::discovery::DiscoveryFile>>,
    /// Workers reconcile only while this replica leads (always, without leader election);
    /// subscribers keep queueing keys meanwhile, so a new leader starts with every key.
    pub leadership: Leadership,
    /// With the native gang engine: mirror every PodGroup into `scheduling.k8s.io` objects.
    pub native: Option<native::NativeConfig>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            scheduler_names: vec![crate::api::keys::DEFAULT_SCHEDULER_NAME.to_string()],
            inherit_owner_annotations: true,
            workers: 8,
            queue_resync: Duration::from_secs(60),
            job: job::JobConfig::default(),
            hypernode_discovery: None,
            leadership: Leadership::default(),
            native: None,
        }
    }
}

/// Errors of starting the controllers.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A metric could not be registered.
    #[error("registering controller metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// What a reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing until the next event.
    AwaitChange,
    /// Run again after this long.
    RequeueAfter(Duration),
}

/// The series every controller records.
#[derive(Clone)]
pub struct ControllerMetrics {
    /// `tephra_podgroups_total{op}`: PodGroups `created`, `updated`, `deleted` by the
    /// PodGroup controller.
    pub podgroups: IntCounterVec,
    /// `tephra_controller_reconcile_duration_seconds{controller}`.
    pub reconcile: HistogramVec,
    /// `tephra_controller_reconcile_errors_total{controller, error}`.
    pub errors: IntCounterVec,
}

impl std::fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerMetrics").finish_non_exhaustive()
    }
}

impl ControllerMetrics {
    /// Creates the series and registers them into `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let podgroups = IntCounterVec::new(
            Opts::new(
                "tephra_podgroups_total",
                "PodGroups written by the PodGroup controller, by operation.",
            ),
            &["op"],
        )?;
        let reconcile = HistogramVec::new(
            HistogramOpts::new(
                "tephra_controller_reconcile_duration_seconds",
                "Time of one reconcile, by controller.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["controller"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "tephra_controller_reconcile_errors_total",
                "Reconciles that failed (and were retried with backoff), by controller and error.",
            ),
            &["controller", "error"],
        )?;
        registry.register(Box::new(podgroups.clone()))?;
        registry.register(Box::new(reconcile.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        Ok(Self {
            podgroups,
            reconcile,
            errors,
        })
    }
}

/// The running controllers; dropping the handle does not stop them, [`Controllers::stop`] does.
#[derive(Debug)]
pub struct Controllers {
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Controllers {
    /// Stops every worker (subscribers keep queueing keys, which are dropped with the queues).
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Stops and waits for every worker to finish its current key.
    pub async fn join(self) {
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Registers the controllers' subscribers on `feeds` (so call it before `feeds.run`) and starts
/// their workers, which wait for the caches to sync. Stops with `shutdown` or
/// [`Controllers::stop`].
pub fn start(
    client: &Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    config: ControllerConfig,
    registry: &Registry,
    shutdown: &CancellationToken,
) -> Result<Controllers, ControllerError> {
    let metrics = ControllerMetrics::new(registry)?;
    for (controller, label) in [
        (podgroup::NAME, podgroup::PodGroupError::FIRST),
        (queue::NAME, queue::QueueError::FIRST),
        (job::NAME, job::JobError::FIRST),
        (cronjob::NAME, cronjob::CronJobError::FIRST),
        (hypernode::NAME, hypernode::HyperNodeError::FIRST),
    ] {
        metrics.errors.with_label_values(&[controller, label]);
    }
    let token = shutdown.child_token();
    let mut tasks = podgroup::start(client, caches, feeds, &config, &metrics, &token);
    tasks.extend(queue::start(
        client, caches, feeds, &config, &metrics, &token,
    ));
    let (_, job_tasks) = job::start(
        client,
        caches,
        feeds,
        config.job.clone(),
        &config.leadership,
        &metrics,
        registry,
        &token,
    )?
    .into_parts();
    tasks.extend(job_tasks);
    tasks.extend(cronjob::start(
        client, caches, feeds, &config, &metrics, &token,
    ));
    tasks.extend(hypernode::start(
        client, caches, feeds, &config, &metrics, &token,
    ));
    if let Some(settings) = &config.native {
        metrics
            .errors
            .with_label_values(&[native::NAME, native::NativeError::FIRST]);
        tasks.extend(native::start(
            client, caches, feeds, &config, settings, &metrics, &token,
        ));
    }
    tracing::info!(
        workers = config.workers,
        inherit_owner_annotations = config.inherit_owner_annotations,
        "PodGroup, Queue, Job, CronJob and HyperNode controllers started"
    );
    Ok(Controllers {
        shutdown: token,
        tasks,
    })
}

/// An API call of a controller that failed: what was being done, to which object, and why.
/// Its `op` is also the error's label on the errors metric.
#[derive(Debug, thiserror::Error)]
#[error("{op} {name}: {source}")]
pub struct KubeOp {
    /// What was being done.
    pub op: &'static str,
    /// The object.
    pub name: String,
    /// Why.
    #[source]
    pub source: kube::Error,
}

impl KubeOp {
    /// The failed call `op` on `name`.
    pub fn new(op: &'static str, name: impl Into<String>, source: kube::Error) -> Self {
        Self {
            op,
            name: name.into(),
            source,
        }
    }

    /// [`KubeOp::new`] for `map_err`: `api.get(name).await.map_err(KubeOp::on("get", name))?`.
    pub fn on(op: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Self + use<> {
        let name = name.to_string();
        move |source| Self { op, name, source }
    }
}

/// An error that can name itself for the errors metric.
pub trait MetricLabel {
    /// One of the labels [`MetricLabel::metric_label`] gives, exported at 0 from the start:
    /// the alert sums errors by controller, and must read 0 rather than no data.
    const FIRST: &'static str;

    /// A short, stable label.
    fn metric_label(&self) -> &'static str;
}

/// Runs `workers` workers over `queue` once `caches` have synced and this replica leads: each
/// key is reconciled, timed, and on error logged, counted and retried with backoff.
#[allow(clippy::too_many_arguments)] // one call per controller, each argument named there
pub(crate) fn spawn_workers<K, E, F, Fut>(
    name: &'static str,
    queue: WorkQueue<K>,
    caches: Caches,
    leadership: &Leadership,
    workers: usize,
    metrics: ControllerMetrics,
    shutdown: CancellationToken,
    reconcile: F,
) -> Vec<JoinHandle<()>>
where
    K: Clone + Eq + Hash + Send + Sync + std::fmt::Debug + 'static,
    E: std::error::Error + MetricLabel + Send + 'static,
    F: Fn(K) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    (0..workers.max(1))
        .map(|_| {
            let (queue, caches, leadership, metrics, shutdown, reconcile) = (
                queue.clone(),
                caches.clone(),
                leadership.clone(),
                metrics.clone(),
                shutdown.clone(),
                reconcile.clone(),
            );
            tokio::spawn(async move {
                // Decisions on a half-listed cache would be wrong (a missing PodGroup looks
                // like one to create): wait for every cache first, and for the Lease.
                if !wait_to_run(&caches, &leadership, &shutdown).await {
                    return;
                }
                while let Some(key) = queue.next().await {
                    let start = Instant::now();
                    let result = tokio::select! {
                        () = shutdown.cancelled() => { queue.done(&key); return; }
                        r = reconcile(key.clone()) => r,
                    };
                    metrics
                        .reconcile
                        .with_label_values(&[name])
                        .observe(start.elapsed().as_secs_f64());
                    match result {
                        Ok(action) => {
                            queue.forget(&key);
                            if let Action::RequeueAfter(d) = action {
                                queue.add_after(key.clone(), d);
                            }
                        }
                        Err(e) => {
                            metrics
                                .errors
                                .with_label_values(&[name, e.metric_label()])
                                .inc();
                            let delay = queue.add_rate_limited(key.clone());
                            tracing::warn!(controller = name, ?key, error = %crate::report::report(&e), retry_in = ?delay, "reconcile failed");
                        }
                    }
                    queue.done(&key);
                }
            })
        })
        .collect()
}

/// Waits until every cache has listed and this replica leads; `false` if shut down (or
/// leadership ended) first. Controllers' workers start here, so only the leader writes.
pub async fn wait_to_run(
    caches: &Caches,
    leadership: &Leadership,
    shutdown: &CancellationToken,
) -> bool {
    if !wait_for_caches(caches, shutdown).await {
        return false;
    }
    tokio::select! {
        () = shutdown.cancelled() => false,
        elected = leadership.wait_elected() => elected && !shutdown.is_cancelled(),
    }
}

/// Waits until every cache has listed; `false` if shut down first.
pub async fn wait_for_caches(caches: &Caches, shutdown: &CancellationToken) -> bool {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return false,
            r = caches.wait_synced(Duration::from_secs(30)) => if r.is_ok() { return true },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    fn conflict() -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code: 409,
            message: "the object has been modified".into(),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn a_failed_call_reads_the_same_in_every_controller() {
        let op = || KubeOp::new("patch-status", "q1", conflict());
        let errors: [(Box<dyn std::error::Error>, &str); 3] = [
            (
                Box::new(queue::QueueError::from(op())),
                queue::QueueError::from(op()).metric_label(),
            ),
            (
                Box::new(podgroup::PodGroupError::from(op())),
                podgroup::PodGroupError::from(op()).metric_label(),
            ),
            (
                Box::new(job::JobError::from(op())),
                job::JobError::from(op()).metric_label(),
            ),
        ];
        for (e, label) in errors {
            assert!(e.to_string().starts_with("patch-status q1: "), "{e}");
            assert_eq!(label, "patch-status");
            let source = e.source().map(ToString::to_string);
            assert_eq!(source, op().source().map(ToString::to_string));
            assert_eq!(
                crate::cluster::status_code(&op().source),
                Some(409),
                "the status stays readable"
            );
        }
    }
}
