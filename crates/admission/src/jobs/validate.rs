//! `/jobs/validate` (CREATE, UPDATE): Volcano's vcJob checks.
//!
//! CREATE gathers every problem into one message (Volcano's order, `;`-separated); UPDATE
//! stops at the first, and only `minAvailable`, `priorityClassName`, task `replicas` and task
//! `minAvailable` may change.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::bounds;
use crate::review::{Decision, Operation, Request};
use crate::validation::{
    dns1035_label_errors, dns1123_label_errors, dns1123_subdomain_errors, pod_template_errors,
    qualified_name_errors,
};
use crate::view::{ClusterView, queue_accepts, queue_state};
use crate::{AdmissionConfig, decode, decode_old};
use tephra_api::JobSpec;
use tephra_api::batch::{LifecyclePolicy, NumaPolicy, TaskSpec, VolumeSpec, pod_name};
use tephra_api::bus::{Action, Event};
use tephra_api::keys::{ROOT_QUEUE, plugins};
use tephra_api::quantity;
use tephra_api::scheduling::NetworkTopologySpec;

/// Events a user may put in a policy.
pub const VALID_EVENTS: &[&str] = &[
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
];

/// Actions a user may put in a policy.
pub const VALID_ACTIONS: &[&str] = &[
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
];

/// The parts of a vcJob the rules read: its name and spec. The rest of `metadata` (labels,
/// annotations, managedFields) is skipped rather than decoded, which is most of what a typed
/// decode costs; the API server has validated it before calling any webhook.
#[derive(Deserialize)]
struct Submitted {
    #[serde(default)]
    metadata: Named,
    spec: JobSpec,
}

#[derive(Default, Deserialize)]
struct Named {
    #[serde(default)]
    name: Option<String>,
}

impl Submitted {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

/// The decision for one `/jobs/validate` request.
pub fn review(req: &Request, view: &dyn ClusterView, _cfg: &AdmissionConfig) -> Decision {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Decision::bad_request("expect operation to be 'CREATE' or 'UPDATE'");
    }
    let job: Submitted = match decode(req) {
        Ok(j) => j,
        Err(d) => return d,
    };
    match req.operation {
        Operation::Create => {
            let (problems, warnings) = validate_create(job.name(), &job.spec, view);
            let d = if problems.is_empty() {
                Decision::allow()
            } else {
                Decision::deny(problems.join("; "))
            };
            d.with_warnings(warnings)
        }
        Operation::Update => {
            let old: Submitted = match decode_old(req) {
                Ok(j) => j,
                Err(d) => return d,
            };
            match validate_update(&old.spec, job.name(), &job.spec) {
                Ok(()) => Decision::allow(),
                Err(msg) => Decision::deny(msg),
            }
        }
        _ => Decision::bad_request("expect operation to be 'CREATE' or 'UPDATE'"),
    }
}

/// The mpi plugin's master task name (`--master`, default `master`), read the way Go's flag
/// package reads it: `-master x`, `--master x`, `-master=x`, `--master=x`, stopping at the first
/// argument that is not a flag.
fn mpi_master(args: &[String]) -> String {
    let mut master = "master".to_string();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            break;
        };
        if flag.is_empty() {
            break;
        }
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        let value = match value {
            Some(v) => v,
            // Every mpi flag takes a value; one without a value ends parsing (a Go error).
            None => match it.next() {
                Some(v) => v.clone(),
                None => break,
            },
        };
        if name == "master" {
            master = value;
        }
    }
    master
}

fn network_topology_problem(nt: Option<&NetworkTopologySpec>) -> Option<String> {
    let nt = nt?;
    (nt.highest_tier_allowed.is_some() && !nt.highest_tier_name.as_deref().unwrap_or_default().is_empty())
        .then(|| "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously".to_string())
}

/// Volcano's policy rules, plus tephra's: an exit-code policy's action is validated like an
/// event policy's (Volcano never checks it, so a typo only shows when the code is hit).
fn policy_problem(policies: &[LifecyclePolicy], path: &str) -> Option<String> {
    let mut events: BTreeSet<String> = BTreeSet::new();
    let mut exit_codes: BTreeSet<i32> = BTreeSet::new();
    let action_ok = |a: Option<&Action>| a.is_some_and(|a| VALID_ACTIONS.contains(&a.as_str()));
    let action_text = |a: Option<&Action>| a.map(|a| a.as_str().to_string()).unwrap_or_default();
    let mut problem = None;
    for p in policies {
        let mut listed: Vec<&Event> = Vec::new();
        for e in p.all_events().filter(|e| !e.as_str().is_empty()) {
            if !listed.contains(&e) {
                listed.push(e);
            }
        }
        match (listed.is_empty(), p.exit_code) {
            (false, Some(_)) => {
                problem = Some("must not specify event and exitCode simultaneously".to_string());
                break;
            }
            (true, None) => {
                problem = Some("either event and exitCode should be specified".to_string());
                break;
            }
            (false, None) => {
                for e in listed {
                    if !VALID_EVENTS.contains(&e.as_str()) {
                        problem = Some(format!(
                            "{path}: Invalid value: {:?}: invalid policy event",
                            e.as_str()
                        ));
                        break;
                    }
                    if !action_ok(p.action.as_ref()) {
                        problem = Some(format!(
                            "{path}: Invalid value: {:?}: invalid policy action",
                            action_text(p.action.as_ref())
                        ));
                        break;
                    }
                    if !events.insert(e.as_str().to_string()) {
                        problem = Some(format!(
                            "duplicate event {} across different policy",
                            e.as_str()
                        ));
                        break;
                    }
                }
                if problem.is_some() {
                    break;
                }
            }
            (true, Some(code)) => {
                if code == 0 {
                    problem = Some("0 is not a valid error code".to_string());
                    break;
                }
                if !exit_codes.insert(code) {
                    problem = Some(format!("duplicate exitCode {code}"));
                    break;
                }
                if !action_ok(p.action.as_ref()) {
                    problem = Some(format!(
                        "{path}: Invalid value: {:?}: invalid policy action",
                        action_text(p.action.as_ref())
                    ));
                    break;
                }
            }
        }
    }
    // The lists of valid values help only with an invalid event or action; after any other
    // problem (a duplicate, say) they bury the one fact that matters (departure from
    // Volcano, which appends them to every policy problem).
    let lists = problem.as_deref().is_some_and(|p| {
        p.ends_with("invalid policy event") || p.ends_with("invalid policy action")
    });
    let mut out: Vec<String> = problem.into_iter().collect();
    if events.contains("*") && events.len() > 1 {
        out.push("if there's * here, no other policy should be here".to_string());
    }
    (!out.is_empty()).then(|| {
        let mut msg = out.join("; ");
        if lists {
            msg.push_str(&format!(
                " (valid events are [{}], valid actions are [{}])",
                VALID_EVENTS.join(" "),
                VALID_ACTIONS.join(" ")
            ));
        }
        msg
    })
}

