//! `ssh`: password-less ssh between the job's pods (what MPI launchers need). A Secret
//! `{job}-ssh` holds one RSA key pair for the whole job, an `authorized_keys` with its public
//! key and an ssh `config` that trusts every pod of the job; it is mounted as `.ssh` in every
//! container.
//!
//! Arguments: `--ssh-key-file-path` (`/root/.ssh`), `--ssh-private-key` and
//! `--ssh-public-key` (a key pair of the user's, used as given), `--ssh-port` (22; a value
//! that is not a port falls back to 22, as in Volcano).
//!
//! `on_job_add` generates a new key pair on every call; the edge creates the Secret only when
//! it does not exist, so the pods of a job always share the first one.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{KeyToPath, Pod, Secret, SecretVolumeSource, Volume, VolumeMount};
use rsa::pkcs1::{EncodeRsaPrivateKey, LineEnding};
use rsa::traits::PublicKeyParts;

use super::{
    Args, JobPlugin, Kind, Owned, OwnedKind, PluginError, Removed, distinct_hosts, host_parts,
    job_name, mount_everywhere, owned_meta, removed, set_volume,
};
use tephra_api::batch::Job;
use tephra_api::keys::plugins::SSH;

/// Secret key of the private key.
const PRIVATE_KEY: &str = "id_rsa";
/// Secret key of the public key.
const PUBLIC_KEY: &str = "id_rsa.pub";
/// Secret key of the authorized keys.
const AUTHORIZED_KEYS: &str = "authorized_keys";
/// Secret key of the client config.
const CONFIG: &str = "config";
/// Where root's ssh files live; the default mount path.
const ROOT_SSH_PATH: &str = "/root/.ssh";
/// The directory the Secret's items are projected into (mounted with this sub-path).
const RELATIVE_PATH: &str = ".ssh";
/// Size of generated keys.
const KEY_BITS: usize = 2048;

/// The `ssh` plugin with its arguments.
pub(super) struct Ssh {
    key_file_path: String,
    private_key: String,
    public_key: String,
    port: i32,
}

impl Ssh {
    /// Parses the plugin's arguments.
    pub(super) fn new(args: &[String]) -> Result<Ssh, PluginError> {
        let a = Args::parse(
            SSH,
            args,
            &[
                ("ssh-key-file-path", Kind::Value),
                ("ssh-private-key", Kind::Value),
                ("ssh-public-key", Kind::Value),
                ("ssh-port", Kind::Value),
            ],
        )?;
        Ok(Ssh {
            key_file_path: a.string("ssh-key-file-path", ROOT_SSH_PATH),
            private_key: a.string("ssh-private-key", ""),
            public_key: a.string("ssh-public-key", ""),
            // Volcano's documented fallback: any port it cannot use becomes 22.
            port: a.port("ssh-port", 22).unwrap_or(22),
        })
    }

    /// The Secret's data: the key pair (the user's, or a new one), and the config.
    fn secret_data(&self, job: &Job) -> Result<BTreeMap<String, ByteString>, PluginError> {
        // As Volcano: a private key alone is enough to use the user's pair.
        let (private, public) = if self.private_key.is_empty() {
            generate_key_pair()?
        } else {
            (self.private_key.clone(), self.public_key.clone())
        };
        let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
        Ok(BTreeMap::from([
            (PRIVATE_KEY.to_string(), bytes(&private)),
            (PUBLIC_KEY.to_string(), bytes(&public)),
            (AUTHORIZED_KEYS.to_string(), bytes(&public)),
            (CONFIG.to_string(), bytes(&ssh_config(job, self.port))),
        ]))
    }
}

/// The Secret's name: `{job}-ssh`.
fn secret_name(job: &Job) -> String {
    format!("{}-{SSH}", job_name(job))
}

