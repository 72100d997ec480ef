//! Builders of cluster objects for the scheduler's tests and benchmarks: nodes, pods of a
//! gang, PodGroups and Queues as the API would hold them, fed through a [`ClusterIndex`] so
//! the index is exercised too.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

use super::index::ClusterIndex;
use tephra_api::{HyperNode, PodGroup, Queue};

/// A Ready node with `cpu` cores, `mem_gi` GiB and `pods` pod slots.
pub fn node(name: &str, cpu: u32, mem_gi: u32, pods: u32) -> Node {
    let res =
        json!({"cpu": cpu.to_string(), "memory": format!("{mem_gi}Gi"), "pods": pods.to_string()});
    from(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": res, "capacity": res,
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
}

/// A pending pod of gang `group` in `ns` with the given requests (millicores, MiB), for the
/// `volcano` scheduler.
pub fn pod(ns: &str, name: &str, group: &str, milli_cpu: u32, mem_mi: u32) -> Pod {
    from(json!({
        "metadata": {
            "namespace": ns, "name": name, "uid": format!("uid-{ns}-{name}"),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"scheduling.k8s.io/group-name": group}
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {
                "cpu": format!("{milli_cpu}m"), "memory": format!("{mem_mi}Mi")}}}]
        },
        "status": {"phase": "Pending"}
    }))
}

/// The same pod running on `node`.
pub fn running(mut p: Pod, node: &str) -> Pod {
    if let Some(s) = p.spec.as_mut() {
        s.node_name = Some(node.to_string());
    }
    if let Some(s) = p.status.as_mut() {
        s.phase = Some("Running".into());
    }
    p
}

/// A PodGroup in `queue` with `min_member` and, when given, minResources (millicores, MiB).
pub fn podgroup(
    ns: &str,
    name: &str,
    queue: &str,
    min_member: i32,
    min_res: Option<(u32, u32)>,
) -> PodGroup {
    let mut spec = json!({"minMember": min_member, "queue": queue});
    if let Some((c, m)) = min_res {
        spec["minResources"] = json!({"cpu": format!("{c}m"), "memory": format!("{m}Mi")});
    }
    from(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"namespace": ns, "name": name, "uid": format!("pg-{ns}-{name}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": {"phase": "Pending"}
    }))
}

/// The PodGroup with its phase set.
pub fn with_phase(mut pg: PodGroup, phase: &str) -> PodGroup {
    pg.status.get_or_insert_default().phase = Some(phase.into());
    pg
}

/// An Open queue of `weight`.
pub fn queue(name: &str, weight: i32) -> Queue {
    from(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"weight": weight},
        "status": {"state": "Open"}
    }))
}

/// A HyperNode of `tier` whose members are the nodes (`Node`) or HyperNodes (`HyperNode`)
/// named in `members`, each by exact name.
pub fn hypernode(name: &str, tier: i64, kind: &str, members: &[String]) -> HyperNode {
    let members: Vec<serde_json::Value> = members
        .iter()
        .map(|m| json!({"type": kind, "selector": {"exactMatch": {"name": m}}}))
        .collect();
    from(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": if tier == 1 { "rack" } else { "spine" }, "members": members}
    }))
}

fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    // Builders only ever pass literal JSON of the right shape.
    serde_json::from_value(v).unwrap_or_else(|e| panic!("test object: {e}"))
}

/// A small cluster under construction.
#[derive(Debug)]
pub struct World {
    /// The index everything is fed into.
    pub index: ClusterIndex,
}

impl Default for World {
    fn default() -> Self {
        let mut index = ClusterIndex::new(vec!["volcano".into()]);
        index.apply_queue(&queue("default", 1));
        index.apply_queue(&queue("root", 1));
        Self { index }
    }
}

impl World {
    /// `n` nodes of `cpu` cores and `mem_gi` GiB, 110 pods each.
    pub fn nodes(mut self, n: usize, cpu: u32, mem_gi: u32) -> Self {
        for i in 0..n {
            self.index
                .apply_node(&node(&format!("node-{i}"), cpu, mem_gi, 110));
        }
        self
    }

    /// Tier-1 HyperNodes `rack-0`, `rack-1`, … of `per_rack` nodes each (`node-0` onwards,
    /// in order) and one tier-2 HyperNode `spine` holding every rack.
    pub fn racks(mut self, per_rack: usize) -> Self {
        let n = self.index.node_count();
        let mut racks = Vec::new();
        for (r, start) in (0..n).step_by(per_rack.max(1)).enumerate() {
            let nodes: Vec<String> = (start..n.min(start + per_rack))
                .map(|i| format!("node-{i}"))
                .collect();
            let name = format!("rack-{r}");
            self.index
                .apply_hypernode(&hypernode(&name, 1, "Node", &nodes));
            racks.push(name);
        }
        self.index
            .apply_hypernode(&hypernode("spine", 2, "HyperNode", &racks));
        self
    }

    /// Gives the PodGroup `ns/name` a `networkTopology` of `mode` (`hard`, `soft`) and
    /// highest tier `tier`.
    pub fn network_topology(mut self, ns: &str, name: &str, mode: &str, tier: i32) -> Self {
        if let Some(pg) = self.index.podgroup(&format!("{ns}/{name}")) {
            let mut pg = (**pg).clone();
            pg.spec.network_topology =
                Some(from(json!({"mode": mode, "highestTierAllowed": tier})));
            self.index.apply_podgroup(&pg);
        }
        self
    }

