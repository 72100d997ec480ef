//! The Kubernetes types (k8s-openapi) of the built-in kinds the embedded API serves, and what
//! is derived from them once per process: their OpenAPI schemas (from k8s-openapi's schemars
//! support, under kube-apiserver's definition names such as `io.k8s.api.core.v1.Pod`), used by
//! the OpenAPI v3 documents (`kubectl explain`) and `/openapi/v2`; and the typed round trip
//! that finds fields a built-in type does not have (field validation).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value, json};

/// Something done with the Rust type of a built-in kind.
pub trait KindVisitor {
    /// The result.
    type Out;
    /// Called with the kind's type.
    fn visit<T: DeserializeOwned + Serialize + JsonSchema>(self) -> Self::Out;
}

/// Calls `v` with the type of (`group`, `kind`); `None` for kinds not listed (custom ones).
pub fn visit<V: KindVisitor>(group: &str, kind: &str, v: V) -> Option<V::Out> {
    use k8s_openapi::api::{
        admissionregistration, apps, batch, coordination, core, events, networking, policy, rbac,
        scheduling, storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
    Some(match (group, kind) {
        ("", "Namespace") => v.visit::<core::v1::Namespace>(),
        ("", "Node") => v.visit::<core::v1::Node>(),
        ("", "Pod") => v.visit::<core::v1::Pod>(),
        ("", "Service") => v.visit::<core::v1::Service>(),
        ("", "Endpoints") => v.visit::<core::v1::Endpoints>(),
        ("", "ConfigMap") => v.visit::<core::v1::ConfigMap>(),
        ("", "Secret") => v.visit::<core::v1::Secret>(),
        ("", "ServiceAccount") => v.visit::<core::v1::ServiceAccount>(),
        ("", "PersistentVolumeClaim") => v.visit::<core::v1::PersistentVolumeClaim>(),
        ("", "PersistentVolume") => v.visit::<core::v1::PersistentVolume>(),
        ("", "Event") => v.visit::<core::v1::Event>(),
        ("", "LimitRange") => v.visit::<core::v1::LimitRange>(),
        ("", "ResourceQuota") => v.visit::<core::v1::ResourceQuota>(),
        ("", "Binding") => v.visit::<core::v1::Binding>(),
        ("events.k8s.io", "Event") => v.visit::<events::v1::Event>(),
        ("coordination.k8s.io", "Lease") => v.visit::<coordination::v1::Lease>(),
        ("apps", "ReplicaSet") => v.visit::<apps::v1::ReplicaSet>(),
        ("apps", "StatefulSet") => v.visit::<apps::v1::StatefulSet>(),
        ("apps", "Deployment") => v.visit::<apps::v1::Deployment>(),
        ("apps", "DaemonSet") => v.visit::<apps::v1::DaemonSet>(),
        ("apps", "ControllerRevision") => v.visit::<apps::v1::ControllerRevision>(),
        ("batch", "Job") => v.visit::<batch::v1::Job>(),
        ("batch", "CronJob") => v.visit::<batch::v1::CronJob>(),
        ("policy", "PodDisruptionBudget") => v.visit::<policy::v1::PodDisruptionBudget>(),
        ("policy", "Eviction") => v.visit::<policy::v1::Eviction>(),
        ("networking.k8s.io", "NetworkPolicy") => v.visit::<networking::v1::NetworkPolicy>(),
        ("scheduling.k8s.io", "PriorityClass") => v.visit::<scheduling::v1::PriorityClass>(),
        ("storage.k8s.io", "StorageClass") => v.visit::<storage::v1::StorageClass>(),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            v.visit::<admissionregistration::v1::MutatingWebhookConfiguration>()
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            v.visit::<admissionregistration::v1::ValidatingWebhookConfiguration>()
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            v.visit::<apiextensions::v1::CustomResourceDefinition>()
        }
        ("rbac.authorization.k8s.io", "Role") => v.visit::<rbac::v1::Role>(),
        ("rbac.authorization.k8s.io", "RoleBinding") => v.visit::<rbac::v1::RoleBinding>(),
        ("rbac.authorization.k8s.io", "ClusterRole") => v.visit::<rbac::v1::ClusterRole>(),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            v.visit::<rbac::v1::ClusterRoleBinding>()
        }
        _ => return None,
    })
}

