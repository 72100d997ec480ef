//! Value validation of a custom object against its compiled structural schema, with
//! kube-apiserver's messages (kube-openapi's validators, translated to field errors by
//! apiextensions-apiserver): types (with `nullable` and int-or-string), `required`,
//! `minimum`/`maximum` (inclusive or exclusive), `multipleOf`, `enum`, `pattern`, string
//! lengths, item and property counts, `uniqueItems`.
//!
//! Not checked (documented): `format`, `anyOf`/`oneOf`/`allOf`/`not` other than
//! int-or-string, `x-kubernetes-validations` (CEL), list-type uniqueness, and the
//! object-metadata rules of embedded resources.

use serde_json::{Value, json};

use super::invalid::{ErrorType, FieldError};
use super::node::Node;
use super::walk::{self, Field};

/// The field errors of `x` against `s` (empty: valid).
pub fn validate(x: &Value, s: &Node) -> Vec<FieldError> {
    let mut out = Vec::new();
    at(x, s, true, "", &mut out);
    out
}

/// Field path as kube prints it; the root has none (`<nil>`).
fn field(path: &str) -> String {
    if path.is_empty() {
        "<nil>".into()
    } else {
        path.to_string()
    }
}

fn invalid(path: &str, value: Value, detail: String) -> FieldError {
    FieldError {
        kind: ErrorType::Invalid,
        field: field(path),
        value: Some(value),
        detail,
    }
}

/// The JSON type name kube-openapi infers for a decoded value.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(want: &str, v: &Value) -> bool {
    match (want, v) {
        ("integer", Value::Number(n)) => {
            !n.is_f64()
                || n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
        }
        ("number", Value::Number(_)) => true,
        ("string", Value::String(_)) => true,
        ("boolean", Value::Bool(_)) => true,
        ("object", Value::Object(_)) => true,
        ("array", Value::Array(_)) => true,
        _ => false,
    }
}

fn type_error(path: &str, want: &str, got: &str) -> FieldError {
    FieldError {
        kind: ErrorType::TypeInvalid,
        field: field(path),
        value: Some(json!(got)),
        detail: format!("{path} in body must be of type {want}: \"{got}\""),
    }
}

fn at(x: &Value, s: &Node, root: bool, path: &str, out: &mut Vec<FieldError>) {
    if x.is_null() {
        if let Some(want) = &s.kind
            && !s.nullable
        {
            out.push(type_error(path, want, "null"));
        }
        return;
    }
    if s.int_or_string {
        let ok = matches!(x, Value::String(_)) || type_matches("integer", x);
        if !ok {
            // kube-openapi's anyOf: the composite error (on no field) and the first branch's.
            out.push(FieldError {
                kind: ErrorType::Invalid,
                field: field(""),
                value: Some(json!("")),
                detail: format!("\"{path}\" must validate at least one schema (anyOf)"),
            });
            out.push(type_error(path, "integer", type_name(x)));
            return;
        }
    } else if let Some(want) = &s.kind
        && !type_matches(want, x)
    {
        out.push(type_error(path, want, type_name(x)));
        return;
    }
    match x {
        Value::String(v) => string_checks(v, s, path, out),
        Value::Number(_) => number_checks(x, s, path, out),
        _ => {}
    }
    if let Value::Array(a) = x {
        array_checks(a, s, path, out);
    }
    if !s.checks.allowed.is_empty() && !s.checks.allowed.iter().any(|e| same_value(e, x)) {
        let supported: Vec<String> = s
            .checks
            .allowed
            .iter()
            .map(|e| match e {
                Value::String(t) => format!("{t:?}"),
                other => format!("{:?}", other.to_string()),
            })
            .collect();
        out.push(FieldError {
            kind: ErrorType::NotSupported,
            field: field(path),
            value: Some(x.clone()),
            detail: format!("supported values: {}", supported.join(", ")),
        });
    }
    if let Value::Object(m) = x {
        let n = m.len() as u64;
        if let Some(min) = s.checks.min_properties
            && n < min
        {
            out.push(invalid(
                path,
                json!(n),
                format!("{path} in body should have at least {min} properties"),
            ));
        }
        if let Some(max) = s.checks.max_properties
            && n > max
        {
            out.push(too_many(path, n, max));
        }
        for (k, v) in m {
            if let Field::Known(c) = walk::field(s, k, root) {
                at(v, c, false, &walk::join(path, k), out);
            }
        }
        for k in &s.required {
            if !m.contains_key(k) {
                out.push(FieldError {
                    kind: ErrorType::Required,
                    field: walk::join(path, k),
                    value: None,
                    detail: String::new(),
                });
            }
        }
    }
}

