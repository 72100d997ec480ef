//! `gangpreempt` and `gangreclaim`: gang-aware eviction, as Volcano's actions of those names
//! (its design "Gang-Aware Eviction", 2026). Where `preempt` and `reclaim` pick victims pod by
//! pod for each waiting pod, these pick whole *bundles* of victims for the whole waiting gang,
//! inside one HyperNode, and evict only when the gang can then be placed.
//!
//! For each starving gang (queues in order; for `gangreclaim`, queues not overused), job by
//! job:
//!
//! 1. **Domains**: with a `hard` network topology, the HyperNodes of its allowed tiers that
//!    hold its running pods, broadest tier first and then the most free room first, at most
//!    `maxDomains` (8); otherwise the whole cluster.
//! 2. **Bundles**, per victim gang in the domain: its *safe* bundle (pods beyond its minimum,
//!    its tasks' minimums and its sub-groups' minimums) and its *whole* bundle (the rest:
//!    taking them breaks the gang). Victims are, for `gangpreempt`, preemptable running pods
//!    of lower-priority gangs of the same queue; for `gangreclaim`, running pods of other,
//!    reclaimable queues.
//! 3. **Order**: safe bundles before whole ones, then the victim gangs least worth keeping
//!    first (job order reversed; for reclaim, queue order reversed), then the most relief for
//!    the least disruption (the bundle's share of what the gang needs over the share of the
//!    victim gang it destroys). The plugins then see all the victims at once (`preemptable` or
//!    `reclaimable`, and `pdb`'s budgets); a whole bundle stays only if every pod of it is
//!    allowed, a safe one shrinks to what is.
//! 4. **Selection and simulation**: bundles are added in order until the domain's free room
//!    and what they free cover what the gang needs; then the victims are evicted in a trial,
//!    the gang is placed inside the domain as the allocate action would (onto the room being
//!    released), and the trial is kept only if the gang is then ready or promised its nodes:
//!    the victims are evicted and the gang is promised those nodes, placed there once the
//!    victims are gone. Otherwise the next bundle is added and the trial runs again.
//!
//! Arguments (under `configurations` for the action): `maxDomains` (8) and `allowWholeBundle`
//! (`true`; `false` never breaks a gang). They may not be configured beside `preempt` and
//! `reclaim`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};

use crate::config::{bool_arg, float_arg};
use crate::ix::{JobIx, NodeIx, QueueIx, TaskIx};
use crate::model::TaskStatus;
use crate::resource::Resource;
use crate::session::{Op, Session, State, Statement};

use super::allocate::place_job;
use super::preempt::evicting_gangs;

/// Which action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `gangpreempt`: lower-priority gangs of the same queue.
    Preempt,
    /// `gangreclaim`: gangs of other, reclaimable queues.
    Reclaim,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Preempt => "gangpreempt",
            Kind::Reclaim => "gangreclaim",
        }
    }
}

/// Safe (beyond the gang's minimums) or whole (taking it breaks the gang).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum BundleKind {
    Safe,
    Whole,
}

/// Victims of one gang evicted together.
#[derive(Clone, Debug)]
struct Bundle {
    kind: BundleKind,
    job: JobIx,
    tasks: Vec<TaskIx>,
    /// What its pods request.
    local: Resource,
    /// What the whole victim gang requests (whole bundles only: what is destroyed).
    global: Resource,
}

/// Runs the action.
pub fn run(ssn: &mut Session, kind: Kind) {
    let args = ssn.conf.action_arguments(kind.name());
    let max_domains = float_arg(&args, "maxDomains", 8.0).max(1.0) as usize;
    let allow_whole = bool_arg(&args, "allowWholeBundle", true);
    let mut jobs = evicting_gangs(ssn);
    jobs.sort_by(|(a, qa), (b, qb)| {
        ssn.plugins
            .queue_order(&ssn.state, *qa, *qb)
            .then_with(|| ssn.plugins.job_order(&ssn.state, *a, *b))
    });
    for (j, q) in jobs {
        if !ssn.state.queues[q].is_open() {
            continue;
        }
        if kind == Kind::Reclaim && ssn.plugins.overused(&ssn.state, q) {
            continue;
        }
        evict_for(ssn, kind, q, j, max_domains, allow_whole);
    }
}

