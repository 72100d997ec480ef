//! `tephra simulate`: when would these vcJobs start? The edge of
//! [`tephra_scheduler::whatif`]: it reads the cluster (or a dump of it), the jobs to try and
//! the options, and prints the prediction as a table or JSON. `--dump` prints what it reads.
//!
//! **It never writes to the cluster.** The only requests it makes are LISTs (and the
//! server-version GET with which every tephra command checks the connection): the one place
//! that talks to the API is `ReadOnly`, whose only calls are `kube::Api::list`, and this
//! module holds no other handle on a client (no create, patch, delete or watch is in reach).
//! So the user's own kubeconfig is safe to use, and a read-only one is enough.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
use tephra_scheduler::whatif::{self, ClusterState, ExtraNodes, Options, RunSeconds, WhatIfError};

use crate::api::{Job, PodGroup, Queue};
use crate::cluster::{self, ClusterError, status_code};

/// Everything that can stop `tephra simulate`; each renders as one line for a person.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// No cluster given and none to be found.
    #[error(
        "no cluster to read: pass --kubeconfig PATH or --from DUMP.yaml (written by \
         `tephra simulate --dump`), or set KUBECONFIG"
    )]
    NoCluster,
    /// Choosing, loading or reaching the cluster failed.
    #[error(transparent)]
    Cluster(ClusterError),
    /// The cluster does not serve a resource simulate reads (its CRD is not installed).
    #[error(
        "the cluster does not serve {resource}: install the CRDs (`tephra crds | kubectl apply -f -`)"
    )]
    NoResource {
        /// e.g. `jobs.batch.volcano.sh`.
        resource: &'static str,
    },
    /// A LIST failed.
    #[error("listing {resource}: {reason}")]
    List {
        /// e.g. `pods`.
        resource: &'static str,
        /// The API's message.
        reason: String,
    },
    /// A file (`-f`, `--from`, `--config`) cannot be read or holds nothing usable.
    #[error("{file}: {reason}")]
    File {
        /// The file.
        file: String,
        /// Why.
        reason: String,
    },
    /// The scheduler configuration does not parse.
    #[error(transparent)]
    Config(#[from] tephra_scheduler::ConfigError),
    /// The question cannot be answered (a bad flag value, a job that cannot be simulated).
    #[error(transparent)]
    WhatIf(#[from] WhatIfError),
    /// Writing the output failed (a closed pipe, for one).
    #[error("writing the output: {0}")]
    Output(String),
}

/// Output format of `tephra simulate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum SimulateOutput {
    /// A table, one row per job.
    #[default]
    Table,
    /// A JSON array of objects (name, namespace, queue, tried, admittedAfterSeconds,
    /// startAfterSeconds, finishAfterSeconds, waitsFor, delays).
    Json,
}

/// Flags of `tephra simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Kubeconfig of the cluster to read (default: $KUBECONFIG, then ~/.kube/config, as
    /// kubectl). Only LIST requests are made: read-only credentials are enough.
    #[arg(long, value_name = "PATH", conflicts_with = "from")]
    pub kubeconfig: Option<PathBuf>,

    /// Read the cluster from a dump written by `tephra simulate --dump` instead (its "now"
    /// is when the dump was taken).
    #[arg(long, value_name = "DUMP.yaml")]
    pub from: Option<PathBuf>,

    /// A file of vcJobs to try (YAML or JSON, one or more documents); may be repeated.
    /// Without one, the report covers the jobs already waiting.
    #[arg(short = 'f', long = "filename", value_name = "JOBS.yaml")]
    pub files: Vec<PathBuf>,

    /// Namespace of the jobs to try that name none.
    #[arg(short = 'n', long, value_name = "NS", default_value = "default")]
    pub namespace: String,

    /// A Volcano scheduler configuration to simulate with (the format `tephra serve
    /// --config` reads); the built-in one when absent.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Add nodes: `COUNTxCPUcpu[,MEMORY]`, e.g. `4x8cpu` or `4x8cpu,32Gi` (memory defaults
    /// to 4Gi per cpu); may be repeated.
    #[arg(long, value_name = "COUNTxCPUcpu[,MEMORY]")]
    pub add_nodes: Vec<String>,

    /// Run time of pods without a `simulation.tephra.io/run-seconds` annotation:
    /// `QUEUE=SECONDS` for one queue, `SECONDS` for the others; may be repeated. Without
    /// one, a job's history decides (the mean run time of its Succeeded pods), else the pod
    /// runs past the horizon.
    #[arg(long, value_name = "[QUEUE=]SECONDS")]
    pub default_run_seconds: Vec<String>,

    /// How far ahead to simulate (Go duration: `24h`, `90m`); a job not started by then is
    /// reported as never starting (null in JSON).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_horizon)]
    pub horizon: Duration,

    /// Output format: table or json.
    #[arg(short = 'o', long, value_enum, default_value_t = SimulateOutput::Table)]
    pub output: SimulateOutput,

    /// Print what simulate reads of the cluster as YAML (for `--from`) and stop.
    #[arg(long, conflicts_with_all = ["from", "files", "config", "add_nodes", "default_run_seconds"])]
    pub dump: bool,
}

fn parse_horizon(s: &str) -> Result<Duration, String> {
    let d = crate::api::Duration(s.to_string())
        .to_std()
        .map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(366 * 24 * 3600) {
        return Err("the horizon must be from 1s to 366 days".into());
    }
    Ok(d)
}

/// A client that can only LIST: the one way this module reaches the API.
struct ReadOnly {
    client: kube::Client,
}

