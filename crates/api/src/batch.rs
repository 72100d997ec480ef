//! `batch.volcano.sh/v1alpha1` Job: Volcano's vcJob.
//!
//! Field names and shapes follow Volcano's `staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go`.
//! Every field is an `Option` (or a map/list inside one) so that what a user wrote is kept
//! exactly, including explicit zeros Go would drop; the accessor methods apply Volcano's
//! defaults when reading.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use super::common::{DNS1123_SUBDOMAIN, Duration, string_enum};
use super::scheduling::NetworkTopologySpec;

pub use super::bus::{Action, Event};
pub use super::cronjob::{ConcurrencyPolicy, CronJob, CronJobSpec, CronJobStatus, JobTemplateSpec};

/// The API group of [`Job`].
pub const GROUP: &str = "batch.volcano.sh";
/// The API version of [`Job`].
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of a [`Job`].
pub const API_VERSION: &str = "batch.volcano.sh/v1alpha1";

/// Volcano's default for `spec.maxRetry` (CRD default and job webhook).
pub const DEFAULT_MAX_RETRY: i32 = 3;

/// The desired state of a Volcano Job (`spec` of `batch.volcano.sh/v1alpha1` Job).
// clippy reads the repeated `type_ = ...` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "batch.volcano.sh",
    version = "v1alpha1",
    kind = "Job",
    plural = "jobs",
    singular = "job",
    namespaced,
    shortname = "vcjob",
    shortname = "vj",
    status = "JobStatus",
    derive = "PartialEq",
    derive = "Default",
    annotation("helm.sh/resource-policy", "keep"),
    doc = "A Volcano batch Job (vcJob): tasks of pods scheduled as one gang.",
    printcolumn(name = "STATUS", type_ = "string", json_path = ".status.state.phase"),
    printcolumn(
        name = "minAvailable",
        type_ = "integer",
        json_path = ".status.minAvailable"
    ),
    printcolumn(name = "RUNNINGS", type_ = "integer", json_path = ".status.running"),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "QUEUE",
        type_ = "string",
        priority = 1,
        json_path = ".spec.queue"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    /// Scheduler for the job's pods whose template names none (webhook default: the first
    /// `--scheduler-name`, `volcano`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 63))]
    pub scheduler_name: Option<String>,

    /// Gang size: the job starts only when this many pods can run together
    /// (webhook default: the sum of the tasks' `minAvailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub min_available: Option<i32>,

    /// Persistent volumes mounted in every container of every pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<VolumeSpec>>,

    /// The tasks: groups of identical pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minItems" = 1))]
    pub tasks: Option<Vec<TaskSpec>>,

    /// Job-level lifecycle policies (checked after the task's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<LifecyclePolicy>>,

    /// Job plugins: name (`env`, `svc`, `ssh`, `mpi`, ...) → command-line style arguments.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "plugins_null_args"
    )]
    pub plugins: Option<BTreeMap<String, Vec<String>>>,

    /// The user's estimate of the running time (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_estimate: Option<Duration>,

    /// Queue the job is submitted to (CRD default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "default", "maxLength" = 253, "pattern" = DNS1123_SUBDOMAIN))]
    pub queue: Option<String>,

    /// How many times the whole job may be restarted before it fails (CRD default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 3, "minimum" = 0))]
    pub max_retry: Option<i32>,

    /// Delete the job this many seconds after it reaches Completed, Failed or Terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub ttl_seconds_after_finished: Option<i32>,

    /// Default `priorityClassName` of the pods; also the PodGroup's priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253, "pattern" = DNS1123_SUBDOMAIN))]
    pub priority_class_name: Option<String>,

    /// The job is Completed once this many pods have Succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1))]
    pub min_success: Option<i32>,

    /// Network-topology constraint, copied to the PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
}

/// Go reads a plugin written without arguments (`ssh:`, i.e. null) as no arguments; so does
/// tephra, instead of rejecting the whole job.
fn plugins_null_args<'de, D: Deserializer<'de>>(
    de: D,
) -> Result<Option<BTreeMap<String, Vec<String>>>, D::Error> {
    let raw: Option<BTreeMap<String, Option<Vec<String>>>> = Option::deserialize(de)?;
    Ok(raw.map(|m| {
        m.into_iter()
            .map(|(k, v)| (k, v.unwrap_or_default()))
            .collect()
    }))
}

/// A persistent volume claim mounted into every container of the job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    // An `Option` although the CRD requires it (as every field here): a job missing it still
    // parses, so the webhook can say what is wrong instead of failing to read the object.
    /// Where the volume is mounted in each container (required, no `:`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, extend("minLength" = 1, "pattern" = "^[^:]+$"))]
    pub mount_path: Option<String>,

    /// An existing PVC to mount, or the name the controller gave the PVC it created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253))]
    pub volume_claim_name: Option<String>,

    /// A PVC to create for the job (named `{job}-pvc-{random}` when no name is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim: Option<PersistentVolumeClaimSpec>,
}

