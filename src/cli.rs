//! The command line (its names and flags are a fixed interface): `serve`, `crds`, `apiserver`, `certs`; and
//! the `vcctl`-style `job`, `queue` and `pg` (their flags live in [`crate::vcctl`]); the
//! what-if `simulate` (its flags live in [`crate::simulate`]).
//!
//! Only parsing lives here (clap derive), so the flags and their help text can be tested
//! without starting anything; `main.rs` dispatches to the library.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Volcano-compatible gang scheduling for any Kubernetes cluster, in one binary.
#[derive(Debug, Parser)]
#[command(name = "tephra", version, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Log line format: `text` for people, `json` for log pipelines.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "TEPHRA_LOG_FORMAT")]
    pub log_format: LogFormat,

    /// Log filter in `tracing` EnvFilter syntax (e.g. `info`, `tephra=debug,kube=warn`).
    /// `RUST_LOG` is used when this flag is absent, and `info` without either (`warn` for the
    /// `job`, `queue`, `pg` and `simulate` commands, whose errors are one line of their own).
    #[arg(long, global = true, env = "TEPHRA_LOG")]
    pub log: Option<String>,

    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Where `tephra serve` gets its serving certificate (`--tls-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum TlsMode {
    /// Read --tls-cert/--tls-key (and --tls-ca) from files and reload them when they change
    /// (cert-manager or your own certificates).
    #[default]
    Files,
    /// Keep a CA and serving certificate in a Secret (--tls-self-secret), publish the CA into
    /// tephra's webhook configurations and a ConfigMap (--tls-self-configmap), and rotate both
    /// before they expire.
    #[value(name = "self")]
    SelfManaged,
}

/// Output format of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// What `tephra serve` runs today: its `--help` and its start-up log both say this, so the
/// two never disagree. Update it here when the scheduler extender and the controllers land.
pub const SERVE_RUNS: &str = "the admission webhooks (vcJobs, Pods, PodGroups, Queues, \
     Deployments and StatefulSets), the gang scheduling session (PodGroup and Queue status, \
     the placement plan), the kube-scheduler extender (filter, prioritize, bind, preempt), \
     the Job, PodGroup and Queue controllers and the built-in `default` and `root` queues, with \
     leader election on a Lease (only the leader runs the controllers, the session and the \
     extender's answers; every replica serves the webhooks); with --embedded also the in-memory \
     Kubernetes API with its kubelet and kube-scheduler stand-ins";

/// The first line `tephra serve` logs: what runs in this mode, and where its state lives.
/// `api` is the embedded API's address (embedded mode), `elect` whether replicas elect a
/// leader.
pub fn serve_banner(
    api: Option<SocketAddr>,
    data: Option<&std::path::Path>,
    elect: bool,
) -> String {
    let parts = "the admission webhooks, the gang scheduling session, the kube-scheduler \
         extender and the Job, PodGroup and Queue controllers";
    let kept = match data {
        Some(dir) => format!("its objects are kept in {} across restarts", dir.display()),
        None => "its objects are kept in memory only and are gone when tephra stops \
                 (--embedded-data DIR keeps them)"
            .to_string(),
    };
    match api {
        Some(addr) => format!(
            "tephra serve --embedded: a Kubernetes API on http://{addr} with kubelet and \
             kube-scheduler stand-ins, and on it {parts}; {kept}"
        ),
        None if elect => format!(
            "tephra serve: {parts} against the cluster; replicas elect a leader on a Lease \
             (only the leader runs the controllers, the session and the extender's answers; \
             every replica serves the webhooks)"
        ),
        None => format!(
            "tephra serve: {parts} against the cluster, as its only replica (--leader-elect=false)"
        ),
    }
}

/// What `tephra serve` does not run yet (see [`SERVE_RUNS`]).
pub const SERVE_NOT_YET: &str = "--tls-mode self together with --embedded (embedded mode \
     makes its own certificate at start)";

/// `tephra serve --help`'s first line.
const SERVE_ABOUT: &str = "Run tephra's admission webhooks against a cluster (or, with \
     --embedded, an in-memory API in the same process)";

/// `tephra serve --help`'s paragraph, from [`SERVE_RUNS`] and [`SERVE_NOT_YET`].
fn serve_long_about() -> String {
    format!("{SERVE_ABOUT}.\n\nRuns: {SERVE_RUNS}.\nNot yet: {SERVE_NOT_YET}.")
}

/// The subcommands.
// One value per process, parsed once and moved into the subcommand it names: the size of
// `serve`'s flags costs nothing, and boxing them would only make every match noisier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run tephra against a cluster, or with --embedded against an in-memory API.
    #[command(about = SERVE_ABOUT, long_about = serve_long_about())]
    Serve(ServeArgs),
    /// Print every CustomResourceDefinition tephra serves as YAML (the source of manifests/crds).
    Crds,
    /// Run the embedded, in-memory Kubernetes-compatible API alone (plain HTTP, no
    /// authentication), so a `tephra serve --kubeconfig` can be stopped and restarted against it.
    Apiserver(ApiserverArgs),
    /// Make a CA and a serving certificate for the webhook Service; writes ca.crt, ca.key,
    /// tls.crt and tls.key into --out and prints the base64 caBundle for webhook configurations.
    Certs(CertsArgs),
    /// Run, list, view and steer vcJobs (run, list, view, abort, resume, restart, delete).
    Job(crate::vcctl::JobArgs),
    /// Create, list and steer Queues (create, list, get, open, close, delete).
    Queue(crate::vcctl::QueueArgs),
    /// List PodGroups, the gangs the scheduler places.
    Pg(crate::vcctl::PgArgs),
    /// What-if: when would these vcJobs be admitted, start and finish on this cluster, what
    /// do they wait for, which jobs do they delay? Plays the real scheduling session over
    /// simulated time on the cluster's state (read with LIST requests only, or from a
    /// `--dump`); never writes to the cluster.
    Simulate(crate::simulate::SimulateArgs),
}

impl Command {
    /// Whether this is one of the user commands (`job`, `queue`, `pg`, `simulate`), which
    /// print results rather than logs.
    pub fn is_client(&self) -> bool {
        matches!(
            self,
            Command::Job(_) | Command::Queue(_) | Command::Pg(_) | Command::Simulate(_)
        )
    }
}

/// The log filter of the user commands without --log or RUST_LOG: their errors are the one
/// line `main` prints, so the kube client's own error logs would only say it twice.
pub const CLIENT_LOG_FILTER: &str = "warn,kube_client=off";

/// Flags of `tephra serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Run an in-process, in-memory Kubernetes-compatible API instead of using a cluster. For
    /// trying tephra, tests and simulation; production uses a real cluster.
    #[arg(long)]
    pub embedded: bool,

    /// Kubeconfig file of the cluster to use. Without it: the in-cluster service account, then
    /// $KUBECONFIG, then ~/.kube/config.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// HTTPS address of the admission webhooks and the scheduler extender.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,

    /// Where the serving certificate comes from. `files`: read --tls-cert/--tls-key (and
    /// --tls-ca) from files and reload them when they change (cert-manager or your own
    /// certificates); without those flags a self-signed pair is made at start. `self`: keep a
    /// CA and serving certificate in the Secret --tls-self-secret (made by the first replica,
    /// shared by all), write the CA into tephra's webhook configurations (caBundle) and the
    /// ConfigMap --tls-self-configmap (key ca.crt, for kube-scheduler), and rotate them before
    /// they expire (the --tls-self-* flags); `self` is what the manifests and the Helm chart
    /// run. Not with --embedded.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = TlsMode::Files)]
    pub tls_mode: TlsMode,

    /// `--tls-mode self` flags.
    #[command(flatten)]
    pub tls_self: TlsSelfFlags,

    /// PEM certificate (chain) for the HTTPS listener; give --tls-key with it. Without
    /// --tls-cert/--tls-key a self-signed pair is made at start.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key for --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// PEM CA certificate(s) that signed --tls-cert, when that file holds no CA (files from
    /// `tephra certs` do). With --embedded it becomes the webhooks' caBundle.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,

    /// How often --tls-cert/--tls-key are re-read (with --tls-mode self: how often the Secret
    /// is read and, on the leader, the next rotation step considered); a changed pair
    /// (cert-manager, a mounted Secret, `tephra certs --renew-serving`, a rotation) is served
    /// to new connections without a restart, open connections keep theirs.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub tls_reload_interval: std::time::Duration,

    /// PEM CA certificate(s): require and verify a client certificate signed by one of them on
    /// the HTTPS listener (for kube-apiserver and kube-scheduler configured to present one; the
    /// book's Certificates page shows the AdmissionConfiguration). Off by default. /metrics, /healthz and /readyz on
    /// --metrics-listen stay open for the kubelet's probes.
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,

    /// Plain-HTTP address serving /metrics, /healthz, /readyz and the read-only web view
    /// (/ui).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,

    /// Do not serve the read-only web view (/ui: queues, gangs and why they wait, a gang's
    /// pods, what-if) on --metrics-listen. It shows the names of queues, jobs, pods and nodes
    /// and the scheduler's messages to whoever reaches that address; never a pod's
    /// environment, volumes or any Secret.
    #[arg(long)]
    pub no_ui: bool,

    /// Offer HTTP/2 on the HTTPS listener. Off by default: webhook servers keep HTTP/2 off
    /// since the HTTP/2 Rapid Reset attacks (CVE-2023-44487); kube-apiserver and
    /// kube-scheduler speak HTTP/1.1 to webhooks and extenders fine.
    #[arg(long)]
    pub enable_http2: bool,

    /// Embedded mode only: plain-HTTP address of the in-memory API (loopback by default; it has
    /// no authentication). A non-loopback address is refused without
    /// --embedded-api-allow-remote.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6443")]
    pub embedded_api_listen: SocketAddr,

    /// Embedded mode only: allow --embedded-api-listen on a non-loopback address. Anyone who
    /// reaches that address can read and change everything in the API (there is no
    /// authentication), and make it call loopback webhooks.
    #[arg(long)]
    pub embedded_api_allow_remote: bool,

    /// Scheduler name(s) whose pods and jobs tephra serves; the first is the default written
    /// into vcJobs. Repeat the flag for several.
    #[arg(
        long = "scheduler-name",
        value_name = "NAME",
        default_value = "volcano"
    )]
    pub scheduler_names: Vec<String>,

    /// PodGroup controller: copy the `volcano.sh/` annotations (and read min-member and queue)
    /// of a pod's owners (ReplicaSet, Deployment, StatefulSet, DaemonSet, Job) onto its
    /// PodGroup; the pod's own annotations win.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub inherit_owner_annotations: bool,

    /// Job controller: number of workers. A job is always handled by the same worker
    /// (FNV-32 of `namespace/name` modulo N), so two transitions of one job never race.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub job_workers: u16,

    /// Job controller: after this many failed attempts in a row at one request of a job, the
    /// job is terminated (Volcano's --max-requeue-num); -1 never gives up. A queue or PVC the
    /// job names that does not exist yet never counts: the job waits for it (retried at least
    /// every 30 s).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 15,
        allow_negative_numbers = true
    )]
    pub max_requeue: i32,

    /// Scheduler session configuration in Volcano's scheduler-conf YAML (actions, tiers,
    /// plugin arguments); Volcano's built-in default without it. Checked at start (a missing or
    /// bad file refuses to start) and reloaded when it changes (a bad new file keeps the old).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Controller configuration in Volcano's volcano-controller.conf YAML: its
    /// networkTopologyDiscovery `label` source makes HyperNodes from node labels, one tier per
    /// label key (other sources are named in a warning and left out). Without it no HyperNode
    /// is discovered. Checked at start (a missing or bad file refuses to start) and re-read
    /// when it changes, every 10 s (a bad new file keeps the old).
    #[arg(long, value_name = "FILE")]
    pub controller_config: Option<PathBuf>,

    /// Refuse a scheduler configuration that names Volcano plugins tephra does not run
    /// (`pdb`, `usage`, …), at start and at reload, with one line naming them. Without it
    /// they are left out of every session, named in a warning and in the gauge
    /// `tephra_scheduler_plugin_ignored`.
    #[arg(long)]
    pub strict_config: bool,

    /// How often the scheduling session runs (Go duration: `500ms`, `1s`, `2m`); sessions also
    /// run on demand when pods, gangs or capacity change. A gang's members beyond its
    /// `minMember` are placed one period after the gang started, so gangs submitted within
    /// one period all get their minimum first (as in Volcano).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub schedule_period: std::time::Duration,

    /// Embedded mode: start with N Ready nodes (at most 100000), each 8 cpu, 32Gi memory,
    /// 110 pods.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = parse_node_count)]
    pub embedded_nodes: usize,

    /// Embedded mode: do not run the kube-scheduler stand-in (a test plays that part).
    #[arg(long)]
    pub no_sim_scheduler: bool,

    /// Embedded mode: do not run the kubelet stand-in (a test plays that part).
    #[arg(long)]
    pub no_sim_kubelet: bool,

    /// Embedded mode: do not run the controller-manager stand-in (Deployments, ReplicaSets,
    /// StatefulSets and batch Jobs then get no pods or statuses; a test plays that part).
    #[arg(long)]
    pub no_sim_controllers: bool,

    /// Embedded mode: inject API faults, e.g. `write-error=0.1,conflict=0.05,watch-cut=30,seed=7`:
    /// fail that fraction of writes with 500, answer that fraction of updates and patches with
    /// 409 Conflict, end every watch after that many seconds, with this random seed.
    #[arg(long, value_name = "SPEC")]
    pub faults: Option<String>,

    /// Embedded mode: keep the embedded API's objects in DIR (one file, `objects.redb`, written
    /// on every change), so a restart finds its jobs, queues and pods (a watch from before the
    /// restart gets 410 Gone and lists again). Without it they live in memory and are gone
    /// when tephra stops.
    #[arg(long, value_name = "DIR")]
    pub embedded_data: Option<PathBuf>,

    /// Scheduler extender flags.
    #[command(flatten)]
    pub extender: ExtenderFlags,

    /// Gang engine flags.
    #[command(flatten)]
    pub engine: EngineFlags,

    /// Leader election flags.
    #[command(flatten)]
    pub leader: LeaderFlags,
}

