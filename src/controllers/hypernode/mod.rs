//! The HyperNode controller, as Volcano's: with `--controller-config` enabling the `label`
//! source, it makes the HyperNodes the nodes' labels call for ([`discovery`]); and it keeps
//! every HyperNode's `status.nodeCount` equal to the nodes it holds now (through its member
//! HyperNodes).
//!
//! ```text
//!   Node events (added, deleted, labels changed), HyperNode events,
//!   the configuration file changed (checked every 10 s) ──▶ WorkQueue<"all">
//!        ▼
//!   reconcile: every HyperNode and Node from the caches
//!        ── hypernode::discovery::plan (pure) ──▶ create / replace / delete discovered ones
//!        ── hypernode::stale_node_counts (pure) ──▶ a merge patch of /status for each
//!           HyperNode whose count changed
//! ```
//!
//! One key for the whole topology: a node's labels can move it between HyperNodes, and a
//! HyperNode's members reach through others, so the counts are worked out together (a
//! burst of events costs one pass: the work queue folds a key added while queued). Node
//! status heartbeats do not queue it: only a node added, deleted or relabelled does.

pub mod discovery;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::core::DeserializeGuard;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::workqueue::WorkQueue;
use super::{Action, ControllerConfig, ControllerMetrics, KubeOp, MetricLabel};
use crate::api::HyperNode;
use crate::cluster::{CacheFeeds, Caches};
use discovery::DiscoveryFile;
use tephra_controllers::hypernode::{discovery::plan, stale_node_counts};

/// The controller's name (metrics).
pub const NAME: &str = "hypernode-controller";

/// The one key: every HyperNode.
const ALL: &str = "all";

/// How often the controller configuration file is looked at for changes.
const CONFIG_POLL: Duration = Duration::from_secs(10);

/// Why a reconcile failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum HyperNodeError {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] KubeOp),
}

impl MetricLabel for HyperNodeError {
    const FIRST: &'static str = "update-status";

    fn metric_label(&self) -> &'static str {
        match self {
            HyperNodeError::Kube(e) => e.op,
        }
    }
}

async fn reconcile(
    client: Client,
    caches: Caches,
    discovery: Option<Arc<DiscoveryFile>>,
) -> Result<Action, HyperNodeError> {
    let hns: Vec<Arc<DeserializeGuard<HyperNode>>> = caches.hypernodes().state();
    let hns: Vec<&HyperNode> = hns.iter().filter_map(|g| g.0.as_ref().ok()).collect();
    let nodes: Vec<Arc<Node>> = caches.nodes().state();
    let nodes: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
    if let Some(label) = discovery.as_ref().and_then(|d| d.current()) {
        let plan = plan(&label, &nodes, &hns);
        if !plan.is_empty() {
            // The writes come back as HyperNode events, which queue the next pass: the
            // counts are written then, over what was written now.
            discovery::write(&client, plan).await?;
            return Ok(Action::AwaitChange);
        }
    }
    if hns.is_empty() {
        return Ok(Action::AwaitChange);
    }
    let api: Api<HyperNode> = Api::all(client);
    for (name, count) in stale_node_counts(&hns, &nodes) {
        let patch = serde_json::json!({"status": {"nodeCount": count}});
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            // Deleted meanwhile: nothing to count.
            Err(e) if crate::cluster::status_code(&e) == Some(404) => {}
            Err(e) => return Err(KubeOp::new("update-status", name, e).into()),
        }
    }
    Ok(Action::AwaitChange)
}

/// Node names and labels as last seen, so that only events changing what HyperNodes could
/// hold (a node added or deleted, its labels changed) queue a pass, not every status
/// heartbeat.
#[derive(Default)]
struct SeenNodes(
    std::collections::HashMap<String, Option<std::collections::BTreeMap<String, String>>>,
);

impl SeenNodes {
    /// Records the event; `true` when it may change a HyperNode's nodes.
    fn changes(&mut self, ev: &watcher::Event<Node>) -> bool {
        match ev {
            watcher::Event::Apply(n) | watcher::Event::InitApply(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                let labels = n.metadata.labels.clone();
                self.0.insert(name, labels.clone()) != Some(labels)
            }
            watcher::Event::Delete(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                self.0.remove(&name).is_some()
            }
            watcher::Event::Init => {
                self.0.clear();
                false
            }
            watcher::Event::InitDone => true,
        }
    }
}

pub(crate) fn start(
    client: &Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    config: &ControllerConfig,
    metrics: &ControllerMetrics,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let queue: WorkQueue<String> = WorkQueue::new(shutdown.clone());
    {
        let queue = queue.clone();
        feeds.hypernodes(Arc::new(move |ev| {
            if matches!(
                ev,
                watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone
            ) {
                queue.add(ALL.to_string());
            }
        }));
    }
    {
        let queue = queue.clone();
        let seen = std::sync::Mutex::new(SeenNodes::default());
        feeds.nodes(Arc::new(move |ev| {
            if crate::sync::lock(&seen).changes(ev) {
                queue.add(ALL.to_string());
            }
        }));
    }
    let mut tasks = Vec::new();
    if let Some(file) = config.hypernode_discovery.clone() {
        let queue = queue.clone();
        let shutdown = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(CONFIG_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let file = file.clone();
                let changed = tokio::task::spawn_blocking(move || file.refresh())
                    .await
                    .unwrap_or(false);
                if changed {
                    queue.add(ALL.to_string());
                }
            }
        }));
    }
    let client = client.clone();
    let cached = caches.clone();
    let discovery = config.hypernode_discovery.clone();
    tasks.extend(super::spawn_workers(
        NAME,
        queue,
        caches.clone(),
        &config.leadership,
        1,
        metrics.clone(),
        shutdown.clone(),
        move |_key: String| reconcile(client.clone(), cached.clone(), discovery.clone()),
    ));
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, rack: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"rack": rack}}
        }))
        .unwrap()
    }

    #[test]
    fn only_nodes_added_removed_or_relabelled_queue_a_pass() {
        let mut seen = SeenNodes::default();
        assert!(seen.changes(&watcher::Event::Apply(node("n0", "a"))));
        assert!(
            !seen.changes(&watcher::Event::Apply(node("n0", "a"))),
            "a heartbeat"
        );
        assert!(
            seen.changes(&watcher::Event::Apply(node("n0", "b"))),
            "relabelled"
        );
        assert!(seen.changes(&watcher::Event::Delete(node("n0", "b"))));
        assert!(
            !seen.changes(&watcher::Event::Delete(node("n0", "b"))),
            "already gone"
        );
    }
}
