//! Network-topology-aware placement (Volcano's `network-topology-aware` plugin and the
//! allocate action's HyperNode search): a gang whose PodGroup carries `networkTopology` is
//! placed inside one HyperNode.
//!
//! * `hard`: inside one HyperNode of tier at most `highestTierAllowed` (or the tier named by
//!   `highestTierName`), or not at all: the gang waits, and its condition says why.
//! * `soft`: the same search first; when no HyperNode has room, anywhere in the cluster.
//!
//! The search tries the lowest tier first (a rack before a spine), and within a tier the
//! HyperNode already the fullest (HyperNode binpack: whole HyperNodes stay free for the gangs
//! that need them). HyperNodes too small for what the gang still needs are skipped without a
//! try. A gang with members already placed (grown beyond its minimum, or a restarted pod)
//! stays in a HyperNode holding all of them. When no HyperNode holds any node, a gang's
//! `networkTopology` has nothing to act on and it is placed as any other.

use crate::ix::{JobIx, NodeIx, QueueIx, TaskIx};
use crate::model::{JobInfo, TaskStatus};
use crate::resource::Resource;
use crate::session::{Session, State};
use crate::topology::Topology;
use tephra_api::scheduling::{NetworkTopologyMode, NetworkTopologySpec};

use super::allocate::{self, Turn};

/// A gang's network-topology constraint as the search reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    /// `hard`: one HyperNode or nothing; `soft`: one HyperNode if any has room.
    pub hard: bool,
    /// The highest tier allowed (`i64::MAX` when neither a tier nor a tier name is given).
    pub highest_tier: i64,
}

impl Constraint {
    /// The tiers it allows, as waiting messages say it after "HyperNode": ` of tier 2 or
    /// lower`, or nothing without a bound.
    pub fn tiers_allowed(&self) -> String {
        if self.highest_tier == i64::MAX {
            String::new()
        } else {
            format!(" of tier {} or lower", self.highest_tier)
        }
    }
}

/// The constraint of job `j`, `None` without `networkTopology` or without HyperNodes.
pub fn constraint(st: &State, j: JobIx) -> Option<Constraint> {
    constraint_of(&st.jobs[j], &st.topology)
}

/// The constraint of `job` over `topology`, `None` without `networkTopology` or without
/// HyperNodes.
pub fn constraint_of(job: &JobInfo, topology: &Topology) -> Option<Constraint> {
    constraint_from(job.podgroup.spec.network_topology.as_ref()?, topology)
}

/// A `networkTopology` (a PodGroup's or a sub-group policy's) over `topology`, `None` without
/// HyperNodes.
pub fn constraint_from(nt: &NetworkTopologySpec, topology: &Topology) -> Option<Constraint> {
    if topology.is_empty() {
        return None;
    }
    let by_name = nt
        .highest_tier_name
        .as_deref()
        .and_then(|name| topology.tier_named(name));
    let highest_tier = nt
        .highest_tier_allowed
        .map(i64::from)
        .or(by_name)
        .unwrap_or(i64::MAX);
    Some(Constraint {
        hard: nt.mode != Some(NetworkTopologyMode::Soft),
        highest_tier,
    })
}

/// One job's turn, inside a HyperNode when its PodGroup asks for one (see the module docs);
/// otherwise [`allocate::allocate_job`] over the whole cluster.
pub fn allocate_job(
    ssn: &mut Session,
    q: QueueIx,
    j: JobIx,
    tasks: &mut Vec<TaskIx>,
    cursor: &mut usize,
    held: Option<&Resource>,
) -> Turn {
    let Some(c) = constraint(&ssn.state, j) else {
        return allocate::allocate_job(ssn, q, j, tasks, cursor, held, None);
    };
    for d in candidates(&ssn.state, j, &c, tasks) {
        let nodes = ssn.state.topology.domains[d].nodes.clone();
        let mut attempt = tasks.clone();
        let turn = allocate::allocate_job(ssn, q, j, &mut attempt, cursor, held, Some(&nodes));
        if !matches!(turn, Turn::Discarded) {
            *tasks = attempt;
            return turn;
        }
    }
    if c.hard {
        ssn.state.job_state[j].job_fit_error = Some(format!(
            "no HyperNode{} has room for the gang (network topology mode hard)",
            c.tiers_allowed()
        ));
        tasks.clear();
        return Turn::Discarded;
    }
    ssn.state.job_state[j].job_fit_error = None;
    allocate::allocate_job(ssn, q, j, tasks, cursor, held, None)
}

/// The HyperNodes (positions in the topology's domains) to try for job `j`, in order: tier at most the
/// constraint's, holding every node the job already uses, with room for what the gang still
/// needs; lowest tier first, then fullest first, then by name.
fn candidates(st: &State, j: JobIx, c: &Constraint, tasks: &[TaskIx]) -> Vec<usize> {
    let lacking =
        (st.jobs[j].min_available.max(0) as usize).saturating_sub(st.ready_task_num(j) as usize);
    domains_with_room(
        st,
        c,
        &placed_nodes(st, j),
        still_needed(st, lacking, tasks),
    )
}

