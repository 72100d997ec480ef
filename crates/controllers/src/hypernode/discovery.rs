//! Label-based HyperNode discovery, as Volcano's `label` discoverer does it: nodes grouped by
//! label keys, one tier per key, into HyperNodes the controller creates, keeps and deletes.
//!
//! The configuration is Volcano's controller configuration (`volcano-controller.conf`):
//!
//! ```yaml
//! networkTopologyDiscovery:
//! - source: label
//!   enabled: true
//!   config:
//!     networkTopologyTypes:
//!       topologyA3:                              # a name of at most 20 characters
//!       - nodeLabel: volcano.sh/hypercluster     # the highest tier first ...
//!       - nodeLabel: volcano.sh/hypernode
//!       - nodeLabel: kubernetes.io/hostname      # ... the node itself last
//! ```
//!
//! A topology type's labels read from the top tier down to the node: the last one names the
//! node and makes no HyperNode, the one before it is tier 1 (members: nodes), the one before
//! that tier 2 (members: the tier-1 HyperNodes), and so on. Every distinct value of a tier's
//! label is one HyperNode; a node lacking a tier's label stops there (it is in the lower tiers'
//! HyperNodes only). Discovered HyperNodes carry the labels `volcano.sh/network-topology-source:
//! label` and `<key>: <value>`, and are named `hypernode-<type>-tier<N>-<suffix>`. A HyperNode
//! Volcano's discoverer made is recognised by those labels and kept under its name; new ones
//! get a suffix derived from the type, tier and label value, so a restarted controller picks
//! the same names rather than random ones. Only HyperNodes with the `label` source are ever
//! changed or deleted.
//!
//! Other sources (`ufm`, `roce`) need their fabric managers; they are read, reported as not
//! run, and left alone.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::Hasher;

use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;
use tephra_api::keys::NETWORK_TOPOLOGY_SOURCE;
use tephra_api::topology::{ExactMatch, MemberSelector, MemberSpec, MemberType};
use tephra_api::{HyperNode, HyperNodeSpec};

/// The value of `volcano.sh/network-topology-source` on HyperNodes this discovery owns.
pub const LABEL_SOURCE: &str = "label";

/// Volcano's bound on a topology type's name (it goes into HyperNode names).
const TYPE_NAME_MAX: usize = 20;

/// Why a controller configuration cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DiscoveryConfigError {
    /// The text is not the expected YAML.
    #[error("not a controller configuration: {0}")]
    Parse(String),
    /// A topology type's name is too long to go into HyperNode names.
    #[error("network topology type {name:?} is {len} characters long; at most 20 are allowed")]
    TypeNameTooLong {
        /// The type.
        name: String,
        /// Its length.
        len: usize,
    },
    /// A topology type names one label twice.
    #[error("network topology type {name:?} names the label {label:?} twice")]
    DuplicateLabel {
        /// The type.
        name: String,
        /// The label key.
        label: String,
    },
    /// A topology type names an empty label key.
    #[error("network topology type {name:?} has an empty nodeLabel")]
    EmptyLabel {
        /// The type.
        name: String,
    },
    /// A topology type has fewer than two labels: no tier above the node.
    #[error(
        "network topology type {name:?} needs at least two labels: one per tier, the highest first, and the node's (kubernetes.io/hostname) last"
    )]
    NoTier {
        /// The type.
        name: String,
    },
}

/// What a controller configuration asks of HyperNode discovery.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// The label discovery, when enabled.
    pub label: Option<LabelDiscovery>,
    /// Enabled sources tephra does not run (`ufm`, `roce`, ...), by name.
    pub not_run: Vec<String>,
}

/// Label discovery's topology types, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelDiscovery {
    /// The types, sorted by name.
    pub types: Vec<TopologyType>,
}

