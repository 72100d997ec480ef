//! `tephra` processes for the end-to-end stories: `serve --embedded`, or `apiserver` plus
//! `serve --kubeconfig`, on loopback ports, killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};

/// A free loopback port.
pub fn free_port() -> u16 {
    free_ports::<1>()[0]
}

/// `N` distinct free loopback ports. Each listener is held until all are picked: a port
/// released before the next pick may be handed out again, and a server given the same port
/// twice fails to start.
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> = (0..N)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap_or_else(|e| panic!("no free port: {e}"))
        })
        .collect();
    std::array::from_fn(|i| {
        held[i]
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("no free port: {e}"))
    })
}

/// A child `tephra` process, killed on drop.
pub struct Proc {
    child: Option<Child>,
}

impl Proc {
    /// Starts `tephra` with `args` (stdout/stderr to `log`, when given).
    pub fn spawn(args: &[&str], log: Option<&Path>) -> Self {
        Self::spawn_with_env(args, &[], log)
    }

    /// [`Proc::spawn`] with extra environment variables (the downward API's `POD_NAME`, say).
    pub fn spawn_with_env(args: &[&str], env: &[(&str, &str)], log: Option<&Path>) -> Self {
        let (out, err) = match log.map(std::fs::File::create) {
            Some(Ok(f)) => {
                let f2 = f.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
                (Stdio::from(f), Stdio::from(f2))
            }
            _ => (Stdio::null(), Stdio::null()),
        };
        // TEPHRA_TEST_BIN runs another build in place of this checkout's: the one before a
        // change, for a side-by-side bench, or a wrapper running it under a profiler.
        let bin = std::env::var_os("TEPHRA_TEST_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_tephra").into());
        let child = Command::new(bin)
            .args(args)
            .envs(env.iter().copied())
            // TEPHRA_TEST_RUST_LOG (e.g. `tephra=debug`) for more than the default, with
            // TEPHRA_TEST_LOG naming the file.
            .env(
                "RUST_LOG",
                std::env::var("TEPHRA_TEST_RUST_LOG").unwrap_or_else(|_| "tephra=info".into()),
            )
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting tephra: {e}"));
        Self { child: Some(child) }
    }

    /// Sends `signal` (`TERM`, `KILL`) without waiting.
    pub fn signal(&self, signal: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args([&format!("-{signal}"), &c.id().to_string()])
                .status();
        }
    }

    /// Waits (bounded) for the process to exit; `Some(code)` when it exited with one.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Whether the process is still running (an exit is noticed, not waited for).
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGTERM and a bounded wait; `Some(code)` when it exited.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A kube client for a plain-HTTP API on loopback.
pub fn client(api_url: &str) -> Client {
    let url = api_url
        .parse()
        .unwrap_or_else(|e| panic!("bad url {api_url}: {e}"));
    Client::try_from(kube::Config::new(url)).unwrap_or_else(|e| panic!("client: {e}"))
}

