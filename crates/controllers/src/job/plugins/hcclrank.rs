//! `hcclrank`: annotates each pod with its HCCL rank (`hccl/rankIndex`), which Ascend's
//! collective-communication runtime reads: the pod's `RANK` variable when it has one, else the
//! master's replica index, else the master replica count plus the worker's index. A pod of
//! another task, or one already annotated, is left alone. It makes no objects.
//!
//! Arguments: `--master` (master), `--worker` (worker).

use k8s_openapi::api::core::v1::Pod;

use super::{Args, JobPlugin, Kind, PluginError, pod_task};
use tephra_api::batch::Job;
use tephra_api::keys::{self, plugins::HCCLRANK};

/// The `hcclrank` plugin with its arguments.
pub(super) struct HcclRank {
    master: String,
    worker: String,
}

impl HcclRank {
    /// Parses the plugin's arguments.
    pub(super) fn new(args: &[String]) -> Result<HcclRank, PluginError> {
        let a = Args::parse(
            HCCLRANK,
            args,
            &[("master", Kind::Value), ("worker", Kind::Value)],
        )?;
        Ok(HcclRank {
            master: a.string("master", "master"),
            worker: a.string("worker", "worker"),
        })
    }
}

/// The value of the first `RANK` variable among the regular containers (empty when it comes
/// from a reference), as Volcano reads it.
fn rank_env(pod: &Pod) -> Option<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.env.iter().flatten())
        .find(|e| e.name == "RANK")
        .map(|e| e.value.clone().unwrap_or_default())
}

impl JobPlugin for HcclRank {
    fn name(&self) -> &'static str {
        HCCLRANK
    }

    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError> {
        let annotated = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::HCCL_RANK_INDEX))
            .is_some_and(|v| !v.is_empty());
        if annotated {
            return Ok(());
        }
        let rank = match rank_env(pod).filter(|r| !r.is_empty()) {
            Some(r) => r,
            None => {
                let task = pod_task(pod);
                if task != self.master && task != self.worker {
                    return Ok(());
                }
                let is_master = task == self.master;
                let index: i32 = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(keys::TASK_INDEX))
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| PluginError::Missing {
                        plugin: HCCLRANK,
                        what: format!(
                            "pod {:?} has no numeric {} label",
                            pod.metadata.name.as_deref().unwrap_or_default(),
                            keys::TASK_INDEX
                        ),
                    })?;
                if is_master {
                    index.to_string()
                } else {
                    let masters = job.spec.task(&self.master).map_or(0, |t| t.replicas());
                    (masters + index).to_string()
                }
            }
        };
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(keys::HCCL_RANK_INDEX.to_string(), rank);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{job, only_plugin, pod};
    use super::*;

    const JOB: &str = r#"
metadata: {name: mindspore}
spec:
  plugins:
    hcclrank: ["--master=scheduler", "--worker=worker"]
  tasks:
    - {name: scheduler, replicas: 2, template: {spec: {containers: [{name: c, image: ms}]}}}
    - {name: worker, replicas: 4, template: {spec: {containers: [{name: c, image: ms}]}}}
    - {name: other, replicas: 1, template: {spec: {containers: [{name: c, image: ms}]}}}
    - name: ranked
      replicas: 1
      template: {spec: {containers: [{name: c, image: ms, env: [{name: RANK, value: "7"}]}]}}
"#;

    fn rank(p: &Pod) -> Option<&str> {
        p.metadata
            .annotations
            .as_ref()?
            .get("hccl/rankIndex")
            .map(String::as_str)
    }

    #[test]
    fn rank_annotation() {
        let job = job(JOB);
        let plugin = only_plugin(&job);
        assert_eq!(plugin.name(), "hcclrank");
        for (task, index, want) in [
            ("scheduler", 1, Some("1")),
            ("worker", 0, Some("2")),
            ("worker", 3, Some("5")),
            ("other", 0, None),
            ("ranked", 0, Some("7")),
        ] {
            let mut p = pod(&job, task, index);
            plugin.on_pod_create(&job, &mut p).unwrap();
            let once = p.clone();
            plugin.on_pod_create(&job, &mut p).unwrap();
            assert_eq!(p, once);
            assert_eq!(rank(&p), want, "{task}-{index}");
        }

        // An annotation already there is kept.
        let mut p = pod(&job, "worker", 0);
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("hccl/rankIndex".into(), "42".into());
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(rank(&p), Some("42"));

        // A worker without its index label cannot be ranked.
        let mut p = pod(&job, "worker", 0);
        p.metadata.labels = None;
        assert!(matches!(
            plugin.on_pod_create(&job, &mut p),
            Err(PluginError::Missing {
                plugin: "hcclrank",
                ..
            })
        ));
        assert!(plugin.on_job_add(&job).unwrap().is_empty());
        // hcclrank takes no arguments: an unknown one is ignored, as in Volcano.
        assert!(HcclRank::new(&["--rank=1".to_string()]).is_ok());
    }
}
