//! Building mutations: webhooks change a copy of the object's JSON with the helpers here, and
//! the RFC 6902 patch is the difference between the original and the copy. `json_patch::diff`
//! writes minimal operations and escapes `/` and `~` in keys such as
//! `scheduling.k8s.io/group-name` (`~1`, `~0`), so no webhook builds a pointer by hand.

use serde_json::{Map, Value};

/// The patch turning `original` into `mutated`, or `None` when they are equal.
pub fn diff(original: &Value, mutated: &Value) -> Option<json_patch::Patch> {
    let p = json_patch::diff(original, mutated);
    if p.0.is_empty() { None } else { Some(p) }
}

/// The object at `path` below `root`, creating empty objects for missing or `null` steps
/// (a patch must create a parent map before adding a key). `None` when a step exists but is
/// not an object, which the typed decoding in front of every webhook already rules out.
pub fn object_at<'a>(root: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = root;
    for key in path {
        if cur.is_null() {
            *cur = Value::Object(Map::new());
        }
        let map = cur.as_object_mut()?;
        let next = map
            .entry((*key).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if next.is_null() {
            *next = Value::Object(Map::new());
        }
        cur = next;
    }
    if cur.is_null() {
        *cur = Value::Object(Map::new());
    }
    cur.as_object_mut()
}

/// Sets `path/key = value`, creating parents.
pub fn set(root: &mut Value, path: &[&str], key: &str, value: Value) {
    if let Some(map) = object_at(root, path) {
        map.insert(key.to_string(), value);
    }
}

/// The value at `path`, if every step exists.
pub fn get<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(root, |v, k| v.get(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_objects_give_no_patch() {
        let a = json!({"spec": {"x": 1}});
        assert!(diff(&a, &a.clone()).is_none());
    }

    #[test]
    fn keys_with_slash_and_tilde_are_escaped() {
        let a = json!({"metadata": {"annotations": {}}});
        let mut b = a.clone();
        set(
            &mut b,
            &["metadata", "annotations"],
            "scheduling.k8s.io/group-name",
            json!("pg"),
        );
        set(&mut b, &["metadata", "annotations"], "a~b", json!("t"));
        let p = diff(&a, &b).unwrap();
        let text = serde_json::to_string(&p).unwrap();
        assert!(
            text.contains("/metadata/annotations/scheduling.k8s.io~1group-name"),
            "{text}"
        );
        assert!(text.contains("/metadata/annotations/a~0b"), "{text}");
        let mut doc = a.clone();
        json_patch::patch(&mut doc, &p).unwrap();
        assert_eq!(doc, b);
    }

    #[test]
    fn missing_and_null_parents_are_created() {
        let a = json!({"metadata": {"name": "x", "annotations": null}, "spec": {}});
        let mut b = a.clone();
        set(&mut b, &["metadata", "annotations"], "k", json!("v"));
        set(
            &mut b,
            &["spec", "template", "spec"],
            "schedulerName",
            json!("volcano"),
        );
        assert_eq!(b["metadata"]["annotations"]["k"], "v");
        assert_eq!(b["spec"]["template"]["spec"]["schedulerName"], "volcano");
        let p = diff(&a, &b).unwrap();
        let mut doc = a.clone();
        json_patch::patch(&mut doc, &p).unwrap();
        assert_eq!(doc, b);
    }

    #[test]
    fn a_non_object_step_is_left_alone() {
        let mut a = json!({"spec": "oops"});
        set(&mut a, &["spec"], "k", json!(1));
        assert_eq!(a, json!({"spec": "oops"}));
        assert_eq!(get(&a, &["spec"]), Some(&json!("oops")));
        assert_eq!(get(&a, &["spec", "k"]), None);
    }
}
