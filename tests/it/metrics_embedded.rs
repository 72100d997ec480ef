//! What `/metrics` shows from the start: every series the shipped alerts, the dashboard and
//! the monitoring page name exists (at 0 when nothing happened yet, so an alert sees 0 and not
//! "no data"), and the queue series agree with the Queue objects.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::Api;
use tephra::api::Queue;

use crate::common::served::{Embedded, PER_OBJECT_FAMILIES, metrics_page};

/// Where the series users are told about are named.
const NAMED_IN: [(&str, &str); 5] = [
    (
        "manifests/monitoring/tephra-rules.yaml",
        include_str!("../../manifests/monitoring/tephra-rules.yaml"),
    ),
    (
        "manifests/monitoring/prometheusrule.yaml",
        include_str!("../../manifests/monitoring/prometheusrule.yaml"),
    ),
    (
        "manifests/monitoring/tephra-dashboard.json",
        include_str!("../../manifests/monitoring/tephra-dashboard.json"),
    ),
    (
        "docs/operate/monitoring.md",
        include_str!("../../docs/operate/monitoring.md"),
    ),
    ("README.md", include_str!("../../README.md")),
];

/// The series names a text mentions (`tephra_…`, `volcano_…`).
fn families(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        let starts = (rest.starts_with(b"tephra_") || rest.starts_with(b"volcano_"))
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'));
        if !starts {
            i += 1;
            continue;
        }
        let len = rest
            .iter()
            .position(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_'))
            .unwrap_or(rest.len());
        // ASCII by the test above.
        out.insert(text[i..i + len].trim_end_matches('_').to_string());
        i += len;
    }
    out
}

/// `true` when the page has a sample named `name`, or, for a histogram named by its family,
/// a sample of its `_count`.
fn has(page: &str, name: &str) -> bool {
    let sample = |n: &str| {
        page.lines().filter(|l| !l.starts_with('#')).any(|l| {
            l.strip_prefix(n)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
    };
    sample(name) || sample(&format!("{name}_count"))
}

/// The value of the sample `series` (its name and labels as the page writes them).
fn value(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_series_users_are_told_of_is_there_from_the_start() {
    let (served, client) = Embedded::start(&[]).await;
    let mut named: Vec<(String, &str)> = Vec::new();
    for (file, text) in NAMED_IN {
        for f in families(text) {
            if !named.iter().any(|(n, _)| *n == f) {
                named.push((f, file));
            }
        }
    }
    assert!(named.len() > 10, "names found: {named:?}");
    // The first session has run once the built-in queues have their status.
    let queues: Api<Queue> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut missing: Vec<String> = Vec::new();
    while Instant::now() < deadline {
        let p = metrics_page(&served.metrics).await;
        missing = named
            .iter()
            .filter(|(f, _)| !PER_OBJECT_FAMILIES.contains(&f.as_str()) && !has(&p, f))
            .map(|(f, file)| format!("{f} (named in {file})"))
            .collect();
        if missing.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(missing.is_empty(), "not on /metrics: {missing:#?}");
    let p = metrics_page(&served.metrics).await;
    assert!(
        !p.lines().any(|l| l.contains("phase=\"\"")),
        "a series with an empty phase:\n{p}"
    );
    // The queue series agree with the Queue objects.
    for q in queues.list(&Default::default()).await.unwrap().items {
        let name = q.metadata.name.clone().unwrap_or_default();
        let cpu = q
            .status
            .as_ref()
            .and_then(|s| s.allocated.as_ref())
            .and_then(|a| a.get("cpu"))
            .and_then(|c| tephra::api::quantity::parse(&c.0))
            .unwrap_or(0.0)
            * 1000.0;
        let series = format!("volcano_queue_allocated_milli_cpu{{queue_name=\"{name}\"}}");
        assert_eq!(value(&p, &series), Some(cpu), "{series}\n{p}");
        let overused = format!("volcano_queue_overused{{queue_name=\"{name}\"}}");
        assert_eq!(
            value(&p, &overused),
            Some(0.0),
            "{overused} on an idle cluster"
        );
    }
}
