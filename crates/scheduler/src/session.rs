//! One scheduling session: the snapshot turned into working state, the actions run over it,
//! and what came out (placements, PodGroup and Queue status, events). A pure function of the
//! snapshot and the configuration: [`run`] does no I/O and, given the same snapshot, decides
//! the same plan.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use super::config::SchedulerConf;
use super::framework::{Plugins, Unfit};
use super::index::Snapshot;
use super::ix::{Ix, IxVec, JobIx, NodeIx, QueueIx, TaskIx};
use super::kind_fits::KindFits;
use super::model::{JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus};
use super::resource::{EPSILON, PODS, Resource};

/// Node fit errors of one task, by reason, for the `0/N nodes are unavailable` message.
#[derive(Clone, Debug, Default)]
pub struct FitErrors {
    /// Node name → reasons. Shared: every job of a kind no node fits gets the same copy
    /// (see [`KindFits`]). Changed through [`FitErrors::set`] and [`FitErrors::remove`] only,
    /// which keep `reasons` in step.
    pub nodes: Arc<BTreeMap<String, Vec<String>>>,
    /// A message that replaces the per-node histogram.
    pub err: Option<String>,
    /// The histogram of `nodes`' reasons, worked out at most once for all the copies that
    /// share `nodes`: a pass tells each of a thousand waiting gangs of a few kinds why, and
    /// counting 2,000 nodes' reasons for each was the largest cost of such a pass.
    reasons: Arc<OnceLock<String>>,
}

/// Equal when they say the same: whether the histogram was worked out yet does not count.
impl PartialEq for FitErrors {
    fn eq(&self, other: &Self) -> bool {
        self.nodes == other.nodes && self.err == other.err
    }
}

impl Eq for FitErrors {}

impl FitErrors {
    /// Errors told by one message instead of a histogram of nodes' reasons.
    pub fn because(err: String) -> Self {
        FitErrors {
            err: Some(err),
            ..FitErrors::default()
        }
    }

    /// Makes `reason` the one reason recorded for `node` (the map is copied only when that
    /// changes it and others share it).
    pub fn set(&mut self, node: &str, reason: String) {
        if self
            .nodes
            .get(node)
            .is_some_and(|r| r.len() == 1 && r[0] == reason)
        {
            return;
        }
        Arc::make_mut(&mut self.nodes).insert(node.to_string(), vec![reason]);
        self.reasons = Arc::default();
    }

    /// Forgets `node` (it fits now).
    pub fn remove(&mut self, node: &str) {
        if self.nodes.contains_key(node) {
            Arc::make_mut(&mut self.nodes).remove(node);
            self.reasons = Arc::default();
        }
    }

    /// Volcano's wording: `0/3 nodes are unavailable: 3 Insufficient cpu.`
    pub fn message(&self) -> String {
        let head = self
            .err
            .clone()
            .unwrap_or_else(|| format!("0/{} nodes are unavailable", self.nodes.len()));
        if self.nodes.is_empty() {
            return head;
        }
        let reasons = self.reasons.get_or_init(|| {
            let mut hist: BTreeMap<&str, usize> = BTreeMap::new();
            for reasons in self.nodes.values() {
                for r in reasons {
                    *hist.entry(r).or_default() += 1;
                }
            }
            histogram(hist)
        });
        format!("{head}: {reasons}.")
    }
}

/// `"<count> <reason>"` items, sorted as strings, joined with `, ` (Volcano's order).
pub fn histogram<K: std::fmt::Display>(hist: impl IntoIterator<Item = (K, usize)>) -> String {
    let mut items: Vec<String> = hist.into_iter().map(|(k, v)| format!("{v} {k}")).collect();
    items.sort();
    items.join(", ")
}

/// An Event the session wants recorded on a PodGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionEvent {
    /// The job.
    pub job: JobIx,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// Per-job working data.
