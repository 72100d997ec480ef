//! What `--tls-mode self` should do next, from what the Secret holds and the time: pure, so
//! every step of a rotation is tested without a cluster or a clock.
//!
//! ```text
//!  serving cert at 2/3 of its life ─────────────────────────▶ RenewServing (same CA)
//!  newest CA at 2/3 of its life ──▶ AddCa ──▶ Publish (bundle: old + new)
//!        ──(propagation)──▶ RenewServing (signed by the new CA)
//!        ──(overlap since the publish)──▶ DropCas (old) ──▶ Publish (bundle: new)
//! ```
//!
//! The bundle (`ca.crt`) is always published before anything relies on it: a serving
//! certificate moves to a new CA only `propagation` after the bundle holding that CA reached the
//! webhook configurations and the ConfigMap, and the old CA leaves the bundle only `overlap`
//! after that publish, once the serving certificate no longer needs it.

use std::time::{Duration, SystemTime};

/// When a certificate is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// Start (back-dated a little at issue).
    pub not_before: SystemTime,
    /// End.
    pub not_after: SystemTime,
}

impl Validity {
    /// Two thirds into the certificate's life: when it is replaced.
    pub fn renew_at(&self) -> SystemTime {
        let life = self
            .not_after
            .duration_since(self.not_before)
            .unwrap_or_default();
        self.not_before + life * 2 / 3
    }

    /// Whether `now` is past the end.
    pub fn expired(&self, now: SystemTime) -> bool {
        now >= self.not_after
    }
}

/// The lifetimes and delays of `--tls-mode self` (the `--tls-self-*` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Life of a new CA.
    pub ca_validity: Duration,
    /// Life of a new serving certificate.
    pub serving_validity: Duration,
    /// How long both CAs stay trusted after the bundle holding both was published.
    pub overlap: Duration,
    /// How long after a bundle is published before a serving certificate signed by a CA new in
    /// it is served (time for kube-apiserver and kube-scheduler to see the bundle).
    pub propagation: Duration,
}

/// Why a [`Policy`] cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The overlap does not leave time for the serving certificate to move first.
    #[error(
        "--tls-self-ca-overlap ({overlap:?}) must be longer than --tls-self-propagation \
         ({propagation:?}): the serving certificate moves to the new CA after the propagation \
         delay, and the old CA may leave the bundle only after that"
    )]
    OverlapTooShort {
        /// The overlap.
        overlap: Duration,
        /// The propagation delay.
        propagation: Duration,
    },
    /// The overlap would outlast the old CA.
    #[error(
        "--tls-self-ca-overlap ({overlap:?}) must be shorter than a third of \
         --tls-self-ca-validity ({ca_validity:?}): a new CA is made at two thirds of the old \
         one's life, and the old one must stay valid for the whole overlap"
    )]
    OverlapTooLong {
        /// The overlap.
        overlap: Duration,
        /// The CA life.
        ca_validity: Duration,
    },
    /// A serving certificate that outlives its CA's remaining time is pointless.
    #[error(
        "--tls-self-serving-validity ({serving:?}) must be shorter than --tls-self-ca-validity \
         ({ca_validity:?})"
    )]
    ServingTooLong {
        /// The serving life.
        serving: Duration,
        /// The CA life.
        ca_validity: Duration,
    },
}

impl Policy {
    /// The defaults of the flags: CA 10 years, serving certificate 90 days (renewed after 60),
    /// overlap 30 days, propagation 5 minutes (a mounted ConfigMap reaches its Pods within
    /// the kubelet's sync period, about a minute).
    pub const DEFAULT: Policy = Policy {
        ca_validity: Duration::from_secs(10 * 365 * 24 * 3600),
        serving_validity: Duration::from_secs(90 * 24 * 3600),
        overlap: Duration::from_secs(30 * 24 * 3600),
        propagation: Duration::from_secs(5 * 60),
    };

