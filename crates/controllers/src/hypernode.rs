//! HyperNode status: how many nodes each HyperNode holds (`status.nodeCount`), counting
//! through its member HyperNodes, as the scheduler resolves them
//! ([`tephra_scheduler::topology::resolve`]: one way of reading members for both).

pub mod discovery;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use tephra_api::HyperNode;
use tephra_scheduler::topology::{NodeRef, resolve};

/// The HyperNodes whose `status.nodeCount` is not what they hold now, with the count to
/// write, by name.
pub fn stale_node_counts(hypernodes: &[&HyperNode], nodes: &[&Node]) -> Vec<(String, i64)> {
    let empty = BTreeMap::new();
    let refs: Vec<NodeRef<'_>> = nodes
        .iter()
        .filter_map(|n| {
            Some(NodeRef {
                name: n.metadata.name.as_deref()?,
                labels: n.metadata.labels.as_ref().unwrap_or(&empty),
            })
        })
        .collect();
    let sets = resolve(hypernodes, &refs);
    let mut out: Vec<(String, i64)> = hypernodes
        .iter()
        .zip(sets)
        .filter_map(|(h, set)| {
            let count = set.len() as i64;
            let written = h.status.as_ref().and_then(|s| s.node_count);
            // An unset count reads as 0, as Volcano's int field does; write it anyway once,
            // so `kubectl get hn` shows 0 rather than nothing.
            (written != Some(count)).then(|| (h.metadata.name.clone().unwrap_or_default(), count))
        })
        .filter(|(name, _)| !name.is_empty())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, rack: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"rack": rack}}}))
            .expect("node")
    }

    fn hn(name: &str, tier: i64, members: serde_json::Value, count: Option<i64>) -> HyperNode {
        let mut v = json!({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name}, "spec": {"tier": tier, "members": members}
        });
        if let Some(c) = count {
            v["status"] = json!({"nodeCount": c});
        }
        serde_json::from_value(v).expect("hypernode")
    }

    #[test]
    fn counts_go_through_member_hypernodes_and_only_stale_ones_are_written() {
        let nodes = [node("n0", "a"), node("n1", "a"), node("n2", "b")];
        let rack_a = hn(
            "rack-a",
            1,
            json!([{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "a"}}}}]),
            Some(2),
        );
        let rack_b = hn(
            "rack-b",
            1,
            json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "^n2$"}}}]),
            None,
        );
        let spine = hn(
            "spine",
            2,
            json!([{"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-a"}}},
                   {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-b"}}}]),
            Some(1),
        );
        let node_refs: Vec<&Node> = nodes.iter().collect();
        let got = stale_node_counts(&[&rack_a, &rack_b, &spine], &node_refs);
        assert_eq!(
            got,
            vec![("rack-b".to_string(), 1), ("spine".to_string(), 3)]
        );
        // A node gone: rack-a and the spine are stale.
        let got = stale_node_counts(&[&rack_a, &rack_b, &spine], &node_refs[1..]);
        assert_eq!(
            got,
            vec![
                ("rack-a".to_string(), 1),
                ("rack-b".to_string(), 1),
                ("spine".to_string(), 2)
            ]
        );
    }
}
