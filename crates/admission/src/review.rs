//! AdmissionReview plumbing: read a review (`admission.k8s.io/v1` or `v1beta1`), and write the
//! answer in the same version with the request's `uid` echoed.
//!
//! Only the parts of the request the webhooks read are decoded; `userInfo`, `options` and the
//! like are skipped, so an unusual value there never makes a review unreadable.

use base64::Engine as _;
use std::sync::OnceLock;

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::AdmissionError;
use super::patch::{self, Ops};

/// The AdmissionReview API version of a request; the answer is written in the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    /// `admission.k8s.io/v1`
    V1,
    /// `admission.k8s.io/v1beta1`
    V1Beta1,
}

impl ReviewVersion {
    /// The `apiVersion` string.
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1Beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// What the API server is doing to the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// CREATE
    Create,
    /// UPDATE
    Update,
    /// DELETE
    Delete,
    /// CONNECT
    Connect,
    /// Anything else (answered by each webhook as an unexpected operation).
    Other(String),
}

impl Operation {
    fn parse(s: &str) -> Self {
        match s {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            "CONNECT" => Operation::Connect,
            other => Operation::Other(other.to_string()),
        }
    }

    /// The wire form, also used as the `operation` metric label.
    pub fn as_str(&self) -> &str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
            Operation::Other(s) => s,
        }
    }
}

/// Group, version and kind of the object under review (`request.kind`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct GroupVersionKind {
    /// API group, empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl std::fmt::Display for GroupVersionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

/// One admission request, as the webhooks see it.
#[derive(Debug, Clone)]
pub struct Request {
    /// Version the review came in (and the answer goes out) in.
    pub version: ReviewVersion,
    /// `request.uid`, echoed in the answer.
    pub uid: String,
    /// `request.kind`.
    pub kind: GroupVersionKind,
    /// `request.subResource`, empty for the main resource.
    pub sub_resource: String,
    /// `request.name` (empty on CREATE with `generateName`).
    pub name: String,
    /// `request.namespace` (empty for cluster-scoped objects).
    pub namespace: String,
    /// `request.operation`.
    pub operation: Operation,
    /// `request.object` (absent on DELETE).
    pub object: Option<Object>,
    /// `request.oldObject` (UPDATE and DELETE).
    pub old_object: Option<Object>,
    /// `request.dryRun`.
    pub dry_run: bool,
}

/// An object of a review as it arrived: its JSON text, turned into a [`Value`] only when a
/// webhook needs one (mutations do, to edit and diff it). Validations decode their typed object
/// straight from the text, about twice as fast as through an intermediate `Value`, which is
/// most of a validating webhook's cost.
#[derive(Debug, Clone)]
pub struct Object {
    repr: Repr,
    value: OnceLock<Value>,
}

#[derive(Debug, Clone)]
enum Repr {
    Text(Box<RawValue>),
    Value,
}

/// What [`Object::value`] lends when the text cannot be read as a value (it was checked to be
/// JSON when the review was parsed, so this is not expected).
static NULL: Value = Value::Null;

impl Object {
    /// An object from its JSON text (as taken out of the review).
    pub fn from_text(raw: Box<RawValue>) -> Self {
        Self {
            repr: Repr::Text(raw),
            value: OnceLock::new(),
        }
    }

    /// An object from a value (tests, and callers that have one already).
    pub fn from_value(value: Value) -> Self {
        Self {
            repr: Repr::Value,
            value: OnceLock::from(value),
        }
    }

    /// The object as a JSON value, parsed on first use.
    pub fn value(&self) -> &Value {
        match &self.repr {
            Repr::Value => self.value.get().unwrap_or(&NULL),
            Repr::Text(raw) => self
                .value
                .get_or_init(|| serde_json::from_str(raw.get()).unwrap_or(Value::Null)),
        }
    }

