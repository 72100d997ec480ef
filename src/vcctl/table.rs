//! What `tephra job|queue|pg` print, as pure functions of typed objects and a clock: tables in
//! kubectl's layout, the text of `job view`, and the lines of `job view --watch`.
//!
//! Nothing here talks to a cluster, so every form is unit-tested from objects built in memory.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::batch::JobPhase;
use crate::api::{Job, PodGroup, Queue, ResourceList};

/// Spaces between two columns (kubectl's tabwriter padding).
const PADDING: usize = 3;

/// What kubectl prints for a missing value.
const NONE: &str = "<none>";

/// A table in kubectl's layout: upper-case headers, each column as wide as its widest cell,
/// columns three spaces apart, no trailing spaces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these headers.
    pub fn new<S: AsRef<str>>(headers: &[S]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.as_ref().to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are empty, extra cells are dropped.
    pub fn push(&mut self, mut row: Vec<String>) {
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows (without the header).
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// The table as text, one line per row after the header line, each line ending in `\n`.
    pub fn render(&self) -> String {
        self.render_indented("")
    }

    /// As [`Table::render`], every line starting with `indent`.
    pub fn render_indented(&self, indent: &str) -> String {
        let widths = self.widths();
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            out.push_str(indent);
            out.push_str(&pad_row(row, &widths));
            out.push('\n');
        }
        out
    }

    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        widths
    }
}

/// One line of cells padded to `widths`, the last cell unpadded.
fn pad_row(row: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (i, cell) in row.iter().enumerate() {
        line.push_str(cell);
        if i + 1 < row.len() {
            let fill = widths[i].saturating_sub(cell.chars().count()) + PADDING;
            line.extend(std::iter::repeat_n(' ', fill));
        }
    }
    line.trim_end().to_string()
}

/// A duration in kubectl's short form (`45s`, `3m20s`, `5h`, `2d3h`), as `kubectl get` prints
/// ages; negative durations within a second of now are `0s` (clock skew).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    let y = d / 365;
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => match s % 60 {
            0 => format!("{m}m"),
            r => format!("{m}m{r}s"),
        },
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            r => format!("{h}h{r}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => match h % 24 {
            0 => format!("{d}d"),
            r => format!("{d}d{r}h"),
        },
        _ if y < 2 => format!("{d}d"),
        _ if y < 8 => match d % 365 {
            0 => format!("{y}y"),
            r => format!("{y}y{r}d"),
        },
        _ => format!("{y}y"),
    }
}

/// How long ago `t` was, in [`human_duration`]'s form; `<unknown>` without a time.
pub fn age(t: Option<&Time>, now: Timestamp) -> String {
    match t {
        Some(t) => human_duration(now.as_second() - t.0.as_second()),
        None => "<unknown>".into(),
    }
}

fn created(meta: &ObjectMeta, now: Timestamp) -> String {
    age(meta.creation_timestamp.as_ref(), now)
}

fn num(n: Option<i32>) -> String {
    n.unwrap_or(0).to_string()
}

fn or_none(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => NONE.into(),
    }
}

/// `cpu=4,memory=8Gi`, keys sorted; `<none>` when empty.
fn resources(list: Option<&ResourceList>) -> String {
    match list {
        Some(l) if !l.is_empty() => l
            .iter()
            .map(|(k, v)| format!("{k}={}", v.0))
            .collect::<Vec<_>>()
            .join(","),
        _ => NONE.into(),
    }
}

/// How a list is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// `-o wide`: extra columns at the end.
    pub wide: bool,
    /// `-A`: a NAMESPACE column first.
    pub all_namespaces: bool,
}

fn headers(layout: Layout, base: &[&str], wide: &[&str]) -> Vec<String> {
    let mut h = Vec::new();
    if layout.all_namespaces {
        h.push("NAMESPACE".to_string());
    }
    h.extend(base.iter().map(|s| s.to_string()));
    if layout.wide {
        h.extend(wide.iter().map(|s| s.to_string()));
    }
    h
}

