//! A cluster's state and the vcJobs to try, as a [`Scenario`].
//!
//! - Ready nodes become nodes (allocatable, labels, taints; a cordoned node gets the
//!   `node.kubernetes.io/unschedulable` taint); nodes that are not Ready are left out.
//! - Queues keep weight, capability, guarantee, deserved, parent, priority, reclaimable, state.
//! - A vcJob of tephra's scheduler that is not finished becomes a job of its queue, its tasks
//!   read through Volcano's defaults (task names, `minAvailable`): with pods bound to a node it
//!   is running (its pods hold their nodes for their remaining run time); without, it is
//!   pending, created as long before "now" as it was in the cluster (queues keep their order).
//! - Any other bound, unfinished pod holds its node's resources for its remaining run time.
//! - The vcJobs to try arrive at time 0, after everything already there.
//!
//! A pod's run time: its `simulation.tephra.io/run-seconds` annotation, else the default of its
//! queue (`Options::run_seconds`), else its job's history (the mean run time of the job's
//! pods of the same task that have Succeeded, else of all its Succeeded pods: a rerun of a
//! finished job counts), else it runs on past the horizon. A running pod runs for what is left
//! of its run time since its `startTime`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tephra_api::{Job, keys};

use super::{ClusterState, Options, WhatIfError};
use crate::resource::pod_request;
use crate::sim::Scenario;
use crate::sim::scenario::{JobSpec, NodeSpec, OtherPodSpec, PresentPod, QueueSpec, TaskSpec};

/// What a job of the scenario is to the question asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobRole {
    /// One of the vcJobs to try.
    Tried,
    /// Already in the cluster, not started.
    Pending,
    /// Already in the cluster with pods on nodes.
    Running,
}

/// A scenario built from a cluster, and what each of its jobs is.
#[derive(Clone, Debug)]
pub struct Translated {
    /// The scenario.
    pub scenario: Scenario,
    /// The role of each of `scenario.jobs`, in the same order.
    pub roles: Vec<JobRole>,
    /// What was left out of the simulation, one sentence each.
    pub notes: Vec<String>,
}

/// Phases of a vcJob that will not run pods any more.
const FINISHED: [&str; 6] = [
    "Completed",
    "Failed",
    "Terminated",
    "Aborted",
    "Aborting",
    "Terminating",
];

