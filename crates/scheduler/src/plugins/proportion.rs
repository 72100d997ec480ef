//! `proportion`: queues share the cluster by weight. Each queue's *deserved* share is
//! water-filled from the cluster total by weight, capped by its capability and its request and
//! raised to its guarantee; a queue at its deserved share takes nothing more this session, a
//! gang is admitted only within its queue's real capability, and reclaim takes back only what a
//! queue holds beyond its deserved share.
//!
//! The same plugin runs as Volcano's `capacity` ([`Proportion::capacity`]): there each queue's
//! deserved share is what its `spec.deserved` declares (capped by its real capability, raised
//! to its guarantee) instead of a weighted fill; a queue is never refused as overused and a
//! task is allocatable up to its queue's real capability, while reclaim and preemption still
//! stop at the deserved share and queues that declare a share go before those that do not.
//! With `enableHierarchy`, `capacity` bounds queues at every level of their tree
//! ([`super::hierarchy`]).

use std::cmp::Ordering;

use super::hierarchy::{self, Tree};
use crate::framework::Plugin;
use crate::ix::{Ix, IxVec, JobIx, QueueIx, TaskIx};
use crate::model::TaskStatus;
use crate::resource::{EPSILON, PODS, Resource, share};
use crate::session::{QueueReport, SessionEvent, State};
use tephra_api::scheduling::PodGroupPhase;

/// Per-queue bookkeeping.
#[derive(Clone, Debug, Default)]
pub struct QueueAttr {
    /// Water-filled share.
    pub deserved: Resource,
    /// Held by allocated-status tasks.
    pub allocated: Resource,
    /// Allocated plus pending.
    pub request: Resource,
    /// Reserved for admitted gangs.
    pub inqueue: Resource,
    /// Held beyond the gangs' minimum.
    pub elastic: Resource,
    /// `min(capability, total − others' guarantees)`.
    pub real_capability: Resource,
    /// Capability (the total when unset).
    pub capability: Resource,
    /// Guarantee.
    pub guarantee: Resource,
    /// Dominant share of deserved.
    pub share: f64,
    /// Gangs waiting for admission (phase Pending) and their `minResources`, in job order.
    pub waiting: Vec<(JobIx, Resource)>,
}

/// Where a queue's deserved share comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ShareSource {
    /// Water-filled by weight (`proportion`).
    #[default]
    Weighted,
    /// Declared in `spec.deserved` (`capacity`).
    Declared,
}

/// The plugin.
#[derive(Debug, Default)]
pub struct Proportion {
    attrs: IxVec<QueueIx, QueueAttr>,
    source: ShareSource,
    /// `capacity` with `enableHierarchy`: whether to build [`Self::tree`] at open.
    hierarchical: bool,
    /// The queue tree, when hierarchical.
    tree: Option<Tree>,
}

/// `capacity`'s deserved shares: each queue's `spec.deserved`, capped by its real capability
/// and raised to its guarantee (nothing declared: no share, the queue is best effort). The
/// share keeps the dimensions the queue declares and no others: capping by the real
/// capability must not add its `pods` slot as a declared 0, or every queue holding a pod would
/// be past its share in `pods` (sorted last, never allowed to reclaim, always a victim).
fn declared_fill(attrs: &mut [QueueAttr], queues: &[crate::model::QueueInfo]) {
    for (a, q) in attrs.iter_mut().zip(queues) {
        let declared = q.deserved.clone().unwrap_or_default();
        let mut capped = Resource::new(
            declared.milli_cpu.min(a.real_capability.milli_cpu),
            declared.memory.min(a.real_capability.memory),
        );
        for (k, v) in &declared.scalars {
            let cap = a
                .real_capability
                .scalars
                .get(k)
                .copied()
                .unwrap_or(f64::INFINITY);
            capped.scalars.insert(k.clone(), v.min(cap));
        }
        // The guarantee raises the share only up to the real capability, as in the fill.
        a.deserved = capped.max_with(&a.guarantee.min_with(&a.real_capability));
    }
}

/// Does `name` count when `capacity` compares a queue's amounts? Every pod asks one `pods`
/// slot, which no queue declares, so Volcano leaves it out of these comparisons.
fn counted(name: &str) -> bool {
    name != PODS
}

/// The dimensions `req` asks for (cpu, memory, then scalars; `pods` left out), with their
/// amounts.
fn asked(req: &Resource) -> impl Iterator<Item = (&str, f64)> {
    [("cpu", req.milli_cpu), ("memory", req.memory)]
        .into_iter()
        .chain(req.scalars.iter().map(|(k, v)| (k.as_str(), *v)))
        .filter(|(k, v)| *v > 0.0 && counted(k))
}

