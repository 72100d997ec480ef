//! The layers around the embedded API's router, so no client request can take the process down
//! or hold it: a panic in a handler answers 500 (the connection and the process stay up), a
//! request that is not long-running (everything but watches and followed logs) is answered 504
//! after [`REQUEST_TIMEOUT`], and at most [`MAX_IN_FLIGHT`] short requests and
//! [`MAX_WATCHES`] long-running ones are served at once; past that the answer is
//! `429 TooManyRequests` with `Retry-After: 1`, as kube-apiserver's max-in-flight filter does.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::Response;
use futures::StreamExt;
use tokio::sync::Semaphore;
use tower_http::catch_panic::CatchPanicLayer;

use super::ApiError;

/// Longest time a short request may take (kube-apiserver's `--request-timeout` default).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Short requests served at once (kube-apiserver's `--max-requests-inflight` plus
/// `--max-mutating-requests-inflight` defaults).
pub const MAX_IN_FLIGHT: usize = 600;
/// Watches and followed logs open at once.
pub const MAX_WATCHES: usize = 10_000;

/// The limits the layers enforce (the constants above, smaller in tests).
#[derive(Clone, Debug)]
pub struct Limits {
    /// See [`REQUEST_TIMEOUT`].
    pub request_timeout: Duration,
    /// See [`MAX_IN_FLIGHT`].
    pub max_in_flight: usize,
    /// See [`MAX_WATCHES`].
    pub max_watches: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            request_timeout: REQUEST_TIMEOUT,
            max_in_flight: MAX_IN_FLIGHT,
            max_watches: MAX_WATCHES,
        }
    }
}

#[derive(Clone)]
struct Guard {
    timeout: Duration,
    short: Arc<Semaphore>,
    long: Arc<Semaphore>,
}

/// Wraps `routes` in the panic guard, the timeout and the in-flight limits.
pub fn layer(routes: Router, limits: &Limits) -> Router {
    let guard = Guard {
        timeout: limits.request_timeout,
        short: Arc::new(Semaphore::new(limits.max_in_flight)),
        long: Arc::new(Semaphore::new(limits.max_watches)),
    };
    routes
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(from_fn_with_state(guard, limit_and_time))
}

/// Whether a request is long-running (kube-apiserver's `watch` and `proxy`-like verbs): a
/// `watch` query or a followed log. Pure.
pub fn long_running(query: Option<&str>) -> bool {
    query
        .unwrap_or_default()
        .split('&')
        .any(|kv| matches!(kv, "watch=true" | "watch=1" | "follow=true" | "follow=1"))
}

/// A handler panicked: a 500 `Status`; the panic text goes to the log only (it may describe
/// internals).
fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    tracing::error!(panic = %message, "embedded API request handler panicked");
    super::rest::error_response(&ApiError::Internal(
        "Internal error occurred: the request handler failed; the server is still up".into(),
    ))
}

fn too_many(what: &str) -> Response {
    let e = ApiError::TooManyRequests(format!(
        "Too many requests, please try again later ({what} in flight)"
    ));
    let mut r = super::rest::error_response(&e);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

async fn limit_and_time(State(g): State<Guard>, req: Request, next: Next) -> Response {
    if long_running(req.uri().query()) {
        let Ok(_permit) = g.long.clone().try_acquire_owned() else {
            return too_many("watches");
        };
        // The permit must live as long as the streamed body, not just this call.
        let resp = next.run(req).await;
        let (parts, body) = resp.into_parts();
        let stream = body.into_data_stream().map(move |chunk| {
            let _held = &_permit;
            chunk
        });
        return Response::from_parts(parts, axum::body::Body::from_stream(stream));
    }
    let Ok(_permit) = g.short.clone().try_acquire_owned() else {
        return too_many("requests");
    };
    match tokio::time::timeout(g.timeout, next.run(req)).await {
        Ok(r) => r,
        Err(_) => {
            let e = ApiError::Timeout(format!(
                "the server was unable to return a response in the time allotted ({}s), but may still be processing the request",
                g.timeout.as_secs()
            ));
            super::rest::error_response(&e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    fn limits(timeout_ms: u64, in_flight: usize) -> Limits {
        Limits {
            request_timeout: Duration::from_millis(timeout_ms),
            max_in_flight: in_flight,
            max_watches: 1,
        }
    }

    async fn boom() -> &'static str {
        panic!("boom")
    }

    fn app(l: &Limits) -> Router {
        let routes = Router::new().route("/panic", get(boom)).route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "late"
            }),
        );
        layer(routes, l)
    }

    async fn call(app: &Router, uri: &str) -> (u16, String) {
        let r = app
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let code = r.status().as_u16();
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_status() {
        let (code, body) = call(&app(&Limits::default()), "/panic").await;
        assert_eq!(code, 500);
        assert!(
            body.contains("\"kind\":\"Status\"") && !body.contains("boom"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn a_slow_request_times_out_with_504_but_a_watch_does_not() {
        let a = app(&limits(50, 10));
        let (code, body) = call(&a, "/slow").await;
        assert_eq!(code, 504, "{body}");
        let watch =
            tokio::time::timeout(Duration::from_millis(500), call(&a, "/slow?watch=true")).await;
        assert!(
            watch.is_err(),
            "a watch is long-running and not cut by the request timeout"
        );
    }

    #[tokio::test]
    async fn requests_past_the_in_flight_limit_get_429() {
        let a = app(&limits(60_000, 1));
        let held = tokio::spawn({
            let a = a.clone();
            async move { call(&a, "/slow").await }
        });
        // Let the first request take the only slot.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        let (code, body) = call(&a, "/panic").await;
        assert_eq!(code, 429, "{body}");
        assert!(body.contains("TooManyRequests"), "{body}");
        held.abort();
    }

    #[test]
    fn watches_and_followed_logs_are_long_running() {
        assert!(long_running(Some("watch=true")));
        assert!(long_running(Some("labelSelector=a&watch=1")));
        assert!(long_running(Some("follow=true&container=c")));
        assert!(!long_running(Some("watch=false")));
        assert!(!long_running(Some("limit=5")));
        assert!(!long_running(None));
    }
}
