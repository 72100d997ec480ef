//! `tephra job|queue|pg`: Volcano's `vcctl` as subcommands, against the cluster of a
//! kubeconfig (as kubectl finds it) or the plain address of the embedded API (`--server`).
//!
//! Actions on jobs (abort, resume, restart) and queues (open, close) are `bus.volcano.sh`
//! Commands written as `vcctl` writes them, so either tephra's controllers or Volcano's own
//! carry them out. What is printed is built by the pure functions of [`table`] (tables in
//! kubectl's layout) from typed objects; this module only does the I/O around them.

pub mod objects;
pub mod table;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::Serialize;

use crate::api::bus::Action;
use crate::api::{Command, Job, PodGroup, Queue};
use crate::cluster::{self, ClusterError, status_code};
use table::Layout;

/// Everything that can stop a `job|queue|pg` command; each renders as one line for a person.
#[derive(Debug, thiserror::Error)]
pub enum VcctlError {
    /// No cluster given and none to be found.
    #[error(
        "no cluster to use: pass --server URL (the address `tephra serve --embedded` prints), \
         --kubeconfig PATH, or set KUBECONFIG"
    )]
    NoCluster,
    /// Choosing, loading or reaching the cluster failed.
    #[error(transparent)]
    Cluster(ClusterError),
    /// `--server` is not a URL.
    #[error("--server {url:?}: {reason}")]
    BadServer {
        /// What was given.
        url: String,
        /// Why it is unusable.
        reason: String,
    },
    /// The named object does not exist.
    #[error("{kind} {name:?} not found{}", namespace.as_ref().map(|n| format!(" in namespace {n:?}")).unwrap_or_default())]
    NotFound {
        /// `job`, `queue`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Its namespace (namespaced kinds).
        namespace: Option<String>,
    },
    /// The cluster does not serve a resource (its CRD is not installed).
    #[error(
        "the cluster does not serve {resource}: install the CRDs (`tephra crds | kubectl apply -f -`)"
    )]
    NoResource {
        /// e.g. `jobs.batch.volcano.sh`.
        resource: &'static str,
    },
    /// A file given with `-f` cannot be read or holds no usable vcJob.
    #[error("{file}: {reason}")]
    File {
        /// The file (`-` for standard input).
        file: String,
        /// Why.
        reason: String,
    },
    /// The API refused or failed a request.
    #[error("{op}: {reason}")]
    Api {
        /// What was being done (`creating job default/train`).
        op: String,
        /// The API's message.
        reason: String,
    },
    /// A flag value that cannot be used.
    #[error("{0}")]
    Invalid(String),
    /// `job view --watch` ran out of time.
    #[error("job {name:?} is still {phase} after {secs}s (--timeout)")]
    WatchTimeout {
        /// The job.
        name: String,
        /// Its phase at the end.
        phase: String,
        /// The timeout in seconds.
        secs: u64,
    },
    /// Writing the output failed (a closed pipe, for one).
    #[error("writing the output: {0}")]
    Output(String),
}

/// How to reach the cluster; taken by every `job|queue|pg` command.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Kubeconfig file of the cluster (default: $KUBECONFIG, then ~/.kube/config, as kubectl).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Plain-HTTP address of an embedded API (`tephra serve --embedded`, `tephra apiserver`),
    /// e.g. `http://127.0.0.1:6443`; used instead of a kubeconfig.
    #[arg(long, global = true, value_name = "URL", env = "TEPHRA_SERVER")]
    pub server: Option<String>,

    /// Namespace (default: the kubeconfig context's, else `default`); `-N` as vcctl spells it.
    #[arg(short = 'n', short_alias = 'N', long, global = true, value_name = "NS")]
    pub namespace: Option<String>,
}

/// Output format of the listing and viewing commands (default: a table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The table with extra columns.
    Wide,
    /// The objects as JSON (a `List` for several).
    Json,
    /// The objects as YAML (a `List` for several).
    Yaml,
}

/// `tephra job`: run and steer vcJobs.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Cluster and namespace.
    #[command(flatten)]
    pub conn: Connection,
    /// What to do.
    #[command(subcommand)]
    pub command: JobCommand,
}