    /// Decodes the object as `T`, from its text when it still has it. `T` may borrow strings
    /// from the object (the hot-path mutators do, to avoid copying annotations).
    ///
    /// A failure names the field (`spec.minAvailable: invalid type: string "2", expected
    /// i32`), not a byte position: the object was re-encoded by the API server, so a line and
    /// column mean nothing to the user. The path is worked out only on failure, by decoding
    /// once more with a path tracker, so a good object costs one decode.
    pub fn decode<'a, T: Deserialize<'a>>(&'a self) -> Result<T, DecodeError> {
        match &self.repr {
            Repr::Text(raw) => serde_json::from_str(raw.get()).map_err(|first| {
                let mut de = serde_json::Deserializer::from_str(raw.get());
                DecodeError::located(serde_path_to_error::deserialize::<_, T>(&mut de), first)
            }),
            Repr::Value => T::deserialize(self.value()).map_err(|first| {
                DecodeError::located(
                    serde_path_to_error::deserialize::<_, T>(self.value()),
                    first,
                )
            }),
        }
    }

    /// The object's own `apiVersion` and `kind`, each empty when absent (or not a string).
    pub fn type_meta(&self) -> (String, String) {
        match &self.repr {
            Repr::Text(raw) => type_meta_of_text(raw.get()),
            Repr::Value => {
                let v = self.value();
                let field = |k: &str| {
                    v.get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                (field("apiVersion"), field("kind"))
            }
        }
    }
}

/// `apiVersion` and `kind` of an object's JSON text, each empty when absent or not a string.
///
/// Reads the object's members only until both are found: the API server writes them first, so
/// this costs a few bytes, not a scan of the whole object (every review pays it). Stopping
/// early leaves serde_json to report the unread rest as an error, which is expected and
/// ignored: what was found is kept in `found`. Anything unreadable just reads as absent; the
/// webhook's own decode reports it.
fn type_meta_of_text(text: &str) -> (String, String) {
    #[derive(Default)]
    struct Found {
        api_version: Option<String>,
        kind: Option<String>,
    }
    struct Members<'f>(&'f mut Found);
    impl<'de> Visitor<'de> for Members<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                let slot = match key.as_ref() {
                    "apiVersion" => &mut self.0.api_version,
                    "kind" => &mut self.0.kind,
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                };
                *slot = Some(map.next_value::<StringOrNot>()?.0.unwrap_or_default());
                if self.0.api_version.is_some() && self.0.kind.is_some() {
                    break;
                }
            }
            Ok(())
        }
    }
    let mut found = Found::default();
    let mut de = serde_json::Deserializer::from_str(text);
    // Err when stopped early (the rest is unread) or when the text is not an object.
    let _ = serde::Deserializer::deserialize_map(&mut de, Members(&mut found));
    (
        found.api_version.unwrap_or_default(),
        found.kind.unwrap_or_default(),
    )
}

/// A string, or `None` for any other JSON value (which is skipped, not refused).
struct StringOrNot(Option<String>);

