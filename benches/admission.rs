//! Admission throughput and latency, side by side with a do-nothing HTTPS server.
//! `cargo bench --bench admission` prints the table; docs/benchmarks/admission.md says how to
//! read it.
//!
//! On a small shared machine the load generator competes with the server for the CPU, so
//! absolute rates mislead. Both servers therefore run in this one process, on one tokio
//! runtime (same worker count), behind the same axum + axum-server + rustls (ring) stack, and
//! `wrk -t1 -c32` loads them in turn with the same review body, per path, in short slices:
//!
//! ```text
//!   (do-nothing server ─ tephra stack + do-nothing handler ─ tephra webhook) × 3 slices of 2 s
//! ```
//!
//! so a change in the machine's background load hits the three alike, and the spread of the
//! slices shows how steady the machine was.
//!
//! * do-nothing: one POST route that parses the body as `serde_json::Value` and answers
//!   `allowed: true` with the uid, nothing else (no middleware, no metrics).
//! * tephra: `server::bind(config, admission::router(ctx), state)`, as `tephra serve` composes
//!   it, with a `StaticView` holding the Open `default` queue. The do-nothing handler is also
//!   mounted there (`/bench/do-nothing`), which separates the cost of tephra's server layers
//!   from the cost of the webhook.
//!
//! Per webhook run it reports reviews/s (wrk), the ratio to the do-nothing run, the server-side
//! p99 from `tephra_admission_duration_seconds{path}` (bucket-interpolated: the buckets start
//! at 50 µs), an exact route-level p50/p99 (a timing layer around the admission routes: body
//! read, handler and answer), wrk's client p50/p99, and PASS/FAIL against the targets (ratio
//! ≥ 0.8 and server p99 < 1 ms on every path).
//! Then the resident memory, and a single-threaded timing of the handler alone (no network)
//! to show where the CPU goes.
//!
//! Environment:
//! * `TEPHRA_BENCH_SECS`: load time per server and path, default 6;
//! * `TEPHRA_BENCH_SLICES`: in how many turns that time is split, default 3;
//! * `TEPHRA_BENCH_WORKERS`: tokio worker threads for both servers, default 2;
//! * `TEPHRA_BENCH_CONNECTIONS`: wrk `-c`, default 32;
//! * `TEPHRA_BENCH_STRICT=1`: exit 1 when a path misses a target;
//! * `TEPHRA_BENCH_HANDLER_ONLY=1`: only the network-free handler timing (for profilers), with
//!   `TEPHRA_BENCH_HANDLER_CALLS` calls per path (default 5000);
//! * `TEPHRA_BENCH_WRITE_BODIES=DIR`: write the review bodies to DIR and stop.
//!
//! Needs `wrk` on `PATH` (Debian: `apt-get install -y wrk`); without it the bench stops with
//! exit code 2 and says so.

use std::error::Error;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use serde_json::{Value, json};
use tephra::admission::{
    self, AdmissionConfig, AdmissionContext, AdmissionMetrics, StaticView, WEBHOOKS,
};
use tephra::api::Queue;
use tephra::certs;
use tephra::metrics::Metrics;
use tephra::server::{self, ServerConfig, ServerState, TlsSource};
use tokio_util::sync::CancellationToken;

/// The allocator the `tephra` binary runs on, so these figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BenchResult<T> = Result<T, Box<dyn Error>>;

/// Throughput target of every path: tephra's reviews/s over the do-nothing server's on the
/// same body (a webhook should cost about what reading the review costs).
const TARGET_RATIO: f64 = 0.8;
/// Server-side p99 target.
const TARGET_P99: Duration = Duration::from_millis(1);
/// The histogram tephra records the handler time in.
const DURATION_SERIES: &str = "tephra_admission_duration_seconds";
/// The do-nothing server's one route.
const DO_NOTHING_PATH: &str = "/review";
/// The do-nothing handler mounted on tephra's server, beside the webhooks.
const STACK_ONLY_PATH: &str = "/bench/do-nothing";

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("admission bench: {e}");
            ExitCode::from(2)
        }
    }
}

