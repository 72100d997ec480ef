//! One small handler per verb of a resource path. Each reads what its verb needs from the
//! request (query, body), calls the verb layer (`ops.rs`, `list.rs`) and encodes the answer;
//! none reads or writes the store.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{
    Api, Target, bytes_response, json_response, list_response, parse_object, read_body, render,
    success, table, watch_response,
};
use crate::list::{ListOptions, list_meta};
use crate::ops::{DeleteOptions, ObjectRef, Propagation, ScaleWrite, WriteOptions};
use crate::patching::PatchKind;
use crate::prepare::Endpoint;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::table_view::{TableOptions, wants_table};
use crate::{ApiError, Caller, openapi};

/// A request on a resource path, parsed: what every handler gets.
pub(super) struct Call {
    pub api: Api,
    pub t: Target,
    pub q: HashMap<String, String>,
    pub accept: String,
    pub warnings: openapi::Warnings,
    pub req: Request,
}

impl Call {
    fn namespace(&self) -> &str {
        self.t.namespace.as_deref().unwrap_or_default()
    }

    /// The named object of the path, as a client asks for it.
    fn object<'a>(&'a self, name: &'a str, endpoint: Endpoint) -> ObjectRef<'a> {
        ObjectRef::new(Caller::Client, &self.t.res, self.namespace(), name).at(endpoint)
    }

    fn write_opts(&self) -> Result<WriteOptions, ApiError> {
        Ok(WriteOptions {
            dry_run: self.q.get("dryRun").is_some_and(|d| d == "All"),
            field_manager: self.q.get("fieldManager").cloned(),
            version: self.t.version.clone(),
            field_validation: openapi::FieldValidation::from_query(
                self.q.get("fieldValidation").map(String::as_str),
            )?,
            warnings: self.warnings.clone(),
        })
    }

    fn flag(&self, k: &str) -> bool {
        flag(&self.q, k)
    }
}

pub(super) fn flag(q: &HashMap<String, String>, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

/// Routes a parsed request to its verb: method, whether the path names an object, and the
/// subresource.
pub(super) async fn dispatch(call: Call) -> Result<Response, ApiError> {
    let name = call.t.name.clone();
    let sub = call.t.sub.clone();
    let method = call.req.method().clone();
    let endpoint = endpoint(&call.t)?;
    match (&method, name, sub.as_deref()) {
        (&Method::GET, None, None) if call.flag("watch") => watch(call),
        (&Method::GET, None, None) => list(call).await,
        (&Method::GET, Some(n), None | Some("status")) => get(call, &n),
        (&Method::GET, Some(n), Some("scale")) => get_scale(call, &n),
        (&Method::GET, Some(n), Some("log")) => log(call, &n),
        (&Method::POST, None, None) => create(call).await,
        (&Method::POST, Some(n), Some("binding")) => bind(call, &n).await,
        (&Method::POST, Some(n), Some("eviction")) => evict(call, &n).await,
        (&Method::PUT, Some(n), None | Some("status") | Some("finalize")) => {
            update(call, &n, endpoint).await
        }
        (&Method::PUT, Some(n), Some("scale")) => put_scale(call, &n).await,
        (&Method::PATCH, Some(n), None | Some("status")) => patch(call, &n, endpoint).await,
        (&Method::PATCH, Some(n), Some("scale")) => patch_scale(call, &n).await,
        (&Method::DELETE, Some(n), None) => delete(call, &n).await,
        (&Method::DELETE, None, None) => delete_collection(call).await,
        _ => Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({method} {})",
            call.req.uri().path()
        ))),
    }
}

/// The endpoint of the subresource (404 for one the resource does not have).
fn endpoint(t: &Target) -> Result<Endpoint, ApiError> {
    match t.sub.as_deref() {
        None | Some("finalize") => Ok(Endpoint::Main),
        Some("status") if t.res.status_subresource => Ok(Endpoint::Status),
        Some("binding" | "eviction" | "log") if t.res.pod_subresources => Ok(Endpoint::Main),
        Some("scale") if t.res.scale.is_some() => Ok(Endpoint::Main),
        Some(s) => Err(ApiError::NotFound {
            resource: format!("{}/{s}", t.res.qualified()),
            name: t.name.clone().unwrap_or_default(),
        }),
    }
}

