//! `/openapi/v2`: the Swagger 2.0 document kubectl downloads for client-side validation when
//! server-side validation does not apply — a `kind: List` file, or a kind no OpenAPI v3
//! document lists. kubectl asks for it only as protobuf (gnostic's `openapi_v2.Document`), so
//! the document is encoded here by hand for the subset of Swagger a schema uses; JSON is
//! answered to clients that ask for it. Without this document kubectl refused such files with
//! "the server could not find the requested resource"; with it, a List applies, and an unknown
//! kind is answered as against a cluster ("ensure CRDs are installed first").
//!
//! The definitions are the built-in kinds' (see [`super::builtin_kinds`]) and each served custom
//! resource's CRD schema, with `x-kubernetes-group-version-kind`. No paths: kubectl reads only
//! the definitions. Built once per set of served resources, then cached.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::ApiServer;
use super::builtin_kinds::{schemas, to_v2};
use super::resources::{Registry, ResourceInfo};

/// The media type kubectl asks for.
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v2.0+protobuf";

/// The document as JSON (Swagger 2.0).
pub fn document(reg: &Registry) -> Value {
    let mut definitions: BTreeMap<String, Value> = schemas()
        .definitions
        .iter()
        .map(|(k, v)| (k.clone(), to_v2(v)))
        .collect();
    for r in reg.all() {
        if !r.is_custom() {
            continue;
        }
        for v in &r.versions {
            definitions.insert(custom_name(&r, v), custom_schema(&r, v));
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": super::discovery::version()["gitVersion"]},
        "paths": {},
        "definitions": definitions,
    })
}

/// `sh.volcano.batch.v1alpha1.Job`, as kube-apiserver names a custom kind.
fn custom_name(r: &ResourceInfo, version: &str) -> String {
    let rev: Vec<&str> = r.group.rsplit('.').collect();
    format!("{}.{version}.{}", rev.join("."), r.kind)
}

fn custom_schema(r: &ResourceInfo, version: &str) -> Value {
    let mut s = r
        .crd
        .as_ref()
        .and_then(|c| c.schema(version))
        .map(to_v2)
        .unwrap_or_else(|| json!({"type": "object"}));
    if let Some(o) = s.as_object_mut() {
        o.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": r.group, "version": version, "kind": r.kind}]),
        );
    }
    s
}

fn fingerprint(reg: &Registry) -> u64 {
    let mut h = fnv::FnvHasher::default();
    for r in reg.all() {
        h.write(format!("{r:?}").as_bytes());
    }
    h.finish()
}

/// The document encoded as protobuf and as JSON.
type Encoded = Arc<(Vec<u8>, Vec<u8>)>;

/// The document's encodings, cached per set of served resources (by fingerprint).
fn encoded(reg: &Registry) -> Encoded {
    static CACHE: Mutex<Option<(u64, Encoded)>> = Mutex::new(None);
    let print = fingerprint(reg);
    if let Some((p, doc)) = &*CACHE.lock().unwrap_or_else(|e| e.into_inner())
        && *p == print
    {
        return doc.clone();
    }
    let doc = document(reg);
    let both = Arc::new((encode_document(&doc), doc.to_string().into_bytes()));
    *CACHE.lock().unwrap_or_else(|e| e.into_inner()) = Some((print, both.clone()));
    both
}

/// `GET /openapi/v2`: protobuf when asked for (kubectl), else JSON.
pub async fn handler(State(api): State<Arc<ApiServer>>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let both = encoded(&api.registry);
    let (body, media) = if accept.contains("protobuf") && !accept.contains("application/json") {
        // As kube-apiserver answers it: Go's mime parser refuses the `@` of the asked type.
        (both.0.clone(), "application/octet-stream")
    } else {
        (both.1.clone(), "application/json")
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, media)], body).into_response()
}

// --- protobuf encoding of gnostic's openapi_v2 messages (field numbers from OpenAPIv2.proto)

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string_field(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes_field(out, field, s.as_bytes());
}

fn bool_field(out: &mut Vec<u8>, field: u32, b: bool) {
    if b {
        varint(out, u64::from(field) << 3);
        varint(out, 1);
    }
}

fn int_field(out: &mut Vec<u8>, field: u32, v: i64) {
    varint(out, u64::from(field) << 3);
    varint(out, v as u64);
}