#[derive(Clone, Debug, Default)]
pub struct JobState {
    /// Task counts by status.
    pub counts: HashMap<TaskStatus, u32>,
    /// Resources of allocated-status tasks.
    pub allocated: Resource,
    /// Node fit errors by task index.
    pub fit_errors: BTreeMap<TaskIx, FitErrors>,
    /// Why the job as a whole could not go on (enqueue refused, invalid).
    pub job_fit_error: Option<String>,
    /// The condition the gang plugin decided at close: (type, reason, message).
    pub condition: Option<(String, String, String)>,
    /// Enqueued in this session.
    pub enqueued: bool,
    /// The enqueue action considered the job and refused it this session (`job_fit_error`
    /// says why).
    pub enqueue_refused: bool,
    /// The refusal is for the queue's state (not Open), not for room: it does not take
    /// turns with other refusals as pods start and end, so its condition is written at once.
    pub refused_for_queue_state: bool,
    /// The allocate action passed over a task of the job for its queue's share (the queue was
    /// overused, or the task did not fit within the share): the job may borrow in the lending
    /// pass.
    pub held_back_by_share: bool,
    /// The gang's sub-groups (its PodGroup's `subGroupPolicy`), fixed for the session.
    pub sub_groups: Vec<crate::subgroup::SubGroup>,
}

impl JobState {
    fn count(&self, s: TaskStatus) -> u32 {
        self.counts.get(&s).copied().unwrap_or(0)
    }
}

/// What a task went through last in this session (for the reasons shown to users).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastTransaction {
    /// The status it reached.
    pub status: TaskStatus,
    /// On which node.
    pub node: String,
}

/// The session's working state. Plugins read it; actions change it through [`Session`].
#[derive(Debug)]
pub struct State {
    /// Session id (`transitionID` of the conditions it writes).
    pub id: String,
    /// Nodes.
    pub nodes: IxVec<NodeIx, NodeInfo>,
    /// Node index by name.
    pub node_index: HashMap<String, NodeIx>,
    /// Jobs.
    pub jobs: IxVec<JobIx, JobInfo>,
    /// Per-job working data, parallel to `jobs`.
    pub job_state: IxVec<JobIx, JobState>,
    /// Tasks.
    pub tasks: IxVec<TaskIx, TaskInfo>,
    /// The job of each task, parallel to `tasks` (a snapshot holds only tasks of its jobs).
    pub task_job: IxVec<TaskIx, JobIx>,
    /// Queues.
    pub queues: IxVec<QueueIx, QueueInfo>,
    /// Queue index by name.
    pub queue_index: HashMap<String, QueueIx>,
    /// The HyperNodes: where a gang with a network topology may be placed.
    pub topology: crate::topology::Topology,
    /// Every namespace's ResourceQuotas.
    pub quotas: Vec<crate::model::QuotaInfo>,
    /// Every PodDisruptionBudget.
    pub budgets: Vec<crate::model::BudgetInfo>,
    /// The queue of each job, parallel to `jobs`; `None` when no queue has its name.
    pub job_queue: IxVec<JobIx, Option<QueueIx>>,
    /// Allocatable of every usable node (Ready and not cordoned).
    pub total: Resource,
    /// Events to record.
    pub events: Vec<SessionEvent>,
    /// Last transaction per task.
    pub last_tx: HashMap<TaskIx, LastTransaction>,
    /// Committed placements: task → node.
    pub placements: Vec<(TaskIx, String)>,
    /// Committed evictions: task, reason.
    pub evictions: Vec<(TaskIx, String)>,
    /// `enqueue` is among the configured actions.
    pub has_enqueue: bool,
    /// Queue figures the proportion plugin reports at close, by queue index.
    pub queue_report: HashMap<QueueIx, QueueReport>,
    /// The session's time, milliseconds since the epoch (time-dependent plugins read it, never
    /// the clock, so a session stays a function of its inputs).
    pub now_ms: i64,
    /// The allocate action's lending pass is running: queues may take room beyond their
    /// deserved share, up to their capability (see [`crate::actions::allocate`]).
    pub lending: bool,
    /// The allocate action is placing on the first node that fits rather than the best
    /// scored (its last try for a gang of unlike pods).
    pub first_fit: bool,
    /// The earliest later time at which a time-dependent plugin would decide otherwise on the
    /// same snapshot (an sla waiting time running out), milliseconds since the epoch: the
    /// runner holds a session for then even when nothing else changes.
    pub wake_at_ms: Option<i64>,
    /// Some task has required pod anti-affinity: then where a pod fits depends on other pods
    /// and on the labels of each, not on its node constraints alone.
    pub anti_affinity: bool,
    /// While the allocate action runs: which nodes each kind of task it searched every node
    /// for fits.
    pub kind_fits: Option<KindFits>,
}

