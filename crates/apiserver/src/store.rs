//! The object store: schemaless JSON objects per group/resource, keyed by namespace and name,
//! with one global, strictly increasing `resourceVersion` and a bounded event history per
//! resource for watches.
//!
//! Objects are kept serialized (`Bytes`) next to the few parsed fields that selectors, the
//! garbage collector and watches need ([`Stored`]). GET, LIST and watch events are written
//! from those bytes without re-serializing, which is what makes a LIST of 100k pods or a watch
//! fan-out to many clients cheap. Writes parse the old object, compute the new one in pure
//! code, and commit with a compare-and-swap on the resourceVersion.
//!
//! Locking: each resource has its own `RwLock`. The global counter is bumped while that lock is
//! held for writing, so within one resource event order equals resourceVersion order, and a
//! LIST (read lock + counter load) sees every write of that resource with a smaller version.
//! The uid/owner index is a separate mutex, only ever taken after a table lock.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use axum::body::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::persist::{Persist, PersistError};

/// Storage key of a resource: API group and plural name (versions share storage).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// API group, `""` for core.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// Builds a key.
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

/// Where an object lives: resource, namespace (`""` when cluster scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The resource.
    pub gr: GroupResource,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// One `metadata.ownerReferences` entry, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRef {
    /// Owner uid (the identity the garbage collector trusts).
    pub uid: String,
    /// Owner `apiVersion`.
    pub api_version: String,
    /// Owner kind.
    pub kind: String,
    /// Owner name.
    pub name: String,
    /// `controller: true`.
    pub controller: bool,
    /// `blockOwnerDeletion: true`.
    pub block_owner_deletion: bool,
}

/// A stored object: its JSON bytes plus the fields selectors, watches and the GC read.
#[derive(Debug)]
pub struct Stored {
    /// Namespace (empty when cluster scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`.
    pub rv: u64,
    /// `metadata.labels`, sorted by key.
    pub labels: Vec<(String, String)>,
    /// `metadata.ownerReferences`.
    pub owners: Vec<OwnerRef>,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `spec.schedulerName`.
    pub scheduler_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// The whole object as JSON.
    pub json: Bytes,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str()
}

impl Stored {
    /// Parses the indexed fields out of `value` and serializes it.
    pub fn from_value(value: &Value, rv: u64) -> Result<Self, serde_json::Error> {
        // `Bytes` keeps the whole buffer: without the shrink a stored object would carry the
        // spare capacity its serialization grew into.
        let mut json = serde_json::to_vec(value)?;
        json.shrink_to_fit();
        Ok(Self::indexed(value, rv, Bytes::from(json)))
    }

    /// The indexed fields of `value`, next to its serialized form `json`.
    fn indexed(value: &Value, rv: u64, json: Bytes) -> Self {
        let meta = value.get("metadata");
        let mut labels: Vec<(String, String)> = meta
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        labels.sort();
        let owners = meta
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_array)
            .map(|a| a.iter().map(parse_owner).collect())
            .unwrap_or_default();
        let finalizers = super::string_list(meta.and_then(|m| m.get("finalizers")));
        Self {
            namespace: str_at(value, &["metadata", "namespace"])
                .unwrap_or_default()
                .to_string(),
            name: str_at(value, &["metadata", "name"])
                .unwrap_or_default()
                .to_string(),
            uid: str_at(value, &["metadata", "uid"])
                .unwrap_or_default()
                .to_string(),
            rv,
            labels,
            owners,
            finalizers,
            deleting: meta
                .and_then(|m| m.get("deletionTimestamp"))
                .is_some_and(|d| !d.is_null()),
            node_name: str_at(value, &["spec", "nodeName"]).map(str::to_string),
            scheduler_name: str_at(value, &["spec", "schedulerName"]).map(str::to_string),
            phase: str_at(value, &["status", "phase"]).map(str::to_string),
            json,
        }
    }

    /// The object as a JSON value.
    pub fn value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    /// The value of a label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.labels[i].1.as_str())
    }
}

