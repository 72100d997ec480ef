//! Gangs made the way a user makes one without a vcJob (a PodGroup plus pods carrying its
//! group name), and what became of them, for the end-to-end scheduling stories.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tephra::api::PodGroup;

/// A gang in namespace `default`.
pub struct Gang<'a> {
    /// PodGroup name; the pods are `NAME-0` … and carry the label `gang: NAME`.
    pub name: &'a str,
    /// Queue of the PodGroup.
    pub queue: &'a str,
    /// Pods, all of them needed (`minMember`).
    pub size: usize,
    /// Cores each pod requests.
    pub cpu: u32,
    /// How long each pod runs once bound (the kubelet stand-in's annotation).
    pub run_seconds: u32,
    /// Whether the PodGroup states `minResources` (size × cpu), as Volcano's job controller
    /// writes it; without it enqueue admits the gang unconditionally.
    pub min_resources: bool,
}

impl Gang<'_> {
    /// Creates the PodGroup, then its pods one by one.
    pub async fn create(&self, c: &Client) {
        let mut spec = json!({"minMember": self.size, "queue": self.queue});
        if self.min_resources {
            spec["minResources"] = json!({"cpu": (self.cpu as usize * self.size).to_string()});
        }
        let pg: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": self.name, "namespace": "default"},
            "spec": spec
        }))
        .unwrap();
        let api = Api::<PodGroup>::namespaced(c.clone(), "default");
        // The webhooks read queues from tephra's watch cache, which can be a moment behind a
        // queue just created (the built-in ones at start): such a refusal is retried briefly.
        let mut tries = 0;
        loop {
            match api.create(&PostParams::default(), &pg).await {
                Ok(_) => break,
                Err(e) if tries < 50 && queue_not_seen_yet(&e) => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(e) => panic!("creating PodGroup {}: {e}", self.name),
            }
        }
        let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
        for i in 0..self.size {
            let p: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("{}-{i}", self.name), "labels": {"gang": self.name},
                    "annotations": {
                        "scheduling.k8s.io/group-name": self.name,
                        "simulation.tephra.io/run-seconds": self.run_seconds.to_string()
                    }},
                "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox",
                        "resources": {"requests": {"cpu": self.cpu.to_string()}}}]}
            }))
            .unwrap();
            pods.create(&PostParams::default(), &p).await.unwrap();
        }
    }
}

/// Per gang label in `default`: (pods bound to a node, pods finished).
pub async fn by_gang(c: &Client) -> BTreeMap<String, (usize, usize)> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut m: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let gang = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("gang"))
            .cloned()
            .unwrap_or_default();
        let e = m.entry(gang).or_default();
        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
            e.0 += 1;
        }
        let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            e.1 += 1;
        }
    }
    m
}

/// A PodGroup's `status.phase` in `default` (empty when unknown).
pub async fn pg_phase(c: &Client, name: &str) -> String {
    Api::<PodGroup>::namespaced(c.clone(), "default")
        .get(name)
        .await
        .ok()
        .and_then(|pg| pg.status)
        .and_then(|s| s.phase)
        .map(|p| p.as_str().to_string())
        .unwrap_or_default()
}

/// Whether a webhook refused a write because its cache has not seen the queue yet.
pub fn queue_not_seen_yet(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403 && s.message.contains("queue") && s.message.contains("not found"))
}
