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
pub mod filter;
mod http;
pub mod metrics;
pub mod preempt;
pub mod prioritize;
pub use tephra_api::extender as protocol;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use binder::{BindError, Binder, BinderOptions};
pub use http::{NOT_THE_LEADER, router, router_for_leader};
pub use metrics::ExtenderMetrics;

use crate::scheduler::Scheduler;
use crate::scheduler::replan::{Replanned, replan_gang};
use crate::scheduler::runner::DEFAULT_ASSUME_TTL;
use crate::sync::lock;
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

/// At most this many pods are remembered as "seen by the filter"; beyond it the memory is
/// dropped (a pod then waits for one more session, nothing worse).
const SEEN_LIMIT: usize = 200_000;

/// The key under which pods turned down before the index knew them wait to be nudged (no
/// gang key is empty: a gang key is `namespace/name`).
const UNSEEN: &str = "";

/// Pods by uid: uid → (namespace, name).
type PodsByUid = HashMap<String, (String, String)>;

/// How long a placed pod that kube-scheduler parked may go unasked-for before it is nudged
/// ([`Extender::spawn_nudger`]): time for kube-scheduler to get to it by itself.
pub const PARKED_GRACE: Duration = Duration::from_millis(500);

/// How many times one placement that kube-scheduler keeps parking is nudged; the gaps double
/// from [`PARKED_GRACE`] (0.5 s, 1 s, 2 s, 4 s), so the last comes about 8 s after the first.
pub const PARKED_NUDGES: u32 = 5;

/// The nudges of one parked placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Nudges {
    /// The placement (when it was made).
    since: Instant,
    /// How many so far.
    count: u32,
    /// When the last was sent.
    last: Instant,
}

/// Which parked placements to nudge at `now`, and notes them in `nudged`. Pure.
///
/// `parked`: (uid, namespace, name, placed at) of placed pods that carry kube-scheduler's
/// `Unschedulable` condition, placed [`PARKED_GRACE`] ago or more; `asked`: when the filter
/// was last asked about each pod. A pod the filter was asked about since its placement (or
/// since its last nudge) is on its way. Otherwise it is nudged again while kube-scheduler
/// keeps parking it by its own checks (its view of the nodes can lag the plan by a bind or
/// two), with doubling gaps, at most [`PARKED_NUDGES`] times per placement.
fn due_parked(
    parked: Vec<(String, String, String, Instant)>,
    asked: &HashMap<String, Instant>,
    nudged: &mut HashMap<String, Nudges>,
    now: Instant,
) -> Vec<(String, String)> {
    let mut due = Vec::new();
    for (uid, ns, name, since) in parked {
        let prev = nudged.get(&uid).copied().filter(|n| n.since == since);
        let last = prev.map_or(since, |n| n.last);
        if asked.get(&uid).is_some_and(|t| *t >= last) {
            continue;
        }
        let count = prev.map_or(0, |n| n.count);
        if count >= PARKED_NUDGES
            || count > 0 && now.saturating_duration_since(last) < PARKED_GRACE * (1 << (count - 1))
        {
            continue;
        }
        nudged.insert(
            uid,
            Nudges {
                since,
                count: count + 1,
                last: now,
            },
        );
        due.push((ns, name));
    }
    due
}

/// How long a plan-gate removal sent for a pod waits for the watch to show it before it is
/// sent again.
pub const UNGATE_RESEND: Duration = Duration::from_secs(1);

/// Which placed, still plan-gated pods to ungate at `now`, and notes them in `sent`. Pure.
///
/// `placed`: (uid, namespace, name) of pods a session placed that the index still sees behind
/// [`crate::api::keys::PLAN_GATE`]; `sent`: when their removal was last sent. A removal not
/// yet visible after [`UNGATE_RESEND`] is sent again (the write may have failed); pods no
/// longer placed and gated are forgotten.
fn due_ungates(
    placed: Vec<(String, String, String)>,
    sent: &mut HashMap<String, Instant>,
    now: Instant,
) -> Vec<(String, String)> {
    let live: HashSet<&str> = placed.iter().map(|(u, _, _)| u.as_str()).collect();
    sent.retain(|uid, _| live.contains(uid.as_str()));
    let mut due = Vec::new();
    for (uid, ns, name) in placed {
        if sent
            .get(&uid)
            .is_some_and(|t| now.saturating_duration_since(*t) < UNGATE_RESEND)
        {
            continue;
        }
        sent.insert(uid, now);
        due.push((ns, name));
    }
    due
}

