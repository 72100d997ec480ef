//! Session tests against small hand-built clusters.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::config::{SchedulerConf, parse};
use super::outcome::{Outcome, Verdict, run_session};
use super::testing::{World, placed_by_gang};
use tephra_api::scheduling::PodGroupPhase;

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

fn session(w: &World) -> Outcome {
    run_session(w.index.snapshot(), &SchedulerConf::builtin(), "s1", now())
}

fn session_with(w: &World, conf: &str) -> Outcome {
    let conf = parse(conf, "test").unwrap();
    run_session(w.index.snapshot(), &conf, "s1", now())
}

fn phase_of(out: &Outcome, name: &str) -> Option<PodGroupPhase> {
    out.podgroups
        .iter()
        .find(|u| u.name == name)
        .and_then(|u| u.status.phase.clone())
}

#[test]
fn a_gang_that_fits_is_admitted_and_placed_whole() {
    let w = World::default()
        .nodes(2, 4, 16)
        .gang("ns", "a", "default", 4, 4, 1000, 1024, "Pending");
    let out = session(&w);
    assert_eq!(placed_by_gang(&out.plan).get("ns/a"), Some(&4));
    assert_eq!(out.plan.gangs["ns/a"], Verdict::Ready);
    // Placed but not bound yet: Inqueue until kube-scheduler binds them.
    assert_eq!(phase_of(&out, "a"), Some(PodGroupPhase::Inqueue));
    let cond = out.podgroups[0].status.conditions.as_ref().unwrap();
    assert_eq!(cond[0].type_.as_ref().unwrap().as_str(), "Scheduled");
}

/// A snapshot put together by hand may list a task no job holds: the session leaves it out
/// and schedules the rest as if it were not there, instead of failing.
#[test]
fn a_task_no_job_holds_is_left_out_of_the_session() {
    let w = World::default()
        .nodes(2, 4, 16)
        .gang("ns", "a", "default", 4, 4, 1000, 1024, "Pending")
        .gang("ns", "b", "default", 2, 2, 1000, 1024, "Pending");
    let whole = session(&w);
    let mut snapshot = w.index.snapshot();
    // Gang `a` forgets its first task; the task stays in the list.
    let j = snapshot
        .jobs
        .iter_enumerated()
        .find(|(_, job)| job.id == "ns/a")
        .map(|(j, _)| j)
        .unwrap();
    snapshot.jobs[j].tasks.remove(0);
    let out = run_session(snapshot, &SchedulerConf::builtin(), "s1", now());
    // `a` now has 3 pods for minMember 4 and waits; `b` is placed as before.
    assert_eq!(placed_by_gang(&out.plan).get("ns/a"), None);
    assert_eq!(
        placed_by_gang(&out.plan).get("ns/b"),
        placed_by_gang(&whole.plan).get("ns/b")
    );
}

#[test]
fn two_gangs_that_cannot_both_fit_one_goes_whole_the_other_waits_whole() {
    // 2 nodes × 4 cpu = 8 cpu; each gang needs 6 cpu.
    let w = World::default()
        .nodes(2, 4, 16)
        .gang("ns", "a", "default", 3, 3, 2000, 1024, "Inqueue")
        .gang("ns", "b", "default", 3, 3, 2000, 1024, "Inqueue");
    let out = session(&w);
    let placed = placed_by_gang(&out.plan);
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed.values().next(), Some(&3));
    let waiting: Vec<&String> = out
        .plan
        .gangs
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::Waiting(_)))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(waiting.len(), 1);
    let Verdict::Waiting(msg) = &out.plan.gangs[waiting[0]] else {
        unreachable!()
    };
    // Pods without a node of the pods it has: all three (the one that found a node was undone).
    assert!(
        msg.starts_with(
            "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"
        ),
        "{msg}"
    );
    assert!(msg.contains("queue default has no room"), "{msg}");
}

#[test]
fn enqueue_refuses_a_gang_larger_than_the_cluster_with_a_reason() {
    let w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "big", "default", 8, 8, 1000, 1024, "Pending");
    let out = session(&w);
    assert!(out.plan.placements.is_empty());
    assert_eq!(phase_of(&out, "big"), Some(PodGroupPhase::Pending));
    let ev = out
        .events
        .iter()
        .find(|e| e.reason == "Unschedulable" && e.type_ == "Normal")
        .expect("an enqueue event");
    assert!(
        ev.message.contains("resource in cluster is overused"),
        "{}",
        ev.message
    );
    assert!(
        ev.message.contains("the gang needs cpu 8, memory 8Gi"),
        "{}",
        ev.message
    );
}

#[test]
fn a_pending_gang_without_enqueue_is_allocated_directly() {
    let w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "a", "default", 2, 2, 1000, 1024, "Pending");
    let out = session_with(
        &w,
        "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n",
    );
    assert_eq!(placed_by_gang(&out.plan).get("ns/a"), Some(&2));
}

#[test]
fn members_beyond_min_member_are_placed_when_room_allows() {
    let w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "elastic", "default", 6, 2, 1000, 1024, "Inqueue");
    let out = session(&w);
    // 4 cpu: 4 of the 6 fit; the gang (min 2) is ready.
    assert_eq!(placed_by_gang(&out.plan).get("ns/elastic"), Some(&4));
    assert_eq!(out.plan.gangs["ns/elastic"], Verdict::Ready);
}

#[test]
fn running_gangs_keep_their_nodes() {
    let w = World::default()
        .nodes(2, 4, 16)
        .running_gang("ns", "r", "default", 2, 4000, 1024, 2)
        .gang("ns", "a", "default", 1, 1, 1000, 1024, "Inqueue");
    let out = session(&w);
    assert!(out.plan.placements.is_empty());
    assert_eq!(phase_of(&out, "r"), Some(PodGroupPhase::Running));
}

