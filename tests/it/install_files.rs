//! The install files that exist in two places stay identical, and the monitoring files hang
//! together, checked by `cargo test` alone (no helm, kubectl or Prometheus needed; the real
//! tools run in `tests/install/render.sh` and `tests/install/monitoring.sh`):
//!
//! * `charts/tephra/crds/` is what `tephra crds` renders (the same bytes as `manifests/crds/`);
//!   `TEPHRA_UPDATE_CRDS=1 cargo test --test it install_files::` rewrites it;
//! * the chart's rule file and dashboard are `manifests/monitoring/`'s, and the PrometheusRule
//!   of `manifests/monitoring/prometheusrule.yaml` holds exactly the groups of the rule file
//!   (`tests/install/sync.sh` regenerates the copies);
//! * every dashboard panel has a query on the `${datasource}` variable, and every recording
//!   rule the dashboard reads is defined in the rule file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tephra::api::crds;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn yaml(path: &Path) -> Value {
    serde_saphyr::from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

#[test]
fn chart_crds_are_what_tephra_crds_renders() {
    let dir = repo().join("charts/tephra/crds");
    if std::env::var_os("TEPHRA_UPDATE_CRDS").is_some() {
        crds::write_manifests(&dir).unwrap();
    }
    let files = crds::manifest_files().unwrap();
    let expected: BTreeSet<String> = files.iter().map(|(n, _)| n.clone()).collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(
        on_disk, expected,
        "charts/tephra/crds/ holds other files than `tephra crds` renders; run tests/install/sync.sh"
    );
    for (name, text) in &files {
        assert!(
            read(&dir.join(name)) == *text,
            "charts/tephra/crds/{name} differs from `tephra crds`; run \
             `TEPHRA_UPDATE_CRDS=1 cargo test --test it install_files::` or tests/install/sync.sh"
        );
    }
}

#[test]
fn chart_monitoring_files_are_the_manifests_ones() {
    for file in ["tephra-rules.yaml", "tephra-dashboard.json"] {
        assert!(
            read(&repo().join("charts/tephra/files").join(file))
                == read(&repo().join("manifests/monitoring").join(file)),
            "charts/tephra/files/{file} differs from manifests/monitoring/{file}; run \
             tests/install/sync.sh"
        );
    }
}

#[test]
fn prometheusrule_holds_the_rule_file_groups() {
    let rule = yaml(&repo().join("manifests/monitoring/prometheusrule.yaml"));
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    let groups = yaml(&repo().join("manifests/monitoring/tephra-rules.yaml"));
    assert_eq!(
        rule["spec"], groups,
        "manifests/monitoring/prometheusrule.yaml is out of date; run tests/install/sync.sh"
    );
}

/// Names recorded by the rule file and the alert names.
fn rule_names() -> (BTreeSet<String>, BTreeSet<String>) {
    let groups = yaml(&repo().join("manifests/monitoring/tephra-rules.yaml"));
    let (mut records, mut alerts) = (BTreeSet::new(), BTreeSet::new());
    for g in groups["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            assert!(
                r["expr"].as_str().is_some_and(|e| !e.trim().is_empty()),
                "a rule without expr: {r}"
            );
            if let Some(n) = r["record"].as_str() {
                assert!(records.insert(n.to_string()), "{n} recorded twice");
            } else {
                let n = r["alert"].as_str().expect("record or alert");
                assert!(alerts.insert(n.to_string()), "alert {n} defined twice");
                let sev = r["labels"]["severity"].as_str();
                assert!(
                    matches!(sev, Some("warning" | "critical")),
                    "alert {n}: severity {sev:?}"
                );
                for a in ["summary", "description"] {
                    assert!(r["annotations"][a].is_string(), "alert {n} has no {a}");
                }
            }
        }
    }
    (records, alerts)
}

#[test]
fn dashboard_panels_query_prometheus_and_use_defined_recording_rules() {
    let path = repo().join("manifests/monitoring/tephra-dashboard.json");
    let dash: Value = serde_json::from_str(&read(&path)).expect("dashboard JSON");
    let (records, alerts) = rule_names();
    assert!(alerts.len() >= 10, "{alerts:?}");
    let vars: Vec<&str> = dash["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(vars, ["datasource"]);

    let mut ids = BTreeSet::new();
    let mut queried = 0;
    let mut used_records = BTreeSet::new();
    let record_ref = |expr: &str| -> Vec<String> {
        expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .filter(|w| w.starts_with("tephra:"))
            .map(str::to_string)
            .collect()
    };
    for p in dash["panels"].as_array().expect("panels") {
        let title = p["title"].as_str().expect("title");
        assert!(
            ids.insert(p["id"].as_u64().expect("id")),
            "{title}: id reused"
        );
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().unwrap(), g["w"].as_u64().unwrap());
        assert!(x + w <= 24, "{title}: wider than the grid");
        if p["type"] == "row" {
            continue;
        }
        assert!(p["description"].is_string(), "{title}: no description");
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            assert!(!expr.trim().is_empty(), "{title}: empty query");
            used_records.extend(record_ref(expr));
            queried += 1;
        }
    }
    assert!(queried >= 25, "{queried} queries");
    let undefined: Vec<_> = used_records.difference(&records).collect();
    assert!(
        undefined.is_empty(),
        "the dashboard reads recording rules that tephra-rules.yaml does not define: {undefined:?}"
    );
}
