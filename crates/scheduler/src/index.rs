//! The scheduler's own index of the cluster, fed by the shared watch caches' events (never by
//! API calls) and kept incrementally: each pod's contribution to its node is added and removed
//! as the pod changes, so taking a [`Snapshot`] costs a copy, not a recount of every pod.
//!
//! Placements this service has made but the API does not show yet (kube-scheduler is binding
//! them) are *assumed*: they count against their node at once and are released when the pod is
//! deleted, when it shows up bound, or when their time-to-live passes without a bind.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;

use super::ix::{Ix, IxVec, JobIx, NodeIx, QueueIx, TaskIx};
use super::model::{
    BudgetInfo, Constraints, JobId, JobInfo, NodeInfo, QueueInfo, QuotaInfo, TaskInfo, TaskStatus,
};
use super::resource::{Resource, pod_request};
use super::topology::{self, NodeRef, Topology};
use tephra_api::HyperNode;
use tephra_api::keys;
use tephra_api::scheduling::{PodGroupPhase, QueueState};
use tephra_api::{PodGroup, Queue};

/// A copy of the index for one session.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Usable and unusable nodes (predicates decide).
    pub nodes: IxVec<NodeIx, NodeInfo>,
    /// Jobs with a PodGroup whose queue exists.
    pub jobs: IxVec<JobIx, JobInfo>,
    /// Every task of those jobs, indexed by `JobInfo::tasks`.
    pub tasks: IxVec<TaskIx, TaskInfo>,
    /// Every queue.
    pub queues: IxVec<QueueIx, QueueInfo>,
    /// The HyperNodes holding nodes of `nodes`.
    pub topology: Topology,
    /// Every namespace's ResourceQuotas, by namespace then name.
    pub quotas: Vec<QuotaInfo>,
    /// Every PodDisruptionBudget, by namespace then name.
    pub budgets: Vec<BudgetInfo>,
    /// The PriorityClass marked `globalDefault`, its value.
    pub default_priority: i32,
    /// PodGroups whose queue does not exist: not scheduled, only told why.
    pub orphans: Vec<Orphan>,
}

impl Snapshot {
    /// Keeps only the nodes `keep` picks, in order; the HyperNodes' node lists follow (a
    /// HyperNode left without nodes is dropped). Cutting `nodes` by hand would leave the
    /// topology pointing at the old positions.
    pub fn retain_nodes(&mut self, keep: impl Fn(&NodeInfo) -> bool) {
        let mut moved: HashMap<NodeIx, NodeIx> = HashMap::new();
        let mut kept = IxVec::new();
        for (i, n) in std::mem::take(&mut self.nodes).into_iter().enumerate() {
            if keep(&n) {
                moved.insert(NodeIx::new(i), kept.push(n));
            }
        }
        self.nodes = kept;
        self.topology.renumber(|n| moved.get(&n).copied());
    }
}

/// A PodGroup naming a queue that does not exist (deleted while its jobs still named it, or
/// made while the webhooks were not running).
#[derive(Clone, Debug)]
pub struct Orphan {
    /// The gang.
    pub id: JobId,
    /// The queue it names.
    pub queue: String,
    /// The PodGroup as last seen.
    pub podgroup: Arc<PodGroup>,
}

/// An assumed placement.
#[derive(Clone, Debug)]
struct Assumed {
    node: String,
    /// When the placement was made.
    since: Instant,
    /// When it lapses, unless its pod is still behind the plan gate then.
    expires: Instant,
    /// How long it lasts once its pod is handed to kube-scheduler.
    ttl: Duration,
}

/// A PodGroup phase a session decided (see [`ClusterIndex::decided_phases`]).
#[derive(Clone, Debug)]
struct Decided {
    uid: String,
    /// The phase the watch showed when it was decided.
    from: Option<PodGroupPhase>,
    phase: PodGroupPhase,
    until: Instant,
}

/// Per-pod bookkeeping: the task and what it added to a node.
#[derive(Clone, Debug)]
struct PodEntry {
    /// Shared with the snapshots taken while it was current (see [`SnapshotSource`]).
    task: Arc<TaskInfo>,
    /// Served by this service (its `schedulerName` is ours).
    ours: bool,
    /// kube-scheduler marked it unschedulable (`PodScheduled=False`, reason `Unschedulable`):
    /// it waits in kube-scheduler's unschedulable queue for an event that moves it.
    parked: bool,
    /// Carries [`keys::PLAN_GATE`]: kube-scheduler will not ask about it until the gate is
    /// removed (the task's own `gated` counts only the other gates).
    plan_gated: bool,
    /// Names a native PodGroup (`spec.schedulingGroup`): kube-scheduler places it with its
    /// group, and holds the whole group while any member is gated.
    native_member: bool,
}

/// What the index takes of one pod, worked out from the pod alone ([`ClusterIndex::digest`]):
/// a relist buffers these rather than the pods, and applies them once the list is complete.
#[derive(Clone, Debug)]
pub struct PodDigest {
    /// The task, as if its scheduler were ours and nothing were assumed.
    task: TaskInfo,
    /// The scheduler serving it.
    scheduler: String,
    /// Has a deletion timestamp.
    deleting: bool,
    /// kube-scheduler marked it unschedulable.
    parked: bool,
    /// Carries the plan gate.
    plan_gate: bool,
    /// Names a native PodGroup.
    native_member: bool,
}

/// What changed since the last session, so the runner can decide whether an on-demand session
/// is worth running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// A pending pod of ours appeared or changed.
    pub pending_pod: bool,
    /// A gang or queue appeared or changed.
    pub gang: bool,
    /// Capacity was freed or added (pod finished or deleted, node added or changed).
    pub capacity: bool,
}

impl Changes {
    /// Anything at all.
    pub fn any(self) -> bool {
        self.pending_pod || self.gang || self.capacity
    }
}

/// The index. Not thread-safe by itself; the runner keeps it behind a mutex.
#[derive(Debug)]
pub struct ClusterIndex {
    scheduler_names: Vec<String>,
    /// Shared with the snapshots taken while they were current (see [`SnapshotSource`]).
    nodes: HashMap<String, Arc<NodeInfo>>,
    pods: HashMap<String, PodEntry>,
    podgroups: HashMap<JobId, Arc<PodGroup>>,
    /// When each PodGroup was first seen, as a sequence number (see [`JobInfo::seen`]).
    podgroup_seen: HashMap<JobId, u64>,
    /// The next sequence number.
    next_seen: u64,
    /// Each job's tasks by pod uid, the same handles as in `pods` ([`Self::replace_task`]):
    /// a session's snapshot takes them from here under the lock, without a lookup per task.
    job_tasks: HashMap<JobId, BTreeMap<String, Arc<TaskInfo>>>,
    queues: HashMap<String, Arc<Queue>>,
    priority_classes: HashMap<String, (i32, bool)>,
    assumed: HashMap<String, Assumed>,
    /// Pods a session evicted that the API has not shown deleting yet: uid → until when, and
    /// the status the pod would have otherwise (see [`ClusterIndex::assume_evicted`]).
    evicting: HashMap<String, (Instant, TaskStatus)>,
    /// Pods whose plan gate the API has answered removed while the watch may still bring
    /// events from before ([`ClusterIndex::note_plan_gate_removed`]). Kubernetes never lets a
    /// scheduling gate be added after creation, so an event that still shows the gate is
    /// older than the removal; the uid goes once an event shows the pod without it.
    ungated: HashSet<String>,
    /// PodGroup phases sessions decided that the watch does not show yet, by job. See
    /// [`ClusterIndex::decided_phases`].
    decided: HashMap<JobId, Decided>,
    /// See [`ClusterIndex::set_grow_delay`]; zero: members beyond the minimum at once.
    grow_delay_ms: i64,
    /// Job → when its members beyond the minimum may be placed (ms since the epoch).
    grow_from: HashMap<JobId, i64>,
    /// HyperNodes by name.
    hypernodes: BTreeMap<String, Arc<HyperNode>>,
    /// ResourceQuotas by `namespace/name`.
    quotas: BTreeMap<String, QuotaInfo>,
    /// PodDisruptionBudgets by `namespace/name`.
    budgets: BTreeMap<String, BudgetInfo>,
    /// Every HyperNode resolved to the names of its nodes, worked out by the first snapshot
    /// after a HyperNode, or a node's name or labels, changed (resolving follows name
    /// patterns and label selectors over every node: not a cost for every session).
    resolved: OnceLock<Arc<Vec<Resolved>>>,
    changes: Changes,
}

