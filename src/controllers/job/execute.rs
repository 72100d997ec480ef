//! Running one request: policies and delays, then the state machine's step against the API
//! (Volcano's `processNextReq`, `syncJob` and `killJob`).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::JobError;
use super::build;
use super::context::Context;
use super::delay::DelayedAction;
use super::plugins::{self, JobPlugin};
use super::policy;
use super::request::{Request, Target};
use super::state::{self, Retain, Rule, Work};
use super::status::{self, Counts};
use super::sync::{KillPlan, PodMaking, Scope, SyncPlan, plan_kill, plan_sync, task_of};
use crate::api::Duration;
use crate::api::batch::{Action, Event, JobPhase, JobState, JobStatus};
use crate::api::{Job, keys};
use crate::cluster::events::EventType;

/// API calls of one kind made at once within a pass.
const CONCURRENCY: usize = 16;

/// Why a transition happened, for `status.state.reason`/`message`.
#[derive(Clone, Debug)]
pub(crate) struct Cause {
    reason: String,
    detail: String,
}

impl Cause {
    fn of(action: &Action, req: &Request) -> Self {
        let reason = req.event.to_string();
        let mut detail = format!("{action} on {}", req.event);
        if let Some(p) = &req.pod {
            detail.push_str(&format!(" of pod {p}"));
        }
        if let Some(c) = req.exit_code.filter(|_| req.event == Event::PodFailed) {
            detail.push_str(&format!(" (exit code {c})"));
        }
        Self { reason, detail }
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// When a finished job with `ttlSecondsAfterFinished` is due for deletion (Volcano's garbage
/// collector: Completed, Failed and Terminated, not Aborted).
pub(crate) fn ttl_deadline(job: &Job) -> Option<k8s_openapi::jiff::Timestamp> {
    let ttl = job.spec.ttl_seconds_after_finished?;
    let st = job.status.as_ref()?.state.as_ref()?;
    if !st.phase.as_ref().is_some_and(JobPhase::is_finished) {
        return None;
    }
    let at = st.last_transition_time.as_ref()?.0;
    at.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(i64::from(ttl)))
        .ok()
}

/// Processes one request: cancels delayed actions the request makes moot, deletes a job whose
/// TTL ran out, matches policies, and either registers a delayed action or executes.
///
/// `queued` is the request's stamp from [`super::context::Router::add`]: a plain sync request
/// that a later successful sync of the job already covered is dropped (see
/// [`super::coalesce`]).
pub(crate) async fn process(
    ctx: &Arc<Context>,
    req: &Request,
    queued: Option<super::coalesce::Ticket>,
) -> Result<(), JobError> {
    ctx.delays.cancel_for(req);
    // Taken before the caches are read: whatever was queued before this is in what we read.
    let ticket = ctx.router.coalescer.sync_starting();
    let Some(job) = ctx.job(&req.namespace, &req.job) else {
        return Ok(());
    };
    if let Some(at) = ttl_deadline(&job) {
        let left = at.duration_since(k8s_openapi::jiff::Timestamp::now());
        if left.is_negative() || left.is_zero() {
            return ctx.delete_job(&job).await;
        }
        if let Ok(left) = std::time::Duration::try_from(left) {
            let again = Request::job(&req.namespace, &req.job, Event::OutOfSync);
            ctx.router.queue_of(&again).add_after(again.clone(), left);
        }
    }
    let decision = policy::apply_policies(&job, req);
    let key = req.key();
    if let Some(delay) = decision.delay.filter(|d| !d.is_zero()) {
        let msg = format!(
            "Execute action {} after {}",
            decision.action,
            Duration::from_std(delay)
        );
        ctx.event(
            &job,
            EventType::Normal,
            keys::job_events::EXECUTE_ACTION,
            &msg,
        )
        .await;
        let a = DelayedAction {
            job_key: key,
            task: req.task.clone(),
            pod: req.pod.clone().unwrap_or_default(),
            pod_uid: req.pod_uid.clone(),
            partition: req.partition.clone(),
            event: req.event.clone(),
            action: decision.action.clone(),
            delay,
        };
        if let Some(token) = ctx.delays.register(a.clone()) {
            let fire = Request {
                action: Some(decision.action.clone()),
                ..req.clone()
            };
            let ctx = ctx.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = token.cancelled() => {}
                    () = ctx.shutdown.cancelled() => {}
                    () = tokio::time::sleep(delay) => {
                        if !ctx.delays.take_fired(&a, &token) {
                            // Cancelled between the timer firing and now.
                            return;
                        }
                        // Through the job's own worker, so it never races another
                        // transition of the job (Volcano runs it on the timer goroutine).
                        ctx.router.add(fire);
                    }
                }
            });
        }
        return Ok(());
    }
    let plain_sync = decision.action == Action::SyncJob && req.action.is_none();
    if plain_sync && queued.is_some_and(|q| ctx.router.coalescer.covered(&key, q, job.phase())) {
        ctx.metrics.coalesced.inc();
        return Ok(());
    }
    // Only a sync proper (not a kill some phases answer SyncJob with) covers later requests.
    let phase = job.phase().cloned();
    let covers = plain_sync
        && matches!(
            state::step(phase.as_ref(), &Action::SyncJob).work,
            Work::Sync
        );
    if decision.action != Action::SyncJob {
        let msg = format!("Start to execute action {}", decision.action);
        ctx.event(
            &job,
            EventType::Normal,
            keys::job_events::EXECUTE_ACTION,
            &msg,
        )
        .await;
    }
    execute(ctx, job, &decision.action, req).await?;
    if covers {
        ctx.router.coalescer.synced(&key, ticket, phase.as_ref());
    }
    if decision.action.is_user_job_action() {
        ctx.delays.cleanup_after(&key, &decision.action, req);
    }
    Ok(())
}

