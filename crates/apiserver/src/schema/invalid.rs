//! Field errors and the 422 `Invalid` answer built from them, worded as kube-apiserver words
//! them (k8s.io/apimachinery `field.Error` and `errors.NewInvalid`):
//! `Job.batch.volcano.sh "x" is invalid: spec.tasks[0].replicas: Invalid value: -1: ...`.

use serde_json::{Value, json};

/// The kind of a field error (`details.causes[].reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    /// `FieldValueRequired`.
    Required,
    /// `FieldValueInvalid`.
    Invalid,
    /// `FieldValueTypeInvalid` (printed as "Invalid value" too).
    TypeInvalid,
    /// `FieldValueNotSupported` (a value outside `enum`).
    NotSupported,
    /// `FieldValueTooLong` (over `maxLength`).
    TooLong,
    /// `FieldValueTooMany` (over `maxItems` / `maxProperties`).
    TooMany,
}

impl ErrorType {
    /// The `reason` of a cause.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
        }
    }

    fn label(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
        }
    }
}

/// One field error: where, what kind, the offending value (if printed) and the detail.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The error's kind.
    pub kind: ErrorType,
    /// `spec.tasks[0].replicas`.
    pub field: String,
    /// The value printed after the label (`None`: not printed).
    pub value: Option<Value>,
    /// What is wrong, after the value.
    pub detail: String,
}

impl FieldError {
    /// The message without the field (`details.causes[].message`): `Invalid value: -1: ...`.
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_string();
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(&go_value(v));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// A value as `field.Error` prints it: strings quoted, numbers and booleans bare, anything
/// else as JSON.
fn go_value(v: &Value) -> String {
    match v {
        Value::String(_) | Value::Array(_) | Value::Object(_) | Value::Null => v.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
    }
}

/// A refused object: 422 with reason `Invalid` and one cause per field error.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}", self.message())]
pub struct Invalid {
    /// Kind (`Job`).
    pub kind: String,
    /// API group (`batch.volcano.sh`; empty for the core group).
    pub group: String,
    /// Object name.
    pub name: String,
    /// The field errors (at least one).
    pub causes: Vec<FieldError>,
}

impl Invalid {
    /// `Job.batch.volcano.sh "x" is invalid: ERR` or `...: [ERR1, ERR2]` (identical messages
    /// once, as kube's error aggregate prints them).
    pub fn message(&self) -> String {
        let qualified = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        };
        let mut msgs: Vec<String> = Vec::new();
        for c in &self.causes {
            let m = c.to_string();
            if !msgs.contains(&m) {
                msgs.push(m);
            }
        }
        match msgs.as_slice() {
            [] => format!("{qualified} \"{}\" is invalid", self.name),
            [one] => format!("{qualified} \"{}\" is invalid: {one}", self.name),
            many => format!(
                "{qualified} \"{}\" is invalid: [{}]",
                self.name,
                many.join(", ")
            ),
        }
    }

    /// The `details` of the `Status`.
    pub fn details(&self) -> Value {
        let causes: Vec<Value> = self
            .causes
            .iter()
            .map(|c| json!({"reason": c.kind.reason(), "message": c.body(), "field": c.field}))
            .collect();
        json!({"name": self.name, "group": self.group, "kind": self.kind, "causes": causes})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: ErrorType, field: &str, value: Option<Value>, detail: &str) -> FieldError {
        FieldError {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    #[test]
    fn one_error_is_printed_bare_and_several_in_brackets() {
        let min = err(
            ErrorType::Invalid,
            "spec.tasks[0].replicas",
            Some(json!(-1)),
            "spec.tasks[0].replicas in body should be greater than or equal to 0",
        );
        let inv = Invalid {
            kind: "Job".into(),
            group: "batch.volcano.sh".into(),
            name: "x".into(),
            causes: vec![min.clone()],
        };
        assert_eq!(
            inv.to_string(),
            "Job.batch.volcano.sh \"x\" is invalid: spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0"
        );
        let req = err(ErrorType::Required, "spec.queue", None, "");
        let two = Invalid {
            causes: vec![min.clone(), req.clone(), req],
            ..inv
        };
        assert_eq!(
            two.message(),
            "Job.batch.volcano.sh \"x\" is invalid: [spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0, spec.queue: Required value]"
        );
        let d = two.details();
        assert_eq!(d["kind"], "Job");
        assert_eq!(d["causes"][1]["reason"], "FieldValueRequired");
        assert_eq!(d["causes"][1]["message"], "Required value");
        assert_eq!(d["causes"][0]["field"], "spec.tasks[0].replicas");
        let quoted = err(
            ErrorType::NotSupported,
            "spec.p",
            Some(json!("x")),
            "supported values: \"a\"",
        );
        assert_eq!(
            quoted.body(),
            "Unsupported value: \"x\": supported values: \"a\""
        );
    }
}
