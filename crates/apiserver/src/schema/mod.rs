//! Structural schemas of custom resources: compiled once per CRD version ([`node`]), walked by
//! one rule ([`walk`]) for pruning, defaulting and the unknown-field report ([`prune`]) and for
//! value validation ([`validate`]), with kube-apiserver's 422 wording ([`invalid`]). Pure code.

pub mod invalid;
pub mod node;
pub mod prune;
pub mod validate;
pub mod walk;

use std::sync::Arc;

use serde_json::Value;

pub use invalid::{FieldError, Invalid};
pub use node::Node;

use super::resources::{ResourceInfo, split_api_version};

/// A compiled schema, shared by every object of its CRD version. Its `Debug` is short: the
/// resource registry's fingerprint prints resources, and the source schema is already there.
#[derive(Clone)]
pub struct Compiled(pub Arc<Node>);

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compiled")
    }
}

/// The compiled schema of `res` at `version`, if it is a custom resource with one.
pub fn of<'r>(res: &'r ResourceInfo, version: &str) -> Option<&'r Node> {
    res.crd.as_ref().and_then(|c| c.compiled(version))
}

/// The version an object is written at: its `apiVersion`, else the storage version.
fn object_version<'a>(res: &'a ResourceInfo, obj: &'a Value) -> &'a str {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .map(|av| split_api_version(av).1)
        .filter(|v| res.versions.iter().any(|s| s == v))
        .unwrap_or_else(|| res.versions.first().map(String::as_str).unwrap_or_default())
}

/// Validates a custom object about to be stored against its CRD's schema (a no-op for other
/// kinds). On an update, `old` is the stored object: an error the old object already had at
/// the same field is not reported (kube-apiserver's validation ratcheting), so objects stored
/// before a CRD tightened its schema stay writable.
pub fn check(res: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Result<(), Box<Invalid>> {
    let Some(schema) = of(res, object_version(res, obj)) else {
        return Ok(());
    };
    let mut causes = validate::validate(obj, schema);
    if causes.is_empty() {
        return Ok(());
    }
    if let Some(old) = old
        && let Some(old_schema) = of(res, object_version(res, old))
    {
        let before = validate::validate(old, old_schema);
        causes.retain(|c| !before.contains(c));
        if causes.is_empty() {
            return Ok(());
        }
    }
    Err(Box::new(Invalid {
        kind: res.kind.clone(),
        group: res.group.clone(),
        name: obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        causes,
    }))
}

impl From<Box<Invalid>> for super::ApiError {
    fn from(e: Box<Invalid>) -> Self {
        super::ApiError::InvalidFields(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::resource_from_crd;
    use serde_json::json;

    /// The vcJob resource from the project's copy of Volcano's CRD.
    fn vcjob() -> ResourceInfo {
        let docs: Vec<Value> = serde_saphyr::from_multiple(include_str!(
            "../../../../manifests/crds/batch.volcano.sh_jobs.yaml"
        ))
        .unwrap();
        let crd = docs.into_iter().find(|d| d.is_object()).unwrap();
        resource_from_crd(&crd).unwrap()
    }

    fn job(tasks: Value) -> Value {
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
               "metadata": {"name": "x", "namespace": "default"},
               "spec": {"minAvailable": 1, "schedulerName": "volcano", "tasks": tasks}})
    }

    #[test]
    fn volcanos_job_schema_refuses_negative_replicas_with_kube_apiservers_message() {
        let res = vcjob();
        let ok = job(
            json!([{"name": "t", "replicas": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": 1024}}}]}}}]),
        );
        check(&res, &ok, None).unwrap();
        let bad = job(json!([{"name": "t", "replicas": -1, "template": {}}]));
        let err = check(&res, &bad, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Job.batch.volcano.sh \"x\" is invalid: spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0"
        );
        let api: crate::ApiError = err.into();
        let status = api.status();
        assert_eq!(
            (status["code"].as_u64(), status["reason"].as_str()),
            (Some(422), Some("Invalid"))
        );
        assert_eq!(status["details"]["group"], "batch.volcano.sh");
        assert_eq!(
            status["details"]["causes"][0]["field"],
            "spec.tasks[0].replicas"
        );
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "FieldValueInvalid"
        );
    }

    #[test]
    fn quantities_are_int_or_string_with_a_pattern() {
        let res = vcjob();
        let bad = job(
            json!([{"name": "t", "replicas": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "lots"}}}]}}}]),
        );
        let err = check(&res, &bad, None).unwrap_err();
        let f = "spec.tasks[0].template.spec.containers[0].resources.limits.cpu";
        assert_eq!(err.causes.len(), 1, "{err}");
        assert_eq!(err.causes[0].field, f);
        assert!(
            err.causes[0]
                .detail
                .starts_with(&format!("{f} in body should match '^(\\+|-)?")),
            "{err}"
        );
    }

    #[test]
    fn an_update_is_refused_only_for_errors_it_brings() {
        let res = vcjob();
        let stored = job(json!([{"name": "t", "replicas": -1, "template": {}}]));
        let mut relabelled = stored.clone();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        check(&res, &relabelled, Some(&stored)).unwrap();
        let mut worse = relabelled.clone();
        worse["spec"]["minAvailable"] = json!(-2);
        let err = check(&res, &worse, Some(&stored)).unwrap_err();
        assert_eq!(err.causes.len(), 1);
        assert_eq!(err.causes[0].field, "spec.minAvailable");
    }

    #[test]
    fn kinds_without_a_schema_are_not_checked() {
        let reg = crate::resources::Registry::new();
        let cm = reg.lookup("", "v1", "configmaps").unwrap();
        check(&cm, &json!({"data": {"a": 1}}), None).unwrap();
    }
}
