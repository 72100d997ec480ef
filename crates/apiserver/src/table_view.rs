//! Objects as `meta.k8s.io/v1` Tables, the form kubectl asks for (`Accept:
//! application/json;as=Table;v=v1;g=meta.k8s.io`) to print `kubectl get`: a list or one object
//! is one Table; in a watch, every event's object is a Table of one row, as kube-apiserver's
//! watch encoder sends them. Pure code.
//!
//! As kube-apiserver's `asTable` does, each row's `object` follows `includeObject`: `Metadata`
//! (the default) a `PartialObjectMetadata`, `Object` the whole object (kubectl asks for it to
//! `--sort-by` a field), `None` null. Only the first Table of a watch carries
//! `columnDefinitions`; later ones have `null` there (kube-apiserver encodes every event after
//! the first with `NoHeaders`), and kubectl keeps printing the first event's columns. The
//! columns are kube-apiserver's printers for built-in kinds ([`super::tables`]) and, for custom
//! resources, Name, the CRD's `additionalPrinterColumns` and Age.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::resources::ResourceInfo;
use super::{ApiError, human_age, tables};

/// What each row's `object` holds (`?includeObject=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// A `meta.k8s.io/v1` `PartialObjectMetadata` (absent or empty parameter, or `Metadata`).
    #[default]
    Metadata,
    /// The whole object, at the requested version.
    Object,
    /// No object (`"object": null`).
    None,
}

impl IncludeObject {
    /// From the query parameter; any other value is kube-apiserver's 400.
    pub fn from_query(v: Option<&str>) -> Result<Self, ApiError> {
        match v.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "Object" => Ok(IncludeObject::Object),
            "None" => Ok(IncludeObject::None),
            other => Err(ApiError::BadRequest(format!(
                "Unable to convert to Table as requested: includeObject: Invalid value: {other:?}: must be 'Metadata', 'Object', 'None', or empty"
            ))),
        }
    }
}

/// How objects are turned into Tables (kube-apiserver's `TableOptions`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableOptions {
    /// What each row's `object` holds.
    pub include: IncludeObject,
    /// Leave `columnDefinitions` null (every watch event after the first).
    pub no_headers: bool,
}

impl TableOptions {
    /// The options of a request's query (`includeObject`).
    pub fn from_query(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        Ok(TableOptions {
            include: IncludeObject::from_query(q.get("includeObject").map(String::as_str))?,
            no_headers: false,
        })
    }
}

