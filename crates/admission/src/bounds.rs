//! The value rules Volcano leaves to its CRD schema and CEL policies, checked by the webhooks.
//!
//! Volcano's webhooks stopped checking bounds such as `replicas >= 0` or task-name formats
//! ("moved to the CRD schema / ValidatingAdmissionPolicy to avoid duplication", `admit_job.go`).
//! Tephra cannot count on either: its embedded API has no schema validation, and the CEL
//! policies are optional in Volcano's chart. So the validating webhooks check every bound and
//! format of Volcano's CRDs (`config/crd/volcano/bases`) and of its job policy
//! (`installer/helm/chart/volcano/templates/validating_admission_policy.yaml`) that the
//! webhook rules do not already cover. Each problem is one sentence in Kubernetes' field-error
//! form: `spec.tasks[0].replicas: Invalid value: -1: must be greater than or equal to 0`.

use crate::validation::{dns1123_label_errors, dns1123_subdomain_errors};
use tephra_api::quantity;
use tephra_api::scheduling::NetworkTopologySpec;
use tephra_api::{JobSpec, PodGroup, Queue, ResourceList};

/// Largest queue weight Volcano's CRD accepts.
pub const MAX_QUEUE_WEIGHT: i32 = 65535;

// Paths are passed as `Display` (`format_args!`), so a valid field costs no allocation.

/// `value >= min`, else the field error.
fn at_least(path: impl std::fmt::Display, value: Option<i32>, min: i32, out: &mut Vec<String>) {
    if let Some(v) = value
        && v < min
    {
        out.push(format!(
            "{path}: Invalid value: {v}: must be greater than or equal to {min}"
        ));
    }
}

/// At most `max` bytes (Kubernetes counts bytes), else the field error.
fn at_most_len(
    path: impl std::fmt::Display,
    value: Option<&str>,
    max: usize,
    out: &mut Vec<String>,
) {
    if let Some(v) = value
        && v.len() > max
    {
        out.push(format!(
            "{path}: Too long: may not be more than {max} bytes (got {})",
            v.len()
        ));
    }
}

/// A non-empty `value` must be a DNS-1123 subdomain (the CRDs' name pattern, 253 at most).
fn subdomain(path: impl std::fmt::Display, value: Option<&str>, out: &mut Vec<String>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        let errs = dns1123_subdomain_errors(v);
        if !errs.is_empty() {
            out.push(format!("{path}: Invalid value: {v:?}: {}", errs.join("; ")));
        }
    }
}

/// `mode` known, `highestTierAllowed >= 0`, `highestTierName` at most 253 bytes.
fn network_topology(
    path: impl std::fmt::Display,
    nt: Option<&NetworkTopologySpec>,
    out: &mut Vec<String>,
) {
    let Some(nt) = nt else { return };
    if let Some(mode) = nt.mode.as_ref()
        && !mode.is_known()
    {
        out.push(format!(
            "{path}.mode: Unsupported value: {:?}: supported values: \"hard\", \"soft\"",
            mode.as_str()
        ));
    }
    at_least(
        format_args!("{path}.highestTierAllowed"),
        nt.highest_tier_allowed,
        0,
        out,
    );
    at_most_len(
        format_args!("{path}.highestTierName"),
        nt.highest_tier_name.as_deref(),
        253,
        out,
    );
}

/// Quantities of a resource list must read as quantities.
fn quantities(path: impl std::fmt::Display, list: Option<&ResourceList>, out: &mut Vec<String>) {
    for (name, q) in list.into_iter().flatten() {
        if quantity::parse(&q.0).is_none() {
            out.push(format!(
                "{path}.{name}: Invalid value: {:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                q.0
            ));
        }
    }
}

