//! `/scheduler/bind`, gang-atomic: no gang is ever partly bound.
//!
//! kube-scheduler runs one binding cycle per pod, concurrently, and each calls this verb and
//! waits for its answer. A gang member's bind is *held* (its request stays open) until binds
//! for `minMember` members of its gang are in flight, counting members already bound; then all
//! held binds are posted (Binding subresource) together and each request is answered with its
//! own result. If the rest do not arrive within `--bind-hold-timeout` (below kube-scheduler's
//! extender `httpTimeout`), every held bind is answered with an `Error` and kube-scheduler
//! retries the pods later; nothing of the gang was bound.
//!
//! A request cannot be held longer than kube-scheduler's `httpTimeout`, but a gang's binds can
//! arrive further apart than that: kube-scheduler places one pod per scheduling cycle, in
//! queue order, so when many gangs' pods are interleaved in its queue (or some members come
//! back from backoff later than others) a gang of ten may need many seconds to get all its
//! members through. Releasing everything at each hold timeout then livelocks: the members
//! that timed out come back at different times and the gang never gathers again. So members
//! whose hold timed out stay *gathered* for `--bind-gather-timeout` after the gang's last
//! arrival: their placements stay reserved in the plan, and when the gang's count (bound +
//! held + gathered) reaches `minMember` the binder posts Bindings for the held and the
//! gathered members together. kube-scheduler, which was answered with an error for a
//! gathered member, sees it bound through its watch (as for a pod another scheduler binds); if
//! it retries the member first, the new bind request simply joins the hold. When the gather
//! window passes without the gang completing, the gathered placements are released.
//!
//! ```text
//!  bind(a) ─┐ hold[gang] = {a}            ┌─ hold timeout: held answered Error, kept gathered
//!  bind(b) ─┤ hold[gang] = {a,b}          │   └─ gather timeout: placements released
//!  bind(c) ─┘ bound + held + gathered ≥ minMember ─ post all concurrently ─ answer the held
//! ```
//! Members beyond `minMember` (the gang already has that many bound) and pods outside any gang
//! are bound at once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::oneshot;

use super::metrics::ExtenderMetrics;
use super::protocol::ExtenderBindingArgs;
use crate::scheduler::Scheduler;
use crate::scheduler::runner::DEFAULT_ASSUME_TTL;

/// Attempts per Binding post when the API answers a transient error (see [`retryable`]): a
/// transient failure inside a gang flush would otherwise leave the gang partly bound.
const BIND_ATTEMPTS: u32 = 3;

/// Whether an API status code is worth another Binding attempt: a server error, or 429 Too
/// Many Requests, which API Priority and Fairness answers when the priority level's queue is
/// full. A gang flush posts all its members' Bindings at once, so under a burst (Volcano's
/// benchmark gang case: ten gangs of 100) 429s are what the API answers first; other 4xx
/// (conflict: already bound, not found) will not change on a retry.
fn retryable(code: u16) -> bool {
    code >= 500 || code == 429
}

/// Why a bind is answered with an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// The pod is not in the index (never seen, or deleted).
    #[error("pod {0} is unknown (not found or deleted)")]
    UnknownPod(String),
    /// The uid does not match the pod of that name.
    #[error("uid {uid} is pod {actual}, not {sent}")]
    UidMismatch {
        /// The uid sent.
        uid: String,
        /// The pod that uid belongs to.
        actual: String,
        /// The `namespace/name` sent.
        sent: String,
    },
    /// The pod is bound already.
    #[error("pod {pod} is already bound to {node}")]
    AlreadyBound {
        /// `namespace/name`.
        pod: String,
        /// Its node.
        node: String,
    },
    /// The pod has finished.
    #[error("pod {0} has finished")]
    Finished(String),
    /// The node is not known.
    #[error("node {0} not found")]
    UnknownNode(String),
    /// The gang's other members did not arrive in time.
    #[error(
        "gang {gang}: binds for {held} of minMember {min} members arrived within {timeout:?} ({bound} already bound); nothing was bound; {after}"
    )]
    HoldTimedOut {
        /// The gang.
        gang: String,
        /// Binds held or gathered when the time ran out.
        held: usize,
        /// Members bound before.
        bound: usize,
        /// `minMember`.
        min: usize,
        /// The hold bound.
        timeout: Duration,
        /// What happens to the placement: released, or kept while the gang gathers.
        after: String,
    },
    /// A newer bind for the same pod replaced this one.
    #[error("a newer bind request for this pod replaced this one")]
    Superseded,
    /// The API refused the Binding.
    #[error("binding refused by the API: {0}")]
    Api(String),
    /// The service is stopping.
    #[error("bind abandoned (shutting down)")]
    Abandoned,
}