/// Whether an `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// A Table of `items` (objects as stored) served at `version`, with `metadata` as the Table's
/// list metadata (`resourceVersion`, `continue`, ...).
pub fn table(
    res: &ResourceInfo,
    version: &str,
    items: &[Value],
    metadata: Value,
    opts: &TableOptions,
) -> Value {
    let layout = Layout::of(res, version);
    let defs = if opts.no_headers {
        Value::Null
    } else {
        Value::Array(layout.definitions())
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    let rows: Vec<Value> = items
        .iter()
        .map(|v| {
            let age = v
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .and_then(|c| c.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .map(|c| human_age((now - c).get_seconds()))
                .unwrap_or_else(|| "<unknown>".into());
            json!({
                "cells": layout.cells(res, v, &age, now.as_second()),
                "object": row_object(res, version, v, opts.include),
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

/// A Table of one object, as a GET or a watch event answers it: its `resourceVersion` is the
/// object's.
pub fn object_table(res: &ResourceInfo, version: &str, v: &Value, opts: &TableOptions) -> Value {
    let rv = v
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or_else(|| json!(""));
    table(
        res,
        version,
        std::slice::from_ref(v),
        json!({"resourceVersion": rv}),
        opts,
    )
}

/// The columns of a resource: a built-in kind's printer, or a custom resource's printer
/// columns (those that are not its creation time, which the Age column prints).
enum Layout<'a> {
    Builtin(&'static [tables::Column]),
    Custom(Vec<&'a Value>),
}

impl<'a> Layout<'a> {
    fn of(res: &'a ResourceInfo, version: &str) -> Self {
        if let Some(cols) = tables::columns_for(&res.group, &res.kind, res.is_custom()) {
            return Layout::Builtin(cols);
        }
        let printer = res
            .crd
            .as_ref()
            .and_then(|c| c.versions.get(version))
            .map(|v| {
                v.printer_columns
                    .iter()
                    .filter(|c| {
                        c.get("jsonPath").and_then(Value::as_str)
                            != Some(".metadata.creationTimestamp")
                    })
                    .collect()
            })
            .unwrap_or_default();
        Layout::Custom(printer)
    }

    fn definitions(&self) -> Vec<Value> {
        match self {
            Layout::Builtin(cols) => cols
                .iter()
                .map(|c| {
                    json!({"name": c.name, "type": c.kind,
                           "format": if c.name == "Name" { "name" } else { "" },
                           "description": c.name, "priority": c.priority})
                })
                .collect(),
            Layout::Custom(printer) => {
                let mut defs = vec![
                    json!({"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}),
                ];
                defs.extend(printer.iter().map(|c| {
                    json!({
                        "name": c.get("name").cloned().unwrap_or(json!("")),
                        "type": c.get("type").cloned().unwrap_or(json!("string")),
                        "format": "",
                        "description": c.get("description").cloned().unwrap_or(json!("")),
                        "priority": c.get("priority").cloned().unwrap_or(json!(0)),
                    })
                }));
                defs.push(json!({"name": "Age", "type": "string", "format": "", "description": "age", "priority": 0}));
                defs
            }
        }
    }

    fn cells(&self, res: &ResourceInfo, v: &Value, age: &str, now: i64) -> Vec<Value> {
        match self {
            Layout::Builtin(_) => tables::cells(&res.group, &res.kind, v, age, now),
            Layout::Custom(printer) => {
                let name = v.pointer("/metadata/name").cloned().unwrap_or(json!(""));
                let mut cells = vec![name];
                for c in printer {
                    let path = c
                        .get("jsonPath")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let ptr = path.trim_start_matches('.').replace('.', "/");
                    cells.push(
                        v.pointer(&format!("/{ptr}"))
                            .cloned()
                            .unwrap_or(Value::Null),
                    );
                }
                cells.push(json!(age));
                cells
            }
        }
    }
}

/// A row's `object` per `includeObject`. As kube-apiserver does, the bookmark that ends a
/// watch's initial events keeps its metadata (its annotation says so) even with `None`.
fn row_object(res: &ResourceInfo, version: &str, v: &Value, include: IncludeObject) -> Value {
    let initial_end = v
        .pointer("/metadata/annotations/k8s.io~1initial-events-end")
        .is_some();
    match include {
        IncludeObject::Object => {
            let mut o = v.clone();
            if version != res.storage_version()
                && let Some(m) = o.as_object_mut()
            {
                m.insert("apiVersion".into(), json!(res.api_version(version)));
            }
            o
        }
        IncludeObject::None if !initial_end => Value::Null,
        IncludeObject::Metadata | IncludeObject::None => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": v.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn pods() -> std::sync::Arc<ResourceInfo> {
        Registry::new().lookup("", "v1", "pods").unwrap()
    }

    fn pod(name: &str, node: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "a", "resourceVersion": "7",
                            "creationTimestamp": "2024-01-01T00:00:00Z"},
               "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})
    }

    #[test]
    fn include_object_is_parsed_as_kube_apiserver_validates_it() {
        for (q, want) in [
            (None, IncludeObject::Metadata),
            (Some(""), IncludeObject::Metadata),
            (Some("Metadata"), IncludeObject::Metadata),
            (Some("Object"), IncludeObject::Object),
            (Some("None"), IncludeObject::None),
        ] {
            assert_eq!(IncludeObject::from_query(q).unwrap(), want, "{q:?}");
        }
        let e = IncludeObject::from_query(Some("All")).unwrap_err();
        assert_eq!(e.code(), 400);
        assert_eq!(
            e.to_string(),
            "Unable to convert to Table as requested: includeObject: Invalid value: \"All\": must be 'Metadata', 'Object', 'None', or empty"
        );
    }

    #[test]
    fn rows_carry_the_object_that_include_object_asks_for() {
        let res = pods();
        let items = [pod("p", "n1")];
        let meta = json!({"resourceVersion": "9"});
        let with = |include| {
            let opts = TableOptions {
                include,
                no_headers: false,
            };
            table(&res, "v1", &items, meta.clone(), &opts)["rows"][0]["object"].clone()
        };
        let partial = with(IncludeObject::Metadata);
        assert_eq!(partial["kind"], "PartialObjectMetadata");
        assert_eq!(partial["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(partial["metadata"]["name"], "p");
        assert!(partial.get("spec").is_none());
        let whole = with(IncludeObject::Object);
        assert_eq!(whole, items[0]);
        assert_eq!(whole["spec"]["nodeName"], "n1");
        assert_eq!(with(IncludeObject::None), Value::Null);
    }

    #[test]
    fn no_headers_leaves_column_definitions_null() {
        let res = pods();
        let v = pod("p", "n1");
        let first = object_table(&res, "v1", &v, &TableOptions::default());
        assert_eq!(first["kind"], "Table");
        assert_eq!(first["metadata"]["resourceVersion"], "7");
        assert_eq!(first["columnDefinitions"][0]["name"], "Name");
        let later = object_table(
            &res,
            "v1",
            &v,
            &TableOptions {
                no_headers: true,
                ..Default::default()
            },
        );
        assert_eq!(later["columnDefinitions"], Value::Null);
        assert_eq!(later["rows"][0]["cells"], first["rows"][0]["cells"]);
    }

    #[test]
    fn the_initial_events_end_bookmark_keeps_its_metadata_without_objects() {
        let res = pods();
        let bookmark = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"resourceVersion": "5", "annotations": {"k8s.io/initial-events-end": "true"}}});
        let opts = TableOptions {
            include: IncludeObject::None,
            no_headers: false,
        };
        let t = object_table(&res, "v1", &bookmark, &opts);
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "5");
    }
}
