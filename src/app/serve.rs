//! `tephra serve`: the service, as named stages from the flags to a drained exit.

use crate::controllers::hypernode::discovery::DiscoveryFile;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::engine::{self, Engine};
use super::{AppError, bind_api, check_api_listen, embedded_options};
use crate::admission::{self, AdmissionConfig, AdmissionContext, AdmissionMetrics};
use crate::certs::{self, CertError, PemChain};
use crate::cli::{ServeArgs, TlsMode};
use crate::cluster::startup::StartupError;
use crate::cluster::webhooks::{self, WebhookHost, WebhookTarget};
use crate::cluster::{self, CacheFeeds, Caches, ClusterError};
use crate::extender::{self, Extender, ExtenderOptions};
use crate::leader::{Elector, ElectorConfig, Leadership, Outcome};
use crate::metrics::Metrics;
use crate::report::report;
use crate::scheduler::{Scheduler, SchedulerOptions};
use crate::selftls::{SelfTlsConfig, SelfTlsError};
use crate::server::{self, ManagedTls, ServerConfig, ServerError, ServerState, TlsSource};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions};

/// `tephra serve`: pick the cluster (or start the embedded API), start the shared caches, the
/// HTTPS and metrics listeners with the admission webhooks, and run until a signal.
///
/// One named stage per step, each handing the next what it needs:
///
/// ```text
///  preflight ─▶ Base::start ─▶ connect ─▶ start_core ─▶ start_http ─▶ start_embedded_mode
///  (flags,      (metrics,      (client;    (caches,      (webhooks,    (API, CRDs, webhook
///   files)       signals,       embedded    scheduler,    extender,     registration,
///                leadership)    listener)   controllers)  listeners)    stand-in)
///      ─▶ start_background ─▶ (until a signal) ─▶ drain
///         (built-in queues,                        (everything that talks to the API
///          elector, leader-only tasks)              stops, then the API itself)
/// ```
pub(super) async fn serve(args: ServeArgs) -> Result<(), AppError> {
    let checked = preflight(&args)?;
    let scheduler_conf = scheduler_conf(&args)?;
    let discovery = hypernode_discovery(&args)?;
    let base = Base::start(&args)?;
    let connected = connect(&args, checked.embedded).await?;
    let engine = choose_engine(&args, &base, &connected).await?;
    let mut core = start_core(
        &args,
        &base,
        &connected.client,
        scheduler_conf,
        discovery,
        engine,
    )?;
    let mut http = start_http(&args, &base, &connected.client, &core, engine).await?;
    let stand_in = match connected.embedded {
        Some(api) => {
            start_embedded_mode(
                &args,
                &base,
                &connected.client,
                api,
                checked.webhook,
                &mut http,
                core.feeds.take(),
            )
            .await?
        }
        None => None,
    };
    track_default_queues(core.caches.clone(), base.state.clone());
    let background = start_background(&args, &base, &connected.client, &core, &http);
    // Until a signal (or a lost Lease): then /readyz fails, in-flight requests drain.
    (&mut http.running)
        .await
        .map_err(|e| AppError::Task(e.to_string()))??;
    drain(base, core.controllers, background, stand_in, http).await
}

/// The HTTPS listener's configuration from the `serve` flags.
fn server_config(args: &ServeArgs) -> ServerConfig {
    ServerConfig {
        listen: args.listen,
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => TlsSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => TlsSource::SelfSigned,
        },
        metrics_listen: Some(args.metrics_listen),
        enable_http2: args.enable_http2,
        cert_reload_interval: args.tls_reload_interval,
        client_ca: args.client_ca.clone(),
        ..ServerConfig::default()
    }
}

/// How long `serve` lets the watch caches take to list before it reports not-ready in the log
/// (readiness stays false until they have synced either way).
const CACHE_SYNC_WARN: std::time::Duration = std::time::Duration::from_secs(30);

/// The webhook Service the manifests name; the embedded API sends its reviews there, mapped to
/// the local HTTPS listener, and verifies the certificate under these names.
const WEBHOOK_SERVICE: (&str, &str) = ("tephra", "tephra-system");

/// What `serve` learns from its flags and files before anything starts: a bad flag or an
/// unusable file is one line before a port is bound or a cluster contacted.
struct Checked {
    /// The embedded API's options (`--embedded` only).
    embedded: Option<EmbeddedOptions>,
    /// With `--embedded --tls-cert`: how the embedded API calls the webhooks and the caBundle
    /// it trusts. `None` with the self-signed pair, whose CA is made at bind time.
    webhook: Option<(WebhookHost, String)>,
}

