//! Scheduler extender performance. Two parts, both printed as a table:
//!
//! 1. **filter**: `/scheduler/filter` in the `NodeNames` form with 5,000 names, for a gang pod
//!    the plan has placed (the common case: keep one node), on tephra's real HTTPS stack
//!    (`server::bind(config, extender::router(ext), state)` as `serve` composes it, over an
//!    embedded API with 5,000 nodes), side by side with a do-nothing TLS server on the same
//!    body (axum + axum-server + rustls ring, one route that parses the body as
//!    `serde_json::Value` and answers a fixed result: the admission bench's do-nothing). `wrk
//!    -t1 -c32` loads them in turn in short slices (see benches/admission.rs for why). It
//!    reports requests/s, the ratio (target ≥ 0.8) and the exact server-side p50/p99 of the
//!    filter route (a timing layer around it: body read, decision, answer; target p99 < 1 ms),
//!    and the same timing of the do-nothing route, which tells the machine's share of the p99.
//! 2. **bind-all**: `tephra serve --embedded --embedded-nodes 5000` in this process (the real
//!    `app::run`), with its kube-scheduler stand-in calling the extender over HTTPS; 1,000
//!    PodGroups of 10 pods (1 cpu each) are created, and the time until all 10,000 pods are
//!    bound is measured (target < 60 s). Bound pods are counted from a watch (a LIST of 10,000
//!    pods every half second would load the server being measured); after the table, the
//!    service's own series (sessions, extender requests, gang binds by outcome) say where the
//!    time went.
//!
//! Environment: `TEPHRA_BENCH_SECS` (load per server, default 6), `TEPHRA_BENCH_SLICES`
//! (default 3), `TEPHRA_BENCH_PART=filter|bind` (one part only), `TEPHRA_BENCH_GANGS` (default
//! 1000), `TEPHRA_BENCH_NODES` (default 5000), `TEPHRA_BENCH_CREATORS` (gangs created at a time
//! in part 2, default 8). Needs `wrk` on `PATH` for part 1.

use std::error::Error;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tephra::api::PodGroup;
use tephra::certs;
use tephra::cluster::Caches;
use tephra::extender::{self, Extender, ExtenderOptions};
use tephra::metrics::Metrics;
use tephra::scheduler::{Scheduler, SchedulerConf, SchedulerOptions};
use tephra::server::{self, ServerConfig, ServerState, TlsSource};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions};
use tokio_util::sync::CancellationToken;

/// The allocator the `tephra` binary runs on, so these figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BenchResult<T> = Result<T, Box<dyn Error>>;

const TARGET_RATIO: f64 = 0.8;
const TARGET_P99: Duration = Duration::from_millis(1);
const TARGET_BIND_ALL: Duration = Duration::from_secs(60);

