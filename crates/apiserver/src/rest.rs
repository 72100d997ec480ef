//! The HTTP layer: Kubernetes REST paths mapped onto the verb layer (`ops.rs`, `list.rs`).
//! Thin: this file parses the path and answers discovery; [`verbs`] has one small handler per
//! verb that reads the query and body, calls the verb and encodes the answer (JSON, a Table,
//! a watch stream, or a `Status` on error). Nothing here touches the store.

mod verbs;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::list::{ListResult, list_meta};
use super::resources::ResourceInfo;
use super::selectors::{FieldSelector, LabelSelector};
use super::store::Stored;
use super::table_view::{self, TableOptions};
use super::watch::{self, WatchQuery};
use super::{ApiError, ApiServer, MAX_REQUEST_BYTES, discovery, openapi};

type Api = Arc<ApiServer>;

/// The router (see [`super::router`]).
pub fn router(api: Api) -> Router {
    Router::new()
        // kube-apiserver answers `/version/`, `/api/` and `/apis/` too, and the Python
        // client's `VersionApi`, `CoreApi` and `ApisApi` ask for exactly those paths.
        .route("/version", get(version))
        .route("/version/", get(version))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/api", get(core_versions))
        .route("/api/", get(core_versions))
        .route("/openapi/v2", get(super::openapi_v2::handler))
        .route("/openapi/v3", get(openapi_root))
        .route("/openapi/v3/{*gv}", get(openapi_group_version))
        .route("/apis", get(apis_root))
        .route("/apis/", get(apis_root))
        .route("/api/{*rest}", axum::routing::any(core))
        .route("/apis/{*rest}", axum::routing::any(grouped))
        .fallback(|req: Request| async move {
            error_response(&ApiError::NotFound {
                resource: "path".into(),
                name: req.uri().path().to_string(),
            })
        })
        .with_state(api)
}

fn json_response(code: StatusCode, v: &Value) -> Response {
    bytes_response(code, Bytes::from(v.to_string()))
}

fn bytes_response(code: StatusCode, b: Bytes) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], b).into_response()
}

pub(crate) fn error_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &e.status())
}

fn success(code: u16) -> Response {
    json_response(
        StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}),
    )
}

async fn version() -> Response {
    json_response(StatusCode::OK, &discovery::version())
}

async fn core_versions() -> Response {
    json_response(StatusCode::OK, &discovery::core_versions())
}

async fn apis_root(State(api): State<Api>) -> Response {
    json_response(StatusCode::OK, &discovery::group_list(&api.registry))
}

/// `/openapi/v3`: kubectl reads it (then a group-version document) to learn that writes take
/// `fieldValidation`, instead of downloading OpenAPI v2 for client-side validation.
async fn openapi_root(State(api): State<Api>, headers: HeaderMap) -> Response {
    openapi_answer(&headers, || Some(openapi::root(&api.registry)), "")
}

async fn openapi_group_version(
    State(api): State<Api>,
    axum::extract::Path(gv): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    openapi_answer(&headers, || openapi::group_version(&api.registry, &gv), &gv)
}

fn openapi_answer(headers: &HeaderMap, doc: impl FnOnce() -> Option<Value>, gv: &str) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !openapi::accepts_json(accept) {
        return error_response(&ApiError::NotAcceptable(format!(
            "only application/json is served for OpenAPI v3 documents (Accept: {accept})"
        )));
    }
    match doc() {
        Some(d) => json_response(StatusCode::OK, &d),
        None => error_response(&ApiError::NotFound {
            resource: "openapi/v3".into(),
            name: gv.to_string(),
        }),
    }
}

async fn core(State(api): State<Api>, req: Request) -> Response {
    let path = req.uri().path().trim_start_matches("/api").to_string();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    match segs.as_slice() {
        [] => json_response(StatusCode::OK, &discovery::core_versions()),
        [v] => match discovery::resource_list(&api.registry, "", v) {
            Some(d) => json_response(StatusCode::OK, &d),
            None => error_response(&ApiError::NotFound {
                resource: "version".into(),
                name: v.clone(),
            }),
        },
        [v, rest @ ..] => {
            let (v, rest) = (v.clone(), rest.to_vec());
            respond(api, String::new(), v, rest, req).await
        }
    }
}

