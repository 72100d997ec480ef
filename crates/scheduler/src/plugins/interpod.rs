//! Required pod anti-affinity, the part of kube-scheduler's `InterPodAffinity` filter a session
//! can decide from its own tasks: a task may not share a topology domain (nodes with the same
//! value of the term's `topologyKey`) with a task its required anti-affinity terms select, nor
//! with a task whose own terms select it. The `predicates` plugin refuses such nodes (a
//! resolvable misfit: evicting the other pods fixes it), and `preempt` evicts the conflicting
//! pods when it takes a node, as Volcano's topology-aware preemption does through the same
//! filter.
//!
//! What the session does not see is left to kube-scheduler, which runs the full filter before
//! asking the extender: pods outside any gang (they are not session tasks), preferred terms,
//! required pod *affinity*, and `namespaceSelector`s with conditions (namespace labels are not
//! indexed). Tasks being deleted no longer count, as their resources do not: the session plans
//! for the node as it will be.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::PodAffinityTerm;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::ix::{IxVec, NodeIx, TaskIx};
use crate::model::TaskStatus;
use crate::session::State;

/// The reason users see, kube-scheduler's wording.
pub const ANTI_AFFINITY_REASON: &str = "node(s) didn't match pod anti-affinity rules";

/// Does `sel` select `labels`? A missing selector selects nothing and an empty one everything,
/// as for affinity terms in Kubernetes.
pub fn selects(sel: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(sel) = sel else {
        return false;
    };
    sel.match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && sel
            .match_expressions
            .iter()
            .flatten()
            .all(|r| requirement_holds(r, labels))
}

fn requirement_holds(r: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let value = labels.get(&r.key);
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        // An operator Kubernetes does not know selects nothing (the API refuses it anyway).
        _ => false,
    }
}

/// Does `term`, written on a pod in namespace `owner_ns`, select a pod in `ns` with `labels`?
pub fn term_selects(
    term: &PodAffinityTerm,
    owner_ns: &str,
    ns: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let listed = term.namespaces.as_deref().unwrap_or_default();
    let in_scope = match &term.namespace_selector {
        // No list and no selector: the pod's own namespace.
        None if listed.is_empty() => ns == owner_ns,
        None => listed.iter().any(|n| n == ns),
        Some(sel) => {
            let everything = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
            // A selector with conditions needs namespace labels: kube-scheduler decides those.
            everything || listed.iter().any(|n| n == ns)
        }
    };
    in_scope && selects(term.label_selector.as_ref(), labels)
}

