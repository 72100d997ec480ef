//! A scenario: the cluster, the queues and the stream of jobs a simulation runs, as a small
//! YAML file (so a counterexample can be saved, replayed and shrunk by hand).
//!
//! ```yaml
//! periodMs: 1000          # one scheduling session per period
//! untilMs: 40000         # how long the run lasts, simulated ms
//! bindMs: 0               # kube-scheduler's time per bind, one pod at a time (0: at once)
//! conf: |                 # scheduler configuration (Volcano's format); built-in when absent
//!   actions: "enqueue, allocate, backfill"
//!   ...
//! nodes:
//! - {name: n, count: 3, cpu: "8", memory: 32Gi, labels: {zone: a}}
//! hyperNodes:             # network topology (optional): tier 1 groups nodes, higher tiers groups
//! - {name: rack-a, tier: 1, nodes: [n-0, n-1]}
//! - {name: spine, tier: 2, hyperNodes: [rack-a]}
//! queues:
//! - {name: a, weight: 1, capability: {cpu: "4"}, guarantee: {cpu: "2"}}
//! jobs:
//! - name: j1
//!   queue: a
//!   arrivalMs: 0
//!   minAvailable: 2
//!   networkTopology: {mode: hard, highestTierAllowed: 1}   # optional
//!   tasks:
//!   - {name: worker, replicas: 2, cpu: 500m, memory: 64Mi, durationMs: 5000}
//!   - name: ps                                               # partitions (optional)
//!     replicas: 4
//!     cpu: "1"
//!     memory: 64Mi
//!     partitionPolicy: {totalPartitions: 2, partitionSize: 2, minPartitions: 1,
//!                       networkTopology: {mode: hard, highestTierAllowed: 1}}
//! - name: training        # a job already running when the run begins (a cluster's state)
//!   namespace: ml
//!   arrivalMs: -60000     # created a minute before the run began
//!   tasks: [{name: worker, replicas: 2, cpu: "4", memory: 1Gi, durationMs: 600000}]
//!   present:              # its pods at time 0: bound to a node, or finished (no node)
//!   - {task: worker, node: n-0, remainingMs: 30000}
//!   - {task: worker}
//! otherPods:              # pods of no simulated job that hold a node's resources
//! - {namespace: kube-system, name: dns, node: n-1, cpu: 100m, memory: 70Mi}
//! ```
//!
//! A job with `present` pods is admitted (its PodGroup `Running`) from time 0: its present
//! pods run (or have finished) as given, its other replicas are made Pending. That is how a
//! cluster taken from the API ([`crate::whatif`]) is played.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Taint, Toleration};
use serde::{Deserialize, Serialize};

/// Why a scenario could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Not YAML of the scenario's shape.
    #[error("scenario {origin}: {message}")]
    Parse {
        /// Where it came from (a file name).
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// Well-formed but inconsistent (a job in a queue that is not declared, a node without cpu).
    #[error("scenario {origin}: {message}")]
    Invalid {
        /// Where it came from.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

/// The whole scenario.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Simulated milliseconds between sessions (`--schedule-period`); 1000 when unset.
    #[serde(default = "default_period", skip_serializing_if = "is_default_period")]
    pub period_ms: i64,
    /// How long the run lasts, simulated ms.
    pub until_ms: i64,
    /// kube-scheduler's time per bind, simulated ms: it binds one pod at a time, in its
    /// queue's order (0: every placement is bound the moment the session ends).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub bind_ms: i64,
    /// Scheduler configuration text; Volcano's built-in one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<String>,
    /// Nodes.
    pub nodes: Vec<NodeSpec>,
    /// HyperNodes grouping the nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hyper_nodes: Vec<HyperNodeSpec>,
    /// Queues besides `root` and `default` (which always exist, weight 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueSpec>,
    /// Jobs, each arriving at its time.
    #[serde(default)]
    pub jobs: Vec<JobSpec>,
    /// Pods of no simulated job (another scheduler's, a DaemonSet's) running on a node from
    /// time 0: they hold its resources until their `remainingMs` ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_pods: Vec<OtherPodSpec>,
}

/// A pod of a job already running when the run begins.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PresentPod {
    /// Its task's name.
    pub task: String,
    /// The node it runs on; none when it has already finished (Succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// How much longer it runs, simulated ms (0: until the run ends).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub remaining_ms: i64,
}

