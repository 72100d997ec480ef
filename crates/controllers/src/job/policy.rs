//! Turning what happened into what to do: requests from watch events (Volcano's
//! `job_controller_handler.go`), the lifecycle-policy match that picks the action and its delay
//! (`applyPolicies` in `job_controller_util.go`), and the task tests the pod events need
//! (`TaskCompleted` / `TaskFailed` of Volcano's job cache).
//!
//! ```text
//!   pod / job / PodGroup change ──▶ pod_added · pod_updated · pod_deleted · job_updated ·
//!                                   pod_group_updated ──▶ Option<Request>
//!   (job, Request) ──▶ apply_policies ──▶ Decision { action, delay }
//! ```
//!
//! Everything here is pure: the edge passes in the objects (and, for `pod_updated`, the cached
//! pods of the same task) and queues what comes back.
//!
//! Departures from Volcano's job controller made here:
//! * [`job_updated`] emits `JobUpdated` (not `OutOfSync`) when the spec of a Running job
//!   changes, so policies on that event can fire; Volcano declares the event and never sends it.
//! * The stale-version test of [`apply_policies`] applies only to requests that carry a job
//!   version (pod events). Volcano compares a job-level request's implicit version 0 with
//!   `status.version`, so after the first restart the PodGroup's `Unknown` event (and our
//!   `JobUpdated`) could never match a policy again.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::request::Request;
use tephra_api::PodGroup;
use tephra_api::batch::{self, Action, Event, Job, JobPhase, LifecyclePolicy};
use tephra_api::keys;
use tephra_api::scheduling::PodGroupPhase;

/// What to run for a request: the action, and how long to wait before running it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The action (`SyncJob` when no policy matched).
    pub action: Action,
    /// `Some` when the matching policy has a non-zero `timeout`: the edge registers a delayed
    /// action instead of running it now.
    pub delay: Option<std::time::Duration>,
}

impl Decision {
    /// A plain sync, run now.
    pub fn sync() -> Self {
        Self {
            action: Action::SyncJob,
            delay: None,
        }
    }
}

/// Events the controller raises for itself; they never match a policy (Volcano's
/// `isInternalEvent`). `PodRunning` is among them: a running pod is not something to act on.
pub fn is_internal_event(event: &Event) -> bool {
    matches!(
        event,
        Event::OutOfSync | Event::CommandIssued | Event::PodRunning
    )
}

/// Actions that only sync state; running one does not clear pending delayed actions
/// (Volcano's `isInternalAction`).
pub fn is_internal_action(action: &Action) -> bool {
    matches!(
        action,
        Action::SyncJob
            | Action::EnqueueJob
            | Action::SyncQueue
            | Action::OpenQueue
            | Action::CloseQueue
    )
}

/// Picks the action for `req` on `job` (Volcano's `applyPolicies`). First hit wins:
/// 1. an explicit action (a Command, a fired delayed action);
/// 2. an internal event ⇒ `SyncJob`;
/// 3. a request for another job of the same name (uid differs) ⇒ `SyncJob`;
/// 4. a pod event from an earlier incarnation (`job_version < status.version`) ⇒ `SyncJob`;
/// 5. the policies of the request's task, in declaration order;
/// 6. the job's policies, in declaration order;
/// 7. otherwise `SyncJob`.
///
/// A policy matches on its events (`*` matches any event that gets this far) — except that
/// `PodPending` only matches a policy with a `timeout`, since every new pod is pending for a
/// while — or on its `exitCode`.
pub fn apply_policies(job: &Job, req: &Request) -> Decision {
    if let Some(action) = &req.action {
        return Decision {
            action: action.clone(),
            delay: None,
        };
    }
    if is_internal_event(&req.event) {
        return Decision::sync();
    }
    // A pod of a deleted job whose same-named successor already exists: not this job's event.
    if let Some(uid) = req.job_uid.as_deref().filter(|u| !u.is_empty())
        && job.metadata.uid.as_deref() != Some(uid)
    {
        return Decision::sync();
    }
    // Departure (see module doc): only requests that carry a version can be stale.
    let status_version = job.status.as_ref().and_then(|s| s.version).unwrap_or(0);
    if let Some(v) = req.job_version
        && v < status_version
    {
        return Decision::sync();
    }

    if let Some(task) = req.task.as_deref().filter(|t| !t.is_empty())
        && let Some(spec) = job.spec.task(task)
        && let Some(d) = first_match(spec.policies(), req)
    {
        return d;
    }
    first_match(job.spec.policies(), req).unwrap_or_else(Decision::sync)
}

/// The decision of the first policy in `policies` that matches `req`.
fn first_match(policies: &[LifecyclePolicy], req: &Request) -> Option<Decision> {
    policies.iter().find_map(|p| policy_match(p, req))
}