impl ReadOnly {
    /// Every object of a kind, in every namespace for a namespaced kind (a LIST, nothing
    /// else).
    async fn list<K>(&self, resource: &'static str) -> Result<Vec<K>, SimulateError>
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let api: Api<K> = Api::all(self.client.clone());
        Self::items(api, resource).await
    }

    async fn items<K>(api: Api<K>, resource: &'static str) -> Result<Vec<K>, SimulateError>
    where
        K: Clone + DeserializeOwned + std::fmt::Debug,
    {
        match api.list(&ListParams::default()).await {
            Ok(list) => Ok(list.items),
            Err(e) if status_code(&e) == Some(404) => Err(SimulateError::NoResource { resource }),
            Err(e) => Err(SimulateError::List {
                resource,
                reason: match &e {
                    kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
                    _ => crate::report::report(&e).to_string(),
                },
            }),
        }
    }
}

/// Reads the cluster: nodes, pods, queues, PodGroups, vcJobs and PriorityClasses, then the
/// time ("now" of the prediction).
async fn read_cluster(kubeconfig: Option<&Path>) -> Result<ClusterState, SimulateError> {
    let source = cluster::config::choose(&cluster::Environment::from_process(), kubeconfig)
        .map_err(|e| match e {
            ClusterError::NoCluster { .. } => SimulateError::NoCluster,
            other => SimulateError::Cluster(other),
        })?;
    let config = cluster::config::load(&source)
        .await
        .map_err(SimulateError::Cluster)?;
    let client = cluster::config::connect(config)
        .await
        .map_err(SimulateError::Cluster)?;
    let api = ReadOnly { client };
    let nodes: Vec<Node> = api.list("nodes").await?;
    let pods: Vec<Pod> = api.list("pods").await?;
    let queues: Vec<Queue> = api.list("queues.scheduling.volcano.sh").await?;
    let pod_groups: Vec<PodGroup> = api.list("podgroups.scheduling.volcano.sh").await?;
    let jobs: Vec<Job> = api.list("jobs.batch.volcano.sh").await?;
    let priority_classes: Vec<PriorityClass> = api.list("priorityclasses").await?;
    // Whole seconds, as a dump keeps it: `--from` a dump then answers exactly as this did.
    let now = Timestamp::now();
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    let mut state = ClusterState::new(Time(now));
    state.nodes = nodes;
    state.pods = pods;
    state.queues = queues;
    state.pod_groups = pod_groups;
    state.jobs = jobs;
    state.priority_classes = priority_classes;
    state.strip();
    Ok(state)
}

fn read_file(path: &Path) -> Result<String, SimulateError> {
    std::fs::read_to_string(path).map_err(|e| SimulateError::File {
        file: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// The vcJobs of the `-f` files.
fn jobs_to_try(files: &[PathBuf], namespace: &str) -> Result<Vec<Job>, SimulateError> {
    let mut jobs = Vec::new();
    for f in files {
        let label = f.display().to_string();
        let text = read_file(f)?;
        let found = crate::vcctl::objects::jobs_from_file(&text, &label, namespace, false)
            .map_err(|e| match e {
                crate::vcctl::VcctlError::File { file, reason } => SimulateError::File {
                    file,
                    // The hint fits `job run`; here nothing is applied at all.
                    reason: reason
                        .trim_end_matches(" (use kubectl apply for other objects)")
                        .to_string(),
                },
                other => SimulateError::File {
                    file: label.clone(),
                    reason: other.to_string(),
                },
            })?;
        jobs.extend(found);
    }
    Ok(jobs)
}

/// The options of the question, read before the cluster is: a bad value stops at once.
fn options(args: &SimulateArgs) -> Result<Options, SimulateError> {
    let mut opts = Options {
        horizon_ms: args.horizon.as_millis().min(i64::MAX as u128) as i64,
        ..Options::default()
    };
    for v in &args.add_nodes {
        opts.add_nodes.push(ExtraNodes::parse(v)?);
    }
    let mut run = RunSeconds::default();
    for v in &args.default_run_seconds {
        run.add(v)?;
    }
    opts.run_seconds = run;
    if let Some(path) = &args.config {
        let text = read_file(path)?;
        tephra_scheduler::config::parse(&text, &path.display().to_string())?;
        opts.conf = Some(text);
    }
    Ok(opts)
}

fn out(text: &str) -> Result<(), SimulateError> {
    crate::vcctl::write_stdout(text).map_err(|e| SimulateError::Output(e.to_string()))
}

/// Runs `tephra simulate`.
pub async fn run(args: SimulateArgs) -> Result<(), SimulateError> {
    if args.dump {
        let state = read_cluster(args.kubeconfig.as_deref()).await?;
        return out(&state.to_yaml()?);
    }
    let opts = options(&args)?;
    let tried = jobs_to_try(&args.files, &args.namespace)?;
    let state = match &args.from {
        Some(path) => ClusterState::from_yaml(&read_file(path)?, &path.display().to_string())?,
        None => read_cluster(args.kubeconfig.as_deref()).await?,
    };
    let prediction = whatif::predict(&state, &tried, &opts)?;
    match args.output {
        SimulateOutput::Json => {
            let text = serde_json::to_string_pretty(&prediction.jobs)
                .map_err(|e| SimulateError::Output(e.to_string()))?;
            out(&(text + "\n"))?;
        }
        SimulateOutput::Table => {
            if prediction.jobs.is_empty() {
                eprintln!("No jobs to try and none waiting (pass -f JOBS.yaml).");
            } else {
                out(&whatif::table(&prediction))?;
            }
        }
    }
    for note in &prediction.notes {
        eprintln!("note: {note}");
    }
    Ok(())
}
