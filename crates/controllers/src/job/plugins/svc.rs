//! `svc`: makes the job's pods reachable by name. A headless Service `{job}` gives every pod
//! the DNS name `{hostname}.{job}`; the ConfigMap `{job}-svc` lists each task's hosts (mounted
//! at `/etc/volcano`, and as `VC_{TASK}_HOSTS` / `VC_{TASK}_NUM` variables); a NetworkPolicy
//! `{job}` lets only the job's own pods in, unless disabled.
//!
//! Arguments: `--publish-not-ready-addresses` (false), `--disable-network-policy` (false),
//! `--inject-hosts-env` (true).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapKeySelector, ConfigMapVolumeSource, EnvVar, EnvVarSource, Pod, Service,
    ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{
    Args, JobPlugin, Kind, Owned, OwnedKind, PluginError, Removed, all_containers, job_name,
    job_selector, mount_everywhere, owned_meta, removed, set_env, set_volume, task_hosts,
};
use tephra_api::batch::Job;
use tephra_api::keys::plugins::SVC;

/// Where the hosts ConfigMap is mounted.
const MOUNT_PATH: &str = "/etc/volcano";

/// The `svc` plugin with its arguments.
pub(super) struct Svc {
    publish_not_ready_addresses: bool,
    disable_network_policy: bool,
    inject_hosts_env: bool,
}

impl Svc {
    /// Parses the plugin's arguments.
    pub(super) fn new(args: &[String]) -> Result<Svc, PluginError> {
        let a = Args::parse(
            SVC,
            args,
            &[
                ("publish-not-ready-addresses", Kind::Bool),
                ("disable-network-policy", Kind::Bool),
                ("inject-hosts-env", Kind::Bool),
            ],
        )?;
        Ok(Svc {
            publish_not_ready_addresses: a.bool("publish-not-ready-addresses", false),
            disable_network_policy: a.bool("disable-network-policy", false),
            inject_hosts_env: a.bool("inject-hosts-env", true),
        })
    }

    /// The hosts ConfigMap of the job.
    fn config_map(&self, job: &Job) -> ConfigMap {
        ConfigMap {
            metadata: owned_meta(job, config_map_name(job)),
            data: Some(hosts_data(job)),
            ..ConfigMap::default()
        }
    }

    /// The headless Service of the job.
    fn service(&self, job: &Job) -> Service {
        Service {
            metadata: owned_meta(job, job_name(job).to_string()),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".to_string()),
                selector: Some(job_selector(job)),
                // Go omits a false bool; so does tephra, to read back as it was written.
                publish_not_ready_addresses: self.publish_not_ready_addresses.then_some(true),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }
}

/// The ConfigMap's name: `{job}-svc`.
fn config_map_name(job: &Job) -> String {
    format!("{}-{SVC}", job_name(job))
}

/// A task name as it appears in keys: `-` becomes `_` (a variable name cannot hold `-`).
fn key_part(task: &str) -> String {
    task.replace('-', "_")
}

/// `VC_{TASK}_HOSTS` of a task.
fn hosts_key(task: &str) -> String {
    format!("VC_{}_HOSTS", key_part(task).to_uppercase())
}

/// `VC_{TASK}_NUM` of a task.
fn num_key(task: &str) -> String {
    format!("VC_{}_NUM", key_part(task).to_uppercase())
}

/// The ConfigMap data: per task `{task}.host` (hosts one per line), `VC_{TASK}_HOSTS`
/// (comma-separated) and `VC_{TASK}_NUM` (how many).
fn hosts_data(job: &Job) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    for task in job.tasks() {
        let hosts = task_hosts(job, task);
        data.insert(format!("{}.host", key_part(task.name())), hosts.join("\n"));
        data.insert(hosts_key(task.name()), hosts.join(","));
        data.insert(num_key(task.name()), hosts.len().to_string());
    }
    data
}