/// `capacity`'s test for a queue that may reclaim: in at least one dimension the task asks
/// for, what the queue would hold with it stays within its deserved share (dimensions where
/// both are zero are left out). One dimension is enough: a queue short of its share in cpu
/// may reclaim for a task that also needs memory it already has.
fn within_in_some_dimension(used: &Resource, deserved: &Resource, req: &Resource) -> bool {
    asked(req).any(|(k, _)| {
        let (u, d) = (used.get(k), deserved.get(k));
        !(u < EPSILON && d < EPSILON) && (u < d || (u - d).abs() < EPSILON)
    })
}

/// `capacity`'s test for a victim's queue: it holds more than its deserved share in a
/// dimension the victim uses and the share speaks of (cpu or memory declared above zero, a
/// scalar declared at all).
fn exceeds_in_some_dimension(allocated: &Resource, deserved: &Resource, req: &Resource) -> bool {
    asked(req).any(|(k, _)| {
        let relevant = match k {
            "cpu" | "memory" => deserved.get(k) >= EPSILON,
            other => deserved.scalars.contains_key(other),
        };
        relevant && allocated.get(k) > deserved.get(k)
    })
}

/// The dimensions a vector holds an amount of (at least [`EPSILON`]).
fn held(r: &Resource) -> impl Iterator<Item = &str> {
    r.dimensions().filter(move |k| r.get(k) >= EPSILON)
}

/// Do the two vectors share a dimension both hold an amount of (`pods` counted only when
/// `with_pods`)?
fn intersect(a: &Resource, b: &Resource, with_pods: bool) -> bool {
    held(a).any(|k| (with_pods || counted(k)) && b.get(k) >= EPSILON)
}

/// Water-fills `total` among queues by `weight`, each capped by real capability and request
/// and raised to its guarantee. Pure, and the heart of queue fairness.
///
/// Each dimension is filled on its own and exactly: with a common level `λ`, a queue deserves
/// `w·λ` clamped to `[g, max(g, min(real capability, request))]` with `g` its guarantee within
/// its real capability, and `λ` is
/// the level at which the shares add up to the total (or unbounded, when every queue can have
/// all it asks for). This is the fixed point Volcano's proportion plugin reaches by repeated
/// rounds of handing out the remainder by weight; computing it directly matters because those
/// rounds converge only geometrically when a queue is met in one dimension and not in another
/// (a queue that asks for no memory keeps sharing the memory remainder), and any bound on the
/// rounds then leaves a queue short of what it asks for while the room lies unused: the starved
/// queue of `a_queue_is_not_starved_by_an_unrelated_running_gang` in the session tests.
pub fn water_fill(total: &Resource, attrs: &mut [QueueAttr], weights: &[i32]) {
    let mut dims: Vec<String> = total.dimensions().map(str::to_string).collect();
    for a in attrs.iter() {
        for d in a
            .request
            .dimensions()
            .chain(a.guarantee.dimensions())
            .chain(a.real_capability.dimensions())
        {
            if !dims.iter().any(|x| x == d) {
                dims.push(d.to_string());
            }
        }
    }
    let mut out = vec![Resource::zero(); attrs.len()];
    for d in &dims {
        let bounds: Vec<(f64, f64, f64)> = attrs
            .iter()
            .zip(weights)
            .map(|(a, w)| {
                // A guarantee above the capability (the webhook refuses one, but a queue
                // may predate it) is kept only up to the capability: never over-commit a
                // queue's limit to honour its floor.
                let cap = a.real_capability.get(d);
                let lo = a.guarantee.get(d).max(0.0).min(cap);
                let hi = a.request.get(d).min(cap).max(lo);
                (weights_of(*w), lo, hi)
            })
            .collect();
        let level = fill_level(total.get(d), &bounds);
        for (i, (w, lo, hi)) in bounds.iter().enumerate() {
            let v = (w * level).clamp(*lo, *hi);
            match d.as_str() {
                "cpu" => out[i].milli_cpu = v,
                "memory" => out[i].memory = v,
                other => {
                    // A scalar nobody holds stays absent rather than a declared zero.
                    if v > 0.0 || a_has(&attrs[i], other) {
                        out[i].scalars.insert(other.to_string(), v);
                    }
                }
            }
        }
    }
    for (a, d) in attrs.iter_mut().zip(out) {
        a.deserved = d;
    }
}

/// A queue's weight as a fill factor (not positive counts as 1, as for an unset weight).
fn weights_of(w: i32) -> f64 {
    w.max(1) as f64
}

/// Does the queue's request, guarantee or capability name the scalar?
fn a_has(a: &QueueAttr, name: &str) -> bool {
    a.request.scalars.contains_key(name)
        || a.guarantee.scalars.contains_key(name)
        || a.real_capability.scalars.contains_key(name)
}

