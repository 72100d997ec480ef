//! Deletion and garbage collection through `ownerReferences`, as kube-apiserver plus
//! kube-controller-manager's garbage collector and namespace controller do it:
//!
//! - an object with finalizers only gets `deletionTimestamp`; it goes when the last finalizer
//!   is removed;
//! - **background**: the owner goes now; then each dependent whose owners are all gone is
//!   deleted (dependents with another live owner only lose the dangling reference);
//! - **foreground**: the owner gets `deletionTimestamp` and the `foregroundDeletion`
//!   finalizer, its dependents are deleted (in foreground too), and the owner goes once no
//!   dependent with `blockOwnerDeletion: true` is left;
//! - **orphan**: dependents lose their reference to the owner and stay;
//! - a namespace goes `Terminating`, its content is deleted, and it goes when empty.
//!
//! The collector runs inside the deleting request, on Tokio's blocking pool (not the request's
//! worker), over work lists with a visited set (no recursion: self-references, cycles and chains
//! of 100k dependents are fine), so a cascade is complete when the DELETE returns, except for
//! what finalizers hold back. As kube's collector does, a dependent that has dependents of its
//! own stops blocking its foreground-deleting owners when it starts its own foreground deletion,
//! so a cycle of blocking references cannot wait on itself for ever. Real
//! clusters do this asynchronously; clients cannot rely on either timing. An object written
//! with references only to owners that are gone, one of which the store removed (a controller
//! acting on a stale cache recreates a dependent of a just-deleted owner), is collected right
//! after the write, as the real collector collects it when it finds it. Objects whose owners
//! never existed are not collected (the real collector would; tests use made-up owners).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};

use super::ops::Propagation;
use super::resources::ResourceInfo;
use super::store::{GroupResource, ObjectKey, StoreError, Stored};
use super::{ApiError, ApiServer, now_rfc3339};

/// Most objects one cascade visits before it gives up with an error in the log (a guard against
/// a bug, not a limit anyone should meet: the store holds far fewer objects).
const MAX_GC_STEPS: usize = 10_000_000;

/// The finalizer of a foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";

/// A GC step decided from plain data: what to do with one dependent of a removed owner.
#[derive(Debug, PartialEq, Eq)]
pub enum DependentAction {
    /// Another owner is alive: drop only the reference to the removed owner.
    RemoveReference,
    /// No owner is left: delete the dependent.
    Delete,
}

/// Decides what happens to `dependent` when the owner `gone_uid` is removed, given which of its
/// other owners still exist.
pub fn plan_dependent(
    dependent: &Stored,
    gone_uid: &str,
    alive: impl Fn(&str) -> bool,
) -> DependentAction {
    if dependent
        .owners
        .iter()
        .any(|r| r.uid != gone_uid && alive(&r.uid))
    {
        DependentAction::RemoveReference
    } else {
        DependentAction::Delete
    }
}

/// Whether a foreground-deleting owner still waits for a dependent.
pub fn blocks(dependent: &Stored, owner_uid: &str) -> bool {
    dependent
        .owners
        .iter()
        .any(|r| r.uid == owner_uid && r.block_owner_deletion)
}

