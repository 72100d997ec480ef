//! The name rules (re-exported from the `tephra-names` crate) and the practical part of kube-apiserver's pod template validation
//! that Volcano runs on every task template (it links `ValidatePodTemplate`; tephra checks what
//! users actually get wrong: container names, images, restart policy, resources, ports,
//! volumes and their mounts). Errors read like Kubernetes field errors,
//! `template.spec.containers[0].image: Required value`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};

use tephra_api::quantity;

pub use tephra_names::{
    dns1035_label_errors, dns1123_label_errors, dns1123_subdomain_errors, qualified_name_errors,
};

/// Field errors of a pod template, paths rooted at `template`.
pub fn pod_template_errors(template: &PodTemplateSpec) -> Vec<String> {
    let mut errs = Vec::new();
    let Some(spec) = template.spec.as_ref() else {
        errs.push("template.spec.containers: Required value".into());
        return errs;
    };
    let mut volume_names = BTreeSet::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let path = Item("volumes", i, ".name");
        if v.name.is_empty() {
            errs.push(format!("{path}: Required value"));
        } else {
            for e in dns1123_label_errors(&v.name) {
                errs.push(format!("{path}: Invalid value: {:?}: {e}", v.name));
            }
            if !volume_names.insert(v.name.as_str()) {
                errs.push(format!("{path}: Duplicate value: {:?}", v.name));
            }
        }
    }
    if spec.containers.is_empty() {
        errs.push("template.spec.containers: Required value".into());
    }
    let mut names = BTreeSet::new();
    let groups: [(&str, &[Container]); 2] = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", &spec.containers),
    ];
    for (field, containers) in groups {
        for (i, c) in containers.iter().enumerate() {
            let base = Item(field, i, "");
            container_errors(c, base, &mut names, &volume_names, &mut errs);
        }
    }
    if let Some(policy) = spec.restart_policy.as_deref()
        && !["Always", "OnFailure", "Never"].contains(&policy)
    {
        errs.push(format!(
            "template.spec.restartPolicy: Unsupported value: {policy:?}: supported values: \"Always\", \"OnFailure\", \"Never\""
        ));
    }
    if let Some(dns) = spec.dns_policy.as_deref()
        && !["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"].contains(&dns)
    {
        errs.push(format!(
            "template.spec.dnsPolicy: Unsupported value: {dns:?}: supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\""
        ));
    }
    errs
}

/// The path of item `index` of list `field` of a template's spec, then `rest`. Written only
/// into an error: admitting a good template formats no path.
#[derive(Clone, Copy)]
struct Item(&'static str, usize, &'static str);

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Item(field, index, rest) = self;
        write!(f, "template.spec.{field}[{index}]{rest}")
    }
}

