//! `/pods/mutate` and `/pods/validate`.
//!
//! Mutation, in order: Volcano's queue-allocation scheduling gate (when enabled), Volcano's
//! resource groups (when configured), then tephra's gang group name: a pod served by one of our
//! schedulers, with a controller owner and no `scheduling.k8s.io/group-name`, gets
//! `podgroup-<owner uid>` at creation. Volcano's PodGroup controller patches the annotation in
//! later, so for a moment the scheduler sees a pod without its gang; naming the group at
//! admission closes that window (departure from Volcano, also in the README). The PodGroup
//! controller derives the same name from the same owner, so both agree.
//!
//! With the native gang engine (`--native-scheduler-name` set), a gang pod of ours is then
//! handed to kube-scheduler's own gang scheduling: `spec.schedulingGroup.podGroupName` names
//! the native PodGroup mirroring its Volcano PodGroup (same name; the field can only be set at
//! creation), `spec.schedulerName` becomes the cluster's profile with the name asked for kept
//! in `scheduling.tephra.io/scheduler-name`, and the plan gate holds the pod until a session
//! admits its gang to its queue.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::patch::{MapOnly, Ops};
use super::review::{Decision, Operation, Request};
use super::{AdmissionConfig, decode};

use tephra_api::keys;

/// Annotation naming a pod's PodGroup.
pub const GROUP_NAME: &str = keys::KUBE_GROUP_NAME_ANNOTATION;
/// Pod annotation opting into the queue-allocation scheduling gate.
pub const QUEUE_ALLOCATION_GATE: &str = keys::QUEUE_ALLOCATION_GATE;
/// Default annotation matching a pod to a resource group.
pub const RESOURCE_GROUP: &str = keys::RESOURCE_GROUP;
/// Disruption budget: minimum available.
pub const JDB_MIN_AVAILABLE: &str = keys::JDB_MIN_AVAILABLE;
/// Disruption budget: maximum unavailable.
pub const JDB_MAX_UNAVAILABLE: &str = keys::JDB_MAX_UNAVAILABLE;

/// One entry of Volcano's `--admission-conf` `resourceGroups` list: pods that belong to the
/// group get its node selector labels, affinity, tolerations and scheduler name.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceGroup {
    /// Group name (matched against `volcano.sh/resource-group` when `object.key` is empty).
    pub resource_group: String,
    /// How membership is decided.
    pub object: ResourceGroupObject,
    /// Scheduler name to set.
    pub scheduler_name: String,
    /// Tolerations to append (Kubernetes `Toleration` JSON).
    pub tolerations: Vec<Value>,
    /// Node selector labels to merge in (the group wins).
    pub labels: BTreeMap<String, String>,
    /// A Kubernetes `Affinity` as a JSON string, set only on pods without one.
    pub affinity: String,
}

/// Membership rule of a [`ResourceGroup`].
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct ResourceGroupObject {
    /// `namespace`, `annotation` or empty (annotation, plus the default annotation).
    pub key: String,
    /// Namespaces, or YAML maps `{annotationKey: value}` for the annotation form.
    pub value: Vec<String>,
}

/// What `/pods/mutate` reads of a pod: nothing else is decoded (serde skips the rest without
/// building it), and strings are borrowed from the review where they need no unescaping. This
/// webhook is on the path of every pod the cluster creates; decoding a whole `Pod` and a `Value`
/// copy of it to diff was most of its time.
#[derive(Debug, Default, Deserialize)]
struct PodView<'a> {
    #[serde(borrow, default)]
    metadata: Option<MapOnly<MetaView<'a>>>,
    #[serde(borrow, default)]
    spec: Option<MapOnly<PodSpecView<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaView<'a> {
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    annotations: Option<BTreeMap<Cow<'a, str>, Cow<'a, str>>>,
    #[serde(borrow, default)]
    owner_references: Option<Vec<OwnerView<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
struct OwnerView<'a> {
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
    controller: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpecView<'a> {
    #[serde(borrow, default)]
    scheduler_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    node_name: Option<Cow<'a, str>>,
    scheduling_group: Option<IgnoredAny>,
    #[serde(borrow, default)]
    scheduling_gates: Option<Vec<GateView<'a>>>,
    #[serde(borrow, default)]
    node_selector: Option<BTreeMap<Cow<'a, str>, Cow<'a, str>>>,
    affinity: Option<IgnoredAny>,
    tolerations: Option<Vec<IgnoredAny>>,
}

#[derive(Debug, Default, Deserialize)]
struct GateView<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

