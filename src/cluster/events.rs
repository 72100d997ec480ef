//! Posting Kubernetes Events on the objects tephra acts on; the Event itself is built by
//! [`tephra_api::events`].
//!
//! Repeats are the caller's business: the scheduler, for one, records a gang's reason only when
//! it changes, where Volcano records the same warning every second.

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::PostParams;
use kube::{Api, Client};

pub use crate::api::events::{EventType, object_ref};

/// Writes Events as one component.
#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    component: String,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder reporting as `component` (e.g. `tephra-scheduler`).
    pub fn new(client: Client, component: &str) -> Self {
        Self {
            client,
            component: component.to_string(),
        }
    }

    /// Records one Event on `object` (in the object's namespace, `default` for cluster-scoped
    /// objects).
    pub async fn record(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = crate::api::events::event(object, type_, reason, message, &self.component, now);
        let ns = event.metadata.namespace.clone().unwrap_or_default();
        Api::<Event>::namespaced(self.client.clone(), &ns)
            .create(&PostParams::default(), &event)
            .await
            .map(|_| ())
    }
}
