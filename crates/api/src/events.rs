//! Kubernetes Events on the objects tephra acts on, as `core/v1` Events (what `kubectl
//! describe` lists on every cluster and on the embedded API): the object itself, built here;
//! posting it is the caller's (the service's recorder, the embedded kube-scheduler stand-in).

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// kube-apiserver's own recorders cap an Event's message at 1 KiB.
const MAX_MESSAGE: usize = 1024;

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

/// One Event on `object`, reported by `component` at `now`. It goes in the object's namespace,
/// `default` for cluster-scoped objects, as kube-apiserver's recorders do; the name is left to
/// the API (`generateName`).
pub fn event(
    object: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
    component: &str,
    now: Timestamp,
) -> Event {
    let ns = object.namespace.clone().unwrap_or_else(|| "default".into());
    let name = object.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(ns),
            ..ObjectMeta::default()
        },
        involved_object: object.clone(),
        reason: Some(reason.to_string()),
        message: Some(truncate(message, MAX_MESSAGE)),
        type_: Some(type_.as_str().to_string()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        action: Some(reason.to_string()),
        reporting_component: Some(component.to_string()),
        reporting_instance: Some(component.to_string()),
        source: Some(EventSource {
            component: Some(component.to_string()),
            host: None,
        }),
        ..Event::default()
    }
}

/// `s` cut to at most `max` bytes, on a character boundary.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_goes_in_its_objects_namespace_and_keeps_a_short_message_whole() {
        let pod = object_ref("v1", "Pod", Some("ns"), "p", Some("u"));
        let e = event(
            &pod,
            EventType::Warning,
            "FailedScheduling",
            "no",
            "c",
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(e.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(e.metadata.generate_name.as_deref(), Some("p."));
        assert_eq!(e.message.as_deref(), Some("no"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.source.and_then(|s| s.component).as_deref(), Some("c"));
    }

    #[test]
    fn a_cluster_scoped_objects_event_goes_in_default_and_a_long_message_is_cut_on_a_char() {
        let node = object_ref("v1", "Node", None, "n", None);
        let long = "é".repeat(MAX_MESSAGE);
        let e = event(
            &node,
            EventType::Normal,
            "R",
            &long,
            "c",
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        let m = e.message.unwrap_or_default();
        assert!(
            m.len() <= MAX_MESSAGE && m.len() >= MAX_MESSAGE - 1,
            "{}",
            m.len()
        );
        assert!(m.chars().all(|c| c == 'é'));
    }
}
