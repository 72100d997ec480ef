//! `/hypernodes/validate` (CREATE, UPDATE): Volcano's HyperNode (`topology.volcano.sh/v1alpha1`)
//! checks. HyperNodes describe the network topology (written by a discovery controller or by
//! hand) that the scheduler places gangs by; the webhook keeps a malformed one out, as
//! Volcano's webhook-manager does.
//!
//! Volcano's webhook checks two things: at least one member, and that a `regexMatch` pattern
//! compiles. The rest of a HyperNode's rules live in its CRD schema (and CEL rules), which an
//! API server without schema validation would skip, so they are checked here too, in the
//! CRD's words (as kube-apiserver reports its schema and CEL rules): member `type` is `Node` or
//! `HyperNode`; a selector names exactly one of `exactMatch`, `regexMatch`, `labelMatch`;
//! `exactMatch.name` is a DNS-1123 subdomain; `regexMatch.pattern` is not empty; `tier` ≥ 0
//! and `tierName` at most 253 bytes. Every problem is reported, one field error each, in
//! member order.

use serde::Deserialize;
use serde_json::Value;

use super::review::{Decision, Operation, Request};
use super::view::ClusterView;
use super::{AdmissionConfig, decode};
use tephra_names::is_dns1123_subdomain;

/// The CRD's pattern for `exactMatch.name` (a DNS-1123 subdomain), quoted in its message.
const SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Largest compiled pattern accepted: a member pattern is a node-name matcher, and the limit
/// bounds the time one review can spend compiling (the regex crate's default is 10 MiB).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The parts of a HyperNode the checks read; unknown fields are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct HyperNode {
    /// `spec`.
    pub spec: HyperNodeSpec,
}

/// `spec` of a HyperNode.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HyperNodeSpec {
    /// Performance tier (0 or more).
    pub tier: Option<i64>,
    /// Name of the tier.
    pub tier_name: Option<String>,
    /// Nodes or HyperNodes in this one.
    pub members: Option<Vec<MemberSpec>>,
}

/// One member of a HyperNode.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct MemberSpec {
    /// `Node` or `HyperNode`.
    #[serde(rename = "type")]
    pub member_type: Option<String>,
    /// How the member's nodes are picked.
    pub selector: Option<MemberSelector>,
}

/// A member's selector: exactly one of its three fields.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MemberSelector {
    /// One node or HyperNode by name.
    pub exact_match: Option<ExactMatch>,
    /// Names matching a regular expression.
    pub regex_match: Option<RegexMatch>,
    /// A label selector (kept as JSON: only its presence is checked).
    pub label_match: Option<Value>,
}

/// `selector.exactMatch`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ExactMatch {
    /// The name to match.
    pub name: Option<String>,
}

/// `selector.regexMatch`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RegexMatch {
    /// The pattern node names are matched with.
    pub pattern: Option<String>,
}

/// `/hypernodes/validate`: CREATE and UPDATE are checked; other operations (which the
/// registration does not send) are answered as bad requests.
pub fn validate(req: &Request, _view: &dyn ClusterView, _cfg: &AdmissionConfig) -> Decision {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Decision::bad_request(format!(
            "invalid operation `{}`, expect operation to be `CREATE` or `UPDATE`",
            req.operation.as_str()
        ));
    }
    let hn: HyperNode = match decode(req) {
        Ok(h) => h,
        Err(d) => return d,
    };
    let errs = problems(&hn);
    if errs.is_empty() {
        Decision::allow()
    } else {
        Decision::deny(errs.join("; "))
    }
}

/// Every problem of a HyperNode (empty: admit), as Kubernetes field errors.
pub fn problems(hn: &HyperNode) -> Vec<String> {
    let spec = &hn.spec;
    let mut out = Vec::new();
    if let Some(tier) = spec.tier
        && tier < 0
    {
        out.push(format!(
            "spec.tier: Invalid value: {tier}: must be greater than or equal to 0"
        ));
    }
    if let Some(name) = spec.tier_name.as_deref()
        && name.len() > 253
    {
        out.push(format!(
            "spec.tierName: Too long: may not be more than 253 bytes (got {})",
            name.len()
        ));
    }
    let members = spec.members.as_deref().unwrap_or_default();
    if members.is_empty() {
        out.push("spec.members: Required value: member must have at least one member".into());
    }
    for (i, member) in members.iter().enumerate() {
        member_problems(&format!("spec.members[{i}]"), member, &mut out);
    }
    out
}

