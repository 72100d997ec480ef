//! The pages from small sets of objects: what a person reads on them, and that nothing they
//! print can add markup.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tephra_api::scheduling::{PodGroup, Queue};
use tephra_scheduler::outcome::QueueFigures;
use tephra_scheduler::resource::Resource;
use tephra_scheduler::session::QueueReport;
use tephra_scheduler::whatif::{Delay, JobPrediction, Prediction};

use super::*;

/// 2026-12-05T12:00:00Z.
const NOW: i64 = 1_796_472_000;

fn at(seconds_before_now: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(NOW - seconds_before_now)
        .unwrap()
        .to_string()
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

fn queue(name: &str, weight: i32, allocated_cpu: Option<&str>) -> Queue {
    let mut q = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
        "status": {"state": "Open"}
    });
    if let Some(cpu) = allocated_cpu {
        q["status"]["allocated"] = json!({"cpu": cpu, "memory": "2Gi"});
    }
    from(q)
}

fn gang(
    name: &str,
    queue: &str,
    phase: &str,
    age: i64,
    condition: Option<(&str, &str)>,
) -> PodGroup {
    let mut pg = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team-a", "creationTimestamp": at(age),
                     "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                          "name": format!("{name}-job"), "uid": "u1", "controller": true}]},
        "spec": {"minMember": 2, "queue": queue},
        "status": {"phase": phase}
    });
    if let Some((reason, message)) = condition {
        pg["status"]["conditions"] = json!([
            {"type": "Unschedulable", "status": "False", "reason": "Old", "message": "stale",
             "lastTransitionTime": at(age)},
            {"type": "Unschedulable", "status": "True", "reason": reason, "message": message,
             "lastTransitionTime": at(5)}
        ]);
    }
    from(pg)
}

fn pod(name: &str, group: &str, node: Option<&str>, phase: &str, gated: bool) -> Pod {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "creationTimestamp": at(30),
                     "annotations": {"scheduling.k8s.io/group-name": group, "volcano.sh/task-spec": "worker"}},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "env": [{"name": "TOKEN", "value": "s3cret-value"}]}]},
        "status": {"phase": phase}
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    if gated {
        p["spec"]["schedulingGates"] = json!([{"name": "scheduling.tephra.io/gang-plan"}]);
    }
    from(p)
}

struct Objects {
    queues: Vec<Queue>,
    pod_groups: Vec<PodGroup>,
    pods: Vec<Pod>,
}

fn objects() -> Objects {
    Objects {
        queues: vec![queue("research", 3, Some("4")), queue("default", 1, None)],
        pod_groups: vec![
            gang("train", "research", "Running", 600, None),
            gang(
                "sweep",
                "research",
                "Inqueue",
                120,
                Some((
                    "NotEnoughResources",
                    "2/2 tasks in gang unschedulable: <b>0/3 nodes</b> are available",
                )),
            ),
            gang("old", "research", "Completed", 9000, None),
            gang("late", "research", "Pending", 30, None),
        ],
        pods: vec![
            pod("train-0", "train", Some("node-1"), "Running", false),
            pod("train-1", "train", Some("node-2"), "Running", false),
            pod("sweep-0", "sweep", None, "Pending", true),
            pod("sweep-1", "sweep", None, "Pending", false),
        ],
    }
}

fn view<'a>(o: &'a Objects, figures: Option<&'a QueueFigures>) -> View<'a> {
    View {
        now_s: NOW,
        queues: o.queues.iter().collect(),
        pod_groups: o.pod_groups.iter().collect(),
        pods: o.pods.iter().collect(),
        figures,
    }
}

fn figures() -> QueueFigures {
    let r = |cpu: f64, gib: f64| Resource {
        milli_cpu: cpu * 1000.0,
        memory: gib * 1024.0 * 1024.0 * 1024.0,
        ..Resource::default()
    };
    let mut f = QueueFigures {
        at_ms: (NOW - 2) * 1000,
        ..QueueFigures::default()
    };
    f.queues.insert(
        "research".into(),
        QueueReport {
            deserved: r(6.0, 24.0),
            allocated: r(4.0, 16.0),
            ..QueueReport::default()
        },
    );
    f
}

#[test]
fn queues_show_weight_shares_and_waiting_work() {
    let o = objects();
    let f = figures();
    let page = overview(&view(&o, Some(&f)));
    let names: Vec<&str> = page.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["default", "research"]);
    let research = &page.queues[1];
    assert_eq!(research.weight, 3);
    assert_eq!(research.deserved, "6 cpu, 24Gi memory");
    assert_eq!(research.allocated, "4 cpu, 16Gi memory");
    assert_eq!(
        (
            research.running_gangs,
            research.waiting_gangs,
            research.waiting_pods
        ),
        (1, 2, 2)
    );
    assert!(
        page.figures_note.contains("2s ago"),
        "{}",
        page.figures_note
    );
}

#[test]
fn without_a_session_the_queue_status_is_shown_and_deserved_is_unknown() {
    let o = objects();
    let page = overview(&view(&o, None));
    let research = &page.queues[1];
    assert_eq!(research.deserved, "—");
    assert_eq!(research.allocated, "4 cpu, 2Gi memory");
    assert_eq!(page.queues[0].allocated, "—");
    assert!(
        page.figures_note.contains("leader"),
        "{}",
        page.figures_note
    );
}

