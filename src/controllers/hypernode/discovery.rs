//! HyperNode discovery at the edge: the controller configuration file (`--controller-config`,
//! Volcano's `volcano-controller.conf`) read at start and re-read when it changes, and the
//! plan of [`tephra_controllers::hypernode::discovery`] written to the cluster.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use tephra_controllers::hypernode::discovery::{
    DiscoveryConfig, DiscoveryConfigError, DiscoveryPlan, LabelDiscovery, parse,
};

use super::HyperNodeError;
use crate::api::HyperNode;
use crate::controllers::KubeOp;
use crate::sync;

/// Why the controller configuration file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryFileError {
    /// The file cannot be read.
    #[error("--controller-config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a usable configuration.
    #[error("--controller-config {path}: {source}")]
    Config {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: DiscoveryConfigError,
    },
}

/// Reads and checks the controller configuration file; discovery sources tephra does not run
/// are named in a warning.
pub fn load(path: &Path) -> Result<DiscoveryConfig, DiscoveryFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| DiscoveryFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config = parse(&text).map_err(|source| DiscoveryFileError::Config {
        path: path.to_path_buf(),
        source,
    })?;
    if !config.not_run.is_empty() {
        tracing::warn!(
            file = %path.display(),
            sources = ?config.not_run,
            "HyperNode discovery sources tephra does not run (only `label` is); they are left out"
        );
    }
    Ok(config)
}

/// The file's modification time and length when last read.
type Stamp = (Option<SystemTime>, u64);

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok(), meta.len()))
}

/// The label discovery in force, from the controller configuration file.
#[derive(Debug)]
pub struct DiscoveryFile {
    path: PathBuf,
    seen: Mutex<Option<Stamp>>,
    current: RwLock<Option<Arc<LabelDiscovery>>>,
}

impl DiscoveryFile {
    /// The file at `path`, whose content at start was `config` (checked by [`load`]).
    pub fn new(path: PathBuf, config: DiscoveryConfig) -> Self {
        let seen = Mutex::new(stamp(&path));
        Self {
            path,
            seen,
            current: RwLock::new(config.label.map(Arc::new)),
        }
    }

    /// The label discovery in force (none when the file does not enable it).
    pub fn current(&self) -> Option<Arc<LabelDiscovery>> {
        sync::read(&self.current).clone()
    }

    /// Re-reads the file if it changed; `true` when the label discovery in force changed. A
    /// bad or unreadable new file keeps the old configuration, with a warning.
    pub fn refresh(&self) -> bool {
        let now = stamp(&self.path);
        {
            let mut seen = sync::lock(&self.seen);
            if *seen == now {
                return false;
            }
            *seen = now;
        }
        match load(&self.path) {
            Ok(config) => {
                let next = config.label.map(Arc::new);
                let mut current = sync::write(&self.current);
                if *current == next {
                    return false;
                }
                tracing::info!(file = %self.path.display(), label = next.is_some(), "HyperNode discovery configuration reloaded");
                *current = next;
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "HyperNode discovery configuration not reloaded; the previous one stays in force");
                false
            }
        }
    }
}

/// Writes a discovery plan: creates, then updates, then deletes (members are re-pointed
/// before the HyperNodes they named go). A HyperNode already gone is not an error.
pub(super) async fn write(client: &Client, plan: DiscoveryPlan) -> Result<(), HyperNodeError> {
    let api: Api<HyperNode> = Api::all(client.clone());
    for hn in plan.create {
        let name = hn.metadata.name.clone().unwrap_or_default();
        tracing::info!(hypernode = %name, "creating a discovered HyperNode");
        api.create(&PostParams::default(), &hn)
            .await
            .map_err(|e| KubeOp::new("create", name, e))?;
    }
    for hn in plan.update {
        let name = hn.metadata.name.clone().unwrap_or_default();
        tracing::info!(hypernode = %name, "updating a discovered HyperNode");
        api.replace(&name, &PostParams::default(), &hn)
            .await
            .map_err(|e| KubeOp::new("update", name, e))?;
    }
    for name in plan.delete {
        tracing::info!(hypernode = %name, "deleting a discovered HyperNode no node's labels call for");
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if crate::cluster::status_code(&e) == Some(404) => {}
            Err(e) => return Err(KubeOp::new("delete", name, e).into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL: &str = "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    networkTopologyTypes:\n      t: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]\n";

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tephra-discovery-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_changed_file_is_taken_and_a_bad_one_keeps_the_old() {
        let dir = scratch("reload");
        let path = dir.join("controller.conf");
        std::fs::write(&path, LABEL).unwrap();
        let f = DiscoveryFile::new(path.clone(), load(&path).unwrap());
        assert_eq!(f.current().unwrap().types[0].tiers, ["rack"]);
        assert!(!f.refresh(), "unchanged");

        std::fs::write(&path, LABEL.replace("rack", "row")).unwrap();
        assert!(f.refresh());
        assert_eq!(f.current().unwrap().types[0].tiers, ["row"]);

        std::fs::write(&path, "networkTopologyDiscovery: [{source: label, enabled: true, config: {networkTopologyTypes: {t: [{nodeLabel: a}]}}}]").unwrap();
        assert!(!f.refresh(), "a bad file");
        assert_eq!(f.current().unwrap().types[0].tiers, ["row"]);

        std::fs::write(&path, "networkTopologyDiscovery: []\n").unwrap();
        assert!(f.refresh());
        assert!(f.current().is_none(), "discovery turned off");
    }

    #[test]
    fn a_missing_or_bad_file_is_named_in_the_error() {
        let e = load(Path::new("/nonexistent/controller.conf")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--controller-config /nonexistent/controller.conf: "),
            "{e}"
        );
        let dir = scratch("bad");
        let path = dir.join("c.conf");
        std::fs::write(&path, "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config: {networkTopologyTypes: {t: [{nodeLabel: a}, {nodeLabel: a}]}}\n").unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(
            e.ends_with("network topology type \"t\" names the label \"a\" twice"),
            "{e}"
        );
    }
}
