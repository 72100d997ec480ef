//! The Queue state machine and the status the queue controller owns. Pure code.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use tephra_api::Queue;
use tephra_api::scheduling::{PodGroupPhase, QueueState};

/// What a sync is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueAction {
    /// Bring state and counts up to date.
    Sync,
    /// `OpenQueue` Command.
    Open,
    /// `CloseQueue` Command.
    Close,
}

/// The next state (Volcano's `QC/state/*.go`): Open always opens; Close closes, through
/// Closing while PodGroups remain; a sync keeps Open and Closed, finishes a Closing queue
/// whose PodGroups are gone, and leaves an externally written Unknown alone.
pub fn next_state(
    current: Option<&QueueState>,
    action: &QueueAction,
    has_podgroups: bool,
) -> QueueState {
    let closing_or_closed = if has_podgroups {
        QueueState::Closing
    } else {
        QueueState::Closed
    };
    match (action, current) {
        (QueueAction::Open, _) => QueueState::Open,
        (QueueAction::Close, Some(QueueState::Closed)) => QueueState::Closed,
        (QueueAction::Close, _) => closing_or_closed,
        (QueueAction::Sync, None | Some(QueueState::Open)) => QueueState::Open,
        (QueueAction::Sync, Some(QueueState::Closed)) => QueueState::Closed,
        (QueueAction::Sync, Some(QueueState::Closing)) => closing_or_closed,
        (QueueAction::Sync, Some(QueueState::Unknown)) => QueueState::Unknown,
        // A state tephra does not know (written by a newer Volcano): treat as Open.
        (QueueAction::Sync, Some(QueueState::Other(_))) => QueueState::Open,
    }
}

/// A queue's state and `volcano.sh/closed-by-parent` annotation after the hierarchy rules
/// (Volcano's `queue_controller_action.go`): a queue whose parent is Closed or Closing closes
/// too and is marked closed by its parent; an explicit Open does not take while the parent is
/// closed; once the parent is Open again, a queue its parent closed reopens (one closed on its
/// own stays closed). `parent` is the parent's state (`None`: no parent, or `root`);
/// `explicit` the Command action applied in this reconcile. Returns the state and the
/// annotation value to write, `None` when it stays as it is.
pub fn apply_hierarchy(
    state: QueueState,
    parent: Option<&QueueState>,
    closed_by_parent: bool,
    explicit: Option<&QueueAction>,
    has_podgroups: bool,
) -> (QueueState, Option<bool>) {
    let closed = |s: &QueueState| matches!(s, QueueState::Closed | QueueState::Closing);
    if parent.is_some_and(closed) {
        if closed(&state) {
            return (state, None);
        }
        let state = next_state(Some(&state), &QueueAction::Close, has_podgroups);
        return (state, (!closed_by_parent).then_some(true));
    }
    if closed(&state) && closed_by_parent && explicit != Some(&QueueAction::Close) {
        return (QueueState::Open, Some(false));
    }
    if explicit == Some(&QueueAction::Open) && closed_by_parent {
        return (state, Some(false));
    }
    (state, None)
}

/// PodGroups of one queue by phase.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pending (or no phase yet).
    pub pending: i32,
    /// Running.
    pub running: i32,
    /// Unknown.
    pub unknown: i32,
    /// Inqueue.
    pub inqueue: i32,
    /// Completed.
    pub completed: i32,
}

impl Counts {
    /// Counts `phases`.
    pub fn of<'a>(phases: impl IntoIterator<Item = &'a PodGroupPhase>) -> Self {
        let mut c = Counts::default();
        for p in phases {
            match p {
                PodGroupPhase::Running => c.running += 1,
                PodGroupPhase::Unknown => c.unknown += 1,
                PodGroupPhase::Inqueue => c.inqueue += 1,
                PodGroupPhase::Completed => c.completed += 1,
                PodGroupPhase::Pending | PodGroupPhase::Other(_) => c.pending += 1,
            }
        }
        c
    }

    /// Total.
    pub fn total(&self) -> i32 {
        self.pending + self.running + self.unknown + self.inqueue + self.completed
    }
}

