//! The verbs: create, update, patch, delete, binding and eviction, with the order of steps
//! kube-apiserver uses — faults, read, compute (pure), defaults, mutating admission, schema,
//! validating admission, validation, compare-and-swap commit, then finalizers and garbage
//! collection. Writes without a pinned resourceVersion (patches, unconditional updates) are
//! retried on a lost race, as kube-apiserver's `GuaranteedUpdate` does.

use std::sync::Arc;

use serde_json::{Value, json};

use super::faults::Fault;
use super::patching::{self, PatchKind};
use super::prepare::{self, CreateContext, Endpoint};
use super::resources::ResourceInfo;
use super::store::{GroupResource, StoreError, Stored};
use super::webhooks::{Attributes, Operation};
use super::{
    ApiError, ApiServer, Caller, MAX_OBJECT_BYTES, crd, now_rfc3339, openapi, scale, schema,
};

/// How many times a write that lost a race is recomputed before giving up with 409.
const MAX_RETRIES: usize = 16;

/// The object a verb acts on and who asks: what every request on one object carries (the
/// path's resource, namespace and name, and whether it is the status subresource).
#[derive(Clone, Copy, Debug)]
pub struct ObjectRef<'a> {
    /// A client (faults apply) or the stand-ins inside this process.
    pub caller: Caller,
    /// The resource.
    pub res: &'a ResourceInfo,
    /// The namespace (empty for cluster-scoped resources).
    pub namespace: &'a str,
    /// The object name.
    pub name: &'a str,
    /// The main object or its `status` subresource.
    pub endpoint: Endpoint,
}

impl<'a> ObjectRef<'a> {
    /// The main object `name` of `res` in `namespace`.
    pub fn new(caller: Caller, res: &'a ResourceInfo, namespace: &'a str, name: &'a str) -> Self {
        Self {
            caller,
            res,
            namespace,
            name,
            endpoint: Endpoint::Main,
        }
    }

    /// The same object through another endpoint (`Endpoint::Status` for `/status`).
    pub fn at(self, endpoint: Endpoint) -> Self {
        Self { endpoint, ..self }
    }
}

/// What a patch did: the object, and whether the patch created it (server-side apply of an
/// absent object answers 201).
#[derive(Clone, Debug)]
pub struct Patched {
    /// The object after the patch.
    pub object: Arc<Stored>,
    /// The object did not exist before.
    pub created: bool,
}

/// What a delete did: the object's last state, and whether it is still there (finalizers or
/// foreground deletion keep it; kube-apiserver answers 202 then).
#[derive(Clone, Debug)]
pub struct Deleted {
    /// The object's last state (with `deletionTimestamp` when it is kept).
    pub object: Arc<Stored>,
    /// The object is still stored, marked for deletion.
    pub pending: bool,
}

/// Options shared by create, update and patch.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: everything but the commit.
    pub dry_run: bool,
    /// `fieldManager` (accepted, not tracked).
    pub field_manager: Option<String>,
    /// The URL's API version (objects are stored at the storage version).
    pub version: String,
    /// `fieldValidation` (in-process callers: `Ignore`, pruning only).
    pub field_validation: openapi::FieldValidation,
    /// Where `Warn` puts its warnings (the REST layer turns them into `Warning` headers).
    pub warnings: openapi::Warnings,
}

impl WriteOptions {
    /// The version the request speaks: the URL's, or the storage version for in-process
    /// callers that name none. Schemas, defaults and admission attributes are read at it.
    pub fn version_of<'a>(&'a self, res: &'a ResourceInfo) -> &'a str {
        if self.version.is_empty() {
            res.storage_version()
        } else {
            &self.version
        }
    }
}

/// `propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Delete now; the GC deletes dependents afterwards.
    #[default]
    Background,
    /// Delete dependents first; the owner goes when blocking dependents are gone.
    Foreground,
    /// Remove the owner reference from dependents; keep them.
    Orphan,
}

impl Propagation {
    /// Parses the API value.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        match s {
            "Background" => Ok(Self::Background),
            "Foreground" => Ok(Self::Foreground),
            "Orphan" => Ok(Self::Orphan),
            other => Err(ApiError::BadRequest(format!(
                "propagationPolicy: Unsupported value: \"{other}\": supported values: \"Background\", \"Foreground\", \"Orphan\""
            ))),
        }
    }
}

