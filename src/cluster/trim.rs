//! What the shared watch caches keep of each kind. Every object is trimmed at the reflector,
//! before its store and its subscribers see it, down to the fields some reader in tephra
//! uses, so the memory tephra needs grows with what it reads rather than with whole objects
//! (a node's status lists its 50 largest images; a pod carries env, probes, mounts and the
//! API server's bookkeeping).
//!
//! The readers, and what they read:
//!
//! - the scheduler's index (`tephra_scheduler::ClusterIndex`, fed by the pod, node, PodGroup,
//!   Queue, PriorityClass, HyperNode, ResourceQuota and PodDisruptionBudget events): a pod's
//!   identity, labels, annotations, timestamps, scheduler name, priority, node name and
//!   selector, affinity, tolerations, container requests, host ports and init container
//!   restart policies, overhead and pod-level resources, scheduling gates and group, which
//!   volumes claim storage, resource claims, topology spread, phase and conditions; a node's
//!   name, labels, taints, `unschedulable`, allocatable (or capacity) and conditions;
//! - the Job controller: its pods' identity, owner, labels, annotations, deletion timestamp,
//!   phase, container readiness, restart counts and the first container's exit code;
//! - the PodGroup controller: a pod's owners, labels, annotations, scheduler name, priority
//!   class, requests and phase; its owners' uid, annotations, `replicas`,
//!   `podManagementPolicy` and `status.updateRevision`; namespace annotations;
//! - admission: queues and namespace annotations;
//! - the HyperNode controller: node names and labels;
//! - the web view and its what-if (which reads pods and nodes as `tephra simulate` does):
//!   besides the above, a pod's `status.startTime` and its containers' finish times.
//!
//! A reader that starts using a field dropped here must keep it here as well: the functions
//! below are the contract, and their tests run the readers on trimmed and untrimmed objects.
//!
//! No trimmed object is ever written back whole: pods, Queues and CronJobs are only patched
//! (a merge patch, or a JSON patch naming the keys it adds), Commands only deleted, and the
//! other kinds cut down here never written; the kinds a controller replaces from its cache
//! (vcJobs, PodGroups, HyperNodes) lose nothing but `managedFields`, which the API server
//! keeps as they are when an update omits them.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    Namespace, Node, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus, PodTemplateSpec, ResourceQuota,
    Volume,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1beta1 as native;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::DeserializeGuard;

use crate::api::keys::KUBECTL_LAST_APPLIED;
use crate::api::{Command, CronJob, HyperNode, Job, PodGroup, Queue};

/// Drops, in place, what no reader of the caches uses of an object of this kind.
pub trait Trim {
    /// Trims `self`.
    fn trim(&mut self);
}

/// Drops `managedFields`, the server-side apply bookkeeping: nothing in tephra reads it, and
/// on a pod it is about as large as everything else (one entry per writer, each a tree of
/// every field that writer set). Safe on every kind, written back or not: the API server
/// keeps an object's managed fields when an update omits them (on purpose, for clients that
/// do not know the field), and the embedded API keeps none.
pub fn managed_fields(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
}

/// [`managed_fields`], and kubectl's last-applied annotation, a copy of the whole object as
/// last applied: no reader looks it up, and those that copy annotations copy only
/// `volcano.sh/` keys and named ones. Only for kinds never written back whole (a replace
/// without it would delete it on the server, and a later `kubectl apply` could no longer
/// tell which fields it had set, so it would not remove those taken out of the manifest). An annotation map left empty stays `Some`: the Job
/// controller adds its out-of-sync mark with a JSON patch that creates the map only when the
/// cached pod has none, which on the server would replace the annotations the pod has.
pub fn metadata(meta: &mut ObjectMeta) {
    managed_fields(meta);
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(KUBECTL_LAST_APPLIED);
    }
}