/// One topology type: the label key of each tier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyType {
    /// The type's name as configured.
    pub name: String,
    /// Label keys from tier 1 (closest to the nodes) upwards.
    pub tiers: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct LabelConfig {
    #[serde(default)]
    network_topology_types: BTreeMap<String, Vec<NodeLabel>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeLabel {
    #[serde(default)]
    node_label: String,
}

/// Reads a controller configuration (`volcano-controller.conf`). Every enabled source is
/// taken: `label` is checked whole (one bad topology type refuses the file, so a typo is not
/// a silently missing tier), the others are listed in [`DiscoveryConfig::not_run`].
pub fn parse(text: &str) -> Result<DiscoveryConfig, DiscoveryConfigError> {
    // Sources' `config` blocks differ in shape: each is read once its source is known.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Loose {
        #[serde(default)]
        network_topology_discovery: Vec<serde_json::Value>,
    }
    let loose: Loose = if text.trim().is_empty() {
        Loose {
            network_topology_discovery: Vec::new(),
        }
    } else {
        serde_saphyr::from_str(text).map_err(|e| DiscoveryConfigError::Parse(e.to_string()))?
    };
    let mut out = DiscoveryConfig::default();
    for raw in loose.network_topology_discovery {
        let name = raw.get("source").and_then(|s| s.as_str()).unwrap_or("");
        let enabled = raw
            .get("enabled")
            .and_then(|e| e.as_bool())
            .unwrap_or(false);
        if !enabled {
            continue;
        }
        if name != LABEL_SOURCE {
            out.not_run.push(name.to_string());
            continue;
        }
        let config = match raw.get("config") {
            None | Some(serde_json::Value::Null) => LabelConfig::default(),
            Some(c) => serde_json::from_value(c.clone()).map_err(|e| {
                DiscoveryConfigError::Parse(format!("the label source's config: {e}"))
            })?,
        };
        out.label = Some(label_discovery(config)?);
    }
    Ok(out)
}

fn label_discovery(config: LabelConfig) -> Result<LabelDiscovery, DiscoveryConfigError> {
    let mut types = Vec::new();
    for (name, labels) in config.network_topology_types {
        let len = name.chars().count();
        if len > TYPE_NAME_MAX {
            return Err(DiscoveryConfigError::TypeNameTooLong { name, len });
        }
        let mut seen = HashSet::new();
        for l in &labels {
            if l.node_label.is_empty() {
                return Err(DiscoveryConfigError::EmptyLabel { name });
            }
            if !seen.insert(l.node_label.as_str()) {
                return Err(DiscoveryConfigError::DuplicateLabel {
                    name,
                    label: l.node_label.clone(),
                });
            }
        }
        if labels.len() < 2 {
            return Err(DiscoveryConfigError::NoTier { name });
        }
        // The last label names the node; the rest, read backwards, are tiers 1, 2, ...
        let tiers = labels[..labels.len() - 1]
            .iter()
            .rev()
            .map(|l| l.node_label.clone())
            .collect();
        types.push(TopologyType { name, tiers });
    }
    Ok(LabelDiscovery { types })
}

/// What to write so the cluster's HyperNodes are the discovered ones.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiscoveryPlan {
    /// New HyperNodes.
    pub create: Vec<HyperNode>,
    /// Existing HyperNodes (with their resourceVersion) whose spec or labels change.
    pub update: Vec<HyperNode>,
    /// Names of discovered HyperNodes that no node's labels call for any more.
    pub delete: Vec<String>,
}

impl DiscoveryPlan {
    /// Whether nothing needs writing.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// One discovered grouping: a topology type's tier and a value of its label.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Group {
    type_name: String,
    tier: usize,
    key: String,
    value: String,
}

impl Group {
    fn prefix(&self) -> String {
        format!("hypernode-{}-tier{}", clean(&self.type_name), self.tier)
    }
}