/// `obj` decoded as its Kubernetes type and encoded again (unknown fields are gone); `None`
/// for kinds not listed and objects that do not decode.
pub fn round_trip(group: &str, kind: &str, obj: &Value) -> Option<Value> {
    struct RoundTrip<'a>(&'a Value);
    impl KindVisitor for RoundTrip<'_> {
        type Out = Option<Value>;
        fn visit<T: DeserializeOwned + Serialize + JsonSchema>(self) -> Option<Value> {
            let typed = T::deserialize(self.0).ok()?;
            serde_json::to_value(typed).ok()
        }
    }
    visit(group, kind, RoundTrip(obj)).flatten()
}

/// Every built-in (group, kind) listed in [`visit`], with an apiVersion to publish it under.
const KINDS: &[(&str, &str, &str)] = &[
    ("", "v1", "Namespace"),
    ("", "v1", "Node"),
    ("", "v1", "Pod"),
    ("", "v1", "Service"),
    ("", "v1", "Endpoints"),
    ("", "v1", "ConfigMap"),
    ("", "v1", "Secret"),
    ("", "v1", "ServiceAccount"),
    ("", "v1", "PersistentVolumeClaim"),
    ("", "v1", "PersistentVolume"),
    ("", "v1", "Event"),
    ("", "v1", "LimitRange"),
    ("", "v1", "ResourceQuota"),
    ("", "v1", "Binding"),
    ("events.k8s.io", "v1", "Event"),
    ("coordination.k8s.io", "v1", "Lease"),
    ("apps", "v1", "ReplicaSet"),
    ("apps", "v1", "StatefulSet"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "DaemonSet"),
    ("apps", "v1", "ControllerRevision"),
    ("batch", "v1", "Job"),
    ("batch", "v1", "CronJob"),
    ("policy", "v1", "PodDisruptionBudget"),
    ("policy", "v1", "Eviction"),
    ("networking.k8s.io", "v1", "NetworkPolicy"),
    ("scheduling.k8s.io", "v1", "PriorityClass"),
    ("storage.k8s.io", "v1", "StorageClass"),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
    ),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    ("rbac.authorization.k8s.io", "v1", "Role"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
];

/// The schemas of all built-in kinds, generated once.
#[derive(Debug)]
pub struct Schemas {
    /// Definition name → OpenAPI v3 schema (`$ref`s to `#/components/schemas/...`).
    pub definitions: BTreeMap<String, Value>,
    /// (group, kind) → the definition name of the kind.
    pub kinds: BTreeMap<(String, String), String>,
}

const V3_PREFIX: &str = "#/components/schemas/";

impl Schemas {
    /// The definition name of a built-in kind.
    pub fn name_of(&self, group: &str, kind: &str) -> Option<&str> {
        self.kinds
            .get(&(group.to_string(), kind.to_string()))
            .map(String::as_str)
    }

    /// The definitions `root` refers to, itself included, directly or not.
    pub fn closure(&self, root: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![root.to_string()];
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(s) = self.definitions.get(&name) {
                refs(s, &mut |r| {
                    if !seen.contains(r) {
                        todo.push(r.to_string());
                    }
                });
            }
        }
        seen
    }
}

/// Calls `f` with the definition name of every `$ref` in `s`.
fn refs(s: &Value, f: &mut impl FnMut(&str)) {
    match s {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "$ref"
                    && let Some(name) = v.as_str().and_then(|r| r.strip_prefix(V3_PREFIX))
                {
                    f(name);
                } else {
                    refs(v, f);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| refs(v, f)),
        _ => {}
    }
}

/// The built-in schemas (generated on first use, in a few milliseconds, then shared).
pub fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(generate)
}

