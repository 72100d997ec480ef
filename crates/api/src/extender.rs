//! The kube-scheduler extender wire types (`k8s.io/kube-scheduler/extender/v1`), with the field
//! names Go's `encoding/json` gives them (the Go structs carry no json tags, so the names are the
//! Go field names: `Pod`, `Nodes`, `NodeNames`, ...).
//!
//! Objects kube-scheduler sends whole (the pod, nodes, victims) are kept as raw JSON text and
//! only the few fields tephra reads are decoded: a filter request of 5,000 nodes is decoded in
//! one pass without building 5,000 `Node` values, and the nodes kept are echoed back verbatim.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

/// `extenderv1.MaxExtenderPriority`: the top of the extender score scale.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// The parts of a `v1.Pod` the extender reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodRef {
    /// `metadata`.
    #[serde(default)]
    pub metadata: PodMeta,
}

/// The parts of a pod's `metadata` the extender reads.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodMeta {
    /// Pod name.
    #[serde(default)]
    pub name: String,
    /// Pod namespace.
    #[serde(default)]
    pub namespace: String,
    /// Pod uid.
    #[serde(default)]
    pub uid: String,
}

/// A node object kept as text, with its name decoded.
#[derive(Clone, Debug)]
pub struct RawNode {
    /// `metadata.name`.
    pub name: String,
    /// The object as sent.
    pub raw: Box<RawValue>,
}

impl<'de> Deserialize<'de> for RawNode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Meta {
            #[serde(default)]
            name: String,
        }
        #[derive(Deserialize)]
        struct Named {
            #[serde(default)]
            metadata: Option<Meta>,
        }
        let raw = Box::<RawValue>::deserialize(d)?;
        let named: Named = serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(Self {
            name: named.metadata.map(|m| m.name).unwrap_or_default(),
            raw,
        })
    }
}

impl Serialize for RawNode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(s)
    }
}

/// A `v1.NodeList` whose items are kept as text.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct NodeList {
    /// `items`.
    #[serde(default)]
    pub items: Vec<RawNode>,
}

/// A node name of a `NodeNames` request, borrowed from the body when it has no escapes (node
/// names never do): a 5,000-name body is then decoded without 5,000 allocations, which is most
/// of what a filter answer costs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeName<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for NodeName<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a node name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(Visitor).map(NodeName)
    }
}

/// `ExtenderArgs`: the body of filter and prioritize. With `nodeCacheCapable: true`
/// kube-scheduler sends `NodeNames` (and `Nodes: null`); otherwise whole `Nodes`. Decode it with
/// `serde_json::from_slice` (or `from_str`) so the names borrow from the body.
#[derive(Debug, Deserialize)]
pub struct ExtenderArgs<'a> {
    /// The pod being scheduled, as text (decoded in full only when the index does not know it).
    #[serde(rename = "Pod")]
    pub pod: Box<RawValue>,
    /// Full node objects (`nodeCacheCapable: false`).
    #[serde(rename = "Nodes", default)]
    pub nodes: Option<NodeList>,
    /// Node names (`nodeCacheCapable: true`).
    #[serde(rename = "NodeNames", default, borrow)]
    pub node_names: Option<Vec<NodeName<'a>>>,
}

impl ExtenderArgs<'_> {
    /// The candidate node names, whichever form was sent (`None` when neither was).
    pub fn candidate_names(&self) -> Option<Vec<&str>> {
        if let Some(names) = &self.node_names {
            return Some(names.iter().map(|n| n.0.as_ref()).collect());
        }
        self.nodes
            .as_ref()
            .map(|l| l.items.iter().map(|n| n.name.as_str()).collect())
    }

    /// The pod's identity.
    pub fn pod_ref(&self) -> Result<PodRef, serde_json::Error> {
        serde_json::from_str(self.pod.get())
    }
}

/// `FailedNodesMap`: node name → reason.
pub type FailedNodesMap = BTreeMap<String, String>;

