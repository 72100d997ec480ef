//! The CronJob controller (Volcano's `pkg/controllers/cronjob/`): creates a vcJob from a
//! CronJob's template at each schedule time, keeps `status.active`, `lastScheduleTime` and
//! `lastSuccessfulTime`, and deletes finished jobs beyond the history limits.
//!
//! ```text
//!   CronJob events, vcJob events (by controller reference) ──▶ WorkQueue<(namespace, name)>
//!        ▼
//!   reconcile: the CronJob and its jobs from the caches ── plan::plan (pure)
//!        ──▶ delete jobs (uid precondition) ──▶ create the due job ──▶ merge patch of /status
//!        ──▶ Events ──▶ requeue just after the next schedule time
//! ```
//!
//! A failed call is retried with the work queue's backoff; the job name is fixed by its
//! scheduled time, so a retry after a lost status write finds the job instead of making a
//! second one.

use std::sync::Arc;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::relist::queue_keys;
use super::workqueue::WorkQueue;
use super::{Action, ControllerConfig, ControllerMetrics, KubeOp, MetricLabel};
use crate::api::batch::{API_VERSION, CronJob, CronJobStatus, Job};
use crate::cluster::events::{EventRecorder, EventType, object_ref};
use crate::cluster::{CacheFeeds, Caches, status_code};
use tephra_controllers::cronjob::plan::{self, Plan};

/// The controller's name (metrics, Events).
pub const NAME: &str = "cronjob-controller";

/// A CronJob, by namespace and name.
type Key = (String, String);

/// Why a reconcile failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum CronJobError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] KubeOp),
}

impl MetricLabel for CronJobError {
    const FIRST: &'static str = "create-job";

    fn metric_label(&self) -> &'static str {
        match self {
            CronJobError::Kube(e) => e.op,
        }
    }
}

struct Context {
    client: Client,
    caches: Caches,
    recorder: EventRecorder,
}

/// The CronJob that controls `job`, if one does.
fn controller_of(job: &Job) -> Option<Key> {
    let owner = job
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))?;
    (owner.kind == "CronJob" && owner.api_version == API_VERSION)
        .then(|| (job.namespace().unwrap_or_default(), owner.name.clone()))
}

async fn event(ctx: &Context, cj: &CronJob, type_: EventType, reason: &str, message: &str) {
    let r = object_ref(
        API_VERSION,
        "CronJob",
        cj.namespace().as_deref(),
        &cj.name_any(),
        cj.uid().as_deref(),
    );
    if let Err(e) = ctx.recorder.record(&r, type_, reason, message).await {
        tracing::debug!(error = %crate::report::report(&e), "could not record Event");
    }
}