    /// Assumes each `(uid, node)` placement; returns the pods whose plan gate is then due to
    /// come off ([`ClusterIndex::placed_plan_gated`]).
    pub fn assume_due<'a>(
        &mut self,
        placements: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<super::index::GateDue> {
        let now = std::time::Instant::now();
        for (uid, node) in placements {
            self.index
                .assume(uid, node, std::time::Duration::from_secs(30), now);
        }
        self.index.placed_plan_gated()
    }

    /// [`World::assume_due`], as the pods' names, sorted.
    pub fn assume_and_due<'a>(
        &mut self,
        placements: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Vec<String> {
        let mut due: Vec<String> = self
            .assume_due(placements)
            .into_iter()
            .map(|d| d.name)
            .collect();
        due.sort();
        due
    }

    /// Sets annotation `key` of the PodGroup `ns/name`.
    pub fn annotate(mut self, ns: &str, name: &str, key: &str, value: &str) -> Self {
        if let Some(pg) = self.index.podgroup(&format!("{ns}/{name}")) {
            let mut pg = (**pg).clone();
            pg.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(key.into(), value.into());
            self.index.apply_podgroup(&pg);
        }
        self
    }

    /// A queue.
    pub fn queue(mut self, name: &str, weight: i32) -> Self {
        self.index.apply_queue(&queue(name, weight));
        self
    }

    // Positional arguments read like a table row in the tests that use them.
    #[allow(clippy::too_many_arguments)]
    /// A gang of `size` pending pods (each `milli_cpu`, `mem_mi`) needing `min` of them,
    /// with minResources = min × request, in phase `phase`.
    pub fn gang(
        mut self,
        ns: &str,
        name: &str,
        queue: &str,
        size: usize,
        min: i32,
        milli_cpu: u32,
        mem_mi: u32,
        phase: &str,
    ) -> Self {
        let pg = podgroup(
            ns,
            name,
            queue,
            min,
            Some((milli_cpu * min as u32, mem_mi * min as u32)),
        );
        self.index.apply_podgroup(&with_phase(pg, phase));
        for i in 0..size {
            self.index.apply_pod(&pod(
                ns,
                &format!("{name}-task-{i}"),
                name,
                milli_cpu,
                mem_mi,
            ));
        }
        self
    }

    #[allow(clippy::too_many_arguments)]
    /// A gang of `parts` partitions of `size` pending pods each (labelled
    /// `volcano.sh/partition-id`), needing `min_parts` of them (and their pods), each
    /// partition inside one HyperNode of tier at most `tier` in `mode` (`hard`, `soft`; no
    /// topology when empty): the PodGroup a vcJob task's `partitionPolicy` makes.
    pub fn partitioned_gang(
        mut self,
        ns: &str,
        name: &str,
        parts: usize,
        size: usize,
        min_parts: i32,
        milli_cpu: u32,
        mode: &str,
        tier: i32,
    ) -> Self {
        let min = min_parts * size as i32;
        let mut pg = podgroup(ns, name, "default", min, Some((milli_cpu * min as u32, 0)));
        let mut policy = json!({
            "name": "worker", "subGroupSize": size, "minSubGroups": min_parts,
            "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
            "matchLabelKeys": ["volcano.sh/partition-id"]
        });
        if !mode.is_empty() {
            policy["networkTopology"] = json!({"mode": mode, "highestTierAllowed": tier});
        }
        pg.spec.sub_group_policy = Some(vec![from(policy)]);
        self.index.apply_podgroup(&with_phase(pg, "Inqueue"));
        for i in 0..parts * size {
            let mut p = pod(ns, &format!("{name}-worker-{i}"), name, milli_cpu, 0);
            p.metadata.labels = Some(BTreeMap::from([
                ("volcano.sh/task-spec".to_string(), "worker".to_string()),
                (
                    "volcano.sh/partition-id".to_string(),
                    (i / size).to_string(),
                ),
            ]));
            self.index.apply_pod(&p);
        }
        self
    }

    #[allow(clippy::too_many_arguments)]
    /// A running gang of `size` pods spread over the nodes round robin.
    pub fn running_gang(
        mut self,
        ns: &str,
        name: &str,
        queue: &str,
        size: usize,
        milli_cpu: u32,
        mem_mi: u32,
        nodes: usize,
    ) -> Self {
        let pg = podgroup(ns, name, queue, size as i32, None);
        self.index.apply_podgroup(&with_phase(pg, "Running"));
        for i in 0..size {
            let p = pod(ns, &format!("{name}-task-{i}"), name, milli_cpu, mem_mi);
            self.index
                .apply_pod(&running(p, &format!("node-{}", i % nodes.max(1))));
        }
        self
    }
}

/// Counts placements per gang in a plan.
pub fn placed_by_gang(plan: &super::Plan) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for p in plan.placements.values() {
        *m.entry(p.job.clone()).or_default() += 1;
    }
    m
}

/// The message of the last condition a session wrote on PodGroup `name` (empty when none).
pub fn condition_message(out: &super::Outcome, name: &str) -> String {
    out.podgroups
        .iter()
        .find(|u| u.name == name)
        .and_then(|u| u.status.conditions.as_ref())
        .and_then(|c| c.last())
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}
