//! `scheduling.volcano.sh/v1beta1` PodGroup and Queue.
//!
//! Field names and shapes follow Volcano's `staging/src/volcano.sh/apis/pkg/apis/scheduling/v1beta1/types.go`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::DNS1123_SUBDOMAIN;
use super::common::{ResourceList, string_enum};

/// The API group of [`PodGroup`] and [`Queue`].
pub const GROUP: &str = "scheduling.volcano.sh";
/// The API version of [`PodGroup`] and [`Queue`].
pub const VERSION: &str = "v1beta1";
/// `apiVersion` of a [`PodGroup`] or [`Queue`].
pub const API_VERSION: &str = "scheduling.volcano.sh/v1beta1";

/// The desired state of a PodGroup: the gang the scheduler places whole or not at all.
// clippy reads the repeated `type_ = ...` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "PodGroup",
    plural = "podgroups",
    singular = "podgroup",
    namespaced,
    shortname = "pg",
    shortname = "podgroup-v1beta1",
    status = "PodGroupStatus",
    derive = "PartialEq",
    derive = "Default",
    annotation("helm.sh/resource-policy", "keep"),
    doc = "A PodGroup: pods scheduled together as one gang. Its CRD has no status subresource \
           (as Volcano's): `status` is part of the object and is written with a normal \
           update or patch of the PodGroup, never through `/status`.",
    printcolumn(name = "STATUS", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "minMember", type_ = "integer", json_path = ".spec.minMember"),
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
pub struct PodGroupSpec {
    /// Gang size: the minimal number of pods that must be placed together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub min_member: Option<i32>,

    /// Per task name: the minimal number of that task's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_task_member: Option<BTreeMap<String, i32>>,

    /// Queue the group is admitted through (CRD default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "default", "maxLength" = 253, "pattern" = DNS1123_SUBDOMAIN))]
    pub queue: Option<String>,

    /// Priority class giving the group its priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253))]
    pub priority_class_name: Option<String>,

    /// Minimal resources of the gang, checked at enqueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<ResourceList>,

    /// Network-topology constraint of the whole group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,

    /// Sub-groups with their own gang size and topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_policy: Option<Vec<SubGroupPolicySpec>>,
}

/// A network-topology constraint (shared by Job, task partitions, PodGroup and sub-groups).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologySpec {
    /// `hard` (must hold) or `soft` (best effort); CRD default `hard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "hard"))]
    pub mode: Option<NetworkTopologyMode>,

    /// Highest hypernode tier the job may span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub highest_tier_allowed: Option<i32>,

    /// Highest hypernode tier by name (exclusive with `highestTierAllowed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253))]
    pub highest_tier_name: Option<String>,
}

string_enum! {
    /// Whether a network-topology constraint is required or preferred.
    pub enum NetworkTopologyMode (schema_enum = true) {
        /// The constraint must hold.
        Hard = "hard",
        /// The constraint is best effort.
        Soft = "soft",
    }
}

/// A sub-group of a PodGroup: pods matched by a selector, grouped by label values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubGroupPolicySpec {
    /// Name of the sub-group policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253))]
    pub name: Option<String>,

    /// Network-topology constraint of each sub-group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,

    /// Pods per sub-group (CRD default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1, "minimum" = 1))]
    pub sub_group_size: Option<i32>,

    /// Minimal number of sub-groups that must fit (CRD default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0, "minimum" = 0))]
    pub min_sub_groups: Option<i32>,

    /// Which pods belong to the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,

    /// Label keys whose values split the matched pods into sub-groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_label_keys: Option<Vec<String>>,
}

string_enum! {
    /// Phase of a PodGroup (`status.phase`; empty is treated as Pending).
    pub enum PodGroupPhase (schema_enum = true) {
        /// Not yet admitted by its queue.
        Pending = "Pending",
        /// At least `minMember` pods are running.
        Running = "Running",
        /// Some pods are running, but fewer than `minMember`, and the rest cannot be scheduled.
        Unknown = "Unknown",
        /// Admitted by its queue; pods may be placed.
        Inqueue = "Inqueue",
        /// All pods finished.
        Completed = "Completed",
    }
}

string_enum! {
    /// Type of a PodGroup condition.
    pub enum PodGroupConditionType (schema_enum = false) {
        /// The gang cannot be placed.
        Unschedulable = "Unschedulable",
        /// The gang was placed.
        Scheduled = "Scheduled",
    }
}

/// The observed state of a PodGroup (written by the scheduler).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PodGroupPhase>,

    /// Conditions (Unschedulable / Scheduled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodGroupCondition>>,

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
}

/// A condition of a PodGroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupCondition {
    /// Unschedulable or Scheduled.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<PodGroupConditionType>,

    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,

    /// ID of the scheduling session that set the condition.
    #[serde(
        default,
        rename = "transitionID",
        skip_serializing_if = "Option::is_none"
    )]
    pub transition_id: Option<String>,

    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,

    /// One-word CamelCase reason (`NotEnoughResources`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl PodGroupSpec {
    /// The queue, `default` when none is set.
    pub fn queue(&self) -> &str {
        match self.queue.as_deref() {
            Some(q) if !q.is_empty() => q,
            _ => super::keys::DEFAULT_QUEUE,
        }
    }

    /// `minMember`, 0 when absent.
    pub fn min_member(&self) -> i32 {
        self.min_member.unwrap_or(0)
    }
}

