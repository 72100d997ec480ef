//! `nodegroup`: ties queues to groups of nodes. A node's group is its `volcano.sh/nodegroup-name`
//! label; a queue names groups in `spec.affinity`: `nodeGroupAffinity` (required: its pods may
//! go there; preferred: may go there, scored lower) and `nodeGroupAntiAffinity` (required:
//! never there; preferred: allowed, scored last).
//!
//! As Volcano's plugin: a node without the label is refused unless `strict` is `false` and the
//! queue names no group; a queue naming no group may use no labelled node; scores are 100 for
//! a required group plus 50 for a preferred one, -1 for a group the queue would rather avoid.
//! With `enableHierarchy`, a queue without affinity takes its nearest ancestor's. Arguments:
//! `strict` (true).

use std::collections::BTreeSet;

use crate::config::PluginOption;
use crate::framework::{Plugin, Unfit};
use crate::ix::{NodeIx, QueueIx, TaskIx};
use crate::session::State;
use tephra_api::scheduling::Affinity;

/// The node label naming a node's group.
pub const NODE_GROUP_LABEL: &str = "volcano.sh/nodegroup-name";

/// A score for a required group; half of it for a preferred one.
const BASE_SCORE: f64 = 100.0;

/// The plugin.
#[derive(Debug)]
pub struct NodeGroup {
    strict: bool,
    hierarchy: bool,
}

impl NodeGroup {
    /// Reads `strict` and `enableHierarchy`.
    pub fn new(o: &PluginOption) -> Self {
        Self {
            strict: o.bool_arg("strict", true),
            hierarchy: o.enable_hierarchy == Some(true),
        }
    }

    /// The groups of the queue of task `t`'s job (or, with the hierarchy, of its nearest
    /// ancestor that names some); `None` when no queue in the chain has an affinity.
    fn groups(&self, st: &State, t: TaskIx) -> Option<Groups> {
        let mut q: Option<QueueIx> = st.job_queue[st.task_job[t]];
        // Bounded by the number of queues: a cycle of parents ends the walk.
        for _ in 0..=st.queues.len() {
            let queue = &st.queues[q?];
            if let Some(a) = &queue.affinity {
                return Some(Groups::of(a));
            }
            if !self.hierarchy {
                return None;
            }
            q = queue
                .parent
                .as_ref()
                .and_then(|p| st.queue_index.get(p).copied());
        }
        None
    }
}

/// A queue's groups, by kind.
#[derive(Debug, Default)]
struct Groups {
    required: BTreeSet<String>,
    preferred: BTreeSet<String>,
    anti_required: BTreeSet<String>,
    anti_preferred: BTreeSet<String>,
}