/// One starving gang: the first domain where a selection of bundles lets it be placed.
fn evict_for(
    ssn: &mut Session,
    kind: Kind,
    q: QueueIx,
    j: JobIx,
    max_domains: usize,
    allow_whole: bool,
) -> bool {
    let st = &ssn.state;
    let mut pending: Vec<TaskIx> = st.jobs[j]
        .tasks
        .iter()
        .copied()
        .filter(|&t| {
            let task = &st.tasks[t];
            task.status == TaskStatus::Pending && !task.gated && !task.best_effort()
        })
        .collect();
    if pending.is_empty() {
        return false;
    }
    pending.sort_by(|a, b| ssn.plugins.task_order(st, *a, *b));
    if kind == Kind::Reclaim && !pending.iter().all(|&t| ssn.plugins.preemptive(st, q, t)) {
        return false;
    }
    let need = pending
        .iter()
        .fold(Resource::zero(), |acc, &t| acc.plus(&st.tasks[t].resreq));
    let reason = match kind {
        Kind::Preempt => format!("preempted for {}", st.tasks[pending[0]].key()),
        Kind::Reclaim => format!("reclaimed for {}", st.tasks[pending[0]].key()),
    };
    for domain in domains(st, j, max_domains) {
        let nodes: Vec<NodeIx> = domain
            .clone()
            .unwrap_or_else(|| ssn.state.nodes.indices().collect());
        let bundles = bundles_in(ssn, kind, j, pending[0], &nodes, &need, allow_whole);
        let free = nodes.iter().fold(Resource::zero(), |acc, &n| {
            acc.plus(&ssn.state.nodes[n].future_idle())
        });
        let mut victims: Vec<TaskIx> = Vec::new();
        for b in bundles {
            victims.extend(&b.tasks);
            let freed = victims
                .iter()
                .fold(free.clone(), |acc, &v| acc.plus(&ssn.state.tasks[v].resreq));
            if !need.less_equal_in(&freed, &need) {
                continue;
            }
            let mut trial = Statement::default();
            for &v in &victims {
                ssn.evict(&mut trial, v, &reason);
            }
            // Popped from the end: the first in order last.
            let mut tasks: Vec<TaskIx> = pending.iter().rev().copied().collect();
            place_job(
                ssn,
                q,
                j,
                &mut tasks,
                &mut 0,
                None,
                domain.as_deref(),
                &mut trial,
            );
            if ssn.plugins.job_pipelined(&ssn.state, j) {
                // The evictions are made; the gang is promised the nodes it was placed on,
                // to be bound once the victims are gone (as Volcano nominates them): binding
                // now would hold a queue's room twice while its victims terminate, and could
                // start a gang that is only promised part of its nodes.
                let (evictions, placed): (Vec<Op>, Vec<Op>) = trial
                    .ops
                    .into_iter()
                    .partition(|op| matches!(op, Op::Evict(..)));
                ssn.discard(Statement {
                    ops: placed.clone(),
                });
                let mut promised = Statement::default();
                for op in placed {
                    if let Op::Allocate(t, n) | Op::Pipeline(t, n) = op {
                        ssn.pipeline(&mut promised, t, n);
                    }
                }
                ssn.commit(Statement { ops: evictions });
                return true;
            }
            ssn.discard(trial);
        }
    }
    false
}

/// The nodes of each domain to try, in order; `None` is the whole cluster.
fn domains(st: &State, j: JobIx, max: usize) -> Vec<Option<Vec<NodeIx>>> {
    let Some(c) = super::topology::constraint(st, j).filter(|c| c.hard) else {
        return vec![None];
    };
    let placed = super::topology::placed_nodes(st, j);
    let mut found: Vec<(i64, f64, Vec<NodeIx>)> = st
        .topology
        .domains_for(c.highest_tier, &placed)
        .map(|(_, d)| {
            let free: f64 = d
                .nodes
                .iter()
                .map(|&n| st.nodes[n].future_idle().milli_cpu)
                .sum();
            (d.tier, free, d.nodes.clone())
        })
        .collect();
    // Broadest first (the most victims to choose from), then the most free room; stable on
    // the topology's own order.
    found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
    found
        .into_iter()
        .take(max)
        .map(|(_, _, n)| Some(n))
        .collect()
}

