//! One sync of a CronJob, decided from the CronJob, the vcJobs it controls and the time.
//!
//! The rules are Kubernetes' CronJob controller (v2) as Volcano's CronJob controller
//! follows it:
//! 1. finished jobs leave `status.active`; the latest completion time of a Completed job is
//!    `status.lastSuccessfulTime`; the oldest finished jobs beyond the history limits
//!    (successful 3, failed 1 by default) are deleted;
//! 2. `status.active` entries whose job is gone are dropped;
//! 3. a suspended CronJob, or one whose schedule or time zone does not parse, starts nothing;
//! 4. the most recent schedule time at or before now, counted from `status.lastScheduleTime`
//!    (else the CronJob's creation) or from `now - startingDeadlineSeconds` if later, is the
//!    run that is due; more than 100 of them missed is reported, and only the latest runs;
//! 5. a run whose deadline has passed, or that was already started, starts nothing;
//!    `Forbid` skips it while a job is active, `Replace` deletes the active jobs first;
//! 6. the job is named `<cronjob>-<scheduled time in minutes since the epoch>`, carries the
//!    template's labels and annotations, the scheduled time (RFC 3339, in the schedule's
//!    zone) in `volcano.sh/cronjob-scheduled-timestamp` and the CronJob as its controller;
//! 7. the CronJob is looked at again just after its next schedule time.
//!
//! A vcJob is finished in phase Completed (a success), Failed, Terminated or Aborted (the
//! last three count against `failedJobsHistoryLimit`).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use tephra_api::batch::{API_VERSION, ConcurrencyPolicy, CronJob, CronJobStatus, Job, JobPhase};
use tephra_api::events::EventType;
use tephra_api::keys::CRONJOB_SCHEDULED_TIMESTAMP;

use super::schedule::{self, Schedule};

/// More missed runs than this are reported with a `TooManyMissedTimes` warning.
pub const MANY_MISSED: i64 = 100;

/// How long after a schedule time the CronJob is looked at again (Kubernetes: 100 ms).
pub const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// An Event to record on the CronJob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// Kubernetes' / Volcano's reason (`SuccessfulCreate`, `MissSchedule`, ...).
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// A job to delete: by name, with the uid as a precondition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobToDelete {
    /// The job's name.
    pub name: String,
    /// The job's uid, if known.
    pub uid: Option<String>,
    /// Why: a history limit (`SuccessfulDelete` is recorded after) or `Replace`.
    pub replaced: bool,
}

/// What one sync of a CronJob does, in order: delete, create, write status, requeue.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Jobs to delete (history beyond the limits, active jobs replaced).
    pub delete: Vec<JobToDelete>,
    /// The job to create and its scheduled time. On success the caller adds it to
    /// `status.active` and sets `lastScheduleTime` with [`record_created`].
    pub create: Option<(Job, Timestamp)>,
    /// The status after the deletions (without the job to create).
    pub status: CronJobStatus,
    /// Events to record, in order.
    pub events: Vec<PlannedEvent>,
    /// Look at the CronJob again after this long (`None`: only when something changes).
    pub requeue_after: Option<Duration>,
}

impl Plan {
    fn event(&mut self, type_: EventType, reason: &'static str, message: String) {
        self.events.push(PlannedEvent {
            type_,
            reason,
            message,
        });
    }
}

/// True once a vcJob reached a phase it does not leave by itself.
pub fn finished(job: &Job) -> bool {
    matches!(
        job.phase(),
        Some(JobPhase::Completed | JobPhase::Failed | JobPhase::Terminated | JobPhase::Aborted)
    )
}

