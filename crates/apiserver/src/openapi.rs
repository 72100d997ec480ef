//! OpenAPI v3 documents (`/openapi/v3`, `/openapi/v3/api/v1`, `/openapi/v3/apis/G/V`) and
//! server-side field validation (`?fieldValidation=Strict|Warn|Ignore`). Pure code.
//!
//! Why: kubectl's default `--validate=true` first asks the OpenAPI v3 document of the object's
//! group-version whether the PATCH operation of its kind takes a `fieldValidation` query
//! parameter. If it does, kubectl leaves validation to the server (`?fieldValidation=Strict`);
//! if not, it downloads OpenAPI v2 and validates client-side. So the documents here are
//! generated from the resource registry (CRDs registered later appear too) and declare that
//! parameter on every write, and the write path honours it.
//!
//! What the documents describe: every served path and verb with its
//! `x-kubernetes-group-version-kind` and `x-kubernetes-action`, and component schemas — a custom
//! resource's `openAPIV3Schema` as its CRD declares it; for built-in kinds the full schema of
//! the Kubernetes type, generated from k8s-openapi (see [`super::builtin_kinds`]) under
//! kube-apiserver's names, so `kubectl explain pod.spec.containers` works. PATCH operations of
//! built-in kinds still do not list `application/strategic-merge-patch+json` as a request body:
//! the generated schemas carry no patch merge keys, and kubectl would compute strategic merge
//! patches from them; without it kubectl uses its compiled-in types, and the server still
//! accepts such patches. `/openapi/v2` ([`v2`]) holds the same schemas in Swagger 2.0 form.
//!
//! Field validation: unknown fields are, for custom resources, what pruning drops (the CRD's
//! structural schema); for built-in kinds, what decoding into the Kubernetes type (k8s-openapi)
//! drops, checked only when the client sent a directive (kubectl always does); for every kind,
//! unknown keys of `metadata`. Duplicate JSON keys are not detected (the body is already
//! decoded, last key wins), nor are wrong value types.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::ApiError;
use super::resources::{Registry, ResourceInfo};

/// The `fieldValidation` directive of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently (pruning, as before this parameter existed). The default
    /// for in-process callers.
    #[default]
    Ignore,
    /// Drop unknown fields and say so in `Warning` headers (kube-apiserver's default when the
    /// parameter is absent).
    Warn,
    /// Refuse the write with 400 naming every unknown field.
    Strict,
    /// No directive sent: `Warn`, except that built-in kinds' fields other than `metadata` are
    /// not checked. That check is a typed decode and re-encode of the object; skipping it keeps
    /// the writes of clients that never ask (kube-rs, tephra's controllers) as cheap as before.
    Unset,
}

