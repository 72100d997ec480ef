//! The kube-scheduler stand-in of embedded mode: it plays kube-scheduler configured with
//! `manifests/scheduler-config.yaml`, against this service's own extender over HTTPS, so a
//! gang runs from end to end on one machine; and kube-scheduler's default profile for pods
//! that name no scheduler (its own fit checks, the least allocated node, a Binding), so plain
//! workloads run too. A pod naming a scheduler nothing here runs gets a Warning Event.
//!
//! What it copies from kube-scheduler (`pkg/scheduler`), because the extender's behaviour
//! depends on it:
//! * one scheduling cycle at a time: its own fit checks (resources, pod count, node selector
//!   and required node affinity, taints, ready and cordoned nodes), then `filter` with the names that pass (`nodeCacheCapable`,
//!   `percentageOfNodesToScore: 100`), then `prioritize` unless one node is left;
//! * the chosen node is *assumed* in its own cache at once and the binding cycle (`bind`) runs
//!   concurrently, one task per pod, so held gang binds do not stop the next cycle;
//! * a pod with scheduling gates is left alone until its last gate is removed;
//! * a pod that cannot be placed gets `PodScheduled=False` (reason `Unschedulable`) and a
//!   `FailedScheduling` Event, and waits in the unschedulable queue until a cluster event (node
//!   added or changed, a pod deleted or finished, the pod itself updated) moves it, with
//!   kube-scheduler's per-pod backoff (1 s doubling to 10 s); an error (extender error, failed
//!   bind) goes to the backoff queue directly; leftovers are flushed after 5 minutes.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use tephra_api::events::{EventType, object_ref};
use tephra_api::extender::{
    ExtenderBindingArgs, ExtenderBindingResult, ExtenderFilterResult, HostPriority,
};
use tephra_scheduler::plugins::predicates::{term_matches, untolerated};
use tephra_scheduler::resource::{PODS, Resource, pod_request};

/// kube-scheduler's initial per-pod backoff.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// kube-scheduler's largest per-pod backoff.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// kube-scheduler's `podMaxInUnschedulablePodsDuration`.
pub const MAX_UNSCHEDULABLE: Duration = Duration::from_secs(300);
/// The extender's `httpTimeout` in the shipped manifest.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(5);
/// The scheduler name of pods that name none: kube-scheduler's default profile, which the
/// stand-in plays without the extender (fit checks, then the least allocated node).
pub const DEFAULT_PROFILE: &str = "default-scheduler";
/// The extender's `weight` in the shipped manifest.
pub const EXTENDER_WEIGHT: i64 = 1;

/// Errors starting the stand-in.
#[derive(Debug, thiserror::Error)]
pub enum SimSchedulerError {
    /// The CA is not usable.
    #[error("extender CA: {0}")]
    Ca(String),
    /// The HTTPS client could not be built.
    #[error("extender client: {0}")]
    Client(String),
}

/// How the stand-in reaches the extender.
#[derive(Clone, Debug)]
pub struct SimSchedulerOptions {
    /// Scheduler names whose pods it schedules.
    pub scheduler_names: Vec<String>,
    /// The host name in the extender URL (the certificate must name it).
    pub host: String,
    /// Where that host is (the local HTTPS listener).
    pub addr: SocketAddr,
    /// PEM CA that signs the serving certificate.
    pub ca_pem: String,
    /// Extender `httpTimeout`.
    pub http_timeout: Duration,
}

#[derive(Clone, Debug)]
struct SimNode {
    allocatable: Resource,
    used: Resource,
    pods: u32,
    ready: bool,
    unschedulable: bool,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
}

#[derive(Clone, Debug)]
struct SimPod {
    pod: Arc<Pod>,
    req: Resource,
    /// The node it counts against (bound, or assumed by this stand-in).
    node: Option<String>,
    assumed: bool,
    /// Ours and waiting to be scheduled.
    pending: bool,
}

#[derive(Debug, Default)]
struct Queues {
    active: VecDeque<String>,
    queued: HashSet<String>,
    /// uid → when its backoff ends.
    backoff: HashMap<String, Instant>,
    /// uid → since when.
    unschedulable: HashMap<String, Instant>,
    /// uid → failed attempts.
    attempts: HashMap<String, u32>,
    /// In a scheduling or binding cycle.
    in_flight: HashSet<String>,
    /// In flight and updated meanwhile: a failure then retries after the backoff instead of
    /// parking the pod as unschedulable, as kube-scheduler does with events that arrive while a
    /// pod is being scheduled (the update may be what makes it schedulable, e.g. tephra's
    /// nudge of a gang member turned down just before its gang was placed).
    updated_in_flight: HashSet<String>,
}

