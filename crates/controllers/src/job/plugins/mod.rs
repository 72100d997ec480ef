//! Job plugins (`spec.plugins`): the pod edits and side objects that wire a job's pods
//! together for a framework (Volcano's `pkg/controllers/job/plugins/`).
//!
//! ```text
//!   job.spec.plugins ──plugins_for──▶ [Box<dyn JobPlugin>]   (name order, arguments parsed once)
//!                                          │
//!        pod being built ──on_pod_create───┤ env vars, ports, volumes, hostname, commands
//!        job set up      ──on_job_add──────┤ Vec<Owned>   (the edge creates the missing ones)
//!        later sync      ──on_job_update───┤ Vec<Owned>   (svc refreshes its hosts ConfigMap)
//!        whole job gone  ──on_job_delete───┘ Vec<Removed> (the edge deletes, NotFound is fine)
//! ```
//!
//! Everything here is pure: a plugin says what it wants and the edge talks to the API. The one
//! exception is the randomness of the ssh plugin's key generation.
//!
//! Who decides what:
//! - The edge records each plugin under [`controlled_key`] in `status.controlledResources`, as
//!   Volcano does, so `on_job_add` runs once per set-up and `on_job_delete` once per tear-down.
//! - **Departure from Volcano:** Volcano calls `OnJobDelete` on every kill, so a RestartTask,
//!   RestartPod or RestartPartition deleted the svc ConfigMap/Service and the ssh Secret under
//!   running pods. In tephra the edge calls `on_job_delete` only when the whole job is killed
//!   (RestartJob, Abort, Terminate, Complete …) or deleted.
//! - Objects returned by `on_job_add` carry one controller ownerReference to the Job (Volcano's
//!   helper lists the same reference twice; tephra does not). When an object exists already
//!   the edge updates a ConfigMap whose data differ and leaves every other kind alone, so an
//!   ssh key made earlier is never replaced by the fresh one each `on_job_add` call generates.
//!
//! Pod edits are idempotent (a departure where Volcano is not): an environment variable the
//! plugin sets replaces one of the same name instead of being appended again (a later duplicate
//! is what wins in Kubernetes, so the effective value is Volcano's), volumes and mounts are
//! replaced by name, ports are added only when their number is not open yet.
//!
//! Arguments follow Go's `flag` package as Volcano parses them (`--name=value`, `--name value`,
//! one or two dashes, bool flags as `--flag` or `--flag=false`, `--` ends the flags). A value
//! that does not parse, a port outside 1–65535, a flag the plugin does not know or a stray
//! word is a [`PluginError::BadArgument`] (departure: Volcano only logs it and silently drops
//! that flag and every one after it, or lets the API server reject the pods later). The one
//! kept exception is ssh's `--ssh-port`, which falls back to 22 as Volcano documents; `env`
//! has no flags and ignores its arguments, as Volcano's does.
//!
//! Plugins run in name order; Volcano iterates a Go map, so its order is undefined. It matters
//! only for `hcclrank`, which reads a `RANK` variable set by `pytorch`: `hcclrank` runs first
//! and computes the rank from the task index instead, which is the same number as pytorch's
//! `RANK` when there is one master replica.

mod env;
mod hcclrank;
mod mpi;
mod pytorch;
mod ray;
mod ssh;
mod svc;
mod tensorflow;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, EnvVar, Pod, Secret, Service, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use tephra_api::batch::{self, Job, TaskSpec};
use tephra_api::keys;

/// An object a plugin wants to exist. The edge creates it (the plugin has already set the
/// controller ownerReference to the Job); when it exists already, the edge updates a ConfigMap
/// whose data differ and leaves every other kind as it is (so a generated ssh key is never
/// replaced).
// A few of these exist per job set-up and are moved once to the edge; boxing the Service
// would only change the agreed shape of the interface.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Owned {
    /// svc's hosts ConfigMap `{job}-svc`.
    ConfigMap(ConfigMap),
    /// svc's headless Service `{job}`, ray's head Service `{job}-head-svc`.
    Service(Service),
    /// svc's NetworkPolicy `{job}`.
    NetworkPolicy(NetworkPolicy),
    /// ssh's key Secret `{job}-ssh`.
    Secret(Secret),
}

