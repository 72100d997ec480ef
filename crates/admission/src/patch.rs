//! Building mutations, two ways.
//!
//! * [`Ops`]: the webhooks on the hot path (`/jobs/mutate`, `/pods/mutate`, which sees every
//!   pod of the cluster) emit their RFC 6902 operations directly while deciding, from a partial
//!   decode of the object: no `Value` of the whole object, no copy, no diff. Pointers are built
//!   by [`pointer`], which escapes `/` and `~` in keys such as `scheduling.k8s.io/group-name`
//!   (`~1`, `~0`). That the operations are right is a test matter: each webhook's tests apply
//!   them to the input and compare with a reference mutation of a `Value` copy.
//! * [`diff`]: the other mutators change a copy of the object's JSON with [`set`], and the patch
//!   is the difference between the original and the copy (`json_patch::diff`'s operations).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use std::marker::PhantomData;

use serde::de::{MapAccess, Visitor, value::MapAccessDeserializer};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// `T` decoded only from a JSON object. The partial views the direct mutations decode must not
/// accept what serde's derived structs also take, an array of the fields in order: a patch
/// addressing a member of what is really an array would not apply.
#[derive(Debug, Default)]
pub struct MapOnly<T>(pub T);

impl<T> std::ops::Deref for MapOnly<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for MapOnly<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = MapOnly<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(MapOnly)
            }
        }
        d.deserialize_map(ObjectVisitor(PhantomData))
    }
}

/// One RFC 6902 `add`: sets an object member whether or not it exists (replacing a `null`
/// too), or appends to an array when the last step is `-`. It is the only operation the direct
/// mutations need: defaults only ever add or overwrite.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AddOp {
    op: &'static str,
    path: String,
    value: Value,
}

impl AddOp {
    /// The JSON pointer this operation writes to.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The value written.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

/// The operations of a direct mutation, in the order they apply. Empty means "no change",
/// answered without a patch.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Ops(Vec<AddOp>);

impl Ops {
    /// No operations yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// `add` at the pointer made of `steps` (escaped here).
    pub fn add(&mut self, steps: &[&str], value: Value) {
        self.0.push(AddOp {
            op: "add",
            path: pointer(steps),
            value,
        });
    }

    /// These operations, in this order.
    pub fn from_ops(ops: Vec<AddOp>) -> Self {
        Self(ops)
    }

    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The operations, in order.
    pub fn ops(&self) -> &[AddOp] {
        &self.0
    }

    /// The operations as a `json_patch` patch (to apply them, in tests and tools).
    pub fn to_patch(&self) -> Patch {
        Patch(
            self.0
                .iter()
                .map(|o| {
                    PatchOperation::Add(AddOperation {
                        path: PointerBuf::parse(&o.path).unwrap_or_default(),
                        value: o.value.clone(),
                    })
                })
                .collect(),
        )
    }
}

/// The JSON pointer (RFC 6901) of `steps`: `/a/b`, with `~` written `~0` and `/` written `~1`.
pub fn pointer(steps: &[&str]) -> String {
    let mut out = String::with_capacity(steps.iter().map(|s| s.len() + 1).sum());
    for step in steps {
        out.push('/');
        for c in step.chars() {
            match c {
                '~' => out.push_str("~0"),
                '/' => out.push_str("~1"),
                c => out.push(c),
            }
        }
    }
    out
}

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
    fn direct_ops_escape_and_apply() {
        let mut ops = Ops::new();
        ops.add(
            &["metadata", "annotations", "scheduling.k8s.io/group-name"],
            json!("pg"),
        );
        ops.add(&["metadata", "annotations", "a~b"], json!("t"));
        ops.add(&["spec", "tolerations", "-"], json!({"key": "k"}));
        assert_eq!(
            ops.ops()[0].path(),
            "/metadata/annotations/scheduling.k8s.io~1group-name"
        );
        assert_eq!(ops.ops()[1].path(), "/metadata/annotations/a~0b");
        let text = serde_json::to_string(&ops).unwrap();
        assert!(text.starts_with(r#"[{"op":"add","path":"#), "{text}");
        let mut doc = json!({"metadata": {"annotations": {}}, "spec": {"tolerations": [1]}});
        json_patch::patch(&mut doc, &ops.to_patch()).unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"annotations": {"scheduling.k8s.io/group-name": "pg", "a~b": "t"}},
                   "spec": {"tolerations": [1, {"key": "k"}]}})
        );
        // The serialised form is what json_patch reads.
        let back: Patch = serde_json::from_str(&text).unwrap();
        assert_eq!(back, ops.to_patch());
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