/// A written object made ready before its resourceVersion is known: serialized with an empty
/// `metadata.resourceVersion`, the place of the version in the bytes remembered, and its
/// indexed fields parsed. Serializing is most of a write's cost; done here, outside the
/// table's lock, writers of one resource no longer wait for each other's serialization, and
/// under the lock the version is spliced into the bytes.
struct Unversioned {
    stored: Stored,
    bytes: Vec<u8>,
    /// Offset of the version (between the quotes of `"resourceVersion":""`); `None` when the
    /// object has no `metadata` object, so no version is written into it.
    slot: Option<usize>,
}

impl Unversioned {
    fn new(mut value: Value) -> Result<Self, serde_json::Error> {
        // The same insertion `set_rv` makes, so keys keep the order they would have.
        let has_meta = match value.get_mut("metadata").and_then(Value::as_object_mut) {
            Some(m) => {
                m.insert("resourceVersion".into(), Value::String(String::new()));
                true
            }
            None => false,
        };
        let (bytes, slot) = if has_meta {
            encode_with_version_slot(&value)?
        } else {
            (serde_json::to_vec(&value)?, None)
        };
        Ok(Self {
            stored: Stored::indexed(&value, 0, Bytes::new()),
            bytes,
            slot,
        })
    }

    /// The object at version `rv`: the bytes `serde_json::to_vec` gives after [`set_rv`].
    fn at(self, rv: u64) -> Stored {
        let Self {
            mut stored,
            bytes,
            slot,
        } = self;
        let json = match slot {
            Some(at) => {
                let digits = rv.to_string();
                let mut out = Vec::with_capacity(bytes.len() + digits.len());
                out.extend_from_slice(&bytes[..at]);
                out.extend_from_slice(digits.as_bytes());
                out.extend_from_slice(&bytes[at..]);
                out
            }
            None => bytes,
        };
        stored.rv = rv;
        stored.json = Bytes::from(json);
        stored
    }
}

/// `serde_json::to_vec(value)` for an object whose `metadata` is an object holding
/// `resourceVersion: ""`, and the offset between that value's quotes.
fn encode_with_version_slot(value: &Value) -> Result<(Vec<u8>, Option<usize>), serde_json::Error> {
    let Some(top) = value.as_object() else {
        return Ok((serde_json::to_vec(value)?, None));
    };
    let mut out = Vec::with_capacity(1024);
    let mut slot = None;
    out.push(b'{');
    for (i, (k, v)) in top.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, k)?;
        out.push(b':');
        match v {
            Value::Object(meta) if k == "metadata" => {
                out.push(b'{');
                for (j, (mk, mv)) in meta.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    serde_json::to_writer(&mut out, mk)?;
                    out.push(b':');
                    if mk == "resourceVersion" && mv.as_str() == Some("") {
                        out.push(b'"');
                        slot = Some(out.len());
                        out.push(b'"');
                    } else {
                        serde_json::to_writer(&mut out, mv)?;
                    }
                }
                out.push(b'}');
            }
            _ => serde_json::to_writer(&mut out, v)?,
        }
    }
    out.push(b'}');
    Ok((out, slot))
}

fn parse_owner(v: &Value) -> OwnerRef {
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let b = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    OwnerRef {
        uid: s("uid"),
        api_version: s("apiVersion"),
        kind: s("kind"),
        name: s("name"),
        controller: b("controller"),
        block_owner_deletion: b("blockOwnerDeletion"),
    }
}

/// Watch event types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change of one resource. `prev` is the object before the change (for MODIFIED and
/// DELETED), so a filtered watch can turn "no longer matches" into DELETED and "now matches"
/// into ADDED, and a LIST at an older version can see the object as it was.
#[derive(Clone, Debug)]
pub struct Event {
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for DELETED: the last state, at the deletion's version).
    pub obj: Arc<Stored>,
    /// The object before a MODIFIED or DELETED change.
    pub prev: Option<Arc<Stored>>,
}