/// The HyperNodes the nodes' labels call for, against the ones that exist: what to create,
/// update and delete. Deterministic: the same inputs give the same plan, in name order.
pub fn plan(discovery: &LabelDiscovery, nodes: &[&Node], existing: &[&HyperNode]) -> DiscoveryPlan {
    let by_name: BTreeMap<&str, &HyperNode> = existing
        .iter()
        .filter_map(|h| Some((h.metadata.name.as_deref()?, *h)))
        .collect();
    let owned = |h: &HyperNode| {
        h.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NETWORK_TOPOLOGY_SOURCE))
            .is_some_and(|s| s == LABEL_SOURCE)
    };

    // Every group with its members, nodes in name order so names are picked the same way
    // every time.
    let mut sorted: Vec<&Node> = nodes.to_vec();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut names = Names::new(&by_name, &owned);
    let mut groups: BTreeMap<Group, BTreeSet<String>> = BTreeMap::new();
    let mut group_names: BTreeMap<Group, String> = BTreeMap::new();
    for node in sorted {
        let Some(node_name) = node.metadata.name.as_deref() else {
            continue;
        };
        let labels = node.metadata.labels.as_ref();
        for t in &discovery.types {
            let mut member = node_name.to_string();
            for (i, key) in t.tiers.iter().enumerate() {
                let Some(value) = labels.and_then(|l| l.get(key)) else {
                    break;
                };
                let group = Group {
                    type_name: t.name.clone(),
                    tier: i + 1,
                    key: key.clone(),
                    value: value.clone(),
                };
                let name = group_names
                    .entry(group.clone())
                    .or_insert_with(|| names.pick(&group))
                    .clone();
                groups.entry(group).or_default().insert(member);
                member = name;
            }
        }
    }

    let mut plan = DiscoveryPlan::default();
    let mut wanted = BTreeSet::new();
    let mut desired: Vec<(String, HyperNode)> = groups
        .into_iter()
        .map(|(group, members)| {
            let name = group_names[&group].clone();
            let hn = build(&name, &group, members);
            (name, hn)
        })
        .collect();
    desired.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, want) in desired {
        wanted.insert(name.clone());
        match by_name.get(name.as_str()) {
            None => plan.create.push(want),
            Some(have) => {
                let mut next = (*have).clone();
                let labels = next.metadata.labels.get_or_insert_with(BTreeMap::new);
                for (k, v) in want.metadata.labels.iter().flatten() {
                    labels.insert(k.clone(), v.clone());
                }
                next.spec = want.spec;
                if &next != *have {
                    plan.update.push(next);
                }
            }
        }
    }
    plan.delete = by_name
        .iter()
        .filter(|(name, h)| owned(h) && !wanted.contains(**name))
        .map(|(name, _)| name.to_string())
        .collect();
    plan
}

/// Picks each group's HyperNode name: an existing discovered HyperNode of the group (by its
/// labels and name prefix, as Volcano finds them), else a stable new name no other HyperNode
/// has.
struct Names<'a, F> {
    by_name: &'a BTreeMap<&'a str, &'a HyperNode>,
    owned: &'a F,
    taken: HashSet<String>,
}

impl<'a, F: Fn(&HyperNode) -> bool> Names<'a, F> {
    fn new(by_name: &'a BTreeMap<&'a str, &'a HyperNode>, owned: &'a F) -> Self {
        Self {
            by_name,
            owned,
            taken: HashSet::new(),
        }
    }

    fn pick(&mut self, group: &Group) -> String {
        let prefix = group.prefix();
        let reuse = self.by_name.iter().find(|(name, h)| {
            name.starts_with(&prefix)
                && !self.taken.contains(**name)
                && (self.owned)(h)
                && h.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(&group.key))
                    .is_some_and(|v| *v == group.value)
        });
        if let Some((name, _)) = reuse {
            let name = name.to_string();
            self.taken.insert(name.clone());
            return name;
        }
        for attempt in 0u32.. {
            let name = format!("{prefix}-{}", suffix(group, attempt));
            if !self.by_name.contains_key(name.as_str()) && self.taken.insert(name.clone()) {
                return name;
            }
        }
        unreachable!("u32 attempts cover every name")
    }
}

