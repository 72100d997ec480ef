//! The native engine's word from kube-scheduler in a gang's PodGroup: a gang the session places
//! but kube-scheduler's gang cycle could not (the bridge's `native-unplaced` annotation) reads
//! as waiting, with kube-scheduler's message, not as scheduled.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tephra_api::keys::NATIVE_UNPLACED;
use tephra_api::keys::podgroup_reasons::{NOT_ENOUGH_RESOURCES, NOT_PLACED};

use super::config::SchedulerConf;
use super::outcome::{Outcome, run_session};
use super::testing::{World, running};

const SAID: &str = "0/4 nodes are available: 4 Insufficient example.com/gpu";

fn session(w: &World) -> Outcome {
    let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    run_session(w.index.snapshot(), &SchedulerConf::builtin(), "s1", now)
}

/// The gang's Unschedulable condition: (status, reason, message).
fn unschedulable(out: &Outcome, name: &str) -> Option<(String, String, String)> {
    super::tests::unschedulable_of(out, name)
        .map(|(reason, message, status)| (status, reason, message))
}

#[test]
fn a_gang_kube_scheduler_could_not_place_says_so_in_its_podgroup() {
    let w = World::default()
        .nodes(4, 8, 32)
        .gang("ns", "a", "default", 3, 3, 1000, 512, "Inqueue")
        .annotate("ns", "a", NATIVE_UNPLACED, SAID);
    let out = session(&w);
    let (status, reason, message) = unschedulable(&out, "a").expect("a condition");
    assert_eq!((status.as_str(), reason.as_str()), ("True", NOT_PLACED));
    assert_eq!(
        message,
        format!("kube-scheduler could not place the gang: {SAID}")
    );
    // The session still placed it: that is what sends it to kube-scheduler again.
    assert_eq!(out.plan.placements.len(), 3);

    // Without kube-scheduler's word the same gang is scheduled, no Unschedulable condition.
    let w = World::default()
        .nodes(4, 8, 32)
        .gang("ns", "a", "default", 3, 3, 1000, 512, "Inqueue");
    assert_eq!(unschedulable(&session(&w), "a"), None);
}

#[test]
fn a_gang_the_session_cannot_place_keeps_the_sessions_reason() {
    // tephra's own view lacks room: its reason says what is missing, not kube-scheduler's.
    let w = World::default()
        .nodes(2, 2, 32)
        .gang("ns", "a", "default", 3, 3, 2000, 512, "Inqueue")
        .annotate("ns", "a", NATIVE_UNPLACED, SAID);
    let (_, reason, message) = unschedulable(&session(&w), "a").expect("a condition");
    assert_eq!(reason, NOT_ENOUGH_RESOURCES);
    assert!(
        message.starts_with("3/3 tasks in gang unschedulable") && !message.contains(SAID),
        "{message}"
    );
}

#[test]
fn a_gang_with_a_bound_pod_is_not_refused() {
    // Once kube-scheduler binds part of the gang the annotation is stale (the bridge drops it).
    let mut w = World::default()
        .nodes(4, 8, 32)
        .gang("ns", "a", "default", 2, 3, 1000, 512, "Inqueue")
        .annotate("ns", "a", NATIVE_UNPLACED, SAID);
    let p = super::testing::pod("ns", "a-task-2", "a", 1000, 512);
    w.index.apply_pod(&running(p, "node-0"));
    let out = session(&w);
    assert!(
        unschedulable(&out, "a").is_none_or(|(_, reason, _)| reason != NOT_PLACED),
        "{:?}",
        unschedulable(&out, "a")
    );
}

/// The session's placements as `(uid, node)`.
fn placements(out: &Outcome) -> impl Iterator<Item = (&str, &str)> {
    out.plan
        .placements
        .iter()
        .map(|(u, p)| (u.as_str(), p.node.as_str()))
}

/// Gang `name` of `size` one-cpu pods behind the plan gate, needing `min`; the first
/// `members` name the gang's native PodGroup (`spec.schedulingGroup`), the rest are elastic.
fn native_gang(mut w: World, name: &str, size: usize, min: i32, members: usize) -> World {
    w = w.gang("ns", name, "default", 0, min, 1000, 0, "Inqueue");
    for i in 0..size {
        let mut p = super::testing::pod("ns", &format!("{name}-task-{i}"), name, 1000, 0);
        if let Some(spec) = p.spec.as_mut() {
            spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: tephra_api::keys::PLAN_GATE.into(),
            }]);
            if i < members {
                spec.scheduling_group = Some(k8s_openapi::api::core::v1::PodSchedulingGroup {
                    pod_group_name: Some(name.into()),
                });
            }
        }
        w.index.apply_pod(&p);
    }
    w
}

