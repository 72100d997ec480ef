//! The guarantees, each a named check over what a session saw (its snapshot) and decided (its
//! outcome), and, for those that speak of time, over the sessions so far. A check returns the
//! violations it finds with the evidence a reader needs; [`Checker`] runs them all after every
//! session of a simulation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::engine::{SessionRecord, Sim};
use crate::actions::topology::{constraint_from, constraint_of};
use crate::config::SchedulerConf;
use crate::framework::Plugins;
use crate::ix::{IxVec, JobIx, NodeIx, TaskIx};
use crate::model::{JobInfo, NodeInfo, TaskInfo, TaskStatus};
use crate::outcome::{Verdict, run_session};
use crate::plugins::predicates::untolerated;
use crate::resource::{EPSILON, Resource};

/// A guarantee broken, with what shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The property's name (the function that checks it).
    pub property: &'static str,
    /// The session it was found after.
    pub session: u32,
    /// Simulated ms.
    pub at_ms: i64,
    /// What was seen.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} broken after session {} at {} ms: {}",
            self.property, self.session, self.at_ms, self.detail
        )
    }
}

/// Sessions a gang that could start may wait before *no starvation* calls it starved: one to
/// admit it, one after its pods exist, and one more for a placement made while its pods were
/// still arriving.
pub const STARVATION_BOUND: u32 = 3;

/// Sessions a gang of a queue below its guarantee may wait before *guarantee restored* calls
/// it denied: reclaim evicts in one, the victims' pods go, the gang is placed in the next.
pub const GUARANTEE_BOUND: u32 = 4;

/// Runs every check after every session and keeps what spans sessions.
#[derive(Debug, Default)]
pub struct Checker {
    /// Consecutive sessions each gang could have started and did not.
    could_start: Streaks,
    /// Consecutive sessions each gang of a queue below its guarantee waited with victims to
    /// reclaim and no eviction made for it.
    denied_guarantee: Streaks,
    /// Reclaims so far: (demand epoch, victim queue, reclaiming queue).
    reclaims: Vec<(u64, String, String)>,
    /// Every violation found so far.
    pub violations: Vec<Violation>,
    /// Skip the determinism re-run (it doubles the cost of a session).
    pub skip_reproducibility: bool,
}

impl Checker {
    /// Checks one session; returns how many violations it added.
    pub fn check(&mut self, sim: &Sim, rec: &SessionRecord) -> usize {
        let before = self.violations.len();
        let view = View::new(rec, sim.conf());
        let mut found = Vec::new();
        found.extend(no_partial_gang(&view));
        found.extend(no_node_overcommitted(&view));
        found.extend(no_queue_over_capability(&view));
        found.extend(no_department_over_capability(&view));
        found.extend(gang_inside_its_hypernode(&view));
        found.extend(partition_inside_its_hypernode(&view));
        found.extend(no_partial_partition(&view));
        found.extend(work_conserving(&view));
        found.extend(self.no_starvation(&view));
        if sim.conf().has_action("reclaim") {
            found.extend(self.guarantee_restored(&view));
        }
        found.extend(self.no_ping_pong(&view, sim.demand_epoch()));
        if !rec.outcome.evictions.is_empty() {
            found.extend(no_gang_broken_by_eviction(
                &view,
                &Plugins::from_conf(sim.conf()),
            ));
        }
        if !self.skip_reproducibility {
            found.extend(reproducible(&view, sim.conf()));
        }
        for (property, detail) in found {
            self.violations.push(Violation {
                property,
                session: rec.number,
                at_ms: rec.at_ms,
                detail,
            });
        }
        self.violations.len() - before
    }

    /// *No starvation*: a gang that fits whole on the free capacity (per node), whose queue
    /// is open and has room for it within its capability, and for which no gang of higher
    /// priority waits, starts within [`STARVATION_BOUND`] sessions. Volcano promises no
    /// bound; a user expects a job that fits an idle cluster to run.
    fn no_starvation(&mut self, v: &View) -> Vec<(&'static str, String)> {
        let mut held = Vec::new();
        for (j, job) in v.jobs().iter_enumerated() {
            if !v.waiting(j) {
                continue;
            }
            let higher_waiting = v
                .jobs()
                .iter_enumerated()
                .any(|(k, o)| k != j && v.waiting(k) && o.priority > job.priority);
            let could = !higher_waiting
                && v.queue_open(j)
                && v.within_capability(j, &v.gang_need(j))
                && v.fits_free(j);
            if !could {
                continue;
            }
            held.push(j);
        }
        self.could_start
            .tick(v, held, STARVATION_BOUND)
            .into_iter()
            .map(|(j, n)| {
                let id = &v.jobs()[j].id;
                (
                    "no_starvation",
                    format!(
                        "{id} could have started for {n} sessions and did not: {}",
                        v.reason(j)
                    ),
                )
            })
            .collect()
    }
}

