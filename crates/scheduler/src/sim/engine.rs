//! The simulation: a [`Scenario`] played on a simulated clock through the real index and the
//! real session ([`run_session`] with the scenario's configuration), with a model of what
//! happens between sessions.
//!
//! ```text
//!  arrivals ─▶ PodGroup (Pending) ─▶ session admits (Inqueue) ─▶ "job controller" makes pods
//!                                      │
//!  session: placements ─▶ assumed in the index ─▶ "kube-scheduler" binds them (bindMs each,
//!                                      │           in its queue's order) ─▶ Running
//!                                      ▼
//!  pods finish after durationMs ─▶ Succeeded; a job whose pods all finished goes away
//!  evictions ─▶ the pod is deleted and made again Pending (the job controller's restart)
//! ```
//!
//! Sessions run as the runner runs them: once a period when something is due, and on demand
//! a debounce after the index changes. Everything is a function of the scenario: no clock, no
//! randomness, no I/O, so a failure replays exactly.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::scenario::{JobSpec, OtherPodSpec, PresentPod, Scenario, ScenarioError};
use crate::config::{SchedulerConf, parse};
use crate::index::{ClusterIndex, Snapshot};
use crate::outcome::{Outcome, Verdict, run_session};
use crate::resource::pod_request;
use tephra_api::{PodGroup, Queue};

/// The simulated epoch: 2026-01-01T00:00:00Z, so creation times and the session's time agree.
pub(crate) const EPOCH_MS: i64 = 1_767_225_600_000;
/// How long after an index change an on-demand session runs (the runner's debounce).
const DEBOUNCE_MS: i64 = 20;
/// Assumed placements live this long (the runner's default).
const ASSUME_TTL: Duration = Duration::from_secs(30);
/// The namespace of every simulated object.
pub const NAMESPACE: &str = "sim";

/// Where a simulated pod stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Not placed.
    Pending,
    /// Placed by a session, waiting for kube-scheduler's bind.
    Placed(String),
    /// Bound and running on the node since the time.
    Running(String, i64),
    /// Finished.
    Succeeded,
}

/// One pod of a simulated job.
#[derive(Clone, Debug)]
pub struct SimPod {
    /// The object as the API would hold it.
    pub pod: Pod,
    /// The task (index into the job's tasks).
    pub task: usize,
    /// Its state.
    pub state: PodState,
    /// How long it runs once running, simulated ms (0: until the run ends): its task's
    /// duration, or what was left of a present pod's run.
    pub run_ms: i64,
}

/// One job of the scenario as the simulation goes.
#[derive(Clone, Debug)]
pub struct SimJob {
    /// Its spec.
    pub spec: JobSpec,
    /// `<namespace>/<name>`.
    pub id: String,
    /// Its queue.
    pub queue: String,
    /// The PodGroup once submitted.
    pub podgroup: Option<PodGroup>,
    /// Its pods, once the job controller has made them.
    pub pods: Vec<SimPod>,
    /// When its PodGroup first left Pending (admitted by the session), simulated ms.
    pub admitted_ms: Option<i64>,
    /// When it started (its gang's minimum was running), simulated ms.
    pub started_ms: Option<i64>,
    /// When it finished (every pod succeeded).
    pub finished_ms: Option<i64>,
    /// Pods made again after an eviction.
    pub restarts: u32,
    /// The messages of its PodGroup's `Unschedulable` condition while it had not started, in
    /// order, each with the time it was first written (a change of wording is a new entry).
    pub waiting: Vec<(i64, String)>,
}

/// A pod's run on a node, for utilization and shares over time.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// The job.
    pub job: usize,
    /// Its queue.
    pub queue: String,
    /// Millicores it held.
    pub milli_cpu: f64,
    /// From, simulated ms.
    pub from_ms: i64,
    /// To (the run's end when still running).
    pub to_ms: i64,
}

