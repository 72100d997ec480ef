//! `--tls-mode self`: tephra keeps its own CA and serving certificate in a Secret, publishes
//! the CA bundle where its clients read it, and rotates both before they expire.
//!
//! ```text
//!  Secret tephra-tls (kubernetes.io/tls)          published to
//!    ca.crt   trusted CAs, oldest first ───────▶  caBundle of tephra's webhook configurations
//!    ca.key   key of the newest CA (the signer)   ConfigMap tephra-ca, key ca.crt (kube-scheduler)
//!    tls.crt  serving certificate + its CA
//!    tls.key  its key
//!    annotations: tephra.io/ca-bundle-hash, tephra.io/ca-bundle-published-at
//! ```
//!
//! Every replica reads the Secret at start ([`bootstrap`]); the first to find none creates it,
//! and a replica whose create conflicts re-reads the winner's, so the replicas share one CA.
//! Then every replica polls the Secret and serves whatever serving pair it holds ([`run`]);
//! only the leader (or the single replica without leader election) takes rotation steps, each
//! one a write conditioned on the `resourceVersion` it read, so two writers can never both
//! succeed from the same state. What to do next is decided by [`plan::decide`], which is pure.

pub mod plan;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::certs::{self, CaPair, CertError, PemChain};
use crate::cluster::status_code;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::report::report;
use crate::server::ServingPair;
pub use plan::{Action, Policy, PolicyError, RenewReason, Validity, View};

/// Default name of the Secret.
pub const DEFAULT_SECRET: &str = "tephra-tls";
/// Default name of the ConfigMap holding the CA bundle for kube-scheduler.
pub const DEFAULT_CONFIGMAP: &str = "tephra-ca";
/// The ConfigMap's key (and the Secret's) holding the CA bundle.
pub const CA_KEY: &str = "ca.crt";
/// The Secret's key holding the newest CA's private key.
pub const CA_PRIVATE_KEY: &str = "ca.key";
/// Annotation: FNV-1a 64 (hex) of the `ca.crt` last published.
pub const HASH_ANNOTATION: &str = "tephra.io/ca-bundle-hash";
/// Annotation: when that bundle was published (RFC 3339).
pub const PUBLISHED_ANNOTATION: &str = "tephra.io/ca-bundle-published-at";
/// tephra's webhook configurations (the names `manifests/webhooks.yaml` and the chart use).
pub const MUTATING_CONFIGURATION: &str = "tephra-mutating-webhooks";
/// See [`MUTATING_CONFIGURATION`].
pub const VALIDATING_CONFIGURATION: &str = "tephra-validating-webhooks";
/// How long [`bootstrap`] keeps trying to read or create the Secret before giving up.
const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(60);
/// Shortest pause between two rotation steps (a step that keeps failing must not spin).
const MIN_STEP_PAUSE: Duration = Duration::from_millis(20);