#[derive(Debug, Default)]
struct State {
    nodes: BTreeMap<String, SimNode>,
    pods: HashMap<String, SimPod>,
    queues: Queues,
    /// Last unschedulable message written per pod, so it is written once.
    last_message: HashMap<String, String>,
    /// Pods and vcJobs already told that no scheduler serves their scheduler name (by uid).
    told_unserved: HashSet<String>,
}

impl State {
    fn contribute(&mut self, p: &SimPod, add: bool) {
        let Some(n) = p.node.as_deref().and_then(|n| self.nodes.get_mut(n)) else {
            return;
        };
        let mut r = p.req.clone();
        r.scalars.remove(PODS);
        if add {
            n.used.add(&r);
            n.pods += 1;
        } else {
            n.used.sub(&r);
            n.pods = n.pods.saturating_sub(1);
        }
    }

    fn enqueue(&mut self, uid: &str) {
        let q = &mut self.queues;
        if q.in_flight.contains(uid) || q.queued.contains(uid) {
            return;
        }
        q.unschedulable.remove(uid);
        if let Some(until) = q.backoff.get(uid)
            && *until > Instant::now()
        {
            return; // moved to active when its backoff ends
        }
        q.backoff.remove(uid);
        q.queued.insert(uid.to_string());
        q.active.push_back(uid.to_string());
    }

    /// Assumes pod `uid` on `node` at the end of its scheduling cycle; `false` ends the cycle
    /// instead. A pod bound while its cycle ran (tephra's binder binds the members of a gang
    /// that gathered ahead of kube-scheduler) is already counted on its node: as
    /// kube-scheduler's cache refuses to assume a pod it holds, it is not counted twice, which
    /// would leave the node looking fuller than it is for as long as the pod lives.
    fn assume(&mut self, uid: &str, node: &str) -> bool {
        let Some(mut p) = self
            .pods
            .get(uid)
            .filter(|p| p.node.is_none() && p.pending)
            .cloned()
        else {
            self.queues.in_flight.remove(uid);
            self.queues.updated_in_flight.remove(uid);
            return false;
        };
        p.node = Some(node.to_string());
        p.assumed = true;
        self.contribute(&p, true);
        self.pods.insert(uid.to_string(), p);
        true
    }

    /// kube-scheduler's MoveAllToActiveOrBackoffQueue on a cluster event.
    fn flush_unschedulable(&mut self) {
        let uids: Vec<String> = self.queues.unschedulable.keys().cloned().collect();
        for uid in uids {
            self.queues.unschedulable.remove(&uid);
            if !self.queues.backoff.contains_key(&uid) {
                self.enqueue(&uid);
            }
        }
    }
}

/// Why a node failed the stand-in's own fit checks, before it is turned into text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Why<'a> {
    /// A fixed reason.
    Fixed(&'static str),
    /// `Insufficient <resource>`.
    Insufficient(&'a str),
    /// A NoSchedule or NoExecute taint (key, value) no toleration covers.
    Taint(&'a str, &'a str),
}

/// The body of `filter` and `prioritize` (`ExtenderArgs` with `nodeCacheCapable: true`),
/// serialized straight from the pod and the names rather than through a `serde_json::Value`.
#[derive(serde::Serialize)]
struct FilterArgs<'a> {
    #[serde(rename = "Pod")]
    pod: &'a Pod,
    /// Always `null` in this form.
    #[serde(rename = "Nodes")]
    nodes: Option<()>,
    #[serde(rename = "NodeNames")]
    node_names: &'a [String],
}

