//! The webhook step of the admission chain, like kube-apiserver's: the MutatingWebhookConfigurations and
//! ValidatingWebhookConfigurations stored in the embedded API are honoured by sending
//! `admission.k8s.io/v1` AdmissionReviews over HTTPS.
//!
//! - Webhooks are matched by `rules` (operations, apiGroups, apiVersions, resources with
//!   `*`, `x/*`, `*/status` forms, scope), `namespaceSelector` (labels of the object's namespace;
//!   cluster-scoped objects other than namespaces always match) and `objectSelector` (labels of
//!   the new or the old object).
//! - Mutating webhooks run first, configurations by name, webhooks in order; their JSON patches
//!   are applied. Mutating admission sees the object before kube-apiserver's `BeforeCreate`
//!   (no uid, no creationTimestamp, an empty name when `generateName` is used), validating
//!   admission sees the final object, as in kube-apiserver.
//! - `clientConfig.url` must name a loopback address (`127.0.0.0/8`, `::1`, `localhost`) or
//!   the IP of tephra's own HTTPS listener ([`super::EmbeddedOptions::webhook_service_addr`]): the
//!   embedded API has no authentication, so a client that registers a webhook must not make
//!   this process call out to other hosts. A configuration naming another host is refused
//!   (422) when written, and checked again before each call. Redirects are not followed,
//!   answers are read up to [`MAX_RESPONSE_BYTES`], and at most [`MAX_CLIENTS`] HTTPS clients
//!   (one per trust bundle and host) are kept.
//! - `clientConfig.service` goes to the configured local
//!   address ([`super::EmbeddedOptions::webhook_service_addr`]) under the name
//!   `NAME.NAMESPACE.svc`, so the serving certificate is verified for that name against
//!   `caBundle` (rustls, ring). Without a `caBundle` nothing is trusted (the embedded API has no
//!   system trust store) and the call fails.
//! - `failurePolicy` (default Fail) decides what a failed call does; `timeoutSeconds`
//!   (default 10, at most 30) bounds it.
//! - Not done: `matchConditions` (CEL) are not evaluated (the webhook is called),
//!   `reinvocationPolicy` is ignored, `matchPolicy: Equivalent` matches exact resources only.
//!
//! HTTP client: reqwest (moved from dev- to normal dependencies, `rustls-no-provider`) with a
//! preconfigured rustls `ClientConfig` on the ring provider.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::resources::ResourceInfo;
use kube::core::SelectorExt;

use super::selectors::{labels_of, object_selector};
use super::store::GroupResource;
use super::{ApiError, ApiServer};

/// Largest webhook answer read (kube-apiserver's request limit; an AdmissionReview is small).
pub const MAX_RESPONSE_BYTES: usize = super::MAX_REQUEST_BYTES;

/// Most cached HTTPS clients; the cache is emptied when a new one would exceed it.
pub const MAX_CLIENTS: usize = 64;

/// Why a webhook URL is refused (pure check, see [`check_webhook_url`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookUrlError {
    /// Not a URL.
    #[error("{url:?} is not a valid URL: {why}")]
    NotUrl {
        /// The URL given.
        url: String,
        /// The parser's reason.
        why: String,
    },
    /// Not https.
    #[error("{0:?}: 'https' is the only allowed URL scheme")]
    NotHttps(String),
    /// A host that is not loopback.
    #[error(
        "{0:?}: the embedded API only calls webhooks on loopback addresses (127.0.0.0/8, ::1, localhost)"
    )]
    NotLoopback(String),
}

/// Checks that a `clientConfig.url` is https on a loopback host, or on `local` (the address of
/// tephra's own HTTPS listener, which `serve --embedded` registers its webhooks under when it
/// listens on a specific address). Pure.
pub fn check_webhook_url(
    url: &str,
    local: Option<std::net::IpAddr>,
) -> Result<(), WebhookUrlError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| WebhookUrlError::NotUrl {
        url: url.to_string(),
        why: e.to_string(),
    })?;
    if parsed.scheme() != "https" {
        return Err(WebhookUrlError::NotHttps(url.to_string()));
    }
    // The parser has normalised the host (lower case, `127.1` → `127.0.0.1`, IPv6 in brackets).
    let host = parsed.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = bare
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback() || Some(ip) == local)
        || bare == "localhost";
    if loopback {
        Ok(())
    } else {
        Err(WebhookUrlError::NotLoopback(url.to_string()))
    }
}

