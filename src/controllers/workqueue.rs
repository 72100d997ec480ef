//! A keyed work queue with client-go's semantics: a key is queued at most once, is handed to
//! at most one worker at a time (a key added while it is being worked on runs again after),
//! and failing keys come back with per-key exponential backoff.
//!
//! Volcano's queue controller queues pointers, so one queue can be synced by several workers
//! at once; keys here make that impossible.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::sync::lock;

/// First retry delay of a failing key.
pub const BASE_DELAY: Duration = Duration::from_millis(5);
/// Longest retry delay (client-go uses 1000 s; five minutes keeps a fixed cluster converging).
pub const MAX_DELAY: Duration = Duration::from_secs(300);

struct State<K> {
    queue: VecDeque<K>,
    queued: HashSet<K>,
    active: HashSet<K>,
    /// Added while active: queue again when done.
    dirty: HashSet<K>,
    /// Waiting for a delayed add (a second delayed add of the same key is dropped).
    delayed: HashSet<K>,
    failures: HashMap<K, u32>,
    /// Longest backoff of this queue.
    max_delay: Duration,
}

/// The queue; cheap to clone (shared).
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
    shutdown: CancellationToken,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            notify: self.notify.clone(),
            shutdown: self.shutdown.clone(),
        }
    }
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue").finish_non_exhaustive()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// An empty queue whose delayed adds stop at `shutdown`.
    pub fn new(shutdown: CancellationToken) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                queued: HashSet::new(),
                active: HashSet::new(),
                dirty: HashSet::new(),
                delayed: HashSet::new(),
                failures: HashMap::new(),
                max_delay: MAX_DELAY,
            })),
            notify: Arc::new(Notify::new()),
            shutdown,
        }
    }

    /// The same queue with backoff capped at `max` instead of [`MAX_DELAY`] (the Job
    /// controller's pod-deletion retries cap at 180 s, as Volcano's).
    pub fn with_max_delay(self, max: Duration) -> Self {
        lock(&self.state).max_delay = max;
        self
    }

    /// Queues `key` unless it is queued already; a key being worked on runs again after.
    pub fn add(&self, key: K) {
        let mut s = lock(&self.state);
        if s.active.contains(&key) {
            s.dirty.insert(key);
            return;
        }
        if s.queued.insert(key.clone()) {
            s.queue.push_back(key);
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Queues `key` after `delay`, unless a delayed add of it is already pending: a burst of
    /// events for one key then makes one run (how the queue controller coalesces PodGroup
    /// changes into one status write).
    pub fn add_after(&self, key: K, delay: Duration) {
        if !lock(&self.state).delayed.insert(key.clone()) {
            return;
        }
        let q = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = q.shutdown.cancelled() => {}
                () = tokio::time::sleep(delay) => {
                    lock(&q.state).delayed.remove(&key);
                    q.add(key);
                }
            }
        });
    }

    /// Queues `key` after its backoff (5 ms doubling per failure, capped at [`MAX_DELAY`] or
    /// [`WorkQueue::with_max_delay`]).
    pub fn add_rate_limited(&self, key: K) -> Duration {
        self.add_rate_limited_capped(key, Duration::MAX)
    }

    /// [`WorkQueue::add_rate_limited`] with this call's delay capped at `cap` as well (a job
    /// waiting for a PVC the user has yet to create is retried at least every 30 s).
    pub fn add_rate_limited_capped(&self, key: K, cap: Duration) -> Duration {
        let (n, max) = {
            let mut s = lock(&self.state);
            let max = s.max_delay;
            let n = s.failures.entry(key.clone()).or_default();
            *n += 1;
            (*n, max)
        };
        let delay = BASE_DELAY
            .saturating_mul(2u32.saturating_pow(n.saturating_sub(1).min(31)))
            .min(max)
            .min(cap);
        self.add_after(key, delay);
        delay
    }

    /// Clears `key`'s failure count (after a success).
    pub fn forget(&self, key: &K) {
        lock(&self.state).failures.remove(key);
    }

    /// How many times `key` has failed in a row.
    pub fn failures(&self, key: &K) -> u32 {
        lock(&self.state).failures.get(key).copied().unwrap_or(0)
    }

    /// The next key, marked active; `None` once shut down.
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            {
                let mut s = lock(&self.state);
                if let Some(k) = s.queue.pop_front() {
                    s.queued.remove(&k);
                    s.active.insert(k.clone());
                    // More work may be waiting for another worker.
                    if !s.queue.is_empty() {
                        self.notify.notify_one();
                    }
                    return Some(k);
                }
            }
            tokio::select! {
                () = self.shutdown.cancelled() => return None,
                () = notified => {}
            }
        }
    }

    /// Marks `key` finished; queues it again if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let mut s = lock(&self.state);
        s.active.remove(key);
        if s.dirty.remove(key) && s.queued.insert(key.clone()) {
            s.queue.push_back(key.clone());
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Keys waiting (not counting active ones).
    pub fn len(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dedups_and_never_hands_one_key_to_two_workers() {
        let q = WorkQueue::new(CancellationToken::new());
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let k = q.next().await.unwrap();
        assert_eq!(k, "a");
        q.add("a"); // while active: comes back after done
        assert_eq!(q.next().await, Some("b"));
        assert!(q.is_empty());
        q.done(&"a");
        assert_eq!(q.next().await, Some("a"));
    }

    #[tokio::test]
    async fn backoff_grows_and_forget_resets() {
        let q = WorkQueue::new(CancellationToken::new());
        assert_eq!(q.add_rate_limited("k"), Duration::from_millis(5));
        assert_eq!(q.add_rate_limited("k"), Duration::from_millis(10));
        assert_eq!(q.failures(&"k"), 2);
        q.forget(&"k");
        assert_eq!(q.add_rate_limited("k"), Duration::from_millis(5));
        for _ in 0..40 {
            q.add_rate_limited("k");
        }
        assert_eq!(q.add_rate_limited("k"), MAX_DELAY);
        q.forget(&"k");
        let got = tokio::time::timeout(Duration::from_secs(2), q.next()).await;
        assert_eq!(
            got.unwrap(),
            Some("k"),
            "the first delayed add runs; later ones coalesce"
        );
    }

    #[tokio::test]
    async fn shutdown_ends_waiting_workers() {
        let stop = CancellationToken::new();
        let q: WorkQueue<&str> = WorkQueue::new(stop.clone());
        let w = tokio::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        stop.cancel();
        assert_eq!(w.await.unwrap(), None);
    }
}