/// What one session saw and decided, for the properties.
#[derive(Debug)]
pub struct SessionRecord {
    /// Sequence number from 0.
    pub number: u32,
    /// Simulated ms.
    pub at_ms: i64,
    /// The snapshot the session ran on.
    pub snapshot: Snapshot,
    /// What it decided.
    pub outcome: Outcome,
}

/// A running simulation.
#[derive(Debug)]
pub struct Sim {
    scenario: Scenario,
    conf: SchedulerConf,
    index: ClusterIndex,
    base: Instant,
    now_ms: i64,
    sessions: u32,
    next_tick_ms: i64,
    demand_at_ms: Option<i64>,
    wake_at_ms: i64,
    /// The jobs, in scenario order.
    pub jobs: Vec<SimJob>,
    binds: VecDeque<(usize, usize, String)>,
    bind_free_ms: i64,
    /// Every run of a pod so far.
    pub intervals: Vec<Interval>,
    /// Allocatable millicores of the usable nodes.
    pub total_milli_cpu: f64,
    /// Counts arrivals and finished jobs: the demand changes when it does.
    demand_epoch: u64,
    /// Pods of no job, with when they end (`None`: at the end of the run).
    others: Vec<OtherRun>,
}

/// A running pod of no simulated job.
#[derive(Clone, Debug)]
struct OtherRun {
    pod: Pod,
    ends_ms: Option<i64>,
    ended: bool,
}

impl Sim {
    /// Builds the cluster of a scenario at time 0 (nothing submitted yet).
    pub fn new(scenario: Scenario) -> Result<Self, ScenarioError> {
        scenario.validate("scenario")?;
        let conf = match &scenario.conf {
            Some(text) => parse(text, "scenario").map_err(|e| ScenarioError::Invalid {
                origin: "scenario".into(),
                message: e.to_string(),
            })?,
            None => SchedulerConf::builtin(),
        };
        let mut index = ClusterIndex::new(vec!["volcano".into()]);
        index.set_grow_delay(Duration::from_millis(scenario.period_ms as u64));
        for q in builtin_queues().iter().chain(
            scenario
                .queues
                .iter()
                .map(queue_object)
                .collect::<Vec<_>>()
                .iter(),
        ) {
            index.apply_queue(q);
        }
        let mut total_milli_cpu = 0.0;
        for n in &scenario.nodes {
            for name in node_names(&n.name, n.count) {
                let node = node_object(&name, n);
                total_milli_cpu += tephra_api::quantity::parse(&n.cpu).unwrap_or(0.0) * 1000.0;
                index.apply_node(&node);
            }
        }
        for h in &scenario.hyper_nodes {
            index.apply_hypernode(&hypernode_object(h));
        }
        let mut priorities: Vec<i32> = scenario.jobs.iter().filter_map(|j| j.priority).collect();
        priorities.sort_unstable();
        priorities.dedup();
        for p in priorities {
            index.apply_priority_class(&priority_class(p));
        }
        let jobs = scenario
            .jobs
            .iter()
            .map(|j| SimJob {
                id: format!("{}/{}", j.namespace(), j.name),
                queue: j.queue.clone().unwrap_or_else(|| "default".into()),
                spec: j.clone(),
                podgroup: None,
                pods: Vec::new(),
                admitted_ms: None,
                started_ms: None,
                finished_ms: None,
                restarts: 0,
                waiting: Vec::new(),
            })
            .collect();
        let others: Vec<OtherRun> = scenario
            .other_pods
            .iter()
            .map(|p| OtherRun {
                pod: other_pod_object(p),
                ends_ms: (p.remaining_ms > 0).then_some(p.remaining_ms),
                ended: false,
            })
            .collect();
        for o in &others {
            index.apply_pod(&o.pod);
        }
        index.take_changes();
        Ok(Self {
            scenario,
            conf,
            index,
            base: Instant::now(),
            now_ms: 0,
            sessions: 0,
            next_tick_ms: 0,
            demand_at_ms: None,
            wake_at_ms: i64::MAX,
            jobs,
            binds: VecDeque::new(),
            bind_free_ms: 0,
            intervals: Vec::new(),
            total_milli_cpu,
            demand_epoch: 0,
            others,
        })
    }

