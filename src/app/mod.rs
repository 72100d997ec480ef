//! What each subcommand does, wired from the library's parts. `main.rs` only parses flags and
//! reports the [`AppError`] this returns.

pub mod engine;
mod serve;

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::api::TypesError;
use crate::certs::{self, CertError};
use crate::cli::{ApiserverArgs, CertsArgs, Cli, Command, LogFormat};
use crate::cluster::ClusterError;
use crate::cluster::startup::StartupError;
use crate::cluster::webhooks::{self, WebhookError};
use crate::metrics::MetricsError;
use crate::selftls::SelfTlsError;
use crate::server::{self, ServerError};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions, FaultSpec, FaultSpecError};

/// Everything that can stop a subcommand, one variant per subsystem.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Choosing or reaching the cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The HTTPS or metrics server failed to start or stopped with an error.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// Making or writing certificates failed.
    #[error(transparent)]
    Certs(#[from] CertError),
    /// The metrics registry could not be built.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// A subsystem's series could not be registered.
    #[error("registering metrics: {0}")]
    Registry(#[from] prometheus::Error),
    /// Rendering the CRDs failed.
    #[error(transparent)]
    Api(#[from] TypesError),
    /// A start-up write (CRDs, built-in queues) was refused for good.
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// `--controller-config` cannot be used.
    #[error(transparent)]
    ControllerConfig(#[from] crate::controllers::hypernode::discovery::DiscoveryFileError),
    /// The log filter could not be parsed.
    #[error("invalid log filter: {0}")]
    LogFilter(String),
    /// Flags that do not go together.
    #[error("{0}")]
    Flags(&'static str),
    /// `--faults` could not be parsed.
    #[error("--faults: {0}")]
    Faults(#[from] FaultSpecError),
    /// An address could not be bound or served.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Registering the webhooks failed.
    #[error(transparent)]
    Webhooks(#[from] WebhookError),
    /// A background task panicked or was cancelled.
    #[error("internal task failed: {0}")]
    Task(String),
    /// Starting embedded mode failed.
    #[error("embedded mode: {0}")]
    Embedded(String),
    /// No gang engine could be chosen.
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    /// The scheduler extender could not be built.
    #[error(transparent)]
    Extender(#[from] crate::extender::ExtenderError),
    /// The kube-scheduler stand-in could not start.
    #[error(transparent)]
    SimScheduler(#[from] tephra_apiserver::kube_scheduler::SimSchedulerError),
    /// `--config` is missing or invalid.
    #[error(transparent)]
    SchedulerConfig(#[from] crate::scheduler::ConfigError),
    /// `--tls-cert` holds no name the embedded API can call the webhooks under.
    #[error(
        "--tls-cert {}: the certificate is valid for {names}, but the embedded API calls \
         tephra's webhooks under {needed}",
        cert.display(),
        needed = webhooks::USABLE_WEBHOOK_NAMES
    )]
    NoWebhookName {
        /// The certificate file.
        cert: std::path::PathBuf,
        /// The names it holds.
        names: certs::CertNames,
    },
    /// A `job`, `queue` or `pg` command failed.
    #[error(transparent)]
    Vcctl(#[from] crate::vcctl::VcctlError),
    /// `tephra simulate` failed.
    #[error(transparent)]
    Simulate(#[from] crate::simulate::SimulateError),
    /// The embedded API would listen on a non-loopback address without
    /// `--embedded-api-allow-remote`.
    #[error(
        "{flag} {addr}: the embedded API has no authentication and only listens on loopback \
         addresses (127.0.0.1, ::1); add --embedded-api-allow-remote to listen on {addr} anyway"
    )]
    RemoteApi {
        /// The flag.
        flag: &'static str,
        /// The address given.
        addr: SocketAddr,
    },
    /// The controllers could not be started.
    #[error(transparent)]
    Controllers(#[from] crate::controllers::ControllerError),
    /// `--tls-mode self` could not get or keep its certificate.
    #[error("--tls-mode self: {0}")]
    SelfTls(#[from] SelfTlsError),
    /// Leader election flags are inconsistent (boxed: the variant would make every result
    /// of this module large).
    #[error(transparent)]
    Leader(Box<crate::leader::LeaderError>),
    /// This replica led and lost the Lease; it stopped its leader-only tasks and exits so it
    /// restarts as a follower.
    #[error(
        "lost the leader election Lease (could not renew it in time, or another replica took it); \
         exiting to restart as a follower"
    )]
    LeaderLost,
}

/// Installs the global `tracing` subscriber: `--log` (or `RUST_LOG`, default `info`) as the
/// filter, `text` or `json` lines on standard error.
pub fn init_logging(format: LogFormat, filter: Option<&str>) -> Result<(), AppError> {
    let filter = match filter {
        Some(f) => EnvFilter::try_new(f).map_err(|e| AppError::LogFilter(e.to_string()))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // `try_init` fails only when a subscriber is already installed (tests); keep that one.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}

/// Runs one subcommand to completion.
pub async fn run(cli: Cli) -> Result<(), AppError> {
    // One crypto provider for the whole process (ring); an error only means it is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        Command::Serve(args) => serve::serve(args).await,
        Command::Certs(args) => certs_command(&args),
        Command::Crds => {
            print!("{}", crate::api::crds::render_yaml()?);
            Ok(())
        }
        Command::Apiserver(args) => apiserver(args).await,
        Command::Job(args) => Ok(crate::vcctl::job(args).await?),
        Command::Queue(args) => Ok(crate::vcctl::queue(args).await?),
        Command::Pg(args) => Ok(crate::vcctl::pg(args).await?),
        Command::Simulate(args) => Ok(crate::simulate::run(args).await?),
    }
}

/// `tephra certs`: write the files, print the caBundle on standard output.
fn certs_command(args: &CertsArgs) -> Result<(), AppError> {
    let bundle = certs::run_certs_command(
        &args.service,
        &args.namespace,
        &args.extra_names,
        &args.out,
        args.renew_serving,
    )?;
    println!("{bundle}");
    Ok(())
}

/// The embedded API's options from the shared flags.
fn embedded_options(
    nodes: usize,
    no_sim_kubelet: bool,
    no_sim_controllers: bool,
    faults: Option<&str>,
) -> Result<EmbeddedOptions, AppError> {
    let faults = faults
        .map(FaultSpec::parse)
        .transpose()?
        .unwrap_or_default();
    Ok(EmbeddedOptions {
        nodes,
        sim_kubelet: !no_sim_kubelet,
        sim_controllers: !no_sim_controllers,
        faults,
        ..EmbeddedOptions::default()
    })
}

/// Refuses a non-loopback address for the embedded API (which has no authentication) unless
/// `--embedded-api-allow-remote` is given. Pure.
fn check_api_listen(
    flag: &'static str,
    addr: SocketAddr,
    allow_remote: bool,
) -> Result<(), AppError> {
    if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(AppError::RemoteApi { flag, addr })
    }
}

/// Binds the embedded API's TCP listener (so its address is known before anything else starts).
async fn bind_api(addr: SocketAddr) -> Result<TcpListener, AppError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| AppError::Listen { addr, source })
}

/// `tephra apiserver`: the embedded API alone, until a signal.
async fn apiserver(args: ApiserverArgs) -> Result<(), AppError> {
    check_api_listen("--listen", args.listen, args.embedded_api_allow_remote)?;
    let options = embedded_options(
        args.embedded_nodes,
        args.no_sim_kubelet,
        args.no_sim_controllers,
        args.faults.as_deref(),
    )?;
    let shutdown = CancellationToken::new();
    server::cancel_on_signals(shutdown.clone());
    let listener = bind_api(args.listen).await?;
    let addr = listener.local_addr().map_err(|source| AppError::Listen {
        addr: args.listen,
        source,
    })?;
    let api = ApiServer::start(options, shutdown.clone());
    tracing::info!(url = %format!("http://{addr}"), "embedded API ready (kubectl --server http://{addr})");
    embedded::serve(api, listener, shutdown)
        .await
        .map_err(|source| AppError::Listen { addr, source })
}
