//! The read-only cluster lookups the rules need, and a plain in-memory implementation.
//!
//! The webhooks never call the API while answering: a request that needed a GET would be as
//! slow and as fallible as the API server. Instead they read a [`ClusterView`], which the
//! process fills from its shared watch caches ([`StaticView::apply_queue`] and friends from a
//! watcher, or a direct implementation over reflector stores).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tephra_api::Queue;

/// Lookups used by the admission rules. Implementations must be cheap (in-memory).
pub trait ClusterView {
    /// The Queue called `name`.
    fn queue(&self, name: &str) -> Option<Arc<Queue>>;
    /// Queues whose `spec.parent` is exactly `parent` (Volcano's parent index: a queue
    /// without a parent is nobody's child, not even `root`'s).
    fn child_queues(&self, parent: &str) -> Vec<Arc<Queue>>;
    /// Every Queue.
    fn queues(&self) -> Vec<Arc<Queue>>;
    /// The annotations of namespace `name`, `None` if the namespace is not known.
    fn namespace_annotations(&self, name: &str) -> Option<BTreeMap<String, String>>;
}

/// An in-memory [`ClusterView`]: queues by name and namespace annotations, updated with
/// `apply_*` / `delete_*` (from watch events) and read concurrently by the handlers.
#[derive(Debug, Default)]
pub struct StaticView {
    queues: RwLock<BTreeMap<String, Arc<Queue>>>,
    namespaces: RwLock<BTreeMap<String, BTreeMap<String, String>>>,
}

fn name_of(q: &Queue) -> String {
    q.metadata.name.clone().unwrap_or_default()
}

impl StaticView {
    /// An empty view.
    pub fn new() -> Self {
        Self::default()
    }

    /// A view holding these queues (for tests and start-up).
    pub fn with_queues(queues: impl IntoIterator<Item = Queue>) -> Self {
        let view = Self::new();
        for q in queues {
            view.apply_queue(q);
        }
        view
    }

    /// Adds or replaces a queue (watch `Applied`).
    pub fn apply_queue(&self, queue: Queue) {
        let name = name_of(&queue);
        self.queues
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, Arc::new(queue));
    }

    /// Removes a queue (watch `Deleted`).
    pub fn delete_queue(&self, name: &str) {
        self.queues
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Replaces every queue (watch relist).
    pub fn reset_queues(&self, queues: impl IntoIterator<Item = Queue>) {
        let map = queues
            .into_iter()
            .map(|q| (name_of(&q), Arc::new(q)))
            .collect();
        *self.queues.write().unwrap_or_else(|e| e.into_inner()) = map;
    }

    /// Adds or replaces a namespace's annotations.
    pub fn apply_namespace(&self, name: &str, annotations: BTreeMap<String, String>) {
        self.namespaces
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string(), annotations);
    }

    /// Removes a namespace.
    pub fn delete_namespace(&self, name: &str) {
        self.namespaces
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }
}

impl ClusterView for StaticView {
    fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self.queues
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    fn child_queues(&self, parent: &str) -> Vec<Arc<Queue>> {
        if parent.is_empty() {
            return Vec::new();
        }
        self.queues
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|q| q.spec.parent.as_deref() == Some(parent))
            .cloned()
            .collect()
    }

    fn queues(&self) -> Vec<Arc<Queue>> {
        self.queues
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn namespace_annotations(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}

/// The queue's `status.state` as written, empty when no status has been written yet.
pub fn queue_state(q: &Queue) -> &str {
    q.state().map(|s| s.as_str()).unwrap_or_default()
}

/// Whether a queue accepts new jobs, PodGroups and workloads: `Open`, or no state yet.
///
/// Departure from Volcano: its webhooks refuse a queue whose status was never written, while
/// its own queue controller treats that empty state as Open and soon writes it. Admission here
/// follows the controller, so a job submitted right after its queue is not refused by a race.
pub fn queue_accepts(q: &Queue) -> bool {
    matches!(queue_state(q), "" | "Open")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tephra_api::QueueSpec;

    fn q(name: &str, parent: Option<&str>) -> Queue {
        let mut q = Queue::new(
            name,
            QueueSpec {
                parent: parent.map(String::from),
                ..QueueSpec::default()
            },
        );
        q.metadata.name = Some(name.into());
        q
    }

    #[test]
    fn apply_delete_and_children() {
        let v = StaticView::with_queues([q("root", None), q("a", Some("root")), q("b", Some("a"))]);
        assert!(v.queue("a").is_some());
        assert_eq!(v.child_queues("a").len(), 1);
        assert_eq!(v.child_queues("root").len(), 1);
        assert!(v.child_queues("").is_empty());
        v.delete_queue("b");
        assert!(v.child_queues("a").is_empty());
        v.reset_queues([q("x", None)]);
        assert_eq!(v.queues().len(), 1);
        v.apply_namespace("ns", BTreeMap::from([("k".into(), "v".into())]));
        assert_eq!(v.namespace_annotations("ns").unwrap()["k"], "v");
        v.delete_namespace("ns");
        assert!(v.namespace_annotations("ns").is_none());
    }
}
