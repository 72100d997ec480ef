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
    let update = out.podgroups.iter().find(|u| u.name == name)?;
    let c = update
        .status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_ref().map(|t| t.as_str()) == Some("Unschedulable"))?;
    Some((
        c.status.clone().unwrap_or_default(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
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