fn row(layout: Layout, meta: &ObjectMeta, base: Vec<String>, wide: Vec<String>) -> Vec<String> {
    let mut r = Vec::new();
    if layout.all_namespaces {
        r.push(meta.namespace.clone().unwrap_or_default());
    }
    r.extend(base);
    if layout.wide {
        r.extend(wide);
    }
    r
}

/// The phase of a job as printed (`Pending` before the controller has written one).
pub fn job_phase(job: &Job) -> JobPhase {
    job.status
        .as_ref()
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

/// The sum of the replicas of every task.
fn replicas(job: &Job) -> i32 {
    job.spec.tasks().iter().filter_map(|t| t.replicas).sum()
}

/// `tephra job list`: NAME, PHASE, the gang's minimum, the pod counts, retries, age; `-o wide`
/// adds the queue, the replicas and the reason of the last phase change.
pub fn jobs_table(jobs: &[Job], layout: Layout, now: Timestamp) -> Table {
    let mut t = Table::new(&headers(
        layout,
        &[
            "NAME",
            "PHASE",
            "MIN",
            "PENDING",
            "RUNNING",
            "SUCCEEDED",
            "FAILED",
            "RETRIES",
            "AGE",
        ],
        &["QUEUE", "REPLICAS", "UNKNOWN", "TERMINATING", "REASON"],
    ));
    for job in jobs {
        let st = job.status.clone().unwrap_or_default();
        let min = st.min_available.or(job.spec.min_available);
        let reason = st.state.as_ref().and_then(|s| s.reason.as_deref());
        t.push(row(
            layout,
            &job.metadata,
            vec![
                job.metadata.name.clone().unwrap_or_default(),
                job_phase(job).to_string(),
                num(min),
                num(st.pending),
                num(st.running),
                num(st.succeeded),
                num(st.failed),
                num(st.retry_count),
                created(&job.metadata, now),
            ],
            vec![
                job.spec.queue().to_string(),
                replicas(job).to_string(),
                num(st.unknown),
                num(st.terminating),
                or_none(reason),
            ],
        ));
    }
    t
}

/// `tephra queue list|get`: NAME, STATE, WEIGHT, PARENT, the PodGroup counts, age; `-o wide`
/// adds capability, allocated resources and whether the queue's resources can be reclaimed.
pub fn queues_table(queues: &[Queue], wide: bool, now: Timestamp) -> Table {
    let layout = Layout {
        wide,
        all_namespaces: false,
    };
    let mut t = Table::new(&headers(
        layout,
        &[
            "NAME",
            "STATE",
            "WEIGHT",
            "PARENT",
            "INQUEUE",
            "PENDING",
            "RUNNING",
            "UNKNOWN",
            "COMPLETED",
            "AGE",
        ],
        &["CAPABILITY", "ALLOCATED", "RECLAIMABLE"],
    ));
    for q in queues {
        let st = q.status.clone().unwrap_or_default();
        t.push(row(
            layout,
            &q.metadata,
            vec![
                q.metadata.name.clone().unwrap_or_default(),
                st.state.map_or_else(|| "Unknown".into(), |s| s.to_string()),
                num(q.spec.weight),
                or_none(q.spec.parent.as_deref()),
                num(st.inqueue),
                num(st.pending),
                num(st.running),
                num(st.unknown),
                num(st.completed),
                created(&q.metadata, now),
            ],
            vec![
                resources(q.spec.capability.as_ref()),
                resources(st.allocated.as_ref()),
                q.spec.reclaimable.unwrap_or(true).to_string(),
            ],
        ));
    }
    t
}

/// The condition of a PodGroup that explains its phase: the newest `True` one (later in the
/// list on a tie), as Volcano's Job controller reads it. `(reason, message)`.
pub fn podgroup_reason(pg: &PodGroup) -> Option<(String, String)> {
    let conds = pg.status.as_ref()?.conditions.as_ref()?;
    let pick = conds
        .iter()
        .filter(|c| c.status.as_deref() == Some("True"))
        .max_by_key(|c| c.last_transition_time.as_ref().map(|t| t.0))?;
    let kind = pick
        .type_
        .as_ref()
        .map(|t| t.to_string())
        .unwrap_or_default();
    Some((
        pick.reason.clone().unwrap_or(kind),
        pick.message.clone().unwrap_or_default(),
    ))
}

/// `tephra pg list`: NAME, PHASE, MINMEMBER, the pod counts, QUEUE, age; `-o wide` adds the
/// reason and message of the condition that explains the phase (why a gang waits).
pub fn podgroups_table(pgs: &[PodGroup], layout: Layout, now: Timestamp) -> Table {
    let mut t = Table::new(&headers(
        layout,
        &[
            "NAME",
            "PHASE",
            "MINMEMBER",
            "RUNNING",
            "SUCCEEDED",
            "FAILED",
            "QUEUE",
            "AGE",
        ],
        &["OWNER", "REASON", "MESSAGE"],
    ));
    for pg in pgs {
        let st = pg.status.clone().unwrap_or_default();
        let (reason, message) = podgroup_reason(pg).unwrap_or_default();
        let owner = pg
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|r| r.controller == Some(true)).or(o.first()))
            .map(|o| format!("{}/{}", o.kind, o.name));
        t.push(row(
            layout,
            &pg.metadata,
            vec![
                pg.metadata.name.clone().unwrap_or_default(),
                pg.phase().to_string(),
                num(pg.spec.min_member),
                num(st.running),
                num(st.succeeded),
                num(st.failed),
                pg.spec.queue.clone().unwrap_or_else(|| "default".into()),
                created(&pg.metadata, now),
            ],
            vec![
                or_none(owner.as_deref()),
                or_none(Some(&reason)),
                or_none(Some(&message)),
            ],
        ));
    }
    t
}

