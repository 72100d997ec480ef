//! What each subcommand does, wired from the library's parts. `main.rs` only parses flags and
//! reports the [`AppError`] this returns.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::admission::{self, AdmissionConfig, AdmissionContext, AdmissionMetrics};
use crate::api::ApiError;
use crate::certs::{self, CertError};
use crate::cli::{ApiserverArgs, CertsArgs, Cli, Command, LogFormat, ServeArgs};
use crate::cluster::webhooks::WebhookError;
use crate::cluster::{self, BootstrapError, CacheFeeds, Caches, ClusterError};
use crate::embedded::{self, ApiServer, EmbeddedOptions, FaultSpec, FaultSpecError};
use crate::extender::{self, Extender, ExtenderOptions};
use crate::metrics::{Metrics, MetricsError};
use crate::scheduler::{Scheduler, SchedulerOptions};
use crate::server::{self, ServerConfig, ServerError, ServerState, TlsSource};

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
    Api(#[from] ApiError),
    /// Creating the built-in queues failed.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
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
    /// The scheduler extender could not be built.
    #[error(transparent)]
    Extender(#[from] crate::extender::ExtenderError),
    /// The kube-scheduler stand-in could not start.
    #[error(transparent)]
    SimScheduler(#[from] crate::embedded::scheduler::SimSchedulerError),
    /// `--config` is missing or invalid.
    #[error(transparent)]
    SchedulerConfig(#[from] crate::scheduler::ConfigError),
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
        Command::Serve(args) => serve(args).await,
        Command::Certs(args) => certs_command(&args),
        Command::Crds => {
            print!("{}", crate::api::crds::render_yaml()?);
            Ok(())
        }
        Command::Apiserver(args) => apiserver(args).await,
    }
}

/// `tephra certs`: write the files, print the caBundle on standard output.
fn certs_command(args: &CertsArgs) -> Result<(), AppError> {
    let bundle = certs::run_certs_command(&args.service, &args.namespace, &args.out)?;
    println!("{bundle}");
    Ok(())
}

/// The HTTPS listener's configuration from the `serve` flags.
fn server_config(args: &ServeArgs) -> ServerConfig {
    ServerConfig {
        listen: args.listen,
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => TlsSource::SelfSigned,
        },
        metrics_listen: Some(args.metrics_listen),
        enable_http2: args.enable_http2,
        ..ServerConfig::default()
    }
}

/// How long `serve` lets the watch caches take to list before it reports not-ready in the log
/// (readiness stays false until they have synced either way).
const CACHE_SYNC_WARN: std::time::Duration = std::time::Duration::from_secs(30);

/// The webhook Service the manifests name; the embedded API sends its reviews there, mapped to
/// the local HTTPS listener, and verifies the certificate under these names.
const WEBHOOK_SERVICE: (&str, &str) = ("tephra", "tephra-system");

/// The embedded API's options from the shared flags.
fn embedded_options(
    nodes: usize,
    no_sim_kubelet: bool,
    faults: Option<&str>,
) -> Result<EmbeddedOptions, AppError> {
    let faults = faults
        .map(FaultSpec::parse)
        .transpose()?
        .unwrap_or_default();
    Ok(EmbeddedOptions {
        nodes,
        sim_kubelet: !no_sim_kubelet,
        faults,
        ..EmbeddedOptions::default()
    })
}

/// Binds the embedded API's TCP listener (so its address is known before anything else starts).
async fn bind_api(addr: SocketAddr) -> Result<TcpListener, AppError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| AppError::Listen { addr, source })
}