/// A running pod that belongs to no simulated job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OtherPodSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node it runs on.
    pub node: String,
    /// Requested cpu.
    pub cpu: String,
    /// Requested memory.
    pub memory: String,
    /// Other requests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scalars: BTreeMap<String, String>,
    /// How much longer it runs, simulated ms (0: until the run ends).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub remaining_ms: i64,
}

fn default_period() -> i64 {
    1000
}

fn is_default_period(v: &i64) -> bool {
    *v == 1000
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

fn one() -> u32 {
    1
}

/// One node, or `count` alike (named `name-0`, `name-1`, …).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSpec {
    /// Name (or name prefix when `count` > 1).
    pub name: String,
    /// How many.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    /// Allocatable cpu (a Kubernetes quantity).
    pub cpu: String,
    /// Allocatable memory.
    pub memory: String,
    /// Pod slots (110 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<u32>,
    /// Other allocatable resources (`nvidia.com/gpu: "4"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scalars: BTreeMap<String, String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

/// A queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueSpec {
    /// Name.
    pub name: String,
    /// Weight (1 when unset).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub weight: u32,
    /// `spec.capability`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capability: BTreeMap<String, String>,
    /// `spec.guarantee.resource`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub guarantee: BTreeMap<String, String>,
    /// `spec.deserved` (the capacity plugin's share).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deserved: BTreeMap<String, String>,
    /// `spec.parent` (`root` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// `status.state` (`Open` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// `spec.priority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `spec.reclaimable` (true when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimable: Option<bool>,
}

/// A HyperNode: nodes (by their names, `name-i` for a node kind of `count` > 1) or
/// HyperNodes of a lower tier, by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HyperNodeSpec {
    /// Name.
    pub name: String,
    /// Tier (1: the closest grouping).
    pub tier: i64,
    /// Member nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Member HyperNodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hyper_nodes: Vec<String>,
}

/// A job: a gang (PodGroup) and its pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobSpec {
    /// Name (the PodGroup's).
    pub name: String,
    /// Namespace (`sim` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Queue (`default` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// When it is submitted, simulated ms; a job created before the run began has a
    /// negative time (it is there from time 0, older than the others).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub arrival_ms: i64,
    /// PriorityClass value of the gang and its pods (none when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// `minAvailable` (every replica when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<u32>,
    /// The PodGroup's `networkTopology`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<tephra_api::scheduling::NetworkTopologySpec>,
    /// Its tasks.
    pub tasks: Vec<TaskSpec>,
    /// Pods already bound or finished at time 0 (a job that was running when the run began).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub present: Vec<PresentPod>,
}

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

/// A task of a job: `replicas` alike pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskSpec {
    /// Name (`volcano.sh/task-spec`).
    pub name: String,
    /// Pods.
    pub replicas: u32,
    /// Requested cpu per pod.
    pub cpu: String,
    /// Requested memory per pod.
    pub memory: String,
    /// Other requests (`nvidia.com/gpu: "1"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scalars: BTreeMap<String, String>,
    /// How long a pod runs once bound, simulated ms (0: until the run ends).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub duration_ms: i64,
    /// `minAvailable` of the task (`spec.minTaskMember`), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<u32>,
    /// `spec.nodeSelector`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// `spec.tolerations`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// `spec.affinity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// `volcano.sh/preemptable` (true when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptable: Option<bool>,
    /// `partitionPolicy` (the vcJob task's): its pods split into partitions of
    /// `partitionSize`, each placed whole and, with a `networkTopology`, inside one HyperNode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_policy: Option<tephra_api::batch::PartitionPolicySpec>,
}

impl JobSpec {
    /// Pods in all its tasks.
    pub fn replicas(&self) -> u32 {
        self.tasks.iter().map(|t| t.replicas).sum()
    }

    /// `minAvailable`, every replica when unset.
    pub fn min(&self) -> u32 {
        self.min_available.unwrap_or_else(|| self.replicas())
    }

    /// Its namespace (`sim` when unset).
    pub fn namespace(&self) -> &str {
        self.namespace
            .as_deref()
            .unwrap_or(super::engine::NAMESPACE)
    }
}

impl Scenario {
    /// Reads a scenario from YAML; `origin` names it in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ScenarioError> {
        let s: Scenario = serde_saphyr::from_str(text).map_err(|e| ScenarioError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        s.validate(origin)?;
        Ok(s)
    }

    /// The scenario as YAML (what [`Scenario::from_yaml`] reads back).
    pub fn to_yaml(&self) -> String {
        // Plain data of strings, numbers and maps always serializes.
        serde_saphyr::to_string(self).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }

