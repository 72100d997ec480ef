//! Patch application: JSON merge patch (RFC 7386), JSON patch (RFC 6902, the `json-patch`
//! crate), strategic merge patch for built-in kinds, and server-side apply. Pure code.
//!
//! Strategic merge is driven by a table of list fields and their merge keys
//! (`containers` by `name`, `volumeMounts` by `mountPath`, …) instead of the Go struct tags;
//! field names are unique enough across the kinds tephra uses. The `$patch` directive
//! (`replace`, `delete`, `merge`), `$deleteFromPrimitiveList/…`, `$retainKeys` and
//! `$setElementOrder/…` (ignored: order is kept as stored, new elements appended) are honoured.
//!
//! Server-side apply is simplified: the applied configuration is merged into the live object
//! (strategic rules for built-ins, merge-patch rules for custom resources) and created when
//! missing. There is no `managedFields` bookkeeping, so a field dropped from a later apply is
//! not removed and no field-manager conflicts are reported (force is accepted and ignored).

use serde_json::{Map, Value};

/// How a PATCH body is to be read, from its `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchKind {
    /// The patch kind of a content type, if supported.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body is not valid for the patch type.
    #[error("the body of the request was in an unknown format: {0}")]
    Decode(String),
    /// A JSON patch operation failed (missing path, failed `test`).
    #[error("{0}")]
    Apply(String),
    /// The result is not an object.
    #[error("the patched object is not a JSON object")]
    NotObject,
}

/// Parses a JSON or YAML document (apply bodies are YAML; JSON is valid YAML).
pub fn parse_json_or_yaml(body: &[u8]) -> Result<Value, PatchError> {
    match serde_json::from_slice(body) {
        Ok(v) => Ok(v),
        Err(json_err) => {
            let text = std::str::from_utf8(body).map_err(|e| PatchError::Decode(e.to_string()))?;
            serde_saphyr::from_str::<Value>(text)
                .map_err(|e| PatchError::Decode(format!("{json_err}; as YAML: {e}")))
        }
    }
}

/// Applies a patch body of `kind` to `target`. `strategic` chooses strategic rules for
/// server-side apply (built-in kinds) over merge-patch rules (custom resources).
pub fn apply_patch(
    kind: PatchKind,
    target: &mut Value,
    body: &[u8],
    strategic: bool,
) -> Result<(), PatchError> {
    match kind {
        PatchKind::Merge => {
            let p: Value =
                serde_json::from_slice(body).map_err(|e| PatchError::Decode(e.to_string()))?;
            json_patch::merge(target, &p);
        }
        PatchKind::Json => {
            let p: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| PatchError::Decode(e.to_string()))?;
            json_patch::patch(target, &p.0).map_err(|e| PatchError::Apply(e.to_string()))?;
        }
        PatchKind::Strategic => {
            let p: Value =
                serde_json::from_slice(body).map_err(|e| PatchError::Decode(e.to_string()))?;
            strategic_merge(target, &p);
        }
        PatchKind::Apply => {
            let p = parse_json_or_yaml(body)?;
            if !p.is_object() {
                return Err(PatchError::Decode(
                    "apply configuration must be an object".into(),
                ));
            }
            if strategic {
                strategic_merge(target, &p);
            } else {
                json_patch::merge(target, &p);
            }
        }
    }
    if target.is_object() {
        Ok(())
    } else {
        Err(PatchError::NotObject)
    }
}

/// Merge keys of the list fields of built-in kinds (first present candidate wins).
fn merge_keys(field: &str) -> Option<&'static [&'static str]> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "containerStatuses"
        | "initContainerStatuses" => &["name"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "ports" => &["containerPort", "port"],
        "hostAliases" => &["ip"],
        "conditions" | "addresses" => &["type"],
        "ownerReferences" => &["uid"],
        "topologySpreadConstraints" => &["topologyKey"],
        "taints" => &["key"],
        _ => return None,
    })
}

/// Lists of scalars whose patch strategy is `merge` (union) rather than replace.
fn merges_primitives(field: &str) -> bool {
    field == "finalizers"
}

/// Strategic merge patch of `patch` into `target`.
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    let Some(pobj) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if pobj.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut p = pobj.clone();
        p.remove("$patch");
        *target = Value::Object(p);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(tobj) = target.as_object_mut() else {
        return;
    };
    if let Some(keep) = pobj.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        tobj.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in pobj {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(list), Some(del)) = (
                tobj.get_mut(field).and_then(Value::as_array_mut),
                v.as_array(),
            ) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        match v {
            Value::Null => {
                tobj.remove(k);
            }
            Value::Object(o) if o.get("$patch").and_then(Value::as_str) == Some("delete") => {
                tobj.remove(k);
            }
            Value::Object(_) => strategic_merge(tobj.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => {
                let slot = tobj.entry(k.clone()).or_insert(Value::Array(vec![]));
                merge_list(slot, items, k);
            }
            _ => {
                tobj.insert(k.clone(), v.clone());
            }
        }
    }
}

fn key_of<'a>(item: &'a Value, keys: &'static [&'static str]) -> Option<(&'static str, &'a Value)> {
    keys.iter().find_map(|k| item.get(*k).map(|v| (*k, v)))
}