/// A gang member whose bind is held (`reply` set: its request is open) or gathered (`reply`
/// gone: its request was answered at a hold timeout, its placement kept).
struct Held {
    uid: String,
    namespace: String,
    name: String,
    node: String,
    reply: Option<oneshot::Sender<Result<(), BindError>>>,
}

impl Held {
    /// Answers the open request, if any.
    fn answer(&mut self, r: Result<(), BindError>) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(r);
        }
    }
}

struct Hold {
    /// The round of open requests: a hold timer acts only on the round it was started for.
    generation: u64,
    bound: usize,
    min: usize,
    /// Members whose requests are open.
    members: Vec<Held>,
    /// Members whose requests were answered at a hold timeout; placements kept.
    gathered: Vec<Held>,
    /// The last time a member arrived: the gather window runs from it.
    last_arrival: Instant,
}

struct Inner {
    client: Client,
    scheduler: Scheduler,
    hold_timeout: Duration,
    gather_timeout: Duration,
    metrics: ExtenderMetrics,
    holds: Mutex<HashMap<String, Hold>>,
    generation: AtomicU64,
    /// Gang members this binder has posted (or is posting) Bindings for: gang → uid → when.
    /// They count as bound before the watch shows them bound, so a member beyond minMember
    /// that arrives right after its gang's flush binds at once instead of waiting alone.
    committed: Mutex<HashMap<String, HashMap<String, Instant>>>,
}

/// How long a posted Binding counts from the binder's own memory; by then the watch shows it.
const COMMITTED_TTL: Duration = Duration::from_secs(120);

/// The gang-atomic binder; cheap to clone.
#[derive(Clone)]
pub struct Binder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Binder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binder")
            .field("hold_timeout", &self.inner.hold_timeout)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the index says about a bind request.
enum Admit {
    /// Bind at once (the gang, if any, for the binder's memory).
    Now(Option<String>),
    Hold {
        job: String,
        bound: usize,
        min: usize,
    },
}

