//! The kubelet stand-in: a pod bound to an existing node becomes `Running` with ready
//! containers. With `simulation.tephra.io/run-seconds: "S"` its containers end after S seconds
//! with `simulation.tephra.io/exit-code` (default 0); the pod becomes `Succeeded` (0) or
//! `Failed`, except that `restartPolicy` OnFailure (non-zero exit) or Always (any exit)
//! restarts the containers (`restartCount` + 1) and runs them again.
//!
//! Its writes go through the same update path as clients' (events, admission) but are never
//! hit by injected faults. Simplifications: all containers of a pod run and end together; init
//! containers are reported completed at start; there is no graceful termination.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::ops::{ObjectRef, WriteOptions};
use super::prepare::Endpoint;
use super::store::{EventType, GroupResource, Stored};
use super::{ApiServer, Caller, now_rfc3339};

/// Run-time annotation.
pub const RUN_SECONDS: &str = "simulation.tephra.io/run-seconds";
/// Exit-code annotation.
pub const EXIT_CODE: &str = "simulation.tephra.io/exit-code";

/// What happens when a pod's containers end, decided from plain data.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// Pod phase Succeeded.
    Succeeded,
    /// Pod phase Failed.
    Failed,
    /// Containers restart.
    Restart,
}

/// The kubelet's decision for an exit code under a restart policy.
pub fn ending(restart_policy: &str, exit_code: i64) -> Ending {
    match (restart_policy, exit_code) {
        ("Always", _) => Ending::Restart,
        ("OnFailure", c) if c != 0 => Ending::Restart,
        (_, 0) => Ending::Succeeded,
        _ => Ending::Failed,
    }
}

/// The longest simulated run time: larger `run-seconds` values are cut to it (a year; a pod
/// meant to run "for ever" omits the annotation).
pub const MAX_RUN_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// The simulated run time (at most [`MAX_RUN_SECONDS`]) and exit code of a pod, from its
/// annotations. A run time that is not a non-negative number is ignored (runs for ever).
pub fn simulation(pod: &Value) -> (Option<Duration>, i64) {
    let ann = |k: &str| {
        pod.pointer("/metadata/annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
    };
    let secs = ann(RUN_SECONDS)
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::from_secs_f64(s.min(MAX_RUN_SECONDS)));
    let code = ann(EXIT_CODE)
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or(0);
    (secs, code)
}

