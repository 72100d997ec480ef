//! `/podgroups/mutate` (CREATE) and `/podgroups/validate` (CREATE; UPDATE answered too).

use serde_json::Value;

use super::bounds;
use super::review::{Decision, Operation, Request};
use super::view::{ClusterView, queue_accepts, queue_state};
use super::{AdmissionConfig, decode, decode_old, patch, working_copy};
use tephra_api::PodGroup;
use tephra_api::keys::{DEFAULT_QUEUE, QUEUE_NAME_ANNOTATION};
use tephra_api::scheduling::{NetworkTopologySpec, SubGroupPolicySpec};

/// `/podgroups/mutate`: a PodGroup without a queue (or in `default`, which the CRD default
/// writes for an omitted queue) goes to its namespace's default queue
/// (`scheduling.volcano.sh/queue-name` on the Namespace), else to `default`. The namespace is
/// read from the view, not fetched: an unknown namespace just means no namespace default.
pub fn mutate(req: &Request, view: &dyn ClusterView, _cfg: &AdmissionConfig) -> Decision {
    if req.operation != Operation::Create {
        return Decision::bad_request(format!(
            "invalid operation `{}`, expect operation to be `CREATE`",
            req.operation.as_str()
        ));
    }
    let pg: PodGroup = match decode(req) {
        Ok(p) => p,
        Err(d) => return d,
    };
    let queue = pg.spec.queue.as_deref().unwrap_or_default();
    if !queue.is_empty() && queue != DEFAULT_QUEUE {
        return Decision::allow();
    }
    let namespace = pg
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(&req.namespace);
    let target = view
        .namespace_annotations(namespace)
        .and_then(|a| a.get(QUEUE_NAME_ANNOTATION).cloned())
        .filter(|q| !q.is_empty())
        .unwrap_or_else(|| DEFAULT_QUEUE.to_string());
    let mut obj = working_copy(req);
    patch::set(&mut obj, &["spec"], "queue", Value::String(target));
    Decision::mutate(obj)
}

fn both_tiers(nt: Option<&NetworkTopologySpec>) -> bool {
    nt.is_some_and(|nt| {
        nt.highest_tier_allowed.is_some()
            && !nt
                .highest_tier_name
                .as_deref()
                .unwrap_or_default()
                .is_empty()
    })
}

fn topology_problems(
    nt: Option<&NetworkTopologySpec>,
    policies: &[SubGroupPolicySpec],
) -> Option<String> {
    let mut errs = Vec::new();
    if both_tiers(nt) {
        errs.push(
            "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously."
                .to_string(),
        );
    }
    if let Some(p) = policies
        .iter()
        .find(|p| both_tiers(p.network_topology.as_ref()))
    {
        errs.push(format!(
            "in subGroupPolicy '{}': must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously.",
            p.name.as_deref().unwrap_or_default()
        ));
    }
    (!errs.is_empty()).then(|| errs.join(" "))
}

fn queue_problem(queue: &str, view: &dyn ClusterView) -> Option<String> {
    if queue.is_empty() {
        return None;
    }
    match view.queue(queue) {
        None => Some(format!("unable to find queue: queue {queue:?} not found")),
        Some(q) if !queue_accepts(&q) => Some(format!(
            "can only submit PodGroup to queue with state `Open`, queue `{queue}` status is `{}`.",
            queue_state(&q)
        )),
        Some(_) => None,
    }
}