#[test]
fn queues_weighted_one_to_three_share_a_full_cluster_about_one_to_three() {
    // 8 nodes × 4 cpu = 32 cpu; each queue asks for far more than it can get.
    let mut w = World::default()
        .nodes(8, 4, 64)
        .queue("q1", 1)
        .queue("q3", 3);
    for i in 0..20 {
        w = w
            .gang("ns", &format!("a{i:02}"), "q1", 2, 2, 1000, 512, "Inqueue")
            .gang("ns", &format!("b{i:02}"), "q3", 2, 2, 1000, 512, "Inqueue");
    }
    let out = session(&w);
    let mut per_queue = (0usize, 0usize);
    for p in out.plan.placements.values() {
        if p.job.starts_with("ns/a") {
            per_queue.0 += 1;
        } else {
            per_queue.1 += 1;
        }
    }
    assert_eq!(per_queue.0 + per_queue.1, 32, "{per_queue:?}");
    assert_eq!(per_queue, (8, 24));
}

#[test]
fn predicates_keep_pods_off_tainted_cordoned_and_not_ready_nodes() {
    use super::testing::node;
    let mut w = World::default();
    let mut tainted = node("tainted", 8, 32, 110);
    tainted.spec.get_or_insert_default().taints = Some(vec![k8s_openapi::api::core::v1::Taint {
        key: "gpu".into(),
        value: Some("true".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    let mut cordoned = node("cordoned", 8, 32, 110);
    cordoned.spec.get_or_insert_default().unschedulable = Some(true);
    let mut not_ready = node("not-ready", 8, 32, 110);
    not_ready
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()[0]
        .status = "False".into();
    for n in [&tainted, &cordoned, &not_ready] {
        w.index.apply_node(n);
    }
    w = w.gang("ns", "a", "default", 1, 1, 1000, 1024, "Inqueue");
    let out = session(&w);
    assert!(out.plan.placements.is_empty());
    let Verdict::Waiting(msg) = &out.plan.gangs["ns/a"] else {
        panic!("placed")
    };
    assert!(msg.contains("0/3 nodes are unavailable"), "{msg}");
    assert!(
        msg.contains("1 node(s) had untolerated taint {gpu: true}"),
        "{msg}"
    );
    assert!(msg.contains("1 node(s) were unschedulable"), "{msg}");
    assert!(msg.contains("1 node(s) were not ready"), "{msg}");
    w.index.apply_node(&node("good", 8, 32, 110));
    let out = session(&w);
    assert_eq!(out.plan.placements.values().next().unwrap().node, "good");
}

#[test]
fn the_same_snapshot_gives_the_same_plan() {
    let mut w = World::default().nodes(10, 4, 16).queue("q", 2);
    for i in 0..15 {
        w = w.gang(
            "ns",
            &format!("g{i}"),
            if i % 2 == 0 { "q" } else { "default" },
            3,
            3,
            1500,
            700,
            "Inqueue",
        );
    }
    let a = session(&w);
    let b = session(&w);
    assert_eq!(a.plan.placements, b.plan.placements);
    assert!(!a.plan.placements.is_empty());
}

#[test]
fn status_is_written_only_when_it_changes() {
    let mut w = World::default().nodes(1, 4, 16);
    w.index.apply_podgroup(&super::testing::with_phase(
        super::testing::podgroup("ns", "done", "default", 1, None),
        "Running",
    ));
    let mut p = super::testing::running(
        super::testing::pod("ns", "done-task-0", "done", 100, 10),
        "node-0",
    );
    w.index.apply_pod(&p);
    let out = session(&w);
    let update = out
        .podgroups
        .iter()
        .find(|u| u.name == "done")
        .expect("counts written once");
    assert_eq!(update.status.running, Some(1));
    assert!(!update.phase_changed, "counts alone change no phase");
    // Feed the written status back: the next session has nothing to write.
    let mut pg = (*w.index.podgroup("ns/done").unwrap().as_ref()).clone();
    pg.status = Some(update.status.clone());
    w.index.apply_podgroup(&pg);
    let out = session(&w);
    assert!(
        out.podgroups.iter().all(|u| u.name != "done"),
        "{:?}",
        out.podgroups
    );
    // The pod finishes: Completed.
    p.status.as_mut().unwrap().phase = Some("Succeeded".into());
    w.index.apply_pod(&p);
    let out = session(&w);
    assert_eq!(phase_of(&out, "done"), Some(PodGroupPhase::Completed));
    assert!(
        out.podgroups
            .iter()
            .any(|u| u.name == "done" && u.phase_changed)
    );
}

#[test]
fn queue_allocation_is_reported_when_it_changes() {
    let w = World::default()
        .nodes(1, 4, 16)
        .running_gang("ns", "r", "default", 2, 1000, 1024, 1);
    let out = session(&w);
    let q = out
        .queues
        .iter()
        .find(|q| q.name == "default")
        .expect("default queue");
    assert_eq!(q.allocated["cpu"].0, "2000m");
    let root = out
        .queues
        .iter()
        .find(|q| q.name == "root")
        .expect("root sums its children");
    assert_eq!(root.allocated["cpu"].0, "2000m");
}

#[test]
fn assumed_placements_count_against_their_node_until_they_expire() {
    use std::time::{Duration, Instant};
    let mut w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "a", "default", 1, 1, 3000, 1024, "Inqueue")
        .gang("ns", "b", "default", 1, 1, 3000, 1024, "Inqueue");
    let t0 = Instant::now();
    assert!(
        w.index
            .assume("uid-ns-a-task-0", "node-0", Duration::from_secs(30), t0)
    );
    let out = session(&w);
    assert!(
        out.plan.placements.is_empty(),
        "b must not get a's capacity"
    );
    assert_eq!(w.index.expire_assumed(t0 + Duration::from_secs(31)), 1);
    let out = session(&w);
    assert_eq!(out.plan.placements.len(), 1);
}

#[test]
fn preempt_evicts_lower_priority_pods_only_whole_or_above_min_member() {
    let conf = r#"
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: nodeorder
"#;
    let mut w = World::default()
        .nodes(1, 4, 16)
        .running_gang("ns", "low", "default", 4, 1000, 512, 1);
    let mut pg = super::testing::with_phase(
        super::testing::podgroup("ns", "high", "default", 2, None),
        "Inqueue",
    );
    pg.spec.priority_class_name = Some("high".into());
    w.index.apply_podgroup(&pg);
    w.index.apply_priority_class(
        &serde_json::from_value(serde_json::json!({
            "metadata": {"name": "high"}, "value": 1000
        }))
        .unwrap(),
    );
    for i in 0..2 {
        w.index.apply_pod(&super::testing::pod(
            "ns",
            &format!("high-task-{i}"),
            "high",
            1000,
            512,
        ));
    }
    // A minute after the pods were created (a gang evicts only a period after its pods
    // appear: actions::preempt::PREEMPT_AFTER_MS).
    let later = |w: &World| {
        let t = k8s_openapi::jiff::Timestamp::from_second(1_767_225_660).unwrap();
        run_session(
            w.index.snapshot(),
            &parse(conf, "test").unwrap(),
            "s1",
            Time(t),
        )
    };
    let out = later(&w);
    // The low gang (min 4 of 4) cannot lose a pod and stay a gang: nothing is evicted.
    assert!(out.evictions.is_empty(), "{:?}", out.evictions);
    // A gang with slack (min 2 of 4) may lose 2.
    let mut pg = (*w.index.podgroup("ns/low").unwrap().as_ref()).clone();
    pg.spec.min_member = Some(2);
    w.index.apply_podgroup(&pg);
    let out = later(&w);
    assert_eq!(out.evictions.len(), 2, "{:?}", out.evictions);
}

#[test]
fn role_minimums_gate_readiness() {
    let mut w = World::default().nodes(1, 4, 16);
    let mut pg = super::testing::with_phase(
        super::testing::podgroup("ns", "mw", "default", 2, None),
        "Inqueue",
    );
    pg.spec.min_task_member = Some([("master".to_string(), 1), ("worker".to_string(), 1)].into());
    w.index.apply_podgroup(&pg);
    // Only workers exist: the gang is not valid.
    for i in 0..2 {
        let mut p = super::testing::pod("ns", &format!("mw-worker-{i}"), "mw", 500, 100);
        p.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("volcano.sh/task-spec".into(), "worker".into());
        w.index.apply_pod(&p);
    }
    let out = session(&w);
    assert!(out.plan.placements.is_empty());
    let Verdict::Waiting(msg) = &out.plan.gangs["ns/mw"] else {
        panic!()
    };
    assert!(msg.contains("Not enough valid pods of each task"), "{msg}");
}

/// The Unschedulable condition of a PodGroup in an outcome: (reason, message, status).
pub(crate) fn unschedulable_of(out: &Outcome, name: &str) -> Option<(String, String, String)> {
    let u = out.podgroups.iter().find(|u| u.name == name)?;
    let c = u.status.conditions.iter().flatten().find(|c| {
        c.type_
            .as_ref()
            .is_some_and(|t| t.as_str() == "Unschedulable")
    })?;
    Some((
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
        c.status.clone().unwrap_or_default(),
    ))
}

#[test]
fn a_gang_the_enqueue_step_refuses_says_why_in_its_condition() {
    // 2 nodes × 4 cpu; the pod-less gang asks 12 cpu: more than the cluster has for gangs.
    let pg = super::testing::podgroup("ns", "big", "default", 3, Some((12_000, 3072)));
    let mut w = World::default().nodes(2, 4, 16);
    w.index.apply_podgroup(&pg);
    let out = session(&w);
    assert_eq!(phase_of(&out, "big"), Some(PodGroupPhase::Pending));
    let (reason, message, status) = unschedulable_of(&out, "big").expect("a condition");
    assert_eq!((reason.as_str(), status.as_str()), ("NotEnqueued", "True"));
    assert!(
        message.starts_with("gang not admitted to its queue yet, no pod is created until it is: ")
            && message.contains("resource in cluster is overused"),
        "{message}"
    );

    // Once the gang fits, it is enqueued and the condition stops explaining anything.
    let mut pg = super::testing::podgroup("ns", "big", "default", 3, Some((3_000, 3072)));
    pg.status = out.podgroups[0].status.clone().into();
    w.index.apply_podgroup(&pg);
    let out = session(&w);
    assert_eq!(phase_of(&out, "big"), Some(PodGroupPhase::Inqueue));
    let (_, _, status) = unschedulable_of(&out, "big").expect("the old condition");
    assert_eq!(status, "False");
}

#[test]
fn a_waiting_gangs_refusal_does_not_change_while_its_queue_fills_and_drains() {
    // Queue q can hold 4 cpu; the pod-less gang asks 3. Whether q's running gang holds 2 or 3
    // cpu, the refusal reads the same: it is written into every waiting PodGroup, and a
    // message that counted what the queue holds was rewritten at every pod's start and end.
    let message_with = |running: usize| {
        let mut q = super::testing::queue("q", 1);
        q.spec.capability = Some(
            [(
                "cpu".to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("4".into()),
            )]
            .into(),
        );
        let mut w = World::default().nodes(2, 4, 16);
        w.index.apply_queue(&q);
        w.index
            .apply_podgroup(&super::testing::podgroup("ns", "run", "q", 1, None));
        for i in 0..running {
            let p = super::testing::pod("ns", &format!("run-{i}"), "run", 1000, 0);
            w.index.apply_pod(&super::testing::running(p, "node-0"));
        }
        w.index.apply_podgroup(&super::testing::podgroup(
            "ns",
            "wait",
            "q",
            3,
            Some((3_000, 0)),
        ));
        let out = session(&w);
        assert_eq!(phase_of(&out, "wait"), Some(PodGroupPhase::Pending));
        unschedulable_of(&out, "wait").expect("a condition").1
    };
    let two = message_with(2);
    assert!(two.contains("queue q can hold cpu 4"), "{two}");
    assert_eq!(two, message_with(3));
}

#[test]
fn a_gang_in_a_closed_queue_says_so() {
    let mut closed = super::testing::queue("shut", 1);
    closed.status.get_or_insert_default().state = Some("Closed".into());
    let mut w = World::default().nodes(2, 4, 16);
    w.index.apply_queue(&closed);
    w.index.apply_podgroup(&super::testing::podgroup(
        "ns",
        "g",
        "shut",
        1,
        Some((1_000, 128)),
    ));
    let out = session(&w);
    let (reason, message, _) = unschedulable_of(&out, "g").expect("a condition");
    assert_eq!(reason, "NotEnqueued");
    assert!(message.contains("shut"), "{message}");
}

#[test]
fn an_admitted_gang_whose_pods_are_not_created_yet_keeps_its_minimum() {
    // Volcano's "Schedule Multiple Jobs": 16 cpu, three gangs of 16 one-cpu pods needing 2
    // each, all admitted; the third gang's pods are not created yet when the first two are
    // placed.
    let mut w = World::default()
        .nodes(4, 4, 16)
        .gang("ns", "mqj-1", "default", 16, 2, 1000, 1024, "Inqueue")
        .gang("ns", "mqj-2", "default", 16, 2, 1000, 1024, "Inqueue")
        .gang("ns", "mqj-3", "default", 0, 2, 1000, 1024, "Inqueue");
    let out = session(&w);
    let placed = placed_by_gang(&out.plan);
    let first_two = placed.get("ns/mqj-1").unwrap_or(&0) + placed.get("ns/mqj-2").unwrap_or(&0);
    // Both start, and grow only as far as the 2 cpu the third gang was promised.
    assert_eq!(out.plan.gangs["ns/mqj-1"], Verdict::Ready);
    assert_eq!(out.plan.gangs["ns/mqj-2"], Verdict::Ready);
    assert_eq!(first_two, 14, "{placed:?}");
    // The placements hold (kube-scheduler binds them); then the third gang's pods arrive.
    let at = std::time::Instant::now();
    for (uid, p) in &out.plan.placements {
        w.index
            .assume(uid, &p.node, std::time::Duration::from_secs(30), at);
    }
    for i in 0..16 {
        w.index.apply_pod(&super::testing::pod(
            "ns",
            &format!("mqj-3-task-{i}"),
            "mqj-3",
            1000,
            1024,
        ));
    }
    let out = session(&w);
    assert_eq!(out.plan.gangs["ns/mqj-3"], Verdict::Ready);
    assert_eq!(placed_by_gang(&out.plan).get("ns/mqj-3"), Some(&2));
}

#[test]
fn with_a_grow_delay_a_gang_starts_at_once_and_grows_a_delay_after_it_started() {
    // Three gangs of 16 needing 2 on 16 cpu, the third not created yet: with the delay, the
    // first two start with their minimum only, so the third still finds its room.
    let mut w = World::default()
        .nodes(4, 4, 16)
        .gang("ns", "mqj-1", "default", 16, 2, 1000, 1024, "Inqueue")
        .gang("ns", "mqj-2", "default", 16, 2, 1000, 1024, "Inqueue");
    w.index.set_grow_delay(std::time::Duration::from_secs(1));
    let t0 = now();
    let out = run_session(
        w.index.snapshot(),
        &SchedulerConf::builtin(),
        "s1",
        t0.clone(),
    );
    let placed = placed_by_gang(&out.plan);
    assert_eq!(placed.get("ns/mqj-1"), Some(&2), "{placed:?}");
    assert_eq!(placed.get("ns/mqj-2"), Some(&2), "{placed:?}");
    // The runner notes the gangs ready; growth is due one delay later, and a session then.
    let t0_ms = t0.0.as_millisecond();
    assert_eq!(w.index.gang_ready("ns/mqj-1", t0_ms), Some(t0_ms + 1000));
    assert_eq!(
        w.index.gang_ready("ns/mqj-1", t0_ms + 5),
        None,
        "noted once"
    );
    w.index.gang_ready("ns/mqj-2", t0_ms);
    let at = std::time::Instant::now();
    for (uid, p) in &out.plan.placements {
        w.index
            .assume(uid, &p.node, std::time::Duration::from_secs(30), at);
    }
    // Half a delay later nothing grows, and the session asks to be woken when it may.
    let half = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        t0.0 + k8s_openapi::jiff::SignedDuration::from_millis(500),
    );
    let out = run_session(w.index.snapshot(), &SchedulerConf::builtin(), "s2", half);
    assert!(out.plan.placements.is_empty(), "{:?}", out.plan.placements);
    assert_eq!(out.wake_at_ms, Some(t0_ms + 1000));
    // The third gang arrives meanwhile and starts; once the delay is over the first two grow
    // into what is left.
    w = w.gang("ns", "mqj-3", "default", 16, 2, 1000, 1024, "Inqueue");
    let out = run_session(
        w.index.snapshot(),
        &SchedulerConf::builtin(),
        "s3",
        after_ms(&t0, 600),
    );
    assert_eq!(placed_by_gang(&out.plan).get("ns/mqj-3"), Some(&2));
    for (uid, p) in &out.plan.placements {
        w.index
            .assume(uid, &p.node, std::time::Duration::from_secs(30), at);
    }
    w.index.gang_ready("ns/mqj-3", t0_ms + 600);
    let out = run_session(
        w.index.snapshot(),
        &SchedulerConf::builtin(),
        "s4",
        after_ms(&t0, 1000),
    );
    let grown = placed_by_gang(&out.plan);
    assert_eq!(
        grown.get("ns/mqj-1").unwrap_or(&0) + grown.get("ns/mqj-2").unwrap_or(&0),
        10,
        "{grown:?}"
    );
    assert_eq!(grown.get("ns/mqj-3"), None, "its own delay is not over");
}

fn after_ms(
    t0: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    ms: i64,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        t0.0 + k8s_openapi::jiff::SignedDuration::from_millis(ms),
    )
}

#[test]
fn a_decided_phase_counts_until_the_watch_shows_it() {
    // A session admitted the gang (Inqueue); the watch still shows Pending. The next session
    // must not judge the gang for admission again.
    let mut w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "g", "default", 0, 2, 1000, 1024, "Pending");
    let pg = w.index.podgroup("ns/g").expect("the PodGroup").clone();
    let uid = pg.metadata.uid.clone().unwrap_or_default();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let inqueue = tephra_api::scheduling::PodGroupPhase::Inqueue;
    w.index
        .decided_phases([("ns", "g", uid.as_str(), &inqueue)], until);
    let job = |w: &World| {
        w.index
            .snapshot()
            .jobs
            .into_iter()
            .find(|j| j.id == "ns/g")
            .expect("the job")
    };
    assert_eq!(job(&w).phase, inqueue);
    // An older event (still Pending) keeps the decision; the written phase ends it.
    w.index.apply_podgroup(&pg);
    assert_eq!(job(&w).phase, inqueue);
    w.index
        .apply_podgroup(&super::testing::with_phase((*pg).clone(), "Running"));
    assert_eq!(
        job(&w).phase,
        tephra_api::scheduling::PodGroupPhase::Running
    );
    // Expired, the watch's phase counts again.
    w.index
        .decided_phases([("ns", "g", uid.as_str(), &inqueue)], until);
    w.index.expire_decided(until);
    assert_eq!(
        job(&w).phase,
        tephra_api::scheduling::PodGroupPhase::Running
    );
}

