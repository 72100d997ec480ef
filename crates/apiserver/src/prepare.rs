//! What kube-apiserver does to an object between the request and the store, as pure
//! functions: system metadata on create, immutable fields and the status split on update,
//! `generation`, the built-in defaults tephra depends on, CRD schema defaults and pruning, and
//! the validation of names and sizes.
//!
//! Built-in defaulting is a subset (documented simplification): pods and pod templates get
//! `schedulerName: default-scheduler`, `restartPolicy: Always` (pods and non-Job templates),
//! `dnsPolicy`, `terminationGracePeriodSeconds`, container `imagePullPolicy` and
//! `terminationMessagePath`/`Policy` and port `protocol`; workloads get `replicas: 1`.

use serde_json::{Map, Value, json};

use super::resources::{ResourceInfo, StatusOnCreate};
use super::{ApiError, MAX_ANNOTATION_BYTES};

/// Which endpoint a write came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The object itself.
    Main,
    /// The `/status` subresource.
    Status,
}

fn meta_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::BadRequest("the object is not a JSON object".into()))?;
    let m = o.entry("metadata").or_insert_with(|| json!({}));
    if m.is_null() {
        *m = json!({});
    }
    m.as_object_mut()
        .ok_or_else(|| ApiError::BadRequest("metadata is not an object".into()))
}

/// Checks (and fills in) `apiVersion` and `kind` for the resource and version of the URL.
pub fn check_type(res: &ResourceInfo, version: &str, obj: &mut Value) -> Result<(), ApiError> {
    let want_av = res.api_version(version);
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::BadRequest("the object is not a JSON object".into()))?;
    match o.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            o.insert("kind".into(), json!(res.kind));
        }
        Some(k) if k == res.kind => {}
        Some(k) => {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )));
        }
    }
    match o.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            o.insert("apiVersion".into(), json!(want_av));
        }
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
    }
    Ok(())
}

/// What kube-apiserver does while decoding a create, before mutating admission: type check,
/// namespace from the URL, built-in and schema defaults.
pub fn prepare_decode(
    res: &ResourceInfo,
    version: &str,
    ns: &str,
    mut obj: Value,
) -> Result<Value, ApiError> {
    check_type(res, version, &mut obj)?;
    let namespaced = res.namespaced;
    let meta = meta_mut(&mut obj)?;
    if namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(n) if !n.is_empty() && n != ns => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(ns));
            }
        }
    }
    apply_builtin_defaults(res, &mut obj);
    apply_schema(res, version, &mut obj);
    Ok(obj)
}

/// System-generated values for a create.
#[derive(Clone, Debug)]
pub struct CreateContext<'a> {
    /// Namespace from the URL (empty for cluster scoped).
    pub namespace: &'a str,
    /// API version of the request URL (objects are stored at the storage version).
    pub version: &'a str,
    /// New uid.
    pub uid: String,
    /// Creation time.
    pub now: String,
    /// Random suffix for `generateName`.
    pub suffix: String,
}

