//! Builders for tests: small, readable fixtures of the API types, such as
//! `Job::test("train").in_queue("gpu").task("worker", 4)` or `Queue::test("gpu").weight(2)`.
//!
//! Compiled for this crate's own tests and, through the `testing` feature, for other crates'
//! tests and benches; the service binary is built without them.

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::batch::{Job, JobPhase, JobSpec, JobState, JobStatus, LifecyclePolicy, TaskSpec};
use super::bus::{Action, Command, CommandFields, Event};
use super::common::ResourceList;
use super::scheduling::{
    PodGroup, PodGroupPhase, PodGroupSpec, PodGroupStatus, Queue, QueueSpec, QueueState,
    QueueStatus,
};

/// A resource list from `(name, quantity)` pairs: `resources(&[("cpu", "2"), ("memory", "4Gi")])`.
pub fn resources(pairs: &[(&str, &str)]) -> ResourceList {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), Quantity((*v).to_string())))
        .collect()
}

/// A pod template with one container `main` (image `busybox`) requesting `requests`.
pub fn pod_template(requests: &[(&str, &str)]) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                resources: (!requests.is_empty()).then(|| ResourceRequirements {
                    requests: Some(resources(requests)),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            restart_policy: Some("Never".into()),
            ..Default::default()
        }),
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        ..Default::default()
    }
}

impl Job {
    /// A job named `name` in namespace `default` with no tasks yet.
    pub fn test(name: &str) -> Job {
        Job {
            metadata: meta(name, Some("default")),
            spec: JobSpec::default(),
            status: None,
        }
    }

    /// Sets the namespace.
    pub fn in_namespace(mut self, ns: &str) -> Job {
        self.metadata.namespace = Some(ns.into());
        self
    }

    /// Sets `spec.queue`.
    pub fn in_queue(mut self, queue: &str) -> Job {
        self.spec.queue = Some(queue.into());
        self
    }

    /// Adds a task of `replicas` pods (one busybox container requesting 1 cpu).
    pub fn task(self, name: &str, replicas: i32) -> Job {
        self.task_with(name, replicas, &[("cpu", "1")])
    }

    /// Adds a task of `replicas` pods whose container requests `requests`.
    pub fn task_with(mut self, name: &str, replicas: i32, requests: &[(&str, &str)]) -> Job {
        self.spec.tasks.get_or_insert_with(Vec::new).push(TaskSpec {
            name: Some(name.into()),
            replicas: Some(replicas),
            template: Some(pod_template(requests)),
            ..Default::default()
        });
        self
    }

    /// Sets `spec.minAvailable`.
    pub fn min_available(mut self, n: i32) -> Job {
        self.spec.min_available = Some(n);
        self
    }

    /// Sets `spec.maxRetry`.
    pub fn max_retry(mut self, n: i32) -> Job {
        self.spec.max_retry = Some(n);
        self
    }

    /// Adds a job-level policy: on `event` do `action`.
    pub fn policy(mut self, event: Event, action: Action) -> Job {
        self.spec
            .policies
            .get_or_insert_with(Vec::new)
            .push(LifecyclePolicy {
                event: Some(event),
                action: Some(action),
                ..Default::default()
            });
        self
    }

    /// Adds a plugin with its arguments.
    pub fn plugin(mut self, name: &str, args: &[&str]) -> Job {
        self.spec
            .plugins
            .get_or_insert_with(Default::default)
            .insert(name.into(), args.iter().map(|a| (*a).to_string()).collect());
        self
    }

    /// Sets the status phase.
    pub fn with_phase(mut self, phase: JobPhase) -> Job {
        let status = self.status.get_or_insert_with(JobStatus::default);
        status.state.get_or_insert_with(JobState::default).phase = Some(phase);
        self
    }

    /// Sets the uid (many controllers key on it).
    pub fn with_uid(mut self, uid: &str) -> Job {
        self.metadata.uid = Some(uid.into());
        self
    }
}

