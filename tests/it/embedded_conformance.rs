//! Conformance of the embedded API, driven by kube-rs: the same client code tephra's service
//! uses against a real cluster (`Api<K>`, `watcher`, `reflector`, `Discovery`,
//! `Api<DynamicObject>`), in process with no socket, plus one test over TCP.

use crate::common;
use common::served::eventually;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams,
    PropagationPolicy, WatchEvent, WatchParams,
};
use kube::discovery::{Discovery, Scope};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions, FaultSpec};
use tokio_util::sync::CancellationToken;

fn opts() -> EmbeddedOptions {
    EmbeddedOptions {
        nodes: 3,
        sim_kubelet: false,
        ..Default::default()
    }
}

fn client(api: &Arc<ApiServer>) -> Client {
    Client::new(embedded::router(api.clone()), "default")
}

fn setup() -> (Arc<ApiServer>, Client) {
    let api = ApiServer::new(opts());
    let c = client(&api);
    (api, c)
}

fn pod(name: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}
    }))
    .unwrap()
}

fn code(e: &kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn pod_crud_with_system_metadata_and_status_errors() {
    let (_api, c) = setup();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let created = pods
        .create(&PostParams::default(), &pod("web", json!({"app": "web"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        created.spec.unwrap().scheduler_name.as_deref(),
        Some("default-scheduler")
    );

    let dup = pods
        .create(&PostParams::default(), &pod("web", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(&dup), (409, "AlreadyExists".into()));

    let got = pods.get("web").await.unwrap();
    assert_eq!(
        got.metadata.resource_version,
        created.metadata.resource_version
    );

    let mut gen_pod = pod("", json!({}));
    gen_pod.metadata.name = None;
    gen_pod.metadata.generate_name = Some("gen-".into());
    let g = pods.create(&PostParams::default(), &gen_pod).await.unwrap();
    assert!(g.name_any().starts_with("gen-") && g.name_any().len() == 9);

    let missing_ns: Api<Pod> = Api::namespaced(c.clone(), "nope");
    let e = missing_ns
        .create(&PostParams::default(), &pod("x", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(&e), (404, "NotFound".into()));

    pods.delete("web", &DeleteParams::default()).await.unwrap();
    let e = pods.get("web").await.unwrap_err();
    assert_eq!(code(&e), (404, "NotFound".into()));
    assert!(pods.get_opt("web").await.unwrap().is_none());

    let bad = pods
        .create(&PostParams::default(), &pod("Bad_Name", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(&bad), (422, "Invalid".into()));
}

#[tokio::test]
async fn resource_versions_increase_and_stale_replace_conflicts() {
    let (_api, c) = setup();
    let cms: Api<ConfigMap> = Api::default_namespaced(c);
    let mut cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    let v1 = cms.create(&PostParams::default(), &cm).await.unwrap();
    cm.metadata.resource_version = v1.metadata.resource_version.clone();
    cm.data = Some([("a".to_string(), "2".to_string())].into());
    let v2 = cms.replace("c", &PostParams::default(), &cm).await.unwrap();
    let rv = |c: &ConfigMap| {
        c.metadata
            .resource_version
            .clone()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&v2) > rv(&v1));
    // Same stale version again: someone else's write won.
    let e = cms
        .replace("c", &PostParams::default(), &cm)
        .await
        .unwrap_err();
    assert_eq!(code(&e), (409, "Conflict".into()));
    // A no-op write does not bump the version.
    let mut same = v2.clone();
    same.metadata.managed_fields = None;
    let v3 = cms
        .replace("c", &PostParams::default(), &same)
        .await
        .unwrap();
    assert_eq!(rv(&v3), rv(&v2));
}

#[tokio::test]
async fn every_patch_kind() {
    let (_api, c) = setup();
    let pods: Api<Pod> = Api::default_namespaced(c);
    pods.create(&PostParams::default(), &pod("p", json!({"a": "1"})))
        .await
        .unwrap();
    let pp = PatchParams::default();

    let merged = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"b": "2", "a": null}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.labels().get("b").map(String::as_str), Some("2"));
    assert!(!merged.labels().contains_key("a"));

    let jp: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}
    ]))
    .unwrap();
    let j = pods.patch("p", &pp, &Patch::Json::<()>(jp)).await.unwrap();
    assert_eq!(j.annotations().get("x").map(String::as_str), Some("y"));

    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/name", "value": "other"}]))
            .unwrap();
    let e = pods
        .patch("p", &pp, &Patch::Json::<()>(failing))
        .await
        .unwrap_err();
    assert_eq!(code(&e).0, 422);

    let s = pods
        .patch(
            "p",
            &pp,
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "side", "image": "busybox"}]}}),
            ),
        )
        .await
        .unwrap();
    let names: Vec<String> = s
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["main", "side"], "strategic merge adds by name");

    let applied = pods
        .patch(
            "p",
            &PatchParams::apply("tephra-test").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"c": "3"}}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.labels().get("c").map(String::as_str), Some("3"));
    assert_eq!(applied.labels().get("b").map(String::as_str), Some("2"));

    // Server-side apply creates a missing object.
    let cms: Api<ConfigMap> = Api::default_namespaced(pods.clone().into_client());
    let created = cms
        .patch(
            "fresh",
            &PatchParams::apply("tephra-test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh"}, "data": {"k": "v"}})),
        )
        .await
        .unwrap();
    assert_eq!(created.data.unwrap()["k"], "v");

    // A patch pinned to an old version conflicts.
    let e = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1", "labels": {"z": "1"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), (409, "Conflict".into()));
    let e = pods
        .patch("absent", &pp, &Patch::Merge(json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(&e).0, 404);
}