    /// Checks that a rotation can follow the order above.
    pub fn check(&self) -> Result<(), PolicyError> {
        if self.overlap <= self.propagation {
            return Err(PolicyError::OverlapTooShort {
                overlap: self.overlap,
                propagation: self.propagation,
            });
        }
        if self.overlap >= self.ca_validity / 3 {
            return Err(PolicyError::OverlapTooLong {
                overlap: self.overlap,
                ca_validity: self.ca_validity,
            });
        }
        if self.serving_validity >= self.ca_validity {
            return Err(PolicyError::ServingTooLong {
                serving: self.serving_validity,
                ca_validity: self.ca_validity,
            });
        }
        Ok(())
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What the Secret holds, as far as the decision needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The trusted CAs (`ca.crt`), oldest first; the last one is the signer (`ca.key`).
    pub cas: Vec<Validity>,
    /// The serving certificate's validity.
    pub serving: Validity,
    /// Index in `cas` of the CA the serving certificate verifies against now, if any.
    pub serving_issuer: Option<usize>,
    /// Whether the serving certificate carries exactly the names wanted.
    pub serving_names_match: bool,
    /// When the current `ca.crt` was published to the webhook configurations and the
    /// ConfigMap; `None` when it has not been (yet, or the targets lost it).
    pub published: Option<SystemTime>,
}

/// Why the serving certificate is replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenewReason {
    /// Two thirds of its life are gone.
    Age,
    /// A newer CA is published and propagated.
    NewCa,
    /// It verifies against no CA of the bundle (expired, or signed by a CA no longer there).
    Untrusted,
    /// Its names are not the ones wanted (a Service was added, say).
    Names,
}

/// The next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Write `ca.crt` into the webhook configurations and the ConfigMap, then record it.
    Publish,
    /// Make a new CA, append it to the bundle and make it the signer.
    AddCa,
    /// Sign a new serving certificate with the newest CA.
    RenewServing(RenewReason),
    /// Remove these CAs (indexes in [`View::cas`]) from the bundle.
    DropCas(Vec<usize>),
    /// Nothing to do before this time.
    WaitUntil(SystemTime),
}

