//! The kube-scheduler extender: kube-scheduler (configured with
//! `manifests/scheduler-config.yaml`) asks tephra to filter, score, bind and vet preemption for
//! pods whose `schedulerName` tephra serves, and tephra answers from its gang plan so a gang's
//! pods start all together or not at all.
//!
//! ```text
//!  kube-scheduler ──HTTPS JSON (extender/v1, Go field names)──▶ http.rs (thin axum handlers)
//!      │ POST /scheduler/filter      ─▶ filter.rs      decide(pod, names, index, plan)
//!      │                                   ├─ NeedSession: Scheduler::request + bounded wait
//!      │                                   └─ Replan: scheduler::replan (gang alone, names only)
//!      │ POST /scheduler/prioritize  ─▶ prioritize.rs  planned node 10, others 0
//!      │ POST /scheduler/bind        ─▶ binder.rs      hold until minMember binds, then Binding
//!      │ POST /scheduler/preempt     ─▶ preempt.rs     victims that keep gangs whole
//!      ▼
//!  scheduler::Scheduler: index (pods, nodes, assumed placements) + plan of the last session
//! ```
//! Filter, prioritize and preempt read memory only (no API call while kube-scheduler waits);
//! bind posts the `pods/binding` subresource.

pub mod binder;
pub mod book;
pub mod filter;
mod http;
pub mod metrics;
pub mod pin;
pub mod preempt;
pub mod prioritize;
pub use tephra_api::extender as protocol;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use binder::{BindError, Binder, BinderOptions};
pub use book::{PARKED_GRACE, PARKED_NUDGES, UNGATE_RESEND};
pub use http::{NOT_THE_LEADER, router, router_for_leader};
pub use metrics::ExtenderMetrics;

use crate::scheduler::Scheduler;
use crate::scheduler::replan::{Replanned, replan_gang};
use crate::scheduler::runner::DEFAULT_ASSUME_TTL;
use crate::sync::lock;
use book::Book;
use filter::Decision;
use protocol::{ExtenderArgs, ExtenderFilterResult, FailedNodesMap, NodeList};

/// Default `--bind-hold-timeout`: below kube-scheduler's default extender `httpTimeout` (5 s)
/// and the 4 s the shipped manifest sets, so a held bind is answered before kube-scheduler
/// gives up on it.
pub const DEFAULT_BIND_HOLD_TIMEOUT: Duration = Duration::from_secs(3);

/// Default `--bind-gather-timeout`: how long gang members whose held binds timed out stay
/// placed after their gang's last arrival (the plan's assume TTL, so a gathered placement
/// lasts as long as any other).
pub const DEFAULT_BIND_GATHER_TIMEOUT: Duration = Duration::from_secs(30);

/// Default `--extender-plan-wait`: how long a filter for a pod the plan has not seen waits for
/// an on-demand session, well under kube-scheduler's extender timeout.
pub const DEFAULT_PLAN_WAIT: Duration = Duration::from_secs(2);

/// The annotation written on turned-down gang pods when their gang is placed
/// ([`Extender::spawn_nudger`]).
pub const NUDGE_ANNOTATION: &str = "scheduling.tephra.io/plan";

/// Settings of the extender.
#[derive(Clone, Debug)]
pub struct ExtenderOptions {
    /// `--bind-hold-timeout`.
    pub bind_hold_timeout: Duration,
    /// `--bind-gather-timeout` (zero: placements released at the hold timeout).
    pub bind_gather_timeout: Duration,
    /// `--bind-ahead`: a gang whose placed members reach `minMember` is bound whole once their
    /// plan gates are off or at its first bind request (see [`binder`]).
    pub bind_ahead: bool,
    /// `--extender-plan-wait`.
    pub plan_wait: Duration,
}

impl Default for ExtenderOptions {
    fn default() -> Self {
        Self {
            bind_hold_timeout: DEFAULT_BIND_HOLD_TIMEOUT,
            bind_gather_timeout: DEFAULT_BIND_GATHER_TIMEOUT,
            bind_ahead: true,
            plan_wait: DEFAULT_PLAN_WAIT,
        }
    }
}