impl Checker {
    /// *Guarantee restored*: with `reclaim` configured, a gang of a queue that holds less than
    /// its guarantee, whose minimum fits within that guarantee, starts within
    /// [`GUARANTEE_BOUND`] sessions or sees pods evicted on its behalf, whenever other queues
    /// hold pods reclaim may take (running, preemptable, in a reclaimable queue over its
    /// deserved share, of a gang above its minimum: Volcano's proportion and gang rules).
    fn guarantee_restored(&mut self, v: &View) -> Vec<(&'static str, String)> {
        let mut held = Vec::new();
        let helped: BTreeSet<&str> = v
            .rec
            .outcome
            .evictions
            .iter()
            .filter_map(|e| e.reason.strip_prefix("reclaimed for "))
            .filter_map(|key| v.queue_of_task(key))
            .collect();
        for (j, job) in v.jobs().iter_enumerated() {
            if !v.waiting(j) || helped.contains(job.queue.as_str()) {
                continue;
            }
            let Some(info) = v.rec.snapshot.queues.iter().find(|q| q.name == job.queue) else {
                continue;
            };
            let Some(guarantee) = &info.guarantee else {
                continue;
            };
            let need = v.gang_need(j);
            let after = v
                .queue_allocated
                .get(&job.queue)
                .cloned()
                .unwrap_or_default()
                .plus(&need);
            if !after.less_equal_in(guarantee, &need)
                || v.reclaimable_cpu(&job.queue) < need.milli_cpu
            {
                continue;
            }
            held.push(j);
        }
        self.denied_guarantee
            .tick(v, held, GUARANTEE_BOUND)
            .into_iter()
            .map(|(j, n)| {
                let job = &v.jobs()[j];
                (
                    "guarantee_restored",
                    format!(
                        "{} of queue {} waited {n} sessions below its guarantee with pods to reclaim: {}",
                        job.id,
                        job.queue,
                        v.reason(j)
                    ),
                )
            })
            .collect()
    }

    /// *No ping-pong*: reclaim never takes back for a queue what that queue just lost to the
    /// other under the same demand (no job arrived or finished since): a queue that reclaimed
    /// from another is not then reclaimed from for it while it holds no more than its deserved
    /// share. (Reclaim never takes a queue past its share; only room lent to it beyond its
    /// share, which the lender may take back, does.)
    fn no_ping_pong(&mut self, v: &View, epoch: u64) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for e in &v.rec.outcome.evictions {
            let Some(key) = e.reason.strip_prefix("reclaimed for ") else {
                continue;
            };
            let victim = v.queue_of_task(&format!("{}/{}", e.namespace, e.name));
            let reclaimer = v.queue_of_task(key);
            let (Some(victim), Some(reclaimer)) = (victim, reclaimer) else {
                continue;
            };
            if self
                .reclaims
                .iter()
                .any(|(ep, vq, rq)| *ep == epoch && vq == reclaimer && rq == victim)
                && !v.beyond_deserved_at_start(victim)
            {
                out.push((
                    "no_ping_pong",
                    format!(
                        "queue {reclaimer} reclaimed {}/{} from queue {victim}, which had just reclaimed from it under the same demand",
                        e.namespace, e.name
                    ),
                ));
            }
            self.reclaims
                .push((epoch, victim.to_string(), reclaimer.to_string()));
        }
        self.reclaims.retain(|(ep, _, _)| *ep == epoch);
        out
    }
}

/// Per gang, the consecutive sessions a condition has held for it.
#[derive(Debug, Default)]
struct Streaks(BTreeMap<String, u32>);

impl Streaks {
    /// One session: the condition held for the gangs `held` (indices into the session's jobs)
    /// and for no other. Returns those whose streak just passed `bound`, with its length.
    fn tick(&mut self, v: &View, held: Vec<JobIx>, bound: u32) -> Vec<(JobIx, u32)> {
        let mut next = BTreeMap::new();
        let mut over = Vec::new();
        for j in held {
            let id = v.jobs()[j].id.clone();
            let n = self.0.get(&id).copied().unwrap_or(0) + 1;
            if n == bound + 1 {
                over.push((j, n));
            }
            next.insert(id, n);
        }
        self.0 = next;
        over
    }
}