    /// The scheduler configuration the sessions run with.
    pub fn conf(&self) -> &SchedulerConf {
        &self.conf
    }

    /// Changes each time a job arrives or finishes: two sessions of the same epoch saw the
    /// same demand.
    pub fn demand_epoch(&self) -> u64 {
        self.demand_epoch
    }

    fn instant(&self, ms: i64) -> Instant {
        self.base + Duration::from_millis(ms.max(0) as u64)
    }

    /// Runs until the next session and returns what it saw and decided; `None` once the
    /// scenario's time is over. Bounded: each call advances the clock or runs a session.
    pub fn next_session(&mut self) -> Option<SessionRecord> {
        loop {
            let session_at = self.next_session_time();
            let event_at = self.next_event_time();
            let t = session_at.min(event_at);
            if t > self.scenario.until_ms {
                self.now_ms = self.scenario.until_ms;
                self.close_intervals();
                return None;
            }
            self.now_ms = t;
            if event_at <= session_at {
                self.process_events();
                if self.index.peek_changes().any() && self.demand_at_ms.is_none() {
                    self.demand_at_ms = Some(t + DEBOUNCE_MS);
                }
                continue;
            }
            let by_tick = self.demand_at_ms.is_none_or(|d| d > t);
            if by_tick {
                self.next_tick_ms = t + self.scenario.period_ms;
                if !self.worth_a_session() {
                    continue;
                }
            }
            self.demand_at_ms = None;
            let rec = self.run_session();
            return Some(rec);
        }
    }

    fn next_session_time(&self) -> i64 {
        self.demand_at_ms.unwrap_or(i64::MAX).min(self.next_tick_ms)
    }

    fn worth_a_session(&self) -> bool {
        self.index.peek_changes().any()
            || self.index.has_expired_assumed(self.instant(self.now_ms))
            || EPOCH_MS + self.now_ms >= self.wake_at_ms
    }

    /// The earliest arrival, bind or pod completion still to come.
    fn next_event_time(&self) -> i64 {
        let mut t = i64::MAX;
        for j in &self.jobs {
            if j.podgroup.is_none() {
                t = t.min(j.spec.arrival_ms.max(self.now_ms));
            }
            for p in &j.pods {
                if let PodState::Running(_, since) = &p.state
                    && p.run_ms > 0
                {
                    t = t.min(since + p.run_ms);
                }
            }
        }
        for o in self.others.iter().filter(|o| !o.ended) {
            if let Some(end) = o.ends_ms {
                t = t.min(end.max(self.now_ms));
            }
        }
        if !self.binds.is_empty() {
            t = t.min(self.bind_free_ms.max(self.now_ms));
        }
        t
    }

    /// Arrivals, completions, job cleanup, pods for admitted gangs and binds due now.
    fn process_events(&mut self) {
        let now = self.now_ms;
        for o in &mut self.others {
            if !o.ended && o.ends_ms.is_some_and(|e| e <= now) {
                o.ended = true;
                self.index.delete_pod(&o.pod);
            }
        }
        for j in 0..self.jobs.len() {
            if self.jobs[j].podgroup.is_none() && self.jobs[j].spec.arrival_ms <= now {
                if self.jobs[j].spec.present.is_empty() {
                    let pg = podgroup_object(&self.jobs[j].spec, "Pending");
                    self.index.apply_podgroup(&pg);
                    self.jobs[j].podgroup = Some(pg);
                } else {
                    self.arrive_present(j);
                }
                self.demand_epoch += 1;
            }
            let mut finished = Vec::new();
            for (i, p) in self.jobs[j].pods.iter().enumerate() {
                if let PodState::Running(_, since) = &p.state
                    && p.run_ms > 0
                    && since + p.run_ms <= now
                {
                    finished.push(i);
                }
            }
            for i in finished {
                self.end_interval(j, i);
                let p = &mut self.jobs[j].pods[i];
                p.state = PodState::Succeeded;
                if let Some(s) = p.pod.status.as_mut() {
                    s.phase = Some("Succeeded".into());
                }
                let pod = p.pod.clone();
                self.index.apply_pod(&pod);
            }
            self.finish_job_if_done(j);
        }
        self.make_pods_for_admitted();
        self.bind_due();
    }