struct Settings {
    secs: u64,
    workers: usize,
    connections: u32,
    slices: u64,
    strict: bool,
    handler_only: bool,
    handler_calls: usize,
}

impl Settings {
    /// Seconds per wrk invocation (whole seconds, at least 1).
    fn slice_secs(&self) -> u64 {
        (self.secs / self.slices).max(1)
    }

    fn from_env() -> BenchResult<Settings> {
        fn num<T: std::str::FromStr>(name: &str, default: T) -> BenchResult<T> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .map_err(|_| format!("{name}={v:?} is not a number").into()),
                Err(_) => Ok(default),
            }
        }
        Ok(Settings {
            secs: num("TEPHRA_BENCH_SECS", 6u64)?.max(1),
            workers: num("TEPHRA_BENCH_WORKERS", 2usize)?.max(1),
            connections: num("TEPHRA_BENCH_CONNECTIONS", 32u32)?.max(1),
            slices: num("TEPHRA_BENCH_SLICES", 3u64)?.max(1),
            strict: std::env::var("TEPHRA_BENCH_STRICT").is_ok_and(|v| v == "1"),
            handler_only: std::env::var("TEPHRA_BENCH_HANDLER_ONLY").is_ok_and(|v| v == "1"),
            handler_calls: num("TEPHRA_BENCH_HANDLER_CALLS", 5_000usize)?.max(100),
        })
    }
}

fn run() -> BenchResult<bool> {
    let settings = Settings::from_env()?;
    let scenarios = scenarios();
    if let Some(dir) = std::env::var_os("TEPHRA_BENCH_WRITE_BODIES") {
        // For other load generators and profilers: the exact review bodies, then stop.
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir)?;
        for s in &scenarios {
            let file = dir.join(s.file_name("json"));
            std::fs::write(&file, &s.body)?;
            println!("{} -> {}", s.path, file.display());
        }
        return Ok(true);
    }
    if settings.handler_only {
        // For profilers: only the network-free loop.
        handler_alone(&scenarios, settings.handler_calls)?;
        return Ok(true);
    }
    let wrk_version = check_wrk()?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mem_start = Memory::read();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.workers)
        .enable_all()
        .build()?;
    let shutdown = CancellationToken::new();
    let baseline = runtime.block_on(start_do_nothing(shutdown.clone()))?;
    let tephra = runtime.block_on(start_tephra(shutdown.clone()))?;
    let mem_started = Memory::read();

    let scratch = scratch_dir()?;
    // Every body gets the intended answer from both servers before anything is timed (this
    // is also the warm-up of the TLS and JSON paths).
    for s in &scenarios {
        runtime.block_on(s.check(&tephra, &baseline))?;
    }

    println!(
        "admission bench: wrk {wrk_version}, -t1 -c{}, {} slices of {} s per server and path, \
         taking turns; the servers in this process on one tokio runtime with {} worker threads; \
         {} CPUs",
        settings.connections,
        settings.slices,
        settings.slice_secs(),
        settings.workers,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    let mut rows = Vec::new();
    for s in &scenarios {
        let body_file = scratch.join(s.file_name("json"));
        std::fs::write(&body_file, &s.body)?;
        let script = scratch.join(s.file_name("lua"));
        std::fs::write(&script, lua_script(&body_file))?;

        // The three servers take turns in short slices, so a change in the machine's
        // background load hits all three alike instead of one whole run.
        let (mut base, mut stack, mut load) = (Runs::default(), Runs::default(), Runs::default());
        let hist_before = histogram(&tephra.metrics, s.path);
        tephra.timings.reset();
        for _ in 0..settings.slices {
            base.push(wrk(&settings, &script, &baseline.url(DO_NOTHING_PATH))?);
            // tephra's server layers around the do-nothing handler: how much of the gap is
            // the stack (metrics, timeout, limits) rather than the webhook.
            stack.push(wrk(&settings, &script, &tephra.url(STACK_ONLY_PATH))?);
            load.push(wrk(&settings, &script, &tephra.url(s.path))?);
        }
        let hist = histogram(&tephra.metrics, s.path).since(&hist_before);
        let route = tephra.timings.take();
        let (base, stack) = (base.total(), stack.total());
        let load = load.total();
        println!("  {} ({} B body):", s.path, s.body.len());
        for (label, r) in [
            ("do-nothing server", &base),
            ("tephra stack, do-nothing handler", &stack),
            ("tephra webhook", &load),
        ] {
            println!(
                "    {label:<33} {:>8.0} reviews/s  (slices: {})  client p99 {}",
                r.rps,
                r.slice_rates,
                fmt_dur(r.p99)
            );
        }
        println!("    {} reviews in the histogram", hist.count());
        rows.push(Row {
            path: s.path,
            body_len: s.body.len(),
            rps: load.rps,
            base_rps: base.rps,
            stack_rps: stack.rps,
            hist_p99: hist.quantile(0.99),
            hist_count: hist.count(),
            route_p99: percentile(&route, 0.99),
            route_p50: percentile(&route, 0.50),
            client_p99: load.p99,
            client_p50: load.p50,
        });
    }
    let mem_loaded = Memory::read();

    println!();
    let all_pass = print_table(&rows);
    println!();
    println!(
        "resident memory (this process: both servers, the bench's client and timings; wrk is \
         a separate process):"
    );
    for (label, m) in [
        ("at start", mem_start),
        ("servers up", mem_started),
        ("after load", mem_loaded),
    ] {
        println!("  {label:<11} {m}");
    }

    shutdown.cancel();
    drop(runtime);

    println!();
    handler_alone(&scenarios, settings.handler_calls)?;
    let _ = std::fs::remove_dir_all(&scratch);

    println!();
    println!(
        "targets: {}",
        if all_pass {
            "PASS on every path"
        } else {
            "FAIL (not every path meets them; see the table)"
        }
    );
    Ok(all_pass || !settings.strict)
}