#[tokio::test]
async fn status_subresource_is_split_from_the_main_object() {
    let (_api, c) = setup();
    let deploys: Api<Deployment> = Api::default_namespaced(c);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 7}
    }))
    .unwrap();
    let created = deploys.create(&PostParams::default(), &d).await.unwrap();
    assert!(
        created.status.is_none_or(|s| s.replicas.is_none()),
        "status dropped on create"
    );
    assert_eq!(created.metadata.generation, Some(1));

    let st = deploys
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 2}, "spec": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status.as_ref().unwrap().replicas, Some(2));
    assert_eq!(st.spec.replicas, Some(2), "status endpoint ignores spec");
    assert_eq!(st.metadata.generation, Some(1));

    let main = deploys
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 0}, "spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(
        main.status.as_ref().unwrap().replicas,
        Some(2),
        "main endpoint ignores status"
    );
    assert_eq!(main.spec.replicas, Some(3));
    assert_eq!(
        main.metadata.generation,
        Some(2),
        "spec change bumps generation"
    );
}

#[tokio::test]
async fn binding_sets_the_node_once_and_eviction_deletes() {
    let (_api, c) = setup();
    let pods: Api<Pod> = Api::default_namespaced(c);
    let p = pods
        .create(&PostParams::default(), &pod("b", json!({})))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "b", "uid": p.metadata.uid}, "target": {"apiVersion": "v1", "kind": "Node", "name": "node-2"}});
    let _: Value = pods
        .create_subresource("binding", "b", &PostParams::default(), &binding)
        .await
        .unwrap();
    let bound = pods.get("b").await.unwrap();
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-2")
    );
    let cond = bound.status.unwrap().conditions.unwrap();
    assert!(
        cond.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let again = pods
        .create_subresource::<_, Value>("binding", "b", &PostParams::default(), &binding)
        .await
        .unwrap_err();
    assert_eq!(code(&again), (409, "Conflict".into()));
    // Updates cannot move a pod to another node.
    let moved = pods
        .patch(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "node-3"}})),
        )
        .await
        .unwrap();
    assert_eq!(moved.spec.unwrap().node_name.as_deref(), Some("node-2"));

    pods.evict("b", &EvictParams::default()).await.unwrap();
    assert!(pods.get_opt("b").await.unwrap().is_none());
}

#[tokio::test]
async fn selectors_and_pagination() {
    let (_api, c) = setup();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for i in 0..25 {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        pods.create(
            &PostParams::default(),
            &pod(
                &format!("p{i:02}"),
                json!({"tier": tier, "n": i.to_string()}),
            ),
        )
        .await
        .unwrap();
    }
    let names =
        |l: &kube::core::ObjectList<Pod>| l.items.iter().map(|p| p.name_any()).collect::<Vec<_>>();
    assert_eq!(
        pods.list(&ListParams::default().labels("tier=even"))
            .await
            .unwrap()
            .items
            .len(),
        13
    );
    assert_eq!(
        pods.list(&ListParams::default().labels("tier!=even"))
            .await
            .unwrap()
            .items
            .len(),
        12
    );
    assert_eq!(
        pods.list(&ListParams::default().labels("n in (1,2,3)"))
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    assert_eq!(
        pods.list(&ListParams::default().labels("n notin (1,2,3),tier"))
            .await
            .unwrap()
            .items
            .len(),
        22
    );
    assert_eq!(
        pods.list(&ListParams::default().labels("!tier"))
            .await
            .unwrap()
            .items
            .len(),
        0
    );
    let by_name = pods
        .list(&ListParams::default().fields("metadata.name=p07"))
        .await
        .unwrap();
    assert_eq!(names(&by_name), ["p07"]);
    let bad = pods
        .list(&ListParams::default().labels("a in b"))
        .await
        .unwrap_err();
    assert_eq!(code(&bad).0, 400);

    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(10);
    for _ in 0..5 {
        let page = pods.list(&lp).await.unwrap();
        seen.extend(names(&page));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(cont) => lp = lp.continue_token(&cont),
            None => break,
        }
    }
    assert_eq!(seen.len(), 25);
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "pages come in key order without overlap");

    let all: Api<Pod> = Api::all(c);
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        25
    );
}

