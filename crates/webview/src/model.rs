//! What each page shows, decided from the objects: plain structs of strings and numbers, so
//! the templates only lay them out.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;
use tephra_api::keys;
use tephra_api::scheduling::{PodGroup, PodGroupConditionType, PodGroupPhase, Queue};
use tephra_scheduler::outcome::QueueFigures;
use tephra_scheduler::resource::Resource;

use crate::BASE_PATH;
use crate::format::{age, quantity_cpu, quantity_memory};

/// What the pages are built from: the objects as the caches hold them, and the time.
#[derive(Clone, Debug, Default)]
pub struct View<'a> {
    /// Now, in seconds since the epoch (ages count from it).
    pub now_s: i64,
    /// Queues.
    pub queues: Vec<&'a Queue>,
    /// PodGroups of every namespace.
    pub pod_groups: Vec<&'a PodGroup>,
    /// Pods of every namespace (only those naming a PodGroup are read).
    pub pods: Vec<&'a Pod>,
    /// The last session's queue figures, when this replica ran one.
    pub figures: Option<&'a QueueFigures>,
}

/// The front page: every queue, then the gangs of each.
#[derive(Clone, Debug, PartialEq)]
pub struct Overview {
    /// One row per queue, by name.
    pub queues: Vec<QueueRow>,
    /// Where the share columns come from, as a sentence.
    pub figures_note: String,
    /// The gangs not yet finished, by queue (queues with none are left out).
    pub sections: Vec<QueueSection>,
}

/// A queue as the front page's table shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueRow {
    /// Name.
    pub name: String,
    /// Open, Closed, Closing, Unknown.
    pub state: String,
    /// `spec.weight` (1 when unset).
    pub weight: i32,
    /// The parent queue, or empty.
    pub parent: String,
    /// Deserved share (`2 cpu, 8Gi memory`), or `—` when no session figures are at hand.
    pub deserved: String,
    /// Allocated to its running pods.
    pub allocated: String,
    /// Gangs running (Running or Unknown).
    pub running_gangs: usize,
    /// Gangs waiting (Pending or Inqueue).
    pub waiting_gangs: usize,
    /// Pods of its gangs not yet bound to a node.
    pub waiting_pods: usize,
}

/// The gangs of one queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSection {
    /// The queue's name.
    pub queue: String,
    /// Waiting gangs first (oldest first), then running ones.
    pub gangs: Vec<GangRow>,
}

/// A gang (a PodGroup) in one line.
#[derive(Clone, Debug, PartialEq)]
pub struct GangRow {
    /// Namespace.
    pub namespace: String,
    /// The PodGroup's name.
    pub name: String,
    /// The vcJob that owns it, or empty.
    pub job: String,
    /// Its queue.
    pub queue: String,
    /// Pending, Inqueue, Running, Unknown, Completed.
    pub phase: String,
    /// Age as kubectl prints it.
    pub age: String,
    /// `spec.minMember`.
    pub min_member: i32,
    /// Its pods bound to a node.
    pub bound: usize,
    /// Its pods.
    pub pods: usize,
    /// What it waits for, as a sentence; empty when it does not wait.
    pub waits_for: String,
    /// The gang's page.
    pub link: String,
}

/// One gang's page: the gang and its pods.
#[derive(Clone, Debug, PartialEq)]
pub struct GangPage {
    /// The gang.
    pub gang: GangRow,
    /// Its pods, by name.
    pub pods: Vec<PodRow>,
}

/// A pod of a gang.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRow {
    /// Name.
    pub name: String,
    /// Its task in the vcJob (`volcano.sh/task-spec`), or empty.
    pub task: String,
    /// Its phase; `Pending (gated)` while a scheduling gate holds it.
    pub phase: String,
    /// The node it is bound to, or empty.
    pub node: String,
    /// Age as kubectl prints it.
    pub age: String,
}

fn is_waiting(phase: &PodGroupPhase) -> bool {
    matches!(phase, PodGroupPhase::Pending | PodGroupPhase::Inqueue)
}

