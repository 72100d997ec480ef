//! Pure status arithmetic: counting a job's pods, and stamping a transition.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use tephra_api::Duration;
use tephra_api::batch::{JobCondition, JobPhase, JobStatus, TaskState};

/// Pod counts by phase, for the job and per task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pending pods.
    pub pending: i32,
    /// Running pods.
    pub running: i32,
    /// Succeeded pods.
    pub succeeded: i32,
    /// Failed pods.
    pub failed: i32,
    /// Pods being deleted (or deleted by this pass).
    pub terminating: i32,
    /// Pods in any other phase.
    pub unknown: i32,
    /// Per task, pods by phase name (Volcano's `taskStatusCount`).
    pub tasks: BTreeMap<String, BTreeMap<String, i32>>,
}

/// A pod's phase as Kubernetes reports it (`Pending` before the kubelet wrote one).
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

impl Counts {
    /// Counts a live pod of `task` by its phase.
    pub fn add(&mut self, task: &str, pod: &Pod) {
        let phase = pod_phase(pod);
        match phase {
            "Pending" => self.pending += 1,
            "Running" => self.running += 1,
            "Succeeded" => self.succeeded += 1,
            "Failed" => self.failed += 1,
            _ => self.unknown += 1,
        }
        *self
            .tasks
            .entry(task.to_string())
            .or_default()
            .entry(phase.to_string())
            .or_default() += 1;
    }

    /// Counts a pod that is going away.
    pub fn add_terminating(&mut self) {
        self.terminating += 1;
    }

    /// Pods that are neither finished nor going away.
    pub fn active(&self) -> i32 {
        self.pending + self.running + self.unknown
    }

    /// Writes the counters into `status` (replacing what was there).
    pub fn write_into(&self, status: &mut JobStatus) {
        status.pending = Some(self.pending);
        status.running = Some(self.running);
        status.succeeded = Some(self.succeeded);
        status.failed = Some(self.failed);
        status.terminating = Some(self.terminating);
        status.unknown = Some(self.unknown);
        status.task_status_count = if self.tasks.is_empty() {
            None
        } else {
            Some(
                self.tasks
                    .iter()
                    .map(|(t, phases)| {
                        (
                            t.clone(),
                            TaskState {
                                phase: Some(phases.clone()),
                            },
                        )
                    })
                    .collect(),
            )
        };
    }
}

/// The current phase of a status (`None` before the first write).
pub fn phase_of(status: &JobStatus) -> Option<&JobPhase> {
    status.state.as_ref()?.phase.as_ref()
}

/// Stamps a transition the state machine reported: `lastTransitionTime`, the reason and
/// message (Volcano leaves both empty; tephra says which event and action caused it), and the
/// condition for the new phase (one per phase: an older one with the same status is replaced,
/// as Volcano's `appendJobCondition` does).
pub fn stamp(status: &mut JobStatus, now: &Time, reason: &str, message: &str) {
    let state = status.state.get_or_insert_with(Default::default);
    state.last_transition_time = Some(now.clone());
    state.reason = Some(reason.to_string());
    state.message = Some(message.to_string());
    let phase = state.phase.clone().unwrap_or_default();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.status.as_ref() != Some(&phase));
    conditions.push(JobCondition {
        status: Some(phase),
        last_transition_time: Some(now.clone()),
    });
}

/// `runningDuration`: from the job's creation to its last transition, as a Go duration.
pub fn running_duration(created: Option<&Time>, status: &JobStatus) -> Option<Duration> {
    let created = created?.0;
    let last = status.state.as_ref()?.last_transition_time.as_ref()?.0;
    let d = last.duration_since(created);
    let d = std::time::Duration::try_from(d).ok()?;
    Some(Duration::from_std(d))
}