/// `DeleteOptions`.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// Propagation (default background).
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body (kube-rs and kubectl send one).
    pub fn from_body(v: &Value) -> Result<Self, ApiError> {
        let mut o = Self::default();
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            o.propagation = Some(Propagation::parse(p)?);
        } else if let Some(orphan) = v.get("orphanDependents").and_then(Value::as_bool) {
            o.propagation = Some(if orphan {
                Propagation::Orphan
            } else {
                Propagation::Background
            });
        }
        o.uid = v
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.resource_version = v
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.dry_run = v
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|d| d == "All"));
        Ok(o)
    }
}

fn store_err(res: &ResourceInfo, name: &str, e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound => ApiError::not_found(res, name),
        StoreError::AlreadyExists => ApiError::AlreadyExists {
            resource: res.qualified(),
            name: name.into(),
        },
        StoreError::Conflict => ApiError::stale(res, name),
        StoreError::Expired { requested, oldest } => {
            ApiError::Expired(format!("too old resource version: {requested} ({oldest})"))
        }
        StoreError::Encode(e) => ApiError::Internal(e.to_string()),
        StoreError::Persist(e) => ApiError::Internal(e),
        StoreError::TooLarge(n) => ApiError::TooLarge(format!(
            "Request entity too large: object is {n} bytes, limit is {MAX_OBJECT_BYTES}"
        )),
    }
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl ApiServer {
    fn draw_fault(
        &self,
        caller: Caller,
        is_update: bool,
        res: &ResourceInfo,
        name: &str,
    ) -> Result<(), ApiError> {
        if caller == Caller::Internal {
            return Ok(());
        }
        match self.faults.draw(is_update) {
            None => Ok(()),
            Some(Fault::WriteError) => Err(ApiError::Internal(
                "injected fault: write error (nothing stored)".into(),
            )),
            Some(Fault::Conflict) => Err(ApiError::stale(res, name)),
        }
    }

    /// The stored object or 404.
    pub fn get_object(
        &self,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
    ) -> Result<Arc<Stored>, ApiError> {
        self.store
            .get(&res.group_resource(), ns, name)
            .ok_or_else(|| ApiError::not_found(res, name))
    }

    /// The resource of a group/version/plural, or 404.
    pub fn resource(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Result<Arc<ResourceInfo>, ApiError> {
        self.registry
            .lookup(group, version, plural)
            .ok_or_else(|| ApiError::NotFound {
                resource: plural.to_string(),
                name: String::new(),
            })
    }

    /// Namespace checks and system metadata for a create (no admission, no commit).
    pub(crate) fn prepare_create(
        &self,
        res: &ResourceInfo,
        ns: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        self.prepare_create_at(res, ns, res.storage_version(), obj)
    }

    fn check_namespace(&self, res: &ResourceInfo, ns: &str, name: &str) -> Result<(), ApiError> {
        if !res.namespaced {
            return Ok(());
        }
        match self
            .store
            .get(&GroupResource::new("", "namespaces"), "", ns)
        {
            None => Err(ApiError::NotFound {
                resource: "namespaces".into(),
                name: ns.into(),
            }),
            Some(n) if n.deleting => Err(ApiError::forbidden(
                res,
                name,
                format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    fn prepare_create_at(
        &self,
        res: &ResourceInfo,
        ns: &str,
        version: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        self.check_namespace(res, ns, name_of(&obj))?;
        let ctx = CreateContext {
            namespace: ns,
            version,
            uid: self.new_uid(),
            now: now_rfc3339(),
            suffix: self.name_suffix(),
        };
        let mut obj = prepare::prepare_create(res, obj, &ctx)?;
        if res.group == "apiextensions.k8s.io" {
            self.check_crd(&obj)?;
            obj["status"] = crd::accepted_status(&obj, &ctx.now);
        }
        Ok(obj)
    }

    /// Webhook configurations may only call loopback (or tephra's own listener): the API has no
    /// authentication, so a client must not make this process call other hosts.
    fn check_webhook_urls(&self, res: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
        if res.group != "admissionregistration.k8s.io" {
            return Ok(());
        }
        let refused = super::webhooks::refused_webhook_urls(obj, self.admission.local_ip());
        if refused.is_empty() {
            return Ok(());
        }
        let causes: Vec<String> = refused
            .iter()
            .map(|(path, e)| format!("{path}: Invalid value: {e}"))
            .collect();
        Err(ApiError::Invalid(format!(
            "{} \"{}\" is invalid: {}",
            res.kind,
            name_of(obj),
            causes.join(", ")
        )))
    }

    fn check_crd(&self, obj: &Value) -> Result<(), ApiError> {
        let info = crd::resource_from_crd(obj).map_err(|m| {
            ApiError::Invalid(format!(
                "CustomResourceDefinition.apiextensions.k8s.io \"{}\" is invalid: {m}",
                name_of(obj)
            ))
        })?;
        if self
            .registry
            .by_group_resource(&info.group_resource())
            .is_some_and(|r| !r.is_custom())
        {
            return Err(ApiError::Invalid(format!(
                "CustomResourceDefinition \"{}\" is invalid: spec.group: a built-in resource has this name",
                name_of(obj)
            )));
        }
        Ok(())
    }

    /// Stores a prepared object and runs the after-write hooks (CRDs start being served).
    pub(crate) fn commit_create(
        &self,
        res: &ResourceInfo,
        obj: Value,
    ) -> Result<Arc<Stored>, ApiError> {
        let name = name_of(&obj).to_string();
        let stored = self
            .store
            .create(&res.group_resource(), obj)
            .map_err(|e| store_err(res, &name, e))?;
        self.after_write(res, &stored);
        self.collect_if_orphaned(res, &stored);
        Ok(stored)
    }

    pub(crate) fn after_write(&self, res: &ResourceInfo, stored: &Stored) {
        if res.group == "apiextensions.k8s.io"
            && res.plural == "customresourcedefinitions"
            && !stored.deleting
        {
            match stored
                .value()
                .map_err(|e| e.to_string())
                .and_then(|v| crd::resource_from_crd(&v))
            {
                Ok(info) => {
                    tracing::info!(resource = %info.qualified(), "serving custom resource");
                    self.registry.register(info);
                }
                Err(e) => tracing::warn!(crd = %stored.name, error = %e, "stored CRD not servable"),
            }
        }
    }

    /// POST: creates an object.
    pub async fn create(
        &self,
        caller: Caller,
        res: &ResourceInfo,
        ns: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        self.draw_fault(caller, false, res, name_of(&obj))?;
        let version = opts.version_of(res);
        self.check_namespace(res, ns, name_of(&obj))?;
        openapi::enforce(
            opts.field_validation,
            res,
            version,
            &obj,
            &opts.warnings,
            None,
        )?;
        let obj = prepare::prepare_decode(res, version, ns, obj)?;
        let pre_name = name_of(&obj).to_string();
        let mut attrs = Attributes {
            op: Operation::Create,
            res,
            version,
            sub: None,
            namespace: ns,
            name: &pre_name,
            old: None,
            dry_run: opts.dry_run,
            warnings: Some(&opts.warnings),
        };
        let obj = self
            .admit_mutating(&attrs, Some(obj))
            .await?
            .unwrap_or_default();
        let obj = self.prepare_create_at(res, ns, version, obj)?;
        prepare::validate(res, &obj)?;
        schema::check(res, &obj, None)?;
        self.check_webhook_urls(res, &obj)?;
        let final_name = name_of(&obj).to_string();
        attrs.name = &final_name;
        let obj = self
            .admit_validating(&attrs, Some(obj))
            .await?
            .unwrap_or_default();
        if opts.dry_run {
            return Ok(Arc::new(Stored::from_value(&obj, 0)?));
        }
        self.commit_create(res, obj)
    }

    /// PUT: replaces an object (the main object or its status).
    pub async fn update(
        &self,
        target: ObjectRef<'_>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        let ObjectRef { res, name, .. } = target;
        if name_of(&obj) != name && !name_of(&obj).is_empty() {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&obj)
            )));
        }
        let mut body = obj;
        let version = opts.version_of(res);
        prepare::check_type(res, version, &mut body)?;
        openapi::enforce(
            opts.field_validation,
            res,
            version,
            &body,
            &opts.warnings,
            None,
        )?;
        self.modify(target, opts, |_old| Ok(body.clone())).await
    }

    /// PATCH: applies a patch to an object (or creates it, for server-side apply).
    pub async fn patch(
        &self,
        target: ObjectRef<'_>,
        kind: PatchKind,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Patched, ApiError> {
        let ObjectRef {
            caller,
            res,
            namespace: ns,
            name,
            endpoint,
        } = target;
        if kind == PatchKind::Strategic && res.is_custom() {
            return Err(ApiError::UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
            ));
        }
        if kind == PatchKind::Apply
            && endpoint == Endpoint::Main
            && self.store.get(&res.group_resource(), ns, name).is_none()
        {
            let mut obj = patching::parse_json_or_yaml(body)
                .map_err(|e| ApiError::BadRequest(e.to_string()))?;
            if name_of(&obj) != name {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    name_of(&obj)
                )));
            }
            if let Some(o) = obj.as_object_mut() {
                o.entry("metadata").or_insert_with(|| json!({}));
            }
            match self.create(caller, res, ns, obj, opts).await {
                Err(ApiError::AlreadyExists { .. }) => {}
                other => {
                    return other.map(|object| Patched {
                        object,
                        created: true,
                    });
                }
            }
        }
        let strategic = !res.is_custom();
        let version = opts.version_of(res);
        let object = self
            .modify(target, opts, |old| {
                let mut target = old.clone();
                patching::apply_patch(kind, &mut target, body, strategic).map_err(|e| match e {
                    patching::PatchError::Apply(m) => ApiError::Invalid(m),
                    other => ApiError::BadRequest(other.to_string()),
                })?;
                openapi::enforce(
                    opts.field_validation,
                    res,
                    version,
                    &target,
                    &opts.warnings,
                    Some(old),
                )?;
                Ok(target)
            })
            .await?;
        Ok(Patched {
            object,
            created: false,
        })
    }

    /// The read-compute-admit-commit loop of every update.
    pub(crate) async fn modify(
        &self,
        target: ObjectRef<'_>,
        opts: &WriteOptions,
        compute: impl Fn(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Stored>, ApiError> {
        let ObjectRef {
            caller,
            res,
            namespace: ns,
            name,
            endpoint,
        } = target;
        self.draw_fault(caller, true, res, name)?;
        let gr = res.group_resource();
        for _ in 0..MAX_RETRIES {
            let old = self.get_object(res, ns, name)?;
            let old_v = old.value()?;
            let new = compute(&old_v)?;
            let pinned = new
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            if let Some(rv) = &pinned
                && *rv != old.rv.to_string()
            {
                return Err(ApiError::stale(res, name));
            }
            let mut new = prepare::prepare_update(res, endpoint, &old_v, new)?;
            if new == old_v {
                return Ok(old);
            }
            let version = opts.version_of(res);
            if res.group == "apiextensions.k8s.io" {
                self.check_crd(&new)?;
                if let Some(st) = old_v.get("status") {
                    new["status"] = st.clone();
                }
            }
            let sub = (endpoint == Endpoint::Status).then_some("status");
            let attrs = Attributes {
                op: Operation::Update,
                res,
                version,
                sub,
                namespace: ns,
                name,
                old: Some(&old_v),
                dry_run: opts.dry_run,
                warnings: Some(&opts.warnings),
            };
            let mut new = self
                .admit_mutating(&attrs, Some(new))
                .await?
                .unwrap_or_default();
            if endpoint == Endpoint::Main {
                prepare::apply_schema(res, version, &mut new);
            }
            prepare::validate(res, &new)?;
            schema::check(res, &new, Some(&old_v))?;
            self.check_webhook_urls(res, &new)?;
            let new = self
                .admit_validating(&attrs, Some(new))
                .await?
                .unwrap_or_default();
            if opts.dry_run {
                return Ok(Arc::new(Stored::from_value(&new, old.rv)?));
            }
            match self.store.update(&gr, ns, name, old.rv, new) {
                Ok(stored) => {
                    self.after_write(res, &stored);
                    if stored.deleting && stored.finalizers.is_empty() {
                        return Ok(self.finish_deletion(res, &stored).unwrap_or(stored));
                    }
                    if stored.owners != old.owners {
                        self.collect_if_orphaned(res, &stored);
                    }
                    return Ok(stored);
                }
                // Someone wrote in between: compute again on the fresh object. A
                // resourceVersion the client pinned is caught by the check above on the next
                // pass; one a patch merely carried over from the old object moves with it, so
                // an unpinned patch is retried as kube-apiserver retries it, never a 409.
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(store_err(res, name, e)),
            }
        }
        Err(ApiError::stale(res, name))
    }

    /// DELETE: deletes an object, honouring preconditions, finalizers and propagation. Returns
    /// the object's last state (with `deletionTimestamp` when finalizers keep it).
    pub async fn delete(
        &self,
        target: ObjectRef<'_>,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let ObjectRef {
            caller,
            res,
            namespace: ns,
            name,
            ..
        } = target;
        self.draw_fault(caller, false, res, name)?;
        let old = self.get_object(res, ns, name)?;
        if let Some(uid) = &opts.uid
            && *uid != old.uid
        {
            return Err(ApiError::conflict(
                res,
                name,
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    old.uid
                ),
            ));
        }
        if let Some(rv) = &opts.resource_version
            && *rv != old.rv.to_string()
        {
            return Err(ApiError::conflict(
                res,
                name,
                format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    old.rv
                ),
            ));
        }
        let old_v = old.value()?;
        let attrs = Attributes {
            op: Operation::Delete,
            res,
            version: res.storage_version(),
            sub: None,
            namespace: ns,
            name,
            old: Some(&old_v),
            dry_run: opts.dry_run,
            // A delete has no write options to collect warnings in: a webhook's warnings on a
            // delete are dropped.
            warnings: None,
        };
        self.admit_mutating(&attrs, None).await?;
        self.admit_validating(&attrs, None).await?;
        if opts.dry_run {
            return Ok(Deleted {
                object: old,
                pending: false,
            });
        }
        let expected = opts.resource_version.as_ref().map(|_| old.rv);
        let policy = opts.propagation.unwrap_or_default();
        // The cascade can touch every object in the store: run it on the blocking pool so the
        // request's worker (and the other requests on it) are not held.
        let object = match self.me.upgrade() {
            None => self.delete_now(res, ns, name, policy, expected)?,
            Some(me) => {
                let (res, ns, name) = (res.clone(), ns.to_string(), name.to_string());
                tokio::task::spawn_blocking(move || {
                    me.delete_now(&res, &ns, &name, policy, expected)
                })
                .await
                .map_err(|e| ApiError::Internal(format!("deletion did not complete: {e}")))??
            }
        };
        let pending = self
            .store
            .get(&res.group_resource(), ns, name)
            .is_some_and(|c| c.uid == object.uid);
        Ok(Deleted { object, pending })
    }

    /// POST pods/NAME/binding: sets `spec.nodeName` (409 when already bound).
    pub async fn bind(
        &self,
        caller: Caller,
        ns: &str,
        name: &str,
        binding: &Value,
    ) -> Result<(), ApiError> {
        let pods = self.resource("", "v1", "pods")?;
        let node = binding
            .pointer("/target/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                ApiError::Invalid(format!(
                    "Binding \"{name}\" is invalid: target.name: Required value"
                ))
            })?
            .to_string();
        self.draw_fault(caller, false, &pods, name)?;
        let gr = pods.group_resource();
        for _ in 0..MAX_RETRIES {
            let old = self.get_object(&pods, ns, name)?;
            if let Some(uid) = binding.pointer("/metadata/uid").and_then(Value::as_str)
                && !uid.is_empty()
                && uid != old.uid
            {
                return Err(binding_conflict(
                    name,
                    format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        old.uid
                    ),
                ));
            }
            if let Some(current) = &old.node_name {
                return Err(binding_conflict(
                    name,
                    format!("pod {name} is already assigned to node \"{current}\""),
                ));
            }
            if old.deleting {
                return Err(binding_conflict(
                    name,
                    format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            let mut v = old.value()?;
            // Indexing a JSON value that is not an object panics: check the shape first.
            let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) else {
                return Err(ApiError::Invalid(format!(
                    "Binding \"{name}\" is invalid: the pod's spec is not an object"
                )));
            };
            // A pod not ready for scheduling is not bound (kube-apiserver's check).
            if spec
                .get("schedulingGates")
                .and_then(Value::as_array)
                .is_some_and(|g| !g.is_empty())
            {
                return Err(binding_conflict(
                    name,
                    format!("pod {name} has non-empty .spec.schedulingGates"),
                ));
            }
            spec.insert("nodeName".into(), json!(node));
            let cond = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now_rfc3339()});
            let conds = v["status"]
                .as_object_mut()
                .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
            if let Some(Value::Array(c)) = conds {
                c.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                c.push(cond);
            }
            match self.store.update(&gr, ns, name, old.rv, v) {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(store_err(&pods, name, e)),
            }
        }
        Err(ApiError::stale(&pods, name))
    }

    /// POST pods/NAME/eviction: deletes the pod (PodDisruptionBudgets are not consulted).
    pub async fn evict(
        &self,
        caller: Caller,
        ns: &str,
        name: &str,
        eviction: &Value,
    ) -> Result<(), ApiError> {
        let pods = self.resource("", "v1", "pods")?;
        let opts = match eviction.get("deleteOptions") {
            Some(d) if !d.is_null() => DeleteOptions::from_body(d)?,
            _ => DeleteOptions::default(),
        };
        self.delete(ObjectRef::new(caller, &pods, ns, name), &opts)
            .await
            .map(|_| ())
    }

    /// Applies multi-document YAML (or JSON) manifests as `kubectl apply` would: each object is
    /// created, or merged into the existing one (server-side-apply semantics of this API). For
    /// seeding at start (`tephra serve --embedded` installs CRDs and webhook configurations from
    /// the same manifest files users apply). Internal caller: no faults; admission still runs.
    /// Namespaced objects without a namespace go to `default`; empty documents are skipped.
    pub async fn apply_manifests(&self, text: &str) -> Result<Vec<Arc<Stored>>, ApiError> {
        let docs: Vec<Value> = serde_saphyr::from_multiple(text)
            .map_err(|e| ApiError::BadRequest(format!("manifest is not YAML: {e}")))?;
        let mut out = Vec::new();
        for doc in docs.into_iter().filter(|d| d.is_object()) {
            let av = doc
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
            if kind == "List" {
                let items = doc
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for item in items {
                    let text = serde_json::to_string(&item)?;
                    out.extend(Box::pin(self.apply_manifests(&text)).await?);
                }
                continue;
            }
            let res = self
                .registry
                .by_kind(av, kind)
                .ok_or_else(|| ApiError::NotFound {
                    resource: format!("{av} {kind}"),
                    name: name_of(&doc).to_string(),
                })?;
            let ns = if res.namespaced {
                doc.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("default")
                    .to_string()
            } else {
                String::new()
            };
            let name = name_of(&doc).to_string();
            let version = super::resources::split_api_version(av).1.to_string();
            let opts = WriteOptions {
                version,
                ..Default::default()
            };
            let body = serde_json::to_vec(&doc)?;
            let patched = self
                .patch(
                    ObjectRef::new(Caller::Internal, &res, &ns, &name),
                    PatchKind::Apply,
                    &body,
                    &opts,
                )
                .await?;
            out.push(patched.object);
        }
        Ok(out)
    }

    /// Writes through the `scale` subresource: the new `spec.replicas` of a Scale (replaced or
    /// patched) is set on the object. Returns the object's new Scale.
    pub async fn write_scale(
        &self,
        target: ObjectRef<'_>,
        change: ScaleWrite<'_>,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let ObjectRef { res, name, .. } = target;
        let paths = res
            .scale
            .clone()
            .ok_or_else(|| ApiError::not_found(res, name))?;
        let stored = self
            .modify(target.at(Endpoint::Main), opts, |old| {
                let mut scale = scale::scale_of(&paths, old);
                match &change {
                    ScaleWrite::Replace(body) => scale = (*body).clone(),
                    ScaleWrite::Patch(kind, body) => {
                        patching::apply_patch(*kind, &mut scale, body, true)
                            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
                    }
                }
                let replicas = scale
                    .pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .filter(|r| *r >= 0)
                    .ok_or_else(|| ApiError::Invalid(format!("Scale \"{name}\" is invalid: spec.replicas: Invalid value: must be greater than or equal to 0")))?;
                let mut new = old.clone();
                scale::set_path(&mut new, &paths.spec_replicas, json!(replicas));
                if let Some(rv) = scale.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|r| !r.is_empty()) {
                    new["metadata"]["resourceVersion"] = json!(rv);
                }
                Ok(new)
            })
            .await?;
        Ok(scale::scale_of(&paths, &stored.value()?))
    }
}

