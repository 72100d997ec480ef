//! `ray`: turns a head task and a worker task into a Ray cluster. The head container runs
//! `ray start --head` with its GCS, dashboard and client-server ports open; worker containers
//! run `ray start` against the head; a Service `{job}-head-svc` exposes the head's ports.
//!
//! Arguments: `--head` (head), `--headContainer` (head), `--worker` (worker),
//! `--workerContainer` (worker), `--port` (6379), `--dashboardPort` (8265),
//! `--clientPort` (10001).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{
    Args, JobPlugin, Kind, Owned, OwnedKind, PluginError, Removed, containers, host, job_name,
    job_selector, open_port, owned_meta, pod_task, removed,
};
use tephra_api::batch::Job;
use tephra_api::keys::{self, plugins::RAY};

/// Name of the GCS port.
const GCS: &str = "gcs";
/// Name of the dashboard port.
const DASHBOARD: &str = "dashboard";
/// Name of the client-server port.
const CLIENT_SERVER: &str = "client-server";

/// The `ray` plugin with its arguments.
pub(super) struct Ray {
    head: String,
    head_container: String,
    worker: String,
    worker_container: String,
    port: i32,
    dashboard_port: i32,
    client_port: i32,
}

impl Ray {
    /// Parses the plugin's arguments.
    pub(super) fn new(args: &[String]) -> Result<Ray, PluginError> {
        let a = Args::parse(
            RAY,
            args,
            &[
                ("head", Kind::Value),
                ("headContainer", Kind::Value),
                ("worker", Kind::Value),
                ("workerContainer", Kind::Value),
                ("port", Kind::Value),
                ("dashboardPort", Kind::Value),
                ("clientPort", Kind::Value),
            ],
        )?;
        Ok(Ray {
            head: a.string("head", "head"),
            head_container: a.string("headContainer", "head"),
            worker: a.string("worker", "worker"),
            worker_container: a.string("workerContainer", "worker"),
            port: a.port("port", 6379)?,
            dashboard_port: a.port("dashboardPort", 8265)?,
            client_port: a.port("clientPort", 10001)?,
        })
    }

    /// The three named ports of the head.
    fn ports(&self) -> [(&'static str, i32); 3] {
        [
            (GCS, self.port),
            (DASHBOARD, self.dashboard_port),
            (CLIENT_SERVER, self.client_port),
        ]
    }
}

/// `sh -c <line>`.
fn shell(line: String) -> Option<Vec<String>> {
    Some(vec!["sh".to_string(), "-c".to_string(), line])
}

impl JobPlugin for Ray {
    fn name(&self) -> &'static str {
        RAY
    }

    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError> {
        let Some(head) = job.spec.task(&self.head) else {
            return Err(PluginError::Missing {
                plugin: RAY,
                what: format!("job {:?} has no head task {:?}", job_name(job), self.head),
            });
        };
        let head_addr = host(job, head, 0);
        let task = pod_task(pod).to_string();
        for c in containers(pod) {
            if task == self.head && c.name == self.head_container {
                for (name, port) in self.ports() {
                    open_port(c, name, port);
                }
                c.command = shell(format!(
                    "ray start --head --block --dashboard-host=0.0.0.0 --port={} --dashboard-port={} --ray-client-server-port={}",
                    self.port, self.dashboard_port, self.client_port
                ));
            }
            if task == self.worker && c.name == self.worker_container {
                c.command = shell(format!(
                    "ray start --block --address={head_addr}:{}",
                    self.port
                ));
            }
        }
        Ok(())
    }

    fn on_job_add(&self, job: &Job) -> Result<Vec<Owned>, PluginError> {
        let mut selector: BTreeMap<String, String> = job_selector(job);
        selector.insert(keys::TASK_SPEC.to_string(), self.head.clone());
        let ports = self
            .ports()
            .into_iter()
            .map(|(name, port)| ServicePort {
                name: Some(name.to_string()),
                port,
                target_port: Some(IntOrString::String(name.to_string())),
                protocol: Some("TCP".to_string()),
                ..ServicePort::default()
            })
            .collect();
        Ok(vec![Owned::Service(Service {
            metadata: owned_meta(job, head_service_name(job)),
            spec: Some(ServiceSpec {
                selector: Some(selector),
                ports: Some(ports),
                ..ServiceSpec::default()
            }),
            status: None,
        })])
    }

