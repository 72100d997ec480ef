//! The one rule for which schema governs each key of an object, shared by pruning, the
//! unknown-field report and value validation, plus the field paths kube-apiserver prints
//! (`spec.tasks[0].replicas`).

use super::node::{Additional, Node};

/// How a structural schema treats one key of an object.
#[derive(Debug)]
pub enum Field<'s> {
    /// `apiVersion`, `kind` or `metadata` of the root or of an embedded resource: kept, and
    /// validated by the object-metadata rules rather than by the schema.
    Meta,
    /// Declared (under `properties` or by an `additionalProperties` schema).
    Known(&'s Node),
    /// Not declared but kept (`additionalProperties: true` or preserve-unknown-fields).
    Preserved,
    /// Not declared: pruning drops it, strict field validation reports it.
    Unknown,
}

/// The treatment of `key` in an object described by `s`; `root` is the object itself.
pub fn field<'s>(s: &'s Node, key: &str, root: bool) -> Field<'s> {
    if (root || s.embedded) && matches!(key, "apiVersion" | "kind" | "metadata") {
        return Field::Meta;
    }
    if let Some(p) = s.properties.get(key) {
        return Field::Known(p);
    }
    match &s.additional {
        Additional::Schema(a) => Field::Known(a),
        Additional::Any => Field::Preserved,
        Additional::Absent if s.preserve_unknown => Field::Preserved,
        Additional::Absent => Field::Unknown,
    }
}

/// `path.key`, or `key` at the root.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `path[i]`.
pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_meta_known_preserved_or_unknown() {
        let n = Node::compile(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
            "tmpl": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
            "any": {"type": "object", "additionalProperties": true}
        }}));
        assert!(matches!(field(&n, "metadata", true), Field::Meta));
        assert!(matches!(field(&n, "spec", true), Field::Known(_)));
        assert!(matches!(field(&n, "bogus", true), Field::Unknown));
        let spec = n.child("spec").unwrap();
        assert!(matches!(field(spec, "kind", false), Field::Unknown));
        let tmpl = n.child("tmpl").unwrap();
        assert!(matches!(field(tmpl, "kind", false), Field::Meta));
        assert!(matches!(field(tmpl, "whatever", false), Field::Preserved));
        assert!(matches!(
            field(n.child("map").unwrap(), "k", false),
            Field::Known(_)
        ));
        assert!(matches!(
            field(n.child("any").unwrap(), "k", false),
            Field::Preserved
        ));
        assert_eq!(index(&join(&join("", "spec"), "tasks"), 0), "spec.tasks[0]");
    }
}
