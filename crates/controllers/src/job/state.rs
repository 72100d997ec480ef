//! The job state machine: given the job's phase and the action to run, what to do to the pods
//! ([`Work`]) and how to move the status afterwards ([`Rule`]). Volcano's
//! `pkg/controllers/job/state/*.go`, split into a pure decision ([`step`]) and a pure status
//! rule ([`apply`]); the edge does the pod work between the two.
//!
//! ```text
//!   phase ─┐
//!          ├─▶ step() ─▶ Step { work: Sync | KillJob(retain) | KillTarget, rule }
//!   action ┘                         │ (edge: create/delete pods, recount the status)
//!                                    ▼
//!                  apply(rule, spec, &mut status) ─▶ phase moved? (edge stamps time, condition)
//! ```
//!
//! Where tephra departs from Volcano's job controller:
//! * In `Restarting`, `AbortJob`, `TerminateJob` and `CompleteJob` take effect (kill everything,
//!   move to Aborting / Terminating / Completing). Volcano only kills the pods again and keeps
//!   restarting, so a user's command is silently lost. This is decided here, in [`step`].
//! * Counters always include the retained (Succeeded/Failed) pods that still exist; Volcano
//!   counts only the pods it just tried to kill, so `succeeded`/`failed` drop to 0 after a kill.
//!   The edge fills the counters before calling [`apply`], so the rules here see real counts.
//! * When [`apply`] moves a job into a finished phase (Completed/Failed from the Running or
//!   Restarting rules), the edge kills the remaining pods in the same pass, instead of waiting
//!   for some later event to run the finished state as Volcano does.

use tephra_api::batch::{Action, JobPhase, JobSpec, JobState, JobStatus};

/// Which finished pods a whole-job kill leaves in place (Volcano's `PodRetainPhase*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Retain {
    /// Kill every pod.
    None,
    /// Keep Succeeded and Failed pods (their logs stay readable).
    Soft,
}

/// What the edge does to the pods before applying the status rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Work {
    /// Create missing pods, delete surplus and out-of-sync ones, recount (Volcano's `SyncJob`).
    Sync,
    /// Kill every pod of the job except the retained phases, bump `status.version` and delete
    /// the PodGroup (Volcano's `KillJob`).
    KillJob(Retain),
    /// Kill only the pods of `Target::of(action, request)` (a task, a pod or a partition);
    /// the PodGroup stays (Volcano's `KillTarget`).
    KillTarget,
}

/// The status function run after the work (Volcano's `UpdateStatusFn` of each state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// No status function: the phase stays (Aborted and the finished states).
    None,
    /// Pending's sync rule: Running once `minAvailable` pods run or have finished.
    PendingSync,
    /// Running's sync rule: Completed / Failed / back to Pending from the pod counts.
    RunningSync,
    /// Move to Restarting and count one more retry.
    ToRestarting,
    /// Move to Aborting.
    ToAborting,
    /// Move to Completing.
    ToCompleting,
    /// Move to Terminating.
    ToTerminating,
    /// Restarting's rule: Failed when out of retries, Pending once enough pods are gone.
    Restarting,
    /// Aborting's rule: Aborted once no pod is pending, running or terminating.
    Aborting,
    /// Completing's rule: Completed once no pod is pending, running or terminating.
    Completing,
    /// Terminating's rule: Terminated once no pod is pending, running or terminating.
    Terminating,
}

/// The work and the status rule for one action in one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Step {
    /// What to do to the pods.
    pub work: Work,
    /// How to move the status afterwards.
    pub rule: Rule,
}

const fn st(work: Work, rule: Rule) -> Step {
    Step { work, rule }
}

/// Whether `phase` is one of the finished phases (Completed, Terminated, Failed), where every
/// action only kills what is left.
pub fn is_finished(phase: Option<&JobPhase>) -> bool {
    phase.is_some_and(JobPhase::is_finished)
}

/// Whether the job in `phase` has not started yet: no phase, Pending, or a phase this build does
/// not know (Volcano runs the pending state for all three).
pub fn is_pending(phase: Option<&JobPhase>) -> bool {
    matches!(
        phase,
        None | Some(JobPhase::Pending) | Some(JobPhase::Other(_))
    )
}