/// The `tephra job` subcommands.
#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Create the vcJob(s) of a YAML or JSON file.
    Run {
        /// The file (`-` for standard input).
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: PathBuf,
    },
    /// List vcJobs with their phase and pod counts.
    List(JobListFlags),
    /// Show a vcJob: phase and why, tasks, its PodGroup, Events; --watch follows it live.
    View(ViewFlags),
    /// Abort a job: its pods are killed, it can be resumed (Command AbortJob; `vcctl job suspend`).
    #[command(visible_alias = "suspend")]
    Abort(NameArg),
    /// Resume an aborted job (Command ResumeJob).
    Resume(NameArg),
    /// Restart a job: all its pods are recreated (Command RestartJob).
    Restart(NameArg),
    /// Delete a vcJob (its pods and PodGroup go with it).
    Delete(NameArg),
}

/// A single object's name.
#[derive(Debug, Args)]
pub struct NameArg {
    /// The object's name.
    pub name: String,
}

/// Flags of the listing commands.
#[derive(Debug, Args)]
pub struct ListFlags {
    /// List across all namespaces (adds a NAMESPACE column).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Output format: wide, json or yaml (default: a table).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
    /// Only those of this queue (`spec.queue`; unset counts as `default`).
    #[arg(short = 'q', long, value_name = "QUEUE")]
    pub queue: Option<String>,
}

/// Flags of `job list`.
#[derive(Debug, Args)]
pub struct JobListFlags {
    /// What every listing takes.
    #[command(flatten)]
    pub list: ListFlags,
    /// Only jobs of this scheduler (`spec.schedulerName`).
    #[arg(short = 'S', long, value_name = "NAME")]
    pub scheduler: Option<String>,
}

/// Flags of `job view`.
#[derive(Debug, Args)]
pub struct ViewFlags {
    /// The job's name.
    pub name: String,
    /// Output format: json or yaml (default: the description).
    #[arg(short = 'o', long, value_enum, conflicts_with = "watch")]
    pub output: Option<Output>,
    /// Follow the job's phase and its tasks' pod counts (PHASE PENDING RUNNING SUCCEEDED
    /// FAILED TASKS), read twice a second, one line per change, until it finishes (Completed,
    /// Failed, Terminated) or rests Aborted; then exit 0.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// With --watch: give up (exit 1) after this long (Go duration: `90s`, `10m`).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// `tephra queue`: create, list and steer Queues.
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// Cluster.
    #[command(flatten)]
    pub conn: Connection,
    /// What to do.
    #[command(subcommand)]
    pub command: QueueCommand,
}

/// The `tephra queue` subcommands.
#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Create a queue.
    Create(CreateQueueFlags),
    /// List queues with their state and PodGroup counts.
    List(QueueListFlags),
    /// Show one queue as a table row (or -o json|yaml).
    Get(QueueGetFlags),
    /// Open a queue: it accepts jobs again (Command OpenQueue).
    Open(NameArg),
    /// Close a queue: it accepts no new jobs (Command CloseQueue).
    Close(NameArg),
    /// Delete a queue: only a Closed one (tephra's webhook refuses the others, and always
    /// `default` and `root`).
    Delete(NameArg),
    /// vcctl's form of open, close and weight changes: `queue operate NAME -a open|close`,
    /// `-a update -w WEIGHT`.
    Operate(OperateFlags),
}

/// What `queue operate` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OperateAction {
    /// As `queue open`.
    Open,
    /// As `queue close`.
    Close,
    /// Set the weight (`-w`).
    Update,
}

/// Flags of `queue operate`.
#[derive(Debug, Args)]
pub struct OperateFlags {
    /// The queue's name (or `--name`, as vcctl takes it).
    #[arg(required_unless_present = "name_flag", conflicts_with = "name_flag")]
    pub name: Option<String>,
    /// The queue's name (vcctl's `--name`; its `-n` is the namespace here, as in kubectl).
    #[arg(long = "name", value_name = "NAME")]
    pub name_flag: Option<String>,
    /// open, close or update.
    #[arg(short = 'a', long, value_enum)]
    pub action: OperateAction,
    /// With `-a update`: the new weight, 1 to 65535.
    #[arg(
        short = 'w',
        long,
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(i32).range(1..=i64::from(crate::admission::bounds::MAX_QUEUE_WEIGHT))
    )]
    pub weight: Option<i32>,
}

