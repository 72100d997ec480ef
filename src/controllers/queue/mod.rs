//! The Queue controller (Volcano's `pkg/controllers/queue/`): every Queue's `status.state`
//! (Open, Closed, Closing while PodGroups remain) and its PodGroup counts by phase, and the
//! `bus.volcano.sh` Commands `OpenQueue` / `CloseQueue` aimed at a queue.
//!
//! ```text
//!   Queue, PodGroup, Command events + a periodic resync ──▶ WorkQueue<queue name>
//!        ▼
//!   reconcile: queue, its Commands (oldest first), PodGroup counts (index)
//!        ── state::next_state / state::status_patch (pure)
//!        ──▶ merge patch of /status (state + counts only; a new state pinned to the
//!            resourceVersion it was decided on)
//!        ──▶ then delete the Commands it applied
//! ```
//!
//! The hierarchy follows Volcano: children close with their parent (marked
//! `volcano.sh/closed-by-parent`) and reopen with it ([`state::apply_hierarchy`]).
//!
//! Departures from Volcano: keyed work (one worker per queue), state writes pinned
//! to the resourceVersion they were decided on, counts written to `status`, Closing re-checked
//! on every PodGroup change and periodically, Commands validated (an unknown action gets a
//! Warning Event) and deleted only after their action took effect.

pub use tephra_controllers::queue::state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::api::{DeleteParams, Patch, PatchParams};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::relist::queue_keys;
use super::workqueue::WorkQueue;
use super::{Action, ControllerConfig, ControllerMetrics, KubeOp, MetricLabel};
use crate::api::bus::Action as CommandAction;
use crate::api::scheduling::{PodGroupPhase, QueueState};
use crate::api::{Command, PodGroup, Queue, keys};
use crate::cluster::events::{EventRecorder, EventType, object_ref};
use crate::cluster::{CacheFeeds, Caches, Index, Relist, status_code};
use crate::sync::lock;
use state::{Counts, QueueAction};

/// Name of this controller (logs, metrics, Event source).
pub const NAME: &str = "queue-controller";
/// How long PodGroup changes are gathered before a queue's counts are written.
const COUNT_COALESCE: std::time::Duration = std::time::Duration::from_millis(500);

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// An API call failed (a 409 means the queue changed since it was read: retried).
    #[error(transparent)]
    Kube(#[from] KubeOp),
}

impl MetricLabel for QueueError {
    const FIRST: &'static str = "patch-status";

    fn metric_label(&self) -> &'static str {
        match self {
            QueueError::Kube(e) => e.op,
        }
    }
}

/// PodGroups by queue, with their phases: an [`Index`] of the PodGroup watch, fed through a
/// [`Relist`]. A PodGroup whose `spec.queue` changes moves (Volcano keeps counting it under
/// the old queue). It also notes the queues whose counts may have changed, for the
/// subscriber to reconcile ([`PodGroupIndex::take_touched`]).
#[derive(Debug, Default)]
pub struct PodGroupIndex {
    by_queue: HashMap<String, HashMap<String, PodGroupPhase>>,
    queue_of: HashMap<String, String>,
    touched: Vec<String>,
}

/// What [`PodGroupIndex`] takes of a PodGroup.
#[derive(Debug)]
pub struct Counted {
    /// `namespace/name`.
    key: String,
    queue: String,
    phase: PodGroupPhase,
}

impl PodGroupIndex {
    fn record(&mut self, pg: Counted) {
        let Counted { key, queue, phase } = pg;
        self.touched.push(queue.clone());
        if let Some(old) = self.queue_of.insert(key.clone(), queue.clone())
            && old != queue
        {
            self.remove_from(&old, &key);
            self.touched.push(old);
        }
        self.by_queue.entry(queue).or_default().insert(key, phase);
    }

    fn remove_from(&mut self, queue: &str, key: &str) {
        if let Some(m) = self.by_queue.get_mut(queue) {
            m.remove(key);
            if m.is_empty() {
                self.by_queue.remove(queue);
            }
        }
    }