/// Errors building the extender.
#[derive(Debug, thiserror::Error)]
pub enum ExtenderError {
    /// Its series could not be registered.
    #[error("registering extender metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// The extender's state: the scheduler handle, the binder, the series.
pub struct Extender {
    scheduler: Scheduler,
    binder: Binder,
    metrics: ExtenderMetrics,
    options: ExtenderOptions,
    /// One re-plan at a time: several members of a gang may ask at once.
    replan_lock: tokio::sync::Mutex<()>,
    /// What the filter was asked and turned down, and what the nudger sent. Taken after the
    /// scheduler's index when both are held.
    book: Mutex<Book>,
    client: kube::Client,
}

impl std::fmt::Debug for Extender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extender")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Extender {
    /// An extender over `scheduler`, binding through `client`.
    pub fn new(
        client: kube::Client,
        scheduler: Scheduler,
        options: ExtenderOptions,
        registry: &prometheus::Registry,
    ) -> Result<Self, ExtenderError> {
        let metrics = ExtenderMetrics::new(registry)?;
        let binder = Binder::new(
            client.clone(),
            scheduler.clone(),
            BinderOptions {
                hold_timeout: options.bind_hold_timeout,
                gather_timeout: options.bind_gather_timeout,
                bind_ahead: options.bind_ahead,
            },
            metrics.clone(),
        );
        Ok(Self {
            scheduler,
            binder,
            metrics,
            options,
            replan_lock: tokio::sync::Mutex::new(()),
            book: Mutex::new(Book::default()),
            client,
        })
    }

    /// The binder.
    pub fn binder(&self) -> &Binder {
        &self.binder
    }

    /// The series.
    pub fn metrics(&self) -> &ExtenderMetrics {
        &self.metrics
    }

    /// Answers a filter request.
    pub async fn filter(&self, args: &ExtenderArgs<'_>) -> ExtenderFilterResult {
        let pod = match args.pod_ref() {
            Ok(p) => p,
            Err(e) => return error_result(format!("Pod: {e}")),
        };
        let uid = pod.metadata.uid.as_str();
        if uid.is_empty() {
            return error_result("Pod has no metadata.uid".into());
        }
        let Some(names) = args.candidate_names() else {
            return error_result("the request has neither NodeNames nor Nodes".into());
        };
        let mut may_wait =
            lock(&self.book).asked(uid, self.scheduler.session_count(), Instant::now());
        let mut replanned = false;
        // Bounded: at most one wait for a session and one re-plan.
        for _ in 0..4 {
            let decision = {
                let plan = self.scheduler.plan();
                // The index before the book, in the order the nudger takes them.
                let idx = self.scheduler.index();
                let book = lock(&self.book);
                // A member may give its placement when kube-scheduler has not asked about it
                // since it was placed and the binder has not taken it (bound ahead).
                let may_give = |job: &str, u: &str| {
                    let fresh = match (book.asked_at(u), idx.assumed_since(u)) {
                        (Some(at), Some(since)) => at < since,
                        _ => true,
                    };
                    fresh && !self.binder.spoken_for(job, u)
                };
                filter::decide(uid, &names, &idx, &plan, may_wait, &may_give)
            };
            match decision {
                Decision::Answer {
                    keep,
                    failed,
                    unresolvable,
                } => {
                    if keep.is_empty() {
                        self.note_rejected(uid, &pod.metadata);
                        tracing::debug!(
                            pod = %format!("{}/{}", pod.metadata.namespace, pod.metadata.name),
                            reason = failed.values().chain(unresolvable.values()).next().map(String::as_str).unwrap_or(""),
                            "filter: no node"
                        );
                    }
                    return answer(args, &names, &keep, failed, unresolvable);
                }
                Decision::NeedSession => {
                    let n = self.scheduler.session_count();
                    self.scheduler.request_now();
                    self.scheduler
                        .wait_session_after(n, self.options.plan_wait)
                        .await;
                    may_wait = false;
                }
                Decision::Transfer { from, node } => {
                    let name = names[node];
                    let mut idx = self.scheduler.index();
                    let job = idx
                        .task(&from)
                        .and_then(|t| t.job.clone())
                        .unwrap_or_default();
                    // Still as decided (the index and the binder are shared): hand it over.
                    if idx.assumed_node(&from) == Some(name) && !self.binder.spoken_for(&job, &from)
                    {
                        idx.forget(&from);
                        idx.assume(uid, name, DEFAULT_ASSUME_TTL, Instant::now());
                        self.metrics.placements_transferred.inc();
                    }
                }
                Decision::Replan { job } if !replanned => {
                    replanned = true;
                    match self.replan(uid, &job, &names).await {
                        Replanned::Placed(_) => {}
                        Replanned::Unfit(reason) => {
                            self.note_rejected(uid, &pod.metadata);
                            return answer(
                                args,
                                &names,
                                &[],
                                fail_all(&names, &reason),
                                FailedNodesMap::new(),
                            );
                        }
                        Replanned::Unknown => {
                            let reason = format!("gang {job} is not known to the scheduler");
                            return answer(
                                args,
                                &names,
                                &[],
                                fail_all(&names, &reason),
                                FailedNodesMap::new(),
                            );
                        }
                    }
                }
                Decision::Replan { job } => {
                    let reason = format!("gang {job}: its plan changed while re-planning; retry");
                    return answer(
                        args,
                        &names,
                        &[],
                        fail_all(&names, &reason),
                        FailedNodesMap::new(),
                    );
                }
            }
        }
        answer(
            args,
            &names,
            &[],
            fail_all(&names, "no decision could be reached; retry"),
            FailedNodesMap::new(),
        )
    }