#[tokio::test]
async fn watch_streams_changes_and_expired_versions_are_410() {
    let api = ApiServer::new(EmbeddedOptions {
        watch_history: 16,
        ..opts()
    });
    let c = client(&api);
    let cms: Api<ConfigMap> = Api::default_namespaced(c);
    let first = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "w0"}})).unwrap(),
        )
        .await
        .unwrap();
    let rv0 = first.metadata.resource_version.clone().unwrap();

    let mut stream = cms
        .watch(&WatchParams::default().timeout(10), &rv0)
        .await
        .unwrap()
        .boxed();
    cms.patch(
        "w0",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "1"}})),
    )
    .await
    .unwrap();
    cms.delete("w0", &DeleteParams::default()).await.unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Modified(ref c) if c.data.as_ref().unwrap()["a"] == "1"));
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Deleted(_)));

    for i in 1..40 {
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("w{i}")}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let mut old = cms
        .watch(&WatchParams::default(), &rv0)
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(5), old.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match ev {
        WatchEvent::Error(s) => assert_eq!(s.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }

    // timeoutSeconds ends the stream cleanly.
    let short = cms
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), short.count())
        .await
        .unwrap();
    assert_eq!(
        n, 39,
        "initial ADDED events for the current objects, then the end"
    );
}

#[tokio::test]
async fn bookmarks_and_streaming_lists() {
    let api = ApiServer::new(EmbeddedOptions {
        bookmark_interval: Duration::from_millis(100),
        ..opts()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&api));
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
    )
    .await
    .unwrap();
    let stream = cms
        .watch(&WatchParams::streaming_lists().timeout(2), "")
        .await
        .unwrap();
    let events: Vec<_> =
        tokio::time::timeout(Duration::from_secs(5), stream.take(3).collect::<Vec<_>>())
            .await
            .unwrap();
    assert!(matches!(events[0], Ok(WatchEvent::Added(_))));
    match &events[1] {
        Ok(WatchEvent::Bookmark(b)) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
    assert!(
        matches!(events[2], Ok(WatchEvent::Bookmark(_))),
        "periodic bookmark"
    );
}

#[tokio::test]
async fn watcher_and_reflector_follow_the_store() {
    let (_api, c) = setup();
    let pods: Api<Pod> = Api::default_namespaced(c);
    pods.create(&PostParams::default(), &pod("before", json!({"app": "x"})))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<Pod>();
    let stream = reflector(
        writer,
        watcher(pods.clone(), watcher::Config::default().labels("app=x")),
    )
    .applied_objects()
    .boxed();
    let handle = tokio::spawn(async move {
        let mut s = stream;
        while let Some(Ok(_)) = s.next().await {}
    });
    reader.wait_until_ready().await.unwrap();
    pods.create(&PostParams::default(), &pod("after", json!({"app": "x"})))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("other", json!({"app": "y"})))
        .await
        .unwrap();
    eventually(5, "reflector sees both matching pods", || {
        let r = reader.clone();
        async move { (r.state().len() == 2).then_some(()) }
    })
    .await;
    pods.patch(
        "after",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    eventually(5, "a pod leaving the selector leaves the store", || {
        let r = reader.clone();
        async move { (r.state().len() == 1).then_some(()) }
    })
    .await;
    handle.abort();
}

fn rs(name: &str) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"rs": name}},
                 "template": {"metadata": {"labels": {"rs": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    }))
    .unwrap()
}

fn owned_pod(name: &str, owner: &ReplicaSet, block: bool, finalizer: bool) -> Pod {
    let mut p = pod(name, json!({}));
    p.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: owner.name_any(),
            uid: owner.uid().unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(block),
        },
    ]);
    if finalizer {
        p.metadata.finalizers = Some(vec!["test.tephra.io/hold".into()]);
    }
    p
}