    /// A job that was running when the run began: its PodGroup admitted, its present pods
    /// running on their nodes (or finished), its other replicas made Pending.
    fn arrive_present(&mut self, j: usize) {
        let now = self.now_ms;
        let spec = self.jobs[j].spec.clone();
        let pg = podgroup_object(&spec, "Running");
        self.index.apply_podgroup(&pg);
        let mut pods = Vec::new();
        for (ti, task) in spec.tasks.iter().enumerate() {
            let mut present = spec.present.iter().filter(|p| p.task == task.name);
            for r in 0..task.replicas {
                let mut pod = pod_object(&spec, ti, r, 0, now);
                let (state, phase, run_ms) = match present.next() {
                    Some(PresentPod {
                        node: Some(node),
                        remaining_ms,
                        ..
                    }) => {
                        if let Some(s) = pod.spec.as_mut() {
                            s.node_name = Some(node.clone());
                        }
                        (
                            PodState::Running(node.clone(), now),
                            "Running",
                            *remaining_ms,
                        )
                    }
                    Some(PresentPod { node: None, .. }) => (PodState::Succeeded, "Succeeded", 0),
                    None => (PodState::Pending, "Pending", task.duration_ms),
                };
                if let Some(s) = pod.status.as_mut() {
                    s.phase = Some(phase.into());
                }
                pods.push(SimPod {
                    pod,
                    task: ti,
                    state,
                    run_ms,
                });
            }
        }
        for p in &pods {
            self.index.apply_pod(&p.pod);
        }
        let job = &mut self.jobs[j];
        let begun = pods
            .iter()
            .filter(|p| matches!(p.state, PodState::Running(..) | PodState::Succeeded))
            .count() as u32;
        job.pods = pods;
        job.podgroup = Some(pg);
        job.admitted_ms = Some(now);
        if begun >= spec.min() {
            job.started_ms = Some(now);
        }
    }

    /// A job whose pods all succeeded is done: its pods and PodGroup leave the index.
    fn finish_job_if_done(&mut self, j: usize) {
        let job = &mut self.jobs[j];
        if job.finished_ms.is_some()
            || job.pods.is_empty()
            || !job.pods.iter().all(|p| p.state == PodState::Succeeded)
        {
            return;
        }
        job.finished_ms = Some(self.now_ms);
        self.demand_epoch += 1;
        for p in &job.pods {
            self.index.delete_pod(&p.pod);
        }
        if let Some(pg) = &job.podgroup {
            self.index.delete_podgroup(pg);
        }
    }

    /// The job controller makes a job's pods once its PodGroup has left Pending.
    fn make_pods_for_admitted(&mut self) {
        for j in 0..self.jobs.len() {
            let job = &self.jobs[j];
            let admitted = job
                .podgroup
                .as_ref()
                .and_then(|pg| pg.status.as_ref())
                .and_then(|s| s.phase.as_ref())
                .is_some_and(|p| p.as_str() != "Pending");
            if !admitted || !job.pods.is_empty() || job.finished_ms.is_some() {
                continue;
            }
            let mut pods = Vec::new();
            for (ti, task) in job.spec.tasks.iter().enumerate() {
                for r in 0..task.replicas {
                    pods.push(SimPod {
                        pod: pod_object(&job.spec, ti, r, 0, self.now_ms),
                        task: ti,
                        state: PodState::Pending,
                        run_ms: task.duration_ms,
                    });
                }
            }
            for p in &pods {
                self.index.apply_pod(&p.pod);
            }
            self.jobs[j].pods = pods;
        }
    }