impl PodGroup {
    /// The phase; an absent or empty phase counts as Pending, as in Volcano.
    pub fn phase(&self) -> PodGroupPhase {
        match self.status.as_ref().and_then(|s| s.phase.as_ref()) {
            Some(PodGroupPhase::Other(s)) if s.is_empty() => PodGroupPhase::Pending,
            Some(p) => p.clone(),
            None => PodGroupPhase::Pending,
        }
    }
}

/// The desired state of a Queue: a share of the cluster that PodGroups are admitted through.
// clippy reads the repeated `type_ = ...` of the printer columns as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "Queue",
    plural = "queues",
    singular = "queue",
    shortname = "q",
    shortname = "queue-v1beta1",
    status = "QueueStatus",
    derive = "PartialEq",
    derive = "Default",
    annotation("helm.sh/resource-policy", "keep"),
    doc = "A Queue (cluster scoped): weight, capability and state of a share of the cluster.",
    // STATE is tephra's addition (the queue controller writes it); Volcano's CRD shows only
    // PARENT, and a cluster with Volcano's CRDs installed keeps showing that.
    printcolumn(name = "STATE", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "PARENT", type_ = "string", json_path = ".spec.parent")
)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// Proportional share (1..=65535, CRD default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1, "minimum" = 1, "maximum" = 65535))]
    pub weight: Option<i32>,

    /// Hard upper bound of what the queue may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<ResourceList>,

    /// Whether other queues may reclaim resources from this one (webhook default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimable: Option<bool>,

    /// Clusters jobs of this queue may be forwarded to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend_clusters: Option<Vec<Cluster>>,

    /// Resources reserved for the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Guarantee>,

    /// Node-group affinity of the queue's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Type of the queue.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253))]
    pub type_: Option<String>,

    /// Parent queue (hierarchical queues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253, "pattern" = DNS1123_SUBDOMAIN))]
    pub parent: Option<String>,

    /// Resources the queue deserves (capacity plugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deserved: Option<ResourceList>,

    /// Priority: higher is scheduled first and reclaimed last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub priority: Option<i32>,

    /// `fifo` or `traverse` (CRD default `traverse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "traverse"))]
    pub dequeue_strategy: Option<DequeueStrategy>,
}

string_enum! {
    /// How the scheduler takes jobs out of a queue.
    pub enum DequeueStrategy (schema_enum = true) {
        /// Strictly in order: a blocked head blocks the queue.
        Fifo = "fifo",
        /// Skip jobs that do not fit.
        Traverse = "traverse",
    }
}

/// A cluster jobs of the queue may be forwarded to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Cluster name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Weight of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Capacity of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ResourceList>,
}

/// Resource reservation of a queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Guarantee {
    /// Reserved resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceList>,
}

/// Node-group affinity and anti-affinity of a queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    /// Node groups the queue's pods go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_affinity: Option<NodeGroupAffinity>,
    /// Node groups the queue's pods avoid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_anti_affinity: Option<NodeGroupAffinity>,
}

/// Required and preferred node groups (used for both affinity and anti-affinity).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupAffinity {
    /// Node groups that must (not) be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<Vec<String>>,
    /// Node groups that should (not) be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution: Option<Vec<String>>,
}

string_enum! {
    /// State of a Queue (`status.state`).
    pub enum QueueState (schema_enum = true) {
        /// Accepts new jobs and is allocatable.
        Open = "Open",
        /// Accepts nothing.
        Closed = "Closed",
        /// Being closed: waits for its PodGroups to go.
        Closing = "Closing",
        /// State not known.
        Unknown = "Unknown",
    }
}

/// The observed state of a Queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// Open, Closed, Closing or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<QueueState>,

    /// PodGroups in phase Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub unknown: Option<i32>,

    /// PodGroups in phase Pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub pending: Option<i32>,

    /// PodGroups in phase Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub running: Option<i32>,

    /// PodGroups in phase Inqueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub inqueue: Option<i32>,

    /// PodGroups in phase Completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub completed: Option<i32>,

    /// Resource reservation profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,

    /// Resources allocated to the queue's tasks (written by the scheduler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<ResourceList>,
}

/// Nodes and resources locked for a queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// Locked nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Idle resources on the locked nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceList>,
}

impl QueueSpec {
    /// `weight`, with the default 1 for an absent or non-positive value.
    pub fn weight(&self) -> i32 {
        match self.weight {
            Some(w) if w > 0 => w,
            _ => 1,
        }
    }
}

impl Queue {
    /// A Queue named `name` with `spec` and nothing else in its metadata, as `kubectl create`
    /// makes one. (The derived `Queue::new` also copies the CRD's own annotations, such as
    /// `helm.sh/resource-policy`, onto the object.)
    pub fn named(name: &str, spec: QueueSpec) -> Self {
        Self {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_string()),
                ..k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }

    /// The state; `None` when no status has been written yet.
    pub fn state(&self) -> Option<&QueueState> {
        self.status.as_ref()?.state.as_ref()
    }

    /// Whether the queue accepts jobs and is allocatable (only `Open` queues are).
    pub fn is_open(&self) -> bool {
        matches!(self.state(), Some(QueueState::Open))
    }
}