/// A queue's figures at session close (for status and metrics).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueReport {
    /// Deserved share.
    pub deserved: Resource,
    /// Allocated.
    pub allocated: Resource,
    /// Allocated plus pending.
    pub request: Resource,
    /// Reserved for admitted gangs.
    pub inqueue: Resource,
    /// Capability (the cluster total when unset).
    pub capability: Resource,
    /// Real capability.
    pub real_capability: Resource,
    /// Dominant share of deserved.
    pub share: f64,
    /// Holds more than its deserved share in some resource (`volcano_queue_overused`). The
    /// allocate action's "overused" test is wider (at its share counts, so an idle queue
    /// that deserves nothing is passed over), but a dashboard showing every idle queue as
    /// overused would only alarm.
    pub overused: bool,
}

/// Leaves only the tasks some job lists, renumbered in order. A snapshot from the index has no
/// other (it builds its tasks from its jobs); one put together by hand might, and a task
/// without a job has no place in a session.
fn drop_tasks_outside_jobs(jobs: &mut IxVec<JobIx, JobInfo>, tasks: &mut IxVec<TaskIx, TaskInfo>) {
    let listed: usize = jobs.iter().map(|j| j.tasks.len()).sum();
    if listed == tasks.len() {
        return;
    }
    let mut old: Vec<Option<TaskInfo>> = std::mem::take(tasks).into_iter().map(Some).collect();
    for job in jobs.iter_mut() {
        job.tasks = job
            .tasks
            .iter()
            .filter_map(|t| old.get_mut(t.index()).and_then(Option::take))
            .map(|t| tasks.push(t))
            .collect();
    }
}

impl State {
    /// Builds the working state from a snapshot at `now_ms` (milliseconds since the epoch).
    /// Jobs whose queue is unknown were already dropped by the snapshot.
    pub fn new(snapshot: Snapshot, id: String, conf: &SchedulerConf, now_ms: i64) -> Self {
        let Snapshot {
            nodes,
            mut jobs,
            mut tasks,
            queues,
            topology,
            quotas,
            budgets,
            ..
        } = snapshot;
        let node_index = nodes
            .iter_enumerated()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let queue_index: HashMap<String, QueueIx> = queues
            .iter_enumerated()
            .map(|(i, q)| (q.name.clone(), i))
            .collect();
        drop_tasks_outside_jobs(&mut jobs, &mut tasks);
        discount_finished_pods(&mut jobs, &tasks);
        let mut task_job: IxVec<TaskIx, Option<JobIx>> = IxVec::from_elem(None, tasks.len());
        let mut job_state: IxVec<JobIx, JobState> =
            IxVec::from_elem(JobState::default(), jobs.len());
        let mut job_queue = IxVec::new();
        for (j, job) in jobs.iter_enumerated() {
            job_queue.push(queue_index.get(&job.queue).copied());
            for &t in &job.tasks {
                task_job[t] = Some(j);
                let task = &tasks[t];
                *job_state[j].counts.entry(task.status).or_default() += 1;
                if task.status.is_allocated() {
                    job_state[j].allocated.add(&task.resreq);
                }
            }
            job_state[j].sub_groups = crate::subgroup::sub_groups(job, &tasks);
        }
        // Every task is one of a job's now, so no `None` is left to replace.
        let task_job = task_job
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        let anti_affinity = tasks
            .iter()
            .any(|t| !t.constraints.anti_affinity.is_empty());
        let mut total = Resource::zero();
        for n in nodes.iter().filter(|n| n.ready && !n.unschedulable) {
            total.add(&n.allocatable);
        }
        Self {
            id,
            nodes,
            node_index,
            jobs,
            job_state,
            tasks,
            task_job,
            queues,
            queue_index,
            topology,
            quotas,
            budgets,
            job_queue,
            total,
            events: Vec::new(),
            last_tx: HashMap::new(),
            placements: Vec::new(),
            evictions: Vec::new(),
            has_enqueue: conf.has_action("enqueue"),
            queue_report: HashMap::new(),
            now_ms,
            lending: false,
            first_fit: false,
            wake_at_ms: None,
            anti_affinity,
            kind_fits: None,
        }
    }

