//! `allocate`: queue by queue (fairest first), job by job, task by task, every pending task of
//! an admitted gang gets a node: predicates, then nodes with idle room, then nodes with room
//! once releasing pods are gone (pipelined), the best-scored first. A job's placements are
//! committed only when the gang is ready; a gang that is only pipelined keeps its promise for
//! the rest of the session; anything else is undone.
//!
//! One addition to Volcano's action: room is held for gangs the enqueue action admitted whose
//! pods do not exist yet (see [`held_for_unborn_gangs`]); a ready gang's members beyond its
//! minimum do not take it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::framework::Unfit;
use crate::ix::{Ix, JobIx, NodeIx, QueueIx, TaskIx};
use crate::kind_fits::KindFits;
use crate::model::{Constraints, TaskStatus};
use crate::resource::Resource;
use crate::session::{FitErrors, Session, State, Statement};
use tephra_api::scheduling::PodGroupPhase;

use super::pop_best;

/// How many feasible nodes to look for among `n` (Volcano's adaptive bound; all up to 100).
pub fn nodes_to_find(n: usize) -> usize {
    if n <= 100 {
        return n;
    }
    let percent = (50 - (n as i64) / 125).max(5) as usize;
    (n * percent / 100).max(100).min(n)
}

/// What became of one job's turn.
#[derive(Debug)]
pub enum Turn {
    /// The gang is ready: commit.
    Ready(Statement),
    /// Promised but not ready: keep the promise for this session.
    Pipelined,
    /// Nothing usable: undone.
    Discarded,
}

/// The room to hold for gangs admitted by the enqueue action (phase Inqueue) that have fewer
/// pods than their `minMember` — the Job controller creates a gang's pods only once it is
/// admitted, so they are still on their way: the sum of what their `minResources` still
/// lacks. `None` when there are none, or without the enqueue action (nothing bounds what is
/// admitted then).
///
/// Volcano's enqueue admits a gang because its minimum fits beside the minimums already
/// admitted, and Volcano keeps that promise only by timing: its session runs once a second,
/// by when the pods of gangs admitted together usually all exist, and its allocate gives every
/// gang its minimum before any gang grows beyond it. tephra runs a session as soon as pods
/// appear, so the first gang's pods could take the room promised to a gang admitted beside it
/// (Volcano's "Schedule Multiple Jobs": three gangs of 16 pods with a minimum of 2 on 16 cpus,
/// the third never started). Holding the promised minimum only against members beyond other
/// gangs' minimums keeps every gang's start as Volcano decides it.
pub fn held_for_unborn_gangs(st: &State) -> Option<Resource> {
    if !st.has_enqueue {
        return None;
    }
    let mut held = Resource::zero();
    let mut any = false;
    for (j, job) in st.jobs.iter_enumerated() {
        let Some(min) = &job.min_resources else {
            continue;
        };
        if job.phase != PodGroupPhase::Inqueue || job.tasks.len() as i64 >= job.min_available as i64
        {
            continue;
        }
        held.add(&min.minus(&st.job_state[j].allocated));
        any = true;
    }
    (any && !held.is_empty()).then_some(held)
}

/// Would placing task `t` still leave `held` free in the cluster (idle room of usable nodes,
/// summed)?
fn leaves_held_room(st: &State, t: TaskIx, held: &Resource) -> bool {
    let mut free = Resource::zero();
    for n in st.nodes.iter().filter(|n| n.ready && !n.unschedulable) {
        free.add(&n.idle());
    }
    held.plus(&st.tasks[t].resreq).less_equal_in(&free, held)
}

