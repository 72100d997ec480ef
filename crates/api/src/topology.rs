//! `topology.volcano.sh/v1alpha1` HyperNode: a named group of nodes (or of other HyperNodes)
//! that share a network tier — a rack behind one top-of-rack switch, a spine, an NVLink
//! domain. HyperNodes form a tree by tier; a gang with `networkTopology` is placed inside one
//! HyperNode of a bounded tier.
//!
//! Field names and shapes follow Volcano's `HyperNodeSpec`/`HyperNodeStatus`. Every optional
//! field is an `Option` so that what a user or a discovery tool wrote round-trips.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::string_enum;

/// The desired state of a HyperNode (`spec` of `topology.volcano.sh/v1alpha1` HyperNode).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "topology.volcano.sh",
    version = "v1alpha1",
    kind = "HyperNode",
    plural = "hypernodes",
    singular = "hypernode",
    shortname = "hn",
    status = "HyperNodeStatus",
    derive = "PartialEq",
    derive = "Default",
    annotation("helm.sh/resource-policy", "keep"),
    printcolumn = r#"{"name":"Tier","type":"string","jsonPath":".spec.tier"}"#,
    printcolumn = r#"{"name":"TierName","type":"string","jsonPath":".spec.tierName"}"#,
    printcolumn = r#"{"name":"NodeCount","type":"integer","jsonPath":".status.nodeCount"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    doc = "A group of nodes or HyperNodes sharing a network tier (Volcano's HyperNode)."
)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeSpec {
    /// The performance tier: 1 is the closest (fastest) grouping, higher tiers hold lower ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub tier: Option<i64>,

    /// The tier's name (`rack`, `spine`, a node label key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253))]
    pub tier_name: Option<String>,

    /// The nodes or HyperNodes in this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minItems" = 1))]
    pub members: Option<Vec<MemberSpec>>,
}

impl HyperNodeSpec {
    /// The tier (0 when unset, as Volcano's `int` field reads).
    pub fn tier(&self) -> i64 {
        self.tier.unwrap_or(0)
    }

    /// The members (none when unset).
    pub fn members(&self) -> &[MemberSpec] {
        self.members.as_deref().unwrap_or_default()
    }
}

string_enum! {
    /// What a member names: nodes, or HyperNodes of a lower tier.
    pub enum MemberType (schema_enum = true) {
        /// Nodes.
        Node = "Node",
        /// HyperNodes.
        HyperNode = "HyperNode",
    }
}

/// One member of a HyperNode: a node or HyperNode picked by name, by name pattern, or (nodes
/// only) by labels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSpec {
    /// `Node` or `HyperNode`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<MemberType>,
    /// How the member is picked: exactly one of its fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<MemberSelector>,
}

/// A member's selector: exactly one of `exactMatch`, `regexMatch`, `labelMatch`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSelector {
    /// One node or HyperNode by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_match: Option<ExactMatch>,
    /// Every node or HyperNode whose name matches a regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex_match: Option<RegexMatch>,
    /// Every node whose labels match (members of type `Node` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_match: Option<LabelSelector>,
}

/// `selector.exactMatch`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExactMatch {
    /// The node's or HyperNode's name.
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub name: String,
}

/// `selector.regexMatch`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RegexMatch {
    /// A regular expression over names (unanchored, as Go's `regexp.MatchString`).
    #[schemars(extend("minLength" = 1))]
    pub pattern: String,
}

/// The observed state of a HyperNode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// How many nodes the HyperNode holds, counting through member HyperNodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub node_count: Option<i64>,
}
