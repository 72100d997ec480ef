//! The verbs: create, update, patch, delete, binding and eviction, with the order of steps
//! kube-apiserver uses — faults, read, compute (pure), defaults, mutating admission, schema,
//! validating admission, validation, compare-and-swap commit, then finalizers and garbage
//! collection. Writes without a pinned resourceVersion (patches, unconditional updates) are
//! retried on a lost race, as kube-apiserver's `GuaranteedUpdate` does.

use std::sync::Arc;

use serde_json::{Value, json};

use super::admission::Operation;
use super::faults::Fault;
use super::patch::{self, PatchKind};
use super::prepare::{self, CreateContext, Endpoint};
use super::resources::ResourceInfo;
use super::store::{GroupResource, StoreError, Stored};
use super::{ApiError, ApiServer, Caller, MAX_OBJECT_BYTES, crd, now_rfc3339};

/// How many times a write that lost a race is recomputed before giving up with 409.
const MAX_RETRIES: usize = 16;

/// Options shared by create, update and patch.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: everything but the commit.
    pub dry_run: bool,
    /// `fieldManager` (accepted, not tracked).
    pub field_manager: Option<String>,
    /// The URL's API version (objects are stored at the storage version).
    pub version: String,
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
    }
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn check_size(stored: &Stored) -> Result<(), ApiError> {
    if stored.json.len() > MAX_OBJECT_BYTES {
        return Err(ApiError::TooLarge(format!(
            "Request entity too large: object is {} bytes, limit is {MAX_OBJECT_BYTES}",
            stored.json.len()
        )));
    }
    Ok(())
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
        self.prepare_create_at(res, ns, &res.versions[0].clone(), obj)
    }

    fn prepare_create_at(
        &self,
        res: &ResourceInfo,
        ns: &str,
        version: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        if res.namespaced {
            match self
                .store
                .get(&GroupResource::new("", "namespaces"), "", ns)
            {
                None => {
                    return Err(ApiError::NotFound {
                        resource: "namespaces".into(),
                        name: ns.into(),
                    });
                }
                Some(n) if n.deleting => {
                    return Err(ApiError::Forbidden(format!(
                        "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        res.qualified(),
                        name_of(&obj)
                    )));
                }
                Some(_) => {}
            }
        }
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
        if res.group.is_empty() && res.plural == "pods" {
            self.resolve_priority(&mut obj)?;
        }
        Ok(obj)
    }

    /// The Priority admission plugin: `spec.priority` from `priorityClassName`.
    fn resolve_priority(&self, pod: &mut Value) -> Result<(), ApiError> {
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let class = spec
            .get("priorityClassName")
            .and_then(Value::as_str)
            .map(str::to_string);
        let priority =
            match class.as_deref() {
                None | Some("") => 0,
                Some(name @ ("system-cluster-critical" | "system-node-critical")) => {
                    if name == "system-node-critical" {
                        2_000_001_000
                    } else {
                        2_000_000_000
                    }
                }
                Some(name) => {
                    let pc = self
                    .store
                    .get(&GroupResource::new("scheduling.k8s.io", "priorityclasses"), "", name)
                    .ok_or_else(|| {
                        ApiError::Forbidden(format!(
                            "pods \"{}\" is forbidden: no PriorityClass with name {name} was found",
                            spec.get("generateName").and_then(Value::as_str).unwrap_or_default()
                        ))
                    })?;
                    pc.value()?
                        .get("value")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                }
            };
        spec.insert("priority".into(), json!(priority));
        Ok(())
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
        let probe = Stored::from_value(&obj, 0)?;
        check_size(&probe)?;
        let stored = self
            .store
            .create(&res.group_resource(), obj)
            .map_err(|e| store_err(res, &name, e))?;
        self.after_write(res, &stored);
        Ok(stored)
    }

    fn after_write(&self, res: &ResourceInfo, stored: &Stored) {
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
        let version = if opts.version.is_empty() {
            res.versions[0].clone()
        } else {
            opts.version.clone()
        };
        let obj = self.prepare_create_at(res, ns, &version, obj)?;
        let obj = self
            .admission
            .admit(
                self,
                Operation::Create,
                res,
                &version,
                None,
                obj,
                opts.dry_run,
                None,
            )
            .await?;
        let mut obj = obj;
        prepare::apply_schema(res, &version, &mut obj);
        prepare::validate(res, &obj)?;
        if opts.dry_run {
            return Ok(Arc::new(Stored::from_value(&obj, 0)?));
        }
        self.commit_create(res, obj)
    }

    /// PUT: replaces an object (the main object or its status).
    #[allow(clippy::too_many_arguments)]
    pub async fn update(
        &self,
        caller: Caller,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        endpoint: Endpoint,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        if name_of(&obj) != name && !name_of(&obj).is_empty() {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&obj)
            )));
        }
        let mut body = obj;
        prepare::check_type(
            res,
            if opts.version.is_empty() {
                &res.versions[0]
            } else {
                &opts.version
            },
            &mut body,
        )?;
        self.modify(caller, res, ns, name, endpoint, opts, |_old| {
            Ok(body.clone())
        })
        .await
    }

    /// PATCH: applies a patch to an object (or creates it, for server-side apply).
    #[allow(clippy::too_many_arguments)]
    pub async fn patch(
        &self,
        caller: Caller,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        endpoint: Endpoint,
        kind: PatchKind,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        if kind == PatchKind::Strategic && res.is_custom() {
            return Err(ApiError::UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml".into(),
            ));
        }
        if kind == PatchKind::Apply
            && endpoint == Endpoint::Main
            && self.store.get(&res.group_resource(), ns, name).is_none()
        {
            let mut obj =
                patch::parse_json_or_yaml(body).map_err(|e| ApiError::BadRequest(e.to_string()))?;
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
                other => return other,
            }
        }
        let strategic = !res.is_custom();
        self.modify(caller, res, ns, name, endpoint, opts, |old| {
            let mut target = old.clone();
            patch::apply_patch(kind, &mut target, body, strategic).map_err(|e| match e {
                patch::PatchError::Apply(m) => ApiError::Invalid(m),
                other => ApiError::BadRequest(other.to_string()),
            })?;
            Ok(target)
        })
        .await
    }

    /// The read-compute-admit-commit loop of every update.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn modify(
        &self,
        caller: Caller,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        endpoint: Endpoint,
        opts: &WriteOptions,
        compute: impl Fn(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Stored>, ApiError> {
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
            let version = if opts.version.is_empty() {
                res.versions[0].clone()
            } else {
                opts.version.clone()
            };
            if res.group == "apiextensions.k8s.io" {
                self.check_crd(&new)?;
                if let Some(st) = old_v.get("status") {
                    new["status"] = st.clone();
                }
            }
            let sub = (endpoint == Endpoint::Status).then_some("status");
            let new = self
                .admission
                .admit(
                    self,
                    Operation::Update,
                    res,
                    &version,
                    Some(&old_v),
                    new,
                    opts.dry_run,
                    sub,
                )
                .await?;
            let mut new = new;
            if endpoint == Endpoint::Main {
                prepare::apply_schema(res, &version, &mut new);
            }
            prepare::validate(res, &new)?;
            if opts.dry_run {
                return Ok(Arc::new(Stored::from_value(&new, old.rv)?));
            }
            check_size(&Stored::from_value(&new, old.rv)?)?;
            match self.store.update(&gr, ns, name, old.rv, new) {
                Ok(stored) => {
                    self.after_write(res, &stored);
                    if stored.deleting && stored.finalizers.is_empty() {
                        return Ok(self.finish_deletion(res, &stored).unwrap_or(stored));
                    }
                    return Ok(stored);
                }
                Err(StoreError::Conflict) if pinned.is_none() => continue,
                Err(e) => return Err(store_err(res, name, e)),
            }
        }
        Err(ApiError::stale(res, name))
    }

    /// DELETE: deletes an object, honouring preconditions, finalizers and propagation. Returns
    /// the object's last state (with `deletionTimestamp` when finalizers keep it).
    pub async fn delete(
        &self,
        caller: Caller,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Arc<Stored>, ApiError> {
        self.draw_fault(caller, false, res, name)?;
        let old = self.get_object(res, ns, name)?;
        if let Some(uid) = &opts.uid
            && *uid != old.uid
        {
            return Err(ApiError::Conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                old.uid
            )));
        }
        if let Some(rv) = &opts.resource_version
            && *rv != old.rv.to_string()
        {
            return Err(ApiError::Conflict(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                old.rv
            )));
        }
        let old_v = old.value()?;
        self.admission
            .admit(
                self,
                Operation::Delete,
                res,
                &res.versions[0].clone(),
                Some(&old_v),
                Value::Null,
                opts.dry_run,
                None,
            )
            .await?;
        if opts.dry_run {
            return Ok(old);
        }
        let expected = opts.resource_version.as_ref().map(|_| old.rv);
        self.delete_now(
            res,
            ns,
            name,
            opts.propagation.unwrap_or_default(),
            expected,
        )
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
                return Err(ApiError::Conflict(format!(
                    "Operation cannot be fulfilled on pods/binding \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    old.uid
                )));
            }
            if let Some(current) = &old.node_name {
                return Err(ApiError::Conflict(format!(
                    "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{current}\""
                )));
            }
            if old.deleting {
                return Err(ApiError::Conflict(format!(
                    "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is being deleted, cannot be assigned to a host"
                )));
            }
            let mut v = old.value()?;
            v["spec"]["nodeName"] = json!(node);
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
        self.delete(caller, &pods, ns, name, &opts)
            .await
            .map(|_| ())
    }
}