/// One task of a job: `replicas` pods made from one template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    /// Task name, a DNS-1123 label (webhook default `default{index}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 63, "pattern" = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: Option<String>,

    /// Number of pods of this task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub replicas: Option<i32>,

    /// Task-level gang size (webhook default: `replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub min_available: Option<i32>,

    /// The pod template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,

    /// Task-level lifecycle policies (checked before the job's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<LifecyclePolicy>>,

    /// NUMA topology policy, passed to pods as `volcano.sh/numa-topology-policy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_policy: Option<NumaPolicy>,

    /// Restart budget of the task's pods (webhook default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub max_retry: Option<i32>,

    /// Tasks that must be ready before this task's pods are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<DependsOn>,

    /// Splits the task's pods into partitions scheduled as sub-gangs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_policy: Option<PartitionPolicySpec>,
}

/// Partitioning of a task: `totalPartitions` groups of `partitionSize` pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartitionPolicySpec {
    /// Number of partitions (required; replicas must equal total × size).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, extend("minimum" = 1))]
    pub total_partitions: Option<i32>,

    /// Pods per partition (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, extend("minimum" = 1))]
    pub partition_size: Option<i32>,

    /// Network-topology constraint of each partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,

    /// Minimum number of partitions that must be schedulable (CRD default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0, "minimum" = 0))]
    pub min_partitions: Option<i32>,
}

/// What to do (`action`) when something happens (`event`/`events`, or a container `exitCode`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecyclePolicy {
    /// The action to take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,

    /// The event that triggers it (older single-event form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,

    /// The events that trigger it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Event>>,

    /// A container exit code that triggers it (not 0; exclusive with events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,

    /// Delay before acting; the action is dropped if the condition clears meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

impl LifecyclePolicy {
    /// Every event of the policy: `event` followed by `events`.
    pub fn all_events(&self) -> impl Iterator<Item = &Event> {
        self.event.iter().chain(self.events.iter().flatten())
    }
}

/// Dependencies of a task on other tasks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependsOn {
    /// Names of the tasks this task waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Vec<String>>,

    /// Whether `any` or `all` of them must be ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<Iteration>,
}

string_enum! {
    /// How a task's dependencies combine.
    pub enum Iteration (schema_enum = false) {
        /// One ready dependency is enough.
        Any = "any",
        /// Every dependency must be ready.
        All = "all",
    }
}

string_enum! {
    /// NUMA topology policy of a task.
    pub enum NumaPolicy (schema_enum = true) {
        /// No NUMA alignment.
        None = "none",
        /// Prefer aligned resources.
        BestEffort = "best-effort",
        /// Only aligned resources, across NUMA nodes if needed.
        Restricted = "restricted",
        /// All resources from one NUMA node.
        SingleNumaNode = "single-numa-node",
    }
}

string_enum! {
    /// The phase of a Job (`status.state.phase`).
    #[derive(Default)]
    pub enum JobPhase (schema_enum = true) {
        /// Waiting for its gang to be scheduled.
        #[default]
        Pending = "Pending",
        /// Being aborted: pods are being killed.
        Aborting = "Aborting",
        /// Aborted; can be resumed.
        Aborted = "Aborted",
        /// Enough pods are running.
        Running = "Running",
        /// Being restarted.
        Restarting = "Restarting",
        /// Being completed: remaining pods are being killed.
        Completing = "Completing",
        /// Finished successfully.
        Completed = "Completed",
        /// Being terminated.
        Terminating = "Terminating",
        /// Terminated; cannot be resumed.
        Terminated = "Terminated",
        /// Failed (e.g. out of retries).
        Failed = "Failed",
    }
}

impl JobPhase {
    /// A finished phase: nothing more happens to the job but TTL deletion.
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            JobPhase::Completed | JobPhase::Failed | JobPhase::Terminated
        )
    }
}

/// The observed state of a Job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// Phase and the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,

    /// `spec.minAvailable` as last seen by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub min_available: Option<i32>,

    /// Per task: pod phase → number of pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_status_count: Option<BTreeMap<String, TaskState>>,

    /// Pods pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub pending: Option<i32>,

    /// Pods running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub running: Option<i32>,

    /// Pods succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub succeeded: Option<i32>,

    /// Pods failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub failed: Option<i32>,

    /// Pods being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub terminating: Option<i32>,

    /// Pods in phase Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub unknown: Option<i32>,

    /// Incremented on every whole-job kill; stamped on pods as `volcano.sh/job-version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub version: Option<i32>,

    /// Restarts so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub retry_count: Option<i32>,

    /// How long the job ran (written when it is killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_duration: Option<Duration>,

    /// Resources the controller made for plugins and volumes
    /// (`plugin-<name>` → `<name>`, `volume-pvc-<pvc>` → `<pvc>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controlled_resources: Option<BTreeMap<String, String>>,

    /// One entry per phase the job has been in, the most recent last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<JobCondition>>,
}