fn policy_warnings(policies: &[LifecyclePolicy], path: &str, out: &mut Vec<String>) {
    for p in policies {
        if p.all_events().any(|e| e.as_str() == "PodPending") && p.timeout.is_none() {
            out.push(format!(
                "{path}: a PodPending policy without a timeout acts on every pending pod at once; set `timeout` to give pods time to be scheduled"
            ));
        }
    }
}

fn partition_problem(task: &TaskSpec, job: &str) -> Option<String> {
    let p = task.partition_policy.as_ref()?;
    let name = task.name();
    let total = p.total_partitions.unwrap_or(0);
    let size = p.partition_size.unwrap_or(0);
    let mut msg = if total <= 0 {
        Some(format!(
            "'TotalPartitions' must be greater than 0 in task: {name}, job: {job}"
        ))
    } else if size <= 0 {
        Some(format!(
            "'PartitionSize' must be greater than 0 in task: {name}, job: {job}"
        ))
    } else if i64::from(task.replicas()) != i64::from(total) * i64::from(size) {
        Some(format!(
            "'Replicas' are not equal to TotalPartitions*PartitionSize in task: {name}, job: {job}"
        ))
    } else {
        let min_partitions = p.min_partitions.unwrap_or(0);
        match task.min_available {
            Some(m)
                if min_partitions > 0
                    && i64::from(min_partitions) * i64::from(size) != i64::from(m) =>
            {
                Some(format!(
                    "'MinAvailable' is not equal to MinPartitions*PartitionSize in task: {name}, job: {job}"
                ))
            }
            _ => None,
        }
    };
    if let Some(nt) = network_topology_problem(p.network_topology.as_ref()) {
        msg = Some(match msg {
            Some(m) => format!("{m}; {nt}"),
            None => nt,
        });
    }
    msg
}

fn topology_problem(task: &TaskSpec, index: usize) -> Option<String> {
    match task.topology_policy.as_ref() {
        None | Some(NumaPolicy::None) => return None,
        Some(p) if p.as_str().is_empty() => return None,
        _ => {}
    }
    let spec = task.pod_spec()?;
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for (id, c) in all.enumerate() {
        let res = c.resources.as_ref();
        let requests = res
            .and_then(|r| r.requests.as_ref())
            .filter(|r| !r.is_empty());
        let list = requests.or_else(|| res.and_then(|r| r.limits.as_ref()));
        let cpu = list
            .and_then(|l| l.get("cpu"))
            .and_then(|q| quantity::parse(&q.0))
            .unwrap_or(0.0);
        // Volcano counts whole CPUs; zero (absent) or a fraction cannot be pinned.
        if cpu < 1.0 || cpu.fract() != 0.0 {
            return Some(format!(
                "the cpu request isn't an integer in spec.tasks[{index}] container[{id}]."
            ));
        }
    }
    None
}

fn volume_problem(volumes: &[VolumeSpec]) -> Option<String> {
    let mut seen = BTreeSet::new();
    for v in volumes {
        let mount_path = v.mount_path.as_deref().unwrap_or_default();
        if mount_path.is_empty() {
            return Some("mountPath is required".into());
        }
        if !seen.insert(mount_path) {
            return Some(format!("duplicated mountPath: {mount_path}"));
        }
        let claim_name = v.volume_claim_name.as_deref().unwrap_or_default();
        if v.volume_claim.is_none() && claim_name.is_empty() {
            return Some("either VolumeClaim or VolumeClaimName must be specified".into());
        }
        if !claim_name.is_empty() {
            if v.volume_claim.is_some() {
                return Some("conflict: If you want to use an existing PVC, just specify VolumeClaimName.If you want to create a new PVC, you do not need to specify VolumeClaimName".into());
            }
            let errs = dns1123_subdomain_errors(claim_name);
            if !errs.is_empty() {
                return Some(format!(
                    "invalid VolumeClaimName {claim_name} : [{}]",
                    errs.join(" ")
                ));
            }
        }
    }
    None
}