/// Store-level failures; the REST layer turns them into `Status` objects.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such object.
    #[error("not found")]
    NotFound,
    /// The name is taken.
    #[error("already exists")]
    AlreadyExists,
    /// The object changed since the caller read it.
    #[error("the object has been modified")]
    Conflict,
    /// A watch asked for a version older than the retained history.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// Requested version.
        requested: u64,
        /// Oldest version still available.
        oldest: u64,
    },
    /// The object could not be serialized.
    #[error("encoding: {0}")]
    Encode(#[from] serde_json::Error),
    /// The data file (`--embedded-data`) refused the write.
    #[error("writing the embedded data: {0}")]
    Persist(String),
    /// The serialized object is larger than the store accepts.
    #[error("object is {0} bytes, over the limit of {limit}", limit = super::MAX_OBJECT_BYTES)]
    TooLarge(usize),
}

type NsName = (String, String);

#[derive(Debug)]
struct Table {
    objects: BTreeMap<NsName, Arc<Stored>>,
    history: VecDeque<Arc<Event>>,
    /// Every event with a version above `floor` is in `history`.
    floor: u64,
    tx: broadcast::Sender<Arc<Event>>,
}

/// The start of a watch: the events to send first, then the live receiver.
pub struct WatchStart {
    /// Replayed history (or synthetic ADDED events for a watch without a version).
    pub initial: Vec<Arc<Event>>,
    /// Live events after `initial`.
    pub rx: broadcast::Receiver<Arc<Event>>,
    /// The resourceVersion the watch is current at after `initial`.
    pub rv: u64,
}

/// Result of a LIST.
pub struct ListPage {
    /// Matching objects in key order.
    pub items: Vec<Arc<Stored>>,
    /// The store's version at the time of the list.
    pub rv: u64,
    /// Key of the last returned item when more remain (the continue point).
    pub next: Option<NsName>,
    /// How many matching items remain after this page (when `next` is set).
    pub remaining: usize,
}

#[derive(Debug, Default)]
struct Index {
    /// uid → where the object lives.
    uids: HashMap<String, ObjectKey>,
    /// owner uid → dependents.
    dependents: HashMap<String, BTreeSet<ObjectKey>>,
    /// The uids of the most recently removed objects (at most [`REMOVED_UIDS_KEPT`]), oldest
    /// first, so the collector can tell an owner that went from one that never existed.
    removed: VecDeque<String>,
    removed_set: HashSet<String>,
}

/// How many removed uids the store remembers. A controller acting on a stale cache recreates a
/// dependent within seconds of its owner going; this covers far more removals than that.
pub const REMOVED_UIDS_KEPT: usize = 100_000;

/// The in-memory store, written through to a [`Persist`] file when it has one.
#[derive(Debug)]
pub struct Store {
    rv: AtomicU64,
    tables: RwLock<HashMap<GroupResource, Arc<RwLock<Table>>>>,
    index: Mutex<Index>,
    history_cap: usize,
    persist: Option<Arc<Persist>>,
    /// The version the store started at: no watch history before it (a loaded store's).
    base_rv: u64,
}