/// Checks the flags that go together, parses `--faults`, loads the TLS files as the listener
/// will, and with `--embedded --tls-cert` picks the webhook name and CA (see
/// [`embedded_webhook`]).
fn preflight(args: &ServeArgs) -> Result<Checked, AppError> {
    if args.faults.is_some() && !args.embedded {
        return Err(AppError::Flags("--faults only applies with --embedded"));
    }
    if args.embedded_data.is_some() && !args.embedded {
        return Err(AppError::Flags(
            "--embedded-data only applies with --embedded",
        ));
    }
    let embedded = args
        .embedded
        .then(|| {
            check_api_listen(
                "--embedded-api-listen",
                args.embedded_api_listen,
                args.embedded_api_allow_remote,
            )?;
            embedded_options(
                args.embedded_nodes,
                args.no_sim_kubelet,
                args.no_sim_controllers,
                args.faults.as_deref(),
            )
        })
        .transpose()?;
    if args.tls_mode == TlsMode::SelfManaged {
        if args.embedded {
            return Err(AppError::Flags(
                "--tls-mode self does not go with --embedded (embedded mode makes its own \
                 certificate at start; use --tls-mode files)",
            ));
        }
        if args.tls_cert.is_some() || args.tls_ca.is_some() {
            return Err(AppError::Flags(
                "--tls-cert, --tls-key and --tls-ca apply to --tls-mode files; --tls-mode self \
                 keeps its certificate in the Secret --tls-self-secret",
            ));
        }
        self_tls_config(args)?;
    }
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        server::check_tls_files(cert, key, args.enable_http2)?;
    }
    let webhook = match (&args.tls_cert, args.embedded) {
        (Some(cert), true) => Some(embedded_webhook(args, cert)?),
        _ => {
            // Outside embedded mode nothing calls the webhooks from this process; the file
            // is still read so a typo shows now rather than when embedded mode is tried.
            if let Some(ca) = &args.tls_ca {
                PemChain::read(ca)?;
            }
            None
        }
    };
    Ok(Checked { embedded, webhook })
}

/// `--tls-mode self`'s settings from the flags: the Services' names in the namespace of the
/// Secret, the extra names, the lifetimes (checked here, so bad ones stop the start).
fn self_tls_config(args: &ServeArgs) -> Result<SelfTlsConfig, AppError> {
    let f = &args.tls_self;
    let namespace = f
        .tls_self_namespace
        .clone()
        .unwrap_or_else(crate::leader::default_namespace);
    certs::check_dns_label("namespace", &namespace)?;
    let mut names = Vec::new();
    for service in &f.tls_self_services {
        certs::check_dns_label("service", service)?;
        names.extend(certs::service_dns_names(service, &namespace));
    }
    names.extend(f.tls_self_extra_names.iter().cloned());
    if names.is_empty() {
        return Err(AppError::Flags(
            "--tls-mode self needs at least one --tls-self-service or --tls-self-extra-name",
        ));
    }
    let common_name = f
        .tls_self_services
        .first()
        .map_or_else(|| names[0].clone(), |s| format!("{s}.{namespace}.svc"));
    let policy = f.policy();
    policy.check().map_err(SelfTlsError::from)?;
    Ok(SelfTlsConfig {
        namespace,
        secret: f.tls_self_secret.clone(),
        configmap: f.tls_self_configmap.clone(),
        common_name,
        names,
        policy,
        poll: args.tls_reload_interval,
    })
}

/// The address the embedded API reaches the HTTPS listener at: its own IP, or loopback when
/// it listens on every address.
fn reach_ip(listen: SocketAddr) -> std::net::IpAddr {
    if listen.ip().is_unspecified() {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        listen.ip()
    }
}

/// With `--embedded --tls-cert`: a name the certificate holds that the embedded API can call
/// the webhooks under (a Service name such as `tephra certs` makes, else the listener's IP or
/// `localhost`), and the CA that signed it: `--tls-ca`, else the CA certificates after the
/// serving one in the same file, else the certificate itself (self-signed). The pair is
/// verified here exactly as the embedded API will verify it, so a mismatch stops the start
/// instead of failing every webhook call.
fn embedded_webhook(
    args: &ServeArgs,
    cert: &std::path::Path,
) -> Result<(WebhookHost, String), AppError> {
    let chain = PemChain::read(cert)?;
    let names = chain.names()?;
    let host = webhooks::host_for_certificate(&names, reach_ip(args.listen)).ok_or_else(|| {
        AppError::NoWebhookName {
            cert: cert.to_path_buf(),
            names,
        }
    })?;
    let (roots, label, hint) = match &args.tls_ca {
        Some(ca) => (PemChain::read(ca)?.certs, ca.display().to_string(), ""),
        None if !chain.rest().is_empty() => (
            chain.rest().to_vec(),
            "the CA certificates in the same file".to_string(),
            "; pass --tls-ca FILE with the CA that signed it",
        ),
        None => (
            vec![chain.leaf().clone()],
            "itself (the file holds no CA certificate)".to_string(),
            "; pass --tls-ca FILE with the CA that signed it",
        ),
    };
    certs::verify_chain(&chain, &roots, &label, &host.tls_name()).map_err(|e| match e {
        CertError::Untrusted {
            cert,
            ca,
            name,
            reason,
        } => CertError::Untrusted {
            cert,
            ca,
            name,
            reason: format!("{reason}{hint}"),
        },
        other => other,
    })?;
    Ok((host, PemChain::pem_of(&roots)))
}

