//! Start-up work against the API: make sure the `default` and `root` Queues exist, as
//! Volcano's scheduler does, so vcJobs defaulted to `queue: default` are admitted and run.
//!
//! Existing queues are never changed, except that a queue with no `status.state` at all gets
//! `Open` (what Volcano's queue controller does on its first sync).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::api::scheduling::{QueueState, QueueStatus};
use crate::api::{Queue, QueueSpec};

/// Creates (or replaces) tephra's CustomResourceDefinitions. Used by `serve --embedded`,
/// whose in-memory API starts empty; on a cluster the CRDs come from `manifests/crds/`.
pub async fn install_crds(client: &Client) -> Result<usize, BootstrapError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = crate::api::crds::all();
    for crd in &crds {
        let err = |source| BootstrapError::Crd {
            name: crd.metadata.name.clone().unwrap_or_default(),
            source,
        };
        match api.create(&PostParams::default(), crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(err(e)),
        }
    }
    Ok(crds.len())
}

/// The queues every cluster has.
pub const BUILTIN_QUEUES: [&str; 2] = ["default", "root"];

/// Errors creating the built-in queues.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The API refused or failed a request.
    #[error("ensuring queue {queue}: {source}")]
    Api {
        /// Which queue.
        queue: &'static str,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A CRD could not be installed.
    #[error("installing CRD {name}: {source}")]
    Crd {
        /// Which CRD.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

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
    let mut q = Queue::new(
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
/// counts as "exists".
pub async fn ensure_default_queues(
    client: &Client,
) -> Result<Vec<(&'static str, QueueAction)>, BootstrapError> {
    let api: Api<Queue> = Api::all(client.clone());
    let mut done = Vec::new();
    for name in BUILTIN_QUEUES {
        let err = |source| BootstrapError::Api {
            queue: name,
            source,
        };
        let existing = api.get_opt(name).await.map_err(err)?;
        let mut action = QueueAction::Kept;
        let needs_state = match existing {
            Some(q) => q.state().is_none(),
            None => match api
                .create(&PostParams::default(), &builtin_queue(name))
                .await
            {
                Ok(created) => {
                    action = QueueAction::Created;
                    // Queues have a status subresource: the state in the create body is
                    // dropped by the API server, so write it separately.
                    created.state().is_none()
                }
                Err(kube::Error::Api(s)) if s.code == 409 => false,
                Err(e) => return Err(err(e)),
            },
        };
        if needs_state {
            let patch = json!({ "status": { "state": "Open" } });
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(err)?;
            if action == QueueAction::Kept {
                action = QueueAction::Opened;
            }
        }
        tracing::info!(queue = name, action = action.as_str(), "built-in queue");
        done.push((name, action));
    }
    Ok(done)
}
