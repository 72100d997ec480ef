//! The Job controller: drives every `batch.volcano.sh` Job through its life as Volcano's
//! does (`pkg/controllers/job/`), with the departures listed in the README.
//!
//! ```text
//!   watch events (jobs, pods, PodGroups, Commands) ──▶ Request ──▶ worker FNV-32(ns/name) % N
//!        ▼
//!   policy::apply_policies(job, request) ──▶ (action, delay) ── delay ──▶ delay::DelayedActions
//!        ▼
//!   state::step(phase, action) ──▶ Step (sync or kill, then a status rule)
//!        ▼
//!   the edge: build:: (pods, PodGroup, PVCs), plugins:: (resources, pod edits) ──▶ the API
//! ```
//!
//! Everything but the edge is pure code over plain objects (the `tephra-controllers` crate),
//! tested without a cluster.

mod coalesce;
mod commands;
mod context;
pub mod delay;
mod execute;
pub mod index;
pub mod metrics;
mod writes;

// The decisions are the tephra-controllers crate's; the edge names them as its own modules.
pub use tephra_controllers::job::{build, plugins, policy, request, state, status, sync};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::core::DeserializeGuard;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use prometheus::Registry;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::relist::{RelistHold, queue_keys};
use super::workqueue::WorkQueue;
use super::{ControllerMetrics, KubeOp, MetricLabel};
use crate::api::Job;
use crate::api::batch::{Action as JobAction, Event};
use crate::cluster::events::{EventRecorder, EventType};
use crate::cluster::{CacheFeeds, Caches, Relist};
use crate::leader::Leadership;
use crate::sync::lock;
use context::{Context, Router};
pub use context::{fnv32, worker_of};
use delay::DelayedActions;
use index::JobPodIndex;
use metrics::JobMetrics;
use request::Request;

/// Name of this controller (logs, metrics, Event source; Volcano's is `vc-controller-manager`).
pub const NAME: &str = "job-controller";

/// Longest wait between retries of a job waiting for a missing queue or PVC.
const MISSING_RETRY_CAP: Duration = Duration::from_secs(30);

/// Pod deletions that failed are retried this many times (Volcano's error-task queue).
const DELETE_RETRIES: u32 = 10;

/// How the Job controller runs (from `tephra serve`'s flags).
#[derive(Clone, Debug)]
pub struct JobConfig {
    /// `--job-workers`: a job is always handled by worker FNV-32(`namespace/name`) mod N.
    pub workers: usize,
    /// `--max-requeue`: a job whose processing failed this many times in a row is
    /// terminated; negative never gives up. Missing user objects (queue, PVC) never count.
    pub max_requeue: i32,
    /// With `--gate-until-placed`: the scheduler names this service serves. A pod built for
    /// one of them is created behind the plan gate ([`build::gate_until_placed`]), which the
    /// extender removes once a session places it. Empty: pods are created ungated.
    pub plan_gate_schedulers: Vec<String>,
    /// The native engine runs: pods beyond their gang's minimum are marked elastic
    /// ([`build::gang_core`]).
    pub mark_elastic: bool,
}

impl Default for JobConfig {
    fn default() -> Self {
        Self {
            workers: 8,
            max_requeue: 15,
            plan_gate_schedulers: Vec::new(),
            mark_elastic: false,
        }
    }
}

