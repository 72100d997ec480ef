//! The native gang engine's bridge (`--gang-engine native`, Kubernetes 1.37+): for each Volcano
//! PodGroup, the `scheduling.k8s.io/v1beta1` Workload and PodGroup that kube-scheduler's own
//! gang cycle reads, and what the native PodGroup's condition says back.
//!
//! ```text
//!   Volcano PodGroup ─▶ mirror() ─▶ Mirror { Workload, PodGroup }   (same namespace and name)
//!   desired + stored  ─▶ pod_group_change() / workload_change() ─▶ create, patch minCount, keep
//!   native status     ─▶ placement() ─▶ Placed | Unplaceable(message) | Pending
//!                     ─▶ unplaced_note() ─▶ kube-scheduler's words on the Volcano PodGroup
//! ```
//!
//! Both native objects are owned by the Volcano PodGroup (itself owned by its vcJob or
//! workload), so the garbage collector removes them with it; the Workload names the vcJob
//! (or the workload, or the PodGroup made by hand) as its `controllerRef`. A native PodGroup's
//! gang policy, priority and topology are immutable once created; only `minCount` follows a
//! changed `minMember`.

use std::collections::BTreeMap;

use k8s_openapi::api::scheduling::v1beta1 as native;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

use crate::hypernode::discovery::LabelDiscovery;
use tephra_api::scheduling::{API_VERSION, NetworkTopologyMode, PodGroup};

/// The one template of every mirrored Workload.
pub const TEMPLATE: &str = "gang";
/// The condition kube-scheduler sets on a native PodGroup after its gang cycle.
pub const SCHEDULED_CONDITION: &str = "PodGroupInitiallyScheduled";
/// Label on the native objects tephra keeps.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "tephra");

/// The native objects for one Volcano PodGroup.
#[derive(Clone, Debug, PartialEq)]
pub struct Mirror {
    /// The Workload: one gang template, the controller named.
    pub workload: native::Workload,
    /// The PodGroup kube-scheduler places whole: `spec.schedulingGroup.podGroupName` of the
    /// gang's pods names it.
    pub pod_group: native::PodGroup,
}

/// The priority class of a native group. kube-scheduler places a group only when its pods
/// have the group's priority, so the class follows the pods, which need not carry the
/// Volcano PodGroup's: a vcJob's tasks may name classes of their own, and the frameworks'
/// operators set the PodGroup's class from a setting of their own (a PyTorchJob's
/// `schedulingPolicy.priorityClass`, a RayCluster's `ray.io/priority-class-name` label) while
/// the pods keep their templates'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupClass<'a> {
    /// The Volcano PodGroup's class: its pods are made to carry it (a vcJob's with no task
    /// class of its own).
    PodGroup,
    /// The class the group's pods carry (`None`: none).
    Members(Option<&'a str>),
}

