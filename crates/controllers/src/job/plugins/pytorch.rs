//! `pytorch`: the environment of `torch.distributed`'s env:// rendezvous. Every container of
//! a job with a master task gets `MASTER_ADDR` (master replica 0), `MASTER_PORT`, `WORLD_SIZE`
//! (master + worker replicas) and `RANK` (0 for the master, index + 1 for a worker), and the
//! port is opened as `pytorchjob-port`. Workers can wait for the master in an init container.
//!
//! Arguments: `--master` (master), `--worker` (worker), `--port` (23456),
//! `--wait-master-enabled` (false), `--wait-master-timeout` (300 s),
//! `--wait-master-image` (busybox:1.36.1).

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{
    Args, JobPlugin, Kind, PluginError, containers, env_var, host, open_port, pod_index, pod_task,
    set_env,
};
use tephra_api::batch::Job;
use tephra_api::keys::plugins::PYTORCH;

/// Name of the opened port.
const PORT_NAME: &str = "pytorchjob-port";
/// Name of the init container that waits for the master.
const WAIT_CONTAINER: &str = "wait-for-master";
/// Volcano's default image of that init container.
const WAIT_IMAGE: &str = "busybox:1.36.1";

/// The `pytorch` plugin with its arguments.
pub(super) struct Pytorch {
    master: String,
    worker: String,
    port: i32,
    wait_enabled: bool,
    wait_timeout: i64,
    wait_image: String,
}

impl Pytorch {
    /// Parses the plugin's arguments.
    pub(super) fn new(args: &[String]) -> Result<Pytorch, PluginError> {
        let a = Args::parse(
            PYTORCH,
            args,
            &[
                ("master", Kind::Value),
                ("worker", Kind::Value),
                ("port", Kind::Value),
                ("wait-master-enabled", Kind::Bool),
                ("wait-master-timeout", Kind::Value),
                ("wait-master-image", Kind::Value),
            ],
        )?;
        let wait_timeout = a.int("wait-master-timeout", 300)?;
        if wait_timeout < 0 {
            return Err(PluginError::BadArgument {
                plugin: PYTORCH,
                argument: format!("--wait-master-timeout={wait_timeout}"),
                reason: "a timeout cannot be negative".to_string(),
            });
        }
        Ok(Pytorch {
            master: a.string("master", "master"),
            worker: a.string("worker", "worker"),
            port: a.port("port", 23456)?,
            wait_enabled: a.bool("wait-master-enabled", false),
            wait_timeout,
            wait_image: a.string("wait-master-image", WAIT_IMAGE),
        })
    }

    /// The shell loop of the wait container: try the master's port every 2 s (with `nc`, or
    /// bash's /dev/tcp where there is no `nc`) and give up after the timeout. The text is
    /// Volcano's, so the pods look the same.
    fn wait_script(&self, addr: &str) -> String {
        let (port, timeout) = (self.port, self.wait_timeout);
        [
            format!("echo \"Waiting for master node {addr}:{port} to be ready...\""),
            format!("TIMEOUT={timeout}"),
            "ELAPSED=0".to_string(),
            format!(
                "until {{ nc -z {addr} {port} || echo > /dev/tcp/{addr}/{port}; }} 2>/dev/null; do"
            ),
            "  if [ $ELAPSED -ge $TIMEOUT ]; then".to_string(),
            "    echo \"Timeout waiting for master after ${TIMEOUT} seconds\"".to_string(),
            "    exit 1".to_string(),
            "  fi".to_string(),
            "  echo \"Master not ready yet, retrying in 2 seconds... (elapsed: ${ELAPSED}s)\""
                .to_string(),
            "  sleep 2".to_string(),
            "  ELAPSED=$((ELAPSED + 2))".to_string(),
            "done".to_string(),
            "echo \"Master node is ready!\"".to_string(),
        ]
        .join("\n")
    }
}

