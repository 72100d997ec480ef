//! Leader election end to end: two `tephra serve --kubeconfig` replicas against one
//! `tephra apiserver`, the test playing kube-scheduler (binding every pod) as in
//! `job_controller.rs`. Exactly one leads; SIGKILL of the leader mid-batch hands over within
//! the lease duration with every job finished once; SIGTERM hands over within 2 s.
//!
//! Short durations (lease 3 s, renew 2 s, retry 250 ms) keep it quick; the figures are printed
//! (`cargo test --test it leader_election:: -- --nocapture`).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::served::{self, Proc, eventually, kubeconfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tephra::api::Job;
use tephra::api::batch::JobPhase;

const NS: &str = "tephra-system";
const LEASE_DURATION: Duration = Duration::from_secs(3);

/// One replica, as the Deployment runs it: its Pod name and namespace from the downward API.
fn replica(kubeconfig: &str, pod: &str, log: Option<&Path>) -> Proc {
    Proc::spawn_with_env(
        &[
            "serve",
            "--kubeconfig",
            kubeconfig,
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=250ms",
        ],
        &[("POD_NAME", pod), ("POD_NAMESPACE", NS)],
        log,
    )
}

/// The Lease's holder, if any.
async fn holder(c: &Client) -> Option<String> {
    let lease = Api::<Lease>::namespaced(c.clone(), NS)
        .get_opt("tephra")
        .await
        .ok()
        .flatten()?;
    lease
        .spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// The Pod name in a holder identity (`<pod>_<random>`).
fn pod_of(holder: &str) -> &str {
    holder.rsplit_once('_').map_or(holder, |(p, _)| p)
}

async fn leader_label(c: &Client, pod: &str) -> Option<String> {
    Api::<Pod>::namespaced(c.clone(), NS)
        .get_opt(pod)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.labels().get("tephra.io/leader").cloned())
}

/// The replicas' own Pods (never scheduled: they only carry the leader label).
async fn replica_pod(c: &Client, name: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "tephra"}},
        "spec": {"schedulerName": "none", "containers": [{"name": "tephra", "image": "tephra"}]}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<Pod>::namespaced(c.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("pod {name}: {e}"));
}

/// A gang job: `replicas` pods running `secs` seconds, all needed (`minAvailable`).
fn job(name: &str, replicas: i32, secs: f64) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "minAvailable": replicas, "queue": "default", "schedulerName": "volcano",
            "tasks": [{
                "name": "w", "replicas": replicas, "minAvailable": replicas,
                "template": {
                    "metadata": {"annotations": {
                        "simulation.tephra.io/run-seconds": secs.to_string(),
                        "simulation.tephra.io/exit-code": "0"}},
                    "spec": {"restartPolicy": "Never", "containers": [
                        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]}
                }
            }]
        }
    }))
    .unwrap_or_else(|e| panic!("job {name}: {e}"))
}

/// Every pod ever seen per job (name → uid), to catch a pod made twice.
type Seen = BTreeMap<String, BTreeMap<String, String>>;

