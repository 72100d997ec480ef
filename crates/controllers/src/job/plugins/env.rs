//! `env`: tells every container its replica index (`VK_TASK_INDEX`, and the newer name
//! `VC_TASK_INDEX`). It takes no arguments and makes no objects.

use k8s_openapi::api::core::v1::Pod;

use super::{JobPlugin, PluginError, all_containers, env_var, pod_index_text, set_env};
use tephra_api::batch::Job;
use tephra_api::keys::plugins::ENV;

/// The index variable under its first (Volcano 0.x "vk") name.
const TASK_VK_INDEX: &str = "VK_TASK_INDEX";
/// The index variable under its current name.
const TASK_INDEX: &str = "VC_TASK_INDEX";

/// The `env` plugin.
pub(super) struct Env;

impl Env {
    /// Builds the plugin. Its arguments are ignored: Volcano's `env` has no flags and reads
    /// none, so a job written for it with stray arguments still runs.
    pub(super) fn new(_args: &[String]) -> Result<Env, PluginError> {
        Ok(Env)
    }
}

impl JobPlugin for Env {
    fn name(&self) -> &'static str {
        ENV
    }

    fn on_pod_create(&self, _job: &Job, pod: &mut Pod) -> Result<(), PluginError> {
        // Volcano passes the name's last segment through as text, empty when there is none.
        let index = pod_index_text(pod).to_string();
        for c in all_containers(pod) {
            set_env(c, env_var(TASK_VK_INDEX, index.clone()));
            set_env(c, env_var(TASK_INDEX, index.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{container, envs, job, only_plugin, pod};
    use super::*;

    const TF: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: tensorflow-dist-mnist
spec:
  minAvailable: 3
  plugins:
    env: []
  tasks:
    - replicas: 1
      name: ps
      template:
        spec:
          initContainers:
            - {name: setup, image: busybox}
          containers:
            - name: tensorflow
              image: volcanosh/dist-mnist-tf-example:0.0.1
              env:
                - {name: KEEP, value: "1"}
    - replicas: 2
      name: worker
      template:
        spec:
          containers:
            - {name: tensorflow, image: volcanosh/dist-mnist-tf-example:0.0.1}
"#;

    fn pair(i: &str) -> Vec<(String, String)> {
        vec![
            (TASK_VK_INDEX.to_string(), i.to_string()),
            (TASK_INDEX.to_string(), i.to_string()),
        ]
    }

    #[test]
    fn index_env_in_every_container_once() {
        let job = job(TF);
        let plugin = only_plugin(&job);
        assert_eq!(plugin.name(), "env");

        let mut p = pod(&job, "worker", 1);
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(envs(container(&p, "tensorflow")), pair("1"));

        let mut p = pod(&job, "ps", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        plugin.on_pod_create(&job, &mut p).unwrap();
        let mut want = vec![("KEEP".to_string(), "1".to_string())];
        want.extend(pair("0"));
        assert_eq!(envs(container(&p, "tensorflow")), want);
        assert_eq!(envs(container(&p, "setup")), pair("0"));
    }

    #[test]
    fn no_objects_and_arguments_ignored() {
        let job = job(TF);
        let plugin = only_plugin(&job);
        assert!(plugin.on_job_add(&job).unwrap().is_empty());
        assert!(plugin.on_job_update(&job).unwrap().is_empty());
        assert!(plugin.on_job_delete(&job).is_empty());
        assert!(Env::new(&["--x=1".to_string()]).is_ok());
    }
}
