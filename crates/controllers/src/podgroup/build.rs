//! The PodGroup a pod (and its owners) should have, and whether a stored one needs an update.
//! Pure code: the reconciler gathers the inputs from the caches and applies the result.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::resources;
use tephra_api::keys;
use tephra_api::scheduling::{NetworkTopologyMode, NetworkTopologySpec};
use tephra_api::{PodGroup, PodGroupSpec, PodGroupStatus};

/// Annotations of one owner in the pod's owner chain (ReplicaSet, Deployment, StatefulSet,
/// DaemonSet, batch Job).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnerInfo {
    /// `ReplicaSet`, `Deployment`, ...
    pub kind: String,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// It makes its pods one at a time, each once the one before is Ready (a StatefulSet with
    /// `podManagementPolicy: OrderedReady`).
    pub ordered_pods: bool,
}

/// Everything the PodGroup of a pod is decided from.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The pod standing for its gang (the first current pod of its owner).
    pub pod: &'a Pod,
    /// The owner chain, **highest precedence first** (see the reconciler for the order).
    pub owners: &'a [OwnerInfo],
    /// The namespace's default queue (`scheduling.volcano.sh/queue-name` on the namespace).
    pub namespace_queue: Option<&'a str>,
    /// `--inherit-owner-annotations`: read owner annotations at all.
    pub inherit: bool,
}

/// The controller ownerReference of a pod, if any.
pub fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// `podgroup-<controller owner uid>`, or `podgroup-<pod uid>` for a pod without a controller:
/// the same name `/pods/mutate` writes onto a pod at creation.
pub fn group_name(pod: &Pod) -> String {
    keys::workload_pod_group_name(
        controller_of(pod).map(|r| r.uid.as_str()),
        pod.metadata.uid.as_deref().unwrap_or_default(),
    )
}

/// The PodGroup's ownerReferences: the pod's own list when it has a controller (so the
/// PodGroup goes with the ReplicaSet, StatefulSet ... through garbage collection), else one
/// controller reference to the pod itself.
pub fn owner_references(pod: &Pod) -> Vec<OwnerReference> {
    if controller_of(pod).is_some() {
        return pod.metadata.owner_references.clone().unwrap_or_default();
    }
    vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels
        .as_ref()?
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// The owners that are read at all (none when inheritance is off).
fn owners<'a>(inputs: &Inputs<'a>) -> &'a [OwnerInfo] {
    if inputs.inherit { inputs.owners } else { &[] }
}

/// A value from the pod, else the first owner that has it.
fn first_of<'a>(inputs: &Inputs<'a>, key: &str) -> Option<&'a str> {
    annotation(&inputs.pod.metadata, key).or_else(|| {
        owners(inputs)
            .iter()
            .find_map(|o| o.annotations.get(key).map(String::as_str))
            .filter(|v| !v.is_empty())
    })
}

/// `minMember` from `scheduling.volcano.sh/group-min-member` (pod, then owners): base-10
/// int32; unparsable or negative means 1, as in Volcano; absent means 1.
pub fn min_member(inputs: &Inputs<'_>) -> i32 {
    match first_of(inputs, keys::GROUP_MIN_MEMBER_ANNOTATION) {
        Some(v) => match v.trim().parse::<i32>() {
            Ok(n) if n >= 0 => n,
            _ => 1,
        },
        None => 1,
    }
}

/// The effective queue, resolved once: pod annotation, owner annotations
/// (`scheduling.volcano.sh/queue-name`, then `volcano.sh/queue-name`), the namespace's default,
/// then `default`. Volcano leaves `spec.queue` empty unless the pod names one and compares that
/// blank with the stored `default` on every update (resetting a webhook-chosen queue); tephra
/// writes the real queue, so a stored PodGroup only changes when the queue really does.
pub fn queue(inputs: &Inputs<'_>) -> String {
    first_of(inputs, keys::QUEUE_NAME_ANNOTATION)
        .or_else(|| first_of(inputs, keys::QUEUE_NAME))
        .or(inputs.namespace_queue.filter(|q| !q.is_empty()))
        .unwrap_or(keys::DEFAULT_QUEUE)
        .to_string()
}