/// The node label holding a node's host name (`kubernetes.io/hostname`).
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// A placed pod whose plan gate is due to come off ([`ClusterIndex::placed_plan_gated`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateDue {
    /// The pod's uid.
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The nodes it must be kept to once through the gate, for a native gang with a hard
    /// network topology: kube-scheduler places a native PodGroup by itself and knows nothing
    /// of HyperNodes, so the gate's removal also narrows the pod's required node affinity to
    /// the HyperNode the session chose. `None`: no such narrowing.
    pub pin: Option<Arc<Pin>>,
}

/// The nodes of one HyperNode, as a pod's required node affinity can name them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// Their names, sorted.
    pub nodes: Vec<String>,
    /// Their `kubernetes.io/hostname` labels, in the same order; `None` when one lacks it.
    /// A requirement on a node's name takes one value only, so narrowing a pod's existing
    /// terms (each must keep holding, with the set added) needs the hostname label.
    pub hostnames: Option<Vec<String>>,
}

/// A HyperNode and its nodes' names.
#[derive(Debug)]
struct Resolved {
    name: String,
    tier: i64,
    tier_name: String,
    nodes: Vec<String>,
}

fn secs(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> i64 {
    t.map(|t| t.0.as_second()).unwrap_or(0)
}

/// The sla waiting time a PodGroup's annotations give: Volcano reads
/// `volcano.sh/sla-waiting-time`, then `sla-waiting-time`, as Go durations; a value that does
/// not parse or is zero counts as absent (Volcano logs it and goes on without one).
fn waiting_time(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<std::time::Duration> {
    let a = annotations?;
    [keys::JOB_WAITING_TIME, keys::JOB_WAITING_TIME_PLAIN]
        .iter()
        .filter_map(|k| a.get(*k))
        .map(|v| {
            tephra_api::Duration(v.clone())
                .to_std()
                .ok()
                .filter(|d| !d.is_zero())
        })
        .find(Option::is_some)
        .flatten()
}

fn truthy(v: Option<&String>) -> Option<bool> {
    v.map(|s| s.eq_ignore_ascii_case("true"))
}

impl ClusterIndex {
    /// An empty index for the given scheduler names.
    pub fn new(scheduler_names: Vec<String>) -> Self {
        Self {
            scheduler_names,
            nodes: HashMap::new(),
            pods: HashMap::new(),
            podgroups: HashMap::new(),
            podgroup_seen: HashMap::new(),
            next_seen: 0,
            job_tasks: HashMap::new(),
            queues: HashMap::new(),
            priority_classes: HashMap::new(),
            assumed: HashMap::new(),
            evicting: HashMap::new(),
            ungated: HashSet::new(),
            decided: HashMap::new(),
            grow_delay_ms: 0,
            grow_from: HashMap::new(),
            hypernodes: BTreeMap::new(),
            quotas: BTreeMap::new(),
            budgets: BTreeMap::new(),
            resolved: OnceLock::new(),
            changes: Changes::default(),
        }
    }

    /// What changed since the last call, and resets it.
    pub fn take_changes(&mut self) -> Changes {
        std::mem::take(&mut self.changes)
    }

    /// Adds `c` to what changed (changes taken out and found to be still due).
    pub fn restore_changes(&mut self, c: Changes) {
        self.changes.pending_pod |= c.pending_pod;
        self.changes.gang |= c.gang;
        self.changes.capacity |= c.capacity;
    }

    /// What changed since the last [`Self::take_changes`], without resetting it.
    pub fn peek_changes(&self) -> Changes {
        self.changes
    }

    /// `true` when an assumed placement or eviction has passed its time.
    pub fn has_expired_assumed(&self, now: Instant) -> bool {
        self.assumed.iter().any(|(uid, a)| self.lapsed(uid, a, now))
            || self.evicting.values().any(|(until, _)| *until <= now)
    }

    /// A queue's `status.allocated` as last seen.
    pub fn queue_allocated(&self, name: &str) -> Option<tephra_api::ResourceList> {
        self.queues
            .get(name)
            .and_then(|q| q.status.as_ref())
            .and_then(|s| s.allocated.clone())
    }

    /// Number of pods known.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Number of nodes known.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    // ----- nodes -----

    /// A node was added or changed.
    pub fn apply_node(&mut self, node: &Node) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let status = node.status.as_ref();
        let allocatable = status
            .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
            .map(Resource::from_list)
            .unwrap_or_default();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            .unwrap_or(false);
        let spec = node.spec.as_ref();
        let labels = Arc::new(node.metadata.labels.clone().unwrap_or_default());
        let taints = Arc::new(spec.and_then(|s| s.taints.clone()).unwrap_or_default());
        let unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        if self.nodes.get(&name).is_none_or(|n| n.labels != labels) {
            self.resolved = OnceLock::new();
        }
        let entry = Arc::make_mut(self.nodes.entry(name.clone()).or_insert_with(|| {
            Arc::new(NodeInfo {
                name,
                allocatable: Resource::zero(),
                used: Resource::zero(),
                releasing: Resource::zero(),
                pipelined: Resource::zero(),
                labels: Arc::default(),
                taints: Arc::default(),
                unschedulable: false,
                ready: false,
                task_count: 0,
                used_ports: Vec::new(),
            })
        }));
        entry.allocatable = allocatable;
        entry.labels = labels;
        entry.taints = taints;
        entry.unschedulable = unschedulable;
        entry.ready = ready;
        self.changes.capacity = true;
    }

    /// A node was deleted. Its pods stay known (they will be deleted or rebound).
    pub fn delete_node(&mut self, node: &Node) {
        if let Some(name) = node.metadata.name.as_deref()
            && self.nodes.remove(name).is_some()
        {
            self.resolved = OnceLock::new();
        }
    }

    /// A relist replaced every node.
    pub fn reset_nodes(&mut self, nodes: &[&Node]) {
        let keep: BTreeSet<&str> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.nodes.retain(|k, _| keep.contains(k.as_str()));
        self.resolved = OnceLock::new();
        for n in nodes {
            self.apply_node(n);
        }
        // Usage is recounted from the pods, in case the node was unknown when they came.
        self.recount_usage();
    }

    fn recount_usage(&mut self) {
        for n in self.nodes.values_mut().map(Arc::make_mut) {
            n.used = Resource::zero();
            n.releasing = Resource::zero();
            n.task_count = 0;
            n.used_ports.clear();
        }
        let tasks: Vec<Arc<TaskInfo>> = self.pods.values().map(|p| p.task.clone()).collect();
        for t in &tasks {
            self.contribute(t, true);
        }
    }

    /// Adds (or with `add == false`, removes) a task's share of its node.
    fn contribute(&mut self, t: &TaskInfo, add: bool) {
        let Some(node) = t.node.as_deref() else {
            return;
        };
        if !t.status.occupies_node() {
            return;
        }
        let Some(n) = self.nodes.get_mut(node).map(Arc::make_mut) else {
            return;
        };
        if add {
            n.used.add(&t.resreq);
            if t.status == TaskStatus::Releasing {
                n.releasing.add(&t.resreq);
            }
            n.task_count += 1;
            n.used_ports
                .extend(t.constraints.host_ports.iter().cloned());
        } else {
            n.used.sub(&t.resreq);
            if t.status == TaskStatus::Releasing {
                n.releasing.sub(&t.resreq);
            }
            n.task_count = n.task_count.saturating_sub(1);
            for p in &t.constraints.host_ports {
                if let Some(i) = n.used_ports.iter().position(|q| q == p) {
                    n.used_ports.swap_remove(i);
                }
            }
        }
    }

    // ----- pods -----

    /// What the index keeps of `pod`, worked out from the pod alone; [`Self::apply_digest`]
    /// adds what depends on the index (whether the scheduler is ours, assumed placements).
    pub fn digest(pod: &Pod) -> Option<PodDigest> {
        let meta = &pod.metadata;
        let uid = meta.uid.clone()?;
        let namespace = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let annotations = meta.annotations.as_ref();
        let labels = meta.labels.as_ref();
        let spec = pod.spec.as_ref();
        let scheduler = keys::served_scheduler(pod).to_string();
        let job = annotations
            .and_then(|a| a.get(keys::KUBE_GROUP_NAME_ANNOTATION))
            .filter(|g| !g.is_empty())
            .map(|g| format!("{namespace}/{g}"));
        let role = annotations
            .and_then(|a| a.get(keys::TASK_SPEC))
            .or_else(|| labels.and_then(|l| l.get(keys::TASK_SPEC)))
            .cloned()
            .unwrap_or_default();
        let priority = annotations
            .and_then(|a| a.get(keys::TASK_PRIORITY))
            .and_then(|p| p.parse().ok())
            .or_else(|| spec.and_then(|s| s.priority))
            .unwrap_or(1);
        let preemptable = truthy(annotations.and_then(|a| a.get(keys::PREEMPTABLE)))
            .or_else(|| truthy(labels.and_then(|l| l.get(keys::PREEMPTABLE))))
            .unwrap_or(true);
        let pc = spec.and_then(|s| s.priority_class_name.as_deref());
        let critical = matches!(pc, Some("system-cluster-critical" | "system-node-critical"))
            || namespace == "kube-system";
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("Pending");
        let deleting = meta.deletion_timestamp.is_some();
        let node = spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        let status = match phase {
            "Running" if deleting => TaskStatus::Releasing,
            "Running" => TaskStatus::Running,
            "Pending" if deleting => TaskStatus::Releasing,
            "Pending" if node.is_some() => TaskStatus::Bound,
            "Pending" => TaskStatus::Pending,
            "Succeeded" => TaskStatus::Succeeded,
            "Failed" => TaskStatus::Failed,
            _ => TaskStatus::Unknown,
        };
        let mut constraints = spec.map(constraints_of).unwrap_or_default();
        constraints.labels = labels.cloned().unwrap_or_default();
        let task = TaskInfo {
            uid,
            namespace,
            name,
            job,
            role,
            priority,
            resreq: pod_request(pod),
            node,
            status,
            preemptable,
            gated: spec
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| g.iter().any(|g| g.name != keys::PLAN_GATE)),
            critical,
            created: secs(meta.creation_timestamp.as_ref()),
            constraints: Arc::new(constraints),
            assumed: false,
        };
        Some(PodDigest {
            task,
            scheduler,
            deleting,
            parked: is_parked(pod),
            plan_gate: has_plan_gate(pod),
            native_member: spec.is_some_and(|s| s.scheduling_group.is_some()),
        })
    }

    /// A pod was added or changed.
    pub fn apply_pod(&mut self, pod: &Pod) {
        if let Some(d) = Self::digest(pod) {
            self.apply_digest(d);
        }
    }

    /// [`Self::apply_pod`], from the pod's digest.
    pub fn apply_digest(&mut self, d: PodDigest) {
        let PodDigest {
            mut task,
            scheduler,
            deleting,
            parked,
            plan_gate,
            native_member,
        } = d;
        let ours = self.scheduler_names.contains(&scheduler);
        if !ours {
            // Only the pods of this scheduler's gangs belong to a job.
            task.job = None;
        }
        if task.status == TaskStatus::Pending
            && let Some(a) = self.assumed.get(&task.uid)
        {
            task.node = Some(a.node.clone());
            task.assumed = true;
            task.status = TaskStatus::Binding;
        }
        if deleting {
            // The API shows the eviction now: the pod's own status says Releasing.
            self.evicting.remove(&task.uid);
        } else if let Some((_, underlying)) = self.evicting.get_mut(&task.uid)
            && matches!(task.status, TaskStatus::Running | TaskStatus::Bound)
        {
            *underlying = task.status;
            task.status = TaskStatus::Releasing;
        }
        if task.node.is_some() && !task.assumed {
            self.assumed.remove(&task.uid);
        }
        let old = self.pods.remove(&task.uid);
        if let Some(old) = &old {
            self.contribute(&old.task, false);
            if old.task.job != task.job
                && let Some(j) = &old.task.job
                && let Some(set) = self.job_tasks.get_mut(j)
            {
                set.remove(&old.task.uid);
            }
            if old.task.status.occupies_node() && !task.status.occupies_node() {
                self.changes.capacity = true;
            }
            // A gang member bound, started or finished: its PodGroup's phase and counts
            // (written by the session) are due, even when nothing is left to place. Without
            // this a gang could stay `Inqueue` with `running: 0` and a stale Unschedulable
            // condition while all its pods run.
            if old.task.job.is_some() && old.task.status != task.status {
                self.changes.gang = true;
            }
        }
        if ours && task.status == TaskStatus::Pending {
            let changed = old.as_ref().is_none_or(|o| *o.task != task);
            self.changes.pending_pod |= changed;
        }
        self.contribute(&task, true);
        let plan_gated = plan_gate && !self.ungated.contains(&task.uid);
        if !plan_gate {
            self.ungated.remove(&task.uid);
        }
        let task = Arc::new(task);
        if let Some(j) = &task.job {
            self.job_tasks
                .entry(j.clone())
                .or_default()
                .insert(task.uid.clone(), task.clone());
        }
        self.pods.insert(
            task.uid.clone(),
            PodEntry {
                task,
                ours,
                parked,
                plan_gated,
                native_member,
            },
        );
    }

    /// A pod was deleted.
    pub fn delete_pod(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        self.assumed.remove(uid);
        self.evicting.remove(uid);
        self.ungated.remove(uid);
        if let Some(old) = self.pods.remove(uid) {
            self.contribute(&old.task, false);
            if let Some(j) = &old.task.job
                && let Some(set) = self.job_tasks.get_mut(j)
            {
                set.remove(uid);
            }
            self.changes.capacity = true;
        }
    }

    /// Puts `task` in force for the known pod `uid` whose job is unchanged, in its entry and
    /// in its job's tasks alike.
    fn replace_task(&mut self, uid: &str, task: TaskInfo) {
        let task = Arc::new(task);
        if let Some(j) = &task.job
            && let Some(slot) = self.job_tasks.get_mut(j).and_then(|m| m.get_mut(uid))
        {
            *slot = task.clone();
        }
        if let Some(e) = self.pods.get_mut(uid) {
            e.task = task;
        }
    }

    /// A relist replaced every pod.
    pub fn reset_pods(&mut self, pods: &[&Pod]) {
        self.reset_digests(pods.iter().filter_map(|p| Self::digest(p)).collect());
    }

    /// [`Self::reset_pods`], from the pods' digests (what a relist buffers: a fraction of the
    /// pods themselves).
    pub fn reset_digests(&mut self, pods: Vec<PodDigest>) {
        self.pods.clear();
        self.job_tasks.clear();
        for n in self.nodes.values_mut().map(Arc::make_mut) {
            n.used = Resource::zero();
            n.releasing = Resource::zero();
            n.task_count = 0;
            n.used_ports.clear();
        }
        let live: HashSet<String> = pods.iter().map(|p| p.task.uid.clone()).collect();
        self.assumed.retain(|k, _| live.contains(k));
        self.evicting.retain(|k, _| live.contains(k));
        self.ungated.retain(|k| live.contains(k));
        for p in pods {
            self.apply_digest(p);
        }
        self.changes.capacity = true;
    }

    // ----- assumed placements -----

    /// Counts `uid` against `node` until it shows up bound, is deleted, or `ttl` passes after
    /// its pod was handed to kube-scheduler (see [`Self::expire_assumed`]). Returns `false`
    /// when the pod is unknown or already placed.
    pub fn assume(&mut self, uid: &str, node: &str, ttl: Duration, now: Instant) -> bool {
        let Some(entry) = self.pods.get(uid) else {
            return false;
        };
        if entry.task.node.is_some() && !entry.task.assumed {
            return false;
        }
        let mut task = TaskInfo::clone(&entry.task);
        self.contribute(&task, false);
        self.assumed.insert(
            uid.to_string(),
            Assumed {
                node: node.to_string(),
                since: now,
                expires: now + ttl,
                ttl,
            },
        );
        task.node = Some(node.to_string());
        task.status = TaskStatus::Binding;
        task.assumed = true;
        self.contribute(&task, true);
        self.replace_task(uid, task);
        true
    }

    /// Drops an assumed placement (a bind failed or was given up); the pod is Pending again.
    pub fn forget(&mut self, uid: &str) -> bool {
        if self.assumed.remove(uid).is_none() {
            return false;
        }
        if let Some(old) = self.pods.get(uid).map(|e| e.task.clone())
            && old.assumed
        {
            self.contribute(&old, false);
            let mut task = TaskInfo::clone(&old);
            task.node = None;
            task.status = TaskStatus::Pending;
            task.assumed = false;
            self.replace_task(uid, task);
            self.changes.capacity = true;
        }
        true
    }

    /// Counts a placed pod as releasing from now on (its node's room as freed for the plan):
    /// a session evicted it, and until the API shows the pod deleting, the next sessions would
    /// otherwise see it running, choose victims again for the same preemptor, and give the
    /// room the evictions free to whatever pod comes first (Volcano's cache marks an evicted
    /// task releasing at once, too). Ends when the pod is seen deleting or deleted, or after
    /// `ttl` (an eviction the API refused). Returns `false` when the pod is unknown or not
    /// running on a node.
    pub fn assume_evicted(&mut self, uid: &str, ttl: Duration, now: Instant) -> bool {
        let Some(entry) = self.pods.get(uid) else {
            return false;
        };
        let underlying = entry.task.status;
        if !matches!(underlying, TaskStatus::Running | TaskStatus::Bound) {
            return false;
        }
        let mut task = TaskInfo::clone(&entry.task);
        self.contribute(&task, false);
        task.status = TaskStatus::Releasing;
        self.contribute(&task, true);
        self.replace_task(uid, task);
        self.evicting
            .insert(uid.to_string(), (now + ttl, underlying));
        true
    }

    /// Ends the evictions assumed before `now` whose pods the API never showed deleting: they
    /// count as running again.
    fn expire_evictions(&mut self, now: Instant) {
        let expired: Vec<(String, TaskStatus)> = self
            .evicting
            .iter()
            .filter(|(_, (until, _))| *until <= now)
            .map(|(k, (_, s))| (k.clone(), *s))
            .collect();
        for (uid, underlying) in expired {
            self.evicting.remove(&uid);
            if let Some(old) = self.pods.get(&uid).map(|e| e.task.clone())
                && old.status == TaskStatus::Releasing
            {
                self.contribute(&old, false);
                let mut task = TaskInfo::clone(&old);
                task.status = underlying;
                self.contribute(&task, true);
                self.replace_task(&uid, task);
                self.changes.capacity = true;
            }
        }
    }

    /// Releases every assumed placement whose time has passed, and ends assumed evictions
    /// whose time has passed; returns how many placements were released.
    ///
    /// A placement whose pod still carries the plan gate does not lapse: nobody else can bind
    /// that pod, and the time is meant for kube-scheduler to bind it. Under a burst the gate
    /// removals and Bindings queue up behind a busy API server for longer than the time, and
    /// a placement released there was made again by the next session while its gate was on
    /// its way off, so the gang's binds met a plan that had moved. Its time starts again when
    /// the gate comes off ([`Self::note_plan_gate_removed`]).
    pub fn expire_assumed(&mut self, now: Instant) -> usize {
        self.expire_evictions(now);
        let expired: Vec<String> = self
            .assumed
            .iter()
            .filter(|(uid, a)| self.lapsed(uid, a, now))
            .map(|(k, _)| k.clone())
            .collect();
        for uid in &expired {
            self.forget(uid);
        }
        expired.len()
    }

    /// Has placement `a` of pod `uid` lapsed by `now` (see [`Self::expire_assumed`])?
    fn lapsed(&self, uid: &str, a: &Assumed, now: Instant) -> bool {
        a.expires <= now && !self.plan_gated(uid)
    }

    /// The node a pod is assumed on, if any.
    pub fn assumed_node(&self, uid: &str) -> Option<&str> {
        self.assumed.get(uid).map(|a| a.node.as_str())
    }

    /// When the pod's assumed placement was made, if it has one.
    pub fn assumed_since(&self, uid: &str) -> Option<Instant> {
        self.assumed.get(uid).map(|a| a.since)
    }

    /// Pods placed by a session at or before `placed_by` that kube-scheduler has parked as
    /// unschedulable (it turned them down itself, before asking the extender, when its own view
    /// of the nodes was full): `(uid, namespace, name, when placed)`. Nothing moves such a pod
    /// back to kube-scheduler's queue by itself; see the extender's nudger.
    pub fn parked_placements(&self, placed_by: Instant) -> Vec<(String, String, String, Instant)> {
        self.assumed
            .iter()
            .filter(|(_, a)| a.since <= placed_by)
            .filter_map(|(uid, a)| {
                let e = self.pods.get(uid)?;
                (e.parked && e.task.assumed).then(|| {
                    (
                        uid.clone(),
                        e.task.namespace.clone(),
                        e.task.name.clone(),
                        a.since,
                    )
                })
            })
            .collect()
    }

    /// Pods whose [`keys::PLAN_GATE`] is due to be removed (see the extender's nudger):
    /// `(uid, namespace, name)`, what sessions placed and the index still sees gated.
    ///
    /// kube-scheduler holds back a native PodGroup (`spec.schedulingGroup`) while any of its
    /// pods is gated, so a gang's gated native members go together: all of them once the
    /// session has placed as many of the gang's pods, with that many fewer of the placed
    /// elastic pods (pods of one task are alike, so the room counted is the same), or, for a
    /// gang whose native group is larger than its minimum (a Deployment's, say), all of them
    /// once the placed pods and the members already through reach `minMember`: kube-scheduler
    /// then places whatever fits beyond the minimum. Fewer placed: none, since ungating part
    /// of a group starts nothing.
    pub fn placed_plan_gated(&self) -> Vec<GateDue> {
        let row = |uid: &String, e: &PodEntry, pin: &Option<Arc<Pin>>| GateDue {
            uid: uid.clone(),
            namespace: e.task.namespace.clone(),
            name: e.task.name.clone(),
            pin: pin.clone(),
        };
        let mut by_gang: BTreeMap<Option<&JobId>, Vec<(&String, &PodEntry)>> = BTreeMap::new();
        for uid in self.assumed.keys() {
            if let Some(e) = self.pods.get(uid)
                && e.plan_gated
                && e.task.assumed
            {
                by_gang
                    .entry(e.task.job.as_ref())
                    .or_default()
                    .push((uid, e));
            }
        }
        let mut out = Vec::new();
        for (gang, placed) in by_gang {
            // The gang's native members: still gated, and already through the gate (not
            // finished), in one pass over its pods.
            let mut members: Vec<(&String, &PodEntry)> = Vec::new();
            let mut through = 0usize;
            for (uid, e) in gang
                .and_then(|g| self.job_tasks.get(g))
                .into_iter()
                .flat_map(BTreeMap::keys)
                .filter_map(|uid| self.pods.get_key_value(uid))
                .filter(|(_, e)| e.native_member)
            {
                if e.plan_gated {
                    members.push((uid, e));
                } else if !e.task.status.is_completed() {
                    through += 1;
                }
            }
            if members.is_empty() {
                out.extend(placed.into_iter().map(|(u, e)| row(u, e, &None)));
                continue;
            }
            let released: Vec<(&String, &PodEntry)> = if placed.len() >= members.len() {
                let extra = placed.len() - members.len();
                let elastic = placed.iter().filter(|(_, e)| !e.native_member).take(extra);
                members.iter().chain(elastic).copied().collect()
            } else {
                let min_member = gang
                    .and_then(|g| self.podgroups.get(g))
                    .and_then(|pg| pg.spec.min_member)
                    .unwrap_or(1);
                let enough = i64::try_from(placed.len() + through).unwrap_or(i64::MAX)
                    >= i64::from(min_member);
                if enough { members } else { Vec::new() }
            };
            if released.is_empty() {
                continue;
            }
            // Worked out only for a gang whose gates do come off this round.
            let pin = gang.and_then(|g| self.native_pin(g, placed.iter().map(|(u, _)| *u)));
            out.extend(released.into_iter().map(|(u, e)| row(u, e, &pin)));
        }
        out
    }

    /// The nodes a native gang's members are kept to when their gates come off: for a gang
    /// whose PodGroup asks for a hard network topology, those of the lowest-tier HyperNode (at
    /// a tier it allows) holding every node the session placed `placed` (pod uids) on — the
    /// HyperNode the session chose. `None` without such a constraint, without HyperNodes, or
    /// when no HyperNode holds them all (a session does not place a hard gang so).
    fn native_pin<'a>(
        &self,
        gang: &JobId,
        placed: impl Iterator<Item = &'a String>,
    ) -> Option<Arc<Pin>> {
        let nt = self.podgroups.get(gang)?.spec.network_topology.as_ref()?;
        if self.hypernodes.is_empty() {
            return None;
        }
        let mut names: Vec<&str> = self.nodes.keys().map(String::as_str).collect();
        names.sort_unstable();
        let topology = self.topology_over(&names);
        let c = crate::actions::topology::constraint_from(nt, &topology)?;
        if !c.hard {
            return None;
        }
        let mut on: Vec<NodeIx> = placed
            .filter_map(|uid| self.assumed_node(uid))
            .filter_map(|n| names.binary_search(&n).ok().map(NodeIx::new))
            .collect();
        on.sort();
        on.dedup();
        let (_, domain) = topology.domains_for(c.highest_tier, &on).next()?;
        let nodes: Vec<String> = domain
            .nodes
            .iter()
            .map(|&n| names[n.index()].to_string())
            .collect();
        let hostnames = nodes
            .iter()
            .map(|n| self.nodes.get(n)?.labels.get(HOSTNAME_LABEL).cloned())
            .collect();
        Some(Arc::new(Pin { nodes, hostnames }))
    }

    /// The HyperNodes over `names` (every node's name, sorted: a node's position in it is its
    /// [`NodeIx`]).
    fn topology_over(&self, names: &[&str]) -> Topology {
        let resolved = self.resolved();
        Topology::from_resolved(
            resolved.iter().map(|r| {
                (
                    r.name.as_str(),
                    r.tier,
                    r.tier_name.as_str(),
                    r.nodes.as_slice(),
                )
            }),
            |n| names.binary_search(&n).ok().map(NodeIx::new),
        )
    }

    /// `true` while the pod carries [`keys::PLAN_GATE`] as the index last saw it.
    pub fn plan_gated(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|e| e.plan_gated)
    }

    /// Notes that the API answered a removal of the pod's [`keys::PLAN_GATE`] with the pod
    /// ungated, before the watch brings that pod: whoever binds the gang next need not wait
    /// for the event, and events from before the removal that the watch still brings do not
    /// put the gate back. The pod's placement gets its whole time from `now` (the moment
    /// kube-scheduler can see the pod), whether or not the watch showed the removal first.
    pub fn note_plan_gate_removed(&mut self, uid: &str, now: Instant) {
        if let Some(e) = self.pods.get_mut(uid)
            && e.plan_gated
        {
            e.plan_gated = false;
            self.ungated.insert(uid.to_string());
        }
        if let Some(a) = self.assumed.get_mut(uid) {
            a.expires = a.expires.max(now + a.ttl);
        }
    }

    /// `true` for a pod of a native PodGroup (`spec.schedulingGroup`): kube-scheduler places
    /// and binds it with its group, never the extender's binder.
    pub fn native_member(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|e| e.native_member)
    }

    /// The task of a pod, by uid.
    pub fn task(&self, uid: &str) -> Option<&TaskInfo> {
        self.pods.get(uid).map(|e| &*e.task)
    }

    /// Is pod `uid` known and served by this service (its `schedulerName` is ours)?
    pub fn is_ours(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|e| e.ours)
    }

    /// The PodGroup of a job, if known.
    pub fn podgroup(&self, job: &str) -> Option<&Arc<PodGroup>> {
        self.podgroups.get(job)
    }

    /// A node, by name.
    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(name).map(|n| &**n)
    }

    /// The tasks of a job.
    pub fn job_tasks(&self, job: &str) -> impl Iterator<Item = &TaskInfo> {
        self.job_tasks
            .get(job)
            .into_iter()
            .flat_map(BTreeMap::values)
            .map(|t| &**t)
    }

    // ----- podgroups, queues, priority classes -----

    /// A PodGroup was added or changed.
    pub fn apply_podgroup(&mut self, pg: &PodGroup) {
        let ns = pg.metadata.namespace.clone().unwrap_or_default();
        let Some(name) = pg.metadata.name.clone() else {
            return;
        };
        let id = format!("{ns}/{name}");
        if let Some(d) = self.decided.get(&id)
            && (pg.metadata.uid.as_ref() != Some(&d.uid)
                || pg.status.as_ref().and_then(|s| s.phase.as_ref()) != d.from.as_ref())
        {
            // The watch caught up with the decision, or someone changed the phase since, or
            // this is another PodGroup: the watch's phase counts. (Only the phase it showed
            // when the session decided, an event older than the write, keeps the decision.)
            self.decided.remove(&id);
        }
        let changed = self.podgroups.get(&id).is_none_or(|old| {
            old.spec != pg.spec || old.metadata.annotations != pg.metadata.annotations
        });
        self.changes.gang |= changed;
        if !self.podgroup_seen.contains_key(&id) {
            self.podgroup_seen.insert(id.clone(), self.next_seen);
            self.next_seen += 1;
        }
        self.podgroups.insert(id, Arc::new(pg.clone()));
    }

    /// Phases a session decided (`(namespace, name, uid, phase)` of each PodGroup whose status
    /// it writes), taken as the PodGroups' phases by later sessions until the watch shows them
    /// or `until`.
    ///
    /// Why: the writes land a moment after the session, and a session that read the older
    /// phase meanwhile decided against the earlier one: a gang just admitted (Inqueue) read as
    /// Pending was judged for admission again, refused once other gangs had grown into the room
    /// it was admitted with, and written back to Pending; the room held for it was gone (Volcano's
    /// "Schedule Multiple Jobs"). Volcano's scheduler cache takes its own status writes at once;
    /// this is the same for the phase, the one field a session's decisions read.
    pub fn decided_phases<'a>(
        &mut self,
        decided: impl IntoIterator<Item = (&'a str, &'a str, &'a str, &'a PodGroupPhase)>,
        until: Instant,
    ) {
        for (ns, name, uid, phase) in decided {
            let id = format!("{ns}/{name}");
            let Some(pg) = self
                .podgroups
                .get(&id)
                .filter(|pg| pg.metadata.uid.as_deref() == Some(uid))
            else {
                continue;
            };
            let from = pg.status.as_ref().and_then(|s| s.phase.clone());
            if from.as_ref() == Some(phase) {
                self.decided.remove(&id);
            } else {
                self.decided.insert(
                    id,
                    Decided {
                        uid: uid.to_string(),
                        from,
                        phase: phase.clone(),
                        until,
                    },
                );
            }
        }
    }

    /// Members beyond a gang's minimum are placed only `delay` after a session first found
    /// the gang ready (placed its minimum), `--schedule-period` in `tephra serve`.
    ///
    /// Why: Volcano runs a session once a period, so the gangs submitted within one period
    /// are all admitted and given their minimum before any of them grows beyond it, and
    /// gangs submitted together all start (Volcano's "Schedule Multiple Jobs": three jobs of
    /// as many pods as the cluster has cpus, each needing 2). tephra places a gang as soon as
    /// its pods exist, so the first gang's extra members would fill the cluster before the
    /// next gang's PodGroup even existed. A gang still starts at once; only its growth waits,
    /// one period at most, as it would in Volcano.
    pub fn set_grow_delay(&mut self, delay: Duration) {
        self.grow_delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
    }

    /// A session found `job` ready at `now_ms`: the first time, its growth is allowed from one
    /// grow delay later, which is returned (a session is due then).
    pub fn gang_ready(&mut self, job: &str, now_ms: i64) -> Option<i64> {
        if self.grow_delay_ms == 0 || self.grow_from.contains_key(job) {
            return None;
        }
        let from = now_ms.saturating_add(self.grow_delay_ms);
        self.grow_from.insert(job.to_string(), from);
        Some(from)
    }

    /// Forgets decided phases older than `now` (a write that failed, or a PodGroup someone else
    /// changed since: the watch's phase counts again).
    pub fn expire_decided(&mut self, now: Instant) {
        self.decided.retain(|_, d| d.until > now);
    }

    /// A PodGroup was deleted.
    pub fn delete_podgroup(&mut self, pg: &PodGroup) {
        let ns = pg.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(name) = pg.metadata.name.as_deref() {
            let id = format!("{ns}/{name}");
            self.decided.remove(&id);
            self.grow_from.remove(&id);
            self.podgroups.remove(&id);
            self.podgroup_seen.remove(&id);
            self.changes.capacity = true;
        }
    }

    /// A relist replaced every PodGroup.
    pub fn reset_podgroups(&mut self, pgs: &[&PodGroup]) {
        self.podgroups.clear();
        for pg in pgs {
            self.apply_podgroup(pg);
        }
        let podgroups = &self.podgroups;
        self.podgroup_seen
            .retain(|id, _| podgroups.contains_key(id));
    }

    /// A Queue was added or changed.
    pub fn apply_queue(&mut self, q: &Queue) {
        if let Some(name) = q.metadata.name.clone() {
            self.changes.gang = true;
            self.queues.insert(name, Arc::new(q.clone()));
        }
    }

    /// A Queue was deleted.
    pub fn delete_queue(&mut self, q: &Queue) {
        if let Some(name) = q.metadata.name.as_deref() {
            // Its gangs are not scheduled any more, and are told why: a session must run.
            self.changes.gang = true;
            self.queues.remove(name);
        }
    }

    /// A relist replaced every Queue.
    pub fn reset_queues(&mut self, qs: &[&Queue]) {
        self.queues.clear();
        for q in qs {
            self.apply_queue(q);
        }
    }

    /// A PriorityClass was added or changed.
    pub fn apply_priority_class(&mut self, pc: &PriorityClass) {
        if let Some(name) = pc.metadata.name.clone() {
            self.priority_classes.insert(
                name,
                (pc.value.unwrap_or(0), pc.global_default.unwrap_or(false)),
            );
        }
    }

    /// A PriorityClass was deleted.
    pub fn delete_priority_class(&mut self, pc: &PriorityClass) {
        if let Some(name) = pc.metadata.name.as_deref() {
            self.priority_classes.remove(name);
        }
    }

    /// A relist replaced every PriorityClass.
    pub fn reset_priority_classes(&mut self, pcs: &[&PriorityClass]) {
        self.priority_classes.clear();
        for pc in pcs {
            self.apply_priority_class(pc);
        }
    }

    // ----- snapshot -----

    fn queue_info(q: &Queue) -> QueueInfo {
        let name = q.metadata.name.clone().unwrap_or_default();
        let spec = &q.spec;
        let nonzero = |r: Resource| if r.is_empty() { None } else { Some(r) };
        QueueInfo {
            parent: spec
                .parent
                .clone()
                .filter(|p| !p.is_empty())
                .or_else(|| (name != keys::ROOT_QUEUE).then(|| keys::ROOT_QUEUE.to_string())),
            weight: spec.weight.filter(|w| *w > 0).unwrap_or(1),
            priority: spec.priority.unwrap_or(0),
            capability: spec
                .capability
                .as_ref()
                .map(Resource::from_list)
                .and_then(nonzero),
            guarantee: spec
                .guarantee
                .as_ref()
                .and_then(|g| g.resource.as_ref())
                .map(Resource::from_list)
                .and_then(nonzero),
            deserved: spec
                .deserved
                .as_ref()
                .map(Resource::from_list)
                .and_then(nonzero),
            state: q
                .status
                .as_ref()
                .and_then(|s| s.state.clone())
                .unwrap_or(QueueState::Open),
            reclaimable: spec.reclaimable.unwrap_or(true),
            created: secs(q.metadata.creation_timestamp.as_ref()),
            status_allocated: q
                .status
                .as_ref()
                .and_then(|s| s.allocated.as_ref())
                .map(Resource::from_list),
            affinity: spec.affinity.clone(),
            name,
        }
    }

    // ----- ResourceQuotas -----

    /// A ResourceQuota was added or changed (its `used` moves as pods come and go: gangs
    /// waiting for quota may now fit).
    pub fn apply_resource_quota(&mut self, rq: &ResourceQuota) {
        let (Some(ns), Some(name)) = (rq.metadata.namespace.clone(), rq.metadata.name.clone())
        else {
            return;
        };
        let status = rq.status.as_ref();
        let hard = status
            .and_then(|s| s.hard.as_ref())
            .or(rq.spec.as_ref().and_then(|s| s.hard.as_ref()));
        let info = QuotaInfo {
            hard: hard.map(Resource::from_list).unwrap_or_default(),
            hard_names: hard
                .map(|h| h.keys().cloned().collect())
                .unwrap_or_default(),
            used: status
                .and_then(|s| s.used.as_ref())
                .map(Resource::from_list)
                .unwrap_or_default(),
            namespace: ns.clone(),
            name: name.clone(),
        };
        let key = format!("{ns}/{name}");
        if self.quotas.get(&key) != Some(&info) {
            self.quotas.insert(key, info);
            self.changes.capacity = true;
        }
    }

    /// A ResourceQuota was deleted.
    pub fn delete_resource_quota(&mut self, rq: &ResourceQuota) {
        let key = format!(
            "{}/{}",
            rq.metadata.namespace.as_deref().unwrap_or_default(),
            rq.metadata.name.as_deref().unwrap_or_default()
        );
        if self.quotas.remove(&key).is_some() {
            self.changes.capacity = true;
        }
    }

    /// A relist replaced every ResourceQuota.
    pub fn reset_resource_quotas(&mut self, rqs: &[&ResourceQuota]) {
        self.quotas.clear();
        for rq in rqs {
            self.apply_resource_quota(rq);
        }
        self.changes.capacity = true;
    }

    // ----- PodDisruptionBudgets -----

    /// A PodDisruptionBudget was added or changed. Only preemption reads them: not a change
    /// a session is run for.
    pub fn apply_pod_disruption_budget(&mut self, pdb: &PodDisruptionBudget) {
        let (Some(ns), Some(name)) = (pdb.metadata.namespace.clone(), pdb.metadata.name.clone())
        else {
            return;
        };
        let status = pdb.status.as_ref();
        let info = BudgetInfo {
            selector: pdb.spec.as_ref().and_then(|s| s.selector.clone()),
            allowed: status.and_then(|s| s.disruptions_allowed).unwrap_or(0),
            disrupted: status
                .and_then(|s| s.disrupted_pods.as_ref())
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default(),
            namespace: ns.clone(),
            name: name.clone(),
        };
        self.budgets.insert(format!("{ns}/{name}"), info);
    }

    /// A PodDisruptionBudget was deleted.
    pub fn delete_pod_disruption_budget(&mut self, pdb: &PodDisruptionBudget) {
        self.budgets.remove(&format!(
            "{}/{}",
            pdb.metadata.namespace.as_deref().unwrap_or_default(),
            pdb.metadata.name.as_deref().unwrap_or_default()
        ));
    }

    /// A relist replaced every PodDisruptionBudget.
    pub fn reset_pod_disruption_budgets(&mut self, pdbs: &[&PodDisruptionBudget]) {
        self.budgets.clear();
        for pdb in pdbs {
            self.apply_pod_disruption_budget(pdb);
        }
    }

    // ----- HyperNodes -----

    /// A HyperNode was added or changed. Gangs with a network topology may now fit (or no
    /// longer), so it counts as a capacity change.
    pub fn apply_hypernode(&mut self, hn: &HyperNode) {
        let Some(name) = hn.metadata.name.clone() else {
            return;
        };
        if self
            .hypernodes
            .get(&name)
            .is_some_and(|old| old.spec == hn.spec)
        {
            // A status update (its node count) changes nothing a session reads.
            return;
        }
        self.hypernodes.insert(name, Arc::new(hn.clone()));
        self.resolved = OnceLock::new();
        self.changes.capacity = true;
    }

    /// A HyperNode was deleted.
    pub fn delete_hypernode(&mut self, hn: &HyperNode) {
        if let Some(name) = hn.metadata.name.as_deref()
            && self.hypernodes.remove(name).is_some()
        {
            self.resolved = OnceLock::new();
            self.changes.capacity = true;
        }
    }

    /// A relist replaced every HyperNode.
    pub fn reset_hypernodes(&mut self, hns: &[&HyperNode]) {
        self.hypernodes.clear();
        for hn in hns {
            if let Some(name) = hn.metadata.name.clone() {
                self.hypernodes.insert(name, Arc::new((*hn).clone()));
            }
        }
        self.resolved = OnceLock::new();
        self.changes.capacity = true;
    }

    /// Every HyperNode with its nodes' names (resolved once per change).
    fn resolved(&self) -> Arc<Vec<Resolved>> {
        self.resolved
            .get_or_init(|| {
                let hns: Vec<&HyperNode> = self.hypernodes.values().map(|h| &**h).collect();
                let mut names: Vec<&String> = self.nodes.keys().collect();
                names.sort();
                let nodes: Vec<NodeRef<'_>> = names
                    .iter()
                    .map(|n| NodeRef {
                        name: n.as_str(),
                        labels: &self.nodes[*n].labels,
                    })
                    .collect();
                let sets = topology::resolve(&hns, &nodes);
                Arc::new(
                    hns.iter()
                        .zip(sets)
                        .map(|(h, set)| Resolved {
                            name: h.metadata.name.clone().unwrap_or_default(),
                            tier: h.spec.tier(),
                            tier_name: h.spec.tier_name.clone().unwrap_or_default(),
                            nodes: set.into_iter().map(|i| nodes[i].name.to_string()).collect(),
                        })
                        .collect(),
                )
            })
            .clone()
    }

    /// Copies what a session needs: [`Self::snapshot_source`], then
    /// [`SnapshotSource::build`].
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_source().build()
    }

    /// What a session does with the index before it decides, all under one lock: lapsed
    /// placements and decided phases are let go, the changes so far are taken as seen, and
    /// the session's source is taken. Returns how many placements lapsed, and the source.
    pub fn begin_session(&mut self, now: Instant) -> (usize, SnapshotSource) {
        let expired = self.expire_assumed(now);
        self.expire_decided(now);
        self.take_changes();
        (expired, self.snapshot_source())
    }

    /// What a session's copy is made from: the nodes and tasks as shared handles, the
    /// PodGroups with what only the index knows of them resolved. Cheap (no task or node is
    /// copied), so a caller holding the index behind a lock takes this under the lock and
    /// builds the copy after releasing it: the filter and the watches then wait for this,
    /// not for tens of thousands of task copies.
    pub fn snapshot_source(&self) -> SnapshotSource {
        let mut nodes: Vec<Arc<NodeInfo>> = self.nodes.values().cloned().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let default_priority = self
            .priority_classes
            .values()
            .find(|(_, global)| *global)
            .map(|(v, _)| *v)
            .unwrap_or(0);
        let mut ids: Vec<&JobId> = self.podgroups.keys().collect();
        ids.sort();
        let mut jobs = Vec::with_capacity(ids.len());
        let mut orphans = Vec::new();
        let mut tasks = Vec::with_capacity(self.pods.len());
        for id in ids {
            let pg = &self.podgroups[id];
            let spec = &pg.spec;
            let queue = spec
                .queue
                .clone()
                .filter(|q| !q.is_empty())
                .unwrap_or_else(|| keys::DEFAULT_QUEUE.to_string());
            if !self.queues.contains_key(&queue) {
                orphans.push(Orphan {
                    id: id.clone(),
                    queue,
                    podgroup: pg.clone(),
                });
                continue;
            }
            let first = tasks.len();
            if let Some(of_job) = self.job_tasks.get(id) {
                tasks.extend(of_job.values().cloned());
            }
            jobs.push(JobSource {
                id: id.clone(),
                podgroup: pg.clone(),
                queue,
                priority: spec
                    .priority_class_name
                    .as_deref()
                    .and_then(|n| self.priority_classes.get(n))
                    .map(|(v, _)| *v)
                    .unwrap_or(default_priority),
                decided: match self.decided.get(id) {
                    Some(d) if pg.metadata.uid.as_ref() == Some(&d.uid) => Some(d.phase.clone()),
                    _ => None,
                },
                seen: self.podgroup_seen.get(id).copied().unwrap_or(u64::MAX),
                grow_from_ms: (self.grow_delay_ms > 0)
                    .then(|| self.grow_from.get(id).copied().unwrap_or(i64::MAX)),
                tasks: first..tasks.len(),
            });
        }
        let topology = if self.hypernodes.is_empty() {
            Topology::default()
        } else {
            // `nodes` is sorted by name: a node's position is its index.
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            self.topology_over(&names)
        };
        SnapshotSource {
            nodes,
            queues: self.queues.values().cloned().collect(),
            jobs,
            tasks,
            topology,
            quotas: self.quotas.values().cloned().collect(),
            budgets: self.budgets.values().cloned().collect(),
            default_priority,
            orphans,
        }
    }
}