/// Where the material lives and what it is for.
#[derive(Clone, Debug)]
pub struct SelfTlsConfig {
    /// Namespace of the Secret and the ConfigMap.
    pub namespace: String,
    /// The Secret's name.
    pub secret: String,
    /// The ConfigMap's name.
    pub configmap: String,
    /// The serving certificate's common name.
    pub common_name: String,
    /// Its DNS names and IP addresses.
    pub names: Vec<String>,
    /// Lifetimes and delays.
    pub policy: Policy,
    /// How often the Secret is read (and, on the leader, the next step considered).
    pub poll: Duration,
}

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum SelfTlsError {
    /// An API request failed.
    #[error("{action} {what}: {source}")]
    Api {
        /// What was being done (`reading`, `creating`, ...).
        action: &'static str,
        /// The object (`Secret tephra-system/tephra-tls`).
        what: String,
        /// The client's error.
        source: kube::Error,
    },
    /// Making a certificate failed.
    #[error(transparent)]
    Certs(#[from] CertError),
    /// The lifetimes cannot work together.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The Secret could not be read or made in time.
    #[error("no usable Secret {what} after {after:?}: {last}")]
    GaveUp {
        /// The Secret.
        what: String,
        /// How long was tried.
        after: Duration,
        /// The last reason.
        last: String,
    },
}

impl SelfTlsError {
    fn is_conflict(&self) -> bool {
        matches!(self, SelfTlsError::Api { source, .. } if status_code(source) == Some(409))
    }
}

/// The Secret's contents, parsed.
#[derive(Clone, Debug)]
struct Material {
    resource_version: Option<String>,
    /// `ca.crt`, one DER per CA, oldest first.
    cas: Vec<CertificateDer<'static>>,
    ca_key_pem: String,
    cert_pem: String,
    key_pem: String,
    /// Hash and time of the last publish, as recorded.
    recorded: Option<(String, String)>,
}

impl Material {
    fn bundle_pem(&self) -> String {
        PemChain::pem_of(&self.cas)
    }

    fn signer(&self) -> Option<CaPair> {
        self.cas.last().map(|ca| CaPair {
            cert_pem: PemChain::pem_of(std::slice::from_ref(ca)),
            key_pem: self.ca_key_pem.clone(),
        })
    }

    fn serving(&self) -> ServingPair {
        ServingPair {
            cert_pem: self.cert_pem.clone().into_bytes(),
            key_pem: self.key_pem.clone().into_bytes(),
        }
    }

    /// When the current bundle was published, if the record is about this bundle.
    fn published(&self) -> Option<SystemTime> {
        let (hash, at) = self.recorded.as_ref()?;
        if *hash != bundle_hash(&self.bundle_pem()) {
            return None;
        }
        let ts: k8s_openapi::jiff::Timestamp = at.parse().ok()?;
        let nanos = u64::try_from(ts.as_nanosecond()).ok()?;
        Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos))
    }
}

/// FNV-1a 64 of the bundle: it only tells one bundle from another (whoever can write the
/// Secret decides what it holds anyway), so a cryptographic hash would add nothing.
fn bundle_hash(bundle: &str) -> String {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(bundle.as_bytes());
    format!("{:016x}", h.finish())
}

fn text(secret: &Secret, key: &str) -> Result<String, String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or_else(|| format!("no {key}"))?;
    String::from_utf8(bytes.0.clone()).map_err(|_| format!("{key} is not text"))
}

/// Reads the Secret's keys; a Secret missing one is unusable (and gets replaced).
fn parse_secret(secret: &Secret) -> Result<Material, String> {
    let ca_text = text(secret, CA_KEY)?;
    let cas = CertificateDer::pem_slice_iter(ca_text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{CA_KEY}: {e}"))?;
    if cas.is_empty() {
        return Err(format!("{CA_KEY} holds no certificate"));
    }
    let annotations = secret.metadata.annotations.as_ref();
    let recorded = annotations.and_then(|a| {
        Some((
            a.get(HASH_ANNOTATION)?.clone(),
            a.get(PUBLISHED_ANNOTATION)?.clone(),
        ))
    });
    Ok(Material {
        resource_version: secret.metadata.resource_version.clone(),
        cas,
        ca_key_pem: text(secret, CA_PRIVATE_KEY)?,
        cert_pem: text(secret, certs::CERT_FILE)?,
        key_pem: text(secret, certs::KEY_FILE)?,
        recorded,
    })
}

fn validity(der: &[u8]) -> Result<Validity, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    let at = |t: x509_parser::time::ASN1Time| {
        let secs = t.timestamp();
        if secs >= 0 {
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
        } else {
            SystemTime::UNIX_EPOCH
        }
    };
    Ok(Validity {
        not_before: at(cert.validity().not_before),
        not_after: at(cert.validity().not_after),
    })
}

