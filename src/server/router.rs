//! The routers and the layers every request passes through.
//!
//! Layer order, outermost first (each `Router::layer` call wraps the ones before it):
//! 1. `edge`: per-request timeout (504), framework errors (405, 413) rewritten as JSON, and the
//!    HTTP metrics labelled by the *matched route*, so a scan of random paths adds no series;
//! 2. panic catching: a handler that panics answers 500 JSON, the connection stays up;
//! 3. `cap_body`: a declared `Content-Length` over the cap is answered 413 without calling the
//!    handler (after draining a bounded amount, so the client reads the answer instead of a
//!    reset);
//! 4. axum's extractor limit raised to the cap (its own default is 2 MiB) and tower-http's
//!    `RequestBodyLimit`, which cuts chunked bodies off at the cap.

use std::any::Any;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;

use super::{Limits, ServerState, health};
use crate::metrics::Metrics;

/// The `route` label of requests no route matched.
pub(crate) const UNMATCHED: &str = "unmatched";

/// A too-large body is read and thrown away up to this many times the cap, for at most
/// [`DRAIN_TIME`], before answering 413; beyond that the connection is closed after the answer.
const DRAIN_FACTOR: u64 = 4;
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// The HTTPS app: `extra` (admission and extender routes, already with their state) plus
/// `/healthz`, `/readyz`, `/metrics`, the JSON 404, and the layers described in the module docs.
///
/// `extra` must not define the health paths itself (axum panics on overlapping routes) nor a
/// fallback; its routes are counted in the HTTP metrics under their route templates.
pub fn router(extra: Router, state: ServerState) -> Router {
    let routes = health_routes(state.clone())
        .merge(extra)
        .fallback(not_found);
    with_layers(routes, &state)
}

/// The plain-HTTP app for `--metrics-listen`: the health paths, `/metrics`, `extra` (the web
/// view, when on) and the JSON 404. `extra` follows the same rules as [`router`]'s.
pub fn metrics_router(extra: Router, state: ServerState) -> Router {
    let routes = health_routes(state.clone())
        .merge(extra)
        .fallback(not_found);
    with_layers(routes, &state)
}

/// A Kubernetes `Status`-shaped JSON error, the body of every error the server itself produces
/// (404, 405, 413, 500, 504), so clients that parse API errors can parse these.
pub fn error_response(status: StatusCode, reason: &str, message: impl Into<String>) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message.into(),
        "reason": reason,
        "code": status.as_u16(),
    });
    (status, axum::Json(body)).into_response()
}

fn health_routes(state: ServerState) -> Router {
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .with_state(state)
}

fn with_layers(routes: Router, state: &ServerState) -> Router {
    let limits = state.limits();
    let edge = Edge {
        metrics: state.metrics().clone(),
        limits,
    };
    routes
        .layer(RequestBodyLimitLayer::new(limits.body_limit))
        .layer(DefaultBodyLimit::max(limits.body_limit))
        .layer(from_fn_with_state(limits, cap_body))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(from_fn_with_state(edge, edge_layer))
}

async fn not_found(method: Method, uri: Uri) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no route for {method} {}", uri.path()),
    )
}

#[derive(Clone)]
struct Edge {
    metrics: Metrics,
    limits: Limits,
}

async fn edge_layer(State(edge): State<Edge>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_string(), |p| p.as_str().to_string());
    let method = method_label(req.method());
    let start = Instant::now();
    let response = match tokio::time::timeout(edge.limits.request_timeout, next.run(req)).await {
        Ok(response) => json_framework_errors(response, edge.limits),
        Err(_) => {
            tracing::warn!(%route, method, timeout = ?edge.limits.request_timeout, "request timed out");
            error_response(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                format!(
                    "request not answered within {}s",
                    edge.limits.request_timeout.as_secs_f64()
                ),
            )
        }
    };
    let status = response.status();
    let labels = [route.as_str(), method, status.as_str()];
    edge.metrics.http_requests.with_label_values(&labels).inc();
    edge.metrics
        .http_duration
        .with_label_values(&labels)
        .observe(start.elapsed().as_secs_f64());
    response
}