/// The pod, the feasible node names, and the count of each reason others failed.
type Feasible = (Arc<Pod>, Vec<String>, BTreeMap<String, usize>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Sim {
    client: Client,
    http: reqwest::Client,
    base: String,
    names: Vec<String>,
    state: Mutex<State>,
    wake: Notify,
}

fn https_client(opts: &SimSchedulerOptions) -> Result<reqwest::Client, SimSchedulerError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(opts.ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| SimSchedulerError::Ca(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| SimSchedulerError::Ca(e.to_string()))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SimSchedulerError::Client(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .https_only(true)
        .timeout(opts.http_timeout)
        .resolve(&opts.host, opts.addr)
        .build()
        .map_err(|e| SimSchedulerError::Client(e.to_string()))
}

/// Starts the stand-in on a thread of its own with its own runtime and API client; it runs
/// until `shutdown`.
///
/// kube-scheduler is a process of its own with its own CPU. On the serving runtime the
/// stand-in's one-pod-at-a-time cycle waited behind every request of a burst (the API, the
/// webhooks, the controllers), and binding stalled for seconds while pods were being created.
pub fn start(
    config: kube::Config,
    opts: SimSchedulerOptions,
    shutdown: CancellationToken,
) -> Result<std::thread::JoinHandle<()>, SimSchedulerError> {
    let http = https_client(&opts)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SimSchedulerError::Client(format!("runtime: {e}")))?;
    // The thread ends once `shutdown` is cancelled and its runtime (with every request it
    // had in flight) is gone: join it before the API it talks to stops.
    std::thread::Builder::new()
        .name("kube-scheduler-stand-in".into())
        .spawn(move || {
            runtime.block_on(async move {
                // The client is made here so its connections and its request buffer live on
                // this runtime, not the serving one.
                let client = match Client::try_from(config) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(error = %e, "kube-scheduler stand-in: no API client");
                        return;
                    }
                };
                let sim = Arc::new(Sim {
                    client,
                    http,
                    base: format!("https://{}:{}/scheduler", opts.host, opts.addr.port()),
                    names: opts.scheduler_names,
                    state: Mutex::new(State::default()),
                    wake: Notify::new(),
                });
                tokio::spawn(watch_nodes(sim.clone(), shutdown.clone()));
                tokio::spawn(watch_pods(sim.clone(), shutdown.clone()));
                schedule_loop(sim, shutdown).await;
            });
        })
        .map_err(|e| SimSchedulerError::Client(format!("thread: {e}")))
}