#[test]
fn without_the_enqueue_action_no_room_is_held_for_gangs_without_pods() {
    // Nothing bounds what allocate admits then, so an empty gang holds nothing.
    let w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "elastic", "default", 6, 2, 1000, 1024, "Inqueue")
        .gang("ns", "empty", "default", 0, 2, 1000, 1024, "Inqueue");
    let out = session_with(
        &w,
        "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n",
    );
    assert_eq!(placed_by_gang(&out.plan).get("ns/elastic"), Some(&4));
}

#[test]
fn gangs_created_in_the_same_second_are_admitted_in_the_order_they_were_seen() {
    // Both PodGroups carry the same creation second; `z` was seen first. Only one fits (4 cpu,
    // 4.8 with overcommit), so the order decides, and it is creation order, not uid order.
    let w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "z", "default", 0, 4, 1000, 1024, "Pending")
        .gang("ns", "a", "default", 0, 4, 1000, 1024, "Pending");
    let out = session(&w);
    assert_eq!(phase_of(&out, "z"), Some(PodGroupPhase::Inqueue));
    assert_ne!(phase_of(&out, "a"), Some(PodGroupPhase::Inqueue));
}

#[test]
fn a_gang_whose_pods_are_all_gated_holds_no_room_in_its_queue() {
    // Volcano's "Scheduling gated task will not consume inqueue resources": 16 cpu; j-gated
    // (16 one-cpu pods, all scheduling-gated) is admitted; job1 (minimum 8) must be admitted
    // beside it, by the overcommit and the proportion plugin alike.
    let mut w = World::default()
        .nodes(4, 4, 16)
        .gang("ns", "j-gated", "default", 0, 16, 1000, 0, "Inqueue")
        .gang("ns", "job1", "default", 0, 8, 1000, 0, "Pending");
    for i in 0..16 {
        let mut p = super::testing::pod("ns", &format!("j-gated-task-{i}"), "j-gated", 1000, 0);
        if let Some(spec) = p.spec.as_mut() {
            spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: "g1".into(),
            }]);
        }
        w.index.apply_pod(&p);
    }
    let out = session(&w);
    assert_eq!(phase_of(&out, "job1"), Some(PodGroupPhase::Inqueue));
    // Without the overcommit plugin the proportion plugin alone decides, and agrees.
    let conf = "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  \
                - name: predicates\n  - name: proportion\n";
    let out = session_with(&w, conf);
    assert_eq!(phase_of(&out, "job1"), Some(PodGroupPhase::Inqueue));
}

