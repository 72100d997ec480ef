//! The write that lets a placed pod through the plan gate: a JSON patch that removes the gate
//! and, for a native gang kept to a HyperNode, narrows the pod's required node affinity to
//! that HyperNode's nodes in the same write.
//!
//! Kubernetes lets a gated pod's scheduling directives be narrowed, never widened: a pod with
//! no required node affinity may get one, and each existing `nodeSelectorTerms` entry may get
//! more requirements (entries are ORed, so the narrowing goes into every one). A requirement
//! on a node's name (`matchFields` on `metadata.name`) takes a single value, so:
//! - a pod without required terms gets one term per node of the HyperNode (any of them);
//! - a pod with terms gets, in each, `kubernetes.io/hostname In (the nodes' hostnames)`; when a
//!   node has no hostname label that cannot be said, and the pod goes through unpinned.
//!
//! The `test` on the gates makes the write refuse a pod whose gates changed; a pod whose
//! affinity changed since it was read fails its `add` and is written again at the next round.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::api::keys;
use crate::scheduler::index::Pin;

/// What [`ungate_patch`] writes besides the gate's removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pinned {
    /// No pin was asked for.
    No,
    /// The pod's required node affinity is narrowed to the pin's nodes.
    Yes,
    /// A pin was asked for but cannot be written (the pod has terms and a node lacks its
    /// hostname label): the gate comes off without it.
    CannotSay,
}

/// The JSON patch that removes the plan gate from a pod whose only gate it is (a placed pod
/// has no other: the session does not place a pod behind another gate, and gates are never
/// added after creation), and with `pin` keeps `pod` to its nodes.
pub fn ungate_patch(
    pod: Option<&Pod>,
    pin: Option<&Pin>,
) -> Result<(json_patch::Patch, Pinned), serde_json::Error> {
    let mut ops = vec![
        json!({"op": "test", "path": "/spec/schedulingGates",
               "value": [{ "name": keys::PLAN_GATE }]}),
        json!({"op": "remove", "path": "/spec/schedulingGates"}),
    ];
    let pinned = match (pod, pin) {
        (Some(pod), Some(pin)) => match pin_ops(pod, pin) {
            Some(more) => {
                ops.extend(more);
                Pinned::Yes
            }
            None => Pinned::CannotSay,
        },
        _ => Pinned::No,
    };
    Ok((serde_json::from_value(Value::Array(ops))?, pinned))
}

/// One term per node: the pod may go to any of them.
fn one_term_per_node(pin: &Pin) -> Value {
    Value::Array(
        pin.nodes
            .iter()
            .map(|n| json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}))
            .collect(),
    )
}

/// The `add` operations that narrow `pod`'s required node affinity to the pin's nodes, or
/// `None` when that cannot be said.
fn pin_ops(pod: &Pod, pin: &Pin) -> Option<Vec<Value>> {
    const REQUIRED: &str =
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution";
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let node_affinity = affinity.and_then(|a| a.node_affinity.as_ref());
    let required = node_affinity.and_then(|n| {
        n.required_during_scheduling_ignored_during_execution
            .as_ref()
    });
    let terms = one_term_per_node(pin);
    Some(match (affinity, node_affinity, required) {
        (None, _, _) => vec![json!({"op": "add", "path": "/spec/affinity",
            "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": terms}}}})],
        (Some(_), None, _) => vec![json!({"op": "add", "path": "/spec/affinity/nodeAffinity",
            "value": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": terms}}})],
        (Some(_), Some(_), None) => vec![json!({"op": "add", "path": REQUIRED,
            "value": {"nodeSelectorTerms": terms}})],
        (Some(_), Some(_), Some(r)) if r.node_selector_terms.is_empty() => {
            vec![
                json!({"op": "add", "path": format!("{REQUIRED}/nodeSelectorTerms"),
                "value": terms}),
            ]
        }
        (Some(_), Some(_), Some(r)) => {
            let hostnames = pin.hostnames.as_ref()?;
            let requirement = json!({"key": HOSTNAME_LABEL, "operator": "In", "values": hostnames});
            r.node_selector_terms
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let at = format!("{REQUIRED}/nodeSelectorTerms/{i}/matchExpressions");
                    if t.match_expressions.is_some() {
                        json!({"op": "add", "path": format!("{at}/-"), "value": requirement})
                    } else {
                        json!({"op": "add", "path": at, "value": [requirement]})
                    }
                })
                .collect()
        }
    })
}

