//! CustomResourceDefinitions: turning a stored CRD into a served resource, with each version's
//! structural schema compiled once (pruning, defaulting and validation of custom objects are
//! in [`super::schema`]). Pure code.

use std::sync::Arc;

use serde_json::{Value, json};

use super::resources::{CrdSchema, ResourceInfo, StatusOnCreate, VersionSchema};
use super::schema::{Compiled, Node};

/// Reads the served resource out of a CRD object.
pub fn resource_from_crd(crd: &Value) -> Result<ResourceInfo, String> {
    let spec = crd.get("spec").ok_or("spec: Required value")?;
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let group = s(spec, "group").ok_or("spec.group: Required value")?;
    let names = spec.get("names").ok_or("spec.names: Required value")?;
    let plural = s(names, "plural").ok_or("spec.names.plural: Required value")?;
    let kind = s(names, "kind").ok_or("spec.names.kind: Required value")?;
    let expected = format!("{plural}.{group}");
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name != expected {
        return Err(format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
        ));
    }
    let list = |v: &Value, k: &str| -> Vec<String> { super::string_list(v.get(k)) };
    let namespaced = match s(spec, "scope").as_deref() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        other => return Err(format!("spec.scope: Unsupported value: {other:?}")),
    };
    let mut storage = None;
    let mut served = Vec::new();
    let mut schemas = CrdSchema::default();
    let mut status = false;
    let mut scale = None;
    for v in spec
        .get("versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(vname) = s(v, "name") else { continue };
        if v.get("served").and_then(Value::as_bool).unwrap_or(false) {
            served.push(vname.clone());
            if v.pointer("/subresources/status").is_some() {
                status = true;
            }
            if let Some(sc) = v.pointer("/subresources/scale") {
                let p = |k: &str| sc.get(k).and_then(Value::as_str).map(str::to_string);
                scale = Some(super::scale::ScalePaths {
                    spec_replicas: p("specReplicasPath").unwrap_or_else(|| ".spec.replicas".into()),
                    status_replicas: p("statusReplicasPath")
                        .unwrap_or_else(|| ".status.replicas".into()),
                    label_selector: Some(p("labelSelectorPath").unwrap_or_default()),
                });
            }
        }
        if v.get("storage").and_then(Value::as_bool).unwrap_or(false) {
            storage = Some(vname.clone());
        }
        schemas.versions.insert(
            vname,
            VersionSchema {
                compiled: v
                    .pointer("/schema/openAPIV3Schema")
                    .map(|s| Compiled(Arc::new(Node::compile(s)))),
                schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                printer_columns: v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            },
        );
    }
    let storage = storage.ok_or(
        "spec.versions: Invalid value: must have exactly one version marked as storage version",
    )?;
    if served.is_empty() {
        return Err("spec.versions: no served version".into());
    }
    let mut versions = vec![storage.clone()];
    versions.extend(served.into_iter().filter(|v| *v != storage));
    Ok(ResourceInfo {
        singular: s(names, "singular").unwrap_or_else(|| kind.to_ascii_lowercase()),
        group,
        versions,
        plural,
        kind,
        namespaced,
        short_names: list(names, "shortNames"),
        categories: list(names, "categories"),
        status_subresource: status,
        pod_subresources: false,
        scale,
        status_on_create: if status {
            StatusOnCreate::Drop
        } else {
            StatusOnCreate::Keep
        },
        crd: Some(Arc::new(schemas)),
    })
}

/// The `status` kube-apiserver reports for an accepted CRD (Established, NamesAccepted).
pub fn accepted_status(crd: &Value, now: &str) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
    json!({
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "acceptedNames": names,
        "storedVersions": storage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "jobs.batch.volcano.sh"},
            "spec": {
                "group": "batch.volcano.sh", "scope": "Namespaced",
                "names": {"plural": "jobs", "singular": "job", "kind": "Job", "shortNames": ["vcjob", "vj"]},
                "versions": [{
                    "name": "v1alpha1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "queue": {"type": "string", "default": "default"},
                            "maxRetry": {"type": "integer", "default": 3},
                            "tasks": {"type": "array", "items": {"type": "object", "properties": {
                                "name": {"type": "string"},
                                "policies": {"type": "array", "items": {"type": "object"}},
                                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                "maxRetry": {"type": "integer", "default": 0}
                            }}},
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                        }},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }}}
                }]
            }
        })
    }

    #[test]
    fn crd_becomes_a_served_resource() {
        let r = resource_from_crd(&crd()).unwrap();
        assert_eq!(r.group, "batch.volcano.sh");
        assert_eq!(r.kind, "Job");
        assert!(r.namespaced && r.status_subresource);
        assert_eq!(r.short_names, ["vcjob", "vj"]);
        assert_eq!(r.versions, ["v1alpha1"]);
        let mut bad = crd();
        bad["metadata"]["name"] = json!("wrong");
        assert!(resource_from_crd(&bad).is_err());
    }

    #[test]
    fn accepted_status_reports_established() {
        let st = accepted_status(&crd(), "2026-01-01T00:00:00Z");
        assert_eq!(st["conditions"][1]["type"], "Established");
        assert_eq!(st["storedVersions"], json!(["v1alpha1"]));
    }
}