    /// kube-scheduler binds the placements queued for it, one every `bindMs`.
    fn bind_due(&mut self) {
        let step = self.scenario.bind_ms;
        while self.bind_free_ms <= self.now_ms {
            let Some((j, i, node)) = self.binds.pop_front() else {
                break;
            };
            let now = self.now_ms;
            let p = &mut self.jobs[j].pods[i];
            if p.state != PodState::Placed(node.clone()) {
                continue;
            }
            p.state = PodState::Running(node.clone(), now);
            if let Some(s) = p.pod.spec.as_mut() {
                s.node_name = Some(node);
            }
            if let Some(s) = p.pod.status.as_mut() {
                s.phase = Some("Running".into());
            }
            let pod = p.pod.clone();
            self.index.apply_pod(&pod);
            let job = &mut self.jobs[j];
            if job.started_ms.is_none()
                && job
                    .pods
                    .iter()
                    .filter(|p| matches!(p.state, PodState::Running(..) | PodState::Succeeded))
                    .count() as u32
                    >= job.spec.min()
            {
                job.started_ms = Some(now);
            }
            self.bind_free_ms = now + step;
            if step > 0 {
                break;
            }
        }
    }

    /// One session at the current time, and its outcome applied.
    fn run_session(&mut self) -> SessionRecord {
        let now = self.instant(self.now_ms);
        self.index.expire_assumed(now);
        self.index.expire_decided(now);
        // Placements that expired go back to Pending in our books too.
        for job in &mut self.jobs {
            for p in &mut job.pods {
                if let PodState::Placed(_) = p.state
                    && let Some(uid) = p.pod.metadata.uid.as_deref()
                    && self.index.assumed_node(uid).is_none()
                {
                    p.state = PodState::Pending;
                }
            }
        }
        self.index.take_changes();
        let snapshot = self.index.snapshot();
        let number = self.sessions;
        self.sessions += 1;
        let at = Time(
            k8s_openapi::jiff::Timestamp::from_millisecond(EPOCH_MS + self.now_ms)
                .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        );
        let outcome = run_session(snapshot.clone(), &self.conf, &format!("s{number}"), at);
        self.apply(&outcome);
        SessionRecord {
            number,
            at_ms: self.now_ms,
            snapshot,
            outcome,
        }
    }

