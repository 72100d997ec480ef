//! What a session decides, as plain data for the writers and the extender: the plan (pod →
//! node, and each gang's verdict), PodGroup and Queue status changes (only those that really
//! change), Events and evictions.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::actions;
use super::config::SchedulerConf;
use super::index::{Orphan, Snapshot};
use super::ix::{IxVec, JobIx, QueueIx};
use super::model::{JobId, JobInfo, TaskStatus, wake_by};
use super::resource::{PODS, Resource};
use super::session::{QueueReport, Session, State};
use tephra_api::scheduling::{
    PodGroupCondition, PodGroupConditionType, PodGroupPhase, PodGroupStatus,
};
use tephra_api::{ResourceList, keys};

/// Where one pod goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Node name.
    pub node: String,
    /// The gang.
    pub job: JobId,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
}

/// A gang's verdict in this session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `minMember` tasks are placed or running.
    Ready,
    /// Not admitted or cannot fit whole; the condition message (`N/M tasks in gang
    /// unschedulable: ...`).
    Waiting(String),
}

/// The plan the extender answers from.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Session id.
    pub session_id: String,
    /// Pod uid → placement, for every task placed this session.
    pub placements: HashMap<String, Placement>,
    /// Gang → verdict.
    pub gangs: HashMap<JobId, Verdict>,
    /// `minMember` of each gang.
    pub min_member: HashMap<JobId, i32>,
}

/// A PodGroup whose status changed.
#[derive(Clone, Debug, PartialEq)]
pub struct PodGroupUpdate {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The PodGroup's uid (a PodGroup made again under the same name is another object).
    pub uid: String,
    /// The whole new status.
    pub status: PodGroupStatus,
    /// The phase differs from the one the session started from. A phase change is what
    /// others wait for (the Job controller makes a gang's pods once it leaves `Pending`), so
    /// the writer writes these before updates that only reword a condition or recount tasks.
    pub phase_changed: bool,
}

/// A Queue whose `status.allocated` changed.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueUpdate {
    /// Queue name.
    pub name: String,
    /// The new `status.allocated`.
    pub allocated: ResourceList,
}

/// An Event to record on a PodGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangEvent {
    /// PodGroup namespace.
    pub namespace: String,
    /// PodGroup name.
    pub name: String,
    /// PodGroup uid.
    pub uid: String,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// A pod to evict (preempt, reclaim).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Uid.
    pub uid: String,
    /// Why.
    pub reason: String,
}

/// Figures for the metrics.
#[derive(Clone, Debug, Default)]
pub struct SessionFigures {
    /// Milliseconds per action.
    pub action_ms: Vec<(String, f64)>,
    /// Queue figures by queue name.
    pub queues: BTreeMap<String, QueueReport>,
    /// Unschedulable task count per job (jobs not ready).
    pub unschedulable_tasks: BTreeMap<JobId, u32>,
    /// Gangs by phase after the session.
    pub phases: BTreeMap<String, u32>,
    /// Jobs seen.
    pub jobs: usize,
    /// Nodes seen.
    pub nodes: usize,
}

/// The last session's figures per queue, and when it closed: what a reader outside the
/// session (the web view) shows of the queues' shares. Only the leader runs sessions.
#[derive(Clone, Debug, Default)]
pub struct QueueFigures {
    /// When the session closed, in milliseconds since the epoch.
    pub at_ms: i64,
    /// Deserved share, allocation and the rest, by queue name.
    pub queues: BTreeMap<String, QueueReport>,
}

/// Everything a session decided.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The plan.
    pub plan: Plan,
    /// PodGroups whose status changes.
    pub podgroups: Vec<PodGroupUpdate>,
    /// Queues whose allocation changes.
    pub queues: Vec<QueueUpdate>,
    /// Events.
    pub events: Vec<GangEvent>,
    /// Evictions.
    pub evictions: Vec<Eviction>,
    /// Figures.
    pub figures: SessionFigures,
    /// When the same snapshot would be decided otherwise (milliseconds since the epoch): a
    /// time-dependent plugin's next deadline (an sla waiting time running out).
    pub wake_at_ms: Option<i64>,
}