/// The JSON patch that removes the plan gate from a pod whose only gate it is (a placed pod
/// has no other: the session does not place a pod behind another gate, and gates are never
/// added after creation). The `test` makes the write refuse any other list.
fn ungate_patch() -> Result<json_patch::Patch, serde_json::Error> {
    serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/spec/schedulingGates",
         "value": [{ "name": crate::api::keys::PLAN_GATE }]},
        {"op": "remove", "path": "/spec/schedulingGates"},
    ]))
}

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
    /// `--bind-ahead`: a gang whose placed members reach `minMember` is bound whole at its
    /// first bind request (see [`binder`]).
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
    /// Pod uid → session count when the filter first saw it.
    first_seen: Mutex<HashMap<String, u64>>,
    /// One re-plan at a time: several members of a gang may ask at once.
    replan_lock: tokio::sync::Mutex<()>,
    /// Gang pods whose filter failed: gang → uid → (namespace, name). See [`Extender::spawn_nudger`].
    rejected: Mutex<HashMap<String, PodsByUid>>,
    /// Pod uid → when the filter last asked about it.
    asked: Mutex<HashMap<String, Instant>>,
    /// Pod uid → the nudges of its parked placement ([`due_parked`]).
    nudged: Mutex<HashMap<String, Nudges>>,
    /// Pod uid → when the removal of its plan gate was last sent ([`due_ungates`]).
    ungated: Mutex<HashMap<String, Instant>>,
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
            first_seen: Mutex::new(HashMap::new()),
            replan_lock: tokio::sync::Mutex::new(()),
            rejected: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashMap::new()),
            nudged: Mutex::new(HashMap::new()),
            ungated: Mutex::new(HashMap::new()),
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

    /// `true` while no session has finished since the filter first saw `uid`.
    fn may_wait(&self, uid: &str) -> bool {
        let now = self.scheduler.session_count();
        let mut seen = lock(&self.first_seen);
        if seen.len() >= SEEN_LIMIT {
            seen.clear();
        }
        let first = *seen.entry(uid.to_string()).or_insert(now);
        now <= first
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
        {
            let mut asked = lock(&self.asked);
            if asked.len() >= SEEN_LIMIT {
                asked.clear();
            }
            asked.insert(uid.to_string(), Instant::now());
        }
        let mut may_wait = self.may_wait(uid);
        let mut replanned = false;
        // Bounded: at most one wait for a session and one re-plan.
        for _ in 0..4 {
            let decision = {
                let plan = self.scheduler.plan();
                // The index before `asked`, in the order the nudger takes them.
                let idx = self.scheduler.index();
                let asked = lock(&self.asked);
                // A member may give its placement when kube-scheduler has not asked about it
                // since it was placed and the binder has not taken it (bound ahead).
                let may_give = |job: &str, u: &str| {
                    let fresh = match (asked.get(u), idx.assumed_since(u)) {
                        (Some(at), Some(since)) => *at < since,
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

    /// Remembers a gang pod the filter turned down, so it can be nudged once its gang is placed.
    fn note_rejected(&self, uid: &str, meta: &protocol::PodMeta) {
        let job = match self.scheduler.index().task(uid) {
            Some(t) => match t.job.clone() {
                Some(j) => j,
                None => return,
            },
            // Turned down before tephra's own watch showed the pod (kube-scheduler's informer
            // can be ahead of it): nudged once the index knows it, or kube-scheduler would park
            // it until an unrelated event while the rest of its gang is held in vain.
            None => UNSEEN.to_string(),
        };
        let mut r = lock(&self.rejected);
        if r.len() >= SEEN_LIMIT {
            r.clear();
        }
        r.entry(job)
            .or_default()
            .insert(uid.to_string(), (meta.namespace.clone(), meta.name.clone()));
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
                let now = Instant::now();
                let ungate = {
                    let placed = self.scheduler.index().placed_plan_gated();
                    let mut sent = lock(&self.ungated);
                    due_ungates(placed, &mut sent, now)
                };
                let ungating = self.ungate(ungate);
                let mut due: Vec<(String, String)> = {
                    let idx = self.scheduler.index();
                    let mut due: Vec<(String, String)> = Vec::new();
                    {
                        let asked = lock(&self.asked);
                        let mut nudged = lock(&self.nudged);
                        nudged.retain(|uid, _| idx.assumed_node(uid).is_some());
                        let placed_by = now.checked_sub(PARKED_GRACE).unwrap_or(now);
                        due.extend(due_parked(
                            idx.parked_placements(placed_by),
                            &asked,
                            &mut nudged,
                            now,
                        ));
                    }
                    let mut r = lock(&self.rejected);
                    // Pods turned down before the index knew them are nudged once it does.
                    if let Some(unseen) = r.get_mut(UNSEEN) {
                        let known: Vec<String> = unseen
                            .keys()
                            .filter(|u| idx.task(u).is_some())
                            .cloned()
                            .collect();
                        due.extend(known.iter().filter_map(|u| unseen.remove(u)));
                    }
                    let jobs: Vec<String> = r
                        .iter()
                        .filter(|(j, _)| j.as_str() != UNSEEN)
                        .filter(|(_, pods)| pods.keys().any(|u| idx.assumed_node(u).is_some()))
                        .map(|(j, _)| j.clone())
                        .collect();
                    // Gangs whose pods are all gone are forgotten (unseen pods wait for the
                    // index, bounded by SEEN_LIMIT like the rest).
                    r.retain(|j, pods| {
                        j.as_str() == UNSEEN && !pods.is_empty()
                            || pods.keys().any(|u| idx.task(u).is_some())
                    });
                    due.extend(
                        jobs.iter()
                            .filter_map(|j| r.remove(j))
                            .flat_map(|pods| pods.into_values()),
                    );
                    due
                };
                // A pod both turned down and parked is nudged once.
                due.sort();
                due.dedup();
                if due.is_empty() {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = ungating => continue,
                    }
                }
                tracing::debug!(pods = ?due, "nudging");
                let session = self.scheduler.plan().session_id.clone();
                let patch = serde_json::json!({
                    "metadata": { "annotations": { NUDGE_ANNOTATION: session } }
                });
                let writes = due.into_iter().map(|(ns, name)| {
                    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
                        kube::Api::namespaced(self.client.clone(), &ns);
                    let patch = patch.clone();
                    async move {
                        if let Err(e) = api
                            .patch(&name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
                            .await
                        {
                            tracing::debug!(pod = %format!("{ns}/{name}"), error = %crate::report::report(&e), "nudging a gang pod failed");
                        }
                    }
                });
                let nudging = futures::StreamExt::for_each_concurrent(
                    futures::stream::iter(writes),
                    16,
                    |f| f,
                );
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = futures::future::join(ungating, nudging) => {}
                }
            }
        })
    }

    /// Removes the plan gate from `pods` (namespace, name), 16 writes at a time. A failed
    /// write is left to the next round ([`due_ungates`] sends it again).
    async fn ungate(&self, pods: Vec<(String, String)>) {
        if pods.is_empty() {
            return;
        }
        let patch = match ungate_patch() {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "building the plan-gate removal failed");
                return;
            }
        };
        let patch = &patch;
        let writes = pods.into_iter().map(|(ns, name)| async move {
            let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
                kube::Api::namespaced(self.client.clone(), &ns);
            let params = kube::api::PatchParams::default();
            match api
                .patch(&name, &params, &kube::api::Patch::Json::<()>(patch.clone()))
                .await
            {
                Ok(_) => self.metrics.plan_gates_removed.inc(),
                Err(e) => tracing::debug!(
                    pod = %format!("{ns}/{name}"),
                    error = %crate::report::report(&e),
                    "removing the plan gate failed"
                ),
            }
        });
        futures::StreamExt::for_each_concurrent(futures::stream::iter(writes), 16, |f| f).await;
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