/// Executes `action` on `job` from its current phase.
pub(crate) async fn execute(
    ctx: &Arc<Context>,
    job: Job,
    action: &Action,
    req: &Request,
) -> Result<(), JobError> {
    let step = state::step(job.phase(), action);
    let cause = Cause::of(action, req);
    match step.work {
        Work::Sync => sync_job(ctx, job, step.rule, &cause).await,
        Work::KillJob(retain) => kill(ctx, job, Scope::Job(retain), step.rule, &cause).await,
        Work::KillTarget => {
            let target = Target::of(action, req);
            kill(ctx, job, Scope::Target(target), step.rule, &cause).await
        }
    }
}

fn summary(job: &Job, st: &JobStatus) -> String {
    let phase = status::phase_of(st).cloned().unwrap_or_default();
    format!(
        "{phase}: {} pending, {} running, {} succeeded, {} failed of {} replicas (minAvailable {})",
        st.pending.unwrap_or(0),
        st.running.unwrap_or(0),
        st.succeeded.unwrap_or(0),
        st.failed.unwrap_or(0),
        job.total_replicas(),
        job.spec.min_available()
    )
}

/// Applies the state machine's rule to `st`; stamps and counts a transition.
fn transition(ctx: &Context, job: &Job, rule: Rule, st: &mut JobStatus, cause: &Cause) -> bool {
    let from = status::phase_of(st).cloned();
    if !state::apply(rule, &job.spec, st) {
        return false;
    }
    let to = status::phase_of(st).cloned().unwrap_or_default();
    // Finishing a kill (Completing → Completed, Restarting → Pending ...) happens on whatever
    // event comes after the pods are gone; the reason stays the one that started it.
    let finishing = matches!(
        rule,
        Rule::Aborting | Rule::Completing | Rule::Terminating | Rule::Restarting
    ) && from.as_ref() != Some(&to);
    let old_reason = st.state.as_ref().and_then(|s| s.reason.clone());
    let (reason, message) = match old_reason.filter(|r| finishing && !r.is_empty()) {
        Some(r) => (r, format!("pods stopped; {}", summary(job, st))),
        None => (
            cause.reason.clone(),
            format!("{}; {}", cause.detail, summary(job, st)),
        ),
    };
    status::stamp(st, &now(), &reason, &message);
    st.running_duration = status::running_duration(job.metadata.creation_timestamp.as_ref(), st);
    if from.as_ref() != Some(&to) {
        let from_s = from.as_ref().map(|p| p.to_string()).unwrap_or_default();
        ctx.metrics
            .transitions
            .with_label_values(&[&from_s, &to.to_string(), &reason])
            .inc();
        let (name, queue) = (job.name_any(), job.spec.queue().to_string());
        match to {
            JobPhase::Completed => ctx
                .metrics
                .completed
                .with_label_values(&[&name, &queue])
                .inc(),
            JobPhase::Failed => ctx.metrics.failed.with_label_values(&[&name, &queue]).inc(),
            _ => {}
        }
    }
    true
}