#[test]
fn pods_behind_the_plan_gate_are_placed_and_pods_behind_other_gates_are_not() {
    // Two gangs of 2 one-cpu pods: one behind tephra's plan gate (which a placement removes),
    // one behind another controller's gate (which holds the pod back from scheduling).
    let gate = |name: &str| {
        Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: name.into(),
        }])
    };
    let mut w = World::default()
        .nodes(2, 4, 16)
        .gang("ns", "ours", "default", 0, 2, 1000, 0, "Inqueue")
        .gang("ns", "theirs", "default", 0, 2, 1000, 0, "Inqueue");
    for (job, g) in [
        ("ours", tephra_api::keys::PLAN_GATE),
        ("theirs", "example.com/quota"),
    ] {
        for i in 0..2 {
            let mut p = super::testing::pod("ns", &format!("{job}-task-{i}"), job, 1000, 0);
            if let Some(spec) = p.spec.as_mut() {
                spec.scheduling_gates = gate(g);
            }
            w.index.apply_pod(&p);
        }
    }
    let out = session(&w);
    let placed = placed_by_gang(&out.plan);
    assert_eq!(placed.get("ns/ours"), Some(&2));
    assert_eq!(placed.get("ns/theirs"), None);

    // Once assumed, the plan-gated pods are the ones whose gate is due to come off.
    let due = w.assume_and_due(
        out.plan
            .placements
            .iter()
            .map(|(u, p)| (u.as_str(), p.node.as_str())),
    );
    assert_eq!(due, vec!["ours-task-0", "ours-task-1"]);
}

