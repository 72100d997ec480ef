//! Table columns of built-in kinds as kube-apiserver prints them (`kubectl get`, and `-o wide`
//! for the columns of priority 1), after k8s.io/kubernetes `pkg/printers/internalversion`:
//! pods, nodes, namespaces, services, endpoints, configmaps, secrets, service accounts, events,
//! deployments, replicasets, statefulsets, daemonsets, jobs, leases, priorityclasses, webhook
//! configurations, and CustomResourceDefinitions as apiextensions-apiserver prints them; every
//! other built-in kind (roles, ...) gets kube-apiserver's default table (`NAME`, `CREATED AT`). Pure functions of the object; the REST layer wraps them in a
//! `meta.k8s.io/v1` Table.
//!
//! Each column carries the function that prints its cell, so a column shared by several kinds
//! (`CONTAINERS`, `IMAGES`, `SELECTOR`, ...) is written once.

use serde_json::{Value, json};

/// What a cell is printed from: the object, its printed age, and now (Unix seconds).
pub struct Row<'a> {
    /// The object.
    pub v: &'a Value,
    /// Its age as kubectl prints it.
    pub age: &'a str,
    /// The current Unix time in seconds.
    pub now: i64,
}

/// One column definition and how its cell is printed.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// Header (kubectl prints it upper-cased).
    pub name: &'static str,
    /// `string`, `integer`, `boolean`, `date`.
    pub kind: &'static str,
    /// 0: always shown; 1: with `-o wide`.
    pub priority: u8,
    /// The cell of one object.
    pub cell: fn(&Row) -> Value,
}

const fn col(name: &'static str, kind: &'static str, cell: fn(&Row) -> Value) -> Column {
    Column {
        name,
        kind,
        priority: 0,
        cell,
    }
}

const fn wide(name: &'static str, cell: fn(&Row) -> Value) -> Column {
    Column {
        name,
        kind: "string",
        priority: 1,
        cell,
    }
}

/// A string cell read at a JSON pointer (empty when absent).
macro_rules! text {
    ($name:expr, $ptr:expr) => {
        col($name, "string", |r| json!(str_at(r.v, $ptr)))
    };
}

/// An integer cell read at a JSON pointer (0 when absent).
macro_rules! int {
    ($name:expr, $ptr:expr) => {
        col($name, "integer", |r| json!(int_at(r.v, $ptr)))
    };
}

const NAME: Column = col("Name", "string", |r| json!(str_at(r.v, "/metadata/name")));
const AGE: Column = col("Age", "string", |r| json!(r.age));
const CONTAINERS: Column = wide("Containers", |r| json!(containers_images(r.v).0));
const IMAGES: Column = wide("Images", |r| json!(containers_images(r.v).1));
const SELECTOR: Column = wide("Selector", |r| json!(selector(r.v)));
const CREATED_AT: Column = col("Created At", "date", |r| {
    json!(str_at(r.v, "/metadata/creationTimestamp"))
});
const WEBHOOKS: &[Column] = &[
    NAME,
    col("Webhooks", "integer", |r| json!(len_at(r.v, "/webhooks"))),
    AGE,
];
/// kube-apiserver's default table, for kinds without a printer.
const DEFAULT: &[Column] = &[NAME, CREATED_AT];
/// apiextensions-apiserver's table of CustomResourceDefinitions (since 1.37).
const CRD: &[Column] = &[
    NAME,
    text!("Scope", "/spec/scope"),
    col("Versions", "string", |r| json!(served_versions(r.v))),
    CREATED_AT,
    wide("Group", |r| json!(str_at(r.v, "/spec/group"))),
    wide("Kind", |r| json!(str_at(r.v, "/spec/names/kind"))),
    wide("ShortNames", |r| {
        let names: Vec<&str> =
            r.v.pointer("/spec/names/shortNames")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
        json!(names.join(","))
    }),
    Column {
        name: "Established",
        kind: "boolean",
        priority: 1,
        cell: |r| {
            let established =
                r.v.pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Established" && c["status"] == "True");
            json!(established)
        },
    },
];