/// Flags of `queue create`.
#[derive(Debug, Args)]
pub struct CreateQueueFlags {
    /// The queue's name.
    pub name: String,
    /// Share of the cluster relative to the other queues, 1 to 65535 (what the API accepts).
    #[arg(
        long,
        default_value_t = 1,
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(i32).range(1..=i64::from(crate::admission::bounds::MAX_QUEUE_WEIGHT))
    )]
    pub weight: i32,
    /// Parent queue in the hierarchy (default: `root`).
    #[arg(long, value_name = "QUEUE")]
    pub parent: Option<String>,
    /// Upper bound of the queue's resources, e.g. `cpu=8,memory=16Gi`.
    #[arg(long, value_name = "RESOURCES")]
    pub capability: Option<String>,
    /// Whether other queues may reclaim what this queue uses beyond its share.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub reclaimable: Option<bool>,
}

/// Flags of `queue list`.
#[derive(Debug, Args)]
pub struct QueueListFlags {
    /// Output format: wide, json or yaml (default: a table).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
}

/// Flags of `queue get`.
#[derive(Debug, Args)]
pub struct QueueGetFlags {
    /// The queue's name.
    pub name: String,
    /// Output format: wide, json or yaml (default: a table).
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
}

/// `tephra pg`: PodGroups (the gangs).
#[derive(Debug, Args)]
pub struct PgArgs {
    /// Cluster and namespace.
    #[command(flatten)]
    pub conn: Connection,
    /// What to do.
    #[command(subcommand)]
    pub command: PgCommand,
}

/// The `tephra pg` subcommands.
#[derive(Debug, Subcommand)]
pub enum PgCommand {
    /// List PodGroups with their phase, counts and queue (-o wide: why they wait).
    List(ListFlags),
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    crate::api::Duration(s.to_string())
        .to_std()
        .map_err(|e| e.to_string())
}

/// How often `job view --watch` reads the job.
const WATCH_POLL: Duration = Duration::from_millis(500);

/// A connected client and the namespace commands act in.
struct Session {
    client: Client,
    namespace: String,
    explicit_namespace: bool,
}

/// `--server` as a URL: `host:port` means `http://host:port`.
fn server_url(s: &str) -> Result<http::Uri, VcctlError> {
    let full = if s.contains("://") {
        s.to_string()
    } else {
        format!("http://{s}")
    };
    let bad = |reason: String| VcctlError::BadServer {
        url: s.to_string(),
        reason,
    };
    let uri: http::Uri = full
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(uri),
        _ => Err(bad("expected http://HOST:PORT".into())),
    }
}

async fn connect(conn: &Connection) -> Result<Session, VcctlError> {
    let config = match &conn.server {
        Some(s) => kube::Config::new(server_url(s)?),
        None => {
            let source = cluster::config::choose(
                &cluster::Environment::from_process(),
                conn.kubeconfig.as_deref(),
            )
            .map_err(|e| match e {
                ClusterError::NoCluster { .. } => VcctlError::NoCluster,
                other => VcctlError::Cluster(other),
            })?;
            cluster::config::load(&source)
                .await
                .map_err(VcctlError::Cluster)?
        }
    };
    let namespace = conn
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = cluster::config::connect(config)
        .await
        .map_err(VcctlError::Cluster)?;
    Ok(Session {
        client,
        namespace,
        explicit_namespace: conn.namespace.is_some(),
    })
}

/// A kube error as one line: the API's message for a refused request.
fn api_error(op: impl Into<String>, e: kube::Error) -> VcctlError {
    let reason = match &e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        _ => crate::report::report(&e).to_string(),
    };
    VcctlError::Api {
        op: op.into(),
        reason,
    }
}

/// A list error: a 404 means the cluster does not serve the resource at all.
fn list_error(resource: &'static str, e: kube::Error) -> VcctlError {
    if status_code(&e) == Some(404) {
        VcctlError::NoResource { resource }
    } else {
        api_error(format!("listing {resource}"), e)
    }
}

/// Writes `text` to standard output and flushes it (a closed pipe is an error, not a panic).
pub(crate) fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
}