/// A session's snapshot with its placements applied: what the cluster holds once the plan is
/// bound.
struct View<'a> {
    rec: &'a SessionRecord,
    /// Node → used after the placements.
    used: IxVec<NodeIx, Resource>,
    /// Pod uid → node, for this session's placements.
    placed: BTreeMap<&'a str, &'a str>,
    /// Queue name → allocated after the placements.
    queue_allocated: BTreeMap<String, Resource>,
    /// Whether the configuration runs `capacity` with `enableHierarchy`.
    hierarchical: bool,
}

impl<'a> View<'a> {
    fn new(rec: &'a SessionRecord, conf: &SchedulerConf) -> Self {
        let s = &rec.snapshot;
        let node_ix: BTreeMap<&str, NodeIx> = s
            .nodes
            .iter_enumerated()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut used: IxVec<NodeIx, Resource> = s.nodes.iter().map(|n| n.used.clone()).collect();
        let placed: BTreeMap<&str, &str> = rec
            .outcome
            .plan
            .placements
            .iter()
            .map(|(uid, p)| (uid.as_str(), p.node.as_str()))
            .collect();
        let mut queue_allocated: BTreeMap<String, Resource> = BTreeMap::new();
        for job in &s.jobs {
            let qa = queue_allocated.entry(job.queue.clone()).or_default();
            for &t in &job.tasks {
                let task = &s.tasks[t];
                if task.status.is_allocated() || placed.contains_key(task.uid.as_str()) {
                    qa.add(&task.resreq);
                }
            }
        }
        for task in &s.tasks {
            if let Some(n) = placed.get(task.uid.as_str())
                && let Some(&i) = node_ix.get(n)
            {
                used[i].add(&task.resreq);
                used[i].add(&crate::session::pods_capacity(1));
            }
        }
        let hierarchical = conf
            .tiers
            .iter()
            .flat_map(|t| &t.plugins)
            .any(|p| p.name == "capacity" && p.enable_hierarchy == Some(true));
        Self {
            rec,
            used,
            placed,
            queue_allocated,
            hierarchical,
        }
    }

    fn jobs(&self) -> &IxVec<JobIx, JobInfo> {
        &self.rec.snapshot.jobs
    }

    fn task(&self, t: TaskIx) -> &TaskInfo {
        &self.rec.snapshot.tasks[t]
    }

    /// Placed or holding a node after this session.
    fn holds(&self, t: TaskIx) -> bool {
        let task = self.task(t);
        task.status.is_allocated()
            || task.status == TaskStatus::Succeeded
            || self.placed.contains_key(task.uid.as_str())
    }

    /// A gang with pods that is short of its minimum after the session.
    fn waiting(&self, j: JobIx) -> bool {
        let job = &self.jobs()[j];
        if matches!(
            self.rec.outcome.plan.gangs.get(&job.id),
            None | Some(Verdict::Ready)
        ) {
            return false;
        }
        let holding = job.tasks.iter().filter(|&&t| self.holds(t)).count() as i64;
        let pending = job
            .tasks
            .iter()
            .filter(|&&t| self.task(t).status == TaskStatus::Pending && !self.holds(t))
            .count() as i64;
        holding < job.min_available as i64 && holding + pending >= job.min_available as i64
    }

    /// The pending pods a waiting gang still needs for its minimum (the smallest ones).
    fn gang_need_tasks(&self, j: JobIx) -> Vec<TaskIx> {
        let job = &self.jobs()[j];
        let holding = job.tasks.iter().filter(|&&t| self.holds(t)).count();
        let short = (job.min_available.max(0) as usize).saturating_sub(holding);
        let mut pending: Vec<TaskIx> = job
            .tasks
            .iter()
            .copied()
            .filter(|&t| self.task(t).status == TaskStatus::Pending && !self.holds(t))
            .collect();
        pending.sort_by(|a, b| {
            let (ra, rb) = (&self.task(*a).resreq, &self.task(*b).resreq);
            ra.milli_cpu
                .total_cmp(&rb.milli_cpu)
                .then(ra.memory.total_cmp(&rb.memory))
        });
        pending.truncate(short);
        pending
    }

    fn gang_need(&self, j: JobIx) -> Resource {
        self.gang_need_tasks(j)
            .iter()
            .fold(Resource::zero(), |acc, &t| acc.plus(&self.task(t).resreq))
    }

    fn queue_open(&self, j: JobIx) -> bool {
        let q = &self.jobs()[j].queue;
        self.rec
            .snapshot
            .queues
            .iter()
            .find(|x| &x.name == q)
            .is_some_and(|x| x.is_open())
    }

