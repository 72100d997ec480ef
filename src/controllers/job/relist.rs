//! Requests made while a watch relists.
//!
//! The shared store takes a relist in one step at its end (`InitDone`), after each object
//! listed was handed to the subscribers. A request made from a listed object and run at once
//! reads the store from before the relist: the job's sync counts the pods as they were, and
//! the coalescer (see [`super::coalesce`]) lets that sync cover the request, so the change the
//! relist carried is lost until the job's next event (a job left Pending with every pod
//! Running, when a slow pod watch fell behind and was relisted). So the requests a relist
//! makes are held and queued at its end, once the store holds what was listed.
//!
//! A relist also drops, without a `Delete` event, the objects deleted while the watch was
//! away: for pods, every job that had pods before or has pods after the relist is synced at
//! its end (the subscriber asks for those at `Init` and at `InitDone`).

use std::collections::HashSet;

use kube::runtime::watcher;

use super::request::Request;

/// The requests of one watch's relist in progress.
#[derive(Debug, Default)]
pub(crate) struct RelistHold {
    /// `Some` from a relist's `Init` to its `InitDone`.
    held: Option<HashSet<Request>>,
}

impl RelistHold {
    /// Routes the requests made from `ev`: returns those to queue now. Requests made from a
    /// relist's events (its `Init` and `InitApply`s) are held until its `InitDone`, which
    /// releases them all, with its own.
    pub(crate) fn route<K>(
        &mut self,
        ev: &watcher::Event<K>,
        requests: impl IntoIterator<Item = Request>,
    ) -> Vec<Request> {
        match ev {
            watcher::Event::Init => {
                self.held.get_or_insert_default().extend(requests);
                Vec::new()
            }
            watcher::Event::InitApply(_) => {
                // An InitApply always follows an Init; should one come alone, it is held all
                // the same, and its InitDone releases it.
                self.held.get_or_insert_default().extend(requests);
                Vec::new()
            }
            watcher::Event::InitDone => {
                let mut out: Vec<Request> =
                    self.held.take().unwrap_or_default().into_iter().collect();
                for r in requests {
                    if !out.contains(&r) {
                        out.push(r);
                    }
                }
                out
            }
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => requests.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::batch::Event;

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
}
