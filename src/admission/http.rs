//! The axum adapter: one POST route per webhook. It reads the body itself (not axum's `Json`
//! extractor, whose rejections are not in the contract's form), so every unreadable review is
//! a 400 with a one-line Kubernetes `Status` body, and every readable one is a 200 review
//! answer. Body size limits and timeouts belong to the server layer around this router.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::review::{self, Outcome};
use super::{AdmissionContext, AdmissionError, WEBHOOKS, Webhook};

/// The admission routes (every path of [`WEBHOOKS`]), with their state applied.
pub fn router(ctx: Arc<AdmissionContext>) -> Router {
    let mut router = Router::new();
    for hook in WEBHOOKS {
        router = router.route(
            hook.path,
            post(
                move |State(ctx): State<Arc<AdmissionContext>>, body: Bytes| async move {
                    handle(&ctx, hook, &body)
                },
            ),
        );
    }
    router.with_state(ctx)
}

/// Answers one review body for `hook`: the review answer (200) or a 400 `Status`.
pub fn handle(ctx: &AdmissionContext, hook: &Webhook, body: &[u8]) -> Response {
    let started = Instant::now();
    let (response, operation, outcome) = match answer(ctx, hook, body) {
        Ok((review, operation, outcome)) => {
            (json_response(StatusCode::OK, &review), operation, outcome)
        }
        Err(err) => {
            tracing::debug!(
                path = hook.path,
                reason = err.metric_label(),
                "invalid admission review: {err}"
            );
            (bad_request(&err), String::new(), Outcome::Invalid)
        }
    };
    ctx.metrics
        .requests
        .with_label_values(&[hook.path, operation.as_str(), outcome.label()])
        .inc();
    ctx.metrics
        .duration
        .with_label_values(&[hook.path])
        .observe(started.elapsed().as_secs_f64());
    response
}

fn answer(
    ctx: &AdmissionContext,
    hook: &Webhook,
    body: &[u8],
) -> Result<(Value, String, Outcome), AdmissionError> {
    let req = review::parse(body)?;
    hook.check_kind(&req)?;
    hook.check_object_kind(&req)?;
    let decision = (hook.review)(&req, ctx.view.as_ref(), &ctx.config);
    if let Some(reason) = decision.denial() {
        tracing::info!(
            path = hook.path,
            uid = %req.uid,
            namespace = %req.namespace,
            name = %req.name,
            operation = req.operation.as_str(),
            "admission denied: {reason}"
        );
    }
    let (review, outcome) = review::respond(&req, decision);
    Ok((review, req.operation.as_str().to_string(), outcome))
}

fn bad_request(err: &AdmissionError) -> Response {
    // One line, whatever the parser said.
    let message = err.to_string().replace(['\n', '\r'], " ");
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": "BadRequest",
            "code": 400,
        }),
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    // Serialising a `Value` cannot fail (its map keys are strings).
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}