/// The pod count of a task in one pod phase (`Pending`, `Running`, ...).
fn task_count(job: &Job, task: &str, phase: &str) -> i32 {
    job.status
        .as_ref()
        .and_then(|s| s.task_status_count.as_ref())
        .and_then(|m| m.get(task))
        .and_then(|t| t.phase.as_ref())
        .and_then(|p| p.get(phase))
        .copied()
        .unwrap_or(0)
}

/// The pod phases counted per task, in the order printed.
const POD_PHASES: [&str; 4] = ["Pending", "Running", "Succeeded", "Failed"];

/// The per-task table of `job view`: each task's replicas and pods by phase.
pub fn tasks_table(job: &Job) -> Table {
    let mut t = Table::new(&[
        "TASK",
        "REPLICAS",
        "PENDING",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
    ]);
    for task in job.spec.tasks() {
        let name = task.name.clone().unwrap_or_default();
        let mut r = vec![name.clone(), num(task.replicas)];
        r.extend(
            POD_PHASES
                .iter()
                .map(|p| task_count(job, &name, p).to_string()),
        );
        t.push(r);
    }
    t
}

/// One task's pods by phase in a few words: `worker 1 Pending, 2 Running` (`worker 0` when it
/// has no pods).
fn task_summary(job: &Job, task: &str) -> String {
    let counts: BTreeMap<&str, i32> = POD_PHASES
        .iter()
        .map(|p| (*p, task_count(job, task, p)))
        .filter(|(_, n)| *n > 0)
        .collect();
    if counts.is_empty() {
        return format!("{task} 0");
    }
    let parts: Vec<String> = POD_PHASES
        .iter()
        .filter_map(|p| counts.get(p).map(|n| format!("{n} {p}")))
        .collect();
    format!("{task} {}", parts.join(", "))
}

/// Column widths of `job view --watch`: fixed, because rows are printed as they come.
const WATCH_WIDTHS: [usize; 5] = [12, 9, 9, 11, 8];

/// The header line of `job view --watch`.
pub fn watch_header() -> String {
    watch_line(&[
        "PHASE".into(),
        "PENDING".into(),
        "RUNNING".into(),
        "SUCCEEDED".into(),
        "FAILED".into(),
        "TASKS".into(),
    ])
}

/// One line of `job view --watch`: the job's phase, its pod counts and each task's pods by
/// phase. The caller prints it when it differs from the previous one.
pub fn watch_row(job: &Job) -> String {
    let st = job.status.clone().unwrap_or_default();
    let tasks: Vec<String> = job
        .spec
        .tasks()
        .iter()
        .map(|t| task_summary(job, t.name.as_deref().unwrap_or_default()))
        .collect();
    watch_line(&[
        job_phase(job).to_string(),
        num(st.pending),
        num(st.running),
        num(st.succeeded),
        num(st.failed),
        tasks.join("; "),
    ])
}

