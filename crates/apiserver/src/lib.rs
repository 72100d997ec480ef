//! # The embedded, in-memory Kubernetes-compatible API
//!
//! Tephra runs and is tested on one machine with no cluster: this crate is an API server that
//! kube-rs, kubectl and other Kubernetes clients cannot tell from kube-apiserver for what tephra
//! and its users do.
//!
//! ```text
//!   kube::Client ──(in process: tower Service)──┐
//!   kubectl / HTTP ──(serve: TCP, loopback)─────┤
//!                                               ▼
//!   guard.rs     panic guard, request timeout, concurrency limit
//!   ── HTTP layer: paths → verbs; encodes JSON, Tables, watch streams, Status errors ──
//!   rest.rs      path parsing, discovery (discovery.rs) and OpenAPI (openapi.rs) answers
//!   rest/verbs.rs  one small handler per verb: query and body → a verb call → the answer
//!   ── verb layer (request preparation): faults, defaults, validation, admission ──
//!   ops.rs       create / update / patch / delete / bind / evict / scale; the request types
//!   list.rs      list and delete-collection: resourceVersion(Match), continue tokens
//!   watch.rs     watch streams from a version: history replay, 410, bookmarks, timeouts
//!     ├─ prepare.rs    pure: metadata, status split, generation, built-in defaults
//!     ├─ patching.rs   pure: merge, JSON, strategic merge, apply
//!     ├─ crd.rs        pure: CRD → served resource, schema defaults, pruning
//!     ├─ protobuf.rs   pure: the protobuf bodies of kubectl's imperative creates
//!     ├─ admission_chain.rs  built-in plugins (Priority), then webhooks.rs: mutating and
//!     │                      validating webhooks (AdmissionReview over HTTPS)
//!     └─ gc.rs         ownerReferences: background, foreground, orphan
//!   ── storage ──
//!   store.rs     objects as JSON bytes per group/resource, global resourceVersion, history
//!   nodes.rs, kubelet.rs, workloads.rs  the stand-ins: Ready nodes, a simulated kubelet, the
//!                controller-manager stand-in (they write through the verb layer)
//!   kube_scheduler.rs  the kube-scheduler stand-in: a kube client of this API that calls
//!                tephra's extender over HTTPS, as kube-scheduler would
//! ```
//!
//! No request reaches the store except through the verb layer: the HTTP handlers call
//! [`ApiServer`]'s verbs (`create`, `update`, `patch`, `delete`, `list`, `delete_collection`,
//! `bind`, `evict`, `write_scale`, `get_object`, and `watch::start` for watches).
//!
//! Use it in process with [`router`] (`kube::Client::new(router(api), "default")`) or over TCP
//! with [`serve`]. There is no authentication: it binds loopback by default and says so.

pub mod admission_chain;
pub mod builtin_kinds;
pub mod crd;
pub mod discovery;
pub mod faults;
pub mod gc;
pub mod guard;
pub mod kube_scheduler;
pub mod kubelet;
pub mod list;
pub mod logs;
pub mod nodes;
pub mod openapi;
pub mod openapi_v2;
pub mod ops;
pub mod patching;
pub mod persist;
pub mod prepare;
pub mod protobuf;
pub mod resources;
pub mod rest;
pub mod scale;
pub mod schema;
pub mod selectors;
pub mod store;
pub mod table_view;
pub mod tables;
pub mod watch;
pub mod webhooks;
pub mod workloads;

use std::sync::{Arc, Mutex, Weak};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use faults::{FaultSpec, FaultSpecError};
pub use resources::ResourceInfo;
pub use store::{GroupResource, Stored};

use faults::{Faults, Rng};
use resources::Registry;
use store::Store;

/// Largest object kube-apiserver stores (etcd's limit).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;
/// Largest request body kube-apiserver reads.
pub const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;
/// Largest total size of an object's annotations.
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