    /// Remembers a gang pod the filter turned down, so it can be nudged once its gang is placed
    /// (or, turned down while its gang was short of pods, once it no longer is).
    fn note_rejected(&self, uid: &str, meta: &protocol::PodMeta) {
        let (gang, while_short) = {
            let idx = self.scheduler.index();
            match idx.task(uid) {
                Some(t) => match t.job.clone() {
                    Some(j) => {
                        let short = filter::short_of_members(&idx, &j);
                        (Some(j), short)
                    }
                    None => return,
                },
                None => (None, false),
            }
        };
        let pod = (meta.namespace.clone(), meta.name.clone());
        lock(&self.book).rejected(gang, uid, pod, while_short);
    }

    /// After each session: removes the plan gate from the pods it placed, and nudges
    /// turned-down gang pods once a session has placed their gang.
    ///
    /// Gang pods the Job controller creates wait behind the plan gate
    /// ([`crate::api::keys::PLAN_GATE`]) until a session places them; removing it is the pod
    /// update that hands the pod to kube-scheduler, which then asks about it with a fresh
    /// queue entry (no backoff) and the plan already holding its node. The rest of this task
    /// is for pods that reach kube-scheduler before their gang is placed (made by others, or
    /// with `--gate-until-placed=false`).
    ///
    /// kube-scheduler parks a pod the extender turned down in its unschedulable queue until a
    /// cluster event (a node added, a pod deleted, the pod itself updated) or five minutes pass.
    /// A gang is placed when its *last* member arrives, which is no such event for the members
    /// turned down before; without a nudge the last member's bind would be held in vain. So
    /// after each session, the pods of newly placed gangs that the filter turned down get an
    /// annotation (`scheduling.tephra.io/plan: <session>`), an update of the pod itself that
    /// moves it back to kube-scheduler's active queue. This writes to the API after a session,
    /// never while kube-scheduler waits on an answer.
    ///
    /// kube-scheduler also parks pods it turned down itself, before asking the extender: its
    /// own resource check fails while its view of the nodes is full (pods it assumed whose
    /// binds then failed, members beyond a gang's minimum the plan later gave back). When a
    /// session then places such a pod, the filter never hears of it. So a placed pod that
    /// carries kube-scheduler's `Unschedulable` condition and that the filter has not been
    /// asked about since [`PARKED_GRACE`] after its placement is nudged too, and again with
    /// doubling gaps while kube-scheduler keeps parking it ([`due_parked`]).
    ///
    /// The handle ends once the nudger has stopped, writes in flight abandoned, so that whoever
    /// awaits it may then close the API they went to.
    pub fn spawn_nudger(
        self: Arc<Self>,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut seen = self.scheduler.session_count();
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = self.scheduler.wait_session_after(seen, Duration::from_secs(1)) => {}
                }
                seen = self.scheduler.session_count();
                let round = {
                    let idx = self.scheduler.index();
                    lock(&self.book).round(&*idx, Instant::now())
                };
                let (gates, nudges) = (round.ungate.len(), round.nudge.len());
                let started = Instant::now();
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = futures::future::join(self.ungate(round.ungate), self.nudge(round.nudge)) => {}
                }
                if gates + nudges > 0 {
                    tracing::debug!(
                        session = seen,
                        gates,
                        nudges,
                        ms = started.elapsed().as_millis() as u64,
                        "plan gates removed and pods nudged"
                    );
                }
            }
        })
    }

    /// Annotates `pods` (namespace, name) with the current plan's session, 16 writes at a time,
    /// which moves each back to kube-scheduler's active queue. A failed write is only logged: a
    /// placed pod kube-scheduler keeps parking is nudged again by a later round ([`book`]).
    async fn nudge(&self, pods: Vec<book::PodName>) {
        if pods.is_empty() {
            return;
        }
        tracing::debug!(pods = ?pods, "nudging");
        let session = self.scheduler.plan().session_id.clone();
        let patch = serde_json::json!({
            "metadata": { "annotations": { NUDGE_ANNOTATION: session } }
        });
        let patch = &patch;
        let writes = pods.into_iter().map(|(ns, name)| async move {
            let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
                kube::Api::namespaced(self.client.clone(), &ns);
            let params = kube::api::PatchParams::default();
            if let Err(e) = api
                .patch(&name, &params, &kube::api::Patch::Merge(patch))
                .await
            {
                tracing::debug!(pod = %format!("{ns}/{name}"), error = %crate::report::report(&e), "nudging a gang pod failed");
            }
        });
        futures::StreamExt::for_each_concurrent(futures::stream::iter(writes), 16, |f| f).await;
    }

    /// Removes the plan gate from `pods`, 16 writes at a time; a pod with a pin is read first
    /// and has its required node affinity narrowed in the same write ([`pin`]). A failed
    /// write is left to the next round ([`book`] sends it again). Once the last write for a
    /// gang's pods has been answered, the binder may bind that gang at once
    /// ([`Binder::gates_off`]); native gangs are kube-scheduler's to bind.
    async fn ungate(&self, pods: Vec<book::GateDue>) {
        // Each pod with its extender gang (none for a native one), and per gang the writes
        // not answered yet.
        let mut pending: HashMap<String, usize> = HashMap::new();
        let pods: Vec<(book::GateDue, Option<String>)> = {
            let idx = self.scheduler.index();
            pods.into_iter()
                .map(|d| {
                    let gang = idx
                        .task(&d.uid)
                        .and_then(|t| t.job.clone())
                        .filter(|_| !idx.native_member(&d.uid));
                    if let Some(g) = &gang {
                        *pending.entry(g.clone()).or_default() += 1;
                    }
                    (d, gang)
                })
                .collect()
        };
        let pending = Mutex::new(pending);
        let pending = &pending;
        let writes = pods.into_iter().map(|(d, gang)| async move {
            if self.remove_plan_gate(&d).await {
                self.scheduler
                    .index()
                    .note_plan_gate_removed(&d.uid, Instant::now());
            }
            let Some(gang) = gang else { return };
            let last = {
                let mut pending = lock(pending);
                let left = pending.entry(gang.clone()).or_default();
                *left = left.saturating_sub(1);
                *left == 0 && pending.remove(&gang).is_some()
            };
            if last {
                self.binder.gates_off(&gang);
            }
        });
        futures::StreamExt::for_each_concurrent(futures::stream::iter(writes), 16, |f| f).await;
    }

    /// Removes the plan gate from one pod; `true` when the API answered with the pod ungated.
    async fn remove_plan_gate(&self, d: &book::GateDue) -> bool {
        let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(self.client.clone(), &d.namespace);
        let pod = match &d.pin {
            Some(_) => match api.get(&d.name).await {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::debug!(pod = %format!("{}/{}", d.namespace, d.name), error = %crate::report::report(&e), "reading a pod to pin failed");
                    return false;
                }
            },
            None => None,
        };
        let patch = match pin::ungate_patch(pod.as_ref(), d.pin.as_deref()) {
            Ok((p, pin::Pinned::CannotSay)) => {
                tracing::warn!(pod = %format!("{}/{}", d.namespace, d.name), "its gang must stay inside one HyperNode, but the pod has required node affinity terms and a node of the HyperNode has no kubernetes.io/hostname label: it goes to kube-scheduler unpinned");
                p
            }
            Ok((p, _)) => p,
            Err(e) => {
                tracing::error!(error = %e, "building the plan-gate removal failed");
                return false;
            }
        };
        let params = kube::api::PatchParams::default();
        match api
            .patch(&d.name, &params, &kube::api::Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => {
                self.metrics.plan_gates_removed.inc();
                true
            }
            Err(e) => {
                tracing::debug!(
                    pod = %format!("{}/{}", d.namespace, d.name),
                    error = %crate::report::report(&e),
                    "removing the plan gate failed"
                );
                false
            }
        }
    }

    /// Re-plans `job` within `names`, one re-plan at a time.
    async fn replan(&self, uid: &str, job: &str, names: &[&str]) -> Replanned {
        let _one = self.replan_lock.lock().await;
        // A re-plan for another member may have placed this pod meanwhile.
        {
            let idx = self.scheduler.index();
            if let Some(node) = idx.assumed_node(uid)
                && idx.node(node).is_some()
                && names.contains(&node)
            {
                return Replanned::Placed(HashMap::new());
            }
        }
        let nodes: HashSet<String> = names.iter().map(|s| (*s).to_string()).collect();
        let keep = self.binder.held_uids(job);
        let scheduler = self.scheduler.clone();
        let job_owned = job.to_string();
        let r =
            tokio::task::spawn_blocking(move || replan_gang(&scheduler, &job_owned, &nodes, &keep))
                .await
                .unwrap_or(Replanned::Unknown);
        let label = match &r {
            Replanned::Placed(_) => "placed",
            Replanned::Unfit(_) => "unfit",
            Replanned::Unknown => "unknown",
        };
        self.metrics.replans.with_label_values(&[label]).inc();
        r
    }
}

