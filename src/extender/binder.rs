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
//!
//! **Binding ahead** (`--bind-ahead`, on by default). kube-scheduler places one pod per cycle,
//! so with many gangs interleaved in its queue a gang of 100 needs 100 of its cycles spread
//! over all the gangs' before its binds have gathered. The session has placed the whole gang
//! already (its placements are assumed in the index), so once a bind request arrives for a
//! member and the gang's bound, held, gathered and *placed but not yet asked* members reach
//! `minMember`, the binder posts Bindings for all of them at once: the gang is still bound
//! whole, as Volcano's own binder binds a ready gang, and kube-scheduler sees the members it
//! had not reached bound through its watch and drops them from its queue.
//! The same happens, without waiting for a first request, as soon as the plan gates of a
//! placed gang have come off (the extender's nudger tells the binder when the API has
//! answered the removals): a gang of 100 is ungated in about a second, and kube-scheduler,
//! whose queue may hold thousands of other gangs' pods, would otherwise reach its first
//! member only later, and its other members later still. A member that uses
//! something only kube-scheduler checks or prepares before binding (volumes it binds in
//! PreBind, resource claims, inter-pod affinity, topology spread:
//! `Constraints::needs_kube_scheduler`) is never bound ahead; its gang gathers as above.
//!
//! **One Binding per pod.** Every Binding posted is remembered with its node while it is in
//! flight and for a while after (a *flight*): a bind request for a pod whose Binding is in
//! flight waits for that result instead of posting again (kube-scheduler retries a bind whose
//! request timed out, and asks for members bound ahead), and a pod already bound to the node
//! asked for is answered with success. A Binding answered 409 (the pod is bound already) keeps
//! the placement: the watch shows where the pod went.
//!
//! A hold that times out while its gang can no longer reach `minMember` even with the members
//! still placed (the plan lost them: expired, re-planned, deleted) releases its placements at
//! once instead of keeping them gathered for the gather window.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};

use super::metrics::ExtenderMetrics;
use super::protocol::ExtenderBindingArgs;
use crate::scheduler::runner::DEFAULT_ASSUME_TTL;
use crate::scheduler::{ClusterIndex, Scheduler};
use crate::sync::lock;

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
    /// The pod is bound (or being bound) to another node.
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
    /// A Binding for this pod is still in flight after a whole hold; its result decides.
    #[error("a Binding for this pod to {0} is still in flight; retry")]
    InFlight(String),
    /// The API answered 409: the pod is bound already (the watch shows where).
    #[error("binding refused by the API (conflict): {0}")]
    Conflict(String),
    /// The API refused the Binding for good (the pod or node is gone, the request is invalid).
    #[error("binding refused by the API: {0}")]
    Api(String),
    /// The API could not take the Binding for now: unreachable, restarting or overloaded
    /// (5xx, 429, a transport error), after [`BIND_ATTEMPTS`] attempts. The placement is kept,
    /// so kube-scheduler's retry binds the pod where its gang expects it.
    #[error("binding not taken, the API is unavailable: {0}; the placement is kept for a retry")]
    Unavailable(String),
    /// The service is stopping.
    #[error("bind abandoned (shutting down)")]
    Abandoned,
}

/// A gang's members as the binder counts them when a bind arrives or a hold times out: the
/// input of the pure decisions [`on_arrival`] and [`on_hold_timeout`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GangCounts {
    /// `minMember`.
    pub min: usize,
    /// Bound, or with a Binding posted by this binder.
    pub bound: usize,
    /// Binds held (their requests open), the arriving one included.
    pub held: usize,
    /// Members whose hold timed out, placements kept.
    pub gathered: usize,
    /// Placed by the plan, not asked for yet, and free to be bound ahead.
    pub ahead: usize,
    /// Placed by the plan and not asked for yet, `ahead` included.
    pub placed: usize,
}

impl GangCounts {
    /// Bound, held and gathered: what kube-scheduler has asked for or is done.
    fn asked(&self) -> usize {
        self.bound + self.held + self.gathered
    }
}