    /// What the runner, the writers and the binder do with a session's outcome.
    fn apply(&mut self, outcome: &Outcome) {
        let now = self.instant(self.now_ms);
        let by_uid: BTreeMap<String, (usize, usize)> = self
            .jobs
            .iter()
            .enumerate()
            .flat_map(|(j, job)| {
                job.pods
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, p)| p.pod.metadata.uid.clone().map(|u| (u, (j, i))))
            })
            .collect();
        // PodGroup status writes land before anything else happens.
        for u in &outcome.podgroups {
            let Some(job) = self
                .jobs
                .iter_mut()
                .find(|j| j.id == format!("{}/{}", u.namespace, u.name))
            else {
                continue;
            };
            if job.finished_ms.is_some() {
                continue;
            }
            if let Some(pg) = job.podgroup.as_mut() {
                pg.status = Some(u.status.clone());
                let pg = pg.clone();
                self.index.apply_podgroup(&pg);
            }
            if job.admitted_ms.is_none()
                && u.status
                    .phase
                    .as_ref()
                    .is_some_and(|p| p.as_str() != "Pending")
            {
                job.admitted_ms = Some(self.now_ms);
            }
            if job.started_ms.is_none()
                && let Some(message) = crate::outcome::unschedulable_message(&u.status)
                && job.waiting.last().is_none_or(|(_, m)| m != message)
            {
                job.waiting.push((self.now_ms, message.to_string()));
            }
        }
        // Placements, in kube-scheduler's queue order: priority, then creation, then name.
        let mut placed: Vec<(i32, String, usize, usize, String)> = outcome
            .plan
            .placements
            .iter()
            .filter_map(|(uid, p)| {
                let (j, i) = *by_uid.get(uid)?;
                let prio = self.jobs[j].spec.priority.unwrap_or(0);
                Some((-prio, p.name.clone(), j, i, p.node.clone()))
            })
            .collect();
        placed.sort();
        for (_, _, j, i, node) in placed {
            let uid = self.jobs[j].pods[i]
                .pod
                .metadata
                .uid
                .clone()
                .unwrap_or_default();
            self.index.assume(&uid, &node, ASSUME_TTL, now);
            self.jobs[j].pods[i].state = PodState::Placed(node.clone());
            self.binds.push_back((j, i, node));
        }
        let now_ms = EPOCH_MS + self.now_ms;
        let mut wake = outcome.wake_at_ms.unwrap_or(i64::MAX);
        for (job, v) in &outcome.plan.gangs {
            if *v == Verdict::Ready
                && let Some(from) = self.index.gang_ready(job, now_ms)
            {
                wake = wake.min(from);
            }
        }
        self.wake_at_ms = wake;
        // What the session accounted for does not call for another one; what follows from
        // its writes (pods for admitted gangs, binds) does.
        self.index.take_changes();
        // Evictions come back through the watch (the pod deleted, then made again by its
        // job controller): news for the next session.
        for e in &outcome.evictions {
            let Some(&(j, i)) = by_uid.get(&e.uid) else {
                continue;
            };
            self.evict(j, i);
        }
        self.make_pods_for_admitted();
        self.bind_due();
        if self.index.peek_changes().any() {
            self.demand_at_ms = Some(self.now_ms + DEBOUNCE_MS);
        }
    }

    /// An evicted pod is deleted and made again, Pending, under a new uid.
    fn evict(&mut self, j: usize, i: usize) {
        if matches!(self.jobs[j].pods[i].state, PodState::Running(..)) {
            self.end_interval(j, i);
        }
        let old = self.jobs[j].pods[i].pod.clone();
        self.index.delete_pod(&old);
        self.jobs[j].restarts += 1;
        let task = self.jobs[j].pods[i].task;
        let replica = old
            .metadata
            .name
            .as_deref()
            .and_then(|n| n.rsplit('-').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let pod = pod_object(
            &self.jobs[j].spec,
            task,
            replica,
            self.jobs[j].restarts,
            self.now_ms,
        );
        self.index.apply_pod(&pod);
        self.jobs[j].pods[i] = SimPod {
            pod,
            task,
            state: PodState::Pending,
            run_ms: self.jobs[j].spec.tasks[task].duration_ms,
        };
    }

    fn end_interval(&mut self, j: usize, i: usize) {
        if let PodState::Running(_, since) = &self.jobs[j].pods[i].state {
            let milli_cpu = pod_request(&self.jobs[j].pods[i].pod).milli_cpu;
            self.intervals.push(Interval {
                job: j,
                queue: self.jobs[j].queue.clone(),
                milli_cpu,
                from_ms: *since,
                to_ms: self.now_ms,
            });
        }
    }

    /// At the end, pods still running count up to the end.
    fn close_intervals(&mut self) {
        for j in 0..self.jobs.len() {
            for i in 0..self.jobs[j].pods.len() {
                self.end_interval(j, i);
            }
        }
    }
}

/// The names of a node kind of `count` nodes (`name` alone, or `name-0`, `name-1`, …).
pub(crate) fn node_names(name: &str, count: u32) -> Vec<String> {
    if count <= 1 {
        vec![name.to_string()]
    } else {
        (0..count).map(|i| format!("{name}-{i}")).collect()
    }
}

fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    // Every object here is built from literal JSON of the right shape and scenario values
    // that `Scenario::validate` checked.
    serde_json::from_value(v).unwrap_or_else(|e| panic!("simulated object: {e}"))
}

fn builtin_queues() -> Vec<Queue> {
    ["root", "default"]
        .iter()
        .map(|n| {
            from(json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                "metadata": {"name": n, "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"weight": 1},
                "status": {"state": "Open"}
            }))
        })
        .collect()
}