/// Five lowercase letters and digits from a stable hash (FNV-1a) of the group and attempt.
fn suffix(group: &Group, attempt: u32) -> String {
    let mut h = fnv::FnvHasher::default();
    for part in [&group.type_name, &group.key, &group.value] {
        h.write(part.as_bytes());
        h.write_u8(0);
    }
    h.write_usize(group.tier);
    h.write_u32(attempt);
    let mut n = h.finish();
    const DIGITS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..5)
        .map(|_| {
            let c = DIGITS[(n % 36) as usize] as char;
            n /= 36;
            c
        })
        .collect()
}

/// A topology type's name as it may appear in a HyperNode name: lowercase letters, digits,
/// `.` and `-`, anything else turned into `-`.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphabetic() {
                c.to_lowercase().next().unwrap_or('-')
            } else if c.is_ascii_digit() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn build(name: &str, group: &Group, members: BTreeSet<String>) -> HyperNode {
    let type_ = if group.tier == 1 {
        MemberType::Node
    } else {
        MemberType::HyperNode
    };
    let members = members
        .into_iter()
        .map(|m| MemberSpec {
            type_: Some(type_.clone()),
            selector: Some(MemberSelector {
                exact_match: Some(ExactMatch { name: m }),
                ..Default::default()
            }),
        })
        .collect();
    let mut hn = HyperNode::new(
        name,
        HyperNodeSpec {
            tier: Some(group.tier as i64),
            tier_name: Some(group.key.clone()),
            members: Some(members),
        },
    );
    // kube's `new` copies the CRD's annotations (helm's keep policy) onto the object; a
    // discovered HyperNode is not the chart's.
    hn.metadata.annotations = None;
    hn.metadata.labels = Some(BTreeMap::from([
        (
            NETWORK_TOPOLOGY_SOURCE.to_string(),
            LABEL_SOURCE.to_string(),
        ),
        (group.key.clone(), group.value.clone()),
    ]));
    hn
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A3: &str = "
networkTopologyDiscovery:
- source: ufm
  enabled: true
  interval: 10m
  config: {endpoint: 'https://ufm:8080', insecureSkipVerify: true}
- source: roce
  enabled: false
- source: label
  enabled: true
  config:
    networkTopologyTypes:
      topologyA3:
      - nodeLabel: volcano.sh/hypercluster
      - nodeLabel: volcano.sh/hypernode
      - nodeLabel: kubernetes.io/hostname
";

    fn node(name: &str, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    }

    fn members(h: &HyperNode) -> Vec<(String, String)> {
        h.spec
            .members()
            .iter()
            .map(|m| {
                let t = m.type_.as_ref().map(|t| t.as_str()).unwrap_or("");
                let n = m.selector.as_ref().unwrap().exact_match.as_ref().unwrap();
                (t.to_string(), n.name.clone())
            })
            .collect()
    }

    #[test]
    fn the_label_source_reads_tiers_from_the_node_upwards_and_other_sources_are_listed() {
        let c = parse(A3).unwrap();
        assert_eq!(c.not_run, vec!["ufm".to_string()], "roce is disabled");
        assert_eq!(
            c.label.unwrap().types,
            vec![TopologyType {
                name: "topologyA3".into(),
                tiers: vec![
                    "volcano.sh/hypernode".into(),
                    "volcano.sh/hypercluster".into()
                ],
            }]
        );
        assert_eq!(parse("").unwrap(), DiscoveryConfig::default());
    }

    #[test]
    fn a_bad_topology_type_refuses_the_file_with_its_name() {
        let with = |types: &str| {
            parse(&format!(
                "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    networkTopologyTypes:\n{types}"
            ))
        };
        assert_eq!(
            with("      t: [{nodeLabel: a}, {nodeLabel: a}]\n"),
            Err(DiscoveryConfigError::DuplicateLabel {
                name: "t".into(),
                label: "a".into()
            })
        );
        assert_eq!(
            with("      t: [{nodeLabel: kubernetes.io/hostname}]\n"),
            Err(DiscoveryConfigError::NoTier { name: "t".into() })
        );
        assert_eq!(
            with("      a-very-long-type-name-indeed: [{nodeLabel: a}, {nodeLabel: b}]\n"),
            Err(DiscoveryConfigError::TypeNameTooLong {
                name: "a-very-long-type-name-indeed".into(),
                len: 28
            })
        );
        assert_eq!(
            with("      t: [{nodeLabel: ''}, {nodeLabel: b}]\n"),
            Err(DiscoveryConfigError::EmptyLabel { name: "t".into() })
        );
        let e = parse("networkTopologyDiscovery: 3").unwrap_err();
        assert!(
            matches!(e, DiscoveryConfigError::Parse(_)),
            "{e:?} for a scalar"
        );
    }

    fn a3() -> LabelDiscovery {
        parse(A3).unwrap().label.unwrap()
    }

    fn cluster() -> Vec<Node> {
        vec![
            node(
                "n0",
                json!({"volcano.sh/hypernode": "s0", "volcano.sh/hypercluster": "c0"}),
            ),
            node(
                "n1",
                json!({"volcano.sh/hypernode": "s0", "volcano.sh/hypercluster": "c0"}),
            ),
            node(
                "n2",
                json!({"volcano.sh/hypernode": "s1", "volcano.sh/hypercluster": "c0"}),
            ),
            // In a tier-1 group but no cluster: it stops at tier 1.
            node("n3", json!({"volcano.sh/hypernode": "s2"})),
            // No tier-1 label: in no HyperNode, even with a cluster label.
            node("n4", json!({"volcano.sh/hypercluster": "c0"})),
        ]
    }

    #[test]
    fn nodes_group_by_each_tiers_label_and_tiers_nest_by_name() {
        let nodes = cluster();
        let refs: Vec<&Node> = nodes.iter().collect();
        let p = plan(&a3(), &refs, &[]);
        assert!(p.update.is_empty() && p.delete.is_empty());
        let by_value: BTreeMap<String, &HyperNode> = p
            .create
            .iter()
            .map(|h| {
                let l = h.metadata.labels.as_ref().unwrap();
                assert_eq!(l[NETWORK_TOPOLOGY_SOURCE], "label");
                let v = l
                    .get("volcano.sh/hypernode")
                    .or(l.get("volcano.sh/hypercluster"))
                    .unwrap();
                (v.clone(), h)
            })
            .collect();
        assert_eq!(
            by_value.keys().cloned().collect::<Vec<_>>(),
            ["c0", "s0", "s1", "s2"]
        );
        let s0 = by_value["s0"];
        assert_eq!(s0.spec.tier, Some(1));
        assert_eq!(s0.spec.tier_name.as_deref(), Some("volcano.sh/hypernode"));
        assert!(
            s0.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with("hypernode-topologya3-tier1-")
        );
        assert_eq!(
            members(s0),
            [("Node".into(), "n0".into()), ("Node".into(), "n1".into())]
        );
        let c0 = by_value["c0"];
        assert_eq!(c0.spec.tier, Some(2));
        let s0_name = s0.metadata.name.clone().unwrap();
        let s1_name = by_value["s1"].metadata.name.clone().unwrap();
        let mut want = vec![
            ("HyperNode".to_string(), s0_name),
            ("HyperNode".to_string(), s1_name),
        ];
        want.sort();
        assert_eq!(members(c0), want, "s2's node has no cluster label");
        // The same inputs pick the same names.
        assert_eq!(plan(&a3(), &refs, &[]), p);
    }

    #[test]
    fn a_second_pass_over_what_the_first_made_writes_nothing() {
        let nodes = cluster();
        let refs: Vec<&Node> = nodes.iter().collect();
        let first = plan(&a3(), &refs, &[]);
        let made: Vec<&HyperNode> = first.create.iter().collect();
        assert_eq!(plan(&a3(), &refs, &made), DiscoveryPlan::default());
    }

    #[test]
    fn relabelled_and_removed_nodes_update_and_delete_only_discovered_hypernodes() {
        let nodes = cluster();
        let refs: Vec<&Node> = nodes.iter().collect();
        let mut made = plan(&a3(), &refs, &[]).create;
        // A HyperNode somebody wrote by hand: never touched.
        let mut manual = made[0].clone();
        manual.metadata.name = Some("rack-by-hand".into());
        manual.metadata.labels = None;
        made.push(manual);
        let existing: Vec<&HyperNode> = made.iter().collect();
        // n2 moves from s1 to s0; n3 is gone, so s2 has no node left.
        let mut moved = cluster();
        moved[2] = node(
            "n2",
            json!({"volcano.sh/hypernode": "s0", "volcano.sh/hypercluster": "c0"}),
        );
        moved.remove(3);
        let refs: Vec<&Node> = moved.iter().collect();
        let p = plan(&a3(), &refs, &existing);
        assert!(p.create.is_empty(), "{:?}", p.create);
        let name_of = |value: &str| {
            made.iter()
                .find(|h| {
                    h.metadata.labels.iter().flatten().any(|(_, v)| v == value)
                        && h.metadata.name.as_deref() != Some("rack-by-hand")
                })
                .and_then(|h| h.metadata.name.clone())
                .unwrap()
        };
        let mut gone = vec![name_of("s1"), name_of("s2")];
        gone.sort();
        assert_eq!(p.delete, gone);
        let updated: Vec<&str> = p
            .update
            .iter()
            .map(|h| h.metadata.name.as_deref().unwrap())
            .collect();
        let mut want = vec![name_of("c0"), name_of("s0")];
        want.sort();
        assert_eq!(updated, want);
        let s0 = p
            .update
            .iter()
            .find(|h| h.metadata.name.as_deref() == Some(&*name_of("s0")));
        assert_eq!(members(s0.unwrap()).len(), 3, "n0, n1 and n2");
    }

    #[test]
    fn hypernodes_volcanos_discoverer_made_keep_their_names() {
        let nodes = cluster();
        let refs: Vec<&Node> = nodes.iter().collect();
        let mut volcano = plan(&a3(), &refs, &[]).create;
        for h in &mut volcano {
            let tier = h.spec.tier.unwrap();
            let value = h
                .metadata
                .labels
                .as_ref()
                .unwrap()
                .values()
                .find(|v| *v != "label")
                .unwrap()
                .clone();
            h.metadata.name = Some(format!("hypernode-topologya3-tier{tier}-x{value}"));
        }
        // Renamed, the tier-2 HyperNode's members name HyperNodes that are not there: the
        // pass reuses every name, creates and deletes nothing, and points c0 at them.
        let existing: Vec<&HyperNode> = volcano.iter().collect();
        let p = plan(&a3(), &refs, &existing);
        assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
        assert_eq!(p.update.len(), 1);
        let c0 = &p.update[0];
        assert_eq!(
            c0.metadata.name.as_deref(),
            Some("hypernode-topologya3-tier2-xc0")
        );
        assert_eq!(
            members(c0),
            [
                ("HyperNode".into(), "hypernode-topologya3-tier1-xs0".into()),
                ("HyperNode".into(), "hypernode-topologya3-tier1-xs1".into())
            ]
        );
    }

    #[test]
    fn a_name_taken_by_another_hypernode_is_not_reused() {
        let nodes = [node("n0", json!({"rack": "r"}))];
        let refs: Vec<&Node> = nodes.iter().collect();
        let d = LabelDiscovery {
            types: vec![TopologyType {
                name: "T_1".into(),
                tiers: vec!["rack".into()],
            }],
        };
        let first = plan(&d, &refs, &[]).create.remove(0);
        let name = first.metadata.name.clone().unwrap();
        assert!(name.starts_with("hypernode-t-1-tier1-"), "{name}");
        // Somebody else's HyperNode already has that name (not discovered): another is picked.
        let mut other = first.clone();
        other.metadata.labels = None;
        let p = plan(&d, &refs, &[&other]);
        assert_eq!(p.create.len(), 1);
        assert_ne!(p.create[0].metadata.name.as_deref(), Some(&*name));
        assert!(p.delete.is_empty() && p.update.is_empty());
    }
}
