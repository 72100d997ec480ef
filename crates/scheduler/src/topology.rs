//! Network topology: HyperNodes resolved to the nodes they hold, and the domains a gang with
//! `networkTopology` may be placed in.
//!
//! ```text
//!  HyperNode objects ──▶ resolve(): every HyperNode's members followed (exact name, name
//!  + nodes (name, labels)            pattern, node labels; HyperNode members recursively)
//!                                    down to node positions
//!                          │
//!                          ▼
//!               Topology: domains (name, tier, nodes), ordered by tier then name
//! ```
//!
//! HyperNodes that (through a chain of members) contain each other all hold the nodes of the
//! whole cycle; a member pattern that does not compile picks nothing (the
//! `/hypernodes/validate` webhook refuses it). Both are user mistakes that must not stop
//! scheduling.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use regex::{Regex, RegexBuilder};
use tephra_api::topology::{HyperNode, MemberSelector, MemberType};

use crate::ix::NodeIx;
use crate::plugins::interpod::selects;

/// Largest compiled member pattern (the webhook's limit too): a pattern is a name matcher.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// A node as the resolver sees it.
#[derive(Clone, Copy, Debug)]
pub struct NodeRef<'a> {
    /// Name.
    pub name: &'a str,
    /// Labels.
    pub labels: &'a BTreeMap<String, String>,
}

/// For every HyperNode of `hypernodes` (in that order), the positions in `nodes` of the nodes
/// it holds, sorted.
pub fn resolve(hypernodes: &[&HyperNode], nodes: &[NodeRef<'_>]) -> Vec<BTreeSet<usize>> {
    let node_by_name: HashMap<&str, usize> =
        nodes.iter().enumerate().map(|(i, n)| (n.name, i)).collect();
    let hn_by_name: HashMap<&str, usize> = hypernodes
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.metadata.name.as_deref().map(|n| (n, i)))
        .collect();
    let mut r = Resolver {
        hypernodes,
        nodes,
        node_by_name,
        hn_by_name,
        patterns: HashMap::new(),
    };
    // Each HyperNode's own nodes and member HyperNodes, then everything reachable: a walk of
    // the member graph per HyperNode, so a cycle ends the walk instead of the scheduler.
    let mut direct: Vec<Vec<usize>> = Vec::with_capacity(hypernodes.len());
    let mut children: Vec<Vec<usize>> = Vec::with_capacity(hypernodes.len());
    for h in hypernodes {
        let (mut own, mut sub) = (Vec::new(), Vec::new());
        for m in h.spec.members() {
            let Some(sel) = &m.selector else {
                continue;
            };
            match m.type_.as_ref() {
                Some(MemberType::Node) => own.extend(r.picked_nodes(sel)),
                Some(MemberType::HyperNode) => sub.extend(r.picked_hypernodes(sel)),
                _ => {}
            }
        }
        direct.push(own);
        children.push(sub);
    }
    (0..hypernodes.len())
        .map(|i| {
            let mut seen = vec![false; hypernodes.len()];
            let mut stack = vec![i];
            let mut out = BTreeSet::new();
            seen[i] = true;
            while let Some(k) = stack.pop() {
                out.extend(direct[k].iter().copied());
                for &c in &children[k] {
                    if !std::mem::replace(&mut seen[c], true) {
                        stack.push(c);
                    }
                }
            }
            out
        })
        .collect()
}

struct Resolver<'a, 'n> {
    hypernodes: &'a [&'a HyperNode],
    nodes: &'a [NodeRef<'n>],
    node_by_name: HashMap<&'n str, usize>,
    hn_by_name: HashMap<&'a str, usize>,
    /// Compiled patterns (`None`: does not compile).
    patterns: HashMap<String, Option<Regex>>,
}

/// The compiled pattern (`None`: it does not compile), compiled once per resolve.
fn pattern(patterns: &mut HashMap<String, Option<Regex>>, p: &str) -> Option<Regex> {
    patterns
        .entry(p.to_string())
        .or_insert_with(|| {
            RegexBuilder::new(p)
                .size_limit(PATTERN_SIZE_LIMIT)
                .build()
                .ok()
        })
        .clone()
}

