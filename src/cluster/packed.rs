//! How the shared cache keeps pods: the ones tephra works on as they are, every other one as
//! the JSON of its trimmed self, unpacked when a reader asks for it.
//!
//! The API types are built for any pod: a `Pod` is 2.4 KiB before any of its strings, each
//! container another 2.3 KiB and each container status 0.75 KiB, nearly all of it empty
//! options. A trimmed pod of a Deployment holds about 9 KiB that way and 1.7 KiB as JSON. In
//! a large cluster most pods are not tephra's (a Deployment's, scheduled by kube-scheduler):
//! the scheduler's index takes their node and requests from the watch event, and only the
//! web view reads them whole, so they are kept packed. The pods tephra schedules or groups
//! are read again on every sync of their job or gang (a job of 100 pods reads all 100), and
//! a parse each time costs more than the memory saved, so they stay whole.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;

use crate::api::keys;

/// A pod as the shared store keeps it ([`StoredPod::keep`] decides the form).
#[derive(Clone, Debug)]
pub struct StoredPod {
    /// Name, namespace, uid and resourceVersion only: what the store keys and compares by.
    meta: ObjectMeta,
    body: Body,
}

#[derive(Clone, Debug)]
enum Body {
    /// A pod tephra works on, shared with the readers.
    Whole(Arc<Pod>),
    /// Any other pod, serialized.
    Packed(Box<[u8]>),
}

/// A packed pod that does not unpack: never expected (tephra packed it itself), reported
/// rather than trusted.
#[derive(Debug, thiserror::Error)]
#[error("cached pod {namespace}/{name} does not unpack: {source}")]
pub struct UnpackError {
    namespace: String,
    name: String,
    source: serde_json::Error,
}

/// Whether tephra works on `pod` (reads it on the syncs of its job or gang): a pod of a
/// vcJob, of a named PodGroup, or of a scheduler other than kube-scheduler's default. The
/// choice only trades memory for CPU; readers see the same pod either way.
pub fn works_on(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let has = |key: &str| annotations.is_some_and(|a| a.contains_key(key));
    has(keys::JOB_NAME)
        || has(keys::KUBE_GROUP_NAME_ANNOTATION)
        || has(keys::VOLCANO_GROUP_NAME_ANNOTATION)
        || keys::served_scheduler(pod) != keys::KUBE_DEFAULT_SCHEDULER
}

impl StoredPod {
    /// Keeps `pod`: whole when tephra works on it ([`works_on`]), else packed. A pod that
    /// does not serialize (never seen: the API types always do) is kept whole.
    pub fn keep(pod: &Pod) -> Self {
        let m = &pod.metadata;
        let meta = ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..ObjectMeta::default()
        };
        let body = match works_on(pod) {
            true => Body::Whole(Arc::new(pod.clone())),
            false => serde_json::to_vec(pod).map_or_else(
                |_| Body::Whole(Arc::new(pod.clone())),
                |json| Body::Packed(json.into_boxed_slice()),
            ),
        };
        Self { meta, body }
    }

    /// Only the key, for a deletion (the store looks up by name and namespace).
    fn key_of(pod: &Pod) -> Self {
        Self {
            meta: ObjectMeta {
                name: pod.metadata.name.clone(),
                namespace: pod.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            body: Body::Packed(Box::default()),
        }
    }

    /// The pod: shared when kept whole, else unpacked.
    pub fn unpack(&self) -> Result<Arc<Pod>, UnpackError> {
        match &self.body {
            Body::Whole(pod) => Ok(pod.clone()),
            Body::Packed(json) => serde_json::from_slice(json)
                .map(Arc::new)
                .map_err(|source| UnpackError {
                    namespace: self.meta.namespace.clone().unwrap_or_default(),
                    name: self.meta.name.clone().unwrap_or_default(),
                    source,
                }),
        }
    }

    /// The pod, or `None` (logged) when it does not unpack.
    pub fn get(&self) -> Option<Arc<Pod>> {
        self.unpack()
            .map_err(|e| tracing::error!(error = %crate::report::report(&e), "pod cache"))
            .ok()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.meta.resource_version.as_deref()
    }
}

impl Resource for StoredPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::kind(&())
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::group(&())
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::version(&())
    }
    fn api_version(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::api_version(&())
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        Pod::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// How a watched `K` is kept in its shared store: as it is, or in a form of its own.
pub trait Stored<K>: Resource + Clone + Send + Sync + Sized + 'static
where
    Self::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// Applies one watch event of `K` to the store.
    fn apply(writer: &mut Writer<Self>, event: &Event<K>);
}

impl<K> Stored<K> for K
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn apply(writer: &mut Writer<K>, event: &Event<K>) {
        writer.apply_watcher_event(event);
    }
}

