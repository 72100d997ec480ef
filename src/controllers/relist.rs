//! Work queued from a watch while it relists.
//!
//! The shared store takes a relist in one step at its end (`InitDone`), after each object
//! listed was handed to the subscribers. Work queued from a listed object and run at once
//! reads the store from before the relist: a job's sync counts its pods as they were, and the
//! Job controller's coalescer lets that sync cover the request, so the change the relist
//! carried is lost until the job's next event (a job left Pending with every pod Running,
//! when a slow pod watch fell behind and was relisted); a PodGroup compared with a
//! ReplicaSet's old size stays so. So what a relist queues is held and queued at its end,
//! once the store holds what was listed.
//!
//! A relist also drops, without a `Delete` event, the objects deleted while the watch was
//! away; a subscriber that must hear of those asks, at `Init` and at `InitDone`, for work on
//! everything its index holds before and after.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use kube::runtime::watcher;

use super::workqueue::WorkQueue;
use crate::cluster::caches::Subscriber;
use crate::sync::lock;

/// A subscriber that queues on `queue` the keys `keys` finds in each event, a relist's held
/// until its end.
pub(crate) fn queue_keys<K, Q, I>(
    queue: WorkQueue<Q>,
    keys: impl Fn(&watcher::Event<K>) -> I + Send + Sync + 'static,
) -> Subscriber<K>
where
    Q: Clone + Eq + Hash + Send + Sync + 'static,
    I: IntoIterator<Item = Q>,
{
    let hold = Mutex::new(RelistHold::default());
    Arc::new(move |ev| {
        for k in lock(&hold).route(ev, keys(ev)) {
            queue.add(k);
        }
    })
}

/// The work (requests, keys) of one watch's relist in progress.
#[derive(Debug)]
pub(crate) struct RelistHold<R> {
    /// `Some` from a relist's `Init` to its `InitDone`.
    held: Option<HashSet<R>>,
}

impl<R> Default for RelistHold<R> {
    fn default() -> Self {
        Self { held: None }
    }
}

impl<R: Eq + Hash> RelistHold<R> {
    /// Routes the requests made from `ev`: returns those to queue now. Requests made from a
    /// relist's events (its `Init` and `InitApply`s) are held until its `InitDone`, which
    /// releases them all, with its own.
    pub(crate) fn route<K>(
        &mut self,
        ev: &watcher::Event<K>,
        requests: impl IntoIterator<Item = R>,
    ) -> Vec<R> {
        match ev {
            watcher::Event::Init | watcher::Event::InitApply(_) => {
                self.held.get_or_insert_default().extend(requests);
                Vec::new()
            }
            watcher::Event::InitDone => {
                let mut all = self.held.take().unwrap_or_default();
                all.extend(requests);
                all.into_iter().collect()
            }
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => requests.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::batch::Event;
    use crate::controllers::job::request::Request;

    fn sync(job: &str) -> Request {
        Request::job("ns", job, Event::OutOfSync)
    }

    fn names(mut reqs: Vec<Request>) -> Vec<String> {
        reqs.sort_by_key(|r| r.job.clone());
        reqs.into_iter().map(|r| r.job).collect()
    }

    #[test]
    fn requests_of_a_relist_wait_for_its_end_and_others_go_at_once() {
        let mut hold = RelistHold::default();
        let ev = |e: watcher::Event<()>| e;
        assert_eq!(
            names(hold.route(&ev(watcher::Event::Apply(())), [sync("a")])),
            ["a"]
        );
        assert!(
            hold.route(&ev(watcher::Event::Init), [sync("before")])
                .is_empty()
        );
        assert!(
            hold.route(&ev(watcher::Event::InitApply(())), [sync("b")])
                .is_empty()
        );
        // The same request twice is queued once.
        assert!(
            hold.route(&ev(watcher::Event::InitApply(())), [sync("b")])
                .is_empty()
        );
        assert!(
            hold.route(&ev(watcher::Event::InitApply(())), [])
                .is_empty()
        );
        assert_eq!(
            names(hold.route(&ev(watcher::Event::InitDone), [sync("after"), sync("b")])),
            ["after", "b", "before"]
        );
        // Nothing is left held after the end.
        assert_eq!(
            names(hold.route(&ev(watcher::Event::Delete(())), [sync("c")])),
            ["c"]
        );
        assert!(hold.route(&ev(watcher::Event::InitDone), []).is_empty());
    }

    #[tokio::test]
    async fn a_subscriber_queues_a_relists_keys_once_it_is_over() {
        let queue: WorkQueue<String> = WorkQueue::new(tokio_util::sync::CancellationToken::new());
        let sub = queue_keys::<String, _, _>(queue.clone(), |ev| match ev {
            watcher::Event::Apply(k) | watcher::Event::InitApply(k) => Some(k.clone()),
            _ => None,
        });
        sub(&watcher::Event::Apply("a".into()));
        assert_eq!(queue.len(), 1);
        sub(&watcher::Event::Init);
        sub(&watcher::Event::InitApply("b".into()));
        sub(&watcher::Event::InitApply("c".into()));
        assert_eq!(queue.len(), 1, "a relist's keys wait");
        sub(&watcher::Event::InitDone);
        assert_eq!(queue.len(), 3);
    }
}