/// Runs a whole session: open, every configured action in order, close. `now` stamps
/// condition transition times; `id` is the session's transition id.
pub fn run_session(mut snapshot: Snapshot, conf: &SchedulerConf, id: &str, now: Time) -> Outcome {
    let orphans = std::mem::take(&mut snapshot.orphans);
    let mut ssn = Session::open(snapshot, conf, id.to_string(), now.0.as_millisecond());
    let mut action_ms = Vec::new();
    for action in conf.action_names() {
        let start = Instant::now();
        actions::run(&mut ssn, &action);
        action_ms.push((action, start.elapsed().as_secs_f64() * 1000.0));
    }
    ssn.plugins.close(&mut ssn.state);
    let mut out = close(&ssn.state, now.clone());
    for orphan in &orphans {
        tell_orphan(orphan, id, &now, &mut out);
    }
    out.figures.action_ms = action_ms;
    if let Some(at) = ssn.state.wake_at_ms {
        wake_by(&mut out.wake_at_ms, at);
    }
    out
}

/// A waiting gang's condition is reworded (the same type, status and reason, another message)
/// at most this often. Its message names figures and which of several rules refused it, and as
/// pods start and end elsewhere those take turns from one session to the next: rewriting at
/// every turn wrote each waiting PodGroup dozens of times a minute and loaded the API server
/// that the pods' own writes need.
pub const REWORD_AFTER_MS: i64 = 10_000;

/// The rewordings per second that all waiting PodGroups together are held to, on average: with
/// more than `REWORDS_PER_SECOND × 10` gangs waiting, each keeps its wording longer than
/// [`REWORD_AFTER_MS`] ([`reword_after_ms`]). With 1,500 gangs waiting for a pool of 20 nodes,
/// rewording each every 10 s took 150 writes a second, most of the PodGroup writes of the run,
/// from the kube-apiserver the pods' own writes needed.
pub const REWORDS_PER_SECOND: i64 = 20;

/// How long a waiting gang's condition keeps its wording when `waiting` PodGroups say they
/// wait: [`REWORD_AFTER_MS`], or as long as it takes [`REWORDS_PER_SECOND`] to reword them all.
/// A change of phase, condition status or reason is written at once whatever this says.
pub fn reword_after_ms(waiting: usize) -> i64 {
    let waiting = i64::try_from(waiting).unwrap_or(i64::MAX);
    REWORD_AFTER_MS.max(waiting.saturating_mul(1000) / REWORDS_PER_SECOND)
}

/// The message of a PodGroup status's `Unschedulable` condition that is `True`: why the gang
/// says it waits. `None` when it says nothing (no such condition, or an empty message).
pub(crate) fn unschedulable_message(status: &PodGroupStatus) -> Option<&str> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| {
            c.type_.as_ref().map(|t| t.as_str()) == Some("Unschedulable")
                && c.status.as_deref() == Some("True")
        })
        .and_then(|c| c.message.as_deref())
        .filter(|m| !m.is_empty())
}

/// How many PodGroups say why they wait: those whose wording may change from one session to
/// the next.
fn said_waiting(st: &State) -> usize {
    st.jobs
        .iter()
        .filter(|job| {
            job.podgroup
                .status
                .as_ref()
                .and_then(unschedulable_message)
                .is_some()
        })
        .count()
}

/// When `new` differs from `old` only in the messages of conditions whose type, status and
/// reason are unchanged, all reworded less than `after_ms` ago: the time the oldest of them
/// may be reworded (milliseconds since the epoch). `None` when the change is anything else,
/// or may be written now.
fn reword_later(
    old: &PodGroupStatus,
    new: &PodGroupStatus,
    now_ms: i64,
    after_ms: i64,
) -> Option<i64> {
    let olds = old.conditions.as_deref().unwrap_or_default();
    let mut kept = new.clone();
    let mut due: Option<i64> = None;
    for c in kept.conditions.iter_mut().flatten() {
        let Some(o) = olds.iter().find(|o| o.type_ == c.type_) else {
            continue;
        };
        if o.status != c.status || o.reason != c.reason || o.message == c.message {
            continue;
        }
        let at = o.last_transition_time.as_ref()?.0.as_millisecond() + after_ms;
        if at <= now_ms {
            return None;
        }
        due = Some(due.map_or(at, |d| d.min(at)));
        c.message = o.message.clone();
        c.last_transition_time = o.last_transition_time.clone();
    }
    due.filter(|_| same_status(old, &kept))
}

