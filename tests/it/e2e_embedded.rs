//! End to end: `tephra serve --embedded` as a user starts it (the real binary), driven by the
//! same kube-rs client code that talks to a cluster. The embedded API sends real
//! AdmissionReviews to tephra's HTTPS webhooks, registered from `manifests/webhooks.yaml`.

use std::time::{Duration, Instant};

use kube::api::{Api, PostParams};
use serde_json::json;
use tephra::api::Job;

use crate::common::served::Embedded;

fn job(name: &str, replicas: i32, min_available: Option<i32>) -> Job {
    let mut spec = json!({
        "tasks": [{
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }]
    });
    if let Some(m) = min_available {
        spec["minAvailable"] = json!(m);
    }
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_default_valid_jobs_and_deny_invalid_ones_through_the_embedded_api() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (mut served, client) = Embedded::start(&[]).await;
    let jobs: Api<Job> = Api::namespaced(client, "default");

    // Invalid: the job's minAvailable exceeds its replicas. The webhook's message comes back.
    let err = jobs
        .create(&PostParams::default(), &job("too-big", 2, Some(5)))
        .await
        .expect_err("an invalid vcJob was stored");
    let kube::Error::Api(status) = err else {
        panic!("not an API error: {err}")
    };
    assert!(
        status.message.contains("minAvailable") && status.message.contains("replicas"),
        "{status:?}"
    );
    assert!(jobs.get_opt("too-big").await.unwrap().is_none());

    // Valid: stored with Volcano's defaults from /jobs/mutate (and the CRD's schema defaults).
    let created = jobs
        .create(&PostParams::default(), &job("fine", 3, None))
        .await
        .unwrap();
    let spec = &created.spec;
    assert_eq!(spec.queue.as_deref(), Some("default"));
    assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
    assert_eq!(spec.min_available, Some(3));
    assert_eq!(spec.max_retry, Some(3));
    let task = &spec.tasks.as_ref().unwrap()[0];
    assert_eq!(task.name.as_deref(), Some("default0"));
    assert_eq!(task.min_available, Some(3));

    assert_eq!(served.proc.stop(), Some(0), "graceful stop exits 0");
}

