//! Delayed actions: a policy with a `timeout` asks for its action to run later, unless what
//! triggered it clears first (Volcano's `delayActionMap` in `job_controller.go`).
//!
//! ```text
//!   apply_policies ─ delay ─▶ register(a) ─▶ token ──▶ edge: spawn timer(delay) watching token
//!   pod event ─▶ cancel_for(req)           ─┐                 │ fires
//!   user action ran ─▶ cleanup_after(...)  ─┼─▶ cancel token   ▼
//!   job deleted ─▶ forget_job(key)         ─┘          fired(a, token) ─▶ edge runs a.action
//! ```
//!
//! One entry per pod of a job (job-level events use the pod name `""`). This module only keeps
//! the book; the edge spawns and runs the timers.
//!
//! Departure from Volcano (listed in the book's differences from Volcano): registering a different action for
//! a pod that already has one replaces **and cancels** the earlier one. Volcano overwrote the
//! entry but left the old timer running, so the replaced action still fired.
//!
//! Invariant kept by every method: a token in the map is not cancelled, and a token taken out
//! of the map is cancelled. [`DelayedActions::fired`] relies on it to tell its own entry from a
//! newer one for the same pod.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use super::policy::is_internal_action;
use super::request::Request;
use crate::api::batch::{Action, Event};
use crate::sync::lock;

/// An action waiting for its policy's timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayedAction {
    /// `namespace/name` of the job.
    pub job_key: String,
    /// The task of the pod whose event asked for it.
    pub task: Option<String>,
    /// That pod, `""` for a job-level event.
    pub pod: String,
    /// That pod's UID (a recreated pod of the same name has another).
    pub pod_uid: Option<String>,
    /// That pod's partition.
    pub partition: Option<String>,
    /// The event that asked for it.
    pub event: Event,
    /// The action to run when the delay ends.
    pub action: Action,
    /// How long to wait.
    pub delay: std::time::Duration,
}

impl DelayedAction {
    /// The delayed `action` for request `req`, after `delay`.
    pub fn new(req: &Request, action: Action, delay: std::time::Duration) -> Self {
        Self {
            job_key: req.key(),
            task: req.task.clone(),
            pod: req.pod.clone().unwrap_or_default(),
            pod_uid: req.pod_uid.clone(),
            partition: req.partition.clone(),
            event: req.event.clone(),
            action,
            delay,
        }
    }
}

/// What a user action acts on; running one clears the delayed actions of the same level
/// (Volcano's `GetActionType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// The whole job: AbortJob, RestartJob, TerminateJob, CompleteJob, ResumeJob, and any
    /// other action.
    Job,
    /// One task: RestartTask.
    Task,
    /// One pod: RestartPod.
    Pod,
    /// One partition: RestartPartition.
    Partition,
}

impl Level {
    /// The level of `action`.
    pub fn of(action: &Action) -> Self {
        match action {
            Action::RestartTask => Level::Task,
            Action::RestartPod => Level::Pod,
            Action::RestartPartition => Level::Partition,
            _ => Level::Job,
        }
    }
}

type Entries = HashMap<String, HashMap<String, (DelayedAction, CancellationToken)>>;

/// The delayed actions of every job: job key → pod name → (action, the token its timer
/// watches).
#[derive(Default)]
pub struct DelayedActions {
    entries: Mutex<Entries>,
}

impl DelayedActions {
    /// Stores `a`, unless the pod already waits for the same action (then `None`: keep the
    /// running timer, start no new one). A waiting entry with a different action is replaced
    /// and its token cancelled (departure, see the module doc). Returns the token the caller's
    /// timer task must watch.
    pub fn register(&self, a: DelayedAction) -> Option<CancellationToken> {
        let mut entries = lock(&self.entries);
        let pods = entries.entry(a.job_key.clone()).or_default();
        if let Some((old, token)) = pods.get(&a.pod) {
            if old.action == a.action {
                return None;
            }
            token.cancel();
        }
        let token = CancellationToken::new();
        pods.insert(a.pod.clone(), (a, token.clone()));
        Some(token)
    }