/// The name of the job for the run due at `scheduled`: minutes since the epoch, as Kubernetes
/// and Volcano name them (two runs within a minute, possible with `@every`, share a name).
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// The schedule of `cj` with its zone, or the Event explaining why there is none.
pub fn schedule_of(cj: &CronJob) -> Result<Schedule, PlannedEvent> {
    if let Some(tz) = cj.spec.time_zone.as_deref()
        && let Err(e) = schedule::zone(tz)
    {
        return Err(PlannedEvent {
            type_: EventType::Warning,
            reason: "UnknownTimeZone",
            message: format!("invalid timeZone: {tz:?}: {e}"),
        });
    }
    schedule::parse(&cj.spec.schedule, cj.spec.time_zone.as_deref()).map_err(|e| PlannedEvent {
        type_: EventType::Warning,
        reason: "InvalidSchedule",
        message: format!("invalid schedule: {:?}: {e}", cj.spec.schedule),
    })
}

/// The missed runs between the earliest time counted and `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Missed {
    /// The most recent schedule time at or before `now`, if any.
    pub latest: Option<Timestamp>,
    /// How many were missed (at least the count, an estimate past [`MANY_MISSED`]).
    pub count: i64,
}

/// The earliest time counted: the last schedule time, else the creation; with a deadline,
/// no earlier than `now - startingDeadlineSeconds`.
fn earliest(cj: &CronJob, now: Timestamp, with_deadline: bool) -> Timestamp {
    let status = cj.status.as_ref();
    let mut earliest = status
        .and_then(|s| s.last_schedule_time.as_ref())
        .or(cj.metadata.creation_timestamp.as_ref())
        .map(|t| t.0)
        .unwrap_or(now);
    if with_deadline && let Some(d) = cj.spec.starting_deadline_seconds {
        let deadline = Timestamp::from_second(now.as_second().saturating_sub(d)).unwrap_or(now);
        if deadline > earliest {
            earliest = deadline;
        }
    }
    earliest
}

/// The runs due in `(earliest, now]`.
pub fn missed_runs(schedule: &Schedule, earliest: Timestamp, now: Timestamp) -> Missed {
    let none = Missed {
        latest: None,
        count: 0,
    };
    let Some(t1) = schedule.next(earliest) else {
        return none;
    };
    if t1 > now {
        return none;
    }
    let Some(t2) = schedule.next(t1) else {
        return Missed {
            latest: Some(t1),
            count: 1,
        };
    };
    if t2 > now {
        return Missed {
            latest: Some(t1),
            count: 1,
        };
    }
    // Many: estimate the count from the gap between the first two, then walk only the last
    // few (as Kubernetes does), so a long-idle CronJob costs no more than a fresh one.
    let gap = (t2.as_second() - t1.as_second()).max(1);
    let count = (now.as_second() - t1.as_second()) / gap + 1;
    let mut t = Timestamp::from_second(t1.as_second() + (count - 2).max(0) * gap).unwrap_or(t1);
    let mut latest = None;
    let mut steps = 0;
    while let Some(n) = schedule.next(t) {
        if n > now || steps > 10_000 {
            break;
        }
        latest = Some(n);
        t = n;
        steps += 1;
    }
    // The estimate may start past the last run (irregular schedules): walk from t1 then.
    if latest.is_none() {
        let mut t = t1;
        latest = Some(t1);
        while let Some(n) = schedule.next(t) {
            if n > now {
                break;
            }
            latest = Some(n);
            t = n;
        }
    }
    Missed { latest, count }
}

/// How long until just after the next run after the latest one due (or after the earliest
/// time counted when none is due).
fn requeue(schedule: &Schedule, cj: &CronJob, now: Timestamp) -> Option<Duration> {
    let from = earliest(cj, now, false);
    let missed = missed_runs(schedule, from, now);
    let base = missed
        .latest
        .unwrap_or(if missed.count == 0 { from } else { now });
    let next = schedule.next(base)?;
    let wait = next.duration_since(now);
    let wait = Duration::try_from(wait).unwrap_or(Duration::ZERO);
    Some(wait + NEXT_SCHEDULE_DELTA)
}

fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some(API_VERSION.into()),
        kind: Some("Job".into()),
        namespace: job.metadata.namespace.clone(),
        name: job.metadata.name.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// After the job of `plan.create` was created (`created` as the API returned it): it is