/// The network-topology constraint from `volcano.sh/network-topology-mode` and
/// `volcano.sh/network-topology-highest-tier` (pod, then owners): mode `hard` unless the value
/// is `soft` (any case); a tier that does not parse is left unset, as in Volcano.
pub fn network_topology(inputs: &Inputs<'_>) -> Option<NetworkTopologySpec> {
    let mode = first_of(inputs, keys::NETWORK_TOPOLOGY_MODE);
    let tier = first_of(inputs, keys::NETWORK_TOPOLOGY_HIGHEST_TIER);
    if mode.is_none() && tier.is_none() {
        return None;
    }
    let mode = match mode.map(str::to_ascii_lowercase).as_deref() {
        Some("soft") => NetworkTopologyMode::Soft,
        _ => NetworkTopologyMode::Hard,
    };
    Some(NetworkTopologySpec {
        mode: Some(mode),
        highest_tier_allowed: tier.and_then(|t| t.trim().parse().ok()),
        highest_tier_name: None,
    })
}

/// PodGroup annotations: every `volcano.sh/` annotation of the owners (highest precedence
/// first wins), then the pod's own `volcano.sh/` annotations over them, then the disruption
/// budget rule: `jdb-min-available` beats `jdb-max-unavailable`, only one is kept.
pub fn annotations(inputs: &Inputs<'_>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for owner in owners(inputs).iter().rev() {
        for (k, v) in &owner.annotations {
            if k.starts_with(keys::ANNOTATION_PREFIX) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let pod = inputs.pod.metadata.annotations.iter().flatten();
    for (k, v) in pod {
        // The pod's volcano.sh/ keys win over inherited ones; the four keys Volcano copies
        // from the pod are among them.
        let copied = [
            keys::PREEMPTABLE,
            keys::COOLDOWN_TIME,
            keys::REVOCABLE_ZONE,
            keys::JDB_MIN_AVAILABLE,
            keys::JDB_MAX_UNAVAILABLE,
        ]
        .contains(&k.as_str());
        if copied || (inputs.inherit && k.starts_with(keys::ANNOTATION_PREFIX)) {
            out.insert(k.clone(), v.clone());
        }
    }
    // Pod-scoped bookkeeping of the job controller and the simulator must not become gang
    // annotations.
    for k in [
        keys::TASK_SPEC,
        keys::TASK_INDEX,
        keys::JOB_NAME,
        keys::JOB_VERSION,
    ] {
        out.remove(k);
    }
    if out.contains_key(keys::JDB_MIN_AVAILABLE) {
        out.remove(keys::JDB_MAX_UNAVAILABLE);
    }
    // Whatever the inheritance setting: it is what the scheduler says when the gang waits.
    // The policy of a StatefulSet cannot change, so the key is never taken back.
    if inputs.owners.iter().any(|o| o.ordered_pods) {
        out.insert(keys::ORDERED_PODS.to_string(), "true".to_string());
    }
    out
}

/// PodGroup labels: the pod's `volcano.sh/preemptable` and `volcano.sh/cooldown-time` labels.
pub fn labels(pod: &Pod) -> BTreeMap<String, String> {
    [keys::PREEMPTABLE, keys::COOLDOWN_TIME]
        .into_iter()
        .filter_map(|k| label(&pod.metadata, k).map(|v| (k.to_string(), v.to_string())))
        .collect()
}

/// The PodGroup `inputs.pod`'s gang should have (status `Pending`, as Volcano creates it).
pub fn build(inputs: &Inputs<'_>) -> PodGroup {
    let pod = inputs.pod;
    let min_member = min_member(inputs);
    let spec = PodGroupSpec {
        min_member: Some(min_member),
        queue: Some(queue(inputs)),
        priority_class_name: pod
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.clone())
            .filter(|p| !p.is_empty()),
        min_resources: Some(resources::min_resources(pod, min_member)),
        network_topology: network_topology(inputs),
        ..PodGroupSpec::default()
    };
    let labels = labels(pod);
    let annotations = annotations(inputs);
    PodGroup {
        metadata: ObjectMeta {
            name: Some(group_name(pod)),
            namespace: pod.metadata.namespace.clone(),
            owner_references: Some(owner_references(pod)),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        spec,
        status: Some(PodGroupStatus {
            phase: Some(tephra_api::scheduling::PodGroupPhase::Pending),
            ..PodGroupStatus::default()
        }),
    }
}

/// The stored PodGroup brought up to `desired`, or `None` when nothing differs.
///
/// Only what the controller decides is compared and written: the spec fields it sets
/// (`minMember`, `minResources` compared by amount, `queue`, `priorityClassName`,
/// `networkTopology`) and the label and annotation keys it produces. Keys written by others
/// (the scheduler's annotations, a user's labels) and `status` are kept, where Volcano replaces
/// the whole label and annotation maps.
pub fn update(existing: &PodGroup, desired: &PodGroup) -> Option<PodGroup> {
    let mut out = existing.clone();
    let (s, d) = (&mut out.spec, &desired.spec);
    let mut changed = false;
    if s.min_member != d.min_member {
        s.min_member = d.min_member;
        changed = true;
    }
    if !resources::same_amounts(s.min_resources.as_ref(), d.min_resources.as_ref()) {
        s.min_resources = d.min_resources.clone();
        changed = true;
    }
    if s.queue() != d.queue() {
        s.queue = d.queue.clone();
        changed = true;
    }
    if s.priority_class_name != d.priority_class_name {
        s.priority_class_name = d.priority_class_name.clone();
        changed = true;
    }
    if s.network_topology != d.network_topology {
        s.network_topology = d.network_topology.clone();
        changed = true;
    }
    changed |= merge_keys(&mut out.metadata.labels, desired.metadata.labels.as_ref());
    changed |= merge_keys(
        &mut out.metadata.annotations,
        desired.metadata.annotations.as_ref(),
    );
    let has_min = desired
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::JDB_MIN_AVAILABLE));
    if has_min
        && let Some(a) = out.metadata.annotations.as_mut()
        && a.remove(keys::JDB_MAX_UNAVAILABLE).is_some()
    {
        changed = true;
    }
    changed.then_some(out)
}