/// The paths loaded, each with its review body.
fn scenarios() -> [Scenario; 3] {
    [
        Scenario {
            path: "/jobs/validate",
            body: review("uid-bench-validate", job_object(true)),
            expect: Expect::Allowed,
        },
        Scenario {
            path: "/jobs/mutate",
            body: review("uid-bench-mutate", job_object(false)),
            expect: Expect::Patched,
        },
        Scenario {
            path: "/pods/mutate",
            body: review("uid-bench-pod", pod_object()),
            expect: Expect::Patched,
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// The two servers.

struct Server {
    addr: SocketAddr,
    client: reqwest::Client,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    fn client_for(ca_pem: &str, addr: SocketAddr) -> BenchResult<reqwest::Client> {
        Ok(reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(ca_pem.as_bytes())?])
            .resolve("localhost", addr)
            .timeout(Duration::from_secs(10))
            .no_proxy()
            .build()?)
    }

    async fn post(&self, path: &str, body: &[u8]) -> BenchResult<Value> {
        let url = format!("https://localhost:{}{path}", self.addr.port());
        let resp = self
            .client
            .post(url)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .send()
            .await?;
        let status = resp.status();
        let bytes = resp.bytes().await?;
        if status != StatusCode::OK {
            return Err(
                format!("{path}: HTTP {status}: {}", String::from_utf8_lossy(&bytes)).into(),
            );
        }
        Ok(serde_json::from_slice(&bytes)?)
    }
}

/// The reference: same TLS and HTTP stack, parses the review, answers `allowed: true`.
async fn start_do_nothing(shutdown: CancellationToken) -> BenchResult<Server> {
    let bundle = certs::self_signed(&["localhost".into(), "127.0.0.1".into()])?;
    let tls = RustlsConfig::from_config(Arc::new(rustls_config(&bundle)?));
    let app = Router::new().route(DO_NOTHING_PATH, post(do_nothing));
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, tls)?
        .handle(handle.clone())
        .http1_only();
    tokio::spawn(server.serve(app.into_make_service()));
    tokio::spawn(async move {
        shutdown.cancelled().await;
        handle.shutdown();
    });
    Ok(Server {
        addr,
        client: Server::client_for(&bundle.ca_cert_pem, addr)?,
    })
}