/// Runs the action: a pass within every queue's deserved share, then, for the gangs that
/// pass held back only for their queue's share, a pass that lends them room no queue within
/// its share took.
///
/// Why the second pass: Volcano caps every queue at its deserved share, computed from what the
/// queues ask for. When a queue's share is not a whole number of its pods (a gang of three
/// 2-cpu pods in a queue that deserves 5.75 cpu) or the queue entitled to the rest cannot use
/// it (its pods do not fit the nodes that have it), that rest stays idle while gangs wait for
/// it, until pods finish and the shares are computed again. A user sees an idle cluster and a
/// Pending job. The loan is only of room left after every queue has had its turn within its
/// share, so the shares still decide who goes first; with `reclaim` configured, a queue below
/// its share takes a loan back as it takes back anything held beyond a deserved share.
pub fn run(ssn: &mut Session) {
    if remember_kinds() {
        ssn.state.kind_fits = Some(KindFits::new(&ssn.state));
    }
    run_passes(ssn);
    ssn.state.kind_fits = None;
}

#[cfg(test)]
thread_local! {
    /// Tests turn the memory of kinds off to check that it never changes a plan.
    pub(crate) static REMEMBER_KINDS: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

#[cfg(test)]
fn remember_kinds() -> bool {
    REMEMBER_KINDS.with(std::cell::Cell::get)
}

#[cfg(not(test))]
fn remember_kinds() -> bool {
    true
}

fn run_passes(ssn: &mut Session) {
    let held = held_for_unborn_gangs(&ssn.state);
    let mut cursor = 0usize;
    let (by_queue, worksheets) = collect(ssn, |_| true);
    pass(ssn, by_queue, worksheets, held.as_ref(), &mut cursor);
    let (by_queue, worksheets) = collect(ssn, |js| js.held_back_by_share);
    if worksheets.is_empty() {
        return;
    }
    ssn.state.lending = true;
    pass(ssn, by_queue, worksheets, held.as_ref(), &mut cursor);
    ssn.state.lending = false;
}

/// The admitted jobs with pending tasks that `wanted` picks, by queue, and each job's tasks in
/// order (popped from the end).
fn collect(
    ssn: &mut Session,
    wanted: impl Fn(&crate::session::JobState) -> bool,
) -> (BTreeMap<QueueIx, Vec<JobIx>>, BTreeMap<JobIx, Vec<TaskIx>>) {
    let mut by_queue: BTreeMap<QueueIx, Vec<JobIx>> = BTreeMap::new();
    let mut worksheets: BTreeMap<JobIx, Vec<TaskIx>> = BTreeMap::new();
    for j in ssn.state.jobs.indices() {
        if !wanted(&ssn.state.job_state[j]) {
            continue;
        }
        if ssn.state.jobs[j].is_pending() {
            if ssn.state.has_enqueue {
                continue;
            }
            ssn.state.jobs[j].phase = PodGroupPhase::Inqueue;
        }
        if let Err(e) = ssn.plugins.job_valid(&ssn.state, j) {
            ssn.state.job_state[j].job_fit_error = Some(e.message);
            continue;
        }
        let Some(q) = ssn.state.job_queue[j] else {
            continue;
        };
        let mut tasks: Vec<TaskIx> = ssn.state.jobs[j]
            .tasks
            .iter()
            .copied()
            .filter(|&t| {
                let task = &ssn.state.tasks[t];
                task.status == TaskStatus::Pending && !task.gated && !task.best_effort()
            })
            .collect();
        if tasks.is_empty() {
            continue;
        }
        tasks.sort_by(|a, b| ssn.plugins.task_order(&ssn.state, *a, *b));
        // Popped from the end: reverse so the first in order comes first.
        tasks.reverse();
        worksheets.insert(j, tasks);
        by_queue.entry(q).or_default().push(j);
    }
    (by_queue, worksheets)
}

/// One pass over the queues (fairest first) and their jobs.
fn pass(
    ssn: &mut Session,
    mut by_queue: BTreeMap<QueueIx, Vec<JobIx>>,
    mut worksheets: BTreeMap<JobIx, Vec<TaskIx>>,
    held: Option<&Resource>,
    cursor: &mut usize,
) {
    let mut queues: Vec<QueueIx> = by_queue.keys().copied().collect();
    // Every pass either drops a queue, drops a job or places at least one task: bounded.
    while let Some(q) = pop_best(&mut queues, |a, b| {
        ssn.plugins.queue_order(&ssn.state, a, b)
    }) {
        if ssn.plugins.overused(&ssn.state, q) {
            for &j in by_queue.get(&q).into_iter().flatten() {
                ssn.state.job_state[j].held_back_by_share = true;
            }
            continue;
        }
        let Some(jobs) = by_queue.get_mut(&q) else {
            continue;
        };
        let Some(j) = pop_best(jobs, |a, b| ssn.plugins.job_order(&ssn.state, a, b)) else {
            continue;
        };
        let mut tasks = worksheets.remove(&j).unwrap_or_default();
        let mixed = unlike_pods(&ssn.state, &tasks);
        let original = mixed.then(|| tasks.clone());
        let mut turn = super::topology::allocate_job(ssn, q, j, &mut tasks, cursor, held);
        if let (Turn::Discarded, Some(original)) = (&turn, original) {
            // A gang of unlike pods can fail in its own order where another order fits: the
            // pods that fit the fewest nodes first (a pod that could go anywhere took room only
            // they could use), largest first (a small pod took the one node a large one needed) and, when it needs fewer
            // pods than it has, its minimum made of its smallest pods (largest of them first).
            // Then that minimum on the first node that fits, whatever the node scores prefer
            // (first-fit decreasing): the scores spread or pack the pods, and either can leave
            // no node for the last ones where plain first fit leaves one. Last, every pod
            // smallest first on the first node that fits: where the large pods can use only
            // some nodes (by memory, say), the small ones fill the others first.
            let some = ssn.state.jobs[j].min_available.max(0) as usize;
            for order in [
                Order::ConstrainedFirst,
                Order::LargestFirst,
                Order::SmallestSet,
                Order::SmallestSetFirstFit,
                Order::SmallestFirstFit,
            ] {
                if order == Order::SmallestSet && some >= original.len() {
                    continue;
                }
                if order == Order::ConstrainedFirst && !constraints_differ(&ssn.state, &original) {
                    continue;
                }
                let mut again = original.clone();
                by_size(ssn, &mut again, order, some);
                ssn.state.first_fit =
                    matches!(order, Order::SmallestSetFirstFit | Order::SmallestFirstFit);
                turn = super::topology::allocate_job(ssn, q, j, &mut again, cursor, held);
                ssn.state.first_fit = false;
                tasks = again;
                if !matches!(turn, Turn::Discarded) {
                    break;
                }
            }
        }
        if let Turn::Ready(stmt) = turn {
            ssn.commit(stmt);
            if !tasks.is_empty() {
                worksheets.insert(j, tasks);
                if let Some(jobs) = by_queue.get_mut(&q) {
                    jobs.push(j);
                }
            }
        }
        if !by_queue.get(&q).is_none_or(Vec::is_empty) {
            queues.push(q);
        }
    }
}

/// Do the tasks ask for different amounts, or for different nodes?
fn unlike_pods(st: &State, tasks: &[TaskIx]) -> bool {
    tasks
        .windows(2)
        .any(|w| st.tasks[w[0]].resreq != st.tasks[w[1]].resreq)
        || constraints_differ(st, tasks)
}

/// Do some of the tasks have other node constraints (selector, affinity, tolerations) than
/// others?
fn constraints_differ(st: &State, tasks: &[TaskIx]) -> bool {
    tasks
        .windows(2)
        .any(|w| !alike_for_nodes(st, &st.tasks[w[0]].constraints, &st.tasks[w[1]].constraints))
}

/// Would every node predicate and score read the same of two tasks' constraints? Labels count
/// only when some task has required pod anti-affinity (then a pod's labels decide where
/// others may go): every pod of a vcJob has a label of its own, its index, and taking alike
/// pods for unlike ones made each of them search the cluster afresh (a gang of 100 cost 100
/// searches, not one) and a gang that did not fit be tried again in every order.
fn alike_for_nodes(st: &State, a: &Constraints, b: &Constraints) -> bool {
    std::ptr::eq(a, b)
        || (a.same_for_nodes(b)
            && a.preferred_terms == b.preferred_terms
            && a.anti_affinity == b.anti_affinity
            && (!st.anti_affinity || a.labels == b.labels))
}

/// Which pods of a gang to try first when its own order failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// The pods that fit the fewest nodes first (node selector, affinity, taints and room
    /// all counted), in the job's order among equals.
    ConstrainedFirst,
    /// Every pod, largest first.
    LargestFirst,
    /// The `minMember` smallest pods, largest of them first, then the others smallest first.
    SmallestSet,
    /// [`Order::SmallestSet`], each pod on the first node that fits.
    SmallestSetFirstFit,
    /// Every pod, smallest first, each on the first node that fits.
    SmallestFirstFit,
}