fn queue_object(q: &super::scenario::QueueSpec) -> Queue {
    let mut spec = json!({"weight": q.weight});
    if !q.capability.is_empty() {
        spec["capability"] = json!(q.capability);
    }
    if !q.guarantee.is_empty() {
        spec["guarantee"] = json!({"resource": q.guarantee});
    }
    if !q.deserved.is_empty() {
        spec["deserved"] = json!(q.deserved);
    }
    if let Some(p) = &q.parent {
        spec["parent"] = json!(p);
    }
    if let Some(p) = q.priority {
        spec["priority"] = json!(p);
    }
    if let Some(r) = q.reclaimable {
        spec["reclaimable"] = json!(r);
    }
    from(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": q.name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": {"state": q.state.clone().unwrap_or_else(|| "Open".into())}
    }))
}

fn node_object(name: &str, n: &super::scenario::NodeSpec) -> Node {
    let mut res =
        json!({"cpu": n.cpu, "memory": n.memory, "pods": n.pods.unwrap_or(110).to_string()});
    for (k, v) in &n.scalars {
        res[k] = json!(v);
    }
    let mut labels = n.labels.clone();
    labels.insert("kubernetes.io/hostname".into(), name.to_string());
    from(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": n.taints},
        "status": {
            "allocatable": res, "capacity": res,
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
}

fn hypernode_object(h: &super::scenario::HyperNodeSpec) -> tephra_api::HyperNode {
    let member = |kind: &str, name: &String| json!({"type": kind, "selector": {"exactMatch": {"name": name}}});
    let members: Vec<serde_json::Value> = h
        .nodes
        .iter()
        .map(|n| member("Node", n))
        .chain(h.hyper_nodes.iter().map(|n| member("HyperNode", n)))
        .collect();
    from(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": h.name},
        "spec": {"tier": h.tier, "members": members}
    }))
}

fn priority_class(p: i32) -> PriorityClass {
    from(json!({"metadata": {"name": format!("sim-p{p}")}, "value": p}))
}

/// The first `minAvailable` pods' requests, in task order (as Volcano's job controller sums
/// `minResources`).
fn min_resources(job: &JobSpec) -> BTreeMap<String, f64> {
    let mut left = job.min();
    let mut sum: BTreeMap<String, f64> = BTreeMap::new();
    for t in &job.tasks {
        let n = t.replicas.min(left);
        left -= n;
        let q = |v: &str| tephra_api::quantity::parse(v).unwrap_or(0.0);
        *sum.entry("cpu".into()).or_default() += q(&t.cpu) * n as f64;
        *sum.entry("memory".into()).or_default() += q(&t.memory) * n as f64;
        for (k, v) in &t.scalars {
            *sum.entry(k.clone()).or_default() += q(v) * n as f64;
        }
    }
    sum
}

/// A uid unique across namespaces; the namespace is left out for `sim`, so scenarios written
/// before jobs had namespaces keep their uids (and their sessions' tie-breaks).
fn uid(prefix: &str, namespace: &str, name: &str) -> String {
    if namespace == NAMESPACE {
        format!("{prefix}-{name}")
    } else {
        format!("{prefix}-{namespace}-{name}")
    }
}

