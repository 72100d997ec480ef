//! The scheduler as a background task: keeps the [`ClusterIndex`] current from the shared
//! watch caches' events, runs a session every `--schedule-period` and on demand (a new pending
//! pod, a new gang, freed capacity — debounced so a burst of events costs one session),
//! publishes the plan for the extender, and applies the outcome at the edge: one patch per
//! PodGroup or Queue whose status changed, Events only when their message changes.
//!
//! A periodic tick with nothing changed since the last session is skipped: a session is a pure
//! function of the snapshot, so it would decide the same again.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{EvictParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::config::{self, SchedulerConf};
use super::index::ClusterIndex;
use super::metrics::SchedulerMetrics;
use super::outcome::{Outcome, Plan, QueueFigures, Verdict, run_session};
use super::pending::{Batch, Pending};
use crate::api::{PodGroup, Queue};
use crate::cluster::events::{EventRecorder, EventType, object_ref};
use crate::cluster::{CacheFeeds, Relist, status_code};
use crate::sync::{self, lock};

/// How long a placement made by a session counts against its node without kube-scheduler
/// binding the pod, from when the pod is handed to kube-scheduler (its plan gate removed, or
/// at once for a pod without one). Longer than kube-scheduler's largest retry backoff (10 s)
/// plus its extender timeouts, so a slow bind is not raced by a re-plan.
pub const DEFAULT_ASSUME_TTL: Duration = Duration::from_secs(30);

/// How long to wait after the first on-demand trigger so a burst of events costs one session.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(20);

/// At most this many status writes in flight at once.
const WRITE_CONCURRENCY: usize = 16;

/// At most this many PodGroup statuses are written in one batch, so a phase change decided
/// while a batch is written waits for that batch only (see `Pending::take_statuses`).
const STATUS_BATCH: usize = 4 * WRITE_CONCURRENCY;

/// After a session the loop rests this many times as long as the session took. Sessions cost
/// O(cluster) each, so in a burst they are cheaper in fewer, larger batches: with 1 (rest as
/// long as it ran) the 1,000-job bench ran 291 sessions and tephra used 25–28 ms of CPU per
/// job; with 2, 170 sessions and 19.4 ms; with 3, 130 sessions and no further gain
/// (`benches/README.md`, `jobs`).
const REST_PER_SESSION: u32 = 2;

/// At most this many Events recorded at once (see `write`).
const EVENT_CONCURRENCY: usize = 1;

/// Settings of the runner.
#[derive(Clone, Debug)]
pub struct SchedulerOptions {
    /// Scheduler names whose pods are scheduled.
    pub scheduler_names: Vec<String>,
    /// `--schedule-period`.
    pub period: Duration,
    /// `--config`, reloaded when it changes.
    pub config_path: Option<PathBuf>,
    /// `--strict-config`: a reloaded configuration naming plugins tephra does not run is
    /// refused like a bad one (the one in force stays).
    pub strict_config: bool,
    /// Time-to-live of assumed placements.
    pub assume_ttl: Duration,
    /// Debounce of on-demand sessions.
    pub debounce: Duration,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            scheduler_names: vec![crate::api::keys::DEFAULT_SCHEDULER_NAME.into()],
            period: Duration::from_secs(1),
            config_path: None,
            strict_config: false,
            assume_ttl: DEFAULT_ASSUME_TTL,
            debounce: DEFAULT_DEBOUNCE,
        }
    }
}

/// What the file watcher last saw of `--config`.
#[derive(Debug, Default)]
struct ConfigFile {
    modified: Option<SystemTime>,
    len: u64,
}