/// The scheduler's configuration: `--config`, else the built-in one. Plugins tephra does not
/// run are named in a warning, or, with `--strict-config`, refuse the start.
fn scheduler_conf(args: &ServeArgs) -> Result<crate::scheduler::SchedulerConf, AppError> {
    let (conf, origin) = match &args.config {
        Some(path) => (
            crate::scheduler::config::load(path)?,
            path.display().to_string(),
        ),
        None => (
            crate::scheduler::SchedulerConf::builtin(),
            "built-in".into(),
        ),
    };
    if args.strict_config {
        crate::scheduler::config::require_all_run(&conf, &origin)?;
    }
    let ignored = conf.ignored_plugins();
    if !ignored.is_empty() {
        tracing::warn!(plugins = ?ignored, "scheduler configuration names Volcano plugins tephra does not run; they are left out");
    }
    Ok(conf)
}

/// `--controller-config`, checked now (a missing or bad file refuses the start) and watched
/// by the HyperNode controller from then on.
fn hypernode_discovery(args: &ServeArgs) -> Result<Option<Arc<DiscoveryFile>>, AppError> {
    let Some(path) = &args.controller_config else {
        return Ok(None);
    };
    let config = crate::controllers::hypernode::discovery::load(path)?;
    Ok(Some(Arc::new(DiscoveryFile::new(path.clone(), config))))
}

/// What every stage shares: the series, the tokens that stop things, readiness, leadership.
struct Base {
    metrics: Metrics,
    /// Cancelled by a signal (or a fatal error): everything but the embedded API stops.
    shutdown: CancellationToken,
    /// Stops the embedded API. It is cancelled last, when [`drain`] is done, or when `serve`
    /// returns early (the guard): everything that talks to the API has stopped by then, so no
    /// request of theirs fails on a closed API.
    api_stop: CancellationToken,
    _api_stop_guard: tokio_util::sync::DropGuard,
    /// `/readyz` and its conditions.
    state: ServerState,
    /// Whether this replica campaigns for the Lease.
    elect: bool,
    /// Everything that writes (controllers, session, status writers, the nudger, extender
    /// answers) runs under it; the caches and webhooks run on every replica.
    leadership: Leadership,
}

impl Base {
    fn start(args: &ServeArgs) -> Result<Self, AppError> {
        let elect = args.leader.enabled(args.embedded);
        tracing::info!(
            "{}",
            crate::cli::serve_banner(
                args.embedded.then_some(args.embedded_api_listen),
                args.embedded_data.as_deref(),
                elect
            )
        );
        let metrics = Metrics::new()?;
        let shutdown = CancellationToken::new();
        server::cancel_on_signals(shutdown.clone());
        let api_stop = CancellationToken::new();
        let state = ServerState::new(metrics.clone());
        if elect {
            args.leader
                .timings()
                .check()
                .map_err(|e| AppError::Leader(Box::new(e)))?;
        }
        let leadership = if elect {
            Leadership::pending(&shutdown)
        } else {
            Leadership::always(&shutdown)
        };
        {
            // `tephra_leader_is_leader`: what an alert on "no leader" or "two leaders" reads.
            let (leadership, gauge) = (leadership.clone(), metrics.leader.clone());
            tokio::spawn(async move {
                if leadership.wait_elected().await {
                    gauge.set(1);
                    leadership.token().cancelled().await;
                }
                gauge.set(0);
            });
        }
        Ok(Self {
            metrics,
            shutdown,
            _api_stop_guard: api_stop.clone().drop_guard(),
            api_stop,
            state,
            elect,
            leadership,
        })
    }
}

/// The embedded API before it starts: its bound listener, its options, and the client
/// configuration that reaches it.
struct UnstartedApi {
    listener: TcpListener,
    options: EmbeddedOptions,
    config: kube::Config,
}

/// The kube client, and in embedded mode the API it will talk to, not started yet.
struct Connected {
    client: kube::Client,
    embedded: Option<UnstartedApi>,
}

