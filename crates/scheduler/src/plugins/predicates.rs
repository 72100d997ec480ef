//! `predicates`: the node filters kube-scheduler would apply, decided from the snapshot: node
//! Ready and not cordoned, pod count, node selector, required node affinity, taints and
//! tolerations, host ports, required pod anti-affinity between session tasks ([`super::interpod`]).
//! (Resource fit is checked by the session before any plugin.)

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration};

use super::interpod;
use crate::framework::{Plugin, Unfit};
use crate::ix::{NodeIx, TaskIx};
use crate::resource::PODS;
use crate::session::State;

/// The plugin.
#[derive(Debug, Default)]
pub struct Predicates {
    /// Placed tasks by topology domain, for required pod anti-affinity.
    domains: interpod::Domains,
}

/// The taint kube's node lifecycle controller puts on cordoned nodes.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Does the toleration tolerate the taint (Kubernetes' `ToleratesTaint`)?
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    match t.key.as_deref() {
        // An empty key tolerates every taint, but only with Exists.
        None | Some("") if t.operator.as_deref() != Some("Exists") => return false,
        Some(k) if !k.is_empty() && k != taint.key => return false,
        _ => {}
    }
    match t.operator.as_deref() {
        Some("Exists") => true,
        None | Some("") | Some("Equal") => {
            t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// The first NoSchedule/NoExecute taint no toleration covers.
pub fn untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// Does a node selector term match the node of `name` and `labels`? (An empty term matches
/// nothing, as in Kubernetes.)
pub fn term_matches(
    term: &NodeSelectorTerm,
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let v = (r.key == "metadata.name").then_some(name);
            requirement_matches(r, v)
        })
}

impl Plugin for Predicates {
    fn name(&self) -> &'static str {
        "predicates"
    }

    fn open(&mut self, st: &State) {
        self.domains = interpod::Domains::build(st);
    }

    fn on_allocate(&mut self, st: &State, t: TaskIx) {
        self.domains.on_allocate(st, t);
    }

    fn on_deallocate(&mut self, _: &State, t: TaskIx) {
        self.domains.on_deallocate(t);
    }

    fn predicate(&self, st: &State, t: TaskIx, n: NodeIx) -> Result<(), Unfit> {
        let node = &st.nodes[n];
        let task = &st.tasks[t];
        let c = &task.constraints;
        if !node.ready {
            return Err(Unfit::unresolvable("node(s) were not ready"));
        }
        if node.unschedulable {
            let tolerated = c.tolerations.iter().any(|tol| {
                tolerates(
                    tol,
                    &Taint {
                        key: UNSCHEDULABLE_TAINT.into(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    },
                )
            });
            if !tolerated {
                return Err(Unfit::unresolvable("node(s) were unschedulable"));
            }
        }
        if let Some(name) = &c.node_name
            && name != &node.name
        {
            return Err(Unfit::unresolvable(
                "node(s) didn't match the requested node name",
            ));
        }
        let max_pods = node.allocatable.get(PODS) / 1000.0;
        if max_pods > 0.0 && node.task_count as f64 >= max_pods {
            return Err(Unfit::resolvable("Too many pods"));
        }
        if !c
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
            || (!c.required_terms.is_empty()
                && !c
                    .required_terms
                    .iter()
                    .any(|term| term_matches(term, &node.name, &node.labels)))
        {
            return Err(Unfit::unresolvable(
                "node(s) didn't match Pod's node affinity/selector",
            ));
        }
        if let Some(taint) = untolerated(&node.taints, &c.tolerations) {
            return Err(Unfit::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                taint.key,
                taint.value.as_deref().unwrap_or("")
            )));
        }
        for (proto, ip, port) in &c.host_ports {
            let clash = node.used_ports.iter().any(|(p2, ip2, port2)| {
                p2 == proto && port2 == port && (ip == ip2 || ip == "0.0.0.0" || ip2 == "0.0.0.0")
            });
            if clash {
                return Err(Unfit::resolvable(
                    "node(s) didn't have free ports for the requested pod ports",
                ));
            }
        }
        if !self.domains.is_empty() && self.domains.conflict(st, t, n) {
            return Err(Unfit::resolvable(interpod::ANTI_AFFINITY_REASON));
        }
        Ok(())
    }
}