/// Equality as kube-openapi's `enum` check sees it: numbers by value (`1` equals `1.0`).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn too_many(path: &str, actual: u64, max: u64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    FieldError {
        kind: ErrorType::TooMany,
        field: field(path),
        value: Some(json!(actual)),
        detail: format!("must have at most {max} {unit}"),
    }
}

fn string_checks(v: &str, s: &Node, path: &str, out: &mut Vec<FieldError>) {
    let chars = v.chars().count() as u64;
    let c = &s.checks;
    // kube-openapi's string validator stops at its first failure.
    if let Some(max) = c.max_length
        && chars > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        out.push(FieldError {
            kind: ErrorType::TooLong,
            field: field(path),
            value: None,
            detail: format!("may not be more than {max} {unit}"),
        });
    } else if let Some(min) = c.min_length
        && chars < min
    {
        out.push(invalid(
            path,
            json!(v),
            format!("{path} in body should be at least {min} chars long"),
        ));
    } else if let Some(p) = &c.pattern {
        match &p.regex {
            Ok(re) if re.is_match(v) => {}
            Ok(_) => out.push(invalid(
                path,
                json!(v),
                format!("{path} in body should match '{}'", p.source),
            )),
            Err(e) => out.push(invalid(
                path,
                json!(v),
                format!(
                    "{path} in body should match '{}, but pattern is invalid: {e}'",
                    p.source
                ),
            )),
        }
    }
}

/// A bound as kube-openapi prints it: as an integer when the value checked is one (it
/// compares in the value's native type), else as a float (`1.5`, `2`).
fn bound(b: f64, integral_value: bool) -> String {
    if integral_value && b.fract() == 0.0 && b.abs() < 9.2e18 {
        format!("{}", b as i64)
    } else {
        format!("{b}")
    }
}

fn number_checks(x: &Value, s: &Node, path: &str, out: &mut Vec<FieldError>) {
    let Value::Number(n) = x else { return };
    let Some(v) = n.as_f64() else { return };
    let int = !n.is_f64();
    let c = &s.checks;
    if let Some(m) = c.multiple_of
        && m > 0.0
    {
        let q = v / m;
        if q.fract() != 0.0 {
            out.push(invalid(
                path,
                x.clone(),
                format!("{path} in body should be a multiple of {}", bound(m, int)),
            ));
        }
    }
    if let Some(min) = c.minimum {
        let (fails, words) = if c.exclusive_minimum {
            (v <= min, "greater than")
        } else {
            (v < min, "greater than or equal to")
        };
        if fails {
            out.push(invalid(
                path,
                x.clone(),
                format!("{path} in body should be {words} {}", bound(min, int)),
            ));
        }
    }
    if let Some(max) = c.maximum {
        let (fails, words) = if c.exclusive_maximum {
            (v >= max, "less than")
        } else {
            (v > max, "less than or equal to")
        };
        if fails {
            out.push(invalid(
                path,
                x.clone(),
                format!("{path} in body should be {words} {}", bound(max, int)),
            ));
        }
    }
}