/// A CRD's served versions, sorted, the storage one marked `(storage)`, comma-separated.
fn served_versions(v: &Value) -> String {
    let mut versions: Vec<String> = v
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v["served"] == true)
        .map(|v| {
            let name = v["name"].as_str().unwrap_or_default();
            if v["storage"] == true {
                format!("{name}(storage)")
            } else {
                name.to_string()
            }
        })
        .collect();
    versions.sort();
    versions.join(",")
}

const POD: &[Column] = &[
    NAME,
    col("Ready", "string", |r| {
        let (ready, total, _) = container_counts(r.v);
        json!(format!("{ready}/{total}"))
    }),
    col("Status", "string", |r| json!(pod_status(r.v))),
    col("Restarts", "string", |r| json!(container_counts(r.v).2)),
    AGE,
    wide("IP", |r| json!(or_none(str_at(r.v, "/status/podIP")))),
    wide("Node", |r| json!(or_none(str_at(r.v, "/spec/nodeName")))),
    wide("Nominated Node", |r| {
        json!(or_none(str_at(r.v, "/status/nominatedNodeName")))
    }),
    wide("Readiness Gates", |r| {
        let n = len_at(r.v, "/spec/readinessGates");
        json!(if n == 0 {
            "<none>".to_string()
        } else {
            format!("0/{n}")
        })
    }),
];

const NODE: &[Column] = &[
    NAME,
    col("Status", "string", |r| json!(node_status(r.v))),
    col("Roles", "string", |r| json!(node_roles(r.v))),
    AGE,
    text!("Version", "/status/nodeInfo/kubeletVersion"),
    wide("Internal-IP", |r| json!(node_address(r.v, "InternalIP"))),
    wide("External-IP", |r| json!(node_address(r.v, "ExternalIP"))),
    wide("OS-Image", |r| {
        json!(or_none(str_at(r.v, "/status/nodeInfo/osImage")))
    }),
    wide("Kernel-Version", |r| {
        json!(or_none(str_at(r.v, "/status/nodeInfo/kernelVersion")))
    }),
    wide("Container-Runtime", |r| {
        json!(or_none(str_at(
            r.v,
            "/status/nodeInfo/containerRuntimeVersion"
        )))
    }),
];

const NAMESPACE: &[Column] = &[NAME, text!("Status", "/status/phase"), AGE];

const SERVICE: &[Column] = &[
    NAME,
    text!("Type", "/spec/type"),
    col("Cluster-IP", "string", |r| {
        json!(
            r.v.pointer("/spec/clusterIPs/0")
                .and_then(Value::as_str)
                .unwrap_or("<none>")
        )
    }),
    col("External-IP", "string", |r| json!(service_external_ip(r.v))),
    col("Port(s)", "string", |r| json!(service_ports(r.v))),
    AGE,
    wide("Selector", |r| json!(labels_at(r.v, "/spec/selector"))),
];

const ENDPOINTS: &[Column] = &[
    NAME,
    col("Endpoints", "string", |r| json!(endpoints(r.v))),
    AGE,
];

const CONFIGMAP: &[Column] = &[
    NAME,
    col("Data", "string", |r| {
        json!(len_at(r.v, "/data") + len_at(r.v, "/binaryData"))
    }),
    AGE,
];

const SECRET: &[Column] = &[
    NAME,
    text!("Type", "/type"),
    col("Data", "string", |r| json!(len_at(r.v, "/data"))),
    AGE,
];

const SERVICE_ACCOUNT: &[Column] = &[NAME, AGE];

const EVENT: &[Column] = &[
    col("Last Seen", "string", |r| json!(event_times(r).1)),
    text!("Type", "/type"),
    text!("Reason", "/reason"),
    col("Object", "string", |r| json!(event_target(r.v))),
    wide("Subobject", |r| {
        json!(str_at(r.v, "/involvedObject/fieldPath"))
    }),
    wide("Source", |r| json!(event_source(r.v))),
    col("Message", "string", |r| {
        json!(str_at(r.v, "/message").trim())
    }),
    wide("First Seen", |r| json!(event_times(r).0)),
    wide("Count", |r| json!(event_count(r.v))),
    wide("Name", |r| json!(str_at(r.v, "/metadata/name"))),
];