/// The level `λ` at which `Σ clamp(w·λ, lo, hi)` over `bounds` (`(w, lo, hi)`, `w > 0`,
/// `lo ≤ hi`) equals `budget`; `f64::INFINITY` when even every queue at `hi` stays within the
/// budget, 0 when the guarantees alone exceed it. The sum is piecewise linear and
/// non-decreasing in `λ` with kinks at `lo/w` and `hi/w`, so the level is found on the segment
/// where the sum first reaches the budget.
fn fill_level(budget: f64, bounds: &[(f64, f64, f64)]) -> f64 {
    let sum_at = |l: f64| -> f64 {
        bounds
            .iter()
            .map(|(w, lo, hi)| (w * l).clamp(*lo, *hi))
            .sum()
    };
    let mut kinks: Vec<f64> = bounds
        .iter()
        .flat_map(|(w, lo, hi)| [lo / w, hi / w])
        .filter(|k| k.is_finite())
        .collect();
    kinks.sort_by(f64::total_cmp);
    kinks.dedup();
    if sum_at(kinks.last().copied().unwrap_or(0.0)) <= budget {
        return f64::INFINITY;
    }
    let mut prev = 0.0;
    for &k in &kinks {
        let at_k = sum_at(k);
        if at_k >= budget {
            let at_prev = sum_at(prev);
            // Between two kinks the sum grows by the weights of the queues strictly inside
            // their bounds.
            let mid = (prev + k) / 2.0;
            let slope: f64 = bounds
                .iter()
                .filter(|(w, lo, hi)| w * mid > *lo && w * mid < *hi)
                .map(|(w, _, _)| *w)
                .sum();
            if slope <= 0.0 || at_prev >= budget {
                return prev;
            }
            return prev + (budget - at_prev) / slope;
        }
        prev = k;
    }
    prev
}

/// Water-fills level by level down the queue tree: the cluster total among the top queues
/// (`root`, and any queue whose parent is unknown), then each parent's deserved share among its
/// children, each child asking for what its whole subtree asks. With every queue directly under
/// `root` this is the flat division.
///
/// Only queues with a job in the session (`has_jobs`), and their ancestors, take part, as in
/// Volcano, whose proportion plugin builds its queue list from the session's jobs: an idle
/// queue's guarantee still narrows every other queue's real capability, but it is not handed a
/// share (raised to that guarantee, it would take it out of what the busy queues divide).
pub fn hierarchical_fill(
    total: &Resource,
    attrs: &mut [QueueAttr],
    weights: &[i32],
    parents: &[Option<usize>],
    has_jobs: &[bool],
) {
    let n = attrs.len();
    // A queue is live when it or a queue below it has a job; walking up is bounded as below.
    let mut live = vec![false; n];
    for i in (0..n).filter(|&i| has_jobs.get(i).copied().unwrap_or(false)) {
        live[i] = true;
        let mut p = parents[i];
        for _ in 0..n {
            let Some(pi) = p else { break };
            if live[pi] {
                break;
            }
            live[pi] = true;
            p = parents[pi];
        }
    }
    // A parent asks for what its subtree asks; walking up is bounded by the queue count, so a
    // cycle in `spec.parent` cannot loop for ever.
    let own: Vec<Resource> = attrs.iter().map(|a| a.request.clone()).collect();
    for (i, req) in own.iter().enumerate() {
        let mut p = parents[i];
        for _ in 0..n {
            let Some(pi) = p else { break };
            if pi == i {
                break;
            }
            attrs[pi].request.add(req);
            p = parents[pi];
        }
    }
    let mut level: Vec<(Resource, Vec<usize>)> = vec![(
        total.clone(),
        (0..n).filter(|&i| parents[i].is_none()).collect(),
    )];
    let mut visited = vec![false; n];
    while let Some((budget, members)) = level.pop() {
        let members: Vec<usize> = members
            .into_iter()
            .filter(|&i| !visited[i] && live[i])
            .collect();
        if members.is_empty() {
            continue;
        }
        let mut sub: Vec<QueueAttr> = members.iter().map(|&i| attrs[i].clone()).collect();
        let w: Vec<i32> = members.iter().map(|&i| weights[i]).collect();
        water_fill(&budget, &mut sub, &w);
        for (k, &i) in members.iter().enumerate() {
            visited[i] = true;
            attrs[i].deserved = sub[k].deserved.clone();
            let children: Vec<usize> = (0..n).filter(|&c| parents[c] == Some(i)).collect();
            if !children.is_empty() {
                level.push((attrs[i].deserved.clone(), children));
            }
        }
    }
}

impl Proportion {
    /// Volcano's `capacity` plugin: deserved shares as the queues declare them; with
    /// `enableHierarchy`, bounded at every level of the queue tree.
    pub fn capacity(o: &crate::config::PluginOption) -> Self {
        Self {
            source: ShareSource::Declared,
            hierarchical: o.enable_hierarchy == Some(true),
            ..Self::default()
        }
    }