/// A pod keeps its metadata (but [`metadata`]'s two), the spec fields the scheduler, the
/// PodGroup controller and the web view read, and phase, conditions, start time and per
/// container name, readiness, restart count and state. Dropped, as no reader uses them:
///
/// - of each container and init container: image, command, args, env, envFrom, working
///   directory, volume mounts and devices, probes, lifecycle hooks, security context,
///   termination message settings, pull policy, resize policy and the tty flags, and every
///   port without a host port (only host ports are checked for conflicts on a node);
/// - ephemeral containers (they add nothing to a pod's requests);
/// - every volume but PersistentVolumeClaims and generic ephemeral volumes, the only ones the
///   scheduler looks for (it leaves such pods' binding to kube-scheduler): no ConfigMaps,
///   Secrets, projected service-account tokens, emptyDirs or host paths;
/// - service account, DNS, hostname and subdomain (the Job controller reads those from its
///   job's templates, not from the pods), security context, image pull secrets, host
///   namespaces, restart policy, grace period and deadline, readiness gates, runtime class,
///   OS, preemption policy;
/// - of the status: host and pod IPs, QoS class, reason and message, nominated node,
///   resources and claims; of each container status, the image, its id, the container id,
///   the last state, mounts, resources and user, and the message of a waiting or terminated
///   state (up to 4 KiB each).
pub fn pod(pod: &mut Pod) {
    metadata(&mut pod.metadata);
    if let Some(spec) = pod.spec.take() {
        pod.spec = Some(pod_spec(spec));
    }
    if let Some(status) = pod.status.take() {
        pod.status = Some(pod_status(status));
    }
}