/// Methods outside the standard set share one label value, so odd methods cannot add series.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// axum answers 405 with an empty body and 413 (from its extractors) with plain text; give
/// them the same JSON shape as every other error. Handler-made JSON passes through untouched.
fn json_framework_errors(response: Response, limits: Limits) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if is_json {
        return response;
    }
    match response.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            let mut json = too_large(limits.body_limit);
            if let Some(connection) = response.headers().get(header::CONNECTION) {
                json.headers_mut()
                    .insert(header::CONNECTION, connection.clone());
            }
            json
        }
        StatusCode::METHOD_NOT_ALLOWED => {
            let mut json = error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "method not allowed on this path",
            );
            if let Some(allow) = response.headers().get(header::ALLOW) {
                json.headers_mut().insert(header::ALLOW, allow.clone());
            }
            json
        }
        _ => response,
    }
}

fn too_large(limit: usize) -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        "RequestEntityTooLarge",
        format!("request body is larger than the limit of {limit} bytes"),
    )
}

async fn cap_body(State(limits): State<Limits>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let limit = limits.body_limit as u64;
    match declared {
        Some(len) if len > limit => {
            let drained =
                len <= limit.saturating_mul(DRAIN_FACTOR) && drain(req.into_body(), len).await;
            let mut response = too_large(limits.body_limit);
            if !drained {
                // Unread bytes are left on the connection: it cannot carry another request.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
        _ => next.run(req).await,
    }
}

/// Reads and discards a body of at most `max` bytes within [`DRAIN_TIME`]. Answering before the
/// client has sent its body makes the kernel reset the connection when the server closes it,
/// and the client then reports the reset instead of the 413.
async fn drain(body: Body, max: u64) -> bool {
    let mut stream = body.into_data_stream();
    let read_all = async {
        let mut seen: u64 = 0;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => {
                    seen = seen.saturating_add(bytes.len() as u64);
                    if seen > max {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
        true
    };
    tokio::time::timeout(DRAIN_TIME, read_all)
        .await
        .unwrap_or(false)
}

fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    tracing::error!(panic = %message, "request handler panicked");
    // The panic text may describe internals; it goes to the log, not to the client.
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        "internal error while handling the request",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use axum::routing::post;
    use tower::ServiceExt;

    fn state() -> ServerState {
        ServerState::new(Metrics::new().unwrap())
    }

    fn extra() -> Router {
        Router::new()
            .route(
                "/echo-len",
                post(|body: Bytes| async move { body.len().to_string() }),
            )
            .route("/items/{id}", get(|| async { "item" }))
            .route(
                "/panic",
                get(|| async {
                    if true {
                        panic!("boom");
                    }
                    "unreachable"
                }),
            )
            .route(
                "/slow",
                get(|| async {
                    std::future::pending::<()>().await;
                    "never"
                }),
            )
    }

    async fn call(
        app: &Router,
        req: axum::http::Request<Body>,
    ) -> (StatusCode, axum::http::HeaderMap, String) {
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, headers, String::from_utf8(body.to_vec()).unwrap())
    }

    fn get_req(path: &str) -> axum::http::Request<Body> {
        axum::http::Request::get(path).body(Body::empty()).unwrap()
    }

    fn json(body: &str) -> serde_json::Value {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
    }

    #[tokio::test]
    async fn unknown_path_is_a_json_404_naming_the_path() {
        let app = router(extra(), state());
        let (status, headers, body) = call(&app, get_req("/nope/here?x=1")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        let v = json(&body);
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["code"], 404);
        assert_eq!(v["reason"], "NotFound");
        assert!(
            v["message"].as_str().unwrap().contains("/nope/here"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn health_readiness_and_metrics() {
        let st = state();
        let app = router(extra(), st.clone());
        assert_eq!(call(&app, get_req("/healthz")).await.0, StatusCode::OK);
        let (status, _, body) = call(&app, get_req("/readyz")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("tls"), "{body}");
        st.set_condition(super::super::TLS_CONDITION, true);
        assert_eq!(call(&app, get_req("/readyz")).await.0, StatusCode::OK);

        let (status, headers, body) = call(&app, get_req("/metrics")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], "text/plain; version=0.0.4");
        assert!(
            body.contains(
                r#"tephra_http_requests_total{method="GET",route="/readyz",status="200"} 1"#
            ),
            "{body}"
        );
    }

    #[tokio::test]
    async fn metrics_use_the_route_template_and_unmatched() {
        let st = state();
        let app = router(extra(), st.clone());
        for path in ["/items/1", "/items/2", "/random/a", "/random/b"] {
            call(&app, get_req(path)).await;
        }
        let text = st.metrics().render();
        assert!(
            text.contains(
                r#"tephra_http_requests_total{method="GET",route="/items/{id}",status="200"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"tephra_http_requests_total{method="GET",route="unmatched",status="404"} 2"#
            ),
            "{text}"
        );
        assert!(!text.contains("/random"), "{text}");
    }

    #[tokio::test]
    async fn a_five_mib_body_reaches_the_extractor() {
        let app = router(extra(), state());
        let body = vec![b'x'; 5 * 1024 * 1024];
        let req = axum::http::Request::post("/echo-len")
            .body(Body::from(body))
            .unwrap();
        let (status, _, text) = call(&app, req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(text, (5 * 1024 * 1024).to_string());
    }

    #[tokio::test]
    async fn an_oversized_body_is_a_json_413_with_or_without_content_length() {
        let app = router(extra(), state());
        let big = vec![b'x'; DEFAULT_BODY_LIMIT_FOR_TEST + 1];
        // Declared length: refused before the handler.
        let req = axum::http::Request::post("/echo-len")
            .header(header::CONTENT_LENGTH, big.len())
            .body(Body::from(big.clone()))
            .unwrap();
        let (status, _, body) = call(&app, req).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(json(&body)["reason"], "RequestEntityTooLarge");

        // No declared length (chunked): cut off while the extractor reads.
        let stream = futures::stream::iter(
            big.chunks(64 * 1024)
                .map(|c| Ok::<_, std::io::Error>(Bytes::copy_from_slice(c)))
                .collect::<Vec<_>>(),
        );
        let req = axum::http::Request::post("/echo-len")
            .body(Body::from_stream(stream))
            .unwrap();
        let (status, _, body) = call(&app, req).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(json(&body)["code"], 413);
    }

    const DEFAULT_BODY_LIMIT_FOR_TEST: usize = super::super::DEFAULT_BODY_LIMIT;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_json() {
        let st = state();
        let app = router(extra(), st.clone());
        let (status, _, body) = call(&app, get_req("/panic")).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(json(&body)["reason"], "InternalError");
        assert!(!body.contains("boom"));
        assert!(
            st.metrics().render().contains(
                r#"tephra_http_requests_total{method="GET",route="/panic",status="500"} 1"#
            )
        );
    }

    #[tokio::test]
    async fn a_handler_that_never_answers_gets_a_504() {
        let st = state().with_limits(Limits {
            request_timeout: Duration::from_millis(50),
            ..Limits::default()
        });
        let app = router(extra(), st);
        let (status, _, body) = call(&app, get_req("/slow")).await;
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(json(&body)["reason"], "Timeout");
    }

    #[tokio::test]
    async fn wrong_method_is_a_json_405_with_allow() {
        let app = router(extra(), state());
        let req = axum::http::Request::delete("/healthz")
            .body(Body::empty())
            .unwrap();
        let (status, headers, body) = call(&app, req).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert!(headers.contains_key(header::ALLOW));
        assert_eq!(json(&body)["reason"], "MethodNotAllowed");
    }

    #[tokio::test]
    async fn metrics_router_serves_probes_and_404() {
        let st = state();
        let app = metrics_router(Router::new(), st);
        assert_eq!(call(&app, get_req("/healthz")).await.0, StatusCode::OK);
        assert_eq!(call(&app, get_req("/metrics")).await.0, StatusCode::OK);
        let (status, _, body) = call(&app, get_req("/jobs/mutate")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(json(&body)["code"], 404);
    }

    #[test]
    fn odd_methods_share_one_label() {
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "OTHER");
        assert_eq!(method_label(&Method::POST), "POST");
    }
}
