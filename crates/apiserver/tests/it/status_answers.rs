//! What kube-rs sees when the embedded API refuses: the code, reason, message and `details` of
//! each `Status`, and the LIST answers for `resourceVersion`, `resourceVersionMatch` and
//! continue tokens, compared with what kube-apiserver answers.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch};
use kube::core::Status;
use kube::{Client, ResourceExt};
use serde_json::json;
use tephra_apiserver::{ApiServer, EmbeddedOptions, router};

fn setup(history: usize) -> (Arc<ApiServer>, Client) {
    let api = ApiServer::new(EmbeddedOptions {
        nodes: 1,
        sim_kubelet: false,
        sim_controllers: false,
        watch_history: history,
        ..Default::default()
    });
    let client = Client::new(router(api.clone()), "default");
    (api, client)
}

fn status(e: kube::Error) -> Box<Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"v": value}
    }))
    .unwrap()
}

async fn put(cms: &Api<ConfigMap>, name: &str, value: &str) {
    cms.patch(
        name,
        &PatchParams::apply("test"),
        &Patch::Apply(cm(name, value)),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn conflicts_name_the_resource_and_object() {
    let (_api, client) = setup(1000);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("c", "1"))
        .await
        .unwrap();
    let mut changed = first.clone();
    changed.data = Some([("v".to_string(), "2".to_string())].into());
    cms.replace("c", &PostParams::default(), &changed)
        .await
        .unwrap();
    // The first version again: stale.
    let s = status(
        cms.replace("c", &PostParams::default(), &first)
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let d = s.details.expect("details");
    assert_eq!(
        (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
        ("c", "", "configmaps")
    );

    let s = status(
        cms.create(&PostParams::default(), &cm("c", "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(s.details.expect("details").name, "c");

    let s = status(cms.get("absent").await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.details.expect("details").kind, "configmaps");

    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("not-the-uid".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let s = status(cms.delete("c", &wrong).await.unwrap_err());
    assert_eq!(s.code, 409);
    assert!(
        s.message.starts_with(
            "Operation cannot be fulfilled on configmaps \"c\": Precondition failed: UID in precondition: not-the-uid"
        ),
        "{}",
        s.message
    );
    assert_eq!(s.details.expect("details").name, "c");
}

#[tokio::test]
async fn forbidden_and_binding_conflicts_carry_details() {
    let (_api, client) = setup(1000);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = |name: &str, class: Option<&str>| -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        if let Some(c) = class {
            spec["priorityClassName"] = json!(c);
        }
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name}, "spec": spec}))
        .unwrap()
    };
    let s = status(
        pods.create(&PostParams::default(), &pod("p", Some("nope")))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "pods \"p\" is forbidden: no PriorityClass with name nope was found"
    );
    let d = s.details.expect("details");
    assert_eq!((d.name.as_str(), d.kind.as_str()), ("p", "pods"));

    pods.create(&PostParams::default(), &pod("b", None))
        .await
        .unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "b"}, "target": {"kind": "Node", "name": "node-1"}});
    let req = |body: &serde_json::Value| {
        http::Request::post("/api/v1/namespaces/default/pods/b/binding")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).unwrap())
            .unwrap()
    };
    client
        .request::<Status>(req(&binding))
        .await
        .expect("the first binding succeeds");
    let s = status(client.request::<Status>(req(&binding)).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on pods/binding \"b\": pod b is already assigned to node \"node-1\""
    );
    assert_eq!(s.details.expect("details").kind, "pods/binding");
}