/// True when the tasks' `dependsOn` graph is acyclic; a dependency on an unknown task counts
/// as a cycle (it can never be satisfied), as in Volcano.
fn dependencies_form_a_dag(tasks: &[TaskSpec]) -> bool {
    let names: BTreeSet<&str> = tasks.iter().map(TaskSpec::name).collect();
    let mut in_degree: BTreeMap<&str, usize> = names.iter().map(|n| (*n, 0)).collect();
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for t in tasks {
        for dep in t.depends_on.iter().flat_map(|d| d.name.iter().flatten()) {
            if !names.contains(dep.as_str()) {
                return false;
            }
            if edges.entry(dep.as_str()).or_default().insert(t.name())
                && let Some(d) = in_degree.get_mut(t.name())
            {
                *d += 1;
            }
        }
    }
    let mut ready: Vec<&str> = in_degree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(n, _)| *n)
        .collect();
    let mut visited = 0;
    while let Some(n) = ready.pop() {
        visited += 1;
        for next in edges.get(n).into_iter().flatten() {
            if let Some(d) = in_degree.get_mut(next) {
                *d -= 1;
                if *d == 0 {
                    ready.push(next);
                }
            }
        }
    }
    visited == names.len()
}

/// Every problem of a job being created (empty: admit), and the warnings.
pub fn validate_create(
    job_name: &str,
    spec: &JobSpec,
    view: &dyn ClusterView,
) -> (Vec<String>, Vec<String>) {
    let tasks = spec.tasks();
    let mut warnings = Vec::new();
    if tasks.is_empty() {
        return (vec!["No task specified in job spec".into()], warnings);
    }
    if let Some(args) = spec.plugins.as_ref().and_then(|p| p.get(plugins::MPI)) {
        let master = mpi_master(args);
        if !tasks.iter().any(|t| t.name() == master) {
            return (
                vec!["The specified mpi master task was not found".into()],
                warnings,
            );
        }
    }

    let mut problems: Vec<String> = bounds::job_problems(spec);
    // With the svc plugin (which the distributed-framework plugins imply), the job name is
    // also a Service name and each pod's DNS subdomain, and each pod name its host name:
    // stricter forms than Volcano checks, so a job that passes here can create its pods and
    // Service (Volcano admits `1job` or `a.b` and then fails to create them).
    let svc = spec.plugins.as_ref().is_some_and(|p| {
        [
            plugins::SVC,
            plugins::TENSORFLOW,
            plugins::MPI,
            plugins::PYTORCH,
            plugins::RAY,
        ]
        .iter()
        .any(|name| p.contains_key(*name))
    });
    problems.extend(network_topology_problem(spec.network_topology.as_ref()));
    let mut seen = BTreeSet::new();
    let mut has_dependencies = false;
    for (index, task) in tasks.iter().enumerate() {
        let name = task.name();
        has_dependencies |= task.depends_on.is_some();
        if let Some(m) = task.min_available
            && m > task.replicas()
        {
            problems.push(format!(
                "'minAvailable' is greater than 'replicas' in task: {name}, job: {job_name}"
            ));
        }
        if !seen.insert(name) {
            // Volcano stops looking at further tasks after a duplicate.
            problems.push(format!("duplicated task name {name}"));
            break;
        }
        problems.extend(policy_problem(task.policies(), "spec.tasks.policies"));
        policy_warnings(
            task.policies(),
            &format!("spec.tasks[{index}].policies"),
            &mut warnings,
        );
        let pod_name = pod_name(job_name, name, i32::try_from(index).unwrap_or(i32::MAX));
        let errs = qualified_name_errors(&pod_name);
        if !errs.is_empty() {
            problems.push(format!(
                "create pod with name {pod_name} validate failed [{}]",
                errs.join(" ")
            ));
        } else {
            // A qualified name may still not be a pod name (upper case, `_`); with the svc
            // plugin the pod name is also its host name, a DNS-1123 label (no dots).
            let (errs, form) = if svc {
                (dns1123_label_errors(&pod_name), "host name")
            } else {
                (dns1123_subdomain_errors(&pod_name), "name")
            };
            if !errs.is_empty() {
                problems.push(format!(
                    "pod {form} {pod_name:?} (job name, task name, index) is invalid: {}",
                    errs.join("; ")
                ));
            }
        }
        match task.template.as_ref() {
            Some(t) => {
                let errs = pod_template_errors(t);
                if !errs.is_empty() {
                    problems.push(format!("spec.tasks[{index}].{}", errs.join(". ")));
                }
            }
            None => problems.push(format!(
                "spec.tasks[{index}].template.spec.containers: Required value"
            )),
        }
        problems.extend(topology_problem(task, index));
        problems.extend(partition_problem(task, job_name));
    }

    let errs = qualified_name_errors(job_name);
    if !errs.is_empty() {
        problems.push(format!(
            "create job with name {job_name} validate failed [{}]",
            errs.join(" ")
        ));
    } else if svc {
        let errs = dns1035_label_errors(job_name);
        if !errs.is_empty() {
            problems.push(format!(
                "job name {job_name:?} is also the name of its Service (svc plugin) and is invalid: {}",
                errs.join("; ")
            ));
        }
    }
    if i64::from(spec.total_replicas()) < i64::from(spec.min_available()) {
        problems
            .push("job 'minAvailable' should not be greater than total replicas in tasks".into());
    }
    problems.extend(policy_problem(spec.policies(), "spec.policies"));
    policy_warnings(spec.policies(), "spec.policies", &mut warnings);
    for name in spec.plugins.iter().flat_map(|p| p.keys()) {
        if !plugins::ALL.contains(&name.as_str()) {
            problems.push(format!("unable to find job plugin: {name}"));
        }
    }
    problems.extend(volume_problem(spec.volumes.as_deref().unwrap_or_default()));
    problems.extend(queue_problem(spec.queue(), view));
    if has_dependencies && !dependencies_form_a_dag(tasks) {
        problems.push(
            "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG)"
                .into(),
        );
    }
    (problems, warnings)
}