const DEPLOYMENT: &[Column] = &[
    NAME,
    col("Ready", "string", |r| {
        json!(format!(
            "{}/{}",
            int_at(r.v, "/status/readyReplicas"),
            replicas(r.v)
        ))
    }),
    col("Up-to-date", "string", |r| {
        json!(int_at(r.v, "/status/updatedReplicas"))
    }),
    col("Available", "string", |r| {
        json!(int_at(r.v, "/status/availableReplicas"))
    }),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const REPLICASET: &[Column] = &[
    NAME,
    col("Desired", "integer", |r| json!(replicas(r.v))),
    int!("Current", "/status/replicas"),
    int!("Ready", "/status/readyReplicas"),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const STATEFULSET: &[Column] = &[
    NAME,
    col("Ready", "string", |r| {
        json!(format!(
            "{}/{}",
            int_at(r.v, "/status/readyReplicas"),
            replicas(r.v)
        ))
    }),
    AGE,
    CONTAINERS,
    IMAGES,
];

const DAEMONSET: &[Column] = &[
    NAME,
    int!("Desired", "/status/desiredNumberScheduled"),
    int!("Current", "/status/currentNumberScheduled"),
    int!("Ready", "/status/numberReady"),
    int!("Up-to-date", "/status/updatedNumberScheduled"),
    int!("Available", "/status/numberAvailable"),
    col("Node Selector", "string", |r| {
        json!(labels_at(r.v, "/spec/template/spec/nodeSelector"))
    }),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const JOB: &[Column] = &[
    NAME,
    col("Status", "string", |r| json!(job_status(r.v))),
    col("Completions", "string", |r| {
        let done = int_at(r.v, "/status/succeeded");
        json!(
            match r.v.pointer("/spec/completions").and_then(Value::as_i64) {
                Some(n) => format!("{done}/{n}"),
                None => format!("{done}/1 of {}", parallelism(r.v)),
            }
        )
    }),
    col("Duration", "string", |r| {
        let start = time_at(r.v, "/status/startTime");
        let end = time_at(r.v, "/status/completionTime").unwrap_or(r.now);
        json!(start.map_or_else(String::new, |s| { human_duration(end.saturating_sub(s)) }))
    }),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

const LEASE: &[Column] = &[NAME, text!("Holder", "/spec/holderIdentity"), AGE];

const PRIORITY_CLASS: &[Column] = &[
    NAME,
    int!("Value", "/value"),
    col("Global-Default", "boolean", |r| {
        json!(
            r.v.get("globalDefault")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        )
    }),
    AGE,
    // Priority 0 although printers.go adds the cell only for wide output: kube-apiserver
    // builds tables wide, so kubectl shows it always.
    text!("PreemptionPolicy", "/preemptionPolicy"),
];

/// The columns of a built-in kind, or `None` for custom resources (printed from their CRD's
/// printer columns). `custom` says whether the kind is a custom resource.
pub fn columns_for(group: &str, kind: &str, custom: bool) -> Option<&'static [Column]> {
    if custom {
        return None;
    }
    Some(match (group, kind) {
        ("", "Pod") => POD,
        ("", "Node") => NODE,
        ("", "Namespace") => NAMESPACE,
        ("", "Service") => SERVICE,
        ("", "Endpoints") => ENDPOINTS,
        ("", "ConfigMap") => CONFIGMAP,
        ("", "Secret") => SECRET,
        ("", "ServiceAccount") => SERVICE_ACCOUNT,
        ("", "Event") => EVENT,
        ("apps", "Deployment") => DEPLOYMENT,
        ("apps", "ReplicaSet") => REPLICASET,
        ("apps", "StatefulSet") => STATEFULSET,
        ("apps", "DaemonSet") => DAEMONSET,
        ("batch", "Job") => JOB,
        ("coordination.k8s.io", "Lease") => LEASE,
        ("scheduling.k8s.io", "PriorityClass") => PRIORITY_CLASS,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => CRD,
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration",
        ) => WEBHOOKS,
        _ => DEFAULT,
    })
}

/// The columns of a built-in kind (every group but custom ones: see [`columns_for`]).
pub fn columns(group: &str, kind: &str) -> Option<&'static [Column]> {
    columns_for(group, kind, false)
}

/// The cells of one object for [`columns`]; `age` is the printed age, `now` the current Unix
/// time in seconds (for a running Job's duration).
pub fn cells(group: &str, kind: &str, v: &Value, age: &str, now: i64) -> Vec<Value> {
    let row = Row { v, age, now };
    columns(group, kind)
        .unwrap_or(DEFAULT)
        .iter()
        .map(|c| (c.cell)(&row))
        .collect()
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

/// kubectl's STATUS of a pod: `Terminating`, a container's waiting or terminated reason,
/// `SchedulingGated`, or the phase.
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
    // kubectl: a pod whose PodScheduled condition says SchedulingGated shows that.
    if v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("PodScheduled")
                    && c.get("reason").and_then(Value::as_str) == Some("SchedulingGated")
            })
        })
    {
        status = "SchedulingGated".to_string();
    }
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