/// How the embedded API starts.
#[derive(Clone, Debug)]
pub struct EmbeddedOptions {
    /// Ready nodes created at start (`node-1` … `node-N`).
    pub nodes: usize,
    /// Run the kubelet stand-in (bound pods become Running, finish per annotations).
    pub sim_kubelet: bool,
    /// Run the controller-manager stand-in (Deployments, ReplicaSets, StatefulSets and batch
    /// Jobs get pods and statuses; see [`workloads`]).
    pub sim_controllers: bool,
    /// Injected faults.
    pub faults: FaultSpec,
    /// Watch events kept per resource for watches that resume from a version; older versions
    /// get 410 Gone.
    pub watch_history: usize,
    /// Interval between BOOKMARK events on watches that allow them.
    pub bookmark_interval: std::time::Duration,
    /// Where webhook `clientConfig.service` references are sent (the local HTTPS listener of
    /// `tephra serve`), e.g. `127.0.0.1:8443`. `None`: service references fail (and the
    /// webhook's failurePolicy decides).
    pub webhook_service_addr: Option<std::net::SocketAddr>,
    /// Serve streaming lists (a watch with `sendInitialEvents=true`), as kube-apiserver does
    /// with its `WatchList` feature gate on (the default in 1.32 and from 1.34). `false` answers them 422,
    /// as a server with the gate off, so clients' fallback to paged lists can be tested.
    pub watch_list: bool,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            nodes: 3,
            sim_kubelet: true,
            sim_controllers: true,
            faults: FaultSpec::default(),
            watch_history: 10_000,
            bookmark_interval: std::time::Duration::from_secs(30),
            webhook_service_addr: None,
            watch_list: true,
        }
    }
}

/// A request-level failure, answered as a Kubernetes `Status` object.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 404.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// `pods` or `jobs.batch.volcano.sh`.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 409 on create.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// Qualified resource.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 409 on a stale write or a failed precondition (kube-apiserver's `NewConflict`:
    /// "Operation cannot be fulfilled on RESOURCE \"NAME\": REASON", with details).
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {reason}")]
    Conflict {
        /// Qualified resource (`pods`, `jobs.batch.volcano.sh`, `pods/binding`).
        resource: String,
        /// Object name.
        name: String,
        /// Why (`the object has been modified; ...`, `Precondition failed: ...`).
        reason: String,
    },
    /// 422.
    #[error("{0}")]
    Invalid(String),
    /// 422 with one cause per field (`details.causes`), from schema validation.
    #[error("{0}")]
    InvalidFields(Box<schema::Invalid>),
    /// 400.
    #[error("{0}")]
    BadRequest(String),
    /// 403 (kube-apiserver's `NewForbidden`: "RESOURCE \"NAME\" is forbidden: REASON", with
    /// details).
    #[error("{resource} \"{name}\" is forbidden: {reason}")]
    Forbidden {
        /// Qualified resource.
        resource: String,
        /// Object name.
        name: String,
        /// Why.
        reason: String,
    },
    /// 405.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 406.
    #[error("{0}")]
    NotAcceptable(String),
    /// 410 for a too-old resourceVersion (reason `Expired`, as the watch cache answers).
    #[error("{0}")]
    Expired(String),
    /// 410 `Expired` for a continue token older than the store's history: the list cannot be
    /// continued consistently. `token` continues it at the latest version instead (kube-apiserver
    /// hands out the same kind of token in the Status's `metadata.continue`).
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )]
    ContinueExpired {
        /// A token that continues the list at the latest version.
        token: String,
    },
    /// 504 for a LIST at a resourceVersion the store has not reached (kube-apiserver's
    /// `NewTooLargeResourceVersionError`, retried by clients after a second).
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The version asked for.
        requested: u64,
        /// The store's latest version.
        current: u64,
    },
    /// 410 with reason `Gone`.
    #[error("{0}")]
    Gone(String),
    /// 413.
    #[error("{0}")]
    TooLarge(String),
    /// 415.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429: too many requests in flight.
    #[error("{0}")]
    TooManyRequests(String),
    /// 500 (also the injected write fault).
    #[error("{0}")]
    Internal(String),
    /// 504.
    #[error("{0}")]
    Timeout(String),
    /// An admission webhook denied the request (its code and reason, kube-apiserver's message).
    #[error("{message}")]
    Denied {
        /// HTTP code (at least 400).
        code: u16,
        /// The webhook's reason, if any.
        reason: String,
        /// `admission webhook "NAME" denied the request: ...`.
        message: String,
    },
}