/// The positions among `names` that `sel` picks by exact name or name pattern (`None`: the
/// selector picks by neither).
fn by_name<'n>(
    patterns: &mut HashMap<String, Option<Regex>>,
    sel: &MemberSelector,
    index: &HashMap<&str, usize>,
    names: impl Iterator<Item = Option<&'n str>>,
) -> Option<Vec<usize>> {
    if let Some(e) = &sel.exact_match {
        return Some(index.get(e.name.as_str()).copied().into_iter().collect());
    }
    let r = sel.regex_match.as_ref()?;
    let Some(re) = pattern(patterns, &r.pattern) else {
        return Some(Vec::new());
    };
    Some(
        names
            .enumerate()
            .filter(|(_, n)| n.is_some_and(|n| re.is_match(n)))
            .map(|(i, _)| i)
            .collect(),
    )
}

impl Resolver<'_, '_> {
    fn picked_nodes(&mut self, sel: &MemberSelector) -> Vec<usize> {
        let nodes = self.nodes;
        let names = nodes.iter().map(|n| Some(n.name));
        if let Some(p) = by_name(&mut self.patterns, sel, &self.node_by_name, names) {
            return p;
        }
        match &sel.label_match {
            Some(l) => (0..nodes.len())
                .filter(|&i| selects(Some(l), nodes[i].labels))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Label selectors pick nodes only, as in Volcano.
    fn picked_hypernodes(&mut self, sel: &MemberSelector) -> Vec<usize> {
        let names = self.hypernodes.iter().map(|h| h.metadata.name.as_deref());
        by_name(&mut self.patterns, sel, &self.hn_by_name, names).unwrap_or_default()
    }
}

/// A HyperNode as a session uses it: the nodes a gang placed "inside" it may use.
#[derive(Clone, Debug, PartialEq)]
pub struct Domain {
    /// The HyperNode's name.
    pub name: String,
    /// Its tier.
    pub tier: i64,
    /// Its tier's name (`spec.tierName`), empty when unset.
    pub tier_name: String,
    /// Its nodes, in the session's node order.
    pub nodes: Vec<NodeIx>,
}

/// The HyperNodes of a session, lowest tier first, then by name; HyperNodes holding no node
/// are left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Topology {
    /// The domains.
    pub domains: Vec<Domain>,
}

impl Topology {
    /// Builds the session's topology from HyperNodes resolved to node names.
    pub fn from_resolved<'a>(
        resolved: impl IntoIterator<Item = (&'a str, i64, &'a str, &'a [String])>,
        node_index: impl Fn(&str) -> Option<NodeIx>,
    ) -> Self {
        let mut domains: Vec<Domain> = resolved
            .into_iter()
            .filter_map(|(name, tier, tier_name, names)| {
                let mut nodes: Vec<NodeIx> = names.iter().filter_map(|n| node_index(n)).collect();
                nodes.sort();
                nodes.dedup();
                (!nodes.is_empty()).then(|| Domain {
                    name: name.to_string(),
                    tier,
                    tier_name: tier_name.to_string(),
                    nodes,
                })
            })
            .collect();
        domains.sort_by(|a, b| a.tier.cmp(&b.tier).then_with(|| a.name.cmp(&b.name)));
        Self { domains }
    }

    /// Moves every domain's nodes to their new positions (`None`: the node is gone), keeping
    /// them sorted; domains left without nodes are dropped.
    pub fn renumber(&mut self, new: impl Fn(NodeIx) -> Option<NodeIx>) {
        for d in &mut self.domains {
            d.nodes = d.nodes.iter().filter_map(|&n| new(n)).collect();
            d.nodes.sort();
        }
        self.domains.retain(|d| !d.nodes.is_empty());
    }

    /// No HyperNode holds a node: a gang's `networkTopology` has nothing to act on.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The highest tier whose HyperNodes are named `tier_name` (`spec.tierName`).
    pub fn tier_named(&self, tier_name: &str) -> Option<i64> {
        self.domains
            .iter()
            .filter(|d| d.tier_name == tier_name)
            .map(|d| d.tier)
            .max()
    }