fn is_running(phase: &PodGroupPhase) -> bool {
    matches!(phase, PodGroupPhase::Running | PodGroupPhase::Unknown)
}

fn resources(r: &Resource) -> String {
    format!(
        "{} cpu, {} memory",
        quantity_cpu(r.milli_cpu),
        quantity_memory(r.memory)
    )
}

fn created_s(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<i64> {
    meta.creation_timestamp.as_ref().map(|t| t.0.as_second())
}

/// The pods of each gang, keyed by (namespace, PodGroup name).
fn pods_by_gang<'a>(pods: &[&'a Pod]) -> HashMap<(&'a str, &'a str), Vec<&'a Pod>> {
    let mut by = HashMap::<(&str, &str), Vec<&Pod>>::new();
    for p in pods {
        let group = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::KUBE_GROUP_NAME_ANNOTATION));
        if let (Some(ns), Some(g)) = (p.metadata.namespace.as_deref(), group) {
            by.entry((ns, g.as_str())).or_default().push(p);
        }
    }
    by
}

fn is_bound(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some()
}

fn is_finished(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// What a gang waits for: the scheduler's own words when it wrote an `Unschedulable`
/// condition, else what its phase means.
fn waits_for(pg: &PodGroup) -> String {
    let phase = pg.phase();
    if !is_waiting(&phase) && phase != PodGroupPhase::Unknown {
        return String::new();
    }
    let condition = pg
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| {
            c.type_ == Some(PodGroupConditionType::Unschedulable)
                && c.status.as_deref() == Some("True")
        })
        .max_by_key(|c| c.last_transition_time.as_ref().map(|t| t.0));
    if let Some(c) = condition {
        let message = c.message.as_deref().unwrap_or("").trim();
        let reason = c.reason.as_deref().unwrap_or("").trim();
        match (reason.is_empty(), message.is_empty()) {
            (_, false) if reason.is_empty() => return message.to_string(),
            (false, false) => return format!("{reason}: {message}"),
            (false, true) => return reason.to_string(),
            _ => {}
        }
    }
    match phase {
        PodGroupPhase::Pending => "Waiting for its queue to admit it.".into(),
        PodGroupPhase::Inqueue => "Admitted by its queue; waiting for room to place it.".into(),
        _ => "Fewer than minMember pods run; the others wait for room.".into(),
    }
}

fn owner_job(pg: &PodGroup) -> String {
    pg.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Job" && o.api_version.starts_with("batch.volcano.sh/"))
        .map(|o| o.name.clone())
        .unwrap_or_default()
}

fn gang_row(pg: &PodGroup, pods: &[&Pod], now_s: i64) -> GangRow {
    let namespace = pg.metadata.namespace.clone().unwrap_or_default();
    let name = pg.metadata.name.clone().unwrap_or_default();
    GangRow {
        link: format!("{BASE_PATH}/gangs/{namespace}/{name}"),
        job: owner_job(pg),
        queue: pg.spec.queue().to_string(),
        phase: pg.phase().as_str().to_string(),
        age: created_s(&pg.metadata).map_or_else(String::new, |t| age(now_s - t)),
        min_member: pg.spec.min_member.unwrap_or(0),
        bound: pods.iter().filter(|p| is_bound(p)).count(),
        pods: pods.len(),
        waits_for: waits_for(pg),
        namespace,
        name,
    }
}