/// [`ready`], unless `proc` exits first (false then).
async fn ready_while_running(client: &Client, proc: &mut Proc) -> bool {
    let queues: Api<tephra::api::Queue> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(_)) = queues.get_opt("root").await {
            return true;
        }
        if !proc.running() {
            return false;
        }
        assert!(Instant::now() < deadline, "tephra did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (bounded) until the built-in `root` queue exists: by then the CRDs are installed,
/// the webhooks registered and the controllers started.
pub async fn ready(client: &Client) {
    let queues: Api<tephra::api::Queue> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(_)) = queues.get_opt("root").await {
            return;
        }
        assert!(Instant::now() < deadline, "tephra did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (bounded) until `/readyz` on the metrics listener at `addr` answers 200: the watch
/// caches the webhooks read have synced and hold the built-in queues.
pub async fn readyz(addr: &str) {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = http
            .get(format!("http://{addr}/readyz"))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map(|r| r.status().as_u16());
        if matches!(status, Ok(200)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "tephra's /readyz at {addr} never answered 200 (last: {status:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Prometheus text page on the metrics listener at `addr`.
pub async fn metrics_page(addr: &str) -> String {
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("metrics: {e}"))
        .text()
        .await
        .unwrap_or_else(|e| panic!("metrics: {e}"))
}

/// Metric families labelled by one object or one event: they exist from the first job they
/// count, so "no data" is the true answer before it (a 0 would need a made-up job or reason).
pub const PER_OBJECT_FAMILIES: [&str; 2] = [
    // `{job_id}`: one series per gang that could not be placed in the last session.
    "volcano_unschedule_task_count",
    // `{from, to, reason}`: the reason is the job's event or condition, not a fixed set.
    "tephra_job_transitions_total",
];

/// `tephra serve --embedded` with every stand-in, on free loopback ports.
pub struct Embedded {
    /// The process.
    pub proc: Proc,
    /// The embedded API's URL.
    pub api_url: String,
    /// The metrics listener's address (`host:port`).
    pub metrics: String,
}

impl Embedded {
    /// Starts it with `extra` flags (a `--metrics-listen` among them replaces the default
    /// free port) and waits until it is ready.
    ///
    /// A port found free may be taken again before tephra binds it (by another test's
    /// server, or as the local port of an outgoing connection); tephra then exits at once,
    /// and it is started again on other ports, at most three times.
    pub async fn start(extra: &[&str]) -> (Self, Client) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let given = extra
            .iter()
            .position(|a| *a == "--metrics-listen")
            .and_then(|i| extra.get(i + 1))
            .map(|a| a.to_string());
        let log = std::env::var_os("TEPHRA_TEST_LOG").map(PathBuf::from);
        for attempt in 1..=3 {
            let [api, metrics] = free_ports::<2>().map(|p| format!("127.0.0.1:{p}"));
            let mut args = vec![
                "serve",
                "--embedded",
                "--listen",
                "127.0.0.1:0",
                "--embedded-api-listen",
                &api,
            ];
            let metrics = given.clone().unwrap_or(metrics);
            if given.is_none() {
                args.extend_from_slice(&["--metrics-listen", &metrics]);
            }
            args.extend_from_slice(extra);
            let mut proc = Proc::spawn(&args, log.as_deref());
            let api_url = format!("http://{api}");
            let c = client(&api_url);
            if !ready_while_running(&c, &mut proc).await {
                assert!(
                    attempt < 3,
                    "tephra exited before it was ready, three times"
                );
                continue;
            }
            readyz(&metrics).await;
            return (
                Self {
                    proc,
                    api_url,
                    metrics,
                },
                c,
            );
        }
        unreachable!("the loop returns or panics")
    }
}

/// Polls `f` every 20 ms until it gives `Some`, for at most `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes `dir/kubeconfig` for a plain-HTTP API at `url` (no credentials) and returns its path.
pub fn kubeconfig(dir: &Path, url: &str) -> String {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {url}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\ncurrent-context: t\nusers:\n- name: t\n  user: {{}}\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    path.to_string_lossy().into_owned()
}

/// `tephra apiserver` with `extra` flags on a free loopback port, as the cluster API that
/// `serve --kubeconfig` runs against; waits (bounded by `secs`) until it answers. The process,
/// its URL and a client.
pub async fn apiserver(extra: &[&str], secs: u64) -> (Proc, String, Client) {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut args = vec!["apiserver", "--listen", &listen];
    args.extend_from_slice(extra);
    let proc = Proc::spawn(&args, None);
    let url = format!("http://{listen}");
    let c = client(&url);
    eventually(secs, "tephra apiserver to answer", || async {
        c.apiserver_version().await.ok()
    })
    .await;
    (proc, url, c)
}

/// Installs tephra's CRDs, as `tephra crds | kubectl apply -f -` does on a cluster, and makes
/// the namespace `ns` (one already there is fine): the API refuses objects in a namespace that
/// does not exist.
pub async fn crds_and_namespace(c: &Client, ns: &str) {
    eventually(30, "tephra's CRDs to be installed", || async {
        tephra::cluster::bootstrap::install_crds(c).await.ok()
    })
    .await;
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await;
}

/// Binds every unbound, undeleted pod of the `default` namespace to `node-1`: the tests play
/// kube-scheduler, as outside embedded mode tephra only plans.
pub async fn bind_all(c: &Client) {
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for p in pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let spec = p.spec.clone().unwrap_or_default();
        if spec.node_name.is_some() || p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let binding = serde_json::json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": p.name_any(), "uid": p.uid()},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
        let _ = pods
            .create_subresource::<_, serde_json::Value>(
                "binding",
                &p.name_any(),
                &PostParams::default(),
                &binding,
            )
            .await;
    }
}