/// Prepares a new object for storing: name (or `generateName`), namespace, uid,
/// creationTimestamp, generation, the create-time status rule, defaults.
pub fn prepare_create(
    res: &ResourceInfo,
    mut obj: Value,
    ctx: &CreateContext<'_>,
) -> Result<Value, ApiError> {
    check_type(res, ctx.version, &mut obj)?;
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), json!(res.storage_api_version()));
    }
    let meta = meta_mut(&mut obj)?;
    if res.namespaced {
        match meta.get("namespace").and_then(Value::as_str) {
            Some(ns) if !ns.is_empty() && ns != ctx.namespace => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(ctx.namespace));
            }
        }
    } else {
        meta.remove("namespace");
    }
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let name = if name.is_empty() {
        let Some(prefix) = meta
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
        else {
            return Err(ApiError::Invalid(format!(
                "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                res.kind
            )));
        };
        let prefix: String = prefix.chars().take(58).collect();
        format!("{prefix}{}", ctx.suffix)
    } else {
        name
    };
    let problems = tephra_names::dns1123_subdomain_errors(&name);
    if !problems.is_empty() {
        return Err(ApiError::Invalid(format!(
            "{} \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": {}",
            res.kind,
            problems.join(", ")
        )));
    }
    meta.insert("name".into(), json!(name));
    meta.insert("uid".into(), json!(ctx.uid));
    meta.insert("creationTimestamp".into(), json!(ctx.now));
    meta.insert("generation".into(), json!(1));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    ] {
        meta.remove(k);
    }
    if let Some(o) = obj.as_object_mut() {
        match res.status_on_create {
            StatusOnCreate::Keep => {}
            StatusOnCreate::Drop => {
                o.remove("status");
            }
            StatusOnCreate::Namespace => {
                o.insert("status".into(), json!({"phase": "Active"}));
                o.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            }
            StatusOnCreate::PvcPending => {
                o.insert("status".into(), json!({"phase": "Pending"}));
            }
            StatusOnCreate::Pod => {}
        }
    }
    apply_builtin_defaults(res, &mut obj);
    if res.status_on_create == StatusOnCreate::Pod {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let qos = qos_class(spec);
        let mut status = json!({"phase": "Pending", "qosClass": qos});
        let gated = spec
            .get("schedulingGates")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty());
        // A pod already on a node cannot wait for its gates: kube-apiserver refuses it.
        if gated
            && spec
                .get("nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
        {
            return Err(ApiError::Invalid(format!(
                "Pod \"{}\" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared",
                obj.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            )));
        }
        // A pod created behind scheduling gates says so, as kube-apiserver marks it (kubectl
        // shows it `SchedulingGated`).
        if gated {
            status["conditions"] = json!([{
                "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
                "lastProbeTime": null, "lastTransitionTime": ctx.now,
            }]);
        }
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), status);
        }
    }
    apply_schema(res, ctx.version, &mut obj);
    Ok(obj)
}

/// CRD schema pruning and defaulting for custom resources.
pub fn apply_schema(res: &ResourceInfo, version: &str, obj: &mut Value) {
    if let Some(schema) = super::schema::of(res, version) {
        super::schema::prune::prune(obj, schema);
        super::schema::prune::apply_defaults(obj, schema);
    }
}

/// Prepares an update: metadata fields clients cannot change are taken from `old`, the status
/// split is applied (`Main` keeps the old status when the kind has a status subresource;
/// `Status` keeps everything but the status), defaults, and `generation` is bumped when
/// anything outside metadata and status changed.
pub fn prepare_update(
    res: &ResourceInfo,
    endpoint: Endpoint,
    old: &Value,
    mut new: Value,
) -> Result<Value, ApiError> {
    if !new.is_object() {
        return Err(ApiError::BadRequest(
            "the object is not a JSON object".into(),
        ));
    }
    if endpoint == Endpoint::Status {
        let status = new.get("status").cloned();
        let mut merged = old.clone();
        if let Some(o) = merged.as_object_mut() {
            match status {
                Some(s) => o.insert("status".into(), s),
                None => o.remove("status"),
            };
        }
        new = merged;
    } else if res.status_subresource
        && let Some(o) = new.as_object_mut()
    {
        match old.get("status") {
            Some(s) => o.insert("status".into(), s.clone()),
            None => o.remove("status"),
        };
    }
    if let (Some(o), Some(old_o)) = (new.as_object_mut(), old.as_object()) {
        for k in ["apiVersion", "kind"] {
            if let Some(v) = old_o.get(k) {
                o.insert(k.into(), v.clone());
            }
        }
    }
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let meta = meta_mut(&mut new)?;
    for k in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ] {
        match old_meta.get(k) {
            Some(v) => meta.insert(k.into(), v.clone()),
            None => meta.remove(k),
        };
    }
    meta.remove("managedFields");
    meta.remove("selfLink");
    if meta.get("labels").is_some_and(Value::is_null) {
        meta.remove("labels");
    }
    if meta.get("annotations").is_some_and(Value::is_null) {
        meta.remove("annotations");
    }
    if res.pod_subresources && endpoint == Endpoint::Main {
        // Binding is the only way to set a pod's node; an update may not move it.
        let old_node = old.pointer("/spec/nodeName").cloned();
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            match old_node {
                Some(n) => spec.insert("nodeName".into(), n),
                None => spec.remove("nodeName"),
            };
        }
    }
    if endpoint == Endpoint::Main {
        apply_builtin_defaults(res, &mut new);
        apply_schema(res, res.storage_version(), &mut new);
    }
    if spec_changed(old, &new) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(&mut new)?.insert("generation".into(), json!(g + 1));
    }
    Ok(new)
}