/// Embedded mode binds the API's listener first and points the ordinary kube client at it,
/// exactly as at a cluster (nothing downstream knows the difference); otherwise the cluster
/// is chosen from the flags and the environment and reached.
async fn connect(
    args: &ServeArgs,
    embedded: Option<EmbeddedOptions>,
) -> Result<Connected, AppError> {
    if let Some(options) = embedded {
        let listener = bind_api(args.embedded_api_listen).await?;
        let addr = listener.local_addr().map_err(|source| AppError::Listen {
            addr: args.embedded_api_listen,
            source,
        })?;
        let url = format!("http://{addr}")
            .parse::<http::Uri>()
            .map_err(|e| AppError::Embedded(e.to_string()))?;
        let config = kube::Config::new(url);
        let client = kube::Client::try_from(config.clone()).map_err(ClusterError::Client)?;
        return Ok(Connected {
            client,
            embedded: Some(UnstartedApi {
                listener,
                options,
                config,
            }),
        });
    }
    let source = cluster::config::choose(
        &cluster::Environment::from_process(),
        args.kubeconfig.as_deref(),
    )?;
    tracing::info!(%source, "using cluster");
    let config = cluster::config::load(&source).await?;
    Ok(Connected {
        client: cluster::config::connect(config).await?,
        embedded: None,
    })
}

/// The gang engine (`--gang-engine`): the embedded API serves no native gang objects; on a
/// cluster, `auto` asks its discovery. Logged and exported as `tephra_gang_engine`.
async fn choose_engine(
    args: &ServeArgs,
    base: &Base,
    connected: &Connected,
) -> Result<Engine, AppError> {
    let flag = args.engine.gang_engine;
    let engine = if connected.embedded.is_some() {
        engine::choose(flag, false, "the embedded API")?
    } else if flag == crate::cli::GangEngine::Extender {
        Engine::Extender
    } else {
        let serves = engine::cluster_serves_native(&connected.client).await?;
        engine::choose(flag, serves, "the cluster")?
    };
    engine::export(engine, base.metrics.registry())?;
    match engine {
        Engine::Native => tracing::info!(
            engine = engine.name(),
            scheduler = %args.engine.native_scheduler_name,
            place_timeout = ?args.engine.native_place_timeout,
            "gang engine: native (kube-scheduler's own gang scheduling places gangs that tephra admits)"
        ),
        Engine::Extender => tracing::info!(
            engine = engine.name(),
            "gang engine: extender (kube-scheduler calls tephra's /scheduler verbs)"
        ),
    }
    Ok(engine)
}

/// The shared watch caches and what decides from them.
struct Core {
    caches: Caches,
    scheduler: Scheduler,
    controllers: crate::controllers::Controllers,
    /// The watches, in embedded mode still to start once the CRDs are installed.
    feeds: Option<CacheFeeds>,
}

/// The caches, the scheduler and the controllers subscribed to them. On a cluster the watches
/// start now; in embedded mode [`start_embedded_mode`] starts them once the CRDs are installed.
fn start_core(
    args: &ServeArgs,
    base: &Base,
    client: &kube::Client,
    scheduler_conf: crate::scheduler::SchedulerConf,
    discovery: Option<Arc<DiscoveryFile>>,
    engine: Engine,
) -> Result<Core, AppError> {
    let (caches, mut feeds) = Caches::new();
    let scheduler = Scheduler::new(
        SchedulerOptions {
            scheduler_names: args.scheduler_names.clone(),
            period: args.schedule_period,
            config_path: args.config.clone(),
            strict_config: args.strict_config,
            ..SchedulerOptions::default()
        },
        scheduler_conf,
        base.metrics.registry(),
    )?;
    scheduler.subscribe(&mut feeds);
    let native = (engine == Engine::Native).then(|| crate::controllers::native::NativeConfig {
        scheduler: scheduler.clone(),
        place_timeout: args.engine.native_place_timeout,
    });
    let controllers =
        start_controllers(args, client, &caches, &mut feeds, base, discovery, native)?;
    let feeds = if args.embedded {
        Some(feeds)
    } else {
        feeds.run(client, &base.shutdown);
        None
    };
    track_cache_sync(caches.clone(), base.state.clone());
    // Not ready until the built-in queues are in the cache the webhooks read: a vcJob sent as
    // soon as /readyz answers 200 must not be refused for a missing `default` queue.
    base.state.set_condition("default-queues", false);
    Ok(Core {
        caches,
        scheduler,
        controllers,
        feeds,
    })
}

/// The HTTPS and metrics listeners, running.
struct Http {
    /// Ends when the listeners have stopped and drained.
    running: ServerTask,
    /// Dropping it ends the listeners' runtime ([`serve_on_own_thread`]).
    runtime: tokio::sync::oneshot::Sender<()>,
    https_addr: SocketAddr,
    extender: Arc<Extender>,
}

