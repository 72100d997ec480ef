//! What a job worker is asked to do: Volcano's `apis.Request`, built from watch events and
//! Commands, and the target of a restart action.

use tephra_api::batch::{Action, Event};

/// One unit of work for a job worker. Equal requests queued twice run once (the work queue
/// deduplicates), as in Volcano.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// The job's namespace.
    pub namespace: String,
    /// The job's name.
    pub job: String,
    /// The job UID the event belongs to (pods carry their owner's), when known.
    pub job_uid: Option<String>,
    /// The task of the pod the event is about.
    pub task: Option<String>,
    /// The pod the event is about.
    pub pod: Option<String>,
    /// That pod's UID.
    pub pod_uid: Option<String>,
    /// That pod's partition (label `volcano.sh/partition-id`).
    pub partition: Option<String>,
    /// What happened.
    pub event: Event,
    /// The first container's exit code, for `PodFailed`.
    pub exit_code: Option<i32>,
    /// The action asked for explicitly (a Command, a fired delayed action).
    pub action: Option<Action>,
    /// The job version the pod was made for (annotation `volcano.sh/job-version`).
    pub job_version: Option<i32>,
}

impl Request {
    /// A request about the job itself (no pod), for `event`.
    pub fn job(namespace: &str, job: &str, event: Event) -> Self {
        Self {
            namespace: namespace.to_string(),
            job: job.to_string(),
            job_uid: None,
            task: None,
            pod: None,
            pod_uid: None,
            partition: None,
            event,
            exit_code: None,
            action: None,
            job_version: None,
        }
    }

    /// `namespace/name` of the job.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.job)
    }
}

/// The pods a targeted restart kills (Volcano's `state.Target`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// Every pod of a task (`RestartTask`).
    Task {
        /// The task.
        task: String,
    },
    /// One pod (`RestartPod`).
    Pod {
        /// The pod's task.
        task: String,
        /// The pod.
        pod: String,
    },
    /// The pods of one partition of a task (`RestartPartition`).
    Partition {
        /// The task.
        task: String,
        /// A pod of the partition (the one the event was about).
        pod: String,
        /// The partition id (label `volcano.sh/partition-id`).
        partition: String,
    },
}

impl Target {
    /// The target of `action` for `req` (Volcano's `GetStateAction`): `None` for whole-job
    /// actions, or when the request lacks the task/pod/partition the action needs.
    pub fn of(action: &Action, req: &Request) -> Option<Target> {
        let task = req.task.clone()?;
        match action {
            Action::RestartTask => Some(Target::Task { task }),
            Action::RestartPod => Some(Target::Pod {
                task,
                pod: req.pod.clone()?,
            }),
            Action::RestartPartition => Some(Target::Partition {
                task,
                pod: req.pod.clone()?,
                partition: req.partition.clone()?,
            }),
            _ => None,
        }
    }
}
