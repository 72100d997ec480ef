//! `bus.volcano.sh` Commands aimed at jobs: validated, turned into a request on the job's
//! worker, then deleted.
//!
//! tephra departs from Volcano here: Volcano deletes a Command before its request is queued
//! (a crash in between loses it) and queues any action string (an unknown one is a silent
//! sync). tephra validates the action (an unknown one gets a Warning Event on the job and the
//! Command is deleted), and deletes the Command after its request is queued; a Command seen
//! twice (after a restart) runs its action twice, which every job action tolerates.

use std::sync::Arc;

use kube::Api;
use kube::api::DeleteParams;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;

use super::JobError;
use super::context::Context;
use super::request::Request;
use crate::api::batch::Event;
use crate::api::{Command, keys};
use crate::cluster::events::EventType;
use crate::cluster::status_code;
use crate::controllers::{Action, KubeOp};

/// Handles the Command `namespace/name`.
pub(crate) async fn handle(ctx: Arc<Context>, key: (String, String)) -> Result<Action, JobError> {
    let (ns, name) = key;
    let Some(cmd) = ctx
        .caches
        .commands()
        .get(&ObjectRef::<DeserializeGuard<Command>>::new(&name).within(&ns))
        .and_then(|g| g.0.as_ref().ok().cloned())
    else {
        return Ok(Action::AwaitChange);
    };
    let Some(target) = cmd.target().filter(|_| cmd.targets_job()).cloned() else {
        return Ok(Action::AwaitChange);
    };
    let action = cmd.action().cloned();
    match (ctx.job(&ns, &target.name), action) {
        (None, _) => {
            tracing::warn!(command = %name, job = %target.name, "Command for a missing job dropped");
        }
        (Some(job), Some(action)) if action.is_user_job_action() => {
            let msg = format!(
                "Start to execute command {action}, and clean it up to make sure executed not more than once."
            );
            ctx.event(
                &job,
                EventType::Normal,
                keys::job_events::COMMAND_ISSUED,
                &msg,
            )
            .await;
            let mut req = Request::job(&ns, &target.name, Event::CommandIssued);
            req.action = Some(action);
            ctx.router.add(req);
        }
        (Some(job), other) => {
            let what = other.map(|a| a.to_string()).unwrap_or_default();
            let msg = format!(
                "Command {name} has action {what:?}, which is not a job action (AbortJob, ResumeJob, RestartJob, RestartTask, RestartPod, RestartPartition, CompleteJob, TerminateJob); ignored"
            );
            ctx.event(&job, EventType::Warning, "InvalidCommand", &msg)
                .await;
        }
    }
    match Api::<Command>::namespaced(ctx.client.clone(), &ns)
        .delete(&name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(Action::AwaitChange),
        Err(e) if status_code(&e) == Some(404) => Ok(Action::AwaitChange),
        Err(e) => Err(KubeOp::new("delete-command", name, e).into()),
    }
}