    /// Task `t` placed (`true`) or taken off (`false`): its queue's allocation, and its
    /// ancestors' when hierarchical.
    fn count(&mut self, st: &State, t: TaskIx, placed: bool) {
        let Some(q) = st.job_queue[st.task_job[t]] else {
            return;
        };
        if q.index() >= self.attrs.len() {
            return;
        }
        for x in self.with_ancestors(q) {
            let a = &mut self.attrs[x].allocated;
            if placed {
                a.add(&st.tasks[t].resreq);
            } else {
                a.sub(&st.tasks[t].resreq);
            }
            self.update_share(x);
        }
    }

    /// `q` and, when hierarchical, its ancestors.
    fn with_ancestors(&self, q: QueueIx) -> Vec<QueueIx> {
        match &self.tree {
            Some(t) => t.up(q).collect(),
            None => vec![q],
        }
    }

    fn update_share(&mut self, q: QueueIx) {
        let a = &mut self.attrs[q];
        a.share = match self.source {
            ShareSource::Weighted => a.allocated.share_of(&a.deserved),
            // Over the declared dimensions only; a queue that declares nothing is best
            // effort and counts as having its share, so it goes after every queue below its
            // own.
            ShareSource::Declared if a.deserved.is_empty() => 1.0,
            ShareSource::Declared => held(&a.deserved)
                .map(|k| share(a.allocated.get(k), a.deserved.get(k)))
                .fold(0.0, f64::max),
        };
    }

    /// `capacity`'s victims: per victim, in order, its queue keeps its guarantee without
    /// it, and either the queue's share says nothing of what the victim uses or the queue
    /// holds more than its share in a dimension the victim uses; a victim using none of what
    /// the reclaimer asks for frees nothing it needs and is passed over. Each victim taken
    /// counts against its queue for the next.
    fn capacity_victims(&self, st: &State, reclaimer: TaskIx, victims: &[TaskIx]) -> Vec<TaskIx> {
        let mut allocated: IxVec<QueueIx, Resource> =
            self.attrs.iter().map(|a| a.allocated.clone()).collect();
        let wanted = &st.tasks[reclaimer].resreq;
        let mut out = Vec::new();
        for &v in victims {
            let Some(q) = st.job_queue[st.task_job[v]] else {
                continue;
            };
            let Some(a) = self.attrs.get(q) else {
                continue;
            };
            let req = &st.tasks[v].resreq;
            if !st.queues[q].reclaimable || !intersect(req, wanted, false) {
                continue;
            }
            if !a.guarantee.less_equal(&allocated[q].minus(req)) {
                continue;
            }
            if !intersect(req, &a.deserved, true)
                || exceeds_in_some_dimension(&allocated[q], &a.deserved, req)
            {
                allocated[q].sub(req);
                out.push(v);
            }
        }
        out
    }
}

impl Proportion {
    /// Another queue than `q` with a gang waiting for admission that its deserved share has
    /// room for (beside what it holds and has admitted): its name.
    fn waiting_within_share(&self, st: &State, q: QueueIx) -> Option<String> {
        self.attrs.iter_enumerated().find_map(|(o, a)| {
            if o == q || a.waiting.is_empty() || !st.queues[o].is_open() {
                return None;
            }
            let mut held = a.allocated.plus(&a.inqueue);
            held.sub(&a.elastic);
            a.waiting
                .iter()
                .any(|(_, min)| held.plus(min).less_equal_in(&a.deserved, min))
                .then(|| st.queues[o].name.clone())
        })
    }
}