/// A new RSA key pair: the private key as PKCS#1 PEM (`BEGIN RSA PRIVATE KEY`, what OpenSSH
/// and Volcano's pods expect) and the public key as an `authorized_keys` line.
fn generate_key_pair() -> Result<(String, String), PluginError> {
    let key = rsa::PrivateKey::new(&mut getrandom::SysRng, KEY_BITS)
        .map_err(|e| PluginError::Key(e.to_string()))?;
    let private = key
        .to_pkcs1_pem(LineEnding::LF)
        .map_err(|e| PluginError::Key(e.to_string()))?;
    let public = openssh_public_key(&key)?;
    Ok((private.to_string(), public))
}

/// The public half of `key` in OpenSSH form, `ssh-rsa <base64>` and a newline, as Go's
/// `ssh.MarshalAuthorizedKey` writes it.
fn openssh_public_key(key: &impl PublicKeyParts) -> Result<String, PluginError> {
    let key_err = |e: ssh_key::Error| PluginError::Key(e.to_string());
    let data = ssh_key::public::RsaPublicKey {
        e: ssh_key::Mpint::from_positive_bytes(&key.e_bytes()).map_err(key_err)?,
        n: ssh_key::Mpint::from_positive_bytes(&key.n_bytes()).map_err(key_err)?,
    };
    let line = ssh_key::PublicKey::new(ssh_key::public::KeyData::Rsa(data), "")
        .to_openssh()
        .map_err(key_err)?;
    Ok(format!("{}\n", line.trim_end()))
}

/// The client config: no host-key prompts (pods come and go with new keys) and, per host of
/// the job, its short name, DNS name and port.
fn ssh_config(job: &Job, port: i32) -> String {
    let mut config = String::from("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n");
    for task in job.tasks() {
        for i in 0..distinct_hosts(task) {
            let (hostname, subdomain) = host_parts(job, task, i);
            config.push_str(&format!(
                "Host {hostname}\n  HostName {hostname}.{subdomain}\n  Port {port}\n"
            ));
        }
    }
    config
}

