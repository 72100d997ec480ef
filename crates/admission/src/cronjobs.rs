//! `/cronjobs/validate` (CREATE, UPDATE): Volcano's CronJob check, with the bounds its CRD
//! schema sets and the job template checked as `/jobs/validate` checks a new vcJob.
//!
//! Refused, all problems in one `;`-separated message:
//! * an empty schedule, one naming a zone (`TZ=`/`CRON_TZ=`: the zone goes in `timeZone`, as
//!   Volcano's webhook says), or one that does not parse as Kubernetes parses it;
//! * a `timeZone` that is empty, `Local`, or not in the time zone database;
//! * a name longer than 52 characters (the jobs are named `<name>-<minutes>`, up to 11 more,
//!   within 63) or not a qualified name;
//! * a negative `startingDeadlineSeconds`, `successfulJobsHistoryLimit` or
//!   `failedJobsHistoryLimit`, a `concurrencyPolicy` other than Allow, Forbid or Replace;
//! * a job template the vcJob webhook would refuse (its problems prefixed `jobTemplate: `).

use serde::Deserialize;
use tephra_api::batch::CronJobSpec;
use tephra_controllers::cronjob::schedule;

use crate::review::{Decision, Operation, Request};
use crate::validation::qualified_name_errors;
use crate::view::ClusterView;
use crate::{AdmissionConfig, decode};

/// The longest CronJob name: its jobs' names (`<name>-<minutes since the epoch>`) must fit 63.
pub const MAX_NAME: usize = 52;

#[derive(Deserialize)]
struct Submitted {
    #[serde(default)]
    metadata: Named,
    spec: CronJobSpec,
}

#[derive(Default, Deserialize)]
struct Named {
    #[serde(default)]
    name: Option<String>,
}

/// `/cronjobs/validate`.
pub fn validate(req: &Request, view: &dyn ClusterView, _cfg: &AdmissionConfig) -> Decision {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Decision::bad_request("expect operation to be 'CREATE' or 'UPDATE'");
    }
    let cj: Submitted = match decode(req) {
        Ok(c) => c,
        Err(d) => return d,
    };
    let errs = problems(
        cj.metadata.name.as_deref().unwrap_or_default(),
        &cj.spec,
        view,
    );
    if errs.is_empty() {
        Decision::allow()
    } else {
        Decision::deny(errs.join("; "))
    }
}

