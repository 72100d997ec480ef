//! The scheduler's index follows the shared watch caches: each kind it reads is an [`Index`]
//! of it, fed through one [`Relist`] adapter per watch.

use k8s_openapi::api::core::v1::{Node, Pod, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use tephra_scheduler::{ClusterIndex, PodDigest};

use crate::api::{HyperNode, PodGroup, Queue};
use crate::cluster::Index;

/// Writes one `Index` impl per kind by naming the index's own methods for it.
macro_rules! index_of {
    ($($ty:ty => $apply:ident, $delete:ident, $reset:ident;)*) => {$(
        impl Index<$ty> for ClusterIndex {
            // Boxed, so the relist's buffer grows by a pointer per object, not by the
            // object's whole size.
            type Taken = Box<$ty>;
            fn take(obj: &$ty) -> Box<$ty> {
                Box::new(obj.clone())
            }
            fn apply(&mut self, obj: Box<$ty>) {
                self.$apply(&obj);
            }
            fn delete(&mut self, obj: &$ty) {
                self.$delete(obj);
            }
            fn reset(&mut self, all: Vec<Box<$ty>>) {
                let all: Vec<&$ty> = all.iter().map(|b| &**b).collect();
                self.$reset(&all);
            }
        }
    )*};
}

impl Index<Pod> for ClusterIndex {
    // What the index takes of each pod (a fraction of the pod), worked out as the event
    // arrives, before the index is locked.
    type Taken = Option<PodDigest>;
    fn take(obj: &Pod) -> Option<PodDigest> {
        ClusterIndex::digest(obj)
    }
    fn apply(&mut self, digest: Option<PodDigest>) {
        if let Some(d) = digest {
            self.apply_digest(d);
        }
    }
    fn delete(&mut self, obj: &Pod) {
        self.delete_pod(obj);
    }
    fn reset(&mut self, all: Vec<Option<PodDigest>>) {
        self.reset_digests(all.into_iter().flatten().collect());
    }
}

index_of! {
    Node => apply_node, delete_node, reset_nodes;
    PodGroup => apply_podgroup, delete_podgroup, reset_podgroups;
    Queue => apply_queue, delete_queue, reset_queues;
    PriorityClass => apply_priority_class, delete_priority_class, reset_priority_classes;
    HyperNode => apply_hypernode, delete_hypernode, reset_hypernodes;
    ResourceQuota => apply_resource_quota, delete_resource_quota, reset_resource_quotas;
    PodDisruptionBudget => apply_pod_disruption_budget, delete_pod_disruption_budget, reset_pod_disruption_budgets;
}