#[cfg(test)]
mod nudge_tests {
    use super::*;

    fn parked(uid: &str, since: Instant) -> Vec<(String, String, String, Instant)> {
        vec![(uid.into(), "ns".into(), uid.into(), since)]
    }

    #[test]
    fn a_placed_gated_pod_is_ungated_once_and_again_only_if_the_gate_outlives_a_resend() {
        let t0 = Instant::now();
        let placed = || vec![("u1".to_string(), "ns".to_string(), "p1".to_string())];
        let mut sent = HashMap::new();
        assert_eq!(
            due_ungates(placed(), &mut sent, t0),
            vec![("ns".to_string(), "p1".to_string())]
        );
        // The watch has not shown the removal yet: not sent twice in a row.
        assert!(due_ungates(placed(), &mut sent, t0 + UNGATE_RESEND / 2).is_empty());
        // Still gated a resend later: the write may have failed, so again.
        assert_eq!(
            due_ungates(placed(), &mut sent, t0 + UNGATE_RESEND).len(),
            1
        );
        // Ungated (or no longer placed): forgotten.
        assert!(due_ungates(Vec::new(), &mut sent, t0 + UNGATE_RESEND * 2).is_empty());
        assert!(sent.is_empty());
    }

    #[test]
    fn the_ungate_patch_removes_only_a_lone_plan_gate() {
        let patch = ungate_patch().unwrap();
        let mut lone = serde_json::json!({"spec": {"schedulingGates": [{"name": crate::api::keys::PLAN_GATE}]}});
        json_patch::patch(&mut lone, &patch).unwrap();
        assert_eq!(lone, serde_json::json!({"spec": {}}));
        let mut two = serde_json::json!({"spec": {"schedulingGates": [
            {"name": "example.com/quota"}, {"name": crate::api::keys::PLAN_GATE}]}});
        assert!(json_patch::patch(&mut two, &patch).is_err());
    }

