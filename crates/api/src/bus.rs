//! `bus.volcano.sh/v1alpha1` Command, and the action and event names shared with Job policies.
//!
//! A Command has no `spec`: `action`, `target`, `reason` and `message` sit at the top level of
//! the object, as in Volcano's `staging/src/volcano.sh/apis/pkg/apis/bus/v1alpha1/commands.go`.
//! kube's `no_spec` mode flattens [`CommandFields`] onto the root, so `kube::Api<Command>`
//! works as for any other resource and the wire form is Volcano's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::string_enum;

/// `apiVersion` of a Volcano Job (`batch::API_VERSION`; spelled out here because `batch`
/// re-exports this module's `Action` and `Event`, and importing back would make a cycle; a unit
/// test keeps the two equal).
const JOB_API_VERSION: &str = "batch.volcano.sh/v1alpha1";

/// The API group of [`Command`].
pub const GROUP: &str = "bus.volcano.sh";
/// The API version of [`Command`].
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of a [`Command`].
pub const API_VERSION: &str = "bus.volcano.sh/v1alpha1";

/// The top-level fields of a Command (flattened onto the object; there is no `spec`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bus.volcano.sh",
    version = "v1alpha1",
    kind = "Command",
    plural = "commands",
    singular = "command",
    namespaced,
    no_spec,
    derive = "PartialEq",
    derive = "Default",
    annotation("helm.sh/resource-policy", "keep"),
    doc = "A Command: a one-shot request (abort, restart, open/close queue, ...) to the \
           controller of its target object. Consumed (deleted) by the controller."
)]
#[serde(rename_all = "camelCase")]
pub struct CommandFields {
    /// The action to take on the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,

    /// The object the command is for; its namespace is the Command's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<OwnerReference>,

    /// Unique, one-word, CamelCase reason for this command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Command {
    /// The action, if any.
    pub fn action(&self) -> Option<&Action> {
        self.spec.action.as_ref()
    }

    /// The target, if any.
    pub fn target(&self) -> Option<&OwnerReference> {
        self.spec.target.as_ref()
    }

    /// Whether the command targets a `batch.volcano.sh/v1alpha1` Job (the only commands the
    /// job controller picks up).
    pub fn targets_job(&self) -> bool {
        self.target()
            .is_some_and(|t| t.api_version == JOB_API_VERSION && t.kind == "Job")
    }

    /// Whether the command targets a `scheduling.volcano.sh/v1beta1` Queue.
    pub fn targets_queue(&self) -> bool {
        self.target()
            .is_some_and(|t| t.api_version == super::scheduling::API_VERSION && t.kind == "Queue")
    }
}

string_enum! {
    /// What a controller does in answer to an event or a Command (`SA/bus/v1alpha1/actions.go`).
    pub enum Action (schema_enum = false) {
        /// Evict all pods; none are recreated; the job can be resumed.
        AbortJob = "AbortJob",
        /// Restart the whole job.
        RestartJob = "RestartJob",
        /// Delete and recreate the pods of one task.
        RestartTask = "RestartTask",
        /// Delete and recreate one pod.
        RestartPod = "RestartPod",
        /// Delete and recreate the pods of one partition.
        RestartPartition = "RestartPartition",
        /// Evict all pods; the job cannot be resumed.
        TerminateJob = "TerminateJob",
        /// Kill unfinished pods and complete the job.
        CompleteJob = "CompleteJob",
        /// Resume an aborted job.
        ResumeJob = "ResumeJob",
        /// Internal: sync job and pod status.
        SyncJob = "SyncJob",
        /// Internal: sync the job's Inqueue status.
        EnqueueJob = "EnqueueJob",
        /// Internal: sync a queue's status.
        SyncQueue = "SyncQueue",
        /// Open a queue.
        OpenQueue = "OpenQueue",
        /// Close a queue.
        CloseQueue = "CloseQueue",
    }
}

impl Action {
    /// Actions a user may put in a policy or a job Command (the rest are internal).
    pub const USER_JOB_ACTIONS: &'static [Action] = &[
        Action::AbortJob,
        Action::RestartJob,
        Action::RestartTask,
        Action::RestartPod,
        Action::RestartPartition,
        Action::TerminateJob,
        Action::CompleteJob,
        Action::ResumeJob,
    ];

    /// Whether this is one of [`Action::USER_JOB_ACTIONS`].
    pub fn is_user_job_action(&self) -> bool {
        Self::USER_JOB_ACTIONS.contains(self)
    }
}

string_enum! {
    /// Something that happened to a job or its pods (`SA/bus/v1alpha1/events.go`).
    pub enum Event (schema_enum = true) {
        /// Any event.
        Any = "*",
        /// A pod is pending.
        PodPending = "PodPending",
        /// A pod is running.
        PodRunning = "PodRunning",
        /// A pod failed.
        PodFailed = "PodFailed",
        /// A pod was deleted or evicted.
        PodEvicted = "PodEvicted",
        /// The job is in an unknown state (e.g. part of a gang cannot be scheduled).
        Unknown = "Unknown",
        /// All replicas of a task succeeded.
        TaskCompleted = "TaskCompleted",
        /// Internal: a pod or the job changed.
        OutOfSync = "OutOfSync",
        /// Internal: a Command was issued.
        CommandIssued = "CommandIssued",
        /// The job's spec was updated (e.g. scaled).
        JobUpdated = "JobUpdated",
        /// A task finished unexpectedly.
        TaskFailed = "TaskFailed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_api_version_is_batchs() {
        assert_eq!(JOB_API_VERSION, crate::batch::API_VERSION);
    }
}
