//! `batch.volcano.sh/v1alpha1` CronJob: a vcJob created on a cron schedule.
//!
//! Field names and shapes follow Volcano's `CronJobSpec`/`CronJobStatus` (in the same Go file
//! as the Job). As for the Job, every optional field is an `Option` so that what a user wrote
//! round-trips; the accessors apply Volcano's defaults.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::batch::JobSpec;
use super::common::string_enum;

/// Volcano's default for `spec.successfulJobsHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT: i32 = 3;
/// Volcano's default for `spec.failedJobsHistoryLimit`.
pub const DEFAULT_FAILED_JOBS_HISTORY_LIMIT: i32 = 1;

/// The desired state of a Volcano CronJob (`spec` of `batch.volcano.sh/v1alpha1` CronJob).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "batch.volcano.sh",
    version = "v1alpha1",
    kind = "CronJob",
    plural = "cronjobs",
    singular = "cronjob",
    namespaced,
    shortname = "cronvcjob",
    shortname = "cronvj",
    status = "CronJobStatus",
    derive = "PartialEq",
    derive = "Default",
    annotation("helm.sh/resource-policy", "keep"),
    doc = "A Volcano CronJob: creates a vcJob from a template on a cron schedule."
)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    /// The schedule in cron format: five fields, a `@daily`-style macro or `@every <duration>`.
    pub schedule: String,

    /// IANA time zone the schedule is read in (tephra's default: UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,

    /// A run that could not start within this many seconds of its time is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub starting_deadline_seconds: Option<i64>,

    /// What to do when a run is due while an earlier one is still active (default `Allow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Allow"))]
    pub concurrency_policy: Option<ConcurrencyPolicy>,

    /// No new runs while true; runs already started are left alone (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub suspend: Option<bool>,

    /// The vcJob created for each run.
    pub job_template: JobTemplateSpec,

    /// Completed jobs kept (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 3, "minimum" = 0))]
    pub successful_jobs_history_limit: Option<i32>,

    /// Failed jobs kept (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1, "minimum" = 0))]
    pub failed_jobs_history_limit: Option<i32>,
}

/// The metadata and spec of the vcJobs a CronJob creates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobTemplateSpec {
    /// Labels and annotations copied to every job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,

    /// The spec of every job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSpec>,
}

string_enum! {
    /// How a CronJob treats a run that is due while an earlier one is active.
    #[derive(Default)]
    pub enum ConcurrencyPolicy (schema_enum = true) {
        /// Runs may overlap.
        #[default]
        Allow = "Allow",
        /// The new run is skipped while one is active.
        Forbid = "Forbid",
        /// The active runs are deleted and the new one started.
        Replace = "Replace",
    }
}

/// The observed state of a CronJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobStatus {
    /// The jobs of this CronJob that have not finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<Vec<ObjectReference>>,

    /// The scheduled time of the last job created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,

    /// When the most recent job to complete successfully completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
}

impl CronJobSpec {
    /// `concurrencyPolicy`, `Allow` when unset.
    pub fn concurrency_policy(&self) -> ConcurrencyPolicy {
        self.concurrency_policy.clone().unwrap_or_default()
    }

    /// `suspend`, false when unset.
    pub fn suspend(&self) -> bool {
        self.suspend.unwrap_or(false)
    }

    /// `successfulJobsHistoryLimit`, 3 when unset.
    pub fn successful_jobs_history_limit(&self) -> i32 {
        self.successful_jobs_history_limit
            .unwrap_or(DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT)
    }

    /// `failedJobsHistoryLimit`, 1 when unset.
    pub fn failed_jobs_history_limit(&self) -> i32 {
        self.failed_jobs_history_limit
            .unwrap_or(DEFAULT_FAILED_JOBS_HISTORY_LIMIT)
    }
}

impl CronJobStatus {
    /// The active job references (empty when unset).
    pub fn active(&self) -> &[ObjectReference] {
        self.active.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CronJob written in the shape of Volcano's `example/cronjob/cronjob.yaml`.
    const EXAMPLE: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: CronJob
metadata:
  name: nightly-report
spec:
  schedule: "*/10 * * * *"
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: 30
  successfulJobsHistoryLimit: 2
  failedJobsHistoryLimit: 4
  jobTemplate:
    metadata:
      labels:
        team: data
    spec:
      schedulerName: volcano
      minAvailable: 1
      policies:
        - event: PodEvicted
          action: RestartJob
      tasks:
        - name: report
          replicas: 1
          template:
            spec:
              restartPolicy: OnFailure
              containers:
                - name: main
                  image: busybox:1.36
                  command: ["sh", "-c", "echo report"]
"#;

    #[test]
    fn example_round_trips() {
        let cj: CronJob = serde_saphyr::from_str(EXAMPLE).unwrap();
        assert_eq!(cj.spec.schedule, "*/10 * * * *");
        assert_eq!(cj.spec.concurrency_policy(), ConcurrencyPolicy::Forbid);
        assert_eq!(cj.spec.starting_deadline_seconds, Some(30));
        assert_eq!(cj.spec.successful_jobs_history_limit(), 2);
        assert_eq!(cj.spec.failed_jobs_history_limit(), 4);
        let template = cj.spec.job_template.spec.as_ref().unwrap();
        assert_eq!(template.tasks().len(), 1);
        assert_eq!(template.min_available, Some(1));
        let value = serde_json::to_value(&cj).unwrap();
        let again: CronJob = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(again, cj);
        let original: serde_json::Value = serde_saphyr::from_str(EXAMPLE).unwrap();
        assert_eq!(value, original, "nothing added or lost on the wire");
    }

    #[test]
    fn defaults_apply_when_unset() {
        let cj: CronJob = serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "CronJob",
            "metadata": {"name": "c"},
            "spec": {"schedule": "@hourly", "jobTemplate": {}}
        }))
        .unwrap();
        assert_eq!(cj.spec.concurrency_policy(), ConcurrencyPolicy::Allow);
        assert!(!cj.spec.suspend());
        assert_eq!(cj.spec.successful_jobs_history_limit(), 3);
        assert_eq!(cj.spec.failed_jobs_history_limit(), 1);
        assert!(cj.status.unwrap_or_default().active().is_empty());
    }

    #[test]
    fn unknown_policy_is_kept() {
        let p: ConcurrencyPolicy = serde_json::from_value(serde_json::json!("Sometimes")).unwrap();
        assert_eq!(p, ConcurrencyPolicy::Other("Sometimes".into()));
        assert_eq!(serde_json::to_value(&p).unwrap(), "Sometimes");
    }
}