impl Groups {
    fn of(a: &Affinity) -> Self {
        let set = |v: Option<&Vec<String>>| v.into_iter().flatten().cloned().collect();
        let aff = a.node_group_affinity.as_ref();
        let anti = a.node_group_anti_affinity.as_ref();
        Self {
            required: set(aff.and_then(|x| {
                x.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            preferred: set(aff.and_then(|x| {
                x.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            anti_required: set(anti.and_then(|x| {
                x.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
            anti_preferred: set(anti.and_then(|x| {
                x.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })),
        }
    }

    fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.preferred.is_empty()
            && self.anti_required.is_empty()
            && self.anti_preferred.is_empty()
    }

    /// May the queue's pods use a node of `group`? Named by the affinity, not excluded by the
    /// required anti-affinity; a group the queue would rather avoid is still allowed.
    fn allows(&self, group: &str) -> bool {
        let named = self.required.contains(group) || self.preferred.contains(group);
        (named && !self.anti_required.contains(group)) || self.anti_preferred.contains(group)
    }

    fn score(&self, group: &str) -> f64 {
        if self.anti_preferred.contains(group) {
            return -1.0;
        }
        let mut score = 0.0;
        if self.required.contains(group) {
            score += BASE_SCORE;
        }
        if self.preferred.contains(group) {
            score += 0.5 * BASE_SCORE;
        }
        score
    }
}

impl Plugin for NodeGroup {
    fn name(&self) -> &'static str {
        "nodegroup"
    }

    fn predicate(&self, st: &State, t: TaskIx, n: NodeIx) -> Result<(), Unfit> {
        let groups = self.groups(st, t).filter(|g| !g.is_empty());
        let Some(group) = st.nodes[n].labels.get(NODE_GROUP_LABEL) else {
            if !self.strict && groups.is_none() {
                return Ok(());
            }
            return Err(Unfit::unresolvable("node group label not found"));
        };
        let Some(groups) = groups else {
            return Err(Unfit::unresolvable("node group affinity not specified"));
        };
        if groups.allows(group) {
            Ok(())
        } else {
            Err(Unfit::unresolvable(
                "node does not satisfy the node group affinity",
            ))
        }
    }

    fn node_score(&self, st: &State, t: TaskIx, n: NodeIx) -> f64 {
        let Some(group) = st.nodes[n].labels.get(NODE_GROUP_LABEL) else {
            return 0.0;
        };
        self.groups(st, t).map_or(0.0, |g| g.score(group))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use crate::config::parse;
    use crate::outcome::run_session;
    use crate::testing::{self, World};

    const CONF: &str = "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  \
                        - name: priority\n  - name: gang\n- plugins:\n  - name: predicates\n  \
                        - name: proportion\n  - name: nodegroup\n";

    /// Nodes `a-0`, `a-1` in group `a`, `b-0`, `b-1` in group `b`, `free` in none.
    fn world() -> World {
        let mut w = World::default();
        for (name, group) in [
            ("a-0", "a"),
            ("a-1", "a"),
            ("b-0", "b"),
            ("b-1", "b"),
            ("free", ""),
        ] {
            let mut node = testing::node(name, 4, 16, 110);
            if !group.is_empty() {
                node.metadata
                    .labels
                    .get_or_insert_default()
                    .insert(super::NODE_GROUP_LABEL.into(), group.into());
            }
            w.index.apply_node(&node);
        }
        w
    }

    fn with_queue(
        mut w: World,
        name: &str,
        parent: Option<&str>,
        affinity: serde_json::Value,
    ) -> World {
        let mut q = testing::queue(name, 1);
        q.spec.affinity = serde_json::from_value(affinity).expect("affinity");
        q.spec.parent = parent.map(str::to_string);
        w.index.apply_queue(&q);
        w
    }

    fn placed_on(w: &World, conf: &str) -> BTreeMap<String, String> {
        let conf = parse(conf, "test").expect("conf");
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let out = run_session(w.index.snapshot(), &conf, "s", now);
        out.plan
            .placements
            .values()
            .map(|p| (p.name.clone(), p.node.clone()))
            .collect()
    }

    #[test]
    fn a_queues_pods_go_only_to_the_groups_it_names() {
        let w = with_queue(
            world(),
            "qa",
            None,
            json!({"nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["a"]}}),
        );
        let w = w.gang("ns", "g", "qa", 4, 4, 2000, 512, "Pending");
        let placed = placed_on(&w, CONF);
        assert_eq!(placed.len(), 4, "{placed:?}");
        assert!(placed.values().all(|n| n.starts_with("a-")), "{placed:?}");

        // Four more pods than group a holds room for: the gang waits rather than use b.
        let w = with_queue(
            world(),
            "qa",
            None,
            json!({"nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["a"]}}),
        );
        let w = w.gang("ns", "big", "qa", 6, 6, 2000, 512, "Pending");
        assert!(placed_on(&w, CONF).is_empty());
    }

    #[test]
    fn anti_affinity_excludes_and_a_queue_naming_nothing_uses_only_unlabelled_nodes_when_lax() {
        let w = with_queue(
            world(),
            "q",
            None,
            json!({
            "nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["a", "b"]},
            "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["b"]}}),
        );
        let w = w.gang("ns", "g", "q", 2, 2, 1000, 512, "Pending");
        let placed = placed_on(&w, CONF);
        assert!(placed.values().all(|n| n.starts_with("a-")), "{placed:?}");

        // The default queue names no group: strict (the default) refuses every node; with
        // strict off only the unlabelled one is used.
        let w = world().gang("ns", "d", "default", 2, 2, 1000, 512, "Pending");
        assert!(placed_on(&w, CONF).is_empty());
        let lax = CONF.replace(
            "  - name: nodegroup\n",
            "  - name: nodegroup\n    arguments:\n      strict: false\n",
        );
        let placed = placed_on(&w, &lax);
        assert_eq!(placed.len(), 2, "{placed:?}");
        assert!(placed.values().all(|n| n == "free"), "{placed:?}");
    }

    #[test]
    fn with_the_hierarchy_a_queue_takes_its_parents_groups() {
        let w = with_queue(
            world(),
            "parent",
            None,
            json!({"nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["b"]}}),
        );
        let mut child = testing::queue("child", 1);
        child.spec.parent = Some("parent".into());
        let mut w = w;
        w.index.apply_queue(&child);
        let w = w.gang("ns", "g", "child", 2, 2, 1000, 512, "Pending");
        assert!(
            placed_on(&w, CONF).is_empty(),
            "without the hierarchy: no group"
        );
        let conf = CONF.replace(
            "  - name: nodegroup\n",
            "  - name: nodegroup\n    enableHierarchy: true\n",
        );
        let placed = placed_on(&w, &conf);
        assert_eq!(placed.len(), 2, "{placed:?}");
        assert!(placed.values().all(|n| n.starts_with("b-")), "{placed:?}");
    }
}