/// `tephra apiserver`: the embedded API alone, until a signal.
async fn apiserver(args: ApiserverArgs) -> Result<(), AppError> {
    let options = embedded_options(
        args.embedded_nodes,
        args.no_sim_kubelet,
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

/// `tephra serve`: pick the cluster (or start the embedded API), start the shared caches, the
/// HTTPS and metrics listeners with the admission webhooks, and run until a signal.
async fn serve(args: ServeArgs) -> Result<(), AppError> {
    if args.faults.is_some() && !args.embedded {
        return Err(AppError::Flags("--faults only applies with --embedded"));
    }
    // Files named by flags are checked before anything starts.
    let scheduler_conf = match &args.config {
        Some(path) => crate::scheduler::config::load(path)?,
        None => crate::scheduler::SchedulerConf::builtin(),
    };
    let metrics = Metrics::new()?;
    let shutdown = CancellationToken::new();
    server::cancel_on_signals(shutdown.clone());
    let state = ServerState::new(metrics.clone());

    // Embedded mode: bind the API first and point the ordinary kube client at it, exactly as
    // at a cluster; nothing downstream knows the difference.
    let (client, embedded_api) = if args.embedded {
        let options = embedded_options(
            args.embedded_nodes,
            args.no_sim_kubelet,
            args.faults.as_deref(),
        )?;
        let listener = bind_api(args.embedded_api_listen).await?;
        let addr = listener.local_addr().map_err(|source| AppError::Listen {
            addr: args.embedded_api_listen,
            source,
        })?;
        let url = format!("http://{addr}")
            .parse::<http::Uri>()
            .map_err(|e| AppError::Embedded(e.to_string()))?;
        let client =
            kube::Client::try_from(kube::Config::new(url)).map_err(ClusterError::Client)?;
        (client, Some((listener, options)))
    } else {
        let source = cluster::config::choose(
            &cluster::Environment::from_process(),
            args.kubeconfig.as_deref(),
        )?;
        tracing::info!(?source, "using cluster");
        let config = cluster::config::load(&source).await?;
        (cluster::config::connect(config).await?, None)
    };

    // On a cluster the watches start now; in embedded mode once the CRDs are installed.
    let (caches, mut feeds) = Caches::new();
    let scheduler = Scheduler::new(
        SchedulerOptions {
            scheduler_names: args.scheduler_names.clone(),
            period: args.schedule_period,
            config_path: args.config.clone(),
            ..SchedulerOptions::default()
        },
        scheduler_conf,
        metrics.registry(),
    )?;
    scheduler.subscribe(&mut feeds);
    let mut feeds = Some(feeds);
    if !args.embedded
        && let Some(f) = feeds.take()
    {
        f.run(&client, &shutdown);
    }
    track_cache_sync(caches.clone(), state.clone());
    let admission = Arc::new(AdmissionContext {
        config: AdmissionConfig {
            scheduler_names: args.scheduler_names.clone(),
            ..AdmissionConfig::default()
        },
        view: Arc::new(caches),
        metrics: AdmissionMetrics::new(metrics.registry())?,
    });
    let mut config = server_config(&args);
    if args.embedded {
        config.self_signed_names = certs::service_dns_names(WEBHOOK_SERVICE.0, WEBHOOK_SERVICE.1);
    }
    let extender = Arc::new(Extender::new(
        client.clone(),
        scheduler.clone(),
        ExtenderOptions {
            bind_hold_timeout: args.extender.bind_hold_timeout,
            plan_wait: args.extender.extender_plan_wait,
        },
        metrics.registry(),
    )?);
    extender.clone().spawn_nudger(shutdown.clone());
    let routes = admission::router(admission).merge(extender::router(extender));
    let bound = server::bind(config, routes, state.clone())?;
    let https_addr = bound.https_addr();
    tracing::info!(https = %https_addr, metrics = ?bound.metrics_addr(), "serving");
    let running = tokio::spawn(bound.run(shutdown.clone()));

    if let Some((listener, options)) = embedded_api {
        let ca = webhook_ca(&args, &state)?;
        let feeds = feeds.take();
        start_embedded(
            &client, listener, options, https_addr, &ca, feeds, &shutdown,
        )
        .await?;
        if !args.no_sim_scheduler {
            start_sim_scheduler(&client, &args, https_addr, ca, &shutdown)?;
        }
    }
    cluster::ensure_default_queues(&client).await?;
    // The scheduling session runs from the shared caches; its status writer uses the client.
    let session = scheduler.clone().spawn(client.clone(), shutdown.clone());

    running.await.map_err(|e| AppError::Task(e.to_string()))??;
    shutdown.cancel();
    let _ = session.await;
    tracing::info!("drained, exiting");
    Ok(())
}

/// The CA the embedded API trusts for tephra's webhooks: the self-signed one made at start, or,
/// with `--tls-cert`, the chain in that file (the issuing CA of given files is unknown; the
/// chain is the best trust anchor there is, and enough for a self-signed certificate).
fn webhook_ca(args: &ServeArgs, state: &ServerState) -> Result<String, AppError> {
    match (&args.tls_cert, state.self_signed_ca_pem()) {
        (_, Some(ca)) => Ok(ca),
        (Some(cert), None) => std::fs::read_to_string(cert)
            .map_err(|e| AppError::Embedded(format!("reading {}: {e}", cert.display()))),
        (None, None) => Err(AppError::Embedded(
            "no CA for the webhook configurations".into(),
        )),
    }
}

/// Starts the embedded API on its bound listener, sends webhook Service traffic to our own
/// HTTPS listener, installs the CRDs, starts the cache feeds and registers the webhooks.
async fn start_embedded(
    client: &kube::Client,
    listener: TcpListener,
    mut options: EmbeddedOptions,
    https_addr: SocketAddr,
    ca_pem: &str,
    feeds: Option<CacheFeeds>,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    let ip = if https_addr.ip().is_unspecified() {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        https_addr.ip()
    };
    options.webhook_service_addr = Some(SocketAddr::new(ip, https_addr.port()));
    let api = ApiServer::start(options, shutdown.clone());
    let api_addr = listener.local_addr().ok();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        if let Err(e) = embedded::serve(api, listener, stop.clone()).await {
            tracing::error!(error = %e, "embedded API stopped; shutting down");
            stop.cancel();
        }
    });
    cluster::bootstrap::install_crds(client).await?;
    if let Some(f) = feeds {
        f.run(client, shutdown);
    }
    let n = cluster::webhooks::register(client, ca_pem).await?;
    let url = api_addr.map(|a| format!("http://{a}")).unwrap_or_default();
    tracing::info!(
        configurations = n,
        %url,
        "embedded API ready with tephra's webhooks registered; try: kubectl --server {url} get queues"
    );
    Ok(())
}

