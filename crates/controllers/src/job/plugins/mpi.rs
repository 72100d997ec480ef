//! `mpi`: opens the ssh port `mpijob-port` in every container and tells the master task its
//! workers in `MPI_HOST` (comma-separated host names).
//!
//! Arguments: `--master` (master), `--worker` (worker), `--port` (22).

use k8s_openapi::api::core::v1::Pod;

use super::{
    Args, JobPlugin, Kind, PluginError, all_containers, env_var, open_port, pod_task, set_env,
    task_hosts,
};
use tephra_api::batch::Job;
use tephra_api::keys::plugins::MPI;

/// Name of the opened port.
const PORT_NAME: &str = "mpijob-port";
/// The variable holding the worker hosts.
const MPI_HOST: &str = "MPI_HOST";

/// The `mpi` plugin with its arguments.
pub(super) struct Mpi {
    master: String,
    worker: String,
    port: i32,
}

impl Mpi {
    /// Parses the plugin's arguments.
    pub(super) fn new(args: &[String]) -> Result<Mpi, PluginError> {
        let a = Args::parse(
            MPI,
            args,
            &[
                ("master", Kind::Value),
                ("worker", Kind::Value),
                ("port", Kind::Value),
            ],
        )?;
        Ok(Mpi {
            master: a.string("master", "master"),
            worker: a.string("worker", "worker"),
            port: a.port("port", 22)?,
        })
    }
}

impl JobPlugin for Mpi {
    fn name(&self) -> &'static str {
        MPI
    }

    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError> {
        let mut hosts = None;
        if pod_task(pod) == self.master {
            // As Volcano: a master without a worker task is left exactly as it is (no port
            // either).
            let Some(worker) = job.spec.task(&self.worker) else {
                return Ok(());
            };
            hosts = Some(task_hosts(job, worker).join(","));
        }
        for c in all_containers(pod) {
            open_port(c, PORT_NAME, self.port);
            if let Some(h) = &hosts {
                set_env(c, env_var(MPI_HOST, h.clone()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{container, env, envs, job, only_plugin, pod, ports};
    use super::*;

    const JOB: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: lm-mpi-job
spec:
  minAvailable: 3
  plugins:
    mpi: ["--master=mpimaster", "--worker", "mpiworker"]
  tasks:
    - replicas: 1
      name: mpimaster
      template:
        spec:
          initContainers:
            - {name: prepare, image: busybox}
          containers:
            - name: mpimaster
              image: volcanosh/example-mpi:0.0.3
              command: [/bin/sh, -c, "mpiexec --host ${MPI_HOST} -np 2 mpi_hello_world"]
    - replicas: 2
      name: mpiworker
      template:
        spec:
          containers:
            - name: mpiworker
              image: volcanosh/example-mpi:0.0.3
              ports:
                - {containerPort: 22, name: ssh}
"#;

    #[test]
    fn master_gets_worker_hosts_and_everyone_the_port() {
        let job = job(JOB);
        let plugin = only_plugin(&job);
        assert_eq!(plugin.name(), "mpi");
        let hosts = "lm-mpi-job-mpiworker-0.lm-mpi-job,lm-mpi-job-mpiworker-1.lm-mpi-job";

        let mut p = pod(&job, "mpimaster", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let once = p.clone();
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(p, once, "idempotent");
        for name in ["mpimaster", "prepare"] {
            let c = container(&p, name);
            assert_eq!(ports(c), [("mpijob-port".to_string(), 22)], "{name}");
            assert_eq!(
                envs(c),
                [("MPI_HOST".to_string(), hosts.to_string())],
                "{name}"
            );
        }

        // A worker keeps its own port 22 (same number) and gets no MPI_HOST.
        let mut p = pod(&job, "mpiworker", 1);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let c = container(&p, "mpiworker");
        assert_eq!(ports(c), [("ssh".to_string(), 22)]);
        assert_eq!(env(c, "MPI_HOST"), None);

        assert!(plugin.on_job_add(&job).unwrap().is_empty());
        assert!(plugin.on_job_delete(&job).is_empty());
    }

    #[test]
    fn other_port_fixed_hostname_and_missing_worker() {
        let mut job = job(JOB);
        let set = |job: &mut Job, args: &[&str]| {
            job.spec.plugins = Some(
                [(
                    "mpi".to_string(),
                    args.iter().map(|s| s.to_string()).collect(),
                )]
                .into(),
            );
        };
        set(
            &mut job,
            &["--master=mpimaster", "--worker=mpiworker", "--port=2022"],
        );
        if let Some(spec) = job
            .spec
            .tasks
            .as_mut()
            .and_then(|t| t.get_mut(1))
            .and_then(|t| t.template.as_mut())
            .and_then(|t| t.spec.as_mut())
        {
            spec.hostname = Some("w".into());
        }
        let plugin = only_plugin(&job);
        let mut p = pod(&job, "mpiworker", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let c = container(&p, "mpiworker");
        assert_eq!(
            ports(c),
            [("ssh".to_string(), 22), ("mpijob-port".to_string(), 2022)]
        );
        let mut p = pod(&job, "mpimaster", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(
            env(container(&p, "mpimaster"), "MPI_HOST").as_deref(),
            Some("w.lm-mpi-job")
        );

        // Default names: the master task "master" does not exist, so the pods are workers of
        // no known role and only get the port.
        set(&mut job, &["--worker=nobody", "--master=mpimaster"]);
        let plugin = only_plugin(&job);
        let mut p = pod(&job, "mpimaster", 0);
        let before = p.clone();
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(p, before, "a master with no worker task is left alone");
        // An unknown flag is ignored, as Volcano's flag parsing does.
        assert!(Mpi::new(&["--hosts=a".to_string()]).is_ok());

        for bad in ["--port=ssh", "--port=0"] {
            assert!(
                matches!(
                    Mpi::new(&[bad.to_string()]),
                    Err(PluginError::BadArgument { plugin: "mpi", .. })
                ),
                "{bad}"
            );
        }
    }
}
