//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! ```text
//!   every replica: caches, webhooks ───────────────────────────── always
//!   elector (elector.rs): get Lease ─▶ decide() ─▶ create / replace(resourceVersion) / wait
//!        │ won                       │ renew failed for renew-deadline, or SIGTERM
//!        ▼                           ▼
//!   Leadership::elected fires     Leadership::token() cancelled: controllers, session,
//!   (controllers, session,        status writers and extender answers stop at once;
//!    extender answers start)      on SIGTERM the Lease is then released (holder cleared)
//! ```
//!
//! The decision is pure ([`decide`], [`observe`]) and tested without a cluster. As in client-go,
//! a lease held by another replica is judged expired by *this* replica's clock: it is expired
//! once the record has not changed for its `leaseDurationSeconds` since we first saw it, so
//! clocks that disagree between nodes do not matter. A leader that cannot renew for
//! `renew-deadline` (shorter than the lease duration) steps down while its lease is still
//! valid for the others: its leader-only tasks have stopped before anyone may take over.
//!
//! No crate fits (the one Lease crate supporting kube 5 needs server-side apply and strategic
//! merge on Leases, which the embedded API does not serve), so this is get + replace guarded by
//! `resourceVersion`: a 409 means another replica wrote first.

pub mod elector;

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

pub use elector::{Elector, ElectorConfig, Outcome};

/// The pod label the leader sets on its own Pod; the extender Service selects it.
pub const LEADER_LABEL: &str = "tephra.io/leader";

/// Default Lease name (`--leader-elect-lease-name`).
pub const DEFAULT_LEASE_NAME: &str = "tephra";

/// Namespace used when neither `POD_NAMESPACE` nor the service account says where we run.
pub const DEFAULT_NAMESPACE: &str = "tephra-system";

/// Where a pod's service account namespace is mounted.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The durations do not leave the margins leader election relies on.
    #[error(
        "leader election: need lease-duration ({lease:?}) > renew-deadline ({renew:?}) > retry-period ({retry:?})"
    )]
    Timings {
        /// `--leader-elect-lease-duration`.
        lease: Duration,
        /// `--leader-elect-renew-deadline`.
        renew: Duration,
        /// `--leader-elect-retry-period`.
        retry: Duration,
    },
    /// An API call on the Lease failed.
    #[error("leader election: {action} Lease {namespace}/{name}: {source}")]
    Api {
        /// What was tried (`reading`, `creating`, `updating`, `releasing`).
        action: &'static str,
        /// The Lease namespace.
        namespace: String,
        /// The Lease name.
        name: String,
        /// The API error (boxed: kube's error is large and this one travels in results).
        #[source]
        source: Box<kube::Error>,
    },
    /// An API call on the Lease took longer than the retry period.
    #[error("leader election: {action} Lease timed out after {after:?}")]
    Timeout {
        /// What was tried.
        action: &'static str,
        /// The bound.
        after: Duration,
    },
    /// Labelling a Pod for the extender Service failed.
    #[error("leader election: labelling Pod {namespace}/{name}: {source}")]
    Label {
        /// The Pod namespace.
        namespace: String,
        /// The Pod name.
        name: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}

/// The three durations of leader election (kube-scheduler's flags and defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// How long a lease stays valid without renewal (`--leader-elect-lease-duration`, 15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down
    /// (`--leader-elect-renew-deadline`, 10 s).
    pub renew_deadline: Duration,
    /// How often followers try to acquire and the leader renews (`--leader-elect-retry-period`,
    /// 2 s).
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl Timings {
    /// Checks lease-duration > renew-deadline > retry-period: the leader must give up before
    /// its lease expires for the others, and must get more than one try before giving up.
    pub fn check(&self) -> Result<(), LeaderError> {
        if self.lease_duration > self.renew_deadline && self.renew_deadline > self.retry_period {
            Ok(())
        } else {
            Err(LeaderError::Timings {
                lease: self.lease_duration,
                renew: self.renew_deadline,
                retry: self.retry_period,
            })
        }
    }

    /// `leaseDurationSeconds` as written into the Lease (at least 1).
    pub fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// The parts of a Lease that leader election reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `spec.holderIdentity`; `None` or empty when released.
    pub holder: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub duration_secs: i32,
    /// `spec.renewTime` as written (compared, never parsed: only changes matter).
    pub renew_time: Option<String>,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
}