/// Why processing a job request failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] KubeOp),
    /// The job changed between reading and writing it.
    #[error("job {0} changed while it was processed")]
    Conflict(String),
    /// An object the user must provide does not exist (yet).
    #[error("{kind} {name} does not exist; the job waits for it")]
    Missing {
        /// Its kind.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// A job plugin refused.
    #[error("job plugin: {0}")]
    Plugin(#[source] plugins::PluginError),
    /// Writing the PodGroup failed.
    #[error("PodGroup {0}: {1}")]
    PodGroup(String, #[source] kube::Error),
    /// Some pods could not be created or deleted.
    #[error("failed to {verb} {failed} pod(s): {first}")]
    Pods {
        /// `create`, `delete` or `kill`.
        verb: &'static str,
        /// How many.
        failed: usize,
        /// The first error.
        first: String,
    },
    /// A bug of ours.
    #[error("internal error: {0}")]
    Internal(String),
}

impl MetricLabel for JobError {
    const FIRST: &'static str = "conflict";

    fn metric_label(&self) -> &'static str {
        match self {
            JobError::Kube(e) => e.op,
            JobError::Conflict(_) => "conflict",
            JobError::Missing { .. } => "missing-object",
            JobError::Plugin(_) => "plugin",
            JobError::PodGroup(..) => "podgroup",
            JobError::Pods { .. } => "pods",
            JobError::Internal(_) => "internal",
        }
    }
}

/// The running Job controller; [`JobController::stop`] stops it as one unit (what leader
/// election switches on and off).
#[derive(Debug)]
pub struct JobController {
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl JobController {
    /// Stops every worker and timer.
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Stops and waits for the workers to finish their current request.
    pub async fn join(self) {
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }

    /// The worker tasks (for the controllers' common handle).
    pub(crate) fn into_parts(self) -> (CancellationToken, Vec<JoinHandle<()>>) {
        (self.shutdown, self.tasks)
    }
}

fn pod_of(ev: &watcher::Event<Pod>) -> Option<&Pod> {
    match ev {
        watcher::Event::Apply(p) | watcher::Event::Delete(p) | watcher::Event::InitApply(p) => {
            Some(p)
        }
        _ => None,
    }
}

/// Registers the Job controller's subscribers on `feeds` (call before `feeds.run`) and starts
/// its workers, which wait for the caches to sync and for this replica to lead.
#[allow(clippy::too_many_arguments)] // one caller (controllers::start), every argument named there
pub fn start(
    client: &Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    config: JobConfig,
    leadership: &Leadership,
    base: &ControllerMetrics,
    registry: &Registry,
    shutdown: &CancellationToken,
) -> Result<JobController, prometheus::Error> {
    let token = shutdown.child_token();
    let metrics = JobMetrics::new(registry)?;
    let router = Router::new(config.workers, &token);
    let ctx = Arc::new(Context {
        client: client.clone(),
        caches: caches.clone(),
        config: config.clone(),
        index: Arc::new(Mutex::new(JobPodIndex::default())),
        inflight: Arc::default(),
        delays: Arc::new(DelayedActions::default()),
        recorder: EventRecorder::new(client.clone(), "vc-controller-manager"),
        metrics,
        base: base.clone(),
        router: router.clone(),
        retry_deletes: WorkQueue::new(token.clone()).with_max_delay(Duration::from_secs(180)),
        shutdown: token.clone(),
        leadership: leadership.clone(),
    });
    subscribe(&ctx, feeds);
    let commands: WorkQueue<(String, String)> = WorkQueue::new(token.clone());
    feeds.commands(queue_keys::<DeserializeGuard<crate::api::Command>, _, _>(
        commands.clone(),
        |ev| match ev {
            watcher::Event::Apply(DeserializeGuard(Ok(c)))
            | watcher::Event::InitApply(DeserializeGuard(Ok(c)))
                if c.targets_job() =>
            {
                Some((c.namespace().unwrap_or_default(), c.name_any()))
            }
            _ => None,
        },
    ));
    let mut tasks = Vec::new();
    for (i, queue) in router.queues().iter().enumerate() {
        tasks.push(tokio::spawn(worker(ctx.clone(), i, queue.clone())));
    }
    {
        let ctx2 = ctx.clone();
        tasks.extend(super::spawn_workers(
            "job-commands",
            commands,
            caches.clone(),
            leadership,
            1,
            base.clone(),
            token.clone(),
            move |key| commands::handle(ctx2.clone(), key),
        ));
    }
    tasks.push(tokio::spawn(retry_deletes(ctx.clone())));
    tracing::info!(
        workers = config.workers,
        max_requeue = config.max_requeue,
        "Job controller started"
    );
    Ok(JobController {
        shutdown: token,
        tasks,
    })
}

/// Maps watch events to requests (Volcano's informer handlers).
fn subscribe(ctx: &Arc<Context>, feeds: &mut CacheFeeds) {
    {
        let ctx = ctx.clone();
        // The previous version of each job, to tell what an update changed.
        let seen: Arc<Mutex<HashMap<(String, String), Job>>> = Arc::default();
        let hold = Mutex::new(RelistHold::default());
        feeds.jobs(Arc::new(move |ev| {
            let mut seen = lock(&seen);
            let mut made = None;
            match ev {
                watcher::Event::Apply(DeserializeGuard(Ok(job)))
                | watcher::Event::InitApply(DeserializeGuard(Ok(job))) => {
                    let key = (job.namespace().unwrap_or_default(), job.name_any());
                    let req = match seen.get(&key) {
                        None => Some(Request::job(&key.0, &key.1, Event::OutOfSync)),
                        Some(old) => policy::job_updated(old, job),
                    };
                    set_phase_gauge(&ctx, seen.get(&key), Some(job));
                    seen.insert(key, job.clone());
                    made = req;
                }
                watcher::Event::Delete(DeserializeGuard(Ok(job))) => {
                    let key = (job.namespace().unwrap_or_default(), job.name_any());
                    set_phase_gauge(&ctx, seen.get(&key), None);
                    seen.remove(&key);
                    let job_key = format!("{}/{}", key.0, key.1);
                    ctx.delays.forget_job(&job_key);
                    ctx.router.coalescer.forget_job(&job_key);
                    ctx.forget_job(&key.0, &key.1);
                    let queue = job.spec.queue().to_string();
                    let _ = ctx.metrics.completed.remove_label_values(&[&key.1, &queue]);
                    let _ = ctx.metrics.failed.remove_label_values(&[&key.1, &queue]);
                }
                _ => {}
            }
            for r in lock(&hold).route(ev, made) {
                ctx.router.add(r);
            }
        }));
    }
    {
        let ctx = ctx.clone();
        let relist = Mutex::new(Relist::default());
        let hold = Mutex::new(RelistHold::default());
        feeds.pods(Arc::new(move |ev| {
            let was_cached = match (ev, pod_of(ev)) {
                (watcher::Event::Delete(_), Some(p)) => {
                    let cached = index::job_of(p).is_some_and(|j| {
                        lock(&ctx.index)
                            .pods_of(&p.namespace().unwrap_or_default(), j)
                            .contains(&p.name_any())
                    });
                    ctx.pod_gone(p);
                    cached
                }
                _ => true,
            };
            {
                let mut relist = lock(&relist);
                let staged = relist.stage::<_, JobPodIndex>(ev);
                staged.apply_to(&mut *lock(&ctx.index));
            }
            let mut made: Vec<Request> = match ev {
                // Pods deleted while the watch was away leave with the relist, unannounced:
                // each job with pods before it or after it is synced at its end.
                watcher::Event::Init | watcher::Event::InitDone => lock(&ctx.index)
                    .jobs()
                    .map(|(ns, job)| Request::job(ns, job, Event::OutOfSync))
                    .collect(),
                _ => Vec::new(),
            };
            let req = match ev {
                watcher::Event::Apply(p) => {
                    let ns = p.namespace().unwrap_or_default();
                    // Pods the watch shows for the first time are "added".
                    let old = ctx.last_pod(&ns, &p.name_any(), p);
                    match old {
                        None => policy::pod_added(p),
                        Some(old) => {
                            let job = index::job_of(p).and_then(|j| ctx.job(&ns, j));
                            let siblings = || {
                                job.as_ref()
                                    .map(|j| ctx.task_pods(j, p))
                                    .unwrap_or_default()
                            };
                            policy::pod_updated(job.as_ref(), &old, p, &siblings)
                        }
                    }
                }
                watcher::Event::InitApply(p) => {
                    let _ = ctx.last_pod(&p.namespace().unwrap_or_default(), &p.name_any(), p);
                    policy::pod_added(p)
                }
                watcher::Event::Delete(p) => {
                    ctx.forget_last_pod(p);
                    policy::pod_deleted(p, was_cached)
                }
                _ => None,
            };
            made.extend(req);
            for r in lock(&hold).route(ev, made) {
                ctx.router.add(r);
            }
        }));
    }
    {
        // A queue deleted under its jobs: each is synced, finds the queue missing and says so
        // (one QueueNotFound Event per streak), instead of waiting silently.
        let ctx = ctx.clone();
        feeds.queues(Arc::new(move |ev| {
            if let watcher::Event::Delete(DeserializeGuard(Ok(q))) = ev {
                let name = q.name_any();
                for job in ctx.caches.jobs().state() {
                    if let Ok(j) = &job.0
                        && j.spec.queue() == name
                    {
                        let ns = j.namespace().unwrap_or_default();
                        ctx.router
                            .add(Request::job(&ns, &j.name_any(), Event::OutOfSync));
                    }
                }
            }
        }));
    }
    {
        let ctx = ctx.clone();
        let seen: Arc<Mutex<HashMap<(String, String), crate::api::PodGroup>>> = Arc::default();
        let hold = Mutex::new(RelistHold::default());
        feeds.podgroups(Arc::new(move |ev| {
            let mut seen = lock(&seen);
            let mut made = None;
            match ev {
                watcher::Event::Apply(DeserializeGuard(Ok(pg)))
                | watcher::Event::InitApply(DeserializeGuard(Ok(pg))) => {
                    let key = (pg.namespace().unwrap_or_default(), pg.name_any());
                    if let Some(old) = seen.get(&key) {
                        made = policy::pod_group_updated(old, pg);
                    }
                    seen.insert(key, pg.clone());
                }
                watcher::Event::Delete(DeserializeGuard(Ok(pg))) => {
                    seen.remove(&(pg.namespace().unwrap_or_default(), pg.name_any()));
                }
                _ => {}
            }
            for r in lock(&hold).route(ev, made) {
                ctx.router.add(r);
            }
        }));
    }
}

fn set_phase_gauge(ctx: &Context, old: Option<&Job>, new: Option<&Job>) {
    // A job the controller has not stamped yet is Pending, as Volcano reads an empty phase.
    let phase = |j: Option<&Job>| {
        j.map(|j| {
            j.phase().map_or_else(
                || crate::api::batch::JobPhase::Pending.to_string(),
                |p| p.to_string(),
            )
        })
    };
    let (o, n) = (phase(old), phase(new));
    if o == n {
        return;
    }
    if let Some(o) = o {
        ctx.metrics.jobs.with_label_values(&[&o]).dec();
    }
    if let Some(n) = n {
        ctx.metrics.jobs.with_label_values(&[&n]).inc();
    }
}

/// One job worker: takes requests from its queue and processes them one at a time, so no two
/// transitions of a job ever race.
async fn worker(ctx: Arc<Context>, i: usize, queue: WorkQueue<Request>) {
    if !super::wait_to_run(&ctx.caches, &ctx.leadership, &ctx.shutdown).await {
        return;
    }
    while let Some(req) = queue.next().await {
        // A request routed here by mistake goes to its own worker (Volcano does the same).
        if worker_of(&req.key(), ctx.router.queues().len()) != i {
            queue.done(&req);
            ctx.router.add(req);
            continue;
        }
        let queued = ctx.router.coalescer.take(&req);
        let start = Instant::now();
        let result = tokio::select! {
            () = ctx.shutdown.cancelled() => { queue.done(&req); return; }
            r = process_fresh(&ctx, &req, queued) => r,
        };
        ctx.base
            .reconcile
            .with_label_values(&[NAME])
            .observe(start.elapsed().as_secs_f64());
        tracing::debug!(
            job = %req.key(), event = %req.event, action = ?req.action,
            pod = req.pod.as_deref().unwrap_or(""), ms = start.elapsed().as_millis(),
            ok = result.is_ok(), "job request handled"
        );
        match result {
            Ok(()) => queue.forget(&req),
            Err(e) => handle_error(&ctx, &queue, &req, e).await,
        }
        queue.done(&req);
    }
}

/// [`execute::process`], retried on fresh data when the job changed underneath.
async fn process_fresh(
    ctx: &Arc<Context>,
    req: &Request,
    queued: Option<coalesce::Ticket>,
) -> Result<(), JobError> {
    let mut attempt = 0;
    loop {
        match execute::process(ctx, req, queued).await {
            Err(JobError::Conflict(_)) if attempt < 3 => {
                attempt += 1;
                ctx.refresh_job(&req.namespace, &req.job).await?;
            }
            r => return r,
        }
    }
}

/// Volcano's `handleJobError`: retry with backoff; past `--max-requeue` failures terminate
/// the job. Missing user objects are retried (capped backoff) without ever counting.
async fn handle_error(ctx: &Arc<Context>, queue: &WorkQueue<Request>, req: &Request, e: JobError) {
    ctx.base
        .errors
        .with_label_values(&[NAME, e.metric_label()])
        .inc();
    let failures = queue.failures(req);
    let counts = !matches!(e, JobError::Missing { .. });
    let give_up =
        counts && ctx.config.max_requeue >= 0 && failures >= ctx.config.max_requeue as u32;
    if let Some(job) = ctx.job(&req.namespace, &req.job) {
        let reason = match &e {
            JobError::Missing {
                kind: "PersistentVolumeClaim",
                ..
            } => Some(crate::api::keys::job_events::PVC_ERROR),
            JobError::Plugin(_) => Some(crate::api::keys::job_events::PLUGIN_ERROR),
            JobError::PodGroup(..) => Some(crate::api::keys::job_events::POD_GROUP_ERROR),
            JobError::Missing { .. } => Some("QueueNotFound"),
            _ => None,
        };
        // One Event per failure streak, not one per retry.
        if let Some(reason) = reason.filter(|_| failures == 0) {
            let msg = crate::report::report(&e).to_string();
            ctx.event(&job, EventType::Warning, reason, &msg).await;
        }
        if give_up {
            tracing::warn!(job = %req.key(), error = %crate::report::report(&e), "retry limit reached, terminating the job");
            let msg = format!(
                "Job failed on action {} for retry limit reached",
                req.action
                    .as_ref()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "SyncJob".into())
            );
            ctx.event(
                &job,
                EventType::Warning,
                crate::api::keys::job_events::EXECUTE_ACTION,
                &msg,
            )
            .await;
            queue.forget(req);
            if let Err(e2) = execute::execute(ctx, job, &JobAction::TerminateJob, req).await {
                tracing::warn!(job = %req.key(), error = %crate::report::report(&e2), "terminating failed");
            }
            return;
        }
    }
    if !counts {
        // Waiting for the user: PVCs are not watched, so the retry is what notices the object
        // once it exists; keep it within 30 s.
        ctx.metrics.requeues.inc();
        let d = queue.add_rate_limited_capped(req.clone(), MISSING_RETRY_CAP);
        tracing::info!(job = %req.key(), error = %crate::report::report(&e), retry_in = ?d, "job waits");
        return;
    }
    ctx.metrics.requeues.inc();
    let d = queue.add_rate_limited(req.clone());
    tracing::warn!(job = %req.key(), error = %crate::report::report(&e), retry_in = ?d, "job request failed");
}

/// Retries failed pod deletions with backoff (5 ms → 180 s), giving up after
/// [`DELETE_RETRIES`]; a pod gone meanwhile is done.
async fn retry_deletes(ctx: Arc<Context>) {
    let queue = ctx.retry_deletes.clone();
    while let Some(key) = queue.next().await {
        let (ns, name) = key.clone();
        let result = match ctx.pod(&ns, &name) {
            None => Ok(()),
            Some(p) if p.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(p) => ctx.delete_pod(&p).await,
        };
        match result {
            Ok(()) => queue.forget(&key),
            Err(e) if queue.failures(&key) < DELETE_RETRIES => {
                let d = queue.add_rate_limited(key.clone());
                tracing::warn!(pod = %format!("{ns}/{name}"), error = %crate::report::report(&e), retry_in = ?d, "pod deletion failed");
            }
            Err(e) => {
                queue.forget(&key);
                tracing::warn!(pod = %format!("{ns}/{name}"), error = %crate::report::report(&e), "pod deletion given up");
            }
        }
        queue.done(&key);
    }
}