/// 409 on `pods/NAME/binding`, named as kube-apiserver names it.
fn binding_conflict(name: &str, reason: String) -> ApiError {
    ApiError::Conflict {
        resource: "pods/binding".into(),
        name: name.to_string(),
        reason,
    }
}

/// A write through the `scale` subresource.
#[derive(Debug)]
pub enum ScaleWrite<'a> {
    /// PUT of a Scale.
    Replace(&'a Value),
    /// PATCH of the Scale.
    Patch(PatchKind, &'a [u8]),
}

/// The verb layer without HTTP: what each verb answers, and the `Status` details of its
/// refusals.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::EmbeddedOptions;

    fn server() -> Arc<ApiServer> {
        ApiServer::new(EmbeddedOptions {
            nodes: 1,
            sim_kubelet: false,
            sim_controllers: false,
            ..Default::default()
        })
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
    }

    async fn create_cm(api: &ApiServer, name: &str) -> Arc<Stored> {
        let res = api.resource("", "v1", "configmaps").unwrap();
        api.create(
            Caller::Client,
            &res,
            "default",
            cm(name),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_stale_update_is_a_conflict_with_details() {
        let api = server();
        let res = api.resource("", "v1", "configmaps").unwrap();
        let first = create_cm(&api, "c").await;
        let target = ObjectRef::new(Caller::Client, &res, "default", "c");
        let mut v = first.value().unwrap();
        v["data"]["k"] = json!("w");
        api.update(target, v.clone(), &WriteOptions::default())
            .await
            .unwrap();
        // The same resourceVersion again: someone else wrote in between.
        let e = api
            .update(target, v, &WriteOptions::default())
            .await
            .unwrap_err();
        assert_eq!(e.code(), 409);
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let s = e.status();
        assert_eq!(s["reason"], "Conflict");
        assert_eq!(
            s["details"],
            json!({"name": "c", "group": "", "kind": "configmaps"})
        );
    }

    #[tokio::test]
    async fn delete_preconditions_are_conflicts_worded_like_kube_apiserver() {
        let api = server();
        let res = api.resource("", "v1", "configmaps").unwrap();
        let stored = create_cm(&api, "p").await;
        let target = ObjectRef::new(Caller::Client, &res, "default", "p");
        let wrong_uid = DeleteOptions {
            uid: Some("nope".into()),
            ..Default::default()
        };
        let e = api.delete(target, &wrong_uid).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "Operation cannot be fulfilled on configmaps \"p\": Precondition failed: UID in precondition: nope, UID in object meta: {}",
                stored.uid
            )
        );
        assert_eq!(e.status()["details"]["name"], "p");
        let d = api.delete(target, &DeleteOptions::default()).await.unwrap();
        assert!(!d.pending, "nothing holds it back");
        assert_eq!(d.object.uid, stored.uid);
        assert!(
            api.store
                .get(&res.group_resource(), "default", "p")
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_finalizer_keeps_a_deleted_object_pending() {
        let api = server();
        let res = api.resource("", "v1", "configmaps").unwrap();
        let mut obj = cm("f");
        obj["metadata"]["finalizers"] = json!(["example.com/hold"]);
        api.create(
            Caller::Client,
            &res,
            "default",
            obj,
            &WriteOptions::default(),
        )
        .await
        .unwrap();
        let d = api
            .delete(
                ObjectRef::new(Caller::Client, &res, "default", "f"),
                &DeleteOptions::default(),
            )
            .await
            .unwrap();
        assert!(d.pending);
        assert!(
            d.object
                .value()
                .unwrap()
                .pointer("/metadata/deletionTimestamp")
                .is_some()
        );
    }

    #[tokio::test]
    async fn apply_creates_then_patches_and_says_which() {
        let api = server();
        let res = api.resource("", "v1", "configmaps").unwrap();
        let target = ObjectRef::new(Caller::Client, &res, "default", "a");
        let body = serde_json::to_vec(&cm("a")).unwrap();
        let opts = WriteOptions {
            version: "v1".into(),
            ..Default::default()
        };
        let first = api
            .patch(target, PatchKind::Apply, &body, &opts)
            .await
            .unwrap();
        assert!(first.created);
        let again = api
            .patch(target, PatchKind::Merge, br#"{"data":{"k":"x"}}"#, &opts)
            .await
            .unwrap();
        assert!(!again.created);
        assert_eq!(again.object.value().unwrap()["data"]["k"], "x");
    }

    /// Creates pod `default/p` with `spec`.
    async fn create_pod(api: &ApiServer, spec: Value) {
        let pods = api.resource("", "v1", "pods").unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "spec": spec});
        api.create(
            Caller::Client,
            &pods,
            "default",
            pod,
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn a_gated_pod_is_not_bound_until_its_gates_are_removed() {
        let api = server();
        let pods = api.resource("", "v1", "pods").unwrap();
        create_pod(
            &api,
            json!({"containers": [{"name": "c", "image": "i"}],
                                "schedulingGates": [{"name": "example.com/wait"}]}),
        )
        .await;
        let binding = json!({"target": {"name": "node-1"}});
        let e = api
            .bind(Caller::Client, "default", "p", &binding)
            .await
            .unwrap_err();
        assert_eq!(e.code(), 409);
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on pods/binding \"p\": pod p has non-empty .spec.schedulingGates"
        );
        let opts = WriteOptions {
            version: "v1".into(),
            ..Default::default()
        };
        let target = ObjectRef::new(Caller::Client, &pods, "default", "p");
        api.patch(
            target,
            PatchKind::Json,
            br#"[{"op": "remove", "path": "/spec/schedulingGates"}]"#,
            &opts,
        )
        .await
        .unwrap();
        api.bind(Caller::Client, "default", "p", &binding)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn binding_a_bound_pod_is_a_conflict_on_pods_binding() {
        let api = server();
        create_pod(&api, json!({"containers": [{"name": "c", "image": "i"}]})).await;
        let binding = json!({"target": {"name": "node-1"}});
        api.bind(Caller::Client, "default", "p", &binding)
            .await
            .unwrap();
        let e = api
            .bind(Caller::Client, "default", "p", &binding)
            .await
            .unwrap_err();
        assert_eq!(e.code(), 409);
        assert_eq!(
            e.to_string(),
            "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"node-1\""
        );
        assert_eq!(
            e.status()["details"],
            json!({"name": "p", "group": "", "kind": "pods/binding"})
        );
    }

    #[tokio::test]
    async fn the_priority_plugin_resolves_classes_or_forbids() {
        let api = server();
        let pods = api.resource("", "v1", "pods").unwrap();
        let pod = |name: &str, class: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                   "spec": {"priorityClassName": class, "containers": [{"name": "c", "image": "i"}]}})
        };
        let s = api
            .create(
                Caller::Client,
                &pods,
                "default",
                pod("crit", "system-node-critical"),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(s.value().unwrap()["spec"]["priority"], 2_000_001_000);
        let e = api
            .create(
                Caller::Client,
                &pods,
                "default",
                pod("x", "missing"),
                &WriteOptions::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), 403);
        assert_eq!(
            e.to_string(),
            "pods \"x\" is forbidden: no PriorityClass with name missing was found"
        );
        assert_eq!(e.status()["details"]["kind"], "pods");
    }

    #[tokio::test]
    async fn dry_run_create_stores_nothing() {
        let api = server();
        let res = api.resource("", "v1", "configmaps").unwrap();
        let opts = WriteOptions {
            dry_run: true,
            ..Default::default()
        };
        let s = api
            .create(Caller::Client, &res, "default", cm("d"), &opts)
            .await
            .unwrap();
        assert_eq!(s.name, "d");
        assert!(
            api.store
                .get(&res.group_resource(), "default", "d")
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_dependent_written_after_its_owner_went_is_collected() {
        let api = server();
        let res = api.resource("", "v1", "configmaps").unwrap();
        let owner = create_cm(&api, "owner").await;
        let target = ObjectRef::new(Caller::Client, &res, "default", "owner");
        api.delete(target, &DeleteOptions::default()).await.unwrap();
        let owned = |name: &str, uid: &str| {
            let mut v = cm(name);
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
                "name": "owner", "uid": uid}]);
            v
        };
        // A controller on a stale cache recreates a dependent of the deleted owner.
        let late = api
            .create(
                Caller::Client,
                &res,
                "default",
                owned("late", &owner.uid),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(late.name, "late", "the create itself succeeds");
        let gr = res.group_resource();
        assert!(api.store.get(&gr, "default", "late").is_none(), "collected");
        // An owner that never existed in this store is left alone.
        api.create(
            Caller::Client,
            &res,
            "default",
            owned("made-up", "no-such-uid"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
        assert!(api.store.get(&gr, "default", "made-up").is_some());
        // A live owner keeps its dependent.
        let alive = create_cm(&api, "alive").await;
        let mut v = owned("kept", &alive.uid);
        v["metadata"]["ownerReferences"][0]["name"] = json!("alive");
        api.create(Caller::Client, &res, "default", v, &WriteOptions::default())
            .await
            .unwrap();
        assert!(api.store.get(&gr, "default", "kept").is_some());
    }

    #[test]
    fn the_request_version_defaults_to_the_storage_version() {
        let api = server();
        let res = api.resource("", "v1", "configmaps").unwrap();
        assert_eq!(WriteOptions::default().version_of(&res), "v1");
        let at = WriteOptions {
            version: "v2".into(),
            ..Default::default()
        };
        assert_eq!(at.version_of(&res), "v2");
    }
}