/// What [`ClusterIndex::snapshot_source`] took from the index; [`Self::build`] makes the
/// session's copy from it, without the index.
#[derive(Debug)]
pub struct SnapshotSource {
    /// Sorted by name.
    nodes: Vec<Arc<NodeInfo>>,
    queues: Vec<Arc<Queue>>,
    /// Sorted by id; each names its range of `tasks`.
    jobs: Vec<JobSource>,
    tasks: Vec<Arc<TaskInfo>>,
    topology: Topology,
    quotas: Vec<QuotaInfo>,
    budgets: Vec<BudgetInfo>,
    default_priority: i32,
    orphans: Vec<Orphan>,
}

/// A PodGroup whose queue exists, with what the index knows of it besides the object.
#[derive(Debug)]
struct JobSource {
    id: JobId,
    podgroup: Arc<PodGroup>,
    queue: String,
    priority: i32,
    /// The phase a session decided and the API does not show yet.
    decided: Option<PodGroupPhase>,
    seen: u64,
    grow_from_ms: Option<i64>,
    tasks: std::ops::Range<usize>,
}

impl SnapshotSource {
    /// The copy a session works on.
    pub fn build(self) -> Snapshot {
        let mut queues: Vec<QueueInfo> = self
            .queues
            .iter()
            .map(|q| ClusterIndex::queue_info(q))
            .collect();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        let mut tasks = IxVec::from(Vec::with_capacity(self.tasks.len()));
        let mut jobs = IxVec::from(Vec::with_capacity(self.jobs.len()));
        for j in self.jobs {
            let job_tasks: Vec<TaskIx> = self.tasks[j.tasks]
                .iter()
                .map(|t| tasks.push(TaskInfo::clone(t)))
                .collect();
            let pg = &j.podgroup;
            let spec = &pg.spec;
            let annotations = pg.metadata.annotations.as_ref();
            let labels = pg.metadata.labels.as_ref();
            jobs.push(JobInfo {
                namespace: pg.metadata.namespace.clone().unwrap_or_default(),
                name: pg.metadata.name.clone().unwrap_or_default(),
                uid: pg.metadata.uid.clone().unwrap_or_default(),
                queue: j.queue,
                min_available: spec.min_member.unwrap_or(0).max(0),
                task_min_available: spec.min_task_member.clone().unwrap_or_default(),
                priority: j.priority,
                min_resources: spec.min_resources.as_ref().map(Resource::from_list),
                phase: j.decided.unwrap_or_else(|| {
                    pg.status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or(PodGroupPhase::Pending)
                }),
                created: secs(pg.metadata.creation_timestamp.as_ref()),
                preemptable: truthy(annotations.and_then(|a| a.get(keys::PREEMPTABLE)))
                    .or_else(|| truthy(labels.and_then(|l| l.get(keys::PREEMPTABLE))))
                    .unwrap_or(false),
                waiting_time: waiting_time(annotations),
                seen: j.seen,
                grow_from_ms: j.grow_from_ms,
                podgroup: j.podgroup.clone(),
                tasks: job_tasks,
                id: j.id,
            });
        }
        Snapshot {
            nodes: self
                .nodes
                .into_iter()
                .map(Arc::unwrap_or_clone)
                .collect::<Vec<_>>()
                .into(),
            jobs,
            tasks,
            queues: queues.into(),
            topology: self.topology,
            quotas: self.quotas,
            budgets: self.budgets,
            default_priority: self.default_priority,
            orphans: self.orphans,
        }
    }
}