/// The TLS settings tephra's server uses (ring, TLS 1.3 and 1.2, ALPN http/1.1).
fn rustls_config(bundle: &certs::CertBundle) -> BenchResult<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(bundle.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(bundle.key_pem.as_bytes())?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
    .with_no_client_auth()
    .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

async fn do_nothing(body: Bytes) -> Response {
    match serde_json::from_slice::<Value>(&body) {
        Ok(review) => {
            let uid = review
                .pointer("/request/uid")
                .cloned()
                .unwrap_or(Value::Null);
            let answer = json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": true},
            });
            (
                [(header::CONTENT_TYPE, "application/json")],
                serde_json::to_vec(&answer).unwrap_or_default(),
            )
                .into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

struct Tephra {
    server: Server,
    metrics: Metrics,
    timings: Timings,
}

impl std::ops::Deref for Tephra {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}

/// tephra's real stack, as `tephra serve` composes it, plus a timing layer around the
/// admission routes.
async fn start_tephra(shutdown: CancellationToken) -> BenchResult<Tephra> {
    let metrics = Metrics::new()?;
    let ctx = Arc::new(context(metrics.registry())?);
    let timings = Timings::default();
    let recorder = timings.clone();
    let webhooks =
        admission::router(ctx).layer(middleware::from_fn(move |req: Request, next: Next| {
            let recorder = recorder.clone();
            async move {
                let started = Instant::now();
                let resp = next.run(req).await;
                recorder.record(started.elapsed());
                resp
            }
        }));
    let routes = webhooks.route(STACK_ONLY_PATH, post(do_nothing));
    let config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: None,
        tls: TlsSource::SelfSigned,
        ..ServerConfig::default()
    };
    let state = ServerState::new(metrics.clone());
    let bound = server::bind(config, routes, state.clone())?;
    let addr = bound.https_addr();
    tokio::spawn(bound.run(shutdown));
    tokio::time::timeout(Duration::from_secs(10), state.wait_ready())
        .await
        .map_err(|_| "tephra's server did not become ready within 10 s")?;
    let ca = state
        .self_signed_ca_pem()
        .ok_or("tephra's server recorded no self-signed CA")?;
    Ok(Tephra {
        server: Server {
            addr,
            client: Server::client_for(&ca, addr)?,
        },
        metrics,
        timings,
    })
}

fn context(registry: &prometheus::Registry) -> BenchResult<AdmissionContext> {
    Ok(AdmissionContext {
        config: AdmissionConfig::default(),
        view: Arc::new(StaticView::with_queues([Queue::test("default").open()])),
        metrics: AdmissionMetrics::new(registry)?,
    })
}

/// Exact route times of the current run (nanoseconds).
#[derive(Clone, Default)]
struct Timings(Arc<Mutex<Vec<u64>>>);

impl Timings {
    fn record(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(nanos);
    }
    fn reset(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
    fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

fn percentile(samples: &[u64], q: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(Duration::from_nanos(sorted[rank - 1]))
}

// ---------------------------------------------------------------------------------------------
// The scenarios and their review bodies.

enum Expect {
    Allowed,
    Patched,
}

struct Scenario {
    path: &'static str,
    body: Vec<u8>,
    expect: Expect,
}

impl Scenario {
    async fn check(&self, tephra: &Tephra, baseline: &Server) -> BenchResult<()> {
        let uid = &self.review()["request"]["uid"];
        let answer = tephra.post(self.path, &self.body).await?;
        let response = &answer["response"];
        let ok = response["uid"] == *uid
            && response["allowed"] == true
            && match self.expect {
                Expect::Allowed => response.get("patch").is_none(),
                Expect::Patched => response["patch"].is_string(),
            };
        if !ok {
            return Err(format!(
                "{}: unexpected answer to the bench body: {answer}",
                self.path
            )
            .into());
        }
        let answer = baseline.post(DO_NOTHING_PATH, &self.body).await?;
        if answer["response"]["uid"] != *uid || answer["response"]["allowed"] != true {
            return Err(format!("do-nothing server: unexpected answer: {answer}").into());
        }
        Ok(())
    }

    /// `jobs-validate.json` for `/jobs/validate`.
    fn file_name(&self, ext: &str) -> String {
        format!("{}.{ext}", self.path.trim_matches('/').replace('/', "-"))
    }

    fn review(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

fn review(uid: &str, object: Value) -> Vec<u8> {
    let api_version = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let resource = match object["kind"].as_str() {
        Some("Pod") => "pods",
        _ => "jobs",
    };
    let gvk = json!({"group": group, "version": version, "kind": object["kind"]});
    let gvr = json!({"group": group, "version": version, "resource": resource});
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:ml:trainer",
                "uid": "2b6c9d1e-3f4a-4b5c-8d6e-7f8091a2b3c4",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:ml", "system:authenticated"],
            },
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-client-side-apply"},
        }
    });
    serde_json::to_vec(&review).unwrap_or_default()
}

/// A 4-task PyTorch-style vcJob: each task a pod template with one container, resources and
/// env. `defaulted`: as `/jobs/mutate` leaves it (what `/jobs/validate` sees); otherwise as a
/// user writes it (no queue, schedulerName, maxRetry or minAvailable).
fn job_object(defaulted: bool) -> Value {
    let task = |name: &str, replicas: i64, gpu: bool| {
        let mut resources = json!({
            "requests": {"cpu": "4", "memory": "16Gi"},
            "limits": {"cpu": "8", "memory": "32Gi"},
        });
        if gpu {
            resources["requests"]["nvidia.com/gpu"] = json!("1");
            resources["limits"]["nvidia.com/gpu"] = json!("1");
        }
        let mut t = json!({
            "name": name,
            "replicas": replicas,
            "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
            "template": {
                "metadata": {"labels": {"app": "resnet", "role": name}},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{
                        "name": "pytorch",
                        "image": "registry.example.com/ml/resnet-train:2.3.1-cuda12",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["python", "-m", "torch.distributed.run"],
                        "args": ["--nnodes=4", "train.py", "--epochs=90", "--batch-size=256"],
                        "workingDir": "/workspace",
                        "ports": [{"containerPort": 23456, "name": "pytorchjob-port", "protocol": "TCP"}],
                        "env": [
                            {"name": "NCCL_DEBUG", "value": "INFO"},
                            {"name": "OMP_NUM_THREADS", "value": "4"},
                            {"name": "DATASET", "value": "s3://datasets/imagenet"},
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        ],
                        "resources": resources,
                    }],
                },
            },
        });
        if defaulted {
            t["minAvailable"] = json!(replicas);
            t["maxRetry"] = json!(3);
        }
        t
    };
    let mut spec = json!({
        "plugins": {"pytorch": ["--master=master", "--worker=worker", "--port=23456"], "svc": [], "env": []},
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "ttlSecondsAfterFinished": 3600,
        "tasks": [
            task("master", 1, true),
            task("worker", 4, true),
            task("evaluator", 1, true),
            task("tensorboard", 1, false),
        ],
    });
    if defaulted {
        spec["queue"] = json!("default");
        spec["schedulerName"] = json!("volcano");
        spec["maxRetry"] = json!(3);
        spec["minAvailable"] = json!(7);
    }
    json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": "resnet-imagenet",
            "namespace": "ml",
            "uid": "6a3c1f9e-1234-4000-8000-00000000beef",
            "generation": 1,
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"team": "vision", "experiment": "resnet50-bs256"},
            "annotations": {"owner": "vision-team@example.com"},
            "managedFields": [{
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "time": "2025-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:team": {}, "f:experiment": {}}},
                             "f:spec": {".": {}, "f:plugins": {}, "f:policies": {}, "f:tasks": {}}},
            }],
        },
        "spec": spec,
    })
}