    /// Sets a task's status, keeping the job's counts and allocation in step.
    pub fn set_status(&mut self, t: TaskIx, status: TaskStatus) {
        let old = self.tasks[t].status;
        if old == status {
            return;
        }
        let js = &mut self.job_state[self.task_job[t]];
        if let Some(c) = js.counts.get_mut(&old) {
            *c = c.saturating_sub(1);
        }
        *js.counts.entry(status).or_default() += 1;
        let req = &self.tasks[t].resreq;
        match (old.is_allocated(), status.is_allocated()) {
            (false, true) => {
                js.allocated.add(req);
            }
            (true, false) => {
                js.allocated.sub(req);
            }
            _ => {}
        }
        self.tasks[t].status = status;
    }

    /// Count of a job's tasks in a status.
    pub fn count(&self, j: JobIx, s: TaskStatus) -> u32 {
        self.job_state[j].count(s)
    }

    /// Bound + Binding + Running + Allocated + Succeeded.
    pub fn ready_task_num(&self, j: JobIx) -> u32 {
        use TaskStatus::*;
        [Bound, Binding, Running, Allocated, Succeeded]
            .iter()
            .map(|s| self.count(j, *s))
            .sum()
    }

    /// `res` less what the job's scheduling-gated pending pods request (never below zero):
    /// gated pods hold nothing yet, so the room an admitted gang is counted for excludes them
    /// (Volcano's `DeductSchGatedResources`, used by overcommit and proportion alike).
    pub fn deduct_gated(&self, j: JobIx, res: &Resource) -> Resource {
        let mut r = res.clone();
        for &t in &self.jobs[j].tasks {
            let task = &self.tasks[t];
            if task.gated && task.status == TaskStatus::Pending {
                r.sub(&task.resreq);
            }
        }
        r
    }

    /// The job's pods still without a node (Pending, placed by no statement): the `N` of
    /// `N/M tasks in gang unschedulable`, never more than its pods `M`.
    pub fn unplaced(&self, j: JobIx) -> usize {
        self.jobs[j]
            .tasks
            .iter()
            .filter(|&&t| self.tasks[t].status == TaskStatus::Pending)
            .count()
    }

    /// Pending tasks that request nothing.
    pub fn pending_best_effort(&self, j: JobIx) -> u32 {
        self.jobs[j]
            .tasks
            .iter()
            .filter(|&&t| {
                self.tasks[t].status == TaskStatus::Pending && self.tasks[t].best_effort()
            })
            .count() as u32
    }

    /// Allocated-status + Succeeded + Pipelined + Pending.
    pub fn valid_task_num(&self, j: JobIx) -> u32 {
        use TaskStatus::*;
        [
            Allocated, Binding, Bound, Running, Succeeded, Pipelined, Pending,
        ]
        .iter()
        .map(|s| self.count(j, *s))
        .sum()
    }

    /// Enough tasks placed for the gang.
    pub fn is_ready(&self, j: JobIx) -> bool {
        (self.ready_task_num(j) + self.pending_best_effort(j)) as i64
            >= self.jobs[j].min_available as i64
    }

    /// Enough placed or promised.
    pub fn is_pipelined(&self, j: JobIx) -> bool {
        (self.count(j, TaskStatus::Pipelined)
            + self.ready_task_num(j)
            + self.pending_best_effort(j)) as i64
            >= self.jobs[j].min_available as i64
    }