/// What to do when a gang member's bind arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnArrival {
    /// Post Bindings for the held and gathered members, and with `ahead` for the members
    /// placed but not asked for yet.
    Flush {
        /// Bind the placed members not asked for yet too.
        ahead: bool,
    },
    /// Hold the request until more arrive (or the hold times out).
    Hold,
}

/// Decides an arriving gang bind: flush when the members asked for reach `minMember`, or
/// (with `bind_ahead`) when they do counting the members placed and free to be bound ahead.
/// A flush always takes the placed members along when binding ahead is on: the gang is bound
/// in one go instead of one kube-scheduler cycle per member.
pub fn on_arrival(c: GangCounts, bind_ahead: bool) -> OnArrival {
    if c.asked() >= c.min || (bind_ahead && c.asked() + c.ahead >= c.min) {
        OnArrival::Flush { ahead: bind_ahead }
    } else {
        OnArrival::Hold
    }
}

/// `job`'s `minMember` (0 without a PodGroup).
fn min_member(idx: &ClusterIndex, job: &str) -> usize {
    idx.podgroup(job)
        .map_or(0, |pg| pg.spec.min_member.unwrap_or(0))
        .max(0) as usize
}

/// What to do with a gang's open requests when their hold times out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnHoldTimeout {
    /// Answer them with an error and keep their placements for the gather window.
    Gather,
    /// Answer them with an error and release their placements (and the gathered ones).
    Release,
}

/// Decides a timed-out hold: keep the members gathered only while a gather window is set and
/// the gang can still reach `minMember` with the members the plan has placed; otherwise
/// waiting would only keep nodes reserved for a gang that cannot complete.
pub fn on_hold_timeout(c: GangCounts, gather: Duration) -> OnHoldTimeout {
    if gather.is_zero() || c.asked() + c.placed < c.min {
        OnHoldTimeout::Release
    } else {
        OnHoldTimeout::Gather
    }
}

/// A gang member whose bind is held (`reply` set: its request is open), gathered (`reply`
/// gone: its request was answered at a hold timeout, its placement kept) or bound ahead
/// (`reply` gone: never asked for).
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

impl Hold {
    /// A hold with nothing held or gathered yet.
    fn new(generation: u64, bound: usize, min: usize) -> Self {
        Self {
            generation,
            bound,
            min,
            members: Vec::new(),
            gathered: Vec::new(),
            last_arrival: Instant::now(),
        }
    }
}

/// The result of a posted Binding, `None` while in flight.
type Landing = Option<Result<(), BindError>>;

/// A Binding this binder posted: its node and its result for requests that ask again.
struct Flight {
    node: String,
    at: Instant,
    result: watch::Sender<Landing>,
}

struct Inner {
    client: Client,
    scheduler: Scheduler,
    hold_timeout: Duration,
    gather_timeout: Duration,
    bind_ahead: bool,
    metrics: ExtenderMetrics,
    holds: Mutex<HashMap<String, Hold>>,
    generation: AtomicU64,
    /// Gang members this binder has posted (or is posting) Bindings for: gang → uid → when.
    /// They count as bound before the watch shows them bound, so a member beyond minMember
    /// that arrives right after its gang's flush binds at once instead of waiting alone.
    committed: Mutex<HashMap<String, HashMap<String, Instant>>>,
    /// Bindings posted, by pod uid (see the module docs, "One Binding per pod").
    flights: Mutex<HashMap<String, Flight>>,
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
            .field("bind_ahead", &self.inner.bind_ahead)
            .finish_non_exhaustive()
    }
}

/// What the index says about a bind request.
enum Admit {
    /// The pod is bound to the node asked for already: nothing to post.
    Done,
    /// Bind at once (the gang, if any, for the binder's memory).
    Now(Option<String>),
    Hold {
        job: String,
        bound: usize,
        min: usize,
    },
}

/// What a hold hands to a flush: the members to bind, and gathered members dropped because
/// the index no longer shows them pending.
#[derive(Default)]
struct Taken {
    flush: Vec<Held>,
    dropped: Vec<Held>,
}

