//! Plugins and how their answers combine (Volcano's `framework/session_plugins.go`).
//!
//! A plugin implements only the hooks it cares about; every hook has a neutral default
//! (`None` = "not registered", `0` = "no vote"). [`Plugins`] walks the tiers in order and
//! combines the answers the way Volcano does: the first decisive order wins, readiness and
//! predicates are ANDed, pipelined/enqueueable are voted per tier, scores are summed. Each
//! hook is gated by its plugin's `enable*` switch from the configuration.

use std::cmp::Ordering;

use super::config::{PluginOption, SchedulerConf, on};
use super::ix::{JobIx, NodeIx, QueueIx, TaskIx};
use super::session::State;

/// Why a node does not fit a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unfit {
    /// `true` when evicting pods could make it fit (Volcano's `Unschedulable`); `false` when
    /// nothing would (`UnschedulableAndUnresolvable`).
    pub resolvable: bool,
    /// The reason as users see it (`Insufficient cpu`, `node(s) had untolerated taint`).
    pub reason: String,
}

impl Unfit {
    /// Evictions would not help.
    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self {
            resolvable: false,
            reason: reason.into(),
        }
    }
    /// Evictions might help.
    pub fn resolvable(reason: impl Into<String>) -> Self {
        Self {
            resolvable: true,
            reason: reason.into(),
        }
    }
}

/// A job that failed a validity check: reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// Short reason (`NotEnoughTasks`).
    pub reason: String,
    /// The message.
    pub message: String,
}

/// The hooks. Indices are into the session's `jobs`, `tasks`, `nodes` and `queues`.
#[allow(unused_variables)]
pub trait Plugin: Send {
    /// Volcano's plugin name.
    fn name(&self) -> &'static str;
    /// Called once the session's state is built.
    fn open(&mut self, st: &State) {}
    /// Called when the actions are done; may write job conditions into the state.
    fn close(&mut self, st: &mut State) {}
    /// Job order: `Some(Less)` puts `a` first; `Some(Equal)` or `None` defers.
    fn job_order(&self, st: &State, a: JobIx, b: JobIx) -> Option<Ordering> {
        None
    }
    /// Task order.
    fn task_order(&self, st: &State, a: TaskIx, b: TaskIx) -> Option<Ordering> {
        None
    }
    /// Queue order.
    fn queue_order(&self, st: &State, a: QueueIx, b: QueueIx) -> Option<Ordering> {
        None
    }
    /// Job validity (not gated by a switch).
    fn job_valid(&self, st: &State, job: JobIx) -> Option<Result<(), Invalid>> {
        None
    }
    /// Job readiness.
    fn job_ready(&self, st: &State, job: JobIx) -> Option<bool> {
        None
    }
    /// Pipelined vote: −1, 0 (abstain), +1.
    fn job_pipelined(&self, st: &State, job: JobIx) -> i8 {
        0
    }
    /// Enqueue vote: −1, 0, +1. A rejecting plugin records its event in `st`.
    fn job_enqueueable(&mut self, st: &mut State, job: JobIx) -> i8 {
        0
    }
    /// The job was enqueued.
    fn job_enqueued(&mut self, st: &State, job: JobIx) {}
    /// May the queue take this task now?
    fn allocatable(&self, st: &State, queue: QueueIx, task: TaskIx) -> Option<bool> {
        None
    }
    /// Has the queue had its share?
    fn overused(&self, st: &State, queue: QueueIx) -> Option<bool> {
        None
    }
    /// Does the node fit the task (beyond resources)?
    fn predicate(&self, st: &State, task: TaskIx, node: NodeIx) -> Result<(), Unfit> {
        Ok(())
    }
    /// A score for placing the task on the node (summed over plugins).
    fn node_score(&self, st: &State, task: TaskIx, node: NodeIx) -> f64 {
        0.0
    }
    /// A task was allocated or pipelined to a node.
    fn on_allocate(&mut self, st: &State, task: TaskIx) {}
    /// An allocation was undone.
    fn on_deallocate(&mut self, st: &State, task: TaskIx) {}
    /// Of `victims` (running tasks), which may be preempted for `preemptor`? `None`: no opinion.
    fn preemptable(
        &self,
        st: &State,
        preemptor: TaskIx,
        victims: &[TaskIx],
    ) -> Option<Vec<TaskIx>> {
        None
    }
    /// Of `victims`, which may be reclaimed for `reclaimer` (another queue's task)?
    fn reclaimable(
        &self,
        st: &State,
        reclaimer: TaskIx,
        victims: &[TaskIx],
    ) -> Option<Vec<TaskIx>> {
        None
    }
    /// Does the job want more resources (a preemptor candidate)?
    fn job_starving(&self, st: &State, job: JobIx) -> Option<bool> {
        None
    }
    /// May the queue reclaim from others?
    fn preemptive(&self, st: &State, queue: QueueIx, task: TaskIx) -> Option<bool> {
        None
    }
}

