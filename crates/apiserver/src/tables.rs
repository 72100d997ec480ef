//! Table columns of built-in kinds as kube-apiserver prints them (`kubectl get`, and `-o wide`
//! for the columns of priority 1): pods, nodes, namespaces, deployments, replicasets,
//! statefulsets and batch jobs. Pure functions of the object; the REST layer wraps them in a
//! `meta.k8s.io/v1` Table.

use serde_json::{Value, json};

/// One column definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    /// Header (kubectl prints it upper-cased).
    pub name: &'static str,
    /// `string`, `integer`, `date`.
    pub kind: &'static str,
    /// 0: always shown; 1: with `-o wide`.
    pub priority: u8,
}

const fn col(name: &'static str, kind: &'static str, priority: u8) -> Column {
    Column {
        name,
        kind,
        priority,
    }
}

/// The columns of a built-in kind (`Name` and `Age` included, where kube-apiserver puts them),
/// or `None` for kinds printed with the generic NAME/AGE columns.
pub fn columns(group: &str, kind: &str) -> Option<&'static [Column]> {
    const NAME: Column = col("Name", "string", 0);
    const AGE: Column = col("Age", "string", 0);
    const POD_COLUMNS: &[Column] = &[
        NAME,
        col("Ready", "string", 0),
        col("Status", "string", 0),
        col("Restarts", "string", 0),
        AGE,
        col("IP", "string", 1),
        col("Node", "string", 1),
        col("Nominated Node", "string", 1),
        col("Readiness Gates", "string", 1),
    ];
    const NODE_COLUMNS: &[Column] = &[
        NAME,
        col("Status", "string", 0),
        col("Roles", "string", 0),
        AGE,
        col("Version", "string", 0),
        col("Internal-IP", "string", 1),
        col("External-IP", "string", 1),
        col("OS-Image", "string", 1),
        col("Kernel-Version", "string", 1),
        col("Container-Runtime", "string", 1),
    ];
    const NAMESPACE_COLUMNS: &[Column] = &[NAME, col("Status", "string", 0), AGE];
    const DEPLOYMENT_COLUMNS: &[Column] = &[
        NAME,
        col("Ready", "string", 0),
        col("Up-to-date", "integer", 0),
        col("Available", "integer", 0),
        AGE,
        col("Containers", "string", 1),
        col("Images", "string", 1),
        col("Selector", "string", 1),
    ];
    const REPLICASET_COLUMNS: &[Column] = &[
        NAME,
        col("Desired", "integer", 0),
        col("Current", "integer", 0),
        col("Ready", "integer", 0),
        AGE,
        col("Containers", "string", 1),
        col("Images", "string", 1),
        col("Selector", "string", 1),
    ];
    const STATEFULSET_COLUMNS: &[Column] = &[
        NAME,
        col("Ready", "string", 0),
        AGE,
        col("Containers", "string", 1),
        col("Images", "string", 1),
    ];
    const JOB_COLUMNS: &[Column] = &[
        NAME,
        col("Status", "string", 0),
        col("Completions", "string", 0),
        col("Duration", "string", 0),
        AGE,
        col("Containers", "string", 1),
        col("Images", "string", 1),
        col("Selector", "string", 1),
    ];
    Some(match (group, kind) {
        ("", "Pod") => POD_COLUMNS,
        ("", "Node") => NODE_COLUMNS,
        ("", "Namespace") => NAMESPACE_COLUMNS,
        ("apps", "Deployment") => DEPLOYMENT_COLUMNS,
        ("apps", "ReplicaSet") => REPLICASET_COLUMNS,
        ("apps", "StatefulSet") => STATEFULSET_COLUMNS,
        ("batch", "Job") => JOB_COLUMNS,
        _ => return None,
    })
}

