//! What each subcommand does, wired from the library's parts. `main.rs` only parses flags and
//! reports the [`AppError`] this returns.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::admission::{self, AdmissionConfig, AdmissionContext, AdmissionMetrics};
use crate::api::TypesError;
use crate::certs::{self, CertError, PemChain};
use crate::cli::{ApiserverArgs, CertsArgs, Cli, Command, LogFormat, ServeArgs, TlsMode};
use crate::cluster::startup::StartupError;
use crate::cluster::webhooks::{self, WebhookError, WebhookHost, WebhookTarget};
use crate::cluster::{self, CacheFeeds, Caches, ClusterError};
use crate::extender::{self, Extender, ExtenderOptions};
use crate::leader::{Elector, ElectorConfig, Leadership, Outcome};
use crate::metrics::{Metrics, MetricsError};
use crate::report::report;
use crate::scheduler::{Scheduler, SchedulerOptions};
use crate::selftls::{SelfTlsConfig, SelfTlsError};
use crate::server::{self, ManagedTls, ServerConfig, ServerError, ServerState, TlsSource};
use tephra_apiserver::{self as embedded, ApiServer, EmbeddedOptions, FaultSpec, FaultSpecError};

/// Everything that can stop a subcommand, one variant per subsystem.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Choosing or reaching the cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The HTTPS or metrics server failed to start or stopped with an error.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// Making or writing certificates failed.
    #[error(transparent)]
    Certs(#[from] CertError),
    /// The metrics registry could not be built.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// A subsystem's series could not be registered.
    #[error("registering metrics: {0}")]
    Registry(#[from] prometheus::Error),
    /// Rendering the CRDs failed.
    #[error(transparent)]
    Api(#[from] TypesError),
    /// A start-up write (CRDs, built-in queues) was refused for good.
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// The log filter could not be parsed.
    #[error("invalid log filter: {0}")]
    LogFilter(String),
    /// Flags that do not go together.
    #[error("{0}")]
    Flags(&'static str),
    /// `--faults` could not be parsed.
    #[error("--faults: {0}")]
    Faults(#[from] FaultSpecError),
    /// An address could not be bound or served.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Registering the webhooks failed.
    #[error(transparent)]
    Webhooks(#[from] WebhookError),
    /// A background task panicked or was cancelled.
    #[error("internal task failed: {0}")]
    Task(String),
    /// Starting embedded mode failed.
    #[error("embedded mode: {0}")]
    Embedded(String),
    /// The scheduler extender could not be built.
    #[error(transparent)]
    Extender(#[from] crate::extender::ExtenderError),
    /// The kube-scheduler stand-in could not start.
    #[error(transparent)]
    SimScheduler(#[from] tephra_apiserver::kube_scheduler::SimSchedulerError),
    /// `--config` is missing or invalid.
    #[error(transparent)]
    SchedulerConfig(#[from] crate::scheduler::ConfigError),
    /// `--tls-cert` holds no name the embedded API can call the webhooks under.
    #[error(
        "--tls-cert {}: the certificate is valid for {names}, but the embedded API calls \
         tephra's webhooks under {needed}",
        cert.display(),
        needed = webhooks::USABLE_WEBHOOK_NAMES
    )]
    NoWebhookName {
        /// The certificate file.
        cert: std::path::PathBuf,
        /// The names it holds.
        names: certs::CertNames,
    },
    /// A `job`, `queue` or `pg` command failed.
    #[error(transparent)]
    Vcctl(#[from] crate::vcctl::VcctlError),
    /// The embedded API would listen on a non-loopback address without
    /// `--embedded-api-allow-remote`.
    #[error(
        "{flag} {addr}: the embedded API has no authentication and only listens on loopback \
         addresses (127.0.0.1, ::1); add --embedded-api-allow-remote to listen on {addr} anyway"
    )]
    RemoteApi {
        /// The flag.
        flag: &'static str,
        /// The address given.
        addr: SocketAddr,
    },
    /// The controllers could not be started.
    #[error(transparent)]
    Controllers(#[from] crate::controllers::ControllerError),
    /// `--tls-mode self` could not get or keep its certificate.
    #[error("--tls-mode self: {0}")]
    SelfTls(#[from] SelfTlsError),
    /// Leader election flags are inconsistent (boxed: the variant would make every result
    /// of this module large).
    #[error(transparent)]
    Leader(Box<crate::leader::LeaderError>),
    /// This replica led and lost the Lease; it stopped its leader-only tasks and exits so it
    /// restarts as a follower.
    #[error(
        "lost the leader election Lease (could not renew it in time, or another replica took it); \
         exiting to restart as a follower"
    )]
    LeaderLost,
}

/// Installs the global `tracing` subscriber: `--log` (or `RUST_LOG`, default `info`) as the
/// filter, `text` or `json` lines on standard error.
pub fn init_logging(format: LogFormat, filter: Option<&str>) -> Result<(), AppError> {
    let filter = match filter {
        Some(f) => EnvFilter::try_new(f).map_err(|e| AppError::LogFilter(e.to_string()))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // `try_init` fails only when a subscriber is already installed (tests); keep that one.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}

/// Runs one subcommand to completion.
pub async fn run(cli: Cli) -> Result<(), AppError> {
    // One crypto provider for the whole process (ring); an error only means it is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Certs(args) => certs_command(&args),
        Command::Crds => {
            print!("{}", crate::api::crds::render_yaml()?);
            Ok(())
        }
        Command::Apiserver(args) => apiserver(args).await,
        Command::Job(args) => Ok(crate::vcctl::job(args).await?),
        Command::Queue(args) => Ok(crate::vcctl::queue(args).await?),
        Command::Pg(args) => Ok(crate::vcctl::pg(args).await?),
    }
}

/// `tephra certs`: write the files, print the caBundle on standard output.
fn certs_command(args: &CertsArgs) -> Result<(), AppError> {
    let bundle = certs::run_certs_command(
        &args.service,
        &args.namespace,
        &args.extra_names,
        &args.out,
        args.renew_serving,
    )?;
    println!("{bundle}");
    Ok(())
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

/// The embedded API's options from the shared flags.
fn embedded_options(
    nodes: usize,
    no_sim_kubelet: bool,
    no_sim_controllers: bool,
    faults: Option<&str>,
) -> Result<EmbeddedOptions, AppError> {
    let faults = faults
        .map(FaultSpec::parse)
        .transpose()?
        .unwrap_or_default();
    Ok(EmbeddedOptions {
        nodes,
        sim_kubelet: !no_sim_kubelet,
        sim_controllers: !no_sim_controllers,
        faults,
        ..EmbeddedOptions::default()
    })
}

/// Refuses a non-loopback address for the embedded API (which has no authentication) unless
/// `--embedded-api-allow-remote` is given. Pure.
fn check_api_listen(
    flag: &'static str,
    addr: SocketAddr,
    allow_remote: bool,
) -> Result<(), AppError> {
    if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(AppError::RemoteApi { flag, addr })
    }
}

/// Binds the embedded API's TCP listener (so its address is known before anything else starts).
async fn bind_api(addr: SocketAddr) -> Result<TcpListener, AppError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| AppError::Listen { addr, source })
}

/// `tephra apiserver`: the embedded API alone, until a signal.
async fn apiserver(args: ApiserverArgs) -> Result<(), AppError> {
    check_api_listen("--listen", args.listen, args.embedded_api_allow_remote)?;
    let options = embedded_options(
        args.embedded_nodes,
        args.no_sim_kubelet,
        args.no_sim_controllers,
        args.faults.as_deref(),
    )?;
    let shutdown = CancellationToken::new();
    server::cancel_on_signals(shutdown.clone());
    let listener = bind_api(args.listen).await?;
    let addr = listener.local_addr().map_err(|source| AppError::Listen {
        addr: args.listen,
        source,
    })?;
    let api = ApiServer::start(options, shutdown.clone());
    tracing::info!(url = %format!("http://{addr}"), "embedded API ready (kubectl --server http://{addr})");
    embedded::serve(api, listener, shutdown)
        .await
        .map_err(|source| AppError::Listen { addr, source })
}

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

/// `tephra serve`: pick the cluster (or start the embedded API), start the shared caches, the
/// HTTPS and metrics listeners with the admission webhooks, and run until a signal.
async fn serve(args: ServeArgs) -> Result<(), AppError> {
    let checked = preflight(&args)?;
    // Files named by flags are checked before anything starts.
    let scheduler_conf = match &args.config {
        Some(path) => crate::scheduler::config::load(path)?,
        None => crate::scheduler::SchedulerConf::builtin(),
    };
    let ignored = scheduler_conf.ignored_plugins();
    if !ignored.is_empty() {
        tracing::warn!(plugins = ?ignored, "scheduler configuration names Volcano plugins tephra does not run; they are left out");
    }
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
    // The embedded API stops last, when `serve` returns (however it returns): everything that
    // talks to it has stopped by then, so no request of theirs fails on a closed API.
    let api_stop = CancellationToken::new();
    let _api_stop = api_stop.clone().drop_guard();
    let state = ServerState::new(metrics.clone());
    if elect {
        args.leader
            .timings()
            .check()
            .map_err(|e| AppError::Leader(Box::new(e)))?;
    }
    // Everything that writes (controllers, session, status writers, the nudger, extender
    // answers) runs under `leadership`; the caches and webhooks run on every replica.
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

    // Embedded mode: bind the API first and point the ordinary kube client at it, exactly as
    // at a cluster; nothing downstream knows the difference.
    let (client, embedded_api) = if let Some(options) = checked.embedded {
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
        (client, Some((listener, options, config)))
    } else {
        let source = cluster::config::choose(
            &cluster::Environment::from_process(),
            args.kubeconfig.as_deref(),
        )?;
        tracing::info!(%source, "using cluster");
        let config = cluster::config::load(&source).await?;
        (cluster::config::connect(config).await?, None)
    };

    // On a cluster the watches start now; in embedded mode once the CRDs are installed.
    let (caches, mut feeds) = Caches::new();
    let scheduler = Scheduler::new(
        SchedulerOptions {
            scheduler_names: args.scheduler_names.clone(),
            period: args.schedule_period,
            config_path: args.config.clone(),
            ..SchedulerOptions::default()
        },
        scheduler_conf,
        metrics.registry(),
    )?;
    scheduler.subscribe(&mut feeds);
    let controllers =
        start_controllers(&args, &client, &caches, &mut feeds, &metrics, &leadership)?;
    let mut feeds = Some(feeds);
    if !args.embedded
        && let Some(f) = feeds.take()
    {
        f.run(&client, &shutdown);
    }
    track_cache_sync(caches.clone(), state.clone());
    // Not ready until the built-in queues are in the cache the webhooks read: a vcJob sent as
    // soon as /readyz answers 200 must not be refused for a missing `default` queue.
    state.set_condition("default-queues", false);
    let queue_view = caches.clone();
    let admission = Arc::new(AdmissionContext {
        config: AdmissionConfig {
            scheduler_names: args.scheduler_names.clone(),
            ..AdmissionConfig::default()
        },
        view: Arc::new(caches),
        metrics: AdmissionMetrics::new(metrics.registry())?,
    });
    let mut config = server_config(&args);
    if args.tls_mode == TlsMode::SelfManaged {
        // Before the listener binds: it serves the Secret's pair from its first connection.
        let boot = crate::selftls::bootstrap(&client, self_tls_config(&args)?).await?;
        let (live, rx) = tokio::sync::watch::channel(boot.serving.clone());
        config.tls = TlsSource::Managed(ManagedTls(rx));
        tokio::spawn(boot.run(live, leadership.clone(), metrics.clone(), shutdown.clone()));
    }
    if args.embedded {
        config.self_signed_names = certs::service_dns_names(WEBHOOK_SERVICE.0, WEBHOOK_SERVICE.1);
    }
    let extender = Arc::new(Extender::new(
        client.clone(),
        scheduler.clone(),
        ExtenderOptions {
            bind_hold_timeout: args.extender.bind_hold_timeout,
            bind_gather_timeout: args.extender.bind_gather_timeout,
            bind_ahead: args.extender.bind_ahead,
            plan_wait: args.extender.extender_plan_wait,
        },
        metrics.registry(),
    )?);
    let extender_routes = if elect {
        extender::router_for_leader(extender.clone(), leadership.clone())
    } else {
        extender::router(extender.clone())
    };
    let routes = admission::router(admission).merge(extender_routes);
    let bound = server::bind(config, routes, state.clone())?;
    let https_addr = bound.https_addr();
    let metrics_at = bound
        .metrics_addr()
        .map_or_else(|| "the HTTPS listener".to_string(), |a| a.to_string());
    tracing::info!(https = %https_addr, metrics = %metrics_at, "serving");
    // `_https_runtime` is dropped when this function returns, after everything else stopped.
    let (running, _https_runtime) = serve_on_own_thread(bound, shutdown.clone())?;

    let mut stand_in = None;
    if let Some((listener, options, config)) = embedded_api {
        let (target, ca) = match checked.webhook {
            Some((host, ca)) => (host.target(https_addr.port()), ca),
            // The self-signed pair was made for the Service of manifests/webhooks.yaml.
            None => (
                WebhookTarget::AsWritten,
                state.self_signed_ca_pem().ok_or_else(|| {
                    AppError::Embedded("no CA for the webhook configurations".into())
                })?,
            ),
        };
        let feeds = feeds.take();
        let webhooks = EmbeddedWebhooks {
            https_addr,
            ca_pem: &ca,
            target: &target,
        };
        let api = EmbeddedApi {
            listener,
            options,
            data: args.embedded_data.as_deref(),
        };
        start_embedded(&client, api, webhooks, feeds, &shutdown, &api_stop).await?;
        if !args.no_sim_scheduler {
            stand_in = Some(start_sim_scheduler(
                config, &args, https_addr, ca, &shutdown,
            )?);
        }
    }
    track_default_queues(queue_view, state.clone());
    // In the background: on a cluster still being set up this waits for tephra's CRDs while
    // the listeners answer (`/readyz` failing) and the elector campaigns.
    let queues = {
        let (client, stop) = (client.clone(), shutdown.clone());
        tokio::spawn(async move {
            let ensured = cluster::ensure_default_queues(&client).await;
            if let Err(e) = &ensured {
                tracing::error!(error = %report(e), "cannot create the built-in queues; shutting down");
                stop.cancel();
            }
            ensured.map(drop)
        })
    };
    let elector = elect.then(|| {
        // Not ready while no replica could lead: the Lease's namespace or RBAC is missing.
        let ready = state.clone();
        let elector = Arc::new(
            Elector::new(&client, elector_config(&args), leadership.clone())
                .with_readiness(move |ok| ready.set_condition("lease", ok)),
        );
        let (e, stop) = (elector.clone(), shutdown.clone());
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
    // The scheduling session (its status writer included) and the nudger start once this
    // replica leads, and stop when leadership ends.
    let leader_tasks = {
        let (leadership, scheduler, client) =
            (leadership.clone(), scheduler.clone(), client.clone());
        tokio::spawn(async move {
            if !leadership.wait_elected().await {
                return None;
            }
            let nudger = extender.spawn_nudger(leadership.token().clone());
            let session = scheduler.spawn(client, leadership.token().clone());
            Some([nudger, session])
        })
    };

    // Until a signal (or a lost Lease): then /readyz fails, in-flight requests drain.
    running.await.map_err(|e| AppError::Task(e.to_string()))??;
    shutdown.cancel();
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
        // Its requests must be over before the embedded API closes (when this returns).
        let joined = tokio::task::spawn_blocking(move || thread.join());
        if tokio::time::timeout(LEADER_TASKS_STOP, joined)
            .await
            .is_err()
        {
            tracing::warn!(after = ?LEADER_TASKS_STOP, "the kube-scheduler stand-in did not stop in time");
        }
    }
    queues?;
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
        registered = webhooks::register(client, hooks.ca_pem, hooks.target) => registered?,
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
/// go on `feeds` before the watches start); their workers run while `leadership` is held.
fn start_controllers(
    args: &ServeArgs,
    client: &kube::Client,
    caches: &Caches,
    feeds: &mut CacheFeeds,
    metrics: &Metrics,
    leadership: &Leadership,
) -> Result<crate::controllers::Controllers, AppError> {
    let config = crate::controllers::ControllerConfig {
        scheduler_names: args.scheduler_names.clone(),
        inherit_owner_annotations: args.inherit_owner_annotations,
        job: crate::controllers::job::JobConfig {
            workers: usize::from(args.job_workers),
            max_requeue: args.max_requeue,
            plan_gate_schedulers: if args.extender.gate_until_placed {
                args.scheduler_names.clone()
            } else {
                Vec::new()
            },
        },
        leadership: leadership.clone(),
        ..crate::controllers::ControllerConfig::default()
    };
    Ok(crate::controllers::start(
        client,
        caches,
        feeds,
        config,
        metrics.registry(),
        leadership.token(),
    )?)
}
