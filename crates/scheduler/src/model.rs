//! The session's view of the cluster: tasks (pods), jobs (PodGroups), nodes and queues, as
//! plain data. Built by [`super::index`] from the watch caches; the session works on a copy.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PodAffinityTerm, Taint, Toleration};

use super::ix::TaskIx;
use super::resource::Resource;
use tephra_api::PodGroup;
use tephra_api::scheduling::{Affinity, PodGroupPhase, QueueState};

/// `namespace/name` of a PodGroup: a job's identity in the session.
pub type JobId = String;

/// Where a task stands, Volcano's `TaskStatus`.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskStatus {
    Pending,
    Allocated,
    Pipelined,
    Binding,
    Bound,
    Running,
    Releasing,
    Succeeded,
    Failed,
    Unknown,
}

impl TaskStatus {
    /// Allocated, Binding, Bound or Running: holds its node's resources for the job.
    pub fn is_allocated(self) -> bool {
        matches!(
            self,
            Self::Allocated | Self::Binding | Self::Bound | Self::Running
        )
    }

    /// Running, Bound, Succeeded or Failed.
    pub fn is_scheduled(self) -> bool {
        matches!(
            self,
            Self::Running | Self::Bound | Self::Succeeded | Self::Failed
        )
    }

    /// Succeeded or Failed.
    pub fn is_completed(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }

    /// Counts against its node's resources (everything placed and not finished).
    pub fn occupies_node(self) -> bool {
        matches!(
            self,
            Self::Allocated | Self::Binding | Self::Bound | Self::Running | Self::Releasing
        )
    }

    /// Volcano's name of the status, as used in fit-error messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Allocated => "Allocated",
            Self::Pipelined => "Pipelined",
            Self::Binding => "Binding",
            Self::Bound => "Bound",
            Self::Running => "Running",
            Self::Releasing => "Releasing",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
        }
    }
}

/// The parts of a pod's spec the predicates read, shared between copies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Constraints {
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity terms (ORed).
    pub required_terms: Vec<NodeSelectorTerm>,
    /// Preferred node affinity: (weight, term).
    pub preferred_terms: Vec<(i32, NodeSelectorTerm)>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// Host ports: (protocol, host IP, port).
    pub host_ports: Vec<(String, String, i32)>,
    /// `spec.nodeName` set at creation (a pod that names its node).
    pub node_name: Option<String>,
    /// The pod's labels (what other pods' affinity terms select).
    pub labels: BTreeMap<String, String>,
    /// Required pod anti-affinity terms
    /// (`affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`).
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// The pod uses something only kube-scheduler checks or prepares before its Binding:
    /// PersistentVolumeClaims or generic ephemeral volumes (bound in kube-scheduler's
    /// PreBind), resource claims, inter-pod (anti-)affinity or topology spread constraints
    /// (judged by kube-scheduler's filters, not by the session). The binder never binds such
    /// a pod ahead of its own bind request.
    pub needs_kube_scheduler: bool,
}

impl Constraints {
    /// Do the node predicates read the same of both? The pod's labels are left out (they
    /// matter only to required pod anti-affinity, see [`crate::session::State::anti_affinity`]),
    /// and so are preferred terms (they score, never exclude): the pods of a vcJob differ in
    /// their labels (`volcano.sh/task-index`, `volcano.sh/job-name`) and in nothing else.
    pub fn same_for_nodes(&self, other: &Self) -> bool {
        self.node_selector == other.node_selector
            && self.required_terms == other.required_terms
            && self.tolerations == other.tolerations
            && self.host_ports == other.host_ports
            && self.node_name == other.node_name
    }
}

/// One pod.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskInfo {
    /// Pod uid.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The job (PodGroup) it belongs to, from `scheduling.k8s.io/group-name`.
    pub job: Option<JobId>,
    /// `volcano.sh/task-spec`, else empty.
    pub role: String,
    /// `spec.priority` (1 when unset), or `volcano.sh/task-priority`.
    pub priority: i32,
    /// What it asks of a node.
    pub resreq: Resource,
    /// Its node, when placed.
    pub node: Option<String>,
    /// Status.
    pub status: TaskStatus,
    /// May be evicted for others (`volcano.sh/preemptable`, default true).
    pub preemptable: bool,
    /// Has scheduling gates other than tephra's own plan gate (`scheduling.tephra.io/gang-plan`,
    /// removed once a session places the pod): a gated pod is not placed.
    pub gated: bool,
    /// Conformance: never evicted (critical priority class, `kube-system`).
    pub critical: bool,
    /// Creation time, seconds since the epoch.
    pub created: i64,
    /// Spec-derived constraints.
    pub constraints: Arc<Constraints>,
    /// The pod was placed by this service and not yet seen bound (an assumed placement).
    pub assumed: bool,
}

impl TaskInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Requests nothing but a pod slot.
    pub fn best_effort(&self) -> bool {
        self.resreq.is_empty()
    }

    /// The numeric suffix of the pod name (`job-task-3` → 3), Volcano's default task order.
    pub fn index_suffix(&self) -> Option<u64> {
        self.name.rsplit('-').next().and_then(|s| s.parse().ok())
    }
}

