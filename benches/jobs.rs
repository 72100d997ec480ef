//! Job controller throughput (issue 11, "Performance"): `TEPHRA_BENCH_JOBS` vcJobs (default
//! 1000) of `TEPHRA_BENCH_PODS` pods (default 4, in one task) submitted at once to the real
//! `tephra serve --embedded` (every webhook on, the scheduler, the kube-scheduler and kubelet
//! stand-ins). Measured: the time until every pod exists and every job is Running, jobs/s,
//! and the Job controller's API writes per job (from its `tephra_job_writes_total` series).
//! Run with `cargo bench --bench jobs`; bounded by `TEPHRA_BENCH_TIMEOUT` seconds (default 300).

#[path = "../tests/common/served.rs"]
#[allow(dead_code)]
mod served;

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tephra::api::Job;
use tephra::api::batch::JobPhase;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn job(i: u64, pods: u64) -> Job {
    let spec = json!({
        "minAvailable": pods,
        "tasks": [{
            "name": "w",
            "replicas": pods,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}
            }]}}
        }]
    });
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": format!("bench-{i}"), "namespace": "default"},
        "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("job: {e}"))
}

/// The sum of a counter family's samples in a Prometheus text page.
fn counter_sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn main() {
    let jobs = env("TEPHRA_BENCH_JOBS", 1000);
    let pods = env("TEPHRA_BENCH_PODS", 4);
    let timeout = Duration::from_secs(env("TEPHRA_BENCH_TIMEOUT", 300));
    let nodes = ((jobs * pods) / 100 + 2).to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    rt.block_on(async move {
        let metrics_port = served::free_port();
        let metrics = format!("127.0.0.1:{metrics_port}");
        let (_served, client) = served::Embedded::start(&[
            "--embedded-nodes",
            &nodes,
            "--metrics-listen",
            &metrics,
        ])
        .await;
        let api: Api<Job> = Api::namespaced(client.clone(), "default");
        let start = Instant::now();
        let created: Vec<bool> = futures::stream::iter(0..jobs)
            .map(|i| {
                let api = api.clone();
                async move { api.create(&PostParams::default(), &job(i, pods)).await.is_ok() }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        let submitted = start.elapsed();
        let ok = created.iter().filter(|c| **c).count();
        assert_eq!(ok as u64, jobs, "every job was admitted");
        let pod_api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(client.clone(), "default");
        // When every pod existed (the Job controller's part) and when every job was Running
        // (with the scheduler, the kube-scheduler stand-in's binds and the kubelet's starts).
        let mut all_created = None;
        let (running, pod_count) = loop {
            let list = api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
            let running = list
                .iter()
                .filter(|j| j.phase() == Some(&JobPhase::Running))
                .count() as u64;
            let pod_count = pod_api
                .list_metadata(&ListParams::default())
                .await
                .map(|l| l.items.len() as u64)
                .unwrap_or(0);
            if all_created.is_none() && pod_count >= jobs * pods {
                all_created = Some(start.elapsed());
            }
            if (running == jobs && pod_count >= jobs * pods) || start.elapsed() > timeout {
                break (running, pod_count);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let elapsed = start.elapsed();
        let page = reqwest::get(format!("http://{metrics}/metrics"))
            .await
            .and_then(|r| r.error_for_status());
        let page = match page {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let writes = counter_sum(&page, "tephra_job_writes_total");
        let status = page
            .lines()
            .find(|l| l.starts_with("tephra_job_writes_total{op=\"status\"}"))
            .and_then(|l| l.rsplit(' ').next().map(str::to_string))
            .unwrap_or_default();
        println!("jobs controller bench: {jobs} jobs x {pods} pods, serve --embedded (webhooks, scheduler, stand-ins), {nodes} nodes");
        println!("  submitted in        {:>8.2} s", submitted.as_secs_f64());
        if let Some(c) = all_created {
            println!("  all pods created in {:>8.2} s  ({:.1} jobs/s)", c.as_secs_f64(), jobs as f64 / c.as_secs_f64());
        }
        println!("  all Running in      {:>8.2} s  ({running}/{jobs} jobs Running, {pod_count} pods)", elapsed.as_secs_f64());
        println!("  jobs/s              {:>8.1}", running as f64 / elapsed.as_secs_f64());
        println!("  pods/s              {:>8.1}", pod_count as f64 / elapsed.as_secs_f64());
        println!("  controller writes   {:>8.2} per job (status writes {status} in all)", writes / jobs as f64);
        if running < jobs {
            eprintln!("timed out after {timeout:?}");
            std::process::exit(1);
        }
    });
}