impl Plugin for Proportion {
    fn name(&self) -> &'static str {
        match self.source {
            ShareSource::Weighted => "proportion",
            ShareSource::Declared => "capacity",
        }
    }

    fn open(&mut self, st: &State) {
        let total = &st.total;
        let guarantees: Resource = st
            .queues
            .iter()
            .filter_map(|q| q.guarantee.clone())
            .fold(Resource::zero(), |acc, g| acc.plus(&g));
        self.attrs = st
            .queues
            .iter()
            .map(|q| {
                let guarantee = q.guarantee.clone().unwrap_or_default();
                // A capability without cpu or memory leaves that dimension unlimited.
                let mut capability = total.clone();
                if let Some(c) = &q.capability {
                    if c.milli_cpu > 0.0 {
                        capability.milli_cpu = c.milli_cpu;
                    }
                    if c.memory > 0.0 {
                        capability.memory = c.memory;
                    }
                    for (k, v) in &c.scalars {
                        capability.scalars.insert(k.clone(), *v);
                    }
                }
                let mut real = total.minus(&guarantees);
                real.add(&guarantee);
                QueueAttr {
                    real_capability: real.min_with(&capability),
                    capability,
                    guarantee,
                    ..QueueAttr::default()
                }
            })
            .collect();
        for (j, job) in st.jobs.iter_enumerated() {
            let Some(q) = st.job_queue[j] else {
                continue;
            };
            let a = &mut self.attrs[q];
            for &t in &job.tasks {
                let task = &st.tasks[t];
                if task.status.is_allocated() {
                    a.allocated.add(&task.resreq);
                    a.request.add(&task.resreq);
                } else if task.status == TaskStatus::Pending && !task.gated {
                    a.request.add(&task.resreq);
                }
            }
            if st.has_enqueue
                && job.is_pending()
                && let Some(min) = &job.min_resources
            {
                // A gang waiting for admission asks for its minimum, whether or not its pods
                // exist yet (a vcJob's are made only once it is admitted). Volcano counts only
                // the pods, so a queue backlogged with jobs asks for no more than the few it
                // has admitted, and its weight never shows in the shares.
                let pods: Resource = job
                    .tasks
                    .iter()
                    .map(|&t| &st.tasks[t])
                    .filter(|t| t.status == TaskStatus::Pending && !t.gated)
                    .fold(Resource::zero(), |acc, t| acc.plus(&t.resreq));
                a.request.add(&min.minus(&pods));
                a.waiting.push((j, min.clone()));
            }
            let job_alloc = &st.job_state[j].allocated;
            if let Some(min) = &job.min_resources {
                // Gated pods hold nothing yet (as in overcommit).
                if job.phase == PodGroupPhase::Inqueue {
                    a.inqueue.add(&st.deduct_gated(j, min));
                }
                if job.phase == PodGroupPhase::Running
                    && st.ready_task_num(j) as i64 >= job.min_available as i64
                {
                    // Finished pods were taken off `min` when the session opened.
                    a.inqueue.add(&st.deduct_gated(j, &min.minus(job_alloc)));
                }
                a.elastic.add(&job_alloc.minus(min));
            }
        }
        let weights: Vec<i32> = st.queues.iter().map(|q| q.weight).collect();
        // The fills are algorithms over the whole queue list, by position.
        let parents: Vec<Option<usize>> = st
            .queues
            .iter_enumerated()
            .map(|(i, q)| {
                q.parent
                    .as_ref()
                    .and_then(|p| st.queue_index.get(p).copied())
                    .filter(|p| *p != i)
                    .map(Ix::index)
            })
            .collect();
        let mut has_jobs = vec![false; st.queues.len()];
        for q in st.job_queue.iter().flatten() {
            has_jobs[q.index()] = true;
        }
        match self.source {
            ShareSource::Weighted => {
                let attrs = self.attrs.as_mut_slice();
                hierarchical_fill(total, attrs, &weights, &parents, &has_jobs);
            }
            ShareSource::Declared => {
                self.tree = None;
                if self.hierarchical {
                    let tree = Tree::of(st);
                    hierarchy::capabilities(&tree, st, &mut self.attrs, total);
                    hierarchy::roll_up(&tree, &mut self.attrs);
                    self.tree = Some(tree);
                }
                declared_fill(self.attrs.as_mut_slice(), st.queues.as_slice());
                if let Some(root) = st.queue_index.get(hierarchy::ROOT).copied()
                    && self.hierarchical
                    && self.attrs[root].deserved.is_empty()
                {
                    // `root` deserves the cluster unless it says otherwise.
                    self.attrs[root].deserved = total.clone();
                }
            }
        }
        for q in self.attrs.indices() {
            self.update_share(q);
        }
    }

    fn queue_order(&self, st: &State, a: QueueIx, b: QueueIx) -> Option<Ordering> {
        let by_priority = st.queues[b].priority.cmp(&st.queues[a].priority);
        if by_priority != Ordering::Equal {
            return Some(by_priority);
        }
        if let Some(tree) = &self.tree
            && let Some(o) = hierarchy::compare(tree, &self.attrs, a, b)
        {
            return Some(o);
        }
        if self.source == ShareSource::Declared {
            // Queues that declare a share go before best-effort ones.
            let declared = |q: QueueIx| !self.attrs[q].deserved.is_empty();
            let by_declared = declared(b).cmp(&declared(a));
            if by_declared != Ordering::Equal {
                return Some(by_declared);
            }
        }
        self.attrs[a].share.partial_cmp(&self.attrs[b].share)
    }

    fn overused(&self, st: &State, q: QueueIx) -> Option<bool> {
        if self.source == ShareSource::Declared || st.lending {
            return None;
        }
        let a = self.attrs.get(q)?;
        Some(a.deserved.less_equal(&a.allocated))
    }

    fn allocatable(&self, st: &State, q: QueueIx, t: TaskIx) -> Option<bool> {
        if !st.queues[q].is_open() {
            return Some(false);
        }
        let a = self.attrs.get(q)?;
        let req = &st.tasks[t].resreq;
        // Lending: room left after every queue had its turn within its share may go to a
        // queue up to its capability.
        if let Some(tree) = &self.tree {
            return Some(
                hierarchy::fits_up(tree, &self.attrs, q, req, |a| a.allocated.clone()).is_ok(),
            );
        }
        let limit = match self.source {
            ShareSource::Weighted if !st.lending => &a.deserved,
            _ => &a.real_capability,
        };
        Some(a.allocated.plus(req).less_equal_in(limit, req))
    }

    fn job_enqueueable(&mut self, st: &mut State, j: JobIx) -> i8 {
        let Some(q) = st.job_queue[j] else {
            return 0;
        };
        let Some(a) = self.attrs.get(q) else {
            return 0;
        };
        if !st.queues[q].is_open() {
            st.job_state[j].job_fit_error = Some(format!(
                "queue {} is {}, not Open",
                st.queues[q].name, st.queues[q].state
            ));
            st.job_state[j].refused_for_queue_state = true;
            return -1;
        }
        let Some(min) = st.jobs[j].min_resources.clone() else {
            return 1;
        };
        let mut want = min.plus(&a.allocated);
        want.add(&a.inqueue);
        want.sub(&a.elastic);
        if want.less_equal_in(&a.real_capability, &min) {
            if self.source == ShareSource::Weighted
                && !want.less_equal_in(&a.deserved, &min)
                && let Some(other) = self.waiting_within_share(st, q)
            {
                // Admission room goes to queues within their share first: a queue at its
                // share would otherwise admit its whole backlog (it stays first in the
                // queue order, which admissions do not change) and hold the room the other
                // queues' gangs need to be admitted at all. The share itself is not named: it
                // moves with every queue's demand, and the message is written into every
                // waiting PodGroup's condition.
                st.job_state[j].job_fit_error = Some(format!(
                    "queue {} is at its deserved share while queue {other} waits for room within its own",
                    st.queues[q].name,
                ));
                return -1;
            }
            if let Some(tree) = &self.tree
                && let Err(x) = hierarchy::fits_up(tree, &self.attrs, q, &min, |a| {
                    let mut held = a.allocated.plus(&a.inqueue);
                    held.sub(&a.elastic);
                    held
                })
            {
                let (name, ancestor) = (&st.queues[q].name, &st.queues[x].name);
                let cap = self.attrs[x].real_capability.only_dims_of(&min);
                let message = format!(
                    "queue resource quota insufficient: queue {ancestor}, above queue {name}, can hold {cap}, and what its queues hold and have promised leaves less than the gang's {min}"
                );
                st.job_state[j].job_fit_error = Some(message.clone());
                st.events.push(SessionEvent {
                    job: j,
                    type_: "Normal",
                    reason: "Unschedulable".into(),
                    message,
                });
                return -1;
            }
            return 1;
        }
        // The message names only what stays put while the gang waits (the queue's capability,
        // the gang's minimum): it is written into every waiting PodGroup's condition, and
        // naming what the queue holds now rewrote hundreds of them at every pod's start and
        // end.
        let name = st.queues[q].name.clone();
        let cap = a.real_capability.only_dims_of(&min);
        let message = if min.less_equal_in(&a.real_capability, &min) {
            format!(
                "queue resource quota insufficient: queue {name} can hold {cap}, and what it holds and has promised leaves less than the gang's {min}"
            )
        } else {
            format!(
                "queue resource quota insufficient: queue {name} can hold {cap}, less than the gang's {min} alone (short by {})",
                min.minus(&a.real_capability).only_dims_of(&min)
            )
        };
        st.job_state[j].job_fit_error = Some(message.clone());
        st.events.push(SessionEvent {
            job: j,
            type_: "Normal",
            reason: "Unschedulable".into(),
            message,
        });
        -1
    }

    fn job_enqueued(&mut self, st: &State, j: JobIx) {
        let (Some(q), Some(min)) = (st.job_queue[j], &st.jobs[j].min_resources) else {
            return;
        };
        if q.index() >= self.attrs.len() {
            return;
        }
        for x in self.with_ancestors(q) {
            self.attrs[x].inqueue.add(min);
        }
        self.attrs[q].waiting.retain(|(k, _)| *k != j);
    }

    fn on_allocate(&mut self, st: &State, t: TaskIx) {
        self.count(st, t, true);
    }

    fn on_deallocate(&mut self, st: &State, t: TaskIx) {
        self.count(st, t, false);
    }

    fn reclaimable(
        &self,
        st: &State,
        reclaimer: TaskIx,
        victims: &[TaskIx],
    ) -> Option<Vec<TaskIx>> {
        if self.source == ShareSource::Declared {
            return Some(self.capacity_victims(st, reclaimer, victims));
        }
        let mut allocated: IxVec<QueueIx, Resource> =
            self.attrs.iter().map(|a| a.allocated.clone()).collect();
        let mut out = Vec::new();
        for &v in victims {
            let Some(q) = st.job_queue[st.task_job[v]] else {
                continue;
            };
            let Some(a) = self.attrs.get(q) else {
                continue;
            };
            if !st.queues[q].reclaimable {
                continue;
            }
            if !allocated[q].less_equal(&a.deserved) {
                allocated[q].sub(&st.tasks[v].resreq);
                out.push(v);
            }
        }
        Some(out)
    }

    fn preemptive(&self, st: &State, q: QueueIx, t: TaskIx) -> Option<bool> {
        let a = self.attrs.get(q)?;
        let req = &st.tasks[t].resreq;
        let used = a.allocated.plus(req);
        Some(match self.source {
            ShareSource::Weighted => used.less_equal_in(&a.deserved, req),
            ShareSource::Declared => within_in_some_dimension(&used, &a.deserved, req),
        })
    }

    fn close(&mut self, st: &mut State) {
        for (q, a) in self.attrs.iter_enumerated() {
            st.queue_report.insert(
                q,
                QueueReport {
                    deserved: a.deserved.clone(),
                    allocated: a.allocated.clone(),
                    request: a.request.clone(),
                    inqueue: a.inqueue.clone(),
                    capability: a.capability.clone(),
                    real_capability: a.real_capability.clone(),
                    share: a.share,
                    overused: !a.allocated.less_equal(&a.deserved),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(request: Resource) -> QueueAttr {
        QueueAttr {
            request,
            real_capability: Resource::new(1e12, 1e18),
            ..QueueAttr::default()
        }
    }

    #[test]
    fn weights_split_what_is_asked_for() {
        let total = Resource::new(8000.0, 0.0);
        let mut attrs = vec![
            attr(Resource::new(8000.0, 0.0)),
            attr(Resource::new(8000.0, 0.0)),
        ];
        water_fill(&total, &mut attrs, &[1, 3]);
        assert!((attrs[0].deserved.milli_cpu - 2000.0).abs() < 1.0);
        assert!((attrs[1].deserved.milli_cpu - 6000.0).abs() < 1.0);
    }

    #[test]
    fn a_small_request_frees_the_rest_for_others() {
        let total = Resource::new(8000.0, 0.0);
        let mut attrs = vec![
            attr(Resource::new(1000.0, 0.0)),
            attr(Resource::new(8000.0, 0.0)),
        ];
        water_fill(&total, &mut attrs, &[1, 1]);
        assert!((attrs[0].deserved.milli_cpu - 1000.0).abs() < 1.0);
        assert!((attrs[1].deserved.milli_cpu - 7000.0).abs() < 1.0);
    }

    #[test]
    fn a_parent_share_is_divided_among_its_children() {
        // root → {a (weight 1), b (weight 1) → {b1 (1), b2 (3)}}; everyone asks for 8 cpu.
        let total = Resource::new(8000.0, 0.0);
        let ask = || attr(Resource::new(8000.0, 0.0));
        let mut attrs = vec![
            attr(Resource::zero()),
            ask(),
            attr(Resource::zero()),
            ask(),
            ask(),
        ];
        let parents = [None, Some(0), Some(0), Some(2), Some(2)];
        let has_jobs = [false, true, false, true, true];
        hierarchical_fill(&total, &mut attrs, &[1, 1, 1, 1, 3], &parents, &has_jobs);
        let cpu = |i: usize| attrs[i].deserved.milli_cpu.round();
        assert_eq!(cpu(0), 8000.0);
        assert_eq!((cpu(1), cpu(2)), (4000.0, 4000.0));
        assert_eq!((cpu(3), cpu(4)), (1000.0, 3000.0));
    }

    #[test]
    fn a_cycle_in_parents_ends() {
        let total = Resource::new(8000.0, 0.0);
        let mut attrs = vec![attr(Resource::new(1.0, 0.0)), attr(Resource::new(1.0, 0.0))];
        hierarchical_fill(
            &total,
            &mut attrs,
            &[1, 1],
            &[Some(1), Some(0)],
            &[true, true],
        );
    }

    #[test]
    fn a_queue_without_jobs_gets_no_share_even_with_a_guarantee() {
        // root → {default (asks 4 cpu), idle (guarantee 2 cpu, no job), other (no job)}: as in
        // Volcano, default deserves what it asks; before, the idle queue's guarantee and the
        // third queue's weight cut default to a third of root's share.
        let total = Resource::new(16000.0, 0.0);
        let mut idle = attr(Resource::zero());
        idle.guarantee = Resource::new(2000.0, 0.0);
        let mut attrs = vec![
            attr(Resource::zero()),
            attr(Resource::new(4000.0, 0.0)),
            idle,
            attr(Resource::zero()),
        ];
        let parents = [None, Some(0), Some(0), Some(0)];
        hierarchical_fill(
            &total,
            &mut attrs,
            &[1, 1, 1, 1],
            &parents,
            &[false, true, false, false],
        );
        let cpu = |i: usize| attrs[i].deserved.milli_cpu.round();
        assert_eq!(cpu(1), 4000.0);
        assert_eq!((cpu(2), cpu(3)), (0.0, 0.0));
    }

    #[test]
    fn capability_caps_and_guarantee_raises() {
        let total = Resource::new(8000.0, 0.0);
        let mut a = attr(Resource::new(8000.0, 0.0));
        a.real_capability = Resource::new(3000.0, 0.0);
        let mut b = attr(Resource::new(500.0, 0.0));
        b.guarantee = Resource::new(2000.0, 0.0);
        let mut attrs = vec![a, b, attr(Resource::new(8000.0, 0.0))];
        water_fill(&total, &mut attrs, &[1, 1, 1]);
        assert!(attrs[0].deserved.milli_cpu <= 3000.0 + 0.1);
        assert!(attrs[1].deserved.milli_cpu >= 2000.0 - 0.1);
        let sum: f64 = attrs.iter().map(|a| a.deserved.milli_cpu).sum();
        assert!(sum <= 8000.0 + 1.0, "{sum}");
    }

    #[test]
    fn a_budget_of_exactly_the_requests_meets_every_request() {
        // A parent's share is what its children ask for; one child asks for no memory. Every
        // child must deserve all it asks, in every dimension.
        let mib = 1024.0 * 1024.0;
        let reqs = [
            Resource::new(600.0, 0.0).with_scalar(PODS, 3000.0),
            Resource::new(1000.0, 128.0 * mib).with_scalar(PODS, 2000.0),
            Resource::new(1000.0, 128.0 * mib).with_scalar(PODS, 2000.0),
        ];
        let total = reqs.iter().fold(Resource::zero(), |acc, r| acc.plus(r));
        let mut attrs: Vec<QueueAttr> = reqs.iter().cloned().map(attr).collect();
        for a in &mut attrs {
            a.real_capability = total.clone();
        }
        water_fill(&total, &mut attrs, &[1, 1, 3]);
        for (a, r) in attrs.iter().zip(&reqs) {
            assert!(r.less_equal(&a.deserved), "{} < {}", a.deserved, r);
        }
    }

    mod fill_properties {
        use super::*;
        use proptest::prelude::*;

        fn queue() -> impl Strategy<Value = (i32, f64, f64, f64)> {
            // weight, request, capability, guarantee (one dimension, whole cpus)
            (1..5i32, 0..20u32, 0..20u32, 0..4u32).prop_map(|(w, r, c, g)| {
                (w, r as f64 * 1000.0, c as f64 * 1000.0, g as f64 * 1000.0)
            })
        }

        proptest! {
            /// The fill as a specification: every queue gets at least its guarantee (within its
            /// capability) and at most what it asks for within its capability (or that
            /// guarantee, if more); the shares
            /// never add up to more than the total unless the guarantees alone do; room is left
            /// over only when every queue has all it may have (work conservation); and two
            /// queues both short of their bounds hold shares in proportion to their weights.
            #[test]
            fn the_fill_is_bounded_conserving_and_weighted(
                total in 0..40u32,
                qs in proptest::collection::vec(queue(), 1..6),
            ) {
                let total = Resource::new(total as f64 * 1000.0, 0.0);
                let mut attrs: Vec<QueueAttr> = qs.iter().map(|(_, r, c, g)| QueueAttr {
                    request: Resource::new(*r, 0.0),
                    real_capability: Resource::new(*c, 0.0),
                    guarantee: Resource::new(*g, 0.0),
                    ..QueueAttr::default()
                }).collect();
                let weights: Vec<i32> = qs.iter().map(|q| q.0).collect();
                water_fill(&total, &mut attrs, &weights);
                let got: Vec<f64> = attrs.iter().map(|a| a.deserved.milli_cpu).collect();
                let lo: Vec<f64> = qs.iter().map(|(_, _, c, g)| g.min(*c)).collect();
                let hi: Vec<f64> = qs.iter().zip(&lo).map(|((_, r, c, _), l)| r.min(*c).max(*l)).collect();
                let guarantees: f64 = lo.iter().sum();
                let sum: f64 = got.iter().sum();
                for i in 0..qs.len() {
                    prop_assert!(got[i] >= lo[i] - 1e-6, "below guarantee: {got:?}");
                    prop_assert!(got[i] <= hi[i] + 1e-6, "above its bound: {got:?}");
                }
                prop_assert!(sum <= total.milli_cpu.max(guarantees) + 1e-6, "{sum} > total");
                if sum < total.milli_cpu - 1e-6 {
                    for i in 0..qs.len() {
                        prop_assert!((got[i] - hi[i]).abs() < 1e-6, "room left while {i} is short: {got:?}");
                    }
                }
                for i in 0..qs.len() {
                    for j in 0..qs.len() {
                        let inside = |k: usize| got[k] > lo[k] + 1e-6 && got[k] < hi[k] - 1e-6;
                        if inside(i) && inside(j) {
                            let (a, b) = (got[i] / qs[i].0 as f64, got[j] / qs[j].0 as f64);
                            prop_assert!((a - b).abs() < 1e-3, "not by weight: {got:?}");
                        }
                    }
                }
            }
        }
    }
}
