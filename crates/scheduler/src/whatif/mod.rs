//! What-if: when would these vcJobs start on this cluster? A cluster's state (nodes, pods,
//! queues, PodGroups, vcJobs, as the API holds them) and the vcJobs to try become a
//! [`Scenario`](crate::sim::Scenario), which the simulator plays through the real session on a
//! simulated clock; the report says, per job, when it is admitted, starts and finishes, what
//! it waits for and which jobs it delays.
//!
//! ```text
//!  ClusterState (API objects, taken at a time) ─┐
//!  vcJobs to try ───────────────────────────────┼─▶ translate ─▶ Scenario ─▶ Sim ─▶ report
//!  Options (extra nodes, configuration, run times) ┘            (once with every tried job,
//!                                                                 once without each of them)
//! ```
//!
//! Pure: the caller reads the cluster (or a dump of it) and prints the report. The time the
//! state was taken is "now": every answer is in seconds from it.

mod report;
mod translate;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use tephra_api::{Job, PodGroup, Queue};

pub use report::{Delay, JobPrediction, Prediction, predict, table};
pub use translate::{JobRole, Translated, translate};

/// `apiVersion` of a cluster dump.
pub const DUMP_API_VERSION: &str = "simulation.tephra.io/v1alpha1";
/// `kind` of a cluster dump.
pub const DUMP_KIND: &str = "ClusterState";
/// How far ahead the simulation looks when not told: a day.
pub const DEFAULT_HORIZON_MS: i64 = 24 * 3600 * 1000;

/// Why a what-if could not be answered; each renders as one line for a person.
#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    /// A cluster dump that cannot be read.
    #[error("{origin}: {message}")]
    Dump {
        /// Where it came from (a file name).
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// A bad `--add-nodes` value.
    #[error("--add-nodes {value:?}: {reason}")]
    AddNodes {
        /// What was given.
        value: String,
        /// Why it is unusable.
        reason: String,
    },
    /// A bad `--default-run-seconds` value.
    #[error("--default-run-seconds {value:?}: {reason}")]
    RunSeconds {
        /// What was given.
        value: String,
        /// Why it is unusable.
        reason: String,
    },
    /// A job to try that cannot be simulated.
    #[error("job {namespace}/{name}: {reason}")]
    Job {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The scheduler configuration does not parse.
    #[error("scheduler configuration: {0}")]
    Config(String),
    /// The scenario built from the cluster is inconsistent (a defect of the translation, or
    /// objects the API should not have accepted).
    #[error("the simulated cluster: {0}")]
    Scenario(#[from] crate::sim::ScenarioError),
}

/// What `tephra simulate` reads of a cluster, and what `tephra simulate --dump` writes: every
/// object as the API gives it (without `managedFields` and kubectl's last-applied copy), and
/// when it was read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterState {
    /// [`DUMP_API_VERSION`].
    pub api_version: String,
    /// [`DUMP_KIND`].
    pub kind: String,
    /// When the objects were read: the "now" every prediction counts from.
    pub taken_at: Time,
    /// Nodes.
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// Pods of every namespace.
    #[serde(default)]
    pub pods: Vec<Pod>,
    /// Queues.
    #[serde(default)]
    pub queues: Vec<Queue>,
    /// PodGroups of every namespace.
    #[serde(default)]
    pub pod_groups: Vec<PodGroup>,
    /// vcJobs of every namespace.
    #[serde(default)]
    pub jobs: Vec<Job>,
    /// PriorityClasses (a job's `priorityClassName` is read through them).
    #[serde(default)]
    pub priority_classes: Vec<PriorityClass>,
}

impl ClusterState {
    /// An empty state taken at `taken_at`.
    pub fn new(taken_at: Time) -> Self {
        Self {
            api_version: DUMP_API_VERSION.into(),
            kind: DUMP_KIND.into(),
            taken_at,
            nodes: Vec::new(),
            pods: Vec::new(),
            queues: Vec::new(),
            pod_groups: Vec::new(),
            jobs: Vec::new(),
            priority_classes: Vec::new(),
        }
    }

    /// Drops what only the API's bookkeeping needs (`managedFields`, kubectl's last-applied
    /// annotation), so a dump holds what the simulation reads and little else.
    pub fn strip(&mut self) {
        fn meta(m: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
            m.managed_fields = None;
            if let Some(a) = m.annotations.as_mut() {
                a.remove(tephra_api::keys::KUBECTL_LAST_APPLIED);
                if a.is_empty() {
                    m.annotations = None;
                }
            }
        }
        self.nodes.iter_mut().for_each(|o| meta(&mut o.metadata));
        self.pods.iter_mut().for_each(|o| meta(&mut o.metadata));
        self.queues.iter_mut().for_each(|o| meta(&mut o.metadata));
        self.pod_groups
            .iter_mut()
            .for_each(|o| meta(&mut o.metadata));
        self.jobs.iter_mut().for_each(|o| meta(&mut o.metadata));
        self.priority_classes
            .iter_mut()
            .for_each(|o| meta(&mut o.metadata));
    }

    /// The state as YAML (what [`ClusterState::from_yaml`] reads back).
    pub fn to_yaml(&self) -> Result<String, WhatIfError> {
        serde_saphyr::to_string(self).map_err(|e| WhatIfError::Dump {
            origin: "the cluster dump".into(),
            message: e.to_string(),
        })
    }

    /// Reads a dump; `origin` names it in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, WhatIfError> {
        let bad = |message: String| WhatIfError::Dump {
            origin: origin.to_string(),
            message,
        };
        let value: serde_json::Value =
            serde_saphyr::from_str(text).map_err(|e| bad(first_line(&e.to_string())))?;
        let api_version = value.get("apiVersion").and_then(|v| v.as_str());
        let kind = value.get("kind").and_then(|v| v.as_str());
        if api_version != Some(DUMP_API_VERSION) || kind != Some(DUMP_KIND) {
            return Err(bad(format!(
                "not a cluster dump (expected apiVersion {DUMP_API_VERSION}, kind {DUMP_KIND}, \
                 as `tephra simulate --dump` writes)"
            )));
        }
        decode(value).map_err(bad)
    }
}