impl ApiError {
    /// HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Invalid(_) | ApiError::InvalidFields(_) => 422,
            ApiError::BadRequest(_) => 400,
            ApiError::Forbidden { .. } => 403,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::NotAcceptable(_) => 406,
            ApiError::Expired(_) | ApiError::ContinueExpired { .. } | ApiError::Gone(_) => 410,
            ApiError::TooLarge(_) => 413,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::TooManyRequests(_) => 429,
            ApiError::Internal(_) => 500,
            ApiError::Timeout(_) | ApiError::TooLargeResourceVersion { .. } => 504,
            ApiError::Denied { code, .. } => *code,
        }
    }

    /// The `Status.reason`.
    pub fn reason(&self) -> &str {
        match self {
            ApiError::NotFound { .. } => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Invalid(_) | ApiError::InvalidFields(_) => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Expired(_) | ApiError::ContinueExpired { .. } => "Expired",
            ApiError::Gone(_) => "Gone",
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::TooManyRequests(_) => "TooManyRequests",
            ApiError::Internal(_) => "InternalError",
            ApiError::Timeout(_) | ApiError::TooLargeResourceVersion { .. } => "Timeout",
            ApiError::Denied { reason, .. } => reason,
        }
    }

    /// A label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ApiError::Denied { .. } => "Denied",
            ApiError::NotFound { .. } => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Internal(_) => "InternalError",
            _ => "Other",
        }
    }

    /// The `Status` object.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        match self {
            ApiError::NotFound { resource, name }
            | ApiError::AlreadyExists { resource, name }
            | ApiError::Conflict { resource, name, .. }
            | ApiError::Forbidden { resource, name, .. } => {
                s["details"] = resource_details(resource, name);
            }
            ApiError::ContinueExpired { token } => {
                s["metadata"]["continue"] = json!(token);
            }
            ApiError::TooLargeResourceVersion { .. } => {
                s["details"] = json!({
                    "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1,
                });
            }
            _ => {}
        }
        if let ApiError::InvalidFields(inv) = self {
            s["details"] = inv.details();
        }
        s
    }

    /// 409 for a write kube-apiserver refuses on this object (see [`ApiError::Conflict`]).
    pub fn conflict(res: &ResourceInfo, name: &str, reason: impl Into<String>) -> Self {
        ApiError::Conflict {
            resource: res.qualified(),
            name: name.to_string(),
            reason: reason.into(),
        }
    }

    /// 403 for a request kube-apiserver forbids on this object (see [`ApiError::Forbidden`]).
    pub fn forbidden(res: &ResourceInfo, name: &str, reason: impl Into<String>) -> Self {
        ApiError::Forbidden {
            resource: res.qualified(),
            name: name.to_string(),
            reason: reason.into(),
        }
    }

    /// 409 for a stale write.
    pub fn stale(res: &ResourceInfo, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 404 for an object.
    pub fn not_found(res: &ResourceInfo, name: &str) -> Self {
        ApiError::NotFound {
            resource: res.qualified(),
            name: name.to_string(),
        }
    }
}

/// A Status's `details` for an error about one object: kube-apiserver names the resource (as
/// `kind`, e.g. `pods`, `jobs` with group `batch.volcano.sh`, `pods/binding`) and the object.
fn resource_details(qualified: &str, name: &str) -> Value {
    let (resource, group) = qualified.split_once('.').unwrap_or((qualified, ""));
    json!({"name": name, "group": group, "kind": resource})
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        ApiError::Internal(format!("encoding: {e}"))
    }
}

