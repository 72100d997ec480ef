//! Registering tephra's admission webhooks from `manifests/webhooks.yaml`, the same file users
//! apply to a cluster, with the `caBundle` of the certificate tephra serves. `serve
//! --embedded` uses it so the embedded API goes through the real webhook path.

use std::net::IpAddr;

use base64::Engine as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::startup::{self, Fixes, StartupError};
use crate::certs::CertNames;

/// `manifests/webhooks.yaml`, compiled in so the binary needs no files at run time.
pub const WEBHOOKS_YAML: &str = include_str!("../../manifests/webhooks.yaml");

/// Errors reading or registering the webhook configurations.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The manifest is not the YAML this code expects.
    #[error("manifests/webhooks.yaml: {0}")]
    Manifest(String),
    /// The API refused a configuration for good (transient errors are retried).
    #[error(transparent)]
    Api(#[from] StartupError),
}

/// Where the registered webhooks send their reviews: the name the serving certificate must
/// be valid for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookTarget {
    /// The Service of `manifests/webhooks.yaml` as written (`tephra` in `tephra-system`).
    AsWritten,
    /// Another Service: the API server calls `NAME.NAMESPACE.svc`.
    Service {
        /// Service name.
        name: String,
        /// Its namespace.
        namespace: String,
    },
    /// A URL base, `https://HOST:PORT`, each webhook's path appended (`clientConfig.url`).
    Url(String),
}

impl std::fmt::Display for WebhookTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::AsWritten => f.write_str("the Service of manifests/webhooks.yaml"),
            Self::Service { name, namespace } => write!(f, "{name}.{namespace}.svc"),
            Self::Url(base) => f.write_str(base),
        }
    }
}

/// How the embedded API reaches tephra's HTTPS listener, chosen from the names the serving
/// certificate holds: it must verify the certificate for that name, as kube-apiserver would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookHost {
    /// A Service, called as `NAME.NAMESPACE.svc` (the embedded API sends it to the listener).
    Service {
        /// Service name.
        name: String,
        /// Its namespace.
        namespace: String,
    },
    /// The listener's own address or `localhost`, called directly by URL.
    Direct(String),
}

impl WebhookHost {
    /// The name the certificate is checked against.
    pub fn tls_name(&self) -> String {
        match self {
            Self::Service { name, namespace } => format!("{name}.{namespace}.svc"),
            Self::Direct(host) => host.clone(),
        }
    }

    /// The registration target once the listener's port is known.
    pub fn target(&self, port: u16) -> WebhookTarget {
        match self {
            Self::Service { name, namespace } => WebhookTarget::Service {
                name: name.clone(),
                namespace: namespace.clone(),
            },
            Self::Direct(host) => {
                let host = match host.parse::<IpAddr>() {
                    Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
                    _ => host.clone(),
                };
                WebhookTarget::Url(format!("https://{host}:{port}"))
            }
        }
    }
}

/// What the embedded API can call, in words, for the message when a certificate has none.
pub const USABLE_WEBHOOK_NAMES: &str = "a Service name SERVICE.NAMESPACE.svc (or *.NAMESPACE.svc, \
     as `tephra certs --service SERVICE --namespace NAMESPACE` makes), localhost, or the IP \
     address the webhooks are reached at";

/// The Service name the webhooks keep when the certificate is a wildcard for a namespace.
const WILDCARD_SERVICE: &str = "tephra";

/// Picks how the embedded API calls the webhooks so that the certificate holding `names`
/// verifies: a Service name first (what a cluster uses, so the registration looks like one),
/// then `reach_ip` (the address the listener is reached at), then `localhost`.
pub fn host_for_certificate(names: &CertNames, reach_ip: IpAddr) -> Option<WebhookHost> {
    let label = tephra_names::is_dns1123_label;
    let service = names.dns.iter().find_map(|d| {
        let d = d.to_ascii_lowercase();
        let mut parts = d.split('.');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(name), Some(ns), Some("svc"), None) if label(ns) => {
                let name = if name == "*" {
                    WILDCARD_SERVICE
                } else if label(name) {
                    name
                } else {
                    return None;
                };
                Some(WebhookHost::Service {
                    name: name.to_string(),
                    namespace: ns.to_string(),
                })
            }
            _ => None,
        }
    });
    service
        .or_else(|| {
            names
                .ips
                .contains(&reach_ip)
                .then(|| WebhookHost::Direct(reach_ip.to_string()))
        })
        .or_else(|| {
            names
                .dns
                .iter()
                .any(|d| d.eq_ignore_ascii_case("localhost"))
                .then(|| WebhookHost::Direct("localhost".into()))
        })
}

