//! Every well-known label, annotation, name and event reason of Volcano that tephra reads or
//! writes, with the values Volcano uses. "A" = annotation, "L" = label; the producer →
//! consumer is given where it helps.

// ---------------------------------------------------------------------------------------------
// Default names
// ---------------------------------------------------------------------------------------------

/// The queue a job or PodGroup without one goes to; created at start if missing.
pub const DEFAULT_QUEUE: &str = "default";
/// The root of the queue hierarchy; created at start if missing.
pub const ROOT_QUEUE: &str = "root";
/// The scheduler name Volcano serves by default (`--scheduler-name`).
pub const DEFAULT_SCHEDULER_NAME: &str = "volcano";
/// The task name given to pods of a job whose task has no name.
pub const DEFAULT_TASK_SPEC: &str = "default";
/// Prefix of PodGroups made for plain workloads: `podgroup-<owner uid>`.
pub const PODGROUP_NAME_PREFIX: &str = "podgroup-";

/// Name of the PodGroup of a plain workload's pod: `podgroup-` followed by the uid of the
/// pod's controller owner, or of the pod itself when it has none (Volcano's
/// `GeneratePodgroupName`).
pub fn workload_pod_group_name(controller_owner_uid: Option<&str>, pod_uid: &str) -> String {
    format!(
        "{PODGROUP_NAME_PREFIX}{}",
        controller_owner_uid.unwrap_or(pod_uid)
    )
}
/// Prefix shared by the annotations copied from a workload to its PodGroup.
pub const ANNOTATION_PREFIX: &str = "volcano.sh/";

// ---------------------------------------------------------------------------------------------
// scheduling.volcano.sh/v1beta1 labels.go
// ---------------------------------------------------------------------------------------------

/// A pod: name of its PodGroup (job controller writes `{job}-{uid}`, the PodGroup controller
/// `podgroup-{owner uid}`); the scheduler's job id is `namespace/value`.
pub const KUBE_GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// A pod: alternate PodGroup key (only Volcano's vGPU device code reads it).
pub const VOLCANO_GROUP_NAME_ANNOTATION: &str = "scheduling.volcano.sh/group-name";
/// A on a workload (ReplicaSet, StatefulSet, Deployment, batch Job) or its template:
/// `minMember` of its PodGroup; also asks for gang scheduling.
pub const GROUP_MIN_MEMBER_ANNOTATION: &str = "scheduling.volcano.sh/group-min-member";
/// A: defined by Volcano for `minResources`, unused.
pub const GROUP_MIN_RESOURCES_ANNOTATION: &str = "scheduling.volcano.sh/group-min-resources";
/// A on a pod or workload: its queue; on a namespace: the namespace's default queue.
pub const QUEUE_NAME_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";
/// A on a pod (`"true"`) and the name of the scheduling gate the pod webhook adds; the
/// scheduler removes the gate once the queue admits the pod.
pub const QUEUE_ALLOCATION_GATE: &str = "scheduling.volcano.sh/queue-allocation-gate";
/// The scheduling gate on the pods the Job controller creates for gangs of a scheduler this
/// service serves: kube-scheduler leaves a gated pod alone, and the extender removes the gate
/// once a session has placed the pod, so kube-scheduler asks about a gang pod only when the
/// plan has a node for it (no turned-down attempts, no backoff between room and bind).
pub const PLAN_GATE: &str = "scheduling.tephra.io/gang-plan";
/// A on a pod sent to kube-scheduler's own gang scheduling (`--gang-engine native`): the
/// scheduler name the pod asked for before `/pods/mutate` pointed `spec.schedulerName` at the
/// cluster's kube-scheduler profile. Whoever decides whether tephra serves a pod reads this
/// first ([`served_scheduler`]), so a Volcano pod stays tephra's in either engine.
pub const SCHEDULER_NAME_ANNOTATION: &str = "scheduling.tephra.io/scheduler-name";

/// A on a Volcano PodGroup the native engine sent to kube-scheduler's gang cycle: what
/// kube-scheduler said when it could not place the gang, while none of its pods is bound. The
/// session writes it into the PodGroup's `Unschedulable` condition where it would otherwise
/// call the gang scheduled (it placed the gang; kube-scheduler's snapshot disagreed).
pub const NATIVE_UNPLACED: &str = "scheduling.tephra.io/native-unplaced";

