//! The answer: the scenario played with every tried job, and once without each of them (what
//! a tried job delays is the difference), as rows for a table or JSON.

use serde::{Deserialize, Serialize};

use super::translate::{JobRole, Translated, translate};
use super::{ClusterState, Options, WhatIfError};
use crate::sim::Sim;
use tephra_api::Job;

/// What one job of interest (a tried one, or one already waiting in the cluster) would do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobPrediction {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its queue.
    pub queue: String,
    /// One of the jobs to try (else it was already waiting in the cluster).
    pub tried: bool,
    /// Seconds from now until its queue admits it (its PodGroup leaves Pending); `None` when
    /// not within the horizon.
    pub admitted_after_seconds: Option<i64>,
    /// Seconds from now until its `minAvailable` pods run; `None` when not within the horizon.
    pub start_after_seconds: Option<i64>,
    /// Seconds from now until its last pod ends; `None` when not within the horizon (or its
    /// pods have no known run time).
    pub finish_after_seconds: Option<i64>,
    /// What it waits for, as a sentence: the scheduler's own reason (its PodGroup's
    /// `Unschedulable` message), and what makes room for it.
    pub waits_for: String,
    /// The jobs a tried job makes start later (empty for the others).
    pub delays: Vec<Delay>,
}

/// A job that starts later because a tried job is there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delay {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// By how many seconds; `None` when it no longer starts within the horizon.
    pub by_seconds: Option<i64>,
}

/// The whole answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// The tried jobs (in the order given), then the jobs already waiting (oldest first).
    pub jobs: Vec<JobPrediction>,
    /// What the simulation left out, one sentence each.
    pub notes: Vec<String>,
    /// The horizon, seconds.
    pub horizon_seconds: i64,
}

/// What happened to one job of a run.
#[derive(Clone, Debug, Default)]
struct Played {
    admitted_ms: Option<i64>,
    started_ms: Option<i64>,
    finished_ms: Option<i64>,
    waiting: Vec<(i64, String)>,
    /// Jobs whose pods ended shortly before it started (they made room).
    room_from: Vec<String>,
}

/// Plays a scenario to its horizon.
fn play(t: &Translated) -> Result<Vec<Played>, WhatIfError> {
    let mut sim = Sim::new(t.scenario.clone())?;
    while sim.next_session().is_some() {}
    let period = t.scenario.period_ms;
    let until = t.scenario.until_ms;
    let played = sim
        .jobs
        .iter()
        .enumerate()
        .map(|(j, job)| {
            let mut room_from: Vec<String> = Vec::new();
            if let Some(start) = job.started_ms.filter(|s| *s > 0) {
                // A start follows the event that made room within a session or two.
                for i in &sim.intervals {
                    if i.job != j
                        && i.to_ms < until
                        && i.to_ms <= start
                        && i.to_ms >= start - 2 * period - 100
                    {
                        let id = sim.jobs[i.job].id.clone();
                        if !room_from.contains(&id) {
                            room_from.push(id);
                        }
                    }
                }
            }
            Played {
                admitted_ms: job.admitted_ms,
                started_ms: job.started_ms,
                finished_ms: job.finished_ms,
                waiting: job.waiting.clone(),
                room_from,
            }
        })
        .collect();
    Ok(played)
}

/// Whole seconds from simulated ms.
fn secs(ms: i64) -> i64 {
    (ms as f64 / 1000.0).round() as i64
}

/// Predicts, for every tried job and every job already waiting, when it is admitted, starts
/// and finishes, what it waits for, and (for a tried job) which jobs it delays: a job it
/// delays starts later with every tried job than with every tried job but this one.
pub fn predict(
    state: &ClusterState,
    tried: &[Job],
    opts: &Options,
) -> Result<Prediction, WhatIfError> {
    let full = translate(state, tried, opts)?;
    let played = play(&full)?;
    let key = |j: &crate::sim::scenario::JobSpec| (j.namespace().to_string(), j.name.clone());

    let mut delays: Vec<Vec<Delay>> = vec![Vec::new(); tried.len()];
    for (k, out) in delays.iter_mut().enumerate() {
        let rest: Vec<Job> = tried
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != k)
            .map(|(_, j)| j.clone())
            .collect();
        let base = translate(state, &rest, opts)?;
        let base_played = play(&base)?;
        for (bj, b) in base.scenario.jobs.iter().zip(&base_played) {
            let Some(fi) = full.scenario.jobs.iter().position(|j| key(j) == key(bj)) else {
                continue;
            };
            let by = match (b.started_ms.map(secs), played[fi].started_ms.map(secs)) {
                (Some(before), Some(after)) if after > before => Some(after - before),
                (Some(_), None) => None,
                _ => continue,
            };
            out.push(Delay {
                name: bj.name.clone(),
                namespace: bj.namespace().to_string(),
                by_seconds: by,
            });
        }
    }

    let horizon_seconds = secs(full.scenario.until_ms);
    let mut rows = Vec::new();
    let mut tried_seen = 0;
    for ((spec, role), p) in full.scenario.jobs.iter().zip(&full.roles).zip(&played) {
        if *role == JobRole::Running {
            continue;
        }
        let job_delays = if *role == JobRole::Tried {
            tried_seen += 1;
            std::mem::take(&mut delays[tried_seen - 1])
        } else {
            Vec::new()
        };
        let start = p.started_ms.map(secs);
        rows.push((
            *role,
            spec.arrival_ms,
            JobPrediction {
                name: spec.name.clone(),
                namespace: spec.namespace().to_string(),
                queue: spec.queue.clone().unwrap_or_else(|| "default".into()),
                tried: *role == JobRole::Tried,
                admitted_after_seconds: p.admitted_ms.map(secs),
                start_after_seconds: start,
                finish_after_seconds: p.finished_ms.map(secs),
                waits_for: waits_for(p, start, horizon_seconds, || {
                    cluster_reason(state, spec.namespace(), &spec.name)
                }),
                delays: job_delays,
            },
        ));
    }
    // Tried jobs first (in the order given), then the waiting ones, oldest first.
    rows.sort_by_key(|(role, arrival, _)| (*role != JobRole::Tried, *arrival));
    Ok(Prediction {
        jobs: rows.into_iter().map(|(_, _, r)| r).collect(),
        notes: full.notes,
        horizon_seconds,
    })
}