/// One configured plugin with its switches.
pub struct Slot {
    /// The switches and arguments.
    pub option: PluginOption,
    /// The plugin.
    pub plugin: Box<dyn Plugin>,
}

/// Every configured plugin, by tier.
pub struct Plugins {
    /// Tiers in order.
    pub tiers: Vec<Vec<Slot>>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<Vec<&str>> = self
            .tiers
            .iter()
            .map(|t| t.iter().map(|s| s.plugin.name()).collect())
            .collect();
        f.debug_struct("Plugins").field("tiers", &names).finish()
    }
}

impl Plugins {
    /// Builds the plugins a configuration names.
    pub fn from_conf(conf: &SchedulerConf) -> Self {
        let tiers = conf
            .tiers
            .iter()
            .map(|t| {
                t.plugins
                    .iter()
                    .filter_map(|o| {
                        super::plugins::build(o).map(|plugin| Slot {
                            option: o.clone(),
                            plugin,
                        })
                    })
                    .collect()
            })
            .collect();
        Self { tiers }
    }

    fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.tiers.iter().flatten()
    }

    fn slots_mut(&mut self) -> impl Iterator<Item = &mut Slot> {
        self.tiers.iter_mut().flatten()
    }

    /// Session open for every plugin.
    pub fn open(&mut self, st: &State) {
        for s in self.slots_mut() {
            s.plugin.open(st);
        }
    }

    /// Session close for every plugin.
    pub fn close(&mut self, st: &mut State) {
        for s in self.slots_mut() {
            s.plugin.close(st);
        }
    }

    fn first_order(
        &self,
        gate: impl Fn(&PluginOption) -> bool,
        f: impl Fn(&dyn Plugin) -> Option<Ordering>,
    ) -> Ordering {
        for s in self.slots() {
            if !gate(&s.option) {
                continue;
            }
            match f(s.plugin.as_ref()) {
                Some(o) if o != Ordering::Equal => return o,
                _ => {}
            }
        }
        Ordering::Equal
    }

    /// Job order with Volcano's fallback (creation time, then uid), with the order the
    /// PodGroups were seen in between: creation times have whole seconds, and gangs created in
    /// the same second then go in creation order, not in the random order of their uids.
    pub fn job_order(&self, st: &State, a: JobIx, b: JobIx) -> Ordering {
        self.first_order(|o| on(o.enable_job_order), |p| p.job_order(st, a, b))
            .then_with(|| {
                let (ja, jb) = (&st.jobs[a], &st.jobs[b]);
                ja.created
                    .cmp(&jb.created)
                    .then_with(|| ja.seen.cmp(&jb.seen))
                    .then_with(|| ja.uid.cmp(&jb.uid))
            })
    }

    /// Task order with Volcano's fallback (name suffix, creation time, uid).
    pub fn task_order(&self, st: &State, a: TaskIx, b: TaskIx) -> Ordering {
        self.first_order(|o| on(o.enable_task_order), |p| p.task_order(st, a, b))
            .then_with(|| {
                let (ta, tb) = (&st.tasks[a], &st.tasks[b]);
                match (ta.index_suffix(), tb.index_suffix()) {
                    (Some(x), Some(y)) if x != y => x.cmp(&y),
                    _ => ta
                        .created
                        .cmp(&tb.created)
                        .then_with(|| ta.uid.cmp(&tb.uid)),
                }
            })
    }

    /// Queue order with Volcano's fallback (creation time, then name).
    pub fn queue_order(&self, st: &State, a: QueueIx, b: QueueIx) -> Ordering {
        self.first_order(|o| on(o.enable_queue_order), |p| p.queue_order(st, a, b))
            .then_with(|| {
                let (qa, qb) = (&st.queues[a], &st.queues[b]);
                qa.created
                    .cmp(&qb.created)
                    .then_with(|| qa.name.cmp(&qb.name))
            })
    }

    /// The first failing validity check.
    pub fn job_valid(&self, st: &State, job: JobIx) -> Result<(), Invalid> {
        for s in self.slots() {
            if let Some(Err(e)) = s.plugin.job_valid(st, job) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Every enabled plugin agrees the job is ready.
    pub fn job_ready(&self, st: &State, job: JobIx) -> bool {
        self.slots()
            .filter(|s| on(s.option.enable_job_ready))
            .all(|s| s.plugin.job_ready(st, job).unwrap_or(true))
    }

    /// Tiered vote: any −1 rejects; a +1 in a tier accepts; no votes accept.
    pub fn job_pipelined(&self, st: &State, job: JobIx) -> bool {
        for tier in &self.tiers {
            let mut has_yes = false;
            for s in tier.iter().filter(|s| on(s.option.enable_job_pipelined)) {
                match s.plugin.job_pipelined(st, job) {
                    v if v < 0 => return false,
                    v if v > 0 => has_yes = true,
                    _ => {}
                }
            }
            if has_yes {
                return true;
            }
        }
        true
    }

    /// Tiered vote, as [`Self::job_pipelined`], on `enableJobEnqueued` plugins.
    pub fn job_enqueueable(&mut self, st: &mut State, job: JobIx) -> bool {
        for tier in &mut self.tiers {
            let mut has_yes = false;
            for s in tier.iter_mut().filter(|s| on(s.option.enable_job_enqueued)) {
                match s.plugin.job_enqueueable(st, job) {
                    v if v < 0 => return false,
                    v if v > 0 => has_yes = true,
                    _ => {}
                }
            }
            if has_yes {
                return true;
            }
        }
        true
    }

    /// Tells every plugin the job was enqueued.
    pub fn job_enqueued(&mut self, st: &State, job: JobIx) {
        for s in self
            .slots_mut()
            .filter(|s| on(s.option.enable_job_enqueued))
        {
            s.plugin.job_enqueued(st, job);
        }
    }

    /// Every enabled plugin lets the queue take the task.
    pub fn allocatable(&self, st: &State, queue: QueueIx, task: TaskIx) -> bool {
        self.slots()
            .filter(|s| on(s.option.enabled_allocatable))
            .all(|s| s.plugin.allocatable(st, queue, task).unwrap_or(true))
    }

    /// Any enabled plugin says the queue is overused.
    pub fn overused(&self, st: &State, queue: QueueIx) -> bool {
        self.slots()
            .filter(|s| on(s.option.enabled_overused))
            .any(|s| s.plugin.overused(st, queue).unwrap_or(false))
    }

    /// The first predicate failure.
    pub fn predicate(&self, st: &State, task: TaskIx, node: NodeIx) -> Result<(), Unfit> {
        for s in self.slots().filter(|s| on(s.option.enable_predicate)) {
            s.plugin.predicate(st, task, node)?;
        }
        Ok(())
    }

    /// The summed score.
    pub fn node_score(&self, st: &State, task: TaskIx, node: NodeIx) -> f64 {
        self.slots()
            .filter(|s| on(s.option.enable_node_order))
            .map(|s| s.plugin.node_score(st, task, node))
            .sum()
    }

    /// Allocation handlers.
    pub fn on_allocate(&mut self, st: &State, task: TaskIx) {
        for s in self.slots_mut() {
            s.plugin.on_allocate(st, task);
        }
    }

    /// De-allocation handlers.
    pub fn on_deallocate(&mut self, st: &State, task: TaskIx) {
        for s in self.slots_mut() {
            s.plugin.on_deallocate(st, task);
        }
    }

    fn victims(
        &self,
        gate: impl Fn(&PluginOption) -> bool,
        victims: &[TaskIx],
        f: impl Fn(&dyn Plugin, &[TaskIx]) -> Option<Vec<TaskIx>>,
    ) -> Vec<TaskIx> {
        // Within a tier, the intersection of every opinion; the first tier that names victims
        // decides (Volcano's Preemptable/Reclaimable). A tier where a plugin names none, or
        // whose opinions have none in common, decides nothing and the next tier is asked: so a
        // one-pod job the gang plugin keeps (it never leaves a job below `minMember`) can still
        // be reclaimed when `proportion` or `capacity` finds its queue past its share, as in
        // Volcano, while a job in a queue within its share stays. Volcano lets that lower tier
        // break a running gang; tephra's actions then take such a gang whole or not at all
        // (`keeps_gangs`). Critical pods, which a lower tier could name, never reach this
        // point (the actions leave them out).
        for tier in &self.tiers {
            let mut result: Option<Vec<TaskIx>> = None;
            for s in tier.iter().filter(|s| gate(&s.option)) {
                let Some(v) = f(s.plugin.as_ref(), victims) else {
                    continue;
                };
                if v.is_empty() {
                    result = None;
                    break;
                }
                let merged: Vec<TaskIx> = match result {
                    None => v,
                    Some(prev) => prev.into_iter().filter(|x| v.contains(x)).collect(),
                };
                if merged.is_empty() {
                    result = None;
                    break;
                }
                result = Some(merged);
            }
            if let Some(r) = result {
                return r;
            }
        }
        Vec::new()
    }

    /// Victims every plugin of the deciding tier allows to preempt.
    pub fn preemptable(&self, st: &State, preemptor: TaskIx, victims: &[TaskIx]) -> Vec<TaskIx> {
        self.victims(
            |o| on(o.enable_preemptable),
            victims,
            |p, v| p.preemptable(st, preemptor, v),
        )
    }

    /// Victims every plugin of the deciding tier allows to reclaim.
    pub fn reclaimable(&self, st: &State, reclaimer: TaskIx, victims: &[TaskIx]) -> Vec<TaskIx> {
        self.victims(
            |o| on(o.enable_reclaimable),
            victims,
            |p, v| p.reclaimable(st, reclaimer, v),
        )
    }

    /// Of the victims a tier chose for reclaim, those the queue-share plugins (`proportion`,
    /// `capacity`) also allow, whatever their tier: only pods of queues past their share.
    ///
    /// Volcano lets the first tier with an opinion decide alone, and in its usual tiers that
    /// is the gang plugin's, which speaks only of gang minimums: reclaim then takes pods from
    /// queues within their share, those queues take the room back in the next session, and
    /// the two evict each other for as long as the demand stays (the simulator's
    /// `no_ping_pong`).
    pub fn share_reclaimable(
        &self,
        st: &State,
        reclaimer: TaskIx,
        victims: &[TaskIx],
    ) -> Vec<TaskIx> {
        let mut out = victims.to_vec();
        for s in self.slots().filter(|s| {
            on(s.option.enable_reclaimable) && matches!(s.plugin.name(), "proportion" | "capacity")
        }) {
            if let Some(v) = s.plugin.reclaimable(st, reclaimer, &out) {
                out.retain(|x| v.contains(x));
            }
        }
        out
    }

    /// Of the victims chosen (by whichever tier), those the `pdb` plugin's budgets allow,
    /// whatever its tier: a PodDisruptionBudget binds every eviction.
    pub fn within_budgets(
        &self,
        st: &State,
        evictor: TaskIx,
        victims: &[TaskIx],
        reclaim: bool,
    ) -> Vec<TaskIx> {
        let mut out = victims.to_vec();
        for s in self.slots().filter(|s| s.plugin.name() == "pdb") {
            let allowed = if reclaim {
                s.plugin.reclaimable(st, evictor, &out)
            } else {
                s.plugin.preemptable(st, evictor, &out)
            };
            if let Some(v) = allowed {
                out.retain(|x| v.contains(x));
            }
        }
        out
    }

    /// Whether the gang plugin takes part in choosing victims for reclaim (`reclaim`) or for
    /// preemption. Its rule, a running gang keeps its `minMember` or goes whole, then binds
    /// whatever tier names the victims (the actions apply it last).
    pub fn keeps_gangs(&self, reclaim: bool) -> bool {
        self.slots().any(|s| {
            s.plugin.name() == "gang"
                && on(if reclaim {
                    s.option.enable_reclaimable
                } else {
                    s.option.enable_preemptable
                })
        })
    }

    /// Every enabled plugin agrees the job is starving.
    pub fn job_starving(&self, st: &State, job: JobIx) -> bool {
        let mut any = false;
        for s in self.slots().filter(|s| on(s.option.enable_job_starving)) {
            if let Some(v) = s.plugin.job_starving(st, job) {
                any = true;
                if !v {
                    return false;
                }
            }
        }
        any
    }

    /// Every enabled plugin lets the queue reclaim.
    pub fn preemptive(&self, st: &State, queue: QueueIx, task: TaskIx) -> bool {
        self.slots()
            .filter(|s| on(s.option.enable_preemptive))
            .all(|s| s.plugin.preemptive(st, queue, task).unwrap_or(true))
    }
}