fn env_num<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let part = std::env::var("TEPHRA_BENCH_PART").unwrap_or_default();
    let mut ok = true;
    if part.is_empty() || part == "filter" {
        match filter_part() {
            Ok(pass) => ok &= pass,
            Err(e) => {
                eprintln!("extender bench (filter): {e}");
                return ExitCode::from(2);
            }
        }
    }
    if part.is_empty() || part == "bind" {
        match bind_part() {
            Ok(pass) => ok &= pass,
            Err(e) => {
                eprintln!("extender bench (bind): {e}");
                return ExitCode::from(2);
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

// ----- part 1: filter -----

#[derive(Clone, Default)]
struct Timings(Arc<Mutex<Vec<u64>>>);

fn percentile(samples: &mut [u64], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
    Duration::from_nanos(samples[i])
}

fn filter_part() -> BenchResult<bool> {
    let nodes: usize = env_num("TEPHRA_BENCH_NODES", 5000);
    let secs: u64 = env_num("TEPHRA_BENCH_SECS", 6u64).max(1);
    let slices: u64 = env_num("TEPHRA_BENCH_SLICES", 3u64).max(1);
    let slice = (secs / slices).max(1);
    Command::new("wrk")
        .arg("--version")
        .output()
        .map_err(|_| "wrk not found on PATH (apt-get install -y wrk)")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let shutdown = CancellationToken::new();
    let (tephra_addr, baseline_addr, body, timings, base_timings) =
        runtime.block_on(start_filter_servers(nodes, shutdown.clone()))?;
    let dir = std::env::temp_dir().join(format!("tephra-extender-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let body_file = dir.join("filter.json");
    std::fs::write(&body_file, &body)?;
    let script = dir.join("filter.lua");
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nlocal f = assert(io.open({:?}, \"rb\"))\nwrk.body = f:read(\"*a\")\nf:close()\n",
            body_file.display().to_string()
        ),
    )?;
    println!(
        "extender bench, filter: NodeNames form, {nodes} names ({} KB body), wrk -t1 -c32, {slices} slices of {slice} s per server, taking turns; 2 tokio workers; {} CPUs",
        body.len() / 1024,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let (mut base_req, mut base_secs, mut t_req, mut t_secs) = (0u64, 0f64, 0u64, 0f64);
    timings.0.lock().map_err(|_| "poisoned")?.clear();
    base_timings.0.lock().map_err(|_| "poisoned")?.clear();
    for _ in 0..slices {
        let (r, s) = wrk(
            &script,
            slice,
            &format!("https://127.0.0.1:{}/filter", baseline_addr.port()),
            32,
        )?;
        base_req += r;
        base_secs += s;
        let (r, s) = wrk(
            &script,
            slice,
            &format!("https://127.0.0.1:{}/scheduler/filter", tephra_addr.port()),
            32,
        )?;
        t_req += r;
        t_secs += s;
    }
    let base_rate = base_req as f64 / base_secs;
    let rate = t_req as f64 / t_secs;
    let ratio = rate / base_rate;
    let mut samples = std::mem::take(&mut *timings.0.lock().map_err(|_| "poisoned")?);
    let p50 = percentile(&mut samples, 0.50);
    let p99 = percentile(&mut samples, 0.99);
    let mut base_samples = std::mem::take(&mut *base_timings.0.lock().map_err(|_| "poisoned")?);
    let base_p50 = percentile(&mut base_samples, 0.50);
    let base_p99 = percentile(&mut base_samples, 0.99);
    println!(
        "| load | filter/s | do-nothing/s | ratio | server p50 | server p99 | do-nothing p50 | do-nothing p99 | samples |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    println!(
        "| 32 connections | {rate:.0} | {base_rate:.0} | {ratio:.2} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {} |",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        base_p50.as_secs_f64() * 1e6,
        base_p99.as_secs_f64() * 1e6,
        samples.len(),
    );
    // Latency as kube-scheduler sees it: its scheduling cycle is serial, so one filter request
    // is in flight at a time (one connection). Under 32 connections on two cores the route's
    // time is mostly waiting for a CPU behind the other 31 (the do-nothing route's p99 shows
    // the same), which is throughput, measured above, not the extender's latency.
    let (mut one_req, mut one_secs, mut one_base_req, mut one_base_secs) = (0u64, 0f64, 0u64, 0f64);
    for _ in 0..slices {
        let (r, s) = wrk(
            &script,
            slice,
            &format!("https://127.0.0.1:{}/filter", baseline_addr.port()),
            1,
        )?;
        one_base_req += r;
        one_base_secs += s;
        let (r, s) = wrk(
            &script,
            slice,
            &format!("https://127.0.0.1:{}/scheduler/filter", tephra_addr.port()),
            1,
        )?;
        one_req += r;
        one_secs += s;
    }
    let mut one = std::mem::take(&mut *timings.0.lock().map_err(|_| "poisoned")?);
    let one_p50 = percentile(&mut one, 0.50);
    let one_p99 = percentile(&mut one, 0.99);
    let mut one_base = std::mem::take(&mut *base_timings.0.lock().map_err(|_| "poisoned")?);
    let one_base_p50 = percentile(&mut one_base, 0.50);
    let one_base_p99 = percentile(&mut one_base, 0.99);
    println!(
        "| 1 connection (kube-scheduler's serial cycle) | {:.0} | {:.0} | {:.2} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {} |",
        one_req as f64 / one_secs,
        one_base_req as f64 / one_base_secs,
        (one_req as f64 / one_secs) / (one_base_req as f64 / one_base_secs),
        one_p50.as_secs_f64() * 1e6,
        one_p99.as_secs_f64() * 1e6,
        one_base_p50.as_secs_f64() * 1e6,
        one_base_p99.as_secs_f64() * 1e6,
        one.len(),
    );
    let pass = ratio >= TARGET_RATIO && one_p99 < TARGET_P99;
    println!(
        "targets: throughput ratio at 32 connections >= {TARGET_RATIO} ({ratio:.2}), server p99 at 1 connection < {} µs ({:.0} µs): {}",
        TARGET_P99.as_micros(),
        one_p99.as_secs_f64() * 1e6,
        if pass { "PASS" } else { "FAIL" }
    );
    shutdown.cancel();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(pass)
}

fn wrk(script: &Path, secs: u64, url: &str, connections: u32) -> BenchResult<(u64, f64)> {
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{connections}"),
            &format!("-d{secs}s"),
            "-s",
        ])
        .arg(script)
        .arg(url)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        return Err(format!("wrk {url}: errors:\n{text}").into());
    }
    text.lines()
        .find_map(|l| {
            let (n, rest) = l.trim().split_once(" requests in ")?;
            let d = rest.split(',').next()?.trim();
            let secs = if let Some(s) = d.strip_suffix("ms") {
                s.parse::<f64>().ok()? / 1000.0
            } else if let Some(s) = d.strip_suffix('m') {
                s.parse::<f64>().ok()? * 60.0
            } else {
                d.strip_suffix('s')?.parse::<f64>().ok()?
            };
            Some((n.parse().ok()?, secs))
        })
        .ok_or_else(|| format!("no request count in wrk's output:\n{text}").into())
}

/// What [`timing_layer`]'s middleware returns.
type Timed = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;

/// A middleware that records how long the route took (body read, decision, answer).
fn timing_layer(t: Timings) -> impl Fn(Request, Next) -> Timed + Clone + Send + Sync + 'static {
    move |req: Request, next: Next| {
        let t = t.clone();
        Box::pin(async move {
            let start = Instant::now();
            let resp = next.run(req).await;
            if let Ok(mut v) = t.0.lock() {
                v.push(start.elapsed().as_nanos() as u64);
            }
            resp
        }) as Timed
    }
}

async fn start_filter_servers(
    nodes: usize,
    shutdown: CancellationToken,
) -> BenchResult<(SocketAddr, SocketAddr, Vec<u8>, Timings, Timings)> {
    let api = ApiServer::start(
        EmbeddedOptions {
            nodes,
            sim_kubelet: false,
            ..Default::default()
        },
        shutdown.clone(),
    );
    let client = Client::new(embedded::router(api.clone()), "default");
    tephra::cluster::bootstrap::install_crds(&client).await?;
    tephra::cluster::ensure_default_queues(&client).await?;
    let metrics = Metrics::new()?;
    let (caches, mut feeds) = Caches::new();
    let scheduler = Scheduler::new(
        SchedulerOptions::default(),
        SchedulerConf::builtin(),
        metrics.registry(),
    )?;
    scheduler.subscribe(&mut feeds);
    feeds.run(&client, &shutdown);
    caches.wait_synced(Duration::from_secs(60)).await?;
    scheduler.clone().spawn(client.clone(), shutdown.clone());
    // One gang of 10, planned.
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {"minMember": 10, "queue": "default"}
    }))?;
    Api::<PodGroup>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pg)
        .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut first = None;
    for i in 0..10 {
        let p: Pod = serde_json::from_value(bench_pod("bench", i))?;
        let p = pods.create(&PostParams::default(), &p).await?;
        first.get_or_insert(p);
    }
    let pod = first.ok_or("no pod")?;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while scheduler.index().assumed_node(&uid).is_none() {
        if Instant::now() > deadline {
            return Err("the gang was not planned within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Placements outlive the bench (the session keeps re-assuming them only when they expire).
    let names: Vec<String> = (1..=nodes).map(|i| format!("node-{i}")).collect();
    let body = serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names}))?;

    let ext = Arc::new(Extender::new(
        client.clone(),
        scheduler.clone(),
        ExtenderOptions::default(),
        metrics.registry(),
    )?);
    let timings = Timings::default();
    let routes = extender::router(ext).layer(middleware::from_fn(timing_layer(timings.clone())));
    let state = ServerState::new(metrics.clone());
    let bound = server::bind(
        ServerConfig {
            listen: "127.0.0.1:0".parse()?,
            tls: TlsSource::SelfSigned,
            metrics_listen: None,
            ..ServerConfig::default()
        },
        routes,
        state,
    )?;
    let tephra_addr = bound.https_addr();
    tokio::spawn(bound.run(shutdown.clone()));

    let bundle = certs::self_signed(&["localhost".into(), "127.0.0.1".into()])?;
    let tls = RustlsConfig::from_config(Arc::new(rustls_config(&bundle)?));
    // Timed the same way, so the two p99s say how much of it is the machine and the stack.
    let base_timings = Timings::default();
    let app = Router::new()
        .route("/filter", post(do_nothing))
        .layer(middleware::from_fn(timing_layer(base_timings.clone())));
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let baseline_addr = listener.local_addr()?;
    let handle = axum_server::Handle::new();
    let srv = axum_server::from_tcp_rustls(listener, tls)?
        .handle(handle.clone())
        .http1_only();
    tokio::spawn(srv.serve(app.into_make_service()));
    tokio::spawn(async move {
        shutdown.cancelled().await;
        handle.shutdown();
    });
    // Check the answer once: the planned node only.
    let planned = scheduler.index().assumed_node(&uid).map(str::to_string);
    let http = reqwest_client()?;
    let r: Value = http
        .post(format!(
            "https://127.0.0.1:{}/scheduler/filter",
            tephra_addr.port()
        ))
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.clone())
        .send()
        .await?
        .json()
        .await?;
    if r["NodeNames"] != json!([planned]) {
        return Err(format!("unexpected filter answer: {r}").into());
    }
    Ok((tephra_addr, baseline_addr, body, timings, base_timings))
}