/// Volcano's `getPodGroupPhase`.
fn phase_of(st: &State, j: JobIx, unschedulable: bool) -> PodGroupPhase {
    let job = &st.jobs[j];
    let tasks = || job.tasks.iter().map(|&t| &st.tasks[t]);
    if unschedulable && tasks().any(|t| t.status == TaskStatus::Running) {
        return PodGroupPhase::Unknown;
    }
    let mut scheduled = tasks().filter(|t| t.status.is_scheduled()).count();
    let completed = tasks().filter(|t| t.status.is_completed()).count();
    scheduled += tasks()
        .filter(|t| t.status == TaskStatus::Releasing && t.node.is_some() && !t.assumed)
        .count();
    if scheduled as i64 >= job.min_available as i64 && (scheduled > 0 || job.min_available > 0) {
        if scheduled == completed {
            return PodGroupPhase::Completed;
        }
        return PodGroupPhase::Running;
    }
    if job.phase != PodGroupPhase::Inqueue {
        return PodGroupPhase::Pending;
    }
    PodGroupPhase::Inqueue
}

/// Has the gang fewer pods than its `minMember`, with nothing else against it? Then it waits
/// for its pods to be made (a vcJob's are made once it is admitted), not for room.
fn awaits_its_pods(st: &State, j: JobIx) -> bool {
    let job = &st.jobs[j];
    let js = &st.job_state[j];
    (job.tasks.len() as i64) < job.min_available as i64
        && !js.enqueue_refused
        && js
            .job_fit_error
            .as_deref()
            .is_none_or(|e| e.starts_with("Not enough valid tasks"))
}

/// Why a gang short of pods will stay so, when its pods come from an OrderedReady
/// StatefulSet: the second pod is made only once the first is Ready, and no pod of the gang
/// runs before all exist. Empty otherwise; appended to the gang's waiting message.
fn ordered_cause(st: &State, j: JobIx) -> &'static str {
    let job = &st.jobs[j];
    let ordered = job
        .podgroup
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::ORDERED_PODS))
        .is_some_and(|v| v == "true");
    if ordered && job.min_available > 1 && (job.tasks.len() as i64) < i64::from(job.min_available) {
        "; its StatefulSet has podManagementPolicy OrderedReady and makes each pod only once the one before is Ready, so the gang can never start: set podManagementPolicy: Parallel"
    } else {
        ""
    }
}

/// The verdict of a waiting gang that has no condition from the gang plugin: one without pods
/// yet (refused admission, or admitted and waiting for them).
fn waiting_message(st: &State, j: JobIx) -> String {
    let job = &st.jobs[j];
    if awaits_its_pods(st, j) {
        return format!(
            "waiting for its pods: {} of minMember {} exist{}",
            job.tasks.len(),
            job.min_available,
            ordered_cause(st, j)
        );
    }
    format!(
        "{}/{} tasks in gang unschedulable: {}",
        st.unplaced(j),
        job.tasks.len(),
        st.fit_error(j)
    )
}

/// The gang is scheduled: an `Unschedulable` condition still `True` from an earlier wait is
/// set `False`, so `kubectl describe pg` does not go on showing a stale reason.
fn settle_unschedulable(status: &mut PodGroupStatus, now: &Time) {
    for c in status.conditions.iter_mut().flatten() {
        if c.type_.as_ref().map(|t| t.as_str()) == Some("Unschedulable")
            && c.status.as_deref() == Some("True")
        {
            c.status = Some("False".into());
            c.reason = Some("Scheduled".into());
            c.message = Some("pod group is ready".into());
            c.last_transition_time = Some(now.clone());
        }
    }
}