/// A ReplicaSet's pod for the served scheduler, as it reaches admission (service-account
/// volume already added).
fn pod_object() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-7d9f8c6b5-x2x7q",
            "generateName": "web-7d9f8c6b5-",
            "namespace": "ml",
            "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
            "annotations": {"scheduling.volcano.sh/queue-name": "default"},
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-7d9f8c6b5",
                "uid": "5f1d2c3b-aaaa-4bbb-8ccc-000000000042",
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "enableServiceLinks": true,
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
            "securityContext": {},
            "containers": [{
                "name": "nginx",
                "image": "nginx:1.27",
                "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "env": [
                    {"name": "MODE", "value": "production"},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
                "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{
                    "name": "kube-api-access-abcde",
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "readOnly": true,
                }],
            }],
            "volumes": [{
                "name": "kube-api-access-abcde",
                "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ]},
            }],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
        },
        "status": {},
    })
}

// ---------------------------------------------------------------------------------------------
// wrk.

fn check_wrk() -> BenchResult<String> {
    // `wrk --version` prints its banner and the usage, and exits 1.
    match Command::new("wrk").arg("--version").output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            Ok(text
                .split_whitespace()
                .nth(1)
                .unwrap_or("(unknown version)")
                .to_string())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(
            "wrk is not on PATH. This benchmark measures with wrk and has no fallback; install it (Debian/Ubuntu: apt-get install -y wrk) \
             and run again."
                .into(),
        ),
        Err(e) => Err(format!("cannot run wrk: {e}").into()),
    }
}