    /// The counts of one queue.
    pub fn counts(&self, queue: &str) -> Counts {
        self.by_queue
            .get(queue)
            .map(|m| Counts::of(m.values()))
            .unwrap_or_default()
    }

    /// The queues whose counts may have changed since the last call: a changed PodGroup's
    /// queue (and the one it left), a deleted one's, and after a relist those of every
    /// PodGroup listed.
    pub fn take_touched(&mut self) -> Vec<String> {
        std::mem::take(&mut self.touched)
    }
}

impl Index<PodGroup> for PodGroupIndex {
    type Taken = Counted;
    fn take(pg: &PodGroup) -> Counted {
        Counted {
            key: format!("{}/{}", pg.namespace().unwrap_or_default(), pg.name_any()),
            queue: pg.spec.queue().to_string(),
            phase: pg.phase(),
        }
    }
    fn apply(&mut self, pg: Counted) {
        self.record(pg);
    }

    fn delete(&mut self, pg: &PodGroup) {
        let key = format!("{}/{}", pg.namespace().unwrap_or_default(), pg.name_any());
        if let Some(queue) = self.queue_of.remove(&key) {
            self.remove_from(&queue, &key);
            self.touched.push(queue);
        }
    }

    fn reset(&mut self, all: Vec<Counted>) {
        self.by_queue.clear();
        self.queue_of.clear();
        for pg in all {
            self.record(pg);
        }
    }
}

