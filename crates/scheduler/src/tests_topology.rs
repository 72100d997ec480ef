//! Network-topology-aware placement: gangs whose PodGroup carries `networkTopology`, on
//! clusters whose nodes are grouped by HyperNodes (racks of tier 1 under a spine of tier 2).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::config::SchedulerConf;
use super::outcome::{Outcome, run_session};
use super::testing::{World, condition_message, placed_by_gang, pod, running};

fn session(w: &World) -> Outcome {
    let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    run_session(w.index.snapshot(), &SchedulerConf::builtin(), "s1", now)
}

/// The racks (`node-i` in rack `i / per_rack`) the gang's placed pods landed in.
fn racks_of(out: &Outcome, gang: &str, per_rack: usize) -> BTreeSet<usize> {
    out.plan
        .placements
        .values()
        .filter(|p| p.job == gang)
        .map(|p| {
            let i: usize = p.node.trim_start_matches("node-").parse().expect("node-N");
            i / per_rack
        })
        .collect()
}

#[test]
fn a_hard_gang_is_placed_inside_one_rack() {
    // Two racks of two 4-cpu nodes; the gang needs 8 cpus: exactly one rack. Without the
    // constraint the least-allocated spread would use all four nodes.
    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .gang("ns", "a", "default", 4, 4, 2000, 1024, "Pending")
        .network_topology("ns", "a", "hard", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/a"), Some(&4));
    assert_eq!(
        racks_of(&out, "ns/a", 2).len(),
        1,
        "{:?}",
        out.plan.placements
    );
}

#[test]
fn a_hard_gang_larger_than_any_allowed_hypernode_waits_and_says_why() {
    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .gang("ns", "a", "default", 6, 6, 2000, 1024, "Pending")
        .network_topology("ns", "a", "hard", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/a"), None);
    let msg = condition_message(&out, "a");
    assert!(
        msg.contains("no HyperNode of tier 1 or lower has room for the gang"),
        "{msg}"
    );

    // Allowed up to the spine, the same gang spans both racks.
    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .gang("ns", "a", "default", 6, 6, 2000, 1024, "Pending")
        .network_topology("ns", "a", "hard", 2);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/a"), Some(&6));
}

#[test]
fn a_soft_gang_prefers_one_rack_and_spans_racks_when_none_has_room() {
    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .gang("ns", "fits", "default", 4, 4, 2000, 1024, "Pending")
        .network_topology("ns", "fits", "soft", 1);
    let out = session(&w);
    assert_eq!(racks_of(&out, "ns/fits", 2).len(), 1);

    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .gang("ns", "big", "default", 6, 6, 2000, 1024, "Pending")
        .network_topology("ns", "big", "soft", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/big"), Some(&6));
}

#[test]
fn a_gang_goes_to_the_fullest_rack_that_has_room() {
    // rack-1 already runs a pod: a small gang joins it and leaves rack-0 whole.
    let mut w = World::default().nodes(4, 4, 16).racks(2);
    w.index
        .apply_pod(&running(pod("ns", "other", "", 1000, 512), "node-3"));
    let w = w
        .gang("ns", "small", "default", 2, 2, 1000, 512, "Pending")
        .network_topology("ns", "small", "hard", 1);
    let out = session(&w);
    assert_eq!(racks_of(&out, "ns/small", 2), BTreeSet::from([1]));
}

#[test]
fn a_restarted_member_goes_back_to_its_gangs_rack() {
    // Three members run in rack-1; the fourth was restarted and is pending again. rack-0 is
    // emptier (and would win on spreading), but the gang stays inside rack-1.
    let mut w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .gang("ns", "g", "default", 0, 4, 1000, 512, "Running")
        .network_topology("ns", "g", "hard", 1);
    for (i, node) in ["node-2", "node-3", "node-2"].iter().enumerate() {
        w.index.apply_pod(&running(
            pod("ns", &format!("g-task-{i}"), "g", 1000, 512),
            node,
        ));
    }
    w.index.apply_pod(&pod("ns", "g-task-3", "g", 1000, 512));
    let out = session(&w);
    let placed: BTreeMap<_, _> = out
        .plan
        .placements
        .values()
        .map(|p| (p.name.clone(), p.node.clone()))
        .collect();
    let node = placed.get("g-task-3").expect("the restarted pod is placed");
    assert!(node == "node-2" || node == "node-3", "{placed:?}");
}

#[test]
fn the_highest_tier_may_be_named() {
    let mut w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .gang("ns", "a", "default", 6, 6, 2000, 1024, "Pending");
    let mut pg = (**w.index.podgroup("ns/a").expect("pg")).clone();
    pg.spec.network_topology = Some(
        serde_json::from_value(serde_json::json!({"mode": "hard", "highestTierName": "rack"}))
            .expect("topology"),
    );
    w.index.apply_podgroup(&pg);
    let out = session(&w);
    assert_eq!(
        placed_by_gang(&out.plan).get("ns/a"),
        None,
        "racks are too small"
    );

    pg.spec.network_topology = Some(
        serde_json::from_value(serde_json::json!({"mode": "hard", "highestTierName": "spine"}))
            .expect("topology"),
    );
    w.index.apply_podgroup(&pg);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/a"), Some(&6));
}

#[test]
fn without_hypernodes_a_network_topology_changes_nothing() {
    let w = World::default()
        .nodes(4, 4, 16)
        .gang("ns", "a", "default", 6, 6, 2000, 1024, "Pending")
        .network_topology("ns", "a", "hard", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/a"), Some(&6));
}

#[test]
fn pods_that_ask_for_nothing_stay_inside_the_gangs_rack_too() {
    // One member runs on node-0 (rack-0, whose other node is busy too); three that ask for
    // nothing are placed by backfill, which without the constraint would take the least
    // allocated node, in rack-1.
    let mut w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .gang("ns", "be", "default", 0, 4, 0, 0, "Running")
        .network_topology("ns", "be", "hard", 1);
    w.index
        .apply_pod(&running(pod("ns", "be-task-0", "be", 2000, 1024), "node-0"));
    w.index
        .apply_pod(&running(pod("ns", "other", "", 2000, 1024), "node-1"));
    for i in 1..4 {
        w.index
            .apply_pod(&pod("ns", &format!("be-task-{i}"), "be", 0, 0));
    }
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/be"), Some(&3));
    assert_eq!(
        racks_of(&out, "ns/be", 2),
        BTreeSet::from([0]),
        "{:?}",
        out.plan.placements
    );
}

/// The racks (`node-i` in rack `i / per_rack`) each partition of gang `name` landed in, by
/// partition (pods `name-worker-i`, partition `i / size`).
fn racks_by_partition(
    out: &Outcome,
    name: &str,
    size: usize,
    per_rack: usize,
) -> BTreeMap<usize, BTreeSet<usize>> {
    let mut m: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for p in out.plan.placements.values() {
        let Some(i) = p.name.strip_prefix(&format!("{name}-worker-")) else {
            continue;
        };
        let i: usize = i.parse().expect("pod index");
        let node: usize = p.node.trim_start_matches("node-").parse().expect("node-N");
        m.entry(i / size).or_default().insert(node / per_rack);
    }
    m
}

#[test]
fn each_partition_of_a_gang_is_placed_inside_one_rack() {
    // Four racks of two 4-cpu nodes. Two partitions of four 2-cpu pods: each fills a rack.
    // Without the partitions' topology the least-allocated spread puts every partition
    // across racks.
    let w = World::default()
        .nodes(8, 4, 16)
        .racks(2)
        .partitioned_gang("ns", "p", 2, 4, 2, 2000, "hard", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/p"), Some(&8));
    let racks = racks_by_partition(&out, "p", 4, 2);
    assert_eq!(racks.len(), 2, "{racks:?}");
    for (part, r) in &racks {
        assert_eq!(r.len(), 1, "partition {part} in racks {r:?}");
    }
}

#[test]
fn a_partition_no_rack_can_hold_waits_in_hard_mode_and_spans_racks_in_soft() {
    // Racks of 8 cpus; a partition of three 3-cpu pods needs 9.
    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .partitioned_gang("ns", "p", 1, 3, 1, 3000, "hard", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/p"), None);
    let msg = condition_message(&out, "p");
    assert!(
        msg.contains("sub-group worker-0: no HyperNode of tier 1 or lower has room for its 3 pods"),
        "{msg}"
    );
    // Three 3-cpu pods on 4-cpu nodes take three nodes: two racks.
    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .partitioned_gang("ns", "p", 1, 3, 1, 3000, "soft", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/p"), Some(&3));
}

#[test]
fn a_gang_needing_two_of_three_partitions_starts_with_two_whole_ones() {
    // Two racks of 8 cpus; three partitions of two 4-cpu pods (a rack each); two needed.
    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .partitioned_gang("ns", "p", 3, 2, 2, 4000, "hard", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/p"), Some(&4));
    let racks = racks_by_partition(&out, "p", 2, 2);
    assert_eq!(racks.len(), 2, "two whole partitions: {racks:?}");
    assert!(racks.values().all(|r| r.len() == 1), "{racks:?}");
    assert_ne!(
        racks.values().next(),
        racks.values().nth(1),
        "one rack each"
    );

    // Room for one partition only: the gang does not start with half of what it needs.
    let w = World::default()
        .nodes(2, 4, 16)
        .racks(2)
        .partitioned_gang("ns", "p", 3, 2, 2, 4000, "hard", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/p"), None);
}

#[test]
fn a_gang_with_fewer_partitions_than_its_minimum_is_told_so() {
    let w = World::default()
        .nodes(4, 4, 16)
        .racks(2)
        .partitioned_gang("ns", "p", 1, 2, 2, 1000, "hard", 1);
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/p"), None);
    let msg = condition_message(&out, "p");
    assert!(
        msg.contains("Not enough valid subGroups of each task for gang-scheduling"),
        "{msg}"
    );
}