/// The native objects for `pg`, or `None` while it has no name, namespace or uid (not stored
/// yet). `topology_key` is the node-label key a hard network-topology constraint of the gang
/// maps to, when the cluster places by it; `class` says where the group's priority class
/// comes from.
pub fn mirror(pg: &PodGroup, topology_key: Option<&str>, class: GroupClass<'_>) -> Option<Mirror> {
    let name = pg.metadata.name.clone().filter(|n| !n.is_empty())?;
    let namespace = pg.metadata.namespace.clone().filter(|n| !n.is_empty())?;
    let uid = pg.metadata.uid.clone().filter(|u| !u.is_empty())?;
    let owner = OwnerReference {
        api_version: API_VERSION.to_string(),
        kind: "PodGroup".to_string(),
        name: name.clone(),
        uid,
        controller: Some(true),
        block_owner_deletion: Some(false),
    };
    let meta = ObjectMeta {
        name: Some(name.clone()),
        namespace: Some(namespace),
        labels: Some(BTreeMap::from([(
            MANAGED_BY.0.to_string(),
            MANAGED_BY.1.to_string(),
        )])),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    };
    let policy = native::PodGroupSchedulingPolicy {
        gang: Some(native::GangSchedulingPolicy {
            min_count: min_count(pg),
        }),
        basic: None,
    };
    let constraints = topology_key.map(|key| native::PodGroupSchedulingConstraints {
        topology: Some(vec![native::TopologyConstraint {
            key: key.to_string(),
        }]),
    });
    let priority_class_name = match class {
        GroupClass::PodGroup => pg.spec.priority_class_name.as_deref(),
        GroupClass::Members(class) => class,
    }
    .filter(|p| !p.is_empty())
    .map(str::to_string);
    let workload = native::Workload {
        metadata: meta.clone(),
        spec: native::WorkloadSpec {
            controller_ref: Some(controller_ref(pg, &name)),
            pod_group_templates: Some(vec![native::PodGroupTemplate {
                name: TEMPLATE.to_string(),
                scheduling_policy: policy.clone(),
                scheduling_constraints: constraints.clone(),
                priority_class_name: priority_class_name.clone(),
                ..native::PodGroupTemplate::default()
            }]),
            ..native::WorkloadSpec::default()
        },
    };
    let pod_group = native::PodGroup {
        metadata: meta,
        spec: native::PodGroupSpec {
            scheduling_policy: policy,
            scheduling_constraints: constraints,
            priority_class_name,
            workload_ref: Some(native::WorkloadReference {
                template_name: TEMPLATE.to_string(),
                workload_name: name,
            }),
            ..native::PodGroupSpec::default()
        },
        status: None,
    };
    Some(Mirror {
        workload,
        pod_group,
    })
}

/// The node-label key a gang's hard network-topology constraint maps to, for the native
/// PodGroup's topology constraint: `highestTierAllowed` N is the N-th tier (from the nodes up)
/// of the label discovery's first topology type (by name) that has one. `None` for a soft or
/// absent constraint, a constraint by tier name, or HyperNodes not discovered from labels;
/// the session's own topology placement still decides the gang's admission.
pub fn topology_key(pg: &PodGroup, labels: &LabelDiscovery) -> Option<String> {
    let nt = pg.spec.network_topology.as_ref()?;
    if nt.mode == Some(NetworkTopologyMode::Soft) {
        return None;
    }
    let tier = usize::try_from(nt.highest_tier_allowed?)
        .ok()?
        .checked_sub(1)?;
    labels.types.iter().find_map(|t| t.tiers.get(tier)).cloned()
}

/// The gang's `minCount`: the PodGroup's `minMember`, at least 1 (the native API requires a
/// positive count; Volcano treats an unset or zero `minMember` as a gang of one).
fn min_count(pg: &PodGroup) -> i32 {
    pg.spec.min_member.unwrap_or(1).max(1)
}

/// What the Workload points back to: the PodGroup's controller owner (a vcJob, a workload),
/// else the PodGroup itself (one made by hand).
fn controller_ref(pg: &PodGroup, name: &str) -> native::TypedLocalObjectReference {
    let owner = pg
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match owner {
        Some(o) => {
            let group = o.api_version.rsplit_once('/').map(|(g, _)| g.to_string());
            native::TypedLocalObjectReference {
                api_group: group,
                kind: o.kind.clone(),
                name: o.name.clone(),
            }
        }
        None => native::TypedLocalObjectReference {
            api_group: Some(tephra_api::scheduling::GROUP.to_string()),
            kind: "PodGroup".to_string(),
            name: name.to_string(),
        },
    }
}

/// What to write to bring a stored native object in line with the desired one.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Nothing stored yet: create the desired object.
    Create,
    /// A JSON merge patch of the stored object (only `minCount` may change).
    Patch(Value),
    /// In line, or differing only in what cannot change after creation.
    Keep,
}