    /// Before a pod event request is processed: cancels the pod's delayed action when its
    /// cause has cleared. Only `PodRunning`, `PodFailed` and `PodEvicted` requests cancel
    /// (a `PodPending` request never does):
    /// * an action waiting on `PodPending` is cancelled when the request is about the same pod
    ///   UID (a recreated pod of the same name is another pod still to wait for);
    /// * an action waiting on `PodFailed` or `PodEvicted` is cancelled when the pod runs again.
    pub fn cancel_for(&self, req: &Request) {
        if !matches!(
            req.event,
            Event::PodRunning | Event::PodFailed | Event::PodEvicted
        ) {
            return;
        }
        let key = req.key();
        let pod = req.pod.as_deref().unwrap_or_default();
        let mut entries = lock(&self.entries);
        let Some(pods) = entries.get_mut(&key) else {
            return;
        };
        let cancel = pods.get(pod).is_some_and(|(a, _)| {
            (a.event == Event::PodPending && a.pod_uid == req.pod_uid)
                || (matches!(a.event, Event::PodFailed | Event::PodEvicted)
                    && req.event == Event::PodRunning)
        });
        if cancel && let Some((_, token)) = pods.remove(pod) {
            token.cancel();
        }
        if pods.is_empty() {
            entries.remove(&key);
        }
    }

    /// After `action` ran for `req` (from a request or a fired timer): cancels and removes the
    /// job's delayed actions of the same [`Level`] — every job-level one; for a task, those of
    /// the same task; for a pod, the same pod; for a partition, the same partition id. Internal
    /// actions (`SyncJob`, ...) clear nothing.
    pub fn cleanup_after(&self, job_key: &str, action: &Action, req: &Request) {
        if is_internal_action(action) {
            return;
        }
        let level = Level::of(action);
        let pod = req.pod.as_deref().unwrap_or_default();
        let mut entries = lock(&self.entries);
        let Some(pods) = entries.get_mut(job_key) else {
            return;
        };
        pods.retain(|_, (a, token)| {
            let hit = Level::of(&a.action) == level
                && match level {
                    Level::Job => true,
                    Level::Task => a.task == req.task,
                    Level::Pod => a.pod == pod,
                    // Volcano compares the partition id only, not the task.
                    Level::Partition => a.partition == req.partition,
                };
            if hit {
                token.cancel();
            }
            !hit
        });
        if pods.is_empty() {
            entries.remove(job_key);
        }
    }

    /// The timer of `a` (watching `token`) has fired: removes the entry, if it is still that
    /// one. A cancelled token means the entry was already removed or replaced; the pod's
    /// current entry is then someone else's and stays.
    pub fn fired(&self, a: &DelayedAction, token: &CancellationToken) {
        self.take_fired(a, token);
    }

    /// As [`DelayedActions::fired`], and tells whether the entry was still registered: `false`
    /// means it was cancelled meanwhile and the edge should not run the action.
    pub fn take_fired(&self, a: &DelayedAction, token: &CancellationToken) -> bool {
        if token.is_cancelled() {
            return false;
        }
        let mut entries = lock(&self.entries);
        let Some(pods) = entries.get_mut(&a.job_key) else {
            return false;
        };
        let ours = pods.get(&a.pod).is_some_and(|(e, _)| e == a);
        if ours && let Some((_, stored)) = pods.remove(&a.pod) {
            stored.cancel();
        }
        if pods.is_empty() {
            entries.remove(&a.job_key);
        }
        ours
    }

    /// The job was deleted: cancels and drops all its delayed actions.
    pub fn forget_job(&self, job_key: &str) {
        if let Some(pods) = lock(&self.entries).remove(job_key) {
            for (_, token) in pods.values() {
                token.cancel();
            }
        }
    }

    /// The delayed actions waiting for `job_key`, in no particular order.
    pub fn of_job(&self, job_key: &str) -> Vec<DelayedAction> {
        lock(&self.entries)
            .get(job_key)
            .map(|pods| pods.values().map(|(a, _)| a.clone()).collect())
            .unwrap_or_default()
    }