/// Builds the scenario of `state` with the vcJobs `tried` added. Fails on a tried job that
/// cannot be simulated (no tasks, a queue the cluster lacks, a name already in use) and on a
/// configuration that does not parse; objects of the cluster that cannot be simulated are left
/// out and named in [`Translated::notes`].
pub fn translate(
    state: &ClusterState,
    tried: &[Job],
    opts: &Options,
) -> Result<Translated, WhatIfError> {
    if let Some(text) = &opts.conf {
        crate::config::parse(text, "--config").map_err(|e| WhatIfError::Config(e.to_string()))?;
    }
    let now_ms = state.taken_at.0.as_millisecond();
    let mut notes = Vec::new();

    let mut nodes = Vec::new();
    for n in &state.nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        if !is_ready(n) {
            notes.push(format!("node {name} is not Ready and is left out"));
            continue;
        }
        nodes.push(node_spec(n));
    }
    let node_names: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
    for (k, extra) in opts.add_nodes.iter().enumerate() {
        nodes.push(NodeSpec {
            name: format!("simulate-added-{k}"),
            count: extra.count,
            cpu: extra.cpu.clone(),
            memory: extra.memory.clone(),
            ..NodeSpec::default()
        });
    }

    let queues: Vec<QueueSpec> = state.queues.iter().map(queue_spec).collect();
    let queue_names: BTreeSet<&str> = queues
        .iter()
        .map(|q| q.name.as_str())
        .chain([keys::DEFAULT_QUEUE, keys::ROOT_QUEUE])
        .collect();
    let priorities: BTreeMap<&str, i32> = state
        .priority_classes
        .iter()
        .filter_map(|pc| Some((pc.metadata.name.as_deref()?, pc.value.unwrap_or(0))))
        .collect();

    // Pods by the vcJob that made them.
    let mut by_job: BTreeMap<(String, String), Vec<&Pod>> = BTreeMap::new();
    for p in &state.pods {
        if let Some(job) = label_or_annotation(p, keys::JOB_NAME) {
            by_job
                .entry((namespace_of(&p.metadata), job.to_string()))
                .or_default()
                .push(p);
        }
    }
    let tried_keys: BTreeSet<(String, String)> = tried
        .iter()
        .map(|j| (namespace_of(&j.metadata), name_of(&j.metadata)))
        .collect();

    let mut jobs = Vec::new();
    let mut roles = Vec::new();
    // Pods a simulated job accounts for; every other bound pod holds its node.
    let mut accounted: BTreeSet<(String, String)> = BTreeSet::new();
    let mut existing: Vec<&Job> = state.jobs.iter().collect();
    existing.sort_by_key(|j| {
        (
            j.metadata.creation_timestamp.as_ref().map(|t| t.0),
            namespace_of(&j.metadata),
            name_of(&j.metadata),
        )
    });
    for job in existing {
        let (ns, name) = (namespace_of(&job.metadata), name_of(&job.metadata));
        let key = (ns.clone(), name.clone());
        let phase = job
            .status
            .as_ref()
            .and_then(|s| s.state.as_ref())
            .and_then(|s| s.phase.as_ref())
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "Pending".into());
        let finished = FINISHED.contains(&phase.as_str());
        if tried_keys.contains(&key) && !finished {
            return Err(WhatIfError::Job {
                namespace: ns,
                name,
                reason: format!(
                    "a vcJob of this name is already in the cluster ({phase}); give the one \
                     to try another name"
                ),
            });
        }
        let scheduler = job
            .spec
            .scheduler_name
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or(keys::DEFAULT_SCHEDULER_NAME);
        if finished || !opts.scheduler_names.iter().any(|s| s == scheduler) {
            continue;
        }
        let queue = job.spec.queue().to_string();
        if !queue_names.contains(queue.as_str()) {
            notes.push(format!(
                "vcJob {ns}/{name} is left out: its queue {queue} does not exist"
            ));
            continue;
        }
        let pods = by_job.get(&key).map(Vec::as_slice).unwrap_or_default();
        let history = History::from_pods(pods);
        let run_ms = |task: &str, annotations: Option<&BTreeMap<String, String>>| {
            run_time_ms(annotations, &queue, opts, history.of_task(task))
        };
        let mut spec = match job_spec(job, &queue, &priorities, &run_ms) {
            Ok(s) => s,
            Err(reason) => {
                notes.push(format!("vcJob {ns}/{name} is left out: {reason}"));
                continue;
            }
        };
        // Its pods on a node run on; those that finished stay finished.
        let mut per_task: BTreeMap<String, u32> = BTreeMap::new();
        for p in pods {
            let Some(task) = label_or_annotation(p, keys::TASK_SPEC) else {
                continue;
            };
            let Some(t) = spec.tasks.iter().find(|t| t.name == task) else {
                continue;
            };
            let used = per_task.entry(task.to_string()).or_default();
            if *used >= t.replicas {
                continue;
            }
            let pod_key = (ns.clone(), name_of(&p.metadata));
            let present = match pod_phase(p) {
                "Succeeded" => Some(PresentPod {
                    task: task.to_string(),
                    node: None,
                    remaining_ms: 0,
                }),
                "Running" | "Pending" if p.metadata.deletion_timestamp.is_none() => bound_node(p)
                    .filter(|n| node_names.contains(*n))
                    .map(|node| PresentPod {
                        task: task.to_string(),
                        node: Some(node.to_string()),
                        remaining_ms: remaining_ms(
                            p,
                            run_seconds(
                                p.metadata.annotations.as_ref(),
                                &queue,
                                opts,
                                history.of_task(task),
                            ),
                            now_ms,
                        ),
                    }),
                _ => None,
            };
            if let Some(present) = present {
                *used += 1;
                accounted.insert(pod_key);
                spec.present.push(present);
            }
        }
        let running = spec.present.iter().any(|p| p.node.is_some());
        if !running {
            // Finished pods alone do not make a job running; it waits as a new one would.
            spec.present.clear();
        }
        spec.arrival_ms = created_ms(job.metadata.creation_timestamp.as_ref(), now_ms);
        roles.push(if running {
            JobRole::Running
        } else {
            JobRole::Pending
        });
        jobs.push(spec);
    }

    let mut other_pods = Vec::new();
    for p in &state.pods {
        let key = (namespace_of(&p.metadata), name_of(&p.metadata));
        if accounted.contains(&key)
            || !matches!(pod_phase(p), "Running" | "Pending")
            || p.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let Some(node) = bound_node(p).filter(|n| node_names.contains(*n)) else {
            continue;
        };
        let (cpu, memory, scalars) = requests(p);
        let secs = p.metadata.annotations.as_ref().and_then(annotation_seconds);
        other_pods.push(OtherPodSpec {
            namespace: key.0,
            name: key.1,
            node: node.to_string(),
            cpu,
            memory,
            scalars,
            remaining_ms: remaining_ms(p, secs, now_ms),
        });
    }

    for job in tried {
        let (ns, name) = (namespace_of(&job.metadata), name_of(&job.metadata));
        let bad = |reason: String| WhatIfError::Job {
            namespace: ns.clone(),
            name: name.clone(),
            reason,
        };
        if name.is_empty() {
            return Err(bad("it has no metadata.name".into()));
        }
        let queue = job.spec.queue().to_string();
        if !queue_names.contains(queue.as_str()) {
            return Err(bad(format!(
                "its queue {queue} does not exist in the cluster"
            )));
        }
        let empty = Vec::new();
        let pods = by_job.get(&(ns.clone(), name.clone())).unwrap_or(&empty);
        let history = History::from_pods(pods);
        let run_ms = |task: &str, annotations: Option<&BTreeMap<String, String>>| {
            run_time_ms(annotations, &queue, opts, history.of_task(task))
        };
        let spec = job_spec(job, &queue, &priorities, &run_ms).map_err(bad)?;
        if let Some(pc) = job.spec.priority_class_name.as_deref()
            && !pc.is_empty()
            && !priorities.contains_key(pc)
        {
            return Err(bad(format!("its PriorityClass {pc} does not exist")));
        }
        roles.push(JobRole::Tried);
        jobs.push(spec);
    }

    let scenario = Scenario {
        period_ms: 1000,
        until_ms: opts.horizon_ms.max(1),
        bind_ms: 0,
        conf: opts.conf.clone(),
        nodes,
        hyper_nodes: Vec::new(),
        queues,
        jobs,
        other_pods,
    };
    scenario.validate("the cluster")?;
    Ok(Translated {
        scenario,
        roles,
        notes,
    })
}