fn generate() -> Schemas {
    struct Register<'a>(&'a mut SchemaGenerator);
    impl KindVisitor for Register<'_> {
        type Out = String;
        fn visit<T: DeserializeOwned + Serialize + JsonSchema>(self) -> String {
            self.0.subschema_for::<T>();
            T::schema_name().into_owned()
        }
    }
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    let mut kinds = BTreeMap::new();
    for (group, _, kind) in KINDS {
        if let Some(name) = visit(group, kind, Register(&mut generator)) {
            kinds.insert((group.to_string(), kind.to_string()), name);
        }
    }
    let mut definitions: BTreeMap<String, Value> =
        generator.take_definitions(true).into_iter().collect();
    for (group, version, kind) in KINDS {
        let Some(name) = kinds.get(&(group.to_string(), kind.to_string())) else {
            continue;
        };
        if let Some(Value::Object(s)) = definitions.get_mut(name) {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": kind}]),
            );
        }
    }
    Schemas { definitions, kinds }
}

/// A v3 schema in Swagger 2.0 form: `$ref`s point at `#/definitions/`, a lone `allOf: [$ref]`
/// becomes the `$ref` itself (as kube-apiserver's v2 document writes it), and `nullable` (not
/// a Swagger 2.0 keyword) is dropped.
pub fn to_v2(s: &Value) -> Value {
    let Value::Object(m) = s else {
        return s.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "$ref" if v.is_string() => {
                let r = v.as_str().unwrap_or_default();
                let name = r.strip_prefix(V3_PREFIX).unwrap_or(r);
                out.insert(k.clone(), json!(format!("#/definitions/{name}")));
            }
            "allOf" if v.as_array().is_some_and(|a| a.len() == 1) => {
                if let Some(Value::Object(inner)) = v.get(0).map(to_v2) {
                    out.extend(inner);
                }
            }
            "nullable" => {}
            // Maps of schemas: the keys are names, not keywords.
            "properties" | "patternProperties" => {
                let named: Map<String, Value> = v
                    .as_object()
                    .map(|p| p.iter().map(|(n, x)| (n.clone(), to_v2(x))).collect())
                    .unwrap_or_default();
                out.insert(k.clone(), Value::Object(named));
            }
            "items" | "additionalProperties" | "not" => {
                out.insert(k.clone(), to_v2(v));
            }
            "allOf" | "anyOf" | "oneOf" => {
                let list = v.as_array().map(|a| a.iter().map(to_v2).collect());
                out.insert(k.clone(), list.map_or_else(|| v.clone(), Value::Array));
            }
            // Values (`default`, `enum`, `example`, extensions): copied as they are.
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_schema_named_as_kube_apiserver_names_it() {
        let s = schemas();
        assert_eq!(s.kinds.len(), KINDS.len());
        assert_eq!(s.name_of("", "Pod"), Some("io.k8s.api.core.v1.Pod"));
        assert_eq!(
            s.name_of("apiextensions.k8s.io", "CustomResourceDefinition"),
            Some(
                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
            )
        );
        let pod = &s.definitions["io.k8s.api.core.v1.Pod"];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        let closure = s.closure("io.k8s.api.core.v1.Pod");
        assert!(closure.contains("io.k8s.api.core.v1.Container"));
        assert!(closure.contains("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        for name in &closure {
            assert!(s.definitions.contains_key(name), "{name}");
        }
        let spec = &s.definitions["io.k8s.api.core.v1.PodSpec"];
        assert!(spec["properties"]["containers"]["items"].is_object());
    }

    #[test]
    fn v2_form_points_at_definitions() {
        let v3 = json!({"properties": {"a": {"allOf": [{"$ref": "#/components/schemas/X"}], "description": "d"},
                        "b": {"type": "string", "nullable": true}}});
        assert_eq!(
            to_v2(&v3),
            json!({"properties": {"a": {"$ref": "#/definitions/X", "description": "d"},
                                  "b": {"type": "string"}}})
        );
        // Property names are not keywords (JSONSchemaProps has `$ref` and `nullable` fields).
        let props =
            json!({"properties": {"$ref": {"type": "string"}, "nullable": {"type": "boolean"}}});
        assert_eq!(to_v2(&props), props);
    }

    #[test]
    fn round_trip_drops_unknown_fields() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "b"}, "junk": 1});
        let back = round_trip("", "ConfigMap", &cm).unwrap();
        assert!(back.get("junk").is_none() && back["data"]["a"] == "b");
        assert!(round_trip("x.io", "Thing", &cm).is_none());
    }
}
