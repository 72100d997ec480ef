//! The admission router as the API server sees it: real AdmissionReview JSON posted to every
//! path with `tower::ServiceExt::oneshot`, our own manifests (`tests/data/manifests/`)
//! admitted and the invalid one denied, Volcano's example manifests admitted (and its three
//! invalid jobs denied) where the Volcano fixtures are present, bad input answered 400, and a
//! seeded fuzzer that feeds random and mutated reviews to every path.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use prometheus::Registry;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use tephra::admission::{
    self, AdmissionConfig, AdmissionContext, AdmissionMetrics, StaticView, WEBHOOKS,
};
use tephra::api::Queue;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/admission")
        .join(name)
}

fn read_json(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(data(name)).unwrap()).unwrap()
}

pub(crate) fn base_view() -> StaticView {
    StaticView::with_queues([Queue::test("default").open(), Queue::test("root").open()])
}

pub(crate) fn app(view: StaticView) -> (Router, Registry) {
    let registry = Registry::new();
    let ctx = AdmissionContext {
        config: AdmissionConfig::default(),
        view: Arc::new(view),
        metrics: AdmissionMetrics::new(&registry).unwrap(),
    };
    (admission::router(Arc::new(ctx)), registry)
}

pub(crate) async fn post(router: &Router, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{path}: {status} body is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (status, v)
}

/// The object after applying the answer's patch (the object itself when there is none).
pub(crate) fn patched(original: &Value, answer: &Value) -> Value {
    let mut doc = original.clone();
    if let Some(p) = answer["response"]["patch"].as_str() {
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(p)
            .expect("patch is base64");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch is RFC 6902");
        json_patch::patch(&mut doc, &patch).expect("patch applies to the original");
    } else {
        assert!(answer["response"].get("patchType").is_none());
    }
    doc
}

pub(crate) fn review_of(op: &str, object: &Value, old: Option<&Value>, uid: &str) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": object["kind"]},
            "name": object["metadata"]["name"],
            "namespace": object["metadata"]["namespace"].as_str().unwrap_or("default"),
            "operation": op,
            "object": if op == "DELETE" { Value::Null } else { object.clone() },
            "oldObject": old.cloned().unwrap_or(Value::Null),
        }
    })
}