/// The write that brings `stored` to `desired`'s gang size.
pub fn pod_group_change(desired: &native::PodGroup, stored: Option<&native::PodGroup>) -> Change {
    let Some(stored) = stored else {
        return Change::Create;
    };
    let want = gang_min(&desired.spec.scheduling_policy);
    let have = gang_min(&stored.spec.scheduling_policy);
    match (want, have) {
        (Some(w), Some(h)) if w != h => Change::Patch(json!({
            "spec": {"schedulingPolicy": {"gang": {"minCount": w}}}
        })),
        _ => Change::Keep,
    }
}

/// The write that brings `stored` to `desired`'s gang size (the template's `minCount`; the
/// templates themselves cannot be added or removed).
pub fn workload_change(desired: &native::Workload, stored: Option<&native::Workload>) -> Change {
    let Some(stored) = stored else {
        return Change::Create;
    };
    let template = |w: &native::Workload| {
        w.spec
            .pod_group_templates
            .iter()
            .flatten()
            .find(|t| t.name == TEMPLATE)
            .cloned()
    };
    let (Some(want), Some(have)) = (template(desired), template(stored)) else {
        return Change::Keep;
    };
    if gang_min(&want.scheduling_policy) == gang_min(&have.scheduling_policy) {
        return Change::Keep;
    }
    // A merge patch replaces a list whole: send every stored template, ours changed.
    let templates: Vec<native::PodGroupTemplate> = stored
        .spec
        .pod_group_templates
        .iter()
        .flatten()
        .map(|t| {
            if t.name == TEMPLATE {
                native::PodGroupTemplate {
                    scheduling_policy: want.scheduling_policy.clone(),
                    ..t.clone()
                }
            } else {
                t.clone()
            }
        })
        .collect();
    Change::Patch(json!({"spec": {"podGroupTemplates": templates}}))
}

fn gang_min(policy: &native::PodGroupSchedulingPolicy) -> Option<i32> {
    policy.gang.as_ref().map(|g| g.min_count)
}

/// What kube-scheduler has said of a native PodGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Not tried yet (no condition).
    Pending,
    /// Placed whole (the condition is True).
    Placed,
    /// Its gang cycle could not place the group: kube-scheduler's reason and message.
    Unplaceable {
        /// `Unschedulable` or `SchedulerError`.
        reason: String,
        /// kube-scheduler's words.
        message: String,
    },
}

/// When kube-scheduler first said it cannot place the group (the condition's last transition),
/// as a Unix time in seconds.
pub fn unplaceable_since(pg: &native::PodGroup) -> Option<i64> {
    let c = pg
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == SCHEDULED_CONDITION))?;
    (c.status != "True").then(|| c.last_transition_time.0.as_second())
}

/// Reads kube-scheduler's [`SCHEDULED_CONDITION`] of a native PodGroup.
pub fn placement(pg: &native::PodGroup) -> Placement {
    let condition = pg
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == SCHEDULED_CONDITION));
    match condition {
        None => Placement::Pending,
        Some(c) if c.status == "True" => Placement::Placed,
        Some(c) => Placement::Unplaceable {
            reason: c.reason.clone(),
            message: c.message.clone(),
        },
    }
}

/// `minCount` of a held-back gang's native PodGroup: more pods than any gang has, so
/// kube-scheduler leaves them waiting for the rest of their gang.
pub const HELD_MIN_COUNT: i32 = i32::MAX;

/// Holds `pod_group` back (see [`Admission`]): its gang's `minCount` becomes
/// [`HELD_MIN_COUNT`].
pub fn hold(pod_group: &mut native::PodGroup) {
    if let Some(gang) = pod_group.spec.scheduling_policy.gang.as_mut() {
        gang.min_count = HELD_MIN_COUNT;
    }
}

