//! How an in-memory index follows a watch: one trait for what an index does with objects, one
//! adapter from watch events to it.
//!
//! ```text
//!  watch event ──▶ Relist::stage ──▶ Staged ──▶ Staged::apply_to(index)      (index locked)
//!                  (index not locked)  ├─ Apply(taken)  ──▶ index.apply(taken)
//!                                      ├─ Delete(obj)   ──▶ index.delete(obj)
//!                                      └─ Reset(all)    ──▶ index.reset(all)  (at a relist's end)
//! ```
//!
//! What an index keeps of an object ([`Index::Taken`]) is worked out by [`Relist::stage`],
//! before the index is locked: an index read by other tasks (the scheduler's, which every
//! filter and session locks) is then held only to put that in, not while a pod is decoded
//! into it.
//!
//! A relist is buffered until it is complete, so the index is replaced in one step and never
//! seen half empty while the list is still arriving. What is buffered of each object is what
//! the index takes of it: a relist of every pod in the cluster arrives at each index that
//! follows pods, and a whole copy per index would be held until the list ends (three copies
//! of every pod at start-up, the peak of a replica's memory). Objects that did not decode (a
//! [`DeserializeGuard`] holding an error) are left out: an index only ever sees whole objects.

use kube::core::DeserializeGuard;
use kube::runtime::watcher;

/// An index kept from the objects of one kind.
pub trait Index<K> {
    /// What the index keeps of an object: the object itself, or only what the index reads
    /// of it. Worked out without the index, so that the index is not locked meanwhile, and
    /// what a relist in progress buffers of each object until the list is complete.
    type Taken;
    /// What to keep of `obj`.
    fn take(obj: &K) -> Self::Taken;
    /// An object was added or changed: this is what is kept of it now.
    fn apply(&mut self, taken: Self::Taken);
    /// The object was deleted.
    fn delete(&mut self, obj: &K);
    /// A relist finished: these are every object there is; forget the rest.
    fn reset(&mut self, all: Vec<Self::Taken>);
}

/// The buffer of one watch's relist in progress (`T`: what the index keeps of each object
/// listed): feed it every event of that watch, in order.
#[derive(Debug)]
pub struct Relist<T> {
    buffered: Option<Vec<T>>,
}

impl<T> Default for Relist<T> {
    fn default() -> Self {
        Self { buffered: None }
    }
}

/// One watch event as an index takes it, ready to be applied ([`Staged::apply_to`]).
#[derive(Debug)]
#[must_use = "a staged event changes nothing until it is applied"]
pub enum Staged<'e, K, T> {
    /// Nothing for the index (a relist still arriving, an object that did not decode).
    Nothing,
    /// An object was added or changed.
    Apply(T),
    /// An object was deleted.
    Delete(&'e K),
    /// A relist is complete.
    Reset(Vec<T>),
}

impl<K, T> Staged<'_, K, T> {
    /// Applies the event to `index`.
    pub fn apply_to<I: Index<K, Taken = T> + ?Sized>(self, index: &mut I) {
        match self {
            Staged::Nothing => {}
            Staged::Apply(t) => index.apply(t),
            Staged::Delete(k) => index.delete(k),
            Staged::Reset(all) => index.reset(all),
        }
    }
}

impl<T> Relist<T> {
    /// Passes one watch event on to `index`.
    pub fn feed<K, I: Index<K, Taken = T> + ?Sized>(
        &mut self,
        index: &mut I,
        ev: &watcher::Event<K>,
    ) {
        self.stage::<K, I>(ev).apply_to(index);
    }

    /// Passes one event of a watch whose objects may not decode on to `index`, leaving out
    /// the objects that did not.
    pub fn feed_decoded<K, I: Index<K, Taken = T> + ?Sized>(
        &mut self,
        index: &mut I,
        ev: &watcher::Event<DeserializeGuard<K>>,
    ) {
        self.stage_decoded::<K, I>(ev).apply_to(index);
    }

    /// [`Self::feed`] up to the index: what `I` takes of the event, for an index locked only
    /// to apply it. Stage and apply each event before the next one's, or they arrive out of
    /// order.
    pub fn stage<'e, K, I: Index<K, Taken = T> + ?Sized>(
        &mut self,
        ev: &'e watcher::Event<K>,
    ) -> Staged<'e, K, T> {
        self.stage_with::<K, K, I>(ev, Some)
    }

    /// [`Self::feed_decoded`] up to the index, as [`Self::stage`].
    pub fn stage_decoded<'e, K, I: Index<K, Taken = T> + ?Sized>(
        &mut self,
        ev: &'e watcher::Event<DeserializeGuard<K>>,
    ) -> Staged<'e, K, T> {
        self.stage_with::<K, DeserializeGuard<K>, I>(ev, |g| g.0.as_ref().ok())
    }

    fn stage_with<'e, K, E, I: Index<K, Taken = T> + ?Sized>(
        &mut self,
        ev: &'e watcher::Event<E>,
        obj: impl Fn(&'e E) -> Option<&'e K>,
    ) -> Staged<'e, K, T> {
        match ev {
            watcher::Event::Apply(e) => {
                obj(e).map_or(Staged::Nothing, |k| Staged::Apply(I::take(k)))
            }
            watcher::Event::Delete(e) => obj(e).map_or(Staged::Nothing, Staged::Delete),
            watcher::Event::Init => {
                self.buffered = Some(Vec::new());
                Staged::Nothing
            }
            watcher::Event::InitApply(e) => {
                if let Some(k) = obj(e) {
                    self.buffered.get_or_insert_default().push(I::take(k));
                }
                Staged::Nothing
            }
            watcher::Event::InitDone => Staged::Reset(self.buffered.take().unwrap_or_default()),
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
        type Taken = String;
        fn take(obj: &String) -> String {
            obj.clone()
        }
        fn apply(&mut self, obj: String) {
            if !self.names.contains(&obj) {
                self.names.push(obj);
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
    fn a_staged_event_changes_the_index_only_once_applied_and_keeps_watch_order() {
        let mut idx = Names::default();
        let mut relist = Relist::default();
        let add = watcher::Event::Apply("a".to_string());
        let staged = relist.stage::<_, Names>(&add);
        assert!(idx.names.is_empty(), "staging reads the event alone");
        staged.apply_to(&mut idx);
        assert_eq!(idx.names, ["a"]);

        // A relist staged event by event is buffered in the relist, not the index, and
        // replaces it when its end is applied.
        for ev in [
            watcher::Event::Init,
            watcher::Event::InitApply("b".to_string()),
        ] {
            relist.stage::<_, Names>(&ev).apply_to(&mut idx);
        }
        assert_eq!(idx.names, ["a"]);
        let done = relist.stage::<_, Names>(&watcher::Event::InitDone);
        assert_eq!(idx.names, ["a"], "the end of a relist waits to be applied");
        done.apply_to(&mut idx);
        assert_eq!(idx.names, ["b"]);

        let gone = watcher::Event::Delete("b".to_string());
        relist.stage::<_, Names>(&gone).apply_to(&mut idx);
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