/// Volcano's `syncJob`: set the job up (status, plugin resources, PVCs, PodGroup), then,
/// once the PodGroup is admitted, create the missing pods and delete the surplus, count, and
/// apply the state's rule.
async fn sync_job(
    ctx: &Arc<Context>,
    mut job: Job,
    rule: Rule,
    cause: &Cause,
) -> Result<(), JobError> {
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let queue_name = job.spec.queue().to_string();
    let Some(queue) = ctx.queue(&queue_name) else {
        return Err(JobError::Missing {
            kind: "Queue",
            name: queue_name,
        });
    };
    let forwarding = queue
        .spec
        .extend_clusters
        .as_ref()
        .is_some_and(|c| !c.is_empty());
    if forwarding && !job.annotations().contains_key(keys::JOB_FORWARDING) {
        job.annotations_mut()
            .insert(keys::JOB_FORWARDING.to_string(), "true".to_string());
        job = ctx.write_job(&job).await?;
    }
    let plugins = plugins::plugins_for(&job).map_err(JobError::Plugin)?;
    let mut controlled = job
        .status
        .as_ref()
        .and_then(|s| s.controlled_resources.clone())
        .unwrap_or_default();
    if matches!(job.phase(), None | Some(JobPhase::Pending)) {
        if job.phase().is_none() {
            let mut st = job.status.clone().unwrap_or_default();
            st.state = Some(JobState {
                phase: Some(JobPhase::Pending),
                ..JobState::default()
            });
            st.min_available = Some(job.spec.min_available());
            status::stamp(
                &mut st,
                &now(),
                &cause.reason,
                "job accepted, waiting for its PodGroup to be admitted",
            );
            ctx.metrics
                .transitions
                .with_label_values(&["", "Pending", &cause.reason])
                .inc();
            job = ctx.write_status(&job, st).await?;
        }
        for p in &plugins {
            let key = plugins::controlled_key(p.name());
            // tephra: a plugin already set up follows the spec here too (Volcano only does so
            // once the job runs). A job scaled while Pending — its pods made, the controller
            // not yet through their Running events — would otherwise keep the old hosts until
            // its next sync in Running, after its new pods were made.
            if controlled.contains_key(&key) {
                for o in p.on_job_update(&job).map_err(JobError::Plugin)? {
                    ctx.apply_owned(&ns, o).await?;
                }
                continue;
            }
            for o in p.on_job_add(&job).map_err(JobError::Plugin)? {
                ctx.apply_owned(&ns, o).await?;
            }
            controlled.insert(key, p.name().to_string());
        }
        job = ensure_volumes(ctx, job, &mut controlled).await?;
    } else {
        for p in &plugins {
            for o in p.on_job_update(&job).map_err(JobError::Plugin)? {
                ctx.apply_owned(&ns, o).await?;
            }
        }
    }
    ctx.ensure_podgroup(&job).await?;

    let pg = job
        .pod_group_name()
        .and_then(|n| ctx.podgroup(&ns, &n))
        .or_else(|| ctx.podgroup(&ns, &name));
    if let Some(msg) = pg.as_ref().and_then(|pg| pending_message(&ns, &name, pg))
        && ctx.pg_pending_is_new(&ns, &name, &msg)
    {
        ctx.event(
            &job,
            EventType::Warning,
            keys::job_events::POD_GROUP_PENDING,
            &msg,
        )
        .await;
    }
    let admitted = pg
        .and_then(|pg| pg.status.and_then(|s| s.phase))
        .is_some_and(|p| !p.as_str().is_empty() && p.as_str() != "Pending");

    let pods = ctx.pods_of(&job);
    let old = job.status.clone().unwrap_or_default();
    let making = PodMaking {
        forwarding,
        plugins: &plugins,
        plan_gate_schedulers: &ctx.config.plan_gate_schedulers,
        mark_elastic: ctx.config.mark_elastic,
    };
    let SyncPlan {
        create: to_create,
        delete: to_delete,
        mut counts,
    } = plan_sync(&job, &pods, admitted, &|n| ctx.pod(&ns, n), &making)
        .map_err(JobError::Plugin)?;

    // Create, then delete, each in parallel.
    let created_at = job.metadata.creation_timestamp.clone();
    let results = in_parallel(ctx, to_create, |ctx, (task, pod)| async move {
        let r = ctx.create_pod(&pod).await;
        (task, r)
    })
    .await;
    let mut create_errors = Vec::new();
    for (task, r) in results {
        match r {
            Ok(Some(pod)) => {
                counts.add(&task, &pod);
                if let Some(c) = &created_at {
                    let ms = k8s_openapi::jiff::Timestamp::now()
                        .duration_since(c.0)
                        .as_secs_f64()
                        * 1000.0;
                    ctx.metrics.pod_creation_latency.observe(ms.max(0.0));
                }
            }
            Ok(None) => {}
            Err(e) => create_errors.push(crate::report::report(&e).to_string()),
        }
    }
    let delete_errors = delete_pods(ctx, &to_delete, &mut counts).await;
    if !create_errors.is_empty() {
        return Err(pods_failed(ctx, &job, "create", create_errors).await);
    }
    if !delete_errors.is_empty() {
        return Err(pods_failed(ctx, &job, "delete", delete_errors).await);
    }

    let mut st = old.clone();
    st.min_available = Some(job.spec.min_available());
    st.controlled_resources = (!controlled.is_empty()).then_some(controlled);
    counts.write_into(&mut st);
    if st.version.is_none() {
        st.version = Some(0);
    }
    let changed = transition(ctx, &job, rule, &mut st, cause);
    if st != old {
        job = ctx.write_status(&job, st.clone()).await?;
    }
    // tephra: a job entering a finished phase kills what is left in the same pass (Volcano
    // waits for some later event on the job).
    if changed && status::phase_of(&st).is_some_and(JobPhase::is_finished) && counts.active() > 0 {
        return kill(ctx, job, Scope::Job(Retain::Soft), Rule::None, cause).await;
    }
    Ok(())
}

