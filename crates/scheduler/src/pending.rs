//! The writes that sessions decided and the API has not taken yet, gathered between two
//! flushes. Sessions hand their outcome over and go on; a writer task drains what gathered.
//! Pure: no I/O here.
//!
//! Why: writing a session's PodGroup and Queue statuses and its Events takes many API calls.
//! When the next session waited for them, a kube-scheduler filter that needed a plan (a gang
//! it had not seen) waited for those writes too, one scheduling cycle at a time, and a burst of
//! new gangs stalled binding for seconds.
//!
//! Gathering keeps what the API must end up with and no more: a PodGroup's or Queue's newer
//! status replaces an older one not yet written (each is the whole status, so the older one
//! is obsolete); of the Events of one PodGroup with one type and reason only the newest
//! message is kept (the gang's newest state: "3/4 tasks in gang unschedulable" supersedes
//! "2/4 ..." not yet recorded, much as kube's Event recorder folds similar Events together);
//! evictions are kept in order, an eviction once per pod.
//!
//! A session decides from the watch's view of a PodGroup, which is a moment behind the writes;
//! without a memory of what was written, the sessions in that moment would decide and write
//! the same status again. A status the writer wrote less than [`WRITTEN_TTL`] ago is therefore
//! not written again (after that, a status someone else changed is put back as before).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::outcome::{Eviction, GangEvent, Outcome, PodGroupUpdate, QueueUpdate, same_status};
use tephra_api::PodGroupStatus;

/// How long a written PodGroup status is taken as the PodGroup's status, whatever the watch
/// still shows.
pub const WRITTEN_TTL: Duration = Duration::from_secs(5);

/// At most this many Events wait; new ones beyond it are dropped (Events are best effort,
/// as an Event recorder's own queue is).
pub const MAX_EVENTS: usize = 10_000;

/// Writes waiting for the writer.
#[derive(Debug, Default)]
pub struct Pending {
    /// The newest status of each PodGroup, in first-decided order.
    podgroups: Vec<PodGroupUpdate>,
    /// `(namespace, name)` → its place in `podgroups`.
    podgroup_at: HashMap<(String, String), usize>,
    /// The newest allocation of each Queue.
    queues: Vec<QueueUpdate>,
    events: Vec<GangEvent>,
    /// `(namespace, name, type, reason)` → its place in `events`.
    event_at: HashMap<(String, String, &'static str, String), usize>,
    evictions: Vec<Eviction>,
    evicting: HashSet<String>,
    /// `(namespace, name)` → the uid and status last written, and when.
    written: HashMap<(String, String), (String, PodGroupStatus, Instant)>,
    /// Events dropped because [`MAX_EVENTS`] were waiting.
    pub dropped_events: u64,
}

/// One flush: what the writer writes now.
#[derive(Debug, Default, PartialEq)]
pub struct Batch {
    /// PodGroups whose status changes.
    pub podgroups: Vec<PodGroupUpdate>,
    /// Queues whose allocation changes.
    pub queues: Vec<QueueUpdate>,
    /// Events.
    pub events: Vec<GangEvent>,
    /// Evictions.
    pub evictions: Vec<Eviction>,
}

impl Batch {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.podgroups.is_empty()
            && self.queues.is_empty()
            && self.events.is_empty()
            && self.evictions.is_empty()
    }
}