/// Are nodes `a` and `b` in the same domain of `key` (both labelled, same value)?
fn same_domain(st: &State, key: &str, a: NodeIx, b: NodeIx) -> bool {
    match (st.nodes[a].labels.get(key), st.nodes[b].labels.get(key)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// Does a task in this status hold its place for affinity (placed and not going away)?
fn counts(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Allocated
            | TaskStatus::Pipelined
            | TaskStatus::Binding
            | TaskStatus::Bound
            | TaskStatus::Running
    )
}

/// The tasks among `others` that rule out node `n` for task `t` by required anti-affinity,
/// either way round. Only tasks with terms can conflict with a task without any, so a caller
/// may pass just those (and every task when `t` has terms).
pub fn conflicts(
    st: &State,
    t: TaskIx,
    n: NodeIx,
    others: impl IntoIterator<Item = TaskIx>,
) -> Vec<TaskIx> {
    let task = &st.tasks[t];
    let mine = &task.constraints.anti_affinity;
    let mut out = Vec::new();
    for o in others {
        let other = &st.tasks[o];
        if o == t || !counts(other.status) {
            continue;
        }
        let Some(on) = other
            .node
            .as_ref()
            .and_then(|x| st.node_index.get(x))
            .copied()
        else {
            continue;
        };
        let theirs = &other.constraints.anti_affinity;
        let by_mine = mine.iter().any(|term| {
            same_domain(st, &term.topology_key, n, on)
                && term_selects(
                    term,
                    &task.namespace,
                    &other.namespace,
                    &other.constraints.labels,
                )
        });
        let by_theirs = || {
            theirs.iter().any(|term| {
                same_domain(st, &term.topology_key, n, on)
                    && term_selects(
                        term,
                        &other.namespace,
                        &task.namespace,
                        &task.constraints.labels,
                    )
            })
        };
        if by_mine || by_theirs() {
            out.push(o);
        }
    }
    out
}

/// Does term-holder `a` rule out task `b` (in `b`'s namespace, with its labels) through one
/// of its terms whose topology key is `key`, when both are in the same domain of it?
fn rules_out(st: &State, a: TaskIx, b: TaskIx, key: Option<&str>) -> bool {
    let (a, b) = (&st.tasks[a], &st.tasks[b]);
    a.constraints
        .anti_affinity
        .iter()
        .filter(|term| key.is_none_or(|k| term.topology_key == k))
        .any(|term| term_selects(term, &a.namespace, &b.namespace, &b.constraints.labels))
}

/// The session's placed tasks by topology domain, so a predicate looks only at the tasks in
/// the node's domains instead of every task: built at session open, kept up to date through
/// the allocate and deallocate handlers. Empty (and free) when no task has a required
/// anti-affinity term.
#[derive(Debug, Default)]
pub struct Domains {
    /// Topology keys of every task's terms.
    keys: Vec<String>,
    /// (key, value) → nodes with that label.
    members: HashMap<(String, String), Vec<NodeIx>>,
    /// Per node, the tasks on it that count.
    placed: IxVec<NodeIx, Vec<TaskIx>>,
    /// Task → the node it is listed on.
    listed: HashMap<TaskIx, NodeIx>,
}

impl Domains {
    /// The index of the session's state as it opens.
    pub fn build(st: &State) -> Self {
        let mut keys: Vec<String> = st
            .tasks
            .iter()
            .flat_map(|t| t.constraints.anti_affinity.iter())
            .map(|term| term.topology_key.clone())
            .collect();
        keys.sort();
        keys.dedup();
        let mut d = Self {
            keys,
            ..Self::default()
        };
        if d.keys.is_empty() {
            return d;
        }
        for (n, node) in st.nodes.iter_enumerated() {
            for k in &d.keys {
                if let Some(v) = node.labels.get(k) {
                    d.members.entry((k.clone(), v.clone())).or_default().push(n);
                }
            }
        }
        d.placed = IxVec::from_elem(Vec::new(), st.nodes.len());
        for t in st.tasks.indices() {
            d.on_allocate(st, t);
        }
        d
    }

    /// `true` when no task has a term: nothing can conflict.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Task `t` was placed (or its eviction undone): list it on its node if it counts.
    pub fn on_allocate(&mut self, st: &State, t: TaskIx) {
        if self.keys.is_empty() || self.listed.contains_key(&t) || !counts(st.tasks[t].status) {
            return;
        }
        let Some(n) = st.tasks[t]
            .node
            .as_ref()
            .and_then(|x| st.node_index.get(x))
            .copied()
        else {
            return;
        };
        self.placed[n].push(t);
        self.listed.insert(t, n);
    }

    /// Task `t` was unplaced or evicted.
    pub fn on_deallocate(&mut self, t: TaskIx) {
        if let Some(n) = self.listed.remove(&t) {
            self.placed[n].retain(|&x| x != t);
        }
    }

    /// Does any placed task rule out node `n` for task `t`, or `t` rule it out (the same
    /// answer as [`conflicts`] is non-empty)?
    pub fn conflict(&self, st: &State, t: TaskIx, n: NodeIx) -> bool {
        self.keys.iter().any(|k| {
            let Some(v) = st.nodes[n].labels.get(k) else {
                return false;
            };
            self.members
                .get(&(k.clone(), v.clone()))
                .into_iter()
                .flatten()
                .flat_map(|&m| self.placed[m].iter().copied())
                .any(|o| o != t && (rules_out(st, t, o, Some(k)) || rules_out(st, o, t, Some(k))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn term(v: serde_json::Value) -> PodAffinityTerm {
        serde_json::from_value(v).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_follow_kubernetes_rules() {
        let app = labels(&[("app", "web"), ("tier", "front")]);
        assert!(!selects(None, &app), "no selector selects nothing");
        assert!(selects(Some(&LabelSelector::default()), &app));
        let sel: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "back"]},
                {"key": "gpu", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        assert!(selects(Some(&sel), &app));
        assert!(!selects(Some(&sel), &labels(&[("app", "web")])));
        let not_in: LabelSelector = serde_json::from_value(json!({
            "matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]
        }))
        .unwrap();
        assert!(!selects(Some(&not_in), &app));
        assert!(selects(Some(&not_in), &labels(&[])));
    }

    #[test]
    fn a_term_reaches_its_own_namespace_unless_it_names_others() {
        let web = labels(&[("app", "web")]);
        let own = term(json!({"labelSelector": {"matchLabels": {"app": "web"}},
                              "topologyKey": "kubernetes.io/hostname"}));
        assert!(term_selects(&own, "a", "a", &web));
        assert!(!term_selects(&own, "a", "b", &web));
        let listed = term(json!({"labelSelector": {"matchLabels": {"app": "web"}},
                                 "namespaces": ["b"], "topologyKey": "zone"}));
        assert!(term_selects(&listed, "a", "b", &web));
        assert!(!term_selects(&listed, "a", "a", &web));
        let all = term(json!({"labelSelector": {"matchLabels": {"app": "web"}},
                              "namespaceSelector": {}, "topologyKey": "zone"}));
        assert!(term_selects(&all, "a", "c", &web));
        let unknown = term(json!({"labelSelector": {"matchLabels": {"app": "web"}},
                                  "namespaceSelector": {"matchLabels": {"team": "x"}},
                                  "topologyKey": "zone"}));
        assert!(
            !term_selects(&unknown, "a", "c", &web),
            "namespace labels are kube-scheduler's to check"
        );
    }
}