impl Stored<Pod> for StoredPod {
    fn apply(writer: &mut Writer<StoredPod>, event: &Event<Pod>) {
        let stored = match event {
            Event::Apply(p) => Event::Apply(StoredPod::keep(p)),
            Event::Delete(p) => Event::Delete(StoredPod::key_of(p)),
            Event::Init => Event::Init,
            Event::InitApply(p) => Event::InitApply(StoredPod::keep(p)),
            Event::InitDone => Event::InitDone,
        };
        writer.apply_watcher_event(&stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::{self, ObjectRef};
    use serde_json::json;

    fn pod(name: &str, rv: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                         "resourceVersion": rv, "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                     "nodeName": "n1"},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    fn annotated(name: &str, key: &str) -> Pod {
        let mut p = pod(name, "1", "Running");
        p.metadata.annotations = Some([(key.to_string(), "g".to_string())].into());
        p
    }

    #[test]
    fn a_kept_pod_reads_back_the_same_in_either_form() {
        let p = pod("a", "7", "Running");
        let packed = StoredPod::keep(&p);
        assert!(matches!(packed.body, Body::Packed(_)));
        assert_eq!(*packed.unpack().unwrap(), p);
        assert_eq!(packed.resource_version(), Some("7"));
        assert_eq!(packed.meta().name.as_deref(), Some("a"));
        assert_eq!(packed.meta().namespace.as_deref(), Some("ns"));
        let ours = annotated("b", keys::JOB_NAME);
        let whole = StoredPod::keep(&ours);
        assert!(matches!(whole.body, Body::Whole(_)));
        assert_eq!(*whole.unpack().unwrap(), ours);
    }

    #[test]
    fn pods_of_jobs_gangs_and_other_schedulers_are_kept_whole() {
        assert!(!works_on(&pod("a", "1", "Running")));
        for key in [
            keys::JOB_NAME,
            keys::KUBE_GROUP_NAME_ANNOTATION,
            keys::VOLCANO_GROUP_NAME_ANNOTATION,
        ] {
            assert!(works_on(&annotated("a", key)), "{key}");
        }
        let mut p = pod("a", "1", "Pending");
        p.spec.as_mut().unwrap().scheduler_name = Some("volcano".into());
        assert!(works_on(&p));
        p.spec.as_mut().unwrap().scheduler_name = Some(keys::KUBE_DEFAULT_SCHEDULER.into());
        assert!(!works_on(&p));
    }

    #[test]
    fn the_store_follows_applies_deletes_and_relists_of_pods() {
        let (store, mut writer) = reflector::store::<StoredPod>();
        let key = |n: &str| ObjectRef::<StoredPod>::new(n).within("ns");
        let phase = |n: &str| {
            store
                .get(&key(n))
                .and_then(|p| p.get())
                .and_then(|p| p.status.clone())
                .and_then(|s| s.phase)
        };
        StoredPod::apply(&mut writer, &Event::<Pod>::Init);
        StoredPod::apply(&mut writer, &Event::InitApply(pod("a", "1", "Pending")));
        StoredPod::apply(&mut writer, &Event::InitApply(pod("b", "2", "Pending")));
        StoredPod::apply(&mut writer, &Event::<Pod>::InitDone);
        assert_eq!(store.state().len(), 2);
        StoredPod::apply(&mut writer, &Event::Apply(pod("a", "3", "Running")));
        assert_eq!(phase("a").as_deref(), Some("Running"));
        StoredPod::apply(&mut writer, &Event::Delete(pod("b", "4", "Running")));
        assert!(store.get(&key("b")).is_none());
        // A relist replaces the whole content.
        StoredPod::apply(&mut writer, &Event::<Pod>::Init);
        StoredPod::apply(&mut writer, &Event::InitApply(pod("c", "5", "Pending")));
        StoredPod::apply(&mut writer, &Event::<Pod>::InitDone);
        assert!(store.get(&key("a")).is_none());
        assert_eq!(phase("c").as_deref(), Some("Pending"));
    }

    #[test]
    fn a_packed_pod_is_a_fraction_of_the_pod() {
        // What the packing is for: the JSON of a small pod, against the API type's fixed
        // sizes alone (the pod and its container, before any string).
        let packed = StoredPod::keep(&pod("a", "1", "Running"));
        let Body::Packed(json) = &packed.body else {
            panic!("a Deployment's pod is kept packed");
        };
        let fixed = std::mem::size_of::<Pod>()
            + std::mem::size_of::<k8s_openapi::api::core::v1::Container>();
        assert!(
            json.len() * 10 < fixed,
            "{} B of JSON against {fixed} B",
            json.len()
        );
    }
}