    /// The queue's allocation with `need` stays within its capability (declared dimensions)
    /// and, where the proportion plugin runs, within its real capability: the cluster less
    /// the other queues' guarantees, which are kept for them (Volcano's `realCapability`).
    fn within_capability(&self, j: JobIx, need: &Resource) -> bool {
        let q = &self.jobs()[j].queue;
        let Some(info) = self.rec.snapshot.queues.iter().find(|x| &x.name == q) else {
            return false;
        };
        // With the hierarchy a queue's figures count the queues below it too.
        let held = if self.hierarchical {
            self.subtree_allocated(q)
        } else {
            self.queue_allocated.get(q).cloned().unwrap_or_default()
        };
        let after = held.plus(need);
        if let Some(r) = self.rec.outcome.figures.queues.get(q)
            && !after.less_equal_in(&r.real_capability, need)
        {
            return false;
        }
        if self.hierarchical {
            // Every ancestor's real capability bounds what its whole subtree holds.
            for a in self.ancestors(q) {
                if let Some(r) = self.rec.outcome.figures.queues.get(&a)
                    && !self
                        .subtree_allocated(&a)
                        .plus(need)
                        .less_equal_in(&r.real_capability, need)
                {
                    return false;
                }
            }
        }
        let Some(cap) = &info.capability else {
            return true;
        };
        cap.dimensions()
            .filter(|d| cap.get(d) > 0.0)
            .all(|d| after.get(d) <= cap.get(d) + EPSILON)
    }

    /// The queue's allocation with `need` stays within its deserved share as the session
    /// computed it.
    fn within_deserved(&self, j: JobIx, need: &Resource) -> bool {
        let q = &self.jobs()[j].queue;
        let Some(report) = self.rec.outcome.figures.queues.get(q) else {
            return true;
        };
        let after = self
            .queue_allocated
            .get(q)
            .cloned()
            .unwrap_or_default()
            .plus(need);
        after.less_equal_in(&report.deserved, need)
    }

    /// Another queue than the gang's wants room it is entitled to: it has a pending pod that
    /// its allocation, with the pod, keeps within its own deserved share (a waiting gang or a
    /// running gang's members beyond its minimum).
    fn others_want_room(&self, j: JobIx) -> bool {
        let q = &self.jobs()[j].queue;
        self.jobs().iter().any(|other| {
            other.queue != *q
                && other.tasks.iter().any(|&t| {
                    let task = self.task(t);
                    task.status == TaskStatus::Pending
                        && !self.holds(t)
                        && self
                            .rec
                            .outcome
                            .figures
                            .queues
                            .get(&other.queue)
                            .is_some_and(|r| {
                                self.queue_allocated
                                    .get(&other.queue)
                                    .cloned()
                                    .unwrap_or_default()
                                    .plus(&task.resreq)
                                    .less_equal_in(&r.deserved, &task.resreq)
                            })
                })
        })
    }

    /// Could the pods the gang needs be placed on the free capacity, node by node (first fit,
    /// largest first: a fit found proves one exists)?
    fn fits_free(&self, j: JobIx) -> bool {
        // A gang with sub-groups needs whole partitions, as many as its policies ask, each
        // where its topology allows: not judged here (`no_partial_partition` and
        // `partition_inside_its_hypernode` check what is placed of them).
        if !crate::subgroup::policies(&self.jobs()[j]).is_empty() {
            return false;
        }
        let mut tasks = self.gang_need_tasks(j);
        tasks.sort_by(|a, b| {
            self.task(*b)
                .resreq
                .milli_cpu
                .total_cmp(&self.task(*a).resreq.milli_cpu)
        });
        let nodes = &self.rec.snapshot.nodes;
        let used = self.used.clone();
        // Room other admitted gangs were promised: what they still lack of their minimum.
        let mut reserved = Resource::zero();
        for (k, job) in self.jobs().iter_enumerated() {
            if k != j
                && self.phase_after(k) == tephra_api::scheduling::PodGroupPhase::Inqueue
                && let Some(min) = &job.min_resources
            {
                let held = job
                    .tasks
                    .iter()
                    .filter(|&&t| self.holds(t))
                    .fold(Resource::zero(), |acc, &t| acc.plus(&self.task(t).resreq));
                reserved.add(&min.minus(&held));
            }
        }
        let free_total = nodes
            .iter()
            .zip(&used)
            .filter(|(n, _)| n.ready && !n.unschedulable)
            .fold(Resource::zero(), |acc, (n, u)| {
                acc.plus(&n.allocatable.minus(u))
            });
        let need = self.gang_need(j);
        if !need.less_equal_in(&free_total.minus(&reserved), &need) {
            return false;
        }
        let topology = &self.rec.snapshot.topology;
        let Some(c) = constraint_of(&self.jobs()[j], topology).filter(|c| c.hard) else {
            let all: Vec<NodeIx> = nodes.indices().collect();
            return first_fit(nodes, used, all.iter().copied(), &tasks, |t| self.task(t));
        };
        // A hard gang fits only inside one HyperNode of its tiers that holds its placed pods.
        let held = self.held_nodes(j);
        topology.domains_for(c.highest_tier, &held).any(|(_, d)| {
            first_fit(nodes, used.clone(), d.nodes.iter().copied(), &tasks, |t| {
                self.task(t)
            })
        })
    }