/// Starts the kube-scheduler stand-in against our own extender, reached as kube-scheduler
/// reaches it in a cluster: over HTTPS at the Service name, verified with the served CA.
fn start_sim_scheduler(
    client: &kube::Client,
    args: &ServeArgs,
    https_addr: SocketAddr,
    ca_pem: String,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    let ip = if https_addr.ip().is_unspecified() {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        https_addr.ip()
    };
    embedded::scheduler::start(
        client.clone(),
        embedded::scheduler::SimSchedulerOptions {
            scheduler_names: args.scheduler_names.clone(),
            host: format!("{}.{}.svc", WEBHOOK_SERVICE.0, WEBHOOK_SERVICE.1),
            addr: SocketAddr::new(ip, https_addr.port()),
            ca_pem,
            http_timeout: embedded::scheduler::HTTP_TIMEOUT,
        },
        shutdown.clone(),
    )?;
    tracing::info!("kube-scheduler stand-in started (extender over HTTPS)");
    Ok(())
}

/// `/readyz` stays 503 (condition `caches`) until every watch cache has its first list, so
/// kube-apiserver does not send reviews that would be judged against an empty view.
fn track_cache_sync(caches: Caches, state: ServerState) {
    state.set_condition("caches", false);
    tokio::spawn(async move {
        while let Err(e) = caches.wait_synced(CACHE_SYNC_WARN).await {
            tracing::warn!(error = %e, "still waiting for the watch caches");
        }
        tracing::info!("watch caches synced");
        state.set_condition("caches", true);
    });
}