#[tokio::test]
async fn garbage_collection_background_foreground_and_orphan() {
    let (_api, c) = setup();
    let rss: Api<ReplicaSet> = Api::default_namespaced(c.clone());
    let pods: Api<Pod> = Api::default_namespaced(c);
    let pp = PostParams::default();

    // Background: owner goes, dependents follow.
    let a = rss.create(&pp, &rs("a")).await.unwrap();
    pods.create(&pp, &owned_pod("a-1", &a, false, false))
        .await
        .unwrap();
    pods.create(&pp, &owned_pod("a-2", &a, false, false))
        .await
        .unwrap();
    rss.delete("a", &DeleteParams::background()).await.unwrap();
    eventually(5, "dependents of a are collected", || {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
                .then_some(())
        }
    })
    .await;

    // Orphan: dependents stay, without the reference.
    let b = rss.create(&pp, &rs("b")).await.unwrap();
    pods.create(&pp, &owned_pod("b-1", &b, false, false))
        .await
        .unwrap();
    rss.delete("b", &DeleteParams::orphan()).await.unwrap();
    assert!(rss.get_opt("b").await.unwrap().is_none());
    let kept = pods.get("b-1").await.unwrap();
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );

    // Foreground: the owner waits for a blocking dependent held by a finalizer.
    let f = rss.create(&pp, &rs("f")).await.unwrap();
    pods.create(&pp, &owned_pod("f-1", &f, true, true))
        .await
        .unwrap();
    pods.create(&pp, &owned_pod("f-2", &f, false, false))
        .await
        .unwrap();
    rss.delete("f", &DeleteParams::foreground()).await.unwrap();
    let waiting = rss.get("f").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(
        waiting
            .finalizers()
            .contains(&"foregroundDeletion".to_string())
    );
    assert!(
        pods.get_opt("f-2").await.unwrap().is_none(),
        "non-blocking dependent deleted"
    );
    let held = pods.get("f-1").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    pods.patch(
        "f-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually(5, "owner goes once the blocking dependent is gone", || {
        let rss = rss.clone();
        async move { rss.get_opt("f").await.unwrap().is_none().then_some(()) }
    })
    .await;
    assert!(pods.get_opt("f-1").await.unwrap().is_none());

    // A dependent with a second live owner only loses the reference.
    let x = rss.create(&pp, &rs("x")).await.unwrap();
    let y = rss.create(&pp, &rs("y")).await.unwrap();
    let mut shared = owned_pod("shared", &x, false, false);
    let mut refs = shared.metadata.owner_references.take().unwrap();
    refs.extend(
        owned_pod("tmp", &y, false, false)
            .metadata
            .owner_references
            .unwrap(),
    );
    refs[1].controller = Some(false);
    shared.metadata.owner_references = Some(refs);
    pods.create(&pp, &shared).await.unwrap();
    rss.delete("x", &DeleteParams::default()).await.unwrap();
    let left = pods.get("shared").await.unwrap();
    assert_eq!(left.metadata.owner_references.unwrap().len(), 1);

    // Preconditions.
    let e = rss
        .delete(
            "y",
            &DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    uid: Some("wrong".into()),
                    resource_version: None,
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e).0, 409);
    let _ = PropagationPolicy::Background;
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_api, c) = setup();
    let cms: Api<ConfigMap> = Api::default_namespaced(c);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "fin", "finalizers": ["x.io/y"]}}))
            .unwrap(),
    )
    .await
    .unwrap();
    let pending = cms.delete("fin", &DeleteParams::default()).await.unwrap();
    assert!(
        pending
            .left()
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(
        cms.get("fin")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    cms.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("fin").await.unwrap().is_none());
}

#[tokio::test]
async fn namespaces_exist_and_their_deletion_removes_content() {
    let (_api, c) = setup();
    let nss: Api<Namespace> = Api::all(c.clone());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    for want in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.contains(&want.to_string()), "{want} in {names:?}");
    }
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
    )
    .await
    .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(c, "team");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap(),
    )
    .await
    .unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    assert!(nss.get_opt("team").await.unwrap().is_none());
    let e = cms.get("c").await.unwrap_err();
    assert_eq!(code(&e).0, 404);
}

#[tokio::test]
async fn nodes_are_ready_and_cluster_scoped() {
    let (_api, c) = setup();
    let nodes: Api<Node> = Api::all(c);
    let list = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 3);
    let n = nodes.get("node-1").await.unwrap();
    assert_eq!(n.labels()["kubernetes.io/hostname"], "node-1");
    let alloc = n.status.unwrap().allocatable.unwrap();
    assert_eq!(alloc["cpu"].0, "8");
    assert_eq!(alloc["memory"].0, "32Gi");
    assert_eq!(alloc["pods"].0, "110");
}

/// The CRDs tephra ships and installs (`manifests/crds/`, file names as Volcano's).
fn own_crds() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/crds")
}

