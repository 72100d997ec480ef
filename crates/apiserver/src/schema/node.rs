//! A CRD's structural schema compiled once into a tree of [`Node`]s, so pruning, defaulting,
//! the unknown-field report and value validation walk typed data instead of looking keys up
//! in JSON on every write, and each `pattern` is compiled to a regular expression once per CRD
//! version.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

/// What a schema says about keys it does not list under `properties`.
#[derive(Debug, Default)]
pub enum Additional {
    /// No `additionalProperties`: unknown keys are pruned (unless preserved).
    #[default]
    Absent,
    /// `additionalProperties: true`: any key, any value.
    Any,
    /// `additionalProperties: {schema}`: a map whose values follow the schema.
    Schema(Box<Node>),
}

/// A `pattern`, compiled; `Err` keeps the reason a pattern does not compile (kube-apiserver
/// reports that on every value instead of refusing the CRD, and so do we).
#[derive(Debug)]
pub struct Pattern {
    /// The pattern as written.
    pub source: String,
    /// The compiled expression, or why it does not compile.
    pub regex: Result<Regex, String>,
}

/// Value validations of one schema node (the parts of OpenAPI v3 a structural schema allows).
#[derive(Debug, Default)]
pub struct Checks {
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: bool,
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `minLength` (characters).
    pub min_length: Option<u64>,
    /// `maxLength` (characters).
    pub max_length: Option<u64>,
    /// `pattern`.
    pub pattern: Option<Pattern>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `enum` (empty: any value).
    pub allowed: Vec<Value>,
}

/// One node of a compiled structural schema.
#[derive(Debug, Default)]
pub struct Node {
    /// `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`), if any.
    pub kind: Option<String>,
    /// `nullable`.
    pub nullable: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource`: `apiVersion`, `kind`, `metadata` are kept.
    pub embedded: bool,
    /// `properties`.
    pub properties: BTreeMap<String, Node>,
    /// `additionalProperties`.
    pub additional: Additional,
    /// `items`.
    pub items: Option<Box<Node>>,
    /// `required`.
    pub required: Vec<String>,
    /// `default`.
    pub default: Option<Value>,
    /// Value validations.
    pub checks: Checks,
}

/// Schemas nest this deep at most; deeper levels are treated as `preserve-unknown-fields`
/// without checks, so a hostile CRD cannot make compilation or a walk recurse without bound.
const MAX_DEPTH: usize = 64;

impl Node {
    /// Compiles an `openAPIV3Schema`. Never fails: parts that are not understood are ignored
    /// (as a schema without them would behave).
    pub fn compile(schema: &Value) -> Node {
        compile_at(schema, 0)
    }

    /// The schema of the value under `key` of an object this node describes.
    pub fn child(&self, key: &str) -> Option<&Node> {
        self.properties.get(key).or(match &self.additional {
            Additional::Schema(s) => Some(s),
            _ => None,
        })
    }
}

fn compile_at(s: &Value, depth: usize) -> Node {
    if depth > MAX_DEPTH {
        return Node {
            preserve_unknown: true,
            additional: Additional::Any,
            ..Node::default()
        };
    }
    let flag = |k: &str| s.get(k).and_then(Value::as_bool).unwrap_or(false);
    let num = |k: &str| s.get(k).and_then(Value::as_f64);
    let count = |k: &str| s.get(k).and_then(Value::as_u64);
    let properties = s
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .map(|(k, v)| (k.clone(), compile_at(v, depth + 1)))
                .collect()
        })
        .unwrap_or_default();
    let additional = match s.get("additionalProperties") {
        Some(Value::Bool(true)) => Additional::Any,
        Some(a @ Value::Object(_)) => Additional::Schema(Box::new(compile_at(a, depth + 1))),
        _ => Additional::Absent,
    };
    let pattern = s.get("pattern").and_then(Value::as_str).map(|p| Pattern {
        source: p.to_string(),
        regex: Regex::new(p).map_err(|e| e.to_string()),
    });
    Node {
        kind: s.get("type").and_then(Value::as_str).map(str::to_string),
        nullable: flag("nullable"),
        int_or_string: flag("x-kubernetes-int-or-string"),
        preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
        embedded: flag("x-kubernetes-embedded-resource"),
        properties,
        additional,
        items: s
            .get("items")
            .filter(|i| i.is_object())
            .map(|i| Box::new(compile_at(i, depth + 1))),
        required: super::super::string_list(s.get("required")),
        default: s.get("default").cloned(),
        checks: Checks {
            minimum: num("minimum"),
            exclusive_minimum: flag("exclusiveMinimum"),
            maximum: num("maximum"),
            exclusive_maximum: flag("exclusiveMaximum"),
            multiple_of: num("multipleOf"),
            min_length: count("minLength"),
            max_length: count("maxLength"),
            pattern,
            min_items: count("minItems"),
            max_items: count("maxItems"),
            unique_items: flag("uniqueItems"),
            min_properties: count("minProperties"),
            max_properties: count("maxProperties"),
            allowed: s
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_properties_maps_items_and_checks() {
        let n = Node::compile(&json!({
            "type": "object", "required": ["spec"],
            "properties": {"spec": {"type": "object", "properties": {
                "n": {"type": "integer", "minimum": 0, "exclusiveMaximum": true, "maximum": 10},
                "s": {"type": "string", "pattern": "^[a-z]+$", "enum": ["a", "b"]},
                "bad": {"type": "string", "pattern": "(["},
                "l": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "m": {"type": "object", "additionalProperties": {"type": "integer"}}
            }}}
        }));
        assert_eq!(n.required, ["spec"]);
        let spec = n.child("spec").unwrap();
        let num = spec.child("n").unwrap();
        assert_eq!(num.checks.minimum, Some(0.0));
        assert!(num.checks.exclusive_maximum && !num.checks.exclusive_minimum);
        assert!(
            spec.child("s")
                .unwrap()
                .checks
                .pattern
                .as_ref()
                .unwrap()
                .regex
                .is_ok()
        );
        assert!(
            spec.child("bad")
                .unwrap()
                .checks
                .pattern
                .as_ref()
                .unwrap()
                .regex
                .is_err()
        );
        assert_eq!(
            spec.child("l")
                .unwrap()
                .items
                .as_ref()
                .unwrap()
                .kind
                .as_deref(),
            Some("string")
        );
        let map = spec.child("m").unwrap();
        assert_eq!(
            map.child("anything").unwrap().kind.as_deref(),
            Some("integer")
        );
        assert!(spec.child("unknown").is_none());
    }

    #[test]
    fn depth_is_bounded() {
        let mut s = json!({"type": "string"});
        for _ in 0..200 {
            s = json!({"type": "object", "properties": {"x": s}});
        }
        let mut n = &Node::compile(&s);
        let mut depth = 0;
        while let Some(c) = n.child("x") {
            n = c;
            depth += 1;
        }
        assert!(depth <= MAX_DEPTH + 1 && n.preserve_unknown, "{depth}");
    }
}
