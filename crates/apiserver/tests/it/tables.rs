//! What kubectl's `get` asks for and gets: `meta.k8s.io/v1` Tables for lists and watches
//! (`kubectl get -w`), with each row's `object` as `includeObject` asks (`kubectl get
//! --sort-by` asks for whole objects), compared with what kube-apiserver answers.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{Request, StatusCode, header};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tephra_apiserver::{ApiServer, EmbeddedOptions, router};
use tower::ServiceExt;

/// The Accept header kubectl sends for `kubectl get` (and `get -w`).
const KUBECTL_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

fn setup() -> (Arc<ApiServer>, Client) {
    let api = ApiServer::new(EmbeddedOptions {
        nodes: 0,
        sim_kubelet: false,
        sim_controllers: false,
        ..Default::default()
    });
    let client = Client::new(router(api.clone()), "default");
    (api, client)
}

async fn create_cm(client: &Client, name: &str, data: &[(&str, &str)]) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": data,
    }))
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
}

/// GETs `path` with kubectl's Accept header; the status and the whole body (a watch must end by
/// its `timeoutSeconds`).
async fn get(api: &Arc<ApiServer>, path: &str) -> (StatusCode, Vec<u8>) {
    let req = Request::get(path)
        .header(header::ACCEPT, KUBECTL_ACCEPT)
        .body(Body::empty())
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), router(api.clone()).oneshot(req))
        .await
        .expect("answer within 10s")
        .unwrap();
    let status = resp.status();
    let body = tokio::time::timeout(
        Duration::from_secs(10),
        axum::body::to_bytes(resp.into_body(), 1 << 24),
    )
    .await
    .expect("body within 10s")
    .unwrap();
    (status, body.to_vec())
}

/// The events of a watch body: (type, object).
fn events(body: &[u8]) -> Vec<(String, Value)> {
    body.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: Value = serde_json::from_slice(l).unwrap();
            (v["type"].as_str().unwrap().to_string(), v["object"].clone())
        })
        .collect()
}

fn column_names(t: &Value) -> Vec<&str> {
    t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_table_watch_sends_columns_in_its_first_event_only() {
    let (api, client) = setup();
    create_cm(&client, "a", &[("k", "v")]).await;
    let writer = {
        let client = client.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            create_cm(&client, "b", &[("k", "v"), ("l", "w")]).await;
        })
    };
    let (status, body) = get(
        &api,
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
    )
    .await;
    writer.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    let evs = events(&body);
    assert_eq!(evs.len(), 2, "{}", String::from_utf8_lossy(&body));
    let (first, second) = (&evs[0], &evs[1]);
    assert_eq!(first.0, "ADDED");
    assert_eq!(first.1["kind"], "Table");
    assert_eq!(first.1["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(column_names(&first.1), ["Name", "Data", "Age"]);
    assert_eq!(first.1["rows"].as_array().unwrap().len(), 1);
    assert_eq!(first.1["rows"][0]["cells"][0], "a");
    assert_eq!(first.1["rows"][0]["cells"][1], 1);
    // The Table's version is its object's, as kube-apiserver's table convertors set it.
    let row_object = &first.1["rows"][0]["object"];
    assert_eq!(row_object["kind"], "PartialObjectMetadata");
    assert_eq!(row_object["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(
        first.1["metadata"]["resourceVersion"],
        row_object["metadata"]["resourceVersion"]
    );
    assert!(row_object.get("data").is_none());
    // Later events: rows only; kube-apiserver encodes them with `NoHeaders`, which leaves the
    // column definitions null.
    assert_eq!(second.0, "ADDED");
    assert_eq!(second.1["kind"], "Table");
    assert_eq!(second.1["columnDefinitions"], Value::Null);
    assert_eq!(second.1["rows"][0]["cells"][0], "b");
    assert_eq!(second.1["rows"][0]["cells"][1], 2);
}

#[tokio::test]
async fn a_watch_without_table_in_accept_sends_objects() {
    let (api, client) = setup();
    create_cm(&client, "a", &[("k", "v")]).await;
    let req = Request::get("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1")
        .header(header::ACCEPT, "application/json")
        .body(Body::empty())
        .unwrap();
    let resp = router(api.clone()).oneshot(req).await.unwrap();
    let body = tokio::time::timeout(
        Duration::from_secs(10),
        axum::body::to_bytes(resp.into_body(), 1 << 24),
    )
    .await
    .unwrap()
    .unwrap();
    let evs = events(&body);
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].1["kind"], "ConfigMap");
    assert_eq!(evs[0].1["data"]["k"], "v");
}