/// Who is writing: clients (faults apply) or the stand-ins inside this process (never faulted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Caller {
    /// An API client (REST, kube-rs, kubectl, tephra's own controllers).
    #[default]
    Client,
    /// The embedded stand-ins and the garbage collector.
    Internal,
}

/// The embedded API server: store, served resources, faults, admission.
pub struct ApiServer {
    pub(crate) store: Store,
    pub(crate) registry: Registry,
    pub(crate) faults: Faults,
    pub(crate) options: EmbeddedOptions,
    pub(crate) admission: webhooks::Webhooks,
    rng: Mutex<Rng>,
    /// This server itself, for work handed to Tokio's blocking pool (the garbage collector).
    me: Weak<ApiServer>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl ApiServer {
    /// A server with the system namespaces and `options.nodes` Ready nodes, and no background
    /// tasks (see [`ApiServer::start`] for the stand-ins). Logs the faults in force.
    pub fn new(options: EmbeddedOptions) -> Arc<Self> {
        let store = Store::new(options.watch_history);
        Self::build(options, store)
    }

    /// [`ApiServer::new`] on the objects of a data file (`--embedded-data`), which every
    /// change is written through to. The CRDs it holds are served again at once.
    pub fn open(
        options: EmbeddedOptions,
        data: Arc<persist::Persist>,
    ) -> Result<Arc<Self>, persist::PersistError> {
        let path = data.path().display().to_string();
        let (store, loaded) = Store::with_persist(options.watch_history, data)?;
        tracing::info!(objects = loaded, file = %path, "embedded API: objects read from its data file");
        let api = Self::build(options, store);
        let crds = GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions");
        if let Some(res) = api.registry.by_group_resource(&crds) {
            for crd in api
                .store
                .list(&crds, None, None, usize::MAX, |_| true)
                .items
            {
                api.after_write(&res, &crd);
            }
        }
        Ok(api)
    }

    fn build(options: EmbeddedOptions, store: Store) -> Arc<Self> {
        let api = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            store,
            registry: Registry::new(),
            faults: Faults::new(options.faults.clone()),
            admission: webhooks::Webhooks::new(options.webhook_service_addr),
            rng: Mutex::new(Rng::from_entropy()),
            options,
        });
        tracing::info!("embedded API {}", api.faults.spec().describe());
        let namespaces = GroupResource::new("", "namespaces");
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            // A store read from its data file has them already.
            if api.store.get(&namespaces, "", ns).is_some() {
                continue;
            }
            if let Err(e) = api.seed(
                "",
                "namespaces",
                json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":ns}}),
            ) {
                tracing::warn!(namespace = ns, error = %e, "seeding namespace");
            }
        }
        let nodes = GroupResource::new("", "nodes");
        for i in 1..=api.options.nodes {
            if api.store.get(&nodes, "", &format!("node-{i}")).is_some() {
                continue;
            }
            if let Err(e) = api.seed("", "nodes", nodes::node(&format!("node-{i}"), i)) {
                tracing::warn!(node = i, error = %e, "seeding node");
            }
        }
        api
    }

    /// [`ApiServer::new`] plus the stand-ins (the kubelet unless `sim_kubelet` is off, the
    /// controller manager unless `sim_controllers` is off), which stop when `shutdown` is
    /// cancelled. Must be called inside a Tokio runtime.
    pub fn start(options: EmbeddedOptions, shutdown: CancellationToken) -> Arc<Self> {
        Self::run_stand_ins(Self::new(options), shutdown)
    }

    /// [`ApiServer::open`] plus the stand-ins, as [`ApiServer::start`].
    pub fn start_open(
        options: EmbeddedOptions,
        data: Arc<persist::Persist>,
        shutdown: CancellationToken,
    ) -> Result<Arc<Self>, persist::PersistError> {
        Ok(Self::run_stand_ins(Self::open(options, data)?, shutdown))
    }

    fn run_stand_ins(api: Arc<Self>, shutdown: CancellationToken) -> Arc<Self> {
        if api.options.sim_kubelet {
            tokio::spawn(kubelet::run(api.clone(), shutdown.clone()));
        }
        if api.options.sim_controllers {
            tokio::spawn(workloads::run(api.clone(), shutdown));
        }
        api
    }

    /// The options it was started with.
    pub fn options(&self) -> &EmbeddedOptions {
        &self.options
    }

    /// The served resources.
    pub fn resources(&self) -> &Registry {
        &self.registry
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store.current_rv()
    }

    /// Number of stored objects of a resource.
    pub fn count(&self, group: &str, resource: &str) -> usize {
        self.store.count(&GroupResource::new(group, resource))
    }

    /// Creates an object directly (no admission, no faults): for seeding.
    pub fn seed(&self, group: &str, resource: &str, obj: Value) -> Result<Arc<Stored>, ApiError> {
        let res = self
            .registry
            .by_group_resource(&GroupResource::new(group, resource))
            .ok_or_else(|| ApiError::NotFound {
                resource: resource.into(),
                name: String::new(),
            })?;
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let prepared = self.prepare_create(&res, &ns, obj)?;
        self.commit_create(&res, prepared)
    }

    pub(crate) fn random_u64(&self) -> u64 {
        self.rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_u64()
    }

    /// A random RFC 4122 version-4 uid.
    pub(crate) fn new_uid(&self) -> String {
        let (a, b) = (self.random_u64(), self.random_u64());
        let a = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
        let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// The 5-character suffix of a `generateName`, from kube-apiserver's alphabet.
    pub(crate) fn name_suffix(&self) -> String {
        const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut r = self.random_u64();
        (0..5)
            .map(|_| {
                let c = ALPHA[(r % ALPHA.len() as u64) as usize] as char;
                r /= ALPHA.len() as u64;
                c
            })
            .collect()
    }
}

