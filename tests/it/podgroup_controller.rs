//! The PodGroup and Queue controllers against the embedded API, in process. The tests play
//! the Kubernetes workload controllers themselves: they create Deployments, ReplicaSets,
//! StatefulSets and their pods (with the ownerReferences and labels those controllers set),
//! and change them as a rollout or a scale would.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tephra::api::scheduling::QueueState;
use tephra::api::{Command, PodGroup, Queue, keys};
use tephra::cluster::Caches;
use tephra::controllers::{self, ControllerConfig, Controllers};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions};

use crate::common::counter_sum;
use tokio_util::sync::CancellationToken;

use crate::common::served::eventually;

struct Env {
    client: Client,
    _api: Arc<ApiServer>,
    registry: prometheus::Registry,
    stop: CancellationToken,
    controllers: Option<Controllers>,
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(c) = self.controllers.take() {
            c.stop();
        }
        self.stop.cancel();
    }
}

async fn env() -> Env {
    env_with(Duration::ZERO).await
}

/// [`env`] with the controllers' writes of Queue status taking `latency` to reach the API, as
/// on a loaded API server: what the controller read can change before its write lands.
async fn env_with(latency: Duration) -> Env {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let api = ApiServer::new(EmbeddedOptions {
        nodes: 1,
        sim_kubelet: false,
        ..Default::default()
    });
    let client = Client::new(embedded::router(api.clone()), "default");
    let controllers_client = Client::new(
        embedded::router(api.clone()).layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let slow = req.method() == axum::http::Method::PATCH
                    && req.uri().path().contains("/queues/")
                    && req.uri().path().ends_with("/status");
                async move {
                    if slow {
                        tokio::time::sleep(latency).await;
                    }
                    next.run(req).await
                }
            },
        )),
        "default",
    );
    tephra::cluster::bootstrap::install_crds(&client)
        .await
        .unwrap();
    tephra::cluster::ensure_default_queues(&client)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let (caches, mut feeds) = Caches::new();
    let config = ControllerConfig {
        queue_resync: Duration::from_secs(1),
        ..ControllerConfig::default()
    };
    let registry = prometheus::Registry::new();
    let controllers = controllers::start(
        &controllers_client,
        &caches,
        &mut feeds,
        config,
        &registry,
        &stop,
    )
    .unwrap();
    feeds.run(&client, &stop);
    caches.wait_synced(Duration::from_secs(10)).await.unwrap();
    Env {
        client,
        _api: api,
        registry,
        stop,
        controllers: Some(controllers),
    }
}

fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
           "controller": true, "blockOwnerDeletion": true})
}

fn pod_json(name: &str, owner: Option<Value>, labels: Value, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels,
                     "ownerReferences": owner.map(|o| vec![o]).unwrap_or_default()},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": cpu, "memory": "1Gi"},
                               "limits": {"nvidia.com/gpu": "1"}}}]}
    })
}