#[tokio::test]
async fn include_object_sets_what_rows_carry_in_lists_and_watches() {
    let (api, client) = setup();
    create_cm(&client, "a", &[("k", "v")]).await;
    let list = "/api/v1/namespaces/default/configmaps";
    let watch = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1";
    for (include, check) in [
        (
            "Object",
            &(|o: &Value| o["kind"] == "ConfigMap" && o["data"]["k"] == "v")
                as &dyn Fn(&Value) -> bool,
        ),
        ("Metadata", &|o: &Value| {
            o["kind"] == "PartialObjectMetadata"
                && o["metadata"]["name"] == "a"
                && o.get("data").is_none()
        }),
        ("None", &|o: &Value| o.is_null()),
        ("", &|o: &Value| o["kind"] == "PartialObjectMetadata"),
    ] {
        let (status, body) = get(&api, &format!("{list}?includeObject={include}")).await;
        assert_eq!(status, StatusCode::OK, "{include}");
        let t: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(t["kind"], "Table", "{include}");
        assert_eq!(t["rows"][0]["cells"][0], "a", "{include}");
        assert!(check(&t["rows"][0]["object"]), "list, {include}: {t}");

        let (status, body) = get(&api, &format!("{watch}&includeObject={include}")).await;
        assert_eq!(status, StatusCode::OK, "{include}");
        let evs = events(&body);
        assert_eq!(evs.len(), 1, "{include}");
        assert!(
            check(&evs[0].1["rows"][0]["object"]),
            "watch, {include}: {:?}",
            evs[0]
        );

        let (status, body) = get(&api, &format!("{list}/a?includeObject={include}")).await;
        assert_eq!(status, StatusCode::OK, "{include}");
        let t: Value = serde_json::from_slice(&body).unwrap();
        assert!(check(&t["rows"][0]["object"]), "get, {include}: {t}");
    }
}

#[tokio::test]
async fn an_unknown_include_object_is_refused_before_the_watch_starts() {
    let (api, _client) = setup();
    for path in [
        "/api/v1/namespaces/default/configmaps?includeObject=All",
        "/api/v1/namespaces/default/configmaps?watch=true&includeObject=All",
    ] {
        let (status, body) = get(&api, path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        let s: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(s["kind"], "Status");
        assert_eq!(s["reason"], "BadRequest");
        assert_eq!(
            s["message"],
            "Unable to convert to Table as requested: includeObject: Invalid value: \"All\": must be 'Metadata', 'Object', 'None', or empty"
        );
    }
}

#[tokio::test]
async fn sorting_clients_get_the_fields_they_sort_by() {
    // kubectl get pods --sort-by=.spec.nodeName asks for whole objects and sorts by a field
    // that no PartialObjectMetadata has.
    let (api, client) = setup();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    for (name, node) in [("p1", "n-b"), ("p2", "n-a")] {
        let p = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let (status, body) = get(&api, "/api/v1/namespaces/default/pods?includeObject=Object").await;
    assert_eq!(status, StatusCode::OK);
    let t: Value = serde_json::from_slice(&body).unwrap();
    let nodes: Vec<(&str, &str)> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["cells"][0].as_str().unwrap(),
                r["object"]["spec"]["nodeName"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(nodes, [("p1", "n-b"), ("p2", "n-a")]);
}

#[tokio::test]
async fn the_initial_events_bookmark_of_a_table_watch_is_a_table_row_too() {
    // As kube-apiserver sends it: a row printed from the empty bookmark object, whose
    // PartialObjectMetadata survives `includeObject=None` for its annotation's sake.
    let (api, client) = setup();
    create_cm(&client, "a", &[("k", "v")]).await;
    let (status, body) = get(
        &api,
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1&includeObject=None&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let evs = events(&body);
    assert_eq!(evs[0].0, "ADDED");
    assert_eq!(evs[0].1["rows"][0]["object"], Value::Null);
    let (kind, bookmark) = &evs[1];
    assert_eq!(kind, "BOOKMARK");
    assert_eq!(bookmark["kind"], "Table");
    assert_eq!(bookmark["columnDefinitions"], Value::Null);
    assert_eq!(bookmark["rows"][0]["cells"], json!(["", 0, "<unknown>"]));
    let object = &bookmark["rows"][0]["object"];
    assert_eq!(object["kind"], "PartialObjectMetadata");
    assert_eq!(
        object["metadata"],
        json!({"resourceVersion": bookmark["metadata"]["resourceVersion"],
               "annotations": {"k8s.io/initial-events-end": "true"}})
    );
}
