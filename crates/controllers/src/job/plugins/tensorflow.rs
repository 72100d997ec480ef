//! `tensorflow`: gives every container `TF_CONFIG`, the cluster spec TensorFlow's distributed
//! runtime reads: the hosts of the ps, worker, chief and evaluator tasks and the pod's own
//! role and index. A job of one task with one replica gets nothing (it is not distributed).
//!
//! Arguments: `--ps`, `--worker`, `--chief`, `--evaluator` (task names, defaulting to the
//! role names), `--port` (2222).

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use super::{
    Args, JobPlugin, Kind, PluginError, containers, env_var, host, pod_index, pod_task, set_env,
};
use tephra_api::batch::Job;
use tephra_api::keys::plugins::TENSORFLOW;

/// The variable TensorFlow reads.
const TF_CONFIG: &str = "TF_CONFIG";

/// The `tensorflow` plugin with its arguments.
pub(super) struct Tensorflow {
    ps: String,
    worker: String,
    chief: String,
    evaluator: String,
    port: i32,
}

/// `TF_CONFIG`: fields in Volcano's order, empty roles left out.
#[derive(Serialize)]
struct TfConfig<'a> {
    cluster: Cluster,
    task: TfTask<'a>,
}

/// The hosts (`host:port`) of each role.
#[derive(Serialize, Default)]
struct Cluster {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ps: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    worker: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    chief: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    evaluator: Vec<String>,
}

/// The pod's role and index.
#[derive(Serialize)]
struct TfTask<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    index: i32,
}

impl Tensorflow {
    /// Parses the plugin's arguments.
    pub(super) fn new(args: &[String]) -> Result<Tensorflow, PluginError> {
        let a = Args::parse(
            TENSORFLOW,
            args,
            &[
                ("ps", Kind::Value),
                ("worker", Kind::Value),
                ("chief", Kind::Value),
                ("evaluator", Kind::Value),
                ("port", Kind::Value),
            ],
        )?;
        Ok(Tensorflow {
            ps: a.string("ps", "ps"),
            worker: a.string("worker", "worker"),
            chief: a.string("chief", "chief"),
            evaluator: a.string("evaluator", "evaluator"),
            port: a.port("port", 2222)?,
        })
    }

    /// The role of a task; a task of no role keeps its own name (Volcano checks chief first,
    /// so a name given to two roles resolves the same way here).
    fn role<'a>(&self, task: &'a str) -> &'a str {
        if task == self.chief {
            "chief"
        } else if task == self.worker {
            "worker"
        } else if task == self.ps {
            "ps"
        } else if task == self.evaluator {
            "evaluator"
        } else {
            task
        }
    }

    /// The cluster part of `TF_CONFIG`.
    fn cluster(&self, job: &Job) -> Cluster {
        let mut cluster = Cluster::default();
        for task in job.tasks() {
            // Every replica is listed, even under a fixed template hostname: TensorFlow needs
            // one entry per replica index.
            let hosts = (0..task.replicas())
                .map(|i| format!("{}:{}", host(job, task, i), self.port))
                .collect();
            // Volcano's switch tries ps first when building the lists.
            let name = task.name();
            let slot = if name == self.ps {
                &mut cluster.ps
            } else if name == self.worker {
                &mut cluster.worker
            } else if name == self.chief {
                &mut cluster.chief
            } else if name == self.evaluator {
                &mut cluster.evaluator
            } else {
                continue;
            };
            *slot = hosts;
        }
        cluster
    }
}

