//! The I/O side of leader election: reads and writes the Lease (and the leader label on the
//! Pods), applying [`super::decide`].

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{
    Decision, LEADER_LABEL, LeaderError, Leadership, LeaseRecord, Observed, Timings, decide,
    observe,
};
use crate::cluster::startup::{Class, GRANT_RBAC, WARN_EVERY, WarnEvery, classify};
use crate::cluster::status_code;
use crate::report::report;

/// What the elector needs to know.
#[derive(Clone, Debug)]
pub struct ElectorConfig {
    /// Namespace of the Lease (`--leader-elect-namespace`).
    pub namespace: String,
    /// Name of the Lease (`--leader-elect-lease-name`).
    pub name: String,
    /// This process's identity ([`super::identity`]).
    pub identity: String,
    /// The durations.
    pub timings: Timings,
    /// This process's own Pod (`POD_NAMESPACE`, `POD_NAME` from the downward API), labelled
    /// [`LEADER_LABEL`]`=true` while it leads; `None` outside a Pod.
    pub pod: Option<(String, String)>,
}

/// How [`Elector::run`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Shut down without ever leading.
    NeverLed,
    /// Shut down while leading: call [`Elector::release`] once the leader-only tasks stopped.
    ShutDownLeading,
    /// The Lease could not be renewed within the renew deadline, or another replica took it:
    /// leader-only tasks were stopped; the process should exit and restart as a follower.
    Lost,
}

/// Runs leader election for one process.
pub struct Elector {
    leases: Api<Lease>,
    pods: Option<(Api<Pod>, String)>,
    config: ElectorConfig,
    leadership: Leadership,
    readiness: Option<Readiness>,
}

/// Told whether the Lease can be reached: false while the API answers that its namespace is
/// missing or that tephra may not touch it, true again at the first answer.
type Readiness = Box<dyn Fn(bool) + Send + Sync>;

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The Lease's fields leader election reads.
fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity,
        duration_secs: spec.lease_duration_seconds.unwrap_or(0),
        renew_time: spec.renew_time.map(|t| t.0.to_string()),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}

impl Elector {
    /// An elector that reports through `leadership`.
    pub fn new(client: &Client, config: ElectorConfig, leadership: Leadership) -> Self {
        let leases = Api::namespaced(client.clone(), &config.namespace);
        let pods = config
            .pod
            .as_ref()
            .map(|(ns, name)| (Api::namespaced(client.clone(), ns), name.clone()));
        Self {
            leases,
            pods,
            config,
            leadership,
            readiness: None,
        }
    }

    /// Reports to `f` whether the Lease can be reached, so `/readyz` fails while the cluster
    /// lacks the Lease's namespace or tephra's RBAC: no replica could ever lead then.
    #[must_use]
    pub fn with_readiness(mut self, f: impl Fn(bool) + Send + Sync + 'static) -> Self {
        self.readiness = Some(Box::new(f));
        self
    }

    fn set_ready(&self, ready: bool) {
        if let Some(f) = &self.readiness {
            f(ready);
        }
    }

    /// Says why a campaign attempt failed: what the cluster lacks and its fix at WARN, at most
    /// once per `warn`'s period; other failures at DEBUG between those.
    fn report_failure(&self, e: &LeaderError, warn: &mut WarnEvery) {
        let class = match e {
            LeaderError::Api { source, .. } => classify(source),
            _ => Class::Transient,
        };
        let lacking = matches!(class, Class::Missing | Class::Denied);
        if lacking {
            self.set_ready(false);
        }
        if !warn.due(std::time::Instant::now()) {
            tracing::debug!(error = %report(e), "leader election: attempt failed");
            return;
        }
        let ns = &self.config.namespace;
        match class {
            Class::Missing => tracing::warn!(
                error = %report(e),
                "leader election: waiting for the cluster: the Lease's namespace {ns} does not exist: `kubectl create namespace {ns}` (or, for one replica, --leader-elect=false)"
            ),
            Class::Denied => tracing::warn!(
                error = %report(e),
                "leader election: waiting for the cluster: {GRANT_RBAC}"
            ),
            Class::Transient | Class::Permanent => {
                tracing::warn!(error = %report(e), "leader election: attempt failed");
            }
        }
    }

    /// The leadership this elector drives.
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    /// Bound on one API call: a call slower than this counts as a failed attempt.
    fn attempt_timeout(&self) -> Duration {
        let t = self.config.timings;
        t.retry_period
            .max(Duration::from_secs(1))
            .min(t.renew_deadline)
    }