/// The names as a sorted list of their text forms (IP addresses normalized).
fn normalized(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = names
        .into_iter()
        .map(|n| n.parse::<IpAddr>().map_or(n, |ip| ip.to_string()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What [`plan::decide`] needs from the material; `Err` when the serving certificate cannot
/// be read at all (the Secret is then replaced).
fn view_of(m: &Material, names: &[String]) -> Result<View, String> {
    let label = Path::new("tls.crt");
    let chain = PemChain::parse(label, m.cert_pem.as_bytes()).map_err(|e| e.to_string())?;
    let serving = validity(chain.leaf())?;
    let leaf_only = PemChain {
        path: label.to_path_buf(),
        certs: vec![chain.leaf().clone()],
    };
    let check = names.first().cloned().unwrap_or_default();
    let serving_issuer = m.cas.iter().position(|ca| {
        certs::verify_chain(&leaf_only, std::slice::from_ref(ca), "ca", &check).is_ok()
    });
    let have = chain.names().map_err(|e| e.to_string())?;
    let have = normalized(
        have.dns
            .into_iter()
            .chain(have.ips.iter().map(IpAddr::to_string)),
    );
    let cas = m
        .cas
        .iter()
        .map(|c| validity(c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(View {
        cas,
        serving,
        serving_issuer,
        serving_names_match: have == normalized(names.iter().cloned()),
        published: m.published(),
    })
}

fn to_secret(cfg: &SelfTlsConfig, m: &Material) -> Secret {
    let mut data = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        data.insert(k.to_string(), ByteString(v.as_bytes().to_vec()));
    };
    put(CA_KEY, &m.bundle_pem());
    put(CA_PRIVATE_KEY, &m.ca_key_pem);
    put(certs::CERT_FILE, &m.cert_pem);
    put(certs::KEY_FILE, &m.key_pem);
    let annotations = m.recorded.as_ref().map(|(hash, at)| {
        BTreeMap::from([
            (HASH_ANNOTATION.to_string(), hash.clone()),
            (PUBLISHED_ANNOTATION.to_string(), at.clone()),
        ])
    });
    Secret {
        metadata: ObjectMeta {
            name: Some(cfg.secret.clone()),
            namespace: Some(cfg.namespace.clone()),
            resource_version: m.resource_version.clone(),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "tephra".to_string(),
            )])),
            annotations,
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Secret::default()
    }
}

/// A fresh CA and serving certificate.
fn fresh(cfg: &SelfTlsConfig, now: SystemTime) -> Result<Material, SelfTlsError> {
    let ca = certs::new_ca(cfg.policy.ca_validity, now)?;
    let (cert_pem, key_pem) = certs::sign_serving(
        &ca,
        &cfg.common_name,
        &cfg.names,
        cfg.policy.serving_validity,
        now,
    )?;
    let cas = CertificateDer::pem_slice_iter(ca.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::Parse {
            path: "<new CA>".into(),
            reason: e.to_string(),
        })?;
    Ok(Material {
        resource_version: None,
        cas,
        ca_key_pem: ca.key_pem,
        cert_pem,
        key_pem,
        recorded: None,
    })
}

/// The Kubernetes side: the Secret, the webhook configurations, the ConfigMap.
struct Store {
    cfg: SelfTlsConfig,
    secrets: Api<Secret>,
    configmaps: Api<ConfigMap>,
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
}

impl Store {
    fn new(client: &Client, cfg: SelfTlsConfig) -> Self {
        Self {
            secrets: Api::namespaced(client.clone(), &cfg.namespace),
            configmaps: Api::namespaced(client.clone(), &cfg.namespace),
            mutating: Api::all(client.clone()),
            validating: Api::all(client.clone()),
            cfg,
        }
    }

    fn secret_name(&self) -> String {
        format!("Secret {}/{}", self.cfg.namespace, self.cfg.secret)
    }

    fn api_err(
        &self,
        action: &'static str,
        what: String,
    ) -> impl FnOnce(kube::Error) -> SelfTlsError {
        move |source| SelfTlsError::Api {
            action,
            what,
            source,
        }
    }

    async fn read(&self) -> Result<Option<Secret>, SelfTlsError> {
        self.secrets
            .get_opt(&self.cfg.secret)
            .await
            .map_err(self.api_err("reading", self.secret_name()))
    }

    /// Writes `m` (create without a resourceVersion, else a replace conditioned on it).
    async fn write(&self, m: &Material) -> Result<Material, SelfTlsError> {
        let secret = to_secret(&self.cfg, m);
        let written = match m.resource_version {
            None => self
                .secrets
                .create(&PostParams::default(), &secret)
                .await
                .map_err(self.api_err("creating", self.secret_name()))?,
            Some(_) => self
                .secrets
                .replace(&self.cfg.secret, &PostParams::default(), &secret)
                .await
                .map_err(self.api_err("updating", self.secret_name()))?,
        };
        parse_secret(&written).map_err(|last| SelfTlsError::GaveUp {
            what: self.secret_name(),
            after: Duration::ZERO,
            last,
        })
    }

    /// Makes `bundle` the caBundle of every webhook of tephra's configurations that exist, and
    /// the ConfigMap's `ca.crt`. Returns whether anything had to be written. Each write is a
    /// replace conditioned on the resourceVersion read just before.
    async fn publish(&self, bundle: &str) -> Result<bool, SelfTlsError> {
        let want = ByteString(bundle.as_bytes().to_vec());
        let mut changed = false;
        if let Some(mut c) = self
            .mutating
            .get_opt(MUTATING_CONFIGURATION)
            .await
            .map_err(self.api_err("reading", MUTATING_CONFIGURATION.into()))?
        {
            let mut stale = false;
            for w in c.webhooks.iter_mut().flatten() {
                if w.client_config.ca_bundle.as_ref() != Some(&want) {
                    w.client_config.ca_bundle = Some(want.clone());
                    stale = true;
                }
            }
            if stale {
                self.mutating
                    .replace(MUTATING_CONFIGURATION, &PostParams::default(), &c)
                    .await
                    .map_err(self.api_err("updating", MUTATING_CONFIGURATION.into()))?;
                changed = true;
            }
        }
        if let Some(mut c) = self
            .validating
            .get_opt(VALIDATING_CONFIGURATION)
            .await
            .map_err(self.api_err("reading", VALIDATING_CONFIGURATION.into()))?
        {
            let mut stale = false;
            for w in c.webhooks.iter_mut().flatten() {
                if w.client_config.ca_bundle.as_ref() != Some(&want) {
                    w.client_config.ca_bundle = Some(want.clone());
                    stale = true;
                }
            }
            if stale {
                self.validating
                    .replace(VALIDATING_CONFIGURATION, &PostParams::default(), &c)
                    .await
                    .map_err(self.api_err("updating", VALIDATING_CONFIGURATION.into()))?;
                changed = true;
            }
        }
        let cm_name = format!("ConfigMap {}/{}", self.cfg.namespace, self.cfg.configmap);
        let data = BTreeMap::from([(CA_KEY.to_string(), bundle.to_string())]);
        match self
            .configmaps
            .get_opt(&self.cfg.configmap)
            .await
            .map_err(self.api_err("reading", cm_name.clone()))?
        {
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(self.cfg.configmap.clone()),
                        namespace: Some(self.cfg.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some(data),
                    ..ConfigMap::default()
                };
                self.configmaps
                    .create(&PostParams::default(), &cm)
                    .await
                    .map_err(self.api_err("creating", cm_name))?;
                changed = true;
            }
            Some(mut cm) => {
                let current = cm.data.as_ref().and_then(|d| d.get(CA_KEY));
                if current.map(String::as_str) != Some(bundle) {
                    cm.data.get_or_insert_with(BTreeMap::new).extend(data);
                    self.configmaps
                        .replace(&self.cfg.configmap, &PostParams::default(), &cm)
                        .await
                        .map_err(self.api_err("updating", cm_name))?;
                    changed = true;
                }
            }
        }
        Ok(changed)
    }

    /// One rotation step on `m`; returns the Secret as written, or `None` when there is
    /// nothing to do before the returned time.
    async fn step(
        &self,
        m: &Material,
        now: SystemTime,
        metrics: &Metrics,
    ) -> Result<Result<Material, SystemTime>, SelfTlsError> {
        let view = match view_of(m, &self.cfg.names) {
            Ok(v) => v,
            Err(reason) => {
                tracing::warn!(secret = %self.secret_name(), %reason, "self-managed TLS: the serving certificate cannot be read; making a new CA and certificate");
                let mut new = fresh(&self.cfg, now)?;
                new.resource_version = m.resource_version.clone();
                return self.write(&new).await.map(Ok);
            }
        };
        // The targets are checked on every step: a `kubectl apply` of the manifests puts the
        // placeholder caBundle back, and clients must not wait for the next rotation to trust
        // us again.
        if view.published.is_some() && self.publish(&m.bundle_pem()).await? {
            tracing::warn!(
                "self-managed TLS: a webhook configuration or the CA ConfigMap had lost the CA bundle; restored"
            );
        }
        let action = plan::decide(&view, &self.cfg.policy, now);
        let step = match &action {
            Action::WaitUntil(_) => None,
            Action::Publish => Some("publish"),
            Action::AddCa => Some("add_ca"),
            Action::RenewServing(_) => Some("renew_serving"),
            Action::DropCas(_) => Some("drop_ca"),
        };
        let mut next = m.clone();
        match action {
            Action::WaitUntil(t) => return Ok(Err(t)),
            Action::Publish => {
                let bundle = m.bundle_pem();
                self.publish(&bundle).await?;
                let at = k8s_openapi::jiff::Timestamp::try_from(now)
                    .map(|t| t.to_string())
                    .unwrap_or_default();
                next.recorded = Some((bundle_hash(&bundle), at));
                tracing::info!(
                    cas = m.cas.len(),
                    "self-managed TLS: CA bundle published to the webhook configurations and the ConfigMap"
                );
            }
            Action::AddCa => {
                let ca = certs::new_ca(self.cfg.policy.ca_validity, now)?;
                let der = CertificateDer::from_pem_slice(ca.cert_pem.as_bytes()).map_err(|e| {
                    CertError::Parse {
                        path: "<new CA>".into(),
                        reason: e.to_string(),
                    }
                })?;
                next.cas.push(der);
                next.ca_key_pem = ca.key_pem;
                tracing::info!("self-managed TLS: new CA added to the bundle (rotation started)");
            }
            Action::RenewServing(reason) => {
                let signer = m.signer().ok_or_else(|| SelfTlsError::GaveUp {
                    what: self.secret_name(),
                    after: Duration::ZERO,
                    last: "no CA".into(),
                })?;
                let (cert, key) = certs::sign_serving(
                    &signer,
                    &self.cfg.common_name,
                    &self.cfg.names,
                    self.cfg.policy.serving_validity,
                    now,
                )?;
                next.cert_pem = cert;
                next.key_pem = key;
                tracing::info!(?reason, "self-managed TLS: serving certificate renewed");
            }
            Action::DropCas(indexes) => {
                next.cas = m
                    .cas
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !indexes.contains(i))
                    .map(|(_, c)| c.clone())
                    .collect();
                tracing::info!(
                    dropped = indexes.len(),
                    "self-managed TLS: old CA removed from the bundle"
                );
            }
        }
        let written = self.write(&next).await?;
        if let Some(step) = step {
            metrics.tls_self_steps.with_label_values(&[step]).inc();
        }
        Ok(Ok(written))
    }
}