impl PodGroup {
    /// A PodGroup named `name` in namespace `default`.
    pub fn test(name: &str) -> PodGroup {
        PodGroup {
            metadata: meta(name, Some("default")),
            spec: PodGroupSpec::default(),
            status: None,
        }
    }

    /// Sets the namespace.
    pub fn in_namespace(mut self, ns: &str) -> PodGroup {
        self.metadata.namespace = Some(ns.into());
        self
    }

    /// Sets `spec.queue`.
    pub fn in_queue(mut self, queue: &str) -> PodGroup {
        self.spec.queue = Some(queue.into());
        self
    }

    /// Sets `spec.minMember`.
    pub fn min_member(mut self, n: i32) -> PodGroup {
        self.spec.min_member = Some(n);
        self
    }

    /// Sets `spec.minResources`.
    pub fn min_resources(mut self, pairs: &[(&str, &str)]) -> PodGroup {
        self.spec.min_resources = Some(resources(pairs));
        self
    }

    /// Sets `status.phase`.
    pub fn with_phase(mut self, phase: PodGroupPhase) -> PodGroup {
        self.status
            .get_or_insert_with(PodGroupStatus::default)
            .phase = Some(phase);
        self
    }
}

impl Queue {
    /// A queue named `name` (cluster scoped) with weight 1 and no status.
    pub fn test(name: &str) -> Queue {
        Queue {
            metadata: meta(name, None),
            spec: QueueSpec {
                weight: Some(1),
                ..Default::default()
            },
            status: None,
        }
    }

    /// Sets `spec.weight`.
    pub fn weight(mut self, w: i32) -> Queue {
        self.spec.weight = Some(w);
        self
    }

    /// Sets `spec.capability`.
    pub fn capability(mut self, pairs: &[(&str, &str)]) -> Queue {
        self.spec.capability = Some(resources(pairs));
        self
    }

    /// Sets `spec.parent`.
    pub fn parent(mut self, parent: &str) -> Queue {
        self.spec.parent = Some(parent.into());
        self
    }

    /// Sets `status.state`.
    pub fn with_state(mut self, state: QueueState) -> Queue {
        self.status.get_or_insert_with(QueueStatus::default).state = Some(state);
        self
    }

    /// Sets `status.state: Open`.
    pub fn open(self) -> Queue {
        self.with_state(QueueState::Open)
    }

    /// Sets `status.state: Closed`.
    pub fn closed(self) -> Queue {
        self.with_state(QueueState::Closed)
    }
}

impl Command {
    /// A Command named `name` in `namespace` asking for `action` on the vcJob `job`.
    pub fn for_job(
        name: &str,
        namespace: &str,
        job: &str,
        job_uid: &str,
        action: Action,
    ) -> Command {
        Command {
            metadata: meta(name, Some(namespace)),
            spec: CommandFields {
                action: Some(action),
                target: Some(OwnerReference {
                    api_version: super::batch::API_VERSION.into(),
                    kind: "Job".into(),
                    name: job.into(),
                    uid: job_uid.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }),
                ..Default::default()
            },
        }
    }

    /// A Command named `name` asking for `action` (`OpenQueue`, `CloseQueue`) on queue `queue`.
    pub fn for_queue(
        name: &str,
        namespace: &str,
        queue: &str,
        queue_uid: &str,
        action: Action,
    ) -> Command {
        Command {
            metadata: meta(name, Some(namespace)),
            spec: CommandFields {
                action: Some(action),
                target: Some(OwnerReference {
                    api_version: super::scheduling::API_VERSION.into(),
                    kind: "Queue".into(),
                    name: queue.into(),
                    uid: queue_uid.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }),
                ..Default::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Job, PodGroup, Queue};

    #[test]
    fn the_builders_make_what_they_say() {
        let job = Job::test("train")
            .in_namespace("ml")
            .in_queue("gpu")
            .task("worker", 4)
            .min_available(4);
        assert_eq!(job.total_replicas(), 4);
        let q = Queue::test("gpu").weight(2).open();
        assert!(q.is_open());
        let pg = PodGroup::test("pg").min_member(3).in_queue("gpu");
        assert_eq!(pg.spec.queue(), "gpu");
    }
}