/// The merge patch of the queue's `status` subresource that brings `state` and the counts up
/// to date, or `None` when nothing differs. Only these six fields are sent, so the scheduler's
/// `status.allocated` is never touched.
///
/// A change of state is pinned to the resourceVersion it was decided on: it was decided from
/// the state read, and a write in between (a Command applied, a parent closed) must make it be
/// decided again. Counts alone are not pinned: they come from the PodGroups, not from the
/// queue read, so a write of the queue in between cannot make them wrong; pinned, every
/// scheduling session's write of `status.allocated` would have turned them into a conflict.
pub fn status_patch(queue: &Queue, state: &QueueState, counts: &Counts) -> Option<Value> {
    let s = queue.status.clone().unwrap_or_default();
    let want: BTreeMap<&str, i32> = [
        ("pending", counts.pending),
        ("running", counts.running),
        ("unknown", counts.unknown),
        ("inqueue", counts.inqueue),
        ("completed", counts.completed),
    ]
    .into();
    let have: BTreeMap<&str, i32> = [
        ("pending", s.pending.unwrap_or(0)),
        ("running", s.running.unwrap_or(0)),
        ("unknown", s.unknown.unwrap_or(0)),
        ("inqueue", s.inqueue.unwrap_or(0)),
        ("completed", s.completed.unwrap_or(0)),
    ]
    .into();
    // Counts that were never written count as "absent", so a fresh queue gets its zeros once.
    let absent = s.pending.is_none();
    if s.state.as_ref() == Some(state) && want == have && !absent {
        return None;
    }
    let mut status = json!({});
    for (k, v) in want {
        status[k] = json!(v);
    }
    if s.state.as_ref() == Some(state) {
        return Some(json!({ "status": status }));
    }
    status["state"] = json!(state.to_string());
    Some(json!({
        "metadata": {"resourceVersion": queue.metadata.resource_version},
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tephra_api::scheduling::QueueStatus;

    #[test]
    fn state_table() {
        use QueueAction as A;
        use QueueState as S;
        let cases: &[(Option<QueueState>, QueueAction, bool, QueueState)] = &[
            (None, A::Sync, true, S::Open),
            (Some(S::Open), A::Sync, false, S::Open),
            (Some(S::Open), A::Close, true, S::Closing),
            (Some(S::Open), A::Close, false, S::Closed),
            (Some(S::Closed), A::Sync, true, S::Closed),
            (Some(S::Closed), A::Open, true, S::Open),
            (Some(S::Closed), A::Close, true, S::Closed),
            (Some(S::Closing), A::Sync, true, S::Closing),
            (Some(S::Closing), A::Sync, false, S::Closed),
            (Some(S::Closing), A::Open, true, S::Open),
            (Some(S::Unknown), A::Sync, true, S::Unknown),
            (Some(S::Unknown), A::Close, false, S::Closed),
            (Some(S::Unknown), A::Open, false, S::Open),
        ];
        for (cur, action, has, want) in cases {
            assert_eq!(
                &next_state(cur.as_ref(), action, *has),
                want,
                "{cur:?} {action:?} {has}"
            );
        }
    }

    #[test]
    fn hierarchy_closes_with_the_parent_and_reopens_only_what_it_closed() {
        use QueueAction as A;
        use QueueState as S;
        // Parent closed: an open child closes (Closing while it has PodGroups) and is marked.
        assert_eq!(
            apply_hierarchy(S::Open, Some(&S::Closed), false, None, false),
            (S::Closed, Some(true))
        );
        assert_eq!(
            apply_hierarchy(S::Open, Some(&S::Closing), false, None, true),
            (S::Closing, Some(true))
        );
        // An explicit Open does not take while the parent is closed; the mark stays.
        assert_eq!(
            apply_hierarchy(S::Open, Some(&S::Closed), true, Some(&A::Open), false),
            (S::Closed, None)
        );
        // Already closed under a closed parent: nothing changes.
        assert_eq!(
            apply_hierarchy(S::Closed, Some(&S::Closed), false, None, false),
            (S::Closed, None)
        );
        // Parent open again: what it closed reopens and loses the mark ...
        assert_eq!(
            apply_hierarchy(S::Closed, Some(&S::Open), true, None, false),
            (S::Open, Some(false))
        );
        // ... what was closed on its own stays closed, and so does an explicit Close now.
        assert_eq!(
            apply_hierarchy(S::Closed, Some(&S::Open), false, None, false),
            (S::Closed, None)
        );
        assert_eq!(
            apply_hierarchy(S::Closed, None, true, Some(&A::Close), false),
            (S::Closed, None)
        );
        // An explicit Open under an open parent clears a stale mark.
        assert_eq!(
            apply_hierarchy(S::Open, None, true, Some(&A::Open), false),
            (S::Open, Some(false))
        );
        assert_eq!(
            apply_hierarchy(S::Open, None, false, None, false),
            (S::Open, None)
        );
    }

    #[test]
    fn counts_and_patch_only_on_change() {
        let c = Counts::of(&[
            PodGroupPhase::Pending,
            PodGroupPhase::Running,
            PodGroupPhase::Running,
            PodGroupPhase::Other(String::new()),
        ]);
        assert_eq!((c.pending, c.running, c.total()), (2, 2, 4));
        let mut q = tephra_api::Queue::test("q");
        q.metadata.resource_version = Some("5".into());
        let p = status_patch(&q, &QueueState::Open, &c).unwrap();
        assert_eq!(p["status"]["state"], "Open");
        assert_eq!(p["status"]["running"], 2);
        assert_eq!(p["metadata"]["resourceVersion"], "5");
        assert!(p["status"].get("allocated").is_none());
        q.status = Some(QueueStatus {
            state: Some(QueueState::Open),
            pending: Some(2),
            running: Some(2),
            unknown: Some(0),
            inqueue: Some(0),
            completed: Some(0),
            ..QueueStatus::default()
        });
        assert_eq!(status_patch(&q, &QueueState::Open, &c), None);
        let closing = status_patch(&q, &QueueState::Closing, &c).unwrap();
        assert_eq!(closing["status"]["state"], "Closing");
        assert_eq!(closing["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn only_a_change_of_state_is_pinned() {
        let mut q = tephra_api::Queue::test("q");
        q.metadata.resource_version = Some("7".into());
        q.status = Some(QueueStatus {
            state: Some(QueueState::Open),
            pending: Some(1),
            running: Some(0),
            unknown: Some(0),
            inqueue: Some(0),
            completed: Some(0),
            ..QueueStatus::default()
        });
        let c = Counts::of(&[PodGroupPhase::Running]);
        // Counts alone: the scheduler writing `allocated` meanwhile must not turn this write
        // into a conflict, and the state read is not written back over a newer one.
        let p = status_patch(&q, &QueueState::Open, &c).unwrap();
        assert_eq!(
            p,
            json!({"status": {"pending": 0, "running": 1, "unknown": 0, "inqueue": 0, "completed": 0}})
        );
        // A new state carries the counts and the version it was decided on.
        let p = status_patch(&q, &QueueState::Closing, &c).unwrap();
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(p["status"]["state"], "Closing");
        assert_eq!(p["status"]["running"], 1);
    }
}