#[tokio::test]
async fn job_create_v1_and_v1beta1_are_mutated_into_the_expected_object() {
    let (router, registry) = app(base_view());
    let expected = read_json("job-create.expected.json");
    for (file, version) in [
        ("job-create-v1.json", "admission.k8s.io/v1"),
        ("job-create-v1beta1.json", "admission.k8s.io/v1beta1"),
    ] {
        let review = read_json(file);
        let (status, answer) = post(
            &router,
            "/jobs/mutate",
            serde_json::to_vec(&review).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["apiVersion"], version);
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["uid"], review["request"]["uid"]);
        assert_eq!(answer["response"]["allowed"], true);
        let mutated = patched(&review["request"]["object"], &answer);
        assert_eq!(mutated, expected, "{file}");

        // The defaulted job then passes validation, and validation patches nothing.
        let mut again = review.clone();
        again["request"]["object"] = mutated;
        let (status, answer) = post(
            &router,
            "/jobs/validate",
            serde_json::to_vec(&again).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
        assert!(answer["response"].get("patch").is_none());
    }
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(
        text.contains(r#"tephra_admission_requests_total{operation="CREATE",path="/jobs/mutate",result="patched"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"tephra_admission_duration_seconds_count{path="/jobs/validate"} 2"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_mutation_with_nothing_to_change_has_no_patch() {
    let (router, _) = app(base_view());
    let mut review = read_json("job-create-v1.json");
    review["request"]["object"] = read_json("job-create.expected.json");
    let (status, answer) = post(
        &router,
        "/jobs/mutate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"].get("patch").is_none());
    assert!(answer["response"].get("patchType").is_none());
}

#[tokio::test]
async fn invalid_job_create_and_update_are_denied_with_a_message() {
    let (router, registry) = app(base_view());
    let review = read_json("job-create-invalid-v1.json");
    let (status, answer) = post(
        &router,
        "/jobs/validate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["uid"], "0b1e-job-invalid");
    assert_eq!(answer["response"]["allowed"], false);
    let msg = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.contains("duplicate event PodFailed"), "{msg}");
    assert_eq!(answer["response"]["status"]["code"], 403);

    let review = read_json("job-update-queue-v1.json");
    let (_, answer) = post(
        &router,
        "/jobs/validate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(answer["response"]["allowed"], false);
    assert!(
        answer["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("job updates may not change fields")
    );
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(
        text.contains(r#"path="/jobs/validate",result="denied"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn owned_pod_gets_its_group_name_with_an_escaped_pointer() {
    let (router, _) = app(base_view());
    let review = read_json("pod-create-owned-v1.json");
    let (status, answer) = post(
        &router,
        "/pods/mutate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let patch_text = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(answer["response"]["patch"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert!(
        patch_text.contains("scheduling.k8s.io~1group-name")
            || patch_text.contains("\"/metadata/annotations\""),
        "{patch_text}"
    );
    assert_eq!(
        patched(&review["request"]["object"], &answer),
        read_json("pod-create-owned.expected.json")
    );
}

#[tokio::test]
async fn deleting_the_default_queue_is_denied() {
    let (router, _) = app(base_view());
    let review = read_json("queue-delete-default-v1.json");
    let (status, answer) = post(
        &router,
        "/queues/validate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "`default` queue can not be deleted"
    );
}

/// Posts `review` to `path` and returns `(allowed, message)` of its 200 answer.
async fn verdict(router: &Router, path: &str, review: &Value) -> (bool, String) {
    let (status, answer) = post(router, path, serde_json::to_vec(review).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{path}: {answer}");
    assert_eq!(answer["response"]["uid"], review["request"]["uid"]);
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    let allowed = answer["response"]["allowed"].as_bool().unwrap();
    let message = answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (allowed, message)
}

#[tokio::test]
async fn hypernodes_are_validated_with_volcanos_rules() {
    let (router, registry) = app(base_view());
    let good = read_json("hypernode-create-v1.json");
    assert_eq!(
        verdict(&router, "/hypernodes/validate", &good).await,
        (true, String::new())
    );
    let mut bad_regex = good.clone();
    bad_regex["request"]["object"]["spec"]["members"][1]["selector"]["regexMatch"]["pattern"] =
        json!("a(b");
    assert_eq!(
        verdict(&router, "/hypernodes/validate", &bad_regex).await,
        (
            false,
            "spec.members[1].selector.regexMatch.pattern: Invalid value: \"a(b\": member regexMatch pattern is invalid: unclosed group".to_string()
        )
    );
    // An update that empties the members, as Volcano's e2e does (Go omits the empty list).
    let mut emptied = good.clone();
    emptied["request"]["operation"] = json!("UPDATE");
    emptied["request"]["oldObject"] = good["request"]["object"].clone();
    emptied["request"]["object"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("members");
    assert_eq!(
        verdict(&router, "/hypernodes/validate", &emptied).await,
        (
            false,
            "spec.members: Required value: member must have at least one member".to_string()
        )
    );
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(
        text.contains(r#"tephra_admission_requests_total{operation="UPDATE",path="/hypernodes/validate",result="denied"} 1"#),
        "requests are counted: {text}"
    );
}

#[tokio::test]
async fn jobflows_are_validated_with_volcanos_rules() {
    let (router, _) = app(base_view());
    let good = read_json("jobflow-create-v1.json");
    assert_eq!(
        verdict(&router, "/jobflows/validate", &good).await,
        (true, String::new())
    );
    let mut missing = good.clone();
    missing["request"]["object"]["spec"]["flows"] =
        json!([{"name": "b", "dependsOn": {"targets": ["a"]}}]);
    assert_eq!(
        verdict(&router, "/jobflows/validate", &missing).await,
        (
            false,
            "jobflow Flow is not DAG: vertex is not defined: a".to_string()
        )
    );
    let mut cycle = good.clone();
    cycle["request"]["object"]["spec"]["flows"][0]["dependsOn"] = json!({"targets": ["c"]});
    assert_eq!(
        verdict(&router, "/jobflows/validate", &cycle).await,
        (false, "jobflow Flow is not DAG".to_string())
    );
}

#[tokio::test]
async fn unreadable_reviews_are_400_with_a_one_line_reason() {
    let (router, registry) = app(base_view());
    let good = read_json("job-create-v1.json");
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("/jobs/mutate", b"{not json".to_vec(), "not JSON"),
        ("/jobs/mutate", Vec::new(), "not JSON"),
        ("/jobs/validate", b"[]".to_vec(), "not an AdmissionReview"),
        ("/pods/mutate", b"\"x\"".to_vec(), "not an AdmissionReview"),
    ];
    let mut v = good.clone();
    v["apiVersion"] = json!("admission.k8s.io/v2");
    cases.push((
        "/jobs/mutate",
        serde_json::to_vec(&v).unwrap(),
        "apiVersion",
    ));
    let mut v = good.clone();
    v["kind"] = json!("Pod");
    cases.push((
        "/jobs/mutate",
        serde_json::to_vec(&v).unwrap(),
        "AdmissionReview",
    ));
    let mut v = good.clone();
    v.as_object_mut().unwrap().remove("request");
    cases.push((
        "/jobs/mutate",
        serde_json::to_vec(&v).unwrap(),
        "no request",
    ));
    let mut v = good.clone();
    v["request"].as_object_mut().unwrap().remove("uid");
    cases.push(("/jobs/mutate", serde_json::to_vec(&v).unwrap(), "uid"));
    // A Job posted to the pods path, a Pod to the jobs path.
    cases.push((
        "/pods/validate",
        serde_json::to_vec(&good).unwrap(),
        "/pods/validate admits Pod",
    ));
    let pod = read_json("pod-create-owned-v1.json");
    cases.push((
        "/jobs/validate",
        serde_json::to_vec(&pod).unwrap(),
        "admits batch.volcano.sh Job",
    ));
    cases.push((
        "/deployments/validate",
        serde_json::to_vec(&pod).unwrap(),
        "apps Deployment or apps StatefulSet",
    ));

    for (path, body, want) in cases {
        let (status, v) = post(&router, path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {want}");
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["code"], 400);
        let msg = v["message"].as_str().unwrap();
        assert!(msg.contains(want), "{msg:?} lacks {want:?}");
        assert!(!msg.contains('\n'));
    }
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    assert!(text.contains(r#"result="invalid""#), "{text}");
}

#[tokio::test]
async fn a_well_formed_review_of_a_broken_object_is_denied_not_rejected() {
    let (router, _) = app(base_view());
    let mut review = read_json("job-create-v1.json");
    review["request"]["object"]["spec"]["tasks"] = json!("three");
    let (status, answer) = post(
        &router,
        "/jobs/validate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    assert!(
        answer["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot decode the Job")
    );
    review["request"]["object"] = Value::Null;
    let (status, answer) = post(
        &router,
        "/jobs/mutate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        answer["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("has no object")
    );
}

#[tokio::test]
async fn every_contract_path_is_served_and_only_post() {
    let paths: Vec<&str> = WEBHOOKS.iter().map(|w| w.path).collect();
    for p in [
        "/jobs/mutate",
        "/jobs/validate",
        "/pods/mutate",
        "/pods/validate",
        "/podgroups/mutate",
        "/podgroups/validate",
        "/queues/mutate",
        "/queues/validate",
        "/deployments/mutate",
        "/deployments/validate",
        "/hypernodes/validate",
        "/jobflows/validate",
    ] {
        assert!(paths.contains(&p), "{p}");
    }
    let (router, _) = app(base_view());
    let resp = router
        .clone()
        .oneshot(Request::get("/jobs/mutate").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
}

// ---------------------------------------------------------------------------------------------
// Volcano's examples
// ---------------------------------------------------------------------------------------------

/// Volcano's example manifests, or `None` (after the skip line for `test`) on a machine
/// without the Volcano fixtures.
fn volcano_examples(test: &str) -> Option<Vec<(String, Value)>> {
    common::volcano_or_skip("volcano-examples", test).map(|dir| common::manifests_in(&dir))
}

/// Our own manifests (`tests/data/manifests/`), present in every checkout.
fn own_manifests() -> Vec<(String, Value)> {
    common::manifests_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/manifests"))
}

/// What the API server does before admission: CRD structural defaults.
fn crd_defaults(obj: &mut Value) {
    match obj["kind"].as_str() {
        Some("Job") => {
            let spec = obj["spec"].as_object_mut().unwrap();
            spec.entry("queue").or_insert(json!("default"));
            spec.entry("maxRetry").or_insert(json!(3));
        }
        Some("Queue") => {
            obj["spec"]
                .as_object_mut()
                .unwrap()
                .entry("weight")
                .or_insert(json!(1));
        }
        Some("PodGroup") => {
            obj["spec"]
                .as_object_mut()
                .unwrap()
                .entry("queue")
                .or_insert(json!("default"));
        }
        _ => {}
    }
    if obj["metadata"]["namespace"].is_null() && obj["kind"] != "Queue" {
        obj["metadata"]["namespace"] = json!("default");
    }
}

pub(crate) async fn admit(
    router: &Router,
    kind_path: &str,
    obj: &Value,
    uid: &str,
) -> (Value, Value) {
    let review = review_of("CREATE", obj, None, uid);
    let (status, answer) = post(
        router,
        &format!("/{kind_path}/mutate"),
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["response"]["allowed"], true, "{uid}: {answer}");
    let mutated = patched(obj, &answer);
    let review = review_of("CREATE", &mutated, None, uid);
    let (status, answer) = post(
        router,
        &format!("/{kind_path}/validate"),
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    (mutated, answer)
}

/// Our own vcJob, Queue and gang Deployment go through mutation and validation on every
/// checkout; the invalid vcJob (a gang bigger than its tasks) is denied.
#[tokio::test]
async fn own_manifests_are_admitted_and_the_invalid_job_denied() {
    let (router, _) = app(base_view());
    let docs = own_manifests();
    let mut kinds = Vec::new();
    for (file, mut obj) in docs {
        crd_defaults(&mut obj);
        let path = match obj["kind"].as_str().unwrap_or_default() {
            "Job" => "jobs",
            "Queue" => "queues",
            "Deployment" => "deployments",
            other => panic!("{file}: no webhook for kind {other}"),
        };
        kinds.push(path);
        let (_, answer) = admit(&router, path, &obj, &file).await;
        let allowed = answer["response"]["allowed"].as_bool();
        if file == "vcjob-invalid.yaml" {
            assert_eq!(allowed, Some(false), "{file} was admitted: {answer}");
            let message = answer["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default();
            assert!(message.contains("minAvailable"), "{file}: {message:?}");
        } else {
            assert_eq!(allowed, Some(true), "{file} denied: {answer}");
        }
    }
    for kind in ["jobs", "queues", "deployments"] {
        assert!(
            kinds.contains(&kind),
            "no {kind} manifest in tests/data/manifests"
        );
    }
}

#[tokio::test]
async fn volcano_examples_are_admitted_and_its_invalid_jobs_denied() {
    let view = Arc::new(base_view());
    let registry = Registry::new();
    let ctx = AdmissionContext {
        config: AdmissionConfig::default(),
        view: view.clone(),
        metrics: AdmissionMetrics::new(&registry).unwrap(),
    };
    let router = admission::router(Arc::new(ctx));
    let Some(docs) = volcano_examples("volcano_examples_are_admitted_and_its_invalid_jobs_denied")
    else {
        return;
    };
    let mut seen_jobs = 0;

    // Queues first, each stored (Open, as the queue controller would make it) once admitted.
    for (file, mut q) in docs.iter().filter(|(_, d)| d["kind"] == "Queue").cloned() {
        crd_defaults(&mut q);
        let (mutated, answer) = admit(&router, "queues", &q, &file).await;
        assert_eq!(answer["response"]["allowed"], true, "{file}: {answer}");
        let mut queue: Queue = serde_json::from_value(mutated).unwrap();
        queue.status.get_or_insert_with(Default::default).state = Some("Open".into());
        view.apply_queue(queue);
    }
    for (file, mut obj) in docs.iter().cloned() {
        crd_defaults(&mut obj);
        let uid = format!("{file}/{}", obj["metadata"]["name"]);
        match (
            obj["apiVersion"].as_str().unwrap_or_default(),
            obj["kind"].as_str().unwrap_or_default(),
        ) {
            ("batch.volcano.sh/v1alpha1", "Job") => {
                seen_jobs += 1;
                let (_, answer) = admit(&router, "jobs", &obj, &uid).await;
                let allowed = answer["response"]["allowed"].as_bool().unwrap();
                let message = answer["response"]["status"]["message"]
                    .as_str()
                    .unwrap_or_default();
                let want = match file.as_str() {
                    "invalid_jobs__duplicatedPolicyEvent-webhook-deny.yaml" => {
                        Some("duplicate event PodFailed")
                    }
                    "invalid_jobs__duplicatedTaskName-webhook-deny.yaml" => {
                        Some("duplicated task name task-1")
                    }
                    "invalid_jobs__minAvailable-webhook-deny.yaml" => Some(
                        "job 'minAvailable' should not be greater than total replicas in tasks",
                    ),
                    _ => None,
                };
                match want {
                    Some(w) => {
                        assert!(!allowed, "{uid} was admitted");
                        assert!(message.contains(w), "{uid}: {message:?} lacks {w:?}");
                    }
                    None => assert!(allowed, "{uid} denied: {message}"),
                }
            }
            ("apps/v1", "Deployment") => {
                let (_, answer) = admit(&router, "deployments", &obj, &uid).await;
                assert_eq!(answer["response"]["allowed"], true, "{uid}: {answer}");
            }
            ("scheduling.volcano.sh/v1beta1", "PodGroup") => {
                let (mutated, answer) = admit(&router, "podgroups", &obj, &uid).await;
                assert_eq!(answer["response"]["allowed"], true, "{uid}: {answer}");
                assert!(mutated["spec"]["queue"].is_string());
            }
            _ => {}
        }
    }
    assert!(seen_jobs >= 20, "only {seen_jobs} jobs in the examples");
}

// ---------------------------------------------------------------------------------------------
// Fuzzing
// ---------------------------------------------------------------------------------------------

/// xorshift64*: a fixed, dependency-free random sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn random_value(rng: &mut Rng, depth: u32) -> Value {
    match rng.below(if depth > 3 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 0),
        2 => json!(rng.next() as i64),
        3 => json!(-(rng.below(5) as i64)),
        4 => json!(
            [
                "", "0", "-1", "CREATE", "default", "volcano", "1e400", "\u{0}", "a/b~c", "50%",
                "2Gi"
            ][rng.below(11)]
        ),
        5 => json!(1.5e308),
        6 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let keys = [
                "name",
                "spec",
                "tasks",
                "queue",
                "replicas",
                "minAvailable",
                "metadata",
                "annotations",
                "x",
            ];
            let mut m = serde_json::Map::new();
            for _ in 0..rng.below(4) {
                m.insert(
                    keys[rng.below(keys.len())].to_string(),
                    random_value(rng, depth + 1),
                );
            }
            Value::Object(m)
        }
    }
}

/// Replaces (or empties) one randomly chosen node of `v`.
fn mutate_tree(v: &mut Value, rng: &mut Rng) {
    // Choose the node by walking down immutably, remembering its JSON pointer.
    let mut pointer = String::new();
    let mut cur: &Value = v;
    loop {
        if rng.below(4) == 0 {
            break;
        }
        let step = match cur {
            Value::Object(m) if !m.is_empty() => {
                let (k, next) = m.iter().nth(rng.below(m.len())).unwrap();
                Some((k.replace('~', "~0").replace('/', "~1"), next))
            }
            Value::Array(a) if !a.is_empty() => {
                let i = rng.below(a.len());
                Some((i.to_string(), &a[i]))
            }
            _ => None,
        };
        match step {
            Some((token, next)) => {
                pointer.push('/');
                pointer.push_str(&token);
                cur = next;
            }
            None => break,
        }
    }
    let choice = rng.below(3);
    let replacement = random_value(rng, if choice == 0 { 0 } else { 2 });
    let Some(node) = v.pointer_mut(&pointer) else {
        return;
    };
    match (choice, node) {
        (1, Value::Object(m)) => {
            if let Some(k) = m.keys().next().cloned() {
                m.remove(&k);
            }
        }
        (_, node) => *node = replacement,
    }
}

fn seed_reviews() -> Vec<Value> {
    let mut seeds: Vec<Value> = [
        "job-create-v1.json",
        "job-create-v1beta1.json",
        "job-create-invalid-v1.json",
        "job-update-queue-v1.json",
        "pod-create-owned-v1.json",
        "queue-delete-default-v1.json",
        "hypernode-create-v1.json",
        "jobflow-create-v1.json",
    ]
    .iter()
    .map(|f| read_json(f))
    .collect();
    // Our own manifests always; Volcano's examples too where this machine has them (a fuzzer
    // only gains from more seeds, so their absence is no reason to skip it).
    let mut docs = own_manifests();
    docs.extend(
        common::volcano_dir("volcano-examples")
            .map(|dir| common::manifests_in(&dir))
            .unwrap_or_default(),
    );
    for (_, mut obj) in docs {
        crd_defaults(&mut obj);
        for op in ["CREATE", "UPDATE", "DELETE"] {
            let old = (op != "CREATE").then(|| obj.clone());
            seeds.push(review_of(op, &obj, old.as_ref(), "fuzz"));
        }
    }
    seeds
}

fn check_answer(path: &str, body: &[u8], status: StatusCode, answer: &Value) {
    assert!(
        status == StatusCode::OK || status == StatusCode::BAD_REQUEST,
        "{path}: status {status} for {}",
        String::from_utf8_lossy(body)
    );
    if status == StatusCode::BAD_REQUEST {
        assert_eq!(answer["code"], 400);
        assert!(
            answer["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty() && !m.contains('\n'))
        );
        return;
    }
    // A lone surrogate escape reads as U+FFFD, as Go's decoder (and the webhooks) read it.
    let body = tephra::admission::review::replace_lone_surrogates(body);
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => panic!("{path}: 200 for a body that is not JSON ({e})"),
    };
    assert_eq!(answer["apiVersion"], request["apiVersion"]);
    assert_eq!(answer["response"]["uid"], request["request"]["uid"]);
    let allowed = answer["response"]["allowed"]
        .as_bool()
        .expect("allowed is a bool");
    if !allowed {
        assert!(
            answer["response"]["status"]["message"].is_string(),
            "{answer}"
        );
        assert!(answer["response"].get("patch").is_none());
    } else if answer["response"].get("patch").is_some() {
        patched(&request["request"]["object"], answer);
    }
}

#[tokio::test]
async fn fuzzed_reviews_never_panic_or_fail_the_server() {
    let view = base_view();
    view.apply_queue(Queue::test("child").parent("default").open());
    let (router, _) = app(view);
    let seeds = seed_reviews();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    const ITERATIONS: usize = 4000;
    for i in 0..ITERATIONS {
        let hook = &WEBHOOKS[rng.below(WEBHOOKS.len())];
        let mut review = seeds[rng.below(seeds.len())].clone();
        // Most cases keep the review well formed and break the object; some break anything.
        let body = match i % 10 {
            0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
            1 => {
                let mut b = serde_json::to_vec(&review).unwrap();
                let cut = rng.below(b.len());
                b.truncate(cut);
                b
            }
            2 => {
                let mut b = serde_json::to_vec(&review).unwrap();
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(b.len());
                    b[at] = rng.next() as u8;
                }
                b
            }
            3 => {
                mutate_tree(&mut review, &mut rng);
                serde_json::to_vec(&review).unwrap()
            }
            _ => {
                if let Some(obj) = review["request"].get_mut("object") {
                    for _ in 0..1 + rng.below(3) {
                        mutate_tree(obj, &mut rng);
                    }
                }
                serde_json::to_vec(&review).unwrap()
            }
        };
        let req = Request::post(hook.path)
            .body(Body::from(body.clone()))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{}: answer is not JSON ({e}): {:?}",
                hook.path,
                String::from_utf8_lossy(&bytes)
            )
        });
        check_answer(hook.path, &body, status, &answer);
    }
}

#[tokio::test]
async fn deeply_nested_json_is_refused_not_a_stack_overflow() {
    let (router, _) = app(base_view());
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let (status, v) = post(&router, "/jobs/validate", deep.into_bytes()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        v["message"].as_str().unwrap().contains("recursion limit")
            || v["message"].as_str().unwrap().contains("not")
    );
}

// ---------------------------------------------------------------------------------------------
// The webhook configurations
// ---------------------------------------------------------------------------------------------

#[test]
fn manifest_registers_every_path_with_its_policy() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/webhooks.yaml"),
    )
    .unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration"
        ]
    );
    let mut served = Vec::new();
    for doc in &docs {
        assert_eq!(doc["apiVersion"], "admissionregistration.k8s.io/v1");
        for hook in doc["webhooks"].as_array().unwrap() {
            let svc = &hook["clientConfig"]["service"];
            let path = svc["path"].as_str().unwrap();
            assert_eq!(svc["name"], "tephra", "{path}");
            assert_eq!(svc["namespace"], "tephra-system", "{path}");
            assert_eq!(svc["port"], 443, "{path}");
            assert!(hook["clientConfig"]["caBundle"].is_string(), "{path}");
            assert_eq!(hook["sideEffects"], "None", "{path}");
            assert_eq!(hook["matchPolicy"], "Equivalent", "{path}");
            assert_eq!(
                hook["admissionReviewVersions"],
                json!(["v1", "v1beta1"]),
                "{path}"
            );
            assert!(
                hook["timeoutSeconds"]
                    .as_i64()
                    .is_some_and(|t| (1..=30).contains(&t)),
                "{path}"
            );
            let policy = hook["failurePolicy"].as_str().unwrap();
            assert!(policy == "Fail" || policy == "Ignore", "{path}");
            let mutating = doc["kind"] == "MutatingWebhookConfiguration";
            assert_eq!(path.ends_with("/mutate"), mutating, "{path}");
            // vcJobs are validated fail-closed: with the webhook down, the API refuses them.
            if path.starts_with("/jobs/") {
                assert_eq!(policy, "Fail", "{path}");
            }
            let rules = hook["rules"].as_array().unwrap();
            let namespaced = rules.iter().all(|r| r["scope"] == "Namespaced");
            if namespaced {
                let excluded = &hook["namespaceSelector"]["matchExpressions"][0];
                assert_eq!(excluded["key"], "kubernetes.io/metadata.name", "{path}");
                assert_eq!(excluded["operator"], "NotIn", "{path}");
                assert_eq!(
                    excluded["values"],
                    json!(["tephra-system", "kube-system"]),
                    "{path}"
                );
            }
            // The rules name exactly the kinds the path admits.
            let webhook = WEBHOOKS.iter().find(|w| w.path == path).unwrap();
            for (group, _) in webhook.kinds {
                assert!(
                    rules
                        .iter()
                        .any(|r| r["apiGroups"].as_array().unwrap().contains(&json!(group))),
                    "{path} misses group {group:?}"
                );
            }
            served.push(path.to_string());
        }
    }
    let mut expected: Vec<String> = WEBHOOKS.iter().map(|w| w.path.to_string()).collect();
    expected.sort();
    served.sort();
    assert_eq!(served, expected);
}

// ---------------------------------------------------------------------------------------------
// Issue 7: direct patches, reviews that disagree with themselves, field-naming decode errors
// ---------------------------------------------------------------------------------------------

/// Every mutation case of the test data: the fixtures of `mutations/` (review, expected
/// object) and the older pairs beside them.
fn mutation_cases() -> Vec<(String, String, Value, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(data("mutations"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let case: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        out.push((
            f.file_name().unwrap().to_string_lossy().to_string(),
            case["path"].as_str().unwrap().to_string(),
            case["review"].clone(),
            case["expected"].clone(),
        ));
    }
    for (file, path, expected) in [
        (
            "job-create-v1.json",
            "/jobs/mutate",
            "job-create.expected.json",
        ),
        (
            "job-create-v1beta1.json",
            "/jobs/mutate",
            "job-create.expected.json",
        ),
        (
            "pod-create-owned-v1.json",
            "/pods/mutate",
            "pod-create-owned.expected.json",
        ),
    ] {
        out.push((
            file.to_string(),
            path.to_string(),
            read_json(file),
            read_json(expected),
        ));
    }
    out
}

#[tokio::test]
async fn every_mutation_case_patches_its_input_into_the_expected_object_minimally() {
    let (router, _) = app(base_view());
    let cases = mutation_cases();
    assert!(cases.len() >= 14, "{}", cases.len());
    for (name, path, review, expected) in cases {
        let (status, answer) = post(&router, &path, serde_json::to_vec(&review).unwrap()).await;
        assert_eq!(status, StatusCode::OK, "{name}: {answer}");
        assert_eq!(answer["response"]["allowed"], true, "{name}: {answer}");
        let input = &review["request"]["object"];
        assert_eq!(&patched(input, &answer), &expected, "{name}");
        let Some(p) = answer["response"]["patch"].as_str() else {
            assert_eq!(
                input, &expected,
                "{name}: no patch, yet a change was expected"
            );
            continue;
        };
        // No patch when nothing changes, and no operation in a patch that changes nothing.
        assert_ne!(input, &expected, "{name}: a patch for an unchanged object");
        let bytes = base64::engine::general_purpose::STANDARD.decode(p).unwrap();
        let ops: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
        let mut doc = input.clone();
        for op in ops {
            let before = doc.clone();
            let one: json_patch::Patch = serde_json::from_value(json!([op])).unwrap();
            json_patch::patch(&mut doc, &one).unwrap();
            assert_ne!(doc, before, "{name}: {op} changes nothing");
        }
    }
}

#[tokio::test]
async fn a_review_whose_object_disagrees_with_its_kind_is_refused_on_every_path() {
    let (router, _) = app(base_view());
    let queue = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "q"}, "spec": {"weight": 1}});
    let job = read_json("job-create-v1.json")["request"]["object"].clone();
    for hook in WEBHOOKS {
        let (group, kind) = hook.kinds[0];
        let version = if group.is_empty() { "v1" } else { "v1alpha1" };
        // A Queue to every path but the queues', a Job to those.
        let other = if kind == "Queue" { &job } else { &queue };
        for op in ["CREATE", "UPDATE"] {
            let mut review = review_of(op, other, Some(other), "u-kind");
            review["request"]["kind"] = json!({"group": group, "version": version, "kind": kind});
            let (status, answer) =
                post(&router, hook.path, serde_json::to_vec(&review).unwrap()).await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{} {op}: {answer}",
                hook.path
            );
            let msg = answer["message"].as_str().unwrap();
            assert!(msg.contains("but request.object is"), "{msg}");
            assert!(msg.contains(hook.path), "{msg}");
        }
    }
    // The Queue sent to /jobs/mutate as a Job is no longer mutated as if it were one.
    let mut review = review_of("CREATE", &queue, None, "u-q");
    review["request"]["kind"] =
        json!({"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"});
    let (status, answer) = post(
        &router,
        "/jobs/mutate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer["message"],
        "/jobs/mutate reviews batch.volcano.sh/v1alpha1/Job, but request.object is scheduling.volcano.sh/v1beta1 Queue"
    );
    // Only the group and kind count, and an object that does not say is what the request says.
    let mut review = read_json("job-create-v1.json");
    review["request"]["object"]["apiVersion"] = json!("batch.volcano.sh/v1beta9");
    let (status, _) = post(
        &router,
        "/jobs/mutate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let obj = review["request"]["object"].as_object_mut().unwrap();
    obj.remove("apiVersion");
    obj.remove("kind");
    let (status, answer) = post(
        &router,
        "/jobs/mutate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["response"]["allowed"], true);
    // An oldObject of another kind is refused as well.
    let mut review = read_json("job-update-queue-v1.json");
    review["request"]["oldObject"] = queue.clone();
    let (status, answer) = post(
        &router,
        "/jobs/validate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("request.oldObject is")
    );
    // A group that disagrees, same kind name.
    let mut review = read_json("pod-create-owned-v1.json");
    review["request"]["object"]["apiVersion"] = json!("example.com/v1");
    let (status, _) = post(
        &router,
        "/pods/mutate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_named_not_located_by_byte() {
    let (router, _) = app(base_view());
    let cases = [
        (
            "/jobs/validate",
            "/spec/minAvailable",
            json!("two"),
            "spec.minAvailable: invalid type: string \"two\", expected i32",
        ),
        (
            "/jobs/mutate",
            "/spec/minAvailable",
            json!("two"),
            "spec.minAvailable: invalid type: string \"two\", expected i32",
        ),
        (
            "/jobs/validate",
            "/spec/tasks/0/replicas",
            json!([1]),
            "spec.tasks[0].replicas: invalid type: sequence",
        ),
        (
            "/jobs/mutate",
            "/spec/tasks/1/template/spec/hostNetwork",
            json!("yes"),
            "spec.tasks[1].template.spec.hostNetwork: invalid type",
        ),
        (
            "/jobs/validate",
            "/spec/tasks",
            json!("three"),
            "spec.tasks: invalid type",
        ),
        (
            "/jobs/mutate",
            "/spec",
            json!([]),
            "spec: invalid type: sequence, expected an object",
        ),
    ];
    for (path, pointer, bad, want) in cases {
        let mut review = read_json("job-create-v1.json");
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let obj = &mut review["request"]["object"];
        match obj.pointer_mut(parent).unwrap() {
            Value::Array(items) => items[key.parse::<usize>().unwrap()] = bad,
            other => other[key] = bad,
        }
        let (status, answer) = post(&router, path, serde_json::to_vec(&review).unwrap()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["response"]["allowed"], false);
        let msg = answer["response"]["status"]["message"].as_str().unwrap();
        assert!(
            msg.contains(want),
            "{path} {pointer}: {msg:?} lacks {want:?}"
        );
        assert!(!msg.contains("line") && !msg.contains("column"), "{msg}");
    }
    let mut review = read_json("pod-create-owned-v1.json");
    review["request"]["object"]["metadata"]["annotations"] = json!({"a": 1});
    let (_, answer) = post(
        &router,
        "/pods/mutate",
        serde_json::to_vec(&review).unwrap(),
    )
    .await;
    let msg = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        msg.contains("metadata.annotations.a: invalid type: integer"),
        "{msg}"
    );
}

/// Issue 7 item 4: values Volcano refuses (its CRD schema does) are refused once mutated and
/// validated through the router, each with one sentence naming the field.
#[tokio::test]
async fn values_volcano_refuses_are_refused_after_mutation() {
    let (router, _) = app(base_view());
    let job = read_json("job-create-v1.json")["request"]["object"].clone();
    let rows: Vec<(&str, Value, &str)> = vec![
        (
            "/spec/tasks/0/replicas",
            json!(-1),
            "spec.tasks[0].replicas: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "/spec/minAvailable",
            json!(-2),
            "spec.minAvailable: Invalid value: -2: must be greater than or equal to 0",
        ),
        (
            "/spec/maxRetry",
            json!(-1),
            "spec.maxRetry: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "/spec/tasks/0/name",
            json!("Bad_Name"),
            "spec.tasks[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label",
        ),
        (
            "/spec/tasks/0/maxRetry",
            json!(-4),
            "spec.tasks[0].maxRetry: Invalid value: -4",
        ),
        (
            "/spec/queue",
            json!("Default"),
            "spec.queue: Invalid value: \"Default\": a lowercase RFC 1123 subdomain",
        ),
    ];
    for (pointer, bad, want) in rows {
        let mut obj = job.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        obj.pointer_mut(parent).unwrap()[key] = bad;
        let (mutated, answer) = admit(&router, "jobs", &obj, pointer).await;
        if pointer == "/spec/tasks/0/replicas" {
            // The mutation still sums the gang (-1 + 3), as Volcano's does; the validation
            // refuses the job, so the sum is never stored.
            assert_eq!(mutated["spec"]["tasks"][0]["minAvailable"], -1);
        }
        assert_eq!(answer["response"]["allowed"], false, "{pointer}: {answer}");
        let msg = answer["response"]["status"]["message"].as_str().unwrap();
        assert!(msg.contains(want), "{pointer}: {msg:?} lacks {want:?}");
    }
    let queue = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "q"}, "spec": {"weight": -1}});
    let (_, answer) = admit(&router, "queues", &queue, "queue-weight").await;
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "spec.weight: Invalid value: -1: must be between 1 and 65535, inclusive"
    );
    let mut queue = queue;
    queue["spec"]["weight"] = json!(2);
    queue["metadata"]["name"] = json!("Team_A");
    let (_, answer) = admit(&router, "queues", &queue, "queue-name").await;
    assert!(
        answer["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("metadata.name: Invalid value: \"Team_A\""),
        "{answer}"
    );
}