#[test]
fn a_gangs_native_members_are_ungated_together_with_as_many_placed_pods_in_all() {
    // Three gangs of 6 needing 2 (2 native members, 4 elastic) on 9 cpus: the session gives
    // each its minimum and more; each gang's gate removals are its 2 members and as many
    // elastic pods as the session placed beyond 2, whichever pods it placed.
    let mut w = World::default().nodes(3, 3, 16);
    for g in ["a", "b", "c"] {
        w = native_gang(w, g, 6, 2, 2);
    }
    let out = session(&w);
    let placed = super::testing::placed_by_gang(&out.plan);
    assert_eq!(placed.values().sum::<usize>(), 9, "{placed:?}");
    let due = w.assume_and_due(placements(&out));
    for g in ["a", "b", "c"] {
        let mine: Vec<&String> = due
            .iter()
            .filter(|n| n.starts_with(&format!("{g}-")))
            .collect();
        assert_eq!(
            Some(&mine.len()),
            placed.get(&format!("ns/{g}")),
            "{g}: {due:?}"
        );
        for core in [format!("{g}-task-0"), format!("{g}-task-1")] {
            assert!(mine.contains(&&core), "{g}: {core} not in {mine:?}");
        }
    }
}

#[test]
fn a_native_group_is_never_ungated_in_part() {
    let w = World::default().nodes(2, 8, 16);
    // The session placed two elastic pods, none of the members: the members go instead.
    let mut w1 = native_gang(w, "a", 6, 2, 2);
    let due = w1.assume_and_due([("uid-ns-a-task-4", "node-0"), ("uid-ns-a-task-5", "node-0")]);
    assert_eq!(due, vec!["a-task-0", "a-task-1"]);
    // One placed pod cannot release a group of two: nothing is ungated.
    let mut w2 = native_gang(World::default().nodes(2, 8, 16), "a", 6, 2, 2);
    assert!(
        w2.assume_and_due([("uid-ns-a-task-0", "node-0")])
            .is_empty()
    );
    // A group larger than its minimum (every pod a member, as for a Deployment's gang): once
    // the minimum is placed, the whole group goes and kube-scheduler places what fits.
    let mut w3 = native_gang(World::default().nodes(2, 8, 16), "d", 4, 2, 4);
    let due = w3.assume_and_due([("uid-ns-d-task-0", "node-0"), ("uid-ns-d-task-1", "node-0")]);
    assert_eq!(due, vec!["d-task-0", "d-task-1", "d-task-2", "d-task-3"]);
}

#[test]
fn a_native_gang_with_a_hard_topology_is_pinned_to_the_hypernode_the_session_chose() {
    // Four racks of two 2-cpu nodes: a gang of 4 one-cpu pods fits one rack whole. Its gates
    // come off with the rack's nodes as the pin; kube-scheduler could otherwise spread it.
    let w = World::default().nodes(8, 2, 16).racks(2);
    let mut w = native_gang(w, "a", 4, 4, 4).network_topology("ns", "a", "hard", 1);
    let out = session(&w);
    let nodes: std::collections::BTreeSet<&str> = out
        .plan
        .placements
        .values()
        .map(|p| p.node.as_str())
        .collect();
    assert_eq!(out.plan.placements.len(), 4);
    assert_eq!(nodes.len(), 2, "one rack: {nodes:?}");
    let due = w.assume_due(placements(&out));
    assert_eq!(due.len(), 4);
    for d in &due {
        let pin = d.pin.as_deref().expect("pinned");
        let pinned: Vec<&str> = pin.nodes.iter().map(String::as_str).collect();
        assert_eq!(
            pinned,
            nodes.iter().copied().collect::<Vec<_>>(),
            "{}",
            d.name
        );
        assert_eq!(
            pin.hostnames.as_ref(),
            Some(&pin.nodes),
            "the test nodes' hostnames are their names"
        );
    }

    // Soft, or no topology at all: kube-scheduler is left free.
    for mode in ["soft", ""] {
        let w = World::default().nodes(8, 2, 16).racks(2);
        let mut w = native_gang(w, "a", 4, 4, 4);
        if !mode.is_empty() {
            w = w.network_topology("ns", "a", mode, 1);
        }
        let out = session(&w);
        let due = w.assume_due(placements(&out));
        assert_eq!(due.len(), 4, "{mode}");
        assert!(due.iter().all(|d| d.pin.is_none()), "{mode}: {due:?}");
    }
}
