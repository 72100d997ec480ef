//! Discovery documents: `/api`, `/apis`, `/apis/GROUP`, `/api/v1`, `/apis/GROUP/VERSION` and
//! `/version`, in the legacy (unaggregated) form. kubectl asks for aggregated discovery first
//! and falls back to these when the answer is plain `application/json`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::resources::{Registry, ResourceInfo};

/// The Kubernetes version the embedded API reports.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-tephra",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a (tephra embedded API, Rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if std::env::consts::ARCH == "x86_64" { "amd64" } else { std::env::consts::ARCH }),
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    })
}

/// Groups (non-core) and their versions, preferred (storage) version first.
fn groups(reg: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in reg.all().iter().filter(|r| !r.group.is_empty()) {
        let vs = out.entry(r.group.clone()).or_default();
        for v in &r.versions {
            if !vs.contains(v) {
                vs.push(v.clone());
            }
        }
    }
    out
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = groups(reg).iter().map(|(g, vs)| group_doc(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/GROUP`, if served.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let gs = groups(reg);
    let vs = gs.get(name)?;
    let mut d = group_doc(name, vs);
    d["kind"] = json!("APIGroup");
    d["apiVersion"] = json!("v1");
    Some(d)
}

/// `/api/v1` or `/apis/GROUP/VERSION`, if served.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let rs: Vec<std::sync::Arc<ResourceInfo>> = reg
        .all()
        .into_iter()
        .filter(|r| r.group == group && r.versions.iter().any(|v| v == version))
        .collect();
    if rs.is_empty() {
        return None;
    }
    let entries: Vec<Value> = rs.iter().flat_map(|r| r.discovery_entries()).collect();
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}),
    )
}

/// The deprecation warning kube-apiserver sends with every request for a deprecated
/// resource version (kubectl prints it as `Warning: ...`), if any.
pub fn deprecation_warning(res: &super::ResourceInfo, version: &str) -> Option<&'static str> {
    match (res.group.as_str(), version, res.kind.as_str()) {
        ("", "v1", "Endpoints") => {
            Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_resources_are_discoverable() {
        let reg = Registry::new();
        let list = group_list(&reg);
        let names: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"apps") && names.contains(&"apiextensions.k8s.io"));
        assert!(!names.contains(&""));
        let apps = resource_list(&reg, "apps", "v1").unwrap();
        assert_eq!(apps["groupVersion"], "apps/v1");
        assert!(
            apps["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "deployments/status")
        );
        assert!(resource_list(&reg, "apps", "v9").is_none());
        assert_eq!(
            group(&reg, "batch").unwrap()["preferredVersion"]["groupVersion"],
            "batch/v1"
        );
        assert!(group(&reg, "nope").is_none());
        assert_eq!(resource_list(&reg, "", "v1").unwrap()["groupVersion"], "v1");
    }

    #[test]
    fn endpoints_carry_kube_apiservers_deprecation_warning() {
        let reg = crate::resources::Registry::new();
        let ep = reg.lookup("", "v1", "endpoints").unwrap();
        assert_eq!(
            deprecation_warning(&ep, "v1"),
            Some("v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice")
        );
        let cm = reg.lookup("", "v1", "configmaps").unwrap();
        assert_eq!(deprecation_warning(&cm, "v1"), None);
    }
}