    /// How many delayed actions wait, over all jobs.
    pub fn len(&self) -> usize {
        lock(&self.entries).values().map(HashMap::len).sum()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A request about pod `pod` of task `task` (partition `part`) of job `ns/j`.
    fn req(pod: &str, task: &str, part: &str, event: Event) -> Request {
        let mut r = Request::job("ns", "j", event);
        r.task = Some(task.into());
        r.pod = Some(pod.into());
        r.pod_uid = Some(format!("uid-{pod}"));
        r.partition = Some(part.into());
        r
    }

    fn delayed(pod: &str, task: &str, part: &str, event: Event, action: Action) -> DelayedAction {
        DelayedAction::new(
            &req(pod, task, part, event),
            action,
            Duration::from_secs(60),
        )
    }

    #[test]
    fn same_action_is_kept() {
        let d = DelayedActions::default();
        let a = delayed("p0", "t", "0", Event::PodPending, Action::RestartPod);
        let t = d
            .register(a.clone())
            .expect("first registration gets a token");
        assert!(d.register(a.clone()).is_none());
        let mut later = a.clone();
        later.pod_uid = Some("other".into());
        assert!(d.register(later).is_none(), "same action for the pod: kept");
        assert!(!t.is_cancelled());
        assert_eq!(d.of_job("ns/j"), vec![a]);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn different_action_replaces_and_cancels() {
        let d = DelayedActions::default();
        let a = delayed("p0", "t", "0", Event::PodPending, Action::RestartPod);
        let b = delayed("p0", "t", "0", Event::PodFailed, Action::RestartJob);
        let ta = d.register(a.clone()).expect("token");
        let tb = d.register(b.clone()).expect("token");
        assert!(ta.is_cancelled());
        assert!(!tb.is_cancelled());
        assert_eq!(d.of_job("ns/j"), vec![b.clone()]);
        // The replaced timer firing late removes nothing.
        assert!(!d.take_fired(&a, &ta));
        assert_eq!(d.len(), 1);
        // Another pod and another job are separate entries.
        assert!(
            d.register(delayed(
                "p1",
                "t",
                "0",
                Event::PodFailed,
                Action::RestartJob
            ))
            .is_some()
        );
        let mut other_job = b;
        other_job.job_key = "ns/k".into();
        assert!(d.register(other_job).is_some());
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn cancel_for_pod_events() {
        let pending = delayed("p0", "t", "0", Event::PodPending, Action::RestartPod);
        let failed = delayed("p0", "t", "0", Event::PodFailed, Action::RestartTask);
        let evicted = delayed("p0", "t", "0", Event::PodEvicted, Action::RestartJob);
        // (entry, request event, request uid, cancelled?)
        let cases = [
            (&pending, Event::PodRunning, "uid-p0", true),
            (&pending, Event::PodFailed, "uid-p0", true),
            (&pending, Event::PodEvicted, "uid-p0", true),
            (&pending, Event::PodRunning, "uid-new", false),
            (&pending, Event::PodPending, "uid-p0", false),
            (&pending, Event::OutOfSync, "uid-p0", false),
            (&failed, Event::PodRunning, "uid-p0", true),
            (&failed, Event::PodRunning, "uid-new", true),
            (&failed, Event::PodFailed, "uid-p0", false),
            (&failed, Event::PodEvicted, "uid-p0", false),
            (&evicted, Event::PodRunning, "uid-p0", true),
            (&evicted, Event::PodPending, "uid-p0", false),
        ];
        for (entry, event, uid, cancelled) in cases {
            let d = DelayedActions::default();
            let token = d.register(entry.clone()).expect("token");
            let mut r = req("p0", "t", "0", event.clone());
            r.pod_uid = Some(uid.into());
            d.cancel_for(&r);
            assert_eq!(
                token.is_cancelled(),
                cancelled,
                "{} entry, {event} from {uid}",
                entry.event
            );
            assert_eq!(d.is_empty(), cancelled);
        }
        // A request about another pod touches nothing.
        let d = DelayedActions::default();
        let token = d.register(failed.clone()).expect("token");
        d.cancel_for(&req("p1", "t", "0", Event::PodRunning));
        assert!(!token.is_cancelled());
    }

    /// Registers one entry per level: job (pod ""), task t/ u, pod p0 / p1, partition 0 / 1.
    fn populated() -> (DelayedActions, Vec<(DelayedAction, CancellationToken)>) {
        let d = DelayedActions::default();
        let list = [
            delayed("", "", "", Event::Unknown, Action::AbortJob),
            delayed("a", "t", "0", Event::PodEvicted, Action::RestartJob),
            delayed("b", "t", "0", Event::TaskFailed, Action::RestartTask),
            delayed("c", "u", "0", Event::TaskFailed, Action::RestartTask),
            delayed("p0", "t", "0", Event::PodFailed, Action::RestartPod),
            delayed("p1", "t", "0", Event::PodFailed, Action::RestartPod),
            delayed("x", "t", "0", Event::PodFailed, Action::RestartPartition),
            delayed("y", "t", "1", Event::PodFailed, Action::RestartPartition),
        ];
        let with_tokens = list
            .into_iter()
            .map(|a| {
                let t = d.register(a.clone()).expect("token");
                (a, t)
            })
            .collect();
        (d, with_tokens)
    }

    fn remaining(d: &DelayedActions) -> Vec<String> {
        let mut pods: Vec<String> = d.of_job("ns/j").into_iter().map(|a| a.pod).collect();
        pods.sort();
        pods
    }

    #[test]
    fn cleanup_after_by_level() {
        // (action, request pod/task/partition, pods left)
        type Case<'a> = (Action, (&'a str, &'a str, &'a str), &'a [&'a str]);
        let cases: [Case; 6] = [
            (
                Action::TerminateJob,
                ("z", "t", "0"),
                &["b", "c", "p0", "p1", "x", "y"],
            ),
            (
                Action::Other("Bogus".into()),
                ("z", "t", "0"),
                &["b", "c", "p0", "p1", "x", "y"],
            ),
            (
                Action::RestartTask,
                ("z", "t", "0"),
                &["", "a", "c", "p0", "p1", "x", "y"],
            ),
            (
                Action::RestartPod,
                ("p0", "t", "0"),
                &["", "a", "b", "c", "p1", "x", "y"],
            ),
            (
                Action::RestartPartition,
                ("z", "t", "1"),
                &["", "a", "b", "c", "p0", "p1", "x"],
            ),
            (
                Action::SyncJob,
                ("z", "t", "0"),
                &["", "a", "b", "c", "p0", "p1", "x", "y"],
            ),
        ];
        for (action, (pod, task, part), left) in cases {
            let (d, tokens) = populated();
            let r = req(pod, task, part, Event::OutOfSync);
            d.cleanup_after("ns/j", &action, &r);
            assert_eq!(remaining(&d), left, "{action}");
            for (a, t) in &tokens {
                assert_eq!(
                    t.is_cancelled(),
                    !left.contains(&a.pod.as_str()),
                    "{action}: {}",
                    a.pod
                );
            }
        }
        // Another job's entries stay.
        let (d, _) = populated();
        d.cleanup_after(
            "ns/other",
            &Action::AbortJob,
            &req("", "", "", Event::Unknown),
        );
        assert_eq!(d.len(), 8);
    }