fn crd_in(dir: &Path, file: &str) -> CustomResourceDefinition {
    let path = dir.join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

#[tokio::test]
async fn crds_start_serving_with_schema_defaults_and_status_subresource() {
    crds_serve_from(&own_crds()).await;
}

/// The same behaviour from Volcano's own CRD files, where this machine has them.
#[tokio::test]
async fn volcanos_own_crds_serve_alike() {
    let Some(dir) = common::volcano_or_skip("volcano-crds", "volcanos_own_crds_serve_alike") else {
        return;
    };
    crds_serve_from(&dir).await;
}

/// CRDs from `dir` become served resources with schema defaults, pruning, a status
/// subresource, cluster scope for Queues, and are removed with their objects on delete.
async fn crds_serve_from(dir: &Path) {
    let (api, c) = setup();
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    for f in [
        "batch.volcano.sh_jobs.yaml",
        "scheduling.volcano.sh_queues.yaml",
        "scheduling.volcano.sh_podgroups.yaml",
    ] {
        crds.create(&PostParams::default(), &crd_in(dir, f))
            .await
            .unwrap();
    }
    let established = crds.get("jobs.batch.volcano.sh").await.unwrap();
    let conds = established.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = Discovery::new(c.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.group == "batch.volcano.sh" && ar.kind == "Job")
        .expect("vcjob discovered");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "status"));
    let (qar, qcaps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Queue")
        .unwrap();
    assert_eq!(qcaps.scope, Scope::Cluster);

    let jobs: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"minAvailable": 1, "unknownField": 1,
                 "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]},
        "status": {"state": {"phase": "Running"}}
    }))
    .unwrap();
    let created = jobs.create(&PostParams::default(), &job).await.unwrap();
    assert_eq!(
        created.data["spec"]["queue"], "default",
        "schema default applied"
    );
    assert_eq!(created.data["spec"]["maxRetry"], 3);
    assert!(
        created.data["spec"].get("unknownField").is_none(),
        "unknown fields pruned"
    );
    assert!(
        created.data.get("status").is_none(),
        "status dropped on create"
    );

    let st = jobs
        .patch_status(
            "j",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"state": {"phase": "Running"}}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["state"]["phase"], "Running");
    let e = jobs
        .patch(
            "j",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        code(&e).0,
        415,
        "strategic merge is not for custom resources"
    );

    let queues: Api<DynamicObject> = Api::all_with(c.clone(), &qar);
    let q: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}, "spec": {}
    }))
    .unwrap();
    let q = queues.create(&PostParams::default(), &q).await.unwrap();
    assert!(q.metadata.namespace.is_none());

    // Deleting the CRD stops serving it and removes its objects.
    crds.delete("jobs.batch.volcano.sh", &DeleteParams::default())
        .await
        .unwrap();
    let e = jobs.get("j").await.unwrap_err();
    assert_eq!(code(&e).0, 404);
    assert_eq!(api.count("batch.volcano.sh", "jobs"), 0);
}

#[tokio::test]
async fn size_limits_like_the_real_api() {
    let (_api, c) = setup();
    let cms: Api<ConfigMap> = Api::default_namespaced(c);
    let big = "x".repeat(2 * 1024 * 1024);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "big"}, "data": {"a": big}})).unwrap();
    let e = cms.create(&PostParams::default(), &cm).await.unwrap_err();
    assert_eq!(code(&e).0, 413);
    let huge = "x".repeat(4 * 1024 * 1024);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "huge"}, "data": {"a": huge}})).unwrap();
    let e = cms.create(&PostParams::default(), &cm).await.unwrap_err();
    assert_eq!(code(&e).0, 413);
}

#[tokio::test]
async fn faults_hit_client_writes_but_not_reads() {
    let api = ApiServer::new(EmbeddedOptions {
        faults: FaultSpec::parse("write-error=1,seed=3").unwrap(),
        ..opts()
    });
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let e = pods
        .create(&PostParams::default(), &pod("f", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(&e), (500, "InternalError".into()));
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nothing stored"
    );
    assert_eq!(
        Api::<Node>::all(client(&api))
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        3
    );

    let api = ApiServer::new(EmbeddedOptions {
        faults: FaultSpec::parse("conflict=1,seed=3").unwrap(),
        ..opts()
    });
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    pods.create(&PostParams::default(), &pod("f", json!({})))
        .await
        .unwrap();
    let e = pods
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e), (409, "Conflict".into()));

    let api = ApiServer::new(EmbeddedOptions {
        faults: FaultSpec::parse("watch-cut=0.3").unwrap(),
        ..opts()
    });
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let s = pods.watch(&WatchParams::default(), "0").await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), s.count()).await;
    assert!(ended.is_ok(), "watch cut by the fault");
}