/// A pending pod of 1 cpu of gang `group`, made behind the plan gate.
fn plan_gated_pod(ns: &str, name: &str, group: &str) -> k8s_openapi::api::core::v1::Pod {
    let mut p = super::testing::pod(ns, name, group, 1000, 0);
    if let Some(spec) = p.spec.as_mut() {
        spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
            name: tephra_api::keys::PLAN_GATE.into(),
        }]);
    }
    p
}

/// A placement whose pod is still behind the plan gate keeps its node however long the gate
/// removals queue up (nobody else can bind the pod), and gets its whole time once the gate
/// is off; a placement of an ungated pod lapses at its time as before.
#[test]
fn a_placement_behind_its_plan_gate_does_not_lapse_and_its_time_runs_from_the_gates_removal() {
    use std::time::{Duration, Instant};
    let w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "ours", "default", 0, 2, 1000, 0, "Inqueue");
    let mut idx = w.index;
    let gated = plan_gated_pod("ns", "ours-task-0", "ours");
    let open = super::testing::pod("ns", "ours-task-1", "ours", 1000, 0);
    let (g, o) = (
        gated.metadata.uid.clone().unwrap(),
        open.metadata.uid.clone().unwrap(),
    );
    idx.apply_pod(&gated);
    idx.apply_pod(&open);
    let (t0, ttl) = (Instant::now(), Duration::from_secs(30));
    assert!(idx.assume(&g, "node-0", ttl, t0));
    assert!(idx.assume(&o, "node-0", ttl, t0));

    // Long past their time: the ungated pod's placement lapses, the gated one's stays.
    let late = t0 + ttl * 10;
    assert!(idx.has_expired_assumed(late));
    assert_eq!(idx.expire_assumed(late), 1);
    assert_eq!(idx.assumed_node(&o), None);
    assert_eq!(idx.assumed_node(&g), Some("node-0"));
    assert!(
        !idx.has_expired_assumed(late),
        "a session woken for a gated placement"
    );

    // The gate comes off: the whole time from then.
    idx.note_plan_gate_removed(&g, late);
    assert_eq!(idx.expire_assumed(late + ttl - Duration::from_secs(1)), 0);
    assert_eq!(idx.assumed_node(&g), Some("node-0"));
    assert!(idx.has_expired_assumed(late + ttl));
    assert_eq!(idx.expire_assumed(late + ttl), 1);
    assert_eq!(idx.assumed_node(&g), None);
}