/// The cells of one object for [`columns`]; `age` is the printed age, `now` the current Unix
/// time in seconds (for a running Job's duration).
pub fn cells(group: &str, kind: &str, v: &Value, age: &str, now: i64) -> Vec<Value> {
    let name = json!(str_at(v, "/metadata/name"));
    let age = json!(age);
    match (group, kind) {
        ("", "Pod") => {
            let (ready, total, restarts) = container_counts(v);
            let gates = v
                .pointer("/spec/readinessGates")
                .and_then(Value::as_array)
                .filter(|g| !g.is_empty())
                .map_or_else(|| "<none>".to_string(), |g| format!("0/{}", g.len()));
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(pod_status(v)),
                json!(restarts),
                age,
                json!(or_none(str_at(v, "/status/podIP"))),
                json!(or_none(str_at(v, "/spec/nodeName"))),
                json!(or_none(str_at(v, "/status/nominatedNodeName"))),
                json!(gates),
            ]
        }
        ("", "Node") => {
            let ready = v
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                })
                .and_then(|c| c.get("status").and_then(Value::as_str));
            let mut status = match ready {
                Some("True") => "Ready".to_string(),
                _ => "NotReady".to_string(),
            };
            if v.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            let roles: Vec<&str> = v
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|l| {
                    l.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                        .collect()
                })
                .unwrap_or_default();
            let address = |t: &str| {
                v.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| {
                        a.iter()
                            .find(|x| x.get("type").and_then(Value::as_str) == Some(t))
                    })
                    .and_then(|x| x.get("address").and_then(Value::as_str))
                    .unwrap_or("<none>")
                    .to_string()
            };
            vec![
                name,
                json!(status),
                json!(if roles.is_empty() {
                    "<none>".to_string()
                } else {
                    roles.join(",")
                }),
                age,
                json!(str_at(v, "/status/nodeInfo/kubeletVersion")),
                json!(address("InternalIP")),
                json!(address("ExternalIP")),
                json!(or_none(str_at(v, "/status/nodeInfo/osImage"))),
                json!(or_none(str_at(v, "/status/nodeInfo/kernelVersion"))),
                json!(or_none(str_at(
                    v,
                    "/status/nodeInfo/containerRuntimeVersion"
                ))),
            ]
        }
        ("", "Namespace") => vec![name, json!(str_at(v, "/status/phase")), age],
        ("apps", "Deployment") => {
            let (c, i) = containers_images(v);
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    int_at(v, "/status/readyReplicas"),
                    replicas(v)
                )),
                json!(int_at(v, "/status/updatedReplicas")),
                json!(int_at(v, "/status/availableReplicas")),
                age,
                json!(c),
                json!(i),
                json!(selector(v)),
            ]
        }
        ("apps", "ReplicaSet") => {
            let (c, i) = containers_images(v);
            vec![
                name,
                json!(replicas(v)),
                json!(int_at(v, "/status/replicas")),
                json!(int_at(v, "/status/readyReplicas")),
                age,
                json!(c),
                json!(i),
                json!(selector(v)),
            ]
        }
        ("apps", "StatefulSet") => {
            let (c, i) = containers_images(v);
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    int_at(v, "/status/readyReplicas"),
                    replicas(v)
                )),
                age,
                json!(c),
                json!(i),
            ]
        }
        ("batch", "Job") => {
            let (c, i) = containers_images(v);
            let completions = v
                .pointer("/spec/completions")
                .and_then(Value::as_i64)
                .map_or_else(
                    || format!("{}/1 of {}", int_at(v, "/status/succeeded"), parallelism(v)),
                    |n| format!("{}/{n}", int_at(v, "/status/succeeded")),
                );
            let start = time_at(v, "/status/startTime");
            let end = time_at(v, "/status/completionTime").unwrap_or(now);
            let duration =
                start.map_or_else(String::new, |s| crate::human_age(end.saturating_sub(s)));
            vec![
                name,
                json!(job_status(v)),
                json!(completions),
                json!(duration),
                age,
                json!(c),
                json!(i),
                json!(selector(v)),
            ]
        }
        _ => vec![name, age],
    }
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.into()
    }
}