/// The admission webhooks and the extender on the HTTPS listener (its certificate from files,
/// self-signed, or kept in a Secret with `--tls-mode self`), and the metrics listener.
async fn start_http(
    args: &ServeArgs,
    base: &Base,
    client: &kube::Client,
    core: &Core,
    engine: Engine,
) -> Result<Http, AppError> {
    let admission = Arc::new(AdmissionContext {
        config: AdmissionConfig {
            scheduler_names: args.scheduler_names.clone(),
            native_scheduler: (engine == Engine::Native)
                .then(|| args.engine.native_scheduler_name.clone()),
            ..AdmissionConfig::default()
        },
        view: Arc::new(core.caches.clone()),
        metrics: AdmissionMetrics::new(base.metrics.registry())?,
    });
    let mut config = server_config(args);
    if args.tls_mode == TlsMode::SelfManaged {
        // Before the listener binds: it serves the Secret's pair from its first connection.
        let boot = crate::selftls::bootstrap(client, self_tls_config(args)?).await?;
        let (live, rx) = tokio::sync::watch::channel(boot.serving.clone());
        config.tls = TlsSource::Managed(ManagedTls(rx));
        tokio::spawn(boot.run(
            live,
            base.leadership.clone(),
            base.metrics.clone(),
            base.shutdown.clone(),
        ));
    }
    if args.embedded {
        config.self_signed_names = certs::service_dns_names(WEBHOOK_SERVICE.0, WEBHOOK_SERVICE.1);
    }
    let extender = Arc::new(Extender::new(
        client.clone(),
        core.scheduler.clone(),
        ExtenderOptions {
            bind_hold_timeout: args.extender.bind_hold_timeout,
            bind_gather_timeout: args.extender.bind_gather_timeout,
            bind_ahead: args.extender.bind_ahead,
            plan_wait: args.extender.extender_plan_wait,
        },
        base.metrics.registry(),
    )?);
    let extender_routes = if base.elect {
        extender::router_for_leader(extender.clone(), base.leadership.clone())
    } else {
        extender::router(extender.clone())
    };
    let routes = admission::router(admission).merge(extender_routes);
    let mut bound = server::bind(config, routes, base.state.clone())?;
    if !args.no_ui {
        bound = bound.with_metrics_routes(crate::webview::router(Arc::new(
            crate::webview::WebView::new(
                core.caches.clone(),
                core.scheduler.clone(),
                args.config.clone(),
                args.scheduler_names.clone(),
            ),
        )));
    }
    let https_addr = bound.https_addr();
    let metrics_at = bound
        .metrics_addr()
        .map_or_else(|| "the HTTPS listener".to_string(), |a| a.to_string());
    tracing::info!(https = %https_addr, metrics = %metrics_at, "serving");
    if let (false, Some(at)) = (args.no_ui, bound.metrics_addr()) {
        tracing::info!(url = %format!("http://{at}{}", tephra_webview::BASE_PATH), "web view (read-only; --no-ui turns it off)");
    }
    let (running, runtime) = serve_on_own_thread(bound, base.shutdown.clone())?;
    Ok(Http {
        running,
        runtime,
        https_addr,
        extender,
    })
}

/// Embedded mode, once the listeners are up: the API starts (calling the webhooks at our own
/// HTTPS listener), the CRDs are installed, the watches start, the webhooks are registered, and
/// unless `--no-sim-scheduler` the kube-scheduler stand-in starts. Returns the stand-in's
/// thread.
async fn start_embedded_mode(
    args: &ServeArgs,
    base: &Base,
    client: &kube::Client,
    api: UnstartedApi,
    webhook: Option<(WebhookHost, String)>,
    http: &mut Http,
    feeds: Option<CacheFeeds>,
) -> Result<Option<std::thread::JoinHandle<()>>, AppError> {
    let (target, ca) = match webhook {
        Some((host, ca)) => (host.target(http.https_addr.port()), ca),
        // The self-signed pair was made for the Service of manifests/webhooks.yaml.
        None => (
            WebhookTarget::AsWritten,
            base.state
                .self_signed_ca_pem()
                .ok_or_else(|| AppError::Embedded("no CA for the webhook configurations".into()))?,
        ),
    };
    let hooks = EmbeddedWebhooks {
        https_addr: http.https_addr,
        ca_pem: &ca,
        target: &target,
        served: &args.scheduler_names,
    };
    let UnstartedApi {
        listener,
        options,
        config,
    } = api;
    let api = EmbeddedApi {
        listener,
        options,
        data: args.embedded_data.as_deref(),
    };
    start_embedded(client, api, hooks, feeds, &base.shutdown, &base.api_stop).await?;
    if args.no_sim_scheduler {
        return Ok(None);
    }
    start_sim_scheduler(config, args, http.https_addr, ca, &base.shutdown).map(Some)
}