    #[test]
    fn fired_removes_only_its_own_entry() {
        let d = DelayedActions::default();
        let a = delayed("p0", "t", "0", Event::PodFailed, Action::RestartPod);
        let ta = d.register(a.clone()).expect("token");
        // Cleared and registered again with the same action: a new entry with a new token.
        d.cleanup_after(
            "ns/j",
            &Action::RestartPod,
            &req("p0", "t", "0", Event::OutOfSync),
        );
        let tb = d.register(a.clone()).expect("token");
        d.fired(&a, &ta);
        assert_eq!(d.len(), 1, "the old timer does not remove the new entry");
        assert!(!tb.is_cancelled());
        assert!(d.take_fired(&a, &tb));
        assert!(d.is_empty());
        // Firing twice is harmless.
        assert!(!d.take_fired(&a, &tb));
        d.fired(&a, &tb);
        assert!(d.is_empty());
    }

    #[test]
    fn forget_job_cancels_everything() {
        let (d, tokens) = populated();
        let mut other = delayed("p0", "t", "0", Event::PodFailed, Action::RestartPod);
        other.job_key = "ns/k".into();
        let keep = d.register(other).expect("token");
        d.forget_job("ns/j");
        assert!(tokens.iter().all(|(_, t)| t.is_cancelled()));
        assert!(!keep.is_cancelled());
        assert_eq!(d.len(), 1);
        d.forget_job("ns/k");
        assert!(d.is_empty());
        d.forget_job("ns/none");
    }

    #[test]
    fn levels() {
        assert_eq!(Level::of(&Action::ResumeJob), Level::Job);
        assert_eq!(Level::of(&Action::RestartTask), Level::Task);
        assert_eq!(Level::of(&Action::RestartPod), Level::Pod);
        assert_eq!(Level::of(&Action::RestartPartition), Level::Partition);
        assert_eq!(Level::of(&Action::Other("X".into())), Level::Job);
    }
}
