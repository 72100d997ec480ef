//! `/deployments/mutate` and `/deployments/validate`: gang scheduling for apps/v1 Deployments
//! and StatefulSets (tephra's addition; Volcano has no webhook for them).
//!
//! A workload asks for a gang with `scheduling.volcano.sh/group-min-member` on its metadata or
//! its pod template. The mutation makes its pods reach our scheduler with what the PodGroup
//! controller needs: the served scheduler name on the template and the gang annotations
//! (min-member, queue) on the template. The validation refuses gangs that can never form and
//! queues that would never admit them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

use super::review::{Decision, Operation, Request};
use super::view::{ClusterView, queue_accepts, queue_state};
use super::{AdmissionConfig, decode, decode_old, patch, working_copy};
use tephra_api::keys;

/// Gang size annotation on a workload or its template.
pub const MIN_MEMBER: &str = keys::GROUP_MIN_MEMBER_ANNOTATION;
/// Queue annotation (scheduling form).
pub const QUEUE_NAME: &str = keys::QUEUE_NAME_ANNOTATION;
/// Queue annotation (batch form).
pub const VOLCANO_QUEUE_NAME: &str = keys::QUEUE_NAME;
/// The scheduler name kube-apiserver writes into templates that name none.
const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// What the rules read of a Deployment or StatefulSet.
#[derive(Debug, Default)]
struct Workload {
    annotations: BTreeMap<String, String>,
    template_annotations: BTreeMap<String, String>,
    scheduler_name: String,
    replicas: i32,
    /// A StatefulSet that makes its pods one at a time, each once the one before is Ready:
    /// `podManagementPolicy` `OrderedReady`, the default.
    ordered: bool,
}

impl Workload {
    fn from_parts(
        annotations: Option<BTreeMap<String, String>>,
        replicas: Option<i32>,
        template: Option<&PodTemplateSpec>,
    ) -> Self {
        Self {
            annotations: annotations.unwrap_or_default(),
            template_annotations: template
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.annotations.clone())
                .unwrap_or_default(),
            scheduler_name: template
                .and_then(|t| t.spec.as_ref())
                .and_then(|s| s.scheduler_name.clone())
                .unwrap_or_default(),
            // Both kinds default `replicas` to 1.
            replicas: replicas.unwrap_or(1),
            ordered: false,
        }
    }

    /// The min-member value, the template's first (it is what the pods carry).
    fn min_member(&self) -> Option<&str> {
        self.template_annotations
            .get(MIN_MEMBER)
            .or_else(|| self.annotations.get(MIN_MEMBER))
            .map(String::as_str)
    }

    /// Every queue the workload names, in precedence order (pod template first, as the
    /// PodGroup controller resolves it), without repeats.
    fn queues(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for map in [&self.template_annotations, &self.annotations] {
            for key in [QUEUE_NAME, VOLCANO_QUEUE_NAME] {
                if let Some(q) = map.get(key).filter(|q| !q.is_empty())
                    && !out.contains(&q.as_str())
                {
                    out.push(q);
                }
            }
        }
        out
    }
}

fn decode_workload(req: &Request, old: bool) -> Result<Workload, Decision> {
    let is_sts = req.kind.kind == "StatefulSet";
    if is_sts {
        let s: StatefulSet = if old { decode_old(req)? } else { decode(req)? };
        let spec = s.spec;
        let mut w =
            Workload::from_parts(s.metadata.annotations, spec.replicas, Some(&spec.template));
        w.ordered = spec
            .pod_management_policy
            .as_deref()
            .is_none_or(|p| p == "OrderedReady");
        Ok(w)
    } else {
        let d: Deployment = if old { decode_old(req)? } else { decode(req)? };
        let spec = d.spec;
        Ok(Workload::from_parts(
            d.metadata.annotations,
            spec.replicas,
            Some(&spec.template),
        ))
    }
}

fn create_or_update(req: &Request) -> Result<(), Decision> {
    match req.operation {
        Operation::Create | Operation::Update => Ok(()),
        _ => Err(Decision::bad_request(
            "expect operation to be 'CREATE' or 'UPDATE'",
        )),
    }
}