/// Reads the Secret, creating it when absent (a conflicting create means another replica made
/// it first: its material is used) and replacing it when unusable. Returns the serving pair,
/// the CA bundle and the Secret's state for [`run`].
pub async fn bootstrap(client: &Client, cfg: SelfTlsConfig) -> Result<Bootstrapped, SelfTlsError> {
    cfg.policy.check()?;
    let store = Store::new(client, cfg);
    let started = tokio::time::Instant::now();
    let mut last = String::new();
    while started.elapsed() < BOOTSTRAP_TIMEOUT {
        let attempt = async {
            let now = SystemTime::now();
            match store.read().await? {
                None => {
                    let m = fresh(&store.cfg, now)?;
                    let written = store.write(&m).await?;
                    tracing::info!(secret = %store.secret_name(), "self-managed TLS: made a new CA and serving certificate");
                    Ok(written)
                }
                Some(s) => {
                    match parse_secret(&s).and_then(|m| view_of(&m, &store.cfg.names).map(|_| m)) {
                        Ok(m) => Ok(m),
                        Err(reason) => {
                            tracing::warn!(secret = %store.secret_name(), %reason, "self-managed TLS: Secret unusable; replacing it");
                            let mut m = fresh(&store.cfg, now)?;
                            m.resource_version = s.metadata.resource_version.clone();
                            store.write(&m).await
                        }
                    }
                }
            }
        };
        match attempt.await {
            Ok(m) => {
                return Ok(Bootstrapped {
                    serving: m.serving(),
                    ca_bundle_pem: m.bundle_pem(),
                    material: m,
                    store,
                });
            }
            Err(e) if e.is_conflict() => {
                tracing::info!(
                    "self-managed TLS: another replica wrote the Secret first; reading it"
                );
                last = report(&e).to_string();
            }
            Err(e @ (SelfTlsError::Certs(_) | SelfTlsError::Policy(_))) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %report(&e), "self-managed TLS: retrying");
                last = report(&e).to_string();
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    Err(SelfTlsError::GaveUp {
        what: store.secret_name(),
        after: BOOTSTRAP_TIMEOUT,
        last,
    })
}

/// What [`bootstrap`] found; [`Bootstrapped::run`] keeps it current.
pub struct Bootstrapped {
    /// The serving pair to start with.
    pub serving: ServingPair,
    /// The CA bundle (PEM) at start.
    pub ca_bundle_pem: String,
    material: Material,
    store: Store,
}

impl std::fmt::Debug for Bootstrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrapped")
            .field("ca_bundle_pem", &self.ca_bundle_pem)
            .finish_non_exhaustive()
    }
}