/// Whether a gang is sent to kube-scheduler's gang cycle or held back. A scheduling gate
/// cannot be put back on a pod (the API only lets gates be removed), and a native PodGroup
/// cannot go while pods name it (kube-apiserver's PodGroupProtection finalizer), so a gang
/// admitted once is held back through its native PodGroup's `minCount` (the one field that
/// may change): at [`HELD_MIN_COUNT`] kube-scheduler leaves its pods waiting for the rest of
/// the gang, and a gang waiting there holds no room.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Keep the native PodGroup (make it if missing).
    Send,
    /// As `Send`, and look again after this long (when the place timeout would run out).
    SendAndRecheck(std::time::Duration),
    /// kube-scheduler could not place the gang within the place timeout: hold it back
    /// ([`hold`], and release what the session assumed for it).
    HoldBack,
    /// Held back and a session since has found room for it again: send it anew.
    Readmit,
    /// Held back, no room found since: keep waiting (look again after a session).
    Wait,
}

/// What [`admission`] reads of one gang.
#[derive(Clone, Debug, PartialEq)]
pub struct GangState {
    /// Held back (the annotation [`HELD`] is on its Volcano PodGroup).
    pub held: bool,
    /// What kube-scheduler said of its native PodGroup.
    pub placement: Placement,
    /// Seconds since kube-scheduler said it cannot place the gang (since the condition's last
    /// transition, or since the gang was last sent, whichever is later), when it says so.
    pub unplaceable_for: Option<u64>,
    /// Pods of the gang bound to a node.
    pub bound: i32,
    /// A session that started after the hold placed the gang.
    pub placed_since_hold: bool,
}

/// Annotation on a Volcano PodGroup whose gang the native engine holds back: when (RFC 3339).
pub const HELD: &str = "scheduling.tephra.io/native-held";

/// Whether the gang goes to kube-scheduler now (see [`Admission`]); `timeout` is
/// `--native-place-timeout` in seconds.
pub fn admission(gang: &GangState, timeout: u64) -> Admission {
    if gang.held {
        return if gang.placed_since_hold {
            Admission::Readmit
        } else {
            Admission::Wait
        };
    }
    // A gang kube-scheduler has started to bind is never pulled back.
    if gang.bound > 0 {
        return Admission::Send;
    }
    match (&gang.placement, gang.unplaceable_for) {
        (Placement::Unplaceable { .. }, Some(age)) if age >= timeout => Admission::HoldBack,
        (Placement::Unplaceable { .. }, Some(age)) => {
            Admission::SendAndRecheck(std::time::Duration::from_secs(timeout - age))
        }
        _ => Admission::Send,
    }
}