fn array_checks(a: &[Value], s: &Node, path: &str, out: &mut Vec<FieldError>) {
    let c = &s.checks;
    let n = a.len() as u64;
    if let Some(min) = c.min_items
        && n < min
    {
        out.push(invalid(
            path,
            json!(n),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = c.max_items
        && n > max
    {
        out.push(too_many(path, n, max));
    }
    if c.unique_items
        && a.iter()
            .enumerate()
            .any(|(i, v)| a[..i].iter().any(|w| same_value(v, w)))
    {
        out.push(invalid(
            path,
            Value::Array(a.to_vec()),
            format!("{path} in body shouldn't contain duplicates"),
        ));
    }
    if let Some(items) = &s.items {
        for (i, v) in a.iter().enumerate() {
            at(v, items, false, &walk::index(path, i), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Node {
        Node::compile(
            &json!({"type": "object", "required": ["spec"], "properties": {
                "spec": {"type": "object", "required": ["queue"], "properties": {
                    "queue": {"type": "string", "maxLength": 5},
                    "replicas": {"type": "integer", "format": "int32", "minimum": 0},
                    "weight": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1.5},
                    "policy": {"type": "string", "enum": ["A", "B"]},
                    "code": {"type": "integer", "enum": [1, 2]},
                    "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                    "qty": {"x-kubernetes-int-or-string": true, "pattern": "^[0-9]+m?$",
                            "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "maybe": {"type": "string", "nullable": true},
                    "tasks": {"type": "array", "maxItems": 2, "minItems": 1, "items": {
                        "type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"},
                            "replicas": {"type": "integer", "minimum": 0},
                            "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                         "x-kubernetes-embedded-resource": true}}}},
                    "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
                    "tags": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}
                }}
            }}),
        )
    }

    fn messages(x: Value) -> Vec<String> {
        validate(&x, &schema())
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn a_valid_object_has_no_errors() {
        let ok = json!({"apiVersion": "x/v1", "kind": "J", "metadata": {"name": "n"},
            "spec": {"queue": "q", "replicas": 2, "weight": 1.0, "policy": "A", "code": 2,
                     "name": "ab", "qty": 3, "maybe": null, "labels": {"a": "b"}, "tags": ["a", "b"],
                     "tasks": [{"name": "t", "replicas": 0, "template": {"kind": "Pod", "x": 1}}],
                     "unknown": {"deep": true}}});
        assert!(messages(ok).is_empty());
        assert!(messages(json!({"spec": {"queue": "q", "qty": "100m"}})).is_empty());
    }

    #[test]
    fn bounds_are_worded_as_kube_apiserver_words_them() {
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "tasks": [{"name": "t", "replicas": -1}]}})),
            [
                "spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0"
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "weight": 0}})),
            ["spec.weight: Invalid value: 0: spec.weight in body should be greater than 0"]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "weight": 2.5}})),
            [
                "spec.weight: Invalid value: 2.5: spec.weight in body should be less than or equal to 1.5"
            ]
        );
    }

    #[test]
    fn types_required_enum_strings_and_counts() {
        assert_eq!(messages(json!({})), ["spec: Required value"]);
        assert_eq!(
            messages(json!({"spec": {"replicas": "two"}})),
            [
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
                "spec.queue: Required value"
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": "toolong", "policy": "C", "code": 3}})),
            [
                "spec.code: Unsupported value: 3: supported values: \"1\", \"2\"",
                "spec.policy: Unsupported value: \"C\": supported values: \"A\", \"B\"",
                "spec.queue: Too long: may not be more than 5 bytes"
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "name": "a"}})),
            ["spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long"]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "name": "A1"}})),
            ["spec.name: Invalid value: \"A1\": spec.name in body should match '^[a-z]+$'"]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "tasks": [{"name": "a"}, {"name": "b"}, {}]}})),
            [
                "spec.tasks: Too many: 3: must have at most 2 items",
                "spec.tasks[2].name: Required value"
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "tasks": []}})),
            ["spec.tasks: Invalid value: 0: spec.tasks in body should have at least 1 items"]
        );
        assert_eq!(
            messages(
                json!({"spec": {"queue": "q", "labels": {"a": "b", "c": "d"}, "tags": ["x", "x"]}})
            ),
            [
                "spec.labels: Too many: 2: must have at most 1 item",
                "spec.tags: Invalid value: [\"x\",\"x\"]: spec.tags in body shouldn't contain duplicates"
            ]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": null}})),
            [
                "spec.queue: Invalid value: \"null\": spec.queue in body must be of type string: \"null\""
            ]
        );
    }

    #[test]
    fn int_or_string_takes_either_and_checks_strings_against_the_pattern() {
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "qty": "1x"}})),
            ["spec.qty: Invalid value: \"1x\": spec.qty in body should match '^[0-9]+m?$'"]
        );
        assert_eq!(
            messages(json!({"spec": {"queue": "q", "qty": true}})),
            [
                "<nil>: Invalid value: \"\": \"spec.qty\" must validate at least one schema (anyOf)",
                "spec.qty: Invalid value: \"boolean\": spec.qty in body must be of type integer: \"boolean\""
            ]
        );
    }
}