fn policy_match(policy: &LifecyclePolicy, req: &Request) -> Option<Decision> {
    // An unreadable timeout counts as none: better to ignore a PodPending policy than to act on
    // every pending pod at once. (Volcano cannot hold such a job: its Go type would not parse.)
    let timeout = policy.timeout.as_ref().and_then(|t| t.to_std().ok());
    let decision = || Decision {
        // The CRD requires an action; a policy without one only syncs.
        action: policy.action.clone().unwrap_or(Action::SyncJob),
        delay: timeout.filter(|d| !d.is_zero()),
    };

    let has_event = !req.event.as_str().is_empty();
    if has_event && policy.all_events().next().is_some() {
        let hit = policy
            .all_events()
            .any(|e| *e == req.event || *e == Event::Any);
        if hit && (req.event != Event::PodPending || timeout.is_some()) {
            return Some(decision());
        }
    }
    // Volcano's request carries exit code 0 when it has none; the admission webhook rejects a
    // policy on exit code 0, so only a real PodFailed exit code matches in practice.
    if let Some(code) = policy.exit_code
        && code == req.exit_code.unwrap_or(0)
    {
        return Some(decision());
    }
    None
}

/// Whether every replica of `task` has succeeded (Volcano's `TaskCompleted`): the task has
/// replicas and at least that many of `pods` (the job's pods of that task) are Succeeded.
pub fn task_completed(job: &Job, task: &str, pods: &[&Pod]) -> bool {
    let replicas = job.spec.task(task).map_or(0, |t| t.replicas());
    if replicas <= 0 {
        return false;
    }
    let done = pods.iter().filter(|p| phase(p) == "Succeeded").count();
    i32::try_from(done).unwrap_or(i32::MAX) >= replicas
}

/// Whether `task` has used up its restart budget (Volcano's `TaskFailed`): the container
/// restarts (init and regular) of its Pending and Running pods add up to `task.maxRetry`
/// (absent or 0 ⇒ 3; negative ⇒ no limit, never failed). A task without replicas never fails.
pub fn task_failed(job: &Job, task: &str, pods: &[&Pod]) -> bool {
    let Some(spec) = job.spec.task(task) else {
        return false;
    };
    let max_retry = match spec.max_retry.unwrap_or(0) {
        0 => 3,
        n => n,
    };
    if spec.replicas() == 0 || max_retry < 0 {
        return false;
    }
    let restarts: i64 = pods
        .iter()
        .filter(|p| matches!(phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            let init = s.init_container_statuses.iter().flatten();
            init.chain(s.container_statuses.iter().flatten())
        })
        .map(|c| i64::from(c.restart_count))
        .sum();
    restarts >= i64::from(max_retry)
}

/// The request for a newly seen pod: `PodPending`, or `OutOfSync` when the controller has
/// marked the pod for deletion. `None` for pods that are not a vcJob's.
pub fn pod_added(pod: &Pod) -> Option<Request> {
    let mut req = pod_request(pod)?;
    req.event = if is_out_of_sync(pod) {
        Event::OutOfSync
    } else {
        Event::PodPending
    };
    Some(req)
}

/// The request for a changed pod (Volcano's `updatePod`). `siblings` are the cached pods of
/// the same job and task after the update, for the task tests; `job` is the cached job
/// (`None` ⇒ the task tests are false). `None` for pods that are not a vcJob's and for updates
/// that did not change the resourceVersion.
///
/// | new phase | event |
/// |---|---|
/// | Failed (was not) | `PodFailed`, with the first container's exit code (0 if none) |
/// | Succeeded (was not) and the task completed | `TaskCompleted` |
/// | Running / Pending (was not) | `PodRunning` / `PodPending` |
/// | Running / Pending (unchanged) and the task failed | `TaskFailed` |
/// | anything else | `OutOfSync` |
///
/// A pod marked out-of-sync by the controller always gives `OutOfSync`.
///
/// `siblings` gives the pods of the pod's task; it is called only when the event depends on
/// them (a pod that succeeded, or a Pending/Running pod whose task may have used up its
/// restarts), because most updates (binds, starts) do not, and gathering the pods on every
/// update made the pod watch's handler the job controller's busiest code.
pub fn pod_updated(
    job: Option<&Job>,
    old: &Pod,
    new: &Pod,
    siblings: &dyn Fn() -> Vec<std::sync::Arc<Pod>>,
) -> Option<Request> {
    // Volcano checks the owner before the resourceVersion; both only filter.
    job_owner(new)?;
    if new.metadata.resource_version == old.metadata.resource_version {
        return None;
    }
    let mut req = pod_request(new)?;
    let task = req.task.as_deref().unwrap_or_default();
    let was = phase(old);
    let with_siblings = |f: fn(&Job, &str, &[&Pod]) -> bool| {
        job.is_some_and(|j| {
            let pods = siblings();
            let refs: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
            f(j, task, &refs)
        })
    };
    let failed = || with_siblings(task_failed);
    let (event, exit_code) = match phase(new) {
        "Failed" if was != "Failed" => (Event::PodFailed, Some(first_exit_code(new))),
        "Succeeded" if was != "Succeeded" && with_siblings(task_completed) => {
            (Event::TaskCompleted, None)
        }
        "Running" if was != "Running" => (Event::PodRunning, None),
        "Pending" if was != "Pending" => (Event::PodPending, None),
        "Running" | "Pending" if failed() => (Event::TaskFailed, None),
        _ => (Event::OutOfSync, None),
    };
    req.event = if is_out_of_sync(new) {
        Event::OutOfSync
    } else {
        event
    };
    req.exit_code = exit_code;
    Some(req)
}