/// The victim bundles on `nodes` for job `j` (its first waiting pod `preemptor`), filtered by
/// the plugins and in the order to take them.
fn bundles_in(
    ssn: &Session,
    kind: Kind,
    j: JobIx,
    preemptor: TaskIx,
    nodes: &[NodeIx],
    need: &Resource,
    allow_whole: bool,
) -> Vec<Bundle> {
    let st = &ssn.state;
    let q = st.job_queue[j];
    let on_nodes: HashSet<&str> = nodes.iter().map(|&n| st.nodes[n].name.as_str()).collect();
    let mut by_job: BTreeMap<JobIx, Vec<TaskIx>> = BTreeMap::new();
    for v in st.tasks.indices() {
        let task = &st.tasks[v];
        let vj = st.task_job[v];
        if vj == j || !task.preemptable || task.critical {
            continue;
        }
        if !task.node.as_deref().is_some_and(|n| on_nodes.contains(n)) {
            continue;
        }
        let vq = st.job_queue[vj];
        let ok = match kind {
            Kind::Preempt => {
                matches!(task.status, TaskStatus::Running | TaskStatus::Bound)
                    && vq == q
                    && st.jobs[vj].priority < st.jobs[j].priority
            }
            Kind::Reclaim => {
                task.status == TaskStatus::Running
                    && vq != q
                    && vq.is_some_and(|x| st.queues[x].reclaimable)
            }
        };
        if ok && gang_may_be_evicted(st, vj) {
            by_job.entry(vj).or_default().push(v);
        }
    }
    let mut bundles: Vec<Bundle> = by_job
        .into_iter()
        .flat_map(|(vj, tasks)| job_bundles(st, vj, tasks))
        .collect();
    sort(ssn, kind, &mut bundles, need);
    // The plugins see every victim at once, in order (stateful ones count as they go).
    let flat: Vec<TaskIx> = bundles.iter().flat_map(|b| b.tasks.clone()).collect();
    let allowed = match kind {
        Kind::Preempt => ssn.plugins.preemptable(st, preemptor, &flat),
        Kind::Reclaim => {
            let chosen = ssn.plugins.reclaimable(st, preemptor, &flat);
            ssn.plugins.share_reclaimable(st, preemptor, &chosen)
        }
    };
    let allowed: HashSet<TaskIx> = ssn
        .plugins
        .within_budgets(st, preemptor, &allowed, kind == Kind::Reclaim)
        .into_iter()
        .collect();
    let mut valid: Vec<Bundle> = bundles
        .into_iter()
        .filter_map(|mut b| {
            let before = b.tasks.len();
            b.tasks.retain(|t| allowed.contains(t));
            match b.kind {
                BundleKind::Whole if b.tasks.len() < before || !allow_whole => None,
                _ if b.tasks.is_empty() => None,
                _ => {
                    b.local = b
                        .tasks
                        .iter()
                        .fold(Resource::zero(), |acc, &t| acc.plus(&st.tasks[t].resreq));
                    Some(b)
                }
            }
        })
        .collect();
    sort(ssn, kind, &mut valid, need);
    valid
}

/// Whether a gang's PodGroup allows eviction (`volcano.sh/preemptable` when it is set).
fn gang_may_be_evicted(st: &State, j: JobIx) -> bool {
    let pg = &st.jobs[j].podgroup.metadata;
    let key = tephra_api::keys::PREEMPTABLE;
    let set = pg.annotations.as_ref().is_some_and(|a| a.contains_key(key))
        || pg.labels.as_ref().is_some_and(|l| l.contains_key(key));
    !set || st.jobs[j].preemptable
}

