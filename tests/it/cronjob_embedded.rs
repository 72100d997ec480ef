//! End to end in `tephra serve --embedded`: a CronJob makes vcJobs on its schedule, they run to
//! Completed, the history limit is kept, the status says when, `suspend` stops it, and
//! deleting the CronJob takes its jobs with it.
//!
//! Job names carry the scheduled time in minutes (as in Kubernetes and Volcano), so an
//! `@every 2s` CronJob makes at most one job a minute; the waits allow for that.

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tephra::api::batch::{CronJob, Job, JobPhase};

use crate::common::served::Embedded;

fn cronjob() -> CronJob {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "tick", "namespace": "default"},
        "spec": {
            "schedule": "@every 2s",
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 1,
            "jobTemplate": {
                "metadata": {"labels": {"made-by": "tick"}},
                "spec": {
                    "minAvailable": 1,
                    "tasks": [{
                        "name": "t",
                        "replicas": 1,
                        "template": {
                            "metadata": {"annotations": {"simulation.tephra.io/run-seconds": "1"}},
                            "spec": {"restartPolicy": "Never",
                                     "containers": [{"name": "c", "image": "busybox"}]}
                        }
                    }]
                }
            }
        }
    }))
    .unwrap()
}

async fn owned_jobs(c: &Client, uid: &str) -> Vec<Job> {
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let list = jobs.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cronjob_runs_jobs_keeps_history_suspends_and_takes_its_jobs_along() {
    let (mut served, c) = Embedded::start(&[]).await;
    let cronjobs: Api<CronJob> = Api::namespaced(c.clone(), "default");
    let created = cronjobs
        .create(&PostParams::default(), &cronjob())
        .await
        .unwrap();
    let uid = created.uid().unwrap();

    // Jobs are made, run to Completed; with history limit 1 the first is deleted once a
    // second has completed. Forbid: never two unfinished at once.
    let deadline = Instant::now() + Duration::from_secs(170);
    let mut seen: Vec<String> = Vec::new();
    let mut done = false;
    while Instant::now() < deadline {
        let jobs = owned_jobs(&c, &uid).await;
        let unfinished = jobs
            .iter()
            .filter(|j| {
                !matches!(
                    j.phase(),
                    Some(
                        JobPhase::Completed
                            | JobPhase::Failed
                            | JobPhase::Terminated
                            | JobPhase::Aborted
                    )
                )
            })
            .count();
        assert!(
            unfinished <= 1,
            "Forbid let two jobs run: {:?}",
            jobs.iter().map(|j| j.name_any()).collect::<Vec<_>>()
        );
        for j in &jobs {
            if !seen.contains(&j.name_any()) {
                seen.push(j.name_any());
                assert_eq!(j.labels().get("made-by").map(String::as_str), Some("tick"));
                assert!(
                    j.annotations()
                        .contains_key("volcano.sh/cronjob-scheduled-timestamp")
                );
            }
        }
        let completed: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.phase() == Some(&JobPhase::Completed))
            .collect();
        if seen.len() >= 2
            && completed.len() == 1
            && completed[0].name_any() == seen[1]
            && jobs.len() == 1
        {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        done,
        "no second job completed with the first cleaned up; seen {seen:?}"
    );
    let status = cronjobs.get_status("tick").await.unwrap().status.unwrap();
    assert!(status.last_schedule_time.is_some(), "{status:?}");
    assert!(status.last_successful_time.is_some(), "{status:?}");

    // Suspended: the schedule stops being acted on (lastScheduleTime stays put).
    cronjobs
        .patch(
            "tick",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = cronjobs
        .get("tick")
        .await
        .unwrap()
        .status
        .unwrap()
        .last_schedule_time;
    let names_before: Vec<String> = owned_jobs(&c, &uid)
        .await
        .iter()
        .map(|j| j.name_any())
        .collect();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = cronjobs
        .get("tick")
        .await
        .unwrap()
        .status
        .unwrap()
        .last_schedule_time;
    assert_eq!(before, after, "a suspended CronJob went on scheduling");
    let names_after: Vec<String> = owned_jobs(&c, &uid)
        .await
        .iter()
        .map(|j| j.name_any())
        .collect();
    assert_eq!(names_before, names_after, "a suspended CronJob made a job");

    // Deleted: its jobs are collected.
    cronjobs
        .delete("tick", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = owned_jobs(&c, &uid).await;
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "jobs left after the CronJob was deleted: {}",
            left.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(served.proc.stop(), Some(0));
}