async fn watch_nodes(sim: Arc<Sim>, shutdown: CancellationToken) {
    let api: Api<Node> = Api::all(sim.client.clone());
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        let ev = tokio::select! {
            () = shutdown.cancelled() => return,
            ev = stream.next() => ev,
        };
        let Some(ev) = ev else { return };
        let Ok(ev) = ev else { continue };
        let mut st = lock(&sim.state);
        match ev {
            watcher::Event::Apply(n) | watcher::Event::InitApply(n) => {
                apply_node(&mut st, &n);
                st.flush_unschedulable();
            }
            watcher::Event::Delete(n) => {
                if let Some(name) = n.metadata.name.as_deref() {
                    st.nodes.remove(name);
                }
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
        drop(st);
        sim.wake.notify_one();
    }
}

fn apply_node(st: &mut State, n: &Node) {
    let Some(name) = n.metadata.name.clone() else {
        return;
    };
    let status = n.status.as_ref();
    let allocatable = status
        .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
        .map(Resource::from_list)
        .unwrap_or_default();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let unschedulable = n
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let labels = n.metadata.labels.clone().unwrap_or_default();
    let taints = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let existed = st.nodes.contains_key(&name);
    let e = st.nodes.entry(name).or_insert_with(|| SimNode {
        allocatable: Resource::zero(),
        used: Resource::zero(),
        pods: 0,
        ready,
        unschedulable,
        labels: BTreeMap::new(),
        taints: Vec::new(),
    });
    e.allocatable = allocatable;
    e.ready = ready;
    e.unschedulable = unschedulable;
    e.labels = labels;
    e.taints = taints;
    if !existed {
        // Pods that arrived before their node count now.
        let pods: Vec<SimPod> = st.pods.values().cloned().collect();
        if let Some(n) = n.metadata.name.as_deref() {
            for p in pods.iter().filter(|p| p.node.as_deref() == Some(n)) {
                st.contribute(p, true);
            }
        }
    }
}

async fn watch_pods(sim: Arc<Sim>, shutdown: CancellationToken) {
    let api: Api<Pod> = Api::all(sim.client.clone());
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        let ev = tokio::select! {
            () = shutdown.cancelled() => return,
            ev = stream.next() => ev,
        };
        let Some(ev) = ev else { return };
        let Ok(ev) = ev else { continue };
        let mut st = lock(&sim.state);
        match ev {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                sim.apply_pod(&mut st, p);
            }
            watcher::Event::Delete(p) => {
                if let Some(uid) = p.metadata.uid.as_deref()
                    && let Some(old) = st.pods.remove(uid)
                {
                    st.contribute(&old, false);
                    st.queues.unschedulable.remove(uid);
                    st.queues.backoff.remove(uid);
                    st.queues.attempts.remove(uid);
                    st.last_message.remove(uid);
                    st.told_unserved.remove(uid);
                    if old.node.is_some() {
                        st.flush_unschedulable();
                    }
                }
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
        drop(st);
        sim.wake.notify_one();
    }
}

impl Sim {
    /// Pods it schedules: those of the extender's profiles, and `default-scheduler`'s, which
    /// embedded mode has no other scheduler for.
    fn ours(&self, pod: &Pod) -> bool {
        let name = profile_of(pod);
        name == DEFAULT_PROFILE || self.extended(name)
    }

    /// A pod naming a scheduler nobody runs here would wait for ever without a word: it (and
    /// the vcJob it belongs to) gets one Warning Event saying so.
    fn tell_unserved(&self, st: &mut State, pod: &Pod) {
        let name = profile_of(pod).to_string();
        let mut served = vec![DEFAULT_PROFILE.to_string()];
        served.extend(self.names.iter().cloned());
        let message = format!(
            "no scheduler serves schedulerName {name:?} in embedded mode (served: {}); the pod stays Pending until one does",
            served.join(", ")
        );
        let ns = pod.metadata.namespace.as_deref();
        let mut objects = Vec::new();
        if let Some(uid) = pod.metadata.uid.as_deref()
            && st.told_unserved.insert(uid.to_string())
        {
            objects.push(object_ref(
                "v1",
                "Pod",
                ns,
                pod.metadata.name.as_deref().unwrap_or_default(),
                Some(uid),
            ));
        }
        for owner in pod.metadata.owner_references.iter().flatten() {
            if owner.kind == "Job"
                && owner.api_version.starts_with("batch.volcano.sh/")
                && st.told_unserved.insert(owner.uid.clone())
            {
                objects.push(object_ref(
                    &owner.api_version,
                    "Job",
                    ns,
                    &owner.name,
                    Some(&owner.uid),
                ));
            }
        }
        if objects.is_empty() {
            return;
        }
        let recorder = EventRecorder::new(self.client.clone(), DEFAULT_PROFILE);
        tokio::spawn(async move {
            for o in objects {
                if let Err(e) = recorder
                    .record(&o, EventType::Warning, "NoScheduler", &message)
                    .await
                {
                    tracing::debug!(error = %tephra_report::report(&e), "kube-scheduler stand-in: event not recorded");
                }
            }
        });
    }

    /// Is `profile` one whose pods go through the extender?
    fn extended(&self, profile: &str) -> bool {
        self.names.iter().any(|n| n == profile)
    }

    fn apply_pod(&self, st: &mut State, pod: Pod) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("Pending");
        let terminal = matches!(phase, "Succeeded" | "Failed");
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        let old = st.pods.remove(&uid);
        if let Some(o) = &old {
            st.contribute(o, false);
        }
        let (node, assumed) = match (&bound, &old) {
            _ if terminal => (None, false),
            (Some(n), _) => (Some(n.clone()), false),
            (None, Some(o)) if o.assumed => (o.node.clone(), true),
            _ => (None, false),
        };
        // A gated pod waits outside the queues until its last gate goes (kube-scheduler's
        // SchedulingGates PreEnqueue check); it then starts afresh, with no backoff.
        let gated = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_gates.as_ref())
            .is_some_and(|g| !g.is_empty());
        let waiting = bound.is_none() && !terminal && pod.metadata.deletion_timestamp.is_none();
        let pending = waiting && !gated && self.ours(&pod);
        if waiting && !self.ours(&pod) {
            self.tell_unserved(st, &pod);
        }
        let spec_changed = old.as_ref().is_some_and(|o| {
            o.pod.metadata.labels != pod.metadata.labels
                || o.pod.metadata.annotations != pod.metadata.annotations
                || o.pod.spec != pod.spec
        });
        let freed = old
            .as_ref()
            .is_some_and(|o| o.node.is_some() && !o.assumed && node.is_none());
        let p = SimPod {
            req: pod_request(&pod),
            pod: Arc::new(pod),
            node,
            assumed,
            pending,
        };
        st.contribute(&p, true);
        st.pods.insert(uid.clone(), p);
        if pending {
            let known = st.queues.unschedulable.contains_key(&uid)
                || st.queues.backoff.contains_key(&uid)
                || st.queues.queued.contains(&uid)
                || st.queues.in_flight.contains(&uid);
            if spec_changed && st.queues.in_flight.contains(&uid) {
                st.queues.updated_in_flight.insert(uid.clone());
            }
            if !known || (spec_changed && st.queues.unschedulable.contains_key(&uid)) {
                // A new pod, or an update that may make an unschedulable pod schedulable.
                st.enqueue(&uid);
            }
        } else {
            st.queues.unschedulable.remove(&uid);
            st.queues.updated_in_flight.remove(&uid);
            st.queues.backoff.remove(&uid);
            st.queues.attempts.remove(&uid);
            st.last_message.remove(&uid);
        }
        if freed {
            st.flush_unschedulable();
        }
    }

    /// The next pod to schedule, moving pods whose backoff ended and leftovers first; or how
    /// long to sleep.
    fn next(&self) -> Result<String, Duration> {
        let mut st = lock(&self.state);
        let now = Instant::now();
        let due: Vec<String> = st
            .queues
            .backoff
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for uid in due {
            st.queues.backoff.remove(&uid);
            if !st.queues.unschedulable.contains_key(&uid) {
                st.enqueue(&uid);
            }
        }
        let stale: Vec<String> = st
            .queues
            .unschedulable
            .iter()
            .filter(|(_, t)| now.duration_since(**t) >= MAX_UNSCHEDULABLE)
            .map(|(k, _)| k.clone())
            .collect();
        for uid in stale {
            st.queues.unschedulable.remove(&uid);
            st.enqueue(&uid);
        }
        while let Some(uid) = st.queues.active.pop_front() {
            st.queues.queued.remove(&uid);
            if st.pods.get(&uid).is_some_and(|p| p.pending && !p.assumed) {
                st.queues.in_flight.insert(uid.clone());
                return Ok(uid);
            }
        }
        let next_backoff = st.queues.backoff.values().min().copied();
        Err(next_backoff
            .map(|t| t.saturating_duration_since(now))
            .unwrap_or(Duration::from_secs(1))
            .clamp(Duration::from_millis(5), Duration::from_secs(1)))
    }

    fn backoff_of(&self, st: &mut State, uid: &str) -> Duration {
        let n = st.queues.attempts.entry(uid.to_string()).or_insert(0);
        *n += 1;
        let d = INITIAL_BACKOFF.saturating_mul(1 << (*n - 1).min(8));
        d.min(MAX_BACKOFF)
    }

    /// A scheduling cycle ended without a node: the pod goes to the unschedulable queue (or,
    /// after an error, straight to backoff), and its condition and Event are written once
    /// per message.
    async fn failed(&self, uid: &str, message: String, error: bool) {
        let (pod, write) = {
            let mut st = lock(&self.state);
            st.queues.in_flight.remove(uid);
            let updated = st.queues.updated_in_flight.remove(uid);
            let d = self.backoff_of(&mut st, uid);
            st.queues
                .backoff
                .insert(uid.to_string(), Instant::now() + d);
            if !error && !updated {
                st.queues
                    .unschedulable
                    .insert(uid.to_string(), Instant::now());
            }
            tracing::debug!(
                pod = st.pods.get(uid).and_then(|p| p.pod.metadata.name.as_deref()).unwrap_or(uid),
                %message, error, updated, "kube-scheduler stand-in: no node"
            );
            let write = st.last_message.get(uid) != Some(&message);
            st.last_message.insert(uid.to_string(), message.clone());
            (st.pods.get(uid).map(|p| p.pod.clone()), write)
        };
        let Some(pod) = pod else { return };
        if !write {
            return;
        }
        // Written off the scheduling cycle, as kube-scheduler's status updater and event
        // broadcaster do, so the next cycle does not wait for the API.
        let client = self.client.clone();
        // Each kube-scheduler profile records its Events as its scheduler name.
        let recorder = EventRecorder::new(client.clone(), profile_of(&pod));
        let uid = uid.to_string();
        tokio::spawn(async move { write_unschedulable(client, recorder, pod, uid, message).await });
    }

    /// Its own fit checks, as kube-scheduler's NodeResourcesFit, NodeName, NodeUnschedulable,
    /// NodeAffinity (selector) plugins: the feasible node names, or the reasons none is.
    fn feasible(&self, uid: &str) -> Option<Feasible> {
        let st = lock(&self.state);
        let p = st.pods.get(uid)?;
        let spec = p.pod.spec.as_ref();
        let selector = spec.and_then(|s| s.node_selector.as_ref());
        let required_terms = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|r| r.node_selector_terms.as_slice());
        let tolerations = spec
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default();
        let tolerates_cordon = spec.and_then(|s| s.tolerations.as_ref()).is_some_and(|ts| {
            ts.iter().any(|t| {
                t.key.as_deref() == Some("node.kubernetes.io/unschedulable")
                    || (t.key.is_none() && t.operator.as_deref() == Some("Exists"))
            })
        });
        let mut want = p.req.clone();
        want.scalars.remove(PODS);
        let mut names = Vec::with_capacity(st.nodes.len());
        // Counted by a borrowed reason and turned into text once: this loop runs over every
        // node in every scheduling cycle, so it allocates only for the names it keeps.
        let mut counts: BTreeMap<Why<'_>, usize> = BTreeMap::new();
        for (name, n) in &st.nodes {
            let why = if !n.ready {
                Some(Why::Fixed("node(s) were not ready"))
            } else if n.unschedulable && !tolerates_cordon {
                Some(Why::Fixed("node(s) were unschedulable"))
            } else if selector
                .is_some_and(|sel| sel.iter().any(|(k, v)| n.labels.get(k) != Some(v)))
                || required_terms
                    .is_some_and(|ts| !ts.iter().any(|t| term_matches(t, name, &n.labels)))
            {
                Some(Why::Fixed(
                    "node(s) didn't match Pod's node affinity/selector",
                ))
            } else if let Some(t) = untolerated(&n.taints, tolerations) {
                Some(Why::Taint(&t.key, t.value.as_deref().unwrap_or("")))
            } else if n.allocatable.get(PODS) > 0.0
                && f64::from(n.pods + 1) > n.allocatable.get(PODS) / 1000.0
            {
                Some(Why::Fixed("Too many pods"))
            } else {
                want.first_exceeding_free(&n.allocatable, &n.used)
                    .map(Why::Insufficient)
            };
            match why {
                None => names.push(name.clone()),
                Some(r) => *counts.entry(r).or_default() += 1,
            }
        }
        let reasons = counts
            .into_iter()
            .map(|(why, n)| {
                let text = match why {
                    Why::Fixed(t) => t.to_string(),
                    Why::Insufficient(r) => format!("Insufficient {r}"),
                    Why::Taint(k, v) => format!("node(s) had untolerated taint {{{k}: {v}}}"),
                };
                (text, n)
            })
            .collect();
        Some((p.pod.clone(), names, reasons))
    }

    async fn post<T: serde::de::DeserializeOwned, B: serde::Serialize + ?Sized>(
        &self,
        verb: &str,
        body: &B,
    ) -> Result<T, String> {
        let r = self
            .http
            .post(format!("{}/{verb}", self.base))
            .json(body)
            .send()
            .await
            .map_err(|e| format!("extender {verb}: {e}"))?;
        let status = r.status();
        if !status.is_success() {
            return Err(format!("extender {verb}: HTTP {status}"));
        }
        r.json::<T>()
            .await
            .map_err(|e| format!("extender {verb}: {e}"))
    }

    /// One scheduling cycle.
    async fn schedule_one(self: &Arc<Self>, uid: String) {
        let Some((pod, names, reasons)) = self.feasible(&uid) else {
            {
                let mut st = lock(&self.state);
                st.queues.in_flight.remove(&uid);
                st.queues.updated_in_flight.remove(&uid);
            }
            return;
        };
        let total = lock(&self.state).nodes.len();
        if names.is_empty() {
            let msg = fit_message(total, &reasons);
            self.failed(&uid, msg, false).await;
            return;
        }
        if !self.extended(profile_of(&pod)) {
            // kube-scheduler's default profile: its fit checks passed; the node with the most
            // room left (NodeResourcesFit's LeastAllocated score) wins.
            let node = lock(&self.state).least_allocated(&names, &pod_request(&pod));
            if let Some(node) = node
                && lock(&self.state).assume(&uid, &node)
            {
                let me = self.clone();
                tokio::spawn(async move { me.bind(uid, pod, node).await });
            }
            return;
        }
        let body = FilterArgs {
            pod: &pod,
            nodes: None,
            node_names: &names,
        };
        let result: ExtenderFilterResult = match self.post("filter", &body).await {
            Ok(r) => r,
            Err(e) => return self.failed(&uid, e, true).await,
        };
        if !result.error.is_empty() {
            return self.failed(&uid, result.error, true).await;
        }
        let kept = result.node_names.unwrap_or_default();
        if kept.is_empty() {
            let mut all = reasons;
            for r in result
                .failed_nodes
                .values()
                .chain(result.failed_and_unresolvable_nodes.values())
            {
                *all.entry(r.clone()).or_default() += 1;
            }
            self.failed(&uid, fit_message(total, &all), false).await;
            return;
        }
        let node = if kept.len() == 1 {
            kept[0].clone()
        } else {
            let body = FilterArgs {
                pod: &pod,
                nodes: None,
                node_names: &kept,
            };
            match self.post::<Vec<HostPriority>, _>("prioritize", &body).await {
                Ok(scores) => {
                    let by: HashMap<&str, i64> =
                        scores.iter().map(|h| (h.host.as_str(), h.score)).collect();
                    // Extender scores are scaled to kube-scheduler's 0..100 and weighted; the
                    // first best node wins (kube-scheduler picks among ties at random).
                    let mut best = (i64::MIN, kept[0].clone());
                    for n in &kept {
                        let s = by.get(n.as_str()).copied().unwrap_or(0) * 10 * EXTENDER_WEIGHT;
                        if s > best.0 {
                            best = (s, n.clone());
                        }
                    }
                    best.1
                }
                Err(e) => return self.failed(&uid, e, true).await,
            }
        };
        // Assume, then bind in its own task (the binding cycle).
        if !lock(&self.state).assume(&uid, &node) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move { me.bind(uid, pod, node).await });
    }

    /// The binding cycle: through the extender's `bind` for its profiles, a Binding posted
    /// to the API for the default profile.
    async fn bind(&self, uid: String, pod: Arc<Pod>, node: String) {
        let args = ExtenderBindingArgs {
            pod_name: pod.metadata.name.clone().unwrap_or_default(),
            pod_namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod_uid: uid.clone(),
            node,
        };
        let err = if self.extended(profile_of(&pod)) {
            match self.post::<ExtenderBindingResult, _>("bind", &args).await {
                Ok(res) if res.error.is_empty() => None,
                Ok(res) => Some(res.error),
                Err(e) => Some(e),
            }
        } else {
            self.post_binding(&args).await.err()
        };
        tracing::debug!(pod = %format!("{}/{}", args.pod_namespace, args.pod_name), node = %args.node, error = ?err, "kube-scheduler stand-in: bind");
        match err {
            None => {
                let mut st = lock(&self.state);
                st.queues.in_flight.remove(&uid);
                st.queues.updated_in_flight.remove(&uid);
                st.queues.attempts.remove(&uid);
            }
            Some(e) => {
                // Forget the assumption; the pod retries after its backoff. The room it held
                // is free again, so the pods parked meanwhile move, as kube-scheduler's binding
                // cycle error handling does (an assigned pod deleted, as far as they can tell).
                {
                    let mut st = lock(&self.state);
                    if let Some(mut p) = st.pods.get(&uid).cloned()
                        && p.assumed
                    {
                        st.contribute(&p, false);
                        p.node = None;
                        p.assumed = false;
                        st.pods.insert(uid.clone(), p);
                        st.flush_unschedulable();
                    }
                }
                self.failed(&uid, format!("binding rejected: {e}"), true)
                    .await;
                self.wake.notify_one();
            }
        }
    }
}

