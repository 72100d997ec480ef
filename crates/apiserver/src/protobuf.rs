//! Just enough of Kubernetes' protobuf encoding for kubectl's imperative creates.
//!
//! kubectl sends `application/vnd.kubernetes.protobuf` bodies for `kubectl create namespace`,
//! `create configmap`, `create secret` and `create serviceaccount`. This decodes those four
//! kinds (with the common ObjectMeta fields), and the `DeleteOptions` body of client-go's typed
//! deletes, into JSON. Every other protobuf body is refused
//! with 415, pointing at `kubectl apply -f` / `create -f`, which send JSON. Pure code.

use serde_json::{Map, Value, json};

/// The protobuf envelope magic.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err("varint too long".into())
}

/// Splits a message into (field number, value) pairs.
fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((num, Field::Varint(varint(buf, &mut pos)?))),
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).map_err(|e| e.to_string())?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or("truncated field")?;
                out.push((num, Field::Bytes(&buf[pos..end])));
                pos = end;
            }
            1 => pos += 8,
            5 => pos += 4,
            w => return Err(format!("unsupported wire type {w}")),
        }
    }
    Ok(out)
}

fn string(f: &Field<'_>) -> Result<String, String> {
    match f {
        Field::Bytes(b) => String::from_utf8(b.to_vec()).map_err(|e| e.to_string()),
        Field::Varint(_) => Err("expected a string".into()),
    }
}

fn bytes_b64(b: &[u8]) -> Value {
    serde_json::to_value(k8s_openapi::ByteString(b.to_vec())).unwrap_or(Value::Null)
}

/// A map entry message {1: key, 2: value}; `bytes_value` encodes the value as base64.
fn map_entry(f: &Field<'_>, bytes_value: bool) -> Result<(String, Value), String> {
    let Field::Bytes(b) = f else {
        return Err("expected a map entry".into());
    };
    let mut key = String::new();
    let mut value = if bytes_value {
        bytes_b64(b"")
    } else {
        json!("")
    };
    for (n, v) in fields(b)? {
        match (n, &v) {
            (1, _) => key = string(&v)?,
            (2, Field::Bytes(x)) if bytes_value => value = bytes_b64(x),
            (2, _) => value = json!(string(&v)?),
            _ => {}
        }
    }
    Ok((key, value))
}

fn insert_map(
    obj: &mut Map<String, Value>,
    key: &str,
    f: &Field<'_>,
    bytes_value: bool,
) -> Result<(), String> {
    let (k, v) = map_entry(f, bytes_value)?;
    let m = obj.entry(key).or_insert_with(|| json!({}));
    if let Some(m) = m.as_object_mut() {
        m.insert(k, v);
    }
    Ok(())
}

