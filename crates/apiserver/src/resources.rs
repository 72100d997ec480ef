//! The kinds the embedded API serves: a static table of built-in Kubernetes kinds plus the
//! resources registered by CustomResourceDefinitions at run time.
//!
//! Storage is keyed by group and resource (not version): a resource served at several versions
//! (a multi-version CRD) has one table, and objects are shown at the requested version by
//! rewriting `apiVersion` (conversion strategy `None`, as kube-apiserver does for such CRDs).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use super::schema::{Compiled, Node};
use super::store::GroupResource;

/// The per-version schema data of a custom resource.
#[derive(Clone, Debug, Default)]
pub struct VersionSchema {
    /// `schema.openAPIV3Schema`, if any.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub printer_columns: Vec<Value>,
    /// The schema compiled for pruning, defaulting and validation.
    pub compiled: Option<Compiled>,
}

/// Schema data of a CRD, per served version.
#[derive(Clone, Debug, Default)]
pub struct CrdSchema {
    /// Version name → schema.
    pub versions: BTreeMap<String, VersionSchema>,
}

impl CrdSchema {
    /// The schema of a version.
    pub fn schema(&self, version: &str) -> Option<&Value> {
        self.versions.get(version).and_then(|v| v.schema.as_ref())
    }

    /// The compiled schema of a version.
    pub fn compiled(&self, version: &str) -> Option<&Node> {
        self.versions
            .get(version)
            .and_then(|v| v.compiled.as_ref())
            .map(|c| &*c.0)
    }
}

/// What a create does with the `status` the client sent, per kind (kube-apiserver's
/// `PrepareForCreate` strategies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusOnCreate {
    /// Status is kept as sent (nodes, kinds without a status subresource).
    Keep,
    /// Status is dropped (workloads, custom resources with a status subresource).
    Drop,
    /// Pods start `Pending` with a computed QoS class.
    Pod,
    /// Namespaces start `Active`.
    Namespace,
    /// PersistentVolumeClaims start `Pending`.
    PvcPending,
}

/// One servable resource.
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    /// API group, `""` for the core group.
    pub group: String,
    /// Served versions; the first is the preferred and storage version.
    pub versions: Vec<String>,
    /// Plural resource name (`pods`).
    pub plural: String,
    /// Singular name (`pod`).
    pub singular: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// Namespaced or cluster scoped.
    pub namespaced: bool,
    /// Short names for kubectl (`po`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether `/status` is a separate subresource (main endpoint ignores status changes).
    pub status_subresource: bool,
    /// Pods only: `binding` and `eviction` subresources.
    pub pod_subresources: bool,
    /// The `scale` subresource, if served.
    pub scale: Option<super::scale::ScalePaths>,
    /// Create-time handling of `status`.
    pub status_on_create: StatusOnCreate,
    /// For custom resources: schemas per version (defaults, pruning), printer columns.
    pub crd: Option<Arc<CrdSchema>>,
}

impl ResourceInfo {
    /// The storage key.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    /// `v1` or `apps/v1` for a version.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// The storage `apiVersion`.
    pub fn storage_api_version(&self) -> String {
        self.api_version(self.storage_version())
    }

    /// The version objects are stored at (the first served version; kube-apiserver's
    /// storage version for every kind here).
    pub fn storage_version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("v1")
    }

    /// `pods` or `jobs.batch`, as kube-apiserver writes it in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether this is a custom resource (served from a CRD).
    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }

    /// The discovery entries (`APIResource`) of this resource and its subresources.
    pub fn discovery_entries(&self) -> Vec<Value> {
        let mut out = vec![json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            "shortNames": self.short_names,
            "categories": self.categories,
        })];
        if self.status_subresource {
            out.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if self.scale.is_some() {
            out.push(json!({
                "name": format!("{}/scale", self.plural), "singularName": "", "namespaced": self.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
            }));
        }
        if self.pod_subresources {
            out.push(json!({
                "name": "pods/binding", "singularName": "", "namespaced": true,
                "kind": "Binding", "verbs": ["create"],
            }));
            out.push(json!({
                "name": "pods/eviction", "singularName": "", "namespaced": true,
                "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"],
            }));
        }
        out
    }
}

/// Compact row of the built-in table: group, version, plural, kind, namespaced, short names,
/// status subresource, create-time status handling.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
    StatusOnCreate,
);