/// The Event a job's phase change earns on the vcJob, so `kubectl describe vcjob` tells what
/// changed it: `(warning, reason, message)` with the new phase as the reason and the old phase,
/// the cause and the controller's message in the text; `None` when the phase did not change.
/// A failed or terminated job is a warning.
pub fn phase_change_event(
    old: Option<&JobStatus>,
    new: &JobStatus,
) -> Option<(bool, String, String)> {
    let phase_of = |s: Option<&JobStatus>| {
        s.and_then(|s| s.state.as_ref())
            .and_then(|s| s.phase.clone())
    };
    let to = phase_of(Some(new))?;
    let from = phase_of(old);
    if from.as_ref() == Some(&to) {
        return None;
    }
    let state = new.state.clone().unwrap_or_default();
    let mut message = match &from {
        Some(f) => format!("{f} -> {to}"),
        None => format!("new job -> {to}"),
    };
    if let Some(r) = state.reason.as_deref().filter(|r| !r.is_empty()) {
        message.push_str(&format!(" ({r})"));
    }
    if let Some(m) = state.message.as_deref().filter(|m| !m.is_empty()) {
        message.push_str(": ");
        message.push_str(m);
    }
    let warning = matches!(
        to,
        JobPhase::Failed | JobPhase::Terminating | JobPhase::Terminated
    );
    Some((warning, to.to_string(), message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodStatus;

    fn pod(phase: Option<&str>) -> Pod {
        Pod {
            status: phase.map(|p| PodStatus {
                phase: Some(p.into()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn counts_by_phase_and_task() {
        let mut c = Counts::default();
        c.add("ps", &pod(None));
        c.add("ps", &pod(Some("Running")));
        c.add("worker", &pod(Some("Succeeded")));
        c.add("worker", &pod(Some("Failed")));
        c.add("worker", &pod(Some("Weird")));
        c.add_terminating();
        assert_eq!(
            (
                c.pending,
                c.running,
                c.succeeded,
                c.failed,
                c.unknown,
                c.terminating
            ),
            (1, 1, 1, 1, 1, 1)
        );
        assert_eq!(c.active(), 3);
        let mut s = JobStatus::default();
        c.write_into(&mut s);
        let tasks = s.task_status_count.unwrap_or_default();
        assert_eq!(tasks["ps"].phase.as_ref().map(|p| p["Pending"]), Some(1));
        assert_eq!(tasks["worker"].phase.as_ref().map(|p| p.len()), Some(3));
    }

    #[test]
    fn stamp_keeps_one_condition_per_phase() {
        let t = |s: &str| Time(s.parse().unwrap_or_else(|_| unreachable!()));
        let mut s = JobStatus::default();
        s.state.get_or_insert_with(Default::default).phase = Some(JobPhase::Pending);
        stamp(&mut s, &t("2026-01-01T00:00:00Z"), "OutOfSync", "created");
        s.state.get_or_insert_with(Default::default).phase = Some(JobPhase::Running);
        stamp(&mut s, &t("2026-01-01T00:00:05Z"), "PodRunning", "started");
        s.state.get_or_insert_with(Default::default).phase = Some(JobPhase::Pending);
        stamp(
            &mut s,
            &t("2026-01-01T00:00:09Z"),
            "PodEvicted",
            "restarting",
        );
        let conds = s.conditions.clone().unwrap_or_default();
        let phases: Vec<_> = conds.iter().filter_map(|c| c.status.clone()).collect();
        assert_eq!(phases, vec![JobPhase::Running, JobPhase::Pending]);
        assert_eq!(
            s.state.as_ref().and_then(|x| x.reason.as_deref()),
            Some("PodEvicted")
        );
        let d = running_duration(Some(&t("2026-01-01T00:00:00Z")), &s);
        assert_eq!(d.map(|d| d.0), Some("9s".to_string()));
    }

    #[test]
    fn phase_changes_earn_an_event_saying_from_what_and_why() {
        use tephra_api::batch::JobState;
        let st = |phase: JobPhase, reason: &str, message: &str| JobStatus {
            state: Some(JobState {
                phase: Some(phase),
                reason: Some(reason.into()),
                message: Some(message.into()),
                ..JobState::default()
            }),
            ..JobStatus::default()
        };
        let pending = st(JobPhase::Pending, "", "job accepted");
        let aborted = st(JobPhase::Aborted, "AbortJob", "pods stopped");
        assert_eq!(
            phase_change_event(Some(&pending), &aborted),
            Some((
                false,
                "Aborted".to_string(),
                "Pending -> Aborted (AbortJob): pods stopped".to_string()
            ))
        );
        assert_eq!(
            phase_change_event(None, &pending),
            Some((
                false,
                "Pending".to_string(),
                "new job -> Pending: job accepted".to_string()
            ))
        );
        assert_eq!(phase_change_event(Some(&aborted), &aborted), None);
        let failed = st(JobPhase::Failed, "PodFailed", "");
        assert_eq!(
            phase_change_event(Some(&aborted), &failed).map(|e| (e.0, e.2)),
            Some((true, "Aborted -> Failed (PodFailed)".to_string()))
        );
        assert_eq!(
            phase_change_event(Some(&aborted), &JobStatus::default()),
            None
        );
    }
}