/// Decodes a dump's value, naming the field that does not fit.
fn decode(value: serde_json::Value) -> Result<ClusterState, String> {
    serde_json::from_value(value).map_err(|e| first_line(&e.to_string()))
}

/// The first line of a parser's message, without its own `error:` prefix.
fn first_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default().trim();
    first
        .strip_prefix("error:")
        .unwrap_or(first)
        .trim()
        .to_string()
}

/// Nodes to add to the cluster: `count` alike, `cpu` and `memory` allocatable each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraNodes {
    /// How many.
    pub count: u32,
    /// Allocatable cpu (a quantity).
    pub cpu: String,
    /// Allocatable memory (a quantity).
    pub memory: String,
}

/// Memory of an added node per cpu when `--add-nodes` names none.
pub const ADDED_MEMORY_PER_CPU_GI: f64 = 4.0;

impl ExtraNodes {
    /// Reads `COUNTxCPUcpu[,MEMORY]` (`4x8cpu`, `2x500mcpu,16Gi`); memory defaults to 4Gi per
    /// cpu.
    pub fn parse(value: &str) -> Result<Self, WhatIfError> {
        let bad = |reason: &str| WhatIfError::AddNodes {
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let form = "expected COUNTxCPUcpu[,MEMORY], e.g. 4x8cpu or 4x8cpu,32Gi";
        let (nodes, memory) = match value.split_once(',') {
            Some((n, m)) => (n.trim(), Some(m.trim())),
            None => (value.trim(), None),
        };
        let (count, cpu) = nodes.split_once(['x', 'X']).ok_or_else(|| bad(form))?;
        let count: u32 = count
            .trim()
            .parse()
            .ok()
            .filter(|c| (1..=10_000).contains(c))
            .ok_or_else(|| bad("the count must be a whole number from 1 to 10000"))?;
        let cpu = cpu
            .trim()
            .strip_suffix("cpu")
            .ok_or_else(|| bad(form))?
            .trim();
        let cores = tephra_api::quantity::parse(cpu)
            .filter(|c| c.is_finite() && *c > 0.0)
            .ok_or_else(|| bad("the cpu must be a positive quantity, e.g. 8cpu or 500mcpu"))?;
        let memory = match memory {
            Some(m) => {
                tephra_api::quantity::parse(m)
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .ok_or_else(|| bad("the memory must be a positive quantity, e.g. 32Gi"))?;
                m.to_string()
            }
            None => format!(
                "{}Mi",
                (cores * ADDED_MEMORY_PER_CPU_GI * 1024.0).round() as i64
            ),
        };
        Ok(Self {
            count,
            cpu: cpu.to_string(),
            memory,
        })
    }
}

/// Run times of pods that carry no `simulation.tephra.io/run-seconds` annotation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSeconds {
    /// Per queue.
    pub per_queue: BTreeMap<String, f64>,
    /// For every other queue.
    pub all: Option<f64>,
}

impl RunSeconds {
    /// Adds one `--default-run-seconds` value: `SECONDS` (every queue) or `QUEUE=SECONDS`.
    pub fn add(&mut self, value: &str) -> Result<(), WhatIfError> {
        let bad = |reason: &str| WhatIfError::RunSeconds {
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let (queue, secs) = match value.split_once('=') {
            Some((q, s)) if !q.trim().is_empty() => (Some(q.trim()), s),
            Some(_) => return Err(bad("expected SECONDS or QUEUE=SECONDS")),
            None => (None, value),
        };
        let secs: f64 = secs
            .trim()
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .ok_or_else(|| bad("the run time must be a positive number of seconds"))?;
        match queue {
            Some(q) => {
                self.per_queue.insert(q.to_string(), secs);
            }
            None => self.all = Some(secs),
        }
        Ok(())
    }

    /// The default of a queue, if any.
    pub fn of(&self, queue: &str) -> Option<f64> {
        self.per_queue.get(queue).copied().or(self.all)
    }
}

/// How the cluster is changed for the question, and how far ahead to look.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Nodes added to the cluster.
    pub add_nodes: Vec<ExtraNodes>,
    /// Scheduler configuration text (Volcano's format); the built-in one when `None`.
    pub conf: Option<String>,
    /// Default run times.
    pub run_seconds: RunSeconds,
    /// How far ahead the simulation looks, ms; a job not started by then never starts.
    pub horizon_ms: i64,
    /// The scheduler names tephra serves (`volcano`): jobs of another scheduler are not
    /// simulated, their running pods only hold their nodes.
    pub scheduler_names: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            add_nodes: Vec::new(),
            conf: None,
            run_seconds: RunSeconds::default(),
            horizon_ms: DEFAULT_HORIZON_MS,
            scheduler_names: vec![tephra_api::keys::DEFAULT_SCHEDULER_NAME.into()],
        }
    }
}