impl MetaView<'_> {
    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .as_ref()
            .and_then(|a| a.iter().find(|(k, _)| k.as_ref() == key))
            .map(|(_, v)| v.as_ref())
    }
}

/// `/pods/mutate` (CREATE). The patch operations are emitted directly: each is an `add` of a
/// member that differs, below a parent the decode saw to be an object (a missing or `null`
/// parent is added whole), or an append (`-`) to a list that exists.
pub fn mutate(req: &Request, cfg: &AdmissionConfig) -> Decision {
    if req.operation != Operation::Create {
        return Decision::bad_request("expect operation to be 'CREATE'");
    }
    let pod: MapOnly<PodView<'_>> = match decode(req) {
        Ok(p) => p,
        Err(d) => return d,
    };
    let no_meta = MetaView::default();
    let meta = pod.metadata.as_deref().unwrap_or(&no_meta);
    let no_spec = PodSpecView::default();
    let spec = pod.spec.as_deref().unwrap_or(&no_spec);
    let mut ops = Ops::new();
    // Set once `spec` is known to be an object in the patched document.
    let mut spec_made = pod.spec.is_some();

    if cfg.queue_allocation_gate && meta.annotation(QUEUE_ALLOCATION_GATE) == Some("true") {
        let gates = spec.scheduling_gates.as_deref();
        let gated = gates
            .into_iter()
            .flatten()
            .any(|g| g.name.as_deref() == Some(QUEUE_ALLOCATION_GATE));
        if !gated {
            let gate = json!({"name": QUEUE_ALLOCATION_GATE});
            // Append to the list as sent, so existing entries stay exactly as they are.
            if gates.is_some() {
                ops.add(&["spec", "schedulingGates", "-"], gate);
            } else {
                ensure_spec(&mut ops, &mut spec_made);
                ops.add(&["spec", "schedulingGates"], Value::Array(vec![gate]));
            }
        }
    }

    let mut scheduler_name: &str = spec.scheduler_name.as_deref().unwrap_or_default();
    if let Some(group) = cfg
        .resource_groups
        .iter()
        .find(|g| belongs(meta, &req.namespace, g))
    {
        apply_resource_group(&mut ops, &mut spec_made, spec, group);
        if !group.scheduler_name.is_empty() {
            scheduler_name = &group.scheduler_name;
        }
    }

    if !cfg.serves(scheduler_name) {
        return Decision::patch(ops);
    }
    let mut annotations = serde_json::Map::new();
    let group = match meta.annotation(GROUP_NAME) {
        Some(g) => Some(g.to_string()),
        None => {
            let controller = meta.owner_references.iter().flatten().find(|o| {
                o.controller == Some(true) && o.uid.as_deref().is_some_and(|u| !u.is_empty())
            });
            let derived = controller
                .and_then(|o| o.uid.as_deref())
                .map(|uid| keys::workload_pod_group_name(Some(uid), ""));
            if let Some(name) = &derived {
                annotations.insert(GROUP_NAME.to_string(), Value::String(name.clone()));
            }
            derived
        }
    };
    if let (Some(native), Some(group)) = (cfg.native_scheduler.as_deref(), group) {
        let member = meta.annotation(keys::ELASTIC) != Some("true");
        to_native(
            &mut ops,
            &mut spec_made,
            spec,
            member.then_some(&*group),
            native,
        );
        annotations.insert(
            keys::SCHEDULER_NAME_ANNOTATION.to_string(),
            Value::String(scheduler_name.to_string()),
        );
    }
    if !annotations.is_empty() {
        if meta.annotations.is_some() {
            for (k, v) in annotations {
                ops.add(&["metadata", "annotations", &k], v);
            }
        } else {
            // Something was read from `metadata` (owner references, a group name), so it is an
            // object.
            ops.add(&["metadata", "annotations"], Value::Object(annotations));
        }
    }
    Decision::patch(ops)
}

/// Hands a gang pod to kube-scheduler's own gang scheduling (see the module head): its native
/// PodGroup `group` (none for a pod beyond the gang's minimum, [`keys::ELASTIC`], which
/// kube-scheduler places on its own), the profile `native`, and the plan gate (a pod that
/// names its node is not scheduled, and the API refuses gates on it).
fn to_native(
    ops: &mut Ops,
    spec_made: &mut bool,
    spec: &PodSpecView<'_>,
    group: Option<&str>,
    native: &str,
) {
    ensure_spec(ops, spec_made);
    if let Some(group) = group
        && spec.scheduling_group.is_none()
    {
        ops.add(&["spec", "schedulingGroup"], json!({"podGroupName": group}));
    }
    if spec.scheduler_name.as_deref() != Some(native) {
        ops.add(
            &["spec", "schedulerName"],
            Value::String(native.to_string()),
        );
    }
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
        return;
    }
    let gates = spec.scheduling_gates.as_deref();
    let gated = gates
        .into_iter()
        .flatten()
        .any(|g| g.name.as_deref() == Some(keys::PLAN_GATE));
    if !gated {
        let gate = json!({"name": keys::PLAN_GATE});
        if gates.is_some() {
            ops.add(&["spec", "schedulingGates", "-"], gate);
        } else {
            ops.add(&["spec", "schedulingGates"], Value::Array(vec![gate]));
        }
    }
}