/// A gang whose queue does not exist is not scheduled; its PodGroup's Unschedulable
/// condition says so (instead of whatever it said while the queue existed), and the extender's
/// plan answers the same for its pods.
fn tell_orphan(orphan: &Orphan, session: &str, now: &Time, out: &mut Outcome) {
    let message = format!(
        "queue {} does not exist: create it, or give the job a queue that does",
        orphan.queue
    );
    let pg = &orphan.podgroup;
    let old = pg.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let current = conditions
        .iter_mut()
        .find(|c| c.type_.as_ref().map(|t| t.as_str()) == Some("Unschedulable"));
    let said = current.as_ref().is_some_and(|c| {
        c.status.as_deref() == Some("True")
            && c.reason.as_deref() == Some(NOT_ENQUEUED_REASON)
            && c.message.as_deref() == Some(message.as_str())
    });
    if !said {
        let cond = PodGroupCondition {
            type_: Some(PodGroupConditionType::from("Unschedulable")),
            status: Some("True".into()),
            transition_id: Some(session.to_string()),
            last_transition_time: Some(now.clone()),
            reason: Some(NOT_ENQUEUED_REASON.into()),
            message: Some(message.clone()),
        };
        match current {
            Some(c) => *c = cond,
            None => conditions.push(cond),
        }
        out.podgroups.push(PodGroupUpdate {
            namespace: pg.metadata.namespace.clone().unwrap_or_default(),
            name: pg.metadata.name.clone().unwrap_or_default(),
            uid: pg.metadata.uid.clone().unwrap_or_default(),
            status,
            phase_changed: false,
        });
    }
    out.plan
        .min_member
        .insert(orphan.id.clone(), pg.spec.min_member.unwrap_or(1));
    out.plan
        .gangs
        .insert(orphan.id.clone(), Verdict::Waiting(message));
}

/// Reason of the Unschedulable condition of a gang the enqueue step holds back.
pub const NOT_ENQUEUED_REASON: &str = "NotEnqueued";

/// The condition of a Pending gang without pods that the enqueue action refused, with the
/// refusal's reason.
fn not_enqueued_condition(
    pending_without_pods: bool,
    js: &super::session::JobState,
) -> Option<(String, String, String)> {
    let why = js
        .job_fit_error
        .as_ref()
        .filter(|_| pending_without_pods && js.enqueue_refused)?;
    Some((
        "Unschedulable".into(),
        NOT_ENQUEUED_REASON.into(),
        format!("gang not admitted to its queue yet, no pod is created until it is: {why}"),
    ))
}

/// Marks a [`NOT_ENQUEUED_REASON`] condition `False` once the gang is no longer held back,
/// so it does not go on explaining a wait that is over.
fn clear_not_enqueued(status: &mut PodGroupStatus, over: bool) {
    if !over {
        return;
    }
    for c in status.conditions.iter_mut().flatten() {
        if c.reason.as_deref() == Some(NOT_ENQUEUED_REASON) && c.status.as_deref() == Some("True") {
            c.status = Some("False".into());
        }
    }
}

/// Compares statuses the way Volcano's job updater does: condition times and transition ids do
/// not count as a change.
pub(crate) fn same_status(a: &PodGroupStatus, b: &PodGroupStatus) -> bool {
    let strip = |s: &PodGroupStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_transition_time = None;
            c.transition_id = None;
        }
        s.running = s.running.filter(|v| *v != 0);
        s.failed = s.failed.filter(|v| *v != 0);
        s.succeeded = s.succeeded.filter(|v| *v != 0);
        s
    };
    strip(a) == strip(b)
}

/// A resource vector as a resource list with plain quantities (`cpu` in millicores).
pub fn to_list(r: &Resource) -> ResourceList {
    let mut m = ResourceList::new();
    if r.milli_cpu > 0.0 {
        m.insert(
            "cpu".into(),
            Quantity(format!("{}m", r.milli_cpu.round() as i64)),
        );
    }
    if r.memory > 0.0 {
        m.insert(
            "memory".into(),
            Quantity(format!("{}", r.memory.round() as i64)),
        );
    }
    for (k, v) in &r.scalars {
        if *v <= 0.0 {
            continue;
        }
        let q = if (v / 1000.0).fract() == 0.0 {
            format!("{}", (v / 1000.0) as i64)
        } else {
            format!("{}m", v.round() as i64)
        };
        m.insert(k.clone(), Quantity(q));
    }
    m
}