fn reqwest_client() -> BenchResult<reqwest::Client> {
    // The answer check only: certificate verification is not what is measured here.
    #[derive(Debug)]
    struct Any;
    impl rustls::client::danger::ServerCertVerifier for Any {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(Any))
    .with_no_client_auth();
    Ok(reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .build()?)
}

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
    let ok = serde_json::from_slice::<Value>(&body).is_ok();
    let answer = if ok {
        r#"{"Nodes":null,"NodeNames":["node-1"],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}"#
    } else {
        r#"{"Error":"bad body"}"#
    };
    ([(header::CONTENT_TYPE, "application/json")], answer).into_response()
}

fn bench_pod(gang: &str, i: usize) -> Value {
    json!({
        "metadata": {"name": format!("{gang}-{i}"), "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": gang}},
        "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    })
}

// ----- part 2: bind-all -----

/// The series printed after the bind-all run: where the time went.
const SUMMARY_SERIES: &[&str] = &[
    "tephra_extender_requests_total",
    "tephra_extender_request_duration_seconds_sum",
    "tephra_extender_request_duration_seconds_count",
    "tephra_extender_replans_total",
    "tephra_scheduler_sessions_total",
    "volcano_e2e_scheduling_latency_milliseconds_sum",
    "volcano_e2e_scheduling_latency_milliseconds_count",
    "tephra_placements_expired_total",
];

fn bind_part() -> BenchResult<bool> {
    let nodes: usize = env_num("TEPHRA_BENCH_NODES", 5000);
    let gangs: usize = env_num("TEPHRA_BENCH_GANGS", 1000);
    let creators: usize = env_num("TEPHRA_BENCH_CREATORS", 8usize).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let api_port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let cli = tephra::cli::Cli::try_parse_from([
            "tephra",
            "--log",
            "warn",
            "serve",
            "--embedded",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            &format!("127.0.0.1:{metrics_port}"),
            "--embedded-api-listen",
            &format!("127.0.0.1:{api_port}"),
            "--embedded-nodes",
            &nodes.to_string(),
        ])?;
        let _ = tephra::app::init_logging(cli.log_format, cli.log.as_deref());
        tokio::spawn(tephra::app::run(cli));
        let client = Client::try_from(kube::Config::new(
            format!("http://127.0.0.1:{api_port}").parse()?,
        ))?;
        let queues: Api<tephra::api::Queue> = Api::all(client.clone());
        let deadline = Instant::now() + Duration::from_secs(120);
        while !matches!(queues.get_opt("default").await, Ok(Some(_))) {
            if Instant::now() > deadline {
                return Err("serve --embedded not ready".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        println!(
            "extender bench, bind-all: serve --embedded --embedded-nodes {nodes}, {gangs} PodGroups of 10 pods (1 cpu, 1Gi), {creators} creating at a time, kube-scheduler stand-in over HTTPS"
        );
        let pgs: Api<PodGroup> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        // Bound pods are counted from a watch started before the first create: listing 10,000
        // pods every half second would cost the server more than some of what is measured.
        let bound_count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let all_bound = Arc::new(tokio::sync::Notify::new());
        let total = gangs * 10;
        let watching = {
            let pods = pods.clone();
            let bound_count = bound_count.clone();
            let all_bound = all_bound.clone();
            let (synced_tx, synced_rx) = tokio::sync::oneshot::channel::<()>();
            tokio::spawn(async move {
                use futures::StreamExt as _;
                use kube::runtime::WatchStreamExt as _;
                let mut synced_tx = Some(synced_tx);
                let mut bound = std::collections::HashSet::new();
                let mut stream = kube::runtime::watcher(pods, kube::runtime::watcher::Config::default())
                    .default_backoff()
                    .boxed();
                while let Some(ev) = stream.next().await {
                    let Ok(ev) = ev else { continue };
                    match ev {
                        kube::runtime::watcher::Event::Apply(p)
                        | kube::runtime::watcher::Event::InitApply(p) => {
                            if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
                                && let Some(uid) = p.metadata.uid
                            {
                                bound.insert(uid);
                            }
                        }
                        kube::runtime::watcher::Event::InitDone => {
                            if let Some(tx) = synced_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        _ => {}
                    }
                    bound_count.store(bound.len(), std::sync::atomic::Ordering::Relaxed);
                    if bound.len() >= total {
                        all_bound.notify_one();
                        break;
                    }
                }
            });
            synced_rx
        };
        tokio::time::timeout(Duration::from_secs(30), watching)
            .await
            .map_err(|_| "the pod watch did not start")??;
        let start = Instant::now();
        let created_count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let progress = {
            let bound_count = bound_count.clone();
            let created_count = created_count.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    println!(
                        "  {:>5.1} s: {} created, {} bound",
                        start.elapsed().as_secs_f64(),
                        created_count.load(std::sync::atomic::Ordering::Relaxed),
                        bound_count.load(std::sync::atomic::Ordering::Relaxed)
                    );
                }
            })
        };
        let creates = (0..gangs).map(|g| {
            let pgs = pgs.clone();
            let pods = pods.clone();
            let created_count = created_count.clone();
            async move {
                let name = format!("gang-{g}");
                let pg: PodGroup = serde_json::from_value(json!({
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"minMember": 10, "queue": "default"}
                }))?;
                pgs.create(&PostParams::default(), &pg).await?;
                for i in 0..10 {
                    let p: Pod = serde_json::from_value(bench_pod(&name, i))?;
                    pods.create(&PostParams::default(), &p).await?;
                    created_count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok::<(), Box<dyn Error>>(())
            }
        });
        let results: Vec<_> = futures::StreamExt::collect(futures::StreamExt::buffer_unordered(
            futures::stream::iter(creates),
            creators,
        ))
        .await;
        for r in results {
            r?;
        }
        let created = start.elapsed();
        let deadline = Duration::from_secs(300).saturating_sub(start.elapsed());
        let _ = tokio::time::timeout(deadline, async {
            while bound_count.load(std::sync::atomic::Ordering::Relaxed) < total {
                // Notified on the last bind; the short sleep bounds a missed wake-up.
                tokio::select! {
                    () = all_bound.notified() => {}
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        })
        .await;
        let all = start.elapsed();
        progress.abort();
        let bound = bound_count.load(std::sync::atomic::Ordering::Relaxed);
        let pass = bound >= total && all < TARGET_BIND_ALL;
        println!("| pods | created in | all bound in (from the first create) | bound | result |");
        println!("| --- | --- | --- | --- | --- |");
        println!(
            "| {total} | {:.1} s | {:.1} s | {bound} | {} |",
            created.as_secs_f64(),
            all.as_secs_f64(),
            if pass { "PASS" } else { "FAIL" }
        );
        print_summary(metrics_port).await;
        Ok(pass)
    })
}

/// Prints the series of [`SUMMARY_SERIES`] from the service's metrics listener.
async fn print_summary(port: u16) {
    let text = match reqwest::Client::builder().no_proxy().build() {
        Ok(c) => match c
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
        {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(e) => format!("# metrics not read: {e}"),
        },
        Err(e) => format!("# metrics not read: {e}"),
    };
    println!("where the time went (the service's own series):");
    // Gang binds are a series per gang: summed by outcome here.
    let mut gang_binds: std::collections::BTreeMap<String, f64> = Default::default();
    for line in text.lines() {
        if SUMMARY_SERIES.iter().any(|s| line.starts_with(s)) {
            println!("  {line}");
        } else if line.starts_with("tephra_extender_gang_binds_total{")
            && let Some((labels, value)) = line.rsplit_once(' ')
            && let Some(outcome) = labels.split("outcome=\"").nth(1)
            && let Some(outcome) = outcome.split('"').next()
        {
            *gang_binds.entry(outcome.to_string()).or_default() += value.parse().unwrap_or(0.0);
        }
    }
    for (outcome, n) in gang_binds {
        println!("  tephra_extender_gang_binds_total (all gangs){{outcome=\"{outcome}\"}} {n}");
    }
}