async fn record_pods(c: &Client, seen: &mut Seen) {
    let pods = Api::<Pod>::namespaced(c.clone(), "default")
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    for p in pods {
        let Some(job) = p.labels().get("volcano.sh/job-name").cloned() else {
            continue;
        };
        let uid = p.uid().unwrap_or_default();
        let old = seen
            .entry(job.clone())
            .or_default()
            .insert(p.name_any(), uid.clone());
        if let Some(old) = old {
            assert_eq!(old, uid, "pod {} of job {job} was made twice", p.name_any());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_and_the_other_takes_over_after_sigkill_and_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("tephra-leader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let log = std::env::var_os("TEPHRA_TEST_LOG").map(std::path::PathBuf::from);
    let log_of = |n: &str| log.as_ref().map(|d| d.join(format!("{n}.log")));
    let (_api, url, c) = served::apiserver(&[], 30).await;
    served::crds_and_namespace(&c, NS).await;
    replica_pod(&c, "tephra-a").await;
    replica_pod(&c, "tephra-b").await;
    let kc = kubeconfig(&dir, &url);
    let mut a = replica(&kc, "tephra-a", log_of("a").as_deref());
    let mut b = replica(&kc, "tephra-b", log_of("b").as_deref());
    served::ready(&c).await;

    // Exactly one leads, and keeps leading; its Pod alone carries the label.
    let first = eventually(30, "a leader", || holder(&c)).await;
    let first_pod = pod_of(&first).to_string();
    let other_pod = if first_pod == "tephra-a" {
        "tephra-b"
    } else {
        "tephra-a"
    };
    for _ in 0..20 {
        assert_eq!(holder(&c).await.as_deref(), Some(first.as_str()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually(10, "the leader's Pod labelled", || async {
        (leader_label(&c, &first_pod).await.as_deref() == Some("true")).then_some(())
    })
    .await;
    assert_eq!(leader_label(&c, other_pod).await, None);

    // A batch of gang jobs; SIGKILL the leader once their pods are being made.
    let jobs: Vec<String> = (0..6).map(|i| format!("batch-{i}")).collect();
    let api = Api::<Job>::namespaced(c.clone(), "default");
    for name in &jobs {
        eventually(10, "the job to be accepted", || async {
            api.create(&PostParams::default(), &job(name, 3, 2.0))
                .await
                .ok()
        })
        .await;
    }
    let mut seen = Seen::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.is_empty() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the first pods"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        record_pods(&c, &mut seen).await;
    }
    let (leader, follower) = if first_pod == "tephra-a" {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    leader.signal("KILL");
    let killed = Instant::now();
    let second = eventually(30, "the follower to take over", || async {
        holder(&c).await.filter(|h| *h != first)
    })
    .await;
    let after_kill = killed.elapsed();
    println!("hand-over after SIGKILL: {after_kill:?} (lease duration {LEASE_DURATION:?})");
    assert_eq!(pod_of(&second), other_pod);
    assert!(
        after_kill <= LEASE_DURATION + Duration::from_secs(1),
        "took over after {after_kill:?}, lease duration {LEASE_DURATION:?}"
    );
    eventually(10, "the label to move to the new leader", || async {
        let moved = leader_label(&c, other_pod).await.as_deref() == Some("true")
            && leader_label(&c, &first_pod).await.is_none();
        moved.then_some(())
    })
    .await;

    // Every job finishes, each with exactly its three pods, none made twice.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for every job to complete"
        );
        served::bind_all(&c).await;
        record_pods(&c, &mut seen).await;
        let mut done = 0;
        for name in &jobs {
            let phase = api
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|j| j.phase().cloned());
            if phase == Some(JobPhase::Completed) {
                done += 1;
            }
        }
        if done == jobs.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for name in &jobs {
        let pods = seen.get(name).map_or(0, BTreeMap::len);
        assert_eq!(pods, 3, "job {name} ran {pods} pods, want exactly 3");
        let st = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .status
            .unwrap_or_default();
        assert_eq!(st.succeeded, Some(3), "job {name}: {st:?}");
    }

    // The killed replica comes back as a follower; SIGTERM of the leader hands over at once.
    drop(std::mem::replace(
        leader,
        replica(&kc, &first_pod, log_of("restarted").as_deref()),
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        holder(&c).await.as_deref(),
        Some(second.as_str()),
        "a restarted replica follows"
    );
    follower.signal("TERM");
    let termed = Instant::now();
    let third = eventually(10, "the restarted replica to take over", || async {
        holder(&c).await.filter(|h| *h != second)
    })
    .await;
    let after_term = termed.elapsed();
    println!("hand-over after SIGTERM: {after_term:?}");
    assert_eq!(pod_of(&third), first_pod);
    assert!(
        after_term <= Duration::from_secs(2),
        "hand-over after SIGTERM took {after_term:?}"
    );
    let code = tokio::task::block_in_place(|| follower.wait_exit(Duration::from_secs(30)));
    assert_eq!(code, Some(0), "a stopped leader exits 0");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tephra_leader_is_leader` from a replica's metrics listener; `None` when it does not answer.
async fn is_leader_metric(metrics: &str) -> Option<bool> {
    let body = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    body.lines()
        .find_map(|l| l.strip_prefix("tephra_leader_is_leader "))
        .map(|v| v.trim() == "1")
}

/// The leader's renewals fail because the API hangs (the `tephra apiserver` process is
/// stopped with SIGSTOP: connections open, nothing answers). The leader must stop leading —
/// its controllers, session and status writer stop with its leadership — and say so before
/// its Lease could be taken over (the last renewal seen plus the lease duration), then exit
/// non-zero to restart as a follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renewals_fail_stops_leading_before_its_lease_could_be_taken() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("tephra-lease-loss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let (api, url, c) = served::apiserver(&[], 30).await;
    served::crds_and_namespace(&c, NS).await;
    let kc = kubeconfig(&dir, &url);
    let metrics = format!("127.0.0.1:{}", served::free_port());
    let log = dir.join("leader.log");
    let mut leader = Proc::spawn_with_env(
        &[
            "serve",
            "--kubeconfig",
            &kc,
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            &metrics,
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=250ms",
        ],
        &[("POD_NAMESPACE", NS)],
        Some(&log),
    );
    eventually(30, "the replica to lead", || async {
        (is_leader_metric(&metrics).await == Some(true)).then_some(())
    })
    .await;
    // Let a few renewals happen, then note the last one and stop the API.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let renewed = Api::<Lease>::namespaced(c.clone(), NS)
        .get("tephra")
        .await
        .ok()
        .and_then(|l| l.spec?.renew_time)
        .map(|t| std::time::SystemTime::from(t.0))
        .unwrap_or_else(|| panic!("the Lease has no renewTime"));
    api.signal("STOP");
    let stopped_at = Instant::now();
    // Whichever comes first: the gauge at 0, or the listener gone because the process is
    // draining after it stopped leading.
    let deadline = stopped_at + Duration::from_secs(10);
    let not_leader_at = loop {
        match is_leader_metric(&metrics).await {
            Some(true) => {}
            Some(false) | None => break std::time::SystemTime::now(),
        }
        assert!(
            Instant::now() < deadline,
            "still leading 10 s after the API stopped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let after_renewal = not_leader_at.duration_since(renewed).unwrap_or_default();
    println!(
        "stopped leading {after_renewal:?} after its last renewal seen, {:?} after the API hung \
         (lease duration 3 s, renew deadline 2 s)",
        stopped_at.elapsed()
    );
    assert!(
        after_renewal < LEASE_DURATION,
        "stopped leading {after_renewal:?} after the last renewal: a follower could have taken \
         the Lease first (lease duration {LEASE_DURATION:?})"
    );
    let code = tokio::task::block_in_place(|| leader.wait_exit(Duration::from_secs(30)));
    api.signal("CONT");
    assert!(
        matches!(code, Some(c) if c != 0),
        "a replica that lost the Lease exits non-zero to restart as a follower: {code:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("could not renew the Lease in time; stopped leading"),
        "the log says why: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Resident memory (VmRSS, KiB) of a process, from /proc.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The figure for the README: resident memory of the leader and of a follower with a cluster of
/// `TEPHRA_HA_NODES` nodes (5,000) and `TEPHRA_HA_PODS` bound pods (50,000) in the API. Heavy,
/// so ignored by default: `cargo test --release --test it leader_election:: -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: minutes and a few GiB at the full size"]
async fn resident_memory_of_leader_and_follower() {
    use futures::StreamExt;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (nodes, pods) = (env("TEPHRA_HA_NODES", 5000), env("TEPHRA_HA_PODS", 50_000));
    let dir = std::env::temp_dir().join(format!("tephra-leader-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let n = nodes.to_string();
    let (api, url, c) = served::apiserver(&["--embedded-nodes", &n, "--no-sim-kubelet"], 60).await;
    served::crds_and_namespace(&c, NS).await;
    let started = Instant::now();
    let pod_api: Api<Pod> = Api::namespaced(c.clone(), "default");
    futures::stream::iter(0..pods)
        .map(|i| {
            let pod_api = pod_api.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("p-{i}"), "namespace": "default",
                                 "labels": {"app": format!("a-{}", i % 100)}},
                    "spec": {"nodeName": format!("node-{}", 1 + i % nodes),
                             "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
                }))
                .unwrap_or_else(|e| panic!("{e}"));
                pod_api
                    .create(&PostParams::default(), &pod)
                    .await
                    .unwrap_or_else(|e| panic!("pod {i}: {e}"));
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    println!(
        "{pods} pods on {nodes} nodes created in {:?}",
        started.elapsed()
    );
    let kc = kubeconfig(&dir, &url);
    let metrics = served::free_ports::<2>();
    let replicas: Vec<Proc> = ["tephra-a", "tephra-b"]
        .iter()
        .zip(&metrics)
        .map(|(pod, m)| {
            Proc::spawn_with_env(
                &[
                    "serve",
                    "--kubeconfig",
                    &kc,
                    "--listen",
                    "127.0.0.1:0",
                    "--metrics-listen",
                    &format!("127.0.0.1:{m}"),
                ],
                &[("POD_NAME", pod), ("POD_NAMESPACE", NS)],
                None,
            )
        })
        .collect();
    let http = reqwest::Client::new();
    for m in &metrics {
        eventually(300, "both replicas ready", || async {
            let r = http
                .get(format!("http://127.0.0.1:{m}/readyz"))
                .send()
                .await
                .ok()?;
            r.status().is_success().then_some(())
        })
        .await;
    }
    let leader = eventually(60, "a leader", || holder(&c)).await;
    // Let the leader's first sessions and controllers go through every pod.
    tokio::time::sleep(Duration::from_secs(20)).await;
    for (pod, p) in ["tephra-a", "tephra-b"].iter().zip(&replicas) {
        let role = if pod_of(&leader) == *pod {
            "leader"
        } else {
            "follower"
        };
        let kib = p.pid().and_then(rss_kib).unwrap_or(0);
        println!("{role} ({pod}): resident {} MiB", kib / 1024);
    }
    let api_kib = api.pid().and_then(rss_kib).unwrap_or(0);
    println!("tephra apiserver: resident {} MiB", api_kib / 1024);
    let _ = std::fs::remove_dir_all(&dir);
}