/// The reason the cluster's own PodGroup of a vcJob gives now (its `Unschedulable`
/// message), for a job the simulation gave none.
fn cluster_reason(state: &ClusterState, namespace: &str, job: &str) -> Option<String> {
    state
        .pod_groups
        .iter()
        .filter(|pg| pg.metadata.namespace.as_deref().unwrap_or("default") == namespace)
        .find(|pg| {
            pg.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "Job" && o.name == job)
        })
        .and_then(|pg| pg.status.as_ref())
        .and_then(crate::outcome::unschedulable_message)
        .map(str::to_string)
}

/// The sentence of what a job waits for; `now` is the cluster's own reason, asked for only
/// when the simulation wrote none.
fn waits_for(
    p: &Played,
    start: Option<i64>,
    horizon_seconds: i64,
    now: impl FnOnce() -> Option<String>,
) -> String {
    let room = (!p.room_from.is_empty())
        .then(|| format!("it starts once pods of {} end", p.room_from.join(", ")));
    match (start, p.waiting.first(), room) {
        (Some(0), _, _) => "nothing: it starts at once".into(),
        (Some(_), Some((_, m)), Some(room)) => format!("{m}; {room}"),
        (Some(_), Some((_, m)), None) => m.clone(),
        (Some(_), None, Some(room)) => format!("room on the nodes: {room}"),
        (Some(_), None, None) => "its turn in the queue".into(),
        (None, _, _) => {
            let why = p
                .waiting
                .last()
                .map(|(_, m)| m.clone())
                .or_else(now)
                .unwrap_or_else(|| "no room for its gang".into());
            format!("{why} (not started within {})", duration(horizon_seconds))
        }
    }
}

/// `45s`, `5m10s`, `2h3m`, `1d2h`.
fn duration(s: i64) -> String {
    let (d, h, m, sec) = (s / 86400, s % 86400 / 3600, s % 3600 / 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) if sec == 0 => format!("{m}m"),
        (0, 0, _) => format!("{m}m{sec}s"),
        (0, _, 0) => format!("{h}h"),
        (0, _, _) => format!("{h}h{m}m"),
        (_, 0, _) => format!("{d}d"),
        _ => format!("{d}d{h}h"),
    }
}

/// A time from now as the table shows it.
fn when(s: Option<i64>) -> String {
    match s {
        None => "never".into(),
        Some(0) => "now".into(),
        Some(s) => format!("in {}", duration(s)),
    }
}

/// The prediction as a table (NAMESPACE NAME QUEUE JOB ADMITTED START FINISH DELAYS
/// WAITS-FOR), in kubectl's layout; "never" means not within the horizon.
pub fn table(p: &Prediction) -> String {
    let header = [
        "NAMESPACE",
        "NAME",
        "QUEUE",
        "JOB",
        "ADMITTED",
        "START",
        "FINISH",
        "DELAYS",
        "WAITS-FOR",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for j in &p.jobs {
        let delays = if j.delays.is_empty() {
            "-".to_string()
        } else {
            j.delays
                .iter()
                .map(|d| match d.by_seconds {
                    Some(s) => format!("{}/{} +{}", d.namespace, d.name, duration(s)),
                    None => format!("{}/{} never", d.namespace, d.name),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        rows.push(vec![
            j.namespace.clone(),
            j.name.clone(),
            j.queue.clone(),
            if j.tried { "tried" } else { "waiting" }.into(),
            when(j.admitted_after_seconds),
            when(j.start_after_seconds),
            when(j.finish_after_seconds),
            delays,
            j.waits_for.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 3));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