#[test]
fn a_removed_plan_gate_stays_removed_whatever_older_events_the_watch_still_brings() {
    let w = World::default()
        .nodes(1, 4, 16)
        .gang("ns", "ours", "default", 0, 1, 1000, 0, "Inqueue");
    let mut idx = w.index;
    let p = plan_gated_pod("ns", "ours-task-0", "ours");
    let uid = p.metadata.uid.clone().unwrap();
    idx.apply_pod(&p);
    assert!(idx.plan_gated(&uid));
    // The API answered the removal; an event from before it (another writer's annotation,
    // say) arrives afterwards and still shows the gate: a gate is never added back, so the
    // event is stale on that point.
    idx.note_plan_gate_removed(&uid, std::time::Instant::now());
    assert!(!idx.plan_gated(&uid));
    idx.apply_pod(&p);
    assert!(!idx.plan_gated(&uid), "a stale event put the gate back");
    // The watch catches up: the pod without the gate, and nothing is remembered any more.
    let mut ungated = p.clone();
    if let Some(spec) = ungated.spec.as_mut() {
        spec.scheduling_gates = None;
    }
    idx.apply_pod(&ungated);
    assert!(!idx.plan_gated(&uid));
    // A pod made again under the same uid is impossible; a new pod of the same name has a
    // new uid and is gated as it says.
    let mut again = p.clone();
    again.metadata.uid = Some("another".into());
    idx.apply_pod(&again);
    assert!(idx.plan_gated("another"));
}

#[test]
fn capacity_shares_the_cluster_as_the_queues_declare_not_by_weight() {
    // 8 nodes × 4 cpu = 32 cpu; equal weights, declared shares of 8 and 24 cpu.
    let mut w = World::default().nodes(8, 4, 64);
    for (name, cpu) in [("q1", "8"), ("q3", "24")] {
        let mut q = super::testing::queue(name, 1);
        q.spec.deserved = Some(
            [(
                "cpu".to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(cpu.into()),
            )]
            .into_iter()
            .collect(),
        );
        w.index.apply_queue(&q);
    }
    for i in 0..20 {
        w = w
            .gang("ns", &format!("a{i:02}"), "q1", 2, 2, 1000, 512, "Inqueue")
            .gang("ns", &format!("b{i:02}"), "q3", 2, 2, 1000, 512, "Inqueue");
    }
    let count = |out: &Outcome| {
        out.plan
            .placements
            .values()
            .fold((0usize, 0usize), |(a, b), p| {
                if p.job.starts_with("ns/a") {
                    (a + 1, b)
                } else {
                    (a, b + 1)
                }
            })
    };
    let proportion = count(&session(&w));
    assert_eq!(proportion, (16, 16), "proportion splits by weight");
    let capacity = session_with(
        &w,
        r#"
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: capacity
  - name: predicates
  - name: nodeorder
"#,
    );
    // The queue with the lower share of its declared amount goes next, gang by gang, and
    // nothing caps a queue at its share while room is left: the split is the declared one
    // within about a gang (2 pods).
    let (a, b) = count(&capacity);
    assert_eq!(a + b, 32, "{:?}", (a, b));
    assert!(
        a.abs_diff(8) <= 2,
        "capacity splits as declared: {:?}",
        (a, b)
    );
}

#[test]
fn a_queue_is_not_starved_by_an_unrelated_running_gang() {
    // 24 idle cpu but for 600m of a running gang in `default` (no memory asked), and one small
    // gang in each of two queues of weights 1 and 3: both gangs start. The lighter queue used
    // to be left short of its own request by the share division (its share converged
    // geometrically and the rounds were cut off), so its second pod never had room.
    let w = World::default()
        .nodes(3, 8, 32)
        .queue("wq-a", 1)
        .queue("wq-b", 3)
        .running_gang("ns", "deploy", "default", 3, 200, 0, 3)
        .gang("ns", "ja", "wq-a", 2, 2, 500, 64, "Inqueue")
        .gang("ns", "jb", "wq-b", 2, 2, 500, 64, "Inqueue");
    let out = session(&w);
    let placed = placed_by_gang(&out.plan);
    assert_eq!(placed.get("ns/ja"), Some(&2), "{:?}", out.plan.gangs);
    assert_eq!(placed.get("ns/jb"), Some(&2), "{:?}", out.plan.gangs);
}

// ----- what a waiting gang is told -----

fn warnings(out: &Outcome) -> Vec<&str> {
    out.events
        .iter()
        .filter(|e| e.type_ == "Warning")
        .map(|e| e.message.as_str())
        .collect()
}