/// Splits a victim gang's pods on the domain into its safe and whole bundles: a pod is safe
/// while the gang keeps its `minMember`, each task its minimum, and each sub-group policy its
/// `minSubGroups` ready sub-groups without it (a sub-group already short of its size costs
/// nothing more).
fn job_bundles(st: &State, j: JobIx, mut tasks: Vec<TaskIx>) -> Vec<Bundle> {
    tasks.sort_by(|&a, &b| {
        st.tasks[a]
            .priority
            .cmp(&st.tasks[b].priority)
            .then_with(|| st.tasks[a].uid.cmp(&st.tasks[b].uid))
    });
    let sum = |ts: &[TaskIx]| {
        ts.iter()
            .fold(Resource::zero(), |acc, &t| acc.plus(&st.tasks[t].resreq))
    };
    let job = &st.jobs[j];
    let mut surplus = st.ready_task_num(j) as i64 - job.min_available as i64;
    if surplus < 0 {
        // Already short of its minimum: nothing more is broken by taking the rest.
        return vec![Bundle {
            kind: BundleKind::Safe,
            job: j,
            local: sum(&tasks),
            global: Resource::zero(),
            tasks,
        }];
    }
    let role_sum: i64 = job.task_min_available.values().map(|&v| v as i64).sum();
    let enforce_roles = job.min_available as i64 >= role_sum;
    let mut role_surplus: BTreeMap<&str, i64> = BTreeMap::new();
    if enforce_roles {
        for (role, &min) in &job.task_min_available {
            let ready = job
                .tasks
                .iter()
                .filter(|&&t| {
                    let task = &st.tasks[t];
                    task.role == *role
                        && (task.status.is_allocated()
                            || task.status == TaskStatus::Succeeded
                            || (task.status == TaskStatus::Pending && task.resreq.is_empty()))
                })
                .count() as i64;
            role_surplus.insert(role.as_str(), ready - min as i64);
        }
    }
    let groups = &st.job_state[j].sub_groups;
    let mut broken: Vec<bool> = groups.iter().map(|g| !g.is_ready(st, false)).collect();
    let mut group_surplus: BTreeMap<usize, i64> = BTreeMap::new();
    for g in groups.iter().filter(|g| g.is_ready(st, false)) {
        *group_surplus.entry(g.policy).or_default() += 1;
    }
    for (i, p) in crate::subgroup::policies(job).iter().enumerate() {
        *group_surplus.entry(i).or_default() -= p.min_sub_groups.unwrap_or(0) as i64;
    }
    let (mut safe, mut whole) = (Vec::new(), Vec::new());
    for t in tasks {
        let role = st.tasks[t].role.as_str();
        let role_ok = role_surplus.get(role).is_none_or(|&s| s > 0);
        let group = groups.iter().position(|g| g.tasks.contains(&t));
        let group_ok = group.is_none_or(|g| {
            broken[g] || group_surplus.get(&groups[g].policy).is_some_and(|&s| s > 0)
        });
        if surplus > 0 && role_ok && group_ok {
            safe.push(t);
            surplus -= 1;
            if let Some(s) = role_surplus.get_mut(role) {
                *s -= 1;
            }
            if let Some(g) = group
                && !broken[g]
            {
                broken[g] = true;
                if let Some(s) = group_surplus.get_mut(&groups[g].policy) {
                    *s -= 1;
                }
            }
        } else {
            whole.push(t);
        }
    }
    let mut out = Vec::new();
    if !safe.is_empty() {
        out.push(Bundle {
            kind: BundleKind::Safe,
            job: j,
            local: sum(&safe),
            global: Resource::zero(),
            tasks: safe,
        });
    }
    if !whole.is_empty() {
        out.push(Bundle {
            kind: BundleKind::Whole,
            job: j,
            local: sum(&whole),
            global: sum(&job.tasks),
            tasks: whole,
        });
    }
    out
}