async fn grouped(State(api): State<Api>, req: Request) -> Response {
    let path = req.uri().path().trim_start_matches("/apis").to_string();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    match segs.as_slice() {
        [] => json_response(StatusCode::OK, &discovery::group_list(&api.registry)),
        [g] => match discovery::group(&api.registry, g) {
            Some(d) => json_response(StatusCode::OK, &d),
            None => error_response(&ApiError::NotFound {
                resource: "group".into(),
                name: g.clone(),
            }),
        },
        [g, v] => match discovery::resource_list(&api.registry, g, v) {
            Some(d) => json_response(StatusCode::OK, &d),
            None => error_response(&ApiError::NotFound {
                resource: "groupversion".into(),
                name: format!("{g}/{v}"),
            }),
        },
        [g, v, rest @ ..] => {
            let (g, v, rest) = (g.clone(), v.clone(), rest.to_vec());
            respond(api, g, v, rest, req).await
        }
    }
}

/// A parsed resource path.
#[derive(Debug)]
struct Target {
    res: Arc<ResourceInfo>,
    version: String,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_target(
    api: &ApiServer,
    group: &str,
    version: &str,
    segs: &[String],
) -> Result<Target, ApiError> {
    let (namespace, rest): (Option<String>, &[String]) = match segs {
        [ns_kw, ns, rest @ ..]
            if ns_kw == "namespaces"
                && !rest.is_empty()
                && !(rest.len() == 1 && (rest[0] == "status" || rest[0] == "finalize")) =>
        {
            (Some(ns.clone()), rest)
        }
        _ => (None, segs),
    };
    let (plural, name, sub) = match rest {
        [p] => (p, None, None),
        [p, n] => (p, Some(n.clone()), None),
        [p, n, s] => (p, Some(n.clone()), Some(s.clone())),
        _ => {
            return Err(ApiError::NotFound {
                resource: "path".into(),
                name: segs.join("/"),
            });
        }
    };
    let res = api
        .registry
        .lookup(group, version, plural)
        .ok_or_else(|| ApiError::NotFound {
            resource: "resource".into(),
            name: if group.is_empty() {
                plural.clone()
            } else {
                format!("{plural}.{group}")
            },
        })?;
    if namespace.is_some() && !res.namespaced {
        return Err(ApiError::NotFound {
            resource: res.qualified(),
            name: name.unwrap_or_default(),
        });
    }
    if namespace.is_none() && res.namespaced && name.is_some() {
        return Err(ApiError::NotFound {
            resource: res.qualified(),
            name: name.unwrap_or_default(),
        });
    }
    Ok(Target {
        res,
        version: version.to_string(),
        namespace,
        name,
        sub,
    })
}

#[tracing::instrument(level = "debug", name = "embedded_api", skip_all, fields(method = %req.method(), path = %req.uri().path()))]
async fn respond(
    api: Api,
    group: String,
    version: String,
    segs: Vec<String>,
    req: Request,
) -> Response {
    match handle(api, &group, &version, &segs, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(code = e.code(), reason = %e.reason(), error = %e, "request failed");
            error_response(&e)
        }
    }
}

/// Reads the body (up to kube-apiserver's limit) and returns it with the request's headers.
async fn read_body(req: &mut Request) -> Result<(HeaderMap, Bytes), ApiError> {
    let body = std::mem::take(req.body_mut());
    let bytes = axum::body::to_bytes(body, MAX_REQUEST_BYTES)
        .await
        .map_err(|_| {
            ApiError::TooLarge(format!(
                "Request entity too large: limit is {MAX_REQUEST_BYTES}"
            ))
        })?;
    Ok((req.headers().clone(), bytes))
}

fn parse_object(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if ct.contains("protobuf") {
        return super::protobuf::decode(body).map_err(|e| {
            ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format: {e}"
            ))
        });
    }
    let v = if ct.contains("yaml") {
        super::patching::parse_json_or_yaml(body)
            .map_err(|e| ApiError::BadRequest(e.to_string()))?
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::BadRequest(format!(
                "the body of the request could not be decoded as JSON: {e}"
            ))
        })?
    };
    if !v.is_object() {
        return Err(ApiError::BadRequest(
            "the body of the request is not a JSON object".into(),
        ));
    }
    Ok(v)
}

fn render(t: &Target, s: &Stored) -> Bytes {
    watch::render(&t.res, &t.version, s)
}