fn container_names(pod: &Value, key: &str) -> Vec<(String, String)> {
    pod.pointer(&format!("/spec/{key}"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    let s = |k: &str| {
                        c.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    (s("name"), s("image"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The status of a pod whose containers (re)started now.
pub fn running_status(
    pod: &Value,
    host_ip: &str,
    pod_ip: &str,
    now: &str,
    restarts: i64,
    last_exit: Option<i64>,
) -> Value {
    let uid = pod
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let statuses: Vec<Value> = container_names(pod, "containers")
        .into_iter()
        .map(|(name, image)| {
            let mut s = json!({
                "name": name, "image": image, "imageID": format!("sim://{image}"),
                "containerID": format!("tephra://{uid}/{name}/{restarts}"),
                "ready": true, "started": true, "restartCount": restarts,
                "state": {"running": {"startedAt": now}},
            });
            if let Some(code) = last_exit {
                s["lastState"] = json!({"terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" }, "finishedAt": now}});
            }
            s
        })
        .collect();
    let inits: Vec<Value> = container_names(pod, "initContainers")
        .into_iter()
        .map(|(name, image)| {
            json!({"name": name, "image": image, "ready": true, "restartCount": 0,
                   "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}})
        })
        .collect();
    let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    let start = pod
        .pointer("/status/startTime")
        .cloned()
        .unwrap_or(json!(now));
    let mut st = json!({
        "phase": "Running",
        "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "startTime": start,
        "containerStatuses": statuses,
        "qosClass": pod.pointer("/status/qosClass").cloned().unwrap_or(json!("BestEffort")),
    });
    if !inits.is_empty() {
        st["initContainerStatuses"] = json!(inits);
    }
    st
}

/// The status of a pod whose containers ended for good.
pub fn finished_status(pod: &Value, exit_code: i64, now: &str) -> Value {
    let mut st = pod
        .get("status")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or(json!({}));
    let reason = if exit_code == 0 { "Completed" } else { "Error" };
    st["phase"] = json!(if exit_code == 0 {
        "Succeeded"
    } else {
        "Failed"
    });
    if let Some(cs) = st
        .get_mut("containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for c in cs.iter_mut().filter_map(Value::as_object_mut) {
            let started = c
                .get("state")
                .and_then(|s| s.pointer("/running/startedAt"))
                .cloned()
                .unwrap_or(json!(now));
            c.insert("ready".into(), json!(false));
            c.insert("started".into(), json!(false));
            c.insert("state".into(), json!({"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": now}}));
        }
    }
    if let Some(conds) = st.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conds.iter_mut().filter_map(Value::as_object_mut) {
            if matches!(
                c.get("type").and_then(Value::as_str),
                Some("Ready" | "ContainersReady")
            ) {
                c.insert("status".into(), json!("False"));
                c.insert("reason".into(), json!("PodCompleted"));
                c.insert("lastTransitionTime".into(), json!(now));
            }
        }
    }
    st
}

struct Kubelet {
    api: Arc<ApiServer>,
    shutdown: CancellationToken,
    next_ip: AtomicU64,
}

/// Runs the kubelet stand-in until `shutdown`.
pub async fn run(api: Arc<ApiServer>, shutdown: CancellationToken) {
    let k = Arc::new(Kubelet {
        api,
        shutdown,
        next_ip: AtomicU64::new(1),
    });
    let pods = GroupResource::new("", "pods");
    loop {
        // A fresh subscription lists every pod first, so a lagged kubelet catches up.
        let Ok(start) = k.api.store.watch(&pods, None) else {
            return;
        };
        for ev in start.initial {
            k.clone().consider(&ev.obj);
        }
        let mut rx = start.rx;
        loop {
            tokio::select! {
                _ = k.shutdown.cancelled() => return,
                r = rx.recv() => match r {
                    Ok(ev) if ev.kind != EventType::Deleted => k.clone().consider(&ev.obj),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return,
                }
            }
        }
    }
}

impl Kubelet {
    fn host_ip(&self, node: &str) -> Option<String> {
        let n = self
            .api
            .store
            .get(&GroupResource::new("", "nodes"), "", node)?;
        let v = n.value().ok()?;
        let ip = v
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
            .and_then(|x| x["address"].as_str())
            .unwrap_or("10.0.0.1")
            .to_string();
        Some(ip)
    }

    /// Starts a bound, pending pod.
    fn consider(self: Arc<Self>, pod: &Stored) {
        let Some(node) = pod.node_name.clone() else {
            return;
        };
        if pod.deleting || !matches!(pod.phase.as_deref(), None | Some("Pending")) {
            return;
        }
        let Some(host_ip) = self.host_ip(&node) else {
            return;
        };
        let (ns, name, uid) = (pod.namespace.clone(), pod.name.clone(), pod.uid.clone());
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        let pod_ip = format!("10.244.{}.{}", (n / 250) % 250, n % 250 + 1);
        tokio::spawn(async move {
            let Some(pod) = self
                .set_status(&ns, &name, &uid, |v| {
                    matches!(
                        v.pointer("/status/phase").and_then(Value::as_str),
                        None | Some("Pending")
                    )
                    .then(|| running_status(v, &host_ip, &pod_ip, &now_rfc3339(), 0, None))
                })
                .await
            else {
                return;
            };
            self.lifecycle(pod, 0).await;
        });
    }

    /// Runs the containers' simulated lifetimes until the pod finishes (or forever, without
    /// `run-seconds`).
    async fn lifecycle(&self, mut pod: Value, mut restarts: i64) {
        let (ns, name, uid) = {
            let s = |p: &str| {
                pod.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (
                s("/metadata/namespace"),
                s("/metadata/name"),
                s("/metadata/uid"),
            )
        };
        loop {
            let (Some(secs), code) = simulation(&pod) else {
                return;
            };
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(secs) => {}
            }
            let policy = pod
                .pointer("/spec/restartPolicy")
                .and_then(Value::as_str)
                .unwrap_or("Always")
                .to_string();
            let next = match ending(&policy, code) {
                Ending::Restart => {
                    restarts += 1;
                    let r = restarts;
                    self.set_status(&ns, &name, &uid, |v| {
                        let host = v
                            .pointer("/status/hostIP")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        let ip = v
                            .pointer("/status/podIP")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        (v.pointer("/status/phase").and_then(Value::as_str) == Some("Running"))
                            .then(|| running_status(v, &host, &ip, &now_rfc3339(), r, Some(code)))
                    })
                    .await
                }
                Ending::Succeeded | Ending::Failed => {
                    self.set_status(&ns, &name, &uid, |v| {
                        (v.pointer("/status/phase").and_then(Value::as_str) == Some("Running"))
                            .then(|| finished_status(v, code, &now_rfc3339()))
                    })
                    .await;
                    return;
                }
            };
            match next {
                Some(p) => pod = p,
                None => return,
            }
        }
    }

    /// Writes a pod's status through the status endpoint (internal caller: no faults). `f`
    /// returns `None` to leave the pod alone. Returns the pod as written.
    async fn set_status(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        f: impl Fn(&Value) -> Option<Value>,
    ) -> Option<Value> {
        let pods = self.api.resource("", "v1", "pods").ok()?;
        let uid = uid.to_string();
        let result = self
            .api
            .modify(
                ObjectRef::new(Caller::Internal, &pods, ns, name).at(Endpoint::Status),
                &WriteOptions::default(),
                |old| {
                    if old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                        return Err(super::ApiError::conflict(&pods, name, "pod replaced"));
                    }
                    let mut new = old.clone();
                    match f(old) {
                        Some(st) => new["status"] = st,
                        None => {
                            return Err(super::ApiError::conflict(&pods, name, "nothing to do"));
                        }
                    }
                    Ok(new)
                },
            )
            .await;
        match result {
            Ok(s) => s.value().ok(),
            Err(e) => {
                tracing::debug!(pod = %name, error = %e, "kubelet stand-in left pod alone");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_policies_decide_the_ending() {
        assert_eq!(ending("Never", 0), Ending::Succeeded);
        assert_eq!(ending("Never", 3), Ending::Failed);
        assert_eq!(ending("OnFailure", 0), Ending::Succeeded);
        assert_eq!(ending("OnFailure", 1), Ending::Restart);
        assert_eq!(ending("Always", 0), Ending::Restart);
    }

    #[test]
    fn annotations_give_run_time_and_exit_code() {
        let p = json!({"metadata": {"annotations": {RUN_SECONDS: "2.5", EXIT_CODE: "3"}}});
        assert_eq!(simulation(&p), (Some(Duration::from_millis(2500)), 3));
        // A huge number is a clear bound, not a panic in the pod's task.
        let huge = json!({"metadata": {"annotations": {RUN_SECONDS: "1e30"}}});
        assert_eq!(
            simulation(&huge).0,
            Some(Duration::from_secs_f64(MAX_RUN_SECONDS))
        );
        assert_eq!(simulation(&json!({})), (None, 0));
        let bad = json!({"metadata": {"annotations": {RUN_SECONDS: "soon"}}});
        assert_eq!(simulation(&bad), (None, 0));
    }

    #[test]
    fn statuses_show_running_then_terminated_containers() {
        let pod = json!({"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "a", "image": "i"}]}, "status": {"phase": "Pending", "qosClass": "Burstable"}});
        let mut running = pod.clone();
        running["status"] = running_status(&pod, "10.0.0.1", "10.244.0.2", "t0", 0, None);
        assert_eq!(running["status"]["phase"], "Running");
        assert_eq!(running["status"]["containerStatuses"][0]["ready"], true);
        assert_eq!(running["status"]["qosClass"], "Burstable");
        let done = finished_status(&running, 2, "t1");
        assert_eq!(done["phase"], "Failed");
        assert_eq!(
            done["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            2
        );
        let restarted = running_status(&running, "h", "p", "t2", 1, Some(2));
        assert_eq!(restarted["containerStatuses"][0]["restartCount"], 1);
        assert_eq!(
            restarted["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
            2
        );
        assert_eq!(restarted["startTime"], "t0");
    }
}
