//! The pod diffs of the Job controller, decided here from the job, its pods and its plugins;
//! the controller only carries them out:
//! - a sync (Volcano's `syncJob`): which pods an admitted job is missing, which it has too
//!   many of, and how its pods count once both are done ([`plan_sync`]);
//! - a kill (Volcano's `killJob`): which pods go and how the rest count ([`plan_kill`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use tephra_api::Job;
use tephra_api::batch::pod_name;
use tephra_api::keys;

use super::build;
use super::plugins::{JobPlugin, PluginError};
use super::request::Target;
use super::state::Retain;
use super::status::{self, Counts};

/// The task a pod belongs to, by the annotation the controller writes on it.
pub fn task_of(pod: &Pod) -> &str {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::TASK_SPEC))
        .map(String::as_str)
        .unwrap_or(keys::DEFAULT_TASK_SPEC)
}

/// A pod marked by a kill that did not finish: it goes at the next sync.
pub fn out_of_sync(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::CONTROLLER_OUT_OF_SYNC))
}

/// How the pods a sync creates are made.
pub struct PodMaking<'a> {
    /// The job's queue forwards to other clusters (`volcano.sh/forwarding` on the pods).
    pub forwarding: bool,
    /// The job's plugins, each editing every new pod.
    pub plugins: &'a [Box<dyn JobPlugin>],
    /// Schedulers whose pods wait behind the plan gate until a session placed them.
    pub plan_gate_schedulers: &'a [String],
    /// Pods beyond the gang's minimum are marked elastic ([`build::gang_core`]): the native
    /// engine keeps them out of the gang kube-scheduler places whole.
    pub mark_elastic: bool,
}

/// What one sync does to a job's pods.
#[derive(Debug, Default)]
pub struct SyncPlan {
    /// Pods to create, each with its task's name.
    pub create: Vec<(String, Pod)>,
    /// Pods to delete: beyond their task's replicas, or marked by an unfinished kill.
    pub delete: Vec<Arc<Pod>>,
    /// The pods that stay, counted (terminating ones as terminating); the pods created and
    /// deleted are added as their writes succeed or fail.
    pub counts: Counts,
}

/// Plans a sync of `job` over its `pods`. Until the PodGroup is `admitted` nothing is created
/// or deleted (Volcano waits for the scheduler to admit the gang). A missing pod of a task
/// whose `dependsOn` tasks are not ready yet is not created (the task waits, silently, as in
/// Volcano); `pod_named` looks a pod of the job's namespace up by name for that check, and only
/// for tasks missing a pod.
pub fn plan_sync(
    job: &Job,
    pods: &[Arc<Pod>],
    admitted: bool,
    pod_named: &dyn Fn(&str) -> Option<Arc<Pod>>,
    making: &PodMaking<'_>,
) -> Result<SyncPlan, PluginError> {
    let mut plan = SyncPlan::default();
    if admitted {
        let name = job.name_any();
        let by_name: HashMap<String, &Pod> = pods.iter().map(|p| (p.name_any(), &**p)).collect();
        let core = if making.mark_elastic {
            build::gang_core(job)
        } else {
            Vec::new()
        };
        for (t, task) in job.tasks().iter().enumerate() {
            let tname = task.name();
            let mut expected = HashSet::new();
            let mut ready = None;
            for i in 0..task.replicas() {
                let pn = pod_name(&name, tname, i);
                if !by_name.contains_key(&pn)
                    && *ready.get_or_insert_with(|| build::dependencies_ready(job, task, pod_named))
                {
                    let mut pod = build::build_pod(job, task, i, making.forwarding);
                    for p in making.plugins {
                        p.on_pod_create(job, &mut pod)?;
                    }
                    build::gate_until_placed(&mut pod, making.plan_gate_schedulers);
                    if core.get(t).is_some_and(|c| i >= *c) {
                        build::mark_elastic(&mut pod);
                    }
                    plan.create.push((tname.to_string(), pod));
                }
                expected.insert(pn);
            }
            plan.delete.extend(
                pods.iter()
                    .filter(|p| task_of(p) == tname && p.metadata.deletion_timestamp.is_none())
                    .filter(|p| !expected.contains(&p.name_any()) || out_of_sync(p))
                    .cloned(),
            );
        }
    }
    let deleting: HashSet<String> = plan.delete.iter().map(|p| p.name_any()).collect();
    for p in pods {
        if p.metadata.deletion_timestamp.is_some() {
            plan.counts.add_terminating();
        } else if !deleting.contains(&p.name_any()) {
            plan.counts.add(task_of(p), p);
        }
    }
    Ok(plan)
}