/// Writes `text` to standard output.
fn out(text: &str) -> Result<(), VcctlError> {
    write_stdout(text).map_err(|e| VcctlError::Output(e.to_string()))
}

/// Objects as JSON or YAML: one object as itself, several as a `v1` List (kubectl's form).
fn render_objects<T: Serialize>(
    items: &[T],
    single: bool,
    format: Output,
) -> Result<String, VcctlError> {
    let ser = |e: String| VcctlError::Output(e);
    let value = if single && items.len() == 1 {
        serde_json::to_value(&items[0]).map_err(|e| ser(e.to_string()))?
    } else {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": items,
            "metadata": {"resourceVersion": ""},
        })
    };
    match format {
        Output::Yaml => serde_saphyr::to_string(&value).map_err(|e| ser(e.to_string())),
        _ => serde_json::to_string_pretty(&value)
            .map(|s| s + "\n")
            .map_err(|e| ser(e.to_string())),
    }
}

/// Prints a table, or kubectl's line for nothing found (on standard error, exit 0).
fn print_table(t: &table::Table, nothing: &str) -> Result<(), VcctlError> {
    if t.is_empty() {
        eprintln!("{nothing}");
        Ok(())
    } else {
        out(&t.render())
    }
}

fn nothing_in(s: &Session, all: bool) -> String {
    if all {
        "No resources found".into()
    } else {
        format!("No resources found in {} namespace.", s.namespace)
    }
}

/// Runs `tephra job ...`.
pub async fn job(args: JobArgs) -> Result<(), VcctlError> {
    let s = connect(&args.conn).await?;
    let jobs: Api<Job> = Api::namespaced(s.client.clone(), &s.namespace);
    match args.command {
        JobCommand::Run { file } => run_jobs(&s, &file).await,
        JobCommand::List(JobListFlags {
            list: flags,
            scheduler,
        }) => {
            let api: Api<Job> = if flags.all_namespaces {
                Api::all(s.client.clone())
            } else {
                jobs
            };
            let mut list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| list_error("jobs.batch.volcano.sh", e))?;
            list.items.retain(|j| {
                flags.queue.as_deref().is_none_or(|q| j.spec.queue() == q)
                    && scheduler
                        .as_deref()
                        .is_none_or(|n| j.spec.scheduler_name.as_deref() == Some(n))
            });
            match flags.output {
                Some(f @ (Output::Json | Output::Yaml)) => {
                    out(&render_objects(&list.items, false, f)?)
                }
                wide => {
                    let layout = Layout {
                        wide: wide == Some(Output::Wide),
                        all_namespaces: flags.all_namespaces,
                    };
                    let t = table::jobs_table(&list.items, layout, Timestamp::now());
                    print_table(&t, &nothing_in(&s, flags.all_namespaces))
                }
            }
        }
        JobCommand::View(flags) => view_job(&s, &jobs, flags).await,
        JobCommand::Abort(n) => job_command(&s, &jobs, &n.name, Action::AbortJob).await,
        JobCommand::Resume(n) => job_command(&s, &jobs, &n.name, Action::ResumeJob).await,
        JobCommand::Restart(n) => job_command(&s, &jobs, &n.name, Action::RestartJob).await,
        JobCommand::Delete(n) => match jobs.delete(&n.name, &DeleteParams::background()).await {
            Ok(_) => out(&format!("job.batch.volcano.sh \"{}\" deleted\n", n.name)),
            Err(e) if status_code(&e) == Some(404) => Err(job_not_found(&s, &n.name)),
            Err(e) => Err(api_error(
                format!("deleting job {}/{}", s.namespace, n.name),
                e,
            )),
        },
    }
}

fn job_not_found(s: &Session, name: &str) -> VcctlError {
    VcctlError::NotFound {
        kind: "job",
        name: name.to_string(),
        namespace: Some(s.namespace.clone()),
    }
}

async fn get_job(s: &Session, jobs: &Api<Job>, name: &str) -> Result<Job, VcctlError> {
    match jobs.get(name).await {
        Ok(j) => Ok(j),
        Err(e) if status_code(&e) == Some(404) => Err(job_not_found(s, name)),
        Err(e) => Err(api_error(format!("reading job {}/{name}", s.namespace), e)),
    }
}