/// Every problem of a CronJob (empty: admit).
pub fn problems(name: &str, spec: &CronJobSpec, view: &dyn ClusterView) -> Vec<String> {
    let mut out = Vec::new();
    if spec.schedule.trim().is_empty() {
        out.push("spec.schedule: Required value".to_string());
    } else if schedule::names_zone(&spec.schedule) {
        out.push(
            "spec.schedule: must not contain TZ or CRON_TZ; set the time zone in spec.timeZone"
                .to_string(),
        );
    } else if let Err(e) = schedule::parse(&spec.schedule, None) {
        out.push(format!(
            "spec.schedule: {:?} is not a valid cron expression: {e}",
            spec.schedule
        ));
    }
    if let Some(tz) = spec.time_zone.as_deref() {
        if tz.is_empty() {
            out.push("spec.timeZone: must be unset or a time zone name, not empty".into());
        } else if tz.eq_ignore_ascii_case("Local") {
            out.push("spec.timeZone: must be an IANA time zone name, not Local".into());
        } else if tz
            .split('/')
            .any(|p| p == "." || p == ".." || p.starts_with('-'))
            // A path out of the zone database is no zone name.
            || schedule::zone(tz).is_err()
        {
            out.push(format!("spec.timeZone: unknown time zone {tz:?}"));
        }
    }
    if name.len() > MAX_NAME {
        out.push(format!(
            "metadata.name: must be no more than {MAX_NAME} characters, to leave room for the \
             job name suffix (63 in all)"
        ));
    } else if !name.is_empty() {
        let errs = qualified_name_errors(name);
        if !errs.is_empty() {
            out.push(format!("metadata.name: {name:?}: {}", errs.join(", ")));
        }
    }
    for (field, value) in [
        (
            "spec.startingDeadlineSeconds",
            spec.starting_deadline_seconds,
        ),
        (
            "spec.successfulJobsHistoryLimit",
            spec.successful_jobs_history_limit.map(i64::from),
        ),
        (
            "spec.failedJobsHistoryLimit",
            spec.failed_jobs_history_limit.map(i64::from),
        ),
    ] {
        if let Some(v) = value
            && v < 0
        {
            out.push(format!(
                "{field}: must be greater than or equal to 0, got {v}"
            ));
        }
    }
    if let Some(p) = &spec.concurrency_policy
        && !p.is_known()
    {
        out.push(format!(
            "spec.concurrencyPolicy: {:?} is not one of Allow, Forbid, Replace",
            p.as_str()
        ));
    }
    let template = spec.job_template.spec.clone().unwrap_or_default();
    let (errs, _) = crate::jobs::validate::validate_create(&format!("{name}-0"), &template, view);
    out.extend(errs.into_iter().map(|e| format!("jobTemplate: {e}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::request;
    use crate::view::StaticView;
    use serde_json::{Value, json};
    use tephra_api::Queue;

    fn cronjob(name: &str, spec: Value) -> Value {
        let mut full = json!({
            "schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1,
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}}
        });
        for (k, v) in spec.as_object().unwrap() {
            full[k] = v.clone();
        }
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
               "metadata": {"name": name, "namespace": "team"}, "spec": full})
    }

    fn view() -> StaticView {
        let q: Queue = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "default"}, "spec": {"weight": 1},
            "status": {"state": "Open"}
        }))
        .unwrap();
        StaticView::with_queues([q])
    }

    fn denial(name: &str, spec: Value) -> Option<String> {
        validate(
            &request("CronJob", "CREATE", cronjob(name, spec)),
            &view(),
            &AdmissionConfig::default(),
        )
        .denial()
        .map(str::to_string)
    }

    #[test]
    fn valid_cronjobs_are_admitted() {
        for spec in [
            json!({}),
            json!({"schedule": "@every 2s", "concurrencyPolicy": "Forbid"}),
            json!({"schedule": "0 9 * * mon-fri", "timeZone": "Europe/Berlin"}),
            json!({"schedule": "@daily", "startingDeadlineSeconds": 0,
                   "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0}),
        ] {
            assert_eq!(denial("nightly", spec.clone()), None, "{spec}");
        }
        assert_eq!(denial(&"a".repeat(MAX_NAME), json!({})), None);
    }

    #[test]
    fn bad_cronjobs_are_denied_with_what_to_fix() {
        let cases = [
            (json!({"schedule": ""}), "spec.schedule: Required value"),
            (
                json!({"schedule": "every day"}),
                "not a valid cron expression",
            ),
            (
                json!({"schedule": "61 * * * *"}),
                "not a valid cron expression",
            ),
            (
                json!({"schedule": "TZ=UTC 0 * * * *"}),
                "set the time zone in spec.timeZone",
            ),
            (json!({"timeZone": "Mars/Olympus"}), "unknown time zone"),
            (json!({"timeZone": "Local"}), "not Local"),
            (json!({"timeZone": ""}), "not empty"),
            (
                json!({"startingDeadlineSeconds": -1}),
                "spec.startingDeadlineSeconds: must be greater than or equal to 0",
            ),
            (
                json!({"successfulJobsHistoryLimit": -1}),
                "spec.successfulJobsHistoryLimit",
            ),
            (
                json!({"failedJobsHistoryLimit": -2}),
                "spec.failedJobsHistoryLimit",
            ),
            (
                json!({"concurrencyPolicy": "Sometimes"}),
                "spec.concurrencyPolicy",
            ),
            (
                json!({"jobTemplate": {"spec": {}}}),
                "jobTemplate: No task specified",
            ),
        ];
        for (spec, want) in cases {
            let got = denial("nightly", spec.clone());
            assert!(
                got.as_deref().is_some_and(|m| m.contains(want)),
                "{spec}: {got:?}, want {want:?}"
            );
        }
        let long = denial(&"a".repeat(MAX_NAME + 1), json!({})).unwrap();
        assert!(long.contains("no more than 52 characters"), "{long}");
        // Every problem in one message.
        let both = denial(
            "nightly",
            json!({"schedule": "x", "failedJobsHistoryLimit": -1}),
        )
        .unwrap();
        assert!(
            both.contains("schedule") && both.contains("failedJobsHistoryLimit"),
            "{both}"
        );
    }

    #[test]
    fn only_create_and_update_are_reviewed() {
        let d = validate(
            &request("CronJob", "DELETE", cronjob("nightly", json!({}))),
            &view(),
            &AdmissionConfig::default(),
        );
        assert!(d.denial().is_some() || !d.is_allowed());
    }
}
