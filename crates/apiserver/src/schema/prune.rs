//! What kube-apiserver does to a custom object before validating it: drop the fields its
//! structural schema does not declare, drop `null`s the schema does not allow (and that no
//! default replaces), fill `default`s; and, for field validation, the list of fields pruning
//! would drop. All walk [`Node`] through [`walk::field`], so the report and the pruning cannot
//! disagree.

use serde_json::Value;

use super::node::Node;
use super::walk::{self, Field};

/// Drops undeclared fields (keeping `apiVersion`, `kind`, `metadata` of the root and of
/// embedded resources, and everything under preserve-unknown-fields) and `null` values of
/// declared fields that are neither `nullable` nor defaulted.
pub fn prune(x: &mut Value, s: &Node) {
    prune_at(x, s, true);
}

fn prune_at(x: &mut Value, s: &Node, root: bool) {
    match x {
        Value::Object(m) => m.retain(|k, v| match walk::field(s, k, root) {
            Field::Meta | Field::Preserved => true,
            Field::Unknown => false,
            Field::Known(c) => {
                if v.is_null() {
                    return c.nullable || c.default.is_some();
                }
                prune_at(v, c, false);
                true
            }
        }),
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for v in a {
                    prune_at(v, items, false);
                }
            }
        }
        _ => {}
    }
}

/// Applies `default` values as kube-apiserver does on create, update and read: a missing
/// property with a default gets it (a `null` one too unless the property is `nullable`), then
/// defaulting continues into properties, `items` and `additionalProperties`.
pub fn apply_defaults(x: &mut Value, s: &Node) {
    match x {
        Value::Object(m) => {
            if !s.properties.is_empty() {
                for (k, ps) in &s.properties {
                    let Some(d) = &ps.default else { continue };
                    let missing = match m.get(k) {
                        None => true,
                        Some(Value::Null) => !ps.nullable,
                        Some(_) => false,
                    };
                    if missing {
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, v) in m.iter_mut() {
                    if let Some(ps) = s.properties.get(k) {
                        apply_defaults(v, ps);
                    }
                }
            } else if let super::node::Additional::Schema(ap) = &s.additional {
                for v in m.values_mut() {
                    apply_defaults(v, ap);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for v in a {
                    apply_defaults(v, items);
                }
            }
        }
        _ => {}
    }
}

/// The fields [`prune`] would drop as undeclared, as kube-apiserver names them in
/// `unknown field "spec.foo"` (`null` values are skipped: a merge patch deletes with them).
pub fn unknown_fields(x: &Value, s: &Node) -> Vec<String> {
    let mut out = Vec::new();
    unknown_at(x, s, true, "", &mut out);
    out
}

fn unknown_at(x: &Value, s: &Node, root: bool, path: &str, out: &mut Vec<String>) {
    match x {
        Value::Object(m) => {
            for (k, v) in m {
                match walk::field(s, k, root) {
                    Field::Meta | Field::Preserved => {}
                    Field::Unknown if v.is_null() => {}
                    Field::Unknown => out.push(walk::join(path, k)),
                    Field::Known(c) => unknown_at(v, c, false, &walk::join(path, k), out),
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = &s.items {
                for (i, v) in a.iter().enumerate() {
                    unknown_at(v, items, false, &walk::index(path, i), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Node {
        Node::compile(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "queue": {"type": "string", "default": "default"},
                "maxRetry": {"type": "integer", "default": 3},
                "note": {"type": "string"},
                "maybe": {"type": "string", "nullable": true},
                "tasks": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "maxRetry": {"type": "integer", "default": 0}
                }}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}))
    }

    #[test]
    fn pruning_drops_unknown_fields_and_disallowed_nulls() {
        let mut job = json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
            "bogus": 1,
            "spec": {"queue": "q", "unknown": true, "labels": {"a": "b"}, "note": null,
                     "maybe": null, "maxRetry": null,
                     "tasks": [{"name": "t", "extra": 1, "template": {"spec": {"anything": 1}}}]},
            "status": {"whatever": 1}
        });
        let before = unknown_fields(&job, &schema());
        assert_eq!(before, ["bogus", "spec.tasks[0].extra", "spec.unknown"]);
        prune(&mut job, &schema());
        assert!(job.get("bogus").is_none());
        assert!(job["spec"].get("unknown").is_none());
        assert!(
            job["spec"].get("note").is_none(),
            "null, not nullable, no default"
        );
        assert!(job["spec"]["maybe"].is_null() && job["spec"]["maxRetry"].is_null());
        assert!(job["spec"]["tasks"][0].get("extra").is_none());
        assert_eq!(job["spec"]["tasks"][0]["template"]["spec"]["anything"], 1);
        assert_eq!(job["spec"]["labels"]["a"], "b");
        assert_eq!(job["status"]["whatever"], 1);
        assert_eq!(job["metadata"]["name"], "j");
        assert!(unknown_fields(&job, &schema()).is_empty());
    }

    #[test]
    fn defaults_fill_missing_fields_inside_present_parents_and_arrays() {
        let mut job = json!({"spec": {"tasks": [{"name": "a"}, {"name": "b", "maxRetry": 2}], "maxRetry": null}});
        apply_defaults(&mut job, &schema());
        assert_eq!(job["spec"]["queue"], "default");
        assert_eq!(job["spec"]["maxRetry"], 3, "null replaced by the default");
        assert_eq!(job["spec"]["tasks"][0]["maxRetry"], 0);
        assert_eq!(job["spec"]["tasks"][1]["maxRetry"], 2);
        let mut no_spec = json!({"metadata": {}});
        apply_defaults(&mut no_spec, &schema());
        assert!(no_spec.get("spec").is_none(), "no parent, no default");
    }
}
