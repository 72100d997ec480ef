//! The read-only web view as a browser reaches it on `tephra serve --embedded`'s metrics
//! listener: queues with their weights and shares, a gang that cannot be placed with the
//! scheduler's own reason, a gang's pods on their nodes, a what-if answer for a pasted vcJob
//! that creates nothing, a 404 page, and `--no-ui` turning it all off.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tephra::api::{Job, PodGroup, Queue};

use crate::common::served::{Embedded, eventually};

/// A vcJob whose pods carry an environment variable the pages must never show.
fn vcjob(name: &str, queue: &str, replicas: i32, cpu: &str, run_seconds: u64) -> Value {
    let mut job = crate::simulate::vcjob(name, queue, replicas, cpu, run_seconds);
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "API_TOKEN", "value": "do-not-show-me"}]);
    job
}

/// As the templates escape text: `&`, `<`, `>` and quotes as numeric references.
fn escaped(s: &str) -> String {
    s.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// Sends `pairs` as a browser sends a form (`application/x-www-form-urlencoded`); the
/// status and the page.
async fn post_form(url: &str, pairs: &[(&str, &str)]) -> (u16, String) {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                    (b as char).to_string()
                }
                b' ' => "+".into(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let body = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&");
    let r = reqwest::Client::new()
        .post(url)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = r.status().as_u16();
    (status, r.text().await.unwrap_or_default())
}

async fn get(url: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let r = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap_or_default())
}

async fn pod_group_of(c: &Client, job: &str) -> PodGroup {
    let api: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    eventually(30, &format!("the PodGroup of {job}"), || async {
        let list = api.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|pg| {
            pg.owner_references()
                .iter()
                .any(|o| o.kind == "Job" && o.name == job)
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_shows_queues_gangs_pods_and_what_if_without_writing() {
    let (served, c) = Embedded::start(&[]).await;
    let ui = format!("http://{}/ui", served.metrics);
    let queues: Api<Queue> = Api::all(c.clone());
    let queue: Queue = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "research"}, "spec": {"weight": 3, "reclaimable": true}
    }))
    .unwrap();
    queues.create(&PostParams::default(), &queue).await.unwrap();
    // The webhooks admit a vcJob into a queue their cache holds; the queue controller, which
    // reads the same caches, marks it Open once they do.
    eventually(30, "queue research Open", || {
        let queues = queues.clone();
        async move {
            let q = queues.get("research").await.ok()?;
            (q.state() == Some(&tephra::api::scheduling::QueueState::Open)).then_some(())
        }
    })
    .await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let submit = |j: Value| {
        let jobs = jobs.clone();
        async move {
            let j: Job = serde_json::from_value(j).unwrap();
            jobs.create(&PostParams::default(), &j).await.unwrap();
        }
    };
    // Three nodes of 8 cpu: busy takes 7 on each, so blocked (two pods of 6), submitted once
    // busy runs, cannot be placed. (Submitted together, either may go first: blocked would
    // then run, end and lose its PodGroup while busy waits.)
    submit(vcjob("busy", "research", 3, "7", 300)).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let busy_pods = eventually(60, "busy's three pods to run", || async {
        let list = pods
            .list(&ListParams::default().labels("volcano.sh/job-name=busy"))
            .await
            .ok()?;
        let running: Vec<(String, String)> = list
            .items
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .filter_map(|p| Some((p.name_any(), p.spec.as_ref()?.node_name.clone()?)))
            .collect();
        (running.len() == 3).then_some(running)
    })
    .await;
    submit(vcjob("blocked", "research", 2, "6", 30)).await;
    let busy = pod_group_of(&c, "busy").await;
    let blocked = pod_group_of(&c, "blocked").await;
    let reason = eventually(60, "blocked's Unschedulable condition", || async {
        let pg = Api::<PodGroup>::namespaced(c.clone(), "default")
            .get(&blocked.name_any())
            .await
            .ok()?;
        let cond = pg
            .status?
            .conditions?
            .into_iter()
            .rev()
            .find(|c| c.status.as_deref() == Some("True") && c.message.is_some())?;
        Some(cond.message.unwrap_or_default())
    })
    .await;

    // The front page: the queue's weight and share, both gangs, blocked's reason in the
    // scheduler's words.
    let page = eventually(30, "the front page to show blocked's reason", || async {
        let (status, headers, body) = get(&ui).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            headers[reqwest::header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html"),
        );
        let csp = headers[reqwest::header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.contains("default-src 'none'"), "{csp}");
        body.contains(&escaped(&reason)).then_some(body)
    })
    .await;
    assert!(
        page.contains("<td>research</td><td>Open</td><td class=\"num\">3</td>"),
        "{page}"
    );
    assert!(
        page.contains("21 cpu"),
        "research's allocation (3 × 7 cpu): {page}"
    );
    assert!(
        !page.contains("do-not-show-me"),
        "no pod environment on the page"
    );
    let busy_link = format!("/ui/gangs/default/{}", busy.name_any());
    assert!(page.contains(&format!("href=\"{busy_link}\"")), "{page}");
    assert!(page.contains(&format!("default/{}", blocked.name_any())));

    // A gang's page: its pods on their nodes.
    let (status, _, gang) = get(&format!("http://{}{busy_link}", served.metrics)).await;
    assert_eq!(status, 200, "{gang}");
    for (pod, node) in &busy_pods {
        assert!(
            gang.contains(&format!(
                "<td>{pod}</td><td>worker</td><td>Running</td><td>{node}</td>"
            )),
            "{pod} on {node}: {gang}"
        );
    }
    assert!(!gang.contains("do-not-show-me"));

    // What if: a pasted vcJob of one 8-cpu pod waits for busy's pods to end; it is not
    // created.
    let pasted = serde_saphyr::to_string(&vcjob("wide", "research", 1, "8", 60)).unwrap();
    let (status, answer) = post_form(
        &format!("{ui}/whatif"),
        &[("jobs", &pasted), ("namespace", "default")],
    )
    .await;
    assert_eq!(status, 200);
    assert!(answer.contains("id=\"prediction\""), "{answer}");
    let row = answer
        .split("<tr>")
        .find(|r| r.contains("default/wide"))
        .unwrap_or_else(|| panic!("no row for wide: {answer}"));
    assert!(row.contains("<td>yes</td>"), "a tried job: {row}");
    assert!(
        row.contains("<td class=\"num\">4m ") || row.contains("<td class=\"num\">5m "),
        "wide starts when busy's 300 s pods end: {row}"
    );
    assert!(
        jobs.get_opt("wide").await.unwrap().is_none(),
        "what-if created the job"
    );

    // Bad pasted text: the page says why, the form keeps the text.
    let (status, bad) = post_form(&format!("{ui}/whatif"), &[("jobs", "kind: <Pod>")]).await;
    assert_eq!(status, 200);
    assert!(bad.contains("id=\"error\""), "{bad}");
    assert!(bad.contains("kind: &#60;Pod&#62;</textarea>"), "{bad}");

    let (status, _, missing) = get(&format!("{ui}/gangs/default/nope")).await;
    assert_eq!(status, 404);
    assert!(missing.contains("No PodGroup default/nope"), "{missing}");
    drop(served);

    // Off: the metrics listener answers /ui as any unknown path.
    let (off, _) = Embedded::start(&["--no-ui"]).await;
    let (status, _, body) = get(&format!("http://{}/ui", off.metrics)).await;
    assert_eq!(status, 404, "{body}");
    let (status, _, _) = get(&format!("http://{}/metrics", off.metrics)).await;
    assert_eq!(status, 200);
}