/// The node label holding a node's host name.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

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

    /// Applies the patch as the API server would and returns the pod and what was pinned.
    fn apply(pod: Value, pin: Option<&Pin>) -> (Value, Pinned) {
        let typed: Pod = serde_json::from_value(pod.clone()).unwrap();
        let (patch, pinned) = ungate_patch(Some(&typed), pin).unwrap();
        let mut out = pod;
        json_patch::patch(&mut out, &patch).unwrap();
        (out, pinned)
    }

    fn pin(hostnames: bool) -> Pin {
        Pin {
            nodes: vec!["n1".into(), "n2".into()],
            hostnames: hostnames.then(|| vec!["h1".into(), "h2".into()]),
        }
    }

    /// The terms a pod without required terms gets: one per node.
    fn per_node() -> Value {
        json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
        ])
    }

    #[test]
    fn without_a_pin_only_the_lone_plan_gate_comes_off() {
        let (out, pinned) = apply(gated(json!({})), None);
        assert_eq!(pinned, Pinned::No);
        assert!(out["spec"].get("schedulingGates").is_none());
        assert!(out["spec"].get("affinity").is_none());
        let mut two =
            gated(json!({"schedulingGates": [{"name": keys::PLAN_GATE}, {"name": "other"}]}));
        let (patch, _) = ungate_patch(None, None).unwrap();
        assert!(
            json_patch::patch(&mut two, &patch).is_err(),
            "another gate: refused"
        );
    }

    #[test]
    fn a_pod_without_affinity_gets_one_term_per_node() {
        let (out, pinned) = apply(gated(json!({})), Some(&pin(false)));
        assert_eq!(pinned, Pinned::Yes);
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"],
            per_node()
        );
        assert!(out["spec"].get("schedulingGates").is_none());
    }

    #[test]
    fn other_affinity_is_kept_and_node_affinity_added_beside_it() {
        let pod_affinity =
            json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}});
        let (out, _) = apply(gated(json!({"affinity": pod_affinity})), Some(&pin(false)));
        assert!(out["spec"]["affinity"]["podAffinity"].is_object());
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"],
            per_node()
        );

        let preferred = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}});
        let (out, _) = apply(gated(preferred), Some(&pin(false)));
        let na = &out["spec"]["affinity"]["nodeAffinity"];
        assert_eq!(
            na["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"],
            1
        );
        assert_eq!(
            na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            per_node()
        );
    }

    #[test]
    fn every_existing_term_gets_the_hostnames_and_keeps_its_own() {
        let required = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}
        ]}}}});
        let (out, pinned) = apply(gated(required.clone()), Some(&pin(true)));
        assert_eq!(pinned, Pinned::Yes);
        let terms = &out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        let hosts =
            json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["h1", "h2"]});
        assert_eq!(terms[0]["matchExpressions"][0]["key"], "zone");
        assert_eq!(terms[0]["matchExpressions"][1], hosts);
        assert_eq!(terms[1]["matchFields"][0]["operator"], "NotIn");
        assert_eq!(terms[1]["matchExpressions"][0], hosts);

        // Without every node's hostname the pin cannot be said: the gate comes off alone.
        let (out, pinned) = apply(gated(required), Some(&pin(false)));
        assert_eq!(pinned, Pinned::CannotSay);
        assert!(out["spec"].get("schedulingGates").is_none());
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchExpressions"].as_array().map(Vec::len),
            Some(1)
        );
    }
}