/// The queue must exist, be Open, not be `root` and have no child queues.
fn queue_problem(queue: &str, view: &dyn ClusterView) -> Option<String> {
    let Some(q) = view.queue(queue) else {
        return Some(format!(
            "unable to find job queue: queue {queue:?} not found"
        ));
    };
    let mut problems = Vec::new();
    if !queue_accepts(&q) {
        problems.push(format!(
            "can only submit job to queue with state `Open`, queue `{queue}` status is `{}`",
            queue_state(&q)
        ));
    }
    if queue == ROOT_QUEUE {
        problems.push("can not submit job to root queue".into());
    } else {
        let children = view.child_queues(queue);
        if !children.is_empty() {
            problems.push(format!(
                "can only submit job to leaf queue, queue `{queue}` has {} child queues",
                children.len()
            ));
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The first problem of an update of job `job_name` from `old` to `new`, if any.
pub fn validate_update(old: &JobSpec, job_name: &str, new: &JobSpec) -> Result<(), String> {
    let mut total: i64 = 0;
    for task in new.tasks() {
        let name = task.name();
        if task.replicas() < 0 {
            return Err(format!("'replicas' must be >= 0 in task: {name}"));
        }
        if let Some(m) = task.min_available {
            if m < 0 {
                return Err(format!("'minAvailable' must be >= 0 in task: {name}"));
            }
            if m > task.replicas() {
                return Err(format!(
                    "'minAvailable' must be <= 'replicas' in task: {name}"
                ));
            }
        }
        if let Some(msg) = partition_problem(task, job_name) {
            return Err(msg);
        }
        total += i64::from(task.replicas());
    }
    if i64::from(new.min_available()) > total {
        return Err("job 'minAvailable' must not be greater than total replicas".into());
    }
    if new.min_available() < 0 {
        return Err("job 'minAvailable' must be >= 0".into());
    }
    if let Some(msg) = network_topology_problem(new.network_topology.as_ref()) {
        return Err(msg);
    }
    // Volcano's own update rules above keep their messages; the schema bounds come next.
    if let Some(first) = bounds::job_problems(new).into_iter().next() {
        return Err(first);
    }
    if old.tasks().len() != new.tasks().len() {
        return Err("job updates may not add or remove tasks".into());
    }
    if comparable(old, old) != comparable(new, old) {
        return Err("job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`".into());
    }
    Ok(())
}

/// `spec` with the fields an update may change taken from `base`, and generated PVC names
/// cleared (the job controller fills them in).
fn comparable(spec: &JobSpec, base: &JobSpec) -> JobSpec {
    let mut s = spec.clone();
    s.min_available = base.min_available;
    s.priority_class_name = base.priority_class_name.clone();
    if let (Some(tasks), Some(base_tasks)) = (s.tasks.as_mut(), base.tasks.as_ref()) {
        for (t, b) in tasks.iter_mut().zip(base_tasks) {
            t.replicas = b.replicas;
            t.min_available = b.min_available;
        }
    }
    for v in s.volumes.iter_mut().flatten() {
        if v.volume_claim.is_some() {
            v.volume_claim_name = None;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{request, update};
    use crate::view::StaticView;
    use serde_json::{Value, json};
    use tephra_api::Queue;

    fn view() -> StaticView {
        StaticView::with_queues([
            Queue::test("default").open(),
            Queue::test("root").open(),
            Queue::test("closed").closed(),
            Queue::test("parent").open(),
            Queue::test("child").parent("parent").open(),
        ])
    }

    fn task(name: &str, replicas: i32) -> Value {
        json!({"name": name, "replicas": replicas,
               "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}})
    }

    fn job(spec: Value) -> Value {
        let mut s = json!({"queue": "default", "schedulerName": "volcano", "maxRetry": 3});
        for (k, v) in spec.as_object().unwrap() {
            s[k] = v.clone();
        }
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
               "metadata": {"name": "job", "namespace": "ns"}, "spec": s})
    }

    fn check(spec: Value) -> Decision {
        review(
            &request("Job", "CREATE", job(spec)),
            &view(),
            &AdmissionConfig::default(),
        )
    }

    fn denied(spec: Value, want: &str) {
        let d = check(spec.clone());
        let msg = d.denial().unwrap_or_else(|| panic!("allowed: {spec}"));
        assert!(msg.contains(want), "{msg:?} lacks {want:?}");
    }

    fn allowed(spec: Value) {
        let d = check(spec.clone());
        assert!(d.is_allowed(), "{spec}: {:?}", d.denial());
    }

    #[test]
    fn a_plain_job_is_admitted() {
        allowed(json!({"tasks": [task("a", 2), task("b", 1)], "minAvailable": 3}));
    }

    #[test]
    fn no_tasks() {
        denied(json!({}), "No task specified in job spec");
        denied(json!({"tasks": []}), "No task specified in job spec");
    }

    #[test]
    fn mpi_master_must_exist() {
        denied(
            json!({"plugins": {"mpi": []}, "tasks": [task("worker", 1)]}),
            "mpi master task was not found",
        );
        allowed(
            json!({"plugins": {"mpi": [], "svc": [], "ssh": []}, "tasks": [task("master", 1)]}),
        );
        allowed(
            json!({"plugins": {"mpi": ["--master=lead"], "svc": [], "ssh": []}, "tasks": [task("lead", 1)]}),
        );
        allowed(
            json!({"plugins": {"mpi": ["-master", "lead"], "svc": [], "ssh": []}, "tasks": [task("lead", 1)]}),
        );
        denied(
            json!({"plugins": {"mpi": ["--master=lead"]}, "tasks": [task("master", 1)]}),
            "mpi master",
        );
    }

    #[test]
    fn network_topology_both_tiers() {
        denied(
            json!({"networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"}, "tasks": [task("a", 1)]}),
            "must not specify 'highestTierAllowed' and 'highestTierName'",
        );
        allowed(json!({"networkTopology": {"highestTierAllowed": 1}, "tasks": [task("a", 1)]}));
    }

    #[test]
    fn task_min_available_above_replicas() {
        let mut t = task("a", 1);
        t["minAvailable"] = json!(2);
        denied(
            json!({"tasks": [t]}),
            "'minAvailable' is greater than 'replicas' in task: a, job: job",
        );
    }

    #[test]
    fn duplicated_task_name_stops_the_task_loop() {
        let mut bad = task("a", 1);
        bad["template"]["spec"]["containers"][0]["image"] = json!("");
        let d = check(json!({"tasks": [task("a", 1), task("a", 1), bad]}));
        let msg = d.denial().unwrap();
        assert!(msg.contains("duplicated task name a"), "{msg}");
        assert!(!msg.contains("image"), "{msg}");
    }

    #[test]
    fn policies() {
        let cases = [
            (
                json!([{"event": "PodFailed", "exitCode": 3, "action": "AbortJob"}]),
                "must not specify event and exitCode simultaneously",
            ),
            (
                json!([{"action": "AbortJob"}]),
                "either event and exitCode should be specified",
            ),
            (
                json!([{"event": "Nope", "action": "AbortJob"}]),
                "invalid policy event",
            ),
            (
                json!([{"event": "OutOfSync", "action": "AbortJob"}]),
                "invalid policy event",
            ),
            (
                json!([{"event": "PodFailed", "action": "Explode"}]),
                "invalid policy action",
            ),
            (json!([{"event": "PodFailed"}]), "invalid policy action"),
            (
                json!([{"event": "PodFailed", "action": "SyncJob"}]),
                "invalid policy action",
            ),
            (
                json!([{"event": "PodFailed", "action": "AbortJob"}, {"events": ["PodFailed"], "action": "RestartJob"}]),
                "duplicate event PodFailed",
            ),
            (
                json!([{"exitCode": 0, "action": "AbortJob"}]),
                "0 is not a valid error code",
            ),
            (
                json!([{"exitCode": 5, "action": "AbortJob"}, {"exitCode": 5, "action": "RestartJob"}]),
                "duplicate exitCode 5",
            ),
            // tephra: exit-code actions are checked too.
            (
                json!([{"exitCode": 5, "action": "Explode"}]),
                "invalid policy action",
            ),
            (
                json!([{"event": "*", "action": "AbortJob"}, {"event": "PodFailed", "action": "RestartJob"}]),
                "if there's * here",
            ),
        ];
        for (policies, want) in cases {
            denied(
                json!({"policies": policies.clone(), "tasks": [task("a", 1)]}),
                want,
            );
            let mut t = task("a", 1);
            t["policies"] = policies;
            denied(json!({"tasks": [t]}), want);
        }
        let d = check(
            json!({"policies": [{"event": "Nope", "action": "AbortJob"}], "tasks": [task("a", 1)]}),
        );
        assert!(
            d.denial()
                .unwrap()
                .contains("valid events are [* PodFailed")
        );
        allowed(json!({"policies": [
            {"events": ["PodFailed", "PodFailed"], "action": "RestartJob"},
            {"event": "TaskCompleted", "action": "CompleteJob"},
            {"exitCode": 3, "action": "AbortJob"},
            {"event": "PodPending", "action": "RestartTask", "timeout": "1m"},
        ], "tasks": [task("a", 1)]}));
        allowed(
            json!({"policies": [{"event": "*", "action": "AbortJob"}], "tasks": [task("a", 1)]}),
        );
    }

    #[test]
    fn pending_policy_without_timeout_warns() {
        let d = check(
            json!({"policies": [{"event": "PodPending", "action": "RestartJob"}], "tasks": [task("a", 1)]}),
        );
        assert!(d.is_allowed());
        assert!(d.warnings[0].contains("timeout"), "{:?}", d.warnings);
    }

    #[test]
    fn pod_name_and_job_name_must_be_qualified_names() {
        let long = "x".repeat(70);
        denied(json!({"tasks": [task(&long, 1)]}), "create pod with name");
        let mut j = job(json!({"tasks": [task("a", 1)]}));
        j["metadata"]["name"] = json!("-bad");
        let d = review(
            &request("Job", "CREATE", j),
            &view(),
            &AdmissionConfig::default(),
        );
        assert!(
            d.denial()
                .unwrap()
                .contains("create job with name -bad validate failed")
        );
    }

    #[test]
    fn pod_template_is_validated() {
        let mut t = task("a", 1);
        t["template"]["spec"]["containers"][0]["image"] = json!("");
        denied(
            json!({"tasks": [t]}),
            "spec.tasks[0].template.spec.containers[0].image: Required value",
        );
        let mut t = task("a", 1);
        t["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "-1"}});
        denied(
            json!({"tasks": [t]}),
            "spec.tasks[0].template.spec.containers[0].resources.requests[cpu]",
        );
        let mut t = task("a", 1);
        t["template"]["spec"]["restartPolicy"] = json!("Sometimes");
        denied(json!({"tasks": [t]}), "restartPolicy: Unsupported value");
        let mut t = task("a", 1);
        t["template"].as_object_mut().unwrap().remove("spec");
        denied(
            json!({"tasks": [t]}),
            "spec.tasks[0].template.spec.containers: Required value",
        );
    }

    #[test]
    fn topology_policy_needs_whole_cpus() {
        let mut t = task("a", 1);
        t["topologyPolicy"] = json!("single-numa-node");
        allowed(json!({"tasks": [t.clone()]}));
        t["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "500m"}});
        denied(
            json!({"tasks": [t.clone()]}),
            "the cpu request isn't an integer in spec.tasks[0] container[0]",
        );
        t["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "2"}});
        allowed(json!({"tasks": [t.clone()]}));
        t["topologyPolicy"] = json!("none");
        t["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "500m"}});
        allowed(json!({"tasks": [t]}));
    }

    #[test]
    fn partition_policy() {
        let with = |pp: Value, replicas: i32, min: Option<i32>| {
            let mut t = task("a", replicas);
            t["partitionPolicy"] = pp;
            if let Some(m) = min {
                t["minAvailable"] = json!(m);
            }
            json!({"tasks": [t]})
        };
        denied(
            with(json!({"totalPartitions": 0, "partitionSize": 2}), 4, None),
            "'TotalPartitions' must be greater than 0",
        );
        denied(
            with(json!({"totalPartitions": 2, "partitionSize": 0}), 4, None),
            "'PartitionSize' must be greater than 0",
        );
        denied(
            with(json!({"totalPartitions": 2, "partitionSize": 2}), 5, None),
            "'Replicas' are not equal to TotalPartitions*PartitionSize",
        );
        denied(
            with(
                json!({"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}),
                4,
                Some(4),
            ),
            "'MinAvailable' is not equal to MinPartitions*PartitionSize",
        );
        denied(
            with(
                json!({"totalPartitions": 2, "partitionSize": 2, "networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"}}),
                4,
                None,
            ),
            "highestTierName",
        );
        allowed(with(
            json!({"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}),
            4,
            Some(2),
        ));
        allowed(with(
            json!({"totalPartitions": 2, "partitionSize": 2}),
            4,
            Some(3),
        ));
    }

    #[test]
    fn job_min_available_above_total_replicas() {
        denied(
            json!({"minAvailable": 5, "tasks": [task("a", 2), task("b", 2)]}),
            "job 'minAvailable' should not be greater than total replicas",
        );
    }

    #[test]
    fn unknown_plugin() {
        denied(
            json!({"plugins": {"magic": []}, "tasks": [task("a", 1)]}),
            "unable to find job plugin: magic",
        );
        allowed(
            json!({"plugins": {"env": [], "svc": [], "ssh": [], "hcclrank": []}, "tasks": [task("a", 1)]}),
        );
    }

    #[test]
    fn volumes() {
        let t = || json!([task("a", 1)]);
        denied(
            json!({"volumes": [{"mountPath": "", "volumeClaimName": "p"}], "tasks": t()}),
            "mountPath is required",
        );
        denied(
            json!({"volumes": [{"mountPath": "/a", "volumeClaimName": "p"}, {"mountPath": "/a", "volumeClaimName": "q"}], "tasks": t()}),
            "duplicated mountPath: /a",
        );
        denied(
            json!({"volumes": [{"mountPath": "/a"}], "tasks": t()}),
            "either VolumeClaim or VolumeClaimName must be specified",
        );
        denied(
            json!({"volumes": [{"mountPath": "/a", "volumeClaimName": "p", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}], "tasks": t()}),
            "conflict",
        );
        denied(
            json!({"volumes": [{"mountPath": "/a", "volumeClaimName": "Bad_Name"}], "tasks": t()}),
            "invalid VolumeClaimName Bad_Name",
        );
        allowed(
            json!({"volumes": [{"mountPath": "/a", "volumeClaimName": "p"}, {"mountPath": "/b", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}], "tasks": t()}),
        );
    }

    #[test]
    fn queue_rules() {
        let t = || json!([task("a", 1)]);
        denied(
            json!({"queue": "missing", "tasks": t()}),
            "unable to find job queue",
        );
        denied(
            json!({"queue": "closed", "tasks": t()}),
            "can only submit job to queue with state `Open`, queue `closed` status is `Closed`",
        );
        denied(
            json!({"queue": "root", "tasks": t()}),
            "can not submit job to root queue",
        );
        denied(
            json!({"queue": "parent", "tasks": t()}),
            "can only submit job to leaf queue, queue `parent` has 1 child queues",
        );
        allowed(json!({"queue": "child", "tasks": t()}));
    }

    #[test]
    fn depends_on_must_be_a_dag() {
        let dep = |name: &str, on: &[&str]| {
            let mut t = task(name, 1);
            t["dependsOn"] = json!({"name": on});
            t
        };
        allowed(json!({"tasks": [task("a", 1), dep("b", &["a"]), dep("c", &["a", "b"])]}));
        denied(
            json!({"tasks": [dep("a", &["b"]), dep("b", &["a"])]}),
            "doesn't form a directed acyclic graph",
        );
        denied(
            json!({"tasks": [task("a", 1), dep("b", &["ghost"])]}),
            "directed acyclic graph",
        );
        denied(
            json!({"tasks": [dep("a", &["a"])]}),
            "directed acyclic graph",
        );
    }

    #[test]
    fn problems_are_gathered_into_one_message() {
        let mut t = task("a", 1);
        t["minAvailable"] = json!(3);
        let d = check(json!({"queue": "closed", "plugins": {"magic": []}, "tasks": [t]}));
        let msg = d.denial().unwrap();
        assert!(
            msg.contains("greater than 'replicas'")
                && msg.contains("magic")
                && msg.contains("Closed"),
            "{msg}"
        );
    }

    fn upd(old: Value, new: Value) -> Decision {
        review(
            &update("Job", job(old), job(new)),
            &view(),
            &AdmissionConfig::default(),
        )
    }

    #[test]
    fn update_may_change_replicas_min_available_and_priority_class() {
        let old = json!({"minAvailable": 2, "tasks": [task("a", 2)]});
        let mut t = task("a", 4);
        t["minAvailable"] = json!(3);
        let d = upd(
            old.clone(),
            json!({"minAvailable": 3, "priorityClassName": "high", "tasks": [t]}),
        );
        assert!(d.is_allowed(), "{:?}", d.denial());
        // A closed queue does not block scaling an existing job.
        let d = upd(
            json!({"queue": "closed", "tasks": [task("a", 2)]}),
            json!({"queue": "closed", "tasks": [task("a", 3)]}),
        );
        assert!(d.is_allowed());
    }

    #[test]
    fn update_rules() {
        let old = json!({"minAvailable": 2, "tasks": [task("a", 2)]});
        let cases = [
            (
                json!({"tasks": [task("a", -1)]}),
                "'replicas' must be >= 0 in task: a",
            ),
            (
                json!({"tasks": [{"name": "a", "replicas": 1, "minAvailable": -1, "template": task("a", 1)["template"]}]}),
                "'minAvailable' must be >= 0",
            ),
            (
                json!({"tasks": [{"name": "a", "replicas": 1, "minAvailable": 2, "template": task("a", 1)["template"]}]}),
                "'minAvailable' must be <= 'replicas'",
            ),
            (
                json!({"minAvailable": 9, "tasks": [task("a", 2)]}),
                "must not be greater than total replicas",
            ),
            (
                json!({"minAvailable": -1, "tasks": [task("a", 2)]}),
                "job 'minAvailable' must be >= 0",
            ),
            (
                json!({"networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"}, "tasks": [task("a", 2)]}),
                "highestTierName",
            ),
            (
                json!({"tasks": [task("a", 1), task("b", 1)]}),
                "may not add or remove tasks",
            ),
            (
                json!({"queue": "other", "tasks": [task("a", 2)]}),
                "may not change fields other than",
            ),
            (
                json!({"tasks": [task("renamed", 2)]}),
                "may not change fields other than",
            ),
        ];
        for (new, want) in cases {
            let d = upd(old.clone(), new.clone());
            let msg = d.denial().unwrap_or_else(|| panic!("allowed: {new}"));
            assert!(msg.contains(want), "{msg:?} lacks {want:?}");
        }
    }

    #[test]
    fn update_ignores_generated_pvc_names() {
        let old = json!({"volumes": [{"mountPath": "/a", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}], "tasks": [task("a", 1)]});
        let new = json!({"volumes": [{"mountPath": "/a", "volumeClaimName": "job-pvc-abc", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}], "tasks": [task("a", 1)]});
        assert!(upd(old, new).is_allowed());
    }

    #[test]
    fn other_operations_and_bad_objects() {
        let d = review(
            &request("Job", "DELETE", job(json!({"tasks": []}))),
            &view(),
            &AdmissionConfig::default(),
        );
        assert!(d.denial().unwrap().contains("CREATE' or 'UPDATE"));
        let bad = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"tasks": "nope"}});
        let d = review(
            &request("Job", "CREATE", bad),
            &view(),
            &AdmissionConfig::default(),
        );
        assert!(d.denial().unwrap().contains("cannot decode the Job"));
    }

    #[test]
    fn mpi_flag_parsing() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(mpi_master(&s(&[])), "master");
        assert_eq!(mpi_master(&s(&["--master=m"])), "m");
        assert_eq!(mpi_master(&s(&["--worker=w", "--master", "m"])), "m");
        assert_eq!(mpi_master(&s(&["positional", "--master=m"])), "master");
    }

    fn named(name: &str, spec: Value) -> Decision {
        let mut j = job(spec);
        j["metadata"]["name"] = json!(name);
        review(
            &request("Job", "CREATE", j),
            &view(),
            &AdmissionConfig::default(),
        )
    }

    /// Job and task names as they end up in pod names, host names and the Service name: one
    /// row per rule, with the exact message.
    #[test]
    fn names_as_they_end_up_in_pods_and_services() {
        let svc = json!({"svc": []});
        let long = "t".repeat(70);
        let rows: Vec<(&str, &str, Value, String)> = vec![
            // Volcano's rule: the pod name `{job}-{task}-{index}` is a qualified name.
            (
                "j",
                &long,
                json!(null),
                format!(
                    "create pod with name j-{}-0 validate failed [{}]",
                    "t".repeat(70),
                    qualified_name_errors(&format!("j-{}-0", "t".repeat(70))).join(" ")
                ),
            ),
            // Qualified, but not a pod name (upper case): refused here, not at pod creation.
            (
                "Job",
                "a",
                json!(null),
                format!(
                    "pod name \"Job-a-0\" (job name, task name, index) is invalid: {}",
                    dns1123_subdomain_errors("Job-a-0").join("; ")
                ),
            ),
            // With svc the pod name is its host name: a DNS-1123 label, no dots.
            (
                "my.job",
                "a",
                svc.clone(),
                format!(
                    "pod host name \"my.job-a-0\" (job name, task name, index) is invalid: {}",
                    dns1123_label_errors("my.job-a-0").join("; ")
                ),
            ),
            // With svc the job name is the Service's name: a DNS-1035 label.
            (
                "1job",
                "a",
                svc.clone(),
                format!(
                    "job name \"1job\" is also the name of its Service (svc plugin) and is invalid: {}",
                    dns1035_label_errors("1job").join("; ")
                ),
            ),
            // Volcano's rule for the job name itself.
            (
                "-bad",
                "a",
                json!(null),
                "create job with name -bad validate failed".to_string(),
            ),
        ];
        for (job_name, task_name, plugins, want) in rows {
            let mut spec = json!({"tasks": [task(task_name, 1)]});
            if !plugins.is_null() {
                spec["plugins"] = plugins;
            }
            let d = named(job_name, spec);
            let msg = d
                .denial()
                .unwrap_or_else(|| panic!("{job_name}/{task_name} allowed"));
            assert!(msg.contains(&want), "{msg:?} lacks {want:?}");
        }
        // Without svc a dotted job name is fine; with it, a name starting with a letter is.
        assert!(named("my.job", json!({"tasks": [task("a", 1)]})).is_allowed());
        assert!(
            named(
                "job-1",
                json!({"plugins": {"svc": []}, "tasks": [task("a", 1)]})
            )
            .is_allowed()
        );
        // The distributed-framework plugins imply svc.
        let d = named(
            "1job",
            json!({"plugins": {"pytorch": []}, "tasks": [task("a", 1)]}),
        );
        assert!(d.denial().unwrap().contains("name of its Service"));
    }

    /// The examples: values Volcano refuses (through its CRD schema) are refused here.
    #[test]
    fn values_volcano_refuses_are_refused() {
        let rows = [
            (
                json!({"tasks": [task("a", -1)]}),
                "spec.tasks[0].replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                json!({"minAvailable": -2, "tasks": [task("a", 1)]}),
                "spec.minAvailable: Invalid value: -2: must be greater than or equal to 0",
            ),
            (
                json!({"maxRetry": -1, "tasks": [task("a", 1)]}),
                "spec.maxRetry: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                json!({"tasks": [task("Bad_Name", 1)]}),
                "spec.tasks[0].name: Invalid value: \"Bad_Name\"",
            ),
        ];
        for (spec, want) in rows {
            denied(spec, want);
        }
        // On UPDATE the bounds come before the "may not change" rule, so they are what is said.
        let d = upd(
            json!({"tasks": [task("a", 1)]}),
            json!({"maxRetry": -1, "tasks": [task("a", 1)]}),
        );
        assert_eq!(
            d.denial(),
            Some("spec.maxRetry: Invalid value: -1: must be greater than or equal to 0")
        );
    }

    /// A duplicated event or exit code is said in one sentence, naming it, without the lists of
    /// valid values (which an invalid event or action still gets).
    #[test]
    fn duplicate_policy_messages_are_one_sentence() {
        let d = check(json!({"policies": [
            {"event": "PodFailed", "action": "AbortJob"},
            {"event": "PodFailed", "action": "RestartJob"}], "tasks": [task("a", 1)]}));
        assert_eq!(
            d.denial().unwrap(),
            "duplicate event PodFailed across different policy"
        );
        let d = check(json!({"policies": [
            {"exitCode": 5, "action": "AbortJob"},
            {"exitCode": 5, "action": "RestartJob"}], "tasks": [task("a", 1)]}));
        assert_eq!(d.denial().unwrap(), "duplicate exitCode 5");
        let mut t = task("a", 1);
        t["policies"] = json!([{"event": "PodEvicted", "action": "AbortJob"}, {"events": ["PodEvicted"], "action": "RestartJob"}]);
        let d = check(json!({"tasks": [t]}));
        assert_eq!(
            d.denial().unwrap(),
            "duplicate event PodEvicted across different policy"
        );
        let d = check(
            json!({"policies": [{"event": "Nope", "action": "AbortJob"}], "tasks": [task("a", 1)]}),
        );
        assert!(
            d.denial().unwrap().contains("(valid events are [*"),
            "{:?}",
            d.denial()
        );
    }
}