#[tokio::test]
async fn kubelet_stand_in_runs_pods_to_completion_and_restarts() {
    let shutdown = CancellationToken::new();
    let api = ApiServer::start(
        EmbeddedOptions {
            sim_kubelet: true,
            ..opts()
        },
        shutdown.clone(),
    );
    let pods: Api<Pod> = Api::default_namespaced(client(&api));
    let bind = |name: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": "node-1"}});
    let mk = |name: &str, secs: &str, exit: &str, policy: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {"simulation.tephra.io/run-seconds": secs, "simulation.tephra.io/exit-code": exit}},
            "spec": {"restartPolicy": policy, "containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap()
    };
    for (n, secs, exit, policy) in [
        ("ok", "0.1", "0", "Never"),
        ("bad", "0.1", "2", "Never"),
        ("retry", "0.1", "1", "OnFailure"),
        ("idle", "", "0", "Always"),
    ] {
        pods.create(&PostParams::default(), &mk(n, secs, exit, policy))
            .await
            .unwrap();
        let _: Value = pods
            .create_subresource("binding", n, &PostParams::default(), &bind(n))
            .await
            .unwrap();
    }
    let phase = |p: Pod| p.status.and_then(|s| s.phase).unwrap_or_default();
    eventually(5, "ok succeeds", || {
        let pods = pods.clone();
        async move { (phase(pods.get("ok").await.unwrap()) == "Succeeded").then_some(()) }
    })
    .await;
    eventually(5, "bad fails", || {
        let pods = pods.clone();
        async move { (phase(pods.get("bad").await.unwrap()) == "Failed").then_some(()) }
    })
    .await;
    let bad = pods.get("bad").await.unwrap();
    let term = bad.status.unwrap().container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(term.exit_code, 2);
    eventually(5, "retry restarts", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("retry").await.unwrap();
            p.status
                .and_then(|s| s.container_statuses)
                .is_some_and(|c| c[0].restart_count >= 2)
                .then_some(())
        }
    })
    .await;
    let idle = pods.get("idle").await.unwrap();
    assert_eq!(phase(idle.clone()), "Running");
    assert!(idle.status.unwrap().container_statuses.unwrap()[0].ready);
    // An unbound pod stays Pending.
    pods.create(&PostParams::default(), &pod("unbound", json!({})))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(phase(pods.get("unbound").await.unwrap()), "Pending");
    shutdown.cancel();
}

#[tokio::test]
async fn served_over_tcp_for_outside_clients() {
    let api = ApiServer::new(opts());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(embedded::serve(api, listener, shutdown.clone()));
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let c = Client::try_from(config).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.create(&PostParams::default(), &pod("tcp", json!({})))
        .await
        .unwrap();
    let w = pods
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(5), w.collect::<Vec<_>>())
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    let v = c.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

// ---------------------------------------------------------------- admission webhooks

struct Webhooks {
    addr: std::net::SocketAddr,
    ca_bundle: Value,
    seen: Arc<std::sync::Mutex<Vec<Value>>>,
    handle: axum_server::Handle<std::net::SocketAddr>,
}

/// An HTTPS webhook server with a throw-away CA: `/mutate` labels the object, `/deny` refuses,
/// every review is recorded.
async fn webhook_server() -> Webhooks {
    use axum::routing::post;
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["wh.tephra.svc".to_string(), "127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let seen: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let answer = |review: &Value, allowed: bool, patch: Option<Value>| {
        let uid = review["request"]["uid"].clone();
        let mut resp = json!({"uid": uid, "allowed": allowed});
        if !allowed {
            resp["status"] = json!({"code": 403, "message": "no"});
        }
        if let Some(p) = patch {
            resp["patchType"] = json!("JSONPatch");
            resp["patch"] =
                serde_json::to_value(k8s_openapi::ByteString(p.to_string().into_bytes())).unwrap();
        }
        axum::Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}),
        )
    };
    let (s1, s2) = (seen.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            "/mutate",
            post(move |axum::Json(review): axum::Json<Value>| {
                let seen = s1.clone();
                async move {
                    seen.lock().unwrap().push(review.clone());
                    let has_labels = review["request"]["object"]["metadata"]["labels"].is_object();
                    let patch = if has_labels {
                        json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
                    } else {
                        json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
                    };
                    answer(&review, true, Some(patch))
                }
            }),
        )
        .route(
            "/deny",
            post(move |axum::Json(review): axum::Json<Value>| {
                let seen = s2.clone();
                async move {
                    seen.lock().unwrap().push(review.clone());
                    answer(&review, false, None)
                }
            }),
        );
    let config = axum_server::tls_rustls::RustlsConfig::from_pem(
        cert.pem().into_bytes(),
        key.serialize_pem().into_bytes(),
    )
    .await
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, config)
        .unwrap()
        .handle(handle.clone());
    tokio::spawn(server.serve(app.into_make_service()));
    let ca_bundle = serde_json::to_value(k8s_openapi::ByteString(ca.pem().into_bytes())).unwrap();
    Webhooks {
        addr,
        ca_bundle,
        seen,
        handle,
    }
}