/// Volcano's PodGroupPending Event text, when the PodGroup's newest true condition is not
/// `Scheduled`: `PodGroup ns:job <condition type, lower case>, reason: <message>`.
fn pending_message(ns: &str, job: &str, pg: &crate::api::PodGroup) -> Option<String> {
    let conds = pg.status.as_ref()?.conditions.as_ref()?;
    let newest = conds
        .iter()
        .filter(|c| c.status.as_deref() == Some("True"))
        .max_by_key(|c| c.last_transition_time.as_ref().map(|t| t.0))?;
    let type_ = newest.type_.as_ref()?.to_string();
    if type_ == "Scheduled" {
        return None;
    }
    Some(format!(
        "PodGroup {ns}:{job} {}, reason: {}",
        type_.to_lowercase(),
        newest.message.as_deref().unwrap_or_default()
    ))
}

/// Runs `f` over `items`, [`CONCURRENCY`] at a time, each with its own handle on the context.
async fn in_parallel<T, R, F, Fut>(ctx: &Arc<Context>, items: Vec<T>, f: F) -> Vec<R>
where
    F: Fn(Arc<Context>, T) -> Fut,
    Fut: std::future::Future<Output = R>,
{
    futures::stream::iter(items)
        .map(|item| f(ctx.clone(), item))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await
}