/// The configurations of `yaml`, each webhook's `clientConfig.caBundle` set to `ca_pem`.
pub fn configurations(yaml: &str, ca_pem: &str) -> Result<Vec<Value>, WebhookError> {
    configurations_at(yaml, ca_pem, &WebhookTarget::AsWritten)
}

/// [`configurations`] with every `clientConfig` pointed at `target` (the path of each webhook
/// kept).
pub fn configurations_at(
    yaml: &str,
    ca_pem: &str,
    target: &WebhookTarget,
) -> Result<Vec<Value>, WebhookError> {
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
            retarget(cc, target)?;
        }
        out.push(doc);
    }
    Ok(out)
}

/// Points one `clientConfig` at `target`, keeping its path.
fn retarget(
    cc: &mut serde_json::Map<String, Value>,
    target: &WebhookTarget,
) -> Result<(), WebhookError> {
    let path = || {
        cc.get("service")
            .and_then(|s| s.get("path"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| WebhookError::Manifest("a webhook service without a path".into()))
    };
    match target {
        WebhookTarget::AsWritten => {}
        WebhookTarget::Service { name, namespace } => {
            let svc = cc
                .get_mut("service")
                .and_then(Value::as_object_mut)
                .ok_or_else(|| WebhookError::Manifest("a webhook without a service".into()))?;
            svc.insert("name".into(), Value::String(name.clone()));
            svc.insert("namespace".into(), Value::String(namespace.clone()));
        }
        WebhookTarget::Url(base) => {
            let url = format!("{}{}", base.trim_end_matches('/'), path()?);
            cc.remove("service");
            cc.insert("url".into(), Value::String(url));
        }
    }
    Ok(())
}

/// The `matchConditions` entry that sends `/pods/mutate` only the pods of the scheduler names
/// tephra serves (its expression lists them).
pub const SERVED_SCHEDULER_CONDITION: &str = "served-scheduler";

/// Lists `names` in every [`SERVED_SCHEDULER_CONDITION`] of `docs`, in place of the default
/// name the manifest carries, so the registration matches the `--scheduler-name` flags.
pub fn serve_names(docs: &mut [Value], names: &[String]) {
    // A JSON list of strings is also a CEL list literal (same quoting and escapes).
    let list = Value::from(names.to_vec()).to_string();
    let conditions = docs
        .iter_mut()
        .filter_map(|d| d.get_mut("webhooks").and_then(Value::as_array_mut))
        .flatten()
        .filter_map(|h| h.get_mut("matchConditions").and_then(Value::as_array_mut))
        .flatten();
    for c in conditions {
        if c.get("name").and_then(Value::as_str) == Some(SERVED_SCHEDULER_CONDITION) {
            c["expression"] = Value::String(format!("object.spec.schedulerName in {list}"));
        }
    }
}

/// Creates (or replaces) every configuration of [`WEBHOOKS_YAML`] with `ca_pem` as caBundle,
/// sending reviews to `target`, for the scheduler names `served`.
pub async fn register(
    client: &Client,
    ca_pem: &str,
    target: &WebhookTarget,
    served: &[String],
) -> Result<usize, WebhookError> {
    let mut docs = configurations_at(WEBHOOKS_YAML, ca_pem, target)?;
    serve_names(&mut docs, served);
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

/// Create, or replace the existing object of the same name (keeping its resourceVersion);
/// a conflict or a transient error starts over from the read.
async fn apply<K>(client: &Client, doc: Value) -> Result<(), WebhookError>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(doc).map_err(|e| WebhookError::Manifest(e.to_string()))?;
    let name = obj.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::all(client.clone());
    let attempt = || async {
        let mut obj = obj.clone();
        match api.get_opt(&name).await? {
            None => api.create(&PostParams::default(), &obj).await?,
            Some(existing) => {
                obj.meta_mut().resource_version = existing.meta().resource_version.clone();
                api.replace(&name, &PostParams::default(), &obj).await?
            }
        };
        Ok(())
    };
    startup::run(
        format!("registering webhook configuration {name}"),
        Fixes::OWN_RESOURCES,
        attempt,
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn webhooks_can_be_pointed_at_another_service_or_a_url() {
        let svc = WebhookTarget::Service {
            name: "tephra".into(),
            namespace: "volcano-system".into(),
        };
        for d in configurations_at(WEBHOOKS_YAML, "PEM", &svc).unwrap() {
            for h in d["webhooks"].as_array().unwrap() {
                let s = &h["clientConfig"]["service"];
                assert_eq!(
                    (s["name"].as_str(), s["namespace"].as_str()),
                    (Some("tephra"), Some("volcano-system"))
                );
                assert!(s["path"].as_str().is_some_and(|p| p.starts_with('/')));
            }
        }
        let url = WebhookTarget::Url("https://127.0.0.1:8443".into());
        for d in configurations_at(WEBHOOKS_YAML, "PEM", &url).unwrap() {
            for h in d["webhooks"].as_array().unwrap() {
                let cc = &h["clientConfig"];
                assert!(cc.get("service").is_none(), "{cc}");
                let u = cc["url"].as_str().unwrap();
                assert!(
                    u.starts_with("https://127.0.0.1:8443/")
                        && (u.ends_with("/mutate") || u.ends_with("/validate")),
                    "{u}"
                );
            }
        }
    }

    #[test]
    fn the_certificate_names_pick_how_webhooks_are_called() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let names = |dns: &[&str], ips: &[&str]| CertNames {
            dns: dns.iter().map(|s| s.to_string()).collect(),
            ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
        };
        let svc = |n: &str, ns: &str| {
            Some(WebhookHost::Service {
                name: n.into(),
                namespace: ns.into(),
            })
        };
        // What `tephra certs --service tephra --namespace volcano-system` makes.
        let made = crate::certs::service_dns_names("tephra", "volcano-system");
        let made: Vec<&str> = made.iter().map(String::as_str).collect();
        assert_eq!(
            host_for_certificate(&names(&made, &[]), loopback),
            svc("tephra", "volcano-system")
        );
        assert_eq!(
            host_for_certificate(&names(&["*.team.svc"], &[]), loopback),
            svc("tephra", "team")
        );
        assert_eq!(
            host_for_certificate(&names(&["x.example.com"], &["127.0.0.1"]), loopback),
            Some(WebhookHost::Direct("127.0.0.1".into()))
        );
        assert_eq!(
            host_for_certificate(&names(&["localhost"], &["10.0.0.1"]), loopback),
            Some(WebhookHost::Direct("localhost".into()))
        );
        for none in [
            names(&["tephra.example.com"], &["10.0.0.1"]),
            names(&["tephra.volcano-system"], &[]),
            names(&["a.b.svc.cluster.local"], &[]),
            names(&[], &[]),
        ] {
            assert_eq!(host_for_certificate(&none, loopback), None, "{none}");
        }
        let direct = WebhookHost::Direct("::1".into());
        assert_eq!(
            direct.target(8443),
            WebhookTarget::Url("https://[::1]:8443".into())
        );
    }

    #[test]
    fn the_pod_mutation_is_sent_only_the_served_scheduler_names() {
        let condition = |docs: &[Value]| {
            let hooks = docs.iter().flat_map(|d| d["webhooks"].as_array().unwrap());
            let mut found = hooks.filter_map(|h| {
                let c = h["matchConditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["name"] == SERVED_SCHEDULER_CONDITION)?;
                Some((h["name"].as_str()?.to_string(), c["expression"].clone()))
            });
            let one = found.next().expect("a served-scheduler condition");
            assert!(found.next().is_none(), "one webhook has it");
            one
        };
        let mut docs = configurations(WEBHOOKS_YAML, "PEM").unwrap();
        // As written: the default --scheduler-name.
        assert_eq!(
            condition(&docs),
            (
                "mutatepod.tephra.io".to_string(),
                json!(r#"object.spec.schedulerName in ["volcano"]"#)
            )
        );
        serve_names(&mut docs, &["volcano".into(), "team \"a\"".into()]);
        assert_eq!(
            condition(&docs).1,
            json!(r#"object.spec.schedulerName in ["volcano","team \"a\""]"#)
        );
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