fn watch_line(cells: &[String]) -> String {
    let mut line = String::new();
    for (i, c) in cells.iter().enumerate() {
        line.push_str(c);
        if let Some(w) = WATCH_WIDTHS.get(i) {
            // A cell wider than its column still gets one space: cells never touch.
            let fill = w.saturating_sub(c.chars().count()).max(1);
            line.extend(std::iter::repeat_n(' ', fill));
        }
    }
    line.trim_end().to_string()
}

/// Whether `job view --watch` stops: the job finished, or rests aborted until resumed.
pub fn watch_done(job: &Job) -> bool {
    let phase = job_phase(job);
    phase.is_finished() || phase == JobPhase::Aborted
}

/// The time an Event last happened (its series' last time, else its event time).
fn event_time(e: &Event) -> Option<Time> {
    e.last_timestamp
        .clone()
        .or_else(|| e.event_time.as_ref().map(|t| Time(t.0)))
        .or_else(|| e.first_timestamp.clone())
        .or_else(|| e.metadata.creation_timestamp.clone())
}

/// An Events section as `kubectl describe` prints it (oldest first), or `Events: <none>`.
pub fn events_section(events: &[Event], now: Timestamp) -> String {
    if events.is_empty() {
        return "Events:  <none>\n".into();
    }
    let mut sorted: Vec<&Event> = events.iter().collect();
    // The event time has microseconds where the series times have only seconds.
    sorted.sort_by_key(|e| {
        e.event_time
            .as_ref()
            .map(|t| t.0)
            .or(event_time(e).map(|t| t.0))
    });
    let mut t = Table::new(&["Type", "Reason", "Age", "From", "Message"]);
    t.push(
        ["----", "------", "----", "----", "-------"]
            .map(String::from)
            .to_vec(),
    );
    for e in sorted {
        let from = e
            .source
            .as_ref()
            .and_then(|s| s.component.clone())
            .or_else(|| e.reporting_component.clone())
            .unwrap_or_default();
        let count = e.count.unwrap_or(1);
        let age = age(event_time(e).as_ref(), now);
        t.push(vec![
            e.type_.clone().unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
            if count > 1 {
                format!("{age} (x{count})")
            } else {
                age
            },
            from,
            e.message.clone().unwrap_or_default().replace('\n', " "),
        ]);
    }
    format!("Events:\n{}", t.render_indented("  "))
}