fn scratch_dir() -> BenchResult<PathBuf> {
    let dir = std::env::temp_dir().join(format!("tephra-admission-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn lua_script(body_file: &Path) -> String {
    format!(
        "wrk.method = \"POST\"\n\
         wrk.headers[\"Content-Type\"] = \"application/json\"\n\
         local f = assert(io.open({:?}, \"rb\"))\n\
         wrk.body = f:read(\"*a\")\n\
         f:close()\n",
        body_file.display().to_string()
    )
}

struct WrkResult {
    requests: u64,
    secs: f64,
    p50: Option<Duration>,
    p99: Option<Duration>,
}

/// The slices of one server's run.
#[derive(Default)]
struct Runs(Vec<WrkResult>);

/// One server's run, summed over its slices.
struct Total {
    /// All requests over all the slices' time.
    rps: f64,
    /// Each slice's rate, to show the spread.
    slice_rates: String,
    /// Medians of the slices' percentiles.
    p50: Option<Duration>,
    p99: Option<Duration>,
}

impl Runs {
    fn push(&mut self, r: WrkResult) {
        self.0.push(r);
    }

    fn total(&self) -> Total {
        let requests: u64 = self.0.iter().map(|r| r.requests).sum();
        let secs: f64 = self.0.iter().map(|r| r.secs).sum();
        let median = |f: fn(&WrkResult) -> Option<Duration>| {
            let mut v: Vec<Duration> = self.0.iter().filter_map(f).collect();
            v.sort_unstable();
            v.get(v.len() / 2).copied()
        };
        Total {
            rps: if secs > 0.0 {
                requests as f64 / secs
            } else {
                0.0
            },
            slice_rates: self
                .0
                .iter()
                .map(|r| format!("{:.0}", r.requests as f64 / r.secs.max(1e-9)))
                .collect::<Vec<_>>()
                .join(" "),
            p50: median(|r| r.p50),
            p99: median(|r| r.p99),
        }
    }
}

fn wrk(settings: &Settings, script: &Path, url: &str) -> BenchResult<WrkResult> {
    let out = Command::new("wrk")
        .arg("-t1")
        .arg(format!("-c{}", settings.connections))
        .arg(format!("-d{}s", settings.slice_secs()))
        .arg("--latency")
        .arg("-s")
        .arg(script)
        .arg(url)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "wrk {url} failed ({}): {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let field = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::trim)
    };
    if let Some(n) = field("Non-2xx or 3xx responses:") {
        return Err(format!("wrk {url}: {n} answers were not 2xx:\n{text}").into());
    }
    if let Some(errors) = field("Socket errors:") {
        return Err(format!("wrk {url}: socket errors ({errors}):\n{text}").into());
    }
    // "  81234 requests in 5.00s, 20.10MB read"
    let (requests, secs) = text
        .lines()
        .find_map(|l| {
            let (n, rest) = l.trim().split_once(" requests in ")?;
            let secs = parse_wrk_duration(rest.split(',').next()?.trim())?;
            Some((n.parse::<u64>().ok()?, secs.as_secs_f64()))
        })
        .ok_or_else(|| format!("no request count in wrk's output:\n{text}"))?;
    let p50 = field("50%").and_then(parse_wrk_duration);
    let p99 = field("99%").and_then(parse_wrk_duration);
    Ok(WrkResult {
        requests,
        secs,
        p50,
        p99,
    })
}

/// wrk's `912.00us`, `1.23ms`, `2.00s`, `1.00m`.
fn parse_wrk_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let secs = match unit {
        "us" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

// ---------------------------------------------------------------------------------------------
// The latency histogram.

/// One path's `tephra_admission_duration_seconds` buckets: (upper bound, cumulative count).
struct Histogram(Vec<(f64, u64)>);

fn histogram(metrics: &Metrics, path: &str) -> Histogram {
    let buckets = metrics
        .registry()
        .gather()
        .iter()
        .filter(|f| f.name() == DURATION_SERIES)
        .flat_map(|f| f.get_metric())
        .find(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == "path" && l.value() == path)
        })
        .map(|m| {
            let h = m.get_histogram();
            let mut b: Vec<(f64, u64)> = h
                .get_bucket()
                .iter()
                .map(|b| (b.upper_bound(), b.cumulative_count()))
                .collect();
            b.push((f64::INFINITY, h.get_sample_count()));
            b
        })
        .unwrap_or_default();
    Histogram(buckets)
}