/// Deletes `pods` in parallel; successes count as terminating, failures by their phase and
/// are retried with backoff. Returns the failures' texts.
async fn delete_pods(ctx: &Arc<Context>, pods: &[Arc<Pod>], counts: &mut Counts) -> Vec<String> {
    let results = in_parallel(ctx, pods.to_vec(), |ctx, p| async move {
        let r = ctx.delete_pod(&p).await;
        (p, r)
    })
    .await;
    let mut errors = Vec::new();
    for (p, r) in results {
        match r {
            Ok(()) => counts.add_terminating(),
            Err(e) => {
                counts.add(task_of(&p), &p);
                ctx.retry_deletes
                    .add_rate_limited((p.namespace().unwrap_or_default(), p.name_any()));
                errors.push(crate::report::report(&e).to_string());
            }
        }
    }
    errors
}

/// Records Volcano's Warning Event (`FailedCreate` / `FailedDelete`) for pods that could not
/// be created or deleted, and gives the error the request fails with. `errors` is not empty.
async fn pods_failed(
    ctx: &Context,
    job: &Job,
    verb: &'static str,
    mut errors: Vec<String>,
) -> JobError {
    let (reason, doing) = if verb == "create" {
        (keys::job_events::FAILED_CREATE, "creating")
    } else {
        (keys::job_events::FAILED_DELETE, "deleting")
    };
    let msg = format!("Error {doing} pods: {}", errors.join("; "));
    ctx.event(job, EventType::Warning, reason, &msg).await;
    let failed = errors.len();
    JobError::Pods {
        verb,
        failed,
        first: if errors.is_empty() {
            String::new()
        } else {
            errors.swap_remove(0)
        },
    }
}

/// Job volumes: generated claim names written into the spec, PVCs created from
/// `volumeClaim`, named claims checked to exist (a missing one keeps the job Pending).
async fn ensure_volumes(
    ctx: &Arc<Context>,
    mut job: Job,
    controlled: &mut BTreeMap<String, String>,
) -> Result<Job, JobError> {
    let Some(volumes) = job.spec.volumes.clone() else {
        return Ok(job);
    };
    let ns = job.namespace().unwrap_or_default();
    let mut named = volumes.clone();
    let mut renamed = false;
    for (i, v) in named.iter_mut().enumerate() {
        if v.volume_claim_name.as_deref().is_none_or(str::is_empty) {
            v.volume_claim_name = Some(build::generated_claim_name(&job, i));
            renamed = true;
        }
    }
    if renamed {
        job.spec.volumes = Some(named.clone());
        job = ctx.write_job(&job).await?;
    }
    for v in &named {
        let claim = v.volume_claim_name.clone().unwrap_or_default();
        if v.volume_claim.is_some() {
            ctx.create_pvc(&build::build_pvc(&job, v, &claim)).await?;
        } else if !ctx.pvc_exists(&ns, &claim).await? {
            return Err(JobError::Missing {
                kind: "PersistentVolumeClaim",
                name: claim,
            });
        }
        controlled.insert(format!("volume-pvc-{claim}"), claim);
    }
    Ok(job)
}