fn hook(name: &str, client_config: Value, resources: &[&str], group: &str, extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE"], "apiGroups": [group], "apiVersions": ["*"], "resources": resources}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    });
    if let (Some(h), Some(e)) = (h.as_object_mut(), extra.as_object()) {
        h.extend(e.clone());
    }
    h
}

#[tokio::test]
async fn admission_webhooks_mutate_then_validate_over_https() {
    let wh = webhook_server().await;
    let api = ApiServer::new(EmbeddedOptions {
        webhook_service_addr: Some(wh.addr),
        ..opts()
    });
    let c = client(&api);
    let dyn_create = |api_version: &str, kind: &str, plural: &str, obj: Value| {
        let c = c.clone();
        let (g, v) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let ar = kube::discovery::ApiResource {
            group: g.into(),
            version: v.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        async move {
            let a: Api<DynamicObject> = Api::all_with(c, &ar);
            a.create(
                &PostParams::default(),
                &serde_json::from_value(obj).unwrap(),
            )
            .await
        }
    };
    let by_service = json!({"service": {"namespace": "tephra", "name": "wh", "path": "/mutate", "port": 443}, "caBundle": wh.ca_bundle});
    let by_url = |path: &str| json!({"url": format!("https://127.0.0.1:{}{path}", wh.addr.port()), "caBundle": wh.ca_bundle});
    dyn_create("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", json!({
        "metadata": {"name": "tephra"},
        "webhooks": [
            hook("pods.tephra.io", by_service.clone(), &["pods"], "", json!({})),
            hook("jobs.tephra.io", by_service.clone(), &["jobs"], "batch.volcano.sh", json!({})),
        ]
    }))
    .await
    .unwrap();
    dyn_create("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", json!({
        "metadata": {"name": "tephra"},
        "webhooks": [
            hook("deny.tephra.io", by_url("/deny"), &["configmaps"], "", json!({"objectSelector": {"matchLabels": {"deny": "yes"}}})),
            hook("closed-fail.tephra.io", json!({"url": "https://127.0.0.1:1/x", "caBundle": wh.ca_bundle}), &["secrets"], "",
                 json!({"failurePolicy": "Fail", "objectSelector": {"matchLabels": {"policy": "fail"}}})),
            hook("closed-ignore.tephra.io", json!({"url": "https://127.0.0.1:1/x", "caBundle": wh.ca_bundle}), &["secrets"], "",
                 json!({"failurePolicy": "Ignore", "objectSelector": {"matchLabels": {"policy": "ignore"}}})),
            hook("untrusted.tephra.io", json!({"url": format!("https://127.0.0.1:{}/deny", wh.addr.port()),
                 "caBundle": serde_json::to_value(k8s_openapi::ByteString(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_vec())).unwrap()}),
                 &["services"], "", json!({})),
        ]
    }))
    .await
    .unwrap();

    // Mutating via a service reference: the patch is applied; the webhook saw no uid yet.
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let mut gp = pod("", json!({}));
    gp.metadata.name = None;
    gp.metadata.generate_name = Some("mut-".into());
    let p = pods.create(&PostParams::default(), &gp).await.unwrap();
    assert_eq!(p.labels().get("mutated").map(String::as_str), Some("yes"));
    let review = wh.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["request"]["operation"], "CREATE");
    assert_eq!(review["request"]["kind"]["kind"], "Pod");
    assert_eq!(review["request"]["namespace"], "default");
    assert!(
        review["request"]["object"]["metadata"].get("uid").is_none(),
        "mutation happens before uid assignment"
    );
    assert_eq!(
        review["request"]["object"]["spec"]["schedulerName"], "default-scheduler",
        "defaults before admission"
    );

    // Validating via url: a denial carries the webhook's code and message.
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    let denied = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "d", "labels": {"deny": "yes"}}}))
                .unwrap(),
        )
        .await
        .unwrap_err();
    let (code_, _) = code(&denied);
    assert_eq!(code_, 403);
    assert!(
        denied
            .to_string()
            .contains("admission webhook \"deny.tephra.io\" denied the request: no"),
        "{denied}"
    );
    assert!(cms.get_opt("d").await.unwrap().is_none());
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "ok"}})).unwrap(),
    )
    .await
    .expect("objectSelector keeps the webhook off unlabelled objects");

    // failurePolicy.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(c.clone());
    let e = secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "s1", "labels": {"policy": "fail"}}}),
            )
            .unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e).0, 500);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "s2", "labels": {"policy": "ignore"}}}),
            )
            .unwrap(),
        )
        .await
        .expect("failurePolicy Ignore lets the write through");

    // A caBundle that does not sign the server's certificate fails the call (Fail by default).
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::default_namespaced(c.clone());
    let e = svcs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "svc"}, "spec": {}})).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e).0, 500);

    // CRD schema defaults are applied before admission: a vcJob without a queue arrives with
    // `queue: default`.
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.create(
        &PostParams::default(),
        &crd_in(&own_crds(), "batch.volcano.sh_jobs.yaml"),
    )
    .await
    .unwrap();
    let jobs_ar = kube::discovery::ApiResource {
        group: "batch.volcano.sh".into(),
        version: "v1alpha1".into(),
        api_version: "batch.volcano.sh/v1alpha1".into(),
        kind: "Job".into(),
        plural: "jobs".into(),
    };
    let jobs: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &jobs_ar);
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let created = jobs.get("j").await.unwrap();
    assert_eq!(
        created.labels().get("mutated").map(String::as_str),
        Some("yes")
    );
    let review = wh
        .seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|r| r["request"]["kind"]["group"] == "batch.volcano.sh")
        .cloned()
        .unwrap();
    assert_eq!(review["request"]["object"]["spec"]["queue"], "default");
    wh.handle.shutdown();
}