/// The front page.
pub fn overview(view: &View<'_>) -> Overview {
    let by_gang = pods_by_gang(&view.pods);
    let mut sections: BTreeMap<String, Vec<(bool, i64, GangRow)>> = BTreeMap::new();
    let mut counts: HashMap<String, (usize, usize, usize)> = HashMap::new();
    for pg in &view.pod_groups {
        let phase = pg.phase();
        let key = (
            pg.metadata.namespace.as_deref().unwrap_or(""),
            pg.metadata.name.as_deref().unwrap_or(""),
        );
        let pods: &[&Pod] = by_gang.get(&key).map_or(&[], Vec::as_slice);
        let c = counts.entry(pg.spec.queue().to_string()).or_default();
        if is_running(&phase) {
            c.0 += 1;
        }
        if is_waiting(&phase) {
            c.1 += 1;
        }
        if phase != PodGroupPhase::Completed {
            c.2 += pods
                .iter()
                .filter(|p| !is_bound(p) && !is_finished(p))
                .count();
            let created = created_s(&pg.metadata).unwrap_or(i64::MAX);
            sections
                .entry(pg.spec.queue().to_string())
                .or_default()
                .push((!is_waiting(&phase), created, gang_row(pg, pods, view.now_s)));
        }
    }

    let mut queues: Vec<QueueRow> = view
        .queues
        .iter()
        .map(|q| {
            let name = q.metadata.name.clone().unwrap_or_default();
            let (running_gangs, waiting_gangs, waiting_pods) =
                counts.get(&name).copied().unwrap_or_default();
            let figures = view.figures.and_then(|f| f.queues.get(&name));
            let allocated = match figures {
                Some(r) => resources(&r.allocated),
                None => q
                    .status
                    .as_ref()
                    .and_then(|s| s.allocated.as_ref())
                    .map_or_else(
                        || "—".to_string(),
                        |l| resources(&Resource::from_list(l.iter())),
                    ),
            };
            QueueRow {
                state: q
                    .status
                    .as_ref()
                    .and_then(|s| s.state.as_ref())
                    .map_or("Open", |s| s.as_str())
                    .to_string(),
                weight: q.spec.weight.unwrap_or(1),
                parent: q.spec.parent.clone().unwrap_or_default(),
                deserved: figures.map_or_else(|| "—".to_string(), |r| resources(&r.deserved)),
                allocated,
                running_gangs,
                waiting_gangs,
                waiting_pods,
                name,
            }
        })
        .collect();
    queues.sort_by(|a, b| a.name.cmp(&b.name));

    let figures_note = match view.figures {
        Some(f) => format!(
            "Deserved and allocated as the scheduling session {} ago computed them.",
            age(view.now_s - f.at_ms.div_euclid(1000))
        ),
        None => "No scheduling session has run on this replica (sessions run on the leader): \
                 allocated is the queues' status, deserved is not known here."
            .to_string(),
    };

    Overview {
        queues,
        figures_note,
        sections: sections
            .into_iter()
            .map(|(queue, mut gangs)| {
                gangs.sort_by(|a, b| {
                    (a.0, a.1, &a.2.namespace, &a.2.name).cmp(&(
                        b.0,
                        b.1,
                        &b.2.namespace,
                        &b.2.name,
                    ))
                });
                QueueSection {
                    queue,
                    gangs: gangs.into_iter().map(|(_, _, g)| g).collect(),
                }
            })
            .collect(),
    }
}

/// One gang's page, or `None` when no PodGroup has that namespace and name.
pub fn gang_page(view: &View<'_>, namespace: &str, name: &str) -> Option<GangPage> {
    let pg = view.pod_groups.iter().find(|pg| {
        pg.metadata.namespace.as_deref() == Some(namespace)
            && pg.metadata.name.as_deref() == Some(name)
    })?;
    let by_gang = pods_by_gang(&view.pods);
    let pods = by_gang.get(&(namespace, name)).cloned().unwrap_or_default();
    let mut rows: Vec<PodRow> = pods
        .iter()
        .map(|p| {
            let gated = p
                .spec
                .as_ref()
                .and_then(|s| s.scheduling_gates.as_ref())
                .is_some_and(|g| !g.is_empty());
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Pending".into());
            PodRow {
                name: p.metadata.name.clone().unwrap_or_default(),
                task: p
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(keys::TASK_SPEC))
                    .cloned()
                    .unwrap_or_default(),
                phase: if gated && phase == "Pending" {
                    "Pending (gated)".into()
                } else {
                    phase
                },
                node: p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                age: created_s(&p.metadata).map_or_else(String::new, |t| age(view.now_s - t)),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    Some(GangPage {
        gang: gang_row(pg, &pods, view.now_s),
        pods: rows,
    })
}