/// Sets every `desired` key in `map`; whether anything changed.
fn merge_keys(
    map: &mut Option<BTreeMap<String, String>>,
    desired: Option<&BTreeMap<String, String>>,
) -> bool {
    let mut changed = false;
    for (k, v) in desired.into_iter().flatten() {
        let m = map.get_or_insert_with(BTreeMap::new);
        if m.get(k) != Some(v) {
            m.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(annotations: Value, owners: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p-1", "namespace": "ns", "uid": "pod-uid",
                          "annotations": annotations, "ownerReferences": owners,
                          "labels": {"volcano.sh/preemptable": "true", "app": "x"}},
            "spec": {"priorityClassName": "high", "containers": [{"name": "m",
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                   "limits": {"nvidia.com/gpu": "2"}}}]}
        }))
        .unwrap()
    }

    fn rs_owner() -> Value {
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid",
                "controller": true, "blockOwnerDeletion": true}])
    }

    fn owner(kind: &str, pairs: &[(&str, &str)]) -> OwnerInfo {
        OwnerInfo {
            kind: kind.into(),
            annotations: pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            ordered_pods: false,
        }
    }

    #[test]
    fn a_gang_of_an_ordered_statefulset_is_marked_whatever_the_inheritance() {
        let p = pod(json!({}), json!([]));
        let ordered = [OwnerInfo {
            ordered_pods: true,
            ..owner("StatefulSet", &[])
        }];
        for inherit in [true, false] {
            let i = Inputs {
                inherit,
                ..inputs(&p, &ordered)
            };
            assert_eq!(
                annotations(&i).get(keys::ORDERED_PODS).map(String::as_str),
                Some("true"),
                "inherit={inherit}"
            );
        }
        let parallel = [owner("StatefulSet", &[])];
        assert!(!annotations(&inputs(&p, &parallel)).contains_key(keys::ORDERED_PODS));
    }

    fn inputs<'a>(pod: &'a Pod, owners: &'a [OwnerInfo]) -> Inputs<'a> {
        Inputs {
            pod,
            owners,
            namespace_queue: None,
            inherit: true,
        }
    }

    #[test]
    fn name_and_owner_references_follow_the_controller() {
        let p = pod(json!({}), rs_owner());
        assert_eq!(group_name(&p), "podgroup-rs-uid");
        let refs = owner_references(&p);
        assert_eq!(refs.len(), 1);
        assert_eq!(
            (refs[0].kind.as_str(), refs[0].uid.as_str()),
            ("ReplicaSet", "rs-uid")
        );

        let plain = pod(json!({}), json!([]));
        assert_eq!(group_name(&plain), "podgroup-pod-uid");
        let refs = owner_references(&plain);
        assert_eq!(refs[0].kind, "Pod");
        assert_eq!(refs[0].name, "p-1");
        assert_eq!(refs[0].controller, Some(true));
        assert_eq!(refs[0].block_owner_deletion, Some(true));

        // A non-controller owner does not name the group.
        let weak = pod(
            json!({}),
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c-uid"}]),
        );
        assert_eq!(group_name(&weak), "podgroup-pod-uid");
    }

    #[test]
    fn min_member_parsing() {
        let k = keys::GROUP_MIN_MEMBER_ANNOTATION;
        for (value, want) in [("4", 4), ("0", 0), ("-2", 1), ("x", 1), ("4.5", 1), ("", 1)] {
            let p = pod(json!({ k: value }), rs_owner());
            assert_eq!(min_member(&inputs(&p, &[])), want, "{value:?}");
        }
        let p = pod(json!({}), rs_owner());
        let owners = [owner("ReplicaSet", &[(k, "3")])];
        assert_eq!(min_member(&inputs(&p, &owners)), 3, "from the owner");
        let p = pod(json!({ k: "5" }), rs_owner());
        assert_eq!(min_member(&inputs(&p, &owners)), 5, "pod first");
        let p = pod(json!({}), rs_owner());
        let off = Inputs {
            inherit: false,
            ..inputs(&p, &owners)
        };
        assert_eq!(min_member(&off), 1, "owners not read without inheritance");
    }

    #[test]
    fn build_multiplies_requests_and_carries_pod_fields() {
        let p = pod(
            json!({keys::GROUP_MIN_MEMBER_ANNOTATION: "4", keys::JDB_MAX_UNAVAILABLE: "1",
                   keys::JDB_MIN_AVAILABLE: "2", keys::COOLDOWN_TIME: "60s"}),
            rs_owner(),
        );
        let pg = build(&inputs(&p, &[]));
        assert_eq!(pg.metadata.name.as_deref(), Some("podgroup-rs-uid"));
        assert_eq!(pg.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(pg.spec.min_member, Some(4));
        let mr = pg.spec.min_resources.clone().unwrap();
        assert_eq!(mr["cpu"].0, "4");
        assert_eq!(mr["memory"].0, "4Gi");
        assert_eq!(mr["nvidia.com/gpu"].0, "8");
        assert_eq!(mr["pods"].0, "4");
        assert_eq!(pg.spec.queue.as_deref(), Some("default"));
        assert_eq!(pg.spec.priority_class_name.as_deref(), Some("high"));
        let a = pg.metadata.annotations.clone().unwrap();
        assert_eq!(a[keys::JDB_MIN_AVAILABLE], "2");
        assert!(
            !a.contains_key(keys::JDB_MAX_UNAVAILABLE),
            "min-available wins"
        );
        assert_eq!(a[keys::COOLDOWN_TIME], "60s");
        let l = pg.metadata.labels.clone().unwrap();
        assert_eq!(l[keys::PREEMPTABLE], "true");
        assert!(!l.contains_key("app"));
        assert_eq!(pg.phase(), tephra_api::scheduling::PodGroupPhase::Pending);
    }

    #[test]
    fn queue_resolution_order() {
        let p = pod(json!({}), rs_owner());
        let ns = Inputs {
            namespace_queue: Some("team"),
            ..inputs(&p, &[])
        };
        assert_eq!(queue(&ns), "team");
        let owners = [owner("Deployment", &[(keys::QUEUE_NAME, "dq")])];
        let with_owner = Inputs {
            namespace_queue: Some("team"),
            ..inputs(&p, &owners)
        };
        assert_eq!(queue(&with_owner), "dq", "owner beats namespace");
        let p2 = pod(json!({keys::QUEUE_NAME_ANNOTATION: "pq"}), rs_owner());
        assert_eq!(queue(&inputs(&p2, &owners)), "pq", "pod beats owner");
        let p3 = pod(json!({keys::QUEUE_NAME: "vq"}), rs_owner());
        assert_eq!(
            queue(&inputs(&p3, &[])),
            "vq",
            "volcano.sh/queue-name on the pod"
        );
        assert_eq!(queue(&inputs(&p, &[])), "default");
    }

    #[test]
    fn inheritance_precedence() {
        let p = pod(json!({"volcano.sh/sla-waiting-time": "pod"}), rs_owner());
        let owners = [
            owner(
                "Deployment",
                &[
                    ("volcano.sh/sla-waiting-time", "deploy"),
                    ("volcano.sh/a", "deploy"),
                ],
            ),
            owner(
                "ReplicaSet",
                &[
                    ("volcano.sh/a", "rs"),
                    ("volcano.sh/b", "rs"),
                    ("other.io/c", "rs"),
                ],
            ),
        ];
        let a = annotations(&inputs(&p, &owners));
        assert_eq!(a["volcano.sh/sla-waiting-time"], "pod", "the pod wins");
        assert_eq!(a["volcano.sh/a"], "deploy", "first owner wins");
        assert_eq!(a["volcano.sh/b"], "rs");
        assert!(!a.contains_key("other.io/c"), "only volcano.sh/ keys");
        let off = Inputs {
            inherit: false,
            ..inputs(&p, &owners)
        };
        let a = annotations(&off);
        assert!(!a.contains_key("volcano.sh/a"));
        assert!(!a.contains_key("volcano.sh/sla-waiting-time"));
        // Min-available inherited, max-unavailable on the pod: one budget only.
        let p = pod(json!({keys::JDB_MAX_UNAVAILABLE: "1"}), rs_owner());
        let owners = [owner("StatefulSet", &[(keys::JDB_MIN_AVAILABLE, "3")])];
        let a = annotations(&inputs(&p, &owners));
        assert_eq!(
            a.get(keys::JDB_MIN_AVAILABLE).map(String::as_str),
            Some("3")
        );
        assert!(!a.contains_key(keys::JDB_MAX_UNAVAILABLE));
    }

    #[test]
    fn topology() {
        let m = keys::NETWORK_TOPOLOGY_MODE;
        let t = keys::NETWORK_TOPOLOGY_HIGHEST_TIER;
        let nt = |a: Value| network_topology(&inputs(&pod(a, rs_owner()), &[]));
        assert_eq!(nt(json!({})), None);
        let soft = nt(json!({m: "SOFT", t: "2"})).unwrap();
        assert_eq!(soft.mode, Some(NetworkTopologyMode::Soft));
        assert_eq!(soft.highest_tier_allowed, Some(2));
        let odd = nt(json!({m: "whatever"})).unwrap();
        assert_eq!(odd.mode, Some(NetworkTopologyMode::Hard));
        assert_eq!(odd.highest_tier_allowed, None);
        let tier_only = nt(json!({t: "x"})).unwrap();
        assert_eq!(tier_only.mode, Some(NetworkTopologyMode::Hard));
        assert_eq!(tier_only.highest_tier_allowed, None);
    }

    #[test]
    fn update_detection() {
        let p = pod(json!({keys::GROUP_MIN_MEMBER_ANNOTATION: "2"}), rs_owner());
        let desired = build(&inputs(&p, &[]));
        // Stored form: other notation for the same amounts, a scheduler annotation, a status.
        let mut stored = desired.clone();
        stored.metadata.resource_version = Some("7".into());
        stored.spec.min_resources = Some(tephra_api::testing::resources(&[
            ("cpu", "2000m"),
            ("memory", "2048Mi"),
            ("nvidia.com/gpu", "4"),
            ("pods", "2"),
        ]));
        stored
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(keys::JOB_ALLOCATED_HYPERNODE.into(), "h1".into());
        stored.status = Some(PodGroupStatus {
            phase: Some(tephra_api::scheduling::PodGroupPhase::Running),
            ..PodGroupStatus::default()
        });
        assert_eq!(update(&stored, &desired), None, "nothing really differs");

        // A blank stored queue is `default`: no update (Volcano rewrote it every time).
        let mut blank = stored.clone();
        blank.spec.queue = None;
        assert_eq!(update(&blank, &desired), None);

        let p = pod(
            json!({keys::GROUP_MIN_MEMBER_ANNOTATION: "3", "volcano.sh/x": "1"}),
            rs_owner(),
        );
        let newer = build(&inputs(&p, &[]));
        let up = update(&stored, &newer).expect("min member and annotation changed");
        assert_eq!(up.spec.min_member, Some(3));
        assert_eq!(up.spec.min_resources.as_ref().unwrap()["cpu"].0, "3");
        let a = up.metadata.annotations.as_ref().unwrap();
        assert_eq!(a["volcano.sh/x"], "1");
        assert_eq!(a[keys::JOB_ALLOCATED_HYPERNODE], "h1", "others' keys kept");
        assert_eq!(up.status, stored.status, "status kept");
        assert_eq!(up.metadata.resource_version.as_deref(), Some("7"));
    }
}
