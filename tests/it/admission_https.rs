//! The admission webhooks as kube-apiserver reaches them: the real server (`server::bind` with
//! `admission::router`, composed as `tephra serve` does) on 127.0.0.1 port 0 with a
//! self-signed certificate, and a rustls client (ring) that trusts only that certificate's CA,
//! posting real AdmissionReview JSON. Every wait is bounded.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use tephra::admission::{self, AdmissionConfig, AdmissionContext, AdmissionMetrics, StaticView};
use tephra::api::Queue;
use tephra::metrics::Metrics;
use tephra::server::{self, ServerConfig, ServerError, ServerState, TlsSource};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

struct Running {
    https: SocketAddr,
    client: reqwest::Client,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ServerError>>,
}

impl Running {
    /// `tephra serve`'s composition with a view holding the `default` queue, Open.
    async fn start() -> Running {
        // reqwest is built with `rustls-no-provider`; the process uses ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let metrics = Metrics::new().unwrap();
        let view = StaticView::with_queues([Queue::test("default").open()]);
        let ctx = Arc::new(AdmissionContext {
            config: AdmissionConfig::default(),
            view: Arc::new(view),
            metrics: AdmissionMetrics::new(metrics.registry()).unwrap(),
        });
        let config = ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            tls: TlsSource::SelfSigned,
            drain_timeout: Duration::from_secs(5),
            ..ServerConfig::default()
        };
        let state = ServerState::new(metrics);
        let bound = server::bind(config, admission::router(ctx), state.clone()).unwrap();
        let https = bound.https_addr();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(bound.run(shutdown.clone()));
        tokio::time::timeout(WAIT, state.wait_ready())
            .await
            .expect("server ready in time");

        let ca = state.self_signed_ca_pem().expect("self-signed CA recorded");
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes()).unwrap()])
            .resolve("localhost", https)
            .timeout(WAIT)
            .no_proxy()
            .build()
            .unwrap();
        Running {
            https,
            client,
            shutdown,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.https.port())
    }

    /// POSTs `body` as JSON; the status and the parsed answer.
    async fn post(&self, path: &str, body: Vec<u8>) -> (u16, Value) {
        let resp = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e:?}"));
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap();
        let v = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{path}: {status} answer is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&bytes)
            )
        });
        (status, v)
    }

    async fn review(&self, path: &str, review: &Value) -> Value {
        let (status, answer) = self.post(path, serde_json::to_vec(review).unwrap()).await;
        assert_eq!(status, 200, "{path}: {answer}");
        assert_eq!(answer["kind"], "AdmissionReview", "{answer}");
        assert_eq!(
            answer["response"]["uid"], review["request"]["uid"],
            "{path}: the uid is echoed"
        );
        answer
    }

    async fn metrics_text(&self) -> String {
        let resp = self.client.get(self.url("/metrics")).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        resp.text().await.unwrap()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let result = tokio::time::timeout(WAIT, self.task)
            .await
            .expect("stopped within the bound")
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
    }
}

fn fixture(name: &str) -> Value {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/admission")
        .join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn review_of(version: &str, uid: &str, object: Value) -> Value {
    let api_version = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (group, kind_version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    json!({
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": kind_version, "kind": object["kind"]},
            "resource": {"group": group, "version": kind_version, "resource": "jobs"},
            "name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
        }
    })
}

/// A vcJob with nothing defaulted: no queue, schedulerName, maxRetry or minAvailable, and
/// two unnamed tasks among the named ones.
fn bare_job() -> Value {
    let task = |name: Option<&str>, replicas: i64| {
        let mut t = json!({
            "replicas": replicas,
            "template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{
                    "name": "worker",
                    "image": "busybox:1.36",
                    "command": ["sh", "-c", "sleep 10"],
                    "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                }],
            }},
        });
        if let Some(n) = name {
            t["name"] = json!(n);
        }
        t
    };
    json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "bare", "namespace": "ml"},
        "spec": {
            "tasks": [task(Some("ps"), 1), task(None, 2), task(Some("chief"), 1), task(None, 3)],
        },
    })
}

/// The object after applying the answer's base64 JSONPatch.
fn patched(original: &Value, answer: &Value) -> Value {
    let response = &answer["response"];
    assert_eq!(response["patchType"], "JSONPatch", "{answer}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("a patch"))
        .expect("the patch is base64");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("the patch is RFC 6902");
    let mut doc = original.clone();
    json_patch::patch(&mut doc, &patch).expect("the patch applies to the object sent");
    doc
}

#[tokio::test]
async fn a_vcjob_create_gets_a_patch_that_writes_volcanos_defaults() {
    let r = Running::start().await;
    let job = bare_job();
    let review = review_of("admission.k8s.io/v1", "uid-bare-job", job.clone());
    let answer = r.review("/jobs/mutate", &review).await;
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");

    let out = patched(&job, &answer);
    let spec = &out["spec"];
    assert_eq!(spec["queue"], "default");
    assert_eq!(spec["schedulerName"], "volcano");
    assert_eq!(spec["maxRetry"], 3);
    assert_eq!(spec["minAvailable"], 7, "sum of the tasks' replicas");
    let names: Vec<&str> = spec["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ps", "default1", "chief", "default3"]);
    for t in spec["tasks"].as_array().unwrap() {
        assert_eq!(t["minAvailable"], t["replicas"], "{t}");
        assert_eq!(t["maxRetry"], 3, "{t}");
    }
    // What the user wrote is untouched.
    assert_eq!(
        out["spec"]["tasks"][0]["template"],
        job["spec"]["tasks"][0]["template"]
    );

    // The defaulted job then passes validation as is.
    let again = review_of("admission.k8s.io/v1", "uid-bare-job-2", out);
    let answer = r.review("/jobs/validate", &again).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    r.stop().await;
}