impl Sim {
    /// Binds the pod as kube-scheduler's DefaultBinder does: a Binding on the pod.
    async fn post_binding(&self, args: &ExtenderBindingArgs) -> Result<(), String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &args.pod_namespace);
        let body = args.binding();
        api.create_subresource::<_, serde_json::Value>(
            "binding",
            &args.pod_name,
            &kube::api::PostParams::default(),
            &body,
        )
        .await
        .map(drop)
        .map_err(|e| tephra_report::report(&e).to_string())
    }
}

impl State {
    /// Of `names`, the node that keeps the largest share of its CPU and memory free once
    /// `req` is on it (kube-scheduler's LeastAllocated); the first of equals.
    fn least_allocated(&self, names: &[String], req: &Resource) -> Option<String> {
        let free_share = |n: &SimNode| {
            let share = |alloc: f64, used: f64, want: f64| {
                if alloc <= 0.0 {
                    0.0
                } else {
                    ((alloc - used - want) / alloc).max(0.0)
                }
            };
            share(n.allocatable.milli_cpu, n.used.milli_cpu, req.milli_cpu)
                + share(n.allocatable.memory, n.used.memory, req.memory)
        };
        let mut best: Option<(f64, &String)> = None;
        for name in names {
            let Some(n) = self.nodes.get(name) else {
                continue;
            };
            let score = free_share(n);
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, name));
            }
        }
        best.map(|(_, n)| n.clone())
    }
}