    /// The nodes the job's pods occupy after this session (finished pods hold none), in the
    /// snapshot's node order.
    fn held_nodes(&self, j: JobIx) -> Vec<NodeIx> {
        self.held_nodes_of(&self.jobs()[j].tasks)
    }

    /// The nodes `tasks` occupy after this session, in the snapshot's node order.
    fn held_nodes_of(&self, tasks: &[TaskIx]) -> Vec<NodeIx> {
        let s = &self.rec.snapshot;
        let mut held: Vec<NodeIx> = tasks
            .iter()
            .filter(|&&t| {
                self.task(t).status.occupies_node()
                    || self.placed.contains_key(self.task(t).uid.as_str())
            })
            .filter_map(|&t| {
                let task = self.task(t);
                self.placed
                    .get(task.uid.as_str())
                    .copied()
                    .or(task.node.as_deref())
            })
            .filter_map(|name| s.nodes.iter_enumerated().find(|(_, n)| n.name == name))
            .map(|(i, _)| i)
            .collect();
        held.sort();
        held.dedup();
        held
    }

    /// Did queue `q` hold more than its deserved share (in some dimension) when the session
    /// began?
    fn beyond_deserved_at_start(&self, q: &str) -> bool {
        let s = &self.rec.snapshot;
        let Some(deserved) = self.rec.outcome.figures.queues.get(q).map(|f| &f.deserved) else {
            return false;
        };
        let held = s
            .jobs
            .iter()
            .filter(|j| j.queue == q)
            .flat_map(|j| j.tasks.iter())
            .filter(|&&t| s.tasks[t].status.occupies_node())
            .fold(Resource::zero(), |acc, &t| acc.plus(&s.tasks[t].resreq));
        !held.less_equal(deserved)
    }

    /// The ancestors of queue `q` by name, nearest first, as the hierarchical `capacity`
    /// reads them (a queue without a parent hangs under `root`; a cycle ends the walk).
    fn ancestors(&self, q: &str) -> Vec<String> {
        let parent = |name: &str| -> Option<String> {
            if name == crate::plugins::hierarchy::ROOT {
                return None;
            }
            let info = self.rec.snapshot.queues.iter().find(|x| x.name == name)?;
            let p = info
                .parent
                .clone()
                .unwrap_or_else(|| crate::plugins::hierarchy::ROOT.to_string());
            self.rec
                .snapshot
                .queues
                .iter()
                .any(|x| x.name == p)
                .then_some(p)
        };
        let mut out: Vec<String> = Vec::new();
        let mut at = parent(q);
        while let Some(p) = at {
            if p == q || out.contains(&p) {
                return Vec::new();
            }
            at = parent(&p);
            out.push(p);
        }
        out
    }

    /// What queue `q` and every queue below it hold after the placements.
    fn subtree_allocated(&self, q: &str) -> Resource {
        self.queue_allocated
            .iter()
            .filter(|(name, _)| name.as_str() == q || self.ancestors(name).iter().any(|a| a == q))
            .fold(Resource::zero(), |acc, (_, r)| acc.plus(r))
    }

    /// The queue of the job of the pod `namespace/name`.
    fn queue_of_task(&self, key: &str) -> Option<&str> {
        let s = &self.rec.snapshot;
        s.jobs
            .iter()
            .find(|j| j.tasks.iter().any(|&t| s.tasks[t].key() == key))
            .map(|j| j.queue.as_str())
    }

    /// Millicores reclaim could take from queues other than `queue`: running, preemptable
    /// pods of reclaimable queues over their deserved share, beyond their gangs' minimums.
    fn reclaimable_cpu(&self, queue: &str) -> f64 {
        let s = &self.rec.snapshot;
        let mut cpu = 0.0;
        for job in s.jobs.iter().filter(|j| j.queue != queue) {
            let Some(info) = s.queues.iter().find(|q| q.name == job.queue) else {
                continue;
            };
            let over = self
                .rec
                .outcome
                .figures
                .queues
                .get(&job.queue)
                .is_some_and(|r| !r.allocated.less_equal(&r.deserved));
            if !info.reclaimable || !over {
                continue;
            }
            let running: Vec<TaskIx> = job
                .tasks
                .iter()
                .copied()
                .filter(|&t| s.tasks[t].status == TaskStatus::Running)
                .collect();
            let spare = running
                .len()
                .saturating_sub(job.min_available.max(0) as usize);
            cpu += running
                .iter()
                .filter(|&&t| s.tasks[t].preemptable)
                .take(spare)
                .map(|&t| s.tasks[t].resreq.milli_cpu)
                .sum::<f64>();
        }
        cpu
    }