impl JobPlugin for Ssh {
    fn name(&self) -> &'static str {
        SSH
    }

    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError> {
        let name = secret_name(job);
        let items = [PRIVATE_KEY, PUBLIC_KEY, AUTHORIZED_KEYS, CONFIG]
            .into_iter()
            .map(|key| KeyToPath {
                key: key.to_string(),
                path: format!("{RELATIVE_PATH}/{key}"),
                ..KeyToPath::default()
            })
            .collect();
        // ssh refuses a private key others can read, so root's files are 0600; under another
        // path the files belong to root but a non-root user must read them: 0644.
        let mode = if self.key_file_path == ROOT_SSH_PATH {
            0o600
        } else {
            0o644
        };
        set_volume(
            pod,
            Volume {
                name: name.clone(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(name.clone()),
                    items: Some(items),
                    default_mode: Some(mode),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            },
        );
        mount_everywhere(
            pod,
            &VolumeMount {
                name,
                mount_path: self.key_file_path.clone(),
                sub_path: Some(RELATIVE_PATH.to_string()),
                ..VolumeMount::default()
            },
        );
        Ok(())
    }

    fn on_job_add(&self, job: &Job) -> Result<Vec<Owned>, PluginError> {
        Ok(vec![Owned::Secret(Secret {
            metadata: owned_meta(job, secret_name(job)),
            data: Some(self.secret_data(job)?),
            ..Secret::default()
        })])
    }

    fn on_job_update(&self, _job: &Job) -> Result<Vec<Owned>, PluginError> {
        // The Secret is never refreshed: a new key would not match the one the running pods
        // have mounted.
        Ok(Vec::new())
    }

    fn on_job_delete(&self, job: &Job) -> Vec<Removed> {
        vec![removed(job, OwnedKind::Secret, secret_name(job))]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{container, job, only_plugin, pod};
    use super::*;
    use rsa::pkcs1::DecodeRsaPrivateKey;

    const JOB: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: lm-mpi-job
spec:
  minAvailable: 3
  plugins:
    ssh: []
  tasks:
    - replicas: 1
      name: mpimaster
      template:
        spec:
          initContainers: [{name: init, image: busybox}]
          containers:
            - name: mpimaster
              image: volcanosh/example-mpi:0.0.3
    - replicas: 2
      name: mpiworker
      template:
        spec:
          containers:
            - {name: mpiworker, image: volcanosh/example-mpi:0.0.3}
    - replicas: 2
      name: fixed
      template:
        spec:
          hostname: solo
          subdomain: sub
          containers: [{name: c, image: busybox}]
"#;

    fn text(data: &BTreeMap<String, ByteString>, key: &str) -> String {
        String::from_utf8(data.get(key).map(|b| b.0.clone()).unwrap_or_default())
            .unwrap_or_default()
    }

    fn secret(objects: &[Owned]) -> &Secret {
        match objects {
            [Owned::Secret(s)] => s,
            _ => panic!("expected one Secret"),
        }
    }

    #[test]
    fn generated_key_pair_and_config() {
        let job = job(JOB);
        let plugin = only_plugin(&job);
        assert_eq!(plugin.name(), "ssh");
        let objects = plugin.on_job_add(&job).unwrap();
        let s = secret(&objects);
        assert_eq!(s.metadata.name.as_deref(), Some("lm-mpi-job-ssh"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(s.metadata.owner_references.as_ref().map(Vec::len), Some(1));
        let data = s.data.clone().unwrap_or_default();
        let keys: Vec<_> = data.keys().map(String::as_str).collect();
        assert_eq!(keys, ["authorized_keys", "config", "id_rsa", "id_rsa.pub"]);

        let private = text(&data, "id_rsa");
        assert!(private.starts_with("-----BEGIN RSA PRIVATE KEY-----\n"));
        let key = rsa::PrivateKey::from_pkcs1_pem(&private).unwrap();
        assert_eq!(key.n().bit_width(), 2048);

        let public = text(&data, "id_rsa.pub");
        assert!(public.starts_with("ssh-rsa AAAA") && public.ends_with('\n'));
        assert_eq!(text(&data, "authorized_keys"), public);
        let parsed = ssh_key::PublicKey::from_openssh(public.trim_end()).unwrap();
        let rsa_pub = parsed.key_data().rsa().unwrap();
        assert_eq!(rsa_pub.n.as_positive_bytes(), Some(&key.n_bytes()[..]));
        assert_eq!(rsa_pub.e.as_positive_bytes(), Some(&key.e_bytes()[..]));

        assert_eq!(
            text(&data, "config"),
            "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n\
             Host lm-mpi-job-mpimaster-0\n  HostName lm-mpi-job-mpimaster-0.lm-mpi-job\n  Port 22\n\
             Host lm-mpi-job-mpiworker-0\n  HostName lm-mpi-job-mpiworker-0.lm-mpi-job\n  Port 22\n\
             Host lm-mpi-job-mpiworker-1\n  HostName lm-mpi-job-mpiworker-1.lm-mpi-job\n  Port 22\n\
             Host solo\n  HostName solo.sub\n  Port 22\n"
        );

        assert!(plugin.on_job_update(&job).unwrap().is_empty());
        assert_eq!(
            plugin.on_job_delete(&job),
            [Removed {
                kind: OwnedKind::Secret,
                namespace: "ns".into(),
                name: "lm-mpi-job-ssh".into()
            }]
        );
    }

    #[test]
    fn user_keys_and_port() {
        let job = job(JOB);
        let ssh = Ssh::new(&[
            "--ssh-private-key=PRIVATE".to_string(),
            "--ssh-public-key".to_string(),
            "ssh-rsa AAAAuser".to_string(),
            "--ssh-port=2222".to_string(),
        ])
        .unwrap();
        let objects = ssh.on_job_add(&job).unwrap();
        let data = secret(&objects).data.clone().unwrap_or_default();
        assert_eq!(text(&data, "id_rsa"), "PRIVATE");
        assert_eq!(text(&data, "id_rsa.pub"), "ssh-rsa AAAAuser");
        assert_eq!(text(&data, "authorized_keys"), "ssh-rsa AAAAuser");
        assert!(text(&data, "config").contains("  Port 2222\n"));

        for port in ["--ssh-port=0", "--ssh-port=70000", "--ssh-port=twenty"] {
            let ssh = Ssh::new(&[port.to_string()]).unwrap();
            assert_eq!(ssh.port, 22, "{port}");
        }
        assert!(matches!(
            Ssh::new(&["--ssh-key-file-path".to_string()]),
            Err(PluginError::BadArgument { plugin: "ssh", .. })
        ));
    }

    #[test]
    fn an_unknown_argument_is_ignored_with_those_after_it_as_volcano_does() {
        // Volcano's e2e suites give `--no-root`, which its ssh plugin does not define: Go's
        // flag parsing stops there and the job runs with what was parsed before it.
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ssh = Ssh::new(&args(&["--no-root"])).unwrap();
        assert_eq!((ssh.key_file_path.as_str(), ssh.port), (ROOT_SSH_PATH, 22));
        let ssh = Ssh::new(&args(&[
            "--ssh-key-file-path=/x",
            "--no-root",
            "--ssh-port=2222",
        ]))
        .unwrap();
        assert_eq!((ssh.key_file_path.as_str(), ssh.port), ("/x", 22));
        // A known flag with a bad value is still refused.
        assert!(Ssh::new(&args(&["--ssh-key-file-path"])).is_err());
    }

    #[test]
    fn secret_volume_in_every_container() {
        let job = job(JOB);
        let plugin = only_plugin(&job);
        let mut p = pod(&job, "mpimaster", 0);
        plugin.on_pod_create(&job, &mut p).unwrap();
        let once = p.clone();
        plugin.on_pod_create(&job, &mut p).unwrap();
        assert_eq!(p, once, "idempotent");
        let volumes = p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        assert_eq!(volumes.len(), 1);
        let want: Volume = serde_json::from_value(serde_json::json!({
            "name": "lm-mpi-job-ssh",
            "secret": {
                "secretName": "lm-mpi-job-ssh",
                "items": [
                    {"key": "id_rsa", "path": ".ssh/id_rsa"},
                    {"key": "id_rsa.pub", "path": ".ssh/id_rsa.pub"},
                    {"key": "authorized_keys", "path": ".ssh/authorized_keys"},
                    {"key": "config", "path": ".ssh/config"},
                ],
                "defaultMode": 0o600,
            }
        }))
        .unwrap();
        assert_eq!(volumes[0], want);
        for name in ["mpimaster", "init"] {
            let mounts = container(&p, name)
                .volume_mounts
                .clone()
                .unwrap_or_default();
            assert_eq!(mounts.len(), 1, "{name}");
            assert_eq!(mounts[0].name, "lm-mpi-job-ssh");
            assert_eq!(mounts[0].mount_path, "/root/.ssh");
            assert_eq!(mounts[0].sub_path.as_deref(), Some(".ssh"));
        }

        let ssh = Ssh::new(&["--ssh-key-file-path=/home/mpi/.ssh".to_string()]).unwrap();
        let mut p = pod(&job, "mpiworker", 1);
        ssh.on_pod_create(&job, &mut p).unwrap();
        let mode = p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .and_then(|v| v[0].secret.as_ref())
            .and_then(|s| s.default_mode);
        assert_eq!(mode, Some(0o644));
        let mounts = container(&p, "mpiworker")
            .volume_mounts
            .clone()
            .unwrap_or_default();
        assert_eq!(mounts[0].mount_path, "/home/mpi/.ssh");
    }
}