struct Inner {
    options: SchedulerOptions,
    index: Mutex<ClusterIndex>,
    plan: RwLock<Arc<Plan>>,
    sessions: watch::Sender<u64>,
    trigger: Notify,
    conf: RwLock<Arc<SchedulerConf>>,
    config_file: Mutex<ConfigFile>,
    metrics: SchedulerMetrics,
    ready_gangs: Mutex<HashSet<String>>,
    last_events: Mutex<HashMap<(String, String), String>>,
    retry: std::sync::atomic::AtomicBool,
    /// The last session's [`Outcome::wake_at_ms`] (`i64::MAX` for none): a periodic tick at or
    /// after it runs a session even when nothing changed.
    wake_at_ms: std::sync::atomic::AtomicI64,
    /// Writes decided by sessions, waiting for the writer task.
    pending: Mutex<Pending>,
    /// Wakes the status writer task.
    wrote: Notify,
    /// Wakes the Event writer task.
    events_wrote: Notify,
    /// A session is awaited by a caller (a filter): start it without the debounce.
    urgent: std::sync::atomic::AtomicBool,
    /// The last session's queue figures, for the web view.
    queue_figures: RwLock<Option<Arc<QueueFigures>>>,
}

/// A handle on the scheduler; cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler with `conf` (already checked) and its series in `registry`.
    pub fn new(
        options: SchedulerOptions,
        conf: SchedulerConf,
        registry: &prometheus::Registry,
    ) -> Result<Self, prometheus::Error> {
        let metrics = SchedulerMetrics::new(registry)?;
        metrics.show_ignored(&conf.ignored_plugins());
        let mut file = ConfigFile::default();
        if let Some(p) = &options.config_path
            && let Ok(m) = std::fs::metadata(p)
        {
            file.modified = m.modified().ok();
            file.len = m.len();
        }
        Ok(Self {
            inner: Arc::new(Inner {
                index: Mutex::new({
                    let mut idx = ClusterIndex::new(options.scheduler_names.clone());
                    idx.set_grow_delay(options.period);
                    idx
                }),
                options,
                plan: RwLock::new(Arc::new(Plan::default())),
                sessions: watch::Sender::new(0),
                trigger: Notify::new(),
                conf: RwLock::new(Arc::new(conf)),
                config_file: Mutex::new(file),
                metrics,
                ready_gangs: Mutex::new(HashSet::new()),
                last_events: Mutex::new(HashMap::new()),
                retry: std::sync::atomic::AtomicBool::new(false),
                wake_at_ms: std::sync::atomic::AtomicI64::new(i64::MAX),
                pending: Mutex::new(Pending::default()),
                wrote: Notify::new(),
                events_wrote: Notify::new(),
                urgent: std::sync::atomic::AtomicBool::new(false),
                queue_figures: RwLock::new(None),
            }),
        })
    }

    /// Feeds the index from the shared caches' watch events and asks for a session when
    /// something worth scheduling for changed.
    pub fn subscribe(&self, feeds: &mut CacheFeeds) {
        macro_rules! feed {
            ($kind:ident, $stage:ident) => {{
                let inner = self.inner.clone();
                let relist = Mutex::new(Relist::default());
                feeds.$kind(Arc::new(move |ev| {
                    let wake = {
                        // The event is worked out before the index is locked: every filter
                        // and session waits for that lock, and a burst brings tens of
                        // thousands of pod events.
                        let mut relist = lock(&relist);
                        let staged = relist.$stage::<_, ClusterIndex>(ev);
                        let mut idx = lock(&inner.index);
                        staged.apply_to(&mut *idx);
                        idx.peek_changes().any()
                    };
                    if wake {
                        inner.trigger.notify_one();
                    }
                }));
            }};
        }
        feed!(pods, stage);
        feed!(nodes, stage);
        feed!(podgroups, stage_decoded);
        feed!(queues, stage_decoded);
        feed!(priority_classes, stage);
        feed!(hypernodes, stage_decoded);
        feed!(resource_quotas, stage);
        feed!(pod_disruption_budgets, stage);
    }

    /// The latest plan.
    pub fn plan(&self) -> Arc<Plan> {
        sync::read(&self.inner.plan).clone()
    }

    /// Number of sessions run so far.
    pub fn session_count(&self) -> u64 {
        *self.inner.sessions.borrow()
    }

    /// Asks for a session soon.
    pub fn request(&self) {
        self.inner.trigger.notify_one();
    }

    /// Asks for a session now, for a caller that waits for it (kube-scheduler's filter holds
    /// its one scheduling cycle meanwhile): the debounce, which gathers a burst of watch
    /// events into one session, is skipped.
    pub fn request_now(&self) {
        self.inner
            .urgent
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.inner.trigger.notify_one();
    }

    /// Waits until a session after `after` has finished, at most `timeout`; `false` on timeout.
    pub async fn wait_session_after(&self, after: u64, timeout: Duration) -> bool {
        let mut rx = self.inner.sessions.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n > after))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The index, locked. Keep the guard short: watch events wait for it.
    pub fn index(&self) -> MutexGuard<'_, ClusterIndex> {
        lock(&self.inner.index)
    }

    /// The series.
    pub fn metrics(&self) -> &SchedulerMetrics {
        &self.inner.metrics
    }

    /// The configuration in force.
    pub fn conf(&self) -> Arc<SchedulerConf> {
        sync::read(&self.inner.conf).clone()
    }

    /// Re-reads `--config` when its file changed; a bad new file keeps the old configuration.
    pub fn reload_config_if_changed(&self) {
        let Some(path) = &self.inner.options.config_path else {
            return;
        };
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        {
            let mut seen = lock(&self.inner.config_file);
            let modified = meta.modified().ok();
            if seen.modified == modified && seen.len == meta.len() {
                return;
            }
            seen.modified = modified;
            seen.len = meta.len();
        }
        let strict = self.inner.options.strict_config;
        let loaded = config::load(path).and_then(|conf| {
            if strict {
                config::require_all_run(&conf, &path.display().to_string())?;
            }
            Ok(conf)
        });
        match loaded {
            Ok(conf) => {
                tracing::info!(file = %path.display(), actions = %conf.actions, "scheduler configuration reloaded");
                let ignored = conf.ignored_plugins();
                if !ignored.is_empty() {
                    tracing::warn!(plugins = ?ignored, "scheduler configuration names Volcano plugins tephra does not run; they are left out");
                }
                self.inner.metrics.show_ignored(&ignored);
                *sync::write(&self.inner.conf) = Arc::new(conf);
                self.inner
                    .metrics
                    .config_reloads
                    .with_label_values(&["ok"])
                    .inc();
                self.request();
            }
            Err(e) => {
                tracing::warn!(error = %e, "scheduler configuration not reloaded; the previous one stays in force");
                self.inner
                    .metrics
                    .config_reloads
                    .with_label_values(&["error"])
                    .inc();
            }
        }
    }

    /// One session, decided and published (plan, assumed placements, metrics), without writing
    /// to the API. Returns what was decided.
    pub fn run_once(&self, trigger: &str) -> Outcome {
        let start = Instant::now();
        let now = Instant::now();
        let (expired, source) = self.index().begin_session(now);
        self.inner.metrics.placements_expired.inc_by(expired as u64);
        // The copy is made with the index unlocked: the extender's filter and the watches
        // need the index while it is made.
        let snapshot = source.build();
        let conf = self.conf();
        let id = format!("{:x}", rand_id());
        let outcome = run_session(
            snapshot,
            &conf,
            &id,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ),
        );
        let mut grow_wake = i64::MAX;
        {
            let mut idx = self.index();
            // What the watches brought while the session ran (a pod bound or started, a new
            // pending pod) is not in this outcome: it stays due for the next session.
            let during = idx.take_changes();
            for (uid, p) in &outcome.plan.placements {
                idx.assume(uid, &p.node, self.inner.options.assume_ttl, now);
            }
            for e in &outcome.evictions {
                idx.assume_evicted(&e.uid, self.inner.options.assume_ttl, now);
            }
            idx.decided_phases(
                outcome.podgroups.iter().filter_map(|u| {
                    let phase = u.status.phase.as_ref()?;
                    Some((u.namespace.as_str(), u.name.as_str(), u.uid.as_str(), phase))
                }),
                now + super::pending::WRITTEN_TTL,
            );
            // Capacity and pods the plan now holds are accounted; do not wake for them.
            idx.take_changes();
            idx.restore_changes(during);
            let mut ready = lock(&self.inner.ready_gangs);
            let now_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
            let now_s = now_ms / 1000;
            for (job, v) in &outcome.plan.gangs {
                if *v == Verdict::Ready
                    && let Some(from) = idx.gang_ready(job, now_ms)
                {
                    grow_wake = grow_wake.min(from);
                }
                if *v == Verdict::Ready
                    && ready.insert(job.clone())
                    && let Some(pg) = idx.podgroup(job)
                    && let Some(t) = pg.metadata.creation_timestamp.as_ref()
                {
                    self.inner
                        .metrics
                        .gang_wait
                        .observe((now_s - t.0.as_second()).max(0) as f64);
                }
            }
            ready.retain(|j| outcome.plan.gangs.contains_key(j));
        }
        *sync::write(&self.inner.plan) = Arc::new(outcome.plan.clone());
        self.inner.wake_at_ms.store(
            outcome.wake_at_ms.unwrap_or(i64::MAX).min(grow_wake),
            std::sync::atomic::Ordering::Relaxed,
        );
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        self.inner
            .metrics
            .observe(ms, &outcome.figures, outcome.plan.placements.len());
        self.inner
            .metrics
            .sessions
            .with_label_values(&[trigger])
            .inc();
        self.inner.metrics.last_session.set(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        );
        *sync::write(&self.inner.queue_figures) = Some(Arc::new(QueueFigures {
            at_ms: k8s_openapi::jiff::Timestamp::now().as_millisecond(),
            queues: outcome.figures.queues.clone(),
        }));
        self.inner.sessions.send_modify(|n| *n += 1);
        tracing::debug!(
            session = %id,
            ms = format!("{ms:.1}"),
            placed = outcome.plan.placements.len(),
            podgroups = outcome.podgroups.len(),
            phases = %outcome
                .podgroups
                .iter()
                .map(|u| format!("{}/{}:{}", u.namespace, u.name, u.status.phase.as_ref().map_or("", |p| p.as_str())))
                .collect::<Vec<_>>()
                .join(","),
            "session"
        );
        outcome
    }

    /// The last session's deserved and allocated resources per queue, and when it ran; `None`
    /// until this replica runs a session (only the leader does).
    pub fn queue_figures(&self) -> Option<Arc<QueueFigures>> {
        sync::read(&self.inner.queue_figures).clone()
    }

    /// Hands a session's writes to the writer task ([`Scheduler::spawn`] starts it), which
    /// applies them with [`Scheduler::write`] while the next session runs.
    pub fn hand_over(&self, outcome: &Outcome) {
        let dropped = {
            let mut p = lock(&self.inner.pending);
            let before = p.dropped_events;
            p.add(outcome, Instant::now());
            p.dropped_events - before
        };
        if dropped > 0 {
            tracing::warn!(
                dropped,
                "scheduler Events dropped: the API is not keeping up"
            );
        }
        self.inner.wrote.notify_one();
        self.inner.events_wrote.notify_one();
    }

    /// The writer tasks: PodGroup and Queue statuses and evictions in one, Events in the
    /// other, so Events never hold back a PodGroup's new phase (the Job controller creates
    /// a job's pods once its PodGroup leaves Pending). One task per kind, so the writes of one
    /// object keep their order.
    ///
    /// A write in flight when `shutdown` fires is abandoned, and the writers' handles let the
    /// session's own handle end only once they have: whoever awaits it may then close the API
    /// the writes went to.
    fn spawn_writers(
        &self,
        client: &Client,
        recorder: &EventRecorder,
        shutdown: &CancellationToken,
    ) -> [tokio::task::JoinHandle<()>; 2] {
        [false, true].map(|events| {
            let me = self.clone();
            let (client, recorder, shutdown) = (client.clone(), recorder.clone(), shutdown.clone());
            tokio::spawn(async move {
                let wake = if events {
                    &me.inner.events_wrote
                } else {
                    &me.inner.wrote
                };
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = wake.notified() => {}
                    }
                    let batch = {
                        let mut p = lock(&me.inner.pending);
                        if events {
                            p.take_events()
                        } else {
                            p.take_statuses(STATUS_BATCH)
                        }
                    };
                    if !batch.is_empty() {
                        tokio::select! {
                            () = shutdown.cancelled() => break,
                            () = me.write(&client, &recorder, &batch) => {}
                        }
                    }
                    if !events && lock(&me.inner.pending).has_statuses() {
                        // The rest of a bounded batch: go on without waiting for a session.
                        wake.notify_one();
                    }
                }
                // Unwritten decisions are dropped on shutdown: a replica that stopped leading
                // must not write, and the next leader's first session decides them again.
            })
        })
    }

    /// Applies a batch of writes: PodGroup status (the object itself: Volcano's PodGroup
    /// has no status subresource), Queue `status.allocated`, Events, evictions.
    pub async fn write(&self, client: &Client, recorder: &EventRecorder, outcome: &Batch) {
        let m = &self.inner.metrics;
        let mut failed = false;
        let pg_writes: Vec<_> = outcome
            .podgroups
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let api: Api<PodGroup> = Api::namespaced(client.clone(), &u.namespace);
                let patch = json!({ "status": u.status });
                let name = u.name.clone();
                async move {
                    let r = api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                    (i, r.map(|_| ()))
                }
            })
            .collect();
        let results: Vec<_> = futures::stream::iter(pg_writes)
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        {
            let now = Instant::now();
            let mut p = lock(&self.inner.pending);
            p.expire(now);
            for (i, r) in &results {
                let u = &outcome.podgroups[*i];
                match r {
                    Ok(()) => p.written(u, now),
                    Err(_) => p.forget(&u.namespace, &u.name),
                }
            }
        }
        for (i, r) in results {
            let u = &outcome.podgroups[i];
            let name = format!("{}/{}", u.namespace, u.name);
            match r {
                Ok(()) => m.status_writes.with_label_values(&["podgroup", "ok"]).inc(),
                // A PodGroup deleted meanwhile needs no status.
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => {
                    failed = true;
                    m.status_writes
                        .with_label_values(&["podgroup", "error"])
                        .inc();
                    tracing::warn!(podgroup = %name, error = %crate::report::report(&e), "writing PodGroup status failed; retrying next session");
                }
            }
        }
        for u in &outcome.queues {
            let api: Api<Queue> = Api::all(client.clone());
            // Resources that went to zero are removed explicitly (a merge patch keeps keys it
            // does not mention).
            let mut allocated = serde_json::Map::new();
            let old = self.index().queue_allocated(&u.name).unwrap_or_default();
            for k in old.keys() {
                allocated.insert(k.clone(), serde_json::Value::Null);
            }
            for (k, v) in &u.allocated {
                allocated.insert(k.clone(), json!(v.0));
            }
            let patch = json!({ "status": { "allocated": allocated } });
            match api
                .patch_status(&u.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => m.status_writes.with_label_values(&["queue", "ok"]).inc(),
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => {
                    failed = true;
                    m.status_writes.with_label_values(&["queue", "error"]).inc();
                    tracing::warn!(queue = %u.name, error = %crate::report::report(&e), "writing Queue status failed; retrying next session");
                }
            }
        }
        // The batch holds one Event per PodGroup, type and reason (see `pending`), so even
        // recorded concurrently no two writes to one Event would race; one at a time measured
        // better, as Events then do not compete with the pod creates of a burst.
        let events: Vec<_> = outcome
            .events
            .iter()
            .filter(|ev| {
                // Volcano uses the reason `Unschedulable` for both the Normal (enqueue) and the
                // Warning (gang) event: the type is part of what makes an event the same.
                let key = (
                    format!("{}/{}", ev.namespace, ev.name),
                    format!("{}/{}", ev.type_, ev.reason),
                );
                let mut last = lock(&self.inner.last_events);
                if last.get(&key) == Some(&ev.message) {
                    return false;
                }
                last.insert(key, ev.message.clone());
                true
            })
            .map(|ev| async move {
                let obj = object_ref(
                    "scheduling.volcano.sh/v1beta1",
                    "PodGroup",
                    Some(&ev.namespace),
                    &ev.name,
                    Some(&ev.uid),
                );
                let t = if ev.type_ == "Warning" {
                    EventType::Warning
                } else {
                    EventType::Normal
                };
                (ev, recorder.record(&obj, t, &ev.reason, &ev.message).await)
            })
            .collect();
        let recorded: Vec<_> = futures::stream::iter(events)
            .buffer_unordered(EVENT_CONCURRENCY)
            .collect()
            .await;
        for (ev, r) in recorded {
            match r {
                Ok(()) => m.status_writes.with_label_values(&["event", "ok"]).inc(),
                Err(e) => {
                    m.status_writes.with_label_values(&["event", "error"]).inc();
                    tracing::debug!(podgroup = %format!("{}/{}", ev.namespace, ev.name), error = %crate::report::report(&e), "recording an Event failed");
                }
            }
        }
        {
            // Forget events of gangs that are gone, so the map does not grow for ever.
            let plan = self.plan();
            lock(&self.inner.last_events).retain(|(job, _), _| plan.gangs.contains_key(job));
        }
        for e in &outcome.evictions {
            let api: Api<Pod> = Api::namespaced(client.clone(), &e.namespace);
            match api.evict(&e.name, &EvictParams::default()).await {
                Ok(_) => {
                    tracing::info!(pod = %format!("{}/{}", e.namespace, e.name), reason = %e.reason, "evicted")
                }
                Err(err) => {
                    tracing::warn!(pod = %format!("{}/{}", e.namespace, e.name), error = %crate::report::report(&err), "eviction failed")
                }
            }
        }
        // Only status writes are retried by a session; an Event-only batch leaves the flag to
        // the status writer.
        if !outcome.podgroups.is_empty() || !outcome.queues.is_empty() {
            self.inner
                .retry
                .store(failed, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Runs sessions until `shutdown`: every period when something changed, and on demand.
    /// The handle ends once the sessions and their writers have stopped.
    pub fn spawn(self, client: Client, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        let recorder = EventRecorder::new(client.clone(), "tephra-scheduler");
        // Sessions do not wait for the API (see `pending`).
        let writers = self.spawn_writers(&client, &recorder, &shutdown);
        tokio::spawn(async move {
            let period = self.inner.options.period.max(Duration::from_millis(10));
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Sessions no longer wait for their writes, so in a burst of watch events they could
            // run back to back and take a core from the API and the controllers they plan for.
            // After a session the loop rests [`REST_PER_SESSION`] times as long as the session
            // took: at most a third of the time goes to sessions, and a waiting filter is
            // answered within about three.
            let mut rested = tokio::time::Instant::now();
            loop {
                let trigger = tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = tick.tick() => "period",
                    () = self.inner.trigger.notified() => {
                        if !self.inner.urgent.swap(false, std::sync::atomic::Ordering::Relaxed) {
                            tokio::time::sleep(self.inner.options.debounce).await;
                        }
                        "demand"
                    }
                };
                self.reload_config_if_changed();
                if trigger == "period" && !self.worth_a_session() {
                    continue;
                }
                tokio::time::sleep_until(rested).await;
                let started = tokio::time::Instant::now();
                let me = self.clone();
                let outcome = match tokio::task::spawn_blocking(move || me.run_once(trigger)).await
                {
                    Ok(o) => o,
                    Err(e) => {
                        tracing::error!(error = %e, "scheduling session failed");
                        self.inner
                            .metrics
                            .attempts
                            .with_label_values(&["error"])
                            .inc();
                        continue;
                    }
                };
                self.hand_over(&outcome);
                let now = tokio::time::Instant::now();
                rested = now + (now - started) * REST_PER_SESSION;
            }
            for writer in writers {
                let _ = writer.await;
            }
        })
    }

    fn worth_a_session(&self) -> bool {
        if self.inner.retry.load(std::sync::atomic::Ordering::Relaxed) {
            return true;
        }
        // A time-dependent plugin decides otherwise from then on (an sla waiting time ran out).
        if k8s_openapi::jiff::Timestamp::now().as_millisecond()
            >= self
                .inner
                .wake_at_ms
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return true;
        }
        let idx = self.index();
        idx.peek_changes().any() || idx.has_expired_assumed(Instant::now())
    }
}