    /// The gang's phase once the session's status writes land.
    fn phase_after(&self, j: JobIx) -> tephra_api::scheduling::PodGroupPhase {
        let job = &self.jobs()[j];
        self.rec
            .outcome
            .podgroups
            .iter()
            .find(|u| u.uid == job.uid)
            .and_then(|u| u.status.phase.clone())
            .unwrap_or_else(|| job.phase.clone())
    }

    /// The gang's verdict message.
    fn reason(&self, j: JobIx) -> String {
        match self.rec.outcome.plan.gangs.get(&self.jobs()[j].id) {
            Some(Verdict::Waiting(m)) => m.clone(),
            Some(Verdict::Ready) => "ready".into(),
            None => "no verdict".into(),
        }
    }
}

/// The task fits the node's room `allocatable − used` and its predicates (readiness, cordon,
/// node selector, taints, pod slots).
fn node_fits(node: &NodeInfo, used: &Resource, task: &TaskInfo) -> bool {
    if !node.ready || node.unschedulable {
        return false;
    }
    let c = &task.constraints;
    if c.node_selector
        .iter()
        .any(|(k, v)| node.labels.get(k) != Some(v))
    {
        return false;
    }
    if untolerated(&node.taints, &c.tolerations).is_some() {
        return false;
    }
    let after = used
        .plus(&task.resreq)
        .plus(&crate::session::pods_capacity(1));
    after.less_equal_in(
        &node.allocatable,
        &task.resreq.plus(&crate::session::pods_capacity(1)),
    )
}

/// First fit of `tasks` (in order) on `candidates`, each node's use starting at `used`: does
/// every task find a node?
fn first_fit<'t>(
    nodes: &IxVec<NodeIx, NodeInfo>,
    mut used: IxVec<NodeIx, Resource>,
    candidates: impl Iterator<Item = NodeIx> + Clone,
    tasks: &[TaskIx],
    task: impl Fn(TaskIx) -> &'t TaskInfo,
) -> bool {
    for &t in tasks {
        let task = task(t);
        let Some(n) = candidates
            .clone()
            .find(|&n| node_fits(&nodes[n], &used[n], task))
        else {
            return false;
        };
        used[n].add(&task.resreq);
        used[n].add(&crate::session::pods_capacity(1));
    }
    true
}

/// *A hard gang inside one HyperNode*: after a session, the pods of a gang whose PodGroup asks
/// for `networkTopology` mode `hard` hold nodes of one HyperNode of a tier it allows, whatever
/// the session placed (Volcano's network-topology-aware scheduling: a gang spread over
/// switches it must not cross trains slower than the user asked for).
fn gang_inside_its_hypernode(v: &View) -> Vec<(&'static str, String)> {
    let topology = &v.rec.snapshot.topology;
    let mut out = Vec::new();
    for (j, job) in v.jobs().iter_enumerated() {
        let Some(c) = constraint_of(job, topology).filter(|c| c.hard) else {
            continue;
        };
        let held = v.held_nodes(j);
        if held.is_empty() || topology.domains_for(c.highest_tier, &held).next().is_some() {
            continue;
        }
        let names: Vec<&str> = held
            .iter()
            .map(|&n| v.rec.snapshot.nodes[n].name.as_str())
            .collect();
        out.push((
            "gang_inside_its_hypernode",
            format!(
                "{} (hard, tier {} or lower) holds nodes {names:?}, inside no such HyperNode",
                job.id, c.highest_tier
            ),
        ));
    }
    out
}

/// *A partition inside one HyperNode*: after a session, the pods of each sub-group (a
/// partition of a vcJob task) whose policy asks for `networkTopology` mode `hard` hold nodes of
/// one HyperNode of a tier it allows (Volcano's sub-group topology: a partition's collective
/// traffic stays under one switch).
fn partition_inside_its_hypernode(v: &View) -> Vec<(&'static str, String)> {
    let topology = &v.rec.snapshot.topology;
    let mut out = Vec::new();
    if topology.is_empty() {
        return out;
    }
    for job in v.jobs().iter() {
        let policies = crate::subgroup::policies(job);
        for g in crate::subgroup::sub_groups(job, &v.rec.snapshot.tasks) {
            let Some(c) = policies[g.policy]
                .network_topology
                .as_ref()
                .and_then(|nt| constraint_from(nt, topology))
                .filter(|c| c.hard)
            else {
                continue;
            };
            let held = v.held_nodes_of(&g.tasks);
            if held.is_empty() || topology.domains_for(c.highest_tier, &held).next().is_some() {
                continue;
            }
            let names: Vec<&str> = held
                .iter()
                .map(|&n| v.rec.snapshot.nodes[n].name.as_str())
                .collect();
            out.push((
                "partition_inside_its_hypernode",
                format!(
                    "{} sub-group {} (hard, tier {} or lower) holds nodes {names:?}, inside no such HyperNode",
                    job.id, g.name, c.highest_tier
                ),
            ));
        }
    }
    out
}

