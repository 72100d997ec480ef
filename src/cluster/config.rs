//! Choosing the cluster, exactly in the contract's order:
//!
//! 1. the in-cluster service-account environment (`KUBERNETES_SERVICE_HOST`/`_PORT` and the
//!    mounted token),
//! 2. `--kubeconfig PATH`,
//! 3. `$KUBECONFIG` (a `:`-separated list, merged as kubectl does),
//! 4. `~/.kube/config`,
//!
//! otherwise refuse to start with one clear line. [`choose`] is pure (it looks only at the
//! [`Environment`] it is handed) so the order is unit-tested; [`connect`] does the I/O.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// Where the service-account token is mounted in a pod.
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// How long start-up waits for the API server to answer `/version` before giving up.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors choosing or reaching a cluster. Each renders as one line meant for a person.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No source of cluster credentials exists.
    #[error(
        "no cluster to use: not running in a pod, no --kubeconfig given, KUBECONFIG unset and \
         {home_config} missing; pass --kubeconfig PATH, or --embedded to run with an in-memory API"
    )]
    NoCluster {
        /// The `~/.kube/config` path that was looked for.
        home_config: String,
    },
    /// A kubeconfig file could not be read or understood.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// Which file (or `$KUBECONFIG`).
        path: String,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The in-cluster environment is set but incomplete.
    #[error("in-cluster configuration: {0}")]
    InCluster(#[from] kube::config::InClusterError),
    /// Building the client failed (bad TLS material in the kubeconfig, for example).
    #[error("building the kube client: {0}")]
    Client(#[source] kube::Error),
    /// The API server did not answer.
    #[error("cannot reach the cluster at {url}: {reason}")]
    Unreachable {
        /// The API server URL that was tried.
        url: String,
        /// Why (timeout, connection refused, TLS, ...).
        reason: String,
    },
}

impl ClusterError {
    /// A short, stable label for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::NoCluster { .. } => "no_cluster",
            Self::Kubeconfig { .. } => "kubeconfig",
            Self::InCluster(_) => "in_cluster",
            Self::Client(_) => "client",
            Self::Unreachable { .. } => "unreachable",
        }
    }
}

/// The facts [`choose`] decides from, captured from the process environment by
/// [`Environment::from_process`] or written by hand in tests.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` are both set and the
    /// service-account token file exists.
    pub in_cluster: bool,
    /// The value of `KUBECONFIG`, if set and non-empty.
    pub kubeconfig_env: Option<String>,
    /// `$HOME/.kube/config`, if a home directory is known.
    pub home_config: Option<PathBuf>,
    /// Whether `home_config` exists.
    pub home_config_exists: bool,
}

impl Environment {
    /// Reads the real process environment and file system.
    pub fn from_process() -> Self {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        let in_cluster = set("KUBERNETES_SERVICE_HOST")
            && set("KUBERNETES_SERVICE_PORT")
            && Path::new(SERVICE_ACCOUNT_TOKEN).exists();
        let kubeconfig_env = std::env::var("KUBECONFIG").ok().filter(|v| !v.is_empty());
        let home_config =
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"));
        let home_config_exists = home_config.as_deref().is_some_and(Path::exists);
        Self {
            in_cluster,
            kubeconfig_env,
            home_config,
            home_config_exists,
        }
    }
}

/// Which source of cluster credentials to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterSource {
    /// The pod's service account.
    InCluster,
    /// A kubeconfig file named by `--kubeconfig`.
    Flag(PathBuf),
    /// `$KUBECONFIG` (possibly several files).
    Env(String),
    /// `~/.kube/config`.
    Home(PathBuf),
}