    /// Wants more than it has.
    pub fn is_starving(&self, j: JobIx) -> bool {
        ((self.count(j, TaskStatus::Pipelined) + self.ready_task_num(j)) as i64)
            < self.jobs[j].min_available as i64
    }

    fn role_counts(&self, j: JobIx, pred: impl Fn(&TaskInfo) -> bool) -> BTreeMap<&str, i32> {
        let mut m: BTreeMap<&str, i32> = BTreeMap::new();
        for &t in &self.jobs[j].tasks {
            let task = &self.tasks[t];
            if pred(task) {
                *m.entry(task.role.as_str()).or_default() += 1;
            }
        }
        m
    }

    fn check_roles(&self, j: JobIx, pred: impl Fn(&TaskInfo) -> bool) -> bool {
        let job = &self.jobs[j];
        let sum: i64 = job.task_min_available.values().map(|v| *v as i64).sum();
        if (job.min_available as i64) < sum {
            return true;
        }
        let counts = self.role_counts(j, pred);
        job.task_min_available
            .iter()
            .filter(|(_, min)| **min > 0)
            .all(|(role, min)| counts.get(role.as_str()).copied().unwrap_or(0) >= *min)
    }

    /// Every role with a minimum has enough valid tasks.
    pub fn check_task_valid(&self, j: JobIx) -> bool {
        self.check_roles(j, |t| {
            t.status.is_allocated()
                || matches!(
                    t.status,
                    TaskStatus::Succeeded | TaskStatus::Pipelined | TaskStatus::Pending
                )
        })
    }

    /// Every role with a minimum has enough ready tasks.
    pub fn check_task_ready(&self, j: JobIx) -> bool {
        self.check_roles(j, |t| {
            t.status.is_allocated()
                || t.status == TaskStatus::Succeeded
                || (t.status == TaskStatus::Pending && t.resreq.is_empty())
        })
    }

    /// Every role with a minimum has enough ready or pipelined tasks.
    pub fn check_task_pipelined(&self, j: JobIx) -> bool {
        self.check_roles(j, |t| {
            t.status.is_allocated()
                || matches!(t.status, TaskStatus::Succeeded | TaskStatus::Pipelined)
                || (t.status == TaskStatus::Pending && t.resreq.is_empty())
        })
    }

    /// Volcano's job fit-error text for a job that is not ready.
    pub fn fit_error(&self, j: JobIx) -> String {
        let mut hist: BTreeMap<String, usize> = BTreeMap::new();
        for (s, c) in &self.job_state[j].counts {
            if *c > 0 {
                *hist.entry(s.as_str().to_string()).or_default() += *c as usize;
            }
        }
        hist.insert(
            "minAvailable".into(),
            self.jobs[j].min_available.max(0) as usize,
        );
        let ready = if self.is_ready(j) {
            "pod group is ready"
        } else {
            "pod group is not ready"
        };
        let mut msg = format!("{ready}, {}", histogram(hist));
        let mut pending: BTreeMap<&str, usize> = BTreeMap::new();
        for &t in &self.jobs[j].tasks {
            if self.tasks[t].status == TaskStatus::Pending {
                *pending.entry(self.task_reason(t).0).or_default() += 1;
            }
        }
        if !pending.is_empty() {
            msg.push_str(&format!("; Pending: {}", histogram(pending)));
        }
        let js = &self.job_state[j];
        if let Some(e) = &js.job_fit_error {
            msg.push_str(&format!(". Origin reason is: {e}"));
        } else if let Some(&t) = self.jobs[j]
            .tasks
            .iter()
            .find(|t| js.fit_errors.contains_key(t))
        {
            msg.push_str(&format!(
                ". Origin reason is {}: {}",
                self.tasks[t].name,
                js.fit_errors[&t].message()
            ));
        }
        msg
    }