    /// Checks what the types cannot: declared queues, parsable quantities, unique names.
    pub fn validate(&self, origin: &str) -> Result<(), ScenarioError> {
        let invalid = |message: String| ScenarioError::Invalid {
            origin: origin.to_string(),
            message,
        };
        if self.bind_ms < 0 || self.until_ms < 0 {
            return Err(invalid("bindMs and untilMs must not be negative".into()));
        }
        if self.period_ms <= 0 {
            return Err(invalid(format!(
                "periodMs must be positive, not {}",
                self.period_ms
            )));
        }
        // `default` and `root` always exist; declaring one (once) sets its fields.
        let mut queues = vec!["default", "root"];
        let mut declared = std::collections::BTreeSet::new();
        for q in &self.queues {
            if !declared.insert(q.name.as_str()) {
                return Err(invalid(format!("queue {} declared twice", q.name)));
            }
            if !queues.contains(&q.name.as_str()) {
                queues.push(&q.name);
            }
            for (what, list) in [
                ("capability", &q.capability),
                ("guarantee", &q.guarantee),
                ("deserved", &q.deserved),
            ] {
                for (k, v) in list {
                    quantity(v).ok_or_else(|| {
                        invalid(format!(
                            "queue {}: {what}.{k}: {v:?} is not a quantity",
                            q.name
                        ))
                    })?;
                }
            }
        }
        for n in &self.nodes {
            for (k, v) in [("cpu", &n.cpu), ("memory", &n.memory)]
                .into_iter()
                .chain(n.scalars.iter().map(|(k, v)| (k.as_str(), v)))
            {
                quantity(v).ok_or_else(|| {
                    invalid(format!("node {}: {k}: {v:?} is not a quantity", n.name))
                })?;
            }
        }
        let node_names: std::collections::BTreeSet<String> = self
            .nodes
            .iter()
            .flat_map(|n| super::engine::node_names(&n.name, n.count))
            .collect();
        let mut names = std::collections::BTreeSet::new();
        for j in &self.jobs {
            if !names.insert((j.namespace(), j.name.as_str())) {
                return Err(invalid(format!("job {} declared twice", j.name)));
            }
            let q = j.queue.as_deref().unwrap_or("default");
            if !queues.contains(&q) {
                return Err(invalid(format!(
                    "job {}: queue {q} is not declared",
                    j.name
                )));
            }
            if j.tasks.is_empty() {
                return Err(invalid(format!("job {} has no tasks", j.name)));
            }
            for t in &j.tasks {
                for (k, v) in [("cpu", &t.cpu), ("memory", &t.memory)]
                    .into_iter()
                    .chain(t.scalars.iter().map(|(k, v)| (k.as_str(), v)))
                {
                    quantity(v).ok_or_else(|| {
                        invalid(format!(
                            "job {} task {}: {k}: {v:?} is not a quantity",
                            j.name, t.name
                        ))
                    })?;
                }
            }
            for t in &j.tasks {
                let present = j.present.iter().filter(|p| p.task == t.name).count();
                if present > t.replicas as usize {
                    return Err(invalid(format!(
                        "job {} task {}: {present} present pods but {} replicas",
                        j.name, t.name, t.replicas
                    )));
                }
            }
            for p in &j.present {
                if !j.tasks.iter().any(|t| t.name == p.task) {
                    return Err(invalid(format!(
                        "job {}: present pod of task {}, which it does not have",
                        j.name, p.task
                    )));
                }
                if let Some(n) = &p.node
                    && !node_names.contains(n)
                {
                    return Err(invalid(format!(
                        "job {}: present pod on node {n}, which is not declared",
                        j.name
                    )));
                }
            }
        }
        for p in &self.other_pods {
            if !node_names.contains(&p.node) {
                return Err(invalid(format!(
                    "pod {}/{}: node {} is not declared",
                    p.namespace, p.name, p.node
                )));
            }
            for (k, v) in [("cpu", &p.cpu), ("memory", &p.memory)]
                .into_iter()
                .chain(p.scalars.iter().map(|(k, v)| (k.as_str(), v)))
            {
                quantity(v).ok_or_else(|| {
                    invalid(format!(
                        "pod {}/{}: {k}: {v:?} is not a quantity",
                        p.namespace, p.name
                    ))
                })?;
            }
        }
        Ok(())
    }
}

/// A Kubernetes quantity's value (`500m` → 0.5), `None` when it does not parse.
fn quantity(v: &str) -> Option<f64> {
    tephra_api::quantity::parse(v).filter(|x| x.is_finite() && *x >= 0.0)
}
