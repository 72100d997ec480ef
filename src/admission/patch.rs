//! Building mutations: webhooks change a copy of the object's JSON with the helpers here, and
//! the RFC 6902 patch is the difference between the original and the copy. `json_patch::diff`
//! writes minimal operations and escapes `/` and `~` in keys such as
//! `scheduling.k8s.io/group-name` (`~1`, `~0`), so no webhook builds a pointer by hand.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use serde_json::{Map, Value};

/// The patch turning `original` into `mutated`, or `None` when they are equal. The operations
/// are exactly `json_patch::diff`'s, in its order.
pub fn diff(original: &Value, mutated: &Value) -> Option<Patch> {
    let mut ops = Vec::new();
    diff_at(original, mutated, &mut PointerBuf::new(), &mut ops);
    if ops.is_empty() {
        None
    } else {
        Some(Patch(ops))
    }
}

/// `json_patch::diff` without its cost on what did not change: it builds a JSON pointer (an
/// allocation or two) for every member of the document, equal or not, which made diffing a
/// mutated vcJob cost about as much as parsing the review. Here equal members are skipped after
/// a plain comparison, and only changed leaves (and arrays whose length changed) are handed to
/// `json_patch::diff`, its operations moved under the current pointer.
fn diff_at(a: &Value, b: &Value, at: &mut PointerBuf, ops: &mut Vec<PatchOperation>) {
    match (a, b) {
        (Value::Object(a_map), Value::Object(b_map)) => {
            for (key, b_val) in b_map {
                match a_map.get(key) {
                    Some(a_val) if a_val == b_val => {}
                    Some(a_val) => {
                        at.push_back(key);
                        diff_at(a_val, b_val, at, ops);
                        at.pop_back();
                    }
                    None => {
                        at.push_back(key);
                        ops.push(PatchOperation::Add(AddOperation {
                            path: at.clone(),
                            value: b_val.clone(),
                        }));
                        at.pop_back();
                    }
                }
            }
            for key in a_map.keys().filter(|k| !b_map.contains_key(*k)) {
                at.push_back(key);
                ops.push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
                at.pop_back();
            }
        }
        // Same length: json_patch compares element by element, as here.
        (Value::Array(a_items), Value::Array(b_items)) if a_items.len() == b_items.len() => {
            for (i, (a_item, b_item)) in a_items.iter().zip(b_items).enumerate() {
                if a_item != b_item {
                    at.push_back(i);
                    diff_at(a_item, b_item, at, ops);
                    at.pop_back();
                }
            }
        }
        _ if a == b => {}
        // Scalars, a change of type, arrays that grew or shrank: json_patch's own rules.
        _ => ops.extend(json_patch::diff(a, b).0.into_iter().map(|op| under(at, op))),
    }
}

/// `op` with its path moved below `at`.
fn under(at: &PointerBuf, op: PatchOperation) -> PatchOperation {
    match op {
        PatchOperation::Add(mut o) => {
            o.path = at.concat(&o.path);
            PatchOperation::Add(o)
        }
        PatchOperation::Remove(mut o) => {
            o.path = at.concat(&o.path);
            PatchOperation::Remove(o)
        }
        PatchOperation::Replace(mut o) => {
            o.path = at.concat(&o.path);
            PatchOperation::Replace(o)
        }
        // `json_patch::diff` writes only add, remove and replace.
        other => other,
    }
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

    /// A small deterministic generator (no dependency): random documents and random edits.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }

        fn value(&mut self, depth: u32) -> Value {
            let keys = ["a", "b", "c/d", "e~f", "g"];
            match if depth == 0 {
                self.next(3)
            } else {
                self.next(5)
            } {
                0 => json!(self.next(3)),
                1 => json!(["x", "y", "z"][self.next(3) as usize]),
                2 => Value::Null,
                3 => Value::Array((0..self.next(4)).map(|_| self.value(depth - 1)).collect()),
                _ => Value::Object(
                    (0..self.next(4))
                        .map(|_| {
                            (
                                keys[self.next(5) as usize].to_string(),
                                self.value(depth - 1),
                            )
                        })
                        .collect(),
                ),
            }
        }

        /// `v` with a few random changes somewhere below it.
        fn edit(&mut self, v: &mut Value) {
            match v {
                Value::Object(m) if !m.is_empty() && self.next(4) != 0 => {
                    let key = m.keys().nth(self.next(m.len() as u64) as usize).cloned();
                    if let Some(key) = key {
                        match self.next(4) {
                            0 => {
                                m.remove(&key);
                            }
                            1 => {
                                m.insert(format!("{key}2"), self.value(1));
                            }
                            _ => {
                                if let Some(child) = m.get_mut(&key) {
                                    self.edit(child);
                                }
                            }
                        }
                    }
                }
                Value::Array(items) if !items.is_empty() && self.next(4) != 0 => {
                    match self.next(4) {
                        0 => {
                            items.pop();
                        }
                        1 => items.push(self.value(1)),
                        _ => {
                            let i = self.next(items.len() as u64) as usize;
                            self.edit(&mut items[i]);
                        }
                    }
                }
                _ => *v = self.value(2),
            }
        }
    }

    #[test]
    fn the_patch_is_json_patchs_own_and_applies() {
        let mut rng = Lcg(7);
        for _ in 0..3000 {
            let a = rng.value(4);
            let mut b = a.clone();
            for _ in 0..=rng.next(3) {
                rng.edit(&mut b);
            }
            let reference = json_patch::diff(&a, &b);
            let ours = diff(&a, &b);
            assert_eq!(
                ours.as_ref().map(|p| &p.0),
                (!reference.0.is_empty()).then_some(&reference.0),
                "{a} -> {b}"
            );
            let mut doc = a.clone();
            if let Some(p) = &ours {
                json_patch::patch(&mut doc, p).unwrap();
            }
            assert_eq!(doc, b);
        }
    }

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