/// `/deployments/mutate` (CREATE, UPDATE).
pub fn mutate(req: &Request, cfg: &AdmissionConfig) -> Decision {
    if let Err(d) = create_or_update(req) {
        return d;
    }
    let w = match decode_workload(req, false) {
        Ok(w) => w,
        Err(d) => return d,
    };
    let Some(min_member) = w.min_member() else {
        return Decision::allow();
    };
    let mut obj = working_copy(req);
    let mut warnings = Vec::new();
    const TEMPLATE_META: &[&str] = &["spec", "template", "metadata", "annotations"];
    // kube-apiserver fills an unset template schedulerName with `default-scheduler` before
    // admission, so that value counts as "not set": the workload asked for a gang, which only
    // our scheduler can place.
    if w.scheduler_name.is_empty() || w.scheduler_name == DEFAULT_SCHEDULER {
        patch::set(
            &mut obj,
            &["spec", "template", "spec"],
            "schedulerName",
            Value::String(cfg.default_scheduler().to_string()),
        );
    } else if !cfg.serves(&w.scheduler_name) {
        warnings.push(format!(
            "{MIN_MEMBER} asks for gang scheduling, but the pod template's schedulerName {:?} is not served by tephra ({}); the gang will not be enforced",
            w.scheduler_name,
            cfg.scheduler_names.join(", ")
        ));
    }
    // The gang's pods must all exist before any is placed, and an OrderedReady StatefulSet
    // makes the second only once the first is Ready: it would wait for ever. Admitted all the
    // same (a user may be about to change the policy), with a warning saying so.
    if w.ordered && min_member.trim().parse::<i64>().is_ok_and(|n| n > 1) {
        warnings.push(format!(
            "{MIN_MEMBER} {min_member} with podManagementPolicy OrderedReady (the default) can never start: the StatefulSet makes each pod only once the one before is Ready, and no pod of the gang runs before {min_member} exist; set spec.podManagementPolicy: Parallel"
        ));
    }
    if !w.template_annotations.contains_key(MIN_MEMBER) {
        patch::set(
            &mut obj,
            TEMPLATE_META,
            MIN_MEMBER,
            Value::String(min_member.to_string()),
        );
    }
    for key in [QUEUE_NAME, VOLCANO_QUEUE_NAME] {
        if let Some(q) = w.annotations.get(key)
            && !w.template_annotations.contains_key(key)
        {
            patch::set(&mut obj, TEMPLATE_META, key, Value::String(q.clone()));
        }
    }
    Decision::mutate(obj).with_warnings(warnings)
}