/// What runs beside the listeners until shutdown.
struct Background {
    /// Creates the built-in queues (and waits for tephra's CRDs on a cluster still being set
    /// up); a refusal for good stops `serve`.
    queues: tokio::task::JoinHandle<Result<(), StartupError>>,
    /// The elector and its campaign, with `--leader-elect`.
    elector: Option<(Arc<Elector>, tokio::task::JoinHandle<Outcome>)>,
    /// The session (its writers included) and the nudger, once this replica leads.
    leader_tasks: tokio::task::JoinHandle<Option<[tokio::task::JoinHandle<()>; 2]>>,
}

/// The built-in queues, the elector, and the tasks that run only while this replica leads.
fn start_background(
    args: &ServeArgs,
    base: &Base,
    client: &kube::Client,
    core: &Core,
    http: &Http,
) -> Background {
    // In the background: on a cluster still being set up this waits for tephra's CRDs while
    // the listeners answer (`/readyz` failing) and the elector campaigns.
    let queues = {
        let (client, stop) = (client.clone(), base.shutdown.clone());
        tokio::spawn(async move {
            let ensured = cluster::ensure_default_queues(&client).await;
            if let Err(e) = &ensured {
                tracing::error!(error = %report(e), "cannot create the built-in queues; shutting down");
                stop.cancel();
            }
            ensured.map(drop)
        })
    };
    let elector = base.elect.then(|| {
        // Not ready while no replica could lead: the Lease's namespace or RBAC is missing.
        let ready = base.state.clone();
        let elector = Arc::new(
            Elector::new(client, elector_config(args), base.leadership.clone())
                .with_readiness(move |ok| ready.set_condition("lease", ok)),
        );
        let (e, stop) = (elector.clone(), base.shutdown.clone());
        let task = tokio::spawn(async move {
            let outcome = e.run(&stop).await;
            if outcome == Outcome::Lost {
                // Leader-only tasks have stopped; the process drains and exits non-zero.
                stop.cancel();
            }
            outcome
        });
        (elector, task)
    });
    let leader_tasks = {
        let (leadership, scheduler, client, extender) = (
            base.leadership.clone(),
            core.scheduler.clone(),
            client.clone(),
            http.extender.clone(),
        );
        tokio::spawn(async move {
            if !leadership.wait_elected().await {
                return None;
            }
            let nudger = extender.spawn_nudger(leadership.token().clone());
            let session = scheduler.spawn(client, leadership.token().clone());
            Some([nudger, session])
        })
    };
    Background {
        queues,
        elector,
        leader_tasks,
    }
}

/// After the listeners stopped: everything that talks to the API stops (the controllers, the
/// session and its writers, the nudger, the elector, which releases the Lease it held, the
/// stand-in), then the listeners' runtime ends, and last the embedded API.
async fn drain(
    base: Base,
    controllers: crate::controllers::Controllers,
    background: Background,
    stand_in: Option<std::thread::JoinHandle<()>>,
    http: Http,
) -> Result<(), AppError> {
    base.shutdown.cancel();
    let Background {
        queues,
        elector,
        leader_tasks,
    } = background;
    let queues = if queues.is_finished() {
        queues.await.map_err(|e| AppError::Task(e.to_string()))?
    } else {
        queues.abort();
        Ok(())
    };
    let stopped = async {
        controllers.join().await;
        if let Ok(Some(tasks)) = leader_tasks.await {
            for task in tasks {
                let _ = task.await;
            }
        }
    };
    if tokio::time::timeout(LEADER_TASKS_STOP, stopped)
        .await
        .is_err()
    {
        tracing::warn!(after = ?LEADER_TASKS_STOP, "leader-only tasks did not stop in time");
    }
    if let Some((elector, task)) = elector {
        match task.await.map_err(|e| AppError::Task(e.to_string()))? {
            Outcome::Lost => return Err(AppError::LeaderLost),
            Outcome::ShutDownLeading => {
                // Only now, with nothing of ours writing any more, may the next leader start.
                if let Err(e) = elector.release().await {
                    tracing::warn!(error = %report(&e), "could not release the Lease; the next leader waits for it to expire");
                }
            }
            Outcome::NeverLed => {}
        }
    }
    if let Some(thread) = stand_in {
        // Its requests must be over before the embedded API closes.
        let joined = tokio::task::spawn_blocking(move || thread.join());
        if tokio::time::timeout(LEADER_TASKS_STOP, joined)
            .await
            .is_err()
        {
            tracing::warn!(after = ?LEADER_TASKS_STOP, "the kube-scheduler stand-in did not stop in time");
        }
    }
    queues?;
    drop(http.runtime);
    base.api_stop.cancel();
    tracing::info!("drained, exiting");
    Ok(())
}

