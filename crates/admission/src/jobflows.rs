//! `/jobflows/validate` (CREATE, UPDATE): Volcano's JobFlow (`flow.volcano.sh/v1alpha1`) check,
//! for clusters that keep Volcano's JobFlow CRD and controller. tephra runs no JobFlow
//! controller; the webhook keeps a flow graph that could never run out of the API, as
//! Volcano's webhook-manager does.
//!
//! The rule: the flows' `dependsOn.targets` form a DAG. A target that names no flow is refused
//! with `jobflow Flow is not DAG: vertex is not defined: NAME`, a cycle (a flow depending on
//! itself included) with `jobflow Flow is not DAG`. Flows sharing a name are one vertex whose
//! targets are the last such flow's, as in Volcano (which builds a map keyed by name); the
//! first undefined target is named in flow order, so the message does not vary between calls.
//! Besides, a flow's `name` must not be empty (the CRD's `minLength: 1`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::review::{Decision, Operation, Request};
use super::view::ClusterView;
use super::{AdmissionConfig, decode};

/// Volcano's message for a flow graph that is not a DAG.
pub const NOT_DAG: &str = "jobflow Flow is not DAG";

/// The parts of a JobFlow the check reads; unknown fields are ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct JobFlow {
    /// `spec`.
    pub spec: JobFlowSpec,
}

/// `spec` of a JobFlow.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct JobFlowSpec {
    /// The flows, each a JobTemplate run once its targets are done.
    pub flows: Option<Vec<Flow>>,
}

/// One flow.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Flow {
    /// The JobTemplate's name, and the vertex's.
    pub name: Option<String>,
    /// What it waits for.
    pub depends_on: Option<DependsOn>,
}

/// `flows[].dependsOn`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct DependsOn {
    /// Names of the flows this one waits for.
    pub targets: Option<Vec<String>>,
}

/// `/jobflows/validate`.
pub fn validate(req: &Request, _view: &dyn ClusterView, _cfg: &AdmissionConfig) -> Decision {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Decision::bad_request("expect operation to be 'CREATE' or 'UPDATE'");
    }
    let flow: JobFlow = match decode(req) {
        Ok(f) => f,
        Err(d) => return d,
    };
    let errs = problems(&flow);
    if errs.is_empty() {
        Decision::allow()
    } else {
        Decision::deny(errs.join("; "))
    }
}

/// Every problem of a JobFlow (empty: admit).
pub fn problems(flow: &JobFlow) -> Vec<String> {
    let flows = flow.spec.flows.as_deref().unwrap_or_default();
    let mut out: Vec<String> = flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.name.as_deref().unwrap_or_default().is_empty())
        .map(|(i, _)| format!("spec.flows[{i}].name: Required value"))
        .collect();
    out.extend(dag_problem(flows));
    out
}

/// Vertices in order of first appearance, each with the targets of the last flow of its name.
fn graph(flows: &[Flow]) -> Vec<(&str, &[String])> {
    let mut order: BTreeMap<&str, usize> = BTreeMap::new();
    let mut vertices: Vec<(&str, &[String])> = Vec::new();
    for f in flows {
        let name = f.name.as_deref().unwrap_or_default();
        let targets = f
            .depends_on
            .as_ref()
            .and_then(|d| d.targets.as_deref())
            .unwrap_or_default();
        match order.get(name) {
            Some(&i) => vertices[i].1 = targets,
            None => {
                order.insert(name, vertices.len());
                vertices.push((name, targets));
            }
        }
    }
    vertices
}