async fn run_jobs(s: &Session, file: &std::path::Path) -> Result<(), VcctlError> {
    let label = file.display().to_string();
    let read_err = |e: std::io::Error| VcctlError::File {
        file: label.clone(),
        reason: e.to_string(),
    };
    let text = if label == "-" {
        let mut t = String::new();
        std::io::stdin().read_to_string(&mut t).map_err(read_err)?;
        t
    } else {
        std::fs::read_to_string(file).map_err(read_err)?
    };
    let jobs = objects::jobs_from_file(&text, &label, &s.namespace, s.explicit_namespace)?;
    for job in jobs {
        let ns = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(s.client.clone(), &ns);
        let made =
            api.create(&PostParams::default(), &job)
                .await
                .map_err(|e| match status_code(&e) {
                    Some(404) => VcctlError::NoResource {
                        resource: "jobs.batch.volcano.sh",
                    },
                    _ => api_error(format!("creating job {ns}/{name}"), e),
                })?;
        out(&format!(
            "job.batch.volcano.sh/{} created\n",
            made.metadata.name.unwrap_or(name)
        ))?;
    }
    Ok(())
}

/// Creates the Command for `action` on the job, as `vcctl job suspend|resume` does.
async fn job_command(
    s: &Session,
    jobs: &Api<Job>,
    name: &str,
    action: Action,
) -> Result<(), VcctlError> {
    let job = get_job(s, jobs, name).await?;
    let cmd = objects::command(objects::job_ref(&job), &s.namespace, action.clone());
    let made = create_command(&s.client, &s.namespace, &cmd).await?;
    out(&format!(
        "job.batch.volcano.sh/{name}: {action} requested (command.bus.volcano.sh/{made})\n"
    ))
}

async fn create_command(client: &Client, ns: &str, cmd: &Command) -> Result<String, VcctlError> {
    let api: Api<Command> = Api::namespaced(client.clone(), ns);
    let made =
        api.create(&PostParams::default(), cmd)
            .await
            .map_err(|e| match status_code(&e) {
                Some(404) => VcctlError::NoResource {
                    resource: "commands.bus.volcano.sh",
                },
                _ => api_error(format!("creating a Command in namespace {ns}"), e),
            })?;
    Ok(made.metadata.name.unwrap_or_default())
}

/// The PodGroup of a job: the one it controls (by uid), else one named after it.
async fn job_podgroup(s: &Session, job: &Job) -> Option<PodGroup> {
    let api: Api<PodGroup> = Api::namespaced(s.client.clone(), &s.namespace);
    let list = api.list(&ListParams::default()).await.ok()?;
    let uid = job.metadata.uid.as_deref();
    let name = job.metadata.name.as_deref();
    list.items
        .iter()
        .find(|pg| {
            pg.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| Some(o.uid.as_str()) == uid)
        })
        .or_else(|| {
            list.items
                .iter()
                .find(|pg| pg.metadata.name.as_deref() == name)
        })
        .cloned()
}

/// The Events about a job and its PodGroup.
async fn job_events(s: &Session, job: &Job, pg: Option<&PodGroup>) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(s.client.clone(), &s.namespace);
    let Ok(list) = api.list(&ListParams::default()).await else {
        return Vec::new();
    };
    let about = |e: &Event, kind: &str, meta: &kube::api::ObjectMeta| {
        let o = &e.involved_object;
        o.kind.as_deref() == Some(kind)
            && o.name == meta.name
            && (o.uid.is_none() || meta.uid.is_none() || o.uid == meta.uid)
    };
    list.items
        .into_iter()
        .filter(|e| {
            about(e, "Job", &job.metadata)
                || pg.is_some_and(|pg| about(e, "PodGroup", &pg.metadata))
        })
        .collect()
}