/// The next step for `view` at `now`.
pub fn decide(view: &View, policy: &Policy, now: SystemTime) -> Action {
    let Some(newest) = view.cas.len().checked_sub(1) else {
        // No CA at all: the caller treats such a Secret as unusable and makes a new one; as a
        // step, a CA is what is missing.
        return Action::AddCa;
    };
    let Some(published) = view.published else {
        return Action::Publish;
    };
    let signer = view.cas[newest];
    if now >= signer.renew_at() {
        return Action::AddCa;
    }
    let propagated = published + policy.propagation;
    let mut wake = vec![signer.renew_at()];
    match view.serving_issuer {
        None => return Action::RenewServing(RenewReason::Untrusted),
        Some(_) if !view.serving_names_match => return Action::RenewServing(RenewReason::Names),
        Some(i) if i == newest => {
            if now >= view.serving.renew_at() {
                return Action::RenewServing(RenewReason::Age);
            }
            wake.push(view.serving.renew_at());
        }
        Some(_) => {
            if now >= propagated {
                return Action::RenewServing(RenewReason::NewCa);
            }
            // An old certificate past its renewal point still verifies; it moves to the new
            // CA once kube-apiserver and kube-scheduler trust it, not before.
            wake.push(propagated);
        }
    }
    if newest > 0 {
        let on_newest = view.serving_issuer == Some(newest);
        let overlap_over = now >= published + policy.overlap;
        let drop: Vec<usize> = (0..newest)
            .filter(|&i| (on_newest && overlap_over) || view.cas[i].expired(now))
            .collect();
        if !drop.is_empty() {
            return Action::DropCas(drop);
        }
        if on_newest {
            wake.push(published + policy.overlap);
        }
        wake.extend(view.cas[..newest].iter().map(|c| c.not_after));
    }
    Action::WaitUntil(wake.into_iter().min().unwrap_or(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + S * secs as u32 + Duration::from_secs(1_000_000)
    }

    fn valid(from: u64, to: u64) -> Validity {
        Validity {
            not_before: t(from),
            not_after: t(to),
        }
    }

    fn policy() -> Policy {
        Policy {
            ca_validity: S * 300,
            serving_validity: S * 30,
            overlap: S * 20,
            propagation: S * 5,
        }
    }

    /// One CA made at 0 (life 300 s), a serving certificate made at 0 (life 30 s), published
    /// at 1.
    fn steady() -> View {
        View {
            cas: vec![valid(0, 300)],
            serving: valid(0, 30),
            serving_issuer: Some(0),
            serving_names_match: true,
            published: Some(t(1)),
        }
    }

    #[test]
    fn the_default_policy_and_the_test_policy_are_consistent() {
        Policy::DEFAULT.check().unwrap();
        policy().check().unwrap();
    }

    #[test]
    fn inconsistent_policies_are_refused_with_the_flags_named() {
        let p = Policy {
            overlap: S * 5,
            ..policy()
        };
        assert!(
            p.check()
                .unwrap_err()
                .to_string()
                .contains("--tls-self-propagation")
        );
        let p = Policy {
            overlap: S * 100,
            ..policy()
        };
        assert!(matches!(p.check(), Err(PolicyError::OverlapTooLong { .. })));
        let p = Policy {
            serving_validity: S * 300,
            ..policy()
        };
        assert!(matches!(p.check(), Err(PolicyError::ServingTooLong { .. })));
    }

    #[test]
    fn an_unpublished_bundle_is_published_before_anything_else() {
        let v = View {
            published: None,
            serving_issuer: None,
            ..steady()
        };
        assert_eq!(decide(&v, &policy(), t(299)), Action::Publish);
    }

    #[test]
    fn the_serving_certificate_is_renewed_at_two_thirds_of_its_life() {
        let v = steady();
        assert_eq!(decide(&v, &policy(), t(10)), Action::WaitUntil(t(20)));
        assert_eq!(
            decide(&v, &policy(), t(20)),
            Action::RenewServing(RenewReason::Age)
        );
    }

    #[test]
    fn an_untrusted_or_misnamed_serving_certificate_is_replaced_at_once() {
        let v = View {
            serving_issuer: None,
            ..steady()
        };
        assert_eq!(
            decide(&v, &policy(), t(2)),
            Action::RenewServing(RenewReason::Untrusted)
        );
        let v = View {
            serving_names_match: false,
            ..steady()
        };
        assert_eq!(
            decide(&v, &policy(), t(2)),
            Action::RenewServing(RenewReason::Names)
        );
    }

    #[test]
    fn a_ca_at_two_thirds_of_its_life_gets_a_successor() {
        let v = View {
            serving: valid(190, 220),
            ..steady()
        };
        assert_eq!(decide(&v, &policy(), t(199)), Action::WaitUntil(t(200)));
        assert_eq!(decide(&v, &policy(), t(200)), Action::AddCa);
    }

    #[test]
    fn a_ca_rotation_publishes_then_moves_the_serving_certificate_then_drops_the_old_ca() {
        let p = policy();
        // AddCa at 200 gave a second CA; not yet published.
        let mut v = View {
            cas: vec![valid(0, 300), valid(200, 500)],
            serving: valid(190, 220),
            serving_issuer: Some(0),
            serving_names_match: true,
            published: None,
        };
        assert_eq!(decide(&v, &p, t(200)), Action::Publish);
        // Published at 201: the serving certificate stays on the old CA until 206, even past
        // its own renewal point (210 would be; 206 comes first here).
        v.published = Some(t(201));
        assert_eq!(decide(&v, &p, t(203)), Action::WaitUntil(t(206)));
        assert_eq!(
            decide(&v, &p, t(206)),
            Action::RenewServing(RenewReason::NewCa)
        );
        // Moved at 206: the old CA stays until the overlap since the publish (221) is over.
        v.serving = valid(206, 236);
        v.serving_issuer = Some(1);
        assert_eq!(decide(&v, &p, t(210)), Action::WaitUntil(t(221)));
        assert_eq!(decide(&v, &p, t(221)), Action::DropCas(vec![0]));
        // Dropped: the shorter bundle is published again.
        v.cas.remove(0);
        v.serving_issuer = Some(0);
        v.published = None;
        assert_eq!(decide(&v, &p, t(221)), Action::Publish);
    }

    #[test]
    fn the_old_ca_stays_while_the_serving_certificate_still_needs_it() {
        let v = View {
            cas: vec![valid(0, 300), valid(200, 500)],
            serving: valid(190, 220),
            serving_issuer: Some(0),
            serving_names_match: true,
            published: Some(t(201)),
        };
        // Overlap long over, but the serving certificate is still on the old CA: move it
        // first.
        assert_eq!(
            decide(&v, &policy(), t(250)),
            Action::RenewServing(RenewReason::NewCa)
        );
    }

    #[test]
    fn an_expired_old_ca_is_dropped() {
        let v = View {
            cas: vec![valid(0, 300), valid(200, 500)],
            serving: valid(290, 320),
            serving_issuer: Some(1),
            serving_names_match: true,
            published: Some(t(290)),
        };
        assert_eq!(decide(&v, &policy(), t(300)), Action::DropCas(vec![0]));
    }
}