/// Turns the closed session's state into what it decided: every output is built by a function
/// of its own below, from the state and, for the PodGroup-related ones, from each gang's
/// [`GangClose`] (worked out once, as several outputs need the same phase and verdict).
fn close(st: &State, now: Time) -> Outcome {
    let reword_after = reword_after_ms(said_waiting(st));
    let gangs: IxVec<JobIx, GangClose> = st
        .jobs
        .indices()
        .map(|j| close_gang(st, j, &now, reword_after))
        .collect();
    let plan = plan(st, &gangs);
    let events = events(st, &gangs);
    let figures = figures(st, &gangs);
    let wake_at_ms = reword_wake(&gangs);
    Outcome {
        plan,
        // Last: it takes the statuses out of `gangs` rather than copying them.
        podgroups: podgroup_updates(st, gangs),
        queues: queue_updates(st),
        events,
        evictions: evictions(st),
        figures,
        wake_at_ms,
    }
}

/// How one gang leaves the session: what its PodGroup's phase and status become and the
/// verdict the extender answers for its pods.
struct GangClose {
    /// Volcano's phase after the session.
    phase: PodGroupPhase,
    /// Ready, or waiting and why.
    verdict: Verdict,
    /// The status to write, when it changed (and a mere rewording is not held back).
    status: Option<PodGroupStatus>,
    /// `status` is `Some`.
    changed: bool,
    /// A rewording held back ([`REWORD_AFTER_MS`]): when it may be written.
    reword_at: Option<i64>,
}

/// kube-scheduler's refusal of a gang the session placed (native engine): the condition that
/// replaces the gang plugin's `Scheduled` while the PodGroup carries [`keys::NATIVE_UNPLACED`]
/// and none of the gang's pods is bound. A gang the session itself cannot place keeps the
/// session's reason, which says what is missing in tephra's view of the cluster.
fn native_refusal(st: &State, j: JobIx) -> Option<(String, String, String)> {
    let job = &st.jobs[j];
    let said = job
        .podgroup
        .metadata
        .annotations
        .as_ref()?
        .get(keys::NATIVE_UNPLACED)?;
    let placed_here = st.job_state[j]
        .condition
        .as_ref()
        .is_some_and(|(type_, _, _)| type_ == "Scheduled");
    let bound = job.tasks.iter().any(|&t| st.tasks[t].status.is_scheduled());
    (placed_here && !bound).then(|| {
        (
            "Unschedulable".into(),
            keys::podgroup_reasons::NOT_PLACED.into(),
            format!("kube-scheduler could not place the gang: {said}"),
        )
    })
}

/// Works out one gang's [`GangClose`].
fn close_gang(st: &State, j: JobIx, now: &Time, reword_after_ms: i64) -> GangClose {
    let unschedulable = st.job_state[j]
        .condition
        .as_ref()
        .is_some_and(|(type_, _, _)| type_ == "Unschedulable");
    let phase = phase_of(st, j, unschedulable);
    let verdict = gang_verdict(st, j);
    let refusal = native_refusal(st, j);
    let condition = refusal.as_ref().or(st.job_state[j].condition.as_ref());
    let (status, reword_at) = podgroup_status(st, j, &phase, condition, now, reword_after_ms);
    let changed = status.is_some();
    GangClose {
        phase,
        verdict,
        status,
        changed,
        reword_at,
    }
}

/// The gang's verdict: Ready once enough of its pods are placed (a gang without pods never
/// is), else Waiting with the gang plugin's Unschedulable message, or, without one, why it
/// has no pods or room.
fn gang_verdict(st: &State, j: JobIx) -> Verdict {
    let job = &st.jobs[j];
    if st.is_ready(j) && !job.tasks.is_empty() {
        return Verdict::Ready;
    }
    let message = st.job_state[j]
        .condition
        .as_ref()
        .filter(|(t, _, _)| t == "Unschedulable")
        .map(|(_, _, m)| format!("{m}{}", ordered_cause(st, j)))
        .unwrap_or_else(|| waiting_message(st, j));
    Verdict::Waiting(message)
}