fn namespace_of(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    m.namespace.clone().unwrap_or_else(|| "default".into())
}

fn name_of(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    m.name.clone().unwrap_or_default()
}

fn label_or_annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .or_else(|| p.metadata.annotations.as_ref().and_then(|a| a.get(key)))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

fn pod_phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn bound_node(p: &Pod) -> Option<&str> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Ready, or without conditions at all (a node object written by hand).
fn is_ready(n: &Node) -> bool {
    let Some(conds) = n.status.as_ref().and_then(|s| s.conditions.as_ref()) else {
        return true;
    };
    conds
        .iter()
        .find(|c| c.type_ == "Ready")
        .is_none_or(|c| c.status == "True")
}

fn node_spec(n: &Node) -> NodeSpec {
    let status = n.status.as_ref();
    let alloc = status
        .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
        .cloned()
        .unwrap_or_default();
    let get = |k: &str| {
        alloc
            .get(k)
            .map(|q| q.0.clone())
            .filter(|v| quantity_ok(v))
            .unwrap_or_else(|| "0".into())
    };
    let scalars = alloc
        .iter()
        .filter(|(k, v)| !matches!(k.as_str(), "cpu" | "memory" | "pods") && quantity_ok(&v.0))
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    let mut taints: Vec<Taint> = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let cordoned = n
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    if cordoned
        && !taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable")
    {
        taints.push(Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        });
    }
    NodeSpec {
        name: name_of(&n.metadata),
        count: 1,
        cpu: get("cpu"),
        memory: get("memory"),
        pods: alloc
            .get("pods")
            .and_then(|q| tephra_api::quantity::parse(&q.0))
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| v as u32),
        scalars,
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints,
    }
}