/// `ExtenderFilterResult`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct ExtenderFilterResult {
    /// The nodes kept, in the full form (answer to a `Nodes` request).
    #[serde(rename = "Nodes")]
    pub nodes: Option<NodeList>,
    /// The nodes kept, by name (answer to a `NodeNames` request).
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<String>>,
    /// Nodes that do not fit, with why; kube-scheduler may retry them after preemption.
    #[serde(rename = "FailedNodes", default)]
    pub failed_nodes: FailedNodesMap,
    /// Nodes that preemption would not help.
    #[serde(rename = "FailedAndUnresolvableNodes", default)]
    pub failed_and_unresolvable_nodes: FailedNodesMap,
    /// A whole-request error; kube-scheduler treats the pod as unschedulable this cycle.
    #[serde(rename = "Error", default)]
    pub error: String,
}

/// `HostPriority`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct HostPriority {
    /// Node name.
    #[serde(rename = "Host")]
    pub host: String,
    /// 0..=[`MAX_EXTENDER_PRIORITY`].
    #[serde(rename = "Score")]
    pub score: i64,
}

/// `ExtenderBindingArgs`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct ExtenderBindingArgs {
    /// Pod name.
    #[serde(rename = "PodName", default)]
    pub pod_name: String,
    /// Pod namespace.
    #[serde(rename = "PodNamespace", default)]
    pub pod_namespace: String,
    /// Pod uid.
    #[serde(rename = "PodUID", default)]
    pub pod_uid: String,
    /// The node to bind to.
    #[serde(rename = "Node", default)]
    pub node: String,
}

impl ExtenderBindingArgs {
    /// The `core/v1` Binding that puts the pod on the node: the body of a POST to the pod's
    /// `binding` subresource, as kube-scheduler's own binder writes it (the uid makes the API
    /// refuse it for a pod deleted and made again under the same name).
    pub fn binding(&self) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": self.pod_name,
                "namespace": self.pod_namespace,
                "uid": self.pod_uid,
            },
            "target": { "apiVersion": "v1", "kind": "Node", "name": self.node },
        })
    }
}

/// `ExtenderBindingResult`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct ExtenderBindingResult {
    /// Empty on success.
    #[serde(rename = "Error", default)]
    pub error: String,
}

/// `MetaPod`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct MetaPod {
    /// Pod uid.
    #[serde(rename = "UID", default)]
    pub uid: String,
}

/// `MetaVictims`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct MetaVictims {
    /// Victims by uid.
    #[serde(rename = "Pods", default)]
    pub pods: Vec<MetaPod>,
    /// Disruption budgets the victims would violate.
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// `Victims`: whole victim pods.
#[derive(Debug, Default, Deserialize)]
pub struct Victims {
    /// Victim pods.
    #[serde(rename = "Pods", default)]
    pub pods: Vec<PodRef>,
    /// Disruption budgets the victims would violate.
    #[serde(rename = "NumPDBViolations", default)]
    pub num_pdb_violations: i64,
}

/// `ExtenderPreemptionArgs`: kube-scheduler sends `NodeNameToMetaVictims` to a
/// `nodeCacheCapable` extender and `NodeNameToVictims` otherwise.
#[derive(Debug, Deserialize)]
pub struct ExtenderPreemptionArgs {
    /// The preemptor.
    #[serde(rename = "Pod")]
    pub pod: Box<RawValue>,
    /// Whole victims per node.
    #[serde(rename = "NodeNameToVictims", default)]
    pub node_name_to_victims: Option<BTreeMap<String, Option<Victims>>>,
    /// Victims by uid per node.
    #[serde(rename = "NodeNameToMetaVictims", default)]
    pub node_name_to_meta_victims: Option<BTreeMap<String, Option<MetaVictims>>>,
}

