//! A gang with sub-groups (its PodGroup's `subGroupPolicy`, see [`crate::subgroup`]) takes
//! its turn sub-group by sub-group: each is placed whole or not at all, inside one HyperNode
//! when its policy asks for a network topology, then the gang's pods in no sub-group.
//!
//! Sub-groups not ready yet go first, those a policy's `minSubGroups` still lacks before the
//! others, each in the order of its first pod. A sub-group with a topology tries the
//! HyperNodes of its allowed tier that hold its pods already placed and have room for the
//! rest, lowest tier and fullest first, as a gang does ([`super::topology`]); in `hard` mode it
//! waits when none has room, in `soft` mode it is then placed anywhere the gang may go. The
//! turn stops once the gang is ready, as any gang's: the remaining sub-groups grow it in
//! later turns.

use crate::ix::{JobIx, NodeIx, QueueIx, TaskIx};
use crate::resource::Resource;
use crate::session::{Session, Statement};
use crate::subgroup::{SubGroup, policies};

use super::allocate::{Until, place};
use super::topology::{constraint_from, domains_with_room, placed_nodes_of, still_needed};

/// One turn of job `j`, whose PodGroup has sub-groups (see the module docs), placed into
/// `stmt`. `tasks` (popped from the end) keeps what the turn did not try; `within` bounds
/// every node chosen.
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
    let groups = ssn.state.job_state[j].sub_groups.clone();
    let group_of = |t: TaskIx| groups.iter().position(|g| g.tasks.contains(&t));
    let mut order: Vec<usize> = (0..groups.len())
        .filter(|&g| !groups[g].is_ready(&ssn.state, true))
        .collect();
    // Sub-groups a policy's minimum still lacks first (a stable sort keeps pod order).
    let mut lacking: Vec<i32> = policies(&ssn.state.jobs[j])
        .iter()
        .map(|p| p.min_sub_groups.unwrap_or(0))
        .collect();
    for g in &groups {
        if g.is_ready(&ssn.state, true)
            && let Some(l) = lacking.get_mut(g.policy)
        {
            *l -= 1;
        }
    }
    let mut required = vec![false; groups.len()];
    for &g in &order {
        if let Some(l) = lacking.get_mut(groups[g].policy)
            && *l > 0
        {
            *l -= 1;
            required[g] = true;
        }
    }
    order.sort_by_key(|&g| !required[g]);

    let mut untried: Vec<usize> = Vec::new();
    let mut tried_any = false;
    for g in order {
        // Like any gang's turn, this one ends once the gang is ready; it tries one sub-group
        // at least, so a ready gang growing still uses up its worksheet.
        if tried_any && ssn.plugins.job_ready(&ssn.state, j) {
            untried.push(g);
            continue;
        }
        let mut mine: Vec<TaskIx> = tasks
            .iter()
            .copied()
            .filter(|&t| group_of(t) == Some(g))
            .collect();
        if mine.is_empty() {
            continue;
        }
        tried_any = true;
        place_group(ssn, q, j, &groups[g], &mut mine, cursor, held, within, stmt);
    }
    let mut rest: Vec<TaskIx> = tasks
        .iter()
        .copied()
        .filter(|&t| group_of(t).is_none())
        .collect();
    let grown_enough = tried_any && ssn.plugins.job_ready(&ssn.state, j);
    if !rest.is_empty() && !grown_enough {
        place(
            ssn,
            q,
            j,
            &mut rest,
            cursor,
            held,
            within,
            stmt,
            Until::JobReady,
        );
    }
    tasks.retain(|&t| rest.contains(&t) || group_of(t).is_some_and(|g| untried.contains(&g)));
}

/// Places one sub-group whole into `stmt` (inside one HyperNode when its policy asks), or
/// nothing of it; `true` when placed.
#[allow(clippy::too_many_arguments)]
fn place_group(
    ssn: &mut Session,
    q: QueueIx,
    j: JobIx,
    g: &SubGroup,
    mine: &mut Vec<TaskIx>,
    cursor: &mut usize,
    held: Option<&Resource>,
    within: Option<&[NodeIx]>,
    stmt: &mut Statement,
) -> bool {
    let policy = &policies(&ssn.state.jobs[j])[g.policy];
    let constraint = policy
        .network_topology
        .as_ref()
        .and_then(|nt| constraint_from(nt, &ssn.state.topology));
    if let Some(c) = &constraint {
        let placed = placed_nodes_of(&ssn.state, &g.tasks);
        let lacking = g.size.saturating_sub(g.placed(&ssn.state, true)) as usize;
        let need = still_needed(&ssn.state, lacking, mine);
        for d in domains_with_room(&ssn.state, c, &placed, need) {
            let mut nodes = ssn.state.topology.domains[d].nodes.clone();
            if let Some(w) = within {
                nodes.retain(|n| w.contains(n));
            }
            if nodes.is_empty() {
                continue;
            }
            let mut attempt = mine.clone();
            if try_place(ssn, q, j, g, &mut attempt, &mut 0, held, Some(&nodes), stmt) {
                return true;
            }
        }
        if c.hard {
            ssn.state.job_state[j].job_fit_error = Some(format!(
                "sub-group {}: no HyperNode{} has room for its {} pods (network topology mode hard)",
                g.name,
                c.tiers_allowed(),
                g.size
            ));
            return false;
        }
    }
    try_place(ssn, q, j, g, mine, cursor, held, within, stmt)
}

/// Places every task of `mine` it can; keeps the placements in `stmt` when the sub-group is
/// then ready (or promised), else undoes them.
#[allow(clippy::too_many_arguments)]
fn try_place(
    ssn: &mut Session,
    q: QueueIx,
    j: JobIx,
    g: &SubGroup,
    mine: &mut Vec<TaskIx>,
    cursor: &mut usize,
    held: Option<&Resource>,
    within: Option<&[NodeIx]>,
    stmt: &mut Statement,
) -> bool {
    let mut sub = Statement::default();
    place(
        ssn,
        q,
        j,
        mine,
        cursor,
        held,
        within,
        &mut sub,
        Until::AllPlaced,
    );
    if g.is_ready(&ssn.state, true) {
        stmt.ops.extend(sub.ops);
        true
    } else {
        ssn.discard(sub);
        false
    }
}