impl Histogram {
    /// The observations made since `before`.
    fn since(&self, before: &Histogram) -> Histogram {
        Histogram(
            self.0
                .iter()
                .enumerate()
                .map(|(i, (bound, n))| (*bound, n - before.0.get(i).map_or(0, |b| b.1)))
                .collect(),
        )
    }

    fn count(&self) -> u64 {
        self.0.last().map_or(0, |b| b.1)
    }

    /// The `q` quantile, interpolated linearly inside its bucket (as Prometheus's
    /// `histogram_quantile` does); `None` without observations, infinite past the last bound.
    fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q * total as f64;
        let (mut lower, mut below) = (0.0, 0u64);
        for &(upper, cumulative) in &self.0 {
            if cumulative as f64 >= rank {
                if upper.is_infinite() {
                    return Some(Duration::MAX);
                }
                let in_bucket = (cumulative - below) as f64;
                let frac = if in_bucket > 0.0 {
                    (rank - below as f64) / in_bucket
                } else {
                    1.0
                };
                return Some(Duration::from_secs_f64(lower + (upper - lower) * frac));
            }
            lower = upper;
            below = cumulative;
        }
        Some(Duration::MAX)
    }
}

// ---------------------------------------------------------------------------------------------
// Output.

struct Row {
    path: &'static str,
    body_len: usize,
    rps: f64,
    base_rps: f64,
    stack_rps: f64,
    hist_p99: Option<Duration>,
    hist_count: u64,
    route_p99: Option<Duration>,
    route_p50: Option<Duration>,
    client_p99: Option<Duration>,
    client_p50: Option<Duration>,
}

impl Row {
    fn ratio(&self) -> f64 {
        ratio(self.rps, self.base_rps)
    }

    fn pass(&self) -> bool {
        self.ratio() >= TARGET_RATIO
            && self.hist_count > 0
            && self.hist_p99.is_some_and(|p| p < TARGET_P99)
    }
}

fn ratio(rps: f64, base: f64) -> f64 {
    if base > 0.0 { rps / base } else { 0.0 }
}

