//! Coalescing a job's queued sync requests.
//!
//! Every pod event of a job queues a request on the job's worker, and most of them only ask
//! for a sync (count the pods, write the status). A sync reads the caches when it starts,
//! and the caches hold an event before its request is queued (the reflector stores it, then
//! the subscribers run). So a plain-sync request queued before a sync of the same job
//! started, and still waiting when that sync succeeded, asks for nothing that sync did not
//! already see: it can be dropped. Under a burst (a 100-pod gang's pods bound and started
//! within a second) that turns hundreds of syncs per job into a few, and the jobs sharing
//! the worker are not kept waiting behind them. (Status writes were already few: a sync
//! writes only when the counts changed.)
//!
//! Only syncs whose outcome the request would repeat count: the same job phase (a sync in
//! another phase applies another rule to the same pods, so the request runs) and a sync that
//! succeeded. Requests queued by other paths (retries, timers) carry no stamp and always run.

use std::collections::HashMap;
use std::sync::Mutex;

use super::request::Request;
use crate::api::batch::JobPhase;
use crate::sync::lock;

/// A point in the order of queued requests and started syncs.
pub(crate) type Ticket = u64;

/// The last successful sync of one job.
#[derive(Clone, Debug, PartialEq)]
struct Synced {
    /// When it started reading the caches.
    started: Ticket,
    /// The phase it ran in.
    phase: Option<JobPhase>,
}

#[derive(Debug, Default)]
struct Inner {
    next: Ticket,
    /// When each queued request was (last) queued.
    queued: HashMap<Request, Ticket>,
    /// The last successful sync per job key (`namespace/name`).
    synced: HashMap<String, Synced>,
}

impl Inner {
    fn tick(&mut self) -> Ticket {
        self.next += 1;
        self.next
    }
}

/// Decides which queued sync requests a later sync already covered.
#[derive(Debug, Default)]
pub(crate) struct Coalescer {
    inner: Mutex<Inner>,
}

impl Coalescer {
    /// Stamps `req` as queued now. Called before the request goes on its queue; a request
    /// queued again while it waits (the queue keeps one) takes the later stamp.
    pub(crate) fn queued(&self, req: &Request) {
        let mut i = lock(&self.inner);
        let t = i.tick();
        i.queued.insert(req.clone(), t);
    }

    /// Takes `req`'s stamp as its worker picks it up (`None`: queued by a path that does not
    /// stamp, or picked up before).
    pub(crate) fn take(&self, req: &Request) -> Option<Ticket> {
        lock(&self.inner).queued.remove(req)
    }

    /// A ticket for a sync about to read the caches.
    pub(crate) fn sync_starting(&self) -> Ticket {
        lock(&self.inner).tick()
    }

    /// Records that the sync of `job` holding `ticket`, run in `phase`, succeeded.
    pub(crate) fn synced(&self, job: &str, ticket: Ticket, phase: Option<&JobPhase>) {
        let mut i = lock(&self.inner);
        let newer = i.synced.get(job).is_none_or(|s| s.started < ticket);
        if newer {
            i.synced.insert(
                job.to_string(),
                Synced {
                    started: ticket,
                    phase: phase.cloned(),
                },
            );
        }
    }

    /// Whether a plain-sync request of `job` queued at `queued` is covered: a sync in the
    /// job's current `phase` started after it and succeeded.
    pub(crate) fn covered(&self, job: &str, queued: Ticket, phase: Option<&JobPhase>) -> bool {
        lock(&self.inner)
            .synced
            .get(job)
            .is_some_and(|s| s.started > queued && s.phase.as_ref() == phase)
    }

    /// Drops what is kept about a deleted job.
    pub(crate) fn forget_job(&self, job: &str) {
        lock(&self.inner).synced.remove(job);
    }

    /// How many requests carry a stamp (for tests: stamps must not pile up).
    #[cfg(test)]
    fn stamped(&self) -> usize {
        lock(&self.inner).queued.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::batch::Event;

    fn pod_event(pod: &str) -> Request {
        Request {
            pod: Some(pod.to_string()),
            ..Request::job("ns", "j", Event::PodRunning)
        }
    }

    /// What happens to one pod event request of job `ns/j`, in order.
    #[derive(Clone)]
    enum Step {
        /// The request is queued (stamped).
        Queue,
        /// A sync of the job starts (takes a ticket).
        Start,
        /// The sync started `n`-th (0-based) succeeds, having run in the phase given.
        Done(usize, Option<JobPhase>),
        /// The job is deleted.
        Forget,
    }

    /// Plays `steps`, then picks the request up and asks whether it is covered while the job
    /// is in phase `now`.
    fn covered_after(steps: &[Step], now: Option<JobPhase>) -> bool {
        let c = Coalescer::default();
        let r = pod_event("j-w-0");
        let mut started = Vec::new();
        for step in steps {
            match step {
                Step::Queue => c.queued(&r),
                Step::Start => started.push(c.sync_starting()),
                Step::Done(n, phase) => c.synced("ns/j", started[*n], phase.as_ref()),
                Step::Forget => c.forget_job("ns/j"),
            }
        }
        let stamp = c.take(&r).expect("stamped");
        assert_eq!(c.stamped(), 0, "a picked-up request keeps no stamp");
        c.covered("ns/j", stamp, now.as_ref())
    }

    use JobPhase::{Pending, Running};
    use Step::{Done, Forget, Queue, Start};

    #[test]
    fn a_request_queued_before_a_successful_sync_is_covered() {
        assert!(covered_after(
            &[Queue, Start, Done(0, Some(Pending))],
            Some(Pending)
        ));
    }

    #[test]
    fn a_request_queued_after_the_sync_started_is_not_covered() {
        assert!(!covered_after(
            &[Start, Queue, Done(0, Some(Pending))],
            Some(Pending)
        ));
    }

    #[test]
    fn a_sync_in_another_phase_does_not_cover() {
        // The sync moved the job Pending → Running; the Running rule has not run on these
        // pods yet, so the request must.
        assert!(!covered_after(
            &[Queue, Start, Done(0, Some(Pending))],
            Some(Running)
        ));
    }

    #[test]
    fn requeued_while_waiting_takes_the_later_stamp() {
        // The same request queued again after the sync began stands for a newer event.
        let steps = [Queue, Start, Queue, Done(0, Some(Pending))];
        assert!(!covered_after(&steps, Some(Pending)));
    }

    #[test]
    fn an_older_sync_finishing_late_does_not_replace_a_newer_one() {
        let steps = [
            Start,
            Queue,
            Start,
            Done(1, Some(Running)),
            Done(0, Some(Running)),
        ];
        assert!(covered_after(&steps, Some(Running)));
    }

    #[test]
    fn a_forgotten_job_covers_nothing() {
        assert!(!covered_after(&[Queue, Start, Done(0, None), Forget], None));
    }

    #[test]
    fn unstamped_requests_and_other_jobs_are_not_covered() {
        let c = Coalescer::default();
        let r = pod_event("j-w-0");
        let t = c.sync_starting();
        c.synced("ns/j", t, Some(&JobPhase::Running));
        assert_eq!(c.take(&r), None);
        let other = Request::job("ns", "k", Event::OutOfSync);
        c.queued(&other);
        let t2 = c.sync_starting();
        c.synced("ns/j", t2, Some(&JobPhase::Running));
        let stamp = c.take(&other).expect("stamped");
        assert!(!c.covered("ns/k", stamp, Some(&JobPhase::Running)));
    }
}