impl Bootstrapped {
    /// Polls the Secret every `poll`, sending a changed serving pair to `live`; while
    /// `leadership` is held, also takes the rotation steps (counted in `metrics`). Returns when
    /// `stop` fires.
    pub async fn run(
        self,
        live: watch::Sender<ServingPair>,
        leadership: Leadership,
        metrics: Metrics,
        stop: CancellationToken,
    ) {
        let Bootstrapped {
            mut material,
            store,
            ..
        } = self;
        let poll = store.cfg.poll;
        let mut pause = Duration::ZERO;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
            pause = poll;
            match store.read().await {
                Ok(Some(s)) if s.metadata.resource_version != material.resource_version => {
                    match parse_secret(&s).and_then(|m| view_of(&m, &store.cfg.names).map(|_| m)) {
                        Ok(m) => material = m,
                        Err(reason) => {
                            // Keep serving the last good material; on the leader it is
                            // written back over the broken Secret (a replace on the broken
                            // one's resourceVersion), so trust is never interrupted.
                            tracing::warn!(%reason, "self-managed TLS: Secret unusable; still serving the previous certificate");
                            material.resource_version = s.metadata.resource_version.clone();
                            if leadership.is_leading() {
                                match store.write(&material).await {
                                    Ok(written) => {
                                        material = written;
                                        metrics
                                            .tls_self_steps
                                            .with_label_values(&["restore"])
                                            .inc();
                                    }
                                    Err(e) => {
                                        tracing::warn!(error = %report(&e), "self-managed TLS: cannot restore the Secret")
                                    }
                                }
                            }
                        }
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    // Deleted: the leader creates it again from what every replica serves
                    // (same CA, same certificate), so no client loses trust; followers keep
                    // serving what they have.
                    material.resource_version = None;
                }
                Err(e) => {
                    tracing::warn!(error = %report(&e), "self-managed TLS: cannot read the Secret");
                    continue;
                }
            }
            send_if_changed(&live, &material);
            metrics
                .tls_ca_bundle
                .set(i64::try_from(material.cas.len()).unwrap_or(i64::MAX));
            if !leadership.is_leading() {
                continue;
            }
            let now = SystemTime::now();
            let result = if material.resource_version.is_none() {
                tracing::warn!(secret = %store.secret_name(), "self-managed TLS: the Secret is gone; writing it again");
                metrics.tls_self_steps.with_label_values(&["restore"]).inc();
                store.write(&material).await.map(Ok)
            } else {
                store.step(&material, now, &metrics).await
            };
            match result {
                Ok(Ok(written)) => {
                    material = written;
                    send_if_changed(&live, &material);
                    pause = MIN_STEP_PAUSE;
                }
                Ok(Err(until)) => {
                    let wait = until.duration_since(now).unwrap_or_default();
                    pause = wait.clamp(MIN_STEP_PAUSE, poll);
                }
                Err(e) if e.is_conflict() => {
                    tracing::debug!(error = %report(&e), "self-managed TLS: written meanwhile; reading again");
                    pause = MIN_STEP_PAUSE;
                }
                Err(e) => {
                    tracing::warn!(error = %report(&e), "self-managed TLS: rotation step failed; retrying");
                }
            }
        }
    }
}