impl Owned {
    /// The kind of the object.
    pub fn kind(&self) -> OwnedKind {
        match self {
            Owned::ConfigMap(_) => OwnedKind::ConfigMap,
            Owned::Service(_) => OwnedKind::Service,
            Owned::NetworkPolicy(_) => OwnedKind::NetworkPolicy,
            Owned::Secret(_) => OwnedKind::Secret,
        }
    }

    /// The object's metadata (name, namespace, ownerReferences).
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Owned::ConfigMap(o) => &o.metadata,
            Owned::Service(o) => &o.metadata,
            Owned::NetworkPolicy(o) => &o.metadata,
            Owned::Secret(o) => &o.metadata,
        }
    }

    /// The object's name (empty if unset, which plugins never do).
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }
}

/// An object a plugin wants gone (NotFound is fine).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    /// Its kind.
    pub kind: OwnedKind,
    /// Its namespace (the job's).
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// The kinds of object plugins make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OwnedKind {
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 Service.
    Service,
    /// networking.k8s.io/v1 NetworkPolicy.
    NetworkPolicy,
    /// core/v1 Secret.
    Secret,
}

/// Why a plugin could not be set up or do its work.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum PluginError {
    /// `spec.plugins` names a plugin tephra does not have.
    #[error("unknown job plugin {0:?}")]
    Unknown(String),
    /// An argument of a plugin is not valid.
    #[error("plugin {plugin}: argument {argument:?}: {reason}")]
    BadArgument {
        /// The plugin.
        plugin: &'static str,
        /// The argument as written (or the flag's name).
        argument: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Something the plugin needs is not there (ray's head task, a pod's task index).
    #[error("plugin {plugin}: {what}")]
    Missing {
        /// The plugin.
        plugin: &'static str,
        /// What is missing.
        what: String,
    },
    /// The ssh key pair could not be made.
    #[error("plugin ssh: key generation failed: {0}")]
    Key(String),
}

impl PluginError {
    /// A short fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PluginError::Unknown(_) => "unknown_plugin",
            PluginError::BadArgument { .. } => "bad_argument",
            PluginError::Missing { .. } => "missing",
            PluginError::Key(_) => "key",
        }
    }
}

/// One job plugin with its arguments parsed (Volcano's `PluginInterface`).
pub trait JobPlugin: Send + Sync {
    /// The plugin's name as written in `spec.plugins`.
    fn name(&self) -> &'static str;
    /// Edits a pod being built for the job (Volcano's OnPodCreate); `pod` already has its
    /// name, labels and annotations. Calling it twice leaves the pod as one call does.
    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError>;
    /// Objects to create when the job is set up (Volcano's OnJobAdd); none by default (the
    /// plugin is only recorded in `status.controlledResources`).
    fn on_job_add(&self, _job: &Job) -> Result<Vec<Owned>, PluginError> {
        Ok(Vec::new())
    }
    /// Objects to create/refresh on a later sync (Volcano's OnJobUpdate; svc's ConfigMap);
    /// none by default.
    fn on_job_update(&self, _job: &Job) -> Result<Vec<Owned>, PluginError> {
        Ok(Vec::new())
    }
    /// Objects to delete when the whole job is killed or deleted (Volcano's OnJobDelete);
    /// none by default.
    fn on_job_delete(&self, _job: &Job) -> Vec<Removed> {
        Vec::new()
    }
}

/// The plugins of `job.spec.plugins` with their arguments parsed, in name order (BTreeMap
/// order; Volcano's is Go map order: undefined). Unknown name ⇒ [`PluginError::Unknown`]; an
/// argument that does not parse ⇒ [`PluginError::BadArgument`].
pub fn plugins_for(job: &Job) -> Result<Vec<Box<dyn JobPlugin>>, PluginError> {
    let Some(plugins) = job.spec.plugins.as_ref() else {
        return Ok(Vec::new());
    };
    plugins
        .iter()
        .map(|(name, args)| build(name, args))
        .collect()
}