/// Whether `action` restarts only part of a job (a task, a pod or a partition).
pub fn is_targeted(action: &Action) -> bool {
    matches!(
        action,
        Action::RestartTask | Action::RestartPod | Action::RestartPartition
    )
}

/// The step for `action` in `phase` (Volcano's `NewState(job).Execute(action)`, decided without
/// doing it). An absent or unknown phase behaves as Pending; an action string this build does
/// not know behaves as Volcano's "anything else" branch of each state.
pub fn step(phase: Option<&JobPhase>, action: &Action) -> Step {
    use Retain as R;
    use Work::{KillJob, KillTarget, Sync};

    let phase = match phase {
        None | Some(JobPhase::Other(_)) => &JobPhase::Pending,
        Some(p) => p,
    };
    match phase {
        JobPhase::Pending | JobPhase::Running => match action {
            Action::RestartJob => st(KillJob(R::None), Rule::ToRestarting),
            a if is_targeted(a) => st(KillTarget, Rule::ToRestarting),
            Action::AbortJob => st(KillJob(R::Soft), Rule::ToAborting),
            Action::CompleteJob => st(KillJob(R::Soft), Rule::ToCompleting),
            Action::TerminateJob => st(KillJob(R::Soft), Rule::ToTerminating),
            // ResumeJob, SyncJob, EnqueueJob, queue actions and unknown strings: a plain sync.
            _ if *phase == JobPhase::Running => st(Sync, Rule::RunningSync),
            _ => st(Sync, Rule::PendingSync),
        },
        JobPhase::Restarting => match action {
            Action::SyncJob => st(Sync, Rule::Restarting),
            a if is_targeted(a) => st(KillTarget, Rule::Restarting),
            // Departure from Volcano: there these three only kill again and the job keeps
            // restarting, losing the user's command. Here they take effect.
            Action::AbortJob => st(KillJob(R::None), Rule::ToAborting),
            Action::TerminateJob => st(KillJob(R::None), Rule::ToTerminating),
            Action::CompleteJob => st(KillJob(R::None), Rule::ToCompleting),
            // RestartJob, ResumeJob, EnqueueJob and unknown strings: kill again, keep restarting.
            _ => st(KillJob(R::None), Rule::Restarting),
        },
        JobPhase::Aborting => match action {
            Action::ResumeJob => st(KillJob(R::Soft), Rule::ToRestarting),
            _ => st(KillJob(R::Soft), Rule::Aborting),
        },
        JobPhase::Aborted => match action {
            Action::ResumeJob => st(KillJob(R::Soft), Rule::ToRestarting),
            _ => st(KillJob(R::Soft), Rule::None),
        },
        JobPhase::Completing => st(KillJob(R::Soft), Rule::Completing),
        JobPhase::Terminating => st(KillJob(R::Soft), Rule::Terminating),
        JobPhase::Completed | JobPhase::Terminated | JobPhase::Failed => {
            st(KillJob(R::Soft), Rule::None)
        }
        // Unreachable: unknown phases were mapped to Pending above. Kept total without a panic.
        JobPhase::Other(_) => st(Sync, Rule::PendingSync),
    }
}

/// Applies `rule` to `status`, whose counters (pending/running/succeeded/failed/terminating/
/// unknown, taskStatusCount, minAvailable, retryCount) the edge has already filled from the
/// pods that exist. Sets `status.state.phase`; returns true where Volcano's status function
/// returns true (the edge then stamps `lastTransitionTime`, reason and message and appends the
/// condition). Absent counters count as 0.
pub fn apply(rule: Rule, spec: &JobSpec, status: &mut JobStatus) -> bool {
    let c = Counts::of(status);
    let next = match rule {
        Rule::None => return false,
        Rule::PendingSync => (spec.min_available()
            <= c.running
                .saturating_add(c.succeeded)
                .saturating_add(c.failed))
        .then_some(JobPhase::Running),
        Rule::RunningSync => running_rule(spec, status, &c),
        Rule::ToRestarting => {
            status.retry_count = Some(c.retry_count.saturating_add(1));
            Some(JobPhase::Restarting)
        }
        Rule::ToAborting => Some(JobPhase::Aborting),
        Rule::ToCompleting => Some(JobPhase::Completing),
        Rule::ToTerminating => Some(JobPhase::Terminating),
        Rule::Restarting => {
            if c.retry_count >= spec.max_retry() {
                Some(JobPhase::Failed)
            } else if total_replicas(spec).saturating_sub(c.terminating) >= c.min_available {
                Some(JobPhase::Pending)
            } else {
                None
            }
        }
        Rule::Aborting => c.all_gone().then_some(JobPhase::Aborted),
        Rule::Completing => c.all_gone().then_some(JobPhase::Completed),
        Rule::Terminating => c.all_gone().then_some(JobPhase::Terminated),
    };
    match next {
        Some(phase) => {
            status.state.get_or_insert_with(JobState::default).phase = Some(phase);
            true
        }
        None => false,
    }
}