/// `/deployments/validate` (CREATE, UPDATE).
pub fn validate(req: &Request, view: &dyn ClusterView, cfg: &AdmissionConfig) -> Decision {
    if let Err(d) = create_or_update(req) {
        return d;
    }
    let w = match decode_workload(req, false) {
        Ok(w) => w,
        Err(d) => return d,
    };
    let gang = w.min_member().is_some();
    if let Some(mm) = w.min_member() {
        match mm.trim().parse::<i64>() {
            Ok(n) if n > 0 => {
                // A workload scaled to zero has no gang to form; refusing it would block
                // `kubectl scale --replicas=0`.
                if w.replicas > 0 && n > i64::from(w.replicas) {
                    return Decision::deny(format!(
                        "{MIN_MEMBER} {n} is greater than replicas {}",
                        w.replicas
                    ));
                }
            }
            _ => {
                return Decision::deny(format!(
                    "{MIN_MEMBER} must be a positive integer, got {mm:?}"
                ));
            }
        }
    }
    // Queues matter only for workloads our schedulers place.
    if !(gang || cfg.serves(&w.scheduler_name)) {
        return Decision::allow();
    }
    // On UPDATE only a newly named queue is checked: closing a queue must not block scaling or
    // rolling the workloads already in it.
    let old_queues: Vec<String> = if req.operation == Operation::Update {
        decode_workload(req, true)
            .map(|o| o.queues().into_iter().map(String::from).collect())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    for q in w.queues() {
        if old_queues.iter().any(|o| o == q) {
            continue;
        }
        match view.queue(q) {
            None => return Decision::deny(format!("unable to find queue: {q}")),
            Some(queue) if !queue_accepts(&queue) => {
                return Decision::deny(format!(
                    "can only submit workload to queue with state `Open`, queue `{q}` status is `{}`",
                    queue_state(&queue)
                ));
            }
            Some(_) => {}
        }
    }
    Decision::allow()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Verdict;
    use crate::testutil::{request, update};
    use crate::view::StaticView;
    use serde_json::json;
    use tephra_api::Queue;

    fn workload(
        kind: &str,
        annotations: Value,
        template_annotations: Value,
        scheduler: Option<&str>,
        replicas: i32,
    ) -> Value {
        let mut spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        if let Some(s) = scheduler {
            spec["schedulerName"] = json!(s);
        }
        json!({"apiVersion": "apps/v1", "kind": kind,
               "metadata": {"name": "w", "namespace": "ns", "annotations": annotations},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "w"}},
                        "template": {"metadata": {"labels": {"app": "w"}, "annotations": template_annotations}, "spec": spec}}})
    }

    fn mutated(d: Decision) -> Value {
        match d.verdict {
            Verdict::Mutate(v) => v,
            Verdict::Allow => json!("<unchanged>"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn gang_workload_gets_scheduler_and_annotations_on_its_template() {
        for kind in ["Deployment", "StatefulSet"] {
            let w = workload(
                kind,
                json!({MIN_MEMBER: "2", QUEUE_NAME: "q", VOLCANO_QUEUE_NAME: "q2"}),
                json!({}),
                Some("default-scheduler"),
                3,
            );
            let m = mutated(mutate(
                &request(kind, "CREATE", w),
                &AdmissionConfig::default(),
            ));
            let t = &m["spec"]["template"];
            assert_eq!(t["spec"]["schedulerName"], "volcano", "{kind}");
            assert_eq!(t["metadata"]["annotations"][MIN_MEMBER], "2");
            assert_eq!(t["metadata"]["annotations"][QUEUE_NAME], "q");
            assert_eq!(t["metadata"]["annotations"][VOLCANO_QUEUE_NAME], "q2");
        }
    }

    #[test]
    fn an_ordered_statefulset_gang_is_warned_that_it_can_never_start() {
        let cfg = AdmissionConfig::default();
        let warnings = |policy: Option<&str>, min: &str, kind: &str| {
            let mut w = workload(kind, json!({MIN_MEMBER: min}), json!({}), None, 3);
            if let Some(p) = policy {
                w["spec"]["podManagementPolicy"] = json!(p);
            }
            mutate(&request(kind, "CREATE", w), &cfg).warnings
        };
        for policy in [None, Some("OrderedReady")] {
            let got = warnings(policy, "3", "StatefulSet");
            assert_eq!(got.len(), 1, "{policy:?}: {got:?}");
            assert!(
                got[0].contains("can never start")
                    && got[0].contains("podManagementPolicy: Parallel"),
                "{}",
                got[0]
            );
        }
        assert!(warnings(Some("Parallel"), "3", "StatefulSet").is_empty());
        assert!(
            warnings(None, "1", "StatefulSet").is_empty(),
            "a gang of one starts"
        );
        assert!(warnings(None, "3", "Deployment").is_empty());
    }

    #[test]
    fn template_min_member_alone_is_enough_and_template_values_win() {
        let w = workload(
            "Deployment",
            json!({QUEUE_NAME: "outer"}),
            json!({MIN_MEMBER: "1", QUEUE_NAME: "inner"}),
            None,
            1,
        );
        let m = mutated(mutate(
            &request("Deployment", "UPDATE", w),
            &AdmissionConfig::default(),
        ));
        assert_eq!(m["spec"]["template"]["spec"]["schedulerName"], "volcano");
        assert_eq!(
            m["spec"]["template"]["metadata"]["annotations"][QUEUE_NAME],
            "inner"
        );
    }

    #[test]
    fn template_without_annotations_gets_a_map() {
        let mut w = workload(
            "Deployment",
            json!({MIN_MEMBER: "1"}),
            json!({}),
            Some("volcano"),
            1,
        );
        w["spec"]["template"]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        let m = mutated(mutate(
            &request("Deployment", "CREATE", w),
            &AdmissionConfig::default(),
        ));
        assert_eq!(
            m["spec"]["template"]["metadata"]["annotations"][MIN_MEMBER],
            "1"
        );
    }

    #[test]
    fn non_gang_workloads_and_own_schedulers_are_left_alone() {
        let w = workload(
            "Deployment",
            json!({}),
            json!({}),
            Some("default-scheduler"),
            1,
        );
        assert_eq!(
            mutated(mutate(
                &request("Deployment", "CREATE", w),
                &AdmissionConfig::default()
            )),
            "<unchanged>"
        );
        let w = workload(
            "Deployment",
            json!({MIN_MEMBER: "1"}),
            json!({MIN_MEMBER: "1"}),
            Some("other-sched"),
            1,
        );
        let d = mutate(
            &request("Deployment", "CREATE", w.clone()),
            &AdmissionConfig::default(),
        );
        assert!(d.warnings[0].contains("not served"), "{:?}", d.warnings);
        assert_eq!(mutated(d), w);
    }

    fn view() -> StaticView {
        StaticView::with_queues([Queue::test("q").open(), Queue::test("shut").closed()])
    }

    fn check(w: Value) -> Decision {
        let kind = w["kind"].as_str().unwrap().to_string();
        validate(
            &request(&kind, "CREATE", w),
            &view(),
            &AdmissionConfig::default(),
        )
    }

    #[test]
    fn min_member_must_be_a_positive_integer_within_replicas() {
        for bad in ["0", "-1", "two", "1.5", ""] {
            let d = check(workload(
                "Deployment",
                json!({MIN_MEMBER: bad}),
                json!({}),
                Some("volcano"),
                3,
            ));
            assert!(
                d.denial().unwrap().contains("must be a positive integer"),
                "{bad}"
            );
        }
        let d = check(workload(
            "StatefulSet",
            json!({}),
            json!({MIN_MEMBER: "4"}),
            Some("volcano"),
            3,
        ));
        assert!(
            d.denial().unwrap().contains("greater than replicas 3"),
            "{:?}",
            d.denial()
        );
        assert!(
            check(workload(
                "Deployment",
                json!({MIN_MEMBER: "3"}),
                json!({}),
                Some("volcano"),
                3
            ))
            .is_allowed()
        );
        // Scaled to zero: nothing to gang.
        assert!(
            check(workload(
                "Deployment",
                json!({MIN_MEMBER: "3"}),
                json!({}),
                Some("volcano"),
                0
            ))
            .is_allowed()
        );
    }

    #[test]
    fn named_queues_must_exist_and_be_open() {
        let d = check(workload(
            "Deployment",
            json!({MIN_MEMBER: "1", QUEUE_NAME: "nope"}),
            json!({}),
            None,
            1,
        ));
        assert!(d.denial().unwrap().contains("unable to find queue: nope"));
        let d = check(workload(
            "Deployment",
            json!({}),
            json!({VOLCANO_QUEUE_NAME: "shut"}),
            Some("volcano"),
            1,
        ));
        assert!(
            d.denial()
                .unwrap()
                .contains("queue `shut` status is `Closed`")
        );
        assert!(
            check(workload(
                "Deployment",
                json!({MIN_MEMBER: "1", QUEUE_NAME: "q"}),
                json!({}),
                None,
                1
            ))
            .is_allowed()
        );
        // Not ours: not checked.
        assert!(
            check(workload(
                "Deployment",
                json!({QUEUE_NAME: "nope"}),
                json!({}),
                Some("default-scheduler"),
                1
            ))
            .is_allowed()
        );
    }

    #[test]
    fn update_checks_only_newly_named_queues() {
        let old = workload(
            "Deployment",
            json!({MIN_MEMBER: "1", QUEUE_NAME: "shut"}),
            json!({}),
            Some("volcano"),
            1,
        );
        let mut scaled = old.clone();
        scaled["spec"]["replicas"] = json!(2);
        assert!(
            validate(
                &update("Deployment", old.clone(), scaled),
                &view(),
                &AdmissionConfig::default()
            )
            .is_allowed()
        );
        let moved = workload(
            "Deployment",
            json!({MIN_MEMBER: "1", QUEUE_NAME: "nope"}),
            json!({}),
            Some("volcano"),
            1,
        );
        assert!(
            !validate(
                &update("Deployment", old, moved),
                &view(),
                &AdmissionConfig::default()
            )
            .is_allowed()
        );
    }

    #[test]
    fn delete_is_refused_as_unexpected() {
        let w = workload("Deployment", json!({}), json!({}), None, 1);
        assert!(
            !validate(
                &request("Deployment", "DELETE", w.clone()),
                &view(),
                &AdmissionConfig::default()
            )
            .is_allowed()
        );
        assert!(
            !mutate(
                &request("Deployment", "DELETE", w),
                &AdmissionConfig::default()
            )
            .is_allowed()
        );
    }
}