/// Builds one plugin by name.
fn build(name: &str, args: &[String]) -> Result<Box<dyn JobPlugin>, PluginError> {
    use keys::plugins as p;
    Ok(match name {
        p::ENV => Box::new(env::Env::new(args)?),
        p::SVC => Box::new(svc::Svc::new(args)?),
        p::SSH => Box::new(ssh::Ssh::new(args)?),
        p::PYTORCH => Box::new(pytorch::Pytorch::new(args)?),
        p::TENSORFLOW => Box::new(tensorflow::Tensorflow::new(args)?),
        p::MPI => Box::new(mpi::Mpi::new(args)?),
        p::HCCLRANK => Box::new(hcclrank::HcclRank::new(args)?),
        p::RAY => Box::new(ray::Ray::new(args)?),
        other => return Err(PluginError::Unknown(other.to_string())),
    })
}

/// The key under which the edge records a plugin in `status.controlledResources`:
/// `plugin-<name>`.
pub fn controlled_key(name: &str) -> String {
    format!("plugin-{name}")
}

// ---------------------------------------------------------------------------------------------
// Argument parsing (Go's `flag` package, as Volcano's plugins use it)
// ---------------------------------------------------------------------------------------------

/// How a flag takes its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `--flag` means true; a value only as `--flag=value`.
    Bool,
    /// A value as `--flag=value` or `--flag value`.
    Value,
}

/// The flags a plugin was given: name → the last value written (Go's `flag` keeps the last).
struct Args {
    plugin: &'static str,
    values: BTreeMap<&'static str, String>,
}

impl Args {
    /// Parses `args` against the plugin's flags `spec`.
    fn parse(
        plugin: &'static str,
        args: &[String],
        spec: &[(&'static str, Kind)],
    ) -> Result<Args, PluginError> {
        let bad = |argument: &str, reason: &str| PluginError::BadArgument {
            plugin,
            argument: argument.to_string(),
            reason: reason.to_string(),
        };
        let mut values = BTreeMap::new();
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            if arg == "--" {
                break;
            }
            let Some(body) = arg
                .strip_prefix("--")
                .or_else(|| arg.strip_prefix('-'))
                .filter(|b| !b.is_empty())
            else {
                // Go's flag stops at the first non-flag and ignores the rest; a stray word in
                // a plugin's arguments is a mistake worth reporting instead.
                return Err(bad(arg, "not a flag (expected --name or --name=value)"));
            };
            if body.starts_with('-') || body.starts_with('=') {
                return Err(bad(arg, "bad flag syntax"));
            }
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let Some(&(known, kind)) = spec.iter().find(|(n, _)| *n == name) else {
                // Volcano parses with Go's flag package and only logs its error: parsing stops
                // at the unknown flag, what came before it counts, and the job runs (Volcano's
                // own e2e suites pass `ssh --no-root`, a flag its ssh plugin does not have).
                // Refusing the job here would stop jobs Volcano runs.
                tracing::warn!(
                    plugin,
                    argument = %arg,
                    "unknown plugin argument; it and the arguments after it are ignored, as Volcano does"
                );
                break;
            };
            let value = match (kind, inline) {
                (_, Some(v)) => v.to_string(),
                (Kind::Bool, None) => "true".to_string(),
                (Kind::Value, None) => match rest.next() {
                    Some(v) => v.clone(),
                    None => return Err(bad(arg, "needs a value")),
                },
            };
            if kind == Kind::Bool && go_bool(&value).is_none() {
                return Err(bad(arg, "not a boolean"));
            }
            values.insert(known, value);
        }
        Ok(Args { plugin, values })
    }

    /// A string flag, `default` when not given.
    fn string(&self, name: &str, default: &str) -> String {
        self.values
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// A bool flag, `default` when not given (values were checked by `parse`).
    fn bool(&self, name: &str, default: bool) -> bool {
        self.values
            .get(name)
            .and_then(|v| go_bool(v))
            .unwrap_or(default)
    }

    /// An integer flag, `default` when not given; a value that is not an integer ⇒ error.
    fn int(&self, name: &str, default: i64) -> Result<i64, PluginError> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => go_int(v).ok_or_else(|| PluginError::BadArgument {
                plugin: self.plugin,
                argument: format!("--{name}={v}"),
                reason: "not an integer".to_string(),
            }),
        }
    }

    /// A port flag: an integer in 1..=65535. Volcano takes any int and lets the API server
    /// reject the pod later; tephra says so when the job is set up.
    fn port(&self, name: &str, default: i32) -> Result<i32, PluginError> {
        let n = self.int(name, i64::from(default))?;
        i32::try_from(n)
            .ok()
            .filter(|p| (1..=65535).contains(p))
            .ok_or_else(|| PluginError::BadArgument {
                plugin: self.plugin,
                argument: format!("--{name}={n}"),
                reason: "not a port (1-65535)".to_string(),
            })
    }
}