impl Pending {
    /// Adds a session's writes, decided at `now`.
    pub fn add(&mut self, outcome: &Outcome, now: Instant) {
        for u in &outcome.podgroups {
            let key = (u.namespace.clone(), u.name.clone());
            if self.written.get(&key).is_some_and(|(uid, status, at)| {
                *uid == u.uid
                    && now.saturating_duration_since(*at) < WRITTEN_TTL
                    && same_status(status, &u.status)
            }) {
                continue;
            }
            match self.podgroup_at.get(&key) {
                Some(&i) => {
                    // The session that replaces an unwritten status decided from the phase the
                    // older one set, so it may not see the change; the change is still to be
                    // written.
                    let phase_changed = self.podgroups[i].phase_changed || u.phase_changed;
                    self.podgroups[i] = PodGroupUpdate {
                        phase_changed,
                        ..u.clone()
                    };
                }
                None => {
                    self.podgroup_at.insert(key, self.podgroups.len());
                    self.podgroups.push(u.clone());
                }
            }
        }
        for q in &outcome.queues {
            match self.queues.iter_mut().find(|old| old.name == q.name) {
                Some(old) => *old = q.clone(),
                None => self.queues.push(q.clone()),
            }
        }
        for e in &outcome.events {
            let key = (
                e.namespace.clone(),
                e.name.clone(),
                e.type_,
                e.reason.clone(),
            );
            match self.event_at.get(&key) {
                Some(&i) => self.events[i] = e.clone(),
                None if self.events.len() >= MAX_EVENTS => self.dropped_events += 1,
                None => {
                    self.event_at.insert(key, self.events.len());
                    self.events.push(e.clone());
                }
            }
        }
        for e in &outcome.evictions {
            if self.evicting.insert(e.uid.clone()) {
                self.evictions.push(e.clone());
            }
        }
    }

    /// Remembers a PodGroup status the API took at `now`.
    pub fn written(&mut self, u: &PodGroupUpdate, now: Instant) {
        self.written.insert(
            (u.namespace.clone(), u.name.clone()),
            (u.uid.clone(), u.status.clone(), now),
        );
    }