fn send_if_changed(live: &watch::Sender<ServingPair>, m: &Material) {
    let pair = m.serving();
    live.send_if_modified(|current| {
        if *current == pair {
            false
        } else {
            *current = pair;
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SelfTlsConfig {
        SelfTlsConfig {
            namespace: "ns".into(),
            secret: DEFAULT_SECRET.into(),
            configmap: DEFAULT_CONFIGMAP.into(),
            common_name: "tephra.ns.svc".into(),
            names: vec!["tephra.ns.svc".into(), "127.0.0.1".into()],
            policy: Policy::DEFAULT,
            poll: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_fresh_secret_round_trips_and_is_steady() {
        let c = cfg();
        let now = SystemTime::now();
        let m = fresh(&c, now).unwrap();
        let s = to_secret(&c, &m);
        assert_eq!(s.type_.as_deref(), Some("kubernetes.io/tls"));
        let back = parse_secret(&s).unwrap();
        let v = view_of(&back, &c.names).unwrap();
        assert_eq!(v.cas.len(), 1);
        assert_eq!(v.serving_issuer, Some(0));
        assert!(v.serving_names_match);
        assert_eq!(v.published, None, "not published yet");
        assert_eq!(plan::decide(&v, &c.policy, now), Action::Publish);
    }

    #[test]
    fn the_publish_record_only_counts_for_the_bundle_it_names() {
        let c = cfg();
        let mut m = fresh(&c, SystemTime::now()).unwrap();
        m.recorded = Some((bundle_hash(&m.bundle_pem()), "2030-01-02T03:04:05Z".into()));
        let at = m.published().unwrap();
        assert_eq!(
            at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
            1_893_553_445
        );
        let other = fresh(&c, SystemTime::now()).unwrap();
        m.cas.extend(other.cas);
        assert_eq!(m.published(), None, "a new CA makes the record stale");
    }

    #[test]
    fn names_are_compared_as_sets_with_ips_normalized() {
        let c = cfg();
        let m = fresh(&c, SystemTime::now()).unwrap();
        let swapped = vec!["127.0.0.1".to_string(), "tephra.ns.svc".to_string()];
        assert!(view_of(&m, &swapped).unwrap().serving_names_match);
        let more = vec!["tephra.ns.svc".to_string(), "other".to_string()];
        assert!(!view_of(&m, &more).unwrap().serving_names_match);
    }

    #[test]
    fn a_secret_without_a_key_is_unusable_and_says_which() {
        let c = cfg();
        let m = fresh(&c, SystemTime::now()).unwrap();
        let mut s = to_secret(&c, &m);
        s.data.as_mut().unwrap().remove(CA_PRIVATE_KEY);
        assert_eq!(parse_secret(&s).unwrap_err(), "no ca.key");
    }

    #[test]
    fn a_serving_certificate_from_another_ca_is_untrusted() {
        let c = cfg();
        let a = fresh(&c, SystemTime::now()).unwrap();
        let b = fresh(&c, SystemTime::now()).unwrap();
        let mixed = Material {
            cert_pem: b.cert_pem.clone(),
            key_pem: b.key_pem.clone(),
            ..a
        };
        assert_eq!(view_of(&mixed, &c.names).unwrap().serving_issuer, None);
    }
}