impl ExtenderPreemptionArgs {
    /// The victims per node in one form, whichever was sent.
    pub fn meta_victims(&self) -> BTreeMap<String, MetaVictims> {
        if let Some(m) = &self.node_name_to_meta_victims {
            return m
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().unwrap_or_default()))
                .collect();
        }
        self.node_name_to_victims
            .iter()
            .flatten()
            .map(|(k, v)| {
                let v = v.as_ref();
                (
                    k.clone(),
                    MetaVictims {
                        pods: v
                            .map(|v| {
                                v.pods
                                    .iter()
                                    .map(|p| MetaPod {
                                        uid: p.metadata.uid.clone(),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        num_pdb_violations: v.map_or(0, |v| v.num_pdb_violations),
                    },
                )
            })
            .collect()
    }
}

/// `ExtenderPreemptionResult`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct ExtenderPreemptionResult {
    /// The nodes whose victims are accepted.
    #[serde(rename = "NodeNameToMetaVictims", default)]
    pub node_name_to_meta_victims: BTreeMap<String, MetaVictims>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_use_go_field_names() {
        let r = serde_json::to_value(ExtenderFilterResult {
            node_names: Some(vec!["n1".into()]),
            ..ExtenderFilterResult::default()
        })
        .unwrap();
        assert_eq!(
            r,
            json!({"Nodes": null, "NodeNames": ["n1"], "FailedNodes": {},
                   "FailedAndUnresolvableNodes": {}, "Error": ""})
        );
        let h = serde_json::to_value(HostPriority {
            host: "n1".into(),
            score: 10,
        })
        .unwrap();
        assert_eq!(h, json!({"Host": "n1", "Score": 10}));
        let b = serde_json::to_value(ExtenderBindingResult::default()).unwrap();
        assert_eq!(b, json!({"Error": ""}));
    }

    #[test]
    fn requests_parse_as_go_marshals_them() {
        // Decoded from text, as the handler does (the names borrow from it).
        let text = json!({
            "Pod": {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {}},
            "Nodes": null, "NodeNames": ["a", "b"]
        })
        .to_string();
        let args: ExtenderArgs = serde_json::from_str(&text).unwrap();
        assert_eq!(args.candidate_names(), Some(vec!["a", "b"]));
        assert!(matches!(
            args.node_names.as_deref(),
            Some([NodeName(Cow::Borrowed("a")), ..])
        ));
        assert_eq!(args.pod_ref().unwrap().metadata.uid, "u");
        let text = json!({"Pod": {}, "NodeNames": ["a\u{e9}", "tab\t"]}).to_string();
        let escaped: ExtenderArgs = serde_json::from_str(&text).unwrap();
        assert_eq!(escaped.candidate_names(), Some(vec!["a\u{e9}", "tab\t"]));
        let text = json!({
            "Pod": {"metadata": {"uid": "u"}},
            "Nodes": {"metadata": {}, "items": [{"metadata": {"name": "a", "uid": "x"}}]},
            "NodeNames": null
        })
        .to_string();
        let full: ExtenderArgs = serde_json::from_str(&text).unwrap();
        assert_eq!(full.candidate_names(), Some(vec!["a"]));
        let bind: ExtenderBindingArgs = serde_json::from_value(json!({
            "PodName": "p", "PodNamespace": "ns", "PodUID": "u", "Node": "a"
        }))
        .unwrap();
        assert_eq!((bind.pod_uid.as_str(), bind.node.as_str()), ("u", "a"));
        let pre: ExtenderPreemptionArgs = serde_json::from_value(json!({
            "Pod": {}, "NodeNameToVictims": {"a": {"Pods": [{"metadata": {"uid": "v"}}], "NumPDBViolations": 1}},
            "NodeNameToMetaVictims": null
        }))
        .unwrap();
        let m = pre.meta_victims();
        assert_eq!(m["a"].pods, vec![MetaPod { uid: "v".into() }]);
        assert_eq!(m["a"].num_pdb_violations, 1);
    }
}
