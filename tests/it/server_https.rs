//! The HTTPS server as a client sees it: TLS versions and trust, limits, errors, probes,
//! metrics, HTTP/2 negotiation, certificate rotation and shutdown. Every server listens on
//! 127.0.0.1 port 0; every wait is bounded.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::{get, post};
use tephra::certs;
use tephra::metrics::Metrics;
use tephra::server::{self, ServerConfig, ServerError, ServerState, TlsSource};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

fn init_crypto() {
    // Both reqwest (rustls-no-provider) and the server use ring; installing twice is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn local_config(tls: TlsSource) -> ServerConfig {
    ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        tls,
        drain_timeout: Duration::from_secs(5),
        ..ServerConfig::default()
    }
}

struct Running {
    state: ServerState,
    https: SocketAddr,
    metrics: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ServerError>>,
}

impl Running {
    async fn start(config: ServerConfig, extra: Router) -> Running {
        init_crypto();
        let state = ServerState::new(Metrics::new().unwrap());
        let bound = server::bind(config, extra, state.clone()).unwrap();
        let https = bound.https_addr();
        let metrics = bound.metrics_addr().unwrap();
        assert_eq!(state.https_addr(), Some(https));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(bound.run(shutdown.clone()));
        tokio::time::timeout(WAIT, state.wait_ready())
            .await
            .expect("server ready");
        Running {
            state,
            https,
            metrics,
            shutdown,
            task,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let result = tokio::time::timeout(WAIT, self.task)
            .await
            .expect("stopped within the bound")
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
    }

    fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.https.port())
    }
}

/// A client that trusts exactly `ca_pem` and resolves `names` to the server.
fn client_trusting(ca_pem: &str, names: &[&str], server: SocketAddr) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap()])
        .timeout(WAIT)
        .no_proxy();
    for name in names {
        b = b.resolve(name, server);
    }
    b.build().unwrap()
}