fn quantity_ok(v: &str) -> bool {
    tephra_api::quantity::parse(v).is_some_and(|x| x.is_finite() && x >= 0.0)
}

fn queue_spec(q: &tephra_api::Queue) -> QueueSpec {
    let list = |l: Option<&tephra_api::ResourceList>| -> BTreeMap<String, String> {
        l.into_iter()
            .flatten()
            .filter(|(_, v)| quantity_ok(&v.0))
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect()
    };
    QueueSpec {
        name: name_of(&q.metadata),
        weight: q.spec.weight.unwrap_or(1).max(1) as u32,
        capability: list(q.spec.capability.as_ref()),
        guarantee: list(q.spec.guarantee.as_ref().and_then(|g| g.resource.as_ref())),
        deserved: list(q.spec.deserved.as_ref()),
        parent: q.spec.parent.clone().filter(|p| !p.is_empty()),
        state: q
            .status
            .as_ref()
            .and_then(|s| s.state.as_ref())
            .map(|s| s.as_str().to_string()),
        priority: q.spec.priority,
        reclaimable: q.spec.reclaimable,
    }
}

/// A pod's requests as the scheduler counts them (containers, init containers, overhead).
fn requests(p: &Pod) -> (String, String, BTreeMap<String, String>) {
    let r = pod_request(p);
    let scalars = r
        .scalars
        .iter()
        .filter(|(k, v)| k.as_str() != "pods" && **v > 0.0)
        .map(|(k, v)| (k.clone(), format!("{}m", v.round() as i64)))
        .collect();
    (
        format!("{}m", r.milli_cpu.round() as i64),
        format!("{}", r.memory.round() as i64),
        scalars,
    )
}

/// `simulation.tephra.io/run-seconds`, as the embedded kubelet reads it.
fn annotation_seconds(a: &BTreeMap<String, String>) -> Option<f64> {
    a.get(keys::SIM_RUN_SECONDS)
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
}

/// A pod's run time: annotation, queue default, history; `None` when it runs on.
fn run_seconds(
    annotations: Option<&BTreeMap<String, String>>,
    queue: &str,
    opts: &Options,
    history: Option<f64>,
) -> Option<f64> {
    annotations
        .and_then(annotation_seconds)
        .or_else(|| opts.run_seconds.of(queue))
        .or(history)
}

/// A new pod's duration in the scenario: at least 1 ms (0 there means it runs on).
fn run_time_ms(
    annotations: Option<&BTreeMap<String, String>>,
    queue: &str,
    opts: &Options,
    history: Option<f64>,
) -> i64 {
    run_seconds(annotations, queue, opts, history)
        .map(|s| ((s * 1000.0).round() as i64).max(1))
        .unwrap_or(0)
}

/// What is left of a running pod's run time at `now_ms` (at least 1 ms: it ends at once); 0
/// when it runs on.
fn remaining_ms(p: &Pod, run_seconds: Option<f64>, now_ms: i64) -> i64 {
    let Some(secs) = run_seconds else {
        return 0;
    };
    let started = p
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(p.metadata.creation_timestamp.as_ref())
        .map(|t| t.0.as_millisecond())
        .unwrap_or(now_ms);
    let total = (secs * 1000.0).round() as i64;
    (total - (now_ms - started).max(0)).max(1)
}

/// When a job was created, ms relative to now (never after it).
fn created_ms(t: Option<&Time>, now_ms: i64) -> i64 {
    t.map(|t| (t.0.as_millisecond() - now_ms).min(0))
        .unwrap_or(0)
}

/// The observed run times of a job's pods that have Succeeded, per task.
struct History {
    per_task: BTreeMap<String, f64>,
    all: Option<f64>,
}