    /// Why a pending task is where it is: (reason, message), Volcano's `TaskSchedulingReason`.
    pub fn task_reason(&self, t: TaskIx) -> (&'static str, String) {
        let task = &self.tasks[t];
        let j = self.task_job[t];
        let job_msg = self.job_state[j].job_fit_error.clone().unwrap_or_default();
        match self.last_tx.get(&t) {
            Some(tx) if tx.status == TaskStatus::Allocated => (
                "Schedulable",
                format!(
                    "Pod {}/{} can possibly be assigned to {}, once minAvailable is satisfied",
                    task.namespace, task.name, tx.node
                ),
            ),
            Some(tx) if tx.status == TaskStatus::Pipelined => (
                "Unschedulable",
                format!(
                    "Pod {}/{} can possibly be assigned to {}, once resource is released and minAvailable is satisfied",
                    task.namespace, task.name, tx.node
                ),
            ),
            _ => match self.job_state[j].fit_errors.get(&t) {
                Some(fe) => ("Unschedulable", fe.message()),
                None => ("Unschedulable", job_msg),
            },
        }
    }

    /// Does the task's request fit in the node's idle resources?
    pub fn fits_idle(&self, t: TaskIx, n: NodeIx) -> bool {
        let node = &self.nodes[n];
        fits(&self.tasks[t].resreq, |d| {
            node.allocatable.get(d) - node.used.get(d)
        })
    }

    /// Does the task's request fit in the node's future-idle resources?
    pub fn fits_future_idle(&self, t: TaskIx, n: NodeIx) -> bool {
        let node = &self.nodes[n];
        fits(&self.tasks[t].resreq, |d| {
            node.allocatable.get(d) - node.used.get(d) + node.releasing.get(d)
                - node.pipelined.get(d)
        })
    }

    /// The first dimension the task does not fit in the node's future-idle resources.
    pub fn insufficient(&self, t: TaskIx, n: NodeIx) -> Option<String> {
        let node = &self.nodes[n];
        let req = &self.tasks[t].resreq;
        req.dimensions()
            .find(|d| {
                let free = node.allocatable.get(d) - node.used.get(d) + node.releasing.get(d)
                    - node.pipelined.get(d);
                let want = req.get(d);
                want > 0.0 && want > free + EPSILON
            })
            .map(str::to_string)
    }
}

/// `req ≤ free(d)` for every dimension `req` has (a missing scalar is free 0).
fn fits(req: &Resource, free: impl Fn(&str) -> f64) -> bool {
    req.dimensions().all(|d| {
        let want = req.get(d);
        want <= 0.0 || want <= free(d) + EPSILON
    })
}

/// A gang's pods that finished count towards its minimum and hold nothing: what they asked
/// for is taken off the gang's `minResources`, in the dimensions it names, so that admission,
/// the room promised to admitted gangs and namespace quotas count only what the gang still
/// needs. (Volcano keeps the declared minimum, so a gang whose first pods are done, then
/// preempted, waits for admission room it will never use.)
fn discount_finished_pods(jobs: &mut IxVec<JobIx, JobInfo>, tasks: &IxVec<TaskIx, TaskInfo>) {
    for job in jobs.iter_mut() {
        let Some(min) = job.min_resources.as_mut() else {
            continue;
        };
        for &t in &job.tasks {
            let task = &tasks[t];
            if task.status != TaskStatus::Succeeded {
                continue;
            }
            let r = &task.resreq;
            min.milli_cpu = (min.milli_cpu - r.milli_cpu).max(0.0);
            min.memory = (min.memory - r.memory).max(0.0);
            for (k, v) in min.scalars.iter_mut() {
                *v = (*v - r.scalars.get(k).copied().unwrap_or(0.0)).max(0.0);
            }
        }
    }
}

/// One operation of a [`Statement`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Task placed on a node with its resources free now.
    Allocate(TaskIx, NodeIx),
    /// Task promised a node once releasing resources are free.
    Pipeline(TaskIx, NodeIx),
    /// Task to be evicted for the statement's job.
    Evict(TaskIx, String),
}

