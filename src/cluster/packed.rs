//! How the shared cache keeps pods: each one as the JSON of its trimmed self, unpacked when a
//! reader asks for it.
//!
//! The API types are built for any pod: a `Pod` is 2.4 KiB before any of its strings, each
//! container another 2.3 KiB and each container status 0.75 KiB, nearly all of it empty
//! options. A trimmed pod of a Deployment holds about 9 KiB that way and 1.7 KiB as JSON, and
//! the pods are most of what a large cluster puts in the caches. Readers of the store ask for
//! a few pods at a time (a job's, a gang's), and pay a parse of about 2 KiB for each; the
//! watch's subscribers (the scheduler's and the controllers' indexes) get the unpacked pod of
//! every event as before, so the hot path parses nothing twice.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;

/// A pod kept packed: the metadata the store's keys need, and the whole (trimmed) pod as
/// JSON.
#[derive(Clone, Debug)]
pub struct PackedPod {
    /// Name, namespace, uid and resourceVersion only: what the store keys and compares by.
    meta: ObjectMeta,
    /// The pod, serialized.
    json: Box<[u8]>,
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

impl PackedPod {
    /// Packs `pod`. A pod that does not serialize (never seen: the API types always do) is
    /// kept with its metadata and an empty body, which unpacks to an error.
    pub fn pack(pod: &Pod) -> Self {
        let m = &pod.metadata;
        let meta = ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            ..ObjectMeta::default()
        };
        let json = serde_json::to_vec(pod).unwrap_or_default();
        Self {
            meta,
            json: json.into_boxed_slice(),
        }
    }

    /// The pod, as it was packed.
    pub fn unpack(&self) -> Result<Pod, UnpackError> {
        serde_json::from_slice(&self.json).map_err(|source| UnpackError {
            namespace: self.meta.namespace.clone().unwrap_or_default(),
            name: self.meta.name.clone().unwrap_or_default(),
            source,
        })
    }

    /// The pod, or `None` (logged) when it does not unpack.
    pub fn get(&self) -> Option<Pod> {
        self.unpack()
            .map_err(|e| tracing::error!(error = %crate::report::report(&e), "pod cache"))
            .ok()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.meta.resource_version.as_deref()
    }
}

impl Resource for PackedPod {
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

impl Stored<Pod> for PackedPod {
    fn apply(writer: &mut Writer<PackedPod>, event: &Event<Pod>) {
        let packed = match event {
            Event::Apply(p) => Event::Apply(PackedPod::pack(p)),
            Event::Delete(p) => Event::Delete(PackedPod::pack_key(p)),
            Event::Init => Event::Init,
            Event::InitApply(p) => Event::InitApply(PackedPod::pack(p)),
            Event::InitDone => Event::InitDone,
        };
        writer.apply_watcher_event(&packed);
    }
}

impl PackedPod {
    /// Only the key, for a deletion (the store looks up by name and namespace).
    fn pack_key(pod: &Pod) -> Self {
        Self {
            meta: ObjectMeta {
                name: pod.metadata.name.clone(),
                namespace: pod.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            json: Box::default(),
        }
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

    #[test]
    fn a_packed_pod_unpacks_to_the_same_pod() {
        let p = pod("a", "7", "Running");
        let packed = PackedPod::pack(&p);
        assert_eq!(packed.unpack().unwrap(), p);
        assert_eq!(packed.resource_version(), Some("7"));
        assert_eq!(packed.meta().name.as_deref(), Some("a"));
        assert_eq!(packed.meta().namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn the_store_follows_applies_deletes_and_relists_of_pods() {
        let (store, mut writer) = reflector::store::<PackedPod>();
        let key = |n: &str| ObjectRef::<PackedPod>::new(n).within("ns");
        let phase = |n: &str| {
            store
                .get(&key(n))
                .and_then(|p| p.get())
                .and_then(|p| p.status)
                .and_then(|s| s.phase)
        };
        PackedPod::apply(&mut writer, &Event::<Pod>::Init);
        PackedPod::apply(&mut writer, &Event::InitApply(pod("a", "1", "Pending")));
        PackedPod::apply(&mut writer, &Event::InitApply(pod("b", "2", "Pending")));
        PackedPod::apply(&mut writer, &Event::<Pod>::InitDone);
        assert_eq!(store.state().len(), 2);
        PackedPod::apply(&mut writer, &Event::Apply(pod("a", "3", "Running")));
        assert_eq!(phase("a").as_deref(), Some("Running"));
        PackedPod::apply(&mut writer, &Event::Delete(pod("b", "4", "Running")));
        assert!(store.get(&key("b")).is_none());
        // A relist replaces the whole content.
        PackedPod::apply(&mut writer, &Event::<Pod>::Init);
        PackedPod::apply(&mut writer, &Event::InitApply(pod("c", "5", "Pending")));
        PackedPod::apply(&mut writer, &Event::<Pod>::InitDone);
        assert!(store.get(&key("a")).is_none());
        assert_eq!(phase("c").as_deref(), Some("Pending"));
    }

    #[test]
    fn a_packed_pod_is_a_fraction_of_the_pod() {
        // What the packing is for: the JSON of a small pod, against the API type's fixed
        // sizes alone (the pod and its container, before any string).
        let packed = PackedPod::pack(&pod("a", "1", "Running"));
        let fixed = std::mem::size_of::<Pod>()
            + std::mem::size_of::<k8s_openapi::api::core::v1::Container>();
        assert!(
            packed.json.len() * 10 < fixed,
            "{} B of JSON against {fixed} B",
            packed.json.len()
        );
    }
}
