//! The binary's command line as a user meets it: one clear line and a non-zero exit for bad
//! flags and a missing cluster.

use std::process::Command;

fn tephra() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tephra"));
    // A clean environment: no cluster anywhere, no inherited kubeconfig.
    c.env_clear()
        .env("HOME", "/nonexistent-home")
        .env("PATH", "/usr/bin:/bin");
    c
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn unknown_flag_is_one_line_and_exit_2() {
    let out = tephra().args(["serve", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
}

#[test]
fn bad_address_is_one_line_and_exit_2() {
    let out = tephra()
        .args(["serve", "--listen", "not-an-address"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("not-an-address"), "{err}");
}

#[test]
fn missing_cluster_is_one_clear_line() {
    let out = tephra().args(["serve"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    let lines: Vec<_> = err
        .lines()
        .filter(|l| l.starts_with("tephra: error"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("no cluster") && lines[0].contains("--embedded"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn missing_kubeconfig_file_is_named() {
    let out = tephra()
        .args(["serve", "--kubeconfig", "/nonexistent/kc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(err.contains("/nonexistent/kc"), "{err}");
}

#[test]
fn help_lists_every_subcommand() {
    let out = tephra().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in ["serve", "crds", "apiserver", "certs"] {
        assert!(text.contains(sub), "{sub} missing from --help:\n{text}");
    }
}

#[test]
fn crds_prints_volcanos_six_crds() {
    let out = tephra().arg("crds").output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.matches("kind: CustomResourceDefinition").count(),
        6,
        "{text}"
    );
    for name in [
        "jobs.batch.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
        "commands.bus.volcano.sh",
        "cronjobs.batch.volcano.sh",
        "hypernodes.topology.volcano.sh",
    ] {
        assert!(text.contains(&format!("name: {name}")), "{name} missing");
    }
}

#[test]
fn certs_writes_three_files_and_prints_the_ca_bundle() {
    let dir = std::env::temp_dir().join(format!("tephra-cli-certs-{}", std::process::id()));
    let out = tephra()
        .args([
            "certs",
            "--service",
            "tephra",
            "--namespace",
            "tephra-system",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    for f in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(dir.join(f).is_file(), "{f} not written");
    }
    let printed = String::from_utf8(out.stdout).unwrap();
    let ca = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(printed.trim())
        .unwrap();
    assert_eq!(String::from_utf8(decoded).unwrap(), ca);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreadable_certificate_is_one_line_naming_the_file() {
    let out = tephra()
        .args(["serve", "--embedded", "--listen", "127.0.0.1:0"])
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--embedded-api-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--tls-cert",
            "/nonexistent/tls.crt",
            "--tls-key",
            "/nonexistent/tls.key",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    let lines: Vec<_> = err
        .lines()
        .filter(|l| l.starts_with("tephra: error"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("/nonexistent/tls.crt"), "{err}");
}

#[test]
fn faults_without_embedded_are_refused() {
    let out = tephra()
        .args(["serve", "--faults", "write-error=0.5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("--embedded"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn tls_mode_self_refuses_what_does_not_go_with_it_before_contacting_a_cluster() {
    for (args, want) in [
        (
            &["serve", "--tls-mode=self", "--embedded"][..],
            "--tls-mode self does not go with --embedded",
        ),
        (
            &["serve", "--tls-mode=self", "--tls-cert=c", "--tls-key=k"][..],
            "apply to --tls-mode files",
        ),
        (
            &[
                "serve",
                "--tls-mode=self",
                "--tls-self-ca-overlap=1m",
                "--tls-self-propagation=5m",
            ][..],
            "--tls-self-ca-overlap (60s) must be longer than --tls-self-propagation (300s)",
        ),
        (
            &["serve", "--tls-mode=self", "--tls-self-service=Bad_Name"][..],
            "invalid service \"Bad_Name\"",
        ),
    ] {
        let out = tephra().args(args).output().unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_bad_fault_spec_is_one_clear_line() {
    let out = tephra()
        .args([
            "apiserver",
            "--listen",
            "127.0.0.1:0",
            "--faults",
            "write-error=2",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("--faults") && err.contains("write-error"),
        "{err}"
    );
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("tephra: error"))
            .count(),
        1,
        "{err}"
    );
}

/// `--faults watch-cut=1e20` used to panic (`Duration::from_secs_f64` overflow).
#[test]
fn a_fault_spec_with_too_many_seconds_is_one_line_not_a_panic() {
    let out = tephra()
        .args([
            "apiserver",
            "--listen",
            "127.0.0.1:0",
            "--faults",
            "watch-cut=1e20",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("watch-cut") && err.contains("1e20"), "{err}");
    assert_eq!(error_lines(&err).len(), 1, "{err}");
}

/// The embedded API has no authentication: a non-loopback address needs the explicit flag.
#[test]
fn the_embedded_api_refuses_a_remote_address_without_allow_remote() {
    for args in [
        &["apiserver", "--listen", "0.0.0.0:0"][..],
        &["serve", "--embedded", "--embedded-api-listen", "0.0.0.0:0"][..],
    ] {
        let out = tephra().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr_of(&out);
        assert!(
            err.contains("--embedded-api-allow-remote") && err.contains("0.0.0.0:0"),
            "{err}"
        );
        assert_eq!(error_lines(&err).len(), 1, "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Each cause once, usage and flag errors
// ---------------------------------------------------------------------------------------------

/// The `tephra: error:` lines of a run's standard error.
fn error_lines(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("tephra: error"))
        .collect()
}

/// No Rust `Debug` dump and no kube error label in a line meant for a person.
fn assert_no_debug(line: &str) {
    for dump in ["Status {", "Some(", "None,", "Flag(", "ApiError", "Os {"] {
        assert!(!line.contains(dump), "{dump:?} in {line:?}");
    }
}

#[test]
fn a_missing_tls_file_names_its_cause_once() {
    let out = tephra()
        .args(["serve", "--embedded", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .args(["--embedded-api-listen", "127.0.0.1:0"])
        .args(["--tls-cert", "/nonexistent/tls.crt"])
        .args(["--tls-key", "/nonexistent/tls.key"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    // Reported before anything starts: no log line precedes it.
    assert_eq!(err.lines().count(), 1, "{err}");
    let line = error_lines(&err)[0];
    assert_eq!(line.matches("No such file").count(), 1, "{line}");
    assert_no_debug(line);
}

#[test]
fn a_missing_kubeconfig_names_its_cause_once() {
    let out = tephra()
        .args(["serve", "--kubeconfig", "/nonexistent/kc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert_eq!(lines[0].matches("No such file").count(), 1, "{err}");
    assert_no_debug(lines[0]);
}

#[test]
fn a_bad_fault_spec_names_its_cause_once_before_anything_starts() {
    for sub in [&["apiserver"][..], &["serve", "--embedded"][..]] {
        let out = tephra()
            .args(sub)
            .args(["--faults", "write-error=2"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(err.matches("write-error").count(), 1, "{err}");
    }
}

#[test]
fn bare_tephra_prints_the_usage_not_an_error() {
    let out = tephra().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert!(err.contains("Usage: tephra"), "{err}");
    assert!(error_lines(&err).is_empty(), "{err}");
    for sub in ["serve", "crds", "apiserver", "certs"] {
        assert!(err.contains(sub), "{sub} missing:\n{err}");
    }
}

#[test]
fn flag_errors_keep_the_missing_arguments_and_the_possible_values() {
    let out = tephra()
        .args(["certs", "--service", "tephra"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--namespace") && err.contains("--out") && err.contains("tephra certs --help"),
        "{err}"
    );

    let out = tephra()
        .args(["crds", "--log-format", "xml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("possible values: text, json"), "{err}");
}

#[test]
fn serve_help_says_what_runs_and_what_does_not_yet() {
    let out = tephra().args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains(tephra::cli::SERVE_RUNS.split(';').next().unwrap()),
        "{help}"
    );
    assert!(help.contains("Not yet:"), "{help}");
    for flag in ["--tls-ca", "--tls-cert", "--embedded"] {
        assert!(help.contains(flag), "{flag} missing:\n{help}");
    }
}

// ---------------------------------------------------------------------------------------------
// Running processes: `serve --embedded` with the user's certificate, a kube API error
// ---------------------------------------------------------------------------------------------

/// A running `tephra` child with `--log-format json`, its standard error read line by line by
/// a thread (so waiting for a line is bounded). Killed on drop.
struct Running {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(args: &[&std::ffi::OsStr]) -> Self {
        let mut child = tephra()
            .args(["--log-format", "json"])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first JSON log line whose message contains `what`, within 30 s.
    fn wait_for(&mut self, what: &str) -> serde_json::Value {
        self.wait_until(what, |v| {
            v["message"].as_str().is_some_and(|m| m.contains(what))
        })
    }

    /// The first JSON log line for which `found` holds, within 30 s.
    fn wait_until(
        &mut self,
        what: &str,
        found: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                        continue;
                    };
                    if found(&v) {
                        return v;
                    }
                }
                Err(_) => break,
            }
        }
        panic!(
            "no log line with {what:?}; log so far:\n{}",
            self.seen.join("\n")
        )
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory under the system temp dir for one test.
fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tephra-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `tephra certs --service tephra --namespace NS --out DIR`.
fn certs_for(namespace: &str, dir: &std::path::Path) {
    let out = tephra()
        .args([
            "certs",
            "--service",
            "tephra",
            "--namespace",
            namespace,
            "--out",
        ])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
}

/// `serve --embedded` on free loopback ports with extra flags.
fn serve_embedded(extra: &[&std::ffi::OsStr]) -> Running {
    let mut args: Vec<&std::ffi::OsStr> = ["serve", "--embedded", "--listen", "127.0.0.1:0"]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
    args.extend(
        [
            "--metrics-listen",
            "127.0.0.1:0",
            "--embedded-api-listen",
            "127.0.0.1:0",
        ]
        .iter()
        .map(std::ffi::OsStr::new),
    );
    args.extend_from_slice(extra);
    Running::start(&args)
}

/// Our own manifest as a vcJob.
fn vcjob(file: &str) -> tephra::api::Job {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/manifests")
        .join(file);
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Waits for readiness, then checks the webhooks answer through the embedded API: the invalid
/// vcJob is denied by tephra's webhook, the valid one stored with its defaults.
async fn ready_and_admitting(served: &mut Running) {
    let serving = served.wait_until("the listeners", |v| v["metrics"].is_string());
    let metrics = serving["metrics"].as_str().unwrap().to_string();
    let ready = served.wait_for("embedded API ready");
    let url = ready["url"].as_str().unwrap().to_string();

    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let status = http
            .get(format!("http://{metrics}/readyz"))
            .send()
            .await
            .map(|r| r.status().as_u16())
            .map_err(|e| e.to_string());
        if status == Ok(200) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never ready ({status:?}); log:\n{}",
            served.seen.join("\n")
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let jobs: kube::Api<tephra::api::Job> = kube::Api::namespaced(client, "default");
    let pp = kube::api::PostParams::default();
    let err = jobs
        .create(&pp, &vcjob("vcjob-invalid.yaml"))
        .await
        .expect_err("the invalid vcJob was stored");
    let kube::Error::Api(status) = err else {
        panic!("not an API error: {err}")
    };
    assert!(
        (400..500).contains(&status.code) && status.message.contains("denied the request"),
        "{status:?}"
    );
    let created = jobs.create(&pp, &vcjob("vcjob.yaml")).await.unwrap();
    assert_eq!(created.spec.max_retry, Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_embedded_uses_a_certificate_made_for_another_namespace() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = temp_dir("other-ns");
    certs_for("volcano-system", &dir);
    let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let mut served = serve_embedded(&[
        "--tls-cert".as_ref(),
        crt.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
    ]);
    // The start-up log says what runs and that the state is in memory.
    let first = served.wait_for("tephra serve --embedded:");
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("kept in memory only"),
        "{first}"
    );
    ready_and_admitting(&mut served).await;
    let registered = served.seen.join("\n");
    assert!(
        registered.contains("tephra.volcano-system.svc"),
        "{registered}"
    );
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_without_its_ca_needs_tls_ca_and_then_serves() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = temp_dir("tls-ca");
    certs_for("volcano-system", &dir);
    // Only the serving certificate, as some issuers write tls.crt.
    let chain = std::fs::read_to_string(dir.join("tls.crt")).unwrap();
    let end = "-----END CERTIFICATE-----\n";
    let leaf = &chain[..chain.find(end).unwrap() + end.len()];
    let crt = dir.join("leaf.crt");
    std::fs::write(&crt, leaf).unwrap();
    let key = dir.join("tls.key");

    let out = tephra()
        .args(["serve", "--embedded", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .args(["--embedded-api-listen", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(&crt)
        .arg("--tls-key")
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--tls-ca") && err.contains("leaf.crt"),
        "{err}"
    );

    let ca = dir.join("ca.crt");
    let mut served = serve_embedded(&[
        "--tls-cert".as_ref(),
        crt.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
        "--tls-ca".as_ref(),
        ca.as_os_str(),
    ]);
    ready_and_admitting(&mut served).await;
    drop(served);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_certificate_with_no_usable_name_is_refused_naming_its_names() {
    let dir = temp_dir("no-name");
    let bundle =
        tephra::certs::self_signed(&["tephra.example.com".into(), "10.1.2.3".into()]).unwrap();
    std::fs::write(dir.join("tls.crt"), &bundle.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &bundle.key_pem).unwrap();
    let out = tephra()
        .args(["serve", "--embedded", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .args(["--embedded-api-listen", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.join("tls.key"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("tephra.example.com, 10.1.2.3") && err.contains("SERVICE.NAMESPACE.svc"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_kube_api_error_is_one_sentence_per_cause() {
    // `serve` against an API without tephra's CRDs: creating the `default` queue gets the
    // API's 404, which kube-rs reports as `ApiError: ... (Status { .. })` in a chain that
    // repeats itself. serve waits for the CRDs, saying why in one sentence per cause.
    let mut api = Running::start(&[
        "apiserver".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
    ]);
    let url = api.wait_for("embedded API ready")["url"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = temp_dir("kube-error");
    let kubeconfig = crate::common::served::kubeconfig(&dir, &url);
    let mut served = Running::start(&[
        "serve".as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--metrics-listen".as_ref(),
        "127.0.0.1:0".as_ref(),
    ]);
    let waiting = served.wait_until("the wait for the CRDs", |v| {
        v["step"].as_str() == Some("ensuring queue default")
    });
    assert_eq!(waiting["level"], "WARN", "{waiting}");
    let message = waiting["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("tephra crds | kubectl apply -f -"),
        "{waiting}"
    );
    let error = waiting["error"].as_str().unwrap_or_default();
    assert_eq!(error.matches("not found").count(), 1, "{error}");
    assert_no_debug(error);
    // The loops' log lines (the watches retrying) read the same way.
    for log in served.seen.iter().filter(|l| l.contains("\"error\"")) {
        assert_no_debug(log);
    }
    drop(served);
    drop(api);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--config` (the scheduler's) and `--controller-config` (HyperNode discovery) are read
/// before anything starts: a missing or bad file stops `serve` with one error line naming it.
#[test]
fn a_missing_or_bad_configuration_file_is_refused_before_anything_starts() {
    let dir = std::env::temp_dir().join(format!("tephra-cli-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.yaml");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrdr: true\n",
    )
    .unwrap();
    let bad_discovery = dir.join("controller.conf");
    std::fs::write(
        &bad_discovery,
        "networkTopologyDiscovery:\n- source: label\n  enabled: true\n  config:\n    networkTopologyTypes:\n      rack: [{nodeLabel: kubernetes.io/hostname}]\n",
    )
    .unwrap();
    for (flag, file, needle) in [
        ("--config", &missing, "cannot read"),
        ("--config", &bad, "enableJobOrdr"),
        ("--controller-config", &missing, "No such file"),
        (
            "--controller-config",
            &bad_discovery,
            "network topology type \"rack\" needs at least two labels",
        ),
    ] {
        let out = tephra()
            .args(["serve", "--embedded", "--listen", "127.0.0.1:0"])
            .args([
                "--metrics-listen",
                "127.0.0.1:0",
                "--embedded-api-listen",
                "127.0.0.1:0",
            ])
            .arg(flag)
            .arg(file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = stderr_of(&out);
        let errors = error_lines(&err);
        assert_eq!(errors.len(), 1, "{err}");
        assert!(errors[0].contains(&file.display().to_string()), "{err}");
        assert!(errors[0].contains(needle), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--strict-config`: a configuration naming Volcano plugins tephra does not run is refused
/// with one line naming them; without the flag the same file starts.
#[test]
fn strict_config_refuses_plugins_tephra_does_not_run_in_one_line() {
    let dir = std::env::temp_dir().join(format!("tephra-cli-strict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("volcano.yaml");
    std::fs::write(
        &conf,
        "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n  - name: tdm\n  - name: usage\n",
    )
    .unwrap();
    let out = tephra()
        .args([
            "serve",
            "--embedded",
            "--strict-config",
            "--listen",
            "127.0.0.1:0",
        ])
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--embedded-api-listen",
            "127.0.0.1:0",
        ])
        .arg("--config")
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    let errors = error_lines(&err);
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("names Volcano plugins tephra does not run: tdm, usage"),
        "{err}"
    );
    assert!(errors[0].contains(&conf.display().to_string()), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn job_commands_without_a_cluster_say_how_to_name_one() {
    for args in [
        &["job", "list"][..],
        &["queue", "get", "q"][..],
        &["pg", "list", "-A"][..],
    ] {
        let out = tephra().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr_of(&out);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.starts_with("tephra: error: no cluster to use: pass --server URL"),
            "{err}"
        );
    }
}

#[test]
fn job_view_refuses_watch_with_an_output_format() {
    let out = tephra()
        .args(["job", "view", "x", "--watch", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("--watch") && err.contains("tephra job view --help"),
        "{err}"
    );
}

/// `job run -f` reads a file strictly (an unknown field is refused, as kubectl apply refuses
/// it): every vcJob of Volcano's own examples reads, but the one with a misspelt field.
#[test]
fn every_volcano_example_vcjob_reads_strictly() {
    let Some(dir) = crate::common::volcano_or_skip(
        "volcano-examples",
        "every_volcano_example_vcjob_reads_strictly",
    ) else {
        return;
    };
    let mut files = Vec::new();
    let mut todo = vec![dir];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap_or_else(|e| panic!("{e}")).path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                files.push(p);
            }
        }
    }
    let mut read = 0;
    let mut refused: Vec<String> = Vec::new();
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{e}"));
        // Only files that are all vcJobs (others are refused by kind, by design).
        let docs: Vec<serde_json::Value> = match serde_saphyr::from_multiple(&text) {
            Ok(d) => d,
            Err(_) => continue,
        };
        let all_jobs = !docs.is_empty()
            && docs
                .iter()
                .filter(|d| !d.is_null())
                .all(|d| d["kind"] == "Job" && d["apiVersion"] == tephra::api::batch::API_VERSION);
        if !all_jobs {
            continue;
        }
        let file = p
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        match tephra::vcctl::objects::jobs_from_file(&text, &file, "default", false) {
            Ok(_) => read += 1,
            // One example misspells `priorityClassName`; kubectl apply refuses it as well
            // (Volcano's CRD spells out the pod template, so its strict decoding knows).
            Err(e) if file == "kubecon-2019-china__task-priority__elastic-job.yaml" => {
                refused.push(e.to_string())
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(read > 5, "only {read} vcJob files among Volcano's examples");
    assert_eq!(
        refused,
        [
            "kubecon-2019-china__task-priority__elastic-job.yaml: document 1: strict decoding error: unknown field \"spec.tasks[0].template.spec.priorityClass\", unknown field \"spec.tasks[1].template.spec.priorityClass\""
        ]
    );
}