fn member_problems(path: &str, member: &MemberSpec, out: &mut Vec<String>) {
    match member.member_type.as_deref() {
        None | Some("") => out.push(format!("{path}.type: Required value")),
        Some("Node" | "HyperNode") => {}
        Some(other) => out.push(format!(
            "{path}.type: Unsupported value: {other:?}: supported values: \"Node\", \"HyperNode\""
        )),
    }
    // A member without a selector matches nothing (Go clients always send one, `{}` at least,
    // which the CEL rule below refuses).
    let Some(sel) = member.selector.as_ref() else {
        out.push(format!(
            "{path}.selector: Required value: Either ExactMatch or RegexMatch or LabelMatch must be specified"
        ));
        return;
    };
    let given = [
        sel.exact_match.is_some(),
        sel.regex_match.is_some(),
        sel.label_match.is_some(),
    ]
    .into_iter()
    .filter(|g| *g)
    .count();
    match given {
        0 => out.push(format!(
            "{path}.selector: Invalid value: \"object\": Either ExactMatch or RegexMatch or LabelMatch must be specified"
        )),
        1 => {}
        _ => out.push(format!(
            "{path}.selector: Invalid value: \"object\": Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
        )),
    }
    if let Some(exact) = sel.exact_match.as_ref() {
        let field = format!("{path}.selector.exactMatch.name");
        match exact.name.as_deref() {
            None => out.push(format!("{field}: Required value")),
            Some("") => out.push(format!(
                "{field}: Invalid value: \"\": should be at least 1 chars long"
            )),
            Some(name) if name.len() > 253 => out.push(format!(
                "{field}: Too long: may not be more than 253 bytes (got {})",
                name.len()
            )),
            Some(name) if !is_dns1123_subdomain(name) => out.push(format!(
                "{field}: Invalid value: {name:?}: should match '{SUBDOMAIN_PATTERN}'"
            )),
            Some(_) => {}
        }
    }
    if let Some(regex) = sel.regex_match.as_ref() {
        let field = format!("{path}.selector.regexMatch.pattern");
        match regex.pattern.as_deref() {
            None => out.push(format!("{field}: Required value")),
            Some("") => out.push(format!(
                "{field}: Invalid value: \"\": should be at least 1 chars long"
            )),
            Some(pattern) => {
                if let Some(why) = pattern_error(pattern) {
                    out.push(format!(
                        "{field}: Invalid value: {pattern:?}: member regexMatch pattern is invalid: {why}"
                    ));
                }
            }
        }
    }
}