/// `/podgroups/validate`: the queue exists and is Open; network topology names one tier kind.
///
/// UPDATE is answered too, for configurations that register it; the shipped ones register
/// CREATE only, as Volcano's, because PodGroups have no status subresource and every status
/// write of the scheduler would come here as an update. For an UPDATE only what changed is
/// checked, so a queue closed after the PodGroup was made never blocks its status.
pub fn validate(req: &Request, view: &dyn ClusterView, _cfg: &AdmissionConfig) -> Decision {
    let pg: PodGroup = match decode(req) {
        Ok(p) => p,
        Err(d) => return d,
    };
    let old: Option<PodGroup> = match req.operation {
        Operation::Create => None,
        Operation::Update => match decode_old(req) {
            Ok(o) => Some(o),
            Err(d) => return d,
        },
        _ => {
            return Decision::bad_request(format!(
                "unsupported operation {}",
                req.operation.as_str()
            ));
        }
    };
    let spec = &pg.spec;
    let policies = spec.sub_group_policy.as_deref().unwrap_or_default();
    // Bounds on CREATE, and on an UPDATE that changes the spec: the scheduler's status writes
    // must not be refused for a spec admitted before these checks existed.
    let mut errs = if old.as_ref().is_none_or(|o| o.spec != pg.spec) {
        bounds::podgroup_problems(&pg)
    } else {
        Vec::new()
    };
    let queue_changed = old
        .as_ref()
        .is_none_or(|o| o.spec.queue.as_deref() != spec.queue.as_deref());
    if queue_changed {
        errs.extend(queue_problem(
            spec.queue.as_deref().unwrap_or_default(),
            view,
        ));
    }
    let topology_changed = old.as_ref().is_none_or(|o| {
        o.spec.network_topology != spec.network_topology
            || o.spec.sub_group_policy != spec.sub_group_policy
    });
    if topology_changed {
        errs.extend(topology_problems(spec.network_topology.as_ref(), policies));
    }
    if errs.is_empty() {
        Decision::allow()
    } else {
        Decision::deny(errs.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Verdict;
    use crate::testutil::{request, update};
    use crate::view::StaticView;
    use serde_json::json;
    use std::collections::BTreeMap;
    use tephra_api::Queue;

    fn pg(spec: Value) -> Value {
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "pg", "namespace": "team"}, "spec": spec})
    }

    fn view() -> StaticView {
        let v = StaticView::with_queues([
            Queue::test("default").open(),
            Queue::test("q").open(),
            Queue::test("shut").closed(),
        ]);
        v.apply_namespace(
            "team",
            BTreeMap::from([(QUEUE_NAME_ANNOTATION.to_string(), "q".to_string())]),
        );
        v.apply_namespace("plain", BTreeMap::new());
        v
    }

    fn queue_after_mutation(spec: Value, ns: &str) -> Value {
        let mut obj = pg(spec);
        obj["metadata"]["namespace"] = json!(ns);
        let d = mutate(
            &request("PodGroup", "CREATE", obj),
            &view(),
            &AdmissionConfig::default(),
        );
        match d.verdict {
            Verdict::Mutate(v) => v["spec"]["queue"].clone(),
            Verdict::Allow => json!("<unchanged>"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn namespace_default_queue() {
        assert_eq!(
            queue_after_mutation(json!({"queue": "default"}), "team"),
            "q"
        );
        assert_eq!(queue_after_mutation(json!({}), "team"), "q");
        assert_eq!(queue_after_mutation(json!({"queue": ""}), "team"), "q");
    }

    #[test]
    fn empty_queue_becomes_default_without_namespace_annotation() {
        assert_eq!(queue_after_mutation(json!({}), "plain"), "default");
        assert_eq!(queue_after_mutation(json!({}), "unknown-ns"), "default");
        assert_eq!(
            queue_after_mutation(json!({"queue": "default"}), "plain"),
            "default"
        );
    }

    #[test]
    fn explicit_queue_is_kept() {
        assert_eq!(
            queue_after_mutation(json!({"queue": "other"}), "team"),
            "<unchanged>"
        );
    }

    #[test]
    fn mutate_only_on_create() {
        let d = mutate(
            &request("PodGroup", "UPDATE", pg(json!({}))),
            &view(),
            &AdmissionConfig::default(),
        );
        assert!(
            d.denial()
                .unwrap()
                .contains("expect operation to be `CREATE`")
        );
    }

    fn check(spec: Value) -> Decision {
        validate(
            &request("PodGroup", "CREATE", pg(spec)),
            &view(),
            &AdmissionConfig::default(),
        )
    }

    #[test]
    fn queue_must_exist_and_be_open() {
        assert!(check(json!({"queue": "q", "minMember": 1})).is_allowed());
        assert!(check(json!({"minMember": 1})).is_allowed());
        let msg = check(json!({"queue": "nope"}))
            .denial()
            .unwrap()
            .to_string();
        assert!(msg.contains("unable to find queue"), "{msg}");
        let msg = check(json!({"queue": "shut"}))
            .denial()
            .unwrap()
            .to_string();
        assert!(msg.contains("can only submit PodGroup to queue with state `Open`, queue `shut` status is `Closed`"), "{msg}");
    }

    #[test]
    fn network_topology_tiers() {
        let both = json!({"highestTierAllowed": 1, "highestTierName": "t"});
        let msg = check(json!({"queue": "q", "networkTopology": both}))
            .denial()
            .unwrap()
            .to_string();
        assert!(msg.contains("must not specify 'highestTierAllowed' and 'highestTierName'"));
        let msg = check(json!({"queue": "q", "subGroupPolicy": [{"name": "ok", "networkTopology": {"highestTierAllowed": 1}}, {"name": "sg", "networkTopology": both}]}))
            .denial().unwrap().to_string();
        assert!(msg.contains("in subGroupPolicy 'sg'"), "{msg}");
        let msg = check(json!({"queue": "shut", "networkTopology": both}))
            .denial()
            .unwrap()
            .to_string();
        assert!(msg.contains("; "), "both problems joined: {msg}");
    }

    #[test]
    fn update_checks_only_what_changed() {
        let old = pg(json!({"queue": "shut", "minMember": 1}));
        let mut new = old.clone();
        new["status"] = json!({"phase": "Running"});
        assert!(
            validate(
                &update("PodGroup", old.clone(), new),
                &view(),
                &AdmissionConfig::default()
            )
            .is_allowed()
        );
        let moved = pg(json!({"queue": "nope", "minMember": 1}));
        assert!(
            !validate(
                &update("PodGroup", old, moved),
                &view(),
                &AdmissionConfig::default()
            )
            .is_allowed()
        );
    }

    #[test]
    fn delete_is_unsupported() {
        let d = validate(
            &request("PodGroup", "DELETE", pg(json!({}))),
            &view(),
            &AdmissionConfig::default(),
        );
        assert!(d.denial().unwrap().contains("unsupported operation DELETE"));
    }
}
