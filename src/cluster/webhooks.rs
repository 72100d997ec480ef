//! Registering tephra's admission webhooks from `manifests/webhooks.yaml`, the same file users
//! apply to a cluster, with the `caBundle` of the certificate tephra serves. `serve
//! --embedded` uses it so the embedded API goes through the real webhook path.

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::Value;

/// `manifests/webhooks.yaml`, compiled in so the binary needs no files at run time.
pub const WEBHOOKS_YAML: &str = include_str!("../../manifests/webhooks.yaml");

/// Errors reading or registering the webhook configurations.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The manifest is not the YAML this code expects.
    #[error("manifests/webhooks.yaml: {0}")]
    Manifest(String),
    /// The API refused a configuration.
    #[error("registering webhook configuration {name}: {source}")]
    Api {
        /// Which configuration.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The configurations of `yaml`, each webhook's `clientConfig.caBundle` set to `ca_pem`.
pub fn configurations(yaml: &str, ca_pem: &str) -> Result<Vec<Value>, WebhookError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(yaml).map_err(|e| WebhookError::Manifest(e.to_string()))?;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let mut out = Vec::new();
    for mut doc in docs.into_iter().filter(Value::is_object) {
        let hooks = doc
            .get_mut("webhooks")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| WebhookError::Manifest("a configuration without webhooks".into()))?;
        for hook in hooks {
            let cc = hook
                .get_mut("clientConfig")
                .and_then(Value::as_object_mut)
                .ok_or_else(|| WebhookError::Manifest("a webhook without clientConfig".into()))?;
            cc.insert("caBundle".into(), Value::String(bundle.clone()));
        }
        out.push(doc);
    }
    Ok(out)
}

/// Creates (or replaces) every configuration of [`WEBHOOKS_YAML`] with `ca_pem` as caBundle.
pub async fn register(client: &Client, ca_pem: &str) -> Result<usize, WebhookError> {
    let docs = configurations(WEBHOOKS_YAML, ca_pem)?;
    let n = docs.len();
    for doc in docs {
        let kind = doc
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "MutatingWebhookConfiguration" => {
                apply::<MutatingWebhookConfiguration>(client, doc).await?;
            }
            "ValidatingWebhookConfiguration" => {
                apply::<ValidatingWebhookConfiguration>(client, doc).await?;
            }
            other => return Err(WebhookError::Manifest(format!("unexpected kind {other:?}"))),
        }
    }
    Ok(n)
}

/// Create, or replace the existing object of the same name (keeping its resourceVersion).
async fn apply<K>(client: &Client, doc: Value) -> Result<(), WebhookError>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let mut obj: K =
        serde_json::from_value(doc).map_err(|e| WebhookError::Manifest(e.to_string()))?;
    let name = obj.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::all(client.clone());
    let err = |source| WebhookError::Api {
        name: name.clone(),
        source,
    };
    match api.get_opt(&name).await.map_err(err)? {
        None => {
            api.create(&PostParams::default(), &obj)
                .await
                .map_err(err)?;
        }
        Some(existing) => {
            obj.meta_mut().resource_version = existing.meta().resource_version.clone();
            api.replace(&name, &PostParams::default(), &obj)
                .await
                .map_err(err)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_webhook_gets_the_ca_bundle() {
        let docs = configurations(WEBHOOKS_YAML, "PEM").unwrap();
        assert_eq!(docs.len(), 2);
        let want = base64::engine::general_purpose::STANDARD.encode("PEM");
        let mut paths = Vec::new();
        for d in &docs {
            for h in d["webhooks"].as_array().unwrap() {
                assert_eq!(h["clientConfig"]["caBundle"], want.as_str());
                paths.push(
                    h["clientConfig"]["service"]["path"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                );
            }
        }
        for p in crate::admission::WEBHOOKS.iter().map(|w| w.path) {
            assert!(paths.iter().any(|x| x == p), "{p} not registered");
        }
    }

    #[test]
    fn configurations_parse_as_typed_objects() {
        for d in configurations(WEBHOOKS_YAML, "PEM").unwrap() {
            match d["kind"].as_str().unwrap() {
                "MutatingWebhookConfiguration" => {
                    serde_json::from_value::<MutatingWebhookConfiguration>(d).unwrap();
                }
                _ => {
                    serde_json::from_value::<ValidatingWebhookConfiguration>(d).unwrap();
                }
            }
        }
    }
}
