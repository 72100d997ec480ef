//! Label and field selectors: parsing the query-string forms kube-apiserver accepts and
//! matching them against stored objects. Selector objects (`metav1.LabelSelector` in webhook
//! configurations and workloads) are kube's [`Selector`]. Pure code.

use std::collections::BTreeMap;

use kube::core::Selector;
use serde_json::Value;

use super::store::Stored;

/// A label selector operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `k=v`, `k==v`.
    Eq,
    /// `k!=v` (also true when the label is absent).
    NotEq,
    /// `k in (a,b)`.
    In,
    /// `k notin (a,b)` (also true when absent).
    NotIn,
    /// `k`.
    Exists,
    /// `!k`.
    NotExists,
    /// `k>5` (integer comparison).
    Gt,
    /// `k<5`.
    Lt,
}

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub op: Op,
    /// Values (one for Eq/NotEq/Gt/Lt, any number for In/NotIn).
    pub values: Vec<String>,
}

/// A label selector: all requirements must hold. Empty matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A label key kube-apiserver accepts (a qualified name), or its refusal worded as kube's.
fn check_key(k: &str) -> Result<(), String> {
    match tephra_names::qualified_name_errors(k).as_slice() {
        [] => Ok(()),
        errs => Err(format!(
            "unable to parse requirement: key: Invalid value: {k:?}: {}",
            errs.join("; ")
        )),
    }
}