/// One PodGroup and its tasks.
#[derive(Clone, Debug)]
pub struct JobInfo {
    /// `namespace/name`.
    pub id: JobId,
    /// Namespace.
    pub namespace: String,
    /// PodGroup name.
    pub name: String,
    /// PodGroup uid.
    pub uid: String,
    /// Queue name (`default` when empty).
    pub queue: String,
    /// `spec.minMember`.
    pub min_available: i32,
    /// `spec.minTaskMember`.
    pub task_min_available: BTreeMap<String, i32>,
    /// PriorityClass value.
    pub priority: i32,
    /// `spec.minResources`.
    pub min_resources: Option<Resource>,
    /// `status.phase` (Pending when unset).
    pub phase: PodGroupPhase,
    /// Creation time, seconds since the epoch.
    pub created: i64,
    /// `volcano.sh/preemptable` on the PodGroup (default false).
    pub preemptable: bool,
    /// The sla plugin's waiting time from the PodGroup's annotation (`volcano.sh/sla-waiting-time`,
    /// else `sla-waiting-time`); `None` when absent, unparsable or not positive.
    pub waiting_time: Option<std::time::Duration>,
    /// The order in which the scheduler first saw the PodGroup (a sequence number). Watch
    /// events come in the order the API server stored the objects, so among PodGroups created
    /// in the same second (creation times have whole seconds) this is their creation order,
    /// where the uid would be a random one.
    pub seen: u64,
    /// When members beyond `minMember` may be placed, ms since the epoch (`i64::MAX`: once
    /// the gang has been placed and a period has passed); `None`: at once. See
    /// [`crate::index::ClusterIndex::set_grow_delay`].
    pub grow_from_ms: Option<i64>,
    /// The object as last seen, for status comparison.
    pub podgroup: Arc<PodGroup>,
    /// Indices of its tasks in the session's task list.
    pub tasks: Vec<TaskIx>,
}

impl JobInfo {
    /// Pending or unset phase.
    pub fn is_pending(&self) -> bool {
        matches!(self.phase, PodGroupPhase::Pending | PodGroupPhase::Other(_))
    }
}

/// One node.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// Name.
    pub name: String,
    /// `status.allocatable` (with `pods`).
    pub allocatable: Resource,
    /// Held by tasks that occupy the node.
    pub used: Resource,
    /// Held by tasks being deleted.
    pub releasing: Resource,
    /// Promised to pipelined tasks this session.
    pub pipelined: Resource,
    /// Labels.
    pub labels: Arc<BTreeMap<String, String>>,
    /// Taints.
    pub taints: Arc<Vec<Taint>>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// The Ready condition is True.
    pub ready: bool,
    /// Number of tasks on it.
    pub task_count: u32,
    /// Host ports in use: (protocol, host IP, port).
    pub used_ports: Vec<(String, String, i32)>,
}

impl NodeInfo {
    /// `allocatable − used`.
    pub fn idle(&self) -> Resource {
        self.allocatable.minus(&self.used)
    }

    /// `idle + releasing − pipelined`: what will be free once deletions finish.
    pub fn future_idle(&self) -> Resource {
        let mut r = self.idle();
        r.add(&self.releasing);
        r.sub(&self.pipelined);
        r
    }
}

/// One queue.
#[derive(Clone, Debug)]
pub struct QueueInfo {
    /// Name.
    pub name: String,
    /// `spec.weight` (1 when unset or not positive).
    pub weight: i32,
    /// `spec.priority`.
    pub priority: i32,
    /// `spec.capability`.
    pub capability: Option<Resource>,
    /// `spec.guarantee.resource`.
    pub guarantee: Option<Resource>,
    /// `spec.deserved`.
    pub deserved: Option<Resource>,
    /// `spec.parent` (`root` when unset, except for `root`).
    pub parent: Option<String>,
    /// `status.state` (Open when unset).
    pub state: QueueState,
    /// `spec.reclaimable` (default true).
    pub reclaimable: bool,
    /// Creation time, seconds since the epoch.
    pub created: i64,
    /// `status.allocated` as last written, for change detection.
    pub status_allocated: Option<Resource>,
    /// `spec.affinity`: the node groups its pods may, should or must not use (the
    /// `nodegroup` plugin).
    pub affinity: Option<Affinity>,
}

impl QueueInfo {
    /// Open, or no state yet (a queue the queue controller has not seen is treated as Open).
    pub fn is_open(&self) -> bool {
        matches!(self.state, QueueState::Open | QueueState::Other(_))
    }
}

/// A namespace's ResourceQuota as the `resourcequota` plugin reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `status.hard` (else `spec.hard`).
    pub hard: Resource,
    /// The resource names `hard` limits, as written (`cpu`, `requests.cpu`, `pods`, …).
    pub hard_names: Vec<String>,
    /// `status.used` (kube-controller-manager's quota controller keeps it; zero without it).
    pub used: Resource,
}

/// A PodDisruptionBudget as the `pdb` plugin reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetInfo {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.selector` (`None`, or empty: matches no pod, as Volcano reads it).
    pub selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// `status.disruptionsAllowed`.
    pub allowed: i32,
    /// `status.disruptedPods`: pods already being evicted, not counted again.
    pub disrupted: std::collections::BTreeSet<String>,
}

/// Moves a wake-up time (milliseconds since the epoch) to `at` when that is earlier, or sets
/// it when none was set: several rules ask for the next session, the first deadline wins.
pub fn wake_by(slot: &mut Option<i64>, at: i64) {
    *slot = Some(slot.map_or(at, |w| w.min(at)));
}