/// Orders a worksheet (popped from the end) by the nodes its pods may use, or by size within
/// the job's task order by priority: largest first is first-fit decreasing, which packs where the job's own order may
/// not; the smallest set makes the gang's minimum of the pods most likely to fit, packed
/// largest first.
fn by_size(ssn: &Session, tasks: &mut Vec<TaskIx>, order: Order, min: usize) {
    let st = &ssn.state;
    let cmp_size = |a: TaskIx, b: TaskIx| {
        let (ra, rb) = (&st.tasks[a].resreq, &st.tasks[b].resreq);
        ra.milli_cpu
            .total_cmp(&rb.milli_cpu)
            .then(ra.memory.total_cmp(&rb.memory))
    };
    // In the order the pods are to be tried: higher priority first, then by size.
    let by_priority = |a: TaskIx, b: TaskIx| st.tasks[b].priority.cmp(&st.tasks[a].priority);
    let mut wanted: Vec<TaskIx> = tasks.clone();
    match order {
        Order::ConstrainedFirst => {
            // The worksheet is popped from the end: back to the order of trying, then a
            // stable sort keeps the job's own order among pods with as many nodes.
            wanted.reverse();
            let usable = |t: TaskIx| {
                st.nodes
                    .indices()
                    .filter(|&n| ssn.plugins.predicate(st, t, n).is_ok())
                    .count()
            };
            let mut counts: HashMap<TaskIx, usize> = HashMap::new();
            for &t in &wanted {
                counts.insert(t, usable(t));
            }
            wanted.sort_by_key(|t| counts[t]);
        }
        Order::SmallestFirstFit => {
            wanted.sort_by(|&a, &b| {
                by_priority(a, b)
                    .then(cmp_size(a, b))
                    .then_with(|| ssn.plugins.task_order(st, a, b))
            });
        }
        Order::LargestFirst => {
            wanted.sort_by(|&a, &b| {
                by_priority(a, b)
                    .then(cmp_size(b, a))
                    .then_with(|| ssn.plugins.task_order(st, a, b))
            });
        }
        Order::SmallestSet | Order::SmallestSetFirstFit => {
            wanted.sort_by(|&a, &b| {
                by_priority(a, b)
                    .then(cmp_size(a, b))
                    .then_with(|| ssn.plugins.task_order(st, a, b))
            });
            let k = min.min(wanted.len());
            wanted[..k].sort_by(|&a, &b| {
                by_priority(a, b)
                    .then(cmp_size(b, a))
                    .then_with(|| ssn.plugins.task_order(st, a, b))
            });
        }
    }
    // Popped from the end.
    wanted.reverse();
    *tasks = wanted;
}

