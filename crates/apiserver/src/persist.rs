//! `--embedded-data DIR`: the store's objects in one redb file, written through on every change
//! and read back at start, so a restarted embedded API finds the jobs, queues and pods it had.
//!
//! ```text
//!  Store::write / Store::remove ──► Persist::put / Persist::delete (one ACID commit each)
//!                                      │  objects: "group/resource/namespace/name" → JSON
//!                                      │  meta:    "rv" → the last resourceVersion handed out
//!  Store::with_persist ◄── Persist::load (every object, and the version to go on from)
//! ```
//!
//! Watch history is not kept: a client resuming a watch from before the restart gets 410 Gone
//! and lists again, as after an etcd compaction.

use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::store::GroupResource;

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const RV: &str = "rv";
/// The file inside the data folder.
pub const FILE_NAME: &str = "objects.redb";

/// Errors opening, reading or writing the data file.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The folder cannot be made.
    #[error("creating {path}: {source}")]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file cannot be opened (another process holds it, or it is not a redb file).
    #[error("opening {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: redb::DatabaseError,
    },
    /// A read or a commit failed.
    #[error("embedded data: {0}")]
    Db(#[from] redb::Error),
}

/// The data file of one embedded API.
#[derive(Debug)]
pub struct Persist {
    db: Database,
    path: PathBuf,
}

/// One stored object as read back: where it lives and its JSON.
#[derive(Debug)]
pub struct Loaded {
    /// Its resource.
    pub gr: GroupResource,
    /// Its namespace (empty when cluster scoped).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The object.
    pub json: Vec<u8>,
}

fn key(gr: &GroupResource, ns: &str, name: &str) -> String {
    // None of the four may hold a `/` (DNS names, resource plurals, API groups).
    format!("{}/{}/{ns}/{name}", gr.group, gr.resource)
}

fn parse_key(k: &str) -> Option<(GroupResource, String, String)> {
    let mut parts = k.splitn(4, '/');
    let (group, resource, ns, name) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    Some((GroupResource::new(group, resource), ns.into(), name.into()))
}

fn db<E: Into<redb::Error>>(e: E) -> PersistError {
    PersistError::Db(e.into())
}

impl Persist {
    /// Opens (or creates) `dir/objects.redb`.
    pub fn open(dir: &Path) -> Result<Self, PersistError> {
        std::fs::create_dir_all(dir).map_err(|source| PersistError::Folder {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(FILE_NAME);
        let db = Database::create(&path).map_err(|source| PersistError::Open {
            path: path.clone(),
            source,
        })?;
        Ok(Self { db, path })
    }

    /// The data file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every object, and the last resourceVersion handed out (0 for a new file).
    pub fn load(&self) -> Result<(u64, Vec<Loaded>), PersistError> {
        let tx = self.db.begin_read().map_err(db)?;
        let rv = match tx.open_table(META) {
            Ok(t) => t.get(RV).map_err(db)?.map_or(0, |v| v.value()),
            Err(redb::TableError::TableDoesNotExist(_)) => 0,
            Err(e) => return Err(db(e)),
        };
        let table = match tx.open_table(OBJECTS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok((rv, Vec::new())),
            Err(e) => return Err(db(e)),
        };
        let mut out = Vec::new();
        for entry in table.iter().map_err(db)? {
            let (k, v) = entry.map_err(db)?;
            match parse_key(k.value()) {
                Some((gr, namespace, name)) => out.push(Loaded {
                    gr,
                    namespace,
                    name,
                    json: v.value().to_vec(),
                }),
                None => tracing::warn!(
                    key = k.value(),
                    "embedded data: a key that names no object; skipped"
                ),
            }
        }
        Ok((rv, out))
    }

    /// Stores the object's JSON at version `rv` (one durable commit).
    pub fn put(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        json: &[u8],
        rv: u64,
    ) -> Result<(), PersistError> {
        self.commit(rv, |t| {
            t.insert(key(gr, ns, name).as_str(), json)?;
            Ok(())
        })
    }

    /// Removes the object, at version `rv` (one durable commit).
    pub fn delete(
        &self,
        gr: &GroupResource,
        ns: &str,
        name: &str,
        rv: u64,
    ) -> Result<(), PersistError> {
        self.commit(rv, |t| {
            t.remove(key(gr, ns, name).as_str())?;
            Ok(())
        })
    }

    fn commit(
        &self,
        rv: u64,
        change: impl FnOnce(&mut redb::Table<'_, &str, &[u8]>) -> Result<(), redb::StorageError>,
    ) -> Result<(), PersistError> {
        let tx = self.db.begin_write().map_err(db)?;
        {
            let mut objects = tx.open_table(OBJECTS).map_err(db)?;
            change(&mut objects).map_err(db)?;
            let mut meta = tx.open_table(META).map_err(db)?;
            meta.insert(RV, rv).map_err(db)?;
        }
        tx.commit().map_err(db)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_and_the_version_survive_a_reopen() {
        let dir = std::env::temp_dir().join(format!("tephra-persist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pods = GroupResource::new("", "pods");
        let jobs = GroupResource::new("batch.volcano.sh", "jobs");
        {
            let p = Persist::open(&dir).unwrap();
            assert_eq!(p.load().unwrap().0, 0, "a new file starts at 0");
            p.put(&pods, "default", "a", br#"{"a":1}"#, 5).unwrap();
            p.put(&jobs, "team", "train", br#"{"j":1}"#, 6).unwrap();
            p.put(&pods, "default", "b", br#"{"b":1}"#, 7).unwrap();
            p.delete(&pods, "default", "b", 8).unwrap();
        }
        let p = Persist::open(&dir).unwrap();
        let (rv, objects) = p.load().unwrap();
        assert_eq!(rv, 8);
        let mut got: Vec<(String, String, String, Vec<u8>)> = objects
            .into_iter()
            .map(|o| (o.gr.group, o.namespace, o.name, o.json))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                (
                    "".into(),
                    "default".into(),
                    "a".into(),
                    br#"{"a":1}"#.to_vec()
                ),
                (
                    "batch.volcano.sh".into(),
                    "team".into(),
                    "train".into(),
                    br#"{"j":1}"#.to_vec()
                ),
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
