//! `preempt`: within a queue, a starving gang (fewer than `minMember` placed) takes nodes from
//! lower-priority running pods of other gangs (never from a gang of higher priority, whichever
//! tier names the victims; equal priorities are left to the tiers, e.g. drf), never leaving a running gang below its
//! `minMember` unless the whole gang goes (the gang plugin's rule), never a critical pod (the
//! conformance plugin's). Evictions are committed only when the preemptor's gang then has its
//! places (pipelined); otherwise nothing is evicted.
//!
//! Evictions keep Volcano's cadence: a gang preempts only from a session at least one
//! scheduling period ([`PREEMPT_AFTER_MS`]) after its waiting pods were created. In Volcano the
//! Job controller creates a gang's pods after the session that admitted it, so the earliest
//! session that can evict for them is one period later; tephra runs a session as soon as pods
//! appear (to place them fast), and without the wait it evicted within a tenth of a second of a
//! preemptor's creation, before room freed by pods ending or being deleted could count. The
//! session that holds a gang back asks for a session at the time it becomes due.

use std::collections::{HashMap, HashSet};

use crate::ix::{JobIx, NodeIx, QueueIx, TaskIx};
use crate::model::TaskStatus;
use crate::plugins::interpod;
use crate::session::{Session, State, Statement};

/// How long a gang's waiting pods must have existed before it may evict (Volcano's default
/// `schedule-period`).
pub const PREEMPT_AFTER_MS: i64 = 1000;

/// When job `j` may evict for its waiting pods (milliseconds since the epoch): one
/// [`PREEMPT_AFTER_MS`] after its oldest waiting pod was created. Creation times have whole
/// seconds, so the creation is taken as the end of its second: the wait is never shorter.
/// `None` when it has no waiting pod.
pub fn may_evict_from(st: &State, j: JobIx) -> Option<i64> {
    st.jobs[j]
        .tasks
        .iter()
        .map(|&t| &st.tasks[t])
        .filter(|t| t.status == TaskStatus::Pending && !t.gated)
        .map(|t| t.created)
        .min()
        .map(|created| (created + 1) * 1000 + PREEMPT_AFTER_MS)
}

/// Runs the action.
pub fn run(ssn: &mut Session) {
    run_with(ssn, Scope::SameQueue);
}

/// Which victims a preemptor may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Same queue, other jobs (preempt).
    SameQueue,
    /// Other, reclaimable queues (reclaim).
    OtherQueues,
}

/// The admitted, valid, starving gangs of known queues that may evict now, with their
/// queues. Gangs whose waiting pods are too new wait, and a session is asked for when they
/// are due. Shared by every evicting action.
pub fn evicting_gangs(ssn: &mut Session) -> Vec<(JobIx, QueueIx)> {
    let mut jobs: Vec<(JobIx, QueueIx)> = ssn
        .state
        .jobs
        .indices()
        .filter_map(|j| {
            let job = &ssn.state.jobs[j];
            if job.is_pending() {
                return None;
            }
            let q = ssn.state.job_queue[j]?;
            (ssn.plugins.job_valid(&ssn.state, j).is_ok()
                && ssn.plugins.job_starving(&ssn.state, j))
            .then_some((j, q))
        })
        .collect();
    let now = ssn.state.now_ms;
    let mut due_at: Option<i64> = None;
    jobs.retain(|&(j, _)| match may_evict_from(&ssn.state, j) {
        Some(at) if at > now => {
            due_at = Some(due_at.map_or(at, |d| d.min(at)));
            false
        }
        _ => true,
    });
    if let Some(at) = due_at {
        crate::model::wake_by(&mut ssn.state.wake_at_ms, at);
    }
    jobs
}