impl ApiServer {
    /// Rewrites an object with `f` until the compare-and-swap succeeds (internal writes: no
    /// admission, no faults). `None` when the object is gone.
    fn rewrite(&self, key: &ObjectKey, f: impl Fn(&mut Value)) -> Option<Arc<Stored>> {
        for _ in 0..16 {
            let old = self.store.get(&key.gr, &key.namespace, &key.name)?;
            let mut v = old.value().ok()?;
            f(&mut v);
            match self
                .store
                .update(&key.gr, &key.namespace, &key.name, old.rv, v)
            {
                Ok(s) => return Some(s),
                Err(StoreError::Conflict) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    fn mark_deleting(v: &mut Value, extra_finalizer: Option<&str>) {
        let meta = &mut v["metadata"];
        if meta.get("deletionTimestamp").is_none_or(Value::is_null) {
            meta["deletionTimestamp"] = json!(now_rfc3339());
            meta["deletionGracePeriodSeconds"] = json!(0);
        }
        if let Some(f) = extra_finalizer {
            let list = meta
                .as_object_mut()
                .map(|m| m.entry("finalizers").or_insert_with(|| json!([])));
            if let Some(Value::Array(l)) = list
                && !l.iter().any(|x| x == f)
            {
                l.push(json!(f));
            }
        }
    }

    /// Deletes after admission: propagation, finalizers, removal and the cascade.
    pub(crate) fn delete_now(
        &self,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        policy: Propagation,
        expected_rv: Option<u64>,
    ) -> Result<Arc<Stored>, ApiError> {
        let gr = res.group_resource();
        let key = ObjectKey {
            gr: gr.clone(),
            namespace: ns.to_string(),
            name: name.to_string(),
        };
        if gr == GroupResource::new("", "namespaces") {
            return self.delete_namespace(res, name);
        }
        for _ in 0..16 {
            let old = self.get_object(res, ns, name)?;
            if expected_rv.is_some_and(|e| e != old.rv) {
                return Err(ApiError::stale(res, name));
            }
            let deps = self.store.dependents(&old.uid);
            if policy == Propagation::Orphan {
                for d in &deps {
                    let uid = old.uid.clone();
                    self.rewrite(d, |v| remove_owner_ref(v, &uid));
                }
            }
            if policy == Propagation::Foreground && deps.iter().any(|d| *d != key) {
                let marked = self
                    .rewrite(&key, |v| Self::mark_deleting(v, Some(FOREGROUND)))
                    .ok_or_else(|| ApiError::not_found(res, name))?;
                self.foreground(&key, &old.uid);
                return Ok(self.store.get(&gr, ns, name).unwrap_or(marked));
            }
            if !old.finalizers.is_empty() {
                if old.deleting {
                    return Ok(old);
                }
                let mut v = old.value()?;
                Self::mark_deleting(&mut v, None);
                match self.store.update(&gr, ns, name, old.rv, v) {
                    Ok(s) => return Ok(s),
                    Err(StoreError::Conflict) => continue,
                    Err(e) => return Err(ApiError::Internal(e.to_string())),
                }
            }
            match self.store.remove(&gr, ns, name, Some(old.rv)) {
                Ok(gone) => {
                    self.cascade(VecDeque::from([(gr.clone(), gone.clone())]));
                    return Ok(gone);
                }
                Err(StoreError::Conflict) => continue,
                Err(StoreError::NotFound) => return Err(ApiError::not_found(res, name)),
                Err(e) => return Err(ApiError::Internal(e.to_string())),
            }
        }
        Err(ApiError::stale(res, name))
    }

    /// Collects `stored` (just written) when every owner it names is gone and at least one of
    /// them was removed from this store: the owner's cascade ran before the dependent existed,
    /// so nothing else would ever delete it.
    pub(crate) fn collect_if_orphaned(&self, res: &ResourceInfo, stored: &Stored) {
        if stored.owners.is_empty() || stored.deleting {
            return;
        }
        let mut removed_owner = false;
        for r in &stored.owners {
            if r.uid == stored.uid || self.store.by_uid(&r.uid).is_some() {
                return;
            }
            removed_owner |= self.store.was_removed(&r.uid);
        }
        if !removed_owner {
            return;
        }
        let gr = res.group_resource();
        tracing::debug!(object = %format!("{}/{}", stored.namespace, stored.name), resource = %res.plural, "collecting a dependent whose owners are gone");
        if !stored.finalizers.is_empty() {
            let key = ObjectKey {
                gr,
                namespace: stored.namespace.clone(),
                name: stored.name.clone(),
            };
            self.rewrite(&key, |v| Self::mark_deleting(v, None));
        } else if let Ok(g) =
            self.store
                .remove(&gr, &stored.namespace, &stored.name, Some(stored.rv))
        {
            self.cascade(VecDeque::from([(gr, g)]));
        }
    }

    /// Removes an object whose deletion is pending and whose last finalizer just went.
    pub(crate) fn finish_deletion(
        &self,
        res: &ResourceInfo,
        stored: &Stored,
    ) -> Option<Arc<Stored>> {
        let gr = res.group_resource();
        let gone = self
            .store
            .remove(&gr, &stored.namespace, &stored.name, Some(stored.rv))
            .ok()?;
        self.cascade(VecDeque::from([(gr, gone.clone())]));
        Some(gone)
    }

    /// The foreground deletion of `root` (already marked): walks its dependents breadth first with
    /// a visited set. A dependent with dependents of its own is marked for foreground deletion
    /// too (and stops blocking its deleting owners, see the module docs); a leaf is deleted (or
    /// marked when finalizers hold it); a dependent with another owner that is not being deleted
    /// only loses its references to deleting owners. Then every marked object whose blockers are
    /// gone is removed, deepest first, and the removals cascade.
    fn foreground(&self, root: &ObjectKey, root_uid: &str) {
        let mut visited: HashSet<String> = HashSet::from([root_uid.to_string()]);
        let mut marked: Vec<ObjectKey> = vec![root.clone()];
        let mut removed = VecDeque::new();
        let mut work: VecDeque<ObjectKey> = self.store.dependents(root_uid).into();
        let mut steps = 0usize;
        while let Some(dkey) = work.pop_front() {
            steps += 1;
            if steps > MAX_GC_STEPS {
                tracing::error!("foreground deletion did not converge; stopping");
                break;
            }
            let Some(dep) = self.store.get(&dkey.gr, &dkey.namespace, &dkey.name) else {
                continue;
            };
            if !visited.insert(dep.uid.clone()) {
                continue;
            }
            let deleting_owner = |uid: &str| {
                self.store
                    .by_uid(uid)
                    .and_then(|k| self.store.get(&k.gr, &k.namespace, &k.name))
                    .is_some_and(|o| o.deleting)
            };
            let solid_owner = dep.owners.iter().any(|r| {
                r.uid != dep.uid && self.store.by_uid(&r.uid).is_some() && !deleting_owner(&r.uid)
            });
            if solid_owner {
                self.rewrite(&dkey, |v| {
                    for r in &dep.owners {
                        if r.uid != dep.uid && deleting_owner(&r.uid) {
                            remove_owner_ref(v, &r.uid);
                        }
                    }
                });
                continue;
            }
            let own_deps: Vec<ObjectKey> = self
                .store
                .dependents(&dep.uid)
                .into_iter()
                .filter(|k| *k != dkey)
                .collect();
            if own_deps.is_empty() {
                if !dep.finalizers.is_empty() {
                    if !dep.deleting {
                        self.rewrite(&dkey, |v| Self::mark_deleting(v, None));
                    }
                } else if let Ok(g) = self
                    .store
                    .remove(&dkey.gr, &dkey.namespace, &dkey.name, None)
                {
                    removed.push_back((dkey.gr.clone(), g));
                }
                continue;
            }
            let unblock: Vec<String> = dep
                .owners
                .iter()
                .filter(|r| r.block_owner_deletion && deleting_owner(&r.uid))
                .map(|r| r.uid.clone())
                .collect();
            self.rewrite(&dkey, |v| {
                unblock_owner_refs(v, &unblock);
                Self::mark_deleting(v, Some(FOREGROUND));
            });
            marked.push(dkey.clone());
            work.extend(own_deps);
        }
        self.cascade(removed);
        for key in marked.iter().rev() {
            if let Some(g) = self.check_foreground(key) {
                self.cascade(VecDeque::from([(key.gr.clone(), g)]));
            }
        }
    }

    /// If `key` is in foreground deletion and nothing blocks it any more, drops the finalizer and
    /// removes it when no finalizer is left. Returns the removed object.
    fn check_foreground(&self, key: &ObjectKey) -> Option<Arc<Stored>> {
        let o = self.store.get(&key.gr, &key.namespace, &key.name)?;
        if !o.deleting || !o.finalizers.iter().any(|f| f == FOREGROUND) {
            return None;
        }
        let blocked = self.store.dependents(&o.uid).iter().any(|d| {
            // An object that names itself as owner cannot block its own deletion.
            *d != *key
                && self
                    .store
                    .get(&d.gr, &d.namespace, &d.name)
                    .is_some_and(|dep| blocks(&dep, &o.uid))
        });
        if blocked {
            return None;
        }
        let s = self.rewrite(key, |v| {
            if let Some(Value::Array(l)) = v.pointer_mut("/metadata/finalizers") {
                l.retain(|f| f != FOREGROUND);
            }
        })?;
        if s.finalizers.is_empty() {
            self.store
                .remove(&key.gr, &key.namespace, &key.name, Some(s.rv))
                .ok()
        } else {
            None
        }
    }

    /// Processes removed objects: their dependents, foreground owners waiting on them, and
    /// terminating namespaces that became empty.
    fn cascade(&self, mut queue: VecDeque<(GroupResource, Arc<Stored>)>) {
        let mut steps = 0usize;
        while let Some((gr, gone)) = queue.pop_front() {
            steps += 1;
            if steps > MAX_GC_STEPS {
                tracing::error!("garbage collection cascade did not converge; stopping");
                return;
            }
            if gr == GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions") {
                self.drop_custom_resource(&gone, &mut queue);
            }
            for dkey in self.store.dependents(&gone.uid) {
                let Some(dep) = self.store.get(&dkey.gr, &dkey.namespace, &dkey.name) else {
                    continue;
                };
                match plan_dependent(&dep, &gone.uid, |u| self.store.by_uid(u).is_some()) {
                    DependentAction::RemoveReference => {
                        let uid = gone.uid.clone();
                        self.rewrite(&dkey, |v| remove_owner_ref(v, &uid));
                    }
                    DependentAction::Delete => {
                        if !dep.finalizers.is_empty() {
                            if !dep.deleting {
                                self.rewrite(&dkey, |v| Self::mark_deleting(v, None));
                            }
                        } else if let Ok(g) =
                            self.store
                                .remove(&dkey.gr, &dkey.namespace, &dkey.name, None)
                        {
                            queue.push_back((dkey.gr.clone(), g));
                        }
                    }
                }
            }
            for owner in &gone.owners {
                if let Some(okey) = self.store.by_uid(&owner.uid)
                    && let Some(g) = self.check_foreground(&okey)
                {
                    queue.push_back((okey.gr, g));
                }
            }
            if !gone.namespace.is_empty()
                && let Some(ns) =
                    self.store
                        .get(&GroupResource::new("", "namespaces"), "", &gone.namespace)
                && ns.deleting
                && let Some(g) = self.try_finish_namespace(&gone.namespace)
            {
                queue.push_back((GroupResource::new("", "namespaces"), g));
            }
        }
    }

    /// A CRD was removed: stop serving its resource and delete every object of it.
    fn drop_custom_resource(
        &self,
        crd: &Stored,
        queue: &mut VecDeque<(GroupResource, Arc<Stored>)>,
    ) {
        let Ok(v) = crd.value() else { return };
        let (Some(group), Some(plural)) = (
            v.pointer("/spec/group").and_then(Value::as_str),
            v.pointer("/spec/names/plural").and_then(Value::as_str),
        ) else {
            return;
        };
        let gr = GroupResource::new(group, plural);
        if self.registry.unregister(&gr).is_none() {
            return;
        }
        tracing::info!(resource = %format!("{plural}.{group}"), "custom resource no longer served");
        for o in self.store.list(&gr, None, None, 0, |_| true).items {
            if let Ok(g) = self.store.remove(&gr, &o.namespace, &o.name, None) {
                queue.push_back((gr.clone(), g));
            }
        }
    }

    fn delete_namespace(&self, res: &ResourceInfo, name: &str) -> Result<Arc<Stored>, ApiError> {
        let key = ObjectKey {
            gr: res.group_resource(),
            namespace: String::new(),
            name: name.to_string(),
        };
        let marked = self
            .rewrite(&key, |v| {
                Self::mark_deleting(v, None);
                v["status"] = json!({"phase": "Terminating"});
            })
            .ok_or_else(|| ApiError::not_found(res, name))?;
        for r in self.registry.all().into_iter().filter(|r| r.namespaced) {
            for o in self
                .store
                .list(&r.group_resource(), Some(name), None, 0, |_| true)
                .items
            {
                match self.delete_now(&r, &o.namespace, &o.name, Propagation::Background, None) {
                    Ok(_) | Err(ApiError::NotFound { .. }) => {}
                    Err(e) => {
                        tracing::warn!(object = %o.name, error = %e, "namespace content deletion")
                    }
                }
            }
        }
        if let Some(g) = self.try_finish_namespace(name) {
            return Ok(g);
        }
        Ok(self.store.get(&key.gr, "", name).unwrap_or(marked))
    }

    /// Removes a terminating namespace once it holds nothing.
    fn try_finish_namespace(&self, name: &str) -> Option<Arc<Stored>> {
        let empty = self
            .registry
            .all()
            .iter()
            .filter(|r| r.namespaced)
            .all(|r| {
                self.store
                    .list(&r.group_resource(), Some(name), None, 1, |_| true)
                    .items
                    .is_empty()
            });
        if !empty {
            return None;
        }
        self.store
            .remove(&GroupResource::new("", "namespaces"), "", name, None)
            .ok()
    }
}

/// Sets `blockOwnerDeletion: false` on the ownerReferences to the owners in `uids`.
pub fn unblock_owner_refs(v: &mut Value, uids: &[String]) {
    if let Some(Value::Array(refs)) = v.pointer_mut("/metadata/ownerReferences") {
        for r in refs.iter_mut() {
            let hit = r
                .get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| uids.iter().any(|x| x == u));
            if hit && let Some(o) = r.as_object_mut() {
                o.insert("blockOwnerDeletion".into(), json!(false));
            }
        }
    }
}

/// Drops the ownerReferences to `uid` from an object.
pub fn remove_owner_ref(v: &mut Value, uid: &str) {
    if let Some(Value::Array(refs)) = v.pointer_mut("/metadata/ownerReferences") {
        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
        if refs.is_empty()
            && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.remove("ownerReferences");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(owners: Value) -> Stored {
        Stored::from_value(
            &json!({"metadata": {"name": "d", "ownerReferences": owners}}),
            1,
        )
        .unwrap()
    }

    #[test]
    fn a_dependent_with_another_live_owner_only_loses_the_reference() {
        let d = dep(json!([{"uid": "a"}, {"uid": "b"}]));
        assert_eq!(
            plan_dependent(&d, "a", |u| u == "b"),
            DependentAction::RemoveReference
        );
        assert_eq!(plan_dependent(&d, "a", |_| false), DependentAction::Delete);
        let only = dep(json!([{"uid": "a"}]));
        assert_eq!(
            plan_dependent(&only, "a", |_| true),
            DependentAction::Delete
        );
    }

    #[test]
    fn only_block_owner_deletion_blocks() {
        let d = dep(json!([{"uid": "a", "blockOwnerDeletion": true}, {"uid": "b"}]));
        assert!(blocks(&d, "a"));
        assert!(!blocks(&d, "b"));
    }

    #[test]
    fn removing_the_last_reference_drops_the_field() {
        let mut v = json!({"metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b"}]}});
        remove_owner_ref(&mut v, "a");
        assert_eq!(v["metadata"]["ownerReferences"], json!([{"uid": "b"}]));
        remove_owner_ref(&mut v, "b");
        assert!(v["metadata"].get("ownerReferences").is_none());
    }
}