    fn api_err(&self, action: &'static str) -> impl Fn(kube::Error) -> LeaderError + '_ {
        move |source| LeaderError::Api {
            action,
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source: Box::new(source),
        }
    }

    /// One acquire-or-renew attempt: `Ok(true)` when we hold the Lease afterwards.
    async fn try_once(&self, observed: &mut Option<Observed>) -> Result<bool, LeaderError> {
        let now = Instant::now();
        let me = self.config.identity.as_str();
        let lease_seconds = self.config.timings.lease_seconds();
        let current = self
            .leases
            .get_opt(&self.config.name)
            .await
            .map_err(self.api_err("reading"))?;
        let Some(lease) = current else {
            let fresh = Lease {
                metadata: kube::api::ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.to_string()),
                    lease_duration_seconds: Some(lease_seconds),
                    acquire_time: Some(now_micro()),
                    renew_time: Some(now_micro()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.leases.create(&PostParams::default(), &fresh).await {
                Ok(made) => {
                    *observed = Some(observe(None, record_of(&made), now));
                    Ok(true)
                }
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(self.api_err("creating")(e)),
            };
        };
        let record = record_of(&lease);
        let seen = observe(observed.take(), record.clone(), now);
        let decision = decide(Some(&seen), me, now);
        *observed = Some(seen);
        let mut spec = lease.spec.clone().unwrap_or_default();
        match decision {
            Decision::Wait { holder, expires_in } => {
                tracing::debug!(%holder, ?expires_in, "another replica leads");
                return Ok(false);
            }
            Decision::Renew => {}
            Decision::Acquire | Decision::Create => {
                spec.acquire_time = Some(now_micro());
                spec.lease_transitions = Some(record.transitions.saturating_add(1));
            }
        }
        spec.holder_identity = Some(me.to_string());
        spec.lease_duration_seconds = Some(lease_seconds);
        spec.renew_time = Some(now_micro());
        let mut next = lease;
        next.spec = Some(spec);
        // `next` keeps the resourceVersion read above: a write in between is a 409.
        match self
            .leases
            .replace(&self.config.name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => {
                *observed = Some(observe(None, record_of(&written), now));
                Ok(true)
            }
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(self.api_err("updating")(e)),
        }
    }

    /// [`Self::try_once`] bounded by [`Self::attempt_timeout`].
    async fn attempt(&self, observed: &mut Option<Observed>) -> Result<bool, LeaderError> {
        let after = self.attempt_timeout();
        tokio::time::timeout(after, self.try_once(observed))
            .await
            .unwrap_or(Err(LeaderError::Timeout {
                action: "acquiring or renewing",
                after,
            }))
    }

    /// Campaigns until the Lease is won, then renews it until shutdown or until it is lost.
    /// Leader-only tasks run under [`Leadership::token`], which is cancelled before this
    /// returns [`Outcome::Lost`].
    pub async fn run(&self, shutdown: &CancellationToken) -> Outcome {
        let t = self.config.timings;
        // A container restarted after a crash may still carry the label on its Pod.
        self.label_own_pod(false).await;
        let mut observed = None;
        let mut last_holder: Option<String> = None;
        let mut warn = WarnEvery::new(WARN_EVERY);
        tracing::info!(
            lease = %format!("{}/{}", self.config.namespace, self.config.name),
            identity = %self.config.identity,
            "leader election: campaigning"
        );
        loop {
            let attempt = self.attempt(&mut observed).await;
            if attempt.is_ok() {
                self.set_ready(true);
                warn.reset();
            }
            match attempt {
                Ok(true) => break,
                Ok(false) => {
                    let holder = observed
                        .as_ref()
                        .and_then(|o: &Observed| o.record.holder().map(str::to_string));
                    if holder != last_holder {
                        tracing::info!(holder = ?holder, "leader election: following");
                        last_holder = holder;
                    }
                }
                Err(e) => self.report_failure(&e, &mut warn),
            }
            tokio::select! {
                () = shutdown.cancelled() => return Outcome::NeverLed,
                () = tokio::time::sleep(t.retry_period) => {}
            }
        }
        if shutdown.is_cancelled() {
            // Won in the same instant we were asked to stop: hand it back.
            return Outcome::ShutDownLeading;
        }
        self.leadership.win();
        tracing::info!(identity = %self.config.identity, "leader election: leading");
        self.label_leader().await;
        let mut last_renew = Instant::now();
        loop {
            // Neither the pause nor the attempt may run past the renew deadline: a hung API
            // call must not keep this replica leading after the others may take over.
            let left = t.renew_deadline.saturating_sub(last_renew.elapsed());
            tokio::select! {
                () = shutdown.cancelled() => return Outcome::ShutDownLeading,
                () = tokio::time::sleep(t.retry_period.min(left)) => {}
            }
            let left = t.renew_deadline.saturating_sub(last_renew.elapsed());
            let attempt = match tokio::time::timeout(left, self.attempt(&mut observed)).await {
                Ok(result) => result,
                Err(_) => Err(LeaderError::Timeout {
                    action: "renewing",
                    after: left,
                }),
            };
            match attempt {
                Ok(true) => last_renew = Instant::now(),
                Ok(false) => {
                    self.leadership.end();
                    tracing::error!(
                        holder = ?observed.as_ref().and_then(|o| o.record.holder().map(str::to_string)),
                        "leader election: another replica holds the Lease; stopped leading"
                    );
                    return Outcome::Lost;
                }
                Err(e) => {
                    tracing::warn!(error = %report(&e), "leader election: renewal failed");
                    if last_renew.elapsed() >= t.renew_deadline {
                        // Still inside our lease for the others (renew deadline < lease
                        // duration): stop now, before anyone may take over.
                        self.leadership.end();
                        tracing::error!(
                            renew_deadline = ?t.renew_deadline,
                            "leader election: could not renew the Lease in time; stopped leading"
                        );
                        return Outcome::Lost;
                    }
                }
            }
        }
    }

    /// Gives the Lease up (holder cleared, duration 1 s) so a follower takes over at its next
    /// try instead of waiting out the lease. Call only after the leader-only tasks stopped.
    pub async fn release(&self) -> Result<(), LeaderError> {
        self.leadership.end();
        self.label_own_pod(false).await;
        let after = self.attempt_timeout();
        let work = async {
            let Some(mut lease) = self
                .leases
                .get_opt(&self.config.name)
                .await
                .map_err(self.api_err("reading"))?
            else {
                return Ok(());
            };
            if record_of(&lease).holder() != Some(self.config.identity.as_str()) {
                return Ok(());
            }
            let mut spec = lease.spec.clone().unwrap_or_default();
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(now_micro());
            spec.acquire_time = Some(now_micro());
            lease.spec = Some(spec);
            self.leases
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
                .map_err(self.api_err("releasing"))
        };
        tokio::time::timeout(after, work)
            .await
            .unwrap_or(Err(LeaderError::Timeout {
                action: "releasing",
                after,
            }))?;
        tracing::info!("leader election: Lease released");
        Ok(())
    }

    /// Sets (or removes) the leader label on our own Pod. Failures are logged: the Lease,
    /// not the label, decides who leads; a missing label only delays extender answers.
    async fn label_own_pod(&self, leading: bool) {
        let Some((pods, name)) = &self.pods else {
            return;
        };
        if let Err(e) = set_label(pods, name, leading).await {
            tracing::warn!(error = %report(&e), leading, "leader election: cannot label our Pod");
        }
    }

    /// On winning: label our Pod and take the label off any other Pod that still has it
    /// (a leader that was killed cannot remove its own).
    async fn label_leader(&self) {
        self.label_own_pod(true).await;
        let Some((pods, me)) = &self.pods else {
            return;
        };
        let selector = format!("{LEADER_LABEL}=true");
        match pods.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => {
                for p in list.items.iter().filter(|p| p.name_any() != *me) {
                    if let Err(e) = set_label(pods, &p.name_any(), false).await {
                        tracing::warn!(error = %report(&e), "leader election: cannot unlabel a former leader's Pod");
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %report(&e), "leader election: cannot list labelled Pods")
            }
        }
    }
}

/// Merge-patches [`LEADER_LABEL`] to `"true"` or removes it. A Pod that is gone is fine.
async fn set_label(pods: &Api<Pod>, name: &str, leading: bool) -> Result<(), LeaderError> {
    let value = if leading { json!("true") } else { json!(null) };
    let patch = json!({"metadata": {"labels": {LEADER_LABEL: value}}});
    match pods
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(404) => Ok(()),
        Err(source) => Err(LeaderError::Label {
            namespace: pods.namespace().unwrap_or_default().to_string(),
            name: name.to_string(),
            source: Box::new(source),
        }),
    }
}
