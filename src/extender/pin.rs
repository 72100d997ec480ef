//! The write that lets a placed pod through the plan gate: a JSON patch that removes the gate
//! and, for a native gang kept to a HyperNode, narrows the pod's required node affinity to
//! that HyperNode's nodes in the same write.
//!
//! Kubernetes lets a gated pod's scheduling directives be narrowed, never widened: a pod with
//! no required node affinity may get one, and each existing `nodeSelectorTerms` entry may get
//! more requirements (an entry is ORed with the others, so the requirement goes into every
//! one). The `test` on the gates makes the write refuse a pod whose gates changed; a pod whose
//! affinity changed since it was read fails its `add` and is written again at the next round.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::api::keys;

/// The requirement a pin adds: the pod's node is one of `nodes`.
fn requirement(nodes: &[String]) -> Value {
    json!({"key": "metadata.name", "operator": "In", "values": nodes})
}

/// The JSON patch that removes the plan gate from a pod whose only gate it is (a placed pod
/// has no other: the session does not place a pod behind another gate, and gates are never
/// added after creation), and with `pin` keeps `pod` to those nodes.
pub fn ungate_patch(
    pod: Option<&Pod>,
    pin: Option<&[String]>,
) -> Result<json_patch::Patch, serde_json::Error> {
    let mut ops = vec![
        json!({"op": "test", "path": "/spec/schedulingGates",
               "value": [{ "name": keys::PLAN_GATE }]}),
        json!({"op": "remove", "path": "/spec/schedulingGates"}),
    ];
    if let (Some(pod), Some(nodes)) = (pod, pin) {
        ops.extend(pin_ops(pod, nodes));
    }
    serde_json::from_value(Value::Array(ops))
}

/// The `add` operations that narrow `pod`'s required node affinity to `nodes`.
fn pin_ops(pod: &Pod, nodes: &[String]) -> Vec<Value> {
    const REQUIRED: &str =
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution";
    let term = json!({"matchFields": [requirement(nodes)]});
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let node_affinity = affinity.and_then(|a| a.node_affinity.as_ref());
    let required = node_affinity.and_then(|n| {
        n.required_during_scheduling_ignored_during_execution
            .as_ref()
    });
    match (affinity, node_affinity, required) {
        (None, _, _) => vec![json!({"op": "add", "path": "/spec/affinity",
            "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [term]}}}})],
        (Some(_), None, _) => vec![json!({"op": "add", "path": "/spec/affinity/nodeAffinity",
            "value": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [term]}}})],
        (Some(_), Some(_), None) => vec![json!({"op": "add", "path": REQUIRED,
            "value": {"nodeSelectorTerms": [term]}})],
        (Some(_), Some(_), Some(r)) if r.node_selector_terms.is_empty() => {
            vec![
                json!({"op": "add", "path": format!("{REQUIRED}/nodeSelectorTerms"),
                "value": [term]}),
            ]
        }
        (Some(_), Some(_), Some(r)) => r
            .node_selector_terms
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let at = format!("{REQUIRED}/nodeSelectorTerms/{i}/matchFields");
                if t.match_fields.is_some() {
                    json!({"op": "add", "path": format!("{at}/-"), "value": requirement(nodes)})
                } else {
                    json!({"op": "add", "path": at, "value": [requirement(nodes)]})
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gated(spec_extra: Value) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}],
                              "schedulingGates": [{"name": keys::PLAN_GATE}]});
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
            s.extend(extra.clone());
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    /// Applies the patch as the API server would and returns the pod.
    fn apply(pod: Value, pin: Option<&[String]>) -> Value {
        let typed: Pod = serde_json::from_value(pod.clone()).unwrap();
        let patch = ungate_patch(Some(&typed), pin).unwrap();
        let mut out = pod;
        json_patch::patch(&mut out, &patch).unwrap();
        out
    }

    fn nodes() -> Vec<String> {
        vec!["n1".into(), "n2".into()]
    }

    #[test]
    fn without_a_pin_only_the_lone_plan_gate_comes_off() {
        let out = apply(gated(json!({})), None);
        assert!(out["spec"].get("schedulingGates").is_none());
        assert!(out["spec"].get("affinity").is_none());
        let mut two =
            gated(json!({"schedulingGates": [{"name": keys::PLAN_GATE}, {"name": "other"}]}));
        let patch = ungate_patch(None, None).unwrap();
        assert!(
            json_patch::patch(&mut two, &patch).is_err(),
            "another gate: refused"
        );
    }

    #[test]
    fn a_pod_without_affinity_gets_a_required_one() {
        let out = apply(gated(json!({})), Some(&nodes()));
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"],
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}]}])
        );
        assert!(out["spec"].get("schedulingGates").is_none());
    }

    #[test]
    fn other_affinity_is_kept_and_node_affinity_added_beside_it() {
        let pod_affinity =
            json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}});
        let out = apply(gated(json!({"affinity": pod_affinity})), Some(&nodes()));
        assert!(out["spec"]["affinity"]["podAffinity"].is_object());
        assert!(out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].is_object());

        let preferred = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}});
        let out = apply(gated(preferred), Some(&nodes()));
        let na = &out["spec"]["affinity"]["nodeAffinity"];
        assert_eq!(
            na["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"],
            1
        );
        assert_eq!(
            na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"]
                [0]["values"],
            json!(["n1", "n2"])
        );
    }

    #[test]
    fn every_existing_term_gets_the_requirement_and_keeps_its_own() {
        let required = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}
        ]}}}});
        let out = apply(gated(required), Some(&nodes()));
        let terms = &out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        assert_eq!(terms[0]["matchExpressions"][0]["key"], "zone");
        assert_eq!(terms[0]["matchFields"][0]["values"], json!(["n1", "n2"]));
        assert_eq!(terms[1]["matchFields"][0]["operator"], "NotIn");
        assert_eq!(terms[1]["matchFields"][1]["values"], json!(["n1", "n2"]));
    }
}