async fn view_job(s: &Session, jobs: &Api<Job>, flags: ViewFlags) -> Result<(), VcctlError> {
    let job = get_job(s, jobs, &flags.name).await?;
    if let Some(f @ (Output::Json | Output::Yaml)) = flags.output {
        return out(&render_objects(&[job], true, f)?);
    }
    if !flags.watch {
        let pg = job_podgroup(s, &job).await;
        let events = job_events(s, &job, pg.as_ref()).await;
        return out(&table::job_view(
            &job,
            pg.as_ref(),
            &events,
            Timestamp::now(),
        ));
    }
    out(&format!("{}\n", table::watch_header()))?;
    let deadline = tokio::time::Instant::now() + flags.timeout;
    let mut last = String::new();
    let mut job = job;
    loop {
        let row = table::watch_row(&job);
        if row != last {
            out(&format!("{row}\n"))?;
            last = row;
        }
        if table::watch_done(&job) {
            return Ok(());
        }
        if tokio::time::Instant::now() + WATCH_POLL > deadline {
            return Err(VcctlError::WatchTimeout {
                name: flags.name,
                phase: table::job_phase(&job).to_string(),
                secs: flags.timeout.as_secs(),
            });
        }
        tokio::time::sleep(WATCH_POLL).await;
        job = get_job(s, jobs, &flags.name).await?;
    }
}

/// Runs `tephra queue ...`.
pub async fn queue(args: QueueArgs) -> Result<(), VcctlError> {
    let s = connect(&args.conn).await?;
    let queues: Api<Queue> = Api::all(s.client.clone());
    let not_found = |name: &str| VcctlError::NotFound {
        kind: "queue",
        name: name.to_string(),
        namespace: None,
    };
    let get = |name: String| {
        let queues = queues.clone();
        async move {
            match queues.get(&name).await {
                Ok(q) => Ok(q),
                Err(e) if status_code(&e) == Some(404) => Err(VcctlError::NotFound {
                    kind: "queue",
                    name,
                    namespace: None,
                }),
                Err(e) => Err(api_error(format!("reading queue {name}"), e)),
            }
        }
    };
    match args.command {
        QueueCommand::Create(f) => {
            let capability = f
                .capability
                .as_deref()
                .map(objects::parse_resources)
                .transpose()
                .map_err(|e| VcctlError::Invalid(format!("--capability: {e}")))?
                .unwrap_or_default();
            let q = objects::queue(&objects::NewQueue {
                name: f.name.clone(),
                weight: f.weight,
                parent: f.parent,
                capability,
                reclaimable: f.reclaimable,
            });
            queues
                .create(&PostParams::default(), &q)
                .await
                .map_err(|e| match status_code(&e) {
                    Some(404) => VcctlError::NoResource {
                        resource: "queues.scheduling.volcano.sh",
                    },
                    _ => api_error(format!("creating queue {}", f.name), e),
                })?;
            out(&format!("queue.scheduling.volcano.sh/{} created\n", f.name))
        }
        QueueCommand::List(f) => {
            let list = queues
                .list(&ListParams::default())
                .await
                .map_err(|e| list_error("queues.scheduling.volcano.sh", e))?;
            print_queues(&list.items, f.output, false)
        }
        QueueCommand::Get(f) => {
            let q = get(f.name).await?;
            print_queues(&[q], f.output, true)
        }
        QueueCommand::Open(n) => queue_command(&s, get(n.name).await?, Action::OpenQueue).await,
        QueueCommand::Close(n) => queue_command(&s, get(n.name).await?, Action::CloseQueue).await,
        QueueCommand::Operate(f) => {
            let name = f.name.or(f.name_flag).unwrap_or_default();
            match (f.action, f.weight) {
                (OperateAction::Open, None) => {
                    queue_command(&s, get(name).await?, Action::OpenQueue).await
                }
                (OperateAction::Close, None) => {
                    queue_command(&s, get(name).await?, Action::CloseQueue).await
                }
                (OperateAction::Update, Some(weight)) => {
                    let patch = serde_json::json!({ "spec": { "weight": weight } });
                    match queues
                        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        Ok(_) => out(&format!("queue.scheduling.volcano.sh/{name} patched\n")),
                        Err(e) if status_code(&e) == Some(404) => Err(not_found(&name)),
                        Err(e) => Err(api_error(format!("updating queue {name}"), e)),
                    }
                }
                (OperateAction::Update, None) => Err(VcctlError::Invalid(
                    "queue operate -a update needs the new weight: -w WEIGHT".into(),
                )),
                (_, Some(_)) => Err(VcctlError::Invalid(
                    "-w/--weight goes with -a update only".into(),
                )),
            }
        }
        QueueCommand::Delete(n) => {
            match queues.delete(&n.name, &DeleteParams::background()).await {
                Ok(_) => out(&format!(
                    "queue.scheduling.volcano.sh \"{}\" deleted\n",
                    n.name
                )),
                Err(e) if status_code(&e) == Some(404) => Err(not_found(&n.name)),
                Err(e) => Err(api_error(format!("deleting queue {}", n.name), e)),
            }
        }
    }
}