/// The field paths and reasons of every webhook in a webhook configuration whose
/// `clientConfig.url` is refused by [`check_webhook_url`]. Pure.
pub fn refused_webhook_urls(
    config: &Value,
    local: Option<std::net::IpAddr>,
) -> Vec<(String, WebhookUrlError)> {
    config
        .get("webhooks")
        .and_then(Value::as_array)
        .map(|hooks| {
            hooks
                .iter()
                .enumerate()
                .filter_map(|(i, h)| {
                    let url = h.pointer("/clientConfig/url")?.as_str()?;
                    check_webhook_url(url, local)
                        .err()
                        .map(|e| (format!("webhooks[{i}].clientConfig.url"), e))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// CREATE.
    Create,
    /// UPDATE.
    Update,
    /// DELETE.
    Delete,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What is being admitted.
#[derive(Clone, Copy, Debug)]
pub struct Attributes<'a> {
    /// Operation.
    pub op: Operation,
    /// Resource.
    pub res: &'a ResourceInfo,
    /// Requested version.
    pub version: &'a str,
    /// Subresource (`status`), if any.
    pub sub: Option<&'a str>,
    /// Namespace ("" when cluster scoped).
    pub namespace: &'a str,
    /// Object name (may be empty on a create with `generateName`).
    pub name: &'a str,
    /// Old object (UPDATE, DELETE).
    pub old: Option<&'a Value>,
    /// `dryRun`.
    pub dry_run: bool,
    /// Where the webhooks' `warnings` go (the REST layer sends them as `Warning` headers, which
    /// kubectl prints); `None` drops them.
    pub warnings: Option<&'a crate::openapi::Warnings>,
}

/// Which webhook kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// MutatingWebhookConfiguration.
    Mutating,
    /// ValidatingWebhookConfiguration.
    Validating,
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether one `rules` entry matches. Pure.
pub fn rule_matches(rule: &Value, a: &Attributes<'_>) -> bool {
    let ops = strs(rule.get("operations"));
    if !ops.iter().any(|o| *o == "*" || *o == a.op.as_str()) {
        return false;
    }
    let groups = strs(rule.get("apiGroups"));
    if !groups.iter().any(|g| *g == "*" || *g == a.res.group) {
        return false;
    }
    let versions = strs(rule.get("apiVersions"));
    if !versions.iter().any(|v| *v == "*" || *v == a.version) {
        return false;
    }
    let resources = strs(rule.get("resources"));
    let res_ok = resources.iter().any(|r| {
        let (rr, rs) = r.split_once('/').map_or((*r, None), |(x, y)| (x, Some(y)));
        let main_ok = rr == "*" || rr == a.res.plural;
        match (rs, a.sub) {
            (None, None) => main_ok,
            (None, Some(_)) => false,
            (Some(_), None) => false,
            (Some(s), Some(sub)) => main_ok && (s == "*" || s == sub),
        }
    });
    if !res_ok {
        return false;
    }
    match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => !a.res.namespaced,
        "Namespaced" => a.res.namespaced,
        _ => true,
    }
}

/// Whether a webhook applies to a request. `ns_labels` are the labels of the object's namespace
/// (or of the namespace object itself). Pure.
pub fn webhook_matches(
    hook: &Value,
    a: &Attributes<'_>,
    new: Option<&Value>,
    ns_labels: Option<&Value>,
) -> bool {
    let rules = hook.get("rules").and_then(Value::as_array);
    if !rules.is_some_and(|r| r.iter().any(|rule| rule_matches(rule, a))) {
        return false;
    }
    let is_namespace = a.res.group.is_empty() && a.res.plural == "namespaces";
    if a.res.namespaced || is_namespace {
        let Ok(sel) = object_selector(hook.get("namespaceSelector")) else {
            return false;
        };
        let labels = json!({"metadata": {"labels": ns_labels.cloned().unwrap_or(json!({}))}});
        if !sel.matches(&labels_of(&labels)) {
            return false;
        }
    }
    let Ok(osel) = object_selector(hook.get("objectSelector")) else {
        return false;
    };
    let matches = |o: Option<&Value>| o.is_some_and(|o| osel.matches(&labels_of(o)));
    osel.selects_all() || matches(new) || matches(a.old)
}

/// Group, version and kind (or resource) as an AdmissionReview names them.
#[derive(Clone, Copy, serde::Serialize)]
struct GroupVersion<'a> {
    group: &'a str,
    version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource: Option<&'a str>,
}

/// `request` of an AdmissionReview, borrowing the objects: a review is serialized once per
/// webhook call, and copying the object (and the old one) into a `Value` first was a deep copy
/// of every pod created.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewRequest<'a> {
    uid: &'a str,
    kind: GroupVersion<'a>,
    resource: GroupVersion<'a>,
    request_kind: GroupVersion<'a>,
    request_resource: GroupVersion<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub_resource: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_sub_resource: Option<&'a str>,
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    operation: &'static str,
    user_info: UserInfo,
    object: Option<&'a Value>,
    old_object: Option<&'a Value>,
    dry_run: bool,
    options: OptionsKind,
}

#[derive(serde::Serialize)]
struct UserInfo {
    username: &'static str,
    groups: [&'static str; 2],
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct OptionsKind {
    kind: &'static str,
    api_version: &'static str,
}

/// An AdmissionReview request, ready to serialize; see [`review_request`].
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Review<'a> {
    api_version: &'static str,
    kind: &'static str,
    request: ReviewRequest<'a>,
}

/// Builds the AdmissionReview request. Pure.
pub fn review_request<'a>(
    uid: &'a str,
    a: &'a Attributes<'_>,
    object: Option<&'a Value>,
) -> Review<'a> {
    let kind = GroupVersion {
        group: &a.res.group,
        version: a.version,
        kind: Some(&a.res.kind),
        resource: None,
    };
    let resource = GroupVersion {
        group: &a.res.group,
        version: a.version,
        kind: None,
        resource: Some(&a.res.plural),
    };
    let options_kind = match a.op {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    Review {
        api_version: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        request: ReviewRequest {
            uid,
            kind,
            resource,
            request_kind: kind,
            request_resource: resource,
            sub_resource: a.sub,
            request_sub_resource: a.sub,
            name: a.name,
            namespace: a.namespace,
            operation: a.op.as_str(),
            user_info: UserInfo {
                username: "system:admin",
                groups: ["system:masters", "system:authenticated"],
            },
            object,
            old_object: a.old,
            dry_run: a.dry_run,
            options: OptionsKind {
                kind: options_kind,
                api_version: "meta.k8s.io/v1",
            },
        },
    }
}

/// What a webhook answered.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Allowed, with an optional JSON patch.
    Allowed(Option<json_patch::Patch>),
    /// Denied: code, reason, message (already prefixed like kube-apiserver's).
    Denied(u16, String, String),
}