fn self_signed_client(r: &Running) -> reqwest::Client {
    let ca = r
        .state
        .self_signed_ca_pem()
        .expect("self-signed CA recorded");
    client_trusting(&ca, &["localhost"], r.https)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tephra-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn files(dir: &std::path::Path) -> TlsSource {
    TlsSource::Files {
        cert: dir.join(certs::CERT_FILE),
        key: dir.join(certs::KEY_FILE),
    }
}

fn echo_routes() -> Router {
    Router::new()
        .route(
            "/echo-len",
            post(|body: Bytes| async move { body.len().to_string() }),
        )
        .route(
            "/panic",
            get(|| async {
                if true {
                    panic!("handler bug");
                }
                ""
            }),
        )
}

#[tokio::test]
async fn a_rustls_client_reaches_healthz_over_https_with_tls_13_and_12() {
    let r = Running::start(local_config(TlsSource::SelfSigned), Router::new()).await;
    let resp = self_signed_client(&r)
        .get(r.url("localhost", "/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "ok");

    // TLS 1.2 is still accepted (older API servers and tools).
    let ca = r.state.self_signed_ca_pem().unwrap();
    let tls12 = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes()).unwrap()])
        .tls_version_max(reqwest::tls::Version::TLS_1_2)
        .resolve("localhost", r.https)
        .timeout(WAIT)
        .build()
        .unwrap();
    let resp = tls12
        .get(r.url("localhost", "/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    r.stop().await;
}

/// A ClientHello as a TLS client of the given version would send it: ECDHE suites for RSA and
/// ECDSA certificates, SNI, P-256, and signature algorithms, no `supported_versions`.
fn client_hello(version: [u8; 2]) -> Vec<u8> {
    fn u16b(v: usize) -> [u8; 2] {
        (v as u16).to_be_bytes()
    }
    let mut ext = Vec::new();
    let host = b"localhost";
    ext.extend(u16b(0)); // server_name
    ext.extend(u16b(host.len() + 5));
    ext.extend(u16b(host.len() + 3));
    ext.push(0);
    ext.extend(u16b(host.len()));
    ext.extend(host);
    ext.extend(u16b(10)); // supported_groups: secp256r1
    ext.extend(u16b(4));
    ext.extend(u16b(2));
    ext.extend(u16b(23));
    ext.extend(u16b(11)); // ec_point_formats: uncompressed
    ext.extend(u16b(2));
    ext.extend([1, 0]);
    ext.extend(u16b(13)); // signature_algorithms
    let sigs: [u16; 3] = [0x0403, 0x0804, 0x0401];
    ext.extend(u16b(2 + sigs.len() * 2));
    ext.extend(u16b(sigs.len() * 2));
    for s in sigs {
        ext.extend(s.to_be_bytes());
    }

    let mut body = Vec::new();
    body.extend(version);
    body.extend([0x42; 32]); // random
    body.push(0); // empty session id
    let suites: [u16; 6] = [0xc02b, 0xc02f, 0xc013, 0xc014, 0x002f, 0x0035];
    body.extend(u16b(suites.len() * 2));
    for s in suites {
        body.extend(s.to_be_bytes());
    }
    body.extend([1, 0]); // compression: null
    body.extend(u16b(ext.len()));
    body.extend(ext);

    let mut handshake = vec![1]; // client_hello
    handshake.extend(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend(body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend(u16b(handshake.len()));
    record.extend(handshake);
    record
}

/// Sends a ClientHello and returns what the server answers before closing (bounded).
async fn answer_to_hello(addr: SocketAddr, version: [u8; 2]) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(&client_hello(version)).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        // Enough to see the first record; stop at EOF or reset.
        while out.len() < 5 {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(WAIT, read).await;
    out
}

#[tokio::test]
async fn a_tls_11_client_is_refused_with_a_fatal_alert_and_no_server_hello() {
    let r = Running::start(local_config(TlsSource::SelfSigned), Router::new()).await;

    // Control: the same hand-built hello offering TLS 1.2 gets a ServerHello, so the refusal
    // below is about the version and not a malformed message.
    let ok = answer_to_hello(r.https, [0x03, 0x03]).await;
    assert!(ok.len() > 5, "{ok:?}");
    assert_eq!(ok[0], 0x16, "handshake record expected: {ok:?}");
    assert_eq!(ok[5], 0x02, "ServerHello expected: {ok:?}");

    let refused = answer_to_hello(r.https, [0x03, 0x02]).await;
    assert!(
        refused.is_empty() || (refused[0] == 0x15 && refused.get(5) == Some(&2)),
        "expected a fatal alert or a closed connection, got {refused:?}"
    );
    assert!(!refused.starts_with(&[0x16]), "no ServerHello for TLS 1.1");

    // The server is unaffected.
    let resp = self_signed_client(&r)
        .get(r.url("localhost", "/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    r.stop().await;
}

#[tokio::test]
async fn generated_certs_verify_under_every_service_name_with_only_the_ca_trusted() {
    let dir = temp_dir("certs-names");
    let ca_bundle = certs::run_certs_command("tephra", "volcano-system", &[], &dir, false).unwrap();
    let ca = std::fs::read_to_string(dir.join(certs::CA_FILE)).unwrap();
    assert!(!ca_bundle.is_empty());
    let r = Running::start(local_config(files(&dir)), Router::new()).await;

    let names = [
        "tephra",
        "tephra.volcano-system",
        "tephra.volcano-system.svc",
        "tephra.volcano-system.svc.cluster.local",
    ];
    let client = client_trusting(&ca, &names, r.https);
    for name in names {
        let resp = client
            .get(r.url(name, "/healthz"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(resp.status(), 200, "{name}");
    }

    // A name the certificate does not carry is refused, even with the right CA.
    let other = client_trusting(&ca, &["other.volcano-system.svc"], r.https);
    assert!(
        other
            .get(r.url("other.volcano-system.svc", "/healthz"))
            .send()
            .await
            .is_err()
    );

    // A client trusting another CA refuses this server.
    let stranger = certs::generate("tephra", "volcano-system").unwrap();
    let wrong_ca = client_trusting(&stranger.ca_cert_pem, &names, r.https);
    assert!(
        wrong_ca
            .get(r.url("tephra.volcano-system.svc", "/healthz"))
            .send()
            .await
            .is_err()
    );
    r.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn limits_errors_and_metrics_over_https() {
    let r = Running::start(local_config(TlsSource::SelfSigned), echo_routes()).await;
    let client = self_signed_client(&r);

    // 5 MiB (an UPDATE review of a large object) reaches the handler whole.
    let five = vec![b'a'; 5 * 1024 * 1024];
    let resp = client
        .post(r.url("localhost", "/echo-len"))
        .body(five)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), (5 * 1024 * 1024).to_string());

    // 7 MiB is refused with a JSON 413 ...
    let seven = vec![b'a'; 7 * 1024 * 1024];
    let resp = client
        .post(r.url("localhost", "/echo-len"))
        .body(seven)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["code"], 413);

    // ... and the server keeps answering.
    let resp = client
        .get(r.url("localhost", "/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // Unknown path: 404 with a JSON body naming it.
    let resp = client
        .get(r.url("localhost", "/no/such/path"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let v: serde_json::Value = resp.json().await.unwrap();
    assert!(v["message"].as_str().unwrap().contains("/no/such/path"));

    // A panicking handler answers 500 and the connection pool keeps working.
    let resp = client
        .get(r.url("localhost", "/panic"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 500);
    let resp = client
        .get(r.url("localhost", "/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    // The counters, keyed by route template, on /metrics over HTTPS ...
    let resp = client
        .get(r.url("localhost", "/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/plain; version=0.0.4"
    );
    let text = resp.text().await.unwrap();
    for line in [
        r#"tephra_http_requests_total{method="POST",route="/echo-len",status="200"} 1"#,
        r#"tephra_http_requests_total{method="POST",route="/echo-len",status="413"} 1"#,
        r#"tephra_http_requests_total{method="GET",route="unmatched",status="404"} 1"#,
        r#"tephra_http_requests_total{method="GET",route="/panic",status="500"} 1"#,
        "process_resident_memory_bytes",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }

    // ... and on the plain-HTTP metrics listener, with its probes and JSON 404.
    let plain = reqwest::Client::builder()
        .timeout(WAIT)
        .no_proxy()
        .build()
        .unwrap();
    let base = format!("http://{}", r.metrics);
    let text = plain
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains(r#"route="/echo-len""#), "{text}");
    for path in ["/healthz", "/readyz"] {
        let resp = plain.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
    }
    let resp = plain
        .get(format!("{base}/jobs/mutate"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["reason"], "NotFound");
    r.stop().await;
}

#[tokio::test]
async fn http2_is_off_by_default_and_offered_when_enabled() {
    let r = Running::start(local_config(TlsSource::SelfSigned), Router::new()).await;
    // The client offers h2 and http/1.1 via ALPN; the server picks http/1.1.
    let resp = self_signed_client(&r)
        .get(r.url("localhost", "/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_11);
    // A client that insists on HTTP/2 gets nowhere.
    let ca = r.state.self_signed_ca_pem().unwrap();
    let h2_only = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes()).unwrap()])
        .resolve("localhost", r.https)
        .http2_prior_knowledge()
        .timeout(WAIT)
        .build()
        .unwrap();
    assert!(
        h2_only
            .get(r.url("localhost", "/healthz"))
            .send()
            .await
            .is_err()
    );
    r.stop().await;

    let config = ServerConfig {
        enable_http2: true,
        ..local_config(TlsSource::SelfSigned)
    };
    let r = Running::start(config, Router::new()).await;
    let resp = self_signed_client(&r)
        .get(r.url("localhost", "/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.version(), reqwest::Version::HTTP_2);
    assert_eq!(resp.status(), 200);
    r.stop().await;
}

#[tokio::test]
async fn shutdown_drains_an_in_flight_request_then_returns_ok() {
    let (entered_tx, mut entered_rx) = mpsc::channel::<()>(1);
    let release = Arc::new(Notify::new());
    let release_in_handler = release.clone();
    let extra = Router::new().route(
        "/hold",
        get(move || {
            let entered = entered_tx.clone();
            let release = release_in_handler.clone();
            async move {
                let _ = entered.send(()).await;
                release.notified().await;
                "done"
            }
        }),
    );
    let r = Running::start(local_config(TlsSource::SelfSigned), extra).await;
    let client = self_signed_client(&r);
    let in_flight = tokio::spawn({
        let url = r.url("localhost", "/hold");
        async move { client.get(url).send().await }
    });
    tokio::time::timeout(WAIT, entered_rx.recv())
        .await
        .unwrap()
        .unwrap();

    r.shutdown.cancel();
    // Readiness drops as soon as draining starts.
    let mut not_ready = false;
    for _ in 0..200 {
        if !r.state.is_ready() {
            not_ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(not_ready, "readiness still true while draining");

    release.notify_one();
    let resp = tokio::time::timeout(WAIT, in_flight)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "done");

    let result = tokio::time::timeout(WAIT, r.task).await.unwrap().unwrap();
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn start_up_errors_are_one_line_and_name_the_culprit() {
    init_crypto();
    let state = || ServerState::new(Metrics::new().unwrap());

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let config = ServerConfig {
        listen: addr,
        ..local_config(TlsSource::SelfSigned)
    };
    let err = server::bind(config, Router::new(), state()).unwrap_err();
    assert_eq!(err.metric_label(), "bind");
    let msg = err.to_string();
    assert!(
        msg.contains(&addr.to_string()) && !msg.contains('\n'),
        "{msg}"
    );

    let dir = temp_dir("missing-certs");
    let err = server::bind(local_config(files(&dir)), Router::new(), state()).unwrap_err();
    assert_eq!(err.metric_label(), "read_file");
    assert!(err.to_string().contains("tls.crt"), "{err}");

    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(certs::CERT_FILE), "garbage").unwrap();
    std::fs::write(dir.join(certs::KEY_FILE), "garbage").unwrap();
    let err = server::bind(local_config(files(&dir)), Router::new(), state()).unwrap_err();
    assert!(err.to_string().contains("tls.crt"), "{err}");
    assert!(!err.to_string().contains('\n'));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn rotated_certificate_files_are_served_without_a_restart() {
    let dir = temp_dir("rotate");
    let first = certs::generate("tephra", "ns").unwrap();
    first.write_to(&dir).unwrap();
    let config = ServerConfig {
        cert_reload_interval: Duration::from_millis(100),
        ..local_config(files(&dir))
    };
    let r = Running::start(config, Router::new()).await;
    let name = ["tephra.ns.svc"];
    let url = r.url(name[0], "/healthz");
    let trusts_first = client_trusting(&first.ca_cert_pem, &name, r.https);
    assert_eq!(trusts_first.get(&url).send().await.unwrap().status(), 200);

    let second = certs::generate("tephra", "ns").unwrap();
    let trusts_second = client_trusting(&second.ca_cert_pem, &name, r.https);
    assert!(trusts_second.get(&url).send().await.is_err());
    second.write_to(&dir).unwrap();

    // New connections get the new certificate within a few reload intervals.
    let mut rotated = false;
    for _ in 0..100 {
        let fresh = client_trusting(&second.ca_cert_pem, &name, r.https);
        if fresh.get(&url).send().await.is_ok() {
            rotated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rotated, "the rotated certificate was never served");
    let fresh_first = client_trusting(&first.ca_cert_pem, &name, r.https);
    assert!(fresh_first.get(&url).send().await.is_err());
    assert!(
        r.state
            .metrics()
            .render()
            .contains(r#"tephra_tls_cert_reloads_total{result="ok"} 1"#)
    );
    r.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_replaced_under_load_are_served_within_seconds_and_no_request_fails() {
    let dir = temp_dir("rotate-load");
    let first = certs::run_certs_command("tephra", "ns", &[], &dir, false).unwrap();
    let ca_pem = std::fs::read_to_string(dir.join(certs::CA_FILE)).unwrap();
    let config = ServerConfig {
        cert_reload_interval: Duration::from_millis(200),
        ..local_config(files(&dir))
    };
    let r = Running::start(config, Router::new()).await;
    let url = r.url("tephra.ns.svc", "/healthz");
    // Load: one keep-alive client and one that opens a new connection (a new handshake) per
    // request, both trusting only the CA, for as long as the rotations last.
    let stop = CancellationToken::new();
    let load = |fresh: bool| {
        let (url, stop, ca_pem, https) = (url.clone(), stop.clone(), ca_pem.clone(), r.https);
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            let keep = client_trusting(&ca_pem, &["tephra.ns.svc"], https);
            while !stop.is_cancelled() {
                let c = if fresh {
                    client_trusting(&ca_pem, &["tephra.ns.svc"], https)
                } else {
                    keep.clone()
                };
                match c.get(&url).send().await {
                    Ok(resp) if resp.status() == 200 => ok += 1,
                    Ok(resp) => failed.push(resp.status().to_string()),
                    Err(e) => failed.push(e.to_string()),
                }
            }
            (ok, failed)
        })
    };
    let (fresh, keep) = (load(true), load(false));
    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Renewed under the same CA with one more name: only the new certificate has it.
        let name = format!("rotated-{round}.ns.svc");
        let bundle =
            certs::run_certs_command("tephra", "ns", std::slice::from_ref(&name), &dir, true)
                .unwrap();
        assert_eq!(bundle, first, "the caBundle does not change");
        let started = std::time::Instant::now();
        let new_url = r.url(&name, "/healthz");
        loop {
            let c = client_trusting(&ca_pem, &[name.as_str()], r.https);
            if c.get(&new_url).send().await.is_ok() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "round {round}: the new certificate was not served within 5 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!(
            "round {round}: new certificate served after {:?}",
            started.elapsed()
        );
    }
    stop.cancel();
    for (what, task) in [("new connections", fresh), ("keep-alive", keep)] {
        let (ok, failed) = task.await.unwrap();
        println!("{what}: {ok} requests, {} failed", failed.len());
        assert!(ok > 10, "{what}: too little load ({ok})");
        assert!(failed.is_empty(), "{what}: failed requests: {failed:?}");
    }
    r.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn client_ca_requires_a_client_certificate_signed_by_it() {
    let dir = temp_dir("client-ca");
    let server = certs::generate("tephra", "ns").unwrap();
    server.write_to(&dir).unwrap();
    // A client CA and a certificate it signs, as kube-apiserver would present.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "client-ca");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("client-ca.crt"), ca_cert.pem()).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let mut leaf = rcgen::CertificateParams::new(vec!["kube-apiserver".to_string()]).unwrap();
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
    let identity = reqwest::Identity::from_pem(
        format!("{}{}", leaf_cert.pem(), leaf_key.serialize_pem()).as_bytes(),
    )
    .unwrap();

    let config = ServerConfig {
        client_ca: Some(dir.join("client-ca.crt")),
        ..local_config(files(&dir))
    };
    let r = Running::start(config, Router::new()).await;
    let url = r.url("tephra.ns.svc", "/healthz");
    let anonymous = client_trusting(&server.ca_cert_pem, &["tephra.ns.svc"], r.https);
    assert!(
        anonymous.get(&url).send().await.is_err(),
        "no client certificate: refused"
    );
    let with_cert = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(server.ca_cert_pem.as_bytes()).unwrap()])
        .identity(identity)
        .resolve("tephra.ns.svc", r.https)
        .no_proxy()
        .timeout(WAIT)
        .build()
        .unwrap();
    assert_eq!(with_cert.get(&url).send().await.unwrap().status(), 200);
    // The plain metrics listener stays open for the kubelet's probes.
    let probe = reqwest::Client::new()
        .get(format!("http://{}/healthz", r.metrics))
        .send()
        .await
        .unwrap();
    assert_eq!(probe.status(), 200);
    r.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