/// Volcano's `NeedContinueAllocating`: after a task found no node, is it still worth trying
/// the job's other tasks?
fn need_continue(ssn: &Session, j: JobIx, failed_roles: &BTreeSet<String>) -> bool {
    let st = &ssn.state;
    let job = &st.jobs[j];
    if job.min_available as usize == job.tasks.len() {
        return false;
    }
    let role_sum: i64 = job.task_min_available.values().map(|v| *v as i64).sum();
    if (job.min_available as i64) < role_sum {
        let pending_ok = job
            .tasks
            .iter()
            .filter(|&&t| {
                st.tasks[t].status == TaskStatus::Pending
                    && !failed_roles.contains(&st.tasks[t].role)
            })
            .count() as i64;
        return st.ready_task_num(j) as i64 + pending_ok >= job.min_available as i64;
    }
    failed_roles.iter().all(|role| {
        let min = job.task_min_available.get(role).copied().unwrap_or(0);
        let allocated = job
            .tasks
            .iter()
            .filter(|&&t| st.tasks[t].role == *role && st.tasks[t].status.is_allocated())
            .count() as i32;
        min <= 0 || allocated >= min
    })
}

/// One job's turn (a job of queue `q`): places tasks from `tasks` (popped from the end) until
/// the gang is ready or
/// they run out. With `held` room ([`held_for_unborn_gangs`]), a member beyond the gang's
/// minimum is placed only if that room stays free; otherwise the gang's remaining members wait
/// for a later session.
///
/// With `within`, only those nodes are looked at (the nodes of one HyperNode, see
/// [`super::topology`]), each search starting at the first of them.
pub fn allocate_job(
    ssn: &mut Session,
    q: QueueIx,
    j: JobIx,
    tasks: &mut Vec<TaskIx>,
    cursor: &mut usize,
    held: Option<&Resource>,
    within: Option<&[NodeIx]>,
) -> Turn {
    let mut stmt = Statement::default();
    place_job(ssn, q, j, tasks, cursor, held, within, &mut stmt);
    finish(ssn, j, stmt)
}

