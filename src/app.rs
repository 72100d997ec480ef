//! What each subcommand does, wired from the library's parts. `main.rs` only parses flags and
//! reports the [`AppError`] this returns.

use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command, LogFormat, ServeArgs};
use crate::cluster::{self, ClusterError};

/// Everything that can stop a subcommand, one variant per subsystem.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Choosing or reaching the cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
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
        .with_writer(std::io::stderr);
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
        Command::Crds | Command::Apiserver(_) | Command::Certs(_) => {
            Err(AppError::Unavailable("not wired yet"))
        }
    }
}

async fn serve(args: ServeArgs) -> Result<(), AppError> {
    let _client = if args.embedded {
        return Err(AppError::Unavailable("not wired yet"));
    } else {
        let source = cluster::config::choose(
            &cluster::Environment::from_process(),
            args.kubeconfig.as_deref(),
        )?;
        tracing::info!(?source, "using cluster");
        let config = cluster::config::load(&source).await?;
        cluster::config::connect(config).await?
    };
    Ok(())
}