#[test]
fn gangs_wait_first_oldest_first_with_the_scheduler_words() {
    let o = objects();
    let page = overview(&view(&o, None));
    assert_eq!(
        page.sections.len(),
        1,
        "only research has gangs not completed"
    );
    let gangs = &page.sections[0].gangs;
    let names: Vec<&str> = gangs.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        names,
        ["sweep", "late", "train"],
        "waiting (oldest first), then running"
    );
    let sweep = &gangs[0];
    assert_eq!(sweep.job, "sweep-job");
    assert_eq!(sweep.age, "2m");
    assert_eq!((sweep.bound, sweep.pods, sweep.min_member), (0, 2, 2));
    assert_eq!(
        sweep.waits_for,
        "NotEnoughResources: 2/2 tasks in gang unschedulable: <b>0/3 nodes</b> are available",
        "the latest true Unschedulable condition"
    );
    assert_eq!(gangs[1].waits_for, "Waiting for its queue to admit it.");
    assert_eq!(gangs[2].waits_for, "", "a running gang waits for nothing");
    assert_eq!(sweep.link, "/ui/gangs/team-a/sweep");
}

#[test]
fn the_overview_escapes_what_it_prints_and_shows_no_pod_environment() {
    let o = objects();
    let html = render_overview(&overview(&view(&o, None))).unwrap();
    assert!(html.contains("&#60;b&#62;0/3 nodes&#60;/b&#62;"), "{html}");
    assert!(!html.contains("<b>0/3"), "the message adds no markup");
    assert!(html.contains("href=\"/ui/gangs/team-a/sweep\""));
    assert!(!html.contains("s3cret"));
    assert!(!html.contains("<script"), "no script on the page");
}

#[test]
fn a_gangs_page_lists_its_pods_and_their_nodes() {
    let o = objects();
    let v = view(&o, None);
    let page = gang_page(&v, "team-a", "train").expect("train exists");
    let rows: Vec<(&str, &str, &str)> = page
        .pods
        .iter()
        .map(|p| (p.name.as_str(), p.phase.as_str(), p.node.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            ("train-0", "Running", "node-1"),
            ("train-1", "Running", "node-2")
        ]
    );
    let sweep = gang_page(&v, "team-a", "sweep").unwrap();
    assert_eq!(sweep.pods[0].phase, "Pending (gated)");
    assert_eq!(sweep.pods[1].phase, "Pending");
    assert_eq!(sweep.pods[0].task, "worker");
    assert!(
        gang_page(&v, "team-b", "train").is_none(),
        "namespaces are apart"
    );
    let html = render_gang(&page).unwrap();
    assert!(
        html.contains("node-2") && html.contains("train-job"),
        "{html}"
    );
    assert!(!html.contains("s3cret"));
}

#[test]
fn the_whatif_page_shows_the_form_then_the_answer_or_why_not() {
    let blank = render_whatif(&WhatIfAnswer::default(), 86_400).unwrap();
    assert!(blank.contains("<form method=\"post\" action=\"/ui/whatif\""));
    assert!(!blank.contains("id=\"prediction\""));
    assert!(blank.contains("24h 0m horizon"), "{blank}");

    let failed = render_whatif(
        &WhatIfAnswer {
            input: "kind: <Job>".into(),
            namespace: "default".into(),
            result: Some(Err("line 1: expected a vcJob, got <Job>".into())),
        },
        86_400,
    )
    .unwrap();
    assert!(
        failed.contains("expected a vcJob, got &#60;Job&#62;"),
        "{failed}"
    );
    assert!(
        failed.contains(">kind: &#60;Job&#62;</textarea>"),
        "the text is kept, escaped"
    );

    let prediction = Prediction {
        jobs: vec![
            JobPrediction {
                name: "big".into(),
                namespace: "default".into(),
                queue: "research".into(),
                tried: true,
                admitted_after_seconds: Some(0),
                start_after_seconds: Some(125),
                finish_after_seconds: None,
                waits_for: "pods of train to end".into(),
                delays: vec![Delay {
                    name: "late".into(),
                    namespace: "team-a".into(),
                    by_seconds: Some(40),
                }],
            },
            JobPrediction {
                name: "late".into(),
                namespace: "team-a".into(),
                queue: "research".into(),
                tried: false,
                admitted_after_seconds: None,
                start_after_seconds: None,
                finish_after_seconds: None,
                waits_for: String::new(),
                delays: vec![],
            },
        ],
        notes: vec!["1 pod has no run time".into()],
        horizon_seconds: 86_400,
    };
    let html = render_whatif(
        &WhatIfAnswer {
            input: "x".into(),
            namespace: "default".into(),
            result: Some(Ok(prediction)),
        },
        86_400,
    )
    .unwrap();
    assert!(html.contains("id=\"prediction\""));
    assert!(html.contains("2m 5s"), "{html}");
    assert!(html.contains("team-a/late by 40s"));
    assert!(html.contains(">never<"));
    assert!(html.contains("1 pod has no run time"));
}

#[test]
fn an_unknown_path_says_so_escaped() {
    let html = render_not_found("no gang <x>/y").unwrap();
    assert!(html.contains("no gang &#60;x&#62;/y"));
}