/// Flags of `--tls-mode self`.
#[derive(Debug, Args)]
pub struct TlsSelfFlags {
    /// --tls-mode self: the Secret (type kubernetes.io/tls) holding the CA bundle (ca.crt), the
    /// newest CA's key (ca.key) and the serving pair (tls.crt, tls.key).
    #[arg(long, value_name = "NAME", default_value = crate::selftls::DEFAULT_SECRET)]
    pub tls_self_secret: String,

    /// --tls-mode self: the ConfigMap the CA bundle is written to (key ca.crt), for
    /// kube-scheduler's extender TLS configuration to mount.
    #[arg(long, value_name = "NAME", default_value = crate::selftls::DEFAULT_CONFIGMAP)]
    pub tls_self_configmap: String,

    /// --tls-mode self: namespace of the Secret and the ConfigMap, and of the Services named
    /// in the certificate. Default: $POD_NAMESPACE, else the service account's namespace,
    /// else `tephra-system`.
    #[arg(long, value_name = "NS")]
    pub tls_self_namespace: Option<String>,

    /// --tls-mode self: a Service the serving certificate is valid for (NAME, NAME.NS,
    /// NAME.NS.svc, NAME.NS.svc.cluster.local). Repeat for several; the first is the
    /// certificate's common name.
    #[arg(long = "tls-self-service", value_name = "NAME", default_values_t = ["tephra".to_string(), "tephra-extender".to_string()])]
    pub tls_self_services: Vec<String>,