/// Σ task replicas. Saturating, unlike `JobSpec::total_replicas`: absurd counts written by a
/// user must not make the controller panic (debug builds trap on overflow).
fn total_replicas(spec: &JobSpec) -> i32 {
    spec.tasks()
        .iter()
        .fold(0i32, |sum, t| sum.saturating_add(t.replicas()))
}

/// The counters a rule reads, absent ones as 0.
struct Counts {
    pending: i32,
    running: i32,
    succeeded: i32,
    failed: i32,
    terminating: i32,
    min_available: i32,
    retry_count: i32,
}

impl Counts {
    fn of(s: &JobStatus) -> Self {
        Self {
            pending: s.pending.unwrap_or(0),
            running: s.running.unwrap_or(0),
            succeeded: s.succeeded.unwrap_or(0),
            failed: s.failed.unwrap_or(0),
            terminating: s.terminating.unwrap_or(0),
            min_available: s.min_available.unwrap_or(0),
            retry_count: s.retry_count.unwrap_or(0),
        }
    }

    /// The test of the Aborting / Completing / Terminating rules: nothing left alive.
    fn all_gone(&self) -> bool {
        self.terminating == 0 && self.pending == 0 && self.running == 0
    }
}

/// Running's sync rule, in Volcano's order; `None` keeps the phase.
fn running_rule(spec: &JobSpec, status: &JobStatus, c: &Counts) -> Option<JobPhase> {
    let replicas = total_replicas(spec);
    // A job scaled to zero replicas stays as it is.
    if replicas == 0 {
        return None;
    }
    if let Some(min_success) = spec.min_success
        && c.succeeded >= min_success
    {
        return Some(JobPhase::Completed);
    }
    if c.succeeded.saturating_add(c.failed) == replicas {
        let task_min_sum = spec
            .tasks()
            .iter()
            .fold(0i32, |sum, t| sum.saturating_add(t.min_available()));
        if spec.min_available() >= task_min_sum {
            // Every task with an explicit minAvailable must have had that many successes;
            // tasks with no count entry are not judged (Volcano skips them too).
            let counts = status.task_status_count.as_ref();
            for task in spec.tasks() {
                let Some(task_min) = task.min_available else {
                    continue;
                };
                let Some(ts) = counts.and_then(|m| m.get(task.name())) else {
                    continue;
                };
                let ok = ts
                    .phase
                    .as_ref()
                    .and_then(|p| p.get("Succeeded"))
                    .copied()
                    .unwrap_or(0);
                if ok < task_min {
                    return Some(JobPhase::Failed);
                }
            }
        }
        return Some(match spec.min_success {
            Some(min_success) if c.succeeded < min_success => JobPhase::Failed,
            _ if c.succeeded >= spec.min_available() => JobPhase::Completed,
            _ => JobPhase::Failed,
        });
    }
    if c.pending > replicas.saturating_sub(spec.min_available()) {
        return Some(JobPhase::Pending);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tephra_api::batch::{Job, TaskSpec, TaskState};

    use Retain as R;
    use Work::{KillJob, KillTarget, Sync};

    /// The actions of the table's columns, in order.
    fn actions() -> Vec<Action> {
        vec![
            Action::RestartJob,
            Action::RestartTask,
            Action::RestartPod,
            Action::RestartPartition,
            Action::AbortJob,
            Action::CompleteJob,
            Action::TerminateJob,
            Action::ResumeJob,
            Action::SyncJob,
            Action::EnqueueJob,
            Action::Other("Bogus".into()),
        ]
    }

    /// Expected steps for the actions of [`actions`], in the same order.
    fn row(phase: Option<JobPhase>) -> Vec<Step> {
        let kt = |r| st(KillTarget, r);
        match phase {
            None | Some(JobPhase::Pending) | Some(JobPhase::Other(_)) => vec![
                st(KillJob(R::None), Rule::ToRestarting),
                kt(Rule::ToRestarting),
                kt(Rule::ToRestarting),
                kt(Rule::ToRestarting),
                st(KillJob(R::Soft), Rule::ToAborting),
                st(KillJob(R::Soft), Rule::ToCompleting),
                st(KillJob(R::Soft), Rule::ToTerminating),
                st(Sync, Rule::PendingSync),
                st(Sync, Rule::PendingSync),
                st(Sync, Rule::PendingSync),
                st(Sync, Rule::PendingSync),
            ],
            Some(JobPhase::Running) => vec![
                st(KillJob(R::None), Rule::ToRestarting),
                kt(Rule::ToRestarting),
                kt(Rule::ToRestarting),
                kt(Rule::ToRestarting),
                st(KillJob(R::Soft), Rule::ToAborting),
                st(KillJob(R::Soft), Rule::ToCompleting),
                st(KillJob(R::Soft), Rule::ToTerminating),
                st(Sync, Rule::RunningSync),
                st(Sync, Rule::RunningSync),
                st(Sync, Rule::RunningSync),
                st(Sync, Rule::RunningSync),
            ],
            Some(JobPhase::Restarting) => vec![
                st(KillJob(R::None), Rule::Restarting),
                kt(Rule::Restarting),
                kt(Rule::Restarting),
                kt(Rule::Restarting),
                st(KillJob(R::None), Rule::ToAborting),
                st(KillJob(R::None), Rule::ToCompleting),
                st(KillJob(R::None), Rule::ToTerminating),
                st(KillJob(R::None), Rule::Restarting),
                st(Sync, Rule::Restarting),
                st(KillJob(R::None), Rule::Restarting),
                st(KillJob(R::None), Rule::Restarting),
            ],
            Some(JobPhase::Aborting) => {
                let mut v = vec![st(KillJob(R::Soft), Rule::Aborting); 11];
                v[7] = st(KillJob(R::Soft), Rule::ToRestarting);
                v
            }
            Some(JobPhase::Aborted) => {
                let mut v = vec![st(KillJob(R::Soft), Rule::None); 11];
                v[7] = st(KillJob(R::Soft), Rule::ToRestarting);
                v
            }
            Some(JobPhase::Completing) => vec![st(KillJob(R::Soft), Rule::Completing); 11],
            Some(JobPhase::Terminating) => vec![st(KillJob(R::Soft), Rule::Terminating); 11],
            Some(JobPhase::Completed | JobPhase::Terminated | JobPhase::Failed) => {
                vec![st(KillJob(R::Soft), Rule::None); 11]
            }
        }
    }

    #[test]
    fn transition_table() {
        let phases = [
            None,
            Some(JobPhase::Pending),
            Some(JobPhase::Running),
            Some(JobPhase::Restarting),
            Some(JobPhase::Aborting),
            Some(JobPhase::Aborted),
            Some(JobPhase::Completing),
            Some(JobPhase::Completed),
            Some(JobPhase::Terminating),
            Some(JobPhase::Terminated),
            Some(JobPhase::Failed),
            Some(JobPhase::Other("Weird".into())),
        ];
        for phase in phases {
            let want = row(phase.clone());
            for (action, want) in actions().iter().zip(want) {
                assert_eq!(
                    step(phase.as_ref(), action),
                    want,
                    "phase {phase:?}, action {action}"
                );
            }
        }
    }

    #[test]
    fn helpers() {
        assert!(is_finished(Some(&JobPhase::Failed)));
        assert!(!is_finished(Some(&JobPhase::Aborted)));
        assert!(!is_finished(None));
        assert!(is_pending(None));
        assert!(is_pending(Some(&JobPhase::Other(String::new()))));
        assert!(!is_pending(Some(&JobPhase::Running)));
        assert!(is_targeted(&Action::RestartPartition));
        assert!(!is_targeted(&Action::RestartJob));
    }

    /// A spec: tasks of `(replicas, task minAvailable)`, job minAvailable, minSuccess, maxRetry.
    fn spec(tasks: &[(i32, Option<i32>)], min_available: i32) -> JobSpec {
        let mut job = Job::test("j").min_available(min_available);
        for (i, (replicas, _)) in tasks.iter().enumerate() {
            job = job.task(&format!("t{i}"), *replicas);
        }
        let mut spec = job.spec;
        for (t, (_, min)) in spec.tasks.iter_mut().flatten().zip(tasks) {
            t.min_available = *min;
        }
        spec
    }

    #[derive(Default, Clone, Copy)]
    struct C {
        pending: i32,
        running: i32,
        succeeded: i32,
        failed: i32,
        terminating: i32,
        min_available: i32,
        retry: i32,
    }

    fn status(phase: JobPhase, c: C) -> JobStatus {
        JobStatus {
            state: Some(JobState {
                phase: Some(phase),
                ..Default::default()
            }),
            pending: Some(c.pending),
            running: Some(c.running),
            succeeded: Some(c.succeeded),
            failed: Some(c.failed),
            terminating: Some(c.terminating),
            min_available: Some(c.min_available),
            retry_count: Some(c.retry),
            ..Default::default()
        }
    }

    fn phase_of(s: &JobStatus) -> Option<JobPhase> {
        s.state.as_ref().and_then(|s| s.phase.clone())
    }

    /// Runs `rule` from `from` with counters `c`; returns (changed, resulting phase, retry).
    fn run(rule: Rule, spec: &JobSpec, from: JobPhase, c: C) -> (bool, JobPhase, i32) {
        let mut s = status(from.clone(), c);
        let changed = apply(rule, spec, &mut s);
        let phase = phase_of(&s).unwrap_or(from);
        (changed, phase, s.retry_count.unwrap_or(0))
    }

    #[test]
    fn pending_sync_rule() {
        let sp = spec(&[(4, None)], 3);
        let cases = [
            (C::default(), false, JobPhase::Pending),
            (
                C {
                    running: 2,
                    ..C::default()
                },
                false,
                JobPhase::Pending,
            ),
            (
                C {
                    running: 3,
                    ..C::default()
                },
                true,
                JobPhase::Running,
            ),
            (
                C {
                    running: 1,
                    succeeded: 1,
                    failed: 1,
                    ..C::default()
                },
                true,
                JobPhase::Running,
            ),
            (
                C {
                    pending: 4,
                    ..C::default()
                },
                false,
                JobPhase::Pending,
            ),
        ];
        for (c, changed, want) in cases {
            let (ch, ph, _) = run(Rule::PendingSync, &sp, JobPhase::Pending, c);
            assert_eq!((ch, ph), (changed, want));
        }
        // minAvailable 0: any sync moves to Running.
        let (ch, ph, _) = run(
            Rule::PendingSync,
            &spec(&[(1, None)], 0),
            JobPhase::Pending,
            C::default(),
        );
        assert_eq!((ch, ph), (true, JobPhase::Running));
        // An empty status gets a state.
        let mut s = JobStatus::default();
        assert!(apply(Rule::PendingSync, &spec(&[(1, None)], 0), &mut s));
        assert_eq!(phase_of(&s), Some(JobPhase::Running));
    }

    #[test]
    fn running_sync_rule() {
        let c = |pending, running, succeeded, failed| C {
            pending,
            running,
            succeeded,
            failed,
            ..C::default()
        };
        let sp = spec(&[(4, None)], 2);
        let cases = [
            // all finished: enough successes → Completed, else Failed
            (c(0, 0, 2, 2), true, JobPhase::Completed),
            (c(0, 0, 1, 3), true, JobPhase::Failed),
            (c(0, 0, 4, 0), true, JobPhase::Completed),
            // pending > replicas − minAvailable (2) → Pending
            (c(3, 1, 0, 0), true, JobPhase::Pending),
            (c(2, 2, 0, 0), false, JobPhase::Running),
            (c(0, 1, 2, 0), false, JobPhase::Running),
        ];
        for (cc, changed, want) in cases {
            let (ch, ph, _) = run(Rule::RunningSync, &sp, JobPhase::Running, cc);
            assert_eq!(
                (ch, ph.clone()),
                (changed, want),
                "{cc:?}",
                cc = (cc.pending, cc.running, cc.succeeded, cc.failed)
            );
        }

        // replicas 0: never moves, whatever the counts.
        let zero = spec(&[(0, None)], 0);
        assert_eq!(
            run(Rule::RunningSync, &zero, JobPhase::Running, c(5, 0, 0, 0)),
            (false, JobPhase::Running, 0)
        );

        // minSuccess: reached early → Completed; all finished below it → Failed even when
        // minAvailable is met.
        let mut ms = spec(&[(4, None)], 1);
        ms.min_success = Some(2);
        assert_eq!(
            run(Rule::RunningSync, &ms, JobPhase::Running, c(0, 2, 2, 0)).1,
            JobPhase::Completed
        );
        assert_eq!(
            run(Rule::RunningSync, &ms, JobPhase::Running, c(0, 3, 1, 0)),
            (false, JobPhase::Running, 0)
        );
        assert_eq!(
            run(Rule::RunningSync, &ms, JobPhase::Running, c(0, 0, 1, 3)).1,
            JobPhase::Failed
        );
    }

    #[test]
    fn running_sync_per_task_min_available() {
        // Two tasks of 2 with task minAvailable 1 each; job minAvailable 2 ≥ Σ task min (2).
        let sp = spec(&[(2, Some(1)), (2, Some(1))], 2);
        let counts = |t0: i32, t1: i32| {
            let mut m = BTreeMap::new();
            for (name, ok) in [("t0", t0), ("t1", t1)] {
                m.insert(
                    name.to_string(),
                    TaskState {
                        phase: Some(BTreeMap::from([
                            ("Succeeded".to_string(), ok),
                            ("Failed".to_string(), 2 - ok),
                        ])),
                    },
                );
            }
            m
        };
        let all_done = |t0, t1| {
            let mut s = status(
                JobPhase::Running,
                C {
                    succeeded: t0 + t1,
                    failed: 4 - t0 - t1,
                    ..C::default()
                },
            );
            s.task_status_count = Some(counts(t0, t1));
            s
        };
        // t1 had no success: Failed although 2 pods (= minAvailable) succeeded overall.
        let mut s = all_done(2, 0);
        assert!(apply(Rule::RunningSync, &sp, &mut s));
        assert_eq!(phase_of(&s), Some(JobPhase::Failed));
        // Each task at its minimum: Completed.
        let mut s = all_done(1, 1);
        assert!(apply(Rule::RunningSync, &sp, &mut s));
        assert_eq!(phase_of(&s), Some(JobPhase::Completed));
        // A task missing from taskStatusCount is not judged.
        let mut s = all_done(2, 0);
        if let Some(m) = s.task_status_count.as_mut() {
            m.remove("t1");
        }
        assert!(apply(Rule::RunningSync, &sp, &mut s));
        assert_eq!(phase_of(&s), Some(JobPhase::Completed));
        // Job minAvailable below Σ task minAvailable: per-task check skipped.
        let low = spec(&[(2, Some(2)), (2, Some(2))], 2);
        let mut s = all_done(2, 0);
        assert!(apply(Rule::RunningSync, &low, &mut s));
        assert_eq!(phase_of(&s), Some(JobPhase::Completed));
        // Tasks without an explicit minAvailable are not judged either.
        let implicit = spec(&[(2, None), (2, None)], 4);
        let mut s = all_done(2, 0);
        assert!(apply(Rule::RunningSync, &implicit, &mut s));
        // 2 successes < job minAvailable 4 → Failed by the else-chain, not the task loop.
        assert_eq!(phase_of(&s), Some(JobPhase::Failed));
    }

    #[test]
    fn restarting_rule() {
        let mut sp = spec(&[(3, None)], 3);
        sp.max_retry = Some(2);
        let c = |terminating, min_available, retry| C {
            terminating,
            min_available,
            retry,
            ..C::default()
        };
        let cases = [
            // out of retries
            (c(0, 3, 2), true, JobPhase::Failed),
            (c(3, 3, 3), true, JobPhase::Failed),
            // replicas − terminating ≥ status.minAvailable → Pending
            (c(0, 3, 1), true, JobPhase::Pending),
            (c(1, 2, 1), true, JobPhase::Pending),
            (c(1, 3, 1), false, JobPhase::Restarting),
            (c(3, 1, 0), false, JobPhase::Restarting),
        ];
        for (cc, changed, want) in cases {
            let (ch, ph, retry) = run(Rule::Restarting, &sp, JobPhase::Restarting, cc);
            assert_eq!((ch, ph), (changed, want));
            assert_eq!(retry, cc.retry, "the rule itself never counts a retry");
        }
        // maxRetry absent or 0 means 3.
        let mut dflt = spec(&[(1, None)], 1);
        dflt.max_retry = Some(0);
        assert_eq!(
            run(Rule::Restarting, &dflt, JobPhase::Restarting, c(1, 1, 2)).1,
            JobPhase::Restarting
        );
        assert_eq!(
            run(Rule::Restarting, &dflt, JobPhase::Restarting, c(1, 1, 3)).1,
            JobPhase::Failed
        );
    }

    #[test]
    fn draining_rules_wait_for_all_zero() {
        let sp = spec(&[(2, None)], 2);
        let rules = [
            (Rule::Aborting, JobPhase::Aborting, JobPhase::Aborted),
            (Rule::Completing, JobPhase::Completing, JobPhase::Completed),
            (
                Rule::Terminating,
                JobPhase::Terminating,
                JobPhase::Terminated,
            ),
        ];
        for (rule, from, to) in rules {
            // Finished pods (retained) do not hold the phase back.
            let done = C {
                succeeded: 1,
                failed: 1,
                ..C::default()
            };
            assert_eq!(run(rule, &sp, from.clone(), done), (true, to, 0));
            for busy in [
                C {
                    pending: 1,
                    ..C::default()
                },
                C {
                    running: 1,
                    ..C::default()
                },
                C {
                    terminating: 1,
                    ..C::default()
                },
            ] {
                assert_eq!(run(rule, &sp, from.clone(), busy), (false, from.clone(), 0));
            }
        }
    }

    #[test]
    fn setting_rules() {
        let sp = spec(&[(2, None)], 2);
        let cases = [
            (Rule::ToRestarting, JobPhase::Restarting, 2),
            (Rule::ToAborting, JobPhase::Aborting, 1),
            (Rule::ToCompleting, JobPhase::Completing, 1),
            (Rule::ToTerminating, JobPhase::Terminating, 1),
        ];
        for (rule, want, retry) in cases {
            let c = C {
                running: 2,
                retry: 1,
                ..C::default()
            };
            assert_eq!(run(rule, &sp, JobPhase::Running, c), (true, want, retry));
        }
        // No rule: nothing changes.
        let c = C {
            running: 2,
            ..C::default()
        };
        let mut s = status(JobPhase::Aborted, c);
        let before = s.clone();
        assert!(!apply(Rule::None, &sp, &mut s));
        assert_eq!(s, before);
        // An absent retryCount starts at 0.
        let mut s = JobStatus::default();
        assert!(apply(Rule::ToRestarting, &sp, &mut s));
        assert_eq!(s.retry_count, Some(1));
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        let sp = spec(&[(i32::MAX, None), (i32::MAX, None)], i32::MIN);
        let c = C {
            pending: i32::MAX,
            running: i32::MAX,
            succeeded: i32::MAX,
            failed: i32::MAX,
            terminating: i32::MIN,
            ..C::default()
        };
        for rule in [Rule::PendingSync, Rule::RunningSync, Rule::Restarting] {
            let mut s = status(JobPhase::Running, c);
            // Only that it returns: the outcome of nonsense counts is not specified.
            let _ = apply(rule, &sp, &mut s);
        }
    }

    #[test]
    fn task_spec_helper_is_used() {
        // Guards the assumption the Running rule makes: TaskSpec::min_available defaults to replicas.
        let t = TaskSpec {
            replicas: Some(3),
            ..Default::default()
        };
        assert_eq!(t.min_available(), 3);
    }
}