fn print_queues(items: &[Queue], output: Option<Output>, single: bool) -> Result<(), VcctlError> {
    match output {
        Some(f @ (Output::Json | Output::Yaml)) => out(&render_objects(items, single, f)?),
        wide => print_table(
            &table::queues_table(items, wide == Some(Output::Wide), Timestamp::now()),
            "No resources found",
        ),
    }
}

/// Creates the Command for `action` on the queue, as `vcctl queue operate` does (in namespace
/// `default`: queues have none).
async fn queue_command(s: &Session, queue: Queue, action: Action) -> Result<(), VcctlError> {
    let ns = objects::QUEUE_COMMAND_NAMESPACE;
    let cmd = objects::command(objects::queue_ref(&queue), ns, action.clone());
    let made = create_command(&s.client, ns, &cmd).await?;
    let name = queue.metadata.name.unwrap_or_default();
    out(&format!(
        "queue.scheduling.volcano.sh/{name}: {action} requested (command.bus.volcano.sh/{made})\n"
    ))
}

/// Runs `tephra pg ...`.
pub async fn pg(args: PgArgs) -> Result<(), VcctlError> {
    let s = connect(&args.conn).await?;
    match args.command {
        PgCommand::List(flags) => {
            let api: Api<PodGroup> = if flags.all_namespaces {
                Api::all(s.client.clone())
            } else {
                Api::namespaced(s.client.clone(), &s.namespace)
            };
            let mut list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| list_error("podgroups.scheduling.volcano.sh", e))?;
            if let Some(q) = flags.queue.as_deref() {
                list.items.retain(|pg| pg.spec.queue() == q);
            }
            match flags.output {
                Some(f @ (Output::Json | Output::Yaml)) => {
                    out(&render_objects(&list.items, false, f)?)
                }
                wide => {
                    let layout = Layout {
                        wide: wide == Some(Output::Wide),
                        all_namespaces: flags.all_namespaces,
                    };
                    let t = table::podgroups_table(&list.items, layout, Timestamp::now());
                    print_table(&t, &nothing_in(&s, flags.all_namespaces))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls() {
        assert_eq!(
            server_url("127.0.0.1:6443").unwrap().to_string(),
            "http://127.0.0.1:6443/"
        );
        assert_eq!(
            server_url("https://api.example:443").unwrap().scheme_str(),
            Some("https")
        );
        let e = server_url("ftp://x").unwrap_err().to_string();
        assert_eq!(e, "--server \"ftp://x\": expected http://HOST:PORT");
        assert!(server_url("http://").is_err());
    }

    #[test]
    fn not_found_lines() {
        let e = VcctlError::NotFound {
            kind: "job",
            name: "nope".into(),
            namespace: Some("default".into()),
        };
        assert_eq!(
            e.to_string(),
            "job \"nope\" not found in namespace \"default\""
        );
        let e = VcctlError::NotFound {
            kind: "queue",
            name: "q".into(),
            namespace: None,
        };
        assert_eq!(e.to_string(), "queue \"q\" not found");
    }

    #[test]
    fn several_objects_are_a_list_one_is_itself() {
        let jobs = [Job::test("a"), Job::test("b")];
        let v: serde_json::Value =
            serde_json::from_str(&render_objects(&jobs, false, Output::Json).unwrap()).unwrap();
        assert_eq!(v["kind"], "List");
        assert_eq!(v["items"][1]["metadata"]["name"], "b");
        let one = render_objects(&jobs[..1], true, Output::Yaml).unwrap();
        assert!(
            one.contains("kind: Job") && one.contains("name: a"),
            "{one}"
        );
    }
}
