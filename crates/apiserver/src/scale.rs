//! The `scale` subresource (`autoscaling/v1` Scale) of Deployments, ReplicaSets,
//! StatefulSets and custom resources that declare `subresources.scale`. Pure code.

use serde_json::{Value, json};

/// Where a resource keeps its replica counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// `.spec.replicas`.
    pub spec_replicas: String,
    /// `.status.replicas`.
    pub status_replicas: String,
    /// Path of the selector string for custom resources; `None` for built-ins, whose
    /// `spec.selector` (a LabelSelector object) is rendered as a string.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The built-in workload paths.
    pub fn builtin() -> Self {
        Self {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        }
    }
}

/// The value at a simple JSONPath (`.a.b`).
pub fn get_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.')
        .split('.')
        .try_fold(v, |cur, k| cur.get(k))
}

/// Sets the value at a simple JSONPath, creating parent objects.
pub fn set_path(v: &mut Value, path: &str, x: Value) {
    let keys: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut cur = v;
    for (i, k) in keys.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(o) = cur.as_object_mut() else { return };
        if i + 1 == keys.len() {
            o.insert((*k).to_string(), x);
            return;
        }
        cur = o.entry((*k).to_string()).or_insert_with(|| json!({}));
    }
}

/// A LabelSelector object as the selector string a Scale reports (kube's [`Selector`] in its
/// string form; an unreadable selector reads as empty, selecting everything).
pub fn selector_string(sel: &Value) -> String {
    crate::selectors::object_selector(Some(sel))
        .map(|s| s.to_string())
        .unwrap_or_default()
}

/// The Scale view of an object.
pub fn scale_of(paths: &ScalePaths, obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let pick = |k: &str| meta.get(k).cloned().unwrap_or(Value::Null);
    let selector = match &paths.label_selector {
        Some(p) => get_path(obj, p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        None => obj
            .pointer("/spec/selector")
            .map(selector_string)
            .unwrap_or_default(),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": pick("name"), "namespace": pick("namespace"), "uid": pick("uid"),
            "resourceVersion": pick("resourceVersion"), "creationTimestamp": pick("creationTimestamp"),
        },
        "spec": {"replicas": get_path(obj, &paths.spec_replicas).and_then(Value::as_i64).unwrap_or(0)},
        "status": {
            "replicas": get_path(obj, &paths.status_replicas).and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_view_and_paths() {
        let d = json!({"metadata": {"name": "d", "uid": "u"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}},
            "status": {"replicas": 1}});
        let s = scale_of(&ScalePaths::builtin(), &d);
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"]["replicas"], 1);
        assert_eq!(s["status"]["selector"], "app=web,tier in (a,b)");
        assert_eq!(s["metadata"]["uid"], "u");
        let mut v = json!({});
        set_path(&mut v, ".spec.x.replicas", json!(5));
        assert_eq!(get_path(&v, ".spec.x.replicas"), Some(&json!(5)));
        let custom = ScalePaths {
            spec_replicas: ".spec.size".into(),
            status_replicas: ".status.size".into(),
            label_selector: Some(".status.sel".into()),
        };
        let cr = json!({"spec": {"size": 4}, "status": {"sel": "a=b"}});
        assert_eq!(scale_of(&custom, &cr)["status"]["selector"], "a=b");
        assert_eq!(scale_of(&custom, &cr)["spec"]["replicas"], 4);
    }
}