/// Places job `j`'s `tasks` into `stmt` as a turn of [`allocate_job`] does (sub-group by
/// sub-group when its PodGroup has them), without deciding what becomes of the statement.
#[allow(clippy::too_many_arguments)]
pub fn place_job(
    ssn: &mut Session,
    q: QueueIx,
    j: JobIx,
    tasks: &mut Vec<TaskIx>,
    cursor: &mut usize,
    held: Option<&Resource>,
    within: Option<&[NodeIx]>,
    stmt: &mut Statement,
) {
    if ssn.state.job_state[j].sub_groups.is_empty() {
        place(
            ssn,
            q,
            j,
            tasks,
            cursor,
            held,
            within,
            stmt,
            Until::JobReady,
        );
    } else {
        super::subgroup::place_job(ssn, q, j, tasks, cursor, held, within, stmt);
    }
}

/// When [`place`] stops placing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// The gang is ready (or a task found no node and no other can make it ready).
    JobReady,
    /// Every task given is placed (or one found no node: the caller undoes the rest).
    AllPlaced,
}

/// The end of a job's turn: ready, pipelined (kept), or undone.
pub fn finish(ssn: &mut Session, j: JobIx, stmt: Statement) -> Turn {
    if ssn.plugins.job_ready(&ssn.state, j) {
        return Turn::Ready(stmt);
    }
    if !stmt.ops.is_empty() && ssn.plugins.job_pipelined(&ssn.state, j) {
        return Turn::Pipelined;
    }
    ssn.discard(stmt);
    Turn::Discarded
}