/// The PodGroup controller and `/pods/mutate` agree: the webhook names a ReplicaSet's pods
/// `podgroup-<rs uid>` at creation, and the controller creates exactly that PodGroup (through
/// the PodGroup webhooks), with no pod patch needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_named_by_the_webhook_get_that_podgroup() {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use kube::ResourceExt;
    use tephra::api::PodGroup;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let (mut served, client) = Embedded::start(&[]).await;
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pgs: Api<PodGroup> = Api::namespaced(client, "default");
    // The pods are the ReplicaSet's own, made by the controller-manager stand-in through the
    // same create path as any client's (so `/pods/mutate` sees them).
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "train", "annotations": {"scheduling.volcano.sh/group-min-member": "2"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "train"}},
                 "template": {"metadata": {"labels": {"app": "train"}},
                              "spec": {"schedulerName": "volcano",
                                       "containers": [{"name": "c", "image": "busybox",
                                                       "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap();
    let rs = rss.create(&PostParams::default(), &rs).await.unwrap();
    let uid = rs.uid().unwrap();
    let expected = format!("podgroup-{uid}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let made = loop {
        let list = pods
            .list(&kube::api::ListParams::default().labels("app=train"))
            .await
            .unwrap();
        if list.items.len() == 2 {
            break list.items;
        }
        assert!(Instant::now() < deadline, "the ReplicaSet got no 2 pods");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for pod in &made {
        assert_eq!(
            pod.annotations().get("scheduling.k8s.io/group-name"),
            Some(&expected),
            "named by /pods/mutate at creation"
        );
        assert_eq!(
            pod.owner_references()[0].uid,
            uid,
            "the pod is the ReplicaSet's"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let pg = loop {
        if let Some(pg) = pgs.get_opt(&expected).await.unwrap() {
            break pg;
        }
        assert!(Instant::now() < deadline, "no PodGroup {expected}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(pg.spec.min_member, Some(2));
    assert_eq!(pg.spec.queue.as_deref(), Some("default"));
    assert_eq!(pg.spec.min_resources.unwrap()["cpu"].0, "2");
    assert_eq!(served.proc.stop(), Some(0), "graceful stop exits 0");
}

/// A minimal CustomResourceDefinition for one of Volcano's kinds that tephra does not install
/// (any object accepted by its schema: the webhook is what is under test).
fn open_crd(group: &str, kind: &str, plural: &str, scope: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                      "listKind": format!("{kind}List")},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// On a cluster that keeps Volcano's HyperNode and JobFlow CRDs, the self-registered
/// `/hypernodes/validate` and `/jobflows/validate` refuse what Volcano's webhook-manager does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hypernodes_and_jobflows_are_validated_through_the_embedded_api() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    let _ = rustls::crypto::ring::default_provider().install_default();
    let (mut served, client) = Embedded::start(&[]).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // tephra serves HyperNodes itself; JobFlows come from Volcano's CRD.
    for crd in [open_crd(
        "flow.volcano.sh",
        "JobFlow",
        "jobflows",
        "Namespaced",
    )] {
        crds.create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await
        .unwrap();
    }
    let resource = |group: &str, kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1alpha1", kind), plural)
    };
    let hn_res = resource("topology.volcano.sh", "HyperNode", "hypernodes");
    let jf_res = resource("flow.volcano.sh", "JobFlow", "jobflows");
    let hypernodes: Api<DynamicObject> = Api::all_with(client.clone(), &hn_res);
    let jobflows: Api<DynamicObject> = Api::namespaced_with(client, "default", &jf_res);
    let object = |res: &ApiResource, name: &str, spec: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": res.api_version, "kind": res.kind,
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap()
    };
    let refused = |err: kube::Error| -> String {
        let kube::Error::Api(status) = err else {
            panic!("not an API error: {err}")
        };
        status.message
    };

    // The CRD may take a moment to be served; the first create retries (bounded) until it is.
    let good = object(
        &hn_res,
        "rack-1",
        json!({"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "node-[0-9]+"}}}]}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = hypernodes.create(&PostParams::default(), &good).await {
        assert!(Instant::now() < deadline, "HyperNodes never served: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let bad = object(
        &hn_res,
        "bad-regex",
        json!({"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "a(b"}}}]}),
    );
    let msg = refused(
        hypernodes
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("a HyperNode with a broken pattern was stored"),
    );
    assert!(
        msg.contains("member regexMatch pattern is invalid: unclosed group"),
        "{msg}"
    );
    let msg = refused(
        hypernodes
            .create(
                &PostParams::default(),
                &object(&hn_res, "empty", json!({"tier": 1})),
            )
            .await
            .expect_err("a HyperNode without members was stored"),
    );
    assert!(
        msg.contains("member must have at least one member"),
        "{msg}"
    );

    let dag = object(
        &jf_res,
        "pipeline",
        json!({"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = jobflows.create(&PostParams::default(), &dag).await {
        assert!(Instant::now() < deadline, "JobFlows never served: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cycle = object(
        &jf_res,
        "loop",
        json!({"flows": [{"name": "a", "dependsOn": {"targets": ["a"]}}]}),
    );
    let msg = refused(
        jobflows
            .create(&PostParams::default(), &cycle)
            .await
            .expect_err("a JobFlow with a cycle was stored"),
    );
    assert!(msg.contains("jobflow Flow is not DAG"), "{msg}");
    let missing = object(
        &jf_res,
        "missing",
        json!({"flows": [{"name": "b", "dependsOn": {"targets": ["a"]}}]}),
    );
    let msg = refused(
        jobflows
            .create(&PostParams::default(), &missing)
            .await
            .expect_err("a JobFlow with an undefined target was stored"),
    );
    assert!(
        msg.contains("jobflow Flow is not DAG: vertex is not defined: a"),
        "{msg}"
    );

    assert_eq!(served.proc.stop(), Some(0), "graceful stop exits 0");
}
