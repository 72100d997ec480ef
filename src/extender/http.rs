//! The axum adapter: one POST route per verb. Bodies are read as bytes and decoded here, so an
//! unreadable body is a 400 with a one-line Kubernetes `Status`, and a readable one is always a
//! 200 with the verb's result (its `Error` field, where the verb has one, carries any problem).

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;
use serde_json::json;

use super::Extender;
use super::preempt;
use super::prioritize;
use super::protocol::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderPreemptionArgs,
};

/// The extender routes, with their state applied.
pub fn router(ext: Arc<Extender>) -> Router {
    Router::new()
        .route("/scheduler/filter", post(filter))
        .route("/scheduler/prioritize", post(prioritize))
        .route("/scheduler/bind", post(bind))
        .route("/scheduler/preempt", post(preempt))
        .with_state(ext)
}

/// What a replica that does not lead answers (in `Error`, or as the 503 message).
pub const NOT_THE_LEADER: &str = "not the leader";

/// [`router`] answering only while `leadership` is held. Only the leader's plan is the plan:
/// a follower's answer would place pods from a session that does not run. A follower answers
/// filter and bind with `Error: "not the leader"` (kube-scheduler fails that scheduling cycle
/// and retries the pod with backoff; nothing is bound), and prioritize and preempt, whose
/// results have no `Error` field, with a 503 (kube-scheduler treats it as an extender error,
/// the same retry). kube-scheduler normally never reaches a follower: the Service
/// `tephra-extender` selects the Pod labelled `tephra.io/leader=true`.
pub fn router_for_leader(ext: Arc<Extender>, leadership: crate::leader::Leadership) -> Router {
    router(ext).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let leading = leadership.is_leading();
            async move {
                if leading {
                    return next.run(req).await;
                }
                follower_answer(req.uri().path())
            }
        },
    ))
}

/// A follower's answer to `path` (see [`router_for_leader`]).
fn follower_answer(path: &str) -> Response {
    match path {
        "/scheduler/filter" | "/scheduler/bind" => json_response(&json!({"Error": NOT_THE_LEADER})),
        _ => {
            let body = json!({
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": NOT_THE_LEADER,
                "reason": "ServiceUnavailable",
                "code": 503,
            });
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, "application/json")],
                serde_json::to_vec(&body).unwrap_or_default(),
            )
                .into_response()
        }
    }
}

fn json_response<T: Serialize>(body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            bytes,
        )
            .into_response(),
        // Our own result types always serialise; answer 400 rather than 5xx if one did not.
        Err(e) => bad_request(&e.to_string()),
    }
}

fn bad_request(reason: &str) -> Response {
    let message = reason.replace(['\n', '\r'], " ");
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": "BadRequest",
        "code": 400,
    });
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&body).unwrap_or_default(),
    )
        .into_response()
}

fn observe(ext: &Extender, verb: &str, stage: Option<&str>, result: &str, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    let m = ext.metrics();
    m.requests.with_label_values(&[verb, result]).inc();
    m.duration.with_label_values(&[verb]).observe(secs);
    if let Some(stage) = stage {
        m.stage.with_label_values(&[stage]).observe(secs * 1000.0);
    }
}

async fn filter(State(ext): State<Arc<Extender>>, body: Bytes) -> Response {
    let started = Instant::now();
    let args: ExtenderArgs = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            observe(&ext, "filter", None, "bad_request", started);
            return bad_request(&format!("filter: {e}"));
        }
    };
    let r = ext.filter(&args).await;
    let kept =
        r.node_names.as_ref().map_or(0, Vec::len) + r.nodes.as_ref().map_or(0, |n| n.items.len());
    let result = if !r.error.is_empty() {
        "error"
    } else if kept == 0 {
        "unschedulable"
    } else {
        "ok"
    };
    let response = json_response(&r);
    observe(&ext, "filter", Some("Predicate"), result, started);
    response
}

async fn prioritize(State(ext): State<Arc<Extender>>, body: Bytes) -> Response {
    let started = Instant::now();
    let args: ExtenderArgs = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            observe(&ext, "prioritize", None, "bad_request", started);
            return bad_request(&format!("prioritize: {e}"));
        }
    };
    let uid = args.pod_ref().map(|p| p.metadata.uid).unwrap_or_default();
    let names = args.candidate_names().unwrap_or_default();
    let scores = {
        let plan = ext.scheduler.plan();
        let idx = ext.scheduler.index();
        prioritize::scores(&uid, &names, &idx, &plan)
    };
    let response = json_response(&scores);
    observe(&ext, "prioritize", Some("Scoring"), "ok", started);
    response
}

async fn bind(State(ext): State<Arc<Extender>>, body: Bytes) -> Response {
    let started = Instant::now();
    let args: ExtenderBindingArgs = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            observe(&ext, "bind", None, "bad_request", started);
            return bad_request(&format!("bind: {e}"));
        }
    };
    let (r, result) = if args.pod_uid.is_empty() || args.pod_name.is_empty() || args.node.is_empty()
    {
        (
            ExtenderBindingResult {
                error: "PodName, PodUID and Node are required".into(),
            },
            "error",
        )
    } else {
        match ext.binder().bind(&args).await {
            Ok(()) => (ExtenderBindingResult::default(), "ok"),
            Err(e) => {
                tracing::debug!(pod = %format!("{}/{}", args.pod_namespace, args.pod_name), node = %args.node, error = %e, "bind answered with an error");
                (
                    ExtenderBindingResult {
                        error: e.to_string(),
                    },
                    "error",
                )
            }
        }
    };
    observe(&ext, "bind", None, result, started);
    json_response(&r)
}

async fn preempt(State(ext): State<Arc<Extender>>, body: Bytes) -> Response {
    let started = Instant::now();
    let args: ExtenderPreemptionArgs = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            observe(&ext, "preempt", None, "bad_request", started);
            return bad_request(&format!("preempt: {e}"));
        }
    };
    let proposed = args.meta_victims();
    let r = {
        let idx = ext.scheduler.index();
        preempt::accept(&args.pod, proposed, &idx)
    };
    let m = ext.metrics();
    m.preemption_attempts.inc();
    m.preemption_victims.set(
        r.node_name_to_meta_victims
            .values()
            .map(|v| v.pods.len() as i64)
            .sum(),
    );
    observe(&ext, "preempt", None, "ok", started);
    json_response(&r)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(r: Response) -> (StatusCode, serde_json::Value) {
        let status = r.status();
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 16)
            .await
            .unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    #[tokio::test]
    async fn a_follower_answers_in_error_never_with_a_placement() {
        for verb in ["filter", "bind"] {
            let (status, body) = body_of(follower_answer(&format!("/scheduler/{verb}"))).await;
            assert_eq!(status, StatusCode::OK, "{verb}");
            assert_eq!(body, json!({"Error": NOT_THE_LEADER}), "{verb}");
        }
        // prioritize and preempt have no Error field: an HTTP error fails the cycle instead.
        for verb in ["prioritize", "preempt"] {
            let (status, body) = body_of(follower_answer(&format!("/scheduler/{verb}"))).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{verb}");
            assert_eq!(body["message"], NOT_THE_LEADER, "{verb}");
        }
    }
}