/// The request for a deleted pod: `PodEvicted`, or `OutOfSync` when the controller deleted it
/// (out-of-sync mark) or the cache never had it (`was_cached` false).
pub fn pod_deleted(pod: &Pod, was_cached: bool) -> Option<Request> {
    let mut req = pod_request(pod)?;
    req.event = if is_out_of_sync(pod) || !was_cached {
        Event::OutOfSync
    } else {
        Event::PodEvicted
    };
    Some(req)
}

/// The request for a changed job: none unless the resourceVersion changed and the spec or the
/// phase did (status writes are the controller's own). `JobUpdated` when the spec of a Running
/// job changed (a departure, see the module doc), `OutOfSync` otherwise.
pub fn job_updated(old: &Job, new: &Job) -> Option<Request> {
    if new.metadata.resource_version == old.metadata.resource_version {
        return None;
    }
    let spec_changed = new.spec != old.spec;
    if !spec_changed && new.phase() == old.phase() {
        return None;
    }
    let event = if spec_changed && new.phase() == Some(&JobPhase::Running) {
        Event::JobUpdated
    } else {
        Event::OutOfSync
    };
    Some(Request::job(
        new.metadata.namespace.as_deref().unwrap_or_default(),
        new.metadata.name.as_deref().unwrap_or_default(),
        event,
    ))
}

/// The request for a changed PodGroup: none unless its phase changed; then a sync of its job
/// (`OutOfSync`), or `Unknown` when the new phase is `Unknown` (part of the gang cannot be
/// placed), which policies can act on. The job is the PodGroup's owner of kind `Job` (the
/// controller reference first), else a job named like the PodGroup (legacy naming).
pub fn pod_group_updated(old: &PodGroup, new: &PodGroup) -> Option<Request> {
    let raw = |pg: &PodGroup| {
        pg.status
            .as_ref()
            .and_then(|s| s.phase.as_ref())
            .map(|p| p.as_str().to_string())
            .unwrap_or_default()
    };
    if raw(old) == raw(new) {
        return None;
    }
    let owners = new.metadata.owner_references.as_deref().unwrap_or_default();
    let job = owners
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "Job")
        .or_else(|| owners.iter().rev().find(|o| o.kind == "Job"))
        .map(|o| o.name.as_str())
        .or(new.metadata.name.as_deref())
        .unwrap_or_default();
    let event = match new.status.as_ref().and_then(|s| s.phase.as_ref()) {
        Some(PodGroupPhase::Unknown) => Event::Unknown,
        _ => Event::OutOfSync,
    };
    Some(Request::job(
        new.metadata.namespace.as_deref().unwrap_or_default(),
        job,
        event,
    ))
}

/// The controller reference of `pod` when it is a vcJob (`batch.volcano.sh/v1alpha1`, `Job`).
fn job_owner(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .filter(|o| o.api_version == batch::API_VERSION && o.kind == "Job")
}

/// The request fields every pod event shares (event left as `OutOfSync`); `None` when the pod
/// is not a vcJob's or lacks the job-name, job-version (an i32) or task-spec annotation.
fn pod_request(pod: &Pod) -> Option<Request> {
    let owner = job_owner(pod)?;
    let ann = pod.metadata.annotations.as_ref()?;
    let job = ann.get(keys::JOB_NAME)?;
    let version: i32 = ann.get(keys::JOB_VERSION)?.trim().parse().ok()?;
    let task = ann.get(keys::TASK_SPEC)?;
    let mut req = Request::job(
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        job,
        Event::OutOfSync,
    );
    req.job_uid = Some(owner.uid.clone());
    req.task = Some(task.clone());
    req.pod = pod.metadata.name.clone();
    req.pod_uid = pod.metadata.uid.clone();
    req.partition = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::PARTITION_ID))
        .cloned();
    req.job_version = Some(version);
    Some(req)
}