fn print_table(rows: &[Row]) -> bool {
    println!(
        "| path | body | reviews/s | do-nothing/s | ratio | stack-only ratio | server p99 (histogram, interpolated) | route p50 / p99 (exact) | client p50 / p99 (wrk) | target |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut all = true;
    for r in rows {
        let pass = r.pass();
        all &= pass;
        println!(
            "| {} | {} B | {:.0} | {:.0} | {:.2}x | {:.2}x | {} | {} / {} | {} / {} | {} |",
            r.path,
            r.body_len,
            r.rps,
            r.base_rps,
            r.ratio(),
            ratio(r.stack_rps, r.base_rps),
            fmt_dur(r.hist_p99),
            fmt_dur(r.route_p50),
            fmt_dur(r.route_p99),
            fmt_dur(r.client_p50),
            fmt_dur(r.client_p99),
            if pass { "PASS" } else { "FAIL" },
        );
    }
    println!(
        "targets: ratio >= {TARGET_RATIO} and server p99 < {} on every path. stack-only = the do-nothing handler mounted on tephra's \
         server (its layers without a webhook). server p99 = time inside the handler, \
         interpolated within the histogram bucket; route = body read + handler + answer, timed \
         per request around the admission routes.",
        fmt_dur(Some(TARGET_P99))
    );
    all
}

fn fmt_dur(d: Option<Duration>) -> String {
    match d {
        None => "-".into(),
        Some(d) if d == Duration::MAX => "> 10 s".into(),
        Some(d) if d < Duration::from_millis(1) => format!("{:.0} µs", d.as_secs_f64() * 1e6),
        Some(d) if d < Duration::from_secs(1) => format!("{:.2} ms", d.as_secs_f64() * 1e3),
        Some(d) => format!("{:.2} s", d.as_secs_f64()),
    }
}

/// `VmRSS` and `VmHWM` of this process.
#[derive(Clone, Copy)]
struct Memory {
    rss_kib: u64,
    hwm_kib: u64,
}

impl Memory {
    fn read() -> Memory {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        Memory {
            rss_kib: kib("VmRSS:"),
            hwm_kib: kib("VmHWM:"),
        }
    }
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "VmRSS {:.1} MiB, VmHWM (peak) {:.1} MiB",
            self.rss_kib as f64 / 1024.0,
            self.hwm_kib as f64 / 1024.0
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The handler alone.

/// Times `admission::http::handle` (parse, decide, patch, serialise, metrics) and the
/// do-nothing handler's work on one thread without the network: where the per-review CPU goes.
fn handler_alone(scenarios: &[Scenario], calls: usize) -> BenchResult<()> {
    let registry = prometheus::Registry::new();
    let ctx = context(&registry)?;
    println!(
        "handler alone, {calls} calls on one thread, no network (CPU per review; the do-nothing \
         column is serde_json parse + answer):"
    );
    println!(
        "| path | handler p50 | handler p99 | handler calls/s | do-nothing p50 | do-nothing calls/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for s in scenarios {
        let hook = WEBHOOKS
            .iter()
            .find(|w| w.path == s.path)
            .ok_or_else(|| format!("no webhook serves {}", s.path))?;
        let run = |f: &dyn Fn()| {
            for _ in 0..calls / 10 {
                f();
            }
            let mut samples = Vec::with_capacity(calls);
            let all = Instant::now();
            for _ in 0..calls {
                let t = Instant::now();
                f();
                samples.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
            }
            (samples, all.elapsed())
        };
        let (tephra, tephra_all) = run(&|| {
            std::hint::black_box(admission::http::handle(&ctx, hook, &s.body));
        });
        let (base, base_all) = run(&|| {
            let v: Value = serde_json::from_slice(&s.body).unwrap_or(Value::Null);
            let answer = json!({
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": v.pointer("/request/uid"), "allowed": true},
            });
            std::hint::black_box(serde_json::to_vec(&answer).unwrap_or_default());
        });
        println!(
            "| {} | {} | {} | {:.0} | {} | {:.0} |",
            s.path,
            fmt_dur(percentile(&tephra, 0.5)),
            fmt_dur(percentile(&tephra, 0.99)),
            calls as f64 / tephra_all.as_secs_f64(),
            fmt_dur(percentile(&base, 0.5)),
            calls as f64 / base_all.as_secs_f64(),
        );
    }
    Ok(())
}