/// Phase of a job with the reason for and time of the last transition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobState {
    /// The phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<JobPhase>,

    /// One-word CamelCase reason of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable detail of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Pod counts of one task by pod phase (`Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskState {
    /// Pod phase → number of pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BTreeMap<String, i32>>,
}

/// A phase the job has been in and when it entered it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// The phase (Volcano calls it `status`; required).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub status: Option<JobPhase>,

    /// When the job entered the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl VolumeSpec {
    /// The mount path, empty when none is set.
    pub fn mount_path(&self) -> &str {
        self.mount_path.as_deref().unwrap_or_default()
    }
}

impl PartitionPolicySpec {
    /// `totalPartitions`, 0 when absent.
    pub fn total_partitions(&self) -> i32 {
        self.total_partitions.unwrap_or(0)
    }

    /// `partitionSize`, 0 when absent.
    pub fn partition_size(&self) -> i32 {
        self.partition_size.unwrap_or(0)
    }

    /// `minPartitions`, with the CRD default 0.
    pub fn min_partitions(&self) -> i32 {
        self.min_partitions.unwrap_or(0)
    }
}

impl JobSpec {
    /// The tasks (empty when none are given).
    pub fn tasks(&self) -> &[TaskSpec] {
        self.tasks.as_deref().unwrap_or_default()
    }

    /// The job-level policies.
    pub fn policies(&self) -> &[LifecyclePolicy] {
        self.policies.as_deref().unwrap_or_default()
    }

    /// The queue, `default` when none is set.
    pub fn queue(&self) -> &str {
        match self.queue.as_deref() {
            Some(q) if !q.is_empty() => q,
            _ => super::keys::DEFAULT_QUEUE,
        }
    }

    /// `maxRetry`, with Volcano's default of 3 for an absent or zero value.
    pub fn max_retry(&self) -> i32 {
        match self.max_retry {
            Some(n) if n > 0 => n,
            _ => DEFAULT_MAX_RETRY,
        }
    }

    /// `minAvailable`, 0 when absent.
    pub fn min_available(&self) -> i32 {
        self.min_available.unwrap_or(0)
    }

    /// The task with this name.
    pub fn task(&self, name: &str) -> Option<&TaskSpec> {
        self.tasks()
            .iter()
            .find(|t| t.name.as_deref() == Some(name))
    }

    /// Sum of all tasks' replicas.
    pub fn total_replicas(&self) -> i32 {
        self.tasks().iter().map(TaskSpec::replicas).sum()
    }
}

impl TaskSpec {
    /// The name, empty when none is set.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }

    /// `replicas`, 0 when absent.
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(0)
    }

    /// `minAvailable`, defaulting to `replicas` as Volcano's webhook does.
    pub fn min_available(&self) -> i32 {
        self.min_available.unwrap_or_else(|| self.replicas())
    }

    /// The pod spec of the template, if any.
    pub fn pod_spec(&self) -> Option<&PodSpec> {
        self.template.as_ref().and_then(|t| t.spec.as_ref())
    }

    /// The task-level policies.
    pub fn policies(&self) -> &[LifecyclePolicy] {
        self.policies.as_deref().unwrap_or_default()
    }
}

impl Job {
    /// The tasks of the job.
    pub fn tasks(&self) -> &[TaskSpec] {
        self.spec.tasks()
    }

    /// Sum of all tasks' replicas.
    pub fn total_replicas(&self) -> i32 {
        self.spec.total_replicas()
    }

    /// The current phase, `None` before the controller first wrote a status.
    pub fn phase(&self) -> Option<&JobPhase> {
        self.status.as_ref()?.state.as_ref()?.phase.as_ref()
    }

    /// Name of the job's PodGroup, `{job}-{uid}` as Volcano's job controller makes it;
    /// `None` until the job has a name and a uid.
    pub fn pod_group_name(&self) -> Option<String> {
        let name = self.metadata.name.as_deref()?;
        let uid = self.metadata.uid.as_deref()?;
        Some(format!("{name}-{uid}"))
    }
}

/// Name of replica `index` of task `task` of job `job`: `{job}-{task}-{index}`, as Volcano's
/// job controller names pods.
pub fn pod_name(job: &str, task: &str, index: i32) -> String {
    format!("{job}-{task}-{index}")
}