/// Why `pattern` does not compile, in one line (`None` when it does). The regex crate's
/// syntax errors span several lines (the pattern, a caret, the reason): only the reason is
/// kept.
fn pattern_error(pattern: &str) -> Option<String> {
    let err = regex::RegexBuilder::new(pattern)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .err()?;
    let text = err.to_string();
    let reason = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("does not compile");
    Some(reason.strip_prefix("error: ").unwrap_or(reason).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{request, update};
    use crate::view::StaticView;
    use serde_json::json;

    fn hypernode(spec: Value) -> Value {
        json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
               "metadata": {"name": "hn"}, "spec": spec})
    }

    fn check_op(op: &str, spec: Value) -> Decision {
        validate(
            &request("HyperNode", op, hypernode(spec)),
            &StaticView::default(),
            &AdmissionConfig::default(),
        )
    }

    /// The denial message for `spec` on CREATE (`None` when admitted).
    fn denial(spec: Value) -> Option<String> {
        check_op("CREATE", spec).denial().map(str::to_string)
    }

    fn node(selector: Value) -> Value {
        json!({"type": "Node", "selector": selector})
    }

    #[test]
    fn valid_hypernodes_are_admitted() {
        for selector in [
            json!({"exactMatch": {"name": "node-1"}}),
            json!({"exactMatch": {"name": "rack.a-1"}}),
            json!({"regexMatch": {"pattern": "node-[0-9]+"}}),
            json!({"labelMatch": {"matchLabels": {"topology-rack": "rack1"}}}),
            json!({"labelMatch": {}}),
        ] {
            let spec = json!({"tier": 1, "members": [node(selector.clone())]});
            assert_eq!(denial(spec), None, "{selector}");
        }
        let nested = json!({"tier": 2, "tierName": "spine", "members": [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}},
            {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^s[1-9]$"}}}]});
        assert_eq!(denial(nested), None);
    }

    #[test]
    fn members_are_required() {
        let want = "spec.members: Required value: member must have at least one member";
        assert_eq!(
            denial(json!({"tier": 1, "members": []})).as_deref(),
            Some(want)
        );
        assert_eq!(denial(json!({"tier": 1})).as_deref(), Some(want));
        assert_eq!(
            denial(json!({"tier": 1, "members": null})).as_deref(),
            Some(want)
        );
    }

    #[test]
    fn a_regex_pattern_must_compile() {
        assert_eq!(
            denial(
                json!({"tier": 1, "members": [node(json!({"regexMatch": {"pattern": "a(b"}}))]})
            )
            .as_deref(),
            Some(
                "spec.members[0].selector.regexMatch.pattern: Invalid value: \"a(b\": member regexMatch pattern is invalid: unclosed group"
            )
        );
        assert_eq!(
            denial(json!({"tier": 1, "members": [
                node(json!({"exactMatch": {"name": "n0"}})),
                node(json!({"regexMatch": {"pattern": "x[z-a]"}}))]}))
            .as_deref(),
            Some(
                "spec.members[1].selector.regexMatch.pattern: Invalid value: \"x[z-a]\": member regexMatch pattern is invalid: invalid character class range, the start must be <= the end"
            )
        );
    }

    #[test]
    fn a_pattern_too_large_to_compile_is_refused_in_one_line() {
        let huge = "(a{1000}){1000}";
        let msg =
            denial(json!({"tier": 1, "members": [node(json!({"regexMatch": {"pattern": huge}}))]}))
                .unwrap();
        assert!(
            msg.starts_with(&format!(
                "spec.members[0].selector.regexMatch.pattern: Invalid value: {huge:?}: member regexMatch pattern is invalid: "
            )),
            "{msg}"
        );
        assert!(!msg.contains('\n'), "{msg}");
    }

    #[test]
    fn empty_selector_fields_are_refused_in_the_crd_words() {
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({"exactMatch": {"name": ""}}))]}))
                .as_deref(),
            Some(
                "spec.members[0].selector.exactMatch.name: Invalid value: \"\": should be at least 1 chars long"
            )
        );
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({"regexMatch": {"pattern": ""}}))]}))
                .as_deref(),
            Some(
                "spec.members[0].selector.regexMatch.pattern: Invalid value: \"\": should be at least 1 chars long"
            )
        );
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({"exactMatch": {}}))]})).as_deref(),
            Some("spec.members[0].selector.exactMatch.name: Required value")
        );
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({"regexMatch": {}}))]})).as_deref(),
            Some("spec.members[0].selector.regexMatch.pattern: Required value")
        );
    }

    #[test]
    fn an_exact_name_must_be_a_dns_subdomain() {
        for bad in ["Node_with_invalid@characters", "-node", "node.", "a..b"] {
            assert_eq!(
                denial(json!({"tier": 1, "members": [node(json!({"exactMatch": {"name": bad}}))]})),
                Some(format!(
                    "spec.members[0].selector.exactMatch.name: Invalid value: {bad:?}: should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"
                )),
                "{bad}"
            );
        }
        let long = format!("{}.{}", "a".repeat(200), "b".repeat(53));
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({"exactMatch": {"name": long}}))]}))
                .as_deref(),
            Some(
                "spec.members[0].selector.exactMatch.name: Too long: may not be more than 253 bytes (got 254)"
            )
        );
        let longest = format!("{}.{}", "a".repeat(200), "b".repeat(52));
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({"exactMatch": {"name": longest}}))]})),
            None
        );
    }

    #[test]
    fn a_selector_names_exactly_one_way() {
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({}))]})).as_deref(),
            Some(
                "spec.members[0].selector: Invalid value: \"object\": Either ExactMatch or RegexMatch or LabelMatch must be specified"
            )
        );
        assert_eq!(
            denial(json!({"tier": 1, "members": [{"type": "Node"}]})).as_deref(),
            Some(
                "spec.members[0].selector: Required value: Either ExactMatch or RegexMatch or LabelMatch must be specified"
            )
        );
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({
                "exactMatch": {"name": "n"}, "regexMatch": {"pattern": "n.*"}}))]}))
            .as_deref(),
            Some(
                "spec.members[0].selector: Invalid value: \"object\": Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
            )
        );
        assert_eq!(
            denial(json!({"tier": 1, "members": [node(json!({
                "exactMatch": {"name": "n"}, "regexMatch": {"pattern": "n.*"}, "labelMatch": {}}))]}))
            .as_deref(),
            Some(
                "spec.members[0].selector: Invalid value: \"object\": Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
            )
        );
    }

    #[test]
    fn member_type_tier_and_tier_name() {
        let sel = json!({"exactMatch": {"name": "n"}});
        assert_eq!(
            denial(json!({"tier": 1, "members": [{"selector": sel}]})).as_deref(),
            Some("spec.members[0].type: Required value")
        );
        assert_eq!(
            denial(json!({"tier": 1, "members": [{"type": "Rack", "selector": sel}]})).as_deref(),
            Some(
                "spec.members[0].type: Unsupported value: \"Rack\": supported values: \"Node\", \"HyperNode\""
            )
        );
        assert_eq!(
            denial(json!({"tier": -1, "members": [node(sel.clone())]})).as_deref(),
            Some("spec.tier: Invalid value: -1: must be greater than or equal to 0")
        );
        let long = "t".repeat(254);
        assert_eq!(
            denial(json!({"tier": 0, "tierName": long, "members": [node(sel.clone())]})).as_deref(),
            Some("spec.tierName: Too long: may not be more than 253 bytes (got 254)")
        );
        assert_eq!(
            denial(json!({"tier": 0, "tierName": "t".repeat(253), "members": [node(sel)]})),
            None
        );
    }

    #[test]
    fn every_problem_is_reported() {
        let msg = denial(json!({"tier": -2, "members": [
            node(json!({"regexMatch": {"pattern": "("}})),
            {"type": "Switch", "selector": {"exactMatch": {"name": "ok"}}}]}))
        .unwrap();
        let parts: Vec<&str> = msg.split("; ").collect();
        assert_eq!(parts.len(), 3, "{msg}");
        assert!(parts[0].starts_with("spec.tier:"), "{msg}");
        assert!(
            parts[1].starts_with("spec.members[0].selector.regexMatch.pattern:"),
            "{msg}"
        );
        assert!(parts[2].starts_with("spec.members[1].type:"), "{msg}");
    }

    #[test]
    fn updates_are_checked_like_creates() {
        let good = hypernode(
            json!({"tier": 1, "members": [node(json!({"exactMatch": {"name": "node-1"}}))]}),
        );
        let mut emptied = good.clone();
        emptied["spec"]["members"] = json!([]);
        let d = validate(
            &update("HyperNode", good.clone(), emptied),
            &StaticView::default(),
            &AdmissionConfig::default(),
        );
        assert_eq!(
            d.denial(),
            Some("spec.members: Required value: member must have at least one member")
        );
        let mut changed = good.clone();
        changed["spec"]["members"] =
            json!([node(json!({"regexMatch": {"pattern": "node-[1-5]"}}))]);
        let d = validate(
            &update("HyperNode", good, changed),
            &StaticView::default(),
            &AdmissionConfig::default(),
        );
        assert!(d.is_allowed(), "{:?}", d.denial());
    }

    #[test]
    fn other_operations_and_unreadable_objects_are_bad_requests() {
        let d = check_op("DELETE", json!({"tier": 1}));
        assert_eq!(
            d.denial(),
            Some("invalid operation `DELETE`, expect operation to be `CREATE` or `UPDATE`")
        );
        let d = check_op("CREATE", json!({"tier": "one"}));
        let msg = d.denial().unwrap();
        assert!(
            msg.starts_with("cannot decode the HyperNode object: spec.tier: invalid type"),
            "{msg}"
        );
    }
}