impl FieldValidation {
    /// From the query parameter; absent or empty means [`FieldValidation::Unset`] (kube-apiserver:
    /// `Warn`).
    pub fn from_query(v: Option<&str>) -> Result<Self, ApiError> {
        match v {
            None | Some("") => Ok(FieldValidation::Unset),
            Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::BadRequest(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// Warnings for the `Warning` response headers of one request, collected while the write runs
/// (kube-apiserver's warning recorder). Cloning shares the sink.
#[derive(Clone, Debug, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Adds a warning unless already present (a retried write computes the object again).
    pub fn add(&self, w: String) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !v.contains(&w) {
            v.push(w);
        }
    }

    /// The warnings so far, in order.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// A `Warning` header value: `299 - "text"` with quotes and backslashes escaped.
pub fn warning_header(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("299 - \"{escaped}\"")
}

/// `ObjectMeta` fields: anything else under `metadata` is an unknown field.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The unknown fields of `obj` (as written to `version` of `res`), as kube-apiserver names
/// them (`spec.tasks[0].foo`): unknown `metadata` keys; for custom resources the fields the
/// structural schema would prune; for built-in kinds when `builtin` is set, the fields the
/// Kubernetes type (k8s-openapi) does not have. `null` values are ignored (a merge patch
/// deletes with them).
pub fn unknown_fields(
    res: &ResourceInfo,
    version: &str,
    obj: &Value,
    builtin: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(meta) = obj.get("metadata").and_then(Value::as_object) {
        for (k, v) in meta {
            if !v.is_null() && !OBJECT_META_FIELDS.contains(&k.as_str()) {
                out.push(format!("metadata.{k}"));
            }
        }
    }
    if let Some(schema) = super::schema::of(res, version) {
        out.extend(super::schema::prune::unknown_fields(obj, schema));
    } else if builtin
        && !res.is_custom()
        && let Some(typed) = builtin_round_trip(res, obj)
        && let (Some(sent), Some(kept)) = (obj.as_object(), typed.as_object())
    {
        for (k, v) in sent {
            if k != "metadata" {
                dropped(v, kept.get(k), k, &mut out);
            }
        }
    }
    out
}

/// The fields of `sent` that are missing from `kept` (its typed re-encoding).
fn dropped(sent: &Value, kept: Option<&Value>, path: &str, out: &mut Vec<String>) {
    if sent.is_null() {
        return;
    }
    let Some(kept) = kept else {
        out.push(path.to_string());
        return;
    };
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            for (key, v) in s {
                dropped(v, k.get(key), &super::schema::walk::join(path, key), out);
            }
        }
        (Value::Array(s), Value::Array(k)) => {
            for (i, v) in s.iter().enumerate() {
                dropped(v, k.get(i), &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// `obj` decoded as its Kubernetes type and encoded again: unknown fields are gone. `None`
/// for kinds not listed and for objects that do not decode (wrong types are left to the rest
/// of the write path, which has always accepted them).
fn builtin_round_trip(res: &ResourceInfo, obj: &Value) -> Option<Value> {
    super::builtin_kinds::round_trip(&res.group, &res.kind, obj)
}

/// Applies a directive to a write's object: `Strict` refuses unknown fields with 400
/// (`strict decoding error: unknown field "spec.foo"`, prefixed as kube-apiserver does for a
/// decoded body), `Warn` records one warning per field, `Ignore` does nothing (pruning later
/// drops custom resources' unknown fields either way). For a patch, `patched_from` is the
/// stored object: only fields the patch brought in count (a built-in object stored by a client
/// that sent no directive may hold unknown fields, and must stay patchable).
pub fn enforce(
    mode: FieldValidation,
    res: &ResourceInfo,
    version: &str,
    obj: &Value,
    warnings: &Warnings,
    patched_from: Option<&Value>,
) -> Result<(), ApiError> {
    if mode == FieldValidation::Ignore {
        return Ok(());
    }
    let builtin = mode != FieldValidation::Unset;
    let mut unknown = unknown_fields(res, version, obj, builtin);
    if let Some(old) = patched_from
        && !unknown.is_empty()
    {
        let before = unknown_fields(res, version, old, builtin);
        unknown.retain(|f| !before.contains(f));
    }
    if unknown.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    if mode == FieldValidation::Strict {
        let prefix = if patched_from.is_none() {
            format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: ",
                kind = res.kind
            )
        } else {
            String::new()
        };
        return Err(ApiError::BadRequest(format!(
            "{prefix}strict decoding error: {}",
            list.join(", ")
        )));
    }
    for w in list {
        warnings.add(w);
    }
    Ok(())
}

/// The key of a group-version in `/openapi/v3`: `api/v1` or `apis/GROUP/VERSION`.
pub fn group_version_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn served_group_versions(reg: &Registry) -> BTreeSet<(String, String)> {
    reg.all()
        .iter()
        .flat_map(|r| r.versions.iter().map(|v| (r.group.clone(), v.clone())))
        .collect()
}

/// The resources served at a group-version.
fn served_at(reg: &Registry, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
    reg.all()
        .into_iter()
        .filter(|r| r.group == group && r.versions.iter().any(|v| v == version))
        .collect()
}

/// The `hash` query parameter (cache busting: a new or changed CRD changes it). The document
/// is a pure function of the resources served at its group-version (and of this build), so
/// those are hashed instead of building every document for the root.
fn fingerprint(version: &str, resources: &[Arc<ResourceInfo>]) -> String {
    let mut h = fnv::FnvHasher::default();
    h.write(env!("CARGO_PKG_VERSION").as_bytes());
    h.write(version.as_bytes());
    for r in resources {
        h.write(format!("{r:?}").as_bytes());
    }
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: every served group-version and the URL of its document.
pub fn root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (g, v) in served_group_versions(reg) {
        let key = group_version_key(&g, &v);
        let hash = fingerprint(&v, &served_at(reg, &g, &v));
        paths.insert(
            key.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    json!({ "paths": paths })
}

/// `/openapi/v3/KEY` (`api/v1`, `apis/GROUP/VERSION`), if that group-version is served. A
/// document is built once per set of served resources (the fingerprint of its URL) and then
/// answered from a cache: `api/v1` with every built-in schema is large.
pub fn group_version(reg: &Registry, key: &str) -> Option<Value> {
    static CACHE: Mutex<BTreeMap<String, (String, Arc<Value>)>> = Mutex::new(BTreeMap::new());
    let key = key.trim_matches('/');
    let (group, version) = match key.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return None,
    };
    let resources = served_at(reg, &group, &version);
    if resources.is_empty() {
        return None;
    }
    let print = fingerprint(&version, &resources);
    if let Some((p, doc)) = CACHE.lock().unwrap_or_else(|e| e.into_inner()).get(key)
        && *p == print
    {
        return Some((**doc).clone());
    }
    let doc = Arc::new(build_group_version(reg, key)?);
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key.to_string(), (print, doc.clone()));
    Some((*doc).clone())
}

fn build_group_version(reg: &Registry, key: &str) -> Option<Value> {
    let key = key.trim_matches('/');
    let (group, version) = match key.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return None,
    };
    let resources = served_at(reg, &group, &version);
    if resources.is_empty() {
        return None;
    }
    let mut paths = BTreeMap::new();
    let mut schemas = BTreeMap::new();
    schemas.insert(STATUS_SCHEMA.to_string(), meta_schema("Status"));
    let builtin = super::builtin_kinds::schemas();
    for r in &resources {
        resource_paths(r, &version, &mut paths);
        if !r.is_custom()
            && let Some(name) = builtin.name_of(&r.group, &r.kind)
        {
            for dep in builtin.closure(name) {
                if let Some(s) = builtin.definitions.get(&dep) {
                    schemas.insert(dep, s.clone());
                }
            }
        } else {
            schemas.insert(schema_name(r, &version), kind_schema(r, &version));
        }
        schemas.insert(
            format!("{}List", schema_name(r, &version)),
            list_schema(r, &version),
        );
        if r.scale.is_some() {
            schemas.insert(SCALE_SCHEMA.to_string(), scale_schema());
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": super::discovery::version()["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

const STATUS_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const SCALE_SCHEMA: &str = "io.k8s.api.autoscaling.v1.Scale";

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// Component name: `io.k8s.api.apps.v1.Deployment` for built-ins, the reversed group for
/// custom resources (`sh.volcano.batch.v1alpha1.Job`), as kube-apiserver names them.
fn schema_name(r: &ResourceInfo, version: &str) -> String {
    if !r.is_custom()
        && let Some(name) = super::builtin_kinds::schemas().name_of(&r.group, &r.kind)
    {
        return name.to_string();
    }
    if r.is_custom() {
        let rev: Vec<&str> = r.group.rsplit('.').collect();
        format!("{}.{version}.{}", rev.join("."), r.kind)
    } else {
        let short = match r.group.as_str() {
            "" => "core",
            g => g.split('.').next().unwrap_or(g),
        };
        format!("io.k8s.api.{short}.{version}.{}", r.kind)
    }
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn meta_schema(kind: &str) -> Value {
    json!({
        "type": "object",
        "description": format!("{kind} (meta.k8s.io)"),
        "x-kubernetes-group-version-kind": [gvk("", "v1", kind)],
    })
}

fn scale_schema() -> Value {
    json!({
        "type": "object",
        "description": "Scale represents a scaling request for a resource.",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {"replicas": {"type": "integer", "format": "int32"}}},
            "status": {"type": "object", "properties": {
                "replicas": {"type": "integer", "format": "int32"}, "selector": {"type": "string"}}},
        },
        "x-kubernetes-group-version-kind": [gvk("autoscaling", "v1", "Scale")],
    })
}

/// A custom resource's `openAPIV3Schema` (with `apiVersion`, `kind`, `metadata` declared as
/// kube-apiserver adds them); a placeholder object for built-in kinds.
fn kind_schema(r: &ResourceInfo, version: &str) -> Value {
    let mut s = match r.crd.as_ref().and_then(|c| c.schema(version)) {
        Some(schema) => {
            let mut s = schema.clone();
            if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
                for (k, v) in [
                    ("apiVersion", json!({"type": "string"})),
                    ("kind", json!({"type": "string"})),
                    ("metadata", json!({"type": "object"})),
                ] {
                    props.entry(k).or_insert(v);
                }
            }
            s
        }
        None if r.is_custom() => {
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        }
        None => json!({
            "type": "object",
            "description": format!("{} (the tephra embedded API publishes no field schema for built-in kinds)", r.kind),
        }),
    };
    if let Some(o) = s.as_object_mut() {
        o.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([gvk(&r.group, version, &r.kind)]),
        );
    }
    s
}

fn list_schema(r: &ResourceInfo, version: &str) -> Value {
    json!({
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "items": {"type": "array", "items": reference(&schema_name(r, version))},
        },
        "x-kubernetes-group-version-kind": [gvk(&r.group, version, &format!("{}List", r.kind))],
    })
}

fn query_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

/// The parameters of a write: the ones kubectl looks for (`fieldValidation`) among them.
fn write_params(patch: bool) -> Vec<Value> {
    let mut p = vec![
        query_param(
            "dryRun",
            "When present, indicates that modifications should not be persisted. Valid value: All",
        ),
        query_param(
            "fieldManager",
            "A name associated with the actor or entity that is making these changes.",
        ),
        query_param(
            "fieldValidation",
            "How the server handles unknown fields in the request: Ignore (drop them), Warn (drop them and return a Warning header per field; the default), Strict (fail the request with BadRequest).",
        ),
    ];
    if patch {
        p.push(json!({"name": "force", "in": "query", "description": "Force is going to \"force\" Apply requests.", "schema": {"type": "boolean", "uniqueItems": true}}));
    }
    p
}

fn content(schema: &Value, types: &[&str]) -> Value {
    let m: Map<String, Value> = types
        .iter()
        .map(|t| (t.to_string(), json!({"schema": schema})))
        .collect();
    Value::Object(m)
}

const RESPONSE_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// One operation. `body`: the request body schema and media types, if any.
fn operation(
    action: &str,
    id: String,
    gvk_v: &Value,
    params: Vec<Value>,
    body: Option<(&Value, &[&str])>,
    responses: &[(&str, &Value)],
) -> Value {
    let mut resp = Map::new();
    for (code, schema) in responses {
        resp.insert(
            code.to_string(),
            json!({"description": "OK", "content": content(schema, RESPONSE_TYPES)}),
        );
    }
    resp.insert("401".into(), json!({"description": "Unauthorized"}));
    let mut op = json!({
        "description": format!("{action} {}", gvk_v["kind"].as_str().unwrap_or_default()),
        "operationId": id,
        "responses": resp,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk_v,
    });
    if !params.is_empty() {
        op["parameters"] = json!(params);
    }
    if let Some((schema, types)) = body {
        op["requestBody"] = json!({"content": content(schema, types), "required": true});
    }
    op
}

/// The paths and operations of one resource at one version.
fn resource_paths(r: &ResourceInfo, version: &str, paths: &mut BTreeMap<String, Value>) {
    let prefix = format!("/{}", group_version_key(&r.group, version));
    let id = format!(
        "{}{}{}",
        r.group.split('.').next().unwrap_or_default(),
        version,
        r.kind
    );
    let this_gvk = gvk(&r.group, version, &r.kind);
    let obj = reference(&schema_name(r, version));
    let list = reference(&format!("{}List", schema_name(r, version)));
    let status = reference(STATUS_SCHEMA);
    // No strategic-merge-patch+json, not even for built-ins: see the module documentation.
    let patch_types: &[&str] = &[
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    let ns_param = path_param(
        "namespace",
        "object name and auth scope, such as for teams and projects",
    );
    let name_param = path_param("name", &format!("name of the {}", r.kind));
    let (collection, scope_params) = if r.namespaced {
        (
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural),
            vec![ns_param],
        )
    } else {
        (format!("{prefix}/{}", r.plural), vec![])
    };
    let list_params = vec![
        query_param(
            "labelSelector",
            "A selector to restrict the list of returned objects by their labels.",
        ),
        query_param(
            "fieldSelector",
            "A selector to restrict the list of returned objects by their fields.",
        ),
        query_param(
            "limit",
            "maximum number of responses to return for a list call.",
        ),
        query_param(
            "continue",
            "The continue option should be set when retrieving more results from the server.",
        ),
        query_param(
            "resourceVersion",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
        ),
        query_param("watch", "Watch for changes to the described resources."),
    ];
    paths.insert(
        collection.clone(),
        json!({
            "get": operation("list", format!("list{id}"), &this_gvk, list_params.clone(), None, &[("200", &list)]),
            "post": operation("post", format!("create{id}"), &this_gvk, write_params(false), Some((&obj, &["*/*"])), &[("200", &obj), ("201", &obj), ("202", &obj)]),
            "delete": operation("deletecollection", format!("deletecollection{id}"), &this_gvk, list_params.clone(), None, &[("200", &status)]),
            "parameters": scope_params,
        }),
    );
    if r.namespaced {
        paths.insert(
            format!("{prefix}/{}", r.plural),
            json!({
                "get": operation("list", format!("list{id}ForAllNamespaces"), &this_gvk, list_params, None, &[("200", &list)]),
            }),
        );
    }
    let item_params = item_params(r, &name_param);
    let item = format!("{collection}/{{name}}");
    paths.insert(
        item.clone(),
        json!({
            "get": operation("get", format!("read{id}"), &this_gvk, vec![], None, &[("200", &obj)]),
            "put": operation("put", format!("replace{id}"), &this_gvk, write_params(false), Some((&obj, &["*/*"])), &[("200", &obj), ("201", &obj)]),
            "patch": operation("patch", format!("patch{id}"), &this_gvk, write_params(true), Some((&json!({"type": "object"}), patch_types)), &[("200", &obj), ("201", &obj)]),
            "delete": operation("delete", format!("delete{id}"), &this_gvk, vec![], None, &[("200", &obj), ("202", &obj)]),
            "parameters": item_params.clone(),
        }),
    );
    if r.status_subresource {
        paths.insert(
            format!("{item}/status"),
            json!({
                "get": operation("get", format!("read{id}Status"), &this_gvk, vec![], None, &[("200", &obj)]),
                "put": operation("put", format!("replace{id}Status"), &this_gvk, write_params(false), Some((&obj, &["*/*"])), &[("200", &obj), ("201", &obj)]),
                "patch": operation("patch", format!("patch{id}Status"), &this_gvk, write_params(true), Some((&json!({"type": "object"}), patch_types)), &[("200", &obj), ("201", &obj)]),
                "parameters": item_params.clone(),
            }),
        );
    }
    if r.scale.is_some() {
        let scale_gvk = gvk("autoscaling", "v1", "Scale");
        let scale = reference(SCALE_SCHEMA);
        paths.insert(
            format!("{item}/scale"),
            json!({
                "get": operation("get", format!("read{id}Scale"), &scale_gvk, vec![], None, &[("200", &scale)]),
                "put": operation("put", format!("replace{id}Scale"), &scale_gvk, write_params(false), Some((&scale, &["*/*"])), &[("200", &scale), ("201", &scale)]),
                "patch": operation("patch", format!("patch{id}Scale"), &scale_gvk, write_params(true), Some((&json!({"type": "object"}), patch_types)), &[("200", &scale), ("201", &scale)]),
                "parameters": item_params,
            }),
        );
    }
}

fn item_params(r: &ResourceInfo, name_param: &Value) -> Vec<Value> {
    let mut p = vec![name_param.clone()];
    if r.namespaced {
        p.push(path_param(
            "namespace",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    p
}

/// Whether an `Accept` header admits a JSON answer (kubectl asks for JSON; a client that wants
/// only the protobuf form of the documents gets 406).
pub fn accepts_json(accept: &str) -> bool {
    let accept = accept.trim();
    accept.is_empty()
        || accept.split(',').any(|part| {
            let media = part.split(';').next().unwrap_or_default().trim();
            matches!(media, "*/*" | "application/*" | "application/json")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd;

    fn vcjob_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "jobs.batch.volcano.sh"},
            "spec": {
                "group": "batch.volcano.sh", "scope": "Namespaced",
                "names": {"plural": "jobs", "singular": "job", "kind": "Job"},
                "versions": [{
                    "name": "v1alpha1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "queue": {"type": "string"},
                            "tasks": {"type": "array", "items": {"type": "object", "properties": {
                                "name": {"type": "string"},
                                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                            }}},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                        }},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }}}
                }]
            }
        })
    }

    fn registry_with_vcjob() -> Registry {
        let reg = Registry::new();
        reg.register(crd::resource_from_crd(&vcjob_crd()).unwrap());
        reg
    }

    /// kubectl's test: the PATCH operation of the kind (by `x-kubernetes-group-version-kind`)
    /// lists a `fieldValidation` parameter.
    fn patch_supports_field_validation(
        doc: &Value,
        group: &str,
        version: &str,
        kind: &str,
    ) -> bool {
        let want = gvk(group, version, kind);
        let patches: Vec<&Value> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|p| p.get("patch"))
            .filter(|op| op["x-kubernetes-group-version-kind"] == want)
            .collect();
        !patches.is_empty()
            && patches.iter().all(|op| {
                op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "fieldValidation" && p["in"] == "query")
            })
    }

    #[test]
    fn root_lists_every_served_group_version_with_a_document_url() {
        let reg = registry_with_vcjob();
        let root = root(&reg);
        let paths = root["paths"].as_object().unwrap();
        for key in [
            "api/v1",
            "apis/apps/v1",
            "apis/batch/v1",
            "apis/batch.volcano.sh/v1alpha1",
        ] {
            let url = paths[key]["serverRelativeURL"].as_str().unwrap();
            assert!(
                url.starts_with(&format!("/openapi/v3/{key}?hash=")),
                "{url}"
            );
        }
        assert!(!paths.contains_key("apis/batch.volcano.sh/v1"));
    }

    #[test]
    fn a_new_crd_appears_and_changes_nothing_else() {
        let reg = Registry::new();
        let before = root(&reg);
        assert!(
            before["paths"]
                .get("apis/batch.volcano.sh/v1alpha1")
                .is_none()
        );
        reg.register(crd::resource_from_crd(&vcjob_crd()).unwrap());
        let after = root(&reg);
        assert!(
            after["paths"]
                .get("apis/batch.volcano.sh/v1alpha1")
                .is_some()
        );
        assert_eq!(
            before["paths"]["apis/apps/v1"], after["paths"]["apis/apps/v1"],
            "hash is stable"
        );
        let mut changed = vcjob_crd();
        changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["minAvailable"] = json!({"type": "integer"});
        reg.register(crd::resource_from_crd(&changed).unwrap());
        let changed_root = root(&reg);
        let key = "apis/batch.volcano.sh/v1alpha1";
        assert_ne!(
            after["paths"][key], changed_root["paths"][key],
            "a changed schema changes the document URL"
        );
    }

    #[test]
    fn writes_of_builtin_and_custom_kinds_declare_field_validation() {
        let reg = registry_with_vcjob();
        let core = group_version(&reg, "api/v1").unwrap();
        assert_eq!(core["openapi"], "3.0.0");
        for kind in ["ConfigMap", "Pod", "Namespace", "Node"] {
            assert!(
                patch_supports_field_validation(&core, "", "v1", kind),
                "{kind}"
            );
        }
        let apps = group_version(&reg, "apis/apps/v1").unwrap();
        assert!(patch_supports_field_validation(
            &apps,
            "apps",
            "v1",
            "Deployment"
        ));
        assert!(patch_supports_field_validation(
            &apps,
            "autoscaling",
            "v1",
            "Scale"
        ));
        let vc = group_version(&reg, "apis/batch.volcano.sh/v1alpha1").unwrap();
        assert!(patch_supports_field_validation(
            &vc,
            "batch.volcano.sh",
            "v1alpha1",
            "Job"
        ));
        let post =
            &vc["paths"]["/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs"]["post"];
        assert_eq!(post["x-kubernetes-action"], "post");
        assert!(
            post["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(vc["paths"]["/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs/{name}/status"]["patch"].is_object());
        assert!(group_version(&reg, "apis/batch.volcano.sh/v9").is_none());
        assert!(group_version(&reg, "nonsense").is_none());
    }

    #[test]
    fn custom_kinds_publish_their_crd_schema_and_builtins_no_strategic_merge() {
        let reg = registry_with_vcjob();
        let vc = group_version(&reg, "apis/batch.volcano.sh/v1alpha1").unwrap();
        let s = &vc["components"]["schemas"]["sh.volcano.batch.v1alpha1.Job"];
        assert_eq!(
            s["properties"]["spec"]["properties"]["queue"]["type"],
            "string"
        );
        assert_eq!(s["properties"]["kind"]["type"], "string");
        assert_eq!(s["x-kubernetes-group-version-kind"][0]["kind"], "Job");
        let core = group_version(&reg, "api/v1").unwrap();
        let patch = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        let types = patch["requestBody"]["content"].as_object().unwrap();
        assert!(types.contains_key("application/merge-patch+json"));
        assert!(!types.contains_key("application/strategic-merge-patch+json"));
        assert!(core["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object());
    }

    #[test]
    fn crd_field_descriptions_reach_the_document_kubectl_explain_reads() {
        let reg = Registry::new();
        let crd: Value = serde_saphyr::from_str(include_str!(
            "../../../manifests/crds/batch.volcano.sh_jobs.yaml"
        ))
        .unwrap();
        reg.register(crd::resource_from_crd(&crd).unwrap());
        let vc = group_version(&reg, "apis/batch.volcano.sh/v1alpha1").unwrap();
        let spec =
            &vc["components"]["schemas"]["sh.volcano.batch.v1alpha1.Job"]["properties"]["spec"];
        let described = |v: &Value| v["description"].as_str().unwrap_or_default().to_string();
        assert!(
            described(&spec["properties"]["minAvailable"]).starts_with("Gang size: the job starts"),
            "{}",
            spec["properties"]["minAvailable"]
        );
        assert_eq!(
            described(&spec["properties"]["tasks"]["items"]["properties"]["replicas"]),
            "Number of pods of this task."
        );
    }

    #[test]
    fn every_reference_resolves() {
        let reg = registry_with_vcjob();
        for (g, v) in served_group_versions(&reg) {
            let doc = group_version(&reg, &group_version_key(&g, &v)).unwrap();
            let text = doc.to_string();
            for part in text.split("\"#/components/schemas/").skip(1) {
                let name = part.split('"').next().unwrap();
                assert!(
                    doc["components"]["schemas"].get(name).is_some(),
                    "{g}/{v}: {name}"
                );
            }
        }
    }

    #[test]
    fn unknown_fields_are_exactly_what_pruning_drops() {
        let reg = registry_with_vcjob();
        let res = reg.lookup("batch.volcano.sh", "v1alpha1", "jobs").unwrap();
        let job = json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "bogusMeta": 1},
            "bogus": 1,
            "spec": {"queue": "q", "foo": true, "gone": null, "labels": {"a": "b"},
                     "tasks": [{"name": "t"}, {"name": "u", "extra": 1, "template": {"anything": 1}}]},
            "status": {"whatever": 1}
        });
        let found = unknown_fields(&res, "v1alpha1", &job, true);
        assert_eq!(
            found,
            [
                "metadata.bogusMeta",
                "bogus",
                "spec.foo",
                "spec.tasks[1].extra"
            ]
        );
        let mut pruned = job.clone();
        crate::schema::prune::prune(&mut pruned, crate::schema::of(&res, "v1alpha1").unwrap());
        assert!(pruned.get("bogus").is_none() && pruned["spec"].get("foo").is_none());
        assert!(pruned["spec"]["tasks"][1].get("extra").is_none());
        assert!(
            unknown_fields(&res, "v1alpha1", &pruned, true)
                .iter()
                .all(|f| f.starts_with("metadata."))
        );
    }

    #[test]
    fn directives_refuse_warn_or_ignore() {
        let reg = registry_with_vcjob();
        let res = reg.lookup("batch.volcano.sh", "v1alpha1", "jobs").unwrap();
        let job = json!({"metadata": {"name": "j"}, "spec": {"foo": 1, "bar": 2}});
        let w = Warnings::default();
        let err = enforce(FieldValidation::Strict, &res, "v1alpha1", &job, &w, None).unwrap_err();
        assert_eq!(err.code(), 400);
        assert_eq!(
            err.to_string(),
            "Job in version \"v1alpha1\" cannot be handled as a Job: strict decoding error: unknown field \"spec.bar\", unknown field \"spec.foo\""
        );
        let err = enforce(
            FieldValidation::Strict,
            &res,
            "v1alpha1",
            &job,
            &w,
            Some(&json!({})),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("strict decoding error: unknown field")
        );
        enforce(FieldValidation::Warn, &res, "v1alpha1", &job, &w, None).unwrap();
        enforce(FieldValidation::Warn, &res, "v1alpha1", &job, &w, None).unwrap();
        assert_eq!(
            w.take(),
            ["unknown field \"spec.bar\"", "unknown field \"spec.foo\""]
        );
        enforce(FieldValidation::Ignore, &res, "v1alpha1", &job, &w, None).unwrap();
        assert!(w.take().is_empty());
        let clean = json!({"metadata": {"name": "j"}, "spec": {"queue": "q"}});
        enforce(FieldValidation::Strict, &res, "v1alpha1", &clean, &w, None).unwrap();
        let cm = reg.lookup("", "v1", "configmaps").unwrap();
        let bad_meta = json!({"metadata": {"name": "c", "lables": {}}});
        assert!(enforce(FieldValidation::Strict, &cm, "v1", &bad_meta, &w, None).is_err());
    }

    #[test]
    fn query_values_and_headers_read_like_kube_apiserver() {
        assert_eq!(
            FieldValidation::from_query(None).unwrap(),
            FieldValidation::Unset
        );
        assert_eq!(
            FieldValidation::from_query(Some("Warn")).unwrap(),
            FieldValidation::Warn
        );
        assert_eq!(
            FieldValidation::from_query(Some("Strict")).unwrap(),
            FieldValidation::Strict
        );
        assert_eq!(
            FieldValidation::from_query(Some("Ignore")).unwrap(),
            FieldValidation::Ignore
        );
        assert_eq!(
            FieldValidation::from_query(Some("strict"))
                .unwrap_err()
                .code(),
            400
        );
        assert_eq!(
            warning_header("unknown field \"spec.foo\""),
            r#"299 - "unknown field \"spec.foo\"""#
        );
        assert!(accepts_json("application/json, */*"));
        assert!(accepts_json(""));
        assert!(accepts_json(
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf, application/json;q=0.9"
        ));
        assert!(!accepts_json(
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
        ));
    }

    #[test]
    fn builtin_kinds_report_fields_their_type_lacks_only_when_asked() {
        let reg = Registry::new();
        let deploy = reg.lookup("apps", "v1", "deployments").unwrap();
        let d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 2, "replica": 3, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
                         {"name": "c", "image": "i", "imagePullPolicy": null,
                          "resources": {"requests": {"cpu": "1"}}, "port": 80}]}}}
        });
        assert_eq!(
            unknown_fields(&deploy, "v1", &d, true),
            ["spec.replica", "spec.template.spec.containers[0].port"]
        );
        let w = Warnings::default();
        assert!(enforce(FieldValidation::Strict, &deploy, "v1", &d, &w, None).is_err());
        enforce(FieldValidation::Unset, &deploy, "v1", &d, &w, None).unwrap();
        assert!(
            w.take().is_empty(),
            "no directive: built-in fields are not checked"
        );
        let not_decodable = json!({"kind": "Deployment", "spec": {"replicas": "two", "x": 1}});
        assert!(unknown_fields(&deploy, "v1", &not_decodable, true).is_empty());
    }

    #[test]
    fn a_patch_is_refused_only_for_the_unknown_fields_it_brings() {
        let reg = Registry::new();
        let cm = reg.lookup("", "v1", "configmaps").unwrap();
        let stored = json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "junk": 1});
        let w = Warnings::default();
        let relabelled = json!({"kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}}, "junk": 1});
        enforce(
            FieldValidation::Strict,
            &cm,
            "v1",
            &relabelled,
            &w,
            Some(&stored),
        )
        .unwrap();
        let more = json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "junk": 1, "dta": {}});
        let err =
            enforce(FieldValidation::Strict, &cm, "v1", &more, &w, Some(&stored)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "strict decoding error: unknown field \"dta\""
        );
    }

    #[test]
    fn the_projects_own_manifests_have_no_unknown_fields() {
        let reg = Registry::new();
        let files = [
            include_str!("../../../manifests/deployment.yaml"),
            include_str!("../../../manifests/namespace.yaml"),
            include_str!("../../../manifests/rbac.yaml"),
            include_str!("../../../manifests/webhooks.yaml"),
            include_str!("../../../manifests/crds/batch.volcano.sh_jobs.yaml"),
            include_str!("../../../manifests/crds/bus.volcano.sh_commands.yaml"),
            include_str!("../../../manifests/crds/scheduling.volcano.sh_podgroups.yaml"),
            include_str!("../../../manifests/crds/scheduling.volcano.sh_queues.yaml"),
        ];
        let mut checked = 0;
        for text in files {
            let docs: Vec<Value> = serde_saphyr::from_multiple(text).unwrap();
            for doc in docs.iter().filter(|d| d.is_object()) {
                let av = doc["apiVersion"].as_str().unwrap();
                let res = reg.by_kind(av, doc["kind"].as_str().unwrap()).unwrap();
                let version = crate::resources::split_api_version(av).1;
                assert_eq!(
                    unknown_fields(&res, version, doc, true),
                    Vec::<String>::new(),
                    "{}",
                    doc["metadata"]["name"]
                );
                checked += 1;
            }
        }
        assert!(checked >= 8, "{checked}");
    }

    #[tokio::test]
    async fn over_http_documents_are_served_and_writes_honour_the_directive() {
        use axum::body::Body;
        use axum::http::{Request, StatusCode};
        use tower::ServiceExt;
        let api = crate::ApiServer::new(crate::EmbeddedOptions {
            nodes: 0,
            sim_kubelet: false,
            ..Default::default()
        });
        let call = |method: &str, uri: &str, accept: &str, body: Option<Value>| {
            let api = api.clone();
            let req = Request::builder()
                .method(method)
                .uri(uri)
                .header("accept", accept)
                .header("content-type", "application/json")
                .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
                .unwrap();
            async move {
                let resp = crate::router(api).oneshot(req).await.unwrap();
                let status = resp.status();
                let warnings: Vec<String> = resp
                    .headers()
                    .get_all("warning")
                    .iter()
                    .map(|v| v.to_str().unwrap().to_string())
                    .collect();
                let body = axum::body::to_bytes(resp.into_body(), 1 << 24)
                    .await
                    .unwrap();
                (
                    status,
                    warnings,
                    serde_json::from_slice::<Value>(&body).unwrap(),
                )
            }
        };
        let (st, _, root) = call("GET", "/openapi/v3", "application/json, */*", None).await;
        assert_eq!(st, StatusCode::OK);
        let url = root["paths"]["api/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_string();
        let (st, _, doc) = call("GET", &url, "application/json", None).await;
        assert_eq!(st, StatusCode::OK);
        assert!(
            doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"].is_object()
        );
        let pb = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf";
        assert_eq!(
            call("GET", &url, pb, None).await.0,
            StatusCode::NOT_ACCEPTABLE
        );
        assert_eq!(
            call("GET", "/openapi/v3/apis/nope/v1", "application/json", None)
                .await
                .0,
            StatusCode::NOT_FOUND
        );

        api.seed(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            vcjob_crd(),
        )
        .unwrap();
        let (_, _, root) = call("GET", "/openapi/v3", "application/json", None).await;
        assert!(
            root["paths"]["apis/batch.volcano.sh/v1alpha1"].is_object(),
            "a new CRD is published"
        );
        let jobs = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs";
        let job = |name: &str| {
            json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name}, "spec": {"queue": "q", "foo": 1}})
        };
        let (st, _, status) = call(
            "POST",
            &format!("{jobs}?fieldValidation=Strict"),
            "application/json",
            Some(job("a")),
        )
        .await;
        assert_eq!(st, StatusCode::BAD_REQUEST);
        assert_eq!(status["reason"], "BadRequest");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .ends_with("strict decoding error: unknown field \"spec.foo\"")
        );
        assert_eq!(api.count("batch.volcano.sh", "jobs"), 0);
        let (st, warnings, created) = call(
            "POST",
            &format!("{jobs}?fieldValidation=Warn"),
            "application/json",
            Some(job("b")),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED);
        assert_eq!(warnings, [r#"299 - "unknown field \"spec.foo\"""#]);
        assert!(created["spec"].get("foo").is_none());
        let (st, warnings, _) = call(
            "POST",
            &format!("{jobs}?fieldValidation=Ignore"),
            "application/json",
            Some(job("c")),
        )
        .await;
        assert_eq!((st, warnings.len()), (StatusCode::CREATED, 0));
        let (st, _, _) = call(
            "POST",
            &format!("{jobs}?fieldValidation=Loud"),
            "application/json",
            Some(job("d")),
        )
        .await;
        assert_eq!(st, StatusCode::BAD_REQUEST);
    }
}