    fn on_job_delete(&self, job: &Job) -> Vec<Removed> {
        vec![removed(job, OwnedKind::Service, head_service_name(job))]
    }
}

/// The head Service's name: `{job}-head-svc`.
fn head_service_name(job: &Job) -> String {
    format!("{}-head-svc", job_name(job))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{container, job, only_plugin, pod, ports};
    use super::*;

    const JOB: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: ray-cluster-job
spec:
  minAvailable: 3
  schedulerName: volcano
  plugins:
    ray: []
  queue: default
  tasks:
    - replicas: 1
      name: head
      template:
        spec:
          containers:
            - name: head
              image: bitnami/ray:2.49.0
              ports: [{name: metrics, containerPort: 8080}, {name: mine, containerPort: 8265}]
            - {name: sidecar, image: busybox}
          restartPolicy: OnFailure
    - replicas: 2
      name: worker
      template:
        spec:
          containers:
            - {name: worker, image: bitnami/ray:2.49.0}
          restartPolicy: OnFailure
"#;

    #[test]
    fn head_and_worker_commands() {
        let job = job(JOB);
        let plugin = only_plugin(&job);
        assert_eq!(plugin.name(), "ray");

        let mut p = pod(&job, "head", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let once = p.clone();
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(p, once, "idempotent");
        let c = container(&p, "head");
        assert_eq!(
            c.command.clone().unwrap_or_default(),
            [
                "sh",
                "-c",
                "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 --dashboard-port=8265 --ray-client-server-port=10001"
            ]
        );
        assert_eq!(
            ports(c),
            [
                ("metrics".to_string(), 8080),
                ("mine".to_string(), 8265),
                ("gcs".to_string(), 6379),
                ("client-server".to_string(), 10001)
            ]
        );
        let side = container(&p, "sidecar");
        assert!(side.command.is_none() && side.ports.is_none());

        let mut p = pod(&job, "worker", 1);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let c = container(&p, "worker");
        assert_eq!(
            c.command.clone().unwrap_or_default(),
            [
                "sh",
                "-c",
                "ray start --block --address=ray-cluster-job-head-0.ray-cluster-job:6379"
            ]
        );
        assert!(c.ports.is_none());
    }

    #[test]
    fn head_service() {
        let mut job = job(JOB);
        job.spec.plugins = Some(
            [(
                "ray".to_string(),
                vec![
                    "--port=7000".to_string(),
                    "--clientPort".to_string(),
                    "10002".to_string(),
                ],
            )]
            .into(),
        );
        let plugin = only_plugin(&job);
        let objects = plugin.on_job_add(&job).unwrap();
        assert_eq!(objects.len(), 1);
        let Owned::Service(svc) = &objects[0] else {
            panic!("not a Service")
        };
        assert_eq!(
            svc.metadata.name.as_deref(),
            Some("ray-cluster-job-head-svc")
        );
        assert_eq!(
            svc.metadata.owner_references.as_ref().map(Vec::len),
            Some(1)
        );
        let want: ServiceSpec = serde_json::from_value(serde_json::json!({
            "selector": {
                "volcano.sh/job-name": "ray-cluster-job",
                "volcano.sh/job-namespace": "ns",
                "volcano.sh/task-spec": "head",
            },
            "ports": [
                {"name": "gcs", "port": 7000, "targetPort": "gcs", "protocol": "TCP"},
                {"name": "dashboard", "port": 8265, "targetPort": "dashboard", "protocol": "TCP"},
                {"name": "client-server", "port": 10002, "targetPort": "client-server", "protocol": "TCP"},
            ],
        }))
        .unwrap();
        assert_eq!(svc.spec.as_ref(), Some(&want));
        assert_eq!(
            plugin.on_job_delete(&job),
            [Removed {
                kind: OwnedKind::Service,
                namespace: "ns".into(),
                name: "ray-cluster-job-head-svc".into()
            }]
        );
        assert!(plugin.on_job_update(&job).unwrap().is_empty());
    }

    #[test]
    fn no_head_task_is_an_error() {
        let mut job = job(JOB);
        job.spec.plugins = Some([("ray".to_string(), vec!["--head=boss".to_string()])].into());
        let plugin = only_plugin(&job);
        let mut p = pod(&job, "worker", 0);
        assert!(matches!(
            plugin.on_pod_create(&job, &mut p),
            Err(PluginError::Missing { plugin: "ray", .. })
        ));
        assert!(Ray::new(&["--dashboardPort=-5".to_string()]).is_err());
    }
}