async fn create<K>(api: &Api<K>, v: Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

fn group_of(p: &Pod) -> Option<String> {
    p.annotations()
        .get(keys::KUBE_GROUP_NAME_ANNOTATION)
        .cloned()
}

#[tokio::test]
async fn deployment_gang_update_scale_and_garbage_collection() {
    let e = env().await;
    let c = e.client.clone();
    let deployments: Api<Deployment> = Api::default_namespaced(c.clone());
    let rss: Api<ReplicaSet> = Api::default_namespaced(c.clone());
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let pgs: Api<PodGroup> = Api::default_namespaced(c.clone());

    let gang = json!({keys::GROUP_MIN_MEMBER_ANNOTATION: "4", "volcano.sh/sla-waiting-time": "1m"});
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "main", "image": "busybox"}]}});
    let dep: Deployment = create(&deployments, json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "annotations": gang},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    }))
    .await;
    // The Deployment controller's ReplicaSet: its annotations copied, a controller reference.
    let rs: ReplicaSet = create(&rss, json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-7d9f", "annotations": gang,
                     "labels": {"app": "web", "pod-template-hash": "7d9f"},
                     "ownerReferences": [owner("Deployment", "web", &dep.uid().unwrap())]},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    }))
    .await;
    let rs_uid = rs.uid().unwrap();
    let pg_name = format!("podgroup-{rs_uid}");
    for i in 0..4 {
        create(
            &pods,
            pod_json(
                &format!("web-7d9f-{i}"),
                Some(owner("ReplicaSet", "web-7d9f", &rs_uid)),
                json!({"app": "web", "pod-template-hash": "7d9f"}),
                "500m",
            ),
        )
        .await;
    }

    let pg = eventually(10, "the Deployment's PodGroup", || async {
        pgs.get_opt(&pg_name).await.unwrap()
    })
    .await;
    assert_eq!(pg.spec.min_member, Some(4));
    let mr = pg.spec.min_resources.clone().unwrap();
    assert_eq!(mr["cpu"].0, "2");
    assert_eq!(mr["memory"].0, "4Gi");
    assert_eq!(mr["nvidia.com/gpu"].0, "4");
    assert_eq!(mr["pods"].0, "4");
    assert_eq!(pg.spec.queue.as_deref(), Some("default"));
    assert_eq!(
        pg.annotations()
            .get("volcano.sh/sla-waiting-time")
            .map(String::as_str),
        Some("1m")
    );
    let refs = pg.owner_references();
    assert_eq!(
        (refs[0].kind.as_str(), refs[0].uid.as_str()),
        ("ReplicaSet", rs_uid.as_str())
    );
    eventually(10, "every pod linked to the one PodGroup", || async {
        let list = pods.list(&Default::default()).await.unwrap();
        list.items
            .iter()
            .all(|p| group_of(p).as_deref() == Some(pg_name.as_str()))
            .then_some(())
    })
    .await;
    assert_eq!(pgs.list(&Default::default()).await.unwrap().items.len(), 1);

    // An annotation change on the Deployment reaches the PodGroup (the ReplicaSet still has
    // the old copy).
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"volcano.sh/sla-waiting-time": "5m"}}}),
            ),
        )
        .await
        .unwrap();
    eventually(10, "the new annotation on the PodGroup", || async {
        let pg = pgs.get(&pg_name).await.unwrap();
        (pg.annotations()
            .get("volcano.sh/sla-waiting-time")
            .map(String::as_str)
            == Some("5m"))
        .then_some(())
    })
    .await;

    // Scale to 0: the PodGroup goes.
    rss.patch(
        "web-7d9f",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    eventually(10, "the PodGroup deleted at 0 replicas", || async {
        pgs.get_opt(&pg_name).await.unwrap().is_none().then_some(())
    })
    .await;

    // Back to 4: it comes back; deleting the ReplicaSet removes it through GC.
    rss.patch(
        "web-7d9f",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    eventually(10, "the PodGroup made again", || async {
        pgs.get_opt(&pg_name).await.unwrap()
    })
    .await;
    rss.delete("web-7d9f", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        10,
        "the PodGroup garbage-collected with its ReplicaSet",
        || async { pgs.get_opt(&pg_name).await.unwrap().is_none().then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn stateful_set_rolling_update_counts_current_revision_pods() {
    let e = env().await;
    let c = e.client.clone();
    let stss: Api<StatefulSet> = Api::default_namespaced(c.clone());
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let pgs: Api<PodGroup> = Api::default_namespaced(c.clone());

    let template = json!({"metadata": {"labels": {"app": "db"}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "main", "image": "busybox"}]}});
    let sts: StatefulSet = create(
        &stss,
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "annotations": {keys::GROUP_MIN_MEMBER_ANNOTATION: "2"}},
            "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": template}
        }),
    )
    .await;
    let uid = sts.uid().unwrap();
    let set_revision = |rev: &'static str| {
        let stss = stss.clone();
        async move {
            stss.patch_status(
                "db",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"replicas": 2, "updateRevision": rev, "currentRevision": "db-v1"}})),
            )
            .await
            .unwrap();
        }
    };
    set_revision("db-v1").await;
    let sts_pod = |i: usize, rev: &str, cpu: &str| {
        pod_json(
            &format!("db-{i}"),
            Some(owner("StatefulSet", "db", &uid)),
            json!({"app": "db", keys::CONTROLLER_REVISION_HASH: rev}),
            cpu,
        )
    };
    for i in 0..2 {
        create(&pods, sts_pod(i, "db-v1", "1")).await;
    }
    let pg_name = format!("podgroup-{uid}");
    let pg = eventually(10, "the StatefulSet's PodGroup", || async {
        pgs.get_opt(&pg_name).await.unwrap()
    })
    .await;
    assert_eq!(pg.spec.min_resources.unwrap()["cpu"].0, "2");

    // Rolling update to db-v2 with 3 cpu per pod: db-1 is replaced first; only it counts.
    set_revision("db-v2").await;
    pods.delete("db-1", &DeleteParams::default()).await.unwrap();
    create(&pods, sts_pod(1, "db-v2", "3")).await;
    eventually(10, "minResources from the current revision", || async {
        let pg = pgs.get(&pg_name).await.unwrap();
        (pg.spec.min_resources.unwrap()["cpu"].0 == "6").then_some(())
    })
    .await;
    eventually(10, "both revisions' pods linked", || async {
        let list = pods.list(&Default::default()).await.unwrap();
        (list.items.len() == 2
            && list
                .items
                .iter()
                .all(|p| group_of(p).as_deref() == Some(pg_name.as_str())))
        .then_some(())
    })
    .await;
}