/// active and its scheduled time is the last one.
pub fn record_created(status: &mut CronJobStatus, created: &Job, scheduled: Timestamp) {
    let active = status.active.get_or_insert_with(Vec::new);
    if !active
        .iter()
        .any(|r| r.uid.is_some() && r.uid == created.metadata.uid)
    {
        active.push(reference(created));
    }
    status.last_schedule_time = Some(Time(scheduled));
}

/// The job for the run due at `scheduled`, built from the template.
pub fn job_for(cj: &CronJob, schedule: &Schedule, scheduled: Timestamp) -> Job {
    let name = cj.metadata.name.clone().unwrap_or_default();
    let template = &cj.spec.job_template;
    let meta = template.metadata.clone().unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let local = scheduled.to_zoned(schedule.zone().clone());
    annotations.insert(
        CRONJOB_SCHEDULED_TIMESTAMP.into(),
        local
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
            .replace("+00:00", "Z"),
    );
    let owner = OwnerReference {
        api_version: API_VERSION.into(),
        kind: "CronJob".into(),
        name: name.clone(),
        uid: cj.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(&name, scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels: meta.labels.filter(|l| !l.is_empty()),
            annotations: Some(annotations),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone().unwrap_or_default(),
        status: None,
    }
}

fn creation_order(a: &&Job, b: &&Job) -> std::cmp::Ordering {
    let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
    // Jobs without a creation time sort last, ties by name.
    match (ta, tb) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
    .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// One sync of `cj`, given the jobs it controls (`jobs`) and the time.
pub fn plan(cj: &CronJob, jobs: &[Job], now: Timestamp) -> Plan {
    let mut plan = Plan {
        status: cj.status.clone().unwrap_or_default(),
        ..Plan::default()
    };

    // 1. Finished jobs: out of the active list, success time, history.
    let mut succeeded = Vec::new();
    let mut failed = Vec::new();
    for job in jobs.iter().filter(|j| finished(j)) {
        let name = job.metadata.name.clone().unwrap_or_default();
        let active = plan.status.active.get_or_insert_with(Vec::new);
        let before = active.len();
        active.retain(|r| r.uid.is_none() || r.uid != job.metadata.uid);
        if active.len() != before {
            plan.event(
                EventType::Normal,
                "SawCompletedJob",
                format!(
                    "Saw completed job: {name}, status: {}",
                    job.phase().map(JobPhase::as_str).unwrap_or("")
                ),
            );
        }
        if job.phase() == Some(&JobPhase::Completed) {
            let done = job
                .status
                .as_ref()
                .and_then(|s| s.state.as_ref())
                .and_then(|s| s.last_transition_time.as_ref());
            if let Some(done) = done
                && plan
                    .status
                    .last_successful_time
                    .as_ref()
                    .is_none_or(|t| t.0 < done.0)
            {
                plan.status.last_successful_time = Some(done.clone());
            }
            succeeded.push(job);
        } else {
            failed.push(job);
        }
    }
    for (mut kept, limit) in [
        (succeeded, cj.spec.successful_jobs_history_limit()),
        (failed, cj.spec.failed_jobs_history_limit()),
    ] {
        let excess = kept
            .len()
            .saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
        kept.sort_by(creation_order);
        for job in kept.into_iter().take(excess) {
            plan.delete.push(JobToDelete {
                name: job.metadata.name.clone().unwrap_or_default(),
                uid: job.metadata.uid.clone(),
                replaced: false,
            });
        }
    }

    // 2. Active entries whose job is gone.
    if let Some(active) = plan.status.active.as_mut() {
        let mut gone = Vec::new();
        active.retain(|r| {
            let present = jobs
                .iter()
                .any(|j| j.metadata.name == r.name && (r.uid.is_none() || j.metadata.uid == r.uid));
            if !present {
                gone.push(r.name.clone().unwrap_or_default());
            }
            present
        });
        for name in gone {
            plan.event(
                EventType::Warning,
                "StaleReference",
                format!("Active job {name:?} no longer exists"),
            );
        }
    }
    if plan.status.active.as_ref().is_some_and(Vec::is_empty) {
        plan.status.active = None;
    }

    // 3. Suspended, or nothing to schedule by.
    if cj.spec.suspend() {
        return plan;
    }
    let schedule = match schedule_of(cj) {
        Ok(s) => s,
        Err(event) => {
            plan.events.push(event);
            return plan;
        }
    };
    plan.requeue_after = requeue(&schedule, cj, now);

    // 4. The run that is due.
    let missed = missed_runs(&schedule, earliest(cj, now, true), now);
    let Some(scheduled) = missed.latest else {
        return plan;
    };
    if missed.count > MANY_MISSED {
        plan.event(
            EventType::Warning,
            "TooManyMissedTimes",
            "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
        );
    }

    // 5. Too late, already started, or held back by the concurrency policy.
    if let Some(d) = cj.spec.starting_deadline_seconds
        && scheduled.as_second().saturating_add(d) < now.as_second()
    {
        plan.event(
            EventType::Warning,
            "MissSchedule",
            format!("Missed scheduled time to start a job: {scheduled}"),
        );
        return plan;
    }
    let name = job_name(cj.metadata.name.as_deref().unwrap_or_default(), scheduled);
    let already = plan
        .status
        .active
        .iter()
        .flatten()
        .any(|r| r.name.as_deref() == Some(name.as_str()))
        || plan.status.last_schedule_time.as_ref().map(|t| t.0) == Some(scheduled);
    if already {
        return plan;
    }
    // Its job exists but was not recorded (a status write lost after the create): record it.
    if let Some(existing) = jobs
        .iter()
        .find(|j| j.metadata.name.as_deref() == Some(name.as_str()))
    {
        if finished(existing) {
            plan.status.last_schedule_time = Some(Time(scheduled));
        } else {
            record_created(&mut plan.status, existing, scheduled);
        }
        return plan;
    }
    let active: Vec<ObjectReference> = plan.status.active.clone().unwrap_or_default();
    match cj.spec.concurrency_policy() {
        ConcurrencyPolicy::Forbid if !active.is_empty() => {
            plan.event(
                EventType::Normal,
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is Forbid".into(),
            );
            return plan;
        }
        ConcurrencyPolicy::Replace => {
            for r in &active {
                plan.delete.push(JobToDelete {
                    name: r.name.clone().unwrap_or_default(),
                    uid: r.uid.clone(),
                    replaced: true,
                });
            }
            plan.status.active = None;
        }
        _ => {}
    }

    // 6. The job.
    plan.create = Some((job_for(cj, &schedule, scheduled), scheduled));
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use tephra_api::batch::{CronJobSpec, JobState, JobStatus, JobTemplateSpec};

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cron(schedule: &str, created: &str) -> CronJob {
        let mut cj = CronJob::new(
            "nightly",
            CronJobSpec {
                schedule: schedule.into(),
                job_template: JobTemplateSpec::default(),
                ..CronJobSpec::default()
            },
        );
        cj.metadata.namespace = Some("ns".into());
        cj.metadata.uid = Some("cj-uid".into());
        cj.metadata.creation_timestamp = Some(Time(ts(created)));
        cj
    }

    fn job(name: &str, phase: Option<JobPhase>, created: &str, done: Option<&str>) -> Job {
        let mut j = Job::new(name, Default::default());
        j.metadata.namespace = Some("ns".into());
        j.metadata.uid = Some(format!("{name}-uid"));
        j.metadata.creation_timestamp = Some(Time(ts(created)));
        j.status = phase.map(|p| JobStatus {
            state: Some(JobState {
                phase: Some(p),
                last_transition_time: done.map(|d| Time(ts(d))),
                ..JobState::default()
            }),
            ..JobStatus::default()
        });
        j
    }

    fn active(cj: &mut CronJob, names: &[&str]) {
        let status = cj.status.get_or_insert_with(CronJobStatus::default);
        status.active = Some(
            names
                .iter()
                .map(|n| ObjectReference {
                    name: Some(n.to_string()),
                    uid: Some(format!("{n}-uid")),
                    ..ObjectReference::default()
                })
                .collect(),
        );
    }

    fn reasons(p: &Plan) -> Vec<&str> {
        p.events.iter().map(|e| e.reason).collect()
    }

    #[test]
    fn nothing_due_requeues_at_next_time() {
        let cj = cron("*/5 * * * *", "2025-01-01T10:01:00Z");
        let p = plan(&cj, &[], ts("2025-01-01T10:03:00Z"));
        assert!(p.create.is_none());
        assert_eq!(
            p.requeue_after,
            Some(Duration::from_secs(120) + NEXT_SCHEDULE_DELTA)
        );
    }

    #[test]
    fn due_run_creates_named_owned_annotated_job() {
        let mut cj = cron("*/5 * * * *", "2025-01-01T10:01:00Z");
        cj.spec.job_template.metadata = Some(ObjectMeta {
            labels: Some([("team".to_string(), "data".to_string())].into()),
            ..ObjectMeta::default()
        });
        let p = plan(&cj, &[], ts("2025-01-01T10:05:30Z"));
        let (j, at) = p.create.clone().unwrap();
        assert_eq!(at, ts("2025-01-01T10:05:00Z"));
        assert_eq!(
            j.metadata.name.as_deref(),
            Some(format!("nightly-{}", at.as_second() / 60).as_str())
        );
        assert_eq!(j.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(j.metadata.labels.as_ref().unwrap()["team"], "data");
        assert_eq!(
            j.metadata.annotations.as_ref().unwrap()[CRONJOB_SCHEDULED_TIMESTAMP],
            "2025-01-01T10:05:00Z"
        );
        let owner = &j.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("CronJob", "cj-uid", Some(true))
        );
        assert_eq!(
            p.requeue_after,
            Some(Duration::from_secs(270) + NEXT_SCHEDULE_DELTA)
        );

        let mut status = p.status.clone();
        let mut created = j.clone();
        created.metadata.uid = Some("new".into());
        record_created(&mut status, &created, at);
        assert_eq!(status.active().len(), 1);
        assert_eq!(status.last_schedule_time, Some(Time(at)));
    }

    #[test]
    fn annotation_is_in_the_schedule_zone() {
        let mut cj = cron("0 9 * * *", "2024-12-31T23:50:00Z");
        cj.spec.time_zone = Some("Asia/Tokyo".into());
        let p = plan(&cj, &[], ts("2025-01-01T00:00:30Z"));
        let (j, _) = p.create.unwrap();
        assert_eq!(
            j.metadata.annotations.unwrap()[CRONJOB_SCHEDULED_TIMESTAMP],
            "2025-01-01T09:00:00+09:00"
        );
    }

    #[test]
    fn most_recent_of_a_few_missed_runs_is_started() {
        let cj = cron("* * * * *", "2025-01-01T10:00:00Z");
        let p = plan(&cj, &[], ts("2025-01-01T10:07:30Z"));
        assert_eq!(p.create.as_ref().unwrap().1, ts("2025-01-01T10:07:00Z"));
        assert!(!reasons(&p).contains(&"TooManyMissedTimes"));
    }

    #[test]
    fn too_many_missed_starts_the_latest_and_warns() {
        let cj = cron("* * * * *", "2025-01-01T00:00:00Z");
        let p = plan(&cj, &[], ts("2025-01-02T00:00:30Z"));
        assert_eq!(p.create.as_ref().unwrap().1, ts("2025-01-02T00:00:00Z"));
        assert_eq!(reasons(&p), ["TooManyMissedTimes"]);
    }

    #[test]
    fn starting_deadline_limits_what_counts() {
        let mut cj = cron("0 * * * *", "2025-01-01T09:30:00Z");
        cj.spec.starting_deadline_seconds = Some(60);
        // 10:00 was due 5 minutes ago: beyond the deadline, nothing starts.
        let p = plan(&cj, &[], ts("2025-01-01T10:05:00Z"));
        assert!(p.create.is_none());
        // Within the deadline it starts.
        let p = plan(&cj, &[], ts("2025-01-01T10:00:40Z"));
        assert_eq!(p.create.as_ref().unwrap().1, ts("2025-01-01T10:00:00Z"));
        // Many missed but a deadline: counted from the deadline only, no warning.
        let mut cj = cron("* * * * *", "2025-01-01T00:00:00Z");
        cj.spec.starting_deadline_seconds = Some(90);
        let p = plan(&cj, &[], ts("2025-01-03T00:00:10Z"));
        assert_eq!(p.create.as_ref().unwrap().1, ts("2025-01-03T00:00:00Z"));
        assert!(reasons(&p).is_empty());
    }

    #[test]
    fn suspended_starts_nothing_but_keeps_books() {
        let mut cj = cron("* * * * *", "2025-01-01T10:00:00Z");
        cj.spec.suspend = Some(true);
        active(&mut cj, &["a"]);
        let a = job(
            "a",
            Some(JobPhase::Completed),
            "2025-01-01T10:01:00Z",
            Some("2025-01-01T10:01:30Z"),
        );
        let p = plan(&cj, &[a], ts("2025-01-01T10:05:30Z"));
        assert!(p.create.is_none());
        assert!(p.requeue_after.is_none());
        assert!(p.status.active.is_none());
        assert_eq!(
            p.status.last_successful_time,
            Some(Time(ts("2025-01-01T10:01:30Z")))
        );
        assert_eq!(reasons(&p), ["SawCompletedJob"]);
    }

    #[test]
    fn forbid_skips_while_active() {
        let mut cj = cron("* * * * *", "2025-01-01T10:00:00Z");
        cj.spec.concurrency_policy = Some(ConcurrencyPolicy::Forbid);
        active(&mut cj, &["a"]);
        let a = job("a", Some(JobPhase::Running), "2025-01-01T10:01:00Z", None);
        let p = plan(&cj, std::slice::from_ref(&a), ts("2025-01-01T10:05:30Z"));
        assert!(p.create.is_none());
        assert_eq!(reasons(&p), ["JobAlreadyActive"]);
        assert!(p.requeue_after.is_some());
        // Allow starts one anyway.
        cj.spec.concurrency_policy = Some(ConcurrencyPolicy::Allow);
        assert!(plan(&cj, &[a], ts("2025-01-01T10:05:30Z")).create.is_some());
    }

    #[test]
    fn replace_deletes_active_jobs_then_creates() {
        let mut cj = cron("* * * * *", "2025-01-01T10:00:00Z");
        cj.spec.concurrency_policy = Some(ConcurrencyPolicy::Replace);
        active(&mut cj, &["a"]);
        let a = job("a", Some(JobPhase::Running), "2025-01-01T10:01:00Z", None);
        let p = plan(&cj, &[a], ts("2025-01-01T10:05:30Z"));
        assert_eq!(p.delete.len(), 1);
        assert_eq!(
            (p.delete[0].name.as_str(), p.delete[0].replaced),
            ("a", true)
        );
        assert!(p.status.active.is_none());
        assert!(p.create.is_some());
    }

    #[test]
    fn history_limits_delete_the_oldest() {
        let mut cj = cron("0 0 1 1 *", "2025-01-01T10:00:00Z");
        cj.spec.successful_jobs_history_limit = Some(2);
        let jobs = vec![
            job(
                "s1",
                Some(JobPhase::Completed),
                "2025-01-01T10:01:00Z",
                Some("2025-01-01T10:01:10Z"),
            ),
            job(
                "s2",
                Some(JobPhase::Completed),
                "2025-01-01T10:02:00Z",
                Some("2025-01-01T10:02:10Z"),
            ),
            job(
                "s3",
                Some(JobPhase::Completed),
                "2025-01-01T10:03:00Z",
                Some("2025-01-01T10:03:10Z"),
            ),
            job("f1", Some(JobPhase::Failed), "2025-01-01T10:01:00Z", None),
            job(
                "f2",
                Some(JobPhase::Terminated),
                "2025-01-01T10:02:00Z",
                None,
            ),
            job("f3", Some(JobPhase::Aborted), "2025-01-01T10:03:00Z", None),
            job("r", Some(JobPhase::Running), "2025-01-01T09:00:00Z", None),
        ];
        let p = plan(&cj, &jobs, ts("2025-01-01T10:05:00Z"));
        let deleted: Vec<&str> = p.delete.iter().map(|d| d.name.as_str()).collect();
        // Two successful kept, one failed (the default) kept; running jobs are never cleaned.
        assert_eq!(deleted, ["s1", "f1", "f2"]);
        assert_eq!(
            p.status.last_successful_time,
            Some(Time(ts("2025-01-01T10:03:10Z")))
        );
        // A zero limit keeps none.
        cj.spec.failed_jobs_history_limit = Some(0);
        let p = plan(&cj, &jobs, ts("2025-01-01T10:05:00Z"));
        assert_eq!(
            p.delete.iter().filter(|d| d.name.starts_with('f')).count(),
            3
        );
    }

    #[test]
    fn stale_active_references_are_dropped() {
        let mut cj = cron("0 0 1 1 *", "2025-01-01T10:00:00Z");
        active(&mut cj, &["gone"]);
        let p = plan(&cj, &[], ts("2025-01-01T10:05:00Z"));
        assert!(p.status.active.is_none());
        assert_eq!(reasons(&p), ["StaleReference"]);
    }

    #[test]
    fn a_run_already_started_is_not_started_again() {
        let mut cj = cron("* * * * *", "2025-01-01T10:00:00Z");
        cj.status = Some(CronJobStatus {
            last_schedule_time: Some(Time(ts("2025-01-01T10:05:00Z"))),
            ..CronJobStatus::default()
        });
        let p = plan(&cj, &[], ts("2025-01-01T10:05:30Z"));
        assert!(p.create.is_none());
        assert_eq!(
            p.requeue_after,
            Some(Duration::from_secs(30) + NEXT_SCHEDULE_DELTA)
        );
        // Or its job exists (same minute under `@every`).
        let cj = cron("* * * * *", "2025-01-01T10:00:00Z");
        let existing = job(
            &job_name("nightly", ts("2025-01-01T10:05:00Z")),
            None,
            "2025-01-01T10:05:00Z",
            None,
        );
        let p = plan(&cj, &[existing], ts("2025-01-01T10:05:30Z"));
        assert!(p.create.is_none());
        assert_eq!(
            p.status.active().len(),
            1,
            "the existing job is recorded as active"
        );
        assert_eq!(
            p.status.last_schedule_time,
            Some(Time(ts("2025-01-01T10:05:00Z")))
        );
    }

    #[test]
    fn every_schedules_count_from_the_last_run() {
        let mut cj = cron("@every 2s", "2025-01-01T10:00:00Z");
        cj.status = Some(CronJobStatus {
            last_schedule_time: Some(Time(ts("2025-01-01T10:00:04Z"))),
            ..CronJobStatus::default()
        });
        let p = plan(&cj, &[], ts("2025-01-01T10:00:06.5Z"));
        assert_eq!(p.create.as_ref().unwrap().1, ts("2025-01-01T10:00:06Z"));
        assert_eq!(
            p.requeue_after,
            Some(Duration::from_millis(1500) + NEXT_SCHEDULE_DELTA)
        );
    }

    #[test]
    fn bad_schedule_or_zone_is_reported() {
        let cj = cron("every day", "2025-01-01T10:00:00Z");
        let p = plan(&cj, &[], ts("2025-01-01T10:05:00Z"));
        assert_eq!(reasons(&p), ["InvalidSchedule"]);
        assert!(p.create.is_none() && p.requeue_after.is_none());
        let mut cj = cron("* * * * *", "2025-01-01T10:00:00Z");
        cj.spec.time_zone = Some("Nowhere/Special".into());
        let p = plan(&cj, &[], ts("2025-01-01T10:05:00Z"));
        assert_eq!(reasons(&p), ["UnknownTimeZone"]);
    }
}