/// The list options of the query (selectors parsed; 400 on a malformed one).
fn list_options(q: &HashMap<String, String>) -> Result<ListOptions, ApiError> {
    let get = |k: &str| q.get(k).map(String::as_str).unwrap_or("");
    Ok(ListOptions {
        labels: LabelSelector::parse(get("labelSelector")).map_err(ApiError::BadRequest)?,
        fields: FieldSelector::parse(get("fieldSelector")).map_err(ApiError::BadRequest)?,
        limit: match q.get("limit") {
            Some(l) => l
                .parse()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit {l:?}")))?,
            None => 0,
        },
        continue_token: get("continue").to_string(),
        resource_version: get("resourceVersion").to_string(),
        version_match: get("resourceVersionMatch").to_string(),
    })
}

fn patch_kind(
    headers: &HeaderMap,
    unknown: impl FnOnce(&str) -> String,
) -> Result<PatchKind, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    PatchKind::from_content_type(ct).ok_or_else(|| ApiError::UnsupportedMediaType(unknown(ct)))
}

/// The Table options of a request that asks for a Table (`None` when it does not); 400 on an
/// unknown `includeObject`, before anything is read, as kube-apiserver answers.
fn table_options(call: &Call) -> Result<Option<TableOptions>, ApiError> {
    if !wants_table(&call.accept) {
        return Ok(None);
    }
    TableOptions::from_query(&call.q).map(Some)
}

fn watch(call: Call) -> Result<Response, ApiError> {
    let table = table_options(&call)?;
    watch_response(call.api, call.t, &call.q, table)
}

async fn list(call: Call) -> Result<Response, ApiError> {
    let opts = list_options(&call.q)?;
    let page = call
        .api
        .list(&call.t.res, call.t.namespace.as_deref(), &opts)
        .await?;
    if let Some(opts) = table_options(&call)? {
        return Ok(json_response(
            StatusCode::OK,
            &table(&call.t, &page.items, list_meta(&page), &opts),
        ));
    }
    Ok(list_response(&call.t, &page))
}

fn get(call: Call, name: &str) -> Result<Response, ApiError> {
    let s = call.api.get_object(&call.t.res, call.namespace(), name)?;
    if let Some(opts) = table_options(&call)? {
        let meta = serde_json::json!({"resourceVersion": s.rv.to_string()});
        return Ok(json_response(
            StatusCode::OK,
            &table(&call.t, &[s], meta, &opts),
        ));
    }
    Ok(bytes_response(StatusCode::OK, render(&call.t, &s)))
}

fn get_scale(call: Call, name: &str) -> Result<Response, ApiError> {
    let s = call.api.get_object(&call.t.res, call.namespace(), name)?;
    let paths = call
        .t
        .res
        .scale
        .clone()
        .ok_or_else(|| ApiError::not_found(&call.t.res, name))?;
    Ok(json_response(
        StatusCode::OK,
        &crate::scale::scale_of(&paths, &s.value()?),
    ))
}

fn log(call: Call, name: &str) -> Result<Response, ApiError> {
    let pod = call
        .api
        .get_object(&call.t.res, call.namespace(), name)?
        .value()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let text = crate::logs::simulated_log(&pod, call.q.get("container").map(String::as_str))?;
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], text).into_response())
}

async fn create(mut call: Call) -> Result<Response, ApiError> {
    if call.t.res.namespaced && call.t.namespace.is_none() {
        return Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource: {} are namespaced; POST to /namespaces/NS/{}",
            call.t.res.qualified(),
            call.t.res.plural
        )));
    }
    let (h, body) = read_body(&mut call.req).await?;
    let obj = parse_object(&h, &body)?;
    let s = call
        .api
        .create(
            Caller::Client,
            &call.t.res,
            call.namespace(),
            obj,
            &call.write_opts()?,
        )
        .await?;
    Ok(bytes_response(StatusCode::CREATED, render(&call.t, &s)))
}

async fn bind(mut call: Call, name: &str) -> Result<Response, ApiError> {
    let (h, body) = read_body(&mut call.req).await?;
    let b = parse_object(&h, &body)?;
    call.api
        .bind(Caller::Client, call.namespace(), name, &b)
        .await?;
    Ok(success(201))
}