/// What [`keys::NATIVE_UNPLACED`](tephra_api::keys::NATIVE_UNPLACED) on the gang's Volcano
/// PodGroup should say: `Some(Some(words))` kube-scheduler's message while it says it cannot
/// place the gang and none of its pods is bound, `Some(None)` nothing, `None` leave it as it
/// is — a held gang's native PodGroup asks for more pods than exist, and what kube-scheduler
/// says of that is not why the gang waits.
pub fn unplaced_note(gang: &GangState) -> Option<Option<&str>> {
    if gang.held {
        return None;
    }
    match &gang.placement {
        Placement::Unplaceable { message, .. } if gang.bound == 0 => Some(Some(message)),
        _ => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use tephra_api::scheduling::PodGroupSpec;

    fn volcano_pg(min: Option<i32>, owner: Option<(&str, &str, &str)>) -> PodGroup {
        let mut pg = PodGroup::new(
            "train",
            PodGroupSpec {
                min_member: min,
                priority_class_name: Some("high".into()),
                ..PodGroupSpec::default()
            },
        );
        pg.metadata.namespace = Some("ml".into());
        pg.metadata.uid = Some("pg-uid".into());
        pg.metadata.owner_references = owner.map(|(api_version, kind, name)| {
            vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: name.into(),
                uid: "owner-uid".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        });
        pg
    }

    #[test]
    fn a_vcjob_gang_becomes_a_workload_and_a_pod_group_owned_by_its_podgroup() {
        let pg = volcano_pg(Some(4), Some(("batch.volcano.sh/v1alpha1", "Job", "train")));
        let m = mirror(&pg, None, GroupClass::PodGroup).unwrap();
        let owner = &m.pod_group.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("PodGroup", "train", "pg-uid")
        );
        assert_eq!(owner.api_version, "scheduling.volcano.sh/v1beta1");
        assert_eq!(
            m.workload.metadata.owner_references,
            m.pod_group.metadata.owner_references
        );
        let cref = m.workload.spec.controller_ref.as_ref().unwrap();
        assert_eq!(
            (
                cref.api_group.as_deref(),
                cref.kind.as_str(),
                cref.name.as_str()
            ),
            (Some("batch.volcano.sh"), "Job", "train")
        );
        let spec = &m.pod_group.spec;
        assert_eq!(spec.scheduling_policy.gang.as_ref().unwrap().min_count, 4);
        assert_eq!(spec.priority_class_name.as_deref(), Some("high"));
        let wref = spec.workload_ref.as_ref().unwrap();
        assert_eq!(
            (wref.workload_name.as_str(), wref.template_name.as_str()),
            ("train", TEMPLATE)
        );
        let templates = m.workload.spec.pod_group_templates.as_ref().unwrap();
        assert_eq!(templates.len(), 1);
        assert_eq!(templates[0].scheduling_policy, spec.scheduling_policy);
        assert!(spec.scheduling_constraints.is_none());
        assert_eq!(m.pod_group.metadata.namespace.as_deref(), Some("ml"));
    }

    #[test]
    fn a_hand_made_podgroup_is_its_own_controller_and_a_gang_of_at_least_one() {
        let m = mirror(&volcano_pg(None, None), None, GroupClass::PodGroup).unwrap();
        let cref = m.workload.spec.controller_ref.unwrap();
        assert_eq!(
            (
                cref.api_group.as_deref(),
                cref.kind.as_str(),
                cref.name.as_str()
            ),
            (Some("scheduling.volcano.sh"), "PodGroup", "train")
        );
        assert_eq!(
            m.pod_group.spec.scheduling_policy.gang.unwrap().min_count,
            1
        );
        let m = mirror(&volcano_pg(Some(0), None), None, GroupClass::PodGroup).unwrap();
        assert_eq!(
            m.pod_group.spec.scheduling_policy.gang.unwrap().min_count,
            1
        );
        // A Deployment's gang names its ReplicaSet, core-group owners have no group.
        let m = mirror(
            &volcano_pg(Some(2), Some(("apps/v1", "ReplicaSet", "web-1"))),
            None,
            GroupClass::PodGroup,
        )
        .unwrap();
        assert_eq!(
            m.workload.spec.controller_ref.unwrap().api_group.as_deref(),
            Some("apps")
        );
        let m = mirror(
            &volcano_pg(Some(2), Some(("v1", "Pod", "p"))),
            None,
            GroupClass::PodGroup,
        )
        .unwrap();
        assert_eq!(m.workload.spec.controller_ref.unwrap().api_group, None);
    }

    #[test]
    fn the_native_group_takes_the_priority_class_its_pods_share() {
        let pg = volcano_pg(Some(2), None);
        let m = mirror(&pg, None, GroupClass::Members(Some("master"))).unwrap();
        assert_eq!(
            m.pod_group.spec.priority_class_name.as_deref(),
            Some("master")
        );
        let template = &m.workload.spec.pod_group_templates.as_ref().unwrap()[0];
        assert_eq!(template.priority_class_name.as_deref(), Some("master"));
        let m = mirror(&pg, None, GroupClass::PodGroup).unwrap();
        assert_eq!(
            m.pod_group.spec.priority_class_name.as_deref(),
            Some("high")
        );
        // An operator's PodGroup names a class its pods do not carry: the group has none.
        let m = mirror(&pg, None, GroupClass::Members(None)).unwrap();
        assert_eq!(m.pod_group.spec.priority_class_name, None);
        let template = &m.workload.spec.pod_group_templates.as_ref().unwrap()[0];
        assert_eq!(template.priority_class_name, None);
    }

    #[test]
    fn a_podgroup_not_stored_yet_has_no_mirror() {
        let mut pg = volcano_pg(Some(2), None);
        pg.metadata.uid = None;
        assert_eq!(mirror(&pg, None, GroupClass::PodGroup), None);
    }

    #[test]
    fn a_topology_key_becomes_the_gang_constraint() {
        let m = mirror(
            &volcano_pg(Some(2), None),
            Some("example.com/rack"),
            GroupClass::PodGroup,
        )
        .unwrap();
        let key = |c: Option<native::PodGroupSchedulingConstraints>| {
            c.and_then(|c| c.topology).map(|t| t[0].key.clone())
        };
        assert_eq!(
            key(m.pod_group.spec.scheduling_constraints).as_deref(),
            Some("example.com/rack")
        );
        let template = m.workload.spec.pod_group_templates.unwrap().remove(0);
        assert_eq!(
            key(template.scheduling_constraints).as_deref(),
            Some("example.com/rack")
        );
    }

    #[test]
    fn a_hard_tier_maps_to_its_label_key() {
        use crate::hypernode::discovery::TopologyType;
        use tephra_api::scheduling::NetworkTopologySpec;
        let labels = LabelDiscovery {
            types: vec![TopologyType {
                name: "fabric".into(),
                tiers: vec!["example.com/rack".into(), "example.com/spine".into()],
            }],
        };
        let with = |mode: Option<NetworkTopologyMode>, tier: Option<i32>| {
            let mut pg = volcano_pg(Some(2), None);
            pg.spec.network_topology = Some(NetworkTopologySpec {
                mode,
                highest_tier_allowed: tier,
                highest_tier_name: None,
            });
            topology_key(&pg, &labels)
        };
        assert_eq!(with(None, Some(1)).as_deref(), Some("example.com/rack"));
        assert_eq!(
            with(Some(NetworkTopologyMode::Hard), Some(2)).as_deref(),
            Some("example.com/spine")
        );
        assert_eq!(with(Some(NetworkTopologyMode::Soft), Some(1)), None);
        assert_eq!(with(None, Some(3)), None, "no such tier");
        assert_eq!(with(None, Some(0)), None);
        assert_eq!(with(None, None), None);
        assert_eq!(topology_key(&volcano_pg(Some(2), None), &labels), None);
    }

    #[test]
    fn only_the_gang_size_follows_the_podgroup() {
        let desired = mirror(&volcano_pg(Some(4), None), None, GroupClass::PodGroup).unwrap();
        assert_eq!(pod_group_change(&desired.pod_group, None), Change::Create);
        assert_eq!(workload_change(&desired.workload, None), Change::Create);
        assert_eq!(
            pod_group_change(&desired.pod_group, Some(&desired.pod_group)),
            Change::Keep
        );
        let mut stored = mirror(&volcano_pg(Some(2), None), None, GroupClass::PodGroup).unwrap();
        assert_eq!(
            pod_group_change(&desired.pod_group, Some(&stored.pod_group)),
            Change::Patch(json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}))
        );
        let Change::Patch(patch) = workload_change(&desired.workload, Some(&stored.workload))
        else {
            panic!("the Workload's template must follow the new minMember");
        };
        assert_eq!(
            patch["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"],
            4
        );
        assert_eq!(patch["spec"]["podGroupTemplates"][0]["name"], TEMPLATE);
        // An immutable field that differs (the priority class) is kept as stored.
        stored.pod_group.spec.scheduling_policy = desired.pod_group.spec.scheduling_policy.clone();
        stored.pod_group.spec.priority_class_name = Some("low".into());
        assert_eq!(
            pod_group_change(&desired.pod_group, Some(&stored.pod_group)),
            Change::Keep
        );
    }

    #[test]
    fn a_gang_kube_scheduler_cannot_place_is_held_back_after_the_timeout_and_readmitted_later() {
        let unplaceable = Placement::Unplaceable {
            reason: "Unschedulable".into(),
            message: "0/4 nodes are available".into(),
        };
        let gang = GangState {
            held: false,
            placement: unplaceable.clone(),
            unplaceable_for: Some(30),
            bound: 0,
            placed_since_hold: false,
        };
        assert_eq!(
            admission(&gang, 120),
            Admission::SendAndRecheck(std::time::Duration::from_secs(90))
        );
        let late = GangState {
            unplaceable_for: Some(120),
            ..gang.clone()
        };
        assert_eq!(admission(&late, 120), Admission::HoldBack);
        // Not tried yet, or placed: sent.
        for placement in [Placement::Pending, Placement::Placed] {
            let g = GangState {
                placement,
                unplaceable_for: None,
                ..gang.clone()
            };
            assert_eq!(admission(&g, 120), Admission::Send);
        }
        // Binding has started: never pulled back.
        let binding = GangState {
            bound: 1,
            ..late.clone()
        };
        assert_eq!(admission(&binding, 120), Admission::Send);
        // Held: waits until a session after the hold finds room.
        let held = GangState {
            held: true,
            ..late.clone()
        };
        assert_eq!(admission(&held, 120), Admission::Wait);
        let room = GangState {
            placed_since_hold: true,
            ..held
        };
        assert_eq!(admission(&room, 120), Admission::Readmit);
    }

    #[test]
    fn kube_schedulers_refusal_is_noted_until_a_pod_binds_and_kept_while_held() {
        let gang = GangState {
            held: false,
            placement: Placement::Unplaceable {
                reason: "Unschedulable".into(),
                message: "0/4 nodes are available".into(),
            },
            unplaceable_for: Some(5),
            bound: 0,
            placed_since_hold: false,
        };
        assert_eq!(unplaced_note(&gang), Some(Some("0/4 nodes are available")));
        let binding = GangState {
            bound: 1,
            ..gang.clone()
        };
        assert_eq!(unplaced_note(&binding), Some(None));
        for placement in [Placement::Pending, Placement::Placed] {
            let g = GangState {
                placement,
                ..gang.clone()
            };
            assert_eq!(unplaced_note(&g), Some(None));
        }
        let held = GangState { held: true, ..gang };
        assert_eq!(unplaced_note(&held), None);
    }

    #[test]
    fn a_held_gang_asks_for_more_pods_than_it_has_and_gets_its_size_back() {
        let sent = mirror(&volcano_pg(Some(3), None), None, GroupClass::PodGroup)
            .unwrap()
            .pod_group;
        let mut held = sent.clone();
        hold(&mut held);
        assert_eq!(
            pod_group_change(&held, Some(&sent)),
            Change::Patch(
                json!({"spec": {"schedulingPolicy": {"gang": {"minCount": HELD_MIN_COUNT}}}})
            )
        );
        assert_eq!(
            pod_group_change(&sent, Some(&held)),
            Change::Patch(json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}))
        );
    }

    #[test]
    fn kube_schedulers_condition_reads_as_a_placement() {
        let mut pg = mirror(&volcano_pg(Some(2), None), None, GroupClass::PodGroup)
            .unwrap()
            .pod_group;
        assert_eq!(placement(&pg), Placement::Pending);
        let condition = |status: &str, reason: &str, message: &str| Condition {
            type_: SCHEDULED_CONDITION.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        };
        pg.status = Some(native::PodGroupStatus {
            conditions: Some(vec![condition(
                "False",
                "Unschedulable",
                "0/4 nodes are available: 4 Insufficient cpu.",
            )]),
            ..native::PodGroupStatus::default()
        });
        assert_eq!(
            placement(&pg),
            Placement::Unplaceable {
                reason: "Unschedulable".into(),
                message: "0/4 nodes are available: 4 Insufficient cpu.".into()
            }
        );
        pg.status = Some(native::PodGroupStatus {
            conditions: Some(vec![condition("True", "Scheduled", "")]),
            ..native::PodGroupStatus::default()
        });
        assert_eq!(placement(&pg), Placement::Placed);
    }
}