/// Whether the controller marked `pod` for deletion (the annotation's presence is enough).
fn is_out_of_sync(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::CONTROLLER_OUT_OF_SYNC))
}

/// The pod's phase, "" when it has none.
fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The first container's termination exit code, 0 when it has not terminated (Volcano reads
/// only the first container).
fn first_exit_code(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map_or(0, |t| t.exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;
    use tephra_api::Duration;
    use tephra_api::batch::{JobStatus, TaskSpec};

    fn job_owner_ref(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: batch::API_VERSION.into(),
            kind: "Job".into(),
            name: "j".into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// A pod of job `j` (uid `u1`), task `task`, version 0, in `phase`, resourceVersion `rv`.
    fn pod(name: &str, task: &str, phase: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some(rv.into()),
                owner_references: Some(vec![job_owner_ref("u1")]),
                annotations: Some(BTreeMap::from([
                    (keys::JOB_NAME.to_string(), "j".to_string()),
                    (keys::JOB_VERSION.to_string(), "0".to_string()),
                    (keys::TASK_SPEC.to_string(), task.to_string()),
                ])),
                labels: Some(BTreeMap::from([(
                    keys::PARTITION_ID.to_string(),
                    "1".to_string(),
                )])),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        }
    }

    fn with_restarts(mut p: Pod, init: i32, main: i32) -> Pod {
        let cs = |n| ContainerStatus {
            name: "c".into(),
            restart_count: n,
            ..Default::default()
        };
        if let Some(s) = p.status.as_mut() {
            s.init_container_statuses = Some(vec![cs(init)]);
            s.container_statuses = Some(vec![cs(main)]);
        }
        p
    }

    fn with_exit(mut p: Pod, code: i32) -> Pod {
        if let Some(s) = p.status.as_mut() {
            s.container_statuses = Some(vec![ContainerStatus {
                name: "c".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: code,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]);
        }
        p
    }

    fn out_of_sync(mut p: Pod) -> Pod {
        if let Some(a) = p.metadata.annotations.as_mut() {
            a.insert(keys::CONTROLLER_OUT_OF_SYNC.into(), "true".into());
        }
        p
    }

    fn pol(events: &[Event], action: Action, timeout: Option<&str>) -> LifecyclePolicy {
        LifecyclePolicy {
            action: Some(action),
            events: Some(events.to_vec()),
            timeout: timeout.map(|t| Duration(t.into())),
            ..Default::default()
        }
    }

    fn exit_pol(code: i32, action: Action) -> LifecyclePolicy {
        LifecyclePolicy {
            action: Some(action),
            exit_code: Some(code),
            ..Default::default()
        }
    }

    /// Job `j` (uid u1) with task `t` (2 replicas, policies `task`) and job policies `job`.
    fn job(task: Vec<LifecyclePolicy>, job: Vec<LifecyclePolicy>) -> Job {
        let mut j = Job::test("j")
            .in_namespace("ns")
            .with_uid("u1")
            .task("t", 2)
            .task("other", 1);
        if let Some(t) = j.spec.tasks.as_mut().and_then(|t| t.first_mut()) {
            t.policies = Some(task);
        }
        j.spec.policies = Some(job);
        j
    }

    fn req(task: Option<&str>, event: Event) -> Request {
        let mut r = Request::job("ns", "j", event);
        r.task = task.map(Into::into);
        r.pod = Some("j-t-0".into());
        r.job_uid = Some("u1".into());
        r.job_version = Some(0);
        r
    }

    fn act(action: Action) -> Decision {
        Decision {
            action,
            delay: None,
        }
    }

    #[test]
    fn task_policies_before_job_policies_in_order() {
        let j = job(
            vec![
                pol(&[Event::PodEvicted], Action::RestartTask, None),
                pol(&[Event::PodEvicted], Action::AbortJob, None),
            ],
            vec![pol(&[Event::PodEvicted], Action::RestartJob, None)],
        );
        let r = req(Some("t"), Event::PodEvicted);
        assert_eq!(apply_policies(&j, &r), act(Action::RestartTask));
        // Another task (no policies of its own) falls through to the job's.
        assert_eq!(
            apply_policies(&j, &req(Some("other"), Event::PodEvicted)),
            act(Action::RestartJob)
        );
        // An unknown task name, or none: job policies.
        assert_eq!(
            apply_policies(&j, &req(Some("nope"), Event::PodEvicted)),
            act(Action::RestartJob)
        );
        assert_eq!(
            apply_policies(&j, &req(None, Event::PodEvicted)),
            act(Action::RestartJob)
        );
        // Nothing matches: sync.
        assert_eq!(
            apply_policies(&j, &req(Some("t"), Event::TaskCompleted)),
            Decision::sync()
        );
        // The single `event` field counts too.
        let mut single = job(vec![], vec![]);
        single.spec.policies = Some(vec![LifecyclePolicy {
            event: Some(Event::TaskCompleted),
            action: Some(Action::CompleteJob),
            ..Default::default()
        }]);
        assert_eq!(
            apply_policies(&single, &req(Some("t"), Event::TaskCompleted)),
            act(Action::CompleteJob)
        );
    }

    #[test]
    fn wildcard_and_internal_events() {
        let j = job(vec![], vec![pol(&[Event::Any], Action::RestartJob, None)]);
        for e in [
            Event::PodFailed,
            Event::PodEvicted,
            Event::Unknown,
            Event::TaskCompleted,
            Event::TaskFailed,
            Event::JobUpdated,
        ] {
            assert_eq!(
                apply_policies(&j, &req(Some("t"), e.clone())),
                act(Action::RestartJob),
                "{e}"
            );
        }
        // Internal events never reach the policies, even `*`.
        for e in [Event::OutOfSync, Event::CommandIssued, Event::PodRunning] {
            assert_eq!(
                apply_policies(&j, &req(Some("t"), e.clone())),
                Decision::sync(),
                "{e}"
            );
        }
    }

    #[test]
    fn pod_pending_needs_a_timeout() {
        let j = job(
            vec![pol(&[Event::PodPending], Action::RestartTask, None)],
            vec![
                pol(&[Event::Any], Action::AbortJob, None),
                pol(&[Event::PodPending], Action::RestartJob, Some("90s")),
            ],
        );
        assert_eq!(
            apply_policies(&j, &req(Some("t"), Event::PodPending)),
            Decision {
                action: Action::RestartJob,
                delay: Some(std::time::Duration::from_secs(90)),
            }
        );
        // Without any timed policy: sync.
        let j = job(
            vec![pol(&[Event::PodPending], Action::RestartTask, None)],
            vec![],
        );
        assert_eq!(
            apply_policies(&j, &req(Some("t"), Event::PodPending)),
            Decision::sync()
        );
        // A zero or unreadable timeout: zero runs now; unreadable counts as none.
        let j = job(
            vec![pol(&[Event::PodPending], Action::RestartTask, Some("0s"))],
            vec![],
        );
        assert_eq!(
            apply_policies(&j, &req(Some("t"), Event::PodPending)),
            act(Action::RestartTask)
        );
        let j = job(
            vec![pol(&[Event::PodPending], Action::RestartTask, Some("soon"))],
            vec![],
        );
        assert_eq!(
            apply_policies(&j, &req(Some("t"), Event::PodPending)),
            Decision::sync()
        );
        // Other events carry the timeout as a delay.
        let j = job(
            vec![pol(&[Event::PodFailed], Action::RestartPod, Some("1m"))],
            vec![],
        );
        assert_eq!(
            apply_policies(&j, &req(Some("t"), Event::PodFailed)),
            Decision {
                action: Action::RestartPod,
                delay: Some(std::time::Duration::from_secs(60)),
            }
        );
    }

    #[test]
    fn exit_code_matches() {
        let j = job(
            vec![exit_pol(3, Action::RestartPod)],
            vec![exit_pol(137, Action::AbortJob)],
        );
        let failed = |code| {
            let mut r = req(Some("t"), Event::PodFailed);
            r.exit_code = Some(code);
            r
        };
        assert_eq!(apply_policies(&j, &failed(3)), act(Action::RestartPod));
        assert_eq!(apply_policies(&j, &failed(137)), act(Action::AbortJob));
        assert_eq!(apply_policies(&j, &failed(1)), Decision::sync());
    }

    #[test]
    fn stale_requests_sync() {
        let mut j = job(
            vec![],
            vec![pol(&[Event::PodEvicted], Action::RestartJob, None)],
        );
        j.status = Some(JobStatus {
            version: Some(2),
            ..Default::default()
        });
        let mut r = req(Some("t"), Event::PodEvicted);
        r.job_version = Some(2);
        assert_eq!(apply_policies(&j, &r), act(Action::RestartJob));
        r.job_version = Some(1);
        assert_eq!(apply_policies(&j, &r), Decision::sync(), "old version");
        r.job_version = Some(2);
        r.job_uid = Some("u0".into());
        assert_eq!(apply_policies(&j, &r), Decision::sync(), "other uid");
        r.job_uid = None;
        assert_eq!(apply_policies(&j, &r), act(Action::RestartJob));
        // A job-level request carries no version: not stale (departure, see module doc).
        let mut unknown = Request::job("ns", "j", Event::PodEvicted);
        unknown.job_version = None;
        assert_eq!(apply_policies(&j, &unknown), act(Action::RestartJob));
    }

    #[test]
    fn explicit_action_wins() {
        let mut j = job(vec![], vec![pol(&[Event::Any], Action::RestartJob, None)]);
        j.status = Some(JobStatus {
            version: Some(5),
            ..Default::default()
        });
        let mut r = Request::job("ns", "j", Event::CommandIssued);
        r.action = Some(Action::AbortJob);
        assert_eq!(apply_policies(&j, &r), act(Action::AbortJob));
        // Even a stale uid/version does not stop an explicit action, and unknown strings pass.
        r.job_uid = Some("zz".into());
        r.job_version = Some(0);
        r.action = Some(Action::Other("Bogus".into()));
        assert_eq!(apply_policies(&j, &r), act(Action::Other("Bogus".into())));
    }

    #[test]
    fn internal_helpers() {
        assert!(is_internal_action(&Action::SyncJob));
        assert!(is_internal_action(&Action::EnqueueJob));
        assert!(!is_internal_action(&Action::ResumeJob));
        assert!(!is_internal_action(&Action::Other("X".into())));
        assert!(is_internal_event(&Event::PodRunning));
        assert!(!is_internal_event(&Event::PodPending));
    }

    #[test]
    fn task_completed_counts_succeeded() {
        let j = job(vec![], vec![]);
        let a = pod("j-t-0", "t", "Succeeded", "1");
        let b = pod("j-t-1", "t", "Running", "1");
        let c = pod("j-t-1", "t", "Succeeded", "2");
        assert!(!task_completed(&j, "t", &[&a, &b]));
        assert!(task_completed(&j, "t", &[&a, &c]));
        assert!(!task_completed(&j, "t", &[&a]));
        assert!(!task_completed(&j, "missing", &[&a, &c]));
        let mut zero = job(vec![], vec![]);
        if let Some(t) = zero.spec.tasks.as_mut().and_then(|t| t.first_mut()) {
            t.replicas = Some(0);
        }
        assert!(!task_completed(&zero, "t", &[&a, &c]));
    }

    #[test]
    fn task_failed_counts_restarts() {
        let with_max = |m: Option<i32>| {
            let mut j = job(vec![], vec![]);
            if let Some(t) = j.spec.tasks.as_mut().and_then(|t| t.first_mut()) {
                t.max_retry = m;
            }
            j
        };
        let run = with_restarts(pod("j-t-0", "t", "Running", "1"), 1, 1);
        let pend = with_restarts(pod("j-t-1", "t", "Pending", "1"), 0, 1);
        let dead = with_restarts(pod("j-t-1", "t", "Failed", "1"), 5, 5);
        // default 3: 1 + 1 + 1 = 3
        assert!(task_failed(&with_max(None), "t", &[&run, &pend]));
        assert!(task_failed(&with_max(Some(0)), "t", &[&run, &pend]));
        assert!(!task_failed(&with_max(None), "t", &[&run]));
        // finished pods' restarts do not count
        assert!(!task_failed(&with_max(None), "t", &[&run, &dead]));
        assert!(!task_failed(&with_max(Some(4)), "t", &[&run, &pend]));
        assert!(task_failed(&with_max(Some(2)), "t", &[&run]));
        // -1: never
        assert!(!task_failed(&with_max(Some(-1)), "t", &[&run, &pend]));
        assert!(!task_failed(&with_max(None), "missing", &[&run, &pend]));
        let mut zero = with_max(Some(1));
        if let Some(t) = zero.spec.tasks.as_mut().and_then(|t| t.first_mut()) {
            t.replicas = Some(0);
        }
        assert!(!task_failed(&zero, "t", &[&run]));
        let _ = TaskSpec::default();
    }

    #[test]
    fn pod_added_events() {
        let p = pod("j-t-0", "t", "Pending", "1");
        let r = pod_added(&p).expect("a job pod gives a request");
        assert_eq!(r.event, Event::PodPending);
        assert_eq!(r.key(), "ns/j");
        assert_eq!(r.job_uid.as_deref(), Some("u1"));
        assert_eq!(r.task.as_deref(), Some("t"));
        assert_eq!(r.pod.as_deref(), Some("j-t-0"));
        assert_eq!(r.pod_uid.as_deref(), Some("uid-j-t-0"));
        assert_eq!(r.partition.as_deref(), Some("1"));
        assert_eq!(r.job_version, Some(0));
        assert_eq!(r.exit_code, None);
        assert_eq!(r.action, None);
        assert_eq!(
            pod_added(&out_of_sync(p)).map(|r| r.event),
            Some(Event::OutOfSync)
        );
    }

    #[test]
    fn foreign_pods_are_ignored() {
        let base = pod("j-t-0", "t", "Pending", "1");
        let mut not_controller = base.clone();
        if let Some(o) = not_controller.metadata.owner_references.as_mut() {
            o[0].controller = None;
        }
        let mut batch_v1 = base.clone();
        if let Some(o) = batch_v1.metadata.owner_references.as_mut() {
            o[0].api_version = "batch/v1".into();
        }
        let mut no_owner = base.clone();
        no_owner.metadata.owner_references = None;
        let mut cases = vec![not_controller, batch_v1, no_owner];
        for key in [keys::JOB_NAME, keys::JOB_VERSION, keys::TASK_SPEC] {
            let mut p = base.clone();
            if let Some(a) = p.metadata.annotations.as_mut() {
                a.remove(key);
            }
            cases.push(p);
        }
        let mut bad_version = base.clone();
        if let Some(a) = bad_version.metadata.annotations.as_mut() {
            a.insert(keys::JOB_VERSION.into(), "x".into());
        }
        cases.push(bad_version);
        for p in cases {
            assert_eq!(pod_added(&p), None);
            assert_eq!(pod_deleted(&p, true), None);
            let mut newer = p.clone();
            newer.metadata.resource_version = Some("2".into());
            assert_eq!(pod_updated(None, &p, &newer, &Vec::new), None);
        }
    }

    #[test]
    fn pod_updated_events() {
        let j = job(vec![], vec![]);
        // (old phase, new pod, siblings) → event
        let ev = |old: &str, new: Pod, sib: &[&Pod]| {
            let o = pod("j-t-0", "t", old, "1");
            let sib: Vec<std::sync::Arc<Pod>> = sib
                .iter()
                .map(|p| std::sync::Arc::new((*p).clone()))
                .collect();
            pod_updated(Some(&j), &o, &new, &|| sib.clone()).map(|r| (r.event, r.exit_code))
        };
        let p = |phase: &str| pod("j-t-0", "t", phase, "2");
        let other_ok = pod("j-t-1", "t", "Succeeded", "1");
        let other_run = pod("j-t-1", "t", "Running", "1");

        // → Failed
        assert_eq!(
            ev("Running", with_exit(p("Failed"), 3), &[]),
            Some((Event::PodFailed, Some(3)))
        );
        assert_eq!(
            ev("Running", p("Failed"), &[]),
            Some((Event::PodFailed, Some(0)))
        );
        assert_eq!(
            ev("Failed", p("Failed"), &[]),
            Some((Event::OutOfSync, None))
        );
        // → Succeeded: TaskCompleted only when the whole task succeeded
        let me_ok = p("Succeeded");
        assert_eq!(
            ev("Running", me_ok.clone(), &[&me_ok, &other_ok]),
            Some((Event::TaskCompleted, None))
        );
        assert_eq!(
            ev("Running", me_ok.clone(), &[&me_ok, &other_run]),
            Some((Event::OutOfSync, None))
        );
        assert_eq!(
            ev("Succeeded", me_ok.clone(), &[&me_ok, &other_ok]),
            Some((Event::OutOfSync, None))
        );
        // → Running / Pending
        let restarted = with_restarts(p("Running"), 0, 3);
        assert_eq!(
            ev("Pending", p("Running"), &[]),
            Some((Event::PodRunning, None))
        );
        assert_eq!(
            ev("Pending", restarted.clone(), &[&restarted]),
            Some((Event::PodRunning, None)),
            "a phase change beats TaskFailed"
        );
        assert_eq!(
            ev("Running", restarted.clone(), &[&restarted]),
            Some((Event::TaskFailed, None))
        );
        assert_eq!(
            ev("Running", p("Running"), &[]),
            Some((Event::OutOfSync, None))
        );
        let restarted_p = with_restarts(p("Pending"), 3, 0);
        assert_eq!(ev("", p("Pending"), &[]), Some((Event::PodPending, None)));
        assert_eq!(
            ev("Pending", restarted_p.clone(), &[&restarted_p]),
            Some((Event::TaskFailed, None))
        );
        assert_eq!(
            ev("Pending", p("Pending"), &[]),
            Some((Event::OutOfSync, None))
        );
        // anything else
        assert_eq!(
            ev("Running", p("Unknown"), &[]),
            Some((Event::OutOfSync, None))
        );
        // out-of-sync mark overrides
        assert_eq!(
            ev("Running", out_of_sync(p("Failed")), &[]).map(|e| e.0),
            Some(Event::OutOfSync)
        );
        // no cached job: no task tests
        let o = pod("j-t-0", "t", "Running", "1");
        assert_eq!(
            pod_updated(None, &o, &restarted, &|| vec![std::sync::Arc::new(
                restarted.clone()
            )])
            .map(|r| r.event),
            Some(Event::OutOfSync)
        );
        // same resourceVersion: nothing
        let same = pod("j-t-0", "t", "Failed", "1");
        assert_eq!(pod_updated(Some(&j), &o, &same, &Vec::new), None);
    }

    #[test]
    fn pod_deleted_events() {
        let p = pod("j-t-0", "t", "Running", "1");
        assert_eq!(
            pod_deleted(&p, true).map(|r| r.event),
            Some(Event::PodEvicted)
        );
        assert_eq!(
            pod_deleted(&p, false).map(|r| r.event),
            Some(Event::OutOfSync)
        );
        assert_eq!(
            pod_deleted(&out_of_sync(p), true).map(|r| r.event),
            Some(Event::OutOfSync)
        );
    }

    #[test]
    fn job_updated_events() {
        let base = |rv: &str, phase: JobPhase| {
            let mut j = Job::test("j")
                .in_namespace("ns")
                .task("t", 2)
                .with_phase(phase);
            j.metadata.resource_version = Some(rv.into());
            j
        };
        let old = base("1", JobPhase::Running);
        // same resourceVersion: nothing, even with changes
        let mut same_rv = base("1", JobPhase::Pending);
        same_rv.spec.min_available = Some(9);
        assert_eq!(job_updated(&old, &same_rv), None);
        // status-only change (not the phase): nothing
        let mut status_only = base("2", JobPhase::Running);
        if let Some(s) = status_only.status.as_mut() {
            s.running = Some(2);
        }
        assert_eq!(job_updated(&old, &status_only), None);
        // phase change: OutOfSync
        let r = job_updated(&old, &base("2", JobPhase::Restarting)).expect("phase changed");
        assert_eq!((r.key(), r.event), ("ns/j".to_string(), Event::OutOfSync));
        // spec change of a running job: JobUpdated
        let mut scaled = base("2", JobPhase::Running);
        if let Some(t) = scaled.spec.tasks.as_mut().and_then(|t| t.first_mut()) {
            t.replicas = Some(3);
        }
        assert_eq!(
            job_updated(&old, &scaled).map(|r| r.event),
            Some(Event::JobUpdated)
        );
        // spec change of a pending job: OutOfSync
        let old_p = base("1", JobPhase::Pending);
        let mut scaled_p = base("2", JobPhase::Pending);
        scaled_p.spec.min_available = Some(1);
        assert_eq!(
            job_updated(&old_p, &scaled_p).map(|r| r.event),
            Some(Event::OutOfSync)
        );
    }

    #[test]
    fn pod_group_updated_events() {
        let pg = |phase: Option<PodGroupPhase>| {
            let mut p = PodGroup::test("j-u1").in_namespace("ns");
            if let Some(ph) = phase {
                p = p.with_phase(ph);
            }
            p.metadata.owner_references = Some(vec![job_owner_ref("u1")]);
            p
        };
        let old = pg(Some(PodGroupPhase::Pending));
        assert_eq!(
            job_updated_key(pod_group_updated(&old, &pg(Some(PodGroupPhase::Pending)))),
            None
        );
        assert_eq!(
            job_updated_key(pod_group_updated(&old, &pg(Some(PodGroupPhase::Inqueue)))),
            Some(("ns/j".to_string(), Event::OutOfSync))
        );
        assert_eq!(
            job_updated_key(pod_group_updated(&old, &pg(Some(PodGroupPhase::Unknown)))),
            Some(("ns/j".to_string(), Event::Unknown))
        );
        // "" → Pending counts as a change (raw phases are compared)
        assert!(pod_group_updated(&pg(None), &old).is_some());
        // no Job owner: the PodGroup's own name
        let mut legacy = pg(Some(PodGroupPhase::Running));
        legacy.metadata.owner_references = None;
        assert_eq!(
            job_updated_key(pod_group_updated(&old, &legacy)),
            Some(("ns/j-u1".to_string(), Event::OutOfSync))
        );
        // a non-controller Job owner still names the job (Volcano looks at kind only)
        let mut loose = pg(Some(PodGroupPhase::Running));
        if let Some(o) = loose.metadata.owner_references.as_mut() {
            o[0].controller = None;
            o[0].name = "k".into();
        }
        assert_eq!(
            job_updated_key(pod_group_updated(&old, &loose)).map(|k| k.0),
            Some("ns/k".to_string())
        );
    }

    fn job_updated_key(r: Option<Request>) -> Option<(String, Event)> {
        r.map(|r| (r.key(), r.event))
    }
}
