//! `--tls-mode self` end to end: two `tephra serve --kubeconfig` replicas against one
//! `tephra apiserver`, started together with no Secret, agree on one CA; then admission reviews
//! are sent to both without pause over HTTPS by a client that trusts only the `caBundle` of the
//! webhook configuration and re-reads it as kube-apiserver does, while the serving certificate
//! and then the CA rotate (lifetimes of seconds, set by flags). No handshake and no review may
//! fail. The counts and rotation times are printed
//! (`cargo test --test it tls_self:: -- --nocapture`).

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::served::{self, Proc, eventually, kubeconfig};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Client;
use kube::api::{Api, PostParams};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

const NS: &str = "tephra-system";
const HOST: &str = "tephra.tephra-system.svc";
/// How long reviews are sent: past one CA rotation (made at 2/3 of the CA's ~40 s span,
/// moved to after 1 s, old one dropped 6 s after the publish).
const LOAD: Duration = Duration::from_secs(38);

/// One replica with short certificate lifetimes: serving 6 s, CA 36 s, overlap 6 s,
/// propagation 1 s, the Secret read every 200 ms.
fn replica(
    kubeconfig: &str,
    pod: &str,
    https: SocketAddr,
    metrics: SocketAddr,
    log: Option<&Path>,
) -> Proc {
    let (listen, metrics) = (https.to_string(), metrics.to_string());
    Proc::spawn_with_env(
        &[
            "serve",
            "--kubeconfig",
            kubeconfig,
            "--listen",
            &listen,
            "--metrics-listen",
            &metrics,
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=250ms",
            "--tls-mode=self",
            "--tls-reload-interval=200ms",
            "--tls-self-serving-validity=6s",
            "--tls-self-ca-validity=36s",
            "--tls-self-ca-overlap=6s",
            "--tls-self-propagation=1s",
        ],
        &[("POD_NAME", pod), ("POD_NAMESPACE", NS)],
        log,
    )
}

/// tephra's webhook configurations with a placeholder caBundle, as the manifests install
/// them, but matching nothing: no write in this test is sent to a webhook (the test plays
/// kube-apiserver itself).
async fn install_webhook_configurations(c: &Client) {
    for mut doc in tephra::cluster::webhooks::configurations(
        tephra::cluster::webhooks::WEBHOOKS_YAML,
        "placeholder",
    )
    .unwrap_or_else(|e| panic!("{e}"))
    {
        for hook in doc["webhooks"].as_array_mut().into_iter().flatten() {
            hook["rules"] = json!([{
                "operations": ["CREATE"], "apiGroups": ["example.invalid"],
                "apiVersions": ["v1"], "resources": ["nothing"]
            }]);
        }
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        let url = match kind.as_str() {
            "MutatingWebhookConfiguration" => "mutatingwebhookconfigurations",
            _ => "validatingwebhookconfigurations",
        };
        let req = http::Request::post(format!("/apis/admissionregistration.k8s.io/v1/{url}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&doc).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        c.request::<Value>(req)
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
}

/// The caBundle of the mutating configuration, as kube-apiserver reads it.
async fn ca_bundle(c: &Client) -> Option<String> {
    let cfg = Api::<MutatingWebhookConfiguration>::all(c.clone())
        .get_opt(tephra::selftls::MUTATING_CONFIGURATION)
        .await
        .ok()??;
    let hook = cfg.webhooks?.into_iter().next()?;
    String::from_utf8(hook.client_config.ca_bundle?.0).ok()
}

fn ders(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

/// A client for the webhook Service name at `addr`, trusting only `bundle`, one connection
/// per client (as a fresh handshake), reporting the peer certificate.
fn client_for(bundle: &str, addr: SocketAddr) -> reqwest::Client {
    let certs: Vec<reqwest::Certificate> = ders(bundle)
        .iter()
        .filter_map(|d| reqwest::Certificate::from_der(d).ok())
        .collect();
    reqwest::Client::builder()
        .tls_certs_only(certs)
        .resolve(HOST, addr)
        .no_proxy()
        .tls_info(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_else(|e| panic!("client: {e}"))
}

fn review(uid: &str) -> Value {
    let object = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "rot", "namespace": "default"},
        "spec": {"tasks": [{"name": "w", "replicas": 1, "template": {"spec": {
            "containers": [{"name": "w", "image": "busybox"}]}}}]}
    });
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
            "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"},
            "name": "rot", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin"},
            "object": object, "oldObject": null, "dryRun": false
        }
    })
}