    /// --tls-mode self: one more DNS name or IP address for the serving certificate. Repeat
    /// for several.
    #[arg(long = "tls-self-extra-name", value_name = "NAME")]
    pub tls_self_extra_names: Vec<String>,

    /// --tls-mode self: life of a new CA. A successor is made at two thirds of it.
    #[arg(long, value_name = "DURATION", default_value = "87600h", value_parser = parse_duration)]
    pub tls_self_ca_validity: std::time::Duration,

    /// --tls-mode self: life of a new serving certificate. It is renewed at two thirds of it.
    #[arg(long, value_name = "DURATION", default_value = "2160h", value_parser = parse_duration)]
    pub tls_self_serving_validity: std::time::Duration,

    /// --tls-mode self: how long the old and the new CA are both trusted, counted from the
    /// publication of the bundle holding both; the old one is dropped after it (once the
    /// serving certificate is signed by the new one). Longer than --tls-self-propagation,
    /// shorter than a third of --tls-self-ca-validity.
    #[arg(long, value_name = "DURATION", default_value = "720h", value_parser = parse_duration)]
    pub tls_self_ca_overlap: std::time::Duration,

    /// --tls-mode self: how long after a CA bundle is published before a serving certificate
    /// signed by a CA new in it is served (time for kube-apiserver to see the webhook
    /// configurations and for the kubelet to update kube-scheduler's mounted ConfigMap).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub tls_self_propagation: std::time::Duration,
}