#[tokio::test]
async fn manifests_seed_the_api_like_kubectl_apply() {
    let (api, c) = setup();
    let text =
        std::fs::read_to_string(own_crds().join("scheduling.volcano.sh_queues.yaml")).unwrap();
    api.apply_manifests(&text).await.unwrap();
    let two = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v1\n---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata:\n  name: research\nspec:\n  weight: 2\n";
    let stored = api.apply_manifests(two).await.unwrap();
    assert_eq!(stored.len(), 2);
    api.apply_manifests("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v2\n")
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(c.clone());
    assert_eq!(
        cms.get("a").await.unwrap().data.unwrap()["k"],
        "v2",
        "re-applying updates"
    );
    let qar = kube::discovery::ApiResource {
        group: "scheduling.volcano.sh".into(),
        version: "v1beta1".into(),
        api_version: "scheduling.volcano.sh/v1beta1".into(),
        kind: "Queue".into(),
        plural: "queues".into(),
    };
    let q = Api::<DynamicObject>::all_with(c, &qar)
        .get("research")
        .await
        .unwrap();
    assert_eq!(q.data["spec"]["weight"], 2);
    assert!(
        api.apply_manifests("apiVersion: nope/v1\nkind: Nope\nmetadata:\n  name: x\n")
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_reflector_converges_through_watch_cuts_and_expired_versions() {
    // A tiny history and streams cut every 200 ms: watches resume from their last version or,
    // when that is gone (410), relist. Either way the cache must end up exact.
    let api = ApiServer::new(EmbeddedOptions {
        watch_history: 16,
        faults: FaultSpec::parse("watch-cut=0.2").unwrap(),
        ..opts()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&api));
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(cms.clone(), watcher::Config::default()))
        .applied_objects()
        .boxed();
    let handle = tokio::spawn(async move {
        let mut s = stream;
        for _ in 0..100_000 {
            if s.next().await.is_none() {
                return;
            }
        }
    });
    reader.wait_until_ready().await.unwrap();
    for round in 0..6 {
        for i in 0..50 {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": format!("c-{round}-{i}")}}))
                    .unwrap();
            cms.create(&PostParams::default(), &cm).await.unwrap();
        }
        for i in 0..10 {
            cms.delete(&format!("c-{round}-{i}"), &DeleteParams::default())
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    eventually(5, "the cache holds exactly the 240 live objects", || {
        let r = reader.clone();
        async move { (r.state().len() == 240).then_some(()) }
    })
    .await;
    handle.abort();
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_replicas() {
    let (_api, c) = setup();
    let deploys: Api<Deployment> = Api::default_namespaced(c);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    }))
    .unwrap();
    let created = deploys.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(created.spec.replicas, Some(1), "replicas defaulted");
    let sc = deploys.get_scale("web").await.unwrap();
    assert_eq!(sc.spec.unwrap().replicas, Some(1));
    assert_eq!(sc.status.unwrap().selector.as_deref(), Some("app=web"));
    let sc = deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(sc.spec.unwrap().replicas, Some(4));
    let after = deploys.get("web").await.unwrap();
    assert_eq!(after.spec.replicas, Some(4));
    assert_eq!(after.metadata.generation, Some(2));
    let e = deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&e).0, 422);
}