/// Posts Events as one kube-scheduler profile does (the Event itself is tephra-api's).
#[derive(Clone)]
struct EventRecorder {
    client: Client,
    component: String,
}

impl EventRecorder {
    fn new(client: Client, component: &str) -> Self {
        Self {
            client,
            component: component.to_string(),
        }
    }

    async fn record(
        &self,
        object: &k8s_openapi::api::core::v1::ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = tephra_api::events::event(object, type_, reason, message, &self.component, now);
        let ns = event.metadata.namespace.clone().unwrap_or_default();
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(self.client.clone(), &ns)
            .create(&kube::api::PostParams::default(), &event)
            .await
            .map(|_| ())
    }
}

/// `PodScheduled=False` with the reason, and a `FailedScheduling` Event, as kube-scheduler
/// writes them for a pod it cannot place.
async fn write_unschedulable(
    client: Client,
    recorder: EventRecorder,
    pod: Arc<Pod>,
    uid: String,
    message: String,
) {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut conditions: Vec<serde_json::Value> = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .filter(|c| c.type_ != "PodScheduled")
                .filter_map(|c| serde_json::to_value(c).ok())
                .collect()
        })
        .unwrap_or_default();
    conditions.push(json!({
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }));
    let patch = json!({ "status": { "conditions": conditions } });
    let api: Api<Pod> = Api::namespaced(client, &ns);
    if let Err(e) = api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::debug!(pod = %format!("{ns}/{name}"), error = %e, "writing PodScheduled failed");
    }
    let obj = object_ref("v1", "Pod", Some(&ns), &name, Some(&uid));
    if let Err(e) = recorder
        .record(&obj, EventType::Warning, "FailedScheduling", &message)
        .await
    {
        tracing::debug!(pod = %format!("{ns}/{name}"), error = %e, "recording FailedScheduling failed");
    }
}