impl LeaseRecord {
    /// The holder, when there is one.
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// A record and when this replica first saw it in this exact form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The record.
    pub record: LeaseRecord,
    /// Local time it was first seen unchanged.
    pub at: Instant,
}

/// Folds a freshly read record into what was observed: the observation time moves only when
/// the record changed (a live leader changes `renewTime` at every renewal).
pub fn observe(previous: Option<Observed>, record: LeaseRecord, now: Instant) -> Observed {
    match previous {
        Some(p) if p.record == record => p,
        _ => Observed { record, at: now },
    }
}

/// What to do with the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease exists: create it, holding it.
    Create,
    /// Take it over (released, or expired by our clock): holder = us, transitions + 1.
    Acquire,
    /// We hold it: write a new renew time.
    Renew,
    /// Someone else holds a valid lease.
    Wait {
        /// Who.
        holder: String,
        /// How long until it expires by our clock if it is not renewed.
        expires_in: Duration,
    },
}

/// Decides from the observed Lease (`None`: there is none), our identity and the time now.
pub fn decide(observed: Option<&Observed>, me: &str, now: Instant) -> Decision {
    let Some(obs) = observed else {
        return Decision::Create;
    };
    match obs.record.holder() {
        None => Decision::Acquire,
        Some(h) if h == me => Decision::Renew,
        Some(h) => {
            let valid = Duration::from_secs(u64::try_from(obs.record.duration_secs).unwrap_or(0));
            let elapsed = now.saturating_duration_since(obs.at);
            if elapsed >= valid {
                Decision::Acquire
            } else {
                Decision::Wait {
                    holder: h.to_string(),
                    expires_in: valid - elapsed,
                }
            }
        }
    }
}

/// Whether this replica leads, shared with everything that must run on the leader only.
///
/// `elected` fires once, when the Lease is won; `token` is cancelled when leadership ends (lost
/// or shut down) and is what leader-only tasks stop on. A replica never leads twice: one that
/// loses the Lease exits and is restarted as a follower, as kube-scheduler and
/// kube-controller-manager do, so nothing of a former term lingers.
#[derive(Clone, Debug)]
pub struct Leadership {
    elected: CancellationToken,
    token: CancellationToken,
}

impl Leadership {
    /// Leadership that is always held (leader election off): tasks start at once and stop
    /// with `shutdown`.
    pub fn always(shutdown: &CancellationToken) -> Self {
        let elected = CancellationToken::new();
        elected.cancel();
        Self {
            elected,
            token: shutdown.child_token(),
        }
    }

    /// Leadership not yet held; ends with `shutdown` at the latest.
    pub fn pending(shutdown: &CancellationToken) -> Self {
        Self {
            elected: CancellationToken::new(),
            token: shutdown.child_token(),
        }
    }

    /// Marks the Lease won.
    pub(crate) fn win(&self) {
        if !self.token.is_cancelled() {
            self.elected.cancel();
        }
    }

    /// Ends leadership: leader-only tasks stop.
    pub(crate) fn end(&self) {
        self.token.cancel();
    }

    /// `true` while this replica holds the Lease.
    pub fn is_leading(&self) -> bool {
        self.elected.is_cancelled() && !self.token.is_cancelled()
    }

    /// Waits until the Lease is won; `false` if leadership ended first (shutdown).
    pub async fn wait_elected(&self) -> bool {
        tokio::select! {
            biased;
            () = self.token.cancelled() => false,
            () = self.elected.cancelled() => !self.token.is_cancelled(),
        }
    }