/// The strings of a JSON array as owned strings (non-strings skipped); empty when `v` is absent
/// or not an array.
pub(crate) fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Now as an RFC 3339 timestamp with second precision, as Kubernetes writes them.
pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// An age as kubectl prints it (`45s`, `3m`, `5h`, `2d`).
pub(crate) fn human_age(secs: i64) -> String {
    tables::human_duration(secs)
}

/// The axum router of the API (all Kubernetes paths plus `/healthz`, `/readyz`, `/version`).
/// A `kube::Client` can sit on it directly: `kube::Client::new(router(api), "default")`.
pub fn router(api: Arc<ApiServer>) -> axum::Router {
    guard::layer(rest::router(api), &guard::Limits::default())
}

/// Serves the API over plain HTTP on `listener` until `shutdown` is cancelled. Logs that the
/// API has no authentication.
pub async fn serve(
    api: Arc<ApiServer>,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    tracing::warn!(
        %addr,
        "embedded Kubernetes API listening over plain HTTP with no authentication; keep it on loopback"
    );
    axum::serve(listener, router(api))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_status_objects_with_reason_and_code() {
        let e = ApiError::NotFound {
            resource: "jobs.batch.volcano.sh".into(),
            name: "j".into(),
        };
        let s = e.status();
        assert_eq!(s["kind"], "Status");
        assert_eq!(s["status"], "Failure");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["group"], "batch.volcano.sh");
        assert_eq!(s["message"], "jobs.batch.volcano.sh \"j\" not found");
        assert_eq!(ApiError::Expired("x".into()).code(), 410);
        assert_eq!(ApiError::Invalid("x".into()).reason(), "Invalid");
    }

    #[test]
    fn new_server_has_system_namespaces_and_ready_nodes() {
        let api = ApiServer::new(EmbeddedOptions {
            nodes: 2,
            ..Default::default()
        });
        assert_eq!(api.count("", "namespaces"), 4);
        assert_eq!(api.count("", "nodes"), 2);
        let uid = api.new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
        assert_eq!(api.name_suffix().len(), 5);
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(600), "10m");
        assert_eq!(human_age(3 * 3600), "3h");
        assert_eq!(human_age(3 * 86400), "3d");
    }
}
