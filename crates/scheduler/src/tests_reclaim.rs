//! Reclaim between queues under Volcano's `capacity` plugin, replayed session by session on
//! the situation of Volcano's e2e spec "Capacity Reclaim Case 11: Multi reclaimed queue": four
//! 2-cpu holes (placeholders fill the rest of each node), two low-priority queues that declare
//! 1 cpu each running 4 one-cpu pods each, then high-priority jobs of queues that declare 2 and
//! 4 cpu arriving one after the other.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::config::parse;
use super::outcome::{Outcome, run_session};
use super::testing::{World, pod, podgroup, queue, running, with_phase};

/// Volcano's CI configuration with `proportion` swapped for `capacity`, as the spec does.
const CONF: &str = r#"
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
"#;

/// When the fixtures' pods were created (`testing::pod`), seconds since the epoch.
const CREATED: i64 = 1_767_225_600;

const GI: u32 = 1024;

/// The cluster as the spec leaves it before its high-priority jobs, and what the sessions did.
struct Spec {
    w: World,
    /// Pods by uid, as the API holds them (to delete and bind them).
    pods: BTreeMap<String, Pod>,
    /// Victims evicted but not gone yet.
    releasing: Vec<String>,
    /// Replacement pods made so far (the Job controller's `-r<N>` pods).
    replacements: usize,
    evictions: Vec<String>,
    sessions: i64,
}

fn queue_declaring(name: &str, cpu: u32) -> tephra_api::Queue {
    let mut q = queue(name, 1);
    q.spec.deserved = Some(
        [
            ("cpu".to_string(), Quantity(cpu.to_string())),
            ("memory".to_string(), Quantity(format!("{cpu}Gi"))),
        ]
        .into_iter()
        .collect(),
    );
    q
}

fn prioritised(mut p: Pod, class: &str, value: i32) -> Pod {
    if let Some(s) = p.spec.as_mut() {
        s.priority_class_name = Some(class.into());
        s.priority = Some(value);
    }
    p
}

impl Spec {
    fn new() -> Self {
        let mut w = World::default().nodes(4, 4, 16);
        for (name, value) in [("low-priority", 10), ("high-priority", 10000)] {
            w.index.apply_priority_class(
                &serde_json::from_value(json!({"metadata": {"name": name}, "value": value}))
                    .unwrap(),
            );
        }
        for (q, cpu) in [("q1", 1), ("q2", 1), ("q3", 2), ("q4", 4)] {
            w.index.apply_queue(&queue_declaring(q, cpu));
        }
        let mut s = Spec {
            w,
            pods: BTreeMap::new(),
            releasing: Vec::new(),
            replacements: 0,
            evictions: Vec::new(),
            sessions: 0,
        };
        // Placeholders of the default scheduler leave 2 cpu and 2Gi free on each node.
        for n in 0..4 {
            let mut p = pod("ns", &format!("node-{n}-placeholder"), "", 2000, 14 * GI);
            if let Some(spec) = p.spec.as_mut() {
                spec.scheduler_name = Some("default-scheduler".into());
            }
            p.metadata.annotations = None;
            s.put(running(p, &format!("node-{n}")));
        }
        // reclaim-j1 (q1) and reclaim-j2 (q2): 4 low-priority pods each, minimum 1, the first
        // filling node-0 and node-1, the second node-2 and node-3.
        for (j, (name, q)) in [("j1", "q1"), ("j2", "q2")].into_iter().enumerate() {
            s.job(name, q, "low-priority", 1, "Running");
            for i in 0..4 {
                let p = s.member(name, i, "low-priority", 10, 1000);
                s.put(running(p, &format!("node-{}", 2 * j + i / 2)));
            }
        }
        s
    }

    fn put(&mut self, p: Pod) {
        self.w.index.apply_pod(&p);
        let uid = p.metadata.uid.clone().unwrap();
        self.pods.insert(uid, p);
    }

    fn job(&mut self, name: &str, q: &str, class: &str, min: i32, phase: &str) {
        let mut pg = with_phase(podgroup("ns", name, q, min, None), phase);
        pg.spec.priority_class_name = Some(class.into());
        self.w.index.apply_podgroup(&pg);
    }

