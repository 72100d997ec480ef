//! CRD schema validation in the embedded API, seen through kube-rs: a custom object that breaks
//! its CRD's structural schema is refused on create, update, patch and status writes with
//! `422 Invalid`, kube-apiserver's message and one `details.causes` entry per field; Volcano's
//! own examples pass (against tephra's CRDs and, where this machine has them, Volcano's).

use crate::common;

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Client, core::Status};
use serde_json::{Value, json};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions};

async fn setup() -> (Arc<ApiServer>, Client) {
    let api = ApiServer::new(EmbeddedOptions {
        nodes: 0,
        sim_kubelet: false,
        sim_controllers: false,
        ..Default::default()
    });
    let client = Client::new(embedded::router(api.clone()), "default");
    tephra::cluster::bootstrap::install_crds(&client)
        .await
        .unwrap();
    (api, client)
}

fn jobs(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("batch.volcano.sh", "v1alpha1", "Job"),
        "jobs",
    );
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn job(name: &str, replicas: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"minAvailable": 1, "schedulerName": "volcano", "tasks": [{
            "name": "t", "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}
    }))
    .unwrap()
}

fn status_of(r: Result<DynamicObject, kube::Error>) -> Box<Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

const REPLICAS_MESSAGE: &str = "spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0";

fn assert_replicas_refused(s: &Status, name: &str) {
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    assert_eq!(
        s.message,
        format!("Job.batch.volcano.sh \"{name}\" is invalid: {REPLICAS_MESSAGE}")
    );
    let d = s.details.as_ref().expect("details");
    assert_eq!(
        (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
        (name, "batch.volcano.sh", "Job")
    );
    assert_eq!(d.causes.len(), 1);
    assert_eq!(d.causes[0].field, "spec.tasks[0].replicas");
    assert_eq!(d.causes[0].reason, "FieldValueInvalid");
    assert_eq!(
        d.causes[0].message,
        "Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0"
    );
}

#[tokio::test]
async fn an_invalid_vcjob_is_refused_on_every_write_with_causes() {
    let (api, client) = setup().await;
    let jobs = jobs(&client);
    let s = status_of(jobs.create(&PostParams::default(), &job("x", -1)).await);
    assert_replicas_refused(&s, "x");
    assert_eq!(api.count("batch.volcano.sh", "jobs"), 0, "nothing stored");

    jobs.create(&PostParams::default(), &job("ok", 1))
        .await
        .unwrap();
    let mut replaced = jobs.get("ok").await.unwrap();
    replaced.data["spec"]["tasks"][0]["replicas"] = json!(-1);
    let s = status_of(jobs.replace("ok", &PostParams::default(), &replaced).await);
    assert_replicas_refused(&s, "ok");

    let merge = json!({"spec": {"tasks": [{"name": "t", "replicas": -1, "template": {}}]}});
    let s = status_of(
        jobs.patch("ok", &PatchParams::default(), &Patch::Merge(&merge))
            .await,
    );
    assert_replicas_refused(&s, "ok");

    let status = json!({"status": {"succeeded": "many", "state": {"phase": "Nonsense"}}});
    let s = status_of(
        jobs.patch_status("ok", &PatchParams::default(), &Patch::Merge(&status))
            .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    let fields: Vec<&str> = s
        .details
        .as_ref()
        .unwrap()
        .causes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert!(fields.contains(&"status.succeeded"), "{fields:?}");
    assert!(
        s.message
            .starts_with("Job.batch.volcano.sh \"ok\" is invalid: ["),
        "{}",
        s.message
    );
    assert_eq!(
        jobs.get("ok").await.unwrap().data["spec"]["tasks"][0]["replicas"],
        1
    );
}

#[tokio::test]
async fn a_dry_run_is_validated_too_and_valid_writes_still_pass() {
    let (_api, client) = setup().await;
    let jobs = jobs(&client);
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    assert_replicas_refused(&status_of(jobs.create(&dry, &job("d", -1)).await), "d");
    let created = jobs
        .create(&PostParams::default(), &job("fine", 0))
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"]["queue"], "default",
        "defaults still applied"
    );
    let relabel = json!({"metadata": {"labels": {"a": "b"}}});
    jobs.patch("fine", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
}

/// Dry-run creates every Volcano-group example; none may be refused by the schema.
async fn examples_pass(client: &Client, examples: &[(String, Value)]) -> usize {
    let mut checked = 0;
    for (file, doc) in examples {
        let Some((group, version)) = doc["apiVersion"].as_str().and_then(|a| a.split_once('/'))
        else {
            continue;
        };
        if !group.ends_with("volcano.sh") {
            continue;
        }
        let kind = doc["kind"].as_str().unwrap();
        let plural = format!("{}s", kind.to_ascii_lowercase());
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, kind),
            &plural,
        );
        let api: Api<DynamicObject> = if kind == "Queue" {
            Api::all_with(client.clone(), &ar)
        } else {
            Api::namespaced_with(client.clone(), "default", &ar)
        };
        let mut obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        obj.metadata.namespace = None;
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        match api.create(&dry, &obj).await {
            Ok(_) => checked += 1,
            Err(kube::Error::Api(s))
                if s.code == 422 && s.details.as_ref().is_some_and(|d| !d.causes.is_empty()) =>
            {
                panic!("{file}: {}", s.message)
            }
            // Other refusals (a name collision, say) are not the schema's business here.
            Err(_) => {}
        }
    }
    checked
}

#[tokio::test]
async fn volcanos_examples_pass_tephras_and_volcanos_crds() {
    let Some(dir) = common::volcano_or_skip(
        "volcano-examples",
        "volcanos_examples_pass_tephras_and_volcanos_crds",
    ) else {
        return;
    };
    let examples = common::manifests_in(&dir);
    let (_api, client) = setup().await;
    assert!(examples_pass(&client, &examples).await >= 5);
    let Some(crds) = common::volcano_dir("volcano-crds") else {
        return;
    };
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in common::manifests_in(&crds) {
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        let mut current = crd_api.get(&name).await.unwrap();
        let volcano: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
        current.spec = volcano.spec;
        crd_api
            .replace(&name, &PostParams::default(), &current)
            .await
            .unwrap();
    }
    assert!(examples_pass(&client, &examples).await >= 5);
    let jobs = jobs(&client);
    assert_replicas_refused(
        &status_of(jobs.create(&PostParams::default(), &job("v", -1)).await),
        "v",
    );
}