impl TlsSelfFlags {
    /// The lifetimes and delays.
    pub fn policy(&self) -> crate::selftls::Policy {
        crate::selftls::Policy {
            ca_validity: self.tls_self_ca_validity,
            serving_validity: self.tls_self_serving_validity,
            overlap: self.tls_self_ca_overlap,
            propagation: self.tls_self_propagation,
        }
    }
}

/// Flags of leader election (kube-scheduler's names and defaults).
#[derive(Debug, Args)]
pub struct LeaderFlags {
    /// Elect a leader on a coordination.k8s.io/v1 Lease before running the controllers, the
    /// scheduling session, the status writers and the extender's answers; every replica serves
    /// the webhooks. On by default, except with --embedded; `--leader-elect=false` turns it off
    /// (run a single replica then).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub leader_elect: Option<bool>,

    /// How long a Lease stays valid without renewal; a follower takes over after this when the
    /// leader vanishes without releasing it.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: std::time::Duration,

    /// How long the leader keeps failing to renew before it stops leading (and exits, to
    /// restart as a follower). Below the lease duration.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: std::time::Duration,

    /// How often followers try to take the Lease and the leader renews it.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: std::time::Duration,

    /// Namespace of the Lease. Default: $POD_NAMESPACE, else the service account's namespace,
    /// else `tephra-system`.
    #[arg(long, value_name = "NS")]
    pub leader_elect_namespace: Option<String>,

    /// Name of the Lease.
    #[arg(long, value_name = "NAME", default_value = crate::leader::DEFAULT_LEASE_NAME)]
    pub leader_elect_lease_name: String,
}