/// Whether anything besides `metadata` and `status` differs.
pub fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    strip(old) != strip(new)
}

/// Checks size limits and metadata rules before storing.
pub fn validate(res: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(ann) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        let size: usize = ann
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map(str::len).unwrap_or(0))
            .sum();
        if size > MAX_ANNOTATION_BYTES {
            return Err(ApiError::Invalid(format!(
                "{} \"{name}\" is invalid: metadata.annotations: Too long: must have at most {MAX_ANNOTATION_BYTES} bytes",
                res.kind
            )));
        }
        if let Some((k, _)) = ann.iter().find(|(_, v)| !v.is_string()) {
            return Err(ApiError::BadRequest(format!(
                "metadata.annotations[{k}]: annotation values must be strings"
            )));
        }
    }
    if let Some((k, _)) = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .and_then(|l| l.iter().find(|(_, v)| !v.is_string()))
    {
        return Err(ApiError::BadRequest(format!(
            "metadata.labels[{k}]: label values must be strings"
        )));
    }
    Ok(())
}

/// The QoS class kube-apiserver records on a new pod.
pub fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        if req.is_some_and(|r| !r.is_empty()) || lim.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for r in ["cpu", "memory"] {
            let l = lim.and_then(|l| l.get(r));
            // A request defaults to the limit when only the limit is given.
            let q = req.and_then(|q| q.get(r)).or(l);
            if l.is_none() || q != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

fn set_default(o: &mut Map<String, Value>, k: &str, v: Value) {
    if o.get(k).is_none_or(Value::is_null) {
        o.insert(k.to_string(), v);
    }
}

/// Defaults of a pod spec (also used for templates).
pub fn default_pod_spec(spec: &mut Value, restart_policy: bool) {
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    if restart_policy {
        set_default(s, "restartPolicy", json!("Always"));
    }
    set_default(s, "schedulerName", json!("default-scheduler"));
    set_default(s, "dnsPolicy", json!("ClusterFirst"));
    set_default(s, "terminationGracePeriodSeconds", json!(30));
    set_default(s, "securityContext", json!({}));
    for key in ["containers", "initContainers"] {
        for c in s
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(c) = c.as_object_mut() else { continue };
            let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
            let tag = image.rsplit('/').next().unwrap_or_default();
            let latest = !tag.contains(':') && !image.contains('@') || tag.ends_with(":latest");
            set_default(
                c,
                "imagePullPolicy",
                json!(if latest { "Always" } else { "IfNotPresent" }),
            );
            set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
            set_default(c, "terminationMessagePolicy", json!("File"));
            for p in c
                .get_mut("ports")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(p) = p.as_object_mut() {
                    set_default(p, "protocol", json!("TCP"));
                }
            }
        }
    }
}