impl Binder {
    /// A binder posting Bindings with `client`, holding gang binds at most `hold_timeout` and
    /// keeping timed-out members gathered `gather_timeout` after their gang's last arrival
    /// (zero: released at the hold timeout).
    pub fn new(
        client: Client,
        scheduler: Scheduler,
        hold_timeout: Duration,
        gather_timeout: Duration,
        metrics: ExtenderMetrics,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                scheduler,
                hold_timeout,
                gather_timeout,
                metrics,
                holds: Mutex::new(HashMap::new()),
                generation: AtomicU64::new(0),
                committed: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Uids whose binds are held or gathered now for `job` (a re-plan keeps their placements).
    pub fn held_uids(&self, job: &str) -> HashSet<String> {
        lock(&self.inner.holds)
            .get(job)
            .map(|h| {
                h.members
                    .iter()
                    .chain(&h.gathered)
                    .map(|m| m.uid.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Binds one pod, holding it for its gang as the module docs describe.
    pub async fn bind(&self, args: &ExtenderBindingArgs) -> Result<(), BindError> {
        let admit = self.admit(args)?;
        let (job, bound, min) = match admit {
            Admit::Now(job) => {
                if let Some(j) = &job {
                    self.commit(j, &args.pod_uid);
                }
                let r = self.post(args).await;
                if r.is_err() {
                    if let Some(j) = &job {
                        self.uncommit(j, &args.pod_uid);
                    }
                    self.inner.scheduler.index().forget(&args.pod_uid);
                    self.inner.scheduler.request();
                }
                return r;
            }
            Admit::Hold { job, bound, min } => (job, bound, min),
        };
        let (tx, rx) = oneshot::channel();
        let held = Held {
            uid: args.pod_uid.clone(),
            namespace: args.pod_namespace.clone(),
            name: args.pod_name.clone(),
            node: args.node.clone(),
            reply: Some(tx),
        };
        let m = &self.inner.metrics;
        m.gang_binds.with_label_values(&["held"]).inc();
        let flush = {
            let mut holds = lock(&self.inner.holds);
            let hold = holds.entry(job.clone()).or_insert_with(|| Hold {
                generation: 0,
                bound,
                min,
                members: Vec::new(),
                gathered: Vec::new(),
                last_arrival: Instant::now(),
            });
            // The latest counts win: members may have been bound since the hold began.
            hold.bound = bound;
            hold.min = min;
            hold.last_arrival = Instant::now();
            if let Some(i) = hold.members.iter().position(|h| h.uid == held.uid) {
                let mut old = hold.members.swap_remove(i);
                old.answer(Err(BindError::Superseded));
                m.held_now.dec();
            }
            // A gathered member kube-scheduler retried: its new request is the open one.
            hold.gathered.retain(|h| h.uid != held.uid);
            if hold.members.is_empty() {
                // A new round of open requests, answered within the hold timeout.
                let generation = self.inner.generation.fetch_add(1, Ordering::Relaxed);
                hold.generation = generation;
                self.start_timer(job.clone(), generation);
            }
            hold.members.push(held);
            m.held_now.inc();
            if hold.bound + hold.members.len() + hold.gathered.len() >= hold.min {
                self.take_for_flush(&mut holds, &job)
            } else {
                None
            }
        };
        if let Some((members, dropped)) = flush {
            self.release(&dropped);
            // Its own task: the flush must finish even if this request is dropped.
            let me = self.clone();
            tokio::spawn(async move { me.flush(job, members).await });
        }
        rx.await.unwrap_or(Err(BindError::Abandoned))
    }

    /// Takes `job`'s hold out for a flush, when its members are still enough: gathered members
    /// the index no longer shows pending (deleted, bound by someone else, finished) are dropped
    /// first, so a flush never posts a Binding bound to fail and leave the gang partly bound.
    /// Returns the members to bind and the gathered members dropped.
    fn take_for_flush(
        &self,
        holds: &mut HashMap<String, Hold>,
        job: &str,
    ) -> Option<(Vec<Held>, Vec<Held>)> {
        let hold = holds.get_mut(job)?;
        let mut dropped = Vec::new();
        if !hold.gathered.is_empty() {
            let idx = self.inner.scheduler.index();
            let (keep, gone): (Vec<Held>, Vec<Held>) = std::mem::take(&mut hold.gathered)
                .into_iter()
                .partition(|h| {
                    idx.task(&h.uid).is_some_and(|t| {
                        !t.status.is_completed() && (t.node.is_none() || t.assumed)
                    })
                });
            hold.gathered = keep;
            dropped = gone;
        }
        if hold.bound + hold.members.len() + hold.gathered.len() < hold.min {
            return None;
        }
        let hold = holds.remove(job)?;
        self.inner.metrics.held_now.sub(hold.members.len() as i64);
        let mut members = hold.members;
        members.extend(hold.gathered);
        // Counted as bound before the holds lock is released, so a member arriving now binds
        // at once rather than starting a new hold.
        for h in &members {
            self.commit(job, &h.uid);
        }
        Some((members, dropped))
    }

    /// Releases the placements of `members` (no longer held for their gang).
    fn release(&self, members: &[Held]) {
        if members.is_empty() {
            return;
        }
        {
            let mut idx = self.inner.scheduler.index();
            for h in members {
                idx.forget(&h.uid);
            }
        }
        self.inner.scheduler.request();
    }

    /// Checks the request against the index and counts the gang's bound members.
    fn admit(&self, args: &ExtenderBindingArgs) -> Result<Admit, BindError> {
        let key = format!("{}/{}", args.pod_namespace, args.pod_name);
        let mut idx = self.inner.scheduler.index();
        let task = idx
            .task(&args.pod_uid)
            .ok_or_else(|| BindError::UnknownPod(key.clone()))?;
        if task.namespace != args.pod_namespace || task.name != args.pod_name {
            return Err(BindError::UidMismatch {
                uid: args.pod_uid.clone(),
                actual: task.key(),
                sent: key,
            });
        }
        if task.status.is_completed() {
            return Err(BindError::Finished(key));
        }
        if let Some(node) = task.node.as_deref().filter(|_| !task.assumed) {
            return Err(BindError::AlreadyBound {
                pod: key,
                node: node.to_string(),
            });
        }
        if idx.node(&args.node).is_none() {
            return Err(BindError::UnknownNode(args.node.clone()));
        }
        let Some(job) = task.job.clone() else {
            return Ok(Admit::Now(None));
        };
        let min = idx
            .podgroup(&job)
            .map_or(0, |pg| pg.spec.min_member.unwrap_or(0))
            .max(0) as usize;
        let mut bound: HashSet<String> = idx
            .job_tasks(&job)
            .filter(|t| {
                t.node.is_some()
                    && !t.assumed
                    && t.status != crate::scheduler::model::TaskStatus::Releasing
            })
            .map(|t| t.uid.clone())
            .collect();
        if let Some(c) = lock(&self.inner.committed).get(&job) {
            bound.extend(c.keys().filter(|u| **u != args.pod_uid).cloned());
        }
        let bound = bound.len();
        if bound >= min {
            return Ok(Admit::Now(Some(job)));
        }
        // The pod counts against its node while held (kube-scheduler may have picked a node
        // other than the plan's, or the placement may have expired).
        if idx.assumed_node(&args.pod_uid) != Some(args.node.as_str()) {
            idx.forget(&args.pod_uid);
            idx.assume(
                &args.pod_uid,
                &args.node,
                DEFAULT_ASSUME_TTL,
                Instant::now(),
            );
        }
        Ok(Admit::Hold { job, bound, min })
    }

    /// Ends a round of open requests `hold_timeout` after it began: the held members are
    /// answered with an error and, with a gather window, kept gathered.
    fn start_timer(&self, job: String, generation: u64) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(me.inner.hold_timeout).await;
            me.hold_timed_out(&job, generation);
        });
    }

    fn hold_timed_out(&self, job: &str, generation: u64) {
        let gather = self.inner.gather_timeout;
        let mut holds = lock(&self.inner.holds);
        let Some(hold) = holds.get_mut(job).filter(|h| h.generation == generation) else {
            return;
        };
        let mut timed_out = std::mem::take(&mut hold.members);
        let n = timed_out.len();
        let m = &self.inner.metrics;
        m.held_now.sub(n as i64);
        m.gang_binds
            .with_label_values(&["timed_out"])
            .inc_by(n as u64);
        let (bound, min) = (hold.bound, hold.min);
        if gather.is_zero() {
            let gathered = holds.remove(job).map(|h| h.gathered).unwrap_or_default();
            drop(holds);
            tracing::info!(gang = %job, held = n, min, bound, "gang binds timed out; placements released");
            self.release(&timed_out);
            self.release(&gathered);
            let error = BindError::HoldTimedOut {
                gang: job.to_string(),
                held: n,
                bound,
                min,
                timeout: self.inner.hold_timeout,
                after: "the placement is released".to_string(),
            };
            for mut h in timed_out {
                h.answer(Err(error.clone()));
            }
            return;
        }
        let error = BindError::HoldTimedOut {
            gang: job.to_string(),
            held: n + hold.gathered.len(),
            bound,
            min,
            timeout: self.inner.hold_timeout,
            after: format!(
                "the placement is kept and the pod is bound with its gang if the rest arrive within {gather:?}"
            ),
        };
        tracing::info!(gang = %job, held = n, gathered = hold.gathered.len(), min, bound, "gang binds timed out; kept gathered");
        {
            // The placements must outlive the gather window, not expire with the assume TTL.
            let mut idx = self.inner.scheduler.index();
            let now = Instant::now();
            for h in &timed_out {
                idx.forget(&h.uid);
                idx.assume(&h.uid, &h.node, gather + self.inner.hold_timeout, now);
            }
        }
        for h in &mut timed_out {
            h.answer(Err(error.clone()));
        }
        let start_timer = hold.gathered.is_empty();
        hold.gathered.extend(timed_out);
        drop(holds);
        if start_timer {
            self.start_gather_timer(job.to_string());
        }
    }

    /// Releases a gang's gathered members once `gather_timeout` has passed since its last
    /// arrival with the gang still short.
    fn start_gather_timer(&self, job: String) {
        let me = self.clone();
        tokio::spawn(async move {
            let gather = me.inner.gather_timeout;
            loop {
                let wait = {
                    let holds = lock(&me.inner.holds);
                    let Some(hold) = holds.get(&job) else { return };
                    if hold.gathered.is_empty() {
                        return;
                    }
                    (hold.last_arrival + gather).saturating_duration_since(Instant::now())
                };
                if wait.is_zero() {
                    break;
                }
                tokio::time::sleep(wait).await;
            }
            let expired = {
                let mut holds = lock(&me.inner.holds);
                let Some(hold) = holds.get_mut(&job) else {
                    return;
                };
                let expired = std::mem::take(&mut hold.gathered);
                if hold.members.is_empty() {
                    holds.remove(&job);
                }
                expired
            };
            if !expired.is_empty() {
                me.inner
                    .metrics
                    .gang_binds
                    .with_label_values(&["gather_expired"])
                    .inc_by(expired.len() as u64);
                tracing::info!(gang = %job, gathered = expired.len(), "gang did not gather in time; placements released");
                me.release(&expired);
            }
        });
    }

    fn commit(&self, job: &str, uid: &str) {
        let now = Instant::now();
        let mut c = lock(&self.inner.committed);
        for m in c.values_mut() {
            m.retain(|_, t| now.duration_since(*t) < COMMITTED_TTL);
        }
        c.retain(|_, m| !m.is_empty());
        c.entry(job.to_string())
            .or_default()
            .insert(uid.to_string(), now);
    }

    fn uncommit(&self, job: &str, uid: &str) {
        if let Some(m) = lock(&self.inner.committed).get_mut(job) {
            m.remove(uid);
        }
    }

    async fn flush(&self, job: String, members: Vec<Held>) {
        let posts = members.into_iter().map(|h| {
            let me = self.clone();
            async move {
                let args = ExtenderBindingArgs {
                    pod_name: h.name.clone(),
                    pod_namespace: h.namespace.clone(),
                    pod_uid: h.uid.clone(),
                    node: h.node.clone(),
                };
                let r = me.post(&args).await;
                (h, r)
            }
        });
        let results = futures::future::join_all(posts).await;
        let m = &self.inner.metrics;
        let mut failed = false;
        for (mut h, r) in results {
            let outcome = if r.is_ok() { "completed" } else { "failed" };
            m.gang_binds.with_label_values(&[outcome]).inc();
            if r.is_err() {
                failed = true;
                self.uncommit(&job, &h.uid);
                self.inner.scheduler.index().forget(&h.uid);
            }
            h.answer(r);
        }
        if failed {
            self.inner.scheduler.request();
        }
    }

    /// Posts the Binding, retrying transient errors ([`retryable`], transport) a few times.
    async fn post(&self, args: &ExtenderBindingArgs) -> Result<(), BindError> {
        let started = Instant::now();
        let api: Api<Pod> = Api::namespaced(self.inner.client.clone(), &args.pod_namespace);
        let body = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": args.pod_name,
                "namespace": args.pod_namespace,
                "uid": args.pod_uid,
            },
            "target": { "apiVersion": "v1", "kind": "Node", "name": args.node },
        });
        let mut attempt = 0;
        let result = loop {
            attempt += 1;
            let r = api
                .create_subresource::<_, serde_json::Value>(
                    "binding",
                    &args.pod_name,
                    &PostParams::default(),
                    &body,
                )
                .await;
            match r {
                Ok(_) => break Ok(()),
                Err(kube::Error::Api(s)) if !retryable(s.code) || attempt >= BIND_ATTEMPTS => {
                    break Err(BindError::Api(s.message));
                }
                Err(e) if attempt >= BIND_ATTEMPTS => break Err(BindError::Api(e.to_string())),
                Err(_) => tokio::time::sleep(Duration::from_millis(20 << attempt)).await,
            }
        };
        self.inner
            .metrics
            .stage
            .with_label_values(&["Bind"])
            .observe(started.elapsed().as_secs_f64() * 1000.0);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::retryable;

    #[test]
    fn binding_retries_server_errors_and_too_many_requests_only() {
        // 429 is API Priority and Fairness's queue-full answer during a burst.
        for code in [429, 500, 503, 504] {
            assert!(retryable(code), "{code} should be retried");
        }
        // Conflict (already bound), not found, forbidden, invalid: a retry cannot help.
        for code in [400, 403, 404, 409, 422] {
            assert!(!retryable(code), "{code} should not be retried");
        }
    }
}