impl LeaderFlags {
    /// Whether to elect: `--leader-elect`, else on outside embedded mode.
    pub fn enabled(&self, embedded: bool) -> bool {
        self.leader_elect.unwrap_or(!embedded)
    }

    /// The three durations.
    pub fn timings(&self) -> crate::leader::Timings {
        crate::leader::Timings {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
        }
    }
}

/// Which engine places gangs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GangEngine {
    /// `native` when the cluster serves `scheduling.k8s.io/v1beta1` PodGroups, else `extender`.
    Auto,
    /// kube-scheduler calls tephra's `/scheduler/*` verbs; the session's plan decides the nodes
    /// and binds are held until the gang is whole.
    Extender,
    /// Kubernetes 1.37+: kube-scheduler's own gang scheduling places each gang whole; tephra
    /// mirrors PodGroups into `scheduling.k8s.io` Workloads and PodGroups and admits gangs to
    /// their queues by removing its scheduling gate.
    Native,
}

/// Flags choosing and tuning the gang engine.
#[derive(Debug, Args)]
pub struct EngineFlags {
    /// Which engine places gangs: `extender` (kube-scheduler's extender calls, any Kubernetes
    /// version), `native` (Kubernetes 1.37+ with the feature gate GenericWorkload and the API
    /// scheduling.k8s.io/v1beta1 on: no extender, kube-scheduler's own gang scheduling), or
    /// `auto`: native when the cluster serves scheduling.k8s.io/v1beta1 PodGroups, else the
    /// extender. The engine in use is logged at start and exported as `tephra_gang_engine`.
    /// `native` on a cluster that does not serve the API refuses to start; the embedded API
    /// runs the extender.
    #[arg(long, value_name = "ENGINE", value_enum, default_value_t = GangEngine::Auto)]
    pub gang_engine: GangEngine,

    /// Native engine: the kube-scheduler profile gang pods are sent to. `/pods/mutate` sets it
    /// as the `schedulerName` of gang pods that asked for one of tephra's scheduler names
    /// (which is kept in the annotation `scheduling.tephra.io/scheduler-name`).
    #[arg(long, value_name = "NAME", default_value = "default-scheduler")]
    pub native_scheduler_name: String,

    /// Native engine: a gang whose gate was removed (admitted to its queue) that kube-scheduler
    /// has not placed within this time is held back again, and the room it was admitted to is
    /// released for other gangs; it is admitted anew when a session finds room again.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub native_place_timeout: std::time::Duration,
}

/// Flags of the scheduler extender.
#[derive(Debug, Args)]
pub struct ExtenderFlags {
    /// Scheduler extender: how long a gang member's bind is held waiting for binds of the rest
    /// of its gang's minMember members; then every held bind is answered with an error (and
    /// kube-scheduler retries it). Keep it below the extender httpTimeout of kube-scheduler's
    /// configuration (manifests/scheduler-config.yaml sets 5s).
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = parse_duration)]
    pub bind_hold_timeout: std::time::Duration,

    /// Scheduler extender: how long gang members whose held binds timed out keep their
    /// placements after the gang's last bind arrived; when the rest of the gang arrives in that
    /// window, all are bound together (the timed-out ones too). kube-scheduler places one pod at
    /// a time, so a gang's binds can arrive further apart than one hold. `0s` releases the
    /// placements at the hold timeout.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration_or_zero)]
    pub bind_gather_timeout: std::time::Duration,

    /// Scheduler extender: once the members the session has placed reach the gang's
    /// minMember, bind all of them at once (when their plan gates are off, or when the first
    /// member's bind arrives) instead of waiting for kube-scheduler to ask for each (it places
    /// one pod per cycle). The gang is still bound whole. Members with PersistentVolumeClaims, ephemeral volumes, resource claims,
    /// inter-pod affinity or topology spread constraints are never bound ahead (kube-scheduler
    /// checks or prepares those). `false` binds only members kube-scheduler asked for.
    #[arg(
        long,
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub bind_ahead: bool,

    /// Scheduler extender: how long a filter request for a pod the plan has not seen yet waits
    /// for an on-demand scheduling session before answering.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub extender_plan_wait: std::time::Duration,

    /// Scheduler extender: the Job controller creates each gang pod of a scheduler tephra
    /// serves behind the scheduling gate `scheduling.tephra.io/gang-plan`, and the gate is
    /// removed once a scheduling session has placed the pod. kube-scheduler then asks about a
    /// gang pod only when the plan has a node for it: no turned-down attempts, and none of
    /// kube-scheduler's per-pod backoff (up to 10 s) between room freeing and the bind.
    /// Pods that request nothing are never gated. `false` creates pods ungated: kube-scheduler
    /// asks at once and is turned down until the gang is placed.
    #[arg(
        long,
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub gate_until_placed: bool,
}