/// What a kill takes.
#[derive(Clone, Debug)]
pub enum Scope {
    /// Every pod of the job, but those the retain set keeps.
    Job(Retain),
    /// The pods of a target (`None`: the request named none, nothing is killed).
    Target(Option<Target>),
}

/// What one kill does to a job's pods.
#[derive(Debug, Default)]
pub struct KillPlan {
    /// The pods to mark and delete.
    pub victims: Vec<Arc<Pod>>,
    /// The pods that stay, counted (terminating ones as terminating); the victims are added
    /// as their deletions succeed or fail.
    pub counts: Counts,
}

/// Plans a kill of `scope` over the job's `pods`. A whole-job kill at the job's last retry
/// keeps finished pods, so their logs can still be read (as Volcano); pods already being
/// deleted are counted as terminating, never taken again.
pub fn plan_kill(job: &Job, pods: &[Arc<Pod>], scope: &Scope) -> KillPlan {
    let retry_count = job.status.as_ref().and_then(|s| s.retry_count).unwrap_or(0);
    let retain = match scope {
        Scope::Job(_) if retry_count >= job.spec.max_retry() - 1 => Retain::Soft,
        Scope::Job(r) => *r,
        Scope::Target(_) => Retain::None,
    };
    let selected = |p: &Pod| match scope {
        Scope::Job(_) => true,
        Scope::Target(None) => false,
        Scope::Target(Some(Target::Task { task })) => task_of(p) == task,
        Scope::Target(Some(Target::Pod { pod, .. })) => p.name_any() == *pod,
        Scope::Target(Some(Target::Partition {
            task, partition, ..
        })) => {
            task_of(p) == task
                && p.labels().get(keys::PARTITION_ID).map(String::as_str) == Some(partition)
        }
    };
    let finished = |p: &Pod| matches!(status::pod_phase(p), "Succeeded" | "Failed");
    let mut plan = KillPlan::default();
    for p in pods {
        if p.metadata.deletion_timestamp.is_some() {
            plan.counts.add_terminating();
        } else if !selected(p) || (retain == Retain::Soft && finished(p)) {
            // Counts reflect the pods that exist, kept ones included (Volcano counts only
            // what it killed, so succeeded and failed drop to 0).
            plan.counts.add(task_of(p), p);
        } else {
            plan.victims.push(Arc::clone(p));
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;
    use crate::job::plugins::plugins_for;

    /// A job of two tasks, `ps` (1 replica, ready with one pod) and `worker` (3), the second
    /// depending on the first when `depends` is set.
    fn job(depends: bool, plugins: serde_json::Value) -> Job {
        let containers = json!([{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "1"}}}]);
        let mut worker = json!({"name": "worker", "replicas": 3, "template": {"spec": {
            "schedulerName": "volcano", "containers": containers}}});
        if depends {
            worker["dependsOn"] = json!({"name": ["ps"]});
        }
        serde_json::from_value(json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "ml", "uid": "u-1"},
            "spec": {"minAvailable": 4, "schedulerName": "volcano", "plugins": plugins,
                "tasks": [
                    {"name": "ps", "replicas": 1, "minAvailable": 1, "template": {"spec": {
                        "schedulerName": "volcano", "containers": containers}}},
                    worker]}
        }))
        .unwrap()
    }

    /// A pod of `task` named `name` in `phase`.
    fn pod(task: &str, name: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml",
                "annotations": {keys::TASK_SPEC: task}},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    fn names<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<String> {
        let mut v: Vec<String> = pods.into_iter().map(ResourceExt::name_any).collect();
        v.sort();
        v
    }

    fn plan(job: &Job, pods: &[Pod], admitted: bool, gate: &[String]) -> SyncPlan {
        let plugins = plugins_for(job).unwrap();
        let making = PodMaking {
            forwarding: false,
            plugins: &plugins,
            plan_gate_schedulers: gate,
            mark_elastic: false,
        };
        let pods: Vec<Arc<Pod>> = pods.iter().cloned().map(Arc::new).collect();
        let lookup = |n: &str| pods.iter().find(|p| p.name_any() == n).cloned();
        plan_sync(job, &pods, admitted, &lookup, &making).unwrap()
    }

    #[test]
    fn pods_beyond_the_gangs_minimum_are_marked_elastic_when_asked() {
        // minAvailable 4 covers the tasks' minimums (ps 1, worker 3 by default): nothing is
        // elastic; at 2, ps's one pod and worker-0 form the minimum.
        let mut job = job(false, json!({}));
        let plugins = plugins_for(&job).unwrap();
        let elastic = |job: &Job| {
            let making = PodMaking {
                forwarding: false,
                plugins: &plugins,
                plan_gate_schedulers: &[],
                mark_elastic: true,
            };
            let plan = plan_sync(job, &[], true, &|_| None, &making).unwrap();
            let mut marked: Vec<String> = plan
                .create
                .iter()
                .filter(|(_, p)| {
                    p.annotations().get(keys::ELASTIC).map(String::as_str) == Some("true")
                })
                .map(|(_, p)| p.name_any())
                .collect();
            marked.sort();
            marked
        };
        assert!(elastic(&job).is_empty());
        job.spec.min_available = Some(2);
        job.spec.tasks.as_mut().unwrap()[1].min_available = Some(1);
        assert_eq!(elastic(&job), vec!["train-worker-1", "train-worker-2"]);
    }

    fn killed(job: &Job, pods: &[Pod], scope: &Scope) -> (Vec<String>, Counts) {
        let pods: Vec<Arc<Pod>> = pods.iter().cloned().map(Arc::new).collect();
        let plan = plan_kill(job, &pods, scope);
        (names(plan.victims.iter().map(|p| &**p)), plan.counts)
    }

    #[test]
    fn a_whole_job_kill_takes_every_live_pod_and_soft_keeps_finished_ones() {
        let mut job = job(false, json!(null));
        job.spec.max_retry = Some(3);
        let mut going = pod("worker", "train-worker-2", "Running");
        going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        let pods = [
            pod("ps", "train-ps-0", "Succeeded"),
            pod("worker", "train-worker-0", "Running"),
            pod("worker", "train-worker-1", "Failed"),
            going,
        ];
        let (victims, counts) = killed(&job, &pods, &Scope::Job(Retain::None));
        assert_eq!(victims, ["train-ps-0", "train-worker-0", "train-worker-1"]);
        assert_eq!(counts.terminating, 1);
        let (victims, counts) = killed(&job, &pods, &Scope::Job(Retain::Soft));
        assert_eq!(victims, ["train-worker-0"]);
        assert_eq!(
            (counts.succeeded, counts.failed, counts.terminating),
            (1, 1, 1)
        );
    }

    #[test]
    fn the_last_retry_keeps_finished_pods_whatever_the_kill_asked() {
        let mut job = job(false, json!(null));
        job.spec.max_retry = Some(3);
        job.status = Some(tephra_api::batch::JobStatus {
            retry_count: Some(2),
            ..Default::default()
        });
        let pods = [
            pod("worker", "train-worker-0", "Succeeded"),
            pod("worker", "train-worker-1", "Running"),
        ];
        let (victims, counts) = killed(&job, &pods, &Scope::Job(Retain::None));
        assert_eq!(victims, ["train-worker-1"]);
        assert_eq!(counts.succeeded, 1);
    }

    #[test]
    fn a_targeted_kill_takes_its_task_pod_or_partition_and_counts_the_rest() {
        let job = job(false, json!(null));
        let mut p0 = pod("worker", "train-worker-0", "Running");
        p0.labels_mut()
            .insert(keys::PARTITION_ID.to_string(), "a".to_string());
        let mut p1 = pod("worker", "train-worker-1", "Running");
        p1.labels_mut()
            .insert(keys::PARTITION_ID.to_string(), "b".to_string());
        let pods = [pod("ps", "train-ps-0", "Succeeded"), p0, p1];
        let task = Scope::Target(Some(Target::Task {
            task: "worker".into(),
        }));
        assert_eq!(
            killed(&job, &pods, &task).0,
            ["train-worker-0", "train-worker-1"]
        );
        // A target kill takes finished pods too (nothing is retained).
        let one = Scope::Target(Some(Target::Pod {
            task: "ps".into(),
            pod: "train-ps-0".into(),
        }));
        assert_eq!(killed(&job, &pods, &one).0, ["train-ps-0"]);
        let part = Scope::Target(Some(Target::Partition {
            task: "worker".into(),
            pod: "train-worker-1".into(),
            partition: "b".into(),
        }));
        let (victims, counts) = killed(&job, &pods, &part);
        assert_eq!(victims, ["train-worker-1"]);
        assert_eq!((counts.running, counts.succeeded), (1, 1));
        assert!(killed(&job, &pods, &Scope::Target(None)).0.is_empty());
    }

    #[test]
    fn nothing_is_created_or_deleted_until_the_podgroup_is_admitted() {
        let job = job(false, json!(null));
        let pods = [pod("worker", "train-worker-7", "Running")];
        let p = plan(&job, &pods, false, &[]);
        assert!(p.create.is_empty() && p.delete.is_empty());
        // The surplus pod is still counted: nothing touched it.
        assert_eq!(p.counts.running, 1);
    }

    #[test]
    fn an_admitted_job_gets_every_missing_replica_named_by_task_and_index() {
        let job = job(false, json!(null));
        let pods = [pod("worker", "train-worker-1", "Running")];
        let p = plan(&job, &pods, true, &[]);
        let made: Vec<(String, String)> = p
            .create
            .iter()
            .map(|(t, pod)| (t.clone(), pod.name_any()))
            .collect();
        assert_eq!(
            made,
            [
                ("ps".to_string(), "train-ps-0".to_string()),
                ("worker".to_string(), "train-worker-0".to_string()),
                ("worker".to_string(), "train-worker-2".to_string()),
            ]
        );
        assert!(p.delete.is_empty());
        assert_eq!(p.counts.running, 1);
        assert_eq!(p.counts.tasks["worker"]["Running"], 1);
    }

    #[test]
    fn replicas_beyond_the_spec_and_pods_marked_by_an_unfinished_kill_are_deleted_and_not_counted()
    {
        let job = job(false, json!(null));
        let mut marked = pod("worker", "train-worker-0", "Running");
        marked
            .annotations_mut()
            .insert(keys::CONTROLLER_OUT_OF_SYNC.to_string(), "true".to_string());
        let pods = [
            pod("ps", "train-ps-0", "Running"),
            marked,
            pod("worker", "train-worker-1", "Running"),
            pod("worker", "train-worker-2", "Pending"),
            pod("worker", "train-worker-3", "Running"),
        ];
        let p = plan(&job, &pods, true, &[]);
        assert_eq!(
            names(p.delete.iter().map(|p| &**p)),
            ["train-worker-0", "train-worker-3"]
        );
        // The marked pod still exists by name: it is made again at a later sync, once gone.
        assert!(p.create.is_empty());
        assert_eq!((p.counts.running, p.counts.pending), (2, 1));
        assert_eq!(p.counts.terminating, 0);
    }

    #[test]
    fn pods_already_terminating_count_as_terminating_and_are_not_deleted_again() {
        let job = job(false, json!(null));
        let mut going = pod("worker", "train-worker-5", "Running");
        going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        let p = plan(&job, &[going], true, &[]);
        assert!(p.delete.is_empty());
        assert_eq!((p.counts.terminating, p.counts.running), (1, 0));
        assert_eq!(p.create.len(), 4);
    }

    #[test]
    fn a_task_whose_dependencies_are_not_ready_waits_while_the_others_are_made() {
        let job = job(true, json!(null));
        let p = plan(&job, &[], true, &[]);
        assert_eq!(names(p.create.iter().map(|(_, p)| p)), ["train-ps-0"]);
        // Once the ps pod runs, the workers follow.
        let pods = [pod("ps", "train-ps-0", "Running")];
        let p = plan(&job, &pods, true, &[]);
        assert_eq!(
            names(p.create.iter().map(|(_, p)| p)),
            ["train-worker-0", "train-worker-1", "train-worker-2"]
        );
    }

    #[test]
    fn new_pods_carry_their_plugins_edits_and_the_plan_gate_of_a_gated_scheduler() {
        let job = job(false, json!({"env": [], "svc": []}));
        let p = plan(&job, &[], true, &["volcano".to_string()]);
        let (_, worker) = p
            .create
            .iter()
            .find(|(t, _)| t == "worker")
            .expect("a worker pod");
        let spec = worker.spec.as_ref().unwrap();
        // svc: the pod's hostname and subdomain; env: its task index.
        assert_eq!(spec.subdomain.as_deref(), Some("train"));
        let env = spec.containers[0].env.as_ref().unwrap();
        assert!(env.iter().any(|e| e.name == "VK_TASK_INDEX"), "{env:?}");
        assert!(
            spec.scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty()),
            "gated: {:?}",
            spec.scheduling_gates
        );
        let ungated = plan(&job, &[], true, &[]);
        assert!(
            ungated.create.iter().all(|(_, p)| p
                .spec
                .as_ref()
                .is_none_or(|s| s.scheduling_gates.as_ref().is_none_or(Vec::is_empty))),
            "a scheduler not named is not gated"
        );
    }
}