impl JobPlugin for Tensorflow {
    fn name(&self) -> &'static str {
        TENSORFLOW
    }

    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError> {
        if let [only] = job.tasks()
            && only.replicas() == 1
        {
            return Ok(());
        }
        let config = TfConfig {
            cluster: self.cluster(job),
            task: TfTask {
                kind: self.role(pod_task(pod)),
                index: pod_index(TENSORFLOW, pod)?,
            },
        };
        let text = serde_json::to_string(&config).map_err(|e| PluginError::Missing {
            plugin: TENSORFLOW,
            what: format!("TF_CONFIG could not be written: {e}"),
        })?;
        // Regular containers only, as Volcano: init containers run before the cluster exists.
        for c in containers(pod) {
            set_env(c, env_var(TF_CONFIG, text.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{container, env, envs, job, only_plugin, pod};
    use super::*;

    const JOB: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: tf
spec:
  minAvailable: 4
  plugins:
    tensorflow: ["--port=5000", "--chief=boss"]
  tasks:
    - replicas: 1
      name: ps
      template:
        spec:
          initContainers: [{name: init, image: busybox}]
          containers: [{name: tensorflow, image: tf}]
    - replicas: 2
      name: worker
      template:
        spec:
          containers: [{name: tensorflow, image: tf}]
    - replicas: 1
      name: boss
      template:
        spec:
          containers: [{name: tensorflow, image: tf}]
    - replicas: 1
      name: helper
      template:
        spec:
          containers: [{name: tensorflow, image: tf}]
"#;

    const CLUSTER: &str = r#"{"cluster":{"ps":["tf-ps-0.tf:5000"],"worker":["tf-worker-0.tf:5000","tf-worker-1.tf:5000"],"chief":["tf-boss-0.tf:5000"]},"#;

    #[test]
    fn tf_config_for_each_role() {
        let job = job(JOB);
        let plugin = only_plugin(&job);
        assert_eq!(plugin.name(), "tensorflow");
        for (task, index, tail) in [
            ("ps", 0, r#""task":{"type":"ps","index":0}}"#),
            ("worker", 1, r#""task":{"type":"worker","index":1}}"#),
            ("boss", 0, r#""task":{"type":"chief","index":0}}"#),
            ("helper", 0, r#""task":{"type":"helper","index":0}}"#),
        ] {
            let mut p = pod(&job, task, index);
            plugin.on_pod_create(&job, &mut p).unwrap();
            plugin.on_pod_create(&job, &mut p).unwrap();
            let c = container(&p, "tensorflow");
            assert_eq!(
                envs(c),
                [("TF_CONFIG".to_string(), format!("{CLUSTER}{tail}"))],
                "{task}"
            );
        }
        let mut p = pod(&job, "ps", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(env(container(&p, "init"), "TF_CONFIG"), None);
        assert!(plugin.on_job_add(&job).unwrap().is_empty());
    }

    #[test]
    fn defaults_single_pod_and_fixed_hostname() {
        let job1 = job(r#"
metadata: {name: one}
spec:
  plugins: {tensorflow: []}
  tasks:
    - {name: worker, replicas: 1, template: {spec: {containers: [{name: c, image: tf}]}}}
"#);
        let plugin = only_plugin(&job1);
        let mut p = pod(&job1, "worker", 0);
        plugin.on_pod_create(&job1, &mut p).unwrap();
        assert_eq!(env(container(&p, "c"), "TF_CONFIG"), None);

        let job2 = job(r#"
metadata: {name: two}
spec:
  plugins: {tensorflow: []}
  tasks:
    - {name: worker, replicas: 2, template: {spec: {hostname: w, containers: [{name: c, image: tf}]}}}
"#);
        let plugin = only_plugin(&job2);
        let mut p = pod(&job2, "worker", 1);
        plugin.on_pod_create(&job2, &mut p).unwrap();
        assert_eq!(
            env(container(&p, "c"), "TF_CONFIG").as_deref(),
            Some(
                r#"{"cluster":{"worker":["w.two:2222","w.two:2222"]},"task":{"type":"worker","index":1}}"#
            )
        );

        assert!(matches!(
            Tensorflow::new(&["--port".to_string(), "x".to_string()]),
            Err(PluginError::BadArgument {
                plugin: "tensorflow",
                ..
            })
        ));
    }
}