/// Adds an empty `spec` before the first operation below it, when the pod has none.
fn ensure_spec(ops: &mut Ops, made: &mut bool) {
    if !*made {
        ops.add(&["spec"], json!({}));
        *made = true;
    }
}

fn belongs(meta: &MetaView<'_>, request_namespace: &str, group: &ResourceGroup) -> bool {
    match group.object.key.as_str() {
        "namespace" => {
            let ns = meta
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(request_namespace);
            group.object.value.iter().any(|v| v == ns)
        }
        "" | "annotation" => {
            let matches_listed = group.object.value.iter().any(|entry| {
                serde_saphyr::from_str::<BTreeMap<String, String>>(entry)
                    .map(|m| {
                        m.iter()
                            .any(|(k, v)| meta.annotation(k) == Some(v.as_str()))
                    })
                    .unwrap_or(false)
            });
            matches_listed
                || (group.object.key.is_empty()
                    && meta.annotation(RESOURCE_GROUP) == Some(group.resource_group.as_str()))
        }
        _ => false,
    }
}

fn apply_resource_group(
    ops: &mut Ops,
    spec_made: &mut bool,
    spec: &PodSpecView<'_>,
    group: &ResourceGroup,
) {
    if !group.labels.is_empty() {
        // The group's labels win over the pod's selector.
        match spec.node_selector.as_ref() {
            Some(selector) => {
                for (k, v) in &group.labels {
                    let same = selector
                        .iter()
                        .any(|(sk, sv)| sk.as_ref() == k && sv.as_ref() == v);
                    if !same {
                        ops.add(&["spec", "nodeSelector", k], Value::String(v.clone()));
                    }
                }
            }
            None => {
                ensure_spec(ops, spec_made);
                ops.add(&["spec", "nodeSelector"], json!(group.labels));
            }
        }
    }
    if !group.affinity.is_empty() && spec.affinity.is_none() {
        // An affinity that does not parse is ignored, as in Volcano.
        if let Ok(aff) =
            serde_json::from_str::<k8s_openapi::api::core::v1::Affinity>(&group.affinity)
            && let Ok(v) = serde_json::to_value(aff)
        {
            ensure_spec(ops, spec_made);
            ops.add(&["spec", "affinity"], v);
        }
    }
    if !group.tolerations.is_empty() {
        if spec.tolerations.is_some() {
            for t in &group.tolerations {
                ops.add(&["spec", "tolerations", "-"], t.clone());
            }
        } else {
            ensure_spec(ops, spec_made);
            ops.add(
                &["spec", "tolerations"],
                Value::Array(group.tolerations.clone()),
            );
        }
    }
    if !group.scheduler_name.is_empty()
        && spec.scheduler_name.as_deref() != Some(group.scheduler_name.as_str())
    {
        ensure_spec(ops, spec_made);
        ops.add(
            &["spec", "schedulerName"],
            Value::String(group.scheduler_name.clone()),
        );
    }
}

/// `/pods/validate` (CREATE): the disruption-budget annotations of pods our schedulers serve.
pub fn validate(req: &Request, cfg: &AdmissionConfig) -> Decision {
    if req.operation != Operation::Create {
        return Decision::bad_request("expect operation to be 'CREATE'");
    }
    let pod: Pod = match decode(req) {
        Ok(p) => p,
        Err(d) => return d,
    };
    // After `/pods/mutate` with the native engine, the scheduler asked for is in an annotation.
    if !cfg.serves(keys::served_scheduler(&pod)) {
        return Decision::allow();
    }
    let Some(annotations) = pod.metadata.annotations.as_ref() else {
        return Decision::allow();
    };
    let keys = [JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE];
    let mut found = 0;
    for key in keys {
        if let Some(value) = annotations.get(key) {
            found += 1;
            if let Err(msg) = int_or_percentage(key, value) {
                return Decision::deny(msg);
            }
        }
    }
    if found > 1 {
        return Decision::deny(format!(
            "not allow configure multiple annotations <[{} {}]> at same time",
            keys[0], keys[1]
        ));
    }
    Decision::allow()
}