fn object_meta(buf: &[u8]) -> Result<Value, String> {
    let mut m = Map::new();
    for (n, f) in fields(buf)? {
        match n {
            1 => {
                m.insert("name".into(), json!(string(&f)?));
            }
            2 => {
                m.insert("generateName".into(), json!(string(&f)?));
            }
            3 => {
                m.insert("namespace".into(), json!(string(&f)?));
            }
            11 => insert_map(&mut m, "labels", &f, false)?,
            12 => insert_map(&mut m, "annotations", &f, false)?,
            13 => {
                let Field::Bytes(b) = f else { continue };
                let mut r = Map::new();
                for (rn, rf) in fields(b)? {
                    match (rn, &rf) {
                        (1, _) => drop(r.insert("kind".into(), json!(string(&rf)?))),
                        (3, _) => drop(r.insert("name".into(), json!(string(&rf)?))),
                        (4, _) => drop(r.insert("uid".into(), json!(string(&rf)?))),
                        (5, _) => drop(r.insert("apiVersion".into(), json!(string(&rf)?))),
                        (6, Field::Varint(v)) => {
                            drop(r.insert("controller".into(), json!(*v != 0)))
                        }
                        (7, Field::Varint(v)) => {
                            drop(r.insert("blockOwnerDeletion".into(), json!(*v != 0)))
                        }
                        _ => {}
                    }
                }
                let list = m.entry("ownerReferences").or_insert_with(|| json!([]));
                if let Some(l) = list.as_array_mut() {
                    l.push(Value::Object(r));
                }
            }
            14 => {
                let list = m.entry("finalizers").or_insert_with(|| json!([]));
                if let Some(l) = list.as_array_mut() {
                    l.push(json!(string(&f)?));
                }
            }
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

/// `DeleteOptions` (meta/v1 generated.proto): gracePeriodSeconds 1, preconditions 2 {uid 1,
/// resourceVersion 2}, orphanDependents 3, propagationPolicy 4, dryRun 5.
fn delete_options(obj: &mut Map<String, Value>, raw: &[u8]) -> Result<(), String> {
    for (n, f) in fields(raw)? {
        match (n, &f) {
            (1, Field::Varint(v)) => {
                obj.insert("gracePeriodSeconds".into(), json!(*v as i64));
            }
            (2, Field::Bytes(b)) => {
                let mut pre = Map::new();
                for (pn, pf) in fields(b)? {
                    match pn {
                        1 => pre.insert("uid".into(), json!(string(&pf)?)),
                        2 => pre.insert("resourceVersion".into(), json!(string(&pf)?)),
                        _ => None,
                    };
                }
                obj.insert("preconditions".into(), Value::Object(pre));
            }
            (3, Field::Varint(v)) => {
                obj.insert("orphanDependents".into(), json!(*v != 0));
            }
            (4, _) => {
                obj.insert("propagationPolicy".into(), json!(string(&f)?));
            }
            (5, _) => {
                let dry = obj.entry("dryRun").or_insert_with(|| json!([]));
                if let Some(a) = dry.as_array_mut() {
                    a.push(json!(string(&f)?));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Decodes a protobuf request body of one of the supported kinds into JSON.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or("not a Kubernetes protobuf envelope")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(rest)? {
        match (n, &f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm)? {
                    match tn {
                        1 => api_version = string(&tf)?,
                        2 => kind = string(&tf)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    // client-go's typed clients send the DELETE body in protobuf too.
    if kind == "DeleteOptions" {
        delete_options(&mut obj, raw)?;
        return Ok(Value::Object(obj));
    }
    let known = api_version == "v1"
        && matches!(
            kind.as_str(),
            "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount"
        );
    if !known {
        return Err(format!(
            "protobuf bodies are only understood for v1 Namespace, ConfigMap, Secret and ServiceAccount (got {api_version} {kind}); send JSON (kubectl apply -f / create -f)"
        ));
    }
    for (n, f) in fields(raw)? {
        if n == 1 {
            let Field::Bytes(b) = f else { continue };
            obj.insert("metadata".into(), object_meta(b)?);
            continue;
        }
        match (kind.as_str(), n, &f) {
            ("Namespace", 2, Field::Bytes(spec)) => {
                let finalizers: Result<Vec<String>, String> = fields(spec)?
                    .iter()
                    .filter(|(sn, _)| *sn == 1)
                    .map(|(_, sf)| string(sf))
                    .collect();
                obj.insert("spec".into(), json!({"finalizers": finalizers?}));
            }
            ("ConfigMap", 2, _) => insert_map(&mut obj, "data", &f, false)?,
            ("ConfigMap", 3, _) => insert_map(&mut obj, "binaryData", &f, true)?,
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                obj.insert("immutable".into(), json!(*v != 0));
            }
            ("Secret", 2, _) => insert_map(&mut obj, "data", &f, true)?,
            ("Secret", 3, _) => {
                obj.insert("type".into(), json!(string(&f)?));
            }
            ("Secret", 4, _) => insert_map(&mut obj, "stringData", &f, false)?,
            ("ServiceAccount", 4, Field::Varint(v)) => {
                obj.insert("automountServiceAccountToken".into(), json!(*v != 0));
            }
            _ => {}
        }
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(n: u64, wire: u64) -> Vec<u8> {
        enc_varint((n << 3) | wire)
    }
    fn enc_varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }
    fn bytes(n: u64, b: &[u8]) -> Vec<u8> {
        let mut out = tag(n, 2);
        out.extend(enc_varint(b.len() as u64));
        out.extend_from_slice(b);
        out
    }
    fn entry(n: u64, k: &str, v: &[u8]) -> Vec<u8> {
        bytes(n, &[bytes(1, k.as_bytes()), bytes(2, v)].concat())
    }
    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let tm = [bytes(1, api_version.as_bytes()), bytes(2, kind.as_bytes())].concat();
        [
            MAGIC.to_vec(),
            bytes(1, &tm),
            bytes(2, raw),
            bytes(4, b"application/vnd.kubernetes.protobuf"),
        ]
        .concat()
    }

    #[test]
    fn decodes_a_configmap_like_kubectl_create_sends_it() {
        let meta = [
            bytes(1, b"cfg"),
            bytes(3, b"team"),
            entry(11, "app", b"web"),
        ]
        .concat();
        let raw = [
            bytes(1, &meta),
            entry(2, "k", b"v"),
            entry(3, "bin", &[0, 1]),
            tag(4, 0),
            vec![1],
        ]
        .concat();
        let v = decode(&envelope("v1", "ConfigMap", &raw)).unwrap();
        assert_eq!(v["kind"], "ConfigMap");
        assert_eq!(v["metadata"]["name"], "cfg");
        assert_eq!(v["metadata"]["namespace"], "team");
        assert_eq!(v["metadata"]["labels"]["app"], "web");
        assert_eq!(v["data"]["k"], "v");
        assert_eq!(v["binaryData"]["bin"], "AAE=");
        assert_eq!(v["immutable"], true);
    }

    #[test]
    fn decodes_namespaces_and_secrets() {
        let ns = decode(&envelope("v1", "Namespace", &bytes(1, &bytes(1, b"team")))).unwrap();
        assert_eq!(ns["metadata"]["name"], "team");
        let raw = [
            bytes(1, &bytes(1, b"s")),
            entry(2, "pw", b"hunter2"),
            bytes(3, b"Opaque"),
        ]
        .concat();
        let s = decode(&envelope("v1", "Secret", &raw)).unwrap();
        assert_eq!(s["data"]["pw"], "aHVudGVyMg==");
        assert_eq!(s["type"], "Opaque");
    }

    #[test]
    fn decodes_delete_options_like_client_go_sends_them() {
        let pre = [bytes(1, b"u-1"), bytes(2, b"42")].concat();
        let mut raw = bytes(2, &pre);
        raw.extend(bytes(4, b"Foreground"));
        raw.extend(bytes(5, b"All"));
        let v = decode(&envelope("meta.k8s.io/v1", "DeleteOptions", &raw)).unwrap();
        assert_eq!(v["propagationPolicy"], "Foreground");
        assert_eq!(v["preconditions"]["uid"], "u-1");
        assert_eq!(v["preconditions"]["resourceVersion"], "42");
        assert_eq!(v["dryRun"], json!(["All"]));
    }

    #[test]
    fn refuses_other_kinds_and_garbage() {
        assert!(
            decode(&envelope("apps/v1", "Deployment", &[]))
                .unwrap_err()
                .contains("apply -f")
        );
        assert!(decode(b"nope").is_err());
        assert!(decode(&[MAGIC, &[0x0a, 0x05, 1]].concat()).is_err());
    }
}