#[tokio::test]
async fn an_invalid_vcjob_is_denied_with_the_reason_in_status_message() {
    let r = Running::start().await;
    let review = fixture("job-create-invalid-v1.json");
    let answer = r.review("/jobs/validate", &review).await;
    let response = &answer["response"];
    assert_eq!(response["allowed"], false, "{answer}");
    let message = response["status"]["message"].as_str().expect("a message");
    assert!(message.contains("duplicate event PodFailed"), "{message}");
    assert_eq!(response["status"]["code"], 403);

    // A job in a queue the view does not know is refused too, naming the queue.
    let mut job = bare_job();
    job["spec"]["queue"] = json!("nowhere");
    let review = review_of("admission.k8s.io/v1", "uid-no-queue", job);
    let answer = r.review("/jobs/validate", &review).await;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("nowhere"), "{message}");
    r.stop().await;
}

#[tokio::test]
async fn a_v1beta1_review_is_answered_in_v1beta1_with_the_same_uid() {
    let r = Running::start().await;
    let review = fixture("job-create-v1beta1.json");
    let answer = r.review("/jobs/mutate", &review).await;
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(answer["response"]["uid"], "0b1e-job-create-v1beta1");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(
        patched(&review["request"]["object"], &answer),
        fixture("job-create.expected.json")
    );
    r.stop().await;
}

#[tokio::test]
async fn an_owned_pod_for_a_served_scheduler_gets_its_group_name_at_creation() {
    let r = Running::start().await;
    let review = fixture("pod-create-owned-v1.json");
    let answer = r.review("/pods/mutate", &review).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let pod = patched(&review["request"]["object"], &answer);
    assert_eq!(
        pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
        "podgroup-5f1d2c3b-aaaa-4bbb-8ccc-000000000042"
    );
    assert_eq!(pod, fixture("pod-create-owned.expected.json"));

    // A pod for another scheduler is left alone.
    let mut other = review.clone();
    other["request"]["uid"] = json!("uid-default-scheduler");
    other["request"]["object"]["spec"]["schedulerName"] = json!("default-scheduler");
    let answer = r.review("/pods/mutate", &other).await;
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    r.stop().await;
}

#[tokio::test]
async fn bad_bodies_get_400_or_413_and_the_server_keeps_answering_and_counting() {
    let r = Running::start().await;

    let (status, v) = r
        .post("/jobs/mutate", b"{\"apiVersion\": garbage".to_vec())
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["code"], 400);
    let message = v["message"].as_str().expect("a message");
    assert!(message.contains("not JSON"), "{message}");
    assert!(!message.contains('\n'), "one line: {message:?}");

    // Above the 6 MiB cap: refused before the handler, as JSON.
    let (status, v) = r.post("/jobs/validate", vec![b' '; 7 * 1024 * 1024]).await;
    assert_eq!(status, 413, "{v}");
    assert_eq!(v["code"], 413);

    // Still serving, on the same paths.
    let answer = r
        .review("/jobs/validate", &fixture("job-create-invalid-v1.json"))
        .await;
    assert_eq!(answer["response"]["allowed"], false);
    let answer = r
        .review("/pods/mutate", &fixture("pod-create-owned-v1.json"))
        .await;
    assert_eq!(answer["response"]["allowed"], true);
    let answer = r
        .review("/jobs/mutate", &fixture("job-create-v1.json"))
        .await;
    assert_eq!(answer["response"]["allowed"], true);

    let text = r.metrics_text().await;
    for line in [
        r#"tephra_admission_requests_total{operation="",path="/jobs/mutate",result="invalid"} 1"#,
        r#"tephra_admission_requests_total{operation="CREATE",path="/jobs/mutate",result="patched"} 1"#,
        r#"tephra_admission_requests_total{operation="CREATE",path="/jobs/validate",result="denied"} 1"#,
        r#"tephra_admission_requests_total{operation="CREATE",path="/pods/mutate",result="patched"} 1"#,
        r#"tephra_admission_duration_seconds_count{path="/jobs/validate"} 1"#,
        r#"tephra_http_requests_total{method="POST",route="/jobs/validate",status="413"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    r.stop().await;
}