/// Shared by `preempt` and `reclaim`.
pub fn run_with(ssn: &mut Session, scope: Scope) {
    let mut jobs = evicting_gangs(ssn);
    jobs.sort_by(|(a, _), (b, _)| ssn.plugins.job_order(&ssn.state, *a, *b));
    for (j, q) in jobs {
        if !ssn.state.queues[q].is_open() {
            continue;
        }
        let mut tasks: Vec<TaskIx> = ssn.state.jobs[j]
            .tasks
            .iter()
            .copied()
            .filter(|&t| {
                ssn.state.tasks[t].status == TaskStatus::Pending && !ssn.state.tasks[t].gated
            })
            .collect();
        tasks.sort_by(|a, b| ssn.plugins.task_order(&ssn.state, *a, *b));
        let mut stmt = Statement::default();
        for t in tasks {
            if !ssn.plugins.job_starving(&ssn.state, j) {
                break;
            }
            if scope == Scope::OtherQueues && !ssn.plugins.preemptive(&ssn.state, q, t) {
                continue;
            }
            place_by_evicting(ssn, &mut stmt, q, j, t, scope);
        }
        if ssn.plugins.job_pipelined(&ssn.state, j) && !stmt.ops.is_empty() {
            ssn.commit(stmt);
        } else {
            ssn.discard(stmt);
        }
    }
}

/// Finds a node where evicting allowed victims makes room for `t` (of job `j` in queue `q`), evicts the fewest needed
/// (lowest in task order first) and pipelines `t` there. Pods that rule the node out by
/// required anti-affinity (either way round) are evicted first, all of them or none: the node is
/// skipped when one of them may not be taken, as Volcano's topology-aware preemption finds
/// through the same filter.
fn place_by_evicting(
    ssn: &mut Session,
    stmt: &mut Statement,
    q: QueueIx,
    j: JobIx,
    t: TaskIx,
    scope: Scope,
) -> bool {
    // A gang kept inside one HyperNode is placed by evicting only there.
    let nodes: Vec<NodeIx> = super::topology::allowed_nodes(&ssn.state, j)
        .unwrap_or_else(|| ssn.state.nodes.indices().collect());
    for n in nodes {
        // Only nodes where evictions could help.
        match ssn.plugins.predicate(&ssn.state, t, n) {
            Err(u) if !u.resolvable => continue,
            Ok(()) if ssn.state.fits_future_idle(t, n) => {
                ssn.pipeline(stmt, t, n);
                return true;
            }
            _ => {}
        }
        let node_name = ssn.state.nodes[n].name.clone();
        let candidates: Vec<TaskIx> = ssn
            .state
            .tasks
            .indices()
            .filter(|&v| {
                let task = &ssn.state.tasks[v];
                let vj = ssn.state.task_job[v];
                task.node.as_deref() == Some(node_name.as_str())
                    && matches!(task.status, TaskStatus::Running | TaskStatus::Bound)
                    && task.preemptable
                    // The conformance plugin's rule, kept whatever tier decides the victims.
                    && !task.critical
                    && vj != j
                    && match scope {
                        // Never a gang of higher priority, whatever tier names the victims:
                        // in Volcano, when the priority plugin refuses, a lower tier (drf) may
                        // still evict a higher-priority gang's pods, and the gang's own
                        // replacements then take the room back, session after session.
                        Scope::SameQueue => {
                            ssn.state.job_queue[vj] == Some(q)
                                && ssn.state.jobs[vj].priority <= ssn.state.jobs[j].priority
                        }
                        Scope::OtherQueues => ssn.state.job_queue[vj] != Some(q),
                    }
            })
            .collect();
        if candidates.is_empty() {
            continue;
        }
        let chosen = match scope {
            Scope::SameQueue => ssn.plugins.preemptable(&ssn.state, t, &candidates),
            Scope::OtherQueues => {
                let chosen = ssn.plugins.reclaimable(&ssn.state, t, &candidates);
                ssn.plugins.share_reclaimable(&ssn.state, t, &chosen)
            }
        };
        let mut victims =
            ssn.plugins
                .within_budgets(&ssn.state, t, &chosen, matches!(scope, Scope::OtherQueues));
        let forced = interpod::conflicts(&ssn.state, t, n, ssn.state.tasks.indices());
        if !forced.iter().all(|f| victims.contains(f)) {
            continue;
        }
        victims.retain(|v| !forced.contains(v));
        // Least important first.
        victims.sort_by(|a, b| ssn.plugins.task_order(&ssn.state, *b, *a));
        let reason = match scope {
            Scope::SameQueue => format!("preempted for {}", ssn.state.tasks[t].key()),
            Scope::OtherQueues => format!("reclaimed for {}", ssn.state.tasks[t].key()),
        };
        // Evictions go to a statement of their own, undone alone when the node fails.
        let mut here = Statement::default();
        for v in forced {
            ssn.evict(&mut here, v, &reason);
        }
        if ssn.plugins.predicate(&ssn.state, t, n).is_err() {
            ssn.discard(here);
            continue;
        }
        let keep_gangs = ssn.plugins.keeps_gangs(scope == Scope::OtherQueues);
        let mut freed = ssn.state.nodes[n].future_idle();
        let mut chosen = Vec::new();
        for unit in eviction_units(&ssn.state, &victims, keep_gangs) {
            if ssn.state.tasks[t].resreq.less_equal(&freed) {
                break;
            }
            for v in unit {
                freed.add(&ssn.state.tasks[v].resreq);
                chosen.push(v);
            }
        }
        if !ssn.state.tasks[t].resreq.less_equal(&freed) {
            ssn.discard(here);
            continue;
        }
        for v in chosen {
            ssn.evict(&mut here, v, &reason);
        }
        ssn.pipeline(&mut here, t, n);
        stmt.ops.extend(here.ops);
        return true;
    }
    false
}