/// Go's `strconv.ParseBool`.
fn go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` as `flag.IntVar` uses it: an optional sign, then decimal,
/// `0x` hex, `0o`/leading-`0` octal or `0b` binary.
fn go_int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(b) = lower.strip_prefix("0x") {
        (16, b)
    } else if let Some(b) = lower.strip_prefix("0o") {
        (8, b)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (2, b)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(body, radix).ok()?;
    i64::try_from(if neg { -magnitude } else { magnitude }).ok()
}

// ---------------------------------------------------------------------------------------------
// Names and hosts
// ---------------------------------------------------------------------------------------------

/// The job's name (empty if unset).
fn job_name(job: &Job) -> &str {
    job.metadata.name.as_deref().unwrap_or_default()
}

/// The job's namespace (empty if unset).
fn job_namespace(job: &Job) -> &str {
    job.metadata.namespace.as_deref().unwrap_or_default()
}

/// The task's template hostname, if it sets a non-empty one.
fn template_hostname(task: &TaskSpec) -> Option<&str> {
    task.pod_spec()
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
}

/// The hostname and subdomain of replica `index` of `task`: the template's hostname or
/// `{job}-{task}-{i}`, and the template's subdomain or the job name.
fn host_parts(job: &Job, task: &TaskSpec, index: i32) -> (String, String) {
    let name = job_name(job);
    let hostname = template_hostname(task)
        .map(str::to_string)
        .unwrap_or_else(|| batch::pod_name(name, task.name(), index));
    let subdomain = task
        .pod_spec()
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())
        .unwrap_or(name);
    (hostname, subdomain.to_string())
}

/// The DNS name of replica `index` of `task`: `{hostname}.{subdomain}` (Volcano's
/// `MakeDomainName`).
fn host(job: &Job, task: &TaskSpec, index: i32) -> String {
    let (hostname, subdomain) = host_parts(job, task, index);
    format!("{hostname}.{subdomain}")
}

/// How many distinct hosts a task has as svc, ssh and mpi list them: one per replica, or a
/// single one when the template fixes the hostname (every replica would have the same name).
fn distinct_hosts(task: &TaskSpec) -> i32 {
    if template_hostname(task).is_some() {
        task.replicas().min(1)
    } else {
        task.replicas()
    }
}

/// The distinct hosts of a task (see [`distinct_hosts`]).
fn task_hosts(job: &Job, task: &TaskSpec) -> Vec<String> {
    (0..distinct_hosts(task))
        .map(|i| host(job, task, i))
        .collect()
}

/// The task of a pod: its `volcano.sh/task-spec` annotation, `default` when absent or empty
/// (Volcano's `GetTaskKey`).
fn pod_task(pod: &Pod) -> &str {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::TASK_SPEC))
        .map(String::as_str)
        .filter(|t| !t.is_empty())
        .unwrap_or(keys::DEFAULT_TASK_SPEC)
}

/// The replica index of a pod as text: the last `-` segment of its name when the name has at
/// least three segments, else empty (Volcano's `GetPodIndexUnderTask`).
fn pod_index_text(pod: &Pod) -> &str {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    if name.split('-').count() >= 3 {
        name.rsplit('-').next().unwrap_or_default()
    } else {
        ""
    }
}

/// The replica index of a pod as a number, for plugins that need one.
fn pod_index(plugin: &'static str, pod: &Pod) -> Result<i32, PluginError> {
    pod_index_text(pod)
        .parse()
        .map_err(|_| PluginError::Missing {
            plugin,
            what: format!(
                "pod {:?} has no replica index at the end of its name",
                pod.metadata.name.as_deref().unwrap_or_default()
            ),
        })
}

/// The controller ownerReference of an object made for `job`.
fn owner_reference(job: &Job) -> OwnerReference {
    OwnerReference {
        api_version: batch::API_VERSION.to_string(),
        kind: "Job".to_string(),
        name: job_name(job).to_string(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Metadata of an object named `name` made for `job`: in the job's namespace, owned by it.
fn owned_meta(job: &Job, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(job_namespace(job).to_string()),
        owner_references: Some(vec![owner_reference(job)]),
        ..ObjectMeta::default()
    }
}

/// A [`Removed`] of `kind` named `name` in the job's namespace.
fn removed(job: &Job, kind: OwnedKind, name: String) -> Removed {
    Removed {
        kind,
        namespace: job_namespace(job).to_string(),
        name,
    }
}

/// The selector labels of a job's pods: job name and namespace (svc, ray).
fn job_selector(job: &Job) -> BTreeMap<String, String> {
    BTreeMap::from([
        (keys::JOB_NAME.to_string(), job_name(job).to_string()),
        (
            keys::JOB_NAMESPACE.to_string(),
            job_namespace(job).to_string(),
        ),
    ])
}

// ---------------------------------------------------------------------------------------------
// Idempotent pod edits
// ---------------------------------------------------------------------------------------------

/// The pod's regular containers (empty without a spec).
fn containers(pod: &mut Pod) -> &mut [Container] {
    match pod.spec.as_mut() {
        Some(s) => &mut s.containers,
        None => &mut [],
    }
}

/// Every container of the pod: regular ones, then init containers.
fn all_containers(pod: &mut Pod) -> impl Iterator<Item = &mut Container> {
    pod.spec.iter_mut().flat_map(|s| {
        s.containers
            .iter_mut()
            .chain(s.init_containers.iter_mut().flatten())
    })
}

/// Sets an environment variable: replaces one of the same name in place, else appends.
fn set_env(container: &mut Container, var: EnvVar) {
    let env = container.env.get_or_insert_with(Vec::new);
    match env.iter_mut().find(|e| e.name == var.name) {
        Some(existing) => *existing = var,
        None => env.push(var),
    }
}

/// A plain `name=value` environment variable.
fn env_var(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// Opens `port` under `name` unless the container already has a port with that number.
fn open_port(container: &mut Container, name: &str, port: i32) {
    let ports = container.ports.get_or_insert_with(Vec::new);
    if !ports.iter().any(|p| p.container_port == port) {
        ports.push(ContainerPort {
            name: Some(name.to_string()),
            container_port: port,
            ..ContainerPort::default()
        });
    }
}

/// Adds a pod volume, replacing one of the same name.
fn set_volume(pod: &mut Pod, volume: Volume) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    match volumes.iter_mut().find(|v| v.name == volume.name) {
        Some(existing) => *existing = volume,
        None => volumes.push(volume),
    }
}

/// Adds a mount to a container, replacing one of the same volume at the same path.
fn set_mount(container: &mut Container, mount: VolumeMount) {
    let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
    match mounts
        .iter_mut()
        .find(|m| m.name == mount.name && m.mount_path == mount.mount_path)
    {
        Some(existing) => *existing = mount,
        None => mounts.push(mount),
    }
}

/// Mounts `mount` in every container and init container of the pod.
fn mount_everywhere(pod: &mut Pod, mount: &VolumeMount) {
    for c in all_containers(pod) {
        set_mount(c, mount.clone());
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers shared by the plugin tests.

    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Container, Pod};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use tephra_api::batch::{Job, pod_name};
    use tephra_api::keys;

    /// A job from YAML, with a namespace and uid as the API server would give it.
    pub fn job(yaml: &str) -> Job {
        let mut job: Job = match serde_saphyr::from_str(yaml) {
            Ok(j) => j,
            Err(e) => panic!("test job does not parse: {e}"),
        };
        job.metadata.namespace.get_or_insert_with(|| "ns".into());
        job.metadata.uid.get_or_insert_with(|| "uid-1".into());
        job
    }

    /// Pod `index` of task `task` as the edge builds it before the plugins run: the name,
    /// labels and annotations set and the template's spec copied.
    pub fn pod(job: &Job, task: &str, index: i32) -> Pod {
        let Some(spec) = job.spec.task(task) else {
            panic!("no task {task}");
        };
        let name = job.metadata.name.clone().unwrap_or_default();
        let marks = BTreeMap::from([
            (keys::TASK_SPEC.to_string(), task.to_string()),
            (keys::TASK_INDEX.to_string(), index.to_string()),
            (keys::JOB_NAME.to_string(), name.clone()),
        ]);
        Pod {
            metadata: ObjectMeta {
                name: Some(pod_name(&name, task, index)),
                namespace: job.metadata.namespace.clone(),
                labels: Some(marks.clone()),
                annotations: Some(marks),
                ..ObjectMeta::default()
            },
            spec: spec.pod_spec().cloned(),
            status: None,
        }
    }

    /// The container named `name`.
    pub fn container<'a>(pod: &'a Pod, name: &str) -> &'a Container {
        let found = pod.spec.as_ref().and_then(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
                .find(|c| c.name == name)
        });
        match found {
            Some(c) => c,
            None => panic!("no container {name}"),
        }
    }

    /// `(name, value)` of every plain environment variable of a container, in order.
    pub fn envs(c: &Container) -> Vec<(String, String)> {
        c.env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect()
    }

    /// The value of one environment variable of a container.
    pub fn env(c: &Container, name: &str) -> Option<String> {
        c.env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    }

    /// `(name, number)` of every port of a container, in order.
    pub fn ports(c: &Container) -> Vec<(String, i32)> {
        c.ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
            .collect()
    }

    /// `plugins_for` of the job, expecting exactly one plugin.
    pub fn only_plugin(job: &Job) -> Box<dyn super::JobPlugin> {
        match super::plugins_for(job) {
            Ok(mut v) if v.len() == 1 => v.remove(0),
            Ok(v) => panic!("expected one plugin, got {}", v.len()),
            Err(e) => panic!("plugins_for failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    const SPEC: &[(&str, Kind)] = &[
        ("name", Kind::Value),
        ("count", Kind::Value),
        ("flag", Kind::Bool),
    ];

    #[test]
    fn parses_both_value_forms_and_bool_forms() {
        let a = Args::parse(
            "t",
            &args(&["--name=a", "-count", "7", "--flag", "--name", "b"]),
            SPEC,
        )
        .unwrap();
        assert_eq!(a.string("name", "x"), "b", "the last value wins");
        assert_eq!(a.int("count", 0).unwrap(), 7);
        assert!(a.bool("flag", false));

        let a = Args::parse("t", &args(&["--flag=false"]), SPEC).unwrap();
        assert!(!a.bool("flag", true));
        assert_eq!(a.string("name", "x"), "x");
        assert_eq!(a.int("count", 3).unwrap(), 3);

        // `--flag value` does not give a bool flag its value: `false` is a stray word.
        assert!(Args::parse("t", &args(&["--flag", "false"]), SPEC).is_err());
        // `--` ends the flags.
        let a = Args::parse("t", &args(&["--", "--nonsense"]), SPEC).unwrap();
        assert!(a.values.is_empty());
        assert!(Args::parse("t", &[], SPEC).unwrap().values.is_empty());
    }

    #[test]
    fn rejects_bad_arguments_naming_plugin_and_argument() {
        for bad in [
            &["--flag=maybe"][..],
            &["--name"],
            &["stray"],
            &["---name=x"],
            &["--=x"],
            &["-"],
        ] {
            match Args::parse("demo", &args(bad), SPEC) {
                Err(PluginError::BadArgument {
                    plugin, argument, ..
                }) => {
                    assert_eq!(plugin, "demo");
                    assert_eq!(argument, bad[0]);
                }
                other => panic!("{bad:?}: expected BadArgument, got {:?}", other.is_ok()),
            }
        }
        // An unknown flag ends parsing without an error, as Go's flag package leaves it to
        // Volcano's plugins (they log it and go on): what came before it counts.
        let a = Args::parse("demo", &args(&["--name=x", "--nope=1", "--count=2"]), SPEC).unwrap();
        assert_eq!(a.string("name", ""), "x");
        assert_eq!(a.int("count", 0).unwrap(), 0);
        let a = Args::parse("demo", &args(&["--count=abc"]), SPEC).unwrap();
        assert!(matches!(
            a.int("count", 0),
            Err(PluginError::BadArgument { plugin: "demo", .. })
        ));
        let a = Args::parse("demo", &args(&["--count=70000"]), SPEC).unwrap();
        assert!(a.port("count", 1).is_err());
        let a = Args::parse("demo", &args(&["--count=0"]), SPEC).unwrap();
        assert!(a.port("count", 1).is_err());
    }

    #[test]
    fn go_integers_and_bools() {
        assert_eq!(go_int("42"), Some(42));
        assert_eq!(go_int("-3"), Some(-3));
        assert_eq!(go_int("+3"), Some(3));
        assert_eq!(go_int("0x1F"), Some(31));
        assert_eq!(go_int("017"), Some(15));
        assert_eq!(go_int("0b101"), Some(5));
        assert_eq!(go_int("0"), Some(0));
        assert_eq!(go_int(""), None);
        assert_eq!(go_int("1.5"), None);
        assert_eq!(go_int("99999999999999999999"), None);
        assert_eq!(go_bool("T"), Some(true));
        assert_eq!(go_bool("yes"), None);
    }

    #[test]
    fn unknown_plugin_is_an_error() {
        let job = testing::job(
            "metadata: {name: j}\nspec:\n  plugins: {env: [], gpu-magic: []}\n  tasks: [{name: a, replicas: 1}]\n",
        );
        match plugins_for(&job) {
            Err(PluginError::Unknown(name)) => assert_eq!(name, "gpu-magic"),
            _ => panic!("expected Unknown"),
        }
    }

    #[test]
    fn plugins_come_in_name_order_and_null_args_are_none() {
        let job = testing::job(
            "metadata: {name: j}\nspec:\n  plugins: {svc: null, ssh: [], env: [], ray: [], pytorch: [], mpi: [], tensorflow: [], hcclrank: []}\n  tasks: [{name: head, replicas: 1}]\n",
        );
        let names: Vec<_> = plugins_for(&job)
            .unwrap()
            .iter()
            .map(|p| p.name())
            .collect();
        assert_eq!(
            names,
            [
                "env",
                "hcclrank",
                "mpi",
                "pytorch",
                "ray",
                "ssh",
                "svc",
                "tensorflow"
            ]
        );
        let none = testing::job("metadata: {name: j}\nspec:\n  tasks: []\n");
        assert!(plugins_for(&none).unwrap().is_empty());
    }

    #[test]
    fn controlled_key_and_owner_reference() {
        assert_eq!(controlled_key("svc"), "plugin-svc");
        let job = testing::job("metadata: {name: j}\nspec: {}\n");
        let r = owner_reference(&job);
        assert_eq!(r.api_version, "batch.volcano.sh/v1alpha1");
        assert_eq!(r.kind, "Job");
        assert_eq!((r.name.as_str(), r.uid.as_str()), ("j", "uid-1"));
        assert_eq!(
            (r.controller, r.block_owner_deletion),
            (Some(true), Some(true))
        );
    }

    #[test]
    fn host_rule() {
        let job = testing::job(
            r#"
metadata: {name: j}
spec:
  tasks:
    - {name: a, replicas: 2}
    - name: b
      replicas: 3
      template: {spec: {hostname: fixed, subdomain: sub, containers: []}}
    - name: c
      replicas: 2
      template: {spec: {subdomain: other, containers: []}}
    - {name: d, replicas: 0}
"#,
        );
        let t = |n| job.spec.task(n).unwrap();
        assert_eq!(task_hosts(&job, t("a")), ["j-a-0.j", "j-a-1.j"]);
        assert_eq!(task_hosts(&job, t("b")), ["fixed.sub"]);
        assert_eq!(task_hosts(&job, t("c")), ["j-c-0.other", "j-c-1.other"]);
        assert!(task_hosts(&job, t("d")).is_empty());
        assert_eq!(host(&job, t("b"), 2), "fixed.sub");
    }

    #[test]
    fn pod_index_from_name() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("my-job-worker-12".into());
        assert_eq!(pod_index_text(&pod), "12");
        assert_eq!(pod_index("t", &pod), Ok(12));
        pod.metadata.name = Some("job-x".into());
        assert_eq!(pod_index_text(&pod), "");
        assert!(matches!(
            pod_index("t", &pod),
            Err(PluginError::Missing { plugin: "t", .. })
        ));
        assert_eq!(pod_task(&pod), "default");
    }

    /// The mpi example of Volcano's repository with the plugins such a job usually lists:
    /// every plugin edits the pod, the edits do not clash, and running them again changes
    /// nothing.
    #[test]
    fn plugins_together_on_an_mpi_job() {
        let job = testing::job(
            r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: lm-mpi-job
spec:
  minAvailable: 3
  schedulerName: volcano
  plugins:
    ssh: []
    svc: []
    env: []
    mpi: ["--master=mpimaster", "--worker=mpiworker"]
  tasks:
    - replicas: 1
      name: mpimaster
      policies:
        - event: TaskCompleted
          action: CompleteJob
      template:
        spec:
          containers:
            - command: [/bin/sh, -c, "mpiexec --allow-run-as-root --host ${MPI_HOST} -np 2 mpi_hello_world"]
              image: volcanosh/example-mpi:0.0.3
              name: mpimaster
              ports:
                - containerPort: 22
                  name: mpijob-port
              workingDir: /home
          restartPolicy: OnFailure
    - replicas: 2
      name: mpiworker
      template:
        spec:
          containers:
            - command: [/bin/sh, -c, "mkdir -p /var/run/sshd; /usr/sbin/sshd -D;"]
              image: volcanosh/example-mpi:0.0.3
              name: mpiworker
              ports:
                - containerPort: 22
                  name: mpijob-port
              workingDir: /home
          restartPolicy: OnFailure
"#,
        );
        let plugins = plugins_for(&job).unwrap();
        let names: Vec<_> = plugins.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["env", "mpi", "ssh", "svc"]);

        let mut pod = testing::pod(&job, "mpimaster", 0);
        for round in 0..2 {
            let before = pod.clone();
            for p in &plugins {
                p.on_pod_create(&job, &mut pod).unwrap();
            }
            if round == 1 {
                assert_eq!(pod, before, "a second pass changes nothing");
            }
        }
        let c = testing::container(&pod, "mpimaster");
        let plain = testing::envs(c);
        let plain: Vec<_> = plain
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            plain,
            [
                ("VK_TASK_INDEX", "0"),
                ("VC_TASK_INDEX", "0"),
                (
                    "MPI_HOST",
                    "lm-mpi-job-mpiworker-0.lm-mpi-job,lm-mpi-job-mpiworker-1.lm-mpi-job"
                ),
            ]
        );
        assert_eq!(
            c.env.as_ref().map(Vec::len),
            Some(7),
            "plus 4 from the ConfigMap"
        );
        assert_eq!(testing::ports(c), [("mpijob-port".to_string(), 22)]);
        let mounts: Vec<_> = c
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| (m.name.as_str(), m.mount_path.as_str()))
            .collect();
        assert_eq!(
            mounts,
            [
                ("lm-mpi-job-ssh", "/root/.ssh"),
                ("lm-mpi-job-svc", "/etc/volcano")
            ]
        );
        let spec = pod.spec.clone().unwrap_or_default();
        assert_eq!(spec.volumes.map(|v| v.len()), Some(2));
        assert_eq!(spec.hostname.as_deref(), Some("lm-mpi-job-mpimaster-0"));
        assert_eq!(spec.subdomain.as_deref(), Some("lm-mpi-job"));

        let mut made = Vec::new();
        for p in &plugins {
            made.extend(p.on_job_add(&job).unwrap());
        }
        let made: Vec<_> = made
            .iter()
            .map(|o| (o.kind(), o.name().to_string()))
            .collect();
        assert_eq!(
            made,
            [
                (OwnedKind::Secret, "lm-mpi-job-ssh".to_string()),
                (OwnedKind::ConfigMap, "lm-mpi-job-svc".to_string()),
                (OwnedKind::Service, "lm-mpi-job".to_string()),
                (OwnedKind::NetworkPolicy, "lm-mpi-job".to_string()),
            ]
        );
        let gone: usize = plugins.iter().map(|p| p.on_job_delete(&job).len()).sum();
        assert_eq!(gone, 4);
    }

    #[test]
    fn a_bad_argument_fails_plugins_for() {
        let job = testing::job(
            "metadata: {name: j}\nspec:\n  plugins: {env: [], mpi: [--port=ssh]}\n  tasks: []\n",
        );
        match plugins_for(&job) {
            Err(e @ PluginError::BadArgument { plugin: "mpi", .. }) => {
                assert_eq!(
                    e.to_string(),
                    "plugin mpi: argument \"--port=ssh\": not an integer"
                );
                assert_eq!(e.metric_label(), "bad_argument");
            }
            _ => panic!("expected BadArgument"),
        }
    }
}