impl std::fmt::Display for ClusterSource {
    // For the start-up log: where the credentials came from, in words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::InCluster => f.write_str("in-cluster service account"),
            Self::Flag(p) => write!(f, "--kubeconfig {}", p.display()),
            Self::Env(v) => write!(f, "KUBECONFIG={v}"),
            Self::Home(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Picks the cluster source in the contract's order, or says why there is none.
pub fn choose(
    env: &Environment,
    kubeconfig_flag: Option<&Path>,
) -> Result<ClusterSource, ClusterError> {
    if env.in_cluster {
        return Ok(ClusterSource::InCluster);
    }
    if let Some(path) = kubeconfig_flag {
        return Ok(ClusterSource::Flag(path.to_path_buf()));
    }
    if let Some(v) = &env.kubeconfig_env {
        return Ok(ClusterSource::Env(v.clone()));
    }
    match &env.home_config {
        Some(p) if env.home_config_exists => Ok(ClusterSource::Home(p.clone())),
        other => Err(ClusterError::NoCluster {
            home_config: other
                .as_ref()
                .map_or_else(|| "~/.kube/config".to_string(), |p| p.display().to_string()),
        }),
    }
}

/// Builds the `kube::Config` for a source.
pub async fn load(source: &ClusterSource) -> Result<kube::Config, ClusterError> {
    let opts = KubeConfigOptions::default();
    let from_file = |path: String, kc: Result<Kubeconfig, kube::config::KubeconfigError>| async move {
        let kc = kc.map_err(|source| ClusterError::Kubeconfig {
            path: path.clone(),
            source,
        })?;
        kube::Config::from_custom_kubeconfig(kc, &opts)
            .await
            .map_err(|source| ClusterError::Kubeconfig { path, source })
    };
    match source {
        ClusterSource::InCluster => Ok(kube::Config::incluster()?),
        ClusterSource::Flag(p) | ClusterSource::Home(p) => {
            from_file(p.display().to_string(), Kubeconfig::read_from(p)).await
        }
        ClusterSource::Env(v) => {
            let kc = Kubeconfig::from_env()
                .and_then(|k| k.ok_or(kube::config::KubeconfigError::FindPath));
            from_file(format!("$KUBECONFIG ({v})"), kc).await
        }
    }
}

/// Builds a client from `config` and checks the API server answers `/version` within
/// [`CONNECT_TIMEOUT`], so an unreachable cluster fails start-up with one line.
pub async fn connect(config: kube::Config) -> Result<kube::Client, ClusterError> {
    let url = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(ClusterError::Client)?;
    match tokio::time::timeout(CONNECT_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(ClusterError::Unreachable {
            url,
            reason: crate::report::report(&e).to_string(),
        }),
        Err(_) => Err(ClusterError::Unreachable {
            url,
            reason: format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Environment {
        Environment {
            in_cluster: false,
            kubeconfig_env: None,
            home_config: Some(PathBuf::from("/home/u/.kube/config")),
            home_config_exists: false,
        }
    }

    #[test]
    fn in_cluster_wins_over_everything() {
        let e = Environment {
            in_cluster: true,
            kubeconfig_env: Some("/k".into()),
            home_config_exists: true,
            ..env()
        };
        assert_eq!(
            choose(&e, Some(Path::new("/flag"))).unwrap(),
            ClusterSource::InCluster
        );
    }

    #[test]
    fn flag_wins_over_env_and_home() {
        let e = Environment {
            kubeconfig_env: Some("/k".into()),
            home_config_exists: true,
            ..env()
        };
        assert_eq!(
            choose(&e, Some(Path::new("/flag"))).unwrap(),
            ClusterSource::Flag("/flag".into())
        );
    }

    #[test]
    fn env_wins_over_home() {
        let e = Environment {
            kubeconfig_env: Some("/a:/b".into()),
            home_config_exists: true,
            ..env()
        };
        assert_eq!(
            choose(&e, None).unwrap(),
            ClusterSource::Env("/a:/b".into())
        );
    }

    #[test]
    fn home_is_last() {
        let e = Environment {
            home_config_exists: true,
            ..env()
        };
        assert_eq!(
            choose(&e, None).unwrap(),
            ClusterSource::Home("/home/u/.kube/config".into())
        );
    }

    #[test]
    fn nothing_is_a_clear_one_line_refusal() {
        let err = choose(&env(), None).unwrap_err();
        let msg = err.to_string();
        assert!(!msg.contains('\n'));
        assert!(
            msg.contains("--kubeconfig") && msg.contains("--embedded"),
            "{msg}"
        );
        assert!(msg.contains("/home/u/.kube/config"), "{msg}");
        assert_eq!(err.metric_label(), "no_cluster");
    }

    #[tokio::test]
    async fn unreadable_kubeconfig_names_the_file() {
        let err = load(&ClusterSource::Flag("/nonexistent/kubeconfig".into()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn unreachable_cluster_is_reported_with_its_url() {
        // A port on loopback that nothing listens on: bind, read the port, drop the listener.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url: http::Uri = format!("http://127.0.0.1:{port}").parse().unwrap();
        let Err(err) = connect(kube::Config::new(url)).await else {
            panic!("connected to nothing")
        };
        assert_eq!(err.metric_label(), "unreachable");
        assert!(err.to_string().contains(&port.to_string()), "{err}");
    }
}