impl<'de> Deserialize<'de> for StringOrNot {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringOrNot;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StringOrNot, E> {
                Ok(StringOrNot(Some(v.to_string())))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<StringOrNot, E> {
                Ok(StringOrNot(None))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<StringOrNot, E> {
                Ok(StringOrNot(None))
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<StringOrNot, E> {
                Ok(StringOrNot(None))
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<StringOrNot, E> {
                Ok(StringOrNot(None))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<StringOrNot, E> {
                Ok(StringOrNot(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<StringOrNot, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(StringOrNot(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringOrNot, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(StringOrNot(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Why an object of a review could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// A field has the wrong type or value (`field` is a dotted path such as
    /// `spec.tasks[0].replicas`).
    #[error("{field}: {reason}")]
    Field {
        /// Where, from the object's root.
        field: String,
        /// What is wrong, without serde's byte position.
        reason: String,
    },
    /// The object as a whole is unreadable (not an object, say).
    #[error("{0}")]
    Object(String),
}

impl DecodeError {
    /// Builds the error from a path-tracking decode's result, falling back to the plain
    /// decode's error should the second decode (unexpectedly) succeed.
    fn located<T>(
        tracked: Result<T, serde_path_to_error::Error<serde_json::Error>>,
        first: serde_json::Error,
    ) -> Self {
        match tracked {
            Err(e) => {
                let field = e.path().to_string();
                let reason = without_position(e.inner());
                if field.is_empty() || field == "." {
                    DecodeError::Object(reason)
                } else {
                    DecodeError::Field { field, reason }
                }
            }
            Ok(_) => DecodeError::Object(without_position(&first)),
        }
    }
}

/// serde_json's message without its ` at line L column C` suffix.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) if e.line() != 0 => text[..i].to_string(),
        _ => text,
    }
}

#[derive(Deserialize)]
struct RawReview {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    request: Option<RawRequest>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRequest {
    uid: Option<String>,
    kind: Option<GroupVersionKind>,
    sub_resource: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
    operation: Option<String>,
    object: Option<Box<RawValue>>,
    old_object: Option<Box<RawValue>>,
    dry_run: Option<bool>,
}

/// `body` with every `\u` escape (four hex digits) of a lone UTF-16 surrogate (one not part of a pair)
/// replaced by `\ufffd`, as Go's `encoding/json` decodes them: serde_json refuses them, but
/// only where it decodes a string, so a review holding one in its object was answered by some
/// webhooks and refused by others. Borrowed when there is none.
pub fn replace_lone_surrogates(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    // The code unit of the six-byte `\u` escape at `i`, if there is one.
    let unit = |i: usize| -> Option<u16> {
        let esc = body.get(i..i + 6)?;
        if esc[0] != b'\\' || esc[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&esc[2..]).ok()?, 16).ok()
    };
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    // Most bodies hold few escapes: jump from one backslash to the next.
    while let Some(skip) = memchr::memchr(b'\\', &body[i.min(body.len())..]) {
        i += skip;
        let Some(u) = unit(i) else {
            // Another escape (`\\` among them): its next byte is never an escape's start.
            i += 2;
            continue;
        };
        let high = (0xD800..0xDC00).contains(&u);
        let low = (0xDC00..0xE000).contains(&u);
        if high && unit(i + 6).is_some_and(|v| (0xDC00..0xE000).contains(&v)) {
            i += 12;
            continue;
        }
        if high || low {
            let o = out.get_or_insert_with(|| body.to_vec());
            o[i + 2..i + 6].copy_from_slice(b"fffd");
        }
        i += 6;
    }
    match out {
        Some(o) => std::borrow::Cow::Owned(o),
        None => std::borrow::Cow::Borrowed(body),
    }
}

/// Reads an AdmissionReview body. Every failure is a client error (HTTP 400) with a one-line
/// reason.
pub fn parse(body: &[u8]) -> Result<Request, AdmissionError> {
    let body = replace_lone_surrogates(body);
    // Checking the body's UTF-8 once, up front, is faster than serde_json checking each string
    // as it reads it; a body that is not UTF-8 is read as bytes so that the error says where.
    let raw: Result<RawReview, _> = match std::str::from_utf8(&body) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(&body),
    };
    let raw = raw.map_err(|e| match e.classify() {
        serde_json::error::Category::Data => AdmissionError::NotAReview(e),
        _ => AdmissionError::NotJson(e),
    })?;
    let version = match raw.api_version.as_deref() {
        Some("admission.k8s.io/v1") => ReviewVersion::V1,
        Some("admission.k8s.io/v1beta1") => ReviewVersion::V1Beta1,
        other => {
            return Err(AdmissionError::ApiVersion(
                other.unwrap_or_default().to_string(),
            ));
        }
    };
    if raw.kind.as_deref() != Some("AdmissionReview") {
        return Err(AdmissionError::Kind(raw.kind.unwrap_or_default()));
    }
    let req = raw.request.ok_or(AdmissionError::NoRequest)?;
    let uid = req
        .uid
        .filter(|u| !u.is_empty())
        .ok_or(AdmissionError::NoUid)?;
    let operation = req
        .operation
        .filter(|o| !o.is_empty())
        .map(|o| Operation::parse(&o))
        .ok_or(AdmissionError::NoOperation)?;
    // `Option<Box<RawValue>>` reads a JSON `null` as `None`.
    let object = req.object.map(Object::from_text);
    let old_object = req.old_object.map(Object::from_text);
    // `request.kind` is required in both versions; an object's own apiVersion/kind is a
    // fallback for hand-written reviews.
    let kind = match req.kind.filter(|k| !k.kind.is_empty()) {
        Some(k) => k,
        None => object
            .as_ref()
            .or(old_object.as_ref())
            .and_then(|o| gvk_of_object(o.value()))
            .ok_or(AdmissionError::NoKind)?,
    };
    Ok(Request {
        version,
        uid,
        kind,
        sub_resource: req.sub_resource.unwrap_or_default(),
        name: req.name.unwrap_or_default(),
        namespace: req.namespace.unwrap_or_default(),
        operation,
        object,
        old_object,
        dry_run: req.dry_run.unwrap_or(false),
    })
}

/// Puts the base64 patch and its type into the response, when there is a patch.
fn insert_patch(response: &mut Map<String, Value>, bytes: Option<Vec<u8>>) -> Outcome {
    match bytes {
        Some(bytes) => {
            response.insert(
                "patch".into(),
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
            );
            response.insert("patchType".into(), Value::String("JSONPatch".into()));
            Outcome::Patched
        }
        None => Outcome::Allowed,
    }
}

fn gvk_of_object(obj: &Value) -> Option<GroupVersionKind> {
    let api_version = obj.get("apiVersion")?.as_str()?;
    let kind = obj.get("kind")?.as_str()?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Some(GroupVersionKind {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
    })
}

/// What a webhook decided about one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Allow, deny or change.
    pub verdict: Verdict,
    /// Shown by kubectl as `Warning:` lines, whatever the verdict.
    pub warnings: Vec<String>,
}

/// The verdict part of a [`Decision`].
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Admit as is.
    Allow,
    /// Refuse, with the reason and the HTTP-style code put in `status`.
    Deny {
        /// Human-readable reason, `response.status.message`.
        message: String,
        /// 403 for a rule the object breaks, 400 for an object that cannot be read.
        code: u16,
    },
    /// Admit the object as changed to this (the whole object); the patch is the difference.
    Mutate(Value),
    /// Admit the object with these operations applied (none: unchanged). The hot-path
    /// mutators emit their operations directly instead of a changed copy to diff.
    Patch(Ops),
}

impl Decision {
    /// Admit unchanged.
    pub fn allow() -> Self {
        Self {
            verdict: Verdict::Allow,
            warnings: Vec::new(),
        }
    }

    /// Refuse because the object breaks a rule (code 403).
    pub fn deny(message: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Deny {
                message: message.into().trim().to_string(),
                code: 403,
            },
            warnings: Vec::new(),
        }
    }

    /// Refuse because the object (or operation) cannot be handled at all (code 400).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Deny {
                message: message.into().trim().to_string(),
                code: 400,
            },
            warnings: Vec::new(),
        }
    }

    /// Admit the object in this mutated form.
    pub fn mutate(object: Value) -> Self {
        Self {
            verdict: Verdict::Mutate(object),
            warnings: Vec::new(),
        }
    }

    /// Admit the object with these operations applied (no operations: admit as is).
    pub fn patch(ops: Ops) -> Self {
        Self {
            verdict: Verdict::Patch(ops),
            warnings: Vec::new(),
        }
    }

    /// Adds a warning.
    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Adds warnings.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings.extend(warnings);
        self
    }

    /// True unless denied.
    pub fn is_allowed(&self) -> bool {
        !matches!(self.verdict, Verdict::Deny { .. })
    }

    /// The denial message, if denied.
    pub fn denial(&self) -> Option<&str> {
        match &self.verdict {
            Verdict::Deny { message, .. } => Some(message),
            _ => None,
        }
    }
}

/// How a request ended, the `result` metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Admitted unchanged.
    Allowed,
    /// Refused.
    Denied,
    /// Admitted with a patch.
    Patched,
    /// The review itself could not be read (HTTP 400).
    Invalid,
}

impl Outcome {
    /// Metric label value.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::Patched => "patched",
            Outcome::Invalid => "invalid",
        }
    }
}