    #[test]
    fn a_placement_kube_scheduler_keeps_parking_is_nudged_again_with_doubling_gaps() {
        let t0 = Instant::now();
        let asked = HashMap::new();
        let mut nudged = HashMap::new();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut sent = Vec::new();
        // Polled every 100 ms for 20 s after the placement at t0.
        for ms in (500..20_000).step_by(100) {
            if !due_parked(parked("p", t0), &asked, &mut nudged, at(ms)).is_empty() {
                sent.push(ms);
            }
        }
        assert_eq!(sent, vec![500, 1000, 2000, 4000, 8000]);
    }

    #[test]
    fn a_pod_the_filter_was_asked_about_since_its_last_nudge_is_left_alone() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut nudged = HashMap::new();
        let mut asked = HashMap::from([("p".to_string(), at(100))]);
        // Asked after its placement: on its way, no nudge.
        assert!(due_parked(parked("p", t0), &asked, &mut nudged, at(600)).is_empty());
        // Asked before the placement only: nudged.
        asked.insert("p".into(), t0 - Duration::from_millis(1));
        assert_eq!(
            due_parked(parked("p", t0), &asked, &mut nudged, at(600)),
            vec![("ns".to_string(), "p".to_string())]
        );
        // Asked after that nudge: left alone, however long it stays parked.
        asked.insert("p".into(), at(700));
        assert!(due_parked(parked("p", t0), &asked, &mut nudged, at(5_000)).is_empty());
    }

    #[test]
    fn a_new_placement_starts_its_nudges_afresh() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let asked = HashMap::new();
        let mut nudged = HashMap::new();
        for ms in [500, 1000, 2000, 4000, 8000] {
            assert_eq!(
                due_parked(parked("p", t0), &asked, &mut nudged, at(ms)).len(),
                1
            );
        }
        assert!(due_parked(parked("p", t0), &asked, &mut nudged, at(60_000)).is_empty());
        // Placed again (a later session): nudged at once.
        let again = at(60_000);
        assert_eq!(
            due_parked(parked("p", again), &asked, &mut nudged, at(60_500)).len(),
            1
        );
    }
}