/// Tentative changes for one job, committed only when the whole gang is ready.
#[derive(Clone, Debug, Default)]
pub struct Statement {
    /// Operations in order.
    pub ops: Vec<Op>,
}

/// State plus plugins: what the actions work on.
pub struct Session {
    /// The working state.
    pub state: State,
    /// The configured plugins.
    pub plugins: Plugins,
    /// The configuration.
    pub conf: SchedulerConf,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.state.id)
            .field("plugins", &self.plugins)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Opens a session at `now_ms` (milliseconds since the epoch): state from the snapshot,
    /// plugins from the configuration.
    pub fn open(snapshot: Snapshot, conf: &SchedulerConf, id: String, now_ms: i64) -> Self {
        let state = State::new(snapshot, id, conf, now_ms);
        let mut plugins = Plugins::from_conf(conf);
        plugins.open(&state);
        Self {
            state,
            plugins,
            conf: conf.clone(),
        }
    }

    /// Places a task on a node with its idle resources.
    pub fn allocate(&mut self, stmt: &mut Statement, t: TaskIx, n: NodeIx) {
        self.place(t, n, TaskStatus::Allocated);
        stmt.ops.push(Op::Allocate(t, n));
    }

    /// Promises a task a node's releasing resources.
    pub fn pipeline(&mut self, stmt: &mut Statement, t: TaskIx, n: NodeIx) {
        self.place(t, n, TaskStatus::Pipelined);
        stmt.ops.push(Op::Pipeline(t, n));
    }

    /// Books a task on a node as Allocated (idle resources) or Pipelined (future ones).
    fn place(&mut self, t: TaskIx, n: NodeIx, status: TaskStatus) {
        let st = &mut self.state;
        let req = st.tasks[t].resreq.clone();
        let node = &mut st.nodes[n];
        if status == TaskStatus::Pipelined {
            node.pipelined.add(&req);
        } else {
            node.used.add(&req);
            node.used_ports
                .extend(st.tasks[t].constraints.host_ports.iter().cloned());
        }
        node.task_count += 1;
        let name = node.name.clone();
        if let Some(k) = st.kind_fits.as_mut() {
            k.changed(n);
        }
        st.tasks[t].node = Some(name.clone());
        st.set_status(t, status);
        st.last_tx.insert(t, LastTransaction { status, node: name });
        self.plugins.on_allocate(&self.state, t);
    }

    /// Marks a running task for eviction (its resources become releasing).
    pub fn evict(&mut self, stmt: &mut Statement, t: TaskIx, reason: &str) {
        let st = &mut self.state;
        if let Some(n) = st.tasks[t]
            .node
            .as_ref()
            .and_then(|n| st.node_index.get(n))
            .copied()
        {
            let req = st.tasks[t].resreq.clone();
            st.nodes[n].releasing.add(&req);
        }
        st.set_status(t, TaskStatus::Releasing);
        stmt.ops.push(Op::Evict(t, reason.to_string()));
        self.plugins.on_deallocate(&self.state, t);
    }

    /// Undoes a statement in reverse order.
    pub fn discard(&mut self, stmt: Statement) {
        for op in stmt.ops.into_iter().rev() {
            match op {
                Op::Allocate(t, n) | Op::Pipeline(t, n) => {
                    let pipelined = matches!(op, Op::Pipeline(..));
                    let st = &mut self.state;
                    let req = st.tasks[t].resreq.clone();
                    let node = &mut st.nodes[n];
                    if pipelined {
                        node.pipelined.sub(&req);
                    } else {
                        node.used.sub(&req);
                        for p in &st.tasks[t].constraints.host_ports {
                            if let Some(i) = node.used_ports.iter().position(|q| q == p) {
                                node.used_ports.swap_remove(i);
                            }
                        }
                    }
                    node.task_count = node.task_count.saturating_sub(1);
                    if let Some(k) = st.kind_fits.as_mut() {
                        k.changed(n);
                    }
                    st.tasks[t].node = None;
                    st.set_status(t, TaskStatus::Pending);
                    self.plugins.on_deallocate(&self.state, t);
                }
                Op::Evict(t, _) => {
                    let st = &mut self.state;
                    if let Some(n) = st.tasks[t]
                        .node
                        .as_ref()
                        .and_then(|n| st.node_index.get(n))
                        .copied()
                    {
                        let req = st.tasks[t].resreq.clone();
                        st.nodes[n].releasing.sub(&req);
                    }
                    st.set_status(t, TaskStatus::Running);
                    self.plugins.on_allocate(&self.state, t);
                }
            }
        }
    }

    /// Up to `want` nodes task `t` of queue `q` fits, in the order a search of the whole
    /// cluster from `cursor` visits them, with how many nodes that search visits and, when
    /// none fits, why; from what the allocate action knows of the task's kind
    /// ([`KindFits`]), the nodes changed since brought up to date. `None` when its kind has
    /// not been searched for yet.
    pub fn known_fits(
        &mut self,
        q: QueueIx,
        t: TaskIx,
        cursor: usize,
        want: usize,
    ) -> Option<(Vec<NodeIx>, usize, FitErrors)> {
        let mut kinds = self.state.kind_fits.take()?;
        let known = kinds.kind_of(q, &self.state.tasks[t]).map(|(k, stale)| {
            for n in stale {
                let answer = self.predicate(k.task, n).map_err(|u| u.reason);
                k.update(n, &self.state.nodes[n].name, answer);
            }
            let (nodes, visited) = k.pick(cursor, want, self.state.nodes.len());
            let errors = if nodes.is_empty() {
                k.errors.clone()
            } else {
                FitErrors::default()
            };
            (nodes, visited, errors)
        });
        self.state.kind_fits = Some(kinds);
        known
    }

    /// Makes a statement's allocations placements (tasks become Binding) and its evictions
    /// real; pipelined tasks stay promised for the rest of the session.
    pub fn commit(&mut self, stmt: Statement) {
        for op in stmt.ops {
            match op {
                Op::Allocate(t, n) => {
                    let node = self.state.nodes[n].name.clone();
                    self.state.set_status(t, TaskStatus::Binding);
                    self.state.placements.push((t, node));
                }
                Op::Pipeline(..) => {}
                Op::Evict(t, reason) => self.state.evictions.push((t, reason)),
            }
        }
    }

    /// Predicates a task on a node: resources against future-idle, then the plugins.
    pub fn predicate(&self, t: TaskIx, n: NodeIx) -> Result<(), Unfit> {
        if let Some(d) = self.state.insufficient(t, n) {
            return Err(Unfit::resolvable(format!("Insufficient {d}")));
        }
        self.plugins.predicate(&self.state, t, n)
    }
}