/// A disruption budget value: a positive integer, or a percentage between 1% and 99%.
fn int_or_percentage(key: &str, value: &str) -> Result<(), String> {
    if let Ok(n) = value.parse::<i64>() {
        if n <= 0 {
            return Err(format!(
                "invalid value <{value:?}> for {key}, it must be a positive integer"
            ));
        }
        return Ok(());
    }
    // Volcano strips every `%` before parsing; kept for compatibility.
    let stripped = value.replace('%', "");
    match stripped.parse::<i64>() {
        Ok(v) if (1..=99).contains(&v) => Ok(()),
        Ok(_) => Err(format!(
            "invalid value <{value:?}> for {key}, it must be a valid percentage which between 1% ~ 99%"
        )),
        Err(e) => Err(format!("invalid value {stripped:?} ({e}) for {key}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch;
    use crate::review::Verdict;
    use crate::testutil::{applied, request, request_with};
    use k8s_openapi::api::core::v1::PodSpec;

    /// The object the mutation admits (the webhook's patch applied to the request's object).
    fn mutate(req: &Request, cfg: &AdmissionConfig) -> Value {
        applied(req, &super::mutate(req, cfg))
    }

    fn pod(scheduler: &str, annotations: Value, owners: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "annotations": annotations, "ownerReferences": owners},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}
        })
    }

    fn rs_owner() -> Value {
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": true}])
    }

    fn mutated(v: &Value) -> &Value {
        v
    }

    #[test]
    fn served_pod_with_controller_gets_group_name() {
        let cfg = AdmissionConfig::default();
        let d = mutate(
            &request("Pod", "CREATE", pod("volcano", json!({}), rs_owner())),
            &cfg,
        );
        assert_eq!(
            mutated(&d)["metadata"]["annotations"][GROUP_NAME],
            "podgroup-rs-uid"
        );
    }

    #[test]
    fn group_name_is_added_when_annotations_are_absent() {
        let cfg = AdmissionConfig::default();
        let mut p = pod("volcano", json!({}), rs_owner());
        p["metadata"].as_object_mut().unwrap().remove("annotations");
        let d = mutate(&request("Pod", "CREATE", p), &cfg);
        assert_eq!(
            mutated(&d)["metadata"]["annotations"][GROUP_NAME],
            "podgroup-rs-uid"
        );
    }

    #[test]
    fn the_native_engine_hands_a_gang_pod_to_kube_schedulers_gang_cycle() {
        let cfg = AdmissionConfig {
            native_scheduler: Some("default-scheduler".into()),
            ..AdmissionConfig::default()
        };
        // A vcJob's pod: its group named by the Job controller.
        let p = pod("volcano", json!({GROUP_NAME: "train-uid"}), json!([]));
        let out = mutated(&mutate(&request("Pod", "CREATE", p), &cfg)).clone();
        assert_eq!(out["spec"]["schedulingGroup"]["podGroupName"], "train-uid");
        assert_eq!(out["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(
            out["metadata"]["annotations"][keys::SCHEDULER_NAME_ANNOTATION],
            "volcano"
        );
        assert_eq!(
            out["spec"]["schedulingGates"],
            json!([{"name": keys::PLAN_GATE}])
        );
        // A workload's pod: the group derived from its owner is the one named.
        let out = mutated(&mutate(
            &request("Pod", "CREATE", pod("volcano", json!({}), rs_owner())),
            &cfg,
        ))
        .clone();
        assert_eq!(
            out["metadata"]["annotations"][GROUP_NAME],
            "podgroup-rs-uid"
        );
        assert_eq!(
            out["spec"]["schedulingGroup"]["podGroupName"],
            "podgroup-rs-uid"
        );
        // A pod beyond its gang's minimum goes to the same profile behind the same gate, in
        // no native group: kube-scheduler places it on its own.
        let p = pod(
            "volcano",
            json!({GROUP_NAME: "train-uid", keys::ELASTIC: "true"}),
            json!([]),
        );
        let out = mutated(&mutate(&request("Pod", "CREATE", p), &cfg)).clone();
        assert_eq!(out["spec"].get("schedulingGroup"), None);
        assert_eq!(out["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(
            out["spec"]["schedulingGates"],
            json!([{"name": keys::PLAN_GATE}])
        );
        // Another scheduler's pod, and a pod of ours in no gang, are left alone.
        for p in [
            pod("default-scheduler", json!({GROUP_NAME: "g"}), json!([])),
            pod("volcano", json!({}), json!([])),
        ] {
            assert_eq!(
                mutated(&mutate(&request("Pod", "CREATE", p.clone()), &cfg)),
                &p
            );
        }
        // The gate is added once, after gates already there; a pod naming its node gets none.
        let mut p = pod("volcano", json!({GROUP_NAME: "g"}), json!([]));
        p["spec"]["schedulingGates"] =
            json!([{"name": "example.com/quota"}, {"name": keys::PLAN_GATE}]);
        let out = mutated(&mutate(&request("Pod", "CREATE", p), &cfg)).clone();
        assert_eq!(
            out["spec"]["schedulingGates"],
            json!([{"name": "example.com/quota"}, {"name": keys::PLAN_GATE}])
        );
        let mut p = pod("volcano", json!({GROUP_NAME: "g"}), json!([]));
        p["spec"]["nodeName"] = json!("n1");
        let out = mutated(&mutate(&request("Pod", "CREATE", p), &cfg)).clone();
        assert!(out["spec"].get("schedulingGates").is_none());
        assert_eq!(out["spec"]["schedulingGroup"]["podGroupName"], "g");
        // The disruption-budget check still applies to the pod as mutated.
        let mut p = out;
        p["metadata"]["annotations"][JDB_MIN_AVAILABLE] = json!("0");
        assert!(!validate(&request("Pod", "CREATE", p), &cfg).is_allowed());
    }

    #[test]
    fn existing_group_name_is_never_overwritten() {
        let cfg = AdmissionConfig::default();
        let p = pod("volcano", json!({GROUP_NAME: "mine"}), rs_owner());
        let d = mutate(&request("Pod", "CREATE", p.clone()), &cfg);
        assert_eq!(mutated(&d), &p);
    }

    #[test]
    fn other_scheduler_or_no_controller_is_left_alone() {
        let cfg = AdmissionConfig::default();
        let p = pod("default-scheduler", json!({}), rs_owner());
        assert_eq!(
            mutated(&mutate(&request("Pod", "CREATE", p.clone()), &cfg)),
            &p
        );
        let not_controller = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": false}]);
        let p = pod("volcano", json!({}), not_controller);
        assert_eq!(
            mutated(&mutate(&request("Pod", "CREATE", p.clone()), &cfg)),
            &p
        );
        let p = pod("volcano", json!({}), json!([]));
        assert_eq!(
            mutated(&mutate(&request("Pod", "CREATE", p.clone()), &cfg)),
            &p
        );
    }

    #[test]
    fn configured_scheduler_names_are_served() {
        let cfg = AdmissionConfig {
            scheduler_names: vec!["tephra".into()],
            ..AdmissionConfig::default()
        };
        let d = mutate(
            &request("Pod", "CREATE", pod("tephra", json!({}), rs_owner())),
            &cfg,
        );
        assert_eq!(
            mutated(&d)["metadata"]["annotations"][GROUP_NAME],
            "podgroup-rs-uid"
        );
        let p = pod("volcano", json!({}), rs_owner());
        assert_eq!(
            mutated(&mutate(&request("Pod", "CREATE", p.clone()), &cfg)),
            &p
        );
    }

    #[test]
    fn mutate_refuses_other_operations() {
        let cfg = AdmissionConfig::default();
        let d = super::mutate(
            &request("Pod", "UPDATE", pod("volcano", json!({}), rs_owner())),
            &cfg,
        );
        assert!(d.denial().unwrap().contains("CREATE"));
    }

    #[test]
    fn queue_allocation_gate_only_when_enabled_and_asked() {
        let p = pod("volcano", json!({QUEUE_ALLOCATION_GATE: "true"}), json!([]));
        let off = AdmissionConfig::default();
        assert_eq!(
            mutated(&mutate(&request("Pod", "CREATE", p.clone()), &off)),
            &p
        );
        let on = AdmissionConfig {
            queue_allocation_gate: true,
            ..AdmissionConfig::default()
        };
        let d = mutate(&request("Pod", "CREATE", p.clone()), &on);
        assert_eq!(
            mutated(&d)["spec"]["schedulingGates"],
            json!([{"name": QUEUE_ALLOCATION_GATE}])
        );
        // Existing gates are kept, and the gate is not added twice.
        let mut with_gates = p.clone();
        with_gates["spec"]["schedulingGates"] = json!([{"name": "other"}]);
        let d = mutate(&request("Pod", "CREATE", with_gates), &on);
        assert_eq!(
            mutated(&d)["spec"]["schedulingGates"],
            json!([{"name": "other"}, {"name": QUEUE_ALLOCATION_GATE}])
        );
        let mut gated = p.clone();
        gated["spec"]["schedulingGates"] = json!([{"name": QUEUE_ALLOCATION_GATE}]);
        assert_eq!(
            mutated(&mutate(&request("Pod", "CREATE", gated.clone()), &on)),
            &gated
        );
    }

    fn groups() -> Vec<ResourceGroup> {
        vec![
            ResourceGroup {
                resource_group: "management".into(),
                object: ResourceGroupObject {
                    key: "namespace".into(),
                    value: vec!["mng-ns".into()],
                },
                labels: BTreeMap::from([("pool".into(), "mng".into())]),
                tolerations: vec![json!({"key": "mng", "operator": "Exists", "effect": "NoSchedule"})],
                scheduler_name: "volcano".into(),
                ..ResourceGroup::default()
            },
            ResourceGroup {
                resource_group: "cpu".into(),
                object: ResourceGroupObject {
                    key: "".into(),
                    value: vec!["team: a".into()],
                },
                affinity: r#"{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"cpu","operator":"Exists"}]}]}}}"#.into(),
                ..ResourceGroup::default()
            },
        ]
    }

    #[test]
    fn resource_group_by_namespace_sets_selector_tolerations_and_scheduler() {
        let cfg = AdmissionConfig {
            resource_groups: groups(),
            ..AdmissionConfig::default()
        };
        let mut p = pod("default-scheduler", json!({}), rs_owner());
        p["metadata"]["namespace"] = json!("mng-ns");
        p["spec"]["nodeSelector"] = json!({"zone": "a", "pool": "x"});
        p["spec"]["tolerations"] = json!([{"key": "t", "operator": "Exists"}]);
        let d = mutate(&request_with("Pod", "CREATE", "mng-ns", p, None), &cfg);
        let m = mutated(&d);
        assert_eq!(
            m["spec"]["nodeSelector"],
            json!({"zone": "a", "pool": "mng"})
        );
        assert_eq!(m["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(m["spec"]["schedulerName"], "volcano");
        // The group made it a served pod, so it gets its group name too.
        assert_eq!(m["metadata"]["annotations"][GROUP_NAME], "podgroup-rs-uid");
    }

    #[test]
    fn resource_group_by_annotation_and_default_annotation() {
        let cfg = AdmissionConfig {
            resource_groups: groups(),
            ..AdmissionConfig::default()
        };
        let p = pod("volcano", json!({"team": "a"}), json!([]));
        let d = mutate(&request("Pod", "CREATE", p), &cfg);
        assert!(mutated(&d)["spec"]["affinity"]["nodeAffinity"].is_object());
        let p = pod("volcano", json!({RESOURCE_GROUP: "cpu"}), json!([]));
        let d = mutate(&request("Pod", "CREATE", p), &cfg);
        assert!(mutated(&d)["spec"]["affinity"]["nodeAffinity"].is_object());
        // A pod with its own affinity keeps it; a non-member is untouched.
        let mut p = pod("volcano", json!({"team": "a"}), json!([]));
        p["spec"]["affinity"] = json!({"podAffinity": {}});
        assert_eq!(
            mutated(&mutate(&request("Pod", "CREATE", p.clone()), &cfg)),
            &p
        );
        let p = pod("volcano", json!({"team": "b"}), json!([]));
        assert_eq!(
            mutated(&mutate(&request("Pod", "CREATE", p.clone()), &cfg)),
            &p
        );
    }

    #[test]
    fn jdb_values() {
        let cfg = AdmissionConfig::default();
        let ok = ["1", "5", "1%", "50%", "99%"];
        for v in ok {
            let p = pod("volcano", json!({JDB_MIN_AVAILABLE: v}), json!([]));
            assert!(
                validate(&request("Pod", "CREATE", p), &cfg).is_allowed(),
                "{v}"
            );
        }
        let bad = [
            ("0", "positive integer"),
            ("-3", "positive integer"),
            ("0%", "between 1% ~ 99%"),
            ("100%", "between 1% ~ 99%"),
            ("abc", "invalid value"),
        ];
        for (v, want) in bad {
            let p = pod("volcano", json!({JDB_MAX_UNAVAILABLE: v}), json!([]));
            let d = validate(&request("Pod", "CREATE", p), &cfg);
            let msg = d.denial().unwrap_or_else(|| panic!("{v} allowed"));
            assert!(
                msg.contains(want) && msg.contains(JDB_MAX_UNAVAILABLE),
                "{msg}"
            );
        }
    }

    #[test]
    fn jdb_both_annotations_denied() {
        let cfg = AdmissionConfig::default();
        let p = pod(
            "volcano",
            json!({JDB_MIN_AVAILABLE: "1", JDB_MAX_UNAVAILABLE: "1"}),
            json!([]),
        );
        let d = validate(&request("Pod", "CREATE", p), &cfg);
        assert!(d.denial().unwrap().contains("multiple annotations"));
    }

    #[test]
    fn jdb_ignored_for_other_schedulers() {
        let cfg = AdmissionConfig::default();
        let p = pod(
            "default-scheduler",
            json!({JDB_MIN_AVAILABLE: "0"}),
            json!([]),
        );
        assert!(validate(&request("Pod", "CREATE", p), &cfg).is_allowed());
    }

    #[test]
    fn a_pod_that_does_not_decode_is_refused_with_a_reason() {
        let cfg = AdmissionConfig::default();
        let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5}});
        let d = validate(&request("Pod", "CREATE", p.clone()), &cfg);
        assert!(d.denial().unwrap().contains("Pod"));
        // The mutation decodes only what it reads; a bad field there is refused, by name.
        let p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"annotations": 5}});
        let d = super::mutate(&request("Pod", "CREATE", p), &cfg);
        let msg = d.denial().unwrap();
        assert!(msg.contains("metadata.annotations: invalid type"), "{msg}");
    }

    // The mutation as it was written before it emitted operations (typed decode, a `Value`
    // copy changed with `patch::set`, then diffed): the reference the direct operations are
    // checked against.
    fn reference(req: &Request, cfg: &AdmissionConfig) -> Value {
        let pod: Pod = req.object.as_ref().unwrap().decode().unwrap();
        let mut obj = req.object.as_ref().unwrap().value().clone();
        // Borrow, never clone, the decoded pod: this webhook sees every pod of the cluster.
        let no_annotations = BTreeMap::new();
        let annotations = pod.metadata.annotations.as_ref().unwrap_or(&no_annotations);
        let no_spec = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&no_spec);

        if cfg.queue_allocation_gate
            && annotations.get(QUEUE_ALLOCATION_GATE).map(String::as_str) == Some("true")
        {
            let gates = spec.scheduling_gates.as_deref().unwrap_or_default();
            if !gates.iter().any(|g| g.name == QUEUE_ALLOCATION_GATE) {
                // Append to the raw list so existing entries stay exactly as sent.
                let mut raw = patch::get(&obj, &["spec", "schedulingGates"])
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                raw.push(json!({"name": QUEUE_ALLOCATION_GATE}));
                patch::set(&mut obj, &["spec"], "schedulingGates", Value::Array(raw));
            }
        }

        let mut scheduler_name = spec.scheduler_name.clone().unwrap_or_default();
        if let Some(group) = cfg
            .resource_groups
            .iter()
            .find(|g| ref_belongs(&pod, &req.namespace, g))
        {
            ref_apply_resource_group(&mut obj, spec, group);
            if !group.scheduler_name.is_empty() {
                scheduler_name = group.scheduler_name.clone();
            }
        }

        if cfg.serves(&scheduler_name) && !annotations.contains_key(GROUP_NAME) {
            let controller = pod
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or_default()
                .iter()
                .find(|o| o.controller == Some(true) && !o.uid.is_empty());
            if let Some(owner) = controller {
                patch::set(
                    &mut obj,
                    &["metadata", "annotations"],
                    GROUP_NAME,
                    Value::String(keys::workload_pod_group_name(Some(&owner.uid), "")),
                );
            }
        }
        obj
    }

    fn ref_belongs(pod: &Pod, request_namespace: &str, group: &ResourceGroup) -> bool {
        let annotations = pod.metadata.annotations.as_ref();
        match group.object.key.as_str() {
            "namespace" => {
                let ns = pod
                    .metadata
                    .namespace
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .unwrap_or(request_namespace);
                group.object.value.iter().any(|v| v == ns)
            }
            "" | "annotation" => {
                let matches_listed = group.object.value.iter().any(|entry| {
                    serde_saphyr::from_str::<BTreeMap<String, String>>(entry)
                        .map(|m| {
                            m.iter()
                                .any(|(k, v)| annotations.and_then(|a| a.get(k)) == Some(v))
                        })
                        .unwrap_or(false)
                });
                matches_listed
                    || (group.object.key.is_empty()
                        && annotations.and_then(|a| a.get(RESOURCE_GROUP))
                            == Some(&group.resource_group))
            }
            _ => false,
        }
    }

    fn ref_apply_resource_group(
        obj: &mut Value,
        spec: &k8s_openapi::api::core::v1::PodSpec,
        group: &ResourceGroup,
    ) {
        if !group.labels.is_empty() {
            let mut selector = spec.node_selector.clone().unwrap_or_default();
            selector.extend(group.labels.clone());
            patch::set(obj, &["spec"], "nodeSelector", json!(selector));
        }
        if !group.affinity.is_empty() && spec.affinity.is_none() {
            // An affinity that does not parse is ignored, as in Volcano.
            if let Ok(aff) =
                serde_json::from_str::<k8s_openapi::api::core::v1::Affinity>(&group.affinity)
                && let Ok(v) = serde_json::to_value(aff)
            {
                patch::set(obj, &["spec"], "affinity", v);
            }
        }
        if !group.tolerations.is_empty() {
            let mut list = patch::get(obj, &["spec", "tolerations"])
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            list.extend(group.tolerations.iter().cloned());
            patch::set(obj, &["spec"], "tolerations", Value::Array(list));
        }
        if !group.scheduler_name.is_empty() {
            patch::set(
                obj,
                &["spec"],
                "schedulerName",
                Value::String(group.scheduler_name.clone()),
            );
        }
    }

    /// Pods in every shape the mutation handles, each with each configuration.
    fn cases() -> Vec<(Value, String)> {
        let mut out = Vec::new();
        let owners = [rs_owner(), json!([]), Value::Null];
        let annotations = [
            json!({}),
            Value::Null,
            json!({GROUP_NAME: "mine"}),
            json!({QUEUE_ALLOCATION_GATE: "true"}),
            json!({"team": "a", QUEUE_ALLOCATION_GATE: "true"}),
            json!({RESOURCE_GROUP: "cpu"}),
            json!({"a/b~c": "x"}),
        ];
        for sched in ["volcano", "default-scheduler", "tephra"] {
            for a in &annotations {
                for o in &owners {
                    for ns in ["ns", "mng-ns"] {
                        let mut p = pod(sched, a.clone(), o.clone());
                        p["metadata"]["namespace"] = json!(ns);
                        out.push((p.clone(), ns.to_string()));
                        let mut q = p.clone();
                        q["spec"]["nodeSelector"] = json!({"zone": "a", "pool": "x"});
                        q["spec"]["tolerations"] = json!([{"key": "t", "operator": "Exists"}]);
                        q["spec"]["schedulingGates"] = json!([{"name": "other"}]);
                        q["spec"]["affinity"] = json!({"podAffinity": {}});
                        out.push((q, ns.to_string()));
                        let mut r = p.clone();
                        r["spec"]["nodeSelector"] = json!({"pool": "mng"});
                        r["spec"]["tolerations"] = Value::Null;
                        r["spec"]["schedulingGates"] = json!([{"name": QUEUE_ALLOCATION_GATE}]);
                        out.push((r, ns.to_string()));
                        let mut bare = p.clone();
                        bare.as_object_mut().unwrap().remove("spec");
                        out.push((bare, ns.to_string()));
                        let mut null_spec = p.clone();
                        null_spec["spec"] = Value::Null;
                        out.push((null_spec, ns.to_string()));
                    }
                }
            }
        }
        let mut no_meta = pod("volcano", json!({}), json!([]));
        no_meta.as_object_mut().unwrap().remove("metadata");
        out.push((no_meta, "ns".into()));
        out
    }

    #[test]
    fn direct_operations_apply_to_the_reference_mutation_and_only_change_something() {
        let configs = [
            AdmissionConfig::default(),
            AdmissionConfig {
                queue_allocation_gate: true,
                resource_groups: groups(),
                ..AdmissionConfig::default()
            },
            AdmissionConfig {
                scheduler_names: vec!["tephra".into()],
                queue_allocation_gate: true,
                ..AdmissionConfig::default()
            },
        ];
        let mut patched = 0;
        for cfg in &configs {
            for (input, ns) in cases() {
                let req = request_with("Pod", "CREATE", &ns, input.clone(), None);
                let d = super::mutate(&req, cfg);
                let Verdict::Patch(ops) = &d.verdict else {
                    panic!("{input}: {d:?}")
                };
                let want = reference(&req, cfg);
                assert_eq!(applied(&req, &d), want, "{input}");
                assert_eq!(ops.is_empty(), want == input, "{input}: {ops:?}");
                crate::testutil::assert_every_op_changes(&input, ops);
                patched += usize::from(!ops.is_empty());
            }
        }
        assert!(patched > 100, "{patched}");
    }
}