    /// Cancelled when leadership ends: what leader-only tasks run under.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Default for Leadership {
    /// Always held, never ending by itself (for tests and the embedded API's own uses).
    fn default() -> Self {
        Self::always(&CancellationToken::new())
    }
}

/// The namespace of the Lease when `--leader-elect-namespace` is not given: `POD_NAMESPACE`
/// (the downward API), else the service account's namespace, else `tephra-system`.
pub fn default_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
}

/// This process's identity in the Lease: the Pod name (or host name) and a random suffix, so a
/// restarted container never mistakes its predecessor's lease for its own.
pub fn identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "tephra".to_string());
    let mut bytes = [0u8; 4];
    // Without OS randomness the process id still tells two processes on one host apart.
    let suffix = match getrandom::fill(&mut bytes) {
        Ok(()) => bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        Err(_) => format!("{:08x}", std::process::id()),
    };
    format!("{base}_{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(holder: Option<&str>, renew: &str) -> LeaseRecord {
        LeaseRecord {
            holder: holder.map(str::to_string),
            duration_secs: 15,
            renew_time: Some(renew.to_string()),
            transitions: 0,
        }
    }

    #[test]
    fn no_lease_is_created() {
        assert_eq!(decide(None, "a", Instant::now()), Decision::Create);
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let now = Instant::now();
        for holder in [None, Some("")] {
            let o = observe(None, rec(holder, "t1"), now);
            assert_eq!(decide(Some(&o), "a", now), Decision::Acquire);
        }
    }

    #[test]
    fn our_own_lease_is_renewed() {
        let now = Instant::now();
        let o = observe(None, rec(Some("a"), "t1"), now);
        assert_eq!(decide(Some(&o), "a", now), Decision::Renew);
    }

    #[test]
    fn another_holders_lease_is_respected_until_it_stops_changing_for_its_duration() {
        let t0 = Instant::now();
        let o = observe(None, rec(Some("b"), "t1"), t0);
        assert_eq!(
            decide(Some(&o), "a", t0 + Duration::from_secs(5)),
            Decision::Wait {
                holder: "b".into(),
                expires_in: Duration::from_secs(10)
            }
        );
        // The holder renewed at t0+10: the clock restarts from when we saw the change.
        let o = observe(Some(o), rec(Some("b"), "t2"), t0 + Duration::from_secs(10));
        assert!(matches!(
            decide(Some(&o), "a", t0 + Duration::from_secs(20)),
            Decision::Wait { .. }
        ));
        // An unchanged record keeps its first observation time.
        let o = observe(Some(o), rec(Some("b"), "t2"), t0 + Duration::from_secs(20));
        assert_eq!(o.at, t0 + Duration::from_secs(10));
        assert_eq!(
            decide(Some(&o), "a", t0 + Duration::from_secs(25)),
            Decision::Acquire
        );
    }

    #[test]
    fn timings_must_leave_margins() {
        assert!(Timings::default().check().is_ok());
        let bad = Timings {
            lease_duration: Duration::from_secs(10),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        let e = bad.check().unwrap_err().to_string();
        assert!(e.contains("lease-duration"), "{e}");
        let bad = Timings {
            retry_period: Duration::from_secs(10),
            ..Timings::default()
        };
        assert!(bad.check().is_err());
    }

    #[tokio::test]
    async fn leadership_is_held_from_win_until_end() {
        let shutdown = CancellationToken::new();
        let l = Leadership::pending(&shutdown);
        assert!(!l.is_leading());
        l.win();
        assert!(l.is_leading() && l.wait_elected().await);
        l.end();
        assert!(!l.is_leading() && !l.wait_elected().await);
        // Shutdown before winning: waiters are released with `false`, winning is refused.
        let shutdown = CancellationToken::new();
        let l = Leadership::pending(&shutdown);
        shutdown.cancel();
        l.win();
        assert!(!l.wait_elected().await && !l.is_leading());
        assert!(Leadership::always(&CancellationToken::new()).is_leading());
    }

    #[test]
    fn identities_differ_between_processes_of_one_pod() {
        assert_ne!(identity(), identity());
    }
}