/// Volcano's DAG message for the flows' dependency graph (`None` when it is a DAG).
fn dag_problem(flows: &[Flow]) -> Option<String> {
    let vertices = graph(flows);
    let index: BTreeMap<&str, usize> = vertices
        .iter()
        .enumerate()
        .map(|(i, (n, _))| (*n, i))
        .collect();
    // Edges from a target to the flows waiting for it; in-degree counts each flow's targets.
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); vertices.len()];
    let mut in_degree = vec![0usize; vertices.len()];
    for (i, (_, targets)) in vertices.iter().enumerate() {
        for t in *targets {
            let Some(&j) = index.get(t.as_str()) else {
                return Some(format!("{NOT_DAG}: vertex is not defined: {t}"));
            };
            waiting[j].push(i);
            in_degree[i] += 1;
        }
    }
    // Kahn's algorithm: a DAG lets every vertex be taken once its targets are.
    let mut ready: Vec<usize> = (0..vertices.len()).filter(|&i| in_degree[i] == 0).collect();
    let mut taken = 0;
    while let Some(v) = ready.pop() {
        taken += 1;
        for &w in &waiting[v] {
            in_degree[w] -= 1;
            if in_degree[w] == 0 {
                ready.push(w);
            }
        }
    }
    (taken < vertices.len()).then(|| NOT_DAG.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{request, request_with};
    use crate::view::StaticView;
    use serde_json::{Value, json};

    fn jobflow(flows: Value) -> Value {
        json!({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
               "metadata": {"name": "jf", "namespace": "team"},
               "spec": {"flows": flows, "jobRetainPolicy": "retain"}})
    }

    fn check_op(op: &str, flows: Value) -> Decision {
        validate(
            &request("JobFlow", op, jobflow(flows)),
            &StaticView::default(),
            &AdmissionConfig::default(),
        )
    }

    fn denial(flows: Value) -> Option<String> {
        check_op("CREATE", flows).denial().map(str::to_string)
    }

    fn on(name: &str, targets: &[&str]) -> Value {
        json!({"name": name, "dependsOn": {"targets": targets}})
    }

    #[test]
    fn dags_are_admitted() {
        let cases = [
            json!([]),
            json!([{"name": "single"}]),
            json!([{"name": "a"}, on("b", &["a"]), on("c", &["a", "b"]), on("d", &["b"]), on("e", &["c", "d"])]),
            json!([{"name": "start"}, on("middle", &["start"]), on("end", &["middle"])]),
            json!([{"name": "r1"}, {"name": "r2"}, on("l1a", &["r1"]), on("l1b", &["r2"]),
                   on("l2", &["l1a", "l1b"]), on("final", &["l2"])]),
            // The same target twice, and targets listed before the flow defining them.
            json!([on("b", &["a", "a"]), {"name": "a"}]),
            // dependsOn without targets, and null.
            json!([{"name": "a", "dependsOn": {}}, {"name": "b", "dependsOn": null}]),
        ];
        for flows in cases {
            assert_eq!(denial(flows.clone()), None, "{flows}");
        }
        assert!(
            validate(
                &request(
                    "JobFlow",
                    "CREATE",
                    json!({"kind": "JobFlow", "metadata": {"name": "x"}})
                ),
                &StaticView::default(),
                &AdmissionConfig::default()
            )
            .is_allowed(),
            "no spec: no flows"
        );
    }

    #[test]
    fn duplicate_names_are_one_vertex_with_the_last_targets() {
        // Volcano's e2e: two flows named `a`, and `b` after `a`.
        assert_eq!(
            denial(json!([{"name": "a"}, {"name": "a"}, on("b", &["a"])])),
            None
        );
        // The second `c` replaces the first one's targets: c after b after a.
        assert_eq!(
            denial(json!([{"name": "a"}, on("b", &["a"]), on("c", &["a"]), on("c", &["b"])])),
            None
        );
        // The first `a` would close a cycle with `b`; the last `a` has no targets.
        assert_eq!(
            denial(json!([on("a", &["b"]), on("b", &["a"]), {"name": "a"}])),
            None
        );
        // And the other way round: the last `a` closes it.
        assert_eq!(
            denial(json!([{"name": "a"}, on("b", &["a"]), on("a", &["b"])])).as_deref(),
            Some("jobflow Flow is not DAG")
        );
    }

    #[test]
    fn an_undefined_target_is_named() {
        assert_eq!(
            denial(json!([on("b", &["a"]), on("c", &["a", "b"])])).as_deref(),
            Some("jobflow Flow is not DAG: vertex is not defined: a")
        );
        // The first missing one in flow and target order.
        assert_eq!(
            denial(json!([{"name": "a"}, on("b", &["a", "x"]), on("c", &["y"])])).as_deref(),
            Some("jobflow Flow is not DAG: vertex is not defined: x")
        );
    }

    #[test]
    fn cycles_are_refused() {
        for flows in [
            json!([on("self-dependent", &["self-dependent"])]),
            json!([on("a", &["b"]), on("b", &["a"])]),
            json!([{"name": "root"}, on("a", &["root", "c"]), on("b", &["a"]), on("c", &["b"])]),
        ] {
            assert_eq!(
                denial(flows.clone()).as_deref(),
                Some("jobflow Flow is not DAG"),
                "{flows}"
            );
        }
    }

    #[test]
    fn a_flow_needs_a_name() {
        assert_eq!(
            denial(json!([{"name": "a"}, {"dependsOn": {"targets": ["a"]}}, {"name": ""}]))
                .as_deref(),
            Some("spec.flows[1].name: Required value; spec.flows[2].name: Required value")
        );
    }

    #[test]
    fn updates_are_checked_like_creates() {
        let old = jobflow(json!([{"name": "a"}, on("b", &["a"])]));
        let grown = jobflow(json!([{"name": "a"}, on("b", &["a"]), on("c", &["b"])]));
        let d = validate(
            &request_with("JobFlow", "UPDATE", "team", grown, Some(old.clone())),
            &StaticView::default(),
            &AdmissionConfig::default(),
        );
        assert!(d.is_allowed(), "{:?}", d.denial());
        let looped = jobflow(json!([on("a", &["b"]), on("b", &["a"])]));
        let d = validate(
            &request_with("JobFlow", "UPDATE", "team", looped, Some(old)),
            &StaticView::default(),
            &AdmissionConfig::default(),
        );
        assert_eq!(d.denial(), Some("jobflow Flow is not DAG"));
    }

    #[test]
    fn other_operations_and_unreadable_objects_are_bad_requests() {
        assert_eq!(
            check_op("DELETE", json!([])).denial(),
            Some("expect operation to be 'CREATE' or 'UPDATE'")
        );
        let msg = denial(json!([{"name": "a", "dependsOn": {"targets": "b"}}])).unwrap();
        assert!(
            msg.starts_with(
                "cannot decode the JobFlow object: spec.flows[0].dependsOn.targets: invalid type"
            ),
            "{msg}"
        );
    }

    #[test]
    fn a_long_chain_is_checked_without_recursion() {
        let mut flows = vec![json!({"name": "f0"})];
        for i in 1..20_000 {
            flows.push(on(&format!("f{i}"), &[&format!("f{}", i - 1)]));
        }
        assert_eq!(denial(Value::Array(flows.clone())), None);
        flows[0] = on("f0", &["f19999"]);
        assert_eq!(
            denial(Value::Array(flows)).as_deref(),
            Some("jobflow Flow is not DAG")
        );
    }
}