/// *A partition placed whole*: a session places pods of a sub-group only when, with them, it
/// holds at least its `subGroupSize` pods (a partition is a gang of its own).
fn no_partial_partition(v: &View) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for job in v.jobs().iter() {
        for g in crate::subgroup::sub_groups(job, &v.rec.snapshot.tasks) {
            let placed = g
                .tasks
                .iter()
                .filter(|&&t| v.placed.contains_key(v.task(t).uid.as_str()))
                .count();
            if placed == 0 {
                continue;
            }
            let holding = g.tasks.iter().filter(|&&t| v.holds(t)).count();
            if (holding as u32) < g.size {
                out.push((
                    "no_partial_partition",
                    format!(
                        "{} sub-group {} was given {placed} pods and holds {holding} of its {}",
                        job.id, g.name, g.size
                    ),
                ));
            }
        }
    }
    out
}

/// *No partial gang*: a session places pods of a gang only when, with them, the gang holds at
/// least its `minMember` (Volcano's gang plugin: `JobReady` before a statement commits).
fn no_partial_gang(v: &View) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for job in v.jobs() {
        let placed = job
            .tasks
            .iter()
            .filter(|&&t| v.placed.contains_key(v.task(t).uid.as_str()))
            .count();
        if placed == 0 {
            continue;
        }
        let holding = job.tasks.iter().filter(|&&t| v.holds(t)).count();
        if (holding as i64) < job.min_available as i64 {
            out.push((
                "no_partial_gang",
                format!(
                    "{} was given {placed} pods and holds {holding} of its minimum {}",
                    job.id, job.min_available
                ),
            ));
        }
    }
    out
}

/// *No gang broken by eviction*: where the gang plugin takes part in choosing victims (its
/// `enableReclaimable` / `enablePreemptable`), a session's evictions leave every gang they touch
/// with at least its `minMember` of pods holding nodes (running, or placed by the session), or
/// with no running pod at all (the gang
/// goes back to waiting whole). Volcano's gang plugin keeps the minimum only while its own tier
/// decides; when it names no victim a lower tier may take the gang's pods one by one, and the
/// rest then hold their nodes running nothing useful.
fn no_gang_broken_by_eviction(v: &View, plugins: &Plugins) -> Vec<(&'static str, String)> {
    let mut evicted: BTreeMap<&str, bool> = BTreeMap::new();
    for e in &v.rec.outcome.evictions {
        let reclaim = e.reason.starts_with("reclaimed for ");
        evicted.insert(e.uid.as_str(), reclaim);
    }
    let mut out = Vec::new();
    for job in v.jobs() {
        let mut kinds = job
            .tasks
            .iter()
            .filter_map(|&t| evicted.get(v.task(t).uid.as_str()).copied());
        let Some(reclaim) = kinds.next() else {
            continue;
        };
        if !plugins.keeps_gangs(reclaim) {
            continue;
        }
        let gone = |t: TaskIx| evicted.contains_key(v.task(t).uid.as_str());
        // Pods this session placed hold their nodes from now on, as the running ones do.
        let placed = |t: TaskIx| v.placed.contains_key(v.task(t).uid.as_str());
        let ready = job
            .tasks
            .iter()
            .filter(|&&t| {
                let s = v.task(t).status;
                (s.is_allocated() || s == TaskStatus::Succeeded || placed(t)) && !gone(t)
            })
            .count();
        let running = job
            .tasks
            .iter()
            .filter(|&&t| v.task(t).status.is_allocated() && !gone(t))
            .count();
        if running > 0 && (ready as i64) < job.min_available as i64 {
            out.push((
                "no_gang_broken_by_eviction",
                format!(
                    "{} was left with {ready} of its minimum {} ({running} running) by {}",
                    job.id,
                    job.min_available,
                    if reclaim { "reclaim" } else { "preemption" }
                ),
            ));
        }
    }
    out
}