/// The victims, in the order given, grouped into what is evicted together. With `keep_gangs`
/// a victim goes alone while its gang keeps at least its `minMember` without it; past that,
/// only with every other pod its gang holds, and only when all of them are among `victims`
/// (the gang goes back to waiting whole). A gang that would be left running short of its
/// minimum, or split across nodes, is not taken: Volcano lets a lower plugin tier break such a
/// gang when the gang plugin names no victim; a broken gang holds its room and runs nothing.
fn eviction_units(st: &State, victims: &[TaskIx], keep_gangs: bool) -> Vec<Vec<TaskIx>> {
    if !keep_gangs {
        return victims.iter().map(|&v| vec![v]).collect();
    }
    let mut taken: HashMap<JobIx, u32> = HashMap::new();
    let mut whole: HashSet<JobIx> = HashSet::new();
    let mut units = Vec::new();
    for &v in victims {
        let j = st.task_job[v];
        if whole.contains(&j) {
            continue;
        }
        let surplus = st
            .ready_task_num(j)
            .saturating_sub(st.jobs[j].min_available.max(0) as u32);
        let n = taken.entry(j).or_default();
        if *n < surplus {
            *n += 1;
            units.push(vec![v]);
            continue;
        }
        // Everything the gang holds, less what is already taken alone.
        let held: Vec<TaskIx> = st.jobs[j]
            .tasks
            .iter()
            .copied()
            .filter(|&x| st.tasks[x].status.is_allocated())
            .collect();
        if held.iter().all(|x| victims.contains(x)) {
            let earlier: HashSet<TaskIx> = units.iter().flatten().copied().collect();
            units.push(held.into_iter().filter(|x| !earlier.contains(x)).collect());
            whole.insert(j);
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use crate::config::parse;
    use crate::model::TaskStatus;
    use crate::outcome::{Outcome, run_session};
    use crate::testing::{World, pod, podgroup, running, with_phase};

    /// Volcano's CI configuration without `enqueue`, as the preemption specs run it.
    const CONF: &str = r#"
actions: "allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"#;

    /// When the fixtures' pods were created (`testing::pod`), seconds since the epoch.
    const CREATED: i64 = 1_767_225_600;

    /// A session `secs` seconds after the pods were created.
    fn session_at(w: &World, secs: i64) -> Outcome {
        let conf = parse(CONF, "test").unwrap();
        let now = k8s_openapi::jiff::Timestamp::from_second(CREATED + secs).unwrap();
        run_session(w.index.snapshot(), &conf, "s1", Time(now))
    }

    /// A session well after the pods were created.
    fn session(w: &World) -> Outcome {
        session_at(w, 60)
    }

    fn labelled(mut p: Pod, key: &str, value: &str) -> Pod {
        p.metadata
            .labels
            .get_or_insert_default()
            .insert(key.into(), value.into());
        p
    }

    /// The pod with a required anti-affinity to pods labelled `key=value` on the same node.
    fn shunning(mut p: Pod, key: &str, value: &str) -> Pod {
        if let Some(s) = p.spec.as_mut() {
            s.affinity = Some(
                serde_json::from_value(json!({"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchLabels": {key: value}},
                        "topologyKey": "kubernetes.io/hostname"
                    }]
                }}))
                .unwrap(),
            );
        }
        p
    }

    /// Two 4-cpu nodes full of a low-priority gang (8 one-cpu pods labelled `app=web`, minimum
    /// 1), and a high-priority gang `high` (`size` pods, minimum `min`) made by `make`.
    fn full_cluster(size: usize, min: i32, make: impl Fn(Pod) -> Pod) -> World {
        let mut w = World::default().nodes(2, 4, 16);
        w.index.apply_podgroup(&with_phase(
            podgroup("ns", "low", "default", 1, None),
            "Running",
        ));
        for i in 0..8 {
            let p = pod("ns", &format!("low-task-{i}"), "low", 1000, 512);
            w.index.apply_pod(&running(
                labelled(p, "app", "web"),
                &format!("node-{}", i % 2),
            ));
        }
        let mut pg = with_phase(podgroup("ns", "high", "default", min, None), "Inqueue");
        pg.spec.priority_class_name = Some("high".into());
        w.index.apply_podgroup(&pg);
        w.index.apply_priority_class(
            &serde_json::from_value(json!({"metadata": {"name": "high"}, "value": 100})).unwrap(),
        );
        for i in 0..size {
            w.index.apply_pod(&make(pod(
                "ns",
                &format!("high-task-{i}"),
                "high",
                1000,
                512,
            )));
        }
        w
    }

    fn evicted_nodes(out: &Outcome) -> Vec<usize> {
        // low-task-i runs on node-(i % 2).
        out.evictions
            .iter()
            .map(|e| {
                let i: usize = e.name.rsplit('-').next().unwrap().parse().unwrap();
                i % 2
            })
            .collect()
    }

    #[test]
    fn a_gang_takes_only_its_minimum_by_preemption() {
        let w = full_cluster(8, 4, |p| p);
        let out = session(&w);
        assert_eq!(out.evictions.len(), 4, "{:?}", out.evictions);
        assert!(out.evictions.iter().all(|e| e.name.starts_with("low-")));
    }

    #[test]
    fn evictions_under_way_are_not_made_again_nor_their_room_given_away() {
        use std::time::{Duration, Instant};
        let mut w = full_cluster(8, 4, |p| p);
        let first = session(&w);
        assert_eq!(first.evictions.len(), 4, "{:?}", first.evictions);
        // The runner marks the victims releasing until the API shows them deleting.
        let t0 = Instant::now();
        for e in &first.evictions {
            assert!(w.index.assume_evicted(&e.uid, Duration::from_secs(30), t0));
        }
        // The Job controller makes a pending replacement of the low job at once.
        w.index.apply_pod(&labelled(
            pod("ns", "low-task-8", "low", 1000, 512),
            "app",
            "web",
        ));
        let second = session(&w);
        assert!(second.evictions.is_empty(), "{:?}", second.evictions);
        assert!(
            second.plan.placements.is_empty(),
            "{:?}",
            second.plan.placements
        );
        // The victims go: the room is the high gang's, not the replacement's.
        for e in &first.evictions {
            let i: usize = e.name.rsplit('-').next().unwrap().parse().unwrap();
            let p = pod("ns", &e.name, "low", 1000, 512);
            w.index.delete_pod(&running(p, &format!("node-{}", i % 2)));
        }
        let third = session(&w);
        assert!(third.evictions.is_empty(), "{:?}", third.evictions);
        let placed: Vec<&str> = third
            .plan
            .placements
            .values()
            .map(|p| p.job.as_str())
            .collect();
        assert_eq!(placed, vec!["ns/high"; 4], "{:?}", third.plan.placements);
        // An eviction the API never carried out ends: the pod counts as running again.
        let mut w = full_cluster(8, 4, |p| p);
        let e = session(&w).evictions[0].uid.clone();
        assert!(w.index.assume_evicted(&e, Duration::from_secs(30), t0));
        assert_eq!(w.index.task(&e).unwrap().status, TaskStatus::Releasing);
        w.index.expire_assumed(t0 + Duration::from_secs(31));
        assert_eq!(w.index.task(&e).unwrap().status, TaskStatus::Running);
    }

    #[test]
    fn a_gang_evicts_only_a_period_after_its_pods_appeared_and_asks_for_that_session() {
        let w = full_cluster(8, 4, |p| p);
        // Created within second CREATED: due at the end of that second plus one period.
        let due = (CREATED + 1) * 1000 + super::PREEMPT_AFTER_MS;
        let early = session_at(&w, 1);
        assert!(early.evictions.is_empty(), "{:?}", early.evictions);
        assert_eq!(early.wake_at_ms, Some(due));
        let due_now = session_at(&w, 2);
        assert_eq!(due_now.evictions.len(), 4, "{:?}", due_now.evictions);
    }

    #[test]
    fn anti_affinity_preemption_empties_whole_nodes_and_no_more() {
        // Each high pod shuns the low pods on its node: a node serves only once all four of
        // its low pods go, and then it holds four high pods. The minimum of 4 takes one node.
        let w = full_cluster(8, 4, |p| shunning(p, "app", "web"));
        let out = session(&w);
        let nodes = evicted_nodes(&out);
        assert_eq!(nodes.len(), 4, "{:?}", out.evictions);
        assert!(nodes.iter().all(|n| *n == nodes[0]), "{:?}", out.evictions);
        // A minimum of 8 needs both nodes.
        let w = full_cluster(8, 8, |p| shunning(p, "app", "web"));
        assert_eq!(session(&w).evictions.len(), 8);
    }

    #[test]
    fn anti_affinity_holds_in_both_directions_when_placing() {
        // node-0 runs a pod labelled app=web; node-1 is empty. Both have room.
        let mut w = World::default().nodes(2, 4, 16);
        w.index.apply_podgroup(&with_phase(
            podgroup("ns", "web", "default", 1, None),
            "Running",
        ));
        let web = labelled(pod("ns", "web-task-0", "web", 1000, 512), "app", "web");
        w.index.apply_pod(&running(web, "node-0"));
        // A pod that shuns app=web goes to node-1 (binpack alone would pick node-0).
        w.index.apply_podgroup(&with_phase(
            podgroup("ns", "a", "default", 1, None),
            "Inqueue",
        ));
        w.index.apply_pod(&shunning(
            pod("ns", "a-task-0", "a", 1000, 512),
            "app",
            "web",
        ));
        let out = session(&w);
        assert_eq!(out.plan.placements["uid-ns-a-task-0"].node, "node-1");
        // A running pod that shuns app=db keeps a pod labelled app=db off its node.
        let mut w = World::default().nodes(2, 4, 16);
        w.index.apply_podgroup(&with_phase(
            podgroup("ns", "web", "default", 1, None),
            "Running",
        ));
        let web = shunning(pod("ns", "web-task-0", "web", 1000, 512), "app", "db");
        w.index.apply_pod(&running(web, "node-0"));
        w.index.apply_podgroup(&with_phase(
            podgroup("ns", "db", "default", 1, None),
            "Inqueue",
        ));
        w.index.apply_pod(&labelled(
            pod("ns", "db-task-0", "db", 1000, 512),
            "app",
            "db",
        ));
        let out = session(&w);
        assert_eq!(out.plan.placements["uid-ns-db-task-0"].node, "node-1");
    }

    #[test]
    fn a_disruption_budget_bounds_what_preemption_takes_in_a_session() {
        // The high gang wants 4 pods' room (minimum 4) out of `app=web` pods whose budget
        // allows 2 disruptions: with the pdb plugin only 2 are taken and the gang does not
        // start; without it, 4.
        let budget: k8s_openapi::api::policy::v1::PodDisruptionBudget =
            serde_json::from_value(json!({
                "metadata": {"namespace": "ns", "name": "web"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 6},
                "status": {"disruptionsAllowed": 2, "currentHealthy": 8, "desiredHealthy": 6,
                           "expectedPods": 8}
            }))
            .unwrap();
        let mut w = full_cluster(4, 4, |p| p);
        w.index.apply_pod_disruption_budget(&budget);
        let out = session(&w);
        assert_eq!(
            out.evictions.len(),
            4,
            "without the plugin: {:?}",
            out.evictions
        );

        let conf = parse(
            &CONF.replace(
                "  - name: conformance\n",
                "  - name: conformance\n- plugins:\n  - name: pdb\n",
            ),
            "test",
        )
        .unwrap();
        let now = k8s_openapi::jiff::Timestamp::from_second(CREATED + 60).unwrap();
        let out = run_session(w.index.snapshot(), &conf, "s1", Time(now));
        assert!(out.evictions.len() <= 2, "{:?}", out.evictions);
    }
}