impl History {
    fn from_pods(pods: &[&Pod]) -> Self {
        let mut runs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for p in pods.iter().filter(|p| pod_phase(p) == "Succeeded") {
            let Some(status) = p.status.as_ref() else {
                continue;
            };
            let Some(start) = status.start_time.as_ref() else {
                continue;
            };
            let end = status
                .container_statuses
                .iter()
                .flatten()
                .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
                .map(|t| t.0)
                .max();
            let Some(end) = end else {
                continue;
            };
            let secs = (end.as_millisecond() - start.0.as_millisecond()).max(0) as f64 / 1000.0;
            let task = label_or_annotation(p, keys::TASK_SPEC).unwrap_or_default();
            runs.entry(task.to_string()).or_default().push(secs);
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let every: Vec<f64> = runs.values().flatten().copied().collect();
        Self {
            per_task: runs.iter().map(|(k, v)| (k.clone(), mean(v))).collect(),
            all: (!every.is_empty()).then(|| mean(&every)),
        }
    }

    fn of_task(&self, task: &str) -> Option<f64> {
        self.per_task.get(task).copied().or(self.all)
    }
}

/// A new pod's run time, ms, from its task's name and its template's annotations.
type RunMs<'a> = dyn Fn(&str, Option<&BTreeMap<String, String>>) -> i64 + 'a;

/// A vcJob as a scenario job, read through Volcano's defaults: a task without a name is
/// `default{i}`, a task's `minAvailable` is its replicas (or its partitions' minimum), the
/// job's `minAvailable` is the sum of its tasks'. `run_ms` gives a new pod's run time from its
/// task's name and template annotations.
fn job_spec(
    job: &Job,
    queue: &str,
    priorities: &BTreeMap<&str, i32>,
    run_ms: &RunMs<'_>,
) -> Result<JobSpec, String> {
    let job_annotations = job.metadata.annotations.as_ref();
    let mut tasks = Vec::new();
    let mut sum_min: u32 = 0;
    for (i, t) in job.spec.tasks().iter().enumerate() {
        let name = t
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{}{i}", keys::DEFAULT_TASK_SPEC));
        let replicas = t.replicas.unwrap_or(0).max(0) as u32;
        let template = t.template.clone().unwrap_or_default();
        let annotations = template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.clone());
        let spec = template.spec.clone().unwrap_or_default();
        let pod = Pod {
            metadata: template.metadata.clone().unwrap_or_default(),
            spec: Some(spec.clone()),
            status: None,
        };
        let (cpu, memory, scalars) = requests(&pod);
        let min = match t.min_available {
            Some(m) => m.max(0) as u32,
            None => match &t.partition_policy {
                Some(p) if p.min_partitions.unwrap_or(0) > 0 => {
                    (p.min_partitions.unwrap_or(0) * p.partition_size.unwrap_or(0)).max(0) as u32
                }
                _ => replicas,
            },
        };
        if min > replicas {
            return Err(format!(
                "task {name}: minAvailable {min} is more than its {replicas} replicas"
            ));
        }
        sum_min += min;
        let preemptable = annotations
            .as_ref()
            .and_then(|a| a.get(keys::PREEMPTABLE))
            .or_else(|| job_annotations.and_then(|a| a.get(keys::PREEMPTABLE)))
            .and_then(|v| v.parse::<bool>().ok());
        tasks.push(TaskSpec {
            duration_ms: run_ms(&name, annotations.as_ref()),
            name,
            replicas,
            cpu,
            memory,
            scalars,
            min_available: Some(min),
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            affinity: spec.affinity.clone(),
            preemptable,
            partition_policy: t.partition_policy.clone(),
        });
    }
    if tasks.is_empty() {
        return Err("it has no tasks".into());
    }
    let total: u32 = tasks.iter().map(|t| t.replicas).sum();
    if total == 0 {
        return Err("it has no replicas".into());
    }
    let min = match job.spec.min_available {
        Some(m) if m > 0 => m as u32,
        _ => sum_min,
    };
    if min > total {
        return Err(format!(
            "minAvailable {min} is more than its {total} replicas"
        ));
    }
    let priority = job
        .spec
        .priority_class_name
        .as_deref()
        .and_then(|pc| priorities.get(pc).copied());
    Ok(JobSpec {
        name: name_of(&job.metadata),
        namespace: Some(namespace_of(&job.metadata)),
        queue: Some(queue.to_string()),
        arrival_ms: 0,
        priority,
        min_available: Some(min),
        network_topology: job.spec.network_topology.clone(),
        tasks,
        present: Vec::new(),
    })
}