/// Runs the HTTPS and metrics listeners on a runtime of their own: threads named `https`,
/// half the CPUs working for them (on one or two CPUs, one thread does it all).
///
/// kube-apiserver waits on every admission review, and kube-scheduler's scheduling cycle waits
/// on every extender call, one pod at a time. On the runtime the controllers, caches and (in
/// embedded mode) the API share, those requests queued behind whatever burst that runtime was
/// working through: in `cargo bench --bench jobs` a 0.6 ms filter took about 4 ms end to end,
/// so binding fell behind pod creation. Threads of their own are woken by the kernel as soon as
/// a request arrives, whatever else is queued; the rest of the process keeps its own threads.
///
/// The runtime outlives the listeners: it runs until the returned sender is dropped. The
/// extender's writes share the process's kube client, whose pooled connections are driven by
/// tasks on the runtime that opened them; were this runtime dropped when the listeners stop,
/// a controller reusing such a connection while draining would fail (`SendRequest`).
fn serve_on_own_thread(
    bound: server::BoundServer,
    shutdown: CancellationToken,
) -> Result<(ServerTask, tokio::sync::oneshot::Sender<()>), AppError> {
    let workers = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
    // One worker: the thread that drives the listeners serves the connections too.
    let mut builder = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    let runtime = builder
        .thread_name("https")
        .enable_all()
        .build()
        .map_err(|e| AppError::Task(format!("the HTTPS runtime: {e}")))?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("https".into())
        .spawn(move || {
            runtime.block_on(async move {
                let _ = tx.send(bound.run(shutdown).await);
                let _ = released.await;
            });
        })
        .map_err(|e| AppError::Task(format!("the HTTPS thread: {e}")))?;
    let running = tokio::spawn(async move {
        rx.await.unwrap_or_else(|_| {
            Err(ServerError::Stopped {
                listener: "https",
                reason: "its thread ended".into(),
            })
        })
    });
    Ok((running, release))
}

/// The HTTPS listeners, running until shutdown: what they ended with.
type ServerTask = tokio::task::JoinHandle<Result<(), ServerError>>;

/// How long shutdown waits for the controllers and the session to finish their current work.
const LEADER_TASKS_STOP: std::time::Duration = std::time::Duration::from_secs(5);

/// The elector's settings from the flags and the downward API (`POD_NAME`, `POD_NAMESPACE`).
fn elector_config(args: &ServeArgs) -> ElectorConfig {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    ElectorConfig {
        namespace: args
            .leader
            .leader_elect_namespace
            .clone()
            .unwrap_or_else(crate::leader::default_namespace),
        name: args.leader.leader_elect_lease_name.clone(),
        identity: crate::leader::identity(),
        timings: args.leader.timings(),
        pod: env("POD_NAMESPACE").zip(env("POD_NAME")),
    }
}

/// The embedded API before it starts: its bound listener, its options, and the folder of its
/// data file (`--embedded-data`), if any.
struct EmbeddedApi<'a> {
    listener: TcpListener,
    options: EmbeddedOptions,
    data: Option<&'a std::path::Path>,
}

/// How the embedded API reaches and trusts tephra's webhooks.
struct EmbeddedWebhooks<'a> {
    /// The bound HTTPS listener.
    https_addr: SocketAddr,
    /// The caBundle.
    ca_pem: &'a str,
    /// Where the registered webhooks point.
    target: &'a WebhookTarget,
    /// The scheduler names served (`--scheduler-name`), for the pod mutation's condition.
    served: &'a [String],
}

/// Starts the embedded API on its bound listener, sends webhook Service traffic to our own
/// HTTPS listener, installs the CRDs, starts the cache feeds and registers the webhooks.
async fn start_embedded(
    client: &kube::Client,
    api: EmbeddedApi<'_>,
    hooks: EmbeddedWebhooks<'_>,
    feeds: Option<CacheFeeds>,
    shutdown: &CancellationToken,
    api_stop: &CancellationToken,
) -> Result<(), AppError> {
    let EmbeddedApi {
        listener,
        mut options,
        data,
    } = api;
    options.webhook_service_addr = Some(SocketAddr::new(
        reach_ip(hooks.https_addr),
        hooks.https_addr.port(),
    ));
    let api = match data {
        Some(dir) => {
            let persist = tephra_apiserver::persist::Persist::open(dir)
                .map_err(|e| AppError::Embedded(report(&e).to_string()))?;
            ApiServer::start_open(options, Arc::new(persist), shutdown.clone())
                .map_err(|e| AppError::Embedded(report(&e).to_string()))?
        }
        None => ApiServer::start(options, shutdown.clone()),
    };
    let api_addr = listener.local_addr().ok();
    let (stop, api_stop) = (shutdown.clone(), api_stop.clone());
    tokio::spawn(async move {
        if let Err(e) = embedded::serve(api, listener, api_stop).await {
            tracing::error!(error = %report(&e), "embedded API stopped; shutting down");
            stop.cancel();
        }
    });
    // Each write waits out a flaky API (`--faults`); a signal meanwhile ends start-up.
    tokio::select! {
        installed = cluster::bootstrap::install_crds(client) => installed?,
        () = shutdown.cancelled() => return Ok(()),
    };
    if let Some(f) = feeds {
        f.run(client, shutdown);
    }
    let n = tokio::select! {
        registered = webhooks::register(client, hooks.ca_pem, hooks.target, hooks.served) => registered?,
        () = shutdown.cancelled() => return Ok(()),
    };
    let url = api_addr.map(|a| format!("http://{a}")).unwrap_or_default();
    tracing::info!(
        configurations = n,
        webhooks = %hooks.target,
        %url,
        "embedded API ready with tephra's webhooks registered; try: kubectl --server {url} get queues"
    );
    Ok(())
}