    fn member(&self, job: &str, i: usize, class: &str, value: i32, milli_cpu: u32) -> Pod {
        let mut p = prioritised(
            pod(
                "ns",
                &format!("{job}-task-{i}"),
                job,
                milli_cpu,
                milli_cpu / 1000 * GI,
            ),
            class,
            value,
        );
        p.metadata
            .labels
            .get_or_insert_default()
            .insert("volcano.sh/preemptable".into(), "true".into());
        p
    }

    /// A high-priority one-pod job (the spec's `CreateReclaimJob`), admitted.
    fn reclaimer(&mut self, name: &str, q: &str, milli_cpu: u32) {
        self.job(name, q, "high-priority", 1, "Inqueue");
        let p = self.member(name, 0, "high-priority", 10000, milli_cpu);
        self.put(p);
    }

    /// One session, then what the cluster does with its outcome before the next: the victims
    /// of the previous session are gone, this session's victims are releasing (as the runner
    /// marks them) and the Job controller has made a pending replacement for each, and every
    /// placement whose node has room is bound and running.
    fn step(&mut self) -> Outcome {
        self.sessions += 1;
        let conf = parse(CONF, "test").unwrap();
        let now = k8s_openapi::jiff::Timestamp::from_second(CREATED + 60 + self.sessions).unwrap();
        let out = run_session(self.w.index.snapshot(), &conf, "s", Time(now));
        for uid in std::mem::take(&mut self.releasing) {
            if let Some(p) = self.pods.remove(&uid) {
                self.w.index.delete_pod(&p);
            }
        }
        let t0 = Instant::now();
        for e in &out.evictions {
            self.evictions.push(e.name.clone());
            assert!(
                self.w
                    .index
                    .assume_evicted(&e.uid, Duration::from_secs(30), t0),
                "{} evicted twice",
                e.name
            );
            self.releasing.push(e.uid.clone());
            let job = e.name.split("-task-").next().unwrap().to_string();
            self.replacements += 1;
            let p = self.member(&job, 100 + self.replacements, "low-priority", 10, 1000);
            self.put(p);
        }
        for (uid, place) in &out.plan.placements {
            let Some(p) = self.pods.get(uid).cloned() else {
                continue;
            };
            let snap = self.w.index.snapshot();
            let node = snap.nodes.iter().find(|n| n.name == place.node).unwrap();
            let req = super::resource::pod_request(&p);
            if req.less_equal(&node.allocatable.minus(&node.used)) {
                self.put(running(p, &place.node));
            }
        }
        out
    }

    /// Steps until a session changes nothing (at most `max` sessions).
    fn settle(&mut self, max: usize) {
        for _ in 0..max {
            let settled = self.releasing.is_empty();
            let out = self.step();
            if settled && out.evictions.is_empty() && out.plan.placements.is_empty() {
                return;
            }
        }
    }

    fn running_in(&self, job: &str) -> usize {
        let snap = self.w.index.snapshot();
        snap.tasks
            .iter()
            .filter(|t| {
                t.job.as_deref() == Some(&format!("ns/{job}"))
                    && t.status == super::model::TaskStatus::Running
            })
            .count()
    }
}

#[test]
fn capacity_reclaims_for_queues_below_their_declared_share_down_to_the_others_share() {
    let mut s = Spec::new();
    // Nothing to do before the reclaimers come.
    s.settle(3);
    assert!(s.evictions.is_empty(), "{:?}", s.evictions);
    // reclaim-j3 (q3, 2 cpu): two pods of one queue go on one node.
    s.reclaimer("j3", "q3", 2000);
    s.settle(10);
    assert_eq!(s.running_in("j3"), 1, "evictions {:?}", s.evictions);
    assert_eq!(s.evictions.len(), 2, "{:?}", s.evictions);
    // reclaim-j4 (q4, 2 cpu), then reclaim-j5 and reclaim-j6 (q4, 1 cpu each).
    for (name, cpu) in [("j4", 2000), ("j5", 1000), ("j6", 1000)] {
        s.reclaimer(name, "q4", cpu);
        s.settle(10);
        assert_eq!(s.running_in(name), 1, "{name}: evictions {:?}", s.evictions);
    }
    // q1 and q2 keep their declared 1 cpu each; 6 pods went, one for each cpu taken.
    assert_eq!(s.evictions.len(), 6, "{:?}", s.evictions);
    assert_eq!((s.running_in("j1"), s.running_in("j2")), (1, 1));
    // The replacements of the victims wait: nothing more is evicted for them or for anyone.
    s.settle(5);
    assert_eq!(s.evictions.len(), 6, "{:?}", s.evictions);
    for j in ["j3", "j4", "j5", "j6"] {
        assert_eq!(s.running_in(j), 1, "{j}");
    }
}