/// A task slot on the `pods` scalar (used by tests and the bench to build nodes).
pub fn pods_capacity(n: u32) -> Resource {
    Resource::zero().with_scalar(PODS, n as f64 * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::FitErrors;

    #[test]
    fn copies_of_fit_errors_tell_their_own_nodes_after_one_changes() {
        let mut kind = FitErrors::default();
        kind.set("n1", "Insufficient cpu".into());
        kind.set(
            "n2",
            "node(s) didn't match Pod's node affinity/selector".into(),
        );
        let copy = kind.clone();
        let both = "0/2 nodes are unavailable: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector.";
        assert_eq!(kind.message(), both);
        assert_eq!(copy.message(), both, "a copy shares what was worked out");
        kind.set("n2", "Insufficient cpu".into());
        assert_eq!(
            kind.message(),
            "0/2 nodes are unavailable: 2 Insufficient cpu."
        );
        assert_eq!(copy.message(), both, "the copy's nodes did not change");
        kind.remove("n1");
        assert_eq!(
            kind.message(),
            "0/1 nodes are unavailable: 1 Insufficient cpu."
        );
        assert_ne!(kind, copy);
        assert_eq!(copy, copy.clone(), "the worked-out text does not count");
        assert_eq!(
            FitErrors::because("queue q is closed".into()).message(),
            "queue q is closed"
        );
    }
}