/// The gang's PodGroup status after the session (phase, task counts, the condition the
/// session decided) when it is to be written, and when a held-back rewording may be.
/// Only real changes are written (condition times and transition ids do not count), and a
/// waiting gang's condition is reworded at most every `reword_after_ms` ([`reword_after_ms`]),
/// so the API server is not loaded with rewrites of what users already see.
fn podgroup_status(
    st: &State,
    j: JobIx,
    phase: &PodGroupPhase,
    condition: Option<&(String, String, String)>,
    now: &Time,
    reword_after_ms: i64,
) -> (Option<PodGroupStatus>, Option<i64>) {
    let job = &st.jobs[j];
    let js = &st.job_state[j];
    let none = PodGroupStatus::default();
    let old = job.podgroup.status.as_ref().unwrap_or(&none);
    let mut status = old.clone();
    // A gang the enqueue step holds back (queue closed, queue short of quota) has no pods
    // yet, so the gang plugin writes no condition for it (as in Volcano); the reason is
    // written as an Unschedulable condition anyway, so `kubectl describe pg` shows it and
    // the Job controller's PodGroupPending Event carries it to the vcJob.
    let not_enqueued =
        not_enqueued_condition(job.tasks.is_empty() && *phase == PodGroupPhase::Pending, js);
    clear_not_enqueued(&mut status, not_enqueued.is_none());
    if condition.is_some_and(|(type_, _, _)| type_ == "Scheduled") {
        settle_unschedulable(&mut status, now);
    }
    if let Some((type_, reason, message)) = condition.or(not_enqueued.as_ref()) {
        let message = if type_ == "Unschedulable" {
            format!("{message}{}", ordered_cause(st, j))
        } else {
            message.clone()
        };
        let cond = PodGroupCondition {
            type_: Some(PodGroupConditionType::from(type_.as_str())),
            status: Some("True".into()),
            transition_id: Some(st.id.clone()),
            last_transition_time: Some(now.clone()),
            reason: Some(reason.clone()),
            message: Some(message),
        };
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        match conditions
            .iter_mut()
            .find(|c| c.type_.as_ref().map(|t| t.as_str()) == Some(type_.as_str()))
        {
            Some(c) => {
                // Keep the transition time when nothing but the session changed.
                let same =
                    c.status == cond.status && c.reason == cond.reason && c.message == cond.message;
                let keep_time = c.last_transition_time.clone();
                *c = cond;
                if same && keep_time.is_some() {
                    c.last_transition_time = keep_time;
                }
            }
            None => conditions.push(cond),
        }
    }
    let count = |s: TaskStatus| {
        job.tasks
            .iter()
            .filter(|&&t| st.tasks[t].status == s)
            .count() as i32
    };
    status.phase = Some(phase.clone());
    status.running = Some(count(TaskStatus::Running));
    status.failed = Some(count(TaskStatus::Failed));
    status.succeeded = Some(count(TaskStatus::Succeeded));
    if same_status(old, &status) {
        return (None, None);
    }
    if !js.refused_for_queue_state
        && let Some(due) = reword_later(old, &status, now.0.as_millisecond(), reword_after_ms)
    {
        return (None, Some(due));
    }
    (Some(status), None)
}

/// The plan the extender answers from: where each pod placed this session goes, and each
/// gang's verdict and `minMember`.
fn plan(st: &State, gangs: &IxVec<JobIx, GangClose>) -> Plan {
    let mut plan = Plan {
        session_id: st.id.clone(),
        ..Plan::default()
    };
    for (t, node) in &st.placements {
        let task = &st.tasks[*t];
        let job = &st.jobs[st.task_job[*t]];
        plan.placements.insert(
            task.uid.clone(),
            Placement {
                node: node.clone(),
                job: job.id.clone(),
                namespace: task.namespace.clone(),
                name: task.name.clone(),
            },
        );
    }
    for (job, gang) in st.jobs.iter().zip(gangs) {
        plan.min_member.insert(job.id.clone(), job.min_available);
        plan.gangs.insert(job.id.clone(), gang.verdict.clone());
    }
    plan
}