/// Settings of the [`Binder`].
#[derive(Clone, Copy, Debug)]
pub struct BinderOptions {
    /// `--bind-hold-timeout`.
    pub hold_timeout: Duration,
    /// `--bind-gather-timeout` (zero: placements released at the hold timeout).
    pub gather_timeout: Duration,
    /// `--bind-ahead`.
    pub bind_ahead: bool,
}

impl Binder {
    /// A binder posting Bindings with `client`, as `options` say.
    pub fn new(
        client: Client,
        scheduler: Scheduler,
        options: BinderOptions,
        metrics: ExtenderMetrics,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                scheduler,
                hold_timeout: options.hold_timeout,
                gather_timeout: options.gather_timeout,
                bind_ahead: options.bind_ahead,
                metrics,
                holds: Mutex::new(HashMap::new()),
                generation: AtomicU64::new(0),
                committed: Mutex::new(HashMap::new()),
                flights: Mutex::new(HashMap::new()),
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

    /// Has this binder committed `uid` of `job` to a node or posted its Binding (a flush,
    /// bind-ahead included)? Its placement is then spoken for. Takes the committed and flight
    /// locks one after the other, never the holds lock, so it may be called with the index
    /// locked (the order `unasked` takes them in).
    pub fn spoken_for(&self, job: &str, uid: &str) -> bool {
        let committed = lock(&self.inner.committed)
            .get(job)
            .is_some_and(|c| c.contains_key(uid));
        committed || lock(&self.inner.flights).contains_key(uid)
    }

    /// Binds one pod, holding it for its gang as the module docs describe.
    pub async fn bind(&self, args: &ExtenderBindingArgs) -> Result<(), BindError> {
        if let Some(r) = self.join_flight(args).await {
            return r;
        }
        let (job, bound, min) = match self.admit(args)? {
            Admit::Done => return Ok(()),
            Admit::Now(job) => {
                // Committed before the flight is recorded: a flush that looks for members to
                // bind ahead skips committed ones, so it cannot post this pod a second time.
                if let Some(j) = &job {
                    self.commit(j, &args.pod_uid);
                }
                if let Some(rx) = self.take_off(&args.pod_uid, &args.node) {
                    return self
                        .wait_flight(rx, &args.node)
                        .await
                        .unwrap_or_else(|| Err(BindError::InFlight(args.node.clone())));
                }
                let r = self.post(args).await;
                self.landed(job.as_deref(), &args.pod_uid, &args.node, &r);
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
        let taken = {
            let mut holds = lock(&self.inner.holds);
            // A flush of this gang may have taken the pod along (bound ahead) since
            // `join_flight` looked; flushes record their flights under this lock, so this
            // check cannot miss one, and the pod is not posted twice.
            let joined = lock(&self.inner.flights)
                .get(&args.pod_uid)
                .filter(|f| f.node == args.node)
                .map(|f| f.result.subscribe());
            if let Some(rx) = joined {
                drop(holds);
                return self
                    .wait_flight(rx, &args.node)
                    .await
                    .unwrap_or_else(|| Err(BindError::InFlight(args.node.clone())));
            }
            let hold = holds
                .entry(job.clone())
                .or_insert_with(|| Hold::new(0, bound, min));
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
            self.take_for_flush(&mut holds, &job)
        };
        self.release(&taken.dropped);
        if !taken.flush.is_empty() {
            // Its own task: the flush must finish even if this request is dropped.
            let me = self.clone();
            tokio::spawn(async move { me.flush(job, taken.flush).await });
        }
        rx.await.unwrap_or(Err(BindError::Abandoned))
    }

    /// Called once the plan gates of `job`'s placed members have come off (the API answered
    /// the removals): with binding ahead, the gang is bound now when its bound, held,
    /// gathered and placed members reach `minMember`, whether or not kube-scheduler has asked
    /// for one of them yet. kube-scheduler sees the gang's pods ungated and bound in the same
    /// moment; a member it asks for meanwhile joins the Binding in flight. Without this, the
    /// first member kube-scheduler asked for while the rest were still gated would wait for
    /// another member's request (a gang of 100 is ungated in about a second while
    /// kube-scheduler's queue holds other gangs' pods ahead of it), and its hold could time out.
    pub fn gates_off(&self, job: &str) {
        if !self.inner.bind_ahead {
            return;
        }
        let taken = {
            let mut holds = lock(&self.inner.holds);
            if !holds.contains_key(job) {
                let (bound, min) = {
                    let idx = self.inner.scheduler.index();
                    if idx.podgroup(job).is_none() {
                        return;
                    }
                    (self.bound_members(&idx, job, None), min_member(&idx, job))
                };
                if bound >= min {
                    // Whole already: members beyond minMember bind as kube-scheduler asks.
                    return;
                }
                let generation = self.inner.generation.fetch_add(1, Ordering::Relaxed);
                holds.insert(job.to_string(), Hold::new(generation, bound, min));
            }
            let taken = self.take_for_flush(&mut holds, job);
            // An empty hold made here (nothing to bind yet) is not kept: no request waits on it.
            if holds
                .get(job)
                .is_some_and(|h| h.members.is_empty() && h.gathered.is_empty())
            {
                holds.remove(job);
            }
            taken
        };
        self.release(&taken.dropped);
        if !taken.flush.is_empty() {
            let me = self.clone();
            let job = job.to_string();
            tokio::spawn(async move { me.flush(job, taken.flush).await });
        }
    }

    /// How many of `job`'s members are bound, or have a Binding posted by this binder
    /// (`except` not counted among the latter).
    fn bound_members(&self, idx: &ClusterIndex, job: &str, except: Option<&str>) -> usize {
        let mut bound: HashSet<String> = idx
            .job_tasks(job)
            .filter(|t| {
                t.node.is_some()
                    && !t.assumed
                    && t.status != crate::scheduler::model::TaskStatus::Releasing
            })
            .map(|t| t.uid.clone())
            .collect();
        if let Some(c) = lock(&self.inner.committed).get(job) {
            bound.extend(c.keys().filter(|u| Some(u.as_str()) != except).cloned());
        }
        bound.len()
    }

    /// Answers a request for a pod whose Binding this binder posted: the same node waits for
    /// that Binding's result (bounded by the hold timeout), another node is refused. `None`
    /// when there is no such Binding (or it failed): the request is decided afresh.
    async fn join_flight(&self, args: &ExtenderBindingArgs) -> Option<Result<(), BindError>> {
        let rx = {
            let flights = lock(&self.inner.flights);
            let f = flights
                .get(&args.pod_uid)
                .filter(|f| f.at.elapsed() < COMMITTED_TTL)?;
            if f.node != args.node {
                return Some(Err(BindError::AlreadyBound {
                    pod: format!("{}/{}", args.pod_namespace, args.pod_name),
                    node: f.node.clone(),
                }));
            }
            f.result.subscribe()
        };
        self.wait_flight(rx, &args.node).await
    }

    /// Waits (at most a hold) for a Binding's result: `Some(Ok)` when it bound the pod,
    /// `None` when it failed (and was forgotten).
    async fn wait_flight(
        &self,
        mut rx: watch::Receiver<Landing>,
        node: &str,
    ) -> Option<Result<(), BindError>> {
        self.inner
            .metrics
            .gang_binds
            .with_label_values(&["joined"])
            .inc();
        let landed =
            tokio::time::timeout(self.inner.hold_timeout, rx.wait_for(Option::is_some)).await;
        match landed {
            Ok(Ok(r)) => match r.clone() {
                Some(Ok(())) => Some(Ok(())),
                Some(Err(_)) | None => None,
            },
            // The poster went away without a result (shutting down).
            Ok(Err(_)) => Some(Err(BindError::Abandoned)),
            Err(_) => Some(Err(BindError::InFlight(node.to_string()))),
        }
    }

    /// Records that a Binding of `uid` to `node` is about to be posted; when one to the same
    /// node is in flight or done already, returns it to wait on instead (two requests for one
    /// pod that passed [`Self::join_flight`] together post one Binding).
    fn take_off(&self, uid: &str, node: &str) -> Option<watch::Receiver<Landing>> {
        let now = Instant::now();
        let mut flights = lock(&self.inner.flights);
        flights.retain(|_, f| now.duration_since(f.at) < COMMITTED_TTL);
        if let Some(f) = flights.get(uid).filter(|f| f.node == node) {
            return Some(f.result.subscribe());
        }
        flights.insert(
            uid.to_string(),
            Flight {
                node: node.to_string(),
                at: now,
                result: watch::Sender::new(None),
            },
        );
        None
    }

    /// Publishes a Binding's result to the requests waiting on it and, when it failed, undoes
    /// what it reserved: the gang's count, and the placement unless the pod is bound already
    /// (409, the watch shows where) or the API was only unavailable. A gang whose Bindings
    /// were cut off by an API server restart is partly bound; its other members keep their
    /// nodes so the retries finish it at once, where a released placement could be given to
    /// another gang by the next session and leave this one partial until room frees up.
    fn landed(&self, job: Option<&str>, uid: &str, node: &str, r: &Result<(), BindError>) {
        {
            let mut flights = lock(&self.inner.flights);
            if let Some(f) = flights.get(uid).filter(|f| f.node == node) {
                f.result.send_replace(Some(r.clone()));
                if r.is_err() {
                    flights.remove(uid);
                }
            }
        }
        if let Err(e) = r {
            tracing::warn!(pod_uid = %uid, node, gang = job.unwrap_or(""), error = %e, "Binding failed");
        }
        match r {
            Ok(()) | Err(BindError::Conflict(_)) => {}
            Err(e) => {
                if let Some(j) = job {
                    self.uncommit(j, uid);
                }
                // Only a refusal says the placement is wrong (see above for why an
                // unavailable API keeps it).
                if !matches!(e, BindError::Unavailable(_)) {
                    self.inner.scheduler.index().forget(uid);
                    self.inner.scheduler.request();
                }
            }
        }
    }

    /// Takes `job`'s hold out for a flush when [`on_arrival`] says so. Gathered members the
    /// index no longer shows pending (deleted, bound by someone else, finished) are dropped
    /// first, so a flush never posts a Binding bound to fail and leave the gang partly bound;
    /// with binding ahead, the gang's placed members not asked for yet join the flush.
    fn take_for_flush(&self, holds: &mut HashMap<String, Hold>, job: &str) -> Taken {
        let Some(hold) = holds.get_mut(job) else {
            return Taken::default();
        };
        let mut taken = Taken::default();
        let (ahead, placed) = {
            let idx = self.inner.scheduler.index();
            if !hold.gathered.is_empty() {
                let (keep, gone): (Vec<Held>, Vec<Held>) = std::mem::take(&mut hold.gathered)
                    .into_iter()
                    .partition(|h| {
                        idx.task(&h.uid).is_some_and(|t| {
                            !t.status.is_completed() && (t.node.is_none() || t.assumed)
                        })
                    });
                hold.gathered = keep;
                taken.dropped = gone;
            }
            self.unasked(&idx, job, hold)
        };
        let counts = GangCounts {
            min: hold.min,
            bound: hold.bound,
            held: hold.members.len(),
            gathered: hold.gathered.len(),
            ahead: ahead.len(),
            placed,
        };
        let with_ahead = match on_arrival(counts, self.inner.bind_ahead) {
            OnArrival::Hold => return taken,
            OnArrival::Flush { ahead } => ahead,
        };
        let Some(hold) = holds.remove(job) else {
            return taken;
        };
        let m = &self.inner.metrics;
        m.held_now.sub(hold.members.len() as i64);
        let mut members = hold.members;
        members.extend(hold.gathered);
        if with_ahead && !ahead.is_empty() {
            m.gang_binds
                .with_label_values(&["ahead"])
                .inc_by(ahead.len() as u64);
            members.extend(ahead);
        }
        // Counted as bound, and in flight, before the holds lock is released, so a member
        // arriving now binds at once (or waits for its Binding) rather than starting a new hold.
        for h in &members {
            self.commit(job, &h.uid);
            // A member is in no other flight: it is neither bound nor committed (see
            // `unasked`, `admit`), so this only records the flight.
            let _ = self.take_off(&h.uid, &h.node);
        }
        taken.flush = members;
        taken
    }

    /// The gang's members placed by the plan (assumed, pending) that are neither bound,
    /// committed, held nor gathered: those free to be bound ahead, and how many there are in
    /// all (ahead or not).
    fn unasked(&self, idx: &ClusterIndex, job: &str, hold: &Hold) -> (Vec<Held>, usize) {
        let asked: HashSet<&str> = hold
            .members
            .iter()
            .chain(&hold.gathered)
            .map(|h| h.uid.as_str())
            .collect();
        let committed = lock(&self.inner.committed);
        let committed = committed.get(job);
        let mut ahead = Vec::new();
        let mut placed = 0;
        for t in idx.job_tasks(job) {
            if !t.assumed
                || t.status.is_completed()
                || asked.contains(t.uid.as_str())
                || committed.is_some_and(|c| c.contains_key(&t.uid))
            {
                continue;
            }
            let Some(node) = idx.assumed_node(&t.uid).filter(|n| idx.node(n).is_some()) else {
                continue;
            };
            placed += 1;
            // A member still behind the plan gate cannot be bound (the API refuses a Binding
            // for a gated pod); its gate is on its way off, and it arrives through
            // kube-scheduler like the rest.
            if !t.constraints.needs_kube_scheduler
                && !idx.plan_gated(&t.uid)
                && !idx.native_member(&t.uid)
            {
                ahead.push(Held {
                    uid: t.uid.clone(),
                    namespace: t.namespace.clone(),
                    name: t.name.clone(),
                    node: node.to_string(),
                    reply: None,
                });
            }
        }
        (ahead, placed)
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
            // Bound where kube-scheduler asks (bound ahead, or an earlier Binding whose answer
            // it missed): that is the result it wants.
            if node == args.node {
                return Ok(Admit::Done);
            }
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
        let min = min_member(&idx, &job);
        let bound = self.bound_members(&idx, &job, Some(&args.pod_uid));
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
        let placed = {
            let idx = self.inner.scheduler.index();
            self.unasked(&idx, job, hold).1
        };
        let counts = GangCounts {
            min: hold.min,
            bound: hold.bound,
            held: hold.members.len(),
            gathered: hold.gathered.len(),
            ahead: 0,
            placed,
        };
        let mut timed_out = std::mem::take(&mut hold.members);
        let n = timed_out.len();
        let m = &self.inner.metrics;
        m.held_now.sub(n as i64);
        m.gang_binds
            .with_label_values(&["timed_out"])
            .inc_by(n as u64);
        let (bound, min) = (hold.bound, hold.min);
        if on_hold_timeout(counts, gather) == OnHoldTimeout::Release {
            let gathered = holds.remove(job).map(|h| h.gathered).unwrap_or_default();
            drop(holds);
            tracing::info!(gang = %job, held = n, gathered = gathered.len(), placed, min, bound, "gang binds timed out; placements released");
            if !gathered.is_empty() {
                m.gang_binds
                    .with_label_values(&["gather_expired"])
                    .inc_by(gathered.len() as u64);
            }
            self.release(&timed_out);
            self.release(&gathered);
            let after = if gather.is_zero() {
                "the placement is released".to_string()
            } else {
                format!(
                    "the placement is released: with {placed} more placed the gang cannot reach minMember"
                )
            };
            let error = BindError::HoldTimedOut {
                gang: job.to_string(),
                held: n + gathered.len(),
                bound,
                min,
                timeout: self.inner.hold_timeout,
                after,
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
            let job = job.as_str();
            async move {
                let args = ExtenderBindingArgs {
                    pod_name: h.name.clone(),
                    pod_namespace: h.namespace.clone(),
                    pod_uid: h.uid.clone(),
                    node: h.node.clone(),
                };
                let r = me.post(&args).await;
                // Published and answered as each lands: a request should not wait for the
                // whole gang's Bindings (a flush of 100 under load takes seconds, past
                // kube-scheduler's httpTimeout), only for its own. The gang is whole either
                // way: every Binding of the flush is posted.
                me.landed(Some(job), &h.uid, &h.node, &r);
                let outcome = if r.is_ok() { "completed" } else { "failed" };
                me.inner
                    .metrics
                    .gang_binds
                    .with_label_values(&[outcome])
                    .inc();
                let mut h = h;
                h.answer(r);
            }
        });
        futures::future::join_all(posts).await;
    }

    /// Posts the Binding, retrying transient errors ([`retryable`], transport) a few times.
    async fn post(&self, args: &ExtenderBindingArgs) -> Result<(), BindError> {
        let started = Instant::now();
        let api: Api<Pod> = Api::namespaced(self.inner.client.clone(), &args.pod_namespace);
        let body = args.binding();
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
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    break Err(BindError::Conflict(s.message));
                }
                Err(kube::Error::Api(s)) if !retryable(s.code) => {
                    break Err(BindError::Api(s.message));
                }
                Err(kube::Error::Api(s)) if attempt >= BIND_ATTEMPTS => {
                    break Err(BindError::Unavailable(s.message));
                }
                Err(e) if attempt >= BIND_ATTEMPTS => {
                    break Err(BindError::Unavailable(e.to_string()));
                }
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
    use super::{GangCounts, OnArrival, OnHoldTimeout, on_arrival, on_hold_timeout, retryable};
    use std::time::Duration;

    fn counts(min: usize, bound: usize, held: usize, gathered: usize) -> GangCounts {
        GangCounts {
            min,
            bound,
            held,
            gathered,
            ..GangCounts::default()
        }
    }

    #[test]
    fn an_arrival_flushes_once_the_members_asked_for_reach_min_member() {
        // 3 of 4 asked: held, whatever binding ahead says, when nothing else is placed.
        assert_eq!(on_arrival(counts(4, 1, 1, 1), false), OnArrival::Hold);
        assert_eq!(on_arrival(counts(4, 1, 1, 1), true), OnArrival::Hold);
        // Bound, held and gathered together reach minMember.
        assert_eq!(
            on_arrival(counts(4, 1, 2, 1), false),
            OnArrival::Flush { ahead: false }
        );
        // With binding ahead on, a flush takes the placed members along.
        assert_eq!(
            on_arrival(counts(4, 1, 2, 1), true),
            OnArrival::Flush { ahead: true }
        );
    }

    #[test]
    fn with_binding_ahead_the_first_arrival_of_a_placed_gang_flushes() {
        // One of 100 asked, 99 placed and free to bind ahead: the gang is bound now.
        let c = GangCounts {
            min: 100,
            held: 1,
            ahead: 99,
            placed: 99,
            ..GangCounts::default()
        };
        assert_eq!(on_arrival(c, true), OnArrival::Flush { ahead: true });
        // Off: it waits for kube-scheduler to ask for the rest.
        assert_eq!(on_arrival(c, false), OnArrival::Hold);
        // Placed, but one needs kube-scheduler first (not free to bind ahead): held.
        let c = GangCounts { ahead: 98, ..c };
        assert_eq!(on_arrival(c, true), OnArrival::Hold);
    }

    #[test]
    fn a_timed_out_hold_gathers_only_while_the_gang_can_still_complete() {
        let gather = Duration::from_secs(30);
        // 2 asked + 2 still placed reach minMember 4: keep the placements gathered.
        let c = GangCounts {
            placed: 2,
            ..counts(4, 0, 1, 1)
        };
        assert_eq!(on_hold_timeout(c, gather), OnHoldTimeout::Gather);
        // One placement short (expired, re-planned or deleted): release now.
        let c = GangCounts { placed: 1, ..c };
        assert_eq!(on_hold_timeout(c, gather), OnHoldTimeout::Release);
        // No gather window: always released.
        let c = GangCounts { placed: 2, ..c };
        assert_eq!(on_hold_timeout(c, Duration::ZERO), OnHoldTimeout::Release);
    }

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