fn double_field(out: &mut Vec<u8>, field: u32, v: f64) {
    varint(out, (u64::from(field) << 3) | 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// gnostic `Any` holding a value as YAML (JSON is YAML).
fn any(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(&mut out, 2, &v.to_string());
    out
}

/// gnostic `NamedAny`.
fn named_any(name: &str, v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(&mut out, 1, name);
    bytes_field(&mut out, 2, &any(v));
    out
}

/// gnostic `NamedSchema`.
fn named_schema(name: &str, s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(&mut out, 1, name);
    bytes_field(&mut out, 2, &encode_schema(s));
    out
}

/// gnostic `Schema`, from a Swagger 2.0 schema object.
pub fn encode_schema(s: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(m) = s.as_object() else {
        return out;
    };
    let str_of = |k: &str| m.get(k).and_then(Value::as_str);
    for (field, key) in [(1, "$ref"), (2, "format"), (3, "title"), (4, "description")] {
        if let Some(v) = str_of(key) {
            string_field(&mut out, field, v);
        }
    }
    if let Some(d) = m.get("default") {
        bytes_field(&mut out, 5, &any(d));
    }
    for (field, key) in [(6, "multipleOf"), (7, "maximum"), (9, "minimum")] {
        if let Some(v) = m.get(key).and_then(Value::as_f64) {
            double_field(&mut out, field, v);
        }
    }
    for (field, key) in [(8, "exclusiveMaximum"), (10, "exclusiveMinimum")] {
        bool_field(
            &mut out,
            field,
            m.get(key).and_then(Value::as_bool) == Some(true),
        );
    }
    for (field, key) in [(11, "maxLength"), (12, "minLength")] {
        if let Some(v) = m.get(key).and_then(Value::as_i64) {
            int_field(&mut out, field, v);
        }
    }
    if let Some(p) = str_of("pattern") {
        string_field(&mut out, 13, p);
    }
    for (field, key) in [(14, "maxItems"), (15, "minItems")] {
        if let Some(v) = m.get(key).and_then(Value::as_i64) {
            int_field(&mut out, field, v);
        }
    }
    bool_field(
        &mut out,
        16,
        m.get("uniqueItems").and_then(Value::as_bool) == Some(true),
    );
    for (field, key) in [(17, "maxProperties"), (18, "minProperties")] {
        if let Some(v) = m.get(key).and_then(Value::as_i64) {
            int_field(&mut out, field, v);
        }
    }
    for r in m
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(r) = r.as_str() {
            string_field(&mut out, 19, r);
        }
    }
    for e in m
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes_field(&mut out, 20, &any(e));
    }
    match m.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Vec::new();
            varint(&mut item, 2 << 3);
            varint(&mut item, u64::from(*b));
            bytes_field(&mut out, 21, &item);
        }
        Some(a @ Value::Object(_)) => {
            let mut item = Vec::new();
            bytes_field(&mut item, 1, &encode_schema(a));
            bytes_field(&mut out, 21, &item);
        }
        _ => {}
    }
    let types: Vec<&str> = match m.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if !types.is_empty() {
        let mut item = Vec::new();
        for t in types {
            string_field(&mut item, 1, t);
        }
        bytes_field(&mut out, 22, &item);
    }
    let items: Vec<&Value> = match m.get("items") {
        Some(i @ Value::Object(_)) => vec![i],
        Some(Value::Array(a)) => a.iter().collect(),
        _ => vec![],
    };
    if !items.is_empty() {
        let mut item = Vec::new();
        for i in items {
            bytes_field(&mut item, 1, &encode_schema(i));
        }
        bytes_field(&mut out, 23, &item);
    }
    for a in m
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        bytes_field(&mut out, 24, &encode_schema(a));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let mut item = Vec::new();
        for (k, v) in props {
            bytes_field(&mut item, 1, &named_schema(k, v));
        }
        bytes_field(&mut out, 25, &item);
    }
    bool_field(
        &mut out,
        27,
        m.get("readOnly").and_then(Value::as_bool) == Some(true),
    );
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        bytes_field(&mut out, 31, &named_any(k, v));
    }
    out
}

/// gnostic `Document`.
pub fn encode_document(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string_field(&mut out, 1, "2.0");
    let mut info = Vec::new();
    string_field(
        &mut info,
        1,
        doc["info"]["title"].as_str().unwrap_or("Kubernetes"),
    );
    string_field(
        &mut info,
        2,
        doc["info"]["version"].as_str().unwrap_or_default(),
    );
    bytes_field(&mut out, 2, &info);
    bytes_field(&mut out, 8, &[]);
    let mut defs = Vec::new();
    let empty = Map::new();
    for (name, s) in doc["definitions"].as_object().unwrap_or(&empty) {
        bytes_field(&mut defs, 1, &named_schema(name, s));
    }
    bytes_field(&mut out, 9, &defs);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_encode_as_protobuf_does() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        let s = encode_schema(&json!({"type": "string", "description": "d", "minimum": 1.0}));
        // description (4, "d"), minimum (9, double 1.0), type (22, TypeItem{value: "string"}).
        let mut want = vec![0x22, 1, b'd', 0x49];
        want.extend_from_slice(&1.0f64.to_le_bytes());
        want.extend_from_slice(&[0xb2, 0x01, 8, 0x0a, 6]);
        want.extend_from_slice(b"string");
        assert_eq!(s, want);
    }

    #[test]
    fn the_document_has_built_in_and_custom_kinds() {
        let reg = Registry::new();
        reg.register(
            super::super::crd::resource_from_crd(&json!({
                "metadata": {"name": "jobs.batch.volcano.sh"},
                "spec": {"group": "batch.volcano.sh", "scope": "Namespaced",
                    "names": {"plural": "jobs", "kind": "Job"},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object"}}}]}
            }))
            .unwrap(),
        );
        let doc = document(&reg);
        let defs = doc["definitions"].as_object().unwrap();
        assert_eq!(
            defs["io.k8s.api.core.v1.ConfigMap"]["x-kubernetes-group-version-kind"][0]["kind"],
            "ConfigMap"
        );
        assert_eq!(
            defs["sh.volcano.batch.v1alpha1.Job"]["x-kubernetes-group-version-kind"][0]["group"],
            "batch.volcano.sh"
        );
        let text = doc.to_string();
        assert!(!text.contains("#/components/schemas/"));
        for part in text.split("\"#/definitions/").skip(1) {
            let name = part.split('"').next().unwrap();
            assert!(defs.contains_key(name), "{name}");
        }
        let pb = encode_document(&doc);
        assert!(pb.len() > 10_000);
        assert!(Arc::ptr_eq(&encoded(&reg), &encoded(&reg)), "cached");
    }
}