async fn evict(mut call: Call, name: &str) -> Result<Response, ApiError> {
    let (h, body) = read_body(&mut call.req).await?;
    let b = parse_object(&h, &body)?;
    call.api
        .evict(Caller::Client, call.namespace(), name, &b)
        .await?;
    Ok(success(201))
}

async fn update(mut call: Call, name: &str, endpoint: Endpoint) -> Result<Response, ApiError> {
    let (h, body) = read_body(&mut call.req).await?;
    let obj = parse_object(&h, &body)?;
    let s = call
        .api
        .update(call.object(name, endpoint), obj, &call.write_opts()?)
        .await?;
    Ok(bytes_response(StatusCode::OK, render(&call.t, &s)))
}

async fn patch(mut call: Call, name: &str, endpoint: Endpoint) -> Result<Response, ApiError> {
    let (h, body) = read_body(&mut call.req).await?;
    let kind = patch_kind(&h, |ct| {
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
        )
    })?;
    let p = call
        .api
        .patch(
            call.object(name, endpoint),
            kind,
            &body,
            &call.write_opts()?,
        )
        .await?;
    let code = if p.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(bytes_response(code, render(&call.t, &p.object)))
}

async fn put_scale(mut call: Call, name: &str) -> Result<Response, ApiError> {
    let (h, body) = read_body(&mut call.req).await?;
    let obj = parse_object(&h, &body)?;
    let sc = call
        .api
        .write_scale(
            call.object(name, Endpoint::Main),
            ScaleWrite::Replace(&obj),
            &call.write_opts()?,
        )
        .await?;
    Ok(json_response(StatusCode::OK, &sc))
}

async fn patch_scale(mut call: Call, name: &str) -> Result<Response, ApiError> {
    let (h, body) = read_body(&mut call.req).await?;
    let kind = patch_kind(&h, |ct| format!("unsupported patch type {ct:?}"))?;
    let sc = call
        .api
        .write_scale(
            call.object(name, Endpoint::Main),
            ScaleWrite::Patch(kind, &body),
            &call.write_opts()?,
        )
        .await?;
    Ok(json_response(StatusCode::OK, &sc))
}

async fn delete(mut call: Call, name: &str) -> Result<Response, ApiError> {
    let (_, body) = read_body(&mut call.req).await?;
    let opts = delete_options(&call.q, &body)?;
    let d = call
        .api
        .delete(call.object(name, Endpoint::Main), &opts)
        .await?;
    let code = if d.pending {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok(bytes_response(code, render(&call.t, &d.object)))
}

async fn delete_collection(mut call: Call) -> Result<Response, ApiError> {
    let (_, body) = read_body(&mut call.req).await?;
    let opts = delete_options(&call.q, &body)?;
    let list = list_options(&call.q)?;
    let deleted = call
        .api
        .delete_collection(
            Caller::Client,
            &call.t.res,
            call.t.namespace.as_deref(),
            &list,
            &opts,
        )
        .await?;
    Ok(list_response(&call.t, &deleted))
}

/// `DeleteOptions` from the body (JSON, or protobuf from client-go's typed clients) and the
/// query (`propagationPolicy`, `dryRun`).
fn delete_options(q: &HashMap<String, String>, body: &Bytes) -> Result<DeleteOptions, ApiError> {
    let mut opts = if body.iter().any(|b| !b.is_ascii_whitespace()) {
        // client-go's typed clients send protobuf (with its envelope), kubectl JSON.
        let v: Value = if body.starts_with(b"k8s\0") {
            crate::protobuf::decode(body)
                .map_err(|e| ApiError::UnsupportedMediaType(format!("DeleteOptions: {e}")))?
        } else {
            serde_json::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("DeleteOptions: {e}")))?
        };
        DeleteOptions::from_body(&v)?
    } else {
        DeleteOptions::default()
    };
    if let Some(p) = q.get("propagationPolicy") {
        opts.propagation = Some(Propagation::parse(p)?);
    }
    if q.get("dryRun").is_some_and(|d| d == "All") {
        opts.dry_run = true;
    }
    Ok(opts)
}
