//! CustomResourceDefinitions: turning a stored CRD into a served resource, and the structural
//! schema work kube-apiserver does on custom objects — `default` values and pruning of unknown
//! fields. Pure code.
//!
//! Not done (documented simplification): validation of custom objects against the schema
//! (types, enums, `required`, bounds, CEL rules). Admission webhooks still validate.

use std::sync::Arc;

use serde_json::{Value, json};

use super::resources::{CrdSchema, ResourceInfo, StatusOnCreate, VersionSchema};

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

fn is_true(s: &Value, k: &str) -> bool {
    s.get(k).and_then(Value::as_bool).unwrap_or(false)
}

/// Applies the `default` values of a structural schema to `x`, as kube-apiserver does on
/// create, update and read: a missing property with a default gets it (a `null` one too unless
/// the property is `nullable`), then defaulting continues into properties, `items` and
/// `additionalProperties`.
pub fn apply_defaults(x: &mut Value, s: &Value) {
    match x {
        Value::Object(m) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    let Some(d) = ps.get("default") else { continue };
                    let missing = match m.get(k) {
                        None => true,
                        Some(Value::Null) => !is_true(ps, "nullable"),
                        Some(_) => false,
                    };
                    if missing {
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, v) in m.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        apply_defaults(v, ps);
                    }
                }
            } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for v in m.values_mut() {
                    apply_defaults(v, ap);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.get("items") {
                for v in a {
                    apply_defaults(v, items);
                }
            }
        }
        _ => {}
    }
}

/// Drops fields the structural schema does not declare, as kube-apiserver does, unless the
/// schema says `x-kubernetes-preserve-unknown-fields`. `apiVersion`, `kind` and `metadata`
/// are kept at the root and in embedded resources.
pub fn prune(x: &mut Value, s: &Value) {
    prune_inner(x, s, true);
}

fn prune_inner(x: &mut Value, s: &Value, root: bool) {
    match x {
        Value::Object(m) => {
            let preserve = is_true(s, "x-kubernetes-preserve-unknown-fields");
            let embedded = root || is_true(s, "x-kubernetes-embedded-resource");
            let props = s.get("properties").and_then(Value::as_object);
            let ap = s.get("additionalProperties");
            m.retain(|k, v| {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    return true;
                }
                if let Some(ps) = props.and_then(|p| p.get(k)) {
                    prune_inner(v, ps, false);
                    return true;
                }
                match ap {
                    Some(a) if a.is_object() => {
                        prune_inner(v, a, false);
                        true
                    }
                    Some(Value::Bool(true)) => true,
                    _ => preserve,
                }
            });
        }
        Value::Array(a) => {
            if let Some(items) = s.get("items") {
                for v in a {
                    prune_inner(v, items, false);
                }
            }
        }
        _ => {}
    }
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
    fn defaults_fill_missing_fields_inside_present_parents_and_arrays() {
        let r = resource_from_crd(&crd()).unwrap();
        let schema = r.crd.as_ref().unwrap().schema("v1alpha1").unwrap().clone();
        let mut job = json!({"spec": {"tasks": [{"name": "a"}, {"name": "b", "maxRetry": 2}], "maxRetry": null}});
        apply_defaults(&mut job, &schema);
        assert_eq!(job["spec"]["queue"], "default");
        assert_eq!(job["spec"]["maxRetry"], 3, "null replaced by the default");
        assert_eq!(job["spec"]["tasks"][0]["maxRetry"], 0);
        assert_eq!(job["spec"]["tasks"][1]["maxRetry"], 2);
        let mut no_spec = json!({"metadata": {}});
        apply_defaults(&mut no_spec, &schema);
        assert!(no_spec.get("spec").is_none(), "no parent, no default");
    }

    #[test]
    fn pruning_drops_unknown_fields_and_keeps_preserved_ones() {
        let r = resource_from_crd(&crd()).unwrap();
        let schema = r.crd.as_ref().unwrap().schema("v1alpha1").unwrap().clone();
        let mut job = json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
            "bogus": 1,
            "spec": {"queue": "q", "unknown": true, "labels": {"a": "b"},
                     "tasks": [{"name": "t", "extra": 1, "template": {"spec": {"anything": 1}}}]},
            "status": {"whatever": 1}
        });
        prune(&mut job, &schema);
        assert!(job.get("bogus").is_none());
        assert!(job["spec"].get("unknown").is_none());
        assert!(job["spec"]["tasks"][0].get("extra").is_none());
        assert_eq!(job["spec"]["tasks"][0]["template"]["spec"]["anything"], 1);
        assert_eq!(job["spec"]["labels"]["a"], "b");
        assert_eq!(job["status"]["whatever"], 1);
        assert_eq!(job["metadata"]["name"], "j");
    }

    #[test]
    fn accepted_status_reports_established() {
        let st = accepted_status(&crd(), "2026-01-01T00:00:00Z");
        assert_eq!(st["conditions"][1]["type"], "Established");
        assert_eq!(st["storedVersions"], json!(["v1alpha1"]));
    }
}