#[test]
fn a_gang_waiting_for_its_own_pods_is_told_so_without_a_warning() {
    // Admitted, 2 of its minMember 3 pods made so far (the Job controller is making them).
    let w = World::default()
        .nodes(1, 8, 16)
        .gang("ns", "a", "default", 2, 3, 1000, 64, "Inqueue");
    let out = session(&w);
    assert_eq!(
        out.plan.gangs["ns/a"],
        Verdict::Waiting("2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 3 minAvailable; Pending: 2 Unschedulable. Origin reason is: Not enough valid tasks for gang-scheduling, valid: 2, min: 3".into())
    );
    assert!(warnings(&out).is_empty(), "{:?}", warnings(&out));
    // Admitted with no pod yet.
    let w = World::default()
        .nodes(1, 8, 16)
        .gang("ns", "b", "default", 0, 2, 1000, 64, "Inqueue");
    let out = session(&w);
    assert_eq!(
        out.plan.gangs["ns/b"],
        Verdict::Waiting("waiting for its pods: 0 of minMember 2 exist".into())
    );
    assert!(warnings(&out).is_empty(), "{:?}", warnings(&out));
}

#[test]
fn the_counts_of_a_waiting_gang_are_of_its_pods() {
    // 4 pods of 3 cpu on 8 cpu, minMember 3: two fit, the gang cannot start. The condition
    // and the Event both count the pods without a node of the pods the gang has.
    let w = World::default()
        .nodes(1, 8, 16)
        .gang("ns", "a", "default", 4, 3, 3000, 64, "Inqueue");
    let out = session(&w);
    let Verdict::Waiting(msg) = &out.plan.gangs["ns/a"] else {
        panic!("{:?}", out.plan.gangs)
    };
    assert!(
        msg.starts_with("4/4 tasks in gang unschedulable: "),
        "{msg}"
    );
    assert_eq!(warnings(&out), vec![msg.as_str()]);
}

#[test]
fn a_scheduled_gang_no_longer_shows_an_old_unschedulable_condition() {
    let mut w = World::default().nodes(1, 8, 16);
    let mut pg = super::testing::with_phase(
        super::testing::podgroup("ns", "a", "default", 2, Some((2000, 128))),
        "Inqueue",
    );
    pg.status.get_or_insert_default().conditions =
        Some(vec![tephra_api::scheduling::PodGroupCondition {
            type_: Some("Unschedulable".into()),
            status: Some("True".into()),
            reason: Some("NotEnoughResources".into()),
            message: Some("2/2 tasks in gang unschedulable: 2 Insufficient cpu".into()),
            ..Default::default()
        }]);
    w.index.apply_podgroup(&pg);
    for i in 0..2 {
        w.index
            .apply_pod(&super::testing::pod("ns", &format!("a-{i}"), "a", 1000, 64));
    }
    let out = session(&w);
    let update = out
        .podgroups
        .iter()
        .find(|u| u.name == "a")
        .expect("status");
    let conds = update.status.conditions.as_ref().expect("conditions");
    let unsched = conds
        .iter()
        .find(|c| c.type_.as_ref().map(|t| t.as_str()) == Some("Unschedulable"))
        .expect("kept, as history");
    assert_eq!(unsched.status.as_deref(), Some("False"));
    assert_eq!(unsched.message.as_deref(), Some("pod group is ready"));
}

#[test]
fn a_gang_asking_for_what_no_node_has_is_told_which() {
    let mut w = World::default().nodes(3, 8, 32);
    let pg: tephra_api::PodGroup = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"namespace": "ns", "name": "gpu", "uid": "pg-gpu",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": 1, "queue": "default",
                 "minResources": {"cpu": "1", "nvidia.com/gpu": "1"}},
        "status": {"phase": "Pending"}
    }))
    .expect("podgroup");
    w.index.apply_podgroup(&pg);
    let out = session(&w);
    let ev = out
        .events
        .iter()
        .find(|e| e.reason == "Unschedulable")
        .expect("an enqueue event");
    assert_eq!(
        ev.message,
        "the gang needs cpu 1, nvidia.com/gpu 1, and no usable node has nvidia.com/gpu"
    );
}

#[test]
fn a_gang_short_of_one_resource_is_told_of_that_one() {
    // 8 cpu, 16Gi: a gang of 2 × (1 cpu, 12Gi) is short of memory only.
    let w = World::default().nodes(1, 8, 16).gang(
        "ns",
        "big",
        "default",
        2,
        2,
        1000,
        12 * 1024,
        "Pending",
    );
    let out = session(&w);
    let ev = out
        .events
        .iter()
        .find(|e| e.reason == "Unschedulable")
        .expect("an enqueue event");
    assert_eq!(
        ev.message,
        "resource in cluster is overused: the gang needs cpu 2, memory 24Gi, more than gangs may ever hold of the cluster: memory 19.2Gi (its allocatable × overcommit factor 1.2; short by memory 4.8Gi)"
    );
}

#[test]
fn a_queue_is_reported_overused_only_when_it_holds_more_than_it_deserves() {
    // One 4-cpu node: queue a runs 4 cpu; queue b asks for 4 cpu, so each deserves 2.
    // `idle` has no demand: it deserves nothing and holds nothing.
    let w = World::default()
        .nodes(1, 4, 16)
        .queue("a", 1)
        .queue("b", 1)
        .queue("idle", 1)
        .running_gang("ns", "r", "a", 4, 1000, 1024, 1)
        .gang("ns", "w", "b", 4, 4, 1000, 1024, "Pending");
    let out = session(&w);
    let overused = |q: &str| out.figures.queues.get(q).map(|r| r.overused);
    assert_eq!(overused("a"), Some(true));
    assert_eq!(overused("b"), Some(false));
    assert_eq!(overused("idle"), Some(false));
}