/// Parses the resource path and query, then hands the request to its verb's handler; the
/// `Warning` headers of `fieldValidation=Warn` are added to the answer.
async fn handle(
    api: Api,
    group: &str,
    version: &str,
    segs: &[String],
    req: Request,
) -> Result<Response, ApiError> {
    let t = parse_target(&api, group, version, segs)?;
    let q: HashMap<String, String> = Query::<HashMap<String, String>>::try_from_uri(req.uri())
        .map(|q| q.0)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let warnings = openapi::Warnings::default();
    if let Some(w) = discovery::deprecation_warning(&t.res, &t.version) {
        warnings.add(w.to_string());
    }
    let call = verbs::Call {
        api,
        t,
        q,
        accept,
        warnings: warnings.clone(),
        req,
    };
    let mut resp = verbs::dispatch(call).await?;
    for w in warnings.take() {
        if let Ok(v) = header::HeaderValue::from_str(&openapi::warning_header(&w)) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    Ok(resp)
}

fn list_response(t: &Target, page: &ListResult) -> Response {
    let items = &page.items;
    let meta = list_meta(page);
    let head = format!(
        "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
        t.res.kind,
        t.res.api_version(&t.version),
        meta
    );
    let total: usize = items.iter().map(|i| i.json.len() + 1).sum::<usize>() + head.len() + 2;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(head.as_bytes());
    // At the storage version every item is its stored bytes: copied as they are, with no
    // per-item handle taken and dropped.
    let as_stored = t.version == t.res.storage_version();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if as_stored {
            out.extend_from_slice(&item.json);
        } else {
            out.extend_from_slice(&render(t, item));
        }
    }
    out.extend_from_slice(b"]}");
    bytes_response(StatusCode::OK, Bytes::from(out))
}

/// A `meta.k8s.io/v1` Table of `items` for kubectl, with `metadata` as its list metadata.
fn table(t: &Target, items: &[Arc<Stored>], metadata: Value, opts: &TableOptions) -> Value {
    let values: Vec<Value> = items.iter().filter_map(|s| s.value().ok()).collect();
    table_view::table(&t.res, &t.version, &values, metadata, opts)
}

fn watch_response(
    api: Api,
    t: Target,
    q: &HashMap<String, String>,
    table: Option<TableOptions>,
) -> Result<Response, ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::BadRequest)?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::BadRequest)?;
    let from = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    let timeout = match q.get("timeoutSeconds") {
        Some(s) => Some(Duration::from_secs(s.parse().map_err(|_| {
            ApiError::BadRequest(format!("invalid timeoutSeconds {s:?}"))
        })?)),
        None => None,
    };
    let mut namespace = t.namespace.clone();
    if let Some(term) = fields
        .0
        .iter()
        .find(|f| f.field == "metadata.namespace" && f.equal)
    {
        namespace.get_or_insert(term.value.clone());
    }
    let send_initial = verbs::flag(q, "sendInitialEvents");
    if send_initial && !api.options().watch_list {
        // kube-apiserver's words and code (422) with its WatchList feature gate off.
        return Err(ApiError::Invalid(
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: \
             sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
                .into(),
        ));
    }
    let wq = WatchQuery {
        from,
        namespace,
        labels,
        fields,
        timeout,
        bookmarks: verbs::flag(q, "allowWatchBookmarks"),
        send_initial,
        table,
    };
    let stream = watch::start(api, t.res.clone(), t.version.clone(), wq);
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-cache, private"),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn discovery_roots_are_served_with_and_without_a_trailing_slash() {
        use tower::ServiceExt;
        let api = ApiServer::new(crate::EmbeddedOptions {
            nodes: 0,
            sim_kubelet: false,
            ..Default::default()
        });
        let get_json = |path: &'static str| {
            let api = api.clone();
            async move {
                let req = Request::get(path).body(Body::empty()).unwrap();
                let resp = router(api).oneshot(req).await.unwrap();
                assert_eq!(resp.status(), StatusCode::OK, "{path}");
                let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                    .await
                    .unwrap();
                serde_json::from_slice::<Value>(&body).unwrap()
            }
        };
        for path in ["/version", "/version/"] {
            assert_eq!(get_json(path).await["major"], "1", "{path}");
        }
        for path in ["/api", "/api/"] {
            assert_eq!(get_json(path).await["kind"], "APIVersions", "{path}");
        }
        for path in ["/apis", "/apis/"] {
            assert_eq!(get_json(path).await["kind"], "APIGroupList", "{path}");
        }
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(crate::human_age(5), "5s");
        assert_eq!(crate::human_age(200), "3m20s");
        assert_eq!(crate::human_age(600), "10m");
        assert_eq!(crate::human_age(3 * 3600), "3h");
        assert_eq!(crate::human_age(3 * 86400 + 3600), "3d1h");
    }
}