const BUILTIN: &[Row] = &[
    (
        "",
        "v1",
        "namespaces",
        "Namespace",
        false,
        &["ns"],
        true,
        StatusOnCreate::Namespace,
    ),
    (
        "",
        "v1",
        "nodes",
        "Node",
        false,
        &["no"],
        true,
        StatusOnCreate::Keep,
    ),
    (
        "",
        "v1",
        "pods",
        "Pod",
        true,
        &["po"],
        true,
        StatusOnCreate::Pod,
    ),
    (
        "",
        "v1",
        "services",
        "Service",
        true,
        &["svc"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "",
        "v1",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        true,
        &["cm"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "",
        "v1",
        "secrets",
        "Secret",
        true,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        &["sa"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        true,
        StatusOnCreate::PvcPending,
    ),
    (
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        false,
        &["pv"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "",
        "v1",
        "events",
        "Event",
        true,
        &["ev"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "",
        "v1",
        "limitranges",
        "LimitRange",
        true,
        &["limits"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "",
        "v1",
        "resourcequotas",
        "ResourceQuota",
        true,
        &["quota"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        true,
        &["ev"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        &["rs"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["sts"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        &["deploy"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        true,
        &["ds"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "apps",
        "v1",
        "controllerrevisions",
        "ControllerRevision",
        true,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "batch",
        "v1",
        "jobs",
        "Job",
        true,
        &[],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "batch",
        "v1",
        "cronjobs",
        "CronJob",
        true,
        &["cj"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        true,
        StatusOnCreate::Drop,
    ),
    (
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
        &["netpol"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        false,
        &["pc"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false,
        &["sc"],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        true,
        StatusOnCreate::Keep,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        &[],
        false,
        StatusOnCreate::Keep,
    ),
];

/// Kinds in kubectl's `all` category.
const ALL_CATEGORY: &[&str] = &[
    "pods",
    "services",
    "replicasets",
    "statefulsets",
    "deployments",
    "daemonsets",
    "jobs",
    "cronjobs",
];

fn builtin(row: &Row) -> ResourceInfo {
    let (group, version, plural, kind, namespaced, short, status, on_create) = *row;
    ResourceInfo {
        group: group.to_string(),
        versions: vec![version.to_string()],
        plural: plural.to_string(),
        singular: kind.to_ascii_lowercase(),
        kind: kind.to_string(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: if ALL_CATEGORY.contains(&plural) && group != "events.k8s.io" {
            vec!["all".to_string()]
        } else {
            vec![]
        },
        status_subresource: status,
        pod_subresources: plural == "pods",
        scale: matches!(plural, "deployments" | "replicasets" | "statefulsets")
            .then(super::scale::ScalePaths::builtin),
        status_on_create: on_create,
        crd: None,
    }
}

/// The set of served resources: built-ins plus CRD-registered ones.
#[derive(Debug)]
pub struct Registry {
    inner: RwLock<BTreeMap<GroupResource, Arc<ResourceInfo>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// The built-in kinds.
    pub fn new() -> Self {
        let map = BUILTIN
            .iter()
            .map(builtin)
            .map(|r| (r.group_resource(), Arc::new(r)))
            .collect();
        Self {
            inner: RwLock::new(map),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<GroupResource, Arc<ResourceInfo>>> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The resource served at `group/version` under `plural`, if any.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        let r = self
            .read()
            .get(&GroupResource::new(group, plural))
            .cloned()?;
        r.versions.iter().any(|v| v == version).then_some(r)
    }

    /// The resource by group and plural, any version.
    pub fn by_group_resource(&self, gr: &GroupResource) -> Option<Arc<ResourceInfo>> {
        self.read().get(gr).cloned()
    }

    /// The resource of an `apiVersion` + `kind` (for owner references).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
        let (group, version) = split_api_version(api_version);
        self.read()
            .values()
            .find(|r| r.group == group && r.kind == kind && r.versions.iter().any(|v| v == version))
            .cloned()
    }

    /// Every served resource.
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.read().values().cloned().collect()
    }

    /// Serves (or re-serves with new names/schema) a resource; returns the previous entry.
    pub fn register(&self, info: ResourceInfo) -> Option<Arc<ResourceInfo>> {
        let mut w = self.inner.write().unwrap_or_else(|e| e.into_inner());
        w.insert(info.group_resource(), Arc::new(info))
    }

    /// Stops serving a custom resource. Built-ins cannot be removed.
    pub fn unregister(&self, gr: &GroupResource) -> Option<Arc<ResourceInfo>> {
        let mut w = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if w.get(gr).is_some_and(|r| r.is_custom()) {
            w.remove(gr)
        } else {
            None
        }
    }
}

/// `apps/v1` → (`apps`, `v1`); `v1` → (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_have_the_scope_and_names_kubectl_expects() {
        let reg = Registry::new();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        assert!(pods.namespaced && pods.status_subresource && pods.pod_subresources);
        assert_eq!(pods.short_names, vec!["po"]);
        let nodes = reg.lookup("", "v1", "nodes").unwrap();
        assert!(!nodes.namespaced);
        assert!(reg.lookup("apps", "v1", "deployments").is_some());
        assert!(reg.lookup("apps", "v2", "deployments").is_none());
        let pc = reg
            .by_kind("scheduling.k8s.io/v1", "PriorityClass")
            .unwrap();
        assert_eq!(pc.plural, "priorityclasses");
        assert_eq!(pods.qualified(), "pods");
        assert_eq!(
            reg.lookup("batch", "v1", "jobs").unwrap().qualified(),
            "jobs.batch"
        );
    }

    #[test]
    fn discovery_lists_status_binding_and_eviction_for_pods() {
        let reg = Registry::new();
        let names: Vec<String> = reg
            .lookup("", "v1", "pods")
            .unwrap()
            .discovery_entries()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            ["pods", "pods/status", "pods/binding", "pods/eviction"]
        );
    }

    #[test]
    fn builtins_cannot_be_unregistered() {
        let reg = Registry::new();
        assert!(reg.unregister(&GroupResource::new("", "pods")).is_none());
        assert!(reg.lookup("", "v1", "pods").is_some());
    }
}