/// The `response.warnings` of an AdmissionReview response, as kube-apiserver passes them on
/// (each capped in length, control characters dropped). Pure.
pub fn response_warnings(body: &Value) -> Vec<String> {
    const MAX_WARNING: usize = 4096;
    body.pointer("/response/warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|w| {
            w.chars()
                .filter(|c| !c.is_control())
                .take(MAX_WARNING)
                .collect::<String>()
        })
        .filter(|w| !w.trim().is_empty())
        .collect()
}

/// Reads an AdmissionReview response. Pure.
pub fn parse_response(hook_name: &str, uid: &str, body: &Value) -> Result<Verdict, String> {
    let resp = body
        .get("response")
        .ok_or("webhook response has no `response`")?;
    if resp.get("uid").and_then(Value::as_str) != Some(uid) {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            resp.get("uid")
        ));
    }
    if !resp
        .get("allowed")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        let st = resp.get("status").cloned().unwrap_or(json!({}));
        let code = st
            .get("code")
            .and_then(Value::as_u64)
            .map(|c| c as u16)
            .filter(|c| *c >= 400)
            .unwrap_or(400);
        let reason = st
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let msg = st
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let denied = format!("admission webhook \"{hook_name}\" denied the request");
        let message = if !msg.is_empty() {
            format!("{denied}: {msg}")
        } else if !reason.is_empty() {
            format!("{denied}: {reason}")
        } else {
            format!("{denied} without explanation")
        };
        return Ok(Verdict::Denied(code, reason, message));
    }
    match resp.get("patch") {
        None | Some(Value::Null) => Ok(Verdict::Allowed(None)),
        Some(p) => {
            if let Some(t) = resp.get("patchType").and_then(Value::as_str)
                && t != "JSONPatch"
            {
                return Err(format!("unsupported patchType {t:?}"));
            }
            let bytes: k8s_openapi::ByteString = serde_json::from_value(p.clone())
                .map_err(|e| format!("patch is not base64: {e}"))?;
            let patch: json_patch::Patch = serde_json::from_slice(&bytes.0)
                .map_err(|e| format!("patch is not a JSON patch: {e}"))?;
            Ok(Verdict::Allowed(Some(patch)))
        }
    }
}