/// A duration as kubectl prints ages (apimachinery's `HumanDuration`): `45s`, `3m20s`, `25m`,
/// `5h10m`, `12h`, `3d4h`, `30d`, `2y10d`, `9y`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let minutes = s / 60;
    if minutes < 10 {
        return match s % 60 {
            0 => format!("{minutes}m"),
            r => format!("{minutes}m{r}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = s / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn len_at(v: &Value, p: &str) -> usize {
    match v.pointer(p) {
        Some(Value::Array(a)) => a.len(),
        Some(Value::Object(m)) => m.len(),
        _ => 0,
    }
}

/// `a=b,c=d` from a string map (`labels.FormatLabels`), `<none>` when empty.
fn labels_at(v: &Value, p: &str) -> String {
    let pairs: Vec<String> = v
        .pointer(p)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, x)| format!("{k}={}", x.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

fn node_status(v: &Value) -> String {
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
    status
}

fn node_roles(v: &Value) -> String {
    let roles: Vec<&str> = v
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    }
}

fn node_address(v: &Value, t: &str) -> String {
    v.pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|x| x.get("type").and_then(Value::as_str) == Some(t))
        })
        .and_then(|x| x.get("address").and_then(Value::as_str))
        .unwrap_or("<none>")
        .to_string()
}

fn strings_at(v: &Value, p: &str) -> Vec<String> {
    crate::string_list(v.pointer(p))
}

/// kubectl's EXTERNAL-IP of a service (`getServiceExternalIP`, narrow form).
fn service_external_ip(v: &Value) -> String {
    let external = strings_at(v, "/spec/externalIPs");
    match str_at(v, "/spec/type") {
        "ClusterIP" | "NodePort" | "" if external.is_empty() => "<none>".into(),
        "ClusterIP" | "NodePort" | "" => external.join(","),
        "LoadBalancer" => {
            let mut ips: Vec<String> = v
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|i| {
                            i.get("ip")
                                .or_else(|| i.get("hostname"))
                                .and_then(Value::as_str)
                                .map(str::to_string)
                        })
                        .collect()
                })
                .unwrap_or_default();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => str_at(v, "/spec/externalName").to_string(),
        _ => "<unknown>".into(),
    }
}

