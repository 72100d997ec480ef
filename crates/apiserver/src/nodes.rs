//! The nodes of `--embedded-nodes N`: Ready, 8 cpu, 32Gi memory, 110 pods, labelled like a
//! kubelet labels its node.

use serde_json::{Value, json};

/// Internal IP of the `i`-th node (1-based).
pub fn node_ip(i: usize) -> String {
    format!("10.0.{}.{}", (i / 250) % 250, i % 250 + 1)
}

/// A Ready node object.
pub fn node(name: &str, i: usize) -> Value {
    let now = super::now_rfc3339();
    let cond = |t: &str, status: &str, reason: &str, msg: &str| {
        json!({"type": t, "status": status, "reason": reason, "message": msg,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let resources =
        json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status (tephra embedded stand-in)"),
            ],
            "addresses": [{"type": "InternalIP", "address": node_ip(i)}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": "v1.33.0-tephra", "kubeProxyVersion": "", "operatingSystem": "linux",
                "architecture": "amd64", "containerRuntimeVersion": "tephra://sim", "osImage": "tephra embedded",
                "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": "",
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_ready_with_the_contract_capacity() {
        let n = node("node-1", 1);
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], "node-1");
        assert_eq!(n["status"]["allocatable"]["cpu"], "8");
        assert_eq!(n["status"]["allocatable"]["memory"], "32Gi");
        assert_eq!(n["status"]["allocatable"]["pods"], "110");
        let ready = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");
        assert_ne!(node_ip(1), node_ip(2));
    }
}