/// A on a gang pod beyond its gang's minimum (`true`), written by the Job controller when the
/// native engine runs: `/pods/mutate` leaves such a pod out of the native PodGroup, so
/// kube-scheduler's gang scheduling places the minimum whole and the rest one by one. (A
/// native PodGroup is held back while any of its pods is gated, so a gang larger than its
/// minimum would otherwise wait until every pod had room.)
pub const ELASTIC: &str = "scheduling.tephra.io/elastic";

/// The scheduler a pod asked for: [`SCHEDULER_NAME_ANNOTATION`] when the native engine moved it
/// to kube-scheduler's profile, else `spec.schedulerName` (`default-scheduler` when unset).
pub fn served_scheduler(pod: &k8s_openapi::api::core::v1::Pod) -> &str {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SCHEDULER_NAME_ANNOTATION))
        .map(String::as_str)
        .filter(|n| !n.is_empty())
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.scheduler_name.as_deref())
                .filter(|n| !n.is_empty())
        })
        .unwrap_or(KUBE_DEFAULT_SCHEDULER)
}

/// kube-scheduler's default profile, the scheduler of a pod that names none.
pub const KUBE_DEFAULT_SCHEDULER: &str = "default-scheduler";
/// A on a PodGroup: `true` when its pods come from a StatefulSet with `podManagementPolicy:
/// OrderedReady`, which makes each pod only once the one before is Ready. Written by the
/// PodGroup controller; the scheduler names it as the cause when such a gang waits for pods.
pub const ORDERED_PODS: &str = "scheduling.tephra.io/ordered-pods";
/// A on a PodGroup or job: sla plugin's maximum pending time.
pub const JOB_WAITING_TIME: &str = "volcano.sh/sla-waiting-time";
/// A on a PodGroup or job: the sla plugin's maximum pending time under its plain name, read
/// when [`JOB_WAITING_TIME`] is absent (Volcano reads both; its e2e specs use this one).
pub const JOB_WAITING_TIME_PLAIN: &str = "sla-waiting-time";
/// A on a queue: hdrf hierarchy path (`root/a/b`).
pub const HIERARCHY_ANNOTATION: &str = "volcano.sh/hierarchy";
/// A on a queue: hdrf hierarchy weights (`1/2/3`).
pub const HIERARCHY_WEIGHTS_ANNOTATION: &str = "volcano.sh/hierarchy-weights";
/// L on a node: its node group (nodegroup plugin).
pub const NODE_GROUP_NAME_LABEL: &str = "volcano.sh/nodegroup-name";
/// A on a queue: per node-group resource limits (nodegroup plugin).
pub const NODE_GROUP_RESOURCE_LIMITS_ANNOTATION: &str = "volcano.sh/nodegroup-resource-limits";
/// A/L job → pod, pod → PodGroup: preemptable flag (pod default true, PodGroup default false).
pub const PREEMPTABLE: &str = "volcano.sh/preemptable";
/// A/L: eviction cool-down, e.g. `600s`.
pub const COOLDOWN_TIME: &str = "volcano.sh/cooldown-time";
/// A job → pod, pod → PodGroup: revocable zone.
pub const REVOCABLE_ZONE: &str = "volcano.sh/revocable-zone";
/// A job → pod, pod → PodGroup: disruption budget, minimum available (int > 0 or 1–99%).
pub const JDB_MIN_AVAILABLE: &str = "volcano.sh/jdb-min-available";
/// A job → pod, pod → PodGroup: disruption budget, maximum unavailable (int > 0 or 1–99%).
pub const JDB_MAX_UNAVAILABLE: &str = "volcano.sh/jdb-max-unavailable";
/// A on a pod: NUMA policy, from the task's `topologyPolicy`.
pub const NUMA_POLICY: &str = "volcano.sh/numa-topology-policy";
/// A on a pod: NUMA topology decision (agents).
pub const TOPOLOGY_DECISION: &str = "volcano.sh/topology-decision";
/// A on a pod: QoS level (agents).
pub const QOS_LEVEL: &str = "volcano.sh/qos-level";

// ---------------------------------------------------------------------------------------------
// batch.volcano.sh/v1alpha1 labels.go
// ---------------------------------------------------------------------------------------------