/// A label value kube-apiserver accepts, or its refusal worded as kube's.
fn check_value(v: &str) -> Result<(), String> {
    match tephra_names::label_value_errors(v).as_slice() {
        [] => Ok(()),
        errs => Err(format!(
            "unable to parse requirement: values[0]: Invalid value: {v:?}: {}",
            errs.join("; ")
        )),
    }
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, found {rest:?}"))?;
    let values: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    for v in &values {
        check_value(v)?;
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),!h,i`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for term in split_top(s) {
            let term = term.trim();
            if term.is_empty() {
                return Err(format!("empty requirement in selector {s:?}"));
            }
            let req = if let Some(k) = term.strip_prefix('!') {
                Requirement {
                    key: k.trim().to_string(),
                    op: Op::NotExists,
                    values: vec![],
                }
            } else if let Some((k, v)) = term.split_once("!=") {
                Requirement {
                    key: k.trim().into(),
                    op: Op::NotEq,
                    values: vec![v.trim().into()],
                }
            } else if let Some((k, v)) = term.split_once("==") {
                Requirement {
                    key: k.trim().into(),
                    op: Op::Eq,
                    values: vec![v.trim().into()],
                }
            } else if let Some((k, v)) = term.split_once('=') {
                Requirement {
                    key: k.trim().into(),
                    op: Op::Eq,
                    values: vec![v.trim().into()],
                }
            } else if let Some((k, v)) = term.split_once('>') {
                Requirement {
                    key: k.trim().into(),
                    op: Op::Gt,
                    values: vec![v.trim().into()],
                }
            } else if let Some((k, v)) = term.split_once('<') {
                Requirement {
                    key: k.trim().into(),
                    op: Op::Lt,
                    values: vec![v.trim().into()],
                }
            } else if let Some(i) = term.find(" notin ").or_else(|| term.find(" notin(")) {
                Requirement {
                    key: term[..i].trim().into(),
                    op: Op::NotIn,
                    values: parse_set(&term[i + 6..])?,
                }
            } else if let Some(i) = term.find(" in ").or_else(|| term.find(" in(")) {
                Requirement {
                    key: term[..i].trim().into(),
                    op: Op::In,
                    values: parse_set(&term[i + 3..])?,
                }
            } else {
                Requirement {
                    key: term.into(),
                    op: Op::Exists,
                    values: vec![],
                }
            };
            check_key(&req.key)?;
            if matches!(req.op, Op::Eq | Op::NotEq) {
                check_value(&req.values[0])?;
            }
            if matches!(req.op, Op::Gt | Op::Lt) && req.values[0].parse::<i64>().is_err() {
                return Err(format!(
                    "for 'Gt', 'Lt' operators, the value must be an integer: {term:?}"
                ));
            }
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// Whether labels (looked up by `get`) satisfy every requirement.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| {
            let v = get(&r.key);
            match r.op {
                Op::Eq | Op::In => v.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::NotEq | Op::NotIn => v.is_none_or(|v| r.values.iter().all(|x| x != v)),
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
                Op::Gt | Op::Lt => {
                    let (Some(v), Ok(lim)) = (
                        v.and_then(|v| v.parse::<i64>().ok()),
                        r.values[0].parse::<i64>(),
                    ) else {
                        return false;
                    };
                    if r.op == Op::Gt { v > lim } else { v < lim }
                }
            }
        })
    }

    /// Whether a stored object's labels match.
    pub fn matches(&self, obj: &Stored) -> bool {
        self.0.is_empty() || self.matches_with(|k| obj.label(k))
    }
}

/// The selector of a `metav1.LabelSelector` object (`matchLabels` + `matchExpressions`), as
/// kube's [`Selector`]; absent, `null` and `{}` select everything.
pub fn object_selector(v: Option<&Value>) -> Result<Selector, String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(Selector::default());
    };
    let ls: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(v.clone()).map_err(|e| format!("label selector: {e}"))?;
    Selector::try_from(ls).map_err(|e| e.to_string())
}

/// The labels of an object (`metadata.labels`; non-string values read as empty).
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// One term of a field selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldTerm {
    /// Dotted field path (`spec.nodeName`).
    pub field: String,
    /// `=`/`==` (true) or `!=` (false).
    pub equal: bool,
    /// Value compared with the field as a string (absent field = "").
    pub value: String,
}

/// A field selector: all terms must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldTerm>);

impl FieldSelector {
    /// Parses `metadata.name=x,spec.nodeName!=`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self(terms));
        }
        for term in s.split(',') {
            let term = term.trim();
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!("invalid selector: {term:?}; can't understand it"));
            };
            terms.push(FieldTerm {
                field: field.trim().to_string(),
                equal,
                value: value.trim().to_string(),
            });
        }
        Ok(Self(terms))
    }

    /// Whether a stored object matches. The indexed fields are read without parsing the
    /// object; any other dotted path is looked up in the JSON (kube-apiserver only allows a
    /// fixed set per kind; accepting every path is a deliberate leniency).
    pub fn matches(&self, obj: &Stored) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let mut parsed: Option<Value> = None;
        self.0.iter().all(|t| {
            // Borrowed, not copied: a LIST or watch by node name tests every pod of the store.
            let fast = match t.field.as_str() {
                "metadata.name" => Some(Some(obj.name.as_str())),
                "metadata.namespace" => Some(Some(obj.namespace.as_str())),
                "spec.nodeName" => Some(obj.node_name.as_deref()),
                "spec.schedulerName" => Some(obj.scheduler_name.as_deref()),
                "status.phase" => Some(obj.phase.as_deref()),
                _ => None,
            };
            let same = match fast {
                Some(v) => v.unwrap_or_default() == t.value,
                None => {
                    let v = parsed.get_or_insert_with(|| obj.value().unwrap_or(Value::Null));
                    field_string(v, &t.field) == t.value
                }
            };
            same == t.equal
        })
    }
}

/// The value at a dotted path, as a field selector compares it.
pub fn field_string(v: &Value, path: &str) -> String {
    let mut cur = v;
    for p in path.split('.') {
        match cur.get(p) {
            Some(n) => cur = n,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::SelectorExt;
    use serde_json::json;

    fn obj(labels: Value, spec: Value) -> Stored {
        Stored::from_value(
            &json!({"metadata":{"name":"p","namespace":"ns1","labels":labels},"spec":spec,"status":{"phase":"Running"},"involvedObject":{"kind":"Pod"}}),
            1,
        )
        .unwrap()
    }

    #[test]
    fn parses_every_operator() {
        let s = LabelSelector::parse("a=1,b==2,c!=3,d in (x, y),e notin (z),f,!g,h>4").unwrap();
        let ops: Vec<Op> = s.0.iter().map(|r| r.op.clone()).collect();
        assert_eq!(
            ops,
            [
                Op::Eq,
                Op::Eq,
                Op::NotEq,
                Op::In,
                Op::NotIn,
                Op::Exists,
                Op::NotExists,
                Op::Gt
            ]
        );
        assert_eq!(s.0[3].values, ["x", "y"]);
    }

    #[test]
    fn rejects_malformed_selectors() {
        assert!(LabelSelector::parse("a in x").is_err());
        assert!(LabelSelector::parse("a=b c").is_err());
        assert!(LabelSelector::parse("a,,b").is_err());
        assert!(LabelSelector::parse("a>x").is_err());
        // The project's name rules: keys are qualified names, values label values.
        assert!(LabelSelector::parse("-a=b").is_err());
        assert!(LabelSelector::parse("a=b-").is_err());
        assert!(LabelSelector::parse("a in (x,-y)").is_err());
        assert!(LabelSelector::parse("example.com/a=b_c").is_ok());
        assert!(FieldSelector::parse("metadata.name").is_err());
    }

    #[test]
    fn matches_like_kubernetes_including_absent_labels() {
        let o = obj(json!({"app":"web","tier":"front","n":"7"}), json!({}));
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m("app=web"));
        assert!(m("app in (db,web),tier"));
        assert!(m("missing!=x"));
        assert!(m("missing notin (x)"));
        assert!(m("!missing"));
        assert!(m("n>5,n<8"));
        assert!(!m("app!=web"));
        assert!(!m("missing"));
        assert!(!m("app notin (web)"));
        assert!(m(""));
    }

    #[test]
    fn label_selector_objects_match_expressions() {
        let sel = object_selector(Some(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key":"tier","operator":"In","values":["front"]},{"key":"x","operator":"DoesNotExist"}]
        })))
        .unwrap();
        let labels = |v: Value| labels_of(&json!({"metadata": {"labels": v}}));
        assert!(sel.matches(&labels(json!({"app":"web","tier":"front"}))));
        assert!(!sel.matches(&labels(json!({"app":"web"}))));
        assert!(object_selector(None).unwrap().matches(&BTreeMap::new()));
        assert!(
            object_selector(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "Near"}]})
            ))
            .is_err()
        );
    }

    #[test]
    fn field_selectors_on_indexed_and_other_fields() {
        let o = obj(
            json!({}),
            json!({"nodeName":"n1","schedulerName":"volcano"}),
        );
        let m = |s: &str| FieldSelector::parse(s).unwrap().matches(&o);
        assert!(m("metadata.name=p,metadata.namespace==ns1"));
        assert!(m(
            "spec.nodeName=n1,spec.schedulerName=volcano,status.phase=Running"
        ));
        assert!(m("spec.nodeName!=n2"));
        assert!(m("involvedObject.kind=Pod"));
        assert!(!m("spec.nodeName="));
        let unbound = obj(json!({}), json!({}));
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .unwrap()
                .matches(&unbound)
        );
    }
}