/// Places tasks from `tasks` (popped from the end) into `stmt` until `until` says stop or
/// they run out; see [`allocate_job`] for `held` and `within`.
#[allow(clippy::too_many_arguments)]
pub fn place(
    ssn: &mut Session,
    q: QueueIx,
    j: JobIx,
    tasks: &mut Vec<TaskIx>,
    cursor: &mut usize,
    held: Option<&Resource>,
    within: Option<&[NodeIx]>,
    stmt: &mut Statement,
    until: Until,
) {
    let n_nodes = within.map_or(ssn.state.nodes.len(), <[NodeIx]>::len);
    let want = nodes_to_find(n_nodes);
    let mut own_cursor = 0;
    let cursor = if within.is_some() {
        &mut own_cursor
    } else {
        cursor
    };
    let mut failed_roles: BTreeSet<String> = BTreeSet::new();
    let mut candidates: Option<Candidates> = None;
    let mut last_node: Option<NodeIx> = None;
    while let Some(t) = tasks.pop() {
        // A sub-group is placed whole: whether the gang may grow is asked before its first
        // pod only.
        if let Some(from) = ssn.state.jobs[j].grow_from_ms
            && ssn.state.now_ms < from
            && (until == Until::JobReady || stmt.ops.is_empty())
            && ssn.plugins.job_ready(&ssn.state, j)
        {
            // Growing beyond the minimum waits a period after the gang started
            // (`ClusterIndex::set_grow_delay`); a session is due then.
            if from != i64::MAX {
                crate::model::wake_by(&mut ssn.state.wake_at_ms, from);
            }
            tasks.clear();
            break;
        }
        if let Some(h) = held
            && (ssn.state.lending || ssn.plugins.job_ready(&ssn.state, j))
            && !leaves_held_room(&ssn.state, t, h)
        {
            // Growing beyond the minimum, or borrowing, would take room promised to an
            // admitted gang.
            tasks.clear();
            break;
        }
        if !ssn.plugins.allocatable(&ssn.state, q, t) {
            // Volcano skips such a task without a word; the user is told which queue is full.
            let name = ssn.state.tasks[t].name.clone();
            let queue = ssn.state.queues[q].name.clone();
            let limit = if ssn.state.lending {
                "its capability less the other queues' guarantees"
            } else {
                "its deserved share"
            };
            let js = &mut ssn.state.job_state[j];
            js.held_back_by_share = true;
            js.fit_errors.insert(
                t,
                FitErrors::because(format!(
                    "queue {queue} has no room for task {name} within {limit}"
                )),
            );
            continue;
        }
        let role = ssn.state.tasks[t].role.clone();
        if failed_roles.contains(&role) {
            let name = ssn.state.tasks[t].name.clone();
            ssn.state.job_state[j].fit_errors.insert(
                t,
                FitErrors::because(format!(
                    "Task {name} with role spec {role} has already predicated failed, skip"
                )),
            );
            continue;
        }
        // The tasks of a gang are mostly alike (same role, request and constraints): after
        // the first, only the node just used has changed, so the candidates found for the
        // previous task are kept and that one node is looked at again. This is what makes a
        // gang of ten cost about one search instead of ten.
        let reusable = candidates
            .as_ref()
            .is_some_and(|c| c.matches(&ssn.state, &ssn.state.tasks[t]));
        if reusable
            && let (Some(c), Some(n)) = (candidates.as_mut(), last_node)
            && let Some(pos) = c.nodes.iter().position(|e| e.node == n)
        {
            match ssn.predicate(t, n) {
                Ok(()) => c.nodes[pos] = Candidate::new(ssn, t, n),
                Err(_) => {
                    c.nodes.remove(pos);
                }
            }
        }
        if !reusable || candidates.as_ref().is_none_or(|c| c.nodes.is_empty()) {
            // A kind of task searched for over every node is not searched for again: what
            // it fits is kept current (`KindFits`).
            let whole_cluster = within.is_none();
            let known = if whole_cluster {
                ssn.known_fits(q, t, *cursor, want)
            } else {
                None
            };
            let (found, errors) = match known {
                Some((nodes, visited, errors)) => {
                    if n_nodes > 0 {
                        *cursor = (*cursor + visited) % n_nodes;
                    }
                    let found = nodes
                        .into_iter()
                        .map(|n| Candidate::new(ssn, t, n))
                        .collect();
                    (found, errors)
                }
                None => {
                    let remember =
                        whole_cluster && ssn.state.kind_fits.as_ref().is_some_and(KindFits::on);
                    search(ssn, q, t, within, n_nodes, want, cursor, remember)
                }
            };
            if found.is_empty() {
                candidates = None;
                ssn.state.job_state[j].fit_errors.insert(t, errors);
                failed_roles.insert(role);
                if until == Until::JobReady && need_continue(ssn, j, &failed_roles) {
                    continue;
                }
                break;
            }
            candidates = Some(Candidates::new(&ssn.state.tasks[t], found));
        }
        let Some(c) = candidates.as_ref() else {
            continue;
        };
        // Nodes with idle room first; among them the best score, the first on a tie.
        let on_idle = c.nodes.iter().any(|e| e.idle);
        let mut best: Option<&Candidate> = None;
        for e in c.nodes.iter().filter(|e| e.idle || !on_idle) {
            let better = match best {
                None => true,
                // First fit: the first node in the cluster's order, whatever the scores.
                Some(b) if ssn.state.first_fit => e.node < b.node,
                Some(b) => e.score > b.score,
            };
            if better {
                best = Some(e);
            }
        }
        let Some(best) = best.map(|b| b.node) else {
            continue;
        };
        if on_idle {
            ssn.allocate(stmt, t, best);
        } else {
            ssn.pipeline(stmt, t, best);
        }
        last_node = Some(best);
        if until == Until::JobReady && ssn.plugins.job_ready(&ssn.state, j) {
            break;
        }
    }
}