/// `tephra job view NAME`: what the job is, where it stands and why, its tasks, its PodGroup's
/// explaining condition, and the Events of the job and its PodGroup.
pub fn job_view(job: &Job, pg: Option<&PodGroup>, events: &[Event], now: Timestamp) -> String {
    let st = job.status.clone().unwrap_or_default();
    let state = st.state.clone().unwrap_or_default();
    let created_at = job
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| format!("{} ({} ago)", t.0, age(Some(t), now)))
        .unwrap_or_else(|| "<unknown>".into());
    let mut lines: Vec<(String, String)> = vec![
        ("Name".into(), job.metadata.name.clone().unwrap_or_default()),
        (
            "Namespace".into(),
            job.metadata.namespace.clone().unwrap_or_default(),
        ),
        ("Queue".into(), job.spec.queue().to_string()),
        ("Created".into(), created_at),
        ("Phase".into(), job_phase(job).to_string()),
    ];
    if let Some(r) = state.reason.as_deref().filter(|r| !r.is_empty()) {
        lines.push(("Reason".into(), r.to_string()));
    }
    if let Some(m) = state.message.as_deref().filter(|m| !m.is_empty()) {
        lines.push(("Message".into(), m.to_string()));
    }
    lines.push((
        "Min Available".into(),
        num(st.min_available.or(job.spec.min_available)),
    ));
    lines.push((
        "Retries".into(),
        format!("{}/{}", st.retry_count.unwrap_or(0), job.spec.max_retry()),
    ));
    lines.push((
        "Pods".into(),
        format!(
            "{} Pending, {} Running, {} Succeeded, {} Failed, {} Terminating, {} Unknown",
            num(st.pending),
            num(st.running),
            num(st.succeeded),
            num(st.failed),
            num(st.terminating),
            num(st.unknown)
        ),
    ));
    if let Some(pg) = pg {
        let mut v = format!(
            "{} ({})",
            pg.metadata.name.clone().unwrap_or_default(),
            pg.phase()
        );
        if let Some((reason, message)) = podgroup_reason(pg) {
            v.push_str(&format!(": {reason}"));
            if !message.is_empty() {
                v.push_str(&format!(": {message}"));
            }
        }
        lines.push(("PodGroup".into(), v));
    }
    let key_width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (k, v) in &lines {
        out.push_str(&format!("{:<w$} {v}\n", format!("{k}:"), w = key_width));
    }
    out.push_str("Tasks:\n");
    out.push_str(&tasks_table(job).render_indented("  "));
    out.push_str(&events_section(events, now));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::batch::{JobState, TaskState};
    use crate::api::scheduling::{
        PodGroupCondition, PodGroupConditionType, PodGroupPhase, QueueState, QueueStatus,
    };
    use k8s_openapi::api::core::v1::EventSource;

    fn now() -> Timestamp {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    fn ago(secs: i64) -> Time {
        Time(
            now()
                .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
                .unwrap(),
        )
    }

    fn job(name: &str, phase: JobPhase, secs_ago: i64) -> Job {
        let mut j = Job::test(name)
            .task("master", 1)
            .task("worker", 2)
            .min_available(3)
            .with_phase(phase);
        j.metadata.creation_timestamp = Some(ago(secs_ago));
        j
    }

    fn counts(pairs: &[(&str, &[(&str, i32)])]) -> BTreeMap<String, TaskState> {
        pairs
            .iter()
            .map(|(t, p)| {
                (
                    t.to_string(),
                    TaskState {
                        phase: Some(p.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn human_durations_match_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 120, "3h2m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (50 * 3600, "2d2h"),
            (8 * 86_400, "8d"),
            (800 * 86_400, "2y70d"),
            (3000 * 86_400, "8y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn table_pads_columns_three_spaces_and_trims_the_end() {
        let mut t = Table::new(&["NAME", "X"]);
        t.push(vec!["a-long-name".into(), "1".into()]);
        t.push(vec!["b".into(), String::new()]);
        assert_eq!(t.render(), "NAME          X\na-long-name   1\nb\n");
    }

    #[test]
    fn job_list_is_a_kubectl_table() {
        let mut running = job("train", JobPhase::Running, 90);
        running.status.as_mut().unwrap().running = Some(3);
        running.status.as_mut().unwrap().retry_count = Some(1);
        let pending = job("queued-long-name", JobPhase::Pending, 4000);
        let t = jobs_table(&[running, pending], Layout::default(), now());
        assert_eq!(
            t.render(),
            "NAME               PHASE     MIN   PENDING   RUNNING   SUCCEEDED   FAILED   RETRIES   AGE\n\
             train              Running   3     0         3         0           0        1         90s\n\
             queued-long-name   Pending   3     0         0         0           0        0         66m\n"
        );
    }

    #[test]
    fn job_list_wide_and_all_namespaces_add_columns() {
        let mut j = job("train", JobPhase::Aborted, 10)
            .in_namespace("team-a")
            .in_queue("q1");
        j.status.as_mut().unwrap().state.as_mut().unwrap().reason = Some("AbortJob".into());
        let t = jobs_table(
            &[j],
            Layout {
                wide: true,
                all_namespaces: true,
            },
            now(),
        );
        let text = t.render();
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "NAMESPACE   NAME    PHASE     MIN   PENDING   RUNNING   SUCCEEDED   FAILED   RETRIES   AGE   QUEUE   REPLICAS   UNKNOWN   TERMINATING   REASON"
        );
        assert_eq!(
            lines.next().unwrap(),
            "team-a      train   Aborted   3     0         0         0           0        0         10s   q1      3          0         0             AbortJob"
        );
    }

    #[test]
    fn a_job_without_status_is_pending_with_zero_counts() {
        let mut j = Job::test("fresh").task("t", 2);
        j.metadata.creation_timestamp = None;
        let t = jobs_table(&[j], Layout::default(), now());
        assert_eq!(
            t.rows()[0],
            [
                "fresh",
                "Pending",
                "0",
                "0",
                "0",
                "0",
                "0",
                "0",
                "<unknown>"
            ]
        );
    }

    #[test]
    fn queue_table_shows_state_weight_parent_and_counts() {
        let mut q = Queue::test("research").weight(4).parent("root");
        q.metadata.creation_timestamp = Some(ago(30));
        q.status = Some(QueueStatus {
            state: Some(QueueState::Closed),
            running: Some(2),
            inqueue: Some(1),
            ..QueueStatus::default()
        });
        let mut root = Queue::test("root");
        root.spec.parent = None;
        root.metadata.creation_timestamp = Some(ago(30));
        let t = queues_table(&[root, q], false, now());
        assert_eq!(
            t.render(),
            "NAME       STATE     WEIGHT   PARENT   INQUEUE   PENDING   RUNNING   UNKNOWN   COMPLETED   AGE\n\
             root       Unknown   1        <none>   0         0         0         0         0           30s\n\
             research   Closed    4        root     1         0         2         0         0           30s\n"
        );
    }

    #[test]
    fn queue_wide_shows_capability() {
        let mut q = Queue::test("q").capability(&[("memory", "8Gi"), ("cpu", "4")]);
        q.metadata.creation_timestamp = Some(ago(1));
        let t = queues_table(&[q], true, now());
        let row = &t.rows()[0];
        assert_eq!(row[row.len() - 3], "cpu=4,memory=8Gi");
        assert_eq!(row[row.len() - 2], "<none>");
        assert_eq!(row[row.len() - 1], "true");
    }

    fn waiting_pg() -> PodGroup {
        let mut pg = PodGroup::test("train-1234")
            .min_member(3)
            .in_queue("q1")
            .with_phase(PodGroupPhase::Pending);
        pg.metadata.creation_timestamp = Some(ago(5));
        pg.status.get_or_insert_default().conditions = Some(vec![
            PodGroupCondition {
                type_: Some(PodGroupConditionType::from("Scheduled")),
                status: Some("False".into()),
                reason: Some("Old".into()),
                ..Default::default()
            },
            PodGroupCondition {
                type_: Some(PodGroupConditionType::from("Unschedulable")),
                status: Some("True".into()),
                reason: Some("NotEnoughResources".into()),
                message: Some("3/3 tasks in gang unschedulable: 3 Insufficient cpu".into()),
                ..Default::default()
            },
        ]);
        pg
    }

    #[test]
    fn podgroup_table_and_its_wide_reason() {
        let pg = waiting_pg();
        assert_eq!(
            podgroups_table(std::slice::from_ref(&pg), Layout::default(), now()).render(),
            "NAME         PHASE     MINMEMBER   RUNNING   SUCCEEDED   FAILED   QUEUE   AGE\n\
             train-1234   Pending   3           0         0           0        q1      5s\n"
        );
        let wide = podgroups_table(
            &[pg],
            Layout {
                wide: true,
                all_namespaces: false,
            },
            now(),
        );
        let row = &wide.rows()[0];
        assert_eq!(row[8], "<none>");
        assert_eq!(row[9], "NotEnoughResources");
        assert_eq!(
            row[10],
            "3/3 tasks in gang unschedulable: 3 Insufficient cpu"
        );
    }

    #[test]
    fn tasks_table_counts_pods_per_phase() {
        let mut j = job("train", JobPhase::Running, 5);
        j.status.as_mut().unwrap().task_status_count = Some(counts(&[
            ("master", &[("Running", 1)]),
            ("worker", &[("Running", 1), ("Pending", 1)]),
        ]));
        assert_eq!(
            tasks_table(&j).render(),
            "TASK     REPLICAS   PENDING   RUNNING   SUCCEEDED   FAILED\n\
             master   1          0         1         0           0\n\
             worker   2          1         1         0           0\n"
        );
    }

    #[test]
    fn watch_rows_follow_phase_and_task_counts() {
        let mut j = job("train", JobPhase::Running, 5);
        j.status.as_mut().unwrap().running = Some(2);
        j.status.as_mut().unwrap().pending = Some(1);
        j.status.as_mut().unwrap().task_status_count = Some(counts(&[
            ("master", &[("Running", 1)]),
            ("worker", &[("Running", 1), ("Pending", 1)]),
        ]));
        assert_eq!(
            watch_header(),
            "PHASE       PENDING  RUNNING  SUCCEEDED  FAILED  TASKS"
        );
        assert_eq!(
            watch_row(&j),
            "Running     1        2        0          0       master 1 Running; worker 1 Pending, 1 Running"
        );
        let fresh = Job::test("x").task("t", 1);
        assert_eq!(
            watch_row(&fresh),
            "Pending     0        0        0          0       t 0"
        );
        let mut long = Job::test("x").with_phase(JobPhase::Completing);
        long.status.as_mut().unwrap().pending = Some(123_456_789);
        assert!(
            watch_row(&long).starts_with("Completing  123456789 0"),
            "{}",
            watch_row(&long)
        );
    }

    #[test]
    fn watch_stops_on_finished_and_aborted_only() {
        for (phase, done) in [
            (JobPhase::Pending, false),
            (JobPhase::Running, false),
            (JobPhase::Aborting, false),
            (JobPhase::Aborted, true),
            (JobPhase::Completed, true),
            (JobPhase::Failed, true),
            (JobPhase::Terminated, true),
        ] {
            assert_eq!(
                watch_done(&Job::test("j").with_phase(phase.clone())),
                done,
                "{phase}"
            );
        }
    }

    fn event(reason: &str, message: &str, secs_ago: i64, count: i32) -> Event {
        Event {
            type_: Some("Warning".into()),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_timestamp: Some(ago(secs_ago)),
            count: Some(count),
            source: Some(EventSource {
                component: Some("tephra-scheduler".into()),
                host: None,
            }),
            ..Event::default()
        }
    }

    #[test]
    fn job_view_explains_where_the_job_stands() {
        let mut j = job("train", JobPhase::Pending, 65);
        let st = j.status.as_mut().unwrap();
        st.state = Some(JobState {
            phase: Some(JobPhase::Pending),
            reason: Some("PodGroupPending".into()),
            message: Some("waiting for resources".into()),
            ..JobState::default()
        });
        st.pending = Some(3);
        let events = vec![
            event(
                "Unschedulable",
                "3/3 tasks in gang unschedulable: 3 Insufficient cpu",
                3,
                2,
            ),
            event(
                "PodGroupPending",
                "PodGroup default/train-1234 created",
                60,
                1,
            ),
        ];
        let text = job_view(&j, Some(&waiting_pg()), &events, now());
        assert_eq!(
            text,
            "Name:          train\n\
             Namespace:     default\n\
             Queue:         default\n\
             Created:       2026-11-30T11:58:55Z (65s ago)\n\
             Phase:         Pending\n\
             Reason:        PodGroupPending\n\
             Message:       waiting for resources\n\
             Min Available: 3\n\
             Retries:       0/3\n\
             Pods:          3 Pending, 0 Running, 0 Succeeded, 0 Failed, 0 Terminating, 0 Unknown\n\
             PodGroup:      train-1234 (Pending): NotEnoughResources: 3/3 tasks in gang unschedulable: 3 Insufficient cpu\n\
             Tasks:\n\
             \x20 TASK     REPLICAS   PENDING   RUNNING   SUCCEEDED   FAILED\n\
             \x20 master   1          0         0         0           0\n\
             \x20 worker   2          0         0         0           0\n\
             Events:\n\
             \x20 Type      Reason            Age       From               Message\n\
             \x20 ----      ------            ----      ----               -------\n\
             \x20 Warning   PodGroupPending   60s       tephra-scheduler   PodGroup default/train-1234 created\n\
             \x20 Warning   Unschedulable     3s (x2)   tephra-scheduler   3/3 tasks in gang unschedulable: 3 Insufficient cpu\n"
        );
        assert!(job_view(&j, None, &[], now()).ends_with("Events:  <none>\n"));
    }
}
