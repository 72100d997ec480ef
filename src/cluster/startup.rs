//! Start-up writes against an API that may be flaky or not ready yet.
//!
//! ```text
//!  attempt ──ok──► done
//!     │ error (or no answer within ATTEMPT_TIMEOUT)
//!     ▼
//!  classify ── Transient  5xx, 429, 409, connection refused/reset, timeout ──┐
//!           ── Missing    404: a CRD or a namespace is not there yet ────────┤ pause (100 ms, doubling,
//!           ── Denied     401/403: credentials or RBAC not there yet ────────┤ at most 5 s), attempt again
//!           ── Permanent  the request itself is wrong ──► error              │
//!                                                                            ▼
//!               Missing and Denied: a WARN at most every 30 s naming the fix
//! ```
//!
//! A cluster set up with one `kubectl apply -k` gets its CRDs, namespace, RBAC and Deployment
//! in some order: tephra waits for what it needs (its `/readyz` failing meanwhile) instead of
//! exiting into a crash loop. Cancel a [`run`] by dropping its future.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};

use crate::report::report;

/// The first pause after a failed attempt.
pub const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause: how long tephra may take to notice that what it waited for appeared.
pub const MAX_PAUSE: Duration = Duration::from_secs(5);
/// How often a step that keeps failing says so at WARN.
pub const WARN_EVERY: Duration = Duration::from_secs(30);
/// Bound on one attempt: an API that does not answer counts as a transient failure.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Transient failures in a row logged at DEBUG before they are worth a WARN.
const QUIET_TRANSIENT: u32 = 3;

/// What a failed API call means for a start-up step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Worth another attempt as it is: a server error, throttling, a lost update race, a
    /// connection that failed or timed out.
    Transient,
    /// 404: what the request needs (a CRD, a namespace) does not exist yet.
    Missing,
    /// 401 or 403: the credentials or the RBAC rules are not in place yet.
    Denied,
    /// The request is wrong; another attempt would get the same answer.
    Permanent,
}

/// Classifies an error from the kube client.
pub fn classify(e: &kube::Error) -> Class {
    match e {
        kube::Error::Api(s) => match s.code {
            404 => Class::Missing,
            401 | 403 => Class::Denied,
            409 | 429 => Class::Transient,
            c if c >= 500 => Class::Transient,
            _ => Class::Permanent,
        },
        // Connection refused or reset, TLS handshakes cut, client-side timeouts, a token file
        // not readable yet.
        kube::Error::HyperError(_)
        | kube::Error::Service(_)
        | kube::Error::ReadEvents(_)
        | kube::Error::HttpError(_)
        | kube::Error::Auth(_) => Class::Transient,
        _ => Class::Permanent,
    }
}

/// What to tell a user whose cluster lacks something: `Missing` and `Denied` each name a fix.
#[derive(Debug, Clone, Copy)]
pub struct Fixes<'a> {
    /// The fix when the API answers 404.
    pub missing: &'a str,
    /// The fix when it answers 401 or 403.
    pub denied: &'a str,
}

/// The fix for a 404 on tephra's own resources.
pub const INSTALL_CRDS: &str =
    "tephra's CRDs are not installed: `tephra crds | kubectl apply -f -`";
/// The fix for a 401 or 403.
pub const GRANT_RBAC: &str =
    "tephra's service account lacks its RBAC rules: `kubectl apply -f manifests/rbac.yaml`";

impl Fixes<'static> {
    /// For writes to tephra's own resources (queues, CRDs, webhook configurations).
    pub const OWN_RESOURCES: Self = Self {
        missing: INSTALL_CRDS,
        denied: GRANT_RBAC,
    };
}

impl Fixes<'_> {
    /// The fix for `class`, if it has one.
    pub fn for_class(&self, class: Class) -> Option<&str> {
        match class {
            Class::Missing => Some(self.missing),
            Class::Denied => Some(self.denied),
            Class::Transient | Class::Permanent => None,
        }
    }
}

/// A gate that opens at most once per period: the first call opens it.
#[derive(Debug, Clone)]
pub struct WarnEvery {
    every: Duration,
    last: Option<Instant>,
}

impl WarnEvery {
    /// A gate opening at most once per `every`.
    pub fn new(every: Duration) -> Self {
        Self { every, last: None }
    }

    /// Whether to warn at `now`; when it answers true the next window starts.
    pub fn due(&mut self, now: Instant) -> bool {
        let open = self
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= self.every);
        if open {
            self.last = Some(now);
        }
        open
    }

    /// Starts over: the next failure warns at once.
    pub fn reset(&mut self) {
        self.last = None;
    }
}

/// The pauses between attempts: exponential from [`FIRST_PAUSE`], capped at [`MAX_PAUSE`],
/// jittered so replicas started together do not retry in step, never ending.
pub fn pauses() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(FIRST_PAUSE)
        .with_max_delay(MAX_PAUSE)
        .with_jitter()
        .without_max_times()
        .build()
}