/// A session id: unique enough to tell sessions apart in conditions.
fn rand_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_config_file_is_reloaded_and_a_bad_one_keeps_the_old() {
        let dir = std::env::temp_dir().join(format!("tephra-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("conf.yaml");
        std::fs::write(&path, config::DEFAULT_CONFIG).unwrap();
        let registry = prometheus::Registry::new();
        let s = Scheduler::new(
            SchedulerOptions {
                config_path: Some(path.clone()),
                ..SchedulerOptions::default()
            },
            config::load(&path).unwrap(),
            &registry,
        )
        .unwrap();
        // Unchanged file: nothing happens.
        s.reload_config_if_changed();
        assert_eq!(
            s.metrics().config_reloads.with_label_values(&["ok"]).get(),
            0
        );
        // A bad new file: refused, the old configuration stays.
        std::fs::write(&path, "actions: \"enqueue, alocate\"\n").unwrap();
        s.reload_config_if_changed();
        assert_eq!(
            s.metrics()
                .config_reloads
                .with_label_values(&["error"])
                .get(),
            1
        );
        assert_eq!(s.conf().action_names(), ["enqueue", "allocate", "backfill"]);
        // A good new file: in force.
        std::fs::write(
            &path,
            "actions: \"allocate\"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n",
        )
        .unwrap();
        s.reload_config_if_changed();
        assert_eq!(
            s.metrics().config_reloads.with_label_values(&["ok"]).get(),
            1
        );
        assert_eq!(s.conf().action_names(), ["allocate"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The gauge names the plugins left out of the configuration in force; with
    /// `strict_config` a new file naming one is refused like a bad file.
    #[test]
    fn plugins_not_run_show_in_the_gauge_and_strict_refuses_them_at_reload() {
        const WITH_TDM: &str =
            "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n  - name: tdm\n";
        for strict in [false, true] {
            let dir = std::env::temp_dir().join(format!(
                "tephra-reload-strict-{strict}-{}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("conf.yaml");
            std::fs::write(&path, config::DEFAULT_CONFIG).unwrap();
            let registry = prometheus::Registry::new();
            let s = Scheduler::new(
                SchedulerOptions {
                    config_path: Some(path.clone()),
                    strict_config: strict,
                    ..SchedulerOptions::default()
                },
                config::load(&path).unwrap(),
                &registry,
            )
            .unwrap();
            let ignored = |p: &str| s.metrics().plugin_ignored.with_label_values(&[p]).get();
            assert_eq!((ignored("tdm"), ignored("usage")), (0, 0));
            std::fs::write(&path, WITH_TDM).unwrap();
            s.reload_config_if_changed();
            let result = if strict { "error" } else { "ok" };
            assert_eq!(
                s.metrics()
                    .config_reloads
                    .with_label_values(&[result])
                    .get(),
                1,
                "strict {strict}"
            );
            if strict {
                assert_eq!(s.conf().action_names(), ["enqueue", "allocate", "backfill"]);
                assert_eq!(ignored("tdm"), 0);
            } else {
                assert_eq!(s.conf().action_names(), ["enqueue", "allocate"]);
                assert_eq!((ignored("tdm"), ignored("usage")), (1, 0));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
