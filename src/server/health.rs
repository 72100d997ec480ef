//! `/healthz`, `/readyz` and `/metrics`, the same on both listeners.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::ServerState;

/// Liveness: the process is up and its runtime answers. Nothing else is checked, so a slow
/// dependency never gets the pod restarted.
pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: 200 once every condition holds (the HTTPS listener is serving, plus whatever other
/// subsystems registered); otherwise 503 naming the conditions still false.
pub(super) async fn readyz(State(state): State<ServerState>) -> Response {
    if state.is_ready() {
        return "ok".into_response();
    }
    let pending = state.not_ready().join(", ");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("not ready: {pending}"),
    )
        .into_response()
}

/// Prometheus text exposition of the process registry.
pub(super) async fn metrics(State(state): State<ServerState>) -> Response {
    (
        [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
        state.metrics().render(),
    )
        .into_response()
}