/// A+L on a pod: its task name ([`DEFAULT_TASK_SPEC`] when absent).
pub const TASK_SPEC: &str = "volcano.sh/task-spec";
/// A+L on a pod: its replica index within the task.
pub const TASK_INDEX: &str = "volcano.sh/task-index";
/// A+L on a pod: the owning job.
pub const JOB_NAME: &str = "volcano.sh/job-name";
/// L on a pod: the job's namespace (svc / NetworkPolicy selectors).
pub const JOB_NAMESPACE: &str = "volcano.sh/job-namespace";
/// A+L on a pod (also read on workloads): the job's queue.
pub const QUEUE_NAME: &str = "volcano.sh/queue-name";
/// A on a pod: the job's `status.version` when the pod was made (stale-event filter).
pub const JOB_VERSION: &str = "volcano.sh/job-version";
/// A on a pod: the job's `status.retryCount` when the pod was made.
pub const JOB_RETRY_COUNT: &str = "volcano.sh/job-retry-count";
/// A on a pod: `{job}-{task}`, the pod's equivalence class.
pub const TEMPLATE_UID: &str = "volcano.sh/template-uid";
/// L on a pod: partition id (`index / partitionSize`).
pub const PARTITION_ID: &str = "volcano.sh/partition-id";
/// A on a job, A+L on its pods: `"true"` when the queue has `extendClusters`.
pub const JOB_FORWARDING: &str = "volcano.sh/job-forwarding";
/// A: multi-cluster target cluster (not used by tephra).
pub const FORWARD_CLUSTER: &str = "volcano.sh/forward-cluster";
/// A: multi-cluster original name (not used by tephra).
pub const BURST_NAME: &str = "volcano.sh/burst-name";
/// A: multi-cluster silo-only resource (not used by tephra).
pub const SILO_RESOURCE: &str = "volcano.sh/silo-resource";
/// L: job type (defined by Volcano, unused).
pub const JOB_TYPE: &str = "volcano.sh/job-type";
/// A on a job: when the CronJob that made it was due.
pub const CRONJOB_SCHEDULED_TIMESTAMP: &str = "volcano.sh/cronjob-scheduled-timestamp";

// ---------------------------------------------------------------------------------------------
// Other Volcano keys
// ---------------------------------------------------------------------------------------------

/// A on a pod (`"true"`): the controller is killing it; its events count as OutOfSync.
pub const CONTROLLER_OUT_OF_SYNC: &str = "volcano.sh/controller-out-of-sync";
/// A on a pod: network-topology mode for its PodGroup (`hard`/`soft`).
pub const NETWORK_TOPOLOGY_MODE: &str = "volcano.sh/network-topology-mode";
/// A on a pod: highest network tier for its PodGroup.
pub const NETWORK_TOPOLOGY_HIGHEST_TIER: &str = "volcano.sh/network-topology-highest-tier";
/// L on a HyperNode: which discovery made it (`label`); discovery owns, updates and deletes
/// only HyperNodes carrying its own source.
pub const NETWORK_TOPOLOGY_SOURCE: &str = "volcano.sh/network-topology-source";
/// A on a PodGroup: the hypernode the scheduler chose.
pub const JOB_ALLOCATED_HYPERNODE: &str = "volcano.sh/job-allocated-hypernode";
/// A on a pod: overrides the task's priority in the scheduler.
pub const TASK_PRIORITY: &str = "volcano.sh/task-priority";
/// A on a pod: resource-group selector for the pod webhook.
pub const RESOURCE_GROUP: &str = "volcano.sh/resource-group";
/// A on a queue (`"true"`/`"false"`): closed because its parent was.
pub const CLOSED_BY_PARENT: &str = "volcano.sh/closed-by-parent";
/// A on a pod: HCCL rank (hcclrank plugin).
pub const HCCL_RANK_INDEX: &str = "hccl/rankIndex";
/// L on a StatefulSet pod: its revision, matched against `status.updateRevision`.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";
/// L on a namespace: its name (webhook namespace selectors).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// A written by `kubectl apply`: the whole applied object (never copied onto PodGroups).
pub const KUBECTL_LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// A on every Volcano CRD: keep the CRD when the Helm release is deleted.
pub const HELM_RESOURCE_POLICY: &str = "helm.sh/resource-policy";

// ---------------------------------------------------------------------------------------------
// tephra's own keys
// ---------------------------------------------------------------------------------------------

/// A on a pod (embedded mode): the kubelet stand-in ends its containers after this many
/// seconds.
pub const SIM_RUN_SECONDS: &str = "simulation.tephra.io/run-seconds";
/// A on a pod (embedded mode): exit code of its containers when they end (default `"0"`).
pub const SIM_EXIT_CODE: &str = "simulation.tephra.io/exit-code";