fn podgroup_object(job: &JobSpec, phase: &str) -> PodGroup {
    let min_res: serde_json::Map<String, serde_json::Value> = min_resources(job)
        .into_iter()
        .map(|(k, v)| {
            let q = if k == "cpu" {
                format!("{}m", (v * 1000.0).round() as i64)
            } else {
                format!("{}", v.round() as i64)
            };
            (k, json!(q))
        })
        .collect();
    let mut spec = json!({
        "minMember": job.min(),
        "queue": job.queue.clone().unwrap_or_else(|| "default".into()),
        "minResources": min_res,
    });
    if let Some(p) = job.priority {
        spec["priorityClassName"] = json!(format!("sim-p{p}"));
    }
    let task_min: BTreeMap<&str, u32> = job
        .tasks
        .iter()
        .filter_map(|t| t.min_available.map(|m| (t.name.as_str(), m)))
        .collect();
    if !task_min.is_empty() {
        spec["minTaskMember"] = json!(task_min);
    }
    if let Some(nt) = &job.network_topology {
        spec["networkTopology"] = json!(nt);
    }
    // As the Job controller writes them: one policy per partitioned task.
    let sub_groups: Vec<serde_json::Value> = job
        .tasks
        .iter()
        .filter_map(|t| {
            let p = t.partition_policy.as_ref()?;
            let mut policy = json!({
                "name": t.name,
                "subGroupSize": p.partition_size.unwrap_or(1),
                "minSubGroups": p.min_partitions.unwrap_or(0),
                "labelSelector": {"matchLabels": {"volcano.sh/task-spec": t.name}},
                "matchLabelKeys": ["volcano.sh/partition-id"],
            });
            if let Some(nt) = &p.network_topology {
                policy["networkTopology"] = json!(nt);
            }
            Some(policy)
        })
        .collect();
    if !sub_groups.is_empty() {
        spec["subGroupPolicy"] = json!(sub_groups);
    }
    from(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"namespace": job.namespace(), "name": job.name,
                     "uid": uid("pg", job.namespace(), &job.name),
                     "creationTimestamp": rfc3339(job.arrival_ms)},
        "spec": spec,
        "status": {"phase": phase}
    }))
}

fn rfc3339(ms: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(EPOCH_MS + ms)
        .map(|t| {
            // Creation times have whole seconds in the API.
            let s = t.as_second();
            k8s_openapi::jiff::Timestamp::from_second(s)
                .unwrap_or(t)
                .to_string()
        })
        .unwrap_or_else(|_| "2026-01-01T00:00:00Z".into())
}

fn pod_object(job: &JobSpec, task: usize, replica: u32, generation: u32, now_ms: i64) -> Pod {
    let t = &job.tasks[task];
    let name = format!("{}-{}-{replica}", job.name, t.name);
    let mut requests = json!({"cpu": t.cpu, "memory": t.memory});
    for (k, v) in &t.scalars {
        requests[k] = json!(v);
    }
    let mut annotations = json!({
        "scheduling.k8s.io/group-name": job.name,
        "volcano.sh/task-spec": t.name,
    });
    if let Some(p) = t.preemptable {
        annotations["volcano.sh/preemptable"] = json!(p.to_string());
    }
    let mut labels = json!({"volcano.sh/task-spec": t.name});
    if let Some(p) = &t.partition_policy {
        let size = p.partition_size.unwrap_or(1).max(1) as u32;
        labels["volcano.sh/partition-id"] = json!((replica / size).to_string());
    }
    let mut spec = json!({
        "schedulerName": "volcano",
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
    });
    if let Some(p) = job.priority {
        spec["priority"] = json!(p);
        spec["priorityClassName"] = json!(format!("sim-p{p}"));
    }
    if !t.node_selector.is_empty() {
        spec["nodeSelector"] = json!(t.node_selector);
    }
    if !t.tolerations.is_empty() {
        spec["tolerations"] = json!(t.tolerations);
    }
    if let Some(a) = &t.affinity {
        spec["affinity"] = json!(a);
    }
    from(json!({
        "metadata": {
            "namespace": job.namespace(), "name": name,
            "uid": uid("uid", job.namespace(), &format!("{name}-{generation}")),
            "creationTimestamp": rfc3339(now_ms),
            "annotations": annotations,
            "labels": labels,
        },
        "spec": spec,
        "status": {"phase": "Pending"}
    }))
}

/// A running pod of another scheduler on its node (it holds the node's resources only).
fn other_pod_object(p: &OtherPodSpec) -> Pod {
    let mut requests = json!({"cpu": p.cpu, "memory": p.memory});
    for (k, v) in &p.scalars {
        requests[k] = json!(v);
    }
    from(json!({
        "metadata": {
            "namespace": p.namespace, "name": p.name,
            "uid": format!("other-{}-{}", p.namespace, p.name),
            "creationTimestamp": rfc3339(0),
        },
        "spec": {
            "schedulerName": tephra_api::keys::KUBE_DEFAULT_SCHEDULER,
            "nodeName": p.node,
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Running"}
    }))
}