/// A vcJob's bounds and formats (CREATE and UPDATE).
pub fn job_problems(spec: &JobSpec) -> Vec<String> {
    let mut out = Vec::new();
    at_least("spec.minAvailable", spec.min_available, 0, &mut out);
    at_least("spec.maxRetry", spec.max_retry, 0, &mut out);
    at_least(
        "spec.ttlSecondsAfterFinished",
        spec.ttl_seconds_after_finished,
        0,
        &mut out,
    );
    at_least("spec.minSuccess", spec.min_success, 1, &mut out);
    subdomain("spec.queue", spec.queue.as_deref(), &mut out);
    subdomain(
        "spec.priorityClassName",
        spec.priority_class_name.as_deref(),
        &mut out,
    );
    at_most_len(
        "spec.schedulerName",
        spec.scheduler_name.as_deref(),
        63,
        &mut out,
    );
    network_topology(
        "spec.networkTopology",
        spec.network_topology.as_ref(),
        &mut out,
    );
    for (i, task) in spec.tasks().iter().enumerate() {
        let path = format!("spec.tasks[{i}]");
        // An absent name is defaulted by `/jobs/mutate` (`default<i>`); a given one names the
        // task's pods and, with the svc plugin, their host names: a DNS-1123 label.
        if let Some(name) = task.name.as_deref().filter(|n| !n.is_empty()) {
            let errs = dns1123_label_errors(name);
            if !errs.is_empty() {
                out.push(format!(
                    "{path}.name: Invalid value: {name:?}: {}",
                    errs.join("; ")
                ));
            }
        }
        at_least(format_args!("{path}.replicas"), task.replicas, 0, &mut out);
        at_least(
            format_args!("{path}.minAvailable"),
            task.min_available,
            0,
            &mut out,
        );
        at_least(format_args!("{path}.maxRetry"), task.max_retry, 0, &mut out);
        if let Some(policy) = task.topology_policy.as_ref()
            && !policy.is_known()
        {
            out.push(format!(
                "{path}.topologyPolicy: Unsupported value: {:?}: supported values: \"none\", \"best-effort\", \"restricted\", \"single-numa-node\"",
                policy.as_str()
            ));
        }
        if let Some(pp) = task.partition_policy.as_ref() {
            at_least(
                format_args!("{path}.partitionPolicy.minPartitions"),
                pp.min_partitions,
                0,
                &mut out,
            );
            network_topology(
                format_args!("{path}.partitionPolicy.networkTopology"),
                pp.network_topology.as_ref(),
                &mut out,
            );
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        if let Some(mp) = v.mount_path.as_deref()
            && mp.contains(':')
        {
            out.push(format!(
                "spec.volumes[{i}].mountPath: Invalid value: {mp:?}: must not contain ':'"
            ));
        }
        // The job controller creates this claim; a bad quantity would only show then.
        let resources = v.volume_claim.as_ref().and_then(|c| c.resources.as_ref());
        for (kind, list) in [
            ("limits", resources.and_then(|r| r.limits.as_ref())),
            ("requests", resources.and_then(|r| r.requests.as_ref())),
        ] {
            quantities(
                format_args!("spec.volumes[{i}].volumeClaim.resources.{kind}"),
                list,
                &mut out,
            );
        }
    }
    out
}

/// A Queue's bounds and formats (CREATE and UPDATE). The name is checked on CREATE only
/// (it cannot change).
pub fn queue_problems(q: &Queue, creating: bool) -> Vec<String> {
    let spec = &q.spec;
    let mut out = Vec::new();
    if creating && let Some(name) = q.metadata.name.as_deref() {
        // Jobs and PodGroups may only name queues of this form (their `queue` field's
        // pattern), so a queue named otherwise could never be used.
        let errs = dns1123_subdomain_errors(name);
        if !errs.is_empty() {
            out.push(format!(
                "metadata.name: Invalid value: {name:?}: {}",
                errs.join("; ")
            ));
        }
    }
    if let Some(w) = spec.weight
        && !(1..=MAX_QUEUE_WEIGHT).contains(&w)
    {
        out.push(format!(
            "spec.weight: Invalid value: {w}: must be between 1 and {MAX_QUEUE_WEIGHT}, inclusive"
        ));
    }
    at_least("spec.priority", spec.priority, 0, &mut out);
    subdomain("spec.parent", spec.parent.as_deref(), &mut out);
    at_most_len("spec.type", spec.type_.as_deref(), 253, &mut out);
    if let Some(ds) = spec.dequeue_strategy.as_ref()
        && !ds.is_known()
    {
        out.push(format!(
            "spec.dequeueStrategy: Unsupported value: {:?}: supported values: \"fifo\", \"traverse\"",
            ds.as_str()
        ));
    }
    for (i, c) in spec.extend_clusters.iter().flatten().enumerate() {
        quantities(
            format_args!("spec.extendClusters[{i}].capacity"),
            c.capacity.as_ref(),
            &mut out,
        );
    }
    out
}

/// A PodGroup's bounds and formats.
pub fn podgroup_problems(pg: &PodGroup) -> Vec<String> {
    let spec = &pg.spec;
    let mut out = Vec::new();
    at_least("spec.minMember", spec.min_member, 0, &mut out);
    for (task, n) in spec.min_task_member.iter().flatten() {
        at_least(
            format_args!("spec.minTaskMember.{task}"),
            Some(*n),
            0,
            &mut out,
        );
    }
    subdomain("spec.queue", spec.queue.as_deref(), &mut out);
    at_most_len(
        "spec.priorityClassName",
        spec.priority_class_name.as_deref(),
        253,
        &mut out,
    );
    quantities("spec.minResources", spec.min_resources.as_ref(), &mut out);
    network_topology(
        "spec.networkTopology",
        spec.network_topology.as_ref(),
        &mut out,
    );
    for (i, p) in spec.sub_group_policy.iter().flatten().enumerate() {
        let path = format!("spec.subGroupPolicy[{i}]");
        at_most_len(
            format_args!("{path}.name"),
            p.name.as_deref(),
            253,
            &mut out,
        );
        at_least(
            format_args!("{path}.subGroupSize"),
            p.sub_group_size,
            1,
            &mut out,
        );
        at_least(
            format_args!("{path}.minSubGroups"),
            p.min_sub_groups,
            0,
            &mut out,
        );
        network_topology(
            format_args!("{path}.networkTopology"),
            p.network_topology.as_ref(),
            &mut out,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn job(spec: Value) -> JobSpec {
        serde_json::from_value(spec).unwrap()
    }

    fn task(extra: Value) -> Value {
        let mut t = json!({"name": "a", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}});
        for (k, v) in extra.as_object().unwrap() {
            t[k] = v.clone();
        }
        t
    }

    /// One rule per row: the spec, and the exact (only) problem it has.
    #[test]
    fn job_bounds_one_rule_per_row() {
        let long = "x".repeat(64);
        let rows: Vec<(Value, String)> = vec![
            (json!({"minAvailable": -2, "tasks": [task(json!({}))]}),
             "spec.minAvailable: Invalid value: -2: must be greater than or equal to 0".into()),
            (json!({"maxRetry": -1, "tasks": [task(json!({}))]}),
             "spec.maxRetry: Invalid value: -1: must be greater than or equal to 0".into()),
            (json!({"ttlSecondsAfterFinished": -5, "tasks": [task(json!({}))]}),
             "spec.ttlSecondsAfterFinished: Invalid value: -5: must be greater than or equal to 0".into()),
            (json!({"minSuccess": 0, "tasks": [task(json!({}))]}),
             "spec.minSuccess: Invalid value: 0: must be greater than or equal to 1".into()),
            (json!({"queue": "Team_A", "tasks": [task(json!({}))]}),
             format!("spec.queue: Invalid value: \"Team_A\": {}", dns1123_subdomain_errors("Team_A").join("; "))),
            (json!({"priorityClassName": "High", "tasks": [task(json!({}))]}),
             format!("spec.priorityClassName: Invalid value: \"High\": {}", dns1123_subdomain_errors("High").join("; "))),
            (json!({"schedulerName": long, "tasks": [task(json!({}))]}),
             "spec.schedulerName: Too long: may not be more than 63 bytes (got 64)".into()),
            (json!({"networkTopology": {"mode": "loose"}, "tasks": [task(json!({}))]}),
             "spec.networkTopology.mode: Unsupported value: \"loose\": supported values: \"hard\", \"soft\"".into()),
            (json!({"networkTopology": {"highestTierAllowed": -1}, "tasks": [task(json!({}))]}),
             "spec.networkTopology.highestTierAllowed: Invalid value: -1: must be greater than or equal to 0".into()),
            (json!({"networkTopology": {"highestTierName": "t".repeat(254)}, "tasks": [task(json!({}))]}),
             "spec.networkTopology.highestTierName: Too long: may not be more than 253 bytes (got 254)".into()),
            (json!({"tasks": [task(json!({"name": "Bad_Name"}))]}),
             format!("spec.tasks[0].name: Invalid value: \"Bad_Name\": {}", dns1123_label_errors("Bad_Name").join("; "))),
            (json!({"tasks": [task(json!({"name": "a.b"}))]}),
             format!("spec.tasks[0].name: Invalid value: \"a.b\": {}", dns1123_label_errors("a.b").join("; "))),
            (json!({"tasks": [task(json!({"name": "x".repeat(64)}))]}),
             format!("spec.tasks[0].name: Invalid value: \"{}\": {}", "x".repeat(64), dns1123_label_errors(&"x".repeat(64)).join("; "))),
            (json!({"tasks": [task(json!({})), task(json!({"name": "b", "replicas": -1}))]}),
             "spec.tasks[1].replicas: Invalid value: -1: must be greater than or equal to 0".into()),
            (json!({"tasks": [task(json!({"minAvailable": -1}))]}),
             "spec.tasks[0].minAvailable: Invalid value: -1: must be greater than or equal to 0".into()),
            (json!({"tasks": [task(json!({"maxRetry": -3}))]}),
             "spec.tasks[0].maxRetry: Invalid value: -3: must be greater than or equal to 0".into()),
            (json!({"tasks": [task(json!({"topologyPolicy": "strict"}))]}),
             "spec.tasks[0].topologyPolicy: Unsupported value: \"strict\": supported values: \"none\", \"best-effort\", \"restricted\", \"single-numa-node\"".into()),
            (json!({"tasks": [task(json!({"partitionPolicy": {"totalPartitions": 1, "partitionSize": 1, "minPartitions": -1}}))]}),
             "spec.tasks[0].partitionPolicy.minPartitions: Invalid value: -1: must be greater than or equal to 0".into()),
            (json!({"tasks": [task(json!({"partitionPolicy": {"totalPartitions": 1, "partitionSize": 1, "networkTopology": {"highestTierAllowed": -2}}}))]}),
             "spec.tasks[0].partitionPolicy.networkTopology.highestTierAllowed: Invalid value: -2: must be greater than or equal to 0".into()),
            (json!({"volumes": [{"mountPath": "/a:b", "volumeClaimName": "p"}], "tasks": [task(json!({}))]}),
             "spec.volumes[0].mountPath: Invalid value: \"/a:b\": must not contain ':'".into()),
            (json!({"volumes": [{"mountPath": "/a", "volumeClaim": {"resources": {"requests": {"storage": "ten"}}}}], "tasks": [task(json!({}))]}),
             "spec.volumes[0].volumeClaim.resources.requests.storage: Invalid value: \"ten\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into()),
        ];
        for (spec, want) in rows {
            assert_eq!(job_problems(&job(spec.clone())), vec![want], "{spec}");
        }
        // The limits themselves are allowed.
        let ok = job(
            json!({"minAvailable": 0, "maxRetry": 0, "ttlSecondsAfterFinished": 0, "minSuccess": 1,
            "queue": "team-a.x", "priorityClassName": "high", "schedulerName": "s".repeat(63),
            "networkTopology": {"mode": "soft", "highestTierAllowed": 0, "highestTierName": "t".repeat(253)},
            "tasks": [task(json!({"name": "x".repeat(63), "replicas": 0, "minAvailable": 0, "maxRetry": 0,
                "topologyPolicy": "best-effort", "partitionPolicy": {"totalPartitions": 1, "partitionSize": 1, "minPartitions": 0}})),
                task(json!({"name": null}))]}),
        );
        assert_eq!(job_problems(&ok), Vec::<String>::new());
    }

    fn queue(name: &str, spec: Value) -> Queue {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    }

    #[test]
    fn queue_bounds_one_rule_per_row() {
        let long = "q".repeat(254);
        let rows: Vec<(&str, Value, String)> = vec![
            ("q", json!({"weight": -1}), "spec.weight: Invalid value: -1: must be between 1 and 65535, inclusive".into()),
            ("q", json!({"weight": 0}), "spec.weight: Invalid value: 0: must be between 1 and 65535, inclusive".into()),
            ("q", json!({"weight": 65536}), "spec.weight: Invalid value: 65536: must be between 1 and 65535, inclusive".into()),
            ("q", json!({"priority": -1}), "spec.priority: Invalid value: -1: must be greater than or equal to 0".into()),
            ("q", json!({"parent": "Root"}), format!("spec.parent: Invalid value: \"Root\": {}", dns1123_subdomain_errors("Root").join("; "))),
            ("q", json!({"type": "t".repeat(254)}), "spec.type: Too long: may not be more than 253 bytes (got 254)".into()),
            ("q", json!({"dequeueStrategy": "lifo"}), "spec.dequeueStrategy: Unsupported value: \"lifo\": supported values: \"fifo\", \"traverse\"".into()),
            ("q", json!({"extendClusters": [{"name": "c", "capacity": {"cpu": "lots"}}]}),
             "spec.extendClusters[0].capacity.cpu: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into()),
            ("Team_A", json!({}), format!("metadata.name: Invalid value: \"Team_A\": {}", dns1123_subdomain_errors("Team_A").join("; "))),
            (&long, json!({}), format!("metadata.name: Invalid value: \"{long}\": {}", dns1123_subdomain_errors(&long).join("; "))),
        ];
        for (name, spec, want) in rows {
            assert_eq!(
                queue_problems(&queue(name, spec.clone()), true),
                vec![want],
                "{name} {spec}"
            );
        }
        // The name is checked on CREATE only (it cannot change afterwards).
        assert!(queue_problems(&queue("Team_A", json!({})), false).is_empty());
        let ok = queue(
            "team-a.x",
            json!({"weight": 65535, "priority": 0, "parent": "root", "dequeueStrategy": "fifo"}),
        );
        assert!(queue_problems(&ok, true).is_empty());
        assert!(queue_problems(&queue("q", json!({"weight": 1})), true).is_empty());
    }

    fn podgroup(spec: Value) -> PodGroup {
        serde_json::from_value(json!({"metadata": {"name": "pg"}, "spec": spec})).unwrap()
    }

    #[test]
    fn podgroup_bounds_one_rule_per_row() {
        let rows: Vec<(Value, String)> = vec![
            (json!({"minMember": -1}), "spec.minMember: Invalid value: -1: must be greater than or equal to 0".into()),
            (json!({"minTaskMember": {"w": -1}}), "spec.minTaskMember.w: Invalid value: -1: must be greater than or equal to 0".into()),
            (json!({"queue": "Q"}), format!("spec.queue: Invalid value: \"Q\": {}", dns1123_subdomain_errors("Q").join("; "))),
            (json!({"priorityClassName": "p".repeat(254)}), "spec.priorityClassName: Too long: may not be more than 253 bytes (got 254)".into()),
            (json!({"minResources": {"cpu": "x1"}}), "spec.minResources.cpu: Invalid value: \"x1\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into()),
            (json!({"networkTopology": {"mode": "both"}}), "spec.networkTopology.mode: Unsupported value: \"both\": supported values: \"hard\", \"soft\"".into()),
            (json!({"subGroupPolicy": [{"name": "s", "subGroupSize": 0}]}), "spec.subGroupPolicy[0].subGroupSize: Invalid value: 0: must be greater than or equal to 1".into()),
            (json!({"subGroupPolicy": [{"name": "s", "minSubGroups": -1}]}), "spec.subGroupPolicy[0].minSubGroups: Invalid value: -1: must be greater than or equal to 0".into()),
            (json!({"subGroupPolicy": [{"name": "n".repeat(254)}]}), "spec.subGroupPolicy[0].name: Too long: may not be more than 253 bytes (got 254)".into()),
            (json!({"subGroupPolicy": [{"name": "s", "networkTopology": {"highestTierAllowed": -1}}]}), "spec.subGroupPolicy[0].networkTopology.highestTierAllowed: Invalid value: -1: must be greater than or equal to 0".into()),
        ];
        for (spec, want) in rows {
            assert_eq!(
                podgroup_problems(&podgroup(spec.clone())),
                vec![want],
                "{spec}"
            );
        }
        let ok = podgroup(
            json!({"minMember": 0, "queue": "default", "minResources": {"cpu": "1"},
            "subGroupPolicy": [{"name": "s", "subGroupSize": 1, "minSubGroups": 0}]}),
        );
        assert!(podgroup_problems(&ok).is_empty());
    }
}