fn lock_read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
fn lock_write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// Sets `metadata.resourceVersion`.
fn set_rv(value: &mut Value, rv: u64) {
    if let Some(m) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Store {
    /// An empty store keeping `history_cap` events per resource for watches that resume.
    pub fn new(history_cap: usize) -> Self {
        Self {
            rv: AtomicU64::new(1),
            tables: RwLock::new(HashMap::new()),
            index: Mutex::new(Index::default()),
            history_cap: history_cap.max(16),
            persist: None,
            base_rv: 0,
        }
    }

    /// A store holding what `persist` holds, writing every change through to it. An object
    /// that cannot be read back is skipped with a warning. Returns the store and how many
    /// objects it loaded.
    pub fn with_persist(
        history_cap: usize,
        persist: Arc<Persist>,
    ) -> Result<(Self, usize), PersistError> {
        let (saved_rv, objects) = persist.load()?;
        let mut store = Self::new(history_cap);
        let mut top = saved_rv.max(1);
        let mut loaded = 0;
        for o in objects {
            let value: Value = match serde_json::from_slice(&o.json) {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(object = %format!("{}/{}/{}", o.gr.resource, o.namespace, o.name), error = %e, "embedded data: unreadable object skipped");
                    continue;
                }
            };
            let rv = str_at(&value, &["metadata", "resourceVersion"])
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(saved_rv);
            let Ok(stored) = Stored::from_value(&value, rv) else {
                continue;
            };
            top = top.max(rv);
            let stored = Arc::new(stored);
            let t = store.table(&o.gr);
            lock_write(&t)
                .objects
                .insert((o.namespace.clone(), o.name.clone()), stored.clone());
            store.reindex(
                &ObjectKey {
                    gr: o.gr,
                    namespace: o.namespace,
                    name: o.name,
                },
                None,
                Some(&stored),
            );
            loaded += 1;
        }
        store.rv = AtomicU64::new(top);
        store.base_rv = top;
        for t in lock_read(&store.tables).values() {
            lock_write(t).floor = top;
        }
        store.persist = Some(persist);
        Ok((store, loaded))
    }

    /// The latest resourceVersion handed out.
    pub fn current_rv(&self) -> u64 {
        self.rv.load(Ordering::SeqCst)
    }

    fn table(&self, gr: &GroupResource) -> Arc<RwLock<Table>> {
        if let Some(t) = lock_read(&self.tables).get(gr) {
            return t.clone();
        }
        let mut w = lock_write(&self.tables);
        w.entry(gr.clone())
            .or_insert_with(|| {
                let (tx, _) = broadcast::channel(self.history_cap.clamp(1024, 16384));
                Arc::new(RwLock::new(Table {
                    objects: BTreeMap::new(),
                    history: VecDeque::new(),
                    floor: self.base_rv,
                    tx,
                }))
            })
            .clone()
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, t: &mut Table, ev: Event) {
        let ev = Arc::new(ev);
        t.history.push_back(ev.clone());
        while t.history.len() > self.history_cap {
            if let Some(old) = t.history.pop_front() {
                t.floor = old.obj.rv;
            }
        }
        // No receivers is fine: nobody watches this resource.
        let _ = t.tx.send(ev);
    }

    fn reindex(&self, key: &ObjectKey, old: Option<&Stored>, new: Option<&Stored>) {
        let old_owners: BTreeSet<&str> = old
            .map(|o| o.owners.iter().map(|r| r.uid.as_str()).collect())
            .unwrap_or_default();
        let new_owners: BTreeSet<&str> = new
            .map(|o| o.owners.iter().map(|r| r.uid.as_str()).collect())
            .unwrap_or_default();
        if old.is_some() == new.is_some() && old_owners == new_owners {
            return;
        }
        let mut idx = self.index();
        match (old, new) {
            (None, Some(n)) => {
                idx.uids.insert(n.uid.clone(), key.clone());
            }
            (Some(o), None) => {
                idx.uids.remove(&o.uid);
                if idx.removed_set.insert(o.uid.clone()) {
                    idx.removed.push_back(o.uid.clone());
                }
                while idx.removed.len() > REMOVED_UIDS_KEPT {
                    if let Some(u) = idx.removed.pop_front() {
                        idx.removed_set.remove(&u);
                    }
                }
            }
            _ => {}
        }
        for u in old_owners.difference(&new_owners) {
            if let Some(set) = idx.dependents.get_mut(*u) {
                set.remove(key);
                if set.is_empty() {
                    idx.dependents.remove(*u);
                }
            }
        }
        for u in new_owners.difference(&old_owners) {
            idx.dependents
                .entry(u.to_string())
                .or_default()
                .insert(key.clone());
        }
    }

    /// The object, if stored.
    pub fn get(&self, gr: &GroupResource, ns: &str, name: &str) -> Option<Arc<Stored>> {
        let t = self.table(gr);
        let t = lock_read(&t);
        t.objects.get(&(ns.to_string(), name.to_string())).cloned()
    }

    /// Where the object with this uid lives, if it exists.
    pub fn by_uid(&self, uid: &str) -> Option<ObjectKey> {
        self.index().uids.get(uid).cloned()
    }

    /// Whether an object with this uid was removed from the store (within the last
    /// [`REMOVED_UIDS_KEPT`] removals).
    pub fn was_removed(&self, uid: &str) -> bool {
        self.index().removed_set.contains(uid)
    }

    /// The objects that name `owner_uid` in their ownerReferences.
    pub fn dependents(&self, owner_uid: &str) -> Vec<ObjectKey> {
        self.index()
            .dependents
            .get(owner_uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Stores a new object. `value` gets its resourceVersion set here.
    pub fn create(&self, gr: &GroupResource, value: Value) -> Result<Arc<Stored>, StoreError> {
        let ns = str_at(&value, &["metadata", "namespace"])
            .unwrap_or_default()
            .to_string();
        let name = str_at(&value, &["metadata", "name"])
            .unwrap_or_default()
            .to_string();
        let key = (ns, name);
        let obj = Unversioned::new(value)?;
        let t = self.table(gr);
        let mut t = lock_write(&t);
        if t.objects.contains_key(&key) {
            return Err(StoreError::AlreadyExists);
        }
        self.write(&mut t, gr, key, obj, None)
    }

    /// The common end of [`Store::create`] and [`Store::update`], under the table's write
    /// lock: stamp a new resourceVersion, check the size, store, reindex, publish the event
    /// (`Added` without `old`, `Modified` with it).
    fn write(
        &self,
        t: &mut Table,
        gr: &GroupResource,
        key: (String, String),
        obj: Unversioned,
        old: Option<Arc<Stored>>,
    ) -> Result<Arc<Stored>, StoreError> {
        // A version burned by a refused write leaves a gap; versions only need to increase.
        let rv = self.rv.fetch_add(1, Ordering::SeqCst) + 1;
        let stored = Arc::new(obj.at(rv));
        if stored.json.len() > super::MAX_OBJECT_BYTES {
            return Err(StoreError::TooLarge(stored.json.len()));
        }
        // On disk first: a write that cannot be kept is refused, not served and then lost.
        if let Some(p) = &self.persist {
            p.put(gr, &key.0, &key.1, &stored.json, rv)
                .map_err(|e| StoreError::Persist(tephra_report::report(&e).to_string()))?;
        }
        t.objects.insert(key.clone(), stored.clone());
        self.reindex(
            &ObjectKey {
                gr: gr.clone(),
                namespace: key.0,
                name: key.1,
            },
            old.as_deref(),
            Some(&stored),
        );
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.publish(
            t,
            Event {
                kind,
                obj: stored.clone(),
                prev: old,
            },
        );
        Ok(stored)
    }

    /// Replaces an object if its resourceVersion is still `expected_rv`.
    pub fn update(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        expected_rv: u64,
        value: Value,
    ) -> Result<Arc<Stored>, StoreError> {
        let obj = Unversioned::new(value)?;
        let t = self.table(gr);
        let mut t = lock_write(&t);
        let key = (ns.to_string(), name.to_string());
        let old = t.objects.get(&key).cloned().ok_or(StoreError::NotFound)?;
        if old.rv != expected_rv {
            return Err(StoreError::Conflict);
        }
        self.write(&mut t, gr, key, obj, Some(old))
    }

    /// Removes an object (if `expected_rv` is given, only at that version). The returned object
    /// carries the deletion's resourceVersion, as kube-apiserver reports it in DELETED events.
    pub fn remove(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        expected_rv: Option<u64>,
    ) -> Result<Arc<Stored>, StoreError> {
        let t = self.table(gr);
        let mut t = lock_write(&t);
        let key = (ns.to_string(), name.to_string());
        let old = t.objects.get(&key).cloned().ok_or(StoreError::NotFound)?;
        if expected_rv.is_some_and(|e| e != old.rv) {
            return Err(StoreError::Conflict);
        }
        let rv = self.rv.fetch_add(1, Ordering::SeqCst) + 1;
        let mut value = old.value()?;
        set_rv(&mut value, rv);
        let stored = Arc::new(Stored::from_value(&value, rv)?);
        if let Some(p) = &self.persist {
            p.delete(gr, &key.0, &key.1, rv)
                .map_err(|e| StoreError::Persist(tephra_report::report(&e).to_string()))?;
        }
        t.objects.remove(&key);
        self.reindex(
            &ObjectKey {
                gr: gr.clone(),
                namespace: key.0,
                name: key.1,
            },
            Some(&old),
            None,
        );
        self.publish(
            &mut t,
            Event {
                kind: EventType::Deleted,
                obj: stored.clone(),
                prev: Some(old),
            },
        );
        Ok(stored)
    }

    /// Lists objects of a resource in key order, optionally in one namespace, after a continue
    /// key, at most `limit` (0 = all), keeping those `keep` accepts: the latest state.
    pub fn list(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        after: Option<&NsName>,
        limit: usize,
        keep: impl Fn(&Stored) -> bool,
    ) -> ListPage {
        let t = self.table(gr);
        let t = lock_read(&t);
        let rv = self.current_rv();
        Self::page(&t, rv, &BTreeMap::new(), ns, after, limit, keep)
    }

    /// [`Store::list`] as the resource was at version `at` (rebuilt from the history), or
    /// [`StoreError::Expired`] when that part of the history is gone, as etcd answers a read at
    /// a compacted revision. A version at or above the latest lists the latest state.
    pub fn list_at(
        &self,
        gr: &GroupResource,
        ns: Option<&str>,
        after: Option<&NsName>,
        limit: usize,
        at: u64,
        keep: impl Fn(&Stored) -> bool,
    ) -> Result<ListPage, StoreError> {
        let t = self.table(gr);
        let t = lock_read(&t);
        let current = self.current_rv();
        if at >= current {
            return Ok(Self::page(
                &t,
                current,
                &BTreeMap::new(),
                ns,
                after,
                limit,
                keep,
            ));
        }
        let past = Self::changed_since(&t, at)?;
        Ok(Self::page(&t, at, &past, ns, after, limit, keep))
    }

    /// One page of a table at version `rv`: today's objects with the ones in `past` (changed
    /// since `rv`) replaced by what they were then, or left out when they did not exist yet.
    fn page(
        t: &Table,
        rv: u64,
        past: &BTreeMap<NsName, Option<Arc<Stored>>>,
        ns: Option<&str>,
        after: Option<&NsName>,
        limit: usize,
        keep: impl Fn(&Stored) -> bool,
    ) -> ListPage {
        use std::ops::Bound;
        let lower = match (after, ns) {
            (Some(a), _) => Bound::Excluded(a.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        // Without changes this is the plain range, with no copying.
        let objects: Box<dyn Iterator<Item = (&NsName, &Arc<Stored>)>> = if past.is_empty() {
            Box::new(t.objects.range((lower, Bound::Unbounded)))
        } else {
            let mut merged: BTreeMap<&NsName, &Arc<Stored>> = t
                .objects
                .range((lower.clone(), Bound::Unbounded))
                .filter(|(k, _)| !past.contains_key(*k))
                .collect();
            merged.extend(
                past.range((lower, Bound::Unbounded))
                    .filter_map(|(k, v)| v.as_ref().map(|v| (k, v))),
            );
            Box::new(merged.into_iter())
        };
        let mut items = Vec::new();
        let mut next = None;
        let mut remaining = 0;
        for ((ons, _), obj) in objects {
            if let Some(ns) = ns
                && ons.as_str() != ns
            {
                if ons.as_str() > ns {
                    break;
                }
                continue;
            }
            if !keep(obj) {
                continue;
            }
            if limit > 0 && items.len() == limit {
                if next.is_none() {
                    let last: &Arc<Stored> = &items[items.len() - 1];
                    next = Some((last.namespace.clone(), last.name.clone()));
                }
                remaining += 1;
                continue;
            }
            items.push(obj.clone());
        }
        ListPage {
            items,
            rv,
            next,
            remaining,
        }
    }

    /// The objects of a table changed after version `at`, each as it was at `at` (`None`: it
    /// did not exist yet). The first change after `at` tells: ADDED means absent before,
    /// MODIFIED and DELETED carry the object before.
    fn changed_since(
        t: &Table,
        at: u64,
    ) -> Result<BTreeMap<NsName, Option<Arc<Stored>>>, StoreError> {
        if at < t.floor {
            return Err(StoreError::Expired {
                requested: at,
                oldest: t.floor,
            });
        }
        let start = t.history.partition_point(|e| e.obj.rv <= at);
        let mut past = BTreeMap::new();
        for ev in t.history.iter().skip(start) {
            let key = (ev.obj.namespace.clone(), ev.obj.name.clone());
            past.entry(key).or_insert_with(|| match ev.kind {
                EventType::Added => None,
                EventType::Modified | EventType::Deleted => ev.prev.clone(),
            });
        }
        Ok(past)
    }

    /// Number of objects of a resource (all namespaces).
    pub fn count(&self, gr: &GroupResource) -> usize {
        let t = self.table(gr);
        lock_read(&t).objects.len()
    }

    /// Starts a watch. `from = None` (resourceVersion unset or "0") starts with a synthetic
    /// ADDED event for every current object; `Some(rv)` replays history after `rv`, or fails
    /// with [`StoreError::Expired`] when that part of history is gone.
    pub fn watch(&self, gr: &GroupResource, from: Option<u64>) -> Result<WatchStart, StoreError> {
        let t = self.table(gr);
        let t = lock_read(&t);
        let rx = t.tx.subscribe();
        let rv = self.current_rv();
        match from {
            None => Ok(WatchStart {
                initial: t
                    .objects
                    .values()
                    .map(|o| {
                        Arc::new(Event {
                            kind: EventType::Added,
                            obj: o.clone(),
                            prev: None,
                        })
                    })
                    .collect(),
                rx,
                rv,
            }),
            Some(from) => {
                if from < t.floor {
                    return Err(StoreError::Expired {
                        requested: from,
                        oldest: t.floor,
                    });
                }
                let start = t.history.partition_point(|e| e.obj.rv <= from);
                Ok(WatchStart {
                    initial: t.history.iter().skip(start).cloned().collect(),
                    rx,
                    rv: rv.max(from),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, labels: Value) -> Value {
        json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":"default","uid":format!("uid-{name}"),"labels":labels},"spec":{"nodeName":"n1"}})
    }

    fn pods() -> GroupResource {
        GroupResource::new("", "pods")
    }

    #[test]
    fn versions_increase_and_are_written_into_the_object() {
        let s = Store::new(100);
        let a = s.create(&pods(), pod("a", json!({}))).unwrap();
        let b = s.create(&pods(), pod("b", json!({}))).unwrap();
        assert!(b.rv > a.rv);
        assert_eq!(
            a.value().unwrap()["metadata"]["resourceVersion"],
            a.rv.to_string()
        );
        assert_eq!(a.node_name.as_deref(), Some("n1"));
        assert!(matches!(
            s.create(&pods(), pod("a", json!({}))),
            Err(StoreError::AlreadyExists)
        ));
    }

    #[test]
    fn versions_are_spliced_into_the_bytes_serde_json_writes() {
        let cases = [
            pod("a", json!({"x": "1", "y": "\"quoted\" \u{1}"})),
            json!({"metadata": {"name": "b", "resourceVersion": "7", "annotations": {"resourceVersion": ""}},
                   "spec": {"metadata": {"resourceVersion": ""}}, "list": [1, 2.5, null, true]}),
            json!({"kind": "X", "metadata": {}}),
            json!({"kind": "NoMeta"}),
            json!({"metadata": "not an object"}),
        ];
        for value in cases {
            let mut expected = value.clone();
            set_rv(&mut expected, 123_456);
            let stored = Unversioned::new(value).unwrap().at(123_456);
            assert_eq!(
                std::str::from_utf8(&stored.json).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
            assert_eq!(stored.rv, 123_456);
        }
    }

    #[test]
    fn update_is_compare_and_swap_on_the_version() {
        let s = Store::new(100);
        let a = s.create(&pods(), pod("a", json!({}))).unwrap();
        let a2 = s
            .update(&pods(), "default", "a", a.rv, pod("a", json!({"x":"1"})))
            .unwrap();
        assert_eq!(a2.label("x"), Some("1"));
        assert!(matches!(
            s.update(&pods(), "default", "a", a.rv, pod("a", json!({}))),
            Err(StoreError::Conflict)
        ));
    }

    #[test]
    fn list_pages_by_key_and_filters() {
        let s = Store::new(100);
        for i in 0..5 {
            s.create(&pods(), pod(&format!("p{i}"), json!({"i": i.to_string()})))
                .unwrap();
        }
        let page = s.list(&pods(), Some("default"), None, 2, |_| true);
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.remaining, 3);
        let next = page.next.unwrap();
        let page2 = s.list(&pods(), Some("default"), Some(&next), 0, |_| true);
        let names: Vec<_> = page2.items.iter().map(|o| o.name.clone()).collect();
        assert_eq!(names, ["p2", "p3", "p4"]);
        let odd = s.list(&pods(), None, None, 0, |o| o.label("i") == Some("3"));
        assert_eq!(odd.items.len(), 1);
        assert!(
            s.list(&pods(), Some("other"), None, 0, |_| true)
                .items
                .is_empty()
        );
    }

    #[test]
    fn watch_replays_history_after_a_version_and_expires_old_ones() {
        let s = Store::new(16);
        let first = s.create(&pods(), pod("p0", json!({}))).unwrap();
        for i in 1..40 {
            s.create(&pods(), pod(&format!("p{i}"), json!({}))).unwrap();
        }
        assert!(matches!(
            s.watch(&pods(), Some(first.rv)),
            Err(StoreError::Expired { .. })
        ));
        let recent = s.current_rv() - 3;
        let w = s.watch(&pods(), Some(recent)).unwrap();
        assert_eq!(w.initial.len(), 3);
        let all = s.watch(&pods(), None).unwrap();
        assert_eq!(all.initial.len(), 40);
    }

    #[test]
    fn removal_reports_the_deletion_version_and_updates_the_owner_index() {
        let s = Store::new(100);
        let mut child = pod("c", json!({}));
        child["metadata"]["ownerReferences"] =
            json!([{"uid":"owner-1","apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs"}]);
        let c = s.create(&pods(), child).unwrap();
        assert_eq!(s.dependents("owner-1").len(), 1);
        assert!(s.by_uid("uid-c").is_some());
        let gone = s.remove(&pods(), "default", "c", None).unwrap();
        assert!(gone.rv > c.rv);
        assert!(s.dependents("owner-1").is_empty());
        assert!(s.by_uid("uid-c").is_none());
    }
}