/// Safe before whole; then the victim gang least worth keeping; then the most relief per
/// disruption; then by gang and first pod, so the same state gives the same order.
fn sort(ssn: &Session, kind: Kind, bundles: &mut [Bundle], need: &Resource) {
    let st = &ssn.state;
    bundles.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then_with(|| {
                if a.job == b.job {
                    return Ordering::Equal;
                }
                match kind {
                    // The gang the job order puts last goes first.
                    Kind::Preempt => ssn.plugins.job_order(st, b.job, a.job),
                    Kind::Reclaim => match (st.job_queue[a.job], st.job_queue[b.job]) {
                        (Some(qa), Some(qb)) if qa != qb => ssn.plugins.queue_order(st, qb, qa),
                        _ => Ordering::Equal,
                    },
                }
            })
            .then_with(|| roi(b, need).total_cmp(&roi(a, need)))
            .then_with(|| st.jobs[a.job].uid.cmp(&st.jobs[b.job].uid))
            .then_with(|| a.tasks.first().cmp(&b.tasks.first()))
            .then_with(|| a.tasks.len().cmp(&b.tasks.len()))
    });
}

/// Relief for the gang (the bundle's share of each resource it needs, capped at the need)
/// over disruption (the share of those resources the victim gang holds in all); infinite for
/// a safe bundle, which disrupts nothing.
fn roi(b: &Bundle, need: &Resource) -> f64 {
    let score = |r: &Resource, cap: bool| {
        let mut s = 0.0;
        let mut add = |v: f64, n: f64| {
            if n > 0.0 {
                s += if cap { v.min(n) } else { v } / n;
            }
        };
        add(r.milli_cpu, need.milli_cpu);
        add(r.memory, need.memory);
        for (k, &n) in &need.scalars {
            add(r.scalars.get(k).copied().unwrap_or(0.0), n);
        }
        s
    };
    let global = score(&b.global, false);
    if global == 0.0 {
        return f64::INFINITY;
    }
    score(&b.local, true) / global
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use crate::config::parse;
    use crate::outcome::{Outcome, run_session};
    use crate::testing::{World, pod, podgroup, running, with_phase};

    fn conf(actions: &str, extra: &str) -> String {
        format!(
            "actions: \"{actions}\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  \
             - name: conformance\n- plugins:\n  - name: drf\n  - name: predicates\n  \
             - name: proportion\n  - name: nodeorder\n{extra}"
        )
    }

    /// When the fixtures' pods were created (`testing::pod`), seconds since the epoch.
    const CREATED: i64 = 1_767_225_600;

    fn session(w: &World, conf: &str) -> Outcome {
        let conf = parse(conf, "test").unwrap();
        let now = k8s_openapi::jiff::Timestamp::from_second(CREATED + 60).unwrap();
        run_session(w.index.snapshot(), &conf, "s1", Time(now))
    }

    /// A running gang `name` of `size` one-cpu pods on `node`, needing `min` of them.
    fn running_gang(mut w: World, name: &str, size: usize, min: i32, node: &str) -> World {
        w.index.apply_podgroup(&with_phase(
            podgroup("ns", name, "default", min, None),
            "Running",
        ));
        for i in 0..size {
            let p = pod("ns", &format!("{name}-task-{i}"), name, 1000, 512);
            w.index.apply_pod(&running(p, node));
        }
        w
    }

    /// A waiting high-priority gang `high` of `size` one-cpu pods, all needed.
    fn high(mut w: World, size: usize) -> World {
        let mut pg = with_phase(
            podgroup("ns", "high", "default", size as i32, None),
            "Inqueue",
        );
        pg.spec.priority_class_name = Some("high".into());
        w.index.apply_podgroup(&pg);
        w.index.apply_priority_class(
            &serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 100})).unwrap(),
        );
        for i in 0..size {
            w.index
                .apply_pod(&pod("ns", &format!("high-task-{i}"), "high", 1000, 512));
        }
        w
    }

    fn evicted_gangs(out: &Outcome) -> BTreeSet<String> {
        out.evictions
            .iter()
            .map(|e| e.name.split("-task-").next().unwrap_or("").to_string())
            .collect()
    }

    /// Two full 4-cpu nodes: `tight` (needs all 4 of its pods) on node-0, `loose` (needs 2
    /// of 4) on node-1; `high` needs 2 cpus.
    fn two_gangs() -> World {
        let w = World::default().nodes(2, 4, 16);
        let w = running_gang(w, "tight", 4, 4, "node-0");
        let w = running_gang(w, "loose", 4, 2, "node-1");
        high(w, 2)
    }

    #[test]
    fn pods_beyond_a_gangs_minimum_go_before_any_gang_is_broken() {
        let out = session(&two_gangs(), &conf("enqueue, allocate, gangpreempt", ""));
        assert_eq!(
            evicted_gangs(&out),
            BTreeSet::from(["loose".to_string()]),
            "{:?}",
            out.evictions
        );
        assert_eq!(
            out.evictions.len(),
            2,
            "only what high needs: {:?}",
            out.evictions
        );
        // The pod-by-pod action looks at node-0 first and breaks `tight` whole.
        let out = session(&two_gangs(), &conf("enqueue, allocate, preempt", ""));
        assert!(evicted_gangs(&out).contains("tight"), "{:?}", out.evictions);
    }

    #[test]
    fn a_whole_gang_is_broken_only_when_allowed_and_nothing_is_evicted_for_nothing() {
        // Only `tight` (no surplus) is on the cluster: breaking it is the only way.
        let w = running_gang(World::default().nodes(1, 4, 16), "tight", 4, 4, "node-0");
        let w = high(w, 2);
        let out = session(&w, &conf("enqueue, allocate, gangpreempt", ""));
        assert_eq!(out.evictions.len(), 4, "{:?}", out.evictions);
        let no_whole =
            "configurations:\n- name: gangpreempt\n  arguments: {allowWholeBundle: false}\n";
        let out = session(&w, &conf("enqueue, allocate, gangpreempt", no_whole));
        assert!(out.evictions.is_empty(), "{:?}", out.evictions);
        // A gang the whole cluster cannot hold evicts nothing.
        let w = running_gang(World::default().nodes(1, 4, 16), "tight", 4, 4, "node-0");
        let out = session(&high(w, 5), &conf("enqueue, allocate, gangpreempt", ""));
        assert!(out.evictions.is_empty(), "{:?}", out.evictions);
    }

    #[test]
    fn a_queue_below_its_share_takes_back_what_another_holds_beyond_its_own() {
        // Queue `b` holds both 4-cpu nodes with one gang (minimum 2); queue `a`, of equal
        // weight, wants 4 cpus for a gang of four.
        let mut w = World::default().nodes(2, 4, 16).queue("a", 1).queue("b", 1);
        w.index
            .apply_podgroup(&with_phase(podgroup("ns", "hog", "b", 2, None), "Running"));
        for i in 0..8 {
            let p = pod("ns", &format!("hog-task-{i}"), "hog", 1000, 512);
            w.index.apply_pod(&running(p, &format!("node-{}", i % 2)));
        }
        w.index
            .apply_podgroup(&with_phase(podgroup("ns", "want", "a", 4, None), "Inqueue"));
        for i in 0..4 {
            w.index
                .apply_pod(&pod("ns", &format!("want-task-{i}"), "want", 1000, 512));
        }
        let out = session(&w, &conf("enqueue, allocate, gangreclaim", ""));
        assert_eq!(
            out.evictions.len(),
            4,
            "down to b's share: {:?}",
            out.evictions
        );
        assert!(
            out.evictions
                .iter()
                .all(|e| e.name.starts_with("hog-")
                    && e.reason.starts_with("reclaimed for ns/want-")),
            "{:?}",
            out.evictions
        );
    }

    #[test]
    fn the_gang_aware_actions_are_not_configured_beside_the_pod_by_pod_ones() {
        let e = parse(&conf("allocate, preempt, gangpreempt", ""), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("may not be configured beside"), "{e}");
        assert!(parse(&conf("allocate, gangpreempt, gangreclaim", ""), "t").is_ok());
    }
}