/// Volcano's `killJob`/`killTarget`: marks then deletes the pods in scope, counts what
/// exists, applies the rule, and for a whole-job kill removes plugin resources and the
/// PodGroup.
pub(crate) async fn kill(
    ctx: &Arc<Context>,
    job: Job,
    scope: Scope,
    rule: Rule,
    cause: &Cause,
) -> Result<(), JobError> {
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let pods = ctx.pods_of(&job);
    let old = job.status.clone().unwrap_or_default();
    let whole = matches!(scope, Scope::Job(_));
    let KillPlan {
        victims,
        mut counts,
    } = plan_kill(&job, &pods, &scope);
    // Mark first, so the deletions read as the controller's (OutOfSync), not as evictions
    // that would fire PodEvicted policies; a pod that cannot be marked is not deleted.
    let marks = in_parallel(ctx, victims.clone(), |ctx, p| async move {
        let r = ctx.mark_pod(&p).await;
        (p, r)
    })
    .await;
    let mut marked = Vec::new();
    let mut errors = Vec::new();
    for (p, r) in marks {
        match r {
            Ok(()) => marked.push(p),
            Err(e) => {
                counts.add(task_of(&p), &p);
                errors.push(crate::report::report(&e).to_string());
            }
        }
    }
    errors.extend(delete_pods(ctx, &marked, &mut counts).await);
    if !errors.is_empty() {
        return Err(pods_failed(ctx, &job, "kill", errors).await);
    }

    let mut st = old.clone();
    counts.write_into(&mut st);
    // A new incarnation of pods gets a new version, so events of the killed (or kept) ones
    // are told apart. A finished job killed again with nothing left to kill keeps its version:
    // Volcano bumps it (and writes the status) on every later event of the job.
    let finished = status::phase_of(&old).is_some_and(JobPhase::is_finished);
    if whole && (!finished || !victims.is_empty() || counts.terminating > 0) {
        st.version = Some(old.version.unwrap_or(0) + 1);
    }
    transition(ctx, &job, rule, &mut st, cause);
    if whole {
        // tephra: plugin resources go only with the whole job (Volcano also deletes them on
        // RestartTask/Pod/Partition).
        let plugins: Vec<Box<dyn JobPlugin>> = plugins::plugins_for(&job).unwrap_or_default();
        let mut controlled = st.controlled_resources.clone().unwrap_or_default();
        for p in &plugins {
            if controlled
                .remove(&plugins::controlled_key(p.name()))
                .is_some()
            {
                for r in p.on_job_delete(&job) {
                    ctx.delete_owned(&r).await?;
                }
            }
        }
        st.controlled_resources = (!controlled.is_empty()).then_some(controlled);
    }
    if st != old {
        ctx.write_status(&job, st).await?;
    }
    if whole {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        ctx.delete_podgroups(&ns, &name, &uid).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PodGroup;

    fn pg(conds: serde_json::Value) -> PodGroup {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns"},
            "spec": {"minMember": 1},
            "status": {"phase": "Pending", "conditions": conds}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn pod_group_pending_names_the_newest_true_condition() {
        let p = pg(serde_json::json!([
            {"type": "Unschedulable", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z",
             "message": "3/3 tasks in gang unschedulable: 3 Insufficient cpu"},
            {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
            {"type": "Unschedulable", "status": "False", "lastTransitionTime": "2026-01-01T00:00:09Z"}
        ]));
        assert_eq!(
            pending_message("ns", "job", &p).as_deref(),
            Some(
                "PodGroup ns:job unschedulable, reason: 3/3 tasks in gang unschedulable: 3 Insufficient cpu"
            )
        );
        let scheduled = pg(serde_json::json!([
            {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z"}
        ]));
        assert_eq!(pending_message("ns", "job", &scheduled), None);
        assert_eq!(
            pending_message("ns", "job", &pg(serde_json::json!([]))),
            None
        );
    }

    fn job(spec: serde_json::Value, status: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": spec, "status": status
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn ttl_counts_from_the_last_transition_of_a_finished_job() {
        let done = |phase: &str| {
            job(
                serde_json::json!({"ttlSecondsAfterFinished": 30}),
                serde_json::json!({"state": {"phase": phase, "lastTransitionTime": "2026-01-01T00:00:00Z"}}),
            )
        };
        let at = ttl_deadline(&done("Completed")).map(|t| t.to_string());
        assert_eq!(at.as_deref(), Some("2026-01-01T00:00:30Z"));
        assert!(ttl_deadline(&done("Failed")).is_some());
        assert!(ttl_deadline(&done("Terminated")).is_some());
        // Aborted can be resumed: never collected (Volcano).
        assert_eq!(ttl_deadline(&done("Aborted")), None);
        assert_eq!(ttl_deadline(&done("Running")), None);
        let no_ttl = job(
            serde_json::json!({}),
            serde_json::json!({"state": {"phase": "Completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}}),
        );
        assert_eq!(ttl_deadline(&no_ttl), None);
    }

    #[test]
    fn a_cause_names_the_event_the_action_and_the_pod() {
        let mut req = Request::job("ns", "j", Event::PodFailed);
        req.pod = Some("j-w-0".into());
        req.exit_code = Some(3);
        let c = Cause::of(&Action::RestartJob, &req);
        assert_eq!(c.reason, "PodFailed");
        assert_eq!(
            c.detail,
            "RestartJob on PodFailed of pod j-w-0 (exit code 3)"
        );
    }
}
