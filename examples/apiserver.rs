//! The embedded API alone over TCP, until `tephra apiserver` lands in the CLI:
//! `cargo run --example apiserver -- [--listen ADDR] [--embedded-nodes N] [--no-sim-kubelet] [--faults SPEC]`.
//! Used by `tests/kubectl/run.sh`.

use tephra::embedded::{self, ApiServer, EmbeddedOptions, FaultSpec};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let mut listen = "127.0.0.1:6443".to_string();
    let mut opts = EmbeddedOptions::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => listen = value()?,
            "--embedded-nodes" => opts.nodes = value()?.parse()?,
            "--no-sim-kubelet" => opts.sim_kubelet = false,
            "--faults" => opts.faults = FaultSpec::parse(&value()?)?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let shutdown = CancellationToken::new();
    let api = ApiServer::start(opts, shutdown.clone());
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    embedded::serve(api, listener, shutdown).await?;
    Ok(())
}