fn container_errors<'a>(
    c: &'a Container,
    base: Item,
    names: &mut BTreeSet<&'a str>,
    volumes: &BTreeSet<&str>,
    errs: &mut Vec<String>,
) {
    if c.name.is_empty() {
        errs.push(format!("{base}.name: Required value"));
    } else {
        for e in dns1123_label_errors(&c.name) {
            errs.push(format!("{base}.name: Invalid value: {:?}: {e}", c.name));
        }
        if !names.insert(c.name.as_str()) {
            errs.push(format!("{base}.name: Duplicate value: {:?}", c.name));
        }
    }
    if c.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
        errs.push(format!("{base}.image: Required value"));
    }
    for (i, p) in c.ports.iter().flatten().enumerate() {
        if !(1..=65535).contains(&p.container_port) {
            errs.push(format!(
                "{base}.ports[{i}].containerPort: Invalid value: {}: must be between 1 and 65535, inclusive",
                p.container_port
            ));
        }
        if let Some(hp) = p.host_port
            && !(0..=65535).contains(&hp)
        {
            errs.push(format!(
                "{base}.ports[{i}].hostPort: Invalid value: {hp}: must be between 1 and 65535, inclusive"
            ));
        }
        if let Some(proto) = p.protocol.as_deref()
            && !["TCP", "UDP", "SCTP"].contains(&proto)
        {
            errs.push(format!(
                "{base}.ports[{i}].protocol: Unsupported value: {proto:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""
            ));
        }
    }
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        if m.name.is_empty() {
            errs.push(format!("{base}.volumeMounts[{i}].name: Required value"));
        } else if !volumes.contains(m.name.as_str()) {
            errs.push(format!(
                "{base}.volumeMounts[{i}].name: Not found: {:?}",
                m.name
            ));
        }
        if m.mount_path.is_empty() {
            errs.push(format!(
                "{base}.volumeMounts[{i}].mountPath: Required value"
            ));
        }
    }
    if let Some(res) = c.resources.as_ref() {
        let mut limits = std::collections::BTreeMap::new();
        for (kind, list) in [("limits", &res.limits), ("requests", &res.requests)] {
            for (name, q) in list.iter().flatten() {
                let path = format_args!("{base}.resources.{kind}[{name}]");
                match quantity::parse(&q.0) {
                    None => errs.push(format!(
                        "{path}: Invalid value: {:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                        q.0
                    )),
                    Some(v) if v < 0.0 => errs.push(format!(
                        "{path}: Invalid value: {:?}: must be greater than or equal to 0",
                        q.0
                    )),
                    Some(v) if kind == "limits" => {
                        limits.insert(name.as_str(), (v, q.0.as_str()));
                    }
                    Some(v) => {
                        if let Some((lim, lim_text)) = limits.get(name.as_str())
                            && v > *lim
                        {
                            errs.push(format!(
                                "{path}: Invalid value: {:?}: must be less than or equal to {name} limit of {lim_text}",
                                q.0
                            ));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(spec: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(json!({"spec": spec})).unwrap()
    }

    #[test]
    fn a_plain_template_is_valid() {
        let t = template(json!({
            "restartPolicy": "OnFailure",
            "volumes": [{"name": "data", "emptyDir": {}}],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{
                "name": "main", "image": "nginx",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
            }]
        }));
        assert_eq!(pod_template_errors(&t), Vec::<String>::new());
    }

    #[test]
    fn each_template_rule_is_reported() {
        let cases = [
            (
                json!({"containers": []}),
                "template.spec.containers: Required value",
            ),
            (
                json!({"containers": [{"name": "a"}]}),
                "containers[0].image: Required value",
            ),
            (
                json!({"containers": [{"name": "Bad_Name", "image": "x"}]}),
                "containers[0].name: Invalid value",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]}),
                "containers[1].name: Duplicate value",
            ),
            (
                json!({"initContainers": [{"name": "a", "image": "x"}], "containers": [{"name": "a", "image": "y"}]}),
                "containers[0].name: Duplicate value",
            ),
            (
                json!({"restartPolicy": "Sometimes", "containers": [{"name": "a", "image": "x"}]}),
                "restartPolicy: Unsupported value",
            ),
            (
                json!({"dnsPolicy": "Weird", "containers": [{"name": "a", "image": "x"}]}),
                "dnsPolicy: Unsupported value",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 70000}]}]}),
                "containerPort: Invalid value",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}]}),
                "protocol: Unsupported value",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}),
                "must be less than or equal to cpu limit of 1",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "-1"}}}]}),
                "must be greater than or equal to 0",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "resources": {"limits": {"memory": "lots"}}}]}),
                "quantities must match",
            ),
            (
                json!({"containers": [{"name": "a", "image": "x", "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}]}),
                "volumeMounts[0].name: Not found",
            ),
            (
                json!({"volumes": [{"name": "v"}, {"name": "v"}], "containers": [{"name": "a", "image": "x"}]}),
                "volumes[1].name: Duplicate value",
            ),
        ];
        for (spec, want) in cases {
            let errs = pod_template_errors(&template(spec.clone()));
            assert!(
                errs.iter().any(|e| e.contains(want)),
                "{spec}: {errs:?} lacks {want:?}"
            );
        }
        let no_spec: PodTemplateSpec = serde_json::from_value(json!({})).unwrap();
        assert!(!pod_template_errors(&no_spec).is_empty());
    }
}