    /// Forgets a PodGroup's written status (its write failed, or it is gone).
    pub fn forget(&mut self, namespace: &str, name: &str) {
        self.written
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Drops memories older than [`WRITTEN_TTL`], so the memory stays as small as the
    /// PodGroups written lately.
    pub fn expire(&mut self, now: Instant) {
        self.written
            .retain(|_, (_, _, at)| now.saturating_duration_since(*at) < WRITTEN_TTL);
    }

    /// Takes everything gathered, leaving nothing.
    pub fn take(&mut self) -> Batch {
        let mut b = self.take_statuses(usize::MAX);
        b.events = self.take_events().events;
        b
    }

    /// Takes the Queue statuses, the evictions and at most `limit` PodGroup statuses, those
    /// that change a phase first (each kind in first-decided order), leaving the Events and
    /// the other PodGroups.
    ///
    /// Why a limit: a pass where the pool's occupancy changes may reword hundreds of waiting
    /// gangs' conditions; written as one batch, a new gang's `Pending` → `Inqueue` decided
    /// meanwhile would wait for all of them.
    pub fn take_statuses(&mut self, limit: usize) -> Batch {
        self.evicting.clear();
        self.podgroup_at.clear();
        let (mut podgroups, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.podgroups)
            .into_iter()
            .partition(|u| u.phase_changed);
        podgroups.extend(rest);
        for u in podgroups.split_off(limit.min(podgroups.len())) {
            self.podgroup_at
                .insert((u.namespace.clone(), u.name.clone()), self.podgroups.len());
            self.podgroups.push(u);
        }
        Batch {
            podgroups,
            queues: std::mem::take(&mut self.queues),
            events: Vec::new(),
            evictions: std::mem::take(&mut self.evictions),
        }
    }

    /// Some PodGroup status waits to be written.
    pub fn has_statuses(&self) -> bool {
        !self.podgroups.is_empty()
    }

    /// Takes the Events only.
    pub fn take_events(&mut self) -> Batch {
        self.event_at.clear();
        Batch {
            events: std::mem::take(&mut self.events),
            ..Batch::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tephra_api::scheduling::PodGroupPhase;

    fn now() -> Instant {
        Instant::now()
    }

    fn pg(name: &str, phase: PodGroupPhase) -> PodGroupUpdate {
        PodGroupUpdate {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            status: PodGroupStatus {
                phase: Some(phase),
                ..Default::default()
            },
            phase_changed: false,
        }
    }

    fn event(name: &str, message: &str) -> GangEvent {
        GangEvent {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            type_: "Normal",
            reason: "Scheduled".into(),
            message: message.into(),
        }
    }

    fn eviction(uid: &str) -> Eviction {
        Eviction {
            namespace: "ns".into(),
            name: format!("pod-{uid}"),
            uid: uid.into(),
            reason: "preempted".into(),
        }
    }

    fn outcome(pgs: Vec<PodGroupUpdate>, events: Vec<GangEvent>, ev: Vec<Eviction>) -> Outcome {
        Outcome {
            podgroups: pgs,
            events,
            evictions: ev,
            ..Default::default()
        }
    }

    #[test]
    fn a_newer_status_replaces_an_unwritten_older_one_and_keeps_its_place() {
        let mut p = Pending::default();
        p.add(
            &outcome(
                vec![
                    pg("a", PodGroupPhase::Inqueue),
                    pg("b", PodGroupPhase::Inqueue),
                ],
                vec![],
                vec![],
            ),
            now(),
        );
        p.add(
            &outcome(vec![pg("a", PodGroupPhase::Running)], vec![], vec![]),
            now(),
        );
        let b = p.take();
        assert_eq!(
            b.podgroups,
            vec![
                pg("a", PodGroupPhase::Running),
                pg("b", PodGroupPhase::Inqueue)
            ]
        );
        assert!(p.take().is_empty(), "taking leaves nothing behind");
        // Statuses and Events are taken apart, each leaving the other.
        p.add(
            &outcome(
                vec![pg("a", PodGroupPhase::Running)],
                vec![event("a", "1/4")],
                vec![],
            ),
            now(),
        );
        let statuses = p.take_statuses(usize::MAX);
        assert_eq!((statuses.podgroups.len(), statuses.events.len()), (1, 0));
        let events = p.take_events();
        assert_eq!((events.podgroups.len(), events.events.len()), (0, 1));
        assert!(p.take().is_empty());
    }

    #[test]
    fn an_unrecorded_event_gives_way_to_a_newer_one_and_evictions_are_asked_once_per_pod() {
        let mut p = Pending::default();
        p.add(
            &outcome(vec![], vec![event("a", "1/4")], vec![eviction("x")]),
            now(),
        );
        let mut warning = event("a", "queued");
        warning.type_ = "Warning";
        p.add(
            &outcome(
                vec![],
                vec![event("b", "1/2"), event("a", "2/4"), warning],
                vec![eviction("x"), eviction("y")],
            ),
            now(),
        );
        let b = p.take();
        let msgs: Vec<_> = b
            .events
            .iter()
            .map(|e| (e.name.as_str(), e.type_, e.message.as_str()))
            .collect();
        assert_eq!(
            msgs,
            [
                ("a", "Normal", "2/4"),
                ("b", "Normal", "1/2"),
                ("a", "Warning", "queued")
            ],
            "the newest message of each PodGroup, type and reason, in first-seen order"
        );
        let uids: Vec<_> = b.evictions.iter().map(|e| e.uid.as_str()).collect();
        assert_eq!(uids, ["x", "y"]);
        // Once taken, a later session may ask again (the pod may still be there), and an
        // Event may follow the one taken.
        p.add(
            &outcome(vec![], vec![event("a", "3/4")], vec![eviction("x")]),
            now(),
        );
        let b = p.take();
        assert_eq!((b.evictions.len(), b.events.len()), (1, 1));
    }

    #[test]
    fn events_beyond_the_cap_are_dropped_and_counted() {
        let mut p = Pending::default();
        let many: Vec<GangEvent> = (0..MAX_EVENTS + 5)
            .map(|i| event(&format!("pg-{i}"), "1/4"))
            .collect();
        p.add(&outcome(vec![], many, vec![]), now());
        assert_eq!(p.dropped_events, 5);
        let b = p.take();
        assert_eq!(b.events.len(), MAX_EVENTS);
        assert_eq!(b.events[0].name, "pg-0");
    }

    #[test]
    fn a_status_just_written_is_not_written_again_until_the_memory_expires() {
        let mut p = Pending::default();
        let t0 = Instant::now();
        let inqueue = pg("a", PodGroupPhase::Inqueue);
        p.add(&outcome(vec![inqueue.clone()], vec![], vec![]), t0);
        let b = p.take();
        p.written(&b.podgroups[0], t0);
        // The watch has not shown the write yet: the next session decides the same again.
        p.add(
            &outcome(vec![inqueue.clone()], vec![], vec![]),
            t0 + Duration::from_millis(50),
        );
        assert!(p.take().is_empty(), "the same status is not written twice");
        // A different status is written.
        p.add(
            &outcome(vec![pg("a", PodGroupPhase::Running)], vec![], vec![]),
            t0 + Duration::from_millis(60),
        );
        assert_eq!(p.take().podgroups.len(), 1);
        // A PodGroup made again under the same name is another object.
        let mut again = inqueue.clone();
        again.uid = "other".into();
        p.add(
            &outcome(vec![again], vec![], vec![]),
            t0 + Duration::from_millis(70),
        );
        assert_eq!(p.take().podgroups.len(), 1);
        // Past the memory's life, a status someone else changed is put back.
        p.add(
            &outcome(vec![inqueue.clone()], vec![], vec![]),
            t0 + WRITTEN_TTL,
        );
        assert_eq!(p.take().podgroups.len(), 1);
        // A failed write is forgotten at once.
        p.written(&inqueue, t0);
        p.forget("ns", "a");
        p.add(
            &outcome(vec![inqueue], vec![], vec![]),
            t0 + Duration::from_millis(10),
        );
        assert_eq!(p.take().podgroups.len(), 1);
        p.expire(t0 + WRITTEN_TTL * 2);
        assert!(p.written.is_empty());
    }

    #[test]
    fn phase_changes_are_taken_first_and_a_batch_is_bounded() {
        let mut p = Pending::default();
        let changed = |name: &str, phase| PodGroupUpdate {
            phase_changed: true,
            ..pg(name, phase)
        };
        p.add(
            &outcome(
                vec![
                    pg("reworded-1", PodGroupPhase::Inqueue),
                    pg("reworded-2", PodGroupPhase::Inqueue),
                    changed("new-1", PodGroupPhase::Inqueue),
                ],
                vec![],
                vec![],
            ),
            now(),
        );
        // A later session decides another phase change, and rewords the first one again
        // from the phase it now takes as current.
        p.add(
            &outcome(
                vec![
                    changed("new-2", PodGroupPhase::Running),
                    pg("new-1", PodGroupPhase::Inqueue),
                ],
                vec![],
                vec![],
            ),
            now(),
        );
        let names =
            |b: &Batch| -> Vec<String> { b.podgroups.iter().map(|u| u.name.clone()).collect() };
        let first = p.take_statuses(3);
        assert_eq!(names(&first), ["new-1", "new-2", "reworded-1"]);
        assert!(
            first.podgroups[0].phase_changed,
            "a replaced status keeps the phase change it has not written"
        );
        assert!(p.has_statuses());
        // What is left keeps its place: a newer status of it replaces it there.
        p.add(
            &outcome(
                vec![pg("reworded-2", PodGroupPhase::Pending)],
                vec![],
                vec![],
            ),
            now(),
        );
        let second = p.take_statuses(3);
        assert_eq!(names(&second), ["reworded-2"]);
        assert_eq!(
            second.podgroups[0].status.phase,
            Some(PodGroupPhase::Pending)
        );
        assert!(!p.has_statuses());
    }
}