/// Reads a response body, refusing it past `cap` bytes (a webhook cannot make this process
/// buffer an unbounded answer).
async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| tephra_report::report(&e).to_string())?
    {
        if out.len().saturating_add(chunk.len()) > cap {
            return Err(format!("the answer is larger than {cap} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Webhook calling state: HTTPS clients cached per trust bundle.
pub struct Webhooks {
    service_addr: Option<std::net::SocketAddr>,
    clients: Mutex<HashMap<(String, String), reqwest::Client>>,
    /// The webhooks of each phase's configurations, decoded once per set of stored versions
    /// (index 0 mutating, 1 validating). Every create runs both phases; decoding every
    /// configuration (caBundle and all) on each request was a sixth of the API's CPU in the
    /// job benchmark.
    hooks: Mutex<[Option<HookCache>; 2]>,
}

/// Decoded webhooks and the resourceVersions of the configurations they came from: versions
/// are unique across the store, so the same list of versions means the same objects.
struct HookCache {
    versions: Vec<u64>,
    hooks: Arc<Vec<Value>>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("service_addr", &self.service_addr)
            .finish_non_exhaustive()
    }
}

impl Webhooks {
    /// Webhook calling that maps `clientConfig.service` to `service_addr`.
    pub fn new(service_addr: Option<std::net::SocketAddr>) -> Self {
        Self {
            service_addr,
            clients: Mutex::new(HashMap::new()),
            hooks: Mutex::new([None, None]),
        }
    }

    /// The IP of tephra's own HTTPS listener, allowed as a webhook host besides loopback.
    pub fn local_ip(&self) -> Option<std::net::IpAddr> {
        self.service_addr.map(|a| a.ip())
    }

    fn client(&self, ca_b64: &str, service_host: Option<&str>) -> Result<reqwest::Client, String> {
        let key = (
            ca_b64.to_string(),
            service_host.unwrap_or_default().to_string(),
        );
        if let Some(c) = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(c.clone());
        }
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let ca: k8s_openapi::ByteString = serde_json::from_value(json!(ca_b64))
            .map_err(|e| format!("caBundle is not base64: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&ca.0) {
            let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
            roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut b = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .https_only(true)
            // `localhost` is never looked up: it is loopback (the port comes from the URL).
            .resolve(
                "localhost",
                std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
            );
        if let (Some(host), Some(addr)) = (service_host, self.service_addr) {
            b = b.resolve(host, addr);
        }
        let c = b.build().map_err(|e| e.to_string())?;
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, c.clone());
        Ok(c)
    }

    fn hooks(&self, api: &ApiServer, phase: Phase) -> Arc<Vec<Value>> {
        let (resource, slot) = match phase {
            Phase::Mutating => ("mutatingwebhookconfigurations", 0),
            Phase::Validating => ("validatingwebhookconfigurations", 1),
        };
        let gr = GroupResource::new("admissionregistration.k8s.io", resource);
        if api.store.count(&gr) == 0 {
            return Arc::default();
        }
        let items = api.store.list(&gr, None, None, 0, |_| true).items;
        let versions: Vec<u64> = items.iter().map(|c| c.rv).collect();
        if let Ok(cache) = self.hooks.lock()
            && let Some(c) = &cache[slot]
            && c.versions == versions
        {
            return c.hooks.clone();
        }
        let hooks: Arc<Vec<Value>> = Arc::new(
            items
                .iter()
                .filter_map(|c| c.value().ok())
                .flat_map(|c| match c {
                    Value::Object(mut m) => match m.remove("webhooks") {
                        Some(Value::Array(a)) => a,
                        _ => vec![],
                    },
                    _ => vec![],
                })
                .collect(),
        );
        if let Ok(mut cache) = self.hooks.lock() {
            cache[slot] = Some(HookCache {
                versions,
                hooks: hooks.clone(),
            });
        }
        hooks
    }

    async fn call(
        &self,
        hook: &Value,
        a: &Attributes<'_>,
        object: Option<&Value>,
        uid: &str,
    ) -> Result<Verdict, String> {
        let name = hook
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("webhook");
        let cc = hook.get("clientConfig").ok_or("no clientConfig")?;
        let ca = cc
            .get("caBundle")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (url, host) = if let Some(u) = cc.get("url").and_then(Value::as_str) {
            check_webhook_url(u, self.local_ip()).map_err(|e| e.to_string())?;
            (u.to_string(), None)
        } else if let Some(svc) = cc.get("service") {
            let addr = self
                .service_addr
                .ok_or("no local address is configured for webhook services")?;
            let s = |k: &str| svc.get(k).and_then(Value::as_str).unwrap_or_default();
            let host = format!("{}.{}.svc", s("name"), s("namespace"));
            (
                format!("https://{host}:{}{}", addr.port(), s("path")),
                Some(host),
            )
        } else {
            return Err("clientConfig has neither url nor service".into());
        };
        let timeout = hook
            .get("timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(10)
            .clamp(1, 30);
        let client = self.client(ca, host.as_deref())?;
        let review = review_request(uid, a, object);
        let resp = client
            .post(&url)
            .timeout(Duration::from_secs(timeout))
            .json(&review)
            .send()
            .await
            // The cause (refused, TLS, timeout) sits in the source chain, not in reqwest's text.
            .map_err(|e| {
                format!(
                    "failed to call webhook: Post \"{url}\": {}",
                    tephra_report::report(&e)
                )
            })?;
        let status = resp.status();
        let bytes = read_capped(resp, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| format!("webhook {url} answered {status}: {e}"))?;
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("webhook {url} answered {status} with no AdmissionReview: {e}"))?;
        if let Some(w) = a.warnings {
            for warning in response_warnings(&body) {
                w.add(warning);
            }
        }
        parse_response(name, uid, &body)
    }

    /// Runs the matching webhooks of `phase`. Mutating webhooks may change `obj` (returned);
    /// any denial or a failed call under `failurePolicy: Fail` is an error.
    pub async fn run(
        &self,
        api: &ApiServer,
        phase: Phase,
        a: &Attributes<'_>,
        mut obj: Option<Value>,
    ) -> Result<Option<Value>, ApiError> {
        if a.res.group == "admissionregistration.k8s.io" {
            // kube-apiserver never calls webhooks on webhook configurations (no lock-out).
            return Ok(obj);
        }
        let hooks = self.hooks(api, phase);
        if hooks.is_empty() {
            return Ok(obj);
        }
        let ns_labels = if a.res.group.is_empty() && a.res.plural == "namespaces" {
            obj.as_ref()
                .or(a.old)
                .and_then(|o| o.pointer("/metadata/labels"))
                .cloned()
        } else if a.res.namespaced {
            api.store
                .get(&GroupResource::new("", "namespaces"), "", a.namespace)
                .and_then(|n| n.value().ok())
                .and_then(|n| n.pointer("/metadata/labels").cloned())
        } else {
            None
        };
        for hook in hooks.iter() {
            if !webhook_matches(hook, a, obj.as_ref(), ns_labels.as_ref()) {
                continue;
            }
            let name = hook
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("webhook")
                .to_string();
            let uid = api.new_uid();
            let fail_open = hook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore");
            match self.call(hook, a, obj.as_ref(), &uid).await {
                Ok(Verdict::Allowed(None)) => {}
                Ok(Verdict::Allowed(Some(patch))) => {
                    if phase == Phase::Mutating
                        && a.op != Operation::Delete
                        && let Some(o) = obj.as_mut()
                    {
                        let mut patched = o.clone();
                        json_patch::patch(&mut patched, &patch.0).map_err(|e| {
                            ApiError::Internal(format!("Internal error occurred: admission webhook \"{name}\" returned a patch that cannot be applied: {e}"))
                        })?;
                        *o = patched;
                    }
                }
                Ok(Verdict::Denied(code, reason, message)) => {
                    return Err(ApiError::Denied {
                        code,
                        reason,
                        message,
                    });
                }
                Err(e) if fail_open => {
                    tracing::warn!(webhook = %name, error = %e, "webhook failed; failurePolicy Ignore");
                }
                Err(e) => {
                    return Err(ApiError::Internal(format!(
                        "Internal error occurred: failed calling webhook \"{name}\": {e}"
                    )));
                }
            }
        }
        Ok(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn attrs<'a>(res: &'a ResourceInfo, op: Operation, sub: Option<&'a str>) -> Attributes<'a> {
        Attributes {
            op,
            res,
            version: &res.versions[0],
            sub,
            namespace: "default",
            name: "x",
            old: None,
            dry_run: false,
            warnings: None,
        }
    }

    #[test]
    fn webhook_urls_must_be_https_on_loopback() {
        for ok in [
            "https://127.0.0.1:8443/x",
            "https://127.9.9.9/x",
            "https://[::1]:1/x",
            "https://localhost:8443/mutate",
            "https://LOCALHOST/x",
        ] {
            assert_eq!(check_webhook_url(ok, None), Ok(()), "{ok}");
        }
        assert!(matches!(
            check_webhook_url("https://10.0.0.1/x", None),
            Err(WebhookUrlError::NotLoopback(_))
        ));
        assert!(matches!(
            check_webhook_url("https://example.com/x", None),
            Err(WebhookUrlError::NotLoopback(_))
        ));
        assert!(matches!(
            check_webhook_url("https://localhost.example.com/x", None),
            Err(WebhookUrlError::NotLoopback(_))
        ));
        assert!(matches!(
            check_webhook_url("http://127.0.0.1/x", None),
            Err(WebhookUrlError::NotHttps(_))
        ));
        assert!(matches!(
            check_webhook_url("::nonsense", None),
            Err(WebhookUrlError::NotUrl { .. })
        ));
        let cfg = json!({"webhooks": [
            {"clientConfig": {"url": "https://127.0.0.1/a"}},
            {"clientConfig": {"service": {"name": "s", "namespace": "n"}}},
            {"clientConfig": {"url": "https://169.254.169.254/latest"}},
        ]});
        // tephra's own listener address is allowed.
        assert_eq!(
            check_webhook_url("https://10.0.0.1:8443/x", Some([10, 0, 0, 1].into())),
            Ok(())
        );
        let refused = refused_webhook_urls(&cfg, None);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].0, "webhooks[2].clientConfig.url");
        let msg = refused[0].1.to_string();
        assert!(
            msg.contains("169.254.169.254") && msg.contains("loopback"),
            "{msg}"
        );
    }

    #[test]
    fn rules_match_operations_groups_versions_resources_and_scope() {
        let reg = Registry::new();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        let nodes = reg.lookup("", "v1", "nodes").unwrap();
        let rule = json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]});
        assert!(rule_matches(&rule, &attrs(&pods, Operation::Create, None)));
        assert!(!rule_matches(&rule, &attrs(&pods, Operation::Update, None)));
        assert!(!rule_matches(
            &rule,
            &attrs(&pods, Operation::Create, Some("status"))
        ));
        assert!(!rule_matches(
            &rule,
            &attrs(&nodes, Operation::Create, None)
        ));
        let star = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/status"], "scope": "Namespaced"});
        assert!(rule_matches(
            &star,
            &attrs(&pods, Operation::Update, Some("status"))
        ));
        assert!(!rule_matches(&star, &attrs(&pods, Operation::Update, None)));
        assert!(!rule_matches(
            &star,
            &attrs(&nodes, Operation::Update, Some("status"))
        ));
        let all_sub = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["pods/*"]});
        assert!(rule_matches(
            &all_sub,
            &attrs(&pods, Operation::Update, Some("status"))
        ));
    }

    #[test]
    fn selectors_filter_webhooks() {
        let reg = Registry::new();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        let hook = json!({
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "namespaceSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
            "objectSelector": {"matchLabels": {"app": "web"}}
        });
        let a = attrs(&pods, Operation::Create, None);
        let web = json!({"metadata": {"labels": {"app": "web"}}});
        assert!(webhook_matches(&hook, &a, Some(&web), Some(&json!({}))));
        assert!(!webhook_matches(
            &hook,
            &a,
            Some(&web),
            Some(&json!({"skip": "1"}))
        ));
        assert!(!webhook_matches(
            &hook,
            &a,
            Some(&json!({"metadata": {}})),
            None
        ));
    }

    #[test]
    fn responses_are_read_like_kube_apiserver() {
        let patch = k8s_openapi::ByteString(br#"[{"op":"add","path":"/a","value":1}]"#.to_vec());
        let ok = json!({"response": {"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": patch}});
        match parse_response("h", "u", &ok).unwrap() {
            Verdict::Allowed(Some(p)) => assert_eq!(p.0.len(), 1),
            other => panic!("{other:?}"),
        }
        let deny = json!({"response": {"uid": "u", "allowed": false, "status": {"code": 403, "message": "no queue"}}});
        assert_eq!(
            parse_response("h", "u", &deny).unwrap(),
            Verdict::Denied(
                403,
                String::new(),
                "admission webhook \"h\" denied the request: no queue".into()
            )
        );
        let bare = json!({"response": {"uid": "u", "allowed": false}});
        assert!(
            matches!(parse_response("h", "u", &bare).unwrap(), Verdict::Denied(400, _, m) if m.ends_with("without explanation"))
        );
        assert!(parse_response("h", "other", &ok).is_err());
        let warned = json!({"response": {"uid": "u", "allowed": true,
            "warnings": ["gang can never start", "", "bell\u{7} rung", 3]}});
        assert_eq!(
            response_warnings(&warned),
            ["gang can never start", "bell rung"]
        );
        assert!(response_warnings(&ok).is_empty());
    }

    #[test]
    fn review_requests_carry_kind_resource_and_objects() {
        let reg = Registry::new();
        let pods = reg.lookup("", "v1", "pods").unwrap();
        let a = attrs(&pods, Operation::Create, None);
        let object = json!({"metadata": {"name": "p"}});
        let r = serde_json::to_value(review_request("uid-1", &a, Some(&object))).unwrap();
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(r["kind"], "AdmissionReview");
        assert_eq!(
            r["request"]["requestKind"],
            json!({"group": "", "version": "v1", "kind": "Pod"})
        );
        assert_eq!(
            r["request"]["requestResource"],
            json!({"group": "", "version": "v1", "resource": "pods"})
        );
        assert_eq!(r["request"]["object"], object);
        assert_eq!(
            r["request"]["options"],
            json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"})
        );
        assert_eq!(r["request"]["userInfo"]["username"], "system:admin");
        assert!(r["request"].get("subResource").is_none());
        assert_eq!(r["request"]["uid"], "uid-1");
        assert_eq!(r["request"]["kind"]["kind"], "Pod");
        assert_eq!(r["request"]["resource"]["resource"], "pods");
        assert_eq!(r["request"]["operation"], "CREATE");
        assert_eq!(r["request"]["namespace"], "default");
        assert!(r["request"]["oldObject"].is_null());
    }
}
