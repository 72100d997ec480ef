//! Request builders for the unit tests of the webhooks.

use serde_json::Value;

use super::review::{GroupVersionKind, Object, Operation, Request, ReviewVersion};

fn gvk(kind: &str) -> GroupVersionKind {
    let (group, version) = match kind {
        "Pod" => ("", "v1"),
        "Job" | "CronJob" => ("batch.volcano.sh", "v1alpha1"),
        "PodGroup" | "Queue" => ("scheduling.volcano.sh", "v1beta1"),
        "Deployment" | "StatefulSet" => ("apps", "v1"),
        "HyperNode" => ("topology.volcano.sh", "v1alpha1"),
        "JobFlow" => ("flow.volcano.sh", "v1alpha1"),
        other => panic!("no test GVK for {other}"),
    };
    GroupVersionKind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

fn operation(op: &str) -> Operation {
    match op {
        "CREATE" => Operation::Create,
        "UPDATE" => Operation::Update,
        "DELETE" => Operation::Delete,
        other => Operation::Other(other.into()),
    }
}

/// A v1 request in namespace `ns` (the object's own namespace if it has one).
pub(crate) fn request(kind: &str, op: &str, object: Value) -> Request {
    let ns = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("ns")
        .to_string();
    request_with(kind, op, &ns, object, None)
}

/// An UPDATE request from `old` to `new`.
pub(crate) fn update(kind: &str, old: Value, new: Value) -> Request {
    let ns = new["metadata"]["namespace"]
        .as_str()
        .unwrap_or("ns")
        .to_string();
    request_with(kind, "UPDATE", &ns, new, Some(old))
}

/// A request with every part chosen.
pub(crate) fn request_with(
    kind: &str,
    op: &str,
    namespace: &str,
    object: Value,
    old: Option<Value>,
) -> Request {
    let name = object["metadata"]["name"]
        .as_str()
        .or_else(|| old.as_ref().and_then(|o| o["metadata"]["name"].as_str()))
        .unwrap_or_default()
        .to_string();
    Request {
        version: ReviewVersion::V1,
        uid: "test-uid".into(),
        kind: gvk(kind),
        sub_resource: String::new(),
        name,
        namespace: namespace.into(),
        operation: operation(op),
        object: (!object.is_null()).then(|| Object::from_value(object)),
        old_object: old.map(Object::from_value),
        dry_run: false,
    }
}

/// The object `decision` admits for `req`: the request's object with the decision's patch
/// applied (the object itself when allowed unchanged). Panics on a denial, or when a direct
/// patch does not apply to the object it was made for.
pub(crate) fn applied(req: &Request, decision: &super::review::Decision) -> Value {
    use super::review::Verdict;
    let original = req
        .object
        .as_ref()
        .map_or(Value::Null, |o| o.value().clone());
    match &decision.verdict {
        Verdict::Allow => original,
        Verdict::Mutate(v) => v.clone(),
        Verdict::Patch(ops) => {
            let mut doc = original;
            if let Err(e) = json_patch::patch(&mut doc, &ops.to_patch()) {
                panic!("{ops:?} does not apply: {e}");
            }
            doc
        }
        Verdict::Deny { message, .. } => panic!("denied: {message}"),
    }
}

/// Asserts that every operation of a patch, applied alone and in order to `input`, changes the
/// document: a minimal patch has no operation that does nothing.
pub fn assert_every_op_changes(input: &serde_json::Value, ops: &super::patch::Ops) {
    let mut doc = input.clone();
    for op in ops.ops() {
        let before = doc.clone();
        let one = super::patch::Ops::from_ops(vec![op.clone()]);
        json_patch::patch(&mut doc, &one.to_patch()).unwrap();
        assert_ne!(doc, before, "{input}: {op:?} changes nothing");
    }
}