/// Writes the AdmissionReview answer for `decision` on `req`. A mutation that changes nothing
/// is answered with neither `patch` nor `patchType` (tephra departs from Volcano here, which
/// sends the literal patch `null`).
pub fn respond(req: &Request, decision: Decision) -> (Value, Outcome) {
    let mut response = Map::new();
    response.insert("uid".into(), Value::String(req.uid.clone()));
    let outcome = match decision.verdict {
        Verdict::Allow => {
            response.insert("allowed".into(), Value::Bool(true));
            Outcome::Allowed
        }
        Verdict::Deny { message, code } => {
            response.insert("allowed".into(), Value::Bool(false));
            response.insert(
                "status".into(),
                json!({
                    "status": "Failure",
                    "message": message,
                    "reason": if code == 400 { "BadRequest" } else { "Forbidden" },
                    "code": code,
                }),
            );
            Outcome::Denied
        }
        Verdict::Mutate(new) => {
            response.insert("allowed".into(), Value::Bool(true));
            let original = req.object.as_ref().map_or(&NULL, Object::value);
            let bytes = patch::diff(original, &new).and_then(|p| serde_json::to_vec(&p).ok());
            insert_patch(&mut response, bytes)
        }
        Verdict::Patch(ops) => {
            response.insert("allowed".into(), Value::Bool(true));
            let bytes = (!ops.is_empty())
                .then(|| serde_json::to_vec(&ops).ok())
                .flatten();
            insert_patch(&mut response, bytes)
        }
    };
    if !decision.warnings.is_empty() {
        response.insert("warnings".into(), json!(decision.warnings));
    }
    let review = json!({
        "apiVersion": req.version.api_version(),
        "kind": "AdmissionReview",
        "response": Value::Object(response),
    });
    (review, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(version: &str, request: Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"apiVersion": version, "kind": "AdmissionReview", "request": request}),
        )
        .unwrap()
    }

    fn pod_request() -> Value {
        json!({
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "p", "namespace": "ns", "operation": "CREATE",
            "userInfo": {"username": "x", "extra": {"weird": 5}},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
            "oldObject": null,
        })
    }

    #[test]
    fn parses_v1_and_v1beta1() {
        let r = parse(&review("admission.k8s.io/v1", pod_request())).unwrap();
        assert_eq!(r.version, ReviewVersion::V1);
        assert_eq!(r.uid, "u-1");
        assert_eq!(r.kind.kind, "Pod");
        assert_eq!(r.operation, Operation::Create);
        assert!(r.object.is_some() && r.old_object.is_none());
        let r = parse(&review("admission.k8s.io/v1beta1", pod_request())).unwrap();
        assert_eq!(r.version, ReviewVersion::V1Beta1);
    }

    #[test]
    fn a_lone_surrogate_reads_as_the_replacement_character_as_go_reads_it() {
        let body = String::from_utf8(review("admission.k8s.io/v1", pod_request()))
            .unwrap()
            .replace(r#""name":"p"}"#, r#""name":"p","labels":{"a":"x\ud800y","b":"\udc00","c":"\ud83d\ude00","d":"\\ud800"}}"#);
        let r = parse(body.as_bytes()).unwrap();
        let labels = &r.object.as_ref().unwrap().value()["metadata"]["labels"];
        assert_eq!(labels["a"], "x\u{fffd}y");
        assert_eq!(labels["b"], "\u{fffd}");
        assert_eq!(labels["c"], "\u{1f600}", "a pair is one character");
        assert_eq!(labels["d"], "\\ud800", "an escaped backslash is no escape");
        let uid = String::from_utf8(review("admission.k8s.io/v1", pod_request()))
            .unwrap()
            .replace(r#""uid":"u-1""#, r#""uid":"u-\ud800""#);
        assert_eq!(parse(uid.as_bytes()).unwrap().uid, "u-\u{fffd}");
        let plain = review("admission.k8s.io/v1", pod_request());
        assert!(matches!(
            replace_lone_surrogates(&plain),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn rejects_what_is_not_a_review() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not json".to_vec(), "not JSON"),
            (b"[1,2]".to_vec(), "not an AdmissionReview"),
            (
                {
                    // A review holding a byte that is not UTF-8.
                    let mut b = review("admission.k8s.io/v1", pod_request());
                    let at = b.windows(4).position(|w| w == b"\"ns\"").unwrap() + 1;
                    b[at] = 0xff;
                    b
                },
                "not JSON",
            ),
            (review("admission.k8s.io/v2", pod_request()), "apiVersion"),
            (
                serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}))
                    .unwrap(),
                "kind",
            ),
            (
                serde_json::to_vec(
                    &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
                )
                .unwrap(),
                "no request",
            ),
            (
                review("admission.k8s.io/v1", {
                    let mut r = pod_request();
                    r["uid"] = json!("");
                    r
                }),
                "uid",
            ),
            (
                review("admission.k8s.io/v1", {
                    let mut r = pod_request();
                    r["uid"] = json!(7);
                    r
                }),
                "not an AdmissionReview",
            ),
            (
                review("admission.k8s.io/v1", {
                    let mut r = pod_request();
                    r.as_object_mut().unwrap().remove("operation");
                    r
                }),
                "operation",
            ),
        ];
        for (body, want) in cases {
            let err = parse(&body).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should mention {want:?}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn kind_falls_back_to_the_object() {
        let mut r = pod_request();
        r.as_object_mut().unwrap().remove("kind");
        let req = parse(&review("admission.k8s.io/v1", r)).unwrap();
        assert_eq!(req.kind.kind, "Pod");
        assert_eq!(req.kind.version, "v1");
    }

    #[test]
    fn denial_carries_message_and_code_and_echoes_uid() {
        let req = parse(&review("admission.k8s.io/v1beta1", pod_request())).unwrap();
        let (v, outcome) = respond(&req, Decision::deny("  no way ").warn("careful"));
        assert_eq!(outcome, Outcome::Denied);
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1beta1");
        assert_eq!(v["response"]["uid"], "u-1");
        assert_eq!(v["response"]["allowed"], false);
        assert_eq!(v["response"]["status"]["message"], "no way");
        assert_eq!(v["response"]["status"]["code"], 403);
        assert_eq!(v["response"]["warnings"][0], "careful");
    }

    #[test]
    fn unchanged_mutation_has_no_patch_fields() {
        let req = parse(&review("admission.k8s.io/v1", pod_request())).unwrap();
        let same = req.object.as_ref().unwrap().value().clone();
        let (v, outcome) = respond(&req, Decision::mutate(same));
        assert_eq!(outcome, Outcome::Allowed);
        assert_eq!(v["response"]["allowed"], true);
        assert!(v["response"].get("patch").is_none());
        assert!(v["response"].get("patchType").is_none());
    }

    #[test]
    fn mutation_is_a_base64_json_patch_that_applies() {
        let req = parse(&review("admission.k8s.io/v1", pod_request())).unwrap();
        let mut new = req.object.as_ref().unwrap().value().clone();
        new["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": "pg"});
        let (v, outcome) = respond(&req, Decision::mutate(new.clone()));
        assert_eq!(outcome, Outcome::Patched);
        assert_eq!(v["response"]["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v["response"]["patch"].as_str().unwrap())
            .unwrap();
        let p: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        let mut doc = req.object.as_ref().unwrap().value().clone();
        json_patch::patch(&mut doc, &p).unwrap();
        assert_eq!(doc, new);
    }

    #[test]
    fn objects_decode_the_same_from_text_and_from_a_value() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
            "request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},
            "operation":"UPDATE","object":{"metadata":{"name":"p","labels":{"a":"b"}}},
            "oldObject":null}}"#;
        let r = parse(body).unwrap();
        assert!(r.old_object.is_none(), "a null oldObject is no object");
        let text = r.object.as_ref().unwrap();
        let value = Object::from_value(text.value().clone());
        let a: k8s_openapi::api::core::v1::Pod = text.decode().unwrap();
        let b: k8s_openapi::api::core::v1::Pod = value.decode().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.metadata.labels.unwrap()["a"], "b");
        assert_eq!(text.value()["metadata"]["name"], "p");
    }

    #[test]
    fn type_meta_reads_only_what_it_needs_and_tolerates_anything() {
        let cases = [
            (
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}"#,
                ("v1", "Pod"),
            ),
            (
                r#"{"metadata":{"a":[1,{"b":2}]},"spec":{},"kind":"Job","apiVersion":"batch.volcano.sh/v1alpha1"}"#,
                ("batch.volcano.sh/v1alpha1", "Job"),
            ),
            (r#"{"kind":"Queue"}"#, ("", "Queue")),
            (r#"{"apiVersion":{"x":[1]},"kind":7,"spec":{}}"#, ("", "")),
            (
                r#"{"apiVersion":"v\u0031","kind":"P\"od"}"#,
                ("v1", "P\"od"),
            ),
            (r#"[{"kind":"Pod"}]"#, ("", "")),
            (r#""text""#, ("", "")),
            (r#"{}"#, ("", "")),
        ];
        for (text, (api_version, kind)) in cases {
            let raw = RawValue::from_string(text.to_string()).unwrap();
            let got = Object::from_text(raw).type_meta();
            assert_eq!(got, (api_version.to_string(), kind.to_string()), "{text}");
            let value = Object::from_value(serde_json::from_str(text).unwrap()).type_meta();
            assert_eq!(value, got, "{text}");
        }
    }
}