/// Built-in defaults for pods and workloads; a Secret's `stringData` is folded into `data`.
pub fn apply_builtin_defaults(res: &ResourceInfo, obj: &mut Value) {
    if res.is_custom() {
        return;
    }
    match (res.group.as_str(), res.plural.as_str()) {
        ("", "secrets") => {
            let Some(o) = obj.as_object_mut() else { return };
            if let Some(Value::Object(sd)) = o.remove("stringData") {
                let data = o.entry("data").or_insert_with(|| json!({}));
                if let Some(d) = data.as_object_mut() {
                    for (k, v) in sd {
                        let bytes = v.as_str().unwrap_or_default().as_bytes().to_vec();
                        d.insert(
                            k,
                            serde_json::to_value(k8s_openapi::ByteString(bytes))
                                .unwrap_or(Value::Null),
                        );
                    }
                }
            }
            set_default(o, "type", json!("Opaque"));
        }
        ("", "pods") => {
            if let Some(spec) = obj.get_mut("spec") {
                default_pod_spec(spec, true);
            }
        }
        ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => {
            let is_job = res.group == "batch";
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                if !is_job && res.plural != "daemonsets" {
                    set_default(spec, "replicas", json!(1));
                }
                match res.plural.as_str() {
                    "deployments" => {
                        set_default(
                            spec,
                            "strategy",
                            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
                        );
                        set_default(spec, "revisionHistoryLimit", json!(10));
                        set_default(spec, "progressDeadlineSeconds", json!(600));
                    }
                    "statefulsets" => {
                        set_default(spec, "podManagementPolicy", json!("OrderedReady"));
                        set_default(
                            spec,
                            "updateStrategy",
                            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
                        );
                        set_default(spec, "revisionHistoryLimit", json!(10));
                    }
                    "jobs" => {
                        set_default(spec, "backoffLimit", json!(6));
                        set_default(spec, "completionMode", json!("NonIndexed"));
                        set_default(spec, "suspend", json!(false));
                    }
                    _ => {}
                }
                if let Some(t) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
                    default_pod_spec(t, !is_job);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn ctx(ns: &str) -> CreateContext<'_> {
        CreateContext {
            namespace: ns,
            version: "v1",
            uid: "u-1".into(),
            now: "2026-01-01T00:00:00Z".into(),
            suffix: "abcde".into(),
        }
    }

    #[test]
    fn create_sets_system_metadata_and_pod_defaults() {
        let reg = Registry::new();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"generateName": "web-", "resourceVersion": "5"},
                         "spec": {"containers": [{"name": "c", "image": "nginx:1.2", "resources": {"requests": {"cpu": "1"}}}]},
                         "status": {"phase": "Running"}});
        let out = prepare_create(&pods, pod, &ctx("default")).unwrap();
        assert_eq!(out["metadata"]["name"], "web-abcde");
        assert_eq!(out["metadata"]["namespace"], "default");
        assert_eq!(out["metadata"]["uid"], "u-1");
        assert_eq!(out["metadata"]["generation"], 1);
        assert!(out["metadata"].get("resourceVersion").is_none());
        assert_eq!(out["kind"], "Pod");
        assert_eq!(out["apiVersion"], "v1");
        assert_eq!(
            out["status"],
            json!({"phase": "Pending", "qosClass": "Burstable"})
        );
        assert_eq!(out["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(out["spec"]["restartPolicy"], "Always");
        assert_eq!(
            out["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
    }

    #[test]
    fn a_pod_created_behind_gates_is_marked_scheduling_gated() {
        let reg = Registry::new();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        let pod = json!({"metadata": {"name": "p"},
                         "spec": {"containers": [{"name": "c", "image": "i"}],
                                  "schedulingGates": [{"name": "example.com/wait"}]}});
        let out = prepare_create(&pods, pod, &ctx("default")).unwrap();
        let cond = &out["status"]["conditions"][0];
        assert_eq!(cond["type"], "PodScheduled");
        assert_eq!(cond["status"], "False");
        assert_eq!(cond["reason"], "SchedulingGated");
        assert_eq!(crate::tables::pod_status(&out), "SchedulingGated");
        // Gated and already on a node: refused, as kube-apiserver refuses it.
        let placed = json!({"metadata": {"name": "q"},
                            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1",
                                     "schedulingGates": [{"name": "example.com/wait"}]}});
        let e = prepare_create(&pods, placed, &ctx("default")).unwrap_err();
        assert_eq!(e.code(), 422);
        assert_eq!(
            e.to_string(),
            "Pod \"q\" is invalid: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
        );
    }

    #[test]
    fn create_rejects_mismatched_namespace_kind_and_bad_names() {
        let reg = Registry::new();
        let cms = reg.lookup("", "v1", "configmaps").unwrap();
        let e = prepare_create(
            &cms,
            json!({"metadata": {"name": "a", "namespace": "x"}}),
            &ctx("y"),
        );
        assert_eq!(e.unwrap_err().code(), 400);
        let e = prepare_create(
            &cms,
            json!({"kind": "Secret", "metadata": {"name": "a"}}),
            &ctx("y"),
        );
        assert_eq!(e.unwrap_err().code(), 400);
        let e = prepare_create(&cms, json!({"metadata": {"name": "Bad_Name"}}), &ctx("y"));
        assert_eq!(e.unwrap_err().code(), 422);
        let e = prepare_create(&cms, json!({"metadata": {}}), &ctx("y"));
        assert_eq!(e.unwrap_err().code(), 422);
    }

    #[test]
    fn status_split_and_generation() {
        let reg = Registry::new();
        let deploy = reg.lookup("apps", "v1", "deployments").unwrap();
        let mut old = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "uid": "u", "generation": 1, "resourceVersion": "3"},
            "spec": {"replicas": 1}, "status": {"replicas": 0}});
        // Stored objects carry their defaults.
        apply_builtin_defaults(&deploy, &mut old);
        let mut changed = old.clone();
        changed["spec"]["replicas"] = json!(2);
        changed["status"]["replicas"] = json!(9);
        changed["metadata"]["uid"] = json!("hacked");
        let out = prepare_update(&deploy, Endpoint::Main, &old, changed.clone()).unwrap();
        assert_eq!(out["spec"]["replicas"], 2);
        assert_eq!(out["status"]["replicas"], 0, "main endpoint ignores status");
        assert_eq!(out["metadata"]["uid"], "u");
        assert_eq!(out["metadata"]["generation"], 2);
        let st = prepare_update(&deploy, Endpoint::Status, &old, changed).unwrap();
        assert_eq!(st["spec"]["replicas"], 1, "status endpoint ignores spec");
        assert_eq!(st["status"]["replicas"], 9);
        assert_eq!(st["metadata"]["generation"], 1);
        let mut labels_only = old.clone();
        labels_only["metadata"]["labels"] = json!({"a": "b"});
        let out = prepare_update(&deploy, Endpoint::Main, &old, labels_only).unwrap();
        assert_eq!(
            out["metadata"]["generation"], 1,
            "metadata changes do not bump generation"
        );
    }

    #[test]
    fn kinds_without_status_subresource_update_status_on_the_main_endpoint() {
        let reg = Registry::new();
        let cm = reg.lookup("", "v1", "configmaps").unwrap();
        let old = json!({"metadata": {"name": "c"}, "status": {"a": 1}});
        let new = json!({"metadata": {"name": "c"}, "status": {"a": 2}});
        assert_eq!(
            prepare_update(&cm, Endpoint::Main, &old, new).unwrap()["status"]["a"],
            2
        );
    }

    #[test]
    fn secret_string_data_becomes_base64_data() {
        let reg = Registry::new();
        let secrets = reg.lookup("", "v1", "secrets").unwrap();
        let mut s =
            json!({"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "hi"}});
        apply_builtin_defaults(&secrets, &mut s);
        assert_eq!(s["data"], json!({"a": "eA==", "b": "aGk="}));
        assert!(s.get("stringData").is_none());
        assert_eq!(s["type"], "Opaque");
    }

    #[test]
    fn qos_classes() {
        assert_eq!(
            qos_class(&json!({"containers": [{"name": "a"}]})),
            "BestEffort"
        );
        assert_eq!(
            qos_class(
                &json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]})
            ),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(
                &json!({"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]})
            ),
            "Burstable"
        );
    }

    #[test]
    fn oversized_annotations_are_invalid() {
        let reg = Registry::new();
        let cm = reg.lookup("", "v1", "configmaps").unwrap();
        let big = "x".repeat(MAX_ANNOTATION_BYTES + 1);
        let obj = json!({"metadata": {"name": "c", "annotations": {"a": big}}});
        assert_eq!(validate(&cm, &obj).unwrap_err().code(), 422);
        assert_eq!(
            validate(&cm, &json!({"metadata": {"labels": {"a": 1}}}))
                .unwrap_err()
                .code(),
            400
        );
    }
}