fn pod_spec(s: PodSpec) -> PodSpec {
    let volumes: Vec<Volume> = s
        .volumes
        .into_iter()
        .flatten()
        .filter(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
        .collect();
    PodSpec {
        containers: s.containers.into_iter().map(container).collect(),
        init_containers: s
            .init_containers
            .map(|cs| cs.into_iter().map(container).collect()),
        volumes: (!volumes.is_empty()).then_some(volumes),
        affinity: s.affinity,
        node_name: s.node_name,
        node_selector: s.node_selector,
        overhead: s.overhead,
        priority: s.priority,
        priority_class_name: s.priority_class_name,
        resource_claims: s.resource_claims,
        resources: s.resources,
        scheduler_name: s.scheduler_name,
        scheduling_gates: s.scheduling_gates,
        scheduling_group: s.scheduling_group,
        tolerations: s.tolerations,
        topology_spread_constraints: s.topology_spread_constraints,
        ..PodSpec::default()
    }
}

/// A container's name, requests and limits, host ports and restart policy (an init container
/// with `restartPolicy: Always` is a sidecar, counted alongside the regular containers).
fn container(c: Container) -> Container {
    let ports: Vec<_> = c
        .ports
        .into_iter()
        .flatten()
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .collect();
    Container {
        name: c.name,
        resources: c.resources,
        restart_policy: c.restart_policy,
        ports: (!ports.is_empty()).then_some(ports),
        ..Container::default()
    }
}

fn pod_status(s: PodStatus) -> PodStatus {
    PodStatus {
        phase: s.phase,
        conditions: s.conditions,
        start_time: s.start_time,
        container_statuses: s
            .container_statuses
            .map(|cs| cs.into_iter().map(container_status).collect()),
        init_container_statuses: s
            .init_container_statuses
            .map(|cs| cs.into_iter().map(container_status).collect()),
        ..PodStatus::default()
    }
}

fn container_status(c: ContainerStatus) -> ContainerStatus {
    ContainerStatus {
        name: c.name,
        ready: c.ready,
        restart_count: c.restart_count,
        state: c.state.map(|s| ContainerState {
            running: s.running,
            waiting: s
                .waiting
                .map(|w| ContainerStateWaiting { message: None, ..w }),
            terminated: s.terminated.map(|t| ContainerStateTerminated {
                message: None,
                container_id: None,
                ..t
            }),
        }),
        ..ContainerStatus::default()
    }
}

/// A node keeps its metadata (but [`metadata`]'s two), taints and `unschedulable`,
/// allocatable resources (capacity only when there is no allocatable: the readers fall back
/// to it) and conditions. Dropped: the status's images (the kubelet lists up to 50, each with
/// its digests and tags), node info, addresses, daemon endpoints, attached and in-use
/// volumes, config, features and runtime handlers, and the spec's pod CIDRs, provider id and
/// config source. Nothing in tephra reads them: the scheduler has no image locality, and
/// HyperNodes are found from labels.
pub fn node(node: &mut Node) {
    metadata(&mut node.metadata);
    node.spec = node.spec.take().map(|s| NodeSpec {
        taints: s.taints,
        unschedulable: s.unschedulable,
        ..NodeSpec::default()
    });
    node.status = node.status.take().map(|s| NodeStatus {
        capacity: if s.allocatable.is_some() {
            None
        } else {
            s.capacity
        },
        allocatable: s.allocatable,
        conditions: s.conditions,
        ..NodeStatus::default()
    });
}

/// The workloads are read only by the PodGroup controller, for the owners of the pods it
/// groups: their uid and annotations, and a ReplicaSet's or StatefulSet's `replicas`. Their
/// pod templates (as large as a pod's spec, and kept for every old ReplicaSet of a
/// Deployment's history) are never read: a gang's PodGroup is built from one of its pods.
pub fn replica_set(rs: &mut ReplicaSet) {
    metadata(&mut rs.metadata);
    rs.spec.template = None;
}

/// See [`replica_set`]: nothing of a Deployment's spec is read.
pub fn deployment(d: &mut Deployment) {
    metadata(&mut d.metadata);
    d.spec.template = PodTemplateSpec::default();
}

/// See [`replica_set`]; `podManagementPolicy` and `status.updateRevision` stay (an ordered
/// StatefulSet's gang says so, and only pods of the current revision stand for it), the
/// volume claim templates go with the pod template.
pub fn stateful_set(s: &mut StatefulSet) {
    metadata(&mut s.metadata);
    s.spec.template = PodTemplateSpec::default();
    s.spec.volume_claim_templates = None;
}

/// See [`replica_set`]: nothing of a DaemonSet's spec is read.
pub fn daemon_set(d: &mut DaemonSet) {
    metadata(&mut d.metadata);
    d.spec.template = PodTemplateSpec::default();
}

/// See [`replica_set`]: nothing of a batch Job's spec is read.
pub fn batch_job(j: &mut BatchJob) {
    metadata(&mut j.metadata);
    if let Some(spec) = j.spec.as_mut() {
        spec.template = PodTemplateSpec::default();
    }
}

impl Trim for Pod {
    fn trim(&mut self) {
        pod(self);
    }
}

impl Trim for Node {
    fn trim(&mut self) {
        node(self);
    }
}

impl Trim for ReplicaSet {
    fn trim(&mut self) {
        replica_set(self);
    }
}

impl Trim for Deployment {
    fn trim(&mut self) {
        deployment(self);
    }
}

impl Trim for StatefulSet {
    fn trim(&mut self) {
        stateful_set(self);
    }
}

impl Trim for DaemonSet {
    fn trim(&mut self) {
        daemon_set(self);
    }
}

impl Trim for BatchJob {
    fn trim(&mut self) {
        batch_job(self);
    }
}

/// Small kinds, read through many of their fields (a queue by admission, the controllers and
/// the scheduler; a quota, a budget or a CronJob's job template as a whole) and never written
/// back whole: [`metadata`] only.
macro_rules! metadata_only {
    ($($ty:ty),* $(,)?) => {$(
        impl Trim for $ty {
            fn trim(&mut self) {
                metadata(&mut self.metadata);
            }
        }
    )*};
}

metadata_only!(
    Namespace,
    PriorityClass,
    ResourceQuota,
    PodDisruptionBudget,
    Queue,
    Command,
    CronJob,
);

/// Kinds a controller replaces from its cache (the Job controller its vcJobs, the PodGroup
/// controller its PodGroups, HyperNode discovery its HyperNodes), and the native gang
/// engine's objects: only [`managed_fields`], so that a replace keeps every annotation.
macro_rules! managed_fields_only {
    ($($ty:ty),* $(,)?) => {$(
        impl Trim for $ty {
            fn trim(&mut self) {
                managed_fields(&mut self.metadata);
            }
        }
    )*};
}

managed_fields_only!(Job, PodGroup, HyperNode, native::Workload, native::PodGroup);

/// A custom resource that did not decode is kept as its error.
impl<K: Trim> Trim for DeserializeGuard<K> {
    fn trim(&mut self) {
        if let Ok(k) = self.0.as_mut() {
            k.trim();
        }
    }
}

#[cfg(test)]
mod tests;