/// `80/TCP,443:30443/TCP`, `<none>` without ports.
fn service_ports(v: &Value) -> String {
    let ports: Vec<String> = v
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|p| {
                    let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                    let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) {
                        Some(np) => format!("{port}:{np}/{proto}"),
                        None => format!("{port}/{proto}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    }
}

/// The first three `ip:port` of an Endpoints object and how many more (`formatEndpoints`).
fn endpoints(v: &Value) -> String {
    let Some(subsets) = v
        .get("subsets")
        .and_then(Value::as_array)
        .filter(|s| !s.is_empty())
    else {
        return "<none>".into();
    };
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut count = 0usize;
    let mut more = false;
    for ss in subsets {
        let addrs: Vec<&str> = ss
            .get("addresses")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|x| x.get("ip").and_then(Value::as_str).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        let ports: Vec<i64> = ss
            .get("ports")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|p| p.get("port").and_then(Value::as_i64).unwrap_or(0))
                    .collect()
            })
            .unwrap_or_default();
        let shown: Vec<String> = if ports.is_empty() {
            addrs.iter().map(|a| a.to_string()).collect()
        } else {
            ports
                .iter()
                .flat_map(|p| {
                    addrs.iter().map(move |a| {
                        if a.contains(':') {
                            format!("[{a}]:{p}")
                        } else {
                            format!("{a}:{p}")
                        }
                    })
                })
                .collect()
        };
        count += shown.len();
        for s in shown {
            if list.len() == MAX {
                more = true;
                break;
            }
            list.push(s);
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

/// An event's printed first and last times (`<unknown>` when unset).
fn event_times(r: &Row) -> (String, String) {
    let since = |p: &str| time_at(r.v, p).map(|t| human_duration(r.now.saturating_sub(t)));
    let unknown = || "<unknown>".to_string();
    let first = since("/firstTimestamp")
        .or_else(|| since("/eventTime"))
        .unwrap_or_else(unknown);
    let last = since("/series/lastObservedTime")
        .or_else(|| since("/lastTimestamp"))
        .unwrap_or_else(|| first.clone());
    (first, last)
}

fn event_count(v: &Value) -> i64 {
    v.pointer("/series/count")
        .and_then(Value::as_i64)
        .or_else(|| v.get("count").and_then(Value::as_i64).filter(|c| *c != 0))
        .unwrap_or(1)
}

/// `pod/name`, or the lower-cased kind alone.
fn event_target(v: &Value) -> String {
    let kind = str_at(v, "/involvedObject/kind").to_lowercase();
    match str_at(v, "/involvedObject/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    }
}

/// `component, host` (`formatEventSource`).
fn event_source(v: &Value) -> String {
    let first = |a: &str, b: &str| {
        let x = str_at(v, a);
        if x.is_empty() { str_at(v, b) } else { x }.to_string()
    };
    let component = first("/source/component", "/reportingComponent");
    let host = first("/source/host", "/reportingInstance");
    if host.is_empty() {
        component
    } else {
        format!("{component}, {host}")
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
        assert_eq!(headers("", "ConfigMap", false), ["NAME", "DATA", "AGE"]);
    }

    #[test]
    fn a_crd_row_reads_as_apiextensions_prints_it() {
        let crd = json!({
            "metadata": {"name": "jobs.batch.volcano.sh", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"group": "batch.volcano.sh", "scope": "Namespaced",
                "names": {"kind": "Job", "shortNames": ["vcjob", "vj"]},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true},
                             {"name": "v0", "served": false, "storage": false}]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]}
        });
        assert_eq!(
            cells(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                &crd,
                "1d",
                0
            ),
            vec![
                json!("jobs.batch.volcano.sh"),
                json!("Namespaced"),
                json!("v1alpha1(storage)"),
                json!("2026-01-01T00:00:00Z"),
                json!("batch.volcano.sh"),
                json!("Job"),
                json!("vcjob,vj"),
                json!(true),
            ]
        );
    }

    /// Headers of every kind with a printer, narrow and `-o wide`, as kube-apiserver's
    /// printers.go declares them.
    #[test]
    fn every_printed_kind_has_kube_apiservers_headers() {
        let cases: &[(&str, &str, &str, &str)] = &[
            (
                "",
                "Node",
                "NAME STATUS ROLES AGE VERSION",
                "INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME",
            ),
            ("", "Namespace", "NAME STATUS AGE", ""),
            (
                "",
                "Service",
                "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE",
                "SELECTOR",
            ),
            ("", "Endpoints", "NAME ENDPOINTS AGE", ""),
            ("", "Secret", "NAME TYPE DATA AGE", ""),
            ("", "ServiceAccount", "NAME AGE", ""),
            (
                "",
                "Event",
                "LAST SEEN TYPE REASON OBJECT MESSAGE",
                "SUBOBJECT SOURCE FIRST SEEN COUNT NAME",
            ),
            (
                "apps",
                "ReplicaSet",
                "NAME DESIRED CURRENT READY AGE",
                "CONTAINERS IMAGES SELECTOR",
            ),
            ("apps", "StatefulSet", "NAME READY AGE", "CONTAINERS IMAGES"),
            (
                "apps",
                "DaemonSet",
                "NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE",
                "CONTAINERS IMAGES SELECTOR",
            ),
            ("coordination.k8s.io", "Lease", "NAME HOLDER AGE", ""),
            (
                "scheduling.k8s.io",
                "PriorityClass",
                "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY",
                "",
            ),
            (
                "admissionregistration.k8s.io",
                "MutatingWebhookConfiguration",
                "NAME WEBHOOKS AGE",
                "",
            ),
            (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
                "NAME WEBHOOKS AGE",
                "",
            ),
            (
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                "NAME SCOPE VERSIONS CREATED AT",
                "GROUP KIND SHORTNAMES ESTABLISHED",
            ),
            (
                "rbac.authorization.k8s.io",
                "ClusterRole",
                "NAME CREATED AT",
                "",
            ),
        ];
        for (group, kind, narrow, extra) in cases {
            let split = |s: &str| -> Vec<String> {
                // Headers hold single spaces themselves ("LAST SEEN"), so compare joined.
                vec![s.to_string()]
            };
            assert_eq!(
                split(&headers(group, kind, false).join(" ")),
                split(narrow),
                "{kind}"
            );
            let wide = headers(group, kind, true).join(" ");
            let want = if extra.is_empty() {
                narrow.to_string()
            } else {
                format!("{narrow} {extra}")
            };
            if *kind != "Event" {
                assert_eq!(wide, want, "{kind} -o wide");
            }
        }
        // Events interleave: wide adds columns between the narrow ones.
        assert_eq!(
            headers("", "Event", true).join(" "),
            "LAST SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST SEEN COUNT NAME"
        );
        assert!(columns_for("batch.volcano.sh", "Job", true).is_none());
    }

    #[test]
    fn service_endpoint_event_and_other_cells() {
        let svc = json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "clusterIPs": ["10.0.0.1"],
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "nodePort": 30443, "protocol": "TCP"}],
            "selector": {"app": "web"}}});
        assert_eq!(
            cells("", "Service", &svc, "1m", 0),
            vec![
                json!("s"),
                json!("NodePort"),
                json!("10.0.0.1"),
                json!("<none>"),
                json!("80/TCP,443:30443/TCP"),
                json!("1m"),
                json!("app=web")
            ]
        );
        let lb = json!({"spec": {"type": "LoadBalancer"}});
        assert_eq!(service_external_ip(&lb), "<pending>");
        let ep = json!({"subsets": [{"addresses": [{"ip": "1.1.1.1"}, {"ip": "2.2.2.2"}],
            "ports": [{"port": 80}, {"port": 81}]}]});
        assert_eq!(
            endpoints(&ep),
            "1.1.1.1:80,2.2.2.2:80,1.1.1.1:81 + 1 more..."
        );
        assert_eq!(endpoints(&json!({})), "<none>");
        let ev = json!({"metadata": {"name": "e.1"}, "type": "Normal", "reason": "Scheduled",
            "message": " bound \n", "involvedObject": {"kind": "Pod", "name": "p"},
            "source": {"component": "scheduler"}, "firstTimestamp": "2024-01-01T00:00:00Z",
            "lastTimestamp": "2024-01-01T00:00:30Z", "count": 2});
        let now = "2024-01-01T00:01:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        let c = cells("", "Event", &ev, "1m", now);
        assert_eq!(c[0], json!("30s"));
        assert_eq!(c[3], json!("pod/p"));
        assert_eq!(c[5], json!("scheduler"));
        assert_eq!(c[7], json!("60s"));
        assert_eq!(c[8], json!(2));
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}});
        assert_eq!(cells("", "ConfigMap", &cm, "1s", 0)[1], json!(3));
        let pc = json!({"metadata": {"name": "high"}, "value": 1000, "globalDefault": true});
        assert_eq!(
            cells("scheduling.k8s.io", "PriorityClass", &pc, "1s", 0)[1..3],
            [json!(1000), json!(true)]
        );
        let role = json!({"metadata": {"name": "x", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(
            cells("rbac.authorization.k8s.io", "ClusterRole", &role, "1s", 0),
            vec![json!("x"), json!("2024-01-01T00:00:00Z")]
        );
    }

    #[test]
    fn ages_read_like_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (180, "3m"),
            (900, "15m"),
            (4 * 3600 + 60, "4h1m"),
            (20 * 3600, "20h"),
            (3 * 86400 + 7200, "3d2h"),
            (30 * 86400, "30d"),
            (800 * 86400, "2y70d"),
            (3650 * 86400, "10y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
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
