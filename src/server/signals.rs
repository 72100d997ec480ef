//! SIGTERM / SIGINT → cancellation, so `main` stays a one-liner around [`super::serve`].

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Spawns a task that cancels `token` on the first SIGTERM (what the kubelet sends) or SIGINT
/// (Ctrl-C), logging which one arrived. [`super::serve`] then drains and returns `Ok`, and the
/// process exits 0 as the contract asks. The task also ends if `token` is cancelled elsewhere.
pub fn cancel_on_signals(token: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        tokio::select! {
            name = wait_for_signal() => {
                tracing::info!(signal = name, "shutdown requested");
                token.cancel();
            }
            _ = token.cancelled() => {}
        }
    })
}

#[cfg(unix)]
async fn wait_for_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = ctrl_c() => "SIGINT",
        },
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server");
            ctrl_c().await
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() -> &'static str {
    ctrl_c().await
}

async fn ctrl_c() -> &'static str {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::warn!(error = %e, "cannot listen for Ctrl-C");
        // Without a handler there is nothing to wait for; never resolve rather than stop now.
        std::future::pending::<()>().await;
    }
    "SIGINT"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_watcher_ends_when_the_token_is_cancelled_elsewhere() {
        let token = CancellationToken::new();
        let task = cancel_on_signals(token.clone());
        token.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("watcher ended")
            .unwrap();
    }
}
