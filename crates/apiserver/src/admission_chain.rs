//! The admission chain between request preparation and storage, in kube-apiserver's order:
//!
//! ```text
//!   mutating:   Priority (pods: spec.priority from priorityClassName)
//!               → mutating webhooks                                  (webhooks.rs)
//!   [the verb layer: system metadata, schema defaults and pruning, validation]
//!   validating: validating webhooks                                  (webhooks.rs)
//! ```
//!
//! The verbs in `ops.rs` call [`ApiServer::admit_mutating`] and [`ApiServer::admit_validating`]
//! and nothing else of admission, so a new built-in plugin goes here, not among the verbs.
//! NamespaceLifecycle (no new content in a missing or terminating namespace) stays a check of
//! the verb layer because seeding and the stand-ins need it too.

use serde_json::{Value, json};

use super::store::GroupResource;
use super::webhooks::{Attributes, Operation, Phase};
use super::{ApiError, ApiServer};

/// The value kube-apiserver gives the two system classes (they need no PriorityClass object).
const SYSTEM_CLASSES: [(&str, i64); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

impl ApiServer {
    /// Mutating admission: the built-in plugins, then the mutating webhooks. Returns the object
    /// as admitted (`None` for deletes).
    pub(crate) async fn admit_mutating(
        &self,
        a: &Attributes<'_>,
        mut obj: Option<Value>,
    ) -> Result<Option<Value>, ApiError> {
        if a.op == Operation::Create
            && a.res.group.is_empty()
            && a.res.plural == "pods"
            && let Some(pod) = obj.as_mut()
        {
            self.admit_priority(pod)?;
        }
        self.admission.run(self, Phase::Mutating, a, obj).await
    }

    /// Validating admission: the validating webhooks.
    pub(crate) async fn admit_validating(
        &self,
        a: &Attributes<'_>,
        obj: Option<Value>,
    ) -> Result<Option<Value>, ApiError> {
        self.admission.run(self, Phase::Validating, a, obj).await
    }

    /// The Priority admission plugin: `spec.priority` from `priorityClassName` (403 when the
    /// class does not exist, as kube-apiserver answers).
    fn admit_priority(&self, pod: &mut Value) -> Result<(), ApiError> {
        // The name as kube-apiserver reports it: the name, or the generateName prefix when the
        // name is still to be generated.
        let pod_name = pod
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .or_else(|| {
                pod.pointer("/metadata/generateName")
                    .and_then(Value::as_str)
            })
            .unwrap_or_default()
            .to_string();
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let class = spec
            .get("priorityClassName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let priority = if class.is_empty() {
            0
        } else if let Some((_, v)) = SYSTEM_CLASSES.iter().find(|(n, _)| *n == class) {
            *v
        } else {
            let pc = self
                .store
                .get(
                    &GroupResource::new("scheduling.k8s.io", "priorityclasses"),
                    "",
                    &class,
                )
                .ok_or_else(|| ApiError::Forbidden {
                    resource: "pods".into(),
                    name: pod_name.clone(),
                    reason: format!("no PriorityClass with name {class} was found"),
                })?;
            pc.value()?
                .get("value")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        spec.insert("priority".into(), json!(priority));
        Ok(())
    }
}