async fn reconcile(key: Key, ctx: Arc<Context>) -> Result<Action, CronJobError> {
    let (ns, name) = key;
    let Some(cj) = ctx
        .caches
        .cronjobs()
        .get(&ObjectRef::new(&name).within(&ns))
        .and_then(|g| g.0.as_ref().ok().cloned())
    else {
        // Deleted: its jobs go with it through their owner reference.
        return Ok(Action::AwaitChange);
    };
    if cj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::AwaitChange);
    }
    let uid = cj.uid();
    let jobs: Vec<Job> = ctx
        .caches
        .jobs()
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|j| j.namespace().as_deref() == Some(ns.as_str()))
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
        })
        .cloned()
        .collect();
    let now = k8s_openapi::jiff::Timestamp::now();
    let Plan {
        delete,
        create,
        mut status,
        events,
        requeue_after,
    } = plan::plan(&cj, &jobs, now);

    for e in &events {
        event(&ctx, &cj, e.type_, e.reason, &e.message).await;
    }
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    for d in &delete {
        let params = DeleteParams {
            preconditions: d.uid.clone().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&d.name, &params).await {
            Ok(_) => {
                event(
                    &ctx,
                    &cj,
                    EventType::Normal,
                    "SuccessfulDelete",
                    &format!("Deleted job {}", d.name),
                )
                .await;
            }
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => {
                event(
                    &ctx,
                    &cj,
                    EventType::Warning,
                    "FailedDelete",
                    &format!("Error deleting job {}: {e}", d.name),
                )
                .await;
                return Err(KubeOp::new("delete-job", d.name.clone(), e).into());
            }
        }
    }
    if let Some((job, scheduled)) = create {
        let job_name = job.name_any();
        match api.create(&PostParams::default(), &job).await {
            Ok(created) => {
                plan::record_created(&mut status, &created, scheduled);
                event(
                    &ctx,
                    &cj,
                    EventType::Normal,
                    "SuccessfulCreate",
                    &format!("Created job {job_name}"),
                )
                .await;
            }
            Err(e) if status_code(&e) == Some(409) => {
                // Made by an earlier attempt whose status write was lost, or not ours.
                let existing = api
                    .get(&job_name)
                    .await
                    .map_err(KubeOp::on("get-job", &job_name))?;
                if controller_of(&existing).is_some_and(|(_, owner)| owner == cj.name_any())
                    && existing
                        .owner_references()
                        .iter()
                        .any(|o| Some(&o.uid) == uid.as_ref())
                {
                    if !plan::finished(&existing) {
                        plan::record_created(&mut status, &existing, scheduled);
                    }
                } else {
                    event(
                        &ctx,
                        &cj,
                        EventType::Warning,
                        "ForeignJob",
                        &format!("Job {job_name} exists but is not controlled by this CronJob"),
                    )
                    .await;
                }
            }
            Err(e) => {
                event(
                    &ctx,
                    &cj,
                    EventType::Warning,
                    "FailedCreate",
                    &format!("Error creating job: {e}"),
                )
                .await;
                return Err(KubeOp::new("create-job", job_name, e).into());
            }
        }
    }
    if cj.status.clone().unwrap_or_default() != status {
        let patch = status_patch(&status);
        let cronjobs: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ns);
        cronjobs
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(KubeOp::on("patch-status", &name))?;
    }
    Ok(requeue_after.map_or(Action::AwaitChange, Action::RequeueAfter))
}

/// A merge patch setting every status field (a `null` removes one).
fn status_patch(status: &CronJobStatus) -> serde_json::Value {
    serde_json::json!({
        "status": {
            "active": status.active,
            "lastScheduleTime": status.last_schedule_time,
            "lastSuccessfulTime": status.last_successful_time,
        }
    })
}

pub(crate) fn start(
    client: &Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    config: &ControllerConfig,
    metrics: &ControllerMetrics,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let queue: WorkQueue<Key> = WorkQueue::new(shutdown.clone());
    feeds.cronjobs(queue_keys::<DeserializeGuard<crate::api::CronJob>, _, _>(
        queue.clone(),
        |ev| match ev {
            watcher::Event::Apply(DeserializeGuard(Ok(cj)))
            | watcher::Event::InitApply(DeserializeGuard(Ok(cj))) => {
                Some((cj.namespace().unwrap_or_default(), cj.name_any()))
            }
            _ => None,
        },
    ));
    feeds.jobs(queue_keys::<DeserializeGuard<crate::api::Job>, _, _>(
        queue.clone(),
        |ev| match ev {
            watcher::Event::Apply(DeserializeGuard(Ok(j)))
            | watcher::Event::InitApply(DeserializeGuard(Ok(j)))
            | watcher::Event::Delete(DeserializeGuard(Ok(j))) => controller_of(j),
            _ => None,
        },
    ));
    let ctx = Arc::new(Context {
        client: client.clone(),
        caches: caches.clone(),
        recorder: EventRecorder::new(client.clone(), NAME),
    });
    super::spawn_workers(
        NAME,
        queue,
        caches.clone(),
        &config.leadership,
        config.workers.min(4),
        metrics.clone(),
        shutdown.clone(),
        move |key| reconcile(key, ctx.clone()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_map_to_their_controlling_cronjob() {
        let mut j = Job::new("nightly-29000000", Default::default());
        j.metadata.namespace = Some("ns".into());
        assert_eq!(controller_of(&j), None);
        j.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: API_VERSION.into(),
                kind: "CronJob".into(),
                name: "nightly".into(),
                uid: "u".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        ]);
        assert_eq!(controller_of(&j), Some(("ns".into(), "nightly".into())));
    }

    #[test]
    fn status_patch_clears_what_is_gone() {
        let p = status_patch(&CronJobStatus::default());
        assert_eq!(
            p,
            serde_json::json!({"status": {"active": null, "lastScheduleTime": null, "lastSuccessfulTime": null}})
        );
    }
}