fn int_at(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn replicas(v: &Value) -> i64 {
    v.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn parallelism(v: &Value) -> i64 {
    v.pointer("/spec/parallelism")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn time_at(v: &Value, p: &str) -> Option<i64> {
    v.pointer(p)
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map(|t| t.as_second())
}

/// Ready containers, containers, and restarts summed, from the container statuses.
fn container_counts(v: &Value) -> (usize, usize, i64) {
    let total = v
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = v
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts = statuses
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .fold(0i64, i64::saturating_add);
    (ready, total, restarts)
}

/// kubectl's STATUS of a pod: `Terminating`, a container's waiting or terminated reason, or
/// the phase.
pub fn pod_status(v: &Value) -> String {
    if v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return "Terminating".into();
    }
    let mut status = v
        .pointer("/status/reason")
        .and_then(Value::as_str)
        .or_else(|| v.pointer("/status/phase").and_then(Value::as_str))
        .unwrap_or("Pending")
        .to_string();
    if let Some(cs) = v
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
    {
        for c in cs.iter().rev() {
            let waiting = c.pointer("/state/waiting/reason").and_then(Value::as_str);
            let terminated = c
                .pointer("/state/terminated/reason")
                .and_then(Value::as_str);
            if let Some(r) = waiting.or(terminated).filter(|r| !r.is_empty()) {
                status = r.to_string();
                break;
            }
        }
    }
    status
}

fn job_status(v: &Value) -> &'static str {
    let has = |t: &str| {
        v.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some(t)
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
    };
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if has("Suspended") {
        "Suspended"
    } else {
        "Running"
    }
}

fn containers_images(v: &Value) -> (String, String) {
    let cs = v
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let field = |k: &str| {
        cs.iter()
            .map(|c| c.get(k).and_then(Value::as_str).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(",")
    };
    (field("name"), field("image"))
}

fn selector(v: &Value) -> String {
    let labels: Vec<String> = v
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if labels.is_empty() {
        "<none>".into()
    } else {
        labels.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(group: &str, kind: &str, wide: bool) -> Vec<String> {
        columns(group, kind)
            .unwrap()
            .iter()
            .filter(|c| wide || c.priority == 0)
            .map(|c| c.name.to_uppercase())
            .collect()
    }

    #[test]
    fn pod_columns_are_kubectls() {
        assert_eq!(
            headers("", "Pod", false),
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        );
        assert_eq!(
            headers("", "Pod", true),
            [
                "NAME",
                "READY",
                "STATUS",
                "RESTARTS",
                "AGE",
                "IP",
                "NODE",
                "NOMINATED NODE",
                "READINESS GATES"
            ]
        );
        assert_eq!(
            headers("apps", "Deployment", false),
            ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
        );
        assert_eq!(
            headers("batch", "Job", false),
            ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
        );
        assert!(columns("", "ConfigMap").is_none());
    }

    #[test]
    fn pod_cells_read_like_kubectl() {
        let p = json!({
            "metadata": {"name": "p"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.2", "containerStatuses": [
                {"ready": true, "restartCount": 2, "state": {"running": {}}},
                {"ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
            ]},
        });
        let c = cells("", "Pod", &p, "5m", 0);
        assert_eq!(
            c,
            vec![
                json!("p"),
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!(3),
                json!("5m"),
                json!("10.0.0.2"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let done = json!({"status": {"phase": "Succeeded", "containerStatuses": [
            {"state": {"terminated": {"reason": "Completed"}}}]}});
        assert_eq!(pod_status(&done), "Completed");
        let going = json!({"metadata": {"deletionTimestamp": "t"}, "status": {"phase": "Running"}});
        assert_eq!(pod_status(&going), "Terminating");
        // Odd shapes print something, never panic.
        assert_eq!(
            cells("", "Pod", &json!({"spec": 5, "status": "x"}), "1s", 0).len(),
            9
        );
    }

    #[test]
    fn workload_cells_show_ready_over_desired() {
        let d = json!({"metadata": {"name": "d"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        assert_eq!(
            cells("apps", "Deployment", &d, "1m", 0),
            vec![
                json!("d"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("1m"),
                json!("c"),
                json!("nginx"),
                json!("app=web")
            ]
        );
        let j = json!({"metadata": {"name": "j"}, "spec": {"completions": 2},
            "status": {"succeeded": 2, "startTime": "2024-01-01T00:00:00Z",
                       "completionTime": "2024-01-01T00:00:07Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}});
        let c = cells("batch", "Job", &j, "1m", 0);
        assert_eq!(c[1], json!("Complete"));
        assert_eq!(c[2], json!("2/2"));
        assert_eq!(c[3], json!("7s"));
    }
}