// ---------------------------------------------------------------------------------------------
// Job plugins
// ---------------------------------------------------------------------------------------------

/// Names of Volcano's job plugins (`spec.plugins` keys).
pub mod plugins {
    /// Environment variables with task index and counts.
    pub const ENV: &str = "env";
    /// Headless Service, hosts ConfigMap and NetworkPolicy.
    pub const SVC: &str = "svc";
    /// Password-less SSH between the pods.
    pub const SSH: &str = "ssh";
    /// TF_CONFIG for TensorFlow.
    pub const TENSORFLOW: &str = "tensorflow";
    /// MPI host file and ports.
    pub const MPI: &str = "mpi";
    /// PyTorch MASTER_ADDR / WORLD_SIZE / RANK.
    pub const PYTORCH: &str = "pytorch";
    /// HCCL rank annotation.
    pub const HCCLRANK: &str = "hcclrank";
    /// Ray head/worker wiring.
    pub const RAY: &str = "ray";
    /// Every plugin name Volcano knows.
    pub const ALL: &[&str] = &[ENV, SVC, SSH, TENSORFLOW, MPI, PYTORCH, HCCLRANK, RAY];
}

// ---------------------------------------------------------------------------------------------
// Kubernetes Event reasons and condition reasons
// ---------------------------------------------------------------------------------------------

/// Reasons of Kubernetes Events the job controller records on a Job
/// (`pkg/controllers/job/constant.go` and `job.go`'s `JobEvent`).
pub mod job_events {
    /// A Command was executed.
    pub const COMMAND_ISSUED: &str = "CommandIssued";
    /// A job plugin failed.
    pub const PLUGIN_ERROR: &str = "PluginError";
    /// A PVC could not be made or found.
    pub const PVC_ERROR: &str = "PVCError";
    /// The PodGroup could not be made or updated.
    pub const POD_GROUP_ERROR: &str = "PodGroupError";
    /// A lifecycle action was executed.
    pub const EXECUTE_ACTION: &str = "ExecuteAction";
    /// The job status could not be written.
    pub const JOB_STATUS_ERROR: &str = "JobStatusError";
    /// The job's PodGroup is still pending (with the scheduler's reason).
    pub const POD_GROUP_PENDING: &str = "PodGroupPending";
    /// A pod could not be created.
    pub const FAILED_CREATE: &str = "FailedCreate";
    /// A pod was created (defined, unused by Volcano).
    pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
    /// A pod could not be deleted.
    pub const FAILED_DELETE: &str = "FailedDelete";
    /// A pod was deleted (defined, unused by Volcano).
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
}

/// Reasons and messages of PodGroup conditions (`scheduling/v1beta1/types.go`).
pub mod podgroup_reasons {
    /// A pod of the group failed.
    pub const POD_FAILED: &str = "PodFailed";
    /// A pod of the group was deleted.
    pub const POD_DELETED: &str = "PodDeleted";
    /// Not enough resources for the gang.
    pub const NOT_ENOUGH_RESOURCES: &str = "NotEnoughResources";
    /// tephra's: the native engine sent the gang to kube-scheduler, which could not place it
    /// (the condition carries [`NATIVE_UNPLACED`](super::NATIVE_UNPLACED)).
    pub const NOT_PLACED: &str = "NotPlaced";
    /// Fewer pods than `minMember` exist.
    pub const NOT_ENOUGH_TASKS: &str = "NotEnoughTasks";
    /// Fewer pods of a task than its `minTaskMember`.
    pub const NOT_ENOUGH_PODS_OF_TASK: &str = "NotEnoughPodsOfTask";
    /// Condition detail when the group is ready.
    pub const POD_GROUP_READY: &str = "pod group is ready";
    /// Condition detail when the group is not ready.
    pub const POD_GROUP_NOT_READY: &str = "pod group is not ready";
}

/// Queue events and actions (`scheduling/v1beta1/types.go`); the action names are also
/// [`crate::bus::Action`] values.
pub mod queue_events {
    /// The queue or one of its PodGroups changed.
    pub const OUT_OF_SYNC: &str = "OutOfSync";
    /// A Command was issued for the queue.
    pub const COMMAND_ISSUED: &str = "CommandIssued";
    /// Sync the queue's status.
    pub const SYNC_QUEUE: &str = "SyncQueue";
    /// Open the queue.
    pub const OPEN_QUEUE: &str = "OpenQueue";
    /// Close the queue.
    pub const CLOSE_QUEUE: &str = "CloseQueue";
}