/// Two one-pod jobs of queue `qa` fill a 2-cpu node, a one-pod job of `qb` waits; both queues
/// weigh the same. `critical` makes `qa`'s pods critical.
fn one_pod_jobs(critical: bool) -> Outcome {
    let mut w = World::default()
        .nodes(1, 2, 16)
        .queue("qa", 1)
        .queue("qb", 1);
    for name in ["a1", "a2"] {
        w.index
            .apply_podgroup(&with_phase(podgroup("ns", name, "qa", 1, None), "Running"));
        let mut p = pod("ns", &format!("{name}-task-0"), name, 1000, 512);
        if critical && let Some(s) = p.spec.as_mut() {
            s.priority_class_name = Some("system-cluster-critical".into());
        }
        w.index.apply_pod(&running(p, "node-0"));
    }
    w.index
        .apply_podgroup(&with_phase(podgroup("ns", "b", "qb", 1, None), "Inqueue"));
    w.index.apply_pod(&pod("ns", "b-task-0", "b", 1000, 512));
    let conf = parse(&CONF.replace("capacity", "proportion"), "test").unwrap();
    let now = k8s_openapi::jiff::Timestamp::from_second(CREATED + 60).unwrap();
    run_session(w.index.snapshot(), &conf, "s", Time(now))
}

#[test]
fn a_one_pod_job_the_gang_plugin_keeps_is_reclaimed_when_its_queue_is_past_its_share() {
    // The gang plugin (first tier) keeps both: each job would drop below its minMember. Its
    // tier then decides nothing and proportion (second tier) finds qa holding 2 cpu of a
    // 1-cpu share: one pod goes, as in Volcano.
    let out = one_pod_jobs(false);
    assert_eq!(out.evictions.len(), 1, "{:?}", out.evictions);
    assert!(
        out.evictions[0].name.starts_with('a'),
        "{:?}",
        out.evictions
    );
    // Critical pods stay whatever tier decides.
    let out = one_pod_jobs(true);
    assert!(out.evictions.is_empty(), "{:?}", out.evictions);
}

/// Queue `qa` runs two gangs of two one-cpu pods needing both (`a` and `c`) on 4 cpu: on one
/// 4-cpu node, or with `split` one pod of each on either of two 2-cpu nodes. A one-pod job of
/// `qb` (same weight) waits for two cpu: `qa` is 2 cpu past its share.
fn two_gangs(split: bool) -> Outcome {
    let nodes: u32 = if split { 2 } else { 1 };
    let mut w = World::default()
        .nodes(nodes as usize, 4 / nodes, 16)
        .queue("qa", 1)
        .queue("qb", 1);
    for name in ["a", "c"] {
        w.index
            .apply_podgroup(&with_phase(podgroup("ns", name, "qa", 2, None), "Running"));
        for i in 0..2 {
            let p = pod("ns", &format!("{name}-task-{i}"), name, 1000, 512);
            let node = if split { i } else { 0 };
            w.index.apply_pod(&running(p, &format!("node-{node}")));
        }
    }
    w.index
        .apply_podgroup(&with_phase(podgroup("ns", "b", "qb", 1, None), "Inqueue"));
    w.index.apply_pod(&pod("ns", "b-task-0", "b", 2000, 512));
    let conf = parse(&CONF.replace("capacity", "proportion"), "test").unwrap();
    let now = k8s_openapi::jiff::Timestamp::from_second(CREATED + 60).unwrap();
    run_session(w.index.snapshot(), &conf, "s", Time(now))
}

#[test]
fn reclaim_takes_a_gang_whole_or_leaves_it() {
    // proportion decides (the gang plugin names no victim: neither gang has a pod to spare)
    // and two cpu are wanted; one pod of each gang would leave both running short: one whole
    // gang goes, both its pods.
    let out = two_gangs(false);
    let mut names: Vec<&str> = out.evictions.iter().map(|e| e.name.as_str()).collect();
    names.sort();
    assert!(
        names == ["a-task-0", "a-task-1"] || names == ["c-task-0", "c-task-1"],
        "{names:?}"
    );
    // Gangs split across the nodes cannot go whole from the node the pod would use: nothing
    // is evicted.
    let out = two_gangs(true);
    assert!(out.evictions.is_empty(), "{:?}", out.evictions);
}