/// Starts the kube-scheduler stand-in against our own extender, reached as kube-scheduler
/// reaches it in a cluster: over HTTPS at the Service name, verified with the served CA.
fn start_sim_scheduler(
    config: kube::Config,
    args: &ServeArgs,
    https_addr: SocketAddr,
    ca_pem: String,
    shutdown: &CancellationToken,
) -> Result<std::thread::JoinHandle<()>, AppError> {
    let ip = if https_addr.ip().is_unspecified() {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        https_addr.ip()
    };
    let thread = tephra_apiserver::kube_scheduler::start(
        config,
        tephra_apiserver::kube_scheduler::SimSchedulerOptions {
            scheduler_names: args.scheduler_names.clone(),
            host: format!("{}.{}.svc", WEBHOOK_SERVICE.0, WEBHOOK_SERVICE.1),
            addr: SocketAddr::new(ip, https_addr.port()),
            ca_pem,
            http_timeout: tephra_apiserver::kube_scheduler::HTTP_TIMEOUT,
        },
        shutdown.clone(),
    )?;
    tracing::info!("kube-scheduler stand-in started (extender over HTTPS)");
    Ok(thread)
}

/// `/readyz` stays 503 (condition `caches`) until every watch cache has its first list, so
/// kube-apiserver does not send reviews that would be judged against an empty view.
fn track_cache_sync(caches: Caches, state: ServerState) {
    state.set_condition("caches", false);
    tokio::spawn(async move {
        while let Err(e) = caches.wait_synced(CACHE_SYNC_WARN).await {
            tracing::warn!(error = %report(&e), "still waiting for the watch caches");
        }
        tracing::info!("watch caches synced");
        state.set_condition("caches", true);
    });
}

/// Sets the `default-queues` readiness condition once the watch cache holds every built-in
/// queue with a state (just created and opened by `ensure_default_queues`).
fn track_default_queues(caches: Caches, state: ServerState) {
    use crate::admission::view::ClusterView as _;
    tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let mut warned = false;
        loop {
            let seen = cluster::bootstrap::BUILTIN_QUEUES
                .iter()
                .all(|n| caches.queue(n).is_some_and(|q| q.state().is_some()));
            if seen {
                state.set_condition("default-queues", true);
                return;
            }
            if !warned && started.elapsed() > CACHE_SYNC_WARN {
                warned = true;
                tracing::warn!(queues = ?cluster::bootstrap::BUILTIN_QUEUES, "the built-in queues are not in the watch cache yet");
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    });
}

/// The PodGroup, Queue and Job controllers, as one unit on the shared caches (their subscribers
/// go on `feeds` before the watches start); their workers run while this replica leads.
fn start_controllers(
    args: &ServeArgs,
    client: &kube::Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    base: &Base,
    discovery: Option<Arc<DiscoveryFile>>,
    native: Option<crate::controllers::native::NativeConfig>,
) -> Result<crate::controllers::Controllers, AppError> {
    let gate_always = native.is_some();
    let config = crate::controllers::ControllerConfig {
        scheduler_names: args.scheduler_names.clone(),
        inherit_owner_annotations: args.inherit_owner_annotations,
        native,
        job: crate::controllers::job::JobConfig {
            workers: usize::from(args.job_workers),
            max_requeue: args.max_requeue,
            // The native engine admits a gang by removing this gate: it is never left off.
            plan_gate_schedulers: if args.extender.gate_until_placed || gate_always {
                args.scheduler_names.clone()
            } else {
                Vec::new()
            },
            mark_elastic: gate_always,
        },
        hypernode_discovery: discovery,
        leadership: base.leadership.clone(),
        ..crate::controllers::ControllerConfig::default()
    };
    Ok(crate::controllers::start(
        client,
        caches,
        feeds,
        config,
        base.metrics.registry(),
        base.leadership.token(),
    )?)
}