/// Everything a reconcile needs.
pub struct Context {
    client: Client,
    caches: Caches,
    index: Arc<Mutex<PodGroupIndex>>,
    recorder: EventRecorder,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

/// The Commands aimed at queue `name`, oldest first.
fn commands_for(caches: &Caches, name: &str) -> Vec<Command> {
    let mut cmds: Vec<Command> = caches
        .commands()
        .state()
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .filter(|c| c.targets_queue() && c.target().is_some_and(|t| t.name == name))
        .cloned()
        .collect();
    cmds.sort_by_key(|c| (c.creation_timestamp(), c.name_any()));
    cmds
}

async fn delete_commands(ctx: &Context, cmds: &[Command]) -> Result<(), QueueError> {
    for c in cmds {
        let api: Api<Command> =
            Api::namespaced(ctx.client.clone(), &c.namespace().unwrap_or_default());
        match api.delete(&c.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => return Err(KubeOp::new("delete-command", c.name_any(), e).into()),
        }
    }
    Ok(())
}

async fn event(ctx: &Context, queue: &Queue, type_: EventType, reason: &str, message: &str) {
    let r = object_ref(
        crate::api::scheduling::API_VERSION,
        "Queue",
        None,
        &queue.name_any(),
        queue.uid().as_deref(),
    );
    if let Err(e) = ctx.recorder.record(&r, type_, reason, message).await {
        tracing::debug!(error = %crate::report::report(&e), "could not record Event");
    }
}

/// One reconcile of a queue.
pub async fn reconcile(name: String, ctx: Arc<Context>) -> Result<Action, QueueError> {
    let cmds = commands_for(&ctx.caches, &name);
    let Some(queue) = ctx
        .caches
        .queues()
        .get(&ObjectRef::new(&name))
        .and_then(|g| g.0.as_ref().ok().cloned())
    else {
        if !cmds.is_empty() {
            tracing::warn!(queue = %name, commands = cmds.len(), "Commands for a missing queue dropped");
            delete_commands(&ctx, &cmds).await?;
        }
        return Ok(Action::AwaitChange);
    };
    let counts = lock(&ctx.index).counts(&name);
    let has_podgroups = counts.total() > 0;
    let mut state = queue.state().cloned();
    let mut closed_by_command = false;
    let mut applied = false;
    let mut explicit = None;
    for c in &cmds {
        let action = match c.action() {
            Some(CommandAction::OpenQueue) => QueueAction::Open,
            Some(CommandAction::CloseQueue) if name == keys::ROOT_QUEUE => {
                tracing::warn!(command = %c.name_any(), "the root queue cannot be closed");
                event(
                    &ctx,
                    &queue,
                    EventType::Warning,
                    "CloseQueue",
                    "the root queue cannot be closed",
                )
                .await;
                continue;
            }
            Some(CommandAction::CloseQueue) => QueueAction::Close,
            other => {
                // Volcano runs an unknown action as a silent sync; tephra says so.
                let what = other.map(ToString::to_string).unwrap_or_default();
                let msg = format!(
                    "Command {} has action {what:?}, not OpenQueue or CloseQueue; ignored",
                    c.name_any()
                );
                tracing::warn!(queue = %name, "{msg}");
                event(&ctx, &queue, EventType::Warning, "InvalidCommand", &msg).await;
                continue;
            }
        };
        closed_by_command = action == QueueAction::Close;
        state = Some(state::next_state(state.as_ref(), &action, has_podgroups));
        explicit = Some(action);
        applied = true;
    }
    let state = if applied {
        state.unwrap_or(QueueState::Open)
    } else {
        state::next_state(state.as_ref(), &QueueAction::Sync, has_podgroups)
    };
    // The hierarchy: a parent's Closed/Closing reaches its children (their reconciles are
    // queued on every change of the parent, see `start`). `root` is never closed.
    let parent_state = queue
        .spec
        .parent
        .as_deref()
        .filter(|p| !p.is_empty() && *p != keys::ROOT_QUEUE && name != keys::ROOT_QUEUE)
        .and_then(|p| ctx.caches.queues().get(&ObjectRef::new(p)))
        .and_then(|g| g.0.as_ref().ok().and_then(|p| p.state().cloned()));
    let closed_by_parent = queue
        .annotations()
        .get(keys::CLOSED_BY_PARENT)
        .is_some_and(|v| v == "true");
    let (state, mark) = state::apply_hierarchy(
        state,
        parent_state.as_ref(),
        closed_by_parent,
        explicit.as_ref(),
        has_podgroups,
    );
    // A new state below is pinned to the resourceVersion it was decided on: after the
    // annotation's write that is the version this write returned.
    let queue = match mark {
        Some(mark) => {
            let api: Api<Queue> = Api::all(ctx.client.clone());
            let patch = serde_json::json!({
                "metadata": {"annotations": {keys::CLOSED_BY_PARENT: mark.to_string()}}
            });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(KubeOp::on("patch-annotation", &name))?
        }
        None => queue,
    };
    if let Some(patch) = state::status_patch(&queue, &state, &counts) {
        let api: Api<Queue> = Api::all(ctx.client.clone());
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(KubeOp::on("patch-status", &name))?;
        tracing::debug!(queue = %name, ?state, ?counts, "queue status written");
    }
    if closed_by_command {
        event(
            &ctx,
            &queue,
            EventType::Normal,
            "CloseQueue",
            "Close queue succeed",
        )
        .await;
    }
    // After the state is written: a crash before this line runs the Command again, which
    // is harmless (Volcano deletes first and can lose it).
    delete_commands(&ctx, &cmds).await?;
    Ok(Action::AwaitChange)
}

/// Registers the subscribers, the periodic resync and the workers.
pub(crate) fn start(
    client: &Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    config: &ControllerConfig,
    metrics: &ControllerMetrics,
    shutdown: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let queue: WorkQueue<String> = WorkQueue::new(shutdown.clone());
    let index = Arc::new(Mutex::new(PodGroupIndex::default()));
    {
        let caches = caches.clone();
        feeds.queues(queue_keys::<DeserializeGuard<crate::api::Queue>, _, _>(
            queue.clone(),
            move |ev| {
                let mut keys = Vec::new();
                if let watcher::Event::Apply(DeserializeGuard(Ok(q)))
                | watcher::Event::InitApply(DeserializeGuard(Ok(q))) = ev
                {
                    let name = q.name_any();
                    // A parent's state change is its children's business too (closed with it,
                    // reopened with it), at once: the store already has the parent's new state
                    // (subscribers run after it; a relist's keys wait for its end), and a child
                    // reopened late could undo a Closed written to it meanwhile.
                    for child in caches.queues().state() {
                        if let Ok(c) = &child.0
                            && c.spec.parent.as_deref() == Some(name.as_str())
                        {
                            keys.push(c.name_any());
                        }
                    }
                    keys.push(name);
                }
                keys
            },
        ));
    }
    {
        let (queue, index) = (queue.clone(), index.clone());
        let relist = Mutex::new(Relist::default());
        feeds.podgroups(Arc::new(move |ev| {
            let touched = {
                let mut relist = lock(&relist);
                let staged = relist.stage_decoded::<_, PodGroupIndex>(ev);
                let mut idx = lock(&index);
                staged.apply_to(&mut *idx);
                idx.take_touched()
            };
            // A burst of PodGroup changes (a thousand gangs created at once) makes one status
            // write per queue, not one per PodGroup.
            for q in touched {
                queue.add_after(q, COUNT_COALESCE);
            }
        }));
    }
    feeds.commands(queue_keys::<DeserializeGuard<crate::api::Command>, _, _>(
        queue.clone(),
        |ev| match ev {
            watcher::Event::Apply(DeserializeGuard(Ok(c)))
            | watcher::Event::InitApply(DeserializeGuard(Ok(c)))
                if c.targets_queue() =>
            {
                c.target().map(|t| t.name.clone())
            }
            _ => None,
        },
    ));
    let mut tasks = Vec::new();
    {
        // Closing must end once its PodGroups are gone even if an event was missed.
        let (queue, caches, stop, period) = (
            queue.clone(),
            caches.clone(),
            shutdown.clone(),
            config.queue_resync,
        );
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {
                        for q in caches.queues().state() {
                            if let Ok(q) = &q.0 {
                                queue.add(q.name_any());
                            }
                        }
                    }
                }
            }
        }));
    }
    let ctx = Arc::new(Context {
        client: client.clone(),
        caches: caches.clone(),
        index,
        recorder: EventRecorder::new(client.clone(), NAME),
    });
    tasks.extend(super::spawn_workers(
        NAME,
        queue,
        caches.clone(),
        &config.leadership,
        config.workers.min(4),
        metrics.clone(),
        shutdown.clone(),
        move |name| reconcile(name, ctx.clone()),
    ));
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_counts_moves_deletes_and_relists() {
        let mut i = PodGroupIndex::default();
        let mut relist = Relist::default();
        let mut feed = |i: &mut PodGroupIndex, ev: watcher::Event<DeserializeGuard<PodGroup>>| {
            relist.feed_decoded(i, &ev);
            i.take_touched()
        };
        let ok = |pg: &PodGroup| DeserializeGuard(Ok(pg.clone()));
        let a = PodGroup::test("a").in_namespace("ns").in_queue("q1");
        let b = PodGroup::test("b")
            .in_namespace("ns")
            .in_queue("q1")
            .with_phase(PodGroupPhase::Running);
        feed(&mut i, watcher::Event::Apply(ok(&a)));
        feed(&mut i, watcher::Event::Apply(ok(&b)));
        assert_eq!(i.counts("q1").pending, 1);
        assert_eq!(i.counts("q1").running, 1);
        let moved = a.clone().in_queue("q2");
        let touched = feed(&mut i, watcher::Event::Apply(ok(&moved)));
        assert_eq!(touched, vec!["q2".to_string(), "q1".to_string()]);
        assert_eq!(i.counts("q1").total(), 1);
        assert_eq!(i.counts("q2").total(), 1);
        assert_eq!(feed(&mut i, watcher::Event::Delete(ok(&b))), ["q1"]);
        assert_eq!(i.counts("q1").total(), 0);
        assert!(
            feed(&mut i, watcher::Event::Delete(ok(&b))).is_empty(),
            "a PodGroup the index does not have touches no queue"
        );

        let c = PodGroup::test("c").in_namespace("ns").in_queue("q3");
        assert!(feed(&mut i, watcher::Event::Init).is_empty());
        assert!(feed(&mut i, watcher::Event::InitApply(ok(&c))).is_empty());
        // Until the relist is done the old view stands.
        assert_eq!(i.counts("q2").total(), 1);
        assert_eq!(feed(&mut i, watcher::Event::InitDone), ["q3"]);
        assert_eq!(i.counts("q2").total(), 0, "relist replaced the index");
        assert_eq!(i.counts("q3").total(), 1);
    }
}