/// Feasible nodes for task `t` (up to `want`), searched from `cursor` (left where the search
/// stopped) over `within` or the whole cluster, and why the others did not fit (made only when
/// none did). With `remember`, a search that visited every node tells the session's
/// [`KindFits`] what it found for the task's kind.
#[allow(clippy::too_many_arguments)]
fn search(
    ssn: &mut Session,
    q: QueueIx,
    t: TaskIx,
    within: Option<&[NodeIx]>,
    n_nodes: usize,
    want: usize,
    cursor: &mut usize,
    remember: bool,
) -> (Vec<Candidate>, FitErrors) {
    let mut found: Vec<Candidate> = Vec::new();
    // Why each node did not fit: most nodes of a large cluster fail most tasks, and a search
    // that finds nodes throws the reasons away, so they are made into errors only when needed.
    let mut unfit: Vec<(NodeIx, String)> = Vec::new();
    let mut checked = 0;
    while checked < n_nodes && found.len() < want {
        let at = (*cursor + checked) % n_nodes;
        let n = within.map_or(NodeIx::new(at), |w| w[at]);
        checked += 1;
        match ssn.predicate(t, n) {
            Ok(()) => found.push(Candidate::new(ssn, t, n)),
            Err(Unfit { reason, .. }) => unfit.push((n, reason)),
        }
    }
    if n_nodes > 0 {
        *cursor = (*cursor + checked) % n_nodes;
    }
    let every_node = remember && checked == n_nodes;
    let mut errors = FitErrors::default();
    if found.is_empty() || every_node {
        for (n, reason) in unfit {
            errors.set(&ssn.state.nodes[n].name, reason);
        }
    }
    if every_node && let Some(kinds) = ssn.state.kind_fits.as_mut() {
        let fits = found.iter().map(|c| c.node).collect();
        kinds.remember(q, t, &ssn.state.tasks[t], fits, errors.clone());
    }
    if !found.is_empty() {
        errors = FitErrors::default();
    }
    (found, errors)
}

/// A feasible node with its score and whether the task fits its idle resources now.
#[derive(Clone, Debug)]
struct Candidate {
    node: NodeIx,
    score: f64,
    idle: bool,
}

