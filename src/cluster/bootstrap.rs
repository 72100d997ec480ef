//! Start-up work against the API: make sure the `default` and `root` Queues exist, as
//! Volcano's scheduler does, so vcJobs defaulted to `queue: default` are admitted and run.
//!
//! Existing queues are never changed, except that a queue with no `status.state` at all gets
//! `Open` (what Volcano's queue controller does on its first sync).

use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::startup::{self, Fixes, StartupError};
use super::status_code;
use crate::api::scheduling::{QueueState, QueueStatus};
use crate::api::{Queue, QueueSpec};

/// Creates tephra's CustomResourceDefinitions, keeping any that exist. Used by `serve
/// --embedded`, whose in-memory API starts empty; on a cluster the CRDs come from
/// `manifests/crds/`. Transient errors are retried (see [`startup`]).
pub async fn install_crds(client: &Client) -> Result<usize, StartupError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = crate::api::crds::all();
    for crd in &crds {
        let name = crd.metadata.name.as_deref().unwrap_or_default();
        startup::run(
            format!("installing CRD {name}"),
            Fixes::OWN_RESOURCES,
            || async {
                match api.create(&PostParams::default(), crd).await {
                    Ok(_) => Ok(()),
                    Err(e) if status_code(&e) == Some(409) => Ok(()),
                    Err(e) => Err(e),
                }
            },
        )
        .await?;
    }
    Ok(crds.len())
}

/// The queues every cluster has.
pub const BUILTIN_QUEUES: [&str; 2] = ["default", "root"];

/// What [`ensure_default_queues`] did to one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueAction {
    /// It existed with a state; nothing done.
    Kept,
    /// It was created (weight 1, reclaimable, Open).
    Created,
    /// It existed without a state and was opened.
    Opened,
}

impl QueueAction {
    /// The word for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kept => "kept",
            Self::Created => "created",
            Self::Opened => "opened",
        }
    }
}

/// The spec of a built-in queue: weight 1, reclaimable (Volcano's defaults).
fn builtin_queue(name: &str) -> Queue {
    let mut q = Queue::named(
        name,
        QueueSpec {
            weight: Some(1),
            reclaimable: Some(true),
            ..QueueSpec::default()
        },
    );
    q.status = Some(QueueStatus {
        state: Some(QueueState::Open),
        ..QueueStatus::default()
    });
    q
}

/// Creates `default` and `root` when missing and opens them when they have no state.
/// Safe to run from several replicas at once: a creation race ends in `AlreadyExists`, which
/// counts as "exists". Waits out transient errors and a cluster without tephra's CRDs yet
/// (see [`startup`]).
pub async fn ensure_default_queues(
    client: &Client,
) -> Result<Vec<(&'static str, QueueAction)>, StartupError> {
    let api: Api<Queue> = Api::all(client.clone());
    let mut done = Vec::new();
    for name in BUILTIN_QUEUES {
        // Across attempts: a create that succeeded before a later call failed still counts.
        let created = AtomicBool::new(false);
        let action = startup::run(
            format!("ensuring queue {name}"),
            Fixes::OWN_RESOURCES,
            || ensure_queue(&api, name, &created),
        )
        .await?;
        tracing::info!(queue = name, action = action.as_str(), "built-in queue");
        done.push((name, action));
    }
    Ok(done)
}

/// One attempt at one built-in queue; `created` is set once this process has created it.
async fn ensure_queue(
    api: &Api<Queue>,
    name: &'static str,
    created: &AtomicBool,
) -> Result<QueueAction, kube::Error> {
    let needs_state = match api.get_opt(name).await? {
        Some(q) => q.state().is_none(),
        None => match api
            .create(&PostParams::default(), &builtin_queue(name))
            .await
        {
            Ok(made) => {
                created.store(true, Ordering::Relaxed);
                // Queues have a status subresource: the state in the create body is dropped by
                // the API server, so write it separately.
                made.state().is_none()
            }
            Err(e) if status_code(&e) == Some(409) => false,
            Err(e) => return Err(e),
        },
    };
    if needs_state {
        let patch = json!({ "status": { "state": "Open" } });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(match (created.load(Ordering::Relaxed), needs_state) {
        (true, _) => QueueAction::Created,
        (false, true) => QueueAction::Opened,
        (false, false) => QueueAction::Kept,
    })
}