/// Flags of `tephra apiserver`.
#[derive(Debug, Args)]
pub struct ApiserverArgs {
    /// Plain-HTTP address of the API (loopback by default; it has no authentication). A
    /// non-loopback address is refused without --embedded-api-allow-remote.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,

    /// Allow --listen on a non-loopback address. Anyone who reaches that address can read and
    /// change everything in the API (there is no authentication).
    #[arg(long)]
    pub embedded_api_allow_remote: bool,

    /// Start with N Ready nodes (at most 100000), each 8 cpu, 32Gi memory, 110 pods.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = parse_node_count)]
    pub embedded_nodes: usize,

    /// Do not run the kubelet stand-in.
    #[arg(long)]
    pub no_sim_kubelet: bool,

    /// Do not run the controller-manager stand-in (Deployments, ReplicaSets, StatefulSets and
    /// batch Jobs then get no pods or statuses).
    #[arg(long)]
    pub no_sim_controllers: bool,

    /// Inject API faults, e.g. `write-error=0.1,conflict=0.05,watch-cut=30,seed=7`: fail that
    /// fraction of writes with 500, answer that fraction of updates and patches with 409
    /// Conflict, end every watch after that many seconds, with this random seed.
    #[arg(long, value_name = "SPEC")]
    pub faults: Option<String>,
}

/// Flags of `tephra certs`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    /// Name of the webhook Service the certificate is for: it is valid for NAME,
    /// NAME.NAMESPACE, NAME.NAMESPACE.svc and NAME.NAMESPACE.svc.cluster.local.
    #[arg(long, value_name = "NAME")]
    pub service: String,

    /// Namespace of that Service.
    #[arg(long, value_name = "NS")]
    pub namespace: String,

    /// Directory to write into (created if missing): ca.crt and ca.key (the CA), tls.crt (the
    /// serving certificate followed by the CA) and tls.key.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Another DNS name or IP address the certificate is valid for; repeat for several. For
    /// tephra running outside the cluster, with webhooks and extender reached by URL (e.g.
    /// `--extra-name 127.0.0.1`).
    #[arg(long = "extra-name", value_name = "NAME")]
    pub extra_names: Vec<String>,

    /// Renew only the serving certificate: sign a new tls.crt/tls.key with the CA already in
    /// --out (ca.crt and ca.key from an earlier `tephra certs`); the caBundle stays the same,
    /// so webhook configurations need no change and a server given --tls-mode files picks the
    /// new pair up without a restart.
    #[arg(long)]
    pub renew_serving: bool,
}

/// Most nodes the embedded API seeds (the benchmark loads 5,000; each node is kept in memory).
pub const MAX_EMBEDDED_NODES: usize = 100_000;

/// `--embedded-nodes`: a count from 0 to [`MAX_EMBEDDED_NODES`].
fn parse_node_count(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of nodes"))?;
    if n > MAX_EMBEDDED_NODES {
        return Err(format!("{n} is more than {MAX_EMBEDDED_NODES} nodes"));
    }
    Ok(n)
}

/// A Go-style duration flag (`500ms`, `1s`, `1m30s`), at least 10 ms.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = duration_of(s)?;
    if d < std::time::Duration::from_millis(10) {
        return Err(format!("{s} is too short (at least 10ms)"));
    }
    Ok(d)
}

/// A duration flag for which `0s` means "off"; any other value is bounded as
/// [`parse_duration`] bounds it.
fn parse_duration_or_zero(s: &str) -> Result<std::time::Duration, String> {
    match duration_of(s)? {
        d if d.is_zero() => Ok(d),
        _ => parse_duration(s),
    }
}

/// `s` read as a Go-style duration (`500ms`, `1m30s`).
fn duration_of(s: &str) -> Result<std::time::Duration, String> {
    crate::api::Duration(s.to_string())
        .to_std()
        .map_err(|e| e.to_string())
}