impl Candidate {
    /// Node `n`, which task `t` fits, scored for it.
    fn new(ssn: &Session, t: TaskIx, n: NodeIx) -> Self {
        Self {
            node: n,
            score: ssn.plugins.node_score(&ssn.state, t, n),
            idle: ssn.state.fits_idle(t, n),
        }
    }
}

/// The candidates found for one kind of task (role, request, constraints).
#[derive(Debug)]
struct Candidates {
    role: String,
    resreq: crate::resource::Resource,
    constraints: std::sync::Arc<crate::model::Constraints>,
    nodes: Vec<Candidate>,
}

impl Candidates {
    fn new(task: &crate::model::TaskInfo, nodes: Vec<Candidate>) -> Self {
        Self {
            role: task.role.clone(),
            resreq: task.resreq.clone(),
            constraints: task.constraints.clone(),
            nodes,
        }
    }

    /// Would every predicate and score come out the same for `task`?
    fn matches(&self, st: &State, task: &crate::model::TaskInfo) -> bool {
        self.role == task.role
            && self.resreq == task.resreq
            && alike_for_nodes(st, &self.constraints, &task.constraints)
    }
}

/// The highest-scored node; ties go to the first in `nodes` (so the same snapshot always
/// gives the same plan, where Volcano breaks ties at random).
pub fn best_node(ssn: &Session, t: TaskIx, nodes: &[NodeIx]) -> NodeIx {
    if nodes.len() == 1 {
        return nodes[0];
    }
    let mut best = nodes[0];
    let mut best_score = f64::NEG_INFINITY;
    for &n in nodes {
        let s = ssn.plugins.node_score(&ssn.state, t, n);
        if s > best_score {
            best = n;
            best_score = s;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SchedulerConf;
    use crate::testing::{World, pod, podgroup, with_phase};

    /// A gang of two 1-cpu pods labelled by index, as a vcJob's are; with `anti` the first
    /// also keeps away from pods labelled `app: x`.
    fn indexed_gang(anti: bool) -> Session {
        let mut w = World::default().nodes(2, 8, 16);
        w.index.apply_podgroup(&with_phase(
            podgroup("ns", "g", "default", 2, None),
            "Inqueue",
        ));
        for i in 0..2 {
            let mut p = pod("ns", &format!("g-{i}"), "g", 1000, 64);
            p.metadata.labels = Some([("volcano.sh/task-index".to_string(), i.to_string())].into());
            if anti && i == 0 {
                let spec = p.spec.as_mut().expect("spec");
                spec.affinity = Some(
                    serde_json::from_value(serde_json::json!({
                        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                            "labelSelector": {"matchLabels": {"app": "x"}},
                            "topologyKey": "kubernetes.io/hostname"}]}
                    }))
                    .expect("affinity"),
                );
            }
            w.index.apply_pod(&p);
        }
        Session::open(w.index.snapshot(), &SchedulerConf::builtin(), "s".into(), 0)
    }

    /// Alike pods are tried in one order only, and the second of them reuses the nodes found
    /// for the first.
    #[test]
    fn pods_that_differ_only_in_their_labels_are_alike_unless_labels_can_keep_pods_apart() {
        let reuses = |ssn: &Session, tasks: &[TaskIx]| {
            let st = &ssn.state;
            Candidates::new(&st.tasks[tasks[0]], Vec::new()).matches(st, &st.tasks[tasks[1]])
        };
        let ssn = indexed_gang(false);
        let tasks: Vec<TaskIx> = ssn.state.tasks.indices().collect();
        assert_eq!(tasks.len(), 2);
        assert!(!unlike_pods(&ssn.state, &tasks));
        assert!(reuses(&ssn, &tasks));
        let ssn = indexed_gang(true);
        let tasks: Vec<TaskIx> = ssn.state.tasks.indices().collect();
        assert!(unlike_pods(&ssn.state, &tasks));
        assert!(!reuses(&ssn, &tasks));
    }
}