fn fail_all(names: &[&str], reason: &str) -> FailedNodesMap {
    names
        .iter()
        .map(|n| ((*n).to_string(), reason.to_string()))
        .collect()
}

fn error_result(error: String) -> ExtenderFilterResult {
    ExtenderFilterResult {
        error,
        ..ExtenderFilterResult::default()
    }
}

/// The result in the form the request came in: names for names, node objects for nodes.
fn answer(
    args: &ExtenderArgs<'_>,
    names: &[&str],
    keep: &[usize],
    failed: FailedNodesMap,
    unresolvable: FailedNodesMap,
) -> ExtenderFilterResult {
    let mut r = ExtenderFilterResult {
        failed_nodes: failed,
        failed_and_unresolvable_nodes: unresolvable,
        ..ExtenderFilterResult::default()
    };
    match (&args.node_names, &args.nodes) {
        (Some(_), _) | (None, None) => {
            r.node_names = Some(
                keep.iter()
                    .filter_map(|&i| names.get(i).map(|s| (*s).to_string()))
                    .collect(),
            );
        }
        (None, Some(list)) => {
            r.nodes = Some(NodeList {
                items: keep
                    .iter()
                    .filter_map(|&i| list.items.get(i).cloned())
                    .collect(),
            });
        }
    }
    r
}