/// The PodGroups whose status is to be written, in job order.
fn podgroup_updates(st: &State, gangs: IxVec<JobIx, GangClose>) -> Vec<PodGroupUpdate> {
    st.jobs
        .iter()
        .zip(gangs)
        .filter_map(|(job, gang)| {
            let status = gang.status?;
            let before = job.podgroup.status.as_ref().and_then(|s| s.phase.as_ref());
            Some(PodGroupUpdate {
                namespace: job.namespace.clone(),
                name: job.name.clone(),
                uid: job.uid.clone(),
                phase_changed: before != status.phase.as_ref(),
                status,
            })
        })
        .collect()
}

/// The Events to record: those the plugins asked for during the session first, then per gang
/// in job order a Warning for one that waits for room (not one that only waits for its own
/// pods to be made: its condition says so, and it is not in trouble) and a Normal `Scheduled`
/// for one that became ready (its status changed).
fn events(st: &State, gangs: &IxVec<JobIx, GangClose>) -> Vec<GangEvent> {
    let event = |job: &JobInfo, type_: &'static str, reason: &str, message: String| GangEvent {
        namespace: job.namespace.clone(),
        name: job.name.clone(),
        uid: job.uid.clone(),
        type_,
        reason: reason.into(),
        message,
    };
    let mut out: Vec<GangEvent> = st
        .events
        .iter()
        .map(|ev| event(&st.jobs[ev.job], ev.type_, &ev.reason, ev.message.clone()))
        .collect();
    for (j, gang) in gangs.iter_enumerated() {
        let job = &st.jobs[j];
        match (&gang.verdict, &gang.phase) {
            // While the condition's new wording is held back, so is the Event's: it tells
            // what the condition tells, at the same bounded rate.
            (
                Verdict::Waiting(message),
                PodGroupPhase::Pending | PodGroupPhase::Inqueue | PodGroupPhase::Unknown,
            ) if !awaits_its_pods(st, j) && gang.reword_at.is_none() => {
                out.push(event(job, "Warning", "Unschedulable", message.clone()));
            }
            (Verdict::Ready, _) if gang.changed => {
                out.push(event(
                    job,
                    "Normal",
                    "Scheduled",
                    "pod group is ready".into(),
                ));
            }
            _ => {}
        }
    }
    out
}

/// The pods to evict (preempt, reclaim), in the order the session committed them.
fn evictions(st: &State) -> Vec<Eviction> {
    st.evictions
        .iter()
        .map(|(t, reason)| {
            let task = &st.tasks[*t];
            Eviction {
                namespace: task.namespace.clone(),
                name: task.name.clone(),
                uid: task.uid.clone(),
                reason: reason.clone(),
            }
        })
        .collect()
}

/// What each queue holds after the session: its jobs' tasks that hold or are about to hold
/// their node (Binding, Bound, Running; pod slots aside), with every queue's counted in its
/// ancestors' up to `root`, as Volcano's hierarchical queues report it.
fn queue_allocations(st: &State) -> IxVec<QueueIx, Resource> {
    let mut allocated: IxVec<QueueIx, Resource> =
        IxVec::from_elem(Resource::zero(), st.queues.len());
    for (j, job) in st.jobs.iter_enumerated() {
        let Some(q) = st.job_queue[j] else {
            continue;
        };
        for &t in &job.tasks {
            let task = &st.tasks[t];
            if matches!(
                task.status,
                TaskStatus::Binding | TaskStatus::Bound | TaskStatus::Running
            ) {
                let mut r = task.resreq.clone();
                r.scalars.remove(PODS);
                allocated[q].add(&r);
            }
        }
    }
    let mut total_alloc = allocated.clone();
    for (q, a) in allocated.iter_enumerated() {
        let mut parent = st.queues[q].parent.clone();
        // Bounded by the queue count, so a cycle in `spec.parent` cannot loop for ever.
        let mut hops = 0;
        while let Some(p) = parent {
            hops += 1;
            let Some(&pi) = st.queue_index.get(&p) else {
                break;
            };
            if pi == q || hops > st.queues.len() {
                break;
            }
            total_alloc[pi].add(a);
            parent = st.queues[pi].parent.clone();
        }
    }
    total_alloc
}