/// The allocate action remembers a kind of task it searched every node for in vain, and tells
/// the next task of that kind so without a search, until a gang is given up: then the nodes
/// its tasks held are free again, and a smaller gang of the same kind fits there.
#[test]
fn a_gang_given_up_frees_its_node_for_the_next_of_its_kind() {
    use super::testing::{node, pod, podgroup, with_phase};
    let mut w = World::default();
    // Only node-0 (8 cpu) is in the pool the pods select: four of the large gang's 2-cpu
    // pods fit there, its fifth fits nowhere, though the queue's share (16 cpu) allows all.
    let mut pool = node("node-0", 8, 16, 110);
    if let Some(labels) = pool.metadata.labels.as_mut() {
        labels.insert("pool".into(), "a".into());
    }
    w.index.apply_node(&pool);
    w.index.apply_node(&node("node-1", 8, 16, 110));
    w.index.apply_priority_class(
        &serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "high"}, "value": 1000
        }))
        .unwrap(),
    );
    // The large gang goes first (higher priority), the small one of the same kind after it.
    for (name, size, class) in [("large", 5, Some("high")), ("small", 2, None)] {
        let mut pg = podgroup("ns", name, "default", size, Some((2000 * size as u32, 64)));
        pg.spec.priority_class_name = class.map(str::to_string);
        w.index.apply_podgroup(&with_phase(pg, "Inqueue"));
        for i in 0..size {
            let mut p = pod("ns", &format!("{name}-{i}"), name, 2000, 64);
            if let Some(spec) = p.spec.as_mut() {
                spec.node_selector = Some([("pool".to_string(), "a".to_string())].into());
            }
            w.index.apply_pod(&p);
        }
    }
    let out = session(&w);
    let placed = placed_by_gang(&out.plan);
    assert_eq!(placed.get("ns/large"), None, "{placed:?}");
    assert_eq!(placed.get("ns/small"), Some(&2), "{placed:?}");
}

/// One random cluster for [`remembering_kinds_never_changes_a_plan`]: nodes (cpu, in
/// the labelled pool or not) and gangs (queue, pods, minMember, millicores per pod, whether
/// they select the pool, pods already running on a node of the pool).
type UnfitScenario = (
    Vec<(u32, bool)>,
    Vec<(usize, usize, usize, u32, bool, usize)>,
);

fn unfit_world((nodes, gangs): &UnfitScenario) -> World {
    use super::testing::{node, pod, podgroup, running, with_phase};
    let mut w = World::default().queue("q1", 1).queue("q2", 2);
    for (i, (cpu, pooled)) in nodes.iter().enumerate() {
        let mut n = node(&format!("node-{i}"), *cpu, 64, 110);
        if *pooled && let Some(labels) = n.metadata.labels.as_mut() {
            labels.insert("pool".into(), "a".into());
        }
        w.index.apply_node(&n);
    }
    let pool: Vec<usize> = (0..nodes.len()).filter(|&i| nodes[i].1).collect();
    for (g, (queue, size, min, milli, select, run)) in gangs.iter().enumerate() {
        let name = format!("g{g}");
        let queue = ["default", "q1", "q2"][*queue];
        let min = (*min).min(*size) as i32;
        let pg = podgroup("ns", &name, queue, min, Some((milli * min as u32, 64)));
        w.index.apply_podgroup(&with_phase(pg, "Inqueue"));
        for i in 0..*size {
            let mut p = pod("ns", &format!("{name}-{i}"), &name, *milli, 64);
            if *select && let Some(spec) = p.spec.as_mut() {
                spec.node_selector = Some([("pool".to_string(), "a".to_string())].into());
            }
            // The first `run` pods already run on the pool's nodes, in turn.
            if i < *run && !pool.is_empty() {
                p = running(p, &format!("node-{}", pool[i % pool.len()]));
            }
            w.index.apply_pod(&p);
        }
    }
    w
}

/// Found by [`remembering_kinds_never_changes_a_plan`]: a gang of a kind remembered as
/// fitting nowhere is told why as a search would tell it now. Node-1 failed the first gang on
/// its selector; a gang placed since left node-1 short of cpu, which is checked first.
#[test]
fn a_remembered_unfit_kind_is_told_todays_reasons() {
    let w = unfit_world(&(
        vec![(1, false), (5, false)],
        vec![
            (0, 1, 1, 2500, true, 0),
            (0, 2, 2, 1500, false, 0),
            (0, 1, 1, 2500, true, 0),
        ],
    ));
    let out = session(&w);
    let Some(Verdict::Waiting(why)) = out.plan.gangs.get("ns/g2") else {
        panic!("g2 should wait: {:?}", out.plan.gangs);
    };
    assert!(
        why.ends_with("g2-0: 0/2 nodes are unavailable: 2 Insufficient cpu."),
        "{why}"
    );
}

use proptest::prelude::Strategy as _;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// The allocate action's memory of kinds of task no node fits only saves searches: with it
    /// and without it, the same cluster gets the same placements and the same verdicts, gangs
    /// given up midway (their nodes freed again) included.
    #[test]
    fn remembering_kinds_never_changes_a_plan(
        scenario in (
            proptest::collection::vec((1u32..=8, proptest::bool::ANY), 1..6),
            proptest::collection::vec(
                (0usize..3, 1usize..6, 1usize..6, (1u32..=6).prop_map(|c| c * 500),
                 proptest::bool::ANY, 0usize..3),
                1..12,
            ),
        )
    ) {
        same_plan_with_and_without_kinds(&scenario)?;
    }

    /// The same over more than 100 nodes, where a search stops once it has found a share of
    /// the nodes: the remembered kinds must hand out the same nodes in the same order.
    #[test]
    fn remembering_kinds_never_changes_a_plan_when_searches_stop_early(
        scenario in (
            proptest::collection::vec((1u32..=4, proptest::bool::weighted(0.8)), 101..140),
            proptest::collection::vec(
                (0usize..3, 1usize..6, 1usize..6, (1u32..=6).prop_map(|c| c * 500),
                 proptest::bool::ANY, 0usize..3),
                1..30,
            ),
        )
    ) {
        same_plan_with_and_without_kinds(&scenario)?;
    }
}

fn same_plan_with_and_without_kinds(
    scenario: &UnfitScenario,
) -> Result<(), proptest::test_runner::TestCaseError> {
    {
        let w = unfit_world(scenario);
        let with = session(&w);
        super::actions::allocate::REMEMBER_KINDS.with(|r| r.set(false));
        let without = session(&w);
        super::actions::allocate::REMEMBER_KINDS.with(|r| r.set(true));
        let placed = |o: &Outcome| {
            o.plan
                .placements
                .iter()
                .map(|(u, p)| (u.clone(), p.node.clone()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let verdicts = |o: &Outcome| {
            o.plan
                .gangs
                .iter()
                .map(|(g, v)| (g.clone(), format!("{v:?}")))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        proptest::prop_assert_eq!(placed(&with), placed(&without));
        proptest::prop_assert_eq!(verdicts(&with), verdicts(&without));
    }
    Ok(())
}