#[tokio::test]
async fn lists_honour_resource_version_and_match() {
    let (api, client) = setup(1000);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    put(&cms, "a", "1").await;
    let then = api.resource_version().to_string();
    put(&cms, "a", "2").await;

    let exact = cms
        .list(
            &ListParams::default()
                .at(&then)
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(
        exact.metadata.resource_version.as_deref(),
        Some(then.as_str())
    );
    assert_eq!(
        exact.items[0].data.as_ref().unwrap()["v"],
        "1",
        "the state at {then}"
    );

    let newer = cms
        .list(
            &ListParams::default()
                .at(&then)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(newer.items[0].data.as_ref().unwrap()["v"], "2");

    let any = cms.list(&ListParams::default().match_any()).await.unwrap();
    assert_eq!(any.items.len(), 1);

    let future = (api.resource_version() + 50).to_string();
    let s = status(
        cms.list(
            &ListParams::default()
                .at(&future)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (504, "Timeout"));
    assert!(
        s.message.starts_with(&format!(
            "Timeout: Too large resource version: {future}, current: "
        )),
        "{}",
        s.message
    );
    let d = s.details.expect("details");
    assert_eq!(d.causes[0].reason, "ResourceVersionTooLarge");
    assert_eq!(d.retry_after_seconds, 1);

    // kube-rs refuses this combination itself; kubectl and client-go send it.
    let refused = http::Request::get(
        "/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=Exact",
    )
    .body(Vec::new())
    .unwrap();
    let s = status(
        client
            .request::<serde_json::Value>(refused)
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
    );
}

#[tokio::test]
async fn continue_tokens_expire_with_410_and_a_token_to_go_on() {
    // The store keeps at least 16 events per resource: its compaction window.
    let (_api, client) = setup(16);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..6 {
        put(&cms, &format!("c{i}"), "1").await;
    }
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().expect("more pages");
    assert_eq!(first.metadata.remaining_item_count, Some(4));

    // Within the window the next page shows the list as it was.
    put(&cms, "c3", "2").await;
    let second = cms
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        second
            .items
            .iter()
            .map(|c| c.name_any())
            .collect::<Vec<_>>(),
        ["c2", "c3"]
    );
    assert_eq!(second.items[1].data.as_ref().unwrap()["v"], "1");
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );

    // Past the window: 410 Expired, with a token that continues at the latest state.
    for round in 0..20 {
        put(&cms, "c0", &round.to_string()).await;
    }
    let next = second.metadata.continue_.clone().expect("more pages");
    let s = status(
        cms.list(&ListParams::default().limit(2).continue_token(&next))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert!(
        s.message.starts_with(
            "The provided continue parameter is too old to display a consistent list result."
        ),
        "{}",
        s.message
    );
    let fresh = s
        .metadata
        .and_then(|m| m.continue_)
        .expect("a continue token in the Status");
    let rest = cms
        .list(&ListParams::default().limit(2).continue_token(&fresh))
        .await
        .unwrap();
    assert_eq!(
        rest.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        ["c4", "c5"]
    );
    assert_eq!(rest.items[1].data.as_ref().unwrap()["v"], "1");
}

/// A streaming list (a watch with `sendInitialEvents`) against a server whose `WatchList`
/// feature is off: refused before the watch starts, with kube-apiserver's code and words, so
/// a client can tell it apart from a failure worth retrying; the default server streams.
#[tokio::test]
async fn a_streaming_list_is_refused_with_422_when_watch_list_is_off() {
    use futures::StreamExt;
    use kube::api::WatchParams;
    use kube::core::WatchEvent;

    let api = ApiServer::new(EmbeddedOptions {
        nodes: 1,
        sim_kubelet: false,
        sim_controllers: false,
        watch_list: false,
        ..Default::default()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(Client::new(router(api), "default"));
    cms.create(&PostParams::default(), &cm("c0", "0"))
        .await
        .unwrap();
    let streaming = WatchParams::streaming_lists();
    let s = match cms.watch(&streaming, "0").await {
        Err(e) => status(e),
        Ok(_) => panic!("a streaming list was served with WatchList off"),
    };
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message.contains(
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
        ),
        "{}",
        s.message
    );
    // A plain watch is served as before.
    assert!(cms.watch(&WatchParams::default(), "0").await.is_ok());

    let (_api, client) = setup(100);
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &cm("c0", "0"))
        .await
        .unwrap();
    let mut events = Box::pin(cms.watch(&streaming, "0").await.unwrap());
    let first = events.next().await.unwrap().unwrap();
    assert!(
        matches!(first, WatchEvent::Added(ref c) if c.name_any() == "c0"),
        "{first:?}"
    );
    match events.next().await.unwrap().unwrap() {
        WatchEvent::Bookmark(b) => {
            assert!(
                b.metadata
                    .annotations
                    .contains_key("k8s.io/initial-events-end")
            );
        }
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
}
