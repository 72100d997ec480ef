//! How an in-memory index follows a watch: one trait for what an index does with objects, one
//! adapter from watch events to it.
//!
//! ```text
//!  watch event ──▶ Relist::feed ──▶ Apply(obj)              ──▶ index.apply(obj)
//!                                ├─ Delete(obj)             ──▶ index.delete(obj)
//!                                └─ Init, InitApply… InitDone ──▶ index.reset(all)   (once, at the end)
//! ```
//!
//! A relist is buffered until it is complete, so the index is replaced in one step and never
//! seen half empty while the list is still arriving. What is buffered of each object is the
//! index's choice ([`Index::Listed`]): a relist of every pod in the cluster arrives at each
//! index that follows pods, and a whole copy per index would be held until the list ends
//! (three copies of every pod at start-up, the peak of a replica's memory). Objects that did
//! not decode (a [`DeserializeGuard`] holding an error) are left out: an index only ever sees
//! whole objects.

use kube::core::DeserializeGuard;
use kube::runtime::watcher;

/// An index kept from the objects of one kind.
pub trait Index<K> {
    /// What a relist in progress keeps of each object listed, until the list is complete:
    /// the object itself, or only what the index takes from it.
    type Listed;
    /// What to keep of `obj` while its relist is in progress.
    fn listed(obj: &K) -> Self::Listed;
    /// The object was added or changed.
    fn apply(&mut self, obj: &K);
    /// The object was deleted.
    fn delete(&mut self, obj: &K);
    /// A relist finished: these are every object there is; forget the rest.
    fn reset(&mut self, all: Vec<Self::Listed>);
}

/// The buffer of one watch's relist in progress (`L`: what the index keeps of each object
/// listed): feed it every event of that watch.
#[derive(Debug)]
pub struct Relist<L> {
    buffered: Option<Vec<L>>,
}

impl<L> Default for Relist<L> {
    fn default() -> Self {
        Self { buffered: None }
    }
}

impl<L> Relist<L> {
    /// Passes one watch event on to `index`.
    pub fn feed<K, I: Index<K, Listed = L> + ?Sized>(
        &mut self,
        index: &mut I,
        ev: &watcher::Event<K>,
    ) {
        self.feed_with(index, ev, |k| Some(k));
    }

    /// Passes one event of a watch whose objects may not decode on to `index`, leaving out
    /// the objects that did not.
    pub fn feed_decoded<K, I: Index<K, Listed = L> + ?Sized>(
        &mut self,
        index: &mut I,
        ev: &watcher::Event<DeserializeGuard<K>>,
    ) {
        self.feed_with(index, ev, |g| g.0.as_ref().ok());
    }

    fn feed_with<K, T, I: Index<K, Listed = L> + ?Sized>(
        &mut self,
        index: &mut I,
        ev: &watcher::Event<T>,
        obj: impl Fn(&T) -> Option<&K>,
    ) {
        match ev {
            watcher::Event::Apply(t) => {
                if let Some(k) = obj(t) {
                    index.apply(k);
                }
            }
            watcher::Event::Delete(t) => {
                if let Some(k) = obj(t) {
                    index.delete(k);
                }
            }
            watcher::Event::Init => self.buffered = Some(Vec::new()),
            watcher::Event::InitApply(t) => {
                if let Some(k) = obj(t) {
                    self.buffered.get_or_insert_default().push(I::listed(k));
                }
            }
            watcher::Event::InitDone => index.reset(self.buffered.take().unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index of names that records what it was told.
    #[derive(Default)]
    struct Names {
        names: Vec<String>,
        resets: usize,
    }

    impl Index<String> for Names {
        type Listed = String;
        fn listed(obj: &String) -> String {
            obj.clone()
        }
        fn apply(&mut self, obj: &String) {
            if !self.names.contains(obj) {
                self.names.push(obj.clone());
            }
        }
        fn delete(&mut self, obj: &String) {
            self.names.retain(|n| n != obj);
        }
        fn reset(&mut self, all: Vec<String>) {
            self.resets += 1;
            self.names = all;
        }
    }

    #[test]
    fn a_relist_replaces_the_index_only_once_it_is_complete() {
        let mut idx = Names::default();
        let mut relist = Relist::default();
        relist.feed(&mut idx, &watcher::Event::Apply("a".to_string()));
        relist.feed(&mut idx, &watcher::Event::Apply("b".to_string()));
        relist.feed(&mut idx, &watcher::Event::Delete("a".to_string()));
        assert_eq!(idx.names, ["b"]);

        relist.feed(&mut idx, &watcher::Event::Init);
        relist.feed(&mut idx, &watcher::Event::InitApply("c".to_string()));
        // Until the relist is done the old view stands.
        assert_eq!(idx.names, ["b"]);
        relist.feed(&mut idx, &watcher::Event::InitDone);
        assert_eq!(idx.names, ["c"]);
        assert_eq!(idx.resets, 1);

        // A second relist starts from an empty buffer.
        relist.feed(&mut idx, &watcher::Event::Init);
        relist.feed(&mut idx, &watcher::Event::InitDone);
        assert!(idx.names.is_empty());
    }

    #[test]
    fn objects_that_did_not_decode_never_reach_the_index() {
        let bad = || {
            DeserializeGuard::<String>(Err(kube::core::error_boundary::InvalidObject {
                error: "spec: invalid type".into(),
                metadata: Default::default(),
            }))
        };
        let good = |s: &str| DeserializeGuard(Ok(s.to_string()));
        let mut idx = Names::default();
        let mut relist = Relist::default();
        relist.feed_decoded(&mut idx, &watcher::Event::Apply(good("a")));
        relist.feed_decoded(&mut idx, &watcher::Event::Apply(bad()));
        relist.feed_decoded(&mut idx, &watcher::Event::Delete(bad()));
        assert_eq!(idx.names, ["a"]);
        relist.feed_decoded(&mut idx, &watcher::Event::Init);
        relist.feed_decoded(&mut idx, &watcher::Event::InitApply(bad()));
        relist.feed_decoded(&mut idx, &watcher::Event::InitApply(good("b")));
        relist.feed_decoded(&mut idx, &watcher::Event::InitDone);
        assert_eq!(idx.names, ["b"]);
    }
}