impl JobPlugin for Pytorch {
    fn name(&self) -> &'static str {
        PYTORCH
    }

    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError> {
        let Some(master) = job.spec.task(&self.master) else {
            return Ok(());
        };
        let addr = host(job, master, 0);
        let world_size: i32 = job
            .tasks()
            .iter()
            .filter(|t| t.name() == self.master || t.name() == self.worker)
            .map(|t| t.replicas())
            .sum();
        let task = pod_task(pod).to_string();
        let rank = if task == self.worker {
            let rank = pod_index(PYTORCH, pod)? + 1;
            if self.wait_enabled
                && let Some(spec) = pod.spec.as_mut()
            {
                let inits = spec.init_containers.get_or_insert_with(Vec::new);
                if !inits.iter().any(|c| c.name == WAIT_CONTAINER) {
                    inits.push(Container {
                        name: WAIT_CONTAINER.to_string(),
                        image: Some(self.wait_image.clone()),
                        command: Some(vec![
                            "sh".to_string(),
                            "-c".to_string(),
                            self.wait_script(&addr),
                        ]),
                        ..Container::default()
                    });
                }
            }
            Some(rank)
        } else if task == self.master {
            Some(0)
        } else {
            // Another task (e.g. a data loader) learns where the master is but has no rank.
            None
        };
        for c in containers(pod) {
            open_port(c, PORT_NAME, self.port);
            set_env(c, env_var("MASTER_ADDR", addr.clone()));
            set_env(c, env_var("MASTER_PORT", self.port.to_string()));
            set_env(c, env_var("WORLD_SIZE", world_size.to_string()));
            if let Some(r) = rank {
                set_env(c, env_var("RANK", r.to_string()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{container, envs, job, only_plugin, pod, ports};
    use super::*;

    const JOB: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: pytorch-job
spec:
  minAvailable: 1
  schedulerName: volcano
  plugins:
    pytorch: ["--master=master","--worker=worker","--port=23456"]
  tasks:
    - replicas: 1
      name: master
      policies:
        - event: TaskCompleted
          action: CompleteJob
      template:
        spec:
          containers:
            - image: gcr.io/kubeflow-ci/pytorch-dist-sendrecv-test:1.0
              imagePullPolicy: IfNotPresent
              name: master
          restartPolicy: OnFailure
    - replicas: 2
      name: worker
      template:
        spec:
          containers:
            - image: gcr.io/kubeflow-ci/pytorch-dist-sendrecv-test:1.0
              imagePullPolicy: IfNotPresent
              name: worker
              ports:
                - {containerPort: 8080, name: http}
              workingDir: /home
          restartPolicy: OnFailure
    - replicas: 1
      name: loader
      template:
        spec:
          containers:
            - {name: loader, image: busybox}
"#;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn env_and_ports_per_role() {
        let job = job(JOB);
        let plugin = only_plugin(&job);
        assert_eq!(plugin.name(), "pytorch");
        let addr = "pytorch-job-master-0.pytorch-job";

        let mut p = pod(&job, "master", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let c = container(&p, "master");
        assert_eq!(
            envs(c),
            pairs(&[
                ("MASTER_ADDR", addr),
                ("MASTER_PORT", "23456"),
                ("WORLD_SIZE", "3"),
                ("RANK", "0")
            ])
        );
        assert_eq!(ports(c), [("pytorchjob-port".to_string(), 23456)]);

        let mut p = pod(&job, "worker", 1);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let once = p.clone();
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(p, once, "idempotent");
        let c = container(&p, "worker");
        assert_eq!(
            envs(c),
            pairs(&[
                ("MASTER_ADDR", addr),
                ("MASTER_PORT", "23456"),
                ("WORLD_SIZE", "3"),
                ("RANK", "2")
            ])
        );
        assert_eq!(
            ports(c),
            [
                ("http".to_string(), 8080),
                ("pytorchjob-port".to_string(), 23456)
            ]
        );
        assert!(p.spec.as_ref().unwrap().init_containers.is_none());

        let mut p = pod(&job, "loader", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let env = envs(container(&p, "loader"));
        assert_eq!(env.len(), 3, "no RANK outside master and worker: {env:?}");

        assert!(plugin.on_job_add(&job).unwrap().is_empty());
        assert!(plugin.on_job_delete(&job).is_empty());
    }

    #[test]
    fn wait_for_master_init_container() {
        let mut job = job(JOB);
        job.spec.plugins = Some(
            [(
                "pytorch".to_string(),
                vec![
                    "--wait-master-enabled".to_string(),
                    "--wait-master-timeout=60".to_string(),
                    "--port=29500".to_string(),
                ],
            )]
            .into(),
        );
        let plugin = only_plugin(&job);
        let mut p = pod(&job, "worker", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        plugin.on_pod_create(&job, &mut p).unwrap();
        let inits = p
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.clone())
            .unwrap_or_default();
        assert_eq!(inits.len(), 1, "added once");
        let init = &inits[0];
        assert_eq!(init.name, "wait-for-master");
        assert_eq!(init.image.as_deref(), Some("busybox:1.36.1"));
        let cmd = init.command.clone().unwrap_or_default();
        assert_eq!(cmd[..2], ["sh", "-c"]);
        let addr = "pytorch-job-master-0.pytorch-job";
        assert!(cmd[2].starts_with(&format!(
            "echo \"Waiting for master node {addr}:29500 to be ready...\"\nTIMEOUT=60\nELAPSED=0\n"
        )));
        assert!(cmd[2].contains(&format!(
            "until {{ nc -z {addr} 29500 || echo > /dev/tcp/{addr}/29500; }} 2>/dev/null; do\n"
        )));
        assert!(cmd[2].ends_with("done\necho \"Master node is ready!\""));
        // The init container gets no env or port; the master no init container.
        assert!(init.env.is_none() && init.ports.is_none());
        let mut m = pod(&job, "master", 0);
        plugin.on_pod_create(&job, &mut m).unwrap();
        assert!(m.spec.as_ref().unwrap().init_containers.is_none());
    }

    #[test]
    fn no_master_task_no_change_and_bad_args() {
        let mut job = job(JOB);
        job.spec.plugins =
            Some([("pytorch".to_string(), vec!["--master=chief".to_string()])].into());
        let plugin = only_plugin(&job);
        let mut p = pod(&job, "worker", 0);
        let before = p.clone();
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(p, before);

        for bad in [
            &["--port=big"][..],
            &["--wait-master-timeout=-1"],
            &["--wait-master-enabled=sure"],
            &["--wait-master-image"],
        ] {
            let args: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(
                matches!(
                    Pytorch::new(&args),
                    Err(PluginError::BadArgument {
                        plugin: "pytorch",
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }
}