/// *No node over-committed*: after the placements, what a node's pods request stays within
/// its allocatable in every dimension (pods slots included).
fn no_node_overcommitted(v: &View) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (n, used) in v.rec.snapshot.nodes.iter().zip(&v.used) {
        if let Some(d) = used.first_exceeding(&n.allocatable) {
            let placed_here = v.placed.values().any(|p| *p == n.name);
            if placed_here {
                out.push((
                    "no_node_overcommitted",
                    format!(
                        "node {} holds {} of {} allocatable ({d})",
                        n.name, used, n.allocatable
                    ),
                ));
            }
        }
    }
    out
}

/// *No queue over its capability*: a queue given pods this session holds, with them, no more
/// than its `spec.capability` in the dimensions the capability declares.
fn no_queue_over_capability(v: &View) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for q in &v.rec.snapshot.queues {
        let Some(cap) = &q.capability else { continue };
        let given = v.jobs().iter().any(|j| {
            j.queue == q.name
                && j.tasks
                    .iter()
                    .any(|&t| v.placed.contains_key(v.task(t).uid.as_str()))
        });
        let alloc = v.queue_allocated.get(&q.name).cloned().unwrap_or_default();
        let over = cap
            .dimensions()
            .filter(|d| cap.get(d) > 0.0)
            .find(|d| alloc.get(d) > cap.get(d) + EPSILON);
        if given && let Some(d) = over {
            out.push((
                "no_queue_over_capability",
                format!(
                    "queue {} holds {alloc} against its capability {cap} ({d})",
                    q.name
                ),
            ));
        }
    }
    out
}

/// *No department over its capability*: with `capacity` and `enableHierarchy`, a session
/// places pods in a queue's subtree only while the queue and everything below it hold no more
/// than the queue's capability (a team never takes its department past its bound).
fn no_department_over_capability(v: &View) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if !v.hierarchical {
        return out;
    }
    for q in &v.rec.snapshot.queues {
        let Some(cap) = &q.capability else { continue };
        let given = v.jobs().iter().any(|j| {
            (j.queue == q.name || v.ancestors(&j.queue).contains(&q.name))
                && j.tasks
                    .iter()
                    .any(|&t| v.placed.contains_key(v.task(t).uid.as_str()))
        });
        let held = v.subtree_allocated(&q.name);
        let over = cap
            .dimensions()
            .filter(|d| cap.get(d) > 0.0)
            .find(|d| held.get(d) > cap.get(d) + EPSILON);
        if given && let Some(d) = over {
            out.push((
                "no_department_over_capability",
                format!(
                    "queue {} and the queues below it hold {held} against its capability {cap} ({d})",
                    q.name
                ),
            ));
        }
    }
    out
}

/// *Work conservation*: no session ends with a waiting gang that fits whole on the free
/// capacity (node by node, with the predicates) in an open queue with room for it within its
/// capability and its deserved share, or within its capability alone when no other queue
/// wants room within its own share (the room is nobody else's). Volcano's allocate action tries every job of
/// every queue that is not overused, so a gang passed over is a decision some rule made.
fn work_conserving(v: &View) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (j, job) in v.jobs().iter_enumerated() {
        if !v.waiting(j) || !v.queue_open(j) {
            continue;
        }
        let need = v.gang_need(j);
        if !v.within_capability(j, &need) {
            continue;
        }
        if !v.within_deserved(j, &need) && v.others_want_room(j) {
            continue;
        }
        if v.fits_free(j) {
            out.push((
                "work_conserving",
                format!(
                    "{} waits for {need} though it fits the free capacity: {}",
                    job.id,
                    v.reason(j)
                ),
            ));
        }
    }
    out
}

/// *Reproducible plans*: the same snapshot and configuration decide the same placements and
/// verdicts (the session is a function of its inputs; the plan does not depend on hash order
/// or the clock).
fn reproducible(v: &View, conf: &SchedulerConf) -> Vec<(&'static str, String)> {
    let again = run_session(
        v.rec.snapshot.clone(),
        conf,
        &format!("s{}", v.rec.number),
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_millisecond(super::engine::EPOCH_MS + v.rec.at_ms)
                .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        ),
    );
    let a = &v.rec.outcome.plan;
    let b = &again.plan;
    if a.placements != b.placements || a.gangs != b.gangs {
        let diff: Vec<String> = a
            .placements
            .iter()
            .filter(|(k, p)| b.placements.get(*k) != Some(p))
            .map(|(_, p)| format!("{}/{} on {}", p.namespace, p.name, p.node))
            .take(5)
            .collect();
        return vec![(
            "reproducible",
            format!(
                "the same snapshot decided differently ({} against {} placements; first differing: {})",
                a.placements.len(),
                b.placements.len(),
                diff.join(", ")
            ),
        )];
    }
    Vec::new()
}
