//! `pods/log` for the embedded API. There is no container runtime, so there are no real logs:
//! the answer is a short text the kubelet stand-in's state explains (when the container
//! started, whether and how it ended), so `kubectl logs` on a simulated job pod says something
//! useful instead of failing. Pure: (pod, container) → text or an API error.

use serde_json::Value;

use super::ApiError;

/// The simulated log of `container` (the first container when `None`) of `pod`.
pub fn simulated_log(pod: &Value, container: Option<&str>) -> Result<String, ApiError> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let names: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    let container = match container {
        Some(c) if names.contains(&c) => c,
        Some(c) => {
            return Err(ApiError::BadRequest(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        None => names
            .first()
            .copied()
            .ok_or_else(|| ApiError::BadRequest(format!("pod {name} has no containers")))?,
    };
    let status = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|ss| {
            ss.iter()
                .find(|s| s.get("name").and_then(Value::as_str) == Some(container))
        });
    let Some(status) = status else {
        // kube-apiserver answers 400 while a container has not started.
        return Err(ApiError::BadRequest(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: not yet scheduled or started"
        )));
    };
    let mut out = format!(
        "[tephra embedded kubelet stand-in] no container runtime: simulated log of {ns}/{name} container {container}\n"
    );
    let restarts = status
        .get("restartCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if restarts > 0 {
        out.push_str(&format!("restarted {restarts} time(s)\n"));
    }
    let state = status.get("state");
    if let Some(r) = state.and_then(|s| s.get("running")) {
        let at = r.get("startedAt").and_then(Value::as_str).unwrap_or("?");
        out.push_str(&format!("running since {at}\n"));
    } else if let Some(t) = state.and_then(|s| s.get("terminated")) {
        let code = t.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
        let at = t.get("finishedAt").and_then(Value::as_str).unwrap_or("?");
        let reason = t
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("Completed");
        out.push_str(&format!("terminated at {at}: {reason}, exit code {code}\n"));
    } else {
        out.push_str("waiting\n");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(statuses: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"},
               "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
               "status": {"containerStatuses": statuses}})
    }

    #[test]
    fn running_and_terminated_containers_are_described() {
        let p = pod(json!([
            {"name": "a", "restartCount": 0, "state": {"running": {"startedAt": "T1"}}},
            {"name": "b", "restartCount": 2, "state": {"terminated": {"exitCode": 3, "reason": "Error", "finishedAt": "T2"}}}
        ]));
        let a = simulated_log(&p, None).unwrap();
        assert!(
            a.contains("ns/p container a") && a.contains("running since T1"),
            "{a}"
        );
        let b = simulated_log(&p, Some("b")).unwrap();
        assert!(
            b.contains("restarted 2 time(s)") && b.contains("Error, exit code 3"),
            "{b}"
        );
    }

    #[test]
    fn unknown_or_unstarted_containers_are_bad_requests() {
        let p = pod(json!([{"name": "a", "state": {"running": {}}}]));
        let e = simulated_log(&p, Some("zzz")).unwrap_err();
        assert_eq!(e.code(), 400);
        assert!(e.to_string().contains("zzz"));
        let e = simulated_log(&p, Some("b")).unwrap_err();
        assert!(e.to_string().contains("waiting to start"), "{e}");
    }
}