/// A flag error as the one line `main` prints: clap's message with what it knows kept (the
/// missing required arguments, an enum flag's possible values, a suggested spelling), without
/// its usage block, and the help command of the subcommand at fault.
pub fn flag_error_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let mut usage_of = "tephra".to_string();
    let mut body = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(usage) = trimmed.strip_prefix("Usage:") {
            // `Usage: tephra certs --service <NAME> ...`: the words before the first flag or
            // placeholder name the subcommand.
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['-', '<', '[']))
                .collect();
            if !words.is_empty() {
                usage_of = words.join(" ");
            }
            break;
        }
        if trimmed.starts_with("For more information") {
            break;
        }
        if !trimmed.is_empty() {
            body.push(trimmed);
        }
    }
    let first = body
        .first()
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .unwrap_or("invalid arguments");
    let rest = body.get(1..).unwrap_or_default();
    let mut line = first.to_string();
    if first.ends_with(':') && !rest.is_empty() {
        // A list (the required arguments not given): its items on the same line.
        line.push(' ');
        line.push_str(&rest.join(", "));
    } else {
        for extra in rest {
            // `[possible values: ..]` belongs to the sentence before it; a tip is its own.
            line.push_str(if extra.starts_with('[') { " " } else { "; " });
            line.push_str(extra);
        }
    }
    format!("{line} (see '{usage_of} --help')")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_defaults_match_the_contract() {
        let cli = Cli::try_parse_from(["tephra", "serve"]).unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.listen.to_string(), "0.0.0.0:8443");
        assert_eq!(s.metrics_listen.to_string(), "0.0.0.0:8080");
        assert_eq!(s.embedded_api_listen.to_string(), "127.0.0.1:6443");
        assert_eq!(s.scheduler_names, vec!["volcano".to_string()]);
        assert_eq!(s.embedded_nodes, 3);
        assert!(!s.embedded && !s.enable_http2 && !s.no_sim_kubelet && !s.no_sim_scheduler);
        assert!(!s.no_ui, "the web view is on unless turned off");
    }

    #[test]
    fn a_zero_gather_timeout_is_off_and_other_durations_stay_bounded() {
        let serve = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Command::Serve(s)) => Ok(s),
            Ok(_) => panic!("not serve"),
            Err(e) => Err(e.to_string()),
        };
        let s = serve(&["tephra", "serve", "--bind-gather-timeout", "0s"]).unwrap();
        assert!(s.extender.bind_gather_timeout.is_zero());
        let e = serve(&["tephra", "serve", "--bind-gather-timeout", "1ms"]).unwrap_err();
        assert!(e.contains("too short"), "{e}");
        let e = serve(&["tephra", "serve", "--bind-hold-timeout", "0s"]).unwrap_err();
        assert!(e.contains("too short"), "{e}");
        let s = serve(&["tephra", "serve", "--gate-until-placed=false"]).unwrap();
        assert!(!s.extender.gate_until_placed);
        assert!(
            serve(&["tephra", "serve"])
                .unwrap()
                .extender
                .gate_until_placed
        );
    }

    #[test]
    fn scheduler_name_repeats() {
        let cli = Cli::try_parse_from([
            "tephra",
            "serve",
            "--scheduler-name",
            "a",
            "--scheduler-name",
            "b",
        ])
        .unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.scheduler_names, vec!["a", "b"]);
    }

    #[test]
    fn inherit_owner_annotations_defaults_on_and_takes_a_bool() {
        let serve = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).unwrap();
            let Command::Serve(s) = cli.command else {
                panic!("not serve")
            };
            s.inherit_owner_annotations
        };
        assert!(serve(&["tephra", "serve"]));
        assert!(!serve(&[
            "tephra",
            "serve",
            "--inherit-owner-annotations=false"
        ]));
        assert!(serve(&[
            "tephra",
            "serve",
            "--inherit-owner-annotations",
            "true"
        ]));
        assert!(
            Cli::try_parse_from(["tephra", "serve", "--inherit-owner-annotations=maybe"]).is_err()
        );
    }

    #[test]
    fn tls_cert_needs_tls_key() {
        let err = Cli::try_parse_from(["tephra", "serve", "--tls-cert", "c.pem"]).unwrap_err();
        assert!(err.to_string().contains("--tls-key"), "{err}");
    }

    #[test]
    fn node_counts_are_bounded() {
        let s = |n: &str| Cli::try_parse_from(["tephra", "apiserver", "--embedded-nodes", n]);
        assert!(s("100000").is_ok());
        let e = s("100001").unwrap_err().to_string();
        assert!(e.contains("more than 100000 nodes"), "{e}");
        assert!(s("1e20").is_err());
        assert!(s("-1").is_err());
    }

    #[test]
    fn bad_listen_address_is_refused() {
        assert!(Cli::try_parse_from(["tephra", "serve", "--listen", "nope"]).is_err());
    }

    #[test]
    fn certs_requires_its_three_flags() {
        assert!(Cli::try_parse_from(["tephra", "certs", "--service", "s"]).is_err());
        let cli = Cli::try_parse_from([
            "tephra",
            "certs",
            "--service",
            "s",
            "--namespace",
            "n",
            "--out",
            "/tmp/x",
        ])
        .unwrap();
        assert!(matches!(cli.command, Command::Certs(_)));
    }

    fn flag_line(args: &[&str]) -> String {
        flag_error_line(&Cli::try_parse_from(args).unwrap_err())
    }

    #[test]
    fn flag_errors_keep_what_clap_knows_on_one_line() {
        let missing = flag_line(&["tephra", "certs", "--service", "s"]);
        assert!(
            missing.contains("--namespace <NS>, --out <DIR>")
                && missing.ends_with("(see 'tephra certs --help')"),
            "{missing}"
        );
        let values = flag_line(&["tephra", "crds", "--log-format", "xml"]);
        assert!(
            values.contains("'xml'") && values.contains("[possible values: text, json]"),
            "{values}"
        );
        let unknown = flag_line(&["tephra", "serve", "--lisen", "x"]);
        assert!(
            unknown.contains("'--lisen'") && unknown.contains("--listen"),
            "{unknown}"
        );
        for line in [missing, values, unknown] {
            assert!(!line.contains('\n') && !line.contains("Usage:"), "{line}");
        }
    }

    #[test]
    fn the_first_log_line_says_where_state_lives_and_names_leader_election_only_where_it_runs() {
        let addr: SocketAddr = "127.0.0.1:6443".parse().unwrap();
        let embedded = serve_banner(Some(addr), None, false);
        assert!(embedded.contains("http://127.0.0.1:6443"), "{embedded}");
        assert!(embedded.contains("in memory only"), "{embedded}");
        assert!(!embedded.contains("leader"), "{embedded}");
        let kept = serve_banner(Some(addr), Some(std::path::Path::new("/var/tephra")), false);
        assert!(
            kept.contains("kept in /var/tephra across restarts"),
            "{kept}"
        );
        let elected = serve_banner(None, None, true);
        assert!(elected.contains("elect a leader on a Lease"), "{elected}");
        let single = serve_banner(None, None, false);
        assert!(
            single.contains("only replica") && !single.contains("Lease"),
            "{single}"
        );
    }

    #[test]
    fn serve_help_says_what_runs_and_what_does_not_yet() {
        let help = Cli::command()
            .find_subcommand_mut("serve")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(
            help.contains(SERVE_RUNS.split(';').next().unwrap()),
            "{help}"
        );
        assert!(help.contains("Not yet:"), "{help}");
        // The first line promises nothing that is not there.
        let first = help.lines().next().unwrap_or_default();
        assert!(
            !first.contains("extender") && !first.contains("controllers"),
            "{first}"
        );
    }

    #[test]
    fn leader_election_is_on_outside_embedded_and_can_be_turned_off() {
        let serve = |args: &[&str]| {
            let Command::Serve(s) = Cli::try_parse_from(args).unwrap().command else {
                panic!("not serve")
            };
            s
        };
        let s = serve(&["tephra", "serve"]);
        assert!(s.leader.enabled(s.embedded));
        assert_eq!(s.leader.timings(), crate::leader::Timings::default());
        assert_eq!(s.leader.leader_elect_lease_name, "tephra");
        let s = serve(&["tephra", "serve", "--embedded"]);
        assert!(!s.leader.enabled(s.embedded));
        let s = serve(&["tephra", "serve", "--leader-elect=false"]);
        assert!(!s.leader.enabled(s.embedded));
        let s = serve(&["tephra", "serve", "--embedded", "--leader-elect"]);
        assert!(s.leader.enabled(s.embedded));
        let s = serve(&[
            "tephra",
            "serve",
            "--leader-elect-lease-duration",
            "3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms",
        ]);
        assert_eq!(
            s.leader.timings().retry_period,
            std::time::Duration::from_millis(500)
        );
    }

    #[test]
    fn tls_mode_accepts_files_and_self() {
        let cli = Cli::try_parse_from(["tephra", "serve"]).unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.tls_mode, TlsMode::Files, "files is the default");
        let cli = Cli::try_parse_from(["tephra", "serve", "--tls-mode", "files"]).unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.tls_mode, TlsMode::Files);

        let cli = Cli::try_parse_from(["tephra", "serve", "--tls-mode=self"]).unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.tls_mode, TlsMode::SelfManaged);
        assert_eq!(s.tls_self.policy(), crate::selftls::Policy::DEFAULT);
        assert_eq!(s.tls_self.tls_self_services, ["tephra", "tephra-extender"]);
        assert_eq!(s.tls_self.tls_self_secret, "tephra-tls");
        assert_eq!(s.tls_self.tls_self_configmap, "tephra-ca");

        let err = Cli::try_parse_from(["tephra", "serve", "--tls-mode=auto"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        let msg = err.to_string();
        assert!(msg.contains("[possible values: files, self]"), "{msg}");
    }

    #[test]
    fn tls_ca_needs_tls_cert() {
        assert!(Cli::try_parse_from(["tephra", "serve", "--tls-ca", "ca.pem"]).is_err());
    }

    #[test]
    fn log_format_is_global() {
        let cli = Cli::try_parse_from(["tephra", "crds", "--log-format", "json"]).unwrap();
        assert_eq!(cli.log_format, LogFormat::Json);
    }
}