fn merge_list(target: &mut Value, items: &[Value], field: &str) {
    let keys = merge_keys(field);
    if keys.is_none() || !items.iter().all(Value::is_object) {
        if merges_primitives(field)
            && let Some(t) = target.as_array_mut()
        {
            for i in items {
                if !t.contains(i) {
                    t.push(i.clone());
                }
            }
            return;
        }
        *target = Value::Array(items.to_vec());
        return;
    }
    let keys: &'static [&'static str] = keys.unwrap_or_default();
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *target = Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect(),
        );
        return;
    }
    if !target.is_array() {
        *target = Value::Array(vec![]);
    }
    let Some(list) = target.as_array_mut() else {
        return;
    };
    for item in items {
        let Some((k, kv)) = key_of(item, keys) else {
            list.push(item.clone());
            continue;
        };
        let pos = list.iter().position(|t| t.get(k) == Some(kv));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(p), true) => {
                list.remove(p);
            }
            (None, true) => {}
            (Some(p), false) => strategic_merge(&mut list[p], item),
            (None, false) => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, item);
                list.push(fresh);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({
            "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["x"]},
            "spec": {
                "containers": [
                    {"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}],
                     "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                    {"name": "side", "image": "busybox"}
                ],
                "tolerations": [{"key": "t"}]
            }
        })
    }

    #[test]
    fn content_types_map_to_patch_kinds() {
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchKind::Merge)
        );
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml"),
            Some(PatchKind::Apply)
        );
        assert_eq!(PatchKind::from_content_type("application/json"), None);
    }

    #[test]
    fn strategic_merges_containers_by_name_and_env_by_name() {
        let mut p = pod();
        let patch = json!({"spec": {"containers": [
            {"name": "main", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]}
        ]}});
        apply_patch(
            PatchKind::Strategic,
            &mut p,
            patch.to_string().as_bytes(),
            true,
        )
        .unwrap();
        let c = &p["spec"]["containers"];
        assert_eq!(c.as_array().unwrap().len(), 2, "side container kept");
        assert_eq!(c[0]["image"], "nginx:2");
        assert_eq!(
            c[0]["env"].as_array().unwrap().len(),
            2,
            "env merged by name"
        );
        assert_eq!(
            c[0]["ports"][0]["containerPort"], 80,
            "untouched fields kept"
        );
    }

    #[test]
    fn strategic_directives_delete_replace_and_primitive_lists() {
        let mut p = pod();
        strategic_merge(
            &mut p,
            &json!({
                "metadata": {"finalizers": ["y"], "labels": {"a": null, "b": "2"}},
                "spec": {"containers": [{"name": "side", "$patch": "delete"}],
                         "tolerations": [{"key": "u"}]}
            }),
        );
        assert_eq!(p["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(p["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(
            p["spec"]["tolerations"],
            json!([{"key": "u"}]),
            "no merge key: replaced"
        );
        strategic_merge(
            &mut p,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]},
                    "spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "i"}]}}),
        );
        assert_eq!(p["metadata"]["finalizers"], json!(["y"]));
        assert_eq!(
            p["spec"]["containers"],
            json!([{"name": "only", "image": "i"}])
        );
        strategic_merge(&mut p, &json!({"spec": {"$patch": "replace", "x": 1}}));
        assert_eq!(p["spec"], json!({"x": 1}));
    }

    #[test]
    fn merge_patch_replaces_lists_and_removes_nulls() {
        let mut p = pod();
        let patch =
            json!({"spec": {"containers": [{"name": "x"}]}, "metadata": {"labels": {"a": null}}});
        apply_patch(
            PatchKind::Merge,
            &mut p,
            patch.to_string().as_bytes(),
            false,
        )
        .unwrap();
        assert_eq!(p["spec"]["containers"], json!([{"name": "x"}]));
        assert_eq!(p["metadata"]["labels"], json!({}));
    }

    #[test]
    fn json_patch_applies_and_fails_on_a_failed_test() {
        let mut p = pod();
        let ok = json!([{"op": "replace", "path": "/metadata/labels/a", "value": "9"},
                        {"op": "add", "path": "/metadata/labels/c", "value": "3"}]);
        apply_patch(PatchKind::Json, &mut p, ok.to_string().as_bytes(), true).unwrap();
        assert_eq!(p["metadata"]["labels"], json!({"a": "9", "c": "3"}));
        let bad = json!([{"op": "test", "path": "/metadata/name", "value": "q"}]);
        assert!(apply_patch(PatchKind::Json, &mut p, bad.to_string().as_bytes(), true).is_err());
        assert!(apply_patch(PatchKind::Json, &mut p, b"{", true).is_err());
    }

    #[test]
    fn apply_accepts_yaml_and_merges() {
        let mut p = pod();
        let body = b"metadata:\n  labels:\n    z: \"1\"\nspec:\n  containers:\n  - name: main\n    image: nginx:3\n";
        apply_patch(PatchKind::Apply, &mut p, body, true).unwrap();
        assert_eq!(p["metadata"]["labels"]["z"], "1");
        assert_eq!(p["spec"]["containers"][0]["image"], "nginx:3");
        assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 2);
    }
}