/// The leaf a replica serves now, fetched with a client trusting `bundle`.
async fn served_leaf(bundle: &str, addr: SocketAddr) -> Option<Vec<u8>> {
    let resp = client_for(bundle, addr)
        .get(format!("https://{HOST}:{}/healthz", addr.port()))
        .send()
        .await
        .ok()?;
    resp.extensions()
        .get::<reqwest::tls::TlsInfo>()?
        .peer_certificate()
        .map(<[u8]>::to_vec)
}

#[derive(Default)]
struct Tally {
    ok: u64,
    handshake_or_transport: Vec<String>,
    bad_review: Vec<String>,
    leaves: BTreeSet<Vec<u8>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_agree_on_one_ca_and_no_review_fails_while_certificates_rotate() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("tephra-tls-self-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let log = std::env::var_os("TEPHRA_TEST_LOG").map(std::path::PathBuf::from);
    let log_of = |n: &str| log.as_ref().map(|d| d.join(format!("tls-self-{n}.log")));
    let (_api, url, c) = served::apiserver(&[], 30).await;
    served::crds_and_namespace(&c, NS).await;
    install_webhook_configurations(&c).await;

    // Both replicas at once, no Secret yet: whichever creates it, the other must use it.
    let kc = kubeconfig(&dir, &url);
    let [a, b, ma, mb] = served::free_ports::<4>().map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
    let (addrs, metrics) = ([a, b], [ma, mb]);
    let _a = replica(
        &kc,
        "tephra-a",
        addrs[0],
        metrics[0],
        log_of("a").as_deref(),
    );
    let _b = replica(
        &kc,
        "tephra-b",
        addrs[1],
        metrics[1],
        log_of("b").as_deref(),
    );

    let secrets = Api::<Secret>::namespaced(c.clone(), NS);
    let secret = eventually(60, "Secret tephra-tls", || async {
        secrets.get_opt("tephra-tls").await.ok().flatten()
    })
    .await;
    let data = secret.data.unwrap_or_default();
    let ca_pem = String::from_utf8(data["ca.crt"].0.clone()).unwrap_or_default();
    assert_eq!(ders(&ca_pem).len(), 1, "one CA in the Secret");
    // The bundle reaches the webhook configuration and the ConfigMap.
    let bundle = eventually(30, "the caBundle published", || async {
        ca_bundle(&c).await.filter(|b| *b == ca_pem)
    })
    .await;
    let cm = eventually(10, "ConfigMap tephra-ca", || async {
        Api::<ConfigMap>::namespaced(c.clone(), NS)
            .get_opt("tephra-ca")
            .await
            .ok()
            .flatten()
    })
    .await;
    assert_eq!(
        cm.data.unwrap_or_default().get("ca.crt"),
        Some(&ca_pem),
        "the ConfigMap holds the same bundle"
    );
    // Both replicas serve a certificate that this one CA verifies.
    for addr in &addrs {
        eventually(30, "a replica serving the shared CA's certificate", || {
            served_leaf(&bundle, *addr)
        })
        .await;
    }
    println!("two replicas started together: one CA in the Secret, both serve under it");

    // Load: for each replica, one task opening a new connection per review and one keeping
    // its connection; all trust only the caBundle, re-read every 100 ms (a changed bundle
    // makes new clients, as kube-apiserver rebuilds its webhook client).
    let (bundle_tx, bundle_rx) = tokio::sync::watch::channel(bundle.clone());
    let stop = tokio_util::sync::CancellationToken::new();
    let watcher = {
        let (c, stop) = (c.clone(), stop.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let mut seen: Vec<(Duration, usize)> = Vec::new();
            while !stop.is_cancelled() {
                if let Some(b) = ca_bundle(&c).await
                    && *bundle_tx.borrow() != b
                {
                    seen.push((started.elapsed(), ders(&b).len()));
                    let _ = bundle_tx.send(b);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            seen
        })
    };
    // Swap lag: from the Secret holding a new serving certificate to each replica serving it.
    let lag_probe = {
        let (c, stop, rx, addrs) = (c.clone(), stop.clone(), bundle_rx.clone(), addrs);
        tokio::spawn(async move {
            let secrets = Api::<Secret>::namespaced(c, NS);
            let mut written: Vec<(Vec<u8>, Instant)> = Vec::new();
            let mut lags: Vec<Duration> = Vec::new();
            let mut served: BTreeSet<(usize, Vec<u8>)> = BTreeSet::new();
            while !stop.is_cancelled() {
                if let Some(leaf) = secrets
                    .get_opt("tephra-tls")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|s| s.data)
                    .and_then(|d| {
                        let pem = String::from_utf8(d.get("tls.crt")?.0.clone()).ok()?;
                        ders(&pem).first().map(|d| d.to_vec())
                    })
                    && written.last().map(|(l, _)| l) != Some(&leaf)
                {
                    written.push((leaf, Instant::now()));
                }
                let bundle = rx.borrow().clone();
                for (i, addr) in addrs.iter().enumerate() {
                    let Some(leaf) = served_leaf(&bundle, *addr).await else {
                        continue;
                    };
                    if served.insert((i, leaf.clone()))
                        && let Some((_, at)) = written.iter().find(|(l, _)| *l == leaf)
                    {
                        lags.push(at.elapsed());
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            lags
        })
    };
    let mut tasks = Vec::new();
    for addr in addrs {
        for fresh in [true, false] {
            let (mut rx, stop) = (bundle_rx.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let mut tally = Tally::default();
                let url = format!("https://{HOST}:{}/jobs/mutate", addr.port());
                let mut keep = client_for(&rx.borrow_and_update(), addr);
                let mut n = 0u64;
                while !stop.is_cancelled() {
                    n += 1;
                    if rx.has_changed().unwrap_or(false) {
                        keep = client_for(&rx.borrow_and_update(), addr);
                    }
                    let client = if fresh {
                        client_for(&rx.borrow(), addr)
                    } else {
                        keep.clone()
                    };
                    let uid = format!("u{n}");
                    match client.post(&url).json(&review(&uid)).send().await {
                        Ok(resp) => {
                            if let Some(leaf) = resp
                                .extensions()
                                .get::<reqwest::tls::TlsInfo>()
                                .and_then(|i| i.peer_certificate())
                            {
                                tally.leaves.insert(leaf.to_vec());
                            }
                            let status = resp.status();
                            let body: Value = resp.json().await.unwrap_or(Value::Null);
                            if status == 200
                                && body["response"]["uid"] == uid.as_str()
                                && body["response"]["allowed"] == true
                            {
                                tally.ok += 1;
                            } else {
                                tally.bad_review.push(format!("{status}: {body}"));
                            }
                        }
                        Err(e) => tally
                            .handshake_or_transport
                            .push(tephra::report::report(&e).to_string()),
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                tally
            }));
        }
    }
    tokio::time::sleep(LOAD).await;
    stop.cancel();
    let bundles = watcher.await.unwrap_or_default();
    let mut lags = lag_probe.await.unwrap_or_default();
    lags.sort();
    let mut total = Tally::default();
    for t in tasks {
        let t = t.await.unwrap_or_default();
        total.ok += t.ok;
        total
            .handshake_or_transport
            .extend(t.handshake_or_transport);
        total.bad_review.extend(t.bad_review);
        total.leaves.extend(t.leaves);
    }
    let final_ca = secrets
        .get("tephra-tls")
        .await
        .ok()
        .and_then(|s| s.data)
        .map(|d| String::from_utf8(d["ca.crt"].0.clone()).unwrap_or_default())
        .unwrap_or_default();
    println!(
        "reviews: {} ok, {} failed handshakes/transport, {} failed reviews; {} distinct serving \
         certificates seen; caBundle changes (time since load start, CAs in it): {:?}",
        total.ok,
        total.handshake_or_transport.len(),
        total.bad_review.len(),
        total.leaves.len(),
        bundles
    );
    println!(
        "swap lag (Secret written → replica serving it, probed every 50 ms, Secret read every \
         200 ms): {} swaps, median {:?}, max {:?}",
        lags.len(),
        lags.get(lags.len() / 2),
        lags.last()
    );
    assert!(lags.len() >= 6, "too few swaps observed: {}", lags.len());
    assert!(
        lags.last().is_some_and(|l| *l < Duration::from_secs(3)),
        "a replica took too long to serve a new certificate: {lags:?}"
    );
    assert!(
        total.handshake_or_transport.is_empty(),
        "failed handshakes: {:?}",
        &total.handshake_or_transport[..total.handshake_or_transport.len().min(5)]
    );
    assert!(
        total.bad_review.is_empty(),
        "failed reviews: {:?}",
        &total.bad_review[..total.bad_review.len().min(5)]
    );
    assert!(total.ok > 200, "too little load: {}", total.ok);
    // The serving certificate rotated several times, and the CA once: a bundle with both CAs
    // was published, then one with the new CA alone.
    assert!(
        total.leaves.len() >= 4,
        "serving certificates seen: {}",
        total.leaves.len()
    );
    assert!(
        bundles.iter().any(|(_, n)| *n == 2),
        "no bundle with both CAs was published: {bundles:?}"
    );
    assert!(
        matches!(bundles.last(), Some((_, 1))),
        "the old CA was not dropped: {bundles:?}"
    );
    assert_ne!(final_ca, ca_pem, "the CA rotated");

    // A re-apply of the manifests puts the placeholder caBundle back; the leader restores the
    // bundle at its next step.
    let configs = Api::<MutatingWebhookConfiguration>::all(c.clone());
    let mut cfg = configs
        .get(tephra::selftls::MUTATING_CONFIGURATION)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for hook in cfg.webhooks.iter_mut().flatten() {
        hook.client_config.ca_bundle = Some(k8s_openapi::ByteString(b"\n".to_vec()));
    }
    configs
        .replace(
            tephra::selftls::MUTATING_CONFIGURATION,
            &PostParams::default(),
            &cfg,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let reset = Instant::now();
    let current = secrets
        .get("tephra-tls")
        .await
        .ok()
        .and_then(|s| s.data)
        .map(|d| String::from_utf8(d["ca.crt"].0.clone()).unwrap_or_default())
        .unwrap_or_default();
    eventually(10, "the caBundle restored after a reset", || async {
        ca_bundle(&c).await.filter(|b| *b == current)
    })
    .await;
    println!(
        "placeholder caBundle replaced by the bundle again after {:?}",
        reset.elapsed()
    );

    // A deleted Secret is written again from what the replicas serve (same CA, same
    // certificate); a broken one is replaced by the last good material.
    let data_of = |s: Secret| {
        let d = s.data.unwrap_or_default();
        let text = |k: &str| {
            d.get(k)
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                .unwrap_or_default()
        };
        (text("ca.crt"), text("tls.crt"))
    };
    let before = data_of(
        secrets
            .get("tephra-tls")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    secrets
        .delete("tephra-tls", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let again = eventually(10, "the deleted Secret written again", || async {
        secrets.get_opt("tephra-tls").await.ok().flatten()
    })
    .await;
    assert_eq!(
        data_of(again).0,
        before.0,
        "the same CA bundle after a delete"
    );
    let mut broken = secrets
        .get("tephra-tls")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    if let Some(d) = broken.data.as_mut() {
        d.insert(
            "tls.crt".into(),
            k8s_openapi::ByteString(b"garbage".to_vec()),
        );
    }
    secrets
        .replace("tephra-tls", &PostParams::default(), &broken)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let repaired = eventually(10, "the broken Secret repaired", || async {
        let s = secrets.get_opt("tephra-tls").await.ok().flatten()?;
        let (ca, crt) = data_of(s);
        crt.starts_with("-----BEGIN CERTIFICATE-----").then_some(ca)
    })
    .await;
    assert_eq!(repaired, before.0, "the same CA bundle after a repair");
    println!("a deleted and a broken Secret were both restored with the same CA");

    // What an operator sees: the steps the leader took, and the bundle size on every replica.
    let mut steps: std::collections::BTreeMap<String, f64> = Default::default();
    for m in &metrics {
        let body = reqwest::get(format!("http://{m}/metrics"))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .text()
            .await
            .unwrap_or_default();
        for line in body.lines() {
            if let Some(rest) = line.strip_prefix("tephra_tls_self_steps_total{step=\"")
                && let Some((step, value)) = rest.split_once("\"} ")
            {
                *steps.entry(step.to_string()).or_default() += value.parse::<f64>().unwrap_or(0.0);
            }
        }
        assert!(
            body.contains("tephra_tls_ca_bundle_certificates 1"),
            "one CA in the bundle after the rotation, on {m}"
        );
    }
    println!("rotation steps taken by the leader: {steps:?}");
    for (step, at_least) in [
        ("publish", 3.0),
        ("add_ca", 1.0),
        ("renew_serving", 5.0),
        ("drop_ca", 1.0),
        ("restore", 2.0),
    ] {
        assert!(
            steps.get(step).copied().unwrap_or(0.0) >= at_least,
            "{step}: {steps:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Four replicas' start-ups at the same instant, none finding a Secret: each makes a CA, one
/// create wins, the others' creates conflict and they read the winner's. All end with the
/// same CA bundle, and the Secret holds one CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_start_ups_agree_on_one_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (_api, _, c) = served::apiserver(&[], 30).await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "race"}}))
        .unwrap_or_else(|e| panic!("{e}"));
    eventually(30, "namespace race to be created", || async {
        Api::<Namespace>::all(c.clone())
            .create(&PostParams::default(), &ns)
            .await
            .ok()
    })
    .await;
    let cfg = tephra::selftls::SelfTlsConfig {
        namespace: "race".into(),
        secret: "tephra-tls".into(),
        configmap: "tephra-ca".into(),
        common_name: "tephra.race.svc".into(),
        names: tephra::certs::service_dns_names("tephra", "race"),
        policy: tephra::selftls::Policy::DEFAULT,
        poll: Duration::from_secs(1),
    };
    let boots =
        futures::future::join_all((0..4).map(|_| tephra::selftls::bootstrap(&c, cfg.clone())))
            .await;
    let bundles: BTreeSet<String> = boots
        .into_iter()
        .map(|b| b.unwrap_or_else(|e| panic!("bootstrap: {e}")).ca_bundle_pem)
        .collect();
    assert_eq!(bundles.len(), 1, "the start-ups disagree: {bundles:?}");
    let secret = Api::<Secret>::namespaced(c.clone(), "race")
        .get("tephra-tls")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ca =
        String::from_utf8(secret.data.unwrap_or_default()["ca.crt"].0.clone()).unwrap_or_default();
    assert_eq!(ders(&ca).len(), 1);
    assert!(bundles.contains(&ca));
}