impl JobPlugin for Svc {
    fn name(&self) -> &'static str {
        SVC
    }

    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError> {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let cm = config_map_name(job);
        if let Some(spec) = pod.spec.as_mut() {
            if spec.hostname.as_deref().is_none_or(str::is_empty) {
                spec.hostname = Some(pod_name);
            }
            if spec.subdomain.as_deref().is_none_or(str::is_empty) {
                spec.subdomain = Some(job_name(job).to_string());
            }
        }
        if self.inject_hosts_env {
            let vars: Vec<EnvVar> = job
                .tasks()
                .iter()
                .flat_map(|t| [hosts_key(t.name()), num_key(t.name())])
                .map(|key| EnvVar {
                    name: key.clone(),
                    value: None,
                    value_from: Some(EnvVarSource {
                        config_map_key_ref: Some(ConfigMapKeySelector {
                            name: cm.clone(),
                            key,
                            optional: None,
                        }),
                        ..EnvVarSource::default()
                    }),
                })
                .collect();
            for c in all_containers(pod) {
                for v in &vars {
                    set_env(c, v.clone());
                }
            }
        }
        set_volume(
            pod,
            Volume {
                name: cm.clone(),
                config_map: Some(ConfigMapVolumeSource {
                    name: cm.clone(),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
        );
        mount_everywhere(
            pod,
            &VolumeMount {
                name: cm,
                mount_path: MOUNT_PATH.to_string(),
                ..VolumeMount::default()
            },
        );
        Ok(())
    }

    fn on_job_add(&self, job: &Job) -> Result<Vec<Owned>, PluginError> {
        let mut objects = vec![
            Owned::ConfigMap(self.config_map(job)),
            Owned::Service(self.service(job)),
        ];
        if !self.disable_network_policy {
            let selector = LabelSelector {
                match_labels: Some(job_selector(job)),
                match_expressions: None,
            };
            objects.push(Owned::NetworkPolicy(NetworkPolicy {
                metadata: owned_meta(job, job_name(job).to_string()),
                spec: Some(NetworkPolicySpec {
                    pod_selector: Some(selector.clone()),
                    ingress: Some(vec![NetworkPolicyIngressRule {
                        from: Some(vec![NetworkPolicyPeer {
                            pod_selector: Some(selector),
                            ..NetworkPolicyPeer::default()
                        }]),
                        ports: None,
                    }]),
                    policy_types: Some(vec!["Ingress".to_string()]),
                    egress: None,
                }),
            }));
        }
        Ok(objects)
    }

    fn on_job_update(&self, job: &Job) -> Result<Vec<Owned>, PluginError> {
        // Replica counts may change while the job runs; only the hosts list follows them.
        Ok(vec![Owned::ConfigMap(self.config_map(job))])
    }

    fn on_job_delete(&self, job: &Job) -> Vec<Removed> {
        let mut gone = vec![
            removed(job, OwnedKind::ConfigMap, config_map_name(job)),
            removed(job, OwnedKind::Service, job_name(job).to_string()),
        ];
        // As Volcano: with the policy disabled tephra never made one, and one of that name
        // would be someone else's.
        if !self.disable_network_policy {
            gone.push(removed(
                job,
                OwnedKind::NetworkPolicy,
                job_name(job).to_string(),
            ));
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{container, job, only_plugin, pod};
    use super::*;

    const MPI: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: lm-mpi-job
spec:
  minAvailable: 3
  schedulerName: volcano
  plugins:
    svc: []
  tasks:
    - replicas: 1
      name: mpimaster
      template:
        spec:
          initContainers:
            - {name: init, image: busybox}
          containers:
            - name: mpimaster
              image: volcanosh/example-mpi:0.0.3
              volumeMounts:
                - {name: data, mountPath: /data}
          volumes:
            - {name: data, emptyDir: {}}
    - replicas: 2
      name: mpi-worker
      template:
        spec:
          containers:
            - {name: mpiworker, image: volcanosh/example-mpi:0.0.3}
    - replicas: 3
      name: fixed
      template:
        spec:
          hostname: the-one
          subdomain: elsewhere
          containers:
            - {name: fixed, image: busybox}
"#;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn objects_of_a_job() {
        let job = job(MPI);
        let plugin = only_plugin(&job);
        assert_eq!(plugin.name(), "svc");
        let objects = plugin.on_job_add(&job).unwrap();
        let kinds: Vec<_> = objects.iter().map(|o| (o.kind(), o.name())).collect();
        assert_eq!(
            kinds,
            [
                (OwnedKind::ConfigMap, "lm-mpi-job-svc"),
                (OwnedKind::Service, "lm-mpi-job"),
                (OwnedKind::NetworkPolicy, "lm-mpi-job"),
            ]
        );
        for o in &objects {
            let meta = o.metadata();
            assert_eq!(meta.namespace.as_deref(), Some("ns"));
            let refs = meta.owner_references.as_deref().unwrap_or_default();
            assert_eq!(refs.len(), 1, "one controller reference, not Volcano's two");
            assert_eq!(refs[0].name, "lm-mpi-job");
            assert_eq!(refs[0].controller, Some(true));
        }
        let Owned::ConfigMap(cm) = &objects[0] else {
            panic!("not a ConfigMap")
        };
        assert_eq!(
            cm.data.clone().unwrap_or_default(),
            data(&[
                ("mpimaster.host", "lm-mpi-job-mpimaster-0.lm-mpi-job"),
                ("VC_MPIMASTER_HOSTS", "lm-mpi-job-mpimaster-0.lm-mpi-job"),
                ("VC_MPIMASTER_NUM", "1"),
                (
                    "mpi_worker.host",
                    "lm-mpi-job-mpi-worker-0.lm-mpi-job\nlm-mpi-job-mpi-worker-1.lm-mpi-job"
                ),
                (
                    "VC_MPI_WORKER_HOSTS",
                    "lm-mpi-job-mpi-worker-0.lm-mpi-job,lm-mpi-job-mpi-worker-1.lm-mpi-job"
                ),
                ("VC_MPI_WORKER_NUM", "2"),
                ("fixed.host", "the-one.elsewhere"),
                ("VC_FIXED_HOSTS", "the-one.elsewhere"),
                ("VC_FIXED_NUM", "1"),
            ])
        );
        let Owned::Service(svc) = &objects[1] else {
            panic!("not a Service")
        };
        let spec = svc.spec.clone().unwrap_or_default();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        let labels = data(&[
            ("volcano.sh/job-name", "lm-mpi-job"),
            ("volcano.sh/job-namespace", "ns"),
        ]);
        assert_eq!(spec.selector, Some(labels.clone()));
        assert_eq!(spec.publish_not_ready_addresses, None);
        let Owned::NetworkPolicy(np) = &objects[2] else {
            panic!("not a NetworkPolicy")
        };
        let want: NetworkPolicySpec = serde_json::from_value(serde_json::json!({
            "podSelector": {"matchLabels": labels},
            "ingress": [{"from": [{"podSelector": {"matchLabels": labels}}]}],
            "policyTypes": ["Ingress"],
        }))
        .unwrap();
        assert_eq!(np.spec.as_ref(), Some(&want));

        // A later sync refreshes the ConfigMap only.
        let update = plugin.on_job_update(&job).unwrap();
        assert_eq!(update, vec![objects[0].clone()]);

        let gone = plugin.on_job_delete(&job);
        let gone: Vec<_> = gone
            .iter()
            .map(|r| (r.kind, r.namespace.as_str(), r.name.as_str()))
            .collect();
        assert_eq!(
            gone,
            [
                (OwnedKind::ConfigMap, "ns", "lm-mpi-job-svc"),
                (OwnedKind::Service, "ns", "lm-mpi-job"),
                (OwnedKind::NetworkPolicy, "ns", "lm-mpi-job"),
            ]
        );
    }

    #[test]
    fn arguments_change_the_objects() {
        let mut job = job(MPI);
        job.spec.plugins = Some(BTreeMap::from([(
            "svc".to_string(),
            vec![
                "--publish-not-ready-addresses".to_string(),
                "--disable-network-policy=true".to_string(),
            ],
        )]));
        let plugin = only_plugin(&job);
        let objects = plugin.on_job_add(&job).unwrap();
        assert_eq!(objects.len(), 2, "no NetworkPolicy");
        let Owned::Service(svc) = &objects[1] else {
            panic!("not a Service")
        };
        assert_eq!(
            svc.spec
                .as_ref()
                .and_then(|s| s.publish_not_ready_addresses),
            Some(true)
        );
        assert_eq!(plugin.on_job_delete(&job).len(), 2);

        assert!(matches!(
            Svc::new(&["--inject-hosts-env=nah".to_string()]),
            Err(PluginError::BadArgument { plugin: "svc", .. })
        ));
        // An unknown flag is ignored, as Volcano's flag parsing does.
        assert!(Svc::new(&["--port=1".to_string()]).is_ok());
    }

    #[test]
    fn pod_edits() {
        let job = job(MPI);
        let plugin = only_plugin(&job);
        let mut p = pod(&job, "mpimaster", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let once = p.clone();
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(p, once, "a second call changes nothing");

        let spec = p.spec.clone().unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some("lm-mpi-job-mpimaster-0"));
        assert_eq!(spec.subdomain.as_deref(), Some("lm-mpi-job"));
        let volumes: Vec<_> = spec.volumes.iter().flatten().map(|v| &v.name).collect();
        assert_eq!(volumes, ["data", "lm-mpi-job-svc"]);
        let cm_volume = spec
            .volumes
            .iter()
            .flatten()
            .nth(1)
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            cm_volume.config_map.map(|c| c.name).as_deref(),
            Some("lm-mpi-job-svc")
        );
        for name in ["mpimaster", "init"] {
            let c = container(&p, name);
            let mounts: Vec<_> = c
                .volume_mounts
                .iter()
                .flatten()
                .map(|m| (m.name.as_str(), m.mount_path.as_str()))
                .collect();
            let mut want = vec![("lm-mpi-job-svc", "/etc/volcano")];
            if name == "mpimaster" {
                want.insert(0, ("data", "/data"));
            }
            assert_eq!(mounts, want, "{name}");
            let env: Vec<_> = c
                .env
                .iter()
                .flatten()
                .map(|e| {
                    let r = e
                        .value_from
                        .as_ref()
                        .and_then(|f| f.config_map_key_ref.clone())
                        .unwrap_or_default();
                    assert_eq!(r.name, "lm-mpi-job-svc");
                    assert_eq!(r.key, e.name);
                    e.name.as_str()
                })
                .collect();
            assert_eq!(
                env,
                [
                    "VC_MPIMASTER_HOSTS",
                    "VC_MPIMASTER_NUM",
                    "VC_MPI_WORKER_HOSTS",
                    "VC_MPI_WORKER_NUM",
                    "VC_FIXED_HOSTS",
                    "VC_FIXED_NUM"
                ],
                "{name}"
            );
        }

        // A template hostname and subdomain are kept.
        let mut p = pod(&job, "fixed", 2);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let spec = p.spec.clone().unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some("the-one"));
        assert_eq!(spec.subdomain.as_deref(), Some("elsewhere"));
    }

    #[test]
    fn no_env_when_not_injected() {
        let mut job = job(MPI);
        job.spec.plugins = Some(BTreeMap::from([(
            "svc".to_string(),
            vec!["--inject-hosts-env=false".to_string()],
        )]));
        let plugin = only_plugin(&job);
        let mut p = pod(&job, "mpi-worker", 1);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let c = container(&p, "mpiworker");
        assert!(c.env.as_deref().unwrap_or_default().is_empty());
        assert_eq!(c.volume_mounts.as_ref().map(Vec::len), Some(1));
    }
}
