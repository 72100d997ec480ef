//! The read-only web view on the metrics listener (`/ui`, off with `--no-ui`): the edge of
//! [`tephra_webview`]. Each request reads the shared watch caches (no API request is made)
//! and the scheduler's last queue figures, and serves the page the pure crate renders. The
//! what-if form runs [`tephra_scheduler::whatif::predict`] on a copy of the cached cluster;
//! nothing here writes anything anywhere.

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::map_response;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::core::DeserializeGuard;
use tephra_scheduler::outcome::QueueFigures;
use tephra_scheduler::whatif::{self, ClusterState, DEFAULT_HORIZON_MS, Options};
use tephra_webview::{BASE_PATH, PageError, View, WhatIfAnswer};

use crate::api::{Job, PodGroup, Queue};
use crate::cluster::Caches;
use crate::scheduler::Scheduler;

/// What the view's handlers read.
pub struct WebView {
    caches: Caches,
    scheduler: Scheduler,
    /// `--config`, read again at each what-if (as the scheduler reloads it); the built-in
    /// configuration without one.
    config_path: Option<PathBuf>,
    scheduler_names: Vec<String>,
}

impl std::fmt::Debug for WebView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebView")
            .field("config_path", &self.config_path)
            .finish_non_exhaustive()
    }
}

impl WebView {
    /// A view of `caches` and `scheduler`'s figures; what-if answers use the configuration at
    /// `config_path` (the built-in one when `None`) and the served `scheduler_names`.
    pub fn new(
        caches: Caches,
        scheduler: Scheduler,
        config_path: Option<PathBuf>,
        scheduler_names: Vec<String>,
    ) -> Self {
        Self {
            caches,
            scheduler,
            config_path,
            scheduler_names,
        }
    }
}

/// The view's routes, for [`crate::server::BoundServer::with_metrics_routes`].
pub fn router(view: Arc<WebView>) -> Router {
    Router::new()
        .route(BASE_PATH, get(overview))
        .route("/ui/", get(|| async { Redirect::permanent(BASE_PATH) }))
        .route("/ui/gangs/{namespace}/{name}", get(gang))
        .route("/ui/whatif", get(whatif_form).post(whatif))
        .route("/ui/{*rest}", get(unknown))
        .layer(map_response(page_headers))
        .with_state(view)
}

/// Pages are built from this process's own data, with styles inline and no script: the
/// browser is told to load nothing else, to frame them nowhere and to send no referrer.
async fn page_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The cached objects a page reads, held while it is built.
struct Objects {
    queues: Vec<Arc<DeserializeGuard<Queue>>>,
    pod_groups: Vec<Arc<DeserializeGuard<PodGroup>>>,
    pods: Vec<Arc<Pod>>,
}

impl Objects {
    fn read(caches: &Caches) -> Self {
        Self {
            queues: caches.queues().state(),
            pod_groups: caches.podgroups().state(),
            pods: caches.all_pods(),
        }
    }

    /// The pure crate's view of these objects (the malformed custom objects left out), now.
    fn view<'a>(&'a self, figures: Option<&'a QueueFigures>) -> View<'a> {
        View {
            now_s: now().as_second(),
            queues: self
                .queues
                .iter()
                .filter_map(|g| g.0.as_ref().ok())
                .collect(),
            pod_groups: self
                .pod_groups
                .iter()
                .filter_map(|g| g.0.as_ref().ok())
                .collect(),
            pods: self.pods.iter().map(AsRef::as_ref).collect(),
            figures,
        }
    }
}

fn now() -> Timestamp {
    let t = Timestamp::now();
    // Whole seconds, as the API stamps objects.
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn page(result: Result<String, PageError>) -> Response {
    match result {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "web view page");
            (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
        }
    }
}

fn not_found(message: &str) -> Response {
    let mut r = page(tephra_webview::render_not_found(message));
    if r.status() == StatusCode::OK {
        *r.status_mut() = StatusCode::NOT_FOUND;
    }
    r
}

