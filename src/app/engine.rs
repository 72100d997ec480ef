//! Which gang engine runs (`--gang-engine`): chosen once at start from the flag and what the
//! cluster serves, logged, and exported as `tephra_gang_engine{engine}`.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use prometheus::{IntGaugeVec, Opts, Registry};

use crate::cli::GangEngine;

/// The API group and version of kube-scheduler's own gang objects.
pub const NATIVE_API: &str = "scheduling.k8s.io/v1beta1";

/// What a cluster needs for the native engine, named when it is asked for and missing.
pub const NATIVE_NEEDS: &str = "Kubernetes 1.37+ with the feature gate GenericWorkload=true on kube-apiserver, kube-scheduler and kube-controller-manager and --runtime-config=scheduling.k8s.io/v1beta1=true on kube-apiserver";

/// The engine in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// kube-scheduler's extender calls.
    Extender,
    /// kube-scheduler's own gang scheduling.
    Native,
}

impl Engine {
    /// Its name, as the flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Extender => "extender",
            Engine::Native => "native",
        }
    }
}

/// Why no engine could be chosen.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// `--gang-engine native` where the API is not served.
    #[error(
        "--gang-engine native: {where_} does not serve {NATIVE_API} PodGroups and Workloads; the native engine needs {NATIVE_NEEDS} (or use --gang-engine extender)"
    )]
    NotServed {
        /// The cluster, or the embedded API.
        where_: &'static str,
    },
    /// The cluster could not be asked.
    #[error("--gang-engine: cannot read the cluster's {NATIVE_API} API: {0}")]
    Discovery(#[source] kube::Error),
}

/// The engine for `flag` on a cluster that serves the native API (`serves`) or not.
pub fn choose(flag: GangEngine, serves: bool, where_: &'static str) -> Result<Engine, EngineError> {
    match (flag, serves) {
        (GangEngine::Extender, _) | (GangEngine::Auto, false) => Ok(Engine::Extender),
        (GangEngine::Native | GangEngine::Auto, true) => Ok(Engine::Native),
        (GangEngine::Native, false) => Err(EngineError::NotServed { where_ }),
    }
}

/// Whether the cluster serves the native PodGroups and Workloads, asked through discovery;
/// transient failures are retried (about 30 s in all), a 404 means not served.
pub async fn cluster_serves_native(client: &kube::Client) -> Result<bool, EngineError> {
    let ask = || async { client.list_api_group_resources(NATIVE_API).await };
    let answer = ask
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(500))
                .with_max_delay(Duration::from_secs(8))
                .with_max_times(6)
                .with_jitter(),
        )
        .when(|e| !not_served(e))
        .await;
    match answer {
        Ok(list) => Ok(["podgroups", "workloads"]
            .iter()
            .all(|r| list.resources.iter().any(|a| a.name == *r))),
        Err(e) if not_served(&e) => Ok(false),
        Err(e) => Err(EngineError::Discovery(e)),
    }
}

/// A discovery answer that says the group version does not exist.
fn not_served(e: &kube::Error) -> bool {
    crate::cluster::status_code(e) == Some(404)
}

/// Exports `tephra_gang_engine{engine}`: 1 for the engine in use, 0 for the other.
pub fn export(engine: Engine, registry: &Registry) -> Result<(), prometheus::Error> {
    let gauge = IntGaugeVec::new(
        Opts::new(
            "tephra_gang_engine",
            "The gang engine in use (1) and the one not (0): extender (kube-scheduler's extender calls) or native (kube-scheduler's own gang scheduling).",
        ),
        &["engine"],
    )?;
    registry.register(Box::new(gauge.clone()))?;
    for e in [Engine::Extender, Engine::Native] {
        gauge
            .with_label_values(&[e.name()])
            .set(i64::from(e == engine));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_the_cluster_and_native_insists() {
        let cluster = "the cluster";
        assert_eq!(
            choose(GangEngine::Auto, true, cluster).unwrap(),
            Engine::Native
        );
        assert_eq!(
            choose(GangEngine::Auto, false, cluster).unwrap(),
            Engine::Extender
        );
        assert_eq!(
            choose(GangEngine::Extender, true, cluster).unwrap(),
            Engine::Extender
        );
        assert_eq!(
            choose(GangEngine::Native, true, cluster).unwrap(),
            Engine::Native
        );
        let refused = choose(GangEngine::Native, false, cluster)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("the cluster does not serve scheduling.k8s.io/v1beta1"),
            "{refused}"
        );
        assert!(refused.contains("GenericWorkload"), "{refused}");
    }

    #[test]
    fn the_gauge_names_the_engine_in_use() {
        let registry = Registry::new();
        export(Engine::Native, &registry).unwrap();
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        assert!(
            text.contains("tephra_gang_engine{engine=\"native\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tephra_gang_engine{engine=\"extender\"} 0"),
            "{text}"
        );
    }
}
