//! What each subcommand does, wired from the library's parts. `main.rs` only parses flags and
//! reports the [`AppError`] this returns.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::admission::{
    self, AdmissionConfig, AdmissionContext, AdmissionMetrics, ClusterView, StaticView,
};
use crate::api::ApiError;
use crate::certs::{self, CertError};
use crate::cli::{CertsArgs, Cli, Command, LogFormat, ServeArgs};
use crate::cluster::{self, BootstrapError, Caches, ClusterError};
use crate::metrics::{Metrics, MetricsError};
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
    /// A feature this build does not have yet.
    #[error("{0}")]
    Unavailable(&'static str),
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
        Command::Apiserver(_) => Err(AppError::Unavailable("not wired yet")),
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

/// `tephra serve`: pick the cluster, start the shared caches, the HTTPS and metrics listeners
/// with the admission webhooks, and run until a signal.
async fn serve(args: ServeArgs) -> Result<(), AppError> {
    let metrics = Metrics::new()?;
    let shutdown = CancellationToken::new();
    server::cancel_on_signals(shutdown.clone());
    let state = ServerState::new(metrics.clone());

    let view: Arc<dyn ClusterView + Send + Sync> = if args.embedded {
        tracing::warn!(
            "embedded API not built into this version yet: serving with no cluster behind"
        );
        Arc::new(StaticView::new())
    } else {
        let source = cluster::config::choose(
            &cluster::Environment::from_process(),
            args.kubeconfig.as_deref(),
        )?;
        tracing::info!(?source, "using cluster");
        let config = cluster::config::load(&source).await?;
        let client = cluster::config::connect(config).await?;
        cluster::ensure_default_queues(&client).await?;
        let caches = Caches::start(&client, &shutdown);
        track_cache_sync(caches.clone(), state.clone());
        Arc::new(caches)
    };

    let admission = Arc::new(AdmissionContext {
        config: AdmissionConfig {
            scheduler_names: args.scheduler_names.clone(),
            ..AdmissionConfig::default()
        },
        view,
        metrics: AdmissionMetrics::new(metrics.registry())?,
    });
    let bound = server::bind(server_config(&args), admission::router(admission), state)?;
    tracing::info!(https = %bound.https_addr(), metrics = ?bound.metrics_addr(), "serving");
    bound.run(shutdown).await?;
    tracing::info!("drained, exiting");
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