/// The Queues whose `status.allocated` changes ([`queue_allocations`] against what was last
/// written), in queue order: unchanged ones are not written again.
fn queue_updates(st: &State) -> Vec<QueueUpdate> {
    let total_alloc = queue_allocations(st);
    st.queues
        .iter()
        .zip(&total_alloc)
        .filter_map(|(queue, alloc)| {
            let new = to_list(alloc);
            let old = queue
                .status_allocated
                .as_ref()
                .map(to_list)
                .unwrap_or_default();
            (new != old).then(|| QueueUpdate {
                name: queue.name.clone(),
                allocated: new,
            })
        })
        .collect()
}

/// The session's figures for the metrics: the proportion plugin's queue report, the pending
/// pods of every waiting gang, gangs by phase, and the jobs and nodes seen. The actions'
/// times are added by [`run_session`], which measures them.
fn figures(st: &State, gangs: &IxVec<JobIx, GangClose>) -> SessionFigures {
    let mut figures = SessionFigures::default();
    for (j, gang) in gangs.iter_enumerated() {
        let job = &st.jobs[j];
        if let Verdict::Waiting(_) = &gang.verdict {
            let pending = job
                .tasks
                .iter()
                .filter(|&&t| st.tasks[t].status == TaskStatus::Pending)
                .count() as u32;
            figures.unschedulable_tasks.insert(job.id.clone(), pending);
        }
        *figures
            .phases
            .entry(gang.phase.as_str().to_string())
            .or_default() += 1;
    }
    for (q, queue) in st.queues.iter_enumerated() {
        if let Some(r) = st.queue_report.get(&q) {
            figures.queues.insert(queue.name.clone(), r.clone());
        }
    }
    figures.jobs = st.jobs.len();
    figures.nodes = st.nodes.len();
    figures
}

/// The earliest time a held-back rewording may be written: the session to hold then, even
/// when nothing else changes.
fn reword_wake(gangs: &IxVec<JobIx, GangClose>) -> Option<i64> {
    let mut wake = None;
    for due in gangs.iter().filter_map(|g| g.reword_at) {
        wake_by(&mut wake, due);
    }
    wake
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_more_gangs_wait_the_longer_each_keeps_its_wording() {
        assert_eq!(reword_after_ms(0), REWORD_AFTER_MS);
        assert_eq!(reword_after_ms(200), REWORD_AFTER_MS);
        assert_eq!(reword_after_ms(1_500), 75_000, "1,500 gangs at 20 a second");
        assert!(reword_after_ms(usize::MAX) > 0, "no overflow");
    }

    fn waiting(phase: &str, message: &str, at_ms: i64) -> PodGroupStatus {
        serde_json::from_value(serde_json::json!({
            "phase": phase,
            "conditions": [{
                "type": "Unschedulable", "status": "True", "reason": NOT_ENQUEUED_REASON,
                "message": message,
                "lastTransitionTime": k8s_openapi::jiff::Timestamp::from_millisecond(at_ms)
                    .unwrap_or_else(|e| panic!("{e}")).to_string(),
            }]
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_reworded_condition_waits_its_turn_and_any_other_change_is_written_at_once() {
        let t = 1_000_000_000_000;
        let old = waiting("Pending", "queue a is at its deserved share", t);
        let reworded = waiting("Pending", "resource in cluster is overused", t + 3_000);
        assert_eq!(
            reword_later(&old, &reworded, t + 3_000, REWORD_AFTER_MS),
            Some(t + REWORD_AFTER_MS)
        );
        assert_eq!(
            reword_later(&old, &reworded, t + REWORD_AFTER_MS, REWORD_AFTER_MS),
            None
        );
        let admitted = waiting("Inqueue", "resource in cluster is overused", t + 3_000);
        assert_eq!(
            reword_later(&old, &admitted, t + 3_000, REWORD_AFTER_MS),
            None
        );
        let mut settled = old.clone();
        for c in settled.conditions.iter_mut().flatten() {
            c.status = Some("False".into());
        }
        assert_eq!(
            reword_later(&old, &settled, t + 3_000, REWORD_AFTER_MS),
            None
        );
    }
}