    /// The domains of tier at most `highest` that hold every node of `placed`, lowest tier
    /// first, with their positions in [`Self::domains`].
    pub fn domains_for<'a>(
        &'a self,
        highest: i64,
        placed: &'a [NodeIx],
    ) -> impl Iterator<Item = (usize, &'a Domain)> + 'a {
        self.domains.iter().enumerate().filter(move |(_, d)| {
            d.tier <= highest && placed.iter().all(|n| d.nodes.binary_search(n).is_ok())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ix::Ix;
    use serde_json::json;

    fn hn(name: &str, tier: i64, members: serde_json::Value) -> HyperNode {
        serde_json::from_value(json!({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}
        }))
        .expect("hypernode")
    }

    fn exact(kind: &str, name: &str) -> serde_json::Value {
        json!({"type": kind, "selector": {"exactMatch": {"name": name}}})
    }

    fn names(nodes: &[NodeRef<'_>], set: &BTreeSet<usize>) -> Vec<String> {
        set.iter().map(|&i| nodes[i].name.to_string()).collect()
    }

    #[test]
    fn members_are_followed_by_name_pattern_label_and_through_hypernodes() {
        let rack_a = BTreeMap::from([("rack".to_string(), "a".to_string())]);
        let rack_b = BTreeMap::from([("rack".to_string(), "b".to_string())]);
        let nodes = [
            NodeRef {
                name: "n0",
                labels: &rack_a,
            },
            NodeRef {
                name: "n1",
                labels: &rack_a,
            },
            NodeRef {
                name: "n2",
                labels: &rack_b,
            },
            NodeRef {
                name: "gpu-7",
                labels: &rack_b,
            },
        ];
        let r0 = hn(
            "r0",
            1,
            json!([
                exact("Node", "n0"),
                exact("Node", "n1"),
                exact("Node", "gone")
            ]),
        );
        let r1 = hn(
            "r1",
            1,
            json!([{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "b"}}}}]),
        );
        let g = hn(
            "g",
            1,
            json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}}]),
        );
        let spine = hn(
            "s0",
            2,
            json!([exact("HyperNode", "r0"), {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "r1"}}}]),
        );
        let all = [&r0, &r1, &g, &spine];
        let got = resolve(&all, &nodes);
        assert_eq!(
            names(&nodes, &got[0]),
            ["n0", "n1"],
            "a missing node is skipped"
        );
        assert_eq!(names(&nodes, &got[1]), ["n2", "gpu-7"]);
        assert_eq!(names(&nodes, &got[2]), ["gpu-7"]);
        assert_eq!(names(&nodes, &got[3]), ["n0", "n1", "n2", "gpu-7"]);
    }

    #[test]
    fn a_cycle_or_a_bad_pattern_picks_nothing_more_and_never_loops() {
        let none = BTreeMap::new();
        let nodes = [
            NodeRef {
                name: "n0",
                labels: &none,
            },
            NodeRef {
                name: "n1",
                labels: &none,
            },
        ];
        let a = hn(
            "a",
            2,
            json!([exact("HyperNode", "b"), exact("Node", "n0")]),
        );
        let b = hn(
            "b",
            2,
            json!([exact("HyperNode", "a"), exact("Node", "n1")]),
        );
        let bad = hn(
            "bad",
            1,
            json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "(["}}}]),
        );
        let got = resolve(&[&a, &b, &bad], &nodes);
        assert_eq!(names(&nodes, &got[0]), ["n0", "n1"]);
        assert_eq!(names(&nodes, &got[1]), ["n0", "n1"]);
        assert!(got[2].is_empty());
    }

    #[test]
    fn domains_are_lowest_tier_first_and_filtered_by_tier_and_placed_nodes() {
        let n = |i: usize| NodeIx::new(i);
        let racks = [
            (
                "s0".to_string(),
                2,
                vec!["n0".to_string(), "n1".into(), "n2".into(), "n3".into()],
            ),
            ("r1".to_string(), 1, vec!["n2".to_string(), "n3".into()]),
            ("r0".to_string(), 1, vec!["n1".to_string(), "n0".into()]),
            ("empty".to_string(), 1, vec!["gone".to_string()]),
        ];
        let topo = Topology::from_resolved(
            racks.iter().map(|(a, t, ns)| {
                let tier_name = if *t == 1 { "rack" } else { "spine" };
                (a.as_str(), *t, tier_name, ns.as_slice())
            }),
            |name| {
                name.strip_prefix('n')
                    .and_then(|i| i.parse().ok())
                    .map(NodeIx::new)
            },
        );
        let order: Vec<&str> = topo.domains.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(order, ["r0", "r1", "s0"], "empty domains are dropped");
        assert_eq!(topo.domains[0].nodes, [n(0), n(1)]);
        let names = |highest, placed: &[NodeIx]| -> Vec<String> {
            topo.domains_for(highest, placed)
                .map(|(_, d)| d.name.clone())
                .collect()
        };
        assert_eq!(names(1, &[]), ["r0", "r1"]);
        assert_eq!(names(2, &[n(3)]), ["r1", "s0"]);
        assert_eq!(names(1, &[n(1), n(2)]), Vec::<String>::new());
        assert_eq!(names(2, &[n(1), n(2)]), ["s0"]);
        assert_eq!(topo.tier_named("spine"), Some(2));
        assert_eq!(topo.tier_named("zone"), None);
    }
}