#[tokio::test]
async fn plain_pods_foreign_groups_and_other_schedulers() {
    let e = env().await;
    let c = e.client.clone();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let pgs: Api<PodGroup> = Api::default_namespaced(c.clone());

    let mut lone = pod_json("lone", None, json!({}), "1");
    lone["metadata"]["annotations"] = json!({keys::QUEUE_NAME_ANNOTATION: "default"});
    let lone: Pod = create(&pods, lone).await;
    let pg_name = format!("podgroup-{}", lone.uid().unwrap());
    let pg = eventually(10, "the lone pod's PodGroup", || async {
        pgs.get_opt(&pg_name).await.unwrap()
    })
    .await;
    let r = &pg.owner_references()[0];
    assert_eq!(
        (r.kind.as_str(), r.name.as_str(), r.controller),
        ("Pod", "lone", Some(true))
    );
    assert_eq!(pg.spec.min_member, Some(1));
    eventually(10, "the lone pod linked", || async {
        (group_of(&pods.get("lone").await.unwrap()).as_deref() == Some(pg_name.as_str()))
            .then_some(())
    })
    .await;

    // Grouped by someone else (LeaderWorkerSet, a user's PodGroup): left alone.
    let mut lws = pod_json("lws-0", None, json!({}), "1");
    lws["metadata"]["annotations"] = json!({keys::KUBE_GROUP_NAME_ANNOTATION: "lws-group"});
    let lws: Pod = create(&pods, lws).await;
    // Another scheduler's pod: left alone.
    let mut other = pod_json("other", None, json!({}), "1");
    other["spec"]["schedulerName"] = json!("default-scheduler");
    let other: Pod = create(&pods, other).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for p in [&lws, &other] {
        let name = format!("podgroup-{}", p.uid().unwrap());
        assert!(pgs.get_opt(&name).await.unwrap().is_none(), "{name}");
    }
    assert_eq!(
        group_of(&pods.get("lws-0").await.unwrap()).as_deref(),
        Some("lws-group")
    );
    assert_eq!(group_of(&pods.get("other").await.unwrap()), None);

    // Deleting the pod removes its PodGroup through GC.
    pods.delete("lone", &DeleteParams::default()).await.unwrap();
    eventually(10, "the lone pod's PodGroup collected", || async {
        pgs.get_opt(&pg_name).await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn queue_state_counts_and_commands() {
    let e = env().await;
    let c = e.client.clone();
    let queues: Api<Queue> = Api::all(c.clone());
    let pgs: Api<PodGroup> = Api::default_namespaced(c.clone());
    let commands: Api<Command> = Api::default_namespaced(c.clone());

    let q = queues
        .create(&PostParams::default(), &Queue::test("team").parent("root"))
        .await
        .unwrap();
    let status = |want: QueueState, pending: i32| {
        let queues = queues.clone();
        async move {
            eventually(
                10,
                &format!("queue {want} with {pending} pending"),
                || async {
                    let s = queues.get("team").await.unwrap().status.unwrap_or_default();
                    (s.state.as_ref() == Some(&want) && s.pending == Some(pending)).then_some(())
                },
            )
            .await
        }
    };
    status(QueueState::Open, 0).await;
    pgs.create(
        &PostParams::default(),
        &PodGroup::test("g").in_queue("team").min_member(1),
    )
    .await
    .unwrap();
    status(QueueState::Open, 1).await;

    let cmd =
        |name: &str, action| Command::for_queue(name, "default", "team", &q.uid().unwrap(), action);
    commands
        .create(
            &PostParams::default(),
            &cmd("close", tephra::api::bus::Action::CloseQueue),
        )
        .await
        .unwrap();
    status(QueueState::Closing, 1).await;
    eventually(10, "the Command consumed", || async {
        commands
            .get_opt("close")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    pgs.delete("g", &DeleteParams::default()).await.unwrap();
    status(QueueState::Closed, 0).await;

    // An unknown action is refused (Command deleted, state unchanged); OpenQueue opens.
    commands
        .create(
            &PostParams::default(),
            &cmd("bad", tephra::api::bus::Action::RestartJob),
        )
        .await
        .unwrap();
    eventually(10, "the bad Command consumed", || async {
        commands
            .get_opt("bad")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(
        queues.get("team").await.unwrap().state(),
        Some(&QueueState::Closed)
    );
    commands
        .create(
            &PostParams::default(),
            &cmd("open", tephra::api::bus::Action::OpenQueue),
        )
        .await
        .unwrap();
    status(QueueState::Open, 0).await;
    // The built-in queues got their state too.
    assert_eq!(
        queues.get("default").await.unwrap().state(),
        Some(&QueueState::Open)
    );
}

/// The scheduler writes `status.allocated` of a queue after every session while the Queue
/// controller writes its counts: the two must not turn each other's writes into conflicts,
/// which would fail reconciles (and page whoever watches the errors alert) on a busy cluster.
#[tokio::test]
async fn queue_counts_are_written_beside_the_schedulers_allocated_without_conflicts() {
    let e = env_with(Duration::from_millis(30)).await;
    let c = e.client.clone();
    let queues: Api<Queue> = Api::all(c.clone());
    let pgs: Api<PodGroup> = Api::default_namespaced(c.clone());
    queues
        .create(&PostParams::default(), &Queue::test("busy").parent("root"))
        .await
        .unwrap();
    let counted = |pending: i32| {
        let queues = queues.clone();
        async move {
            eventually(
                10,
                &format!("queue busy with {pending} pending"),
                || async {
                    let s = queues.get("busy").await.unwrap().status.unwrap_or_default();
                    (s.state == Some(QueueState::Open) && s.pending == Some(pending)).then_some(())
                },
            )
            .await
        }
    };
    counted(0).await;
    // The queue's first state write is pinned and may meet a stale cache once (a reconcile
    // that read the queue before its state landed): that conflict is real and retried. Count
    // from when the state has settled.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = queue_reconcile_errors(&e.registry);

    // The scheduler's writer, as a session writes it: a merge patch of `allocated` alone.
    let writing = CancellationToken::new();
    let writer = tokio::spawn({
        let (queues, writing) = (queues.clone(), writing.clone());
        async move {
            for i in 0..2_000u32 {
                if writing.is_cancelled() {
                    break;
                }
                let patch = json!({"status": {"allocated": {"cpu": format!("{}m", i % 7 * 100)}}});
                queues
                    .patch_status("busy", &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
    for i in 0..20 {
        pgs.create(
            &PostParams::default(),
            &PodGroup::test(&format!("g{i}"))
                .in_queue("busy")
                .min_member(1),
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    counted(20).await;
    for i in 0..20 {
        pgs.delete(&format!("g{i}"), &DeleteParams::default())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    counted(0).await;
    writing.cancel();
    writer.await.unwrap();

    assert_eq!(
        queue_reconcile_errors(&e.registry) - before,
        0.0,
        "the Queue controller's reconciles failed"
    );
    let status = queues.get("busy").await.unwrap().status.unwrap_or_default();
    assert!(status.allocated.is_some(), "the scheduler's field is kept");
}

/// `tephra_controller_reconcile_errors_total` of the Queue controller, over its error labels.
fn queue_reconcile_errors(registry: &prometheus::Registry) -> f64 {
    counter_sum(
        registry,
        "tephra_controller_reconcile_errors_total",
        "controller",
        "queue-controller",
    )
}

/// Volcano's hierarchy, as its e2e suite `jobseq` ("Queue Command Close And Open With
/// Hierarchical Queues") checks it: closing a parent closes its child, opening the child while
/// the parent is closed does not take, and reopening the parent reopens the child it closed.
#[tokio::test]
async fn queue_hierarchy_closes_and_reopens_children() {
    let e = env().await;
    let c = e.client.clone();
    let queues: Api<Queue> = Api::all(c.clone());
    let commands: Api<Command> = Api::default_namespaced(c.clone());
    let parent = queues
        .create(&PostParams::default(), &Queue::test("dept").parent("root"))
        .await
        .unwrap();
    let child = queues
        .create(
            &PostParams::default(),
            &Queue::test("dept-a").parent("dept"),
        )
        .await
        .unwrap();
    let state_of = |name: &'static str, want: QueueState| {
        let queues = queues.clone();
        async move {
            eventually(10, &format!("queue {name} {want}"), || async {
                let q = queues.get(name).await.unwrap();
                (q.state() == Some(&want)).then_some(q)
            })
            .await
        }
    };
    state_of("dept-a", QueueState::Open).await;
    let send = |cmd_name: &str, target: &Queue, action| {
        let commands = commands.clone();
        let cmd = Command::for_queue(
            cmd_name,
            "default",
            &target.name_any(),
            &target.uid().unwrap(),
            action,
        );
        async move { commands.create(&PostParams::default(), &cmd).await.unwrap() }
    };

    send("close-dept", &parent, tephra::api::bus::Action::CloseQueue).await;
    state_of("dept", QueueState::Closed).await;
    let a = state_of("dept-a", QueueState::Closed).await;
    assert_eq!(
        a.annotations()
            .get("volcano.sh/closed-by-parent")
            .map(String::as_str),
        Some("true")
    );

    // Opening the child under a closed parent does not take.
    send("open-a", &child, tephra::api::bus::Action::OpenQueue).await;
    eventually(10, "the child's Command consumed", || async {
        commands
            .get_opt("open-a")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        queues.get("dept-a").await.unwrap().state(),
        Some(&QueueState::Closed)
    );

    send("open-dept", &parent, tephra::api::bus::Action::OpenQueue).await;
    state_of("dept", QueueState::Open).await;
    let a = state_of("dept-a", QueueState::Open).await;
    assert_eq!(
        a.annotations()
            .get("volcano.sh/closed-by-parent")
            .map(String::as_str),
        Some("false")
    );
}