/// Has kube-scheduler marked the pod unschedulable (`PodScheduled=False`, `Unschedulable`)?
fn has_plan_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == keys::PLAN_GATE))
}

fn is_parked(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
        })
}

fn constraints_of(spec: &k8s_openapi::api::core::v1::PodSpec) -> Constraints {
    let node_affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    let required_terms = node_affinity
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    let preferred_terms = node_affinity
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|ps| {
            ps.iter()
                .map(|p| (p.weight, p.preference.clone()))
                .collect()
        })
        .unwrap_or_default();
    let host_ports = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|h| *h > 0)?;
            Some((
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                p.host_ip.clone().unwrap_or_else(|| "0.0.0.0".into()),
                port,
            ))
        })
        .collect();
    let anti_affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|p| {
            p.required_during_scheduling_ignored_during_execution
                .clone()
        })
        .unwrap_or_default();
    Constraints {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        required_terms,
        preferred_terms,
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        host_ports,
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        labels: BTreeMap::new(),
        anti_affinity,
        needs_kube_scheduler: needs_kube_scheduler(spec),
    }
}

/// Whether the pod relies on kube-scheduler for more than the session checks: see
/// [`Constraints::needs_kube_scheduler`].
fn needs_kube_scheduler(spec: &k8s_openapi::api::core::v1::PodSpec) -> bool {
    let volumes = spec
        .volumes
        .iter()
        .flatten()
        .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
    let claims = spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty());
    let pod_affinity = spec
        .affinity
        .as_ref()
        .is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some());
    let spread = spec
        .topology_spread_constraints
        .as_ref()
        .is_some_and(|t| !t.is_empty());
    volumes || claims || pod_affinity || spread
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pod, podgroup, running};

    #[test]
    fn pods_relying_on_kube_scheduler_before_binding_are_marked() {
        let spec = |extra: serde_json::Value| -> k8s_openapi::api::core::v1::PodSpec {
            let mut v = serde_json::json!({"containers": [{"name": "c"}]});
            if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
                o.extend(e.clone());
            }
            serde_json::from_value(v).unwrap()
        };
        // Plain, a config map volume, node affinity: the session judges everything.
        assert!(!constraints_of(&spec(serde_json::json!({}))).needs_kube_scheduler);
        assert!(
            !constraints_of(&spec(serde_json::json!({
                "volumes": [{"name": "v", "configMap": {"name": "cm"}}],
                "affinity": {"nodeAffinity": {}}
            })))
            .needs_kube_scheduler
        );
        for extra in [
            serde_json::json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}),
            serde_json::json!({"volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}),
            serde_json::json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "g"}]}),
            serde_json::json!({"affinity": {"podAntiAffinity": {}}}),
            serde_json::json!({"affinity": {"podAffinity": {}}}),
            serde_json::json!({"topologySpreadConstraints": [{"maxSkew": 1,
                "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
        ] {
            assert!(
                constraints_of(&spec(extra.clone())).needs_kube_scheduler,
                "{extra}"
            );
        }
    }

    /// A session's copy is built after the lock is released, while the watches and the
    /// extender go on changing the index: the copy must show the index as it was when the
    /// source was taken, and the index must keep its own changes (the two share nodes and
    /// tasks until one of them changes).
    #[test]
    fn a_snapshot_source_is_the_index_of_its_moment() {
        let mut idx = ClusterIndex::new(vec!["volcano".into()]);
        idx.apply_queue(&crate::testing::queue("default", 1));
        idx.apply_node(&crate::testing::node("node-0", 4, 16, 110));
        idx.apply_podgroup(&podgroup("ns", "g", "default", 2, None));
        let (a, b) = (
            pod("ns", "g-0", "g", 1000, 64),
            pod("ns", "g-1", "g", 1000, 64),
        );
        idx.apply_pod(&a);
        idx.apply_pod(&b);
        let uid_a = a.metadata.uid.clone().unwrap();
        let source = idx.snapshot_source();
        // After the source: one member bound, the other assumed onto the node.
        idx.apply_pod(&running(a, "node-0"));
        let uid_b = b.metadata.uid.clone().unwrap();
        assert!(idx.assume(&uid_b, "node-0", Duration::from_secs(30), Instant::now()));

        let then = source.build();
        assert_eq!(then.jobs.len(), 1);
        assert_eq!(then.jobs[JobIx::new(0)].tasks.len(), 2);
        assert!(
            then.tasks
                .iter()
                .all(|t| t.status == TaskStatus::Pending && t.node.is_none())
        );
        let node = &then.nodes[NodeIx::new(0)];
        assert_eq!((node.task_count, node.used.milli_cpu), (0, 0.0));

        let now = idx.snapshot();
        let status = |uid: &str| now.tasks.iter().find(|t| t.uid == uid).map(|t| t.status);
        assert_eq!(status(&uid_a), Some(TaskStatus::Running));
        assert_eq!(status(&uid_b), Some(TaskStatus::Binding));
        let node = &now.nodes[NodeIx::new(0)];
        assert_eq!((node.task_count, node.used.milli_cpu), (2, 2000.0));
        assert_eq!(idx.node("node-0").map(|n| n.task_count), Some(2));
    }

    /// A snapshot takes each job's tasks from the job's own list, not pod by pod: every way
    /// a task changes (placed, given back, evicted, the eviction lapsing, moved to another
    /// gang, deleted) must show there as it does in the pod's entry.
    #[test]
    fn a_snapshot_shows_each_task_as_the_index_holds_it_whatever_changed_it() {
        type Row = (String, Option<String>, TaskStatus, Option<String>);
        let check = |idx: &ClusterIndex, step: &str| {
            let snap = idx.snapshot();
            let mut seen: Vec<Row> = snap
                .jobs
                .iter()
                .flat_map(|j| j.tasks.iter().map(|t| &snap.tasks[*t]))
                .map(|t| (t.uid.clone(), t.job.clone(), t.status, t.node.clone()))
                .collect();
            let mut held: Vec<Row> = idx
                .pods
                .values()
                .map(|e| &e.task)
                .filter(|t| t.job.is_some())
                .map(|t| (t.uid.clone(), t.job.clone(), t.status, t.node.clone()))
                .collect();
            seen.sort();
            held.sort();
            assert_eq!(seen, held, "after {step}");
        };
        let mut idx = ClusterIndex::new(vec!["volcano".into()]);
        idx.apply_queue(&crate::testing::queue("default", 1));
        idx.apply_node(&crate::testing::node("node-0", 8, 16, 110));
        idx.apply_podgroup(&podgroup("ns", "g", "default", 2, None));
        idx.apply_podgroup(&podgroup("ns", "h", "default", 1, None));
        let (a, b) = (pod("ns", "a", "g", 1000, 64), pod("ns", "b", "g", 1000, 64));
        let (uid_a, uid_b) = ("uid-ns-a", "uid-ns-b");
        idx.apply_pod(&a);
        idx.apply_pod(&b);
        check(&idx, "two pods");
        let (ttl, now) = (Duration::from_secs(30), Instant::now());
        assert!(idx.assume(uid_a, "node-0", ttl, now));
        check(&idx, "a placement");
        assert!(idx.forget(uid_a));
        check(&idx, "the placement given back");
        idx.apply_pod(&running(b, "node-0"));
        assert!(idx.assume_evicted(uid_b, ttl, now));
        check(&idx, "an eviction");
        idx.expire_assumed(now + ttl * 2);
        check(&idx, "the eviction lapsing");
        idx.apply_pod(&pod("ns", "a", "h", 1000, 64));
        check(&idx, "a pod moving to another gang");
        assert_eq!(idx.job_tasks("ns/g").count(), 1);
        idx.delete_pod(&a);
        check(&idx, "a deletion");
        assert_eq!(idx.job_tasks("ns/h").count(), 0);
    }

    #[test]
    fn a_gang_member_that_starts_running_is_a_change() {
        let mut idx = ClusterIndex::new(vec!["volcano".into()]);
        idx.apply_podgroup(&podgroup("ns", "g", "default", 1, None));
        let p = pod("ns", "g-0", "g", 100, 64);
        idx.apply_pod(&p);
        idx.take_changes();
        // The same pod again: nothing new.
        idx.apply_pod(&p);
        assert!(!idx.take_changes().any());
        idx.apply_pod(&running(p, "node-0"));
        assert!(
            idx.take_changes().gang,
            "a member's new phase is due in its PodGroup status"
        );
    }
}
