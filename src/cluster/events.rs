//! Kubernetes Events on the objects tephra acts on, as `core/v1` Events (what `kubectl
//! describe` lists on every cluster and on the embedded API).
//!
//! Repeats are the caller's business: the scheduler, for one, records a gang's reason only when
//! it changes, where Volcano records the same warning every second.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::PostParams;
use kube::{Api, Client};

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Something a user may want to know.
    Normal,
    /// Something that needs attention.
    Warning,
}

impl EventType {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

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

/// The reference of a namespaced object for an Event.
pub fn object_ref(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    uid: Option<&str>,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(kind.to_string()),
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
        uid: uid.map(str::to_string),
        ..ObjectReference::default()
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
    /// objects, as kube-apiserver's recorders do).
    pub async fn record(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let ns = object.namespace.clone().unwrap_or_else(|| "default".into());
        let now = k8s_openapi::jiff::Timestamp::now();
        let name = object.name.clone().unwrap_or_default();
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}.")),
                namespace: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_string()),
            // Events are capped at 1 KiB of message by kube-apiserver's own recorders.
            message: Some(truncate(message, 1024)),
            type_: Some(type_.as_str().to_string()),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            action: Some(reason.to_string()),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.component.clone()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            ..Event::default()
        };
        Api::<Event>::namespaced(self.client.clone(), &ns)
            .create(&PostParams::default(), &event)
            .await
            .map(|_| ())
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}