/// The HyperNodes of a tier at most `c`'s holding every node in `placed` with room for `need`:
/// lowest tier first, then fullest first, then by name.
pub(super) fn domains_with_room(
    st: &State,
    c: &Constraint,
    placed: &[NodeIx],
    need: Room,
) -> Vec<usize> {
    let mut found: Vec<(i64, f64, usize)> = st
        .topology
        .domains_for(c.highest_tier, placed)
        .filter_map(|(i, d)| {
            let (room, fullness) = room_and_fullness(st, &d.nodes);
            (le(need.milli_cpu, room.milli_cpu) && le(need.memory, room.memory))
                .then_some((d.tier, fullness, i))
        })
        .collect();
    // Stable: the domains come ordered by tier, then name.
    found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
    found.into_iter().map(|(_, _, i)| i).collect()
}

/// `a ≤ b` with the resource comparisons' tolerance.
fn le(a: f64, b: f64) -> bool {
    a < b || (a - b).abs() < crate::resource::EPSILON
}

/// The nodes job `j`'s pods occupy or are promised, sorted.
pub fn placed_nodes(st: &State, j: JobIx) -> Vec<NodeIx> {
    placed_nodes_of(st, &st.jobs[j].tasks)
}

/// The nodes `tasks` occupy or are promised, sorted.
pub fn placed_nodes_of(st: &State, tasks: &[TaskIx]) -> Vec<NodeIx> {
    let mut placed: Vec<NodeIx> = tasks
        .iter()
        .map(|&t| &st.tasks[t])
        .filter(|t| t.status.occupies_node() || t.status == TaskStatus::Pipelined)
        .filter_map(|t| t.node.as_deref())
        .filter_map(|n| st.node_index.get(n).copied())
        .collect();
    placed.sort();
    placed.dedup();
    placed
}

/// The nodes a pod of job `j` may be placed on one at a time, when the job's network topology
/// is hard: those of every HyperNode of an allowed tier that holds all the job's placed pods
/// (`None`: any node). Choosing each pod's node from this set keeps the gang inside one
/// HyperNode, since the next pod's set is then narrowed to HyperNodes holding that one too.
/// Used where pods are placed one by one outside the allocate action's HyperNode search: the
/// pods that ask for nothing (`backfill`) and preemptors (`preempt`, `reclaim`).
pub fn allowed_nodes(st: &State, j: JobIx) -> Option<Vec<NodeIx>> {
    let c = constraint(st, j).filter(|c| c.hard)?;
    let placed = placed_nodes(st, j);
    let mut nodes: Vec<NodeIx> = st
        .topology
        .domains_for(c.highest_tier, &placed)
        .flat_map(|(_, d)| d.nodes.iter().copied())
        .collect();
    nodes.sort();
    nodes.dedup();
    Some(nodes)
}

/// A lower bound of what a gang (or sub-group) lacking `lacking` pods still needs: for cpu and
/// memory each, the sum of the smallest requests among its pending `tasks`, that many.
pub(super) fn still_needed(st: &State, lacking: usize, tasks: &[TaskIx]) -> Room {
    let k = lacking.min(tasks.len());
    let smallest = |f: fn(&Resource) -> f64| {
        let mut v: Vec<f64> = tasks.iter().map(|&t| f(&st.tasks[t].resreq)).collect();
        v.sort_by(f64::total_cmp);
        v.iter().take(k).sum::<f64>()
    };
    Room {
        milli_cpu: smallest(|r| r.milli_cpu),
        memory: smallest(|r| r.memory),
    }
}

/// The room a HyperNode's usable nodes will have once deletions finish (cpu and memory), and
/// how full it is: the mean of its cpu and memory in use over allocatable. Plain sums over
/// cpu and memory: this runs for every HyperNode at every gang's turn.
fn room_and_fullness(st: &State, nodes: &[NodeIx]) -> (Room, f64) {
    let mut room = Room::default();
    let (mut used, mut total) = (Room::default(), Room::default());
    for &n in nodes {
        let node = &st.nodes[n];
        if !node.ready || node.unschedulable {
            continue;
        }
        let (a, u) = (&node.allocatable, &node.used);
        let (r, p) = (&node.releasing, &node.pipelined);
        room.milli_cpu +=
            ((a.milli_cpu - u.milli_cpu).max(0.0) + r.milli_cpu - p.milli_cpu).max(0.0);
        room.memory += ((a.memory - u.memory).max(0.0) + r.memory - p.memory).max(0.0);
        used.milli_cpu += u.milli_cpu;
        used.memory += u.memory;
        total.milli_cpu += a.milli_cpu;
        total.memory += a.memory;
    }
    let share = |u: f64, t: f64| if t > 0.0 { u / t } else { 0.0 };
    let fullness =
        (share(used.milli_cpu, total.milli_cpu) + share(used.memory, total.memory)) / 2.0;
    (room, fullness)
}

/// Cpu (millicores) and memory (bytes).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Room {
    milli_cpu: f64,
    memory: f64,
}