/// The kube-scheduler profile a pod is scheduled by: its `schedulerName`, `default-scheduler`
/// when it names none.
fn profile_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or(DEFAULT_PROFILE)
}

/// kube-scheduler's FitError text: `0/N nodes are available: <count> <reason>, ...`.
fn fit_message(total: usize, reasons: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!("0/{total} nodes are available: {}.", parts.join(", "))
}

async fn schedule_loop(sim: Arc<Sim>, shutdown: CancellationToken) {
    loop {
        if shutdown.is_cancelled() {
            return;
        }
        match sim.next() {
            Ok(uid) => sim.schedule_one(uid).await,
            Err(wait) => {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = sim.wake.notified() => {}
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {
                "allocatable": {"cpu": cpu, "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }))
        .expect("node")
    }

    fn pending_pod(name: &str) -> SimPod {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
        }))
        .expect("pod");
        SimPod {
            req: pod_request(&pod),
            pod: Arc::new(pod),
            node: None,
            assumed: false,
            pending: true,
        }
    }

    #[test]
    fn a_pod_bound_during_its_cycle_is_not_counted_twice() {
        let mut st = State::default();
        apply_node(&mut st, &node("n1", "2"));
        st.pods.insert("a".into(), pending_pod("a"));
        st.pods.insert("b".into(), pending_pod("b"));
        // "b" is bound by someone else while its scheduling cycle runs; the watch shows it.
        let mut b = st.pods["b"].clone();
        b.node = Some("n1".into());
        b.pending = false;
        st.contribute(&b, true);
        st.pods.insert("b".into(), b);
        st.queues.in_flight.insert("b".into());

        assert!(!st.assume("b", "n1"), "a bound pod is not assumed again");
        assert!(!st.queues.in_flight.contains("b"));
        assert!(st.assume("a", "n1"));
        let n1 = &st.nodes["n1"];
        assert_eq!(n1.used.milli_cpu, 2000.0);
        assert_eq!(n1.pods, 2);
    }
}