/// Why a start-up step ended without doing its work.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct StartupError {
    /// The step, as in the logs: `installing CRD queues.scheduling.volcano.sh`.
    pub what: String,
    /// The answer that will not change on another attempt.
    #[source]
    pub source: kube::Error,
}

/// Runs `attempt` until it succeeds or fails permanently, pausing between attempts, and says
/// what it waits for (with the fix from `fixes`) at most every [`WARN_EVERY`]. `what` names the
/// step in logs and in the error.
pub async fn run<T, F, Fut>(
    what: impl Display,
    fixes: Fixes<'_>,
    mut attempt: F,
) -> Result<T, StartupError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut pauses = pauses();
    let mut warn = WarnEvery::new(WARN_EVERY);
    let mut failures = 0u32;
    loop {
        let (class, reason) = match tokio::time::timeout(ATTEMPT_TIMEOUT, attempt()).await {
            Ok(Ok(done)) => {
                if failures > 0 {
                    tracing::info!(step = %what, failures, "start-up step done after retries");
                }
                return Ok(done);
            }
            Ok(Err(source)) => match classify(&source) {
                Class::Permanent => {
                    return Err(StartupError {
                        what: what.to_string(),
                        source,
                    });
                }
                class => (class, report(&source).to_string()),
            },
            Err(_) => (
                Class::Transient,
                format!("no answer within {ATTEMPT_TIMEOUT:?}"),
            ),
        };
        failures = failures.saturating_add(1);
        let loud = class != Class::Transient || failures > QUIET_TRANSIENT;
        if loud && warn.due(Instant::now()) {
            match fixes.for_class(class) {
                Some(fix) => {
                    tracing::warn!(step = %what, error = %reason, "waiting for the cluster: {fix}");
                }
                None => tracing::warn!(step = %what, error = %reason, failures, "retrying"),
            }
        } else {
            tracing::debug!(step = %what, error = %reason, failures, "retrying");
        }
        tokio::time::sleep(pauses.next().unwrap_or(MAX_PAUSE)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: format!("answered {code}"),
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn errors_are_classified_by_whether_waiting_can_fix_them() {
        for (code, want) in [
            (500, Class::Transient),
            (503, Class::Transient),
            (504, Class::Transient),
            (429, Class::Transient),
            (409, Class::Transient),
            (404, Class::Missing),
            (403, Class::Denied),
            (401, Class::Denied),
            (400, Class::Permanent),
            (422, Class::Permanent),
            (405, Class::Permanent),
        ] {
            assert_eq!(classify(&api(code)), want, "{code}");
        }
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            classify(&kube::Error::Service(Box::new(refused))),
            Class::Transient
        );
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(classify(&kube::Error::ReadEvents(reset)), Class::Transient);
        let bad_json = serde_json::from_str::<u8>("x").unwrap_err();
        assert_eq!(
            classify(&kube::Error::SerdeError(bad_json)),
            Class::Permanent
        );
    }

    #[test]
    fn the_warning_gate_opens_once_per_period() {
        let t0 = Instant::now();
        let mut gate = WarnEvery::new(Duration::from_secs(30));
        let at = |s| t0 + Duration::from_secs(s);
        let opened: Vec<u64> = (0..100).filter(|&s| gate.due(at(s))).collect();
        assert_eq!(opened, [0, 30, 60, 90]);
        gate.reset();
        assert!(gate.due(at(91)), "a reset gate opens at once");
    }

    #[test]
    fn pauses_grow_to_the_cap_and_never_end() {
        let pauses: Vec<Duration> = pauses().take(40).collect();
        assert_eq!(pauses.len(), 40);
        // Jitter adds up to one more delay's worth on top of each step.
        assert!(pauses[0] >= FIRST_PAUSE && pauses[0] <= FIRST_PAUSE * 2);
        assert!(pauses.iter().all(|p| *p <= MAX_PAUSE * 2), "{pauses:?}");
        assert!(pauses[30] >= MAX_PAUSE, "{pauses:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn transient_and_missing_answers_are_waited_out() {
        let calls = AtomicU32::new(0);
        let answers = [api(503), api(404), api(409), api(429)];
        let got = run("test step", Fixes::OWN_RESOURCES, || {
            let n = calls.fetch_add(1, Ordering::SeqCst) as usize;
            let answer = answers.get(n).map(|e| match e {
                kube::Error::Api(s) => api(s.code),
                _ => api(500),
            });
            async move { answer.map_or(Ok(n), Err) }
        })
        .await
        .unwrap();
        assert_eq!(got, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_hangs_is_abandoned_and_tried_again() {
        let calls = AtomicU32::new(0);
        let got = run("test step", Fixes::OWN_RESOURCES, || {
            let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if first {
                    std::future::pending::<()>().await;
                }
                Ok::<_, kube::Error>("answered")
            }
        })
        .await
        .unwrap();
        assert_eq!((got, calls.load(Ordering::SeqCst)), ("answered", 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wrong_request_fails_at_once_naming_the_step() {
        let calls = AtomicU32::new(0);
        let err = run("creating thing x", Fixes::OWN_RESOURCES, || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>(api(422)) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(err.to_string().starts_with("creating thing x: "), "{err}");
    }
}