async fn overview(State(view): State<Arc<WebView>>) -> Response {
    let objects = Objects::read(&view.caches);
    let figures = view.scheduler.queue_figures();
    let v = objects.view(figures.as_deref());
    page(tephra_webview::render_overview(&tephra_webview::overview(
        &v,
    )))
}

async fn gang(
    State(view): State<Arc<WebView>>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let objects = Objects::read(&view.caches);
    let v = objects.view(None);
    match tephra_webview::gang_page(&v, &namespace, &name) {
        Some(p) => page(tephra_webview::render_gang(&p)),
        None => not_found(&format!(
            "No PodGroup {namespace}/{name}: it may have finished and been deleted."
        )),
    }
}

async fn unknown(Path(rest): Path<String>) -> Response {
    not_found(&format!("Nothing at /ui/{rest}."))
}

async fn whatif_form() -> Response {
    let answer = WhatIfAnswer {
        namespace: "default".into(),
        ..WhatIfAnswer::default()
    };
    page(tephra_webview::render_whatif(
        &answer,
        DEFAULT_HORIZON_MS / 1000,
    ))
}

/// The what-if form's fields.
#[derive(Debug, serde::Deserialize)]
struct WhatIfForm {
    #[serde(default)]
    jobs: String,
    #[serde(default)]
    namespace: String,
}

async fn whatif(State(view): State<Arc<WebView>>, Form(form): Form<WhatIfForm>) -> Response {
    let namespace = match form.namespace.trim() {
        "" => "default".to_string(),
        ns => ns.to_string(),
    };
    // The question is read first: a bad file or text is answered without copying the cluster.
    let asked = options(&view).and_then(|opts| {
        let tried = if form.jobs.trim().is_empty() {
            Vec::new()
        } else {
            crate::vcctl::objects::jobs_from_file(&form.jobs, "the pasted text", &namespace, false)
                .map_err(|e| e.to_string())?
        };
        Ok((opts, tried))
    });
    let result = match asked {
        Err(e) => Err(e),
        Ok((opts, tried)) => {
            let state = cluster_state(&view.caches);
            tokio::task::spawn_blocking(move || {
                whatif::predict(&state, &tried, &opts).map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(format!("the simulation stopped: {e}")))
        }
    };
    let answer = WhatIfAnswer {
        input: form.jobs,
        namespace,
        result: Some(result),
    };
    page(tephra_webview::render_whatif(
        &answer,
        DEFAULT_HORIZON_MS / 1000,
    ))
}

/// The options of a what-if: the served scheduler names and the configuration in force.
fn options(view: &WebView) -> Result<Options, String> {
    let conf = match &view.config_path {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
            format!(
                "reading the scheduler configuration {}: {e}",
                path.display()
            )
        })?),
        None => None,
    };
    Ok(Options {
        conf,
        scheduler_names: view.scheduler_names.clone(),
        ..Options::default()
    })
}

/// The cached cluster as `tephra simulate` reads it, taken now.
fn cluster_state(caches: &Caches) -> ClusterState {
    fn valid<K: Clone>(items: Vec<Arc<DeserializeGuard<K>>>) -> Vec<K> {
        items
            .iter()
            .filter_map(|g| g.0.as_ref().ok().cloned())
            .collect()
    }
    fn all<K: Clone>(items: Vec<Arc<K>>) -> Vec<K> {
        items.iter().map(|o| (**o).clone()).collect()
    }
    let mut state = ClusterState::new(Time(now()));
    state.nodes = all::<Node>(caches.nodes().state());
    state.pods = all::<Pod>(caches.all_pods());
    state.queues = valid(caches.queues().state());
    state.pod_groups = valid(caches.podgroups().state());
    state.jobs = valid::<Job>(caches.jobs().state());
    state.priority_classes = all::<PriorityClass>(caches.priority_classes().state());
    state.strip();
    state
}
