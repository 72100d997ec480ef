//! What the extender remembers about the pods kube-scheduler asks it about, and the pure
//! decisions drawn from it: whether a filter may wait for a session, which placed pods to
//! ungate, which turned-down or parked pods to nudge ([`super::Extender::spawn_nudger`]).
//!
//! One [`Book`] behind one lock: the filter notes what it was asked and what it turned down;
//! after each session the nudger asks for a [`Round`] and only writes what it lists.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::scheduler::ClusterIndex;
pub use crate::scheduler::index::GateDue;

/// At most this many pods are remembered per kind of note; beyond it that memory is dropped
/// (a pod then waits for one more session or one more nudge, nothing worse).
const SEEN_LIMIT: usize = 200_000;

/// The key under which pods turned down before the index knew them wait to be nudged (no
/// gang key is empty: a gang key is `namespace/name`).
const UNSEEN: &str = "";

/// How long a placed pod that kube-scheduler parked may go unasked-for before it is nudged:
/// time for kube-scheduler to get to it by itself.
pub const PARKED_GRACE: Duration = Duration::from_millis(500);

/// How many times one placement that kube-scheduler keeps parking is nudged; the gaps double
/// from [`PARKED_GRACE`] (0.5 s, 1 s, 2 s, 4 s), so the last comes about 8 s after the first.
pub const PARKED_NUDGES: u32 = 5;

/// How long a plan-gate removal sent for a pod waits for the watch to show it before it is
/// sent again. A busy kube-apiserver delivers the update seconds late (at one second, about
/// one removal in eleven was sent twice while a thousand gang pods were admitted, the second
/// refused by the patch's `test`); a removal that truly failed waits this long.
pub const UNGATE_RESEND: Duration = Duration::from_secs(5);

/// A pod to write to: (namespace, name).
pub type PodName = (String, String);

/// What the book needs to know of the scheduler's index at a round.
pub trait Placements {
    /// Pods a session placed that are still behind the plan gate, due to come off.
    fn placed_plan_gated(&self) -> Vec<GateDue>;
    /// (uid, namespace, name, placed at) of placed pods carrying kube-scheduler's
    /// `Unschedulable` condition, placed at `placed_by` or before.
    fn parked_placements(&self, placed_by: Instant) -> Vec<(String, String, String, Instant)>;
    /// The index knows the pod.
    fn knows(&self, uid: &str) -> bool;
    /// A session placed the pod and the placement holds.
    fn is_placed(&self, uid: &str) -> bool;
    /// The gang has fewer pods than its `minMember`, so no session can place it.
    fn is_short(&self, gang: &str) -> bool;
}

impl Placements for ClusterIndex {
    fn placed_plan_gated(&self) -> Vec<GateDue> {
        ClusterIndex::placed_plan_gated(self)
    }
    fn parked_placements(&self, placed_by: Instant) -> Vec<(String, String, String, Instant)> {
        ClusterIndex::parked_placements(self, placed_by)
    }
    fn knows(&self, uid: &str) -> bool {
        self.task(uid).is_some()
    }
    fn is_placed(&self, uid: &str) -> bool {
        self.assumed_node(uid).is_some()
    }
    fn is_short(&self, gang: &str) -> bool {
        super::filter::short_of_members(self, gang)
    }
}

/// The writes of one nudger round.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Round {
    /// Placed pods whose plan gate to remove (and the nodes to keep each to, if any).
    pub ungate: Vec<GateDue>,
    /// Pods to nudge (annotate), each once, sorted.
    pub nudge: Vec<PodName>,
}

/// A gang pod the filter turned down.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rejected {
    pod: PodName,
    /// Turned down because its gang had fewer pods than `minMember`, with the reason of the
    /// session that last saw the gang (which may say it has none).
    while_short: bool,
}

/// The nudges of one parked placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Nudges {
    /// The placement (when it was made).
    since: Instant,
    /// How many so far.
    count: u32,
    /// When the last was sent.
    last: Instant,
}

/// The extender's memory of pods, keyed by uid.
#[derive(Debug, Default)]
pub struct Book {
    /// The session count when the filter first saw each pod.
    first_seen: HashMap<String, u64>,
    /// When the filter was last asked about each pod.
    asked: HashMap<String, Instant>,
    /// Gang pods the filter turned down: gang → uid → pod, [`UNSEEN`] for pods the index did
    /// not know yet.
    rejected: HashMap<String, HashMap<String, Rejected>>,
    /// The nudges of each parked placement ([`due_parked`]).
    nudged: HashMap<String, Nudges>,
    /// When the removal of each pod's plan gate was last sent ([`due_ungates`]).
    ungated: HashMap<String, Instant>,
}

impl Book {
    /// Notes a filter request about `uid` at `at`, `sessions` sessions having finished. Returns
    /// whether the filter may wait for a session: only while none has finished since it first
    /// saw the pod, so a pod waits at most once.
    pub fn asked(&mut self, uid: &str, sessions: u64, at: Instant) -> bool {
        if self.asked.len() >= SEEN_LIMIT {
            self.asked.clear();
        }
        self.asked.insert(uid.to_string(), at);
        if self.first_seen.len() >= SEEN_LIMIT {
            self.first_seen.clear();
        }
        let first = *self.first_seen.entry(uid.to_string()).or_insert(sessions);
        sessions <= first
    }

    /// When the filter was last asked about `uid`.
    pub fn asked_at(&self, uid: &str) -> Option<Instant> {
        self.asked.get(uid).copied()
    }

    /// Notes a gang pod the filter turned down, so it is nudged once its gang is placed.
    /// `gang` is `None` when the index did not know the pod yet (kube-scheduler's informer can
    /// be ahead of tephra's watch): it is nudged once the index does, or kube-scheduler would
    /// park it until an unrelated event while the rest of its gang is held in vain.
    /// `while_short`: turned down because the gang had fewer pods than `minMember`.
    pub fn rejected(&mut self, gang: Option<String>, uid: &str, pod: PodName, while_short: bool) {
        if self.rejected.len() >= SEEN_LIMIT {
            self.rejected.clear();
        }
        self.rejected
            .entry(gang.unwrap_or_else(|| UNSEEN.to_string()))
            .or_default()
            .insert(uid.to_string(), Rejected { pod, while_short });
    }

    /// The writes due after a session, at `now`, noting them as sent:
    /// - placed pods still behind the plan gate ([`due_ungates`]);
    /// - placed pods kube-scheduler parked and has not asked about since ([`due_parked`]);
    /// - turned-down pods of gangs now placed, and turned-down pods the index came to know;
    /// - pods turned down while their gang was short of pods, once it no longer is: they were
    ///   told the gang's reason of that time ("waiting for its pods"), and kube-scheduler
    ///   would otherwise show it, parked, until an unrelated event or five minutes.
    pub fn round(&mut self, view: &impl Placements, now: Instant) -> Round {
        let ungate = due_ungates(view.placed_plan_gated(), &mut self.ungated, now);
        self.nudged.retain(|uid, _| view.is_placed(uid));
        let placed_by = now.checked_sub(PARKED_GRACE).unwrap_or(now);
        let mut nudge = due_parked(
            view.parked_placements(placed_by),
            &self.asked,
            &mut self.nudged,
            now,
        );
        let r = &mut self.rejected;
        if let Some(unseen) = r.get_mut(UNSEEN) {
            let known: Vec<String> = unseen.keys().filter(|u| view.knows(u)).cloned().collect();
            nudge.extend(known.iter().filter_map(|u| unseen.remove(u)).map(|r| r.pod));
        }
        for (gang, pods) in r.iter_mut() {
            if gang.as_str() == UNSEEN
                || !pods.values().any(|p| p.while_short)
                || view.is_short(gang)
            {
                continue;
            }
            // Asked again, they are turned down (and noted) afresh with the gang's reason now.
            let told: Vec<String> = pods
                .iter()
                .filter(|(_, p)| p.while_short)
                .map(|(u, _)| u.clone())
                .collect();
            nudge.extend(told.iter().filter_map(|u| pods.remove(u)).map(|r| r.pod));
        }
        let placed: Vec<String> = r
            .iter()
            .filter(|(gang, pods)| {
                gang.as_str() != UNSEEN && pods.keys().any(|u| view.is_placed(u))
            })
            .map(|(gang, _)| gang.clone())
            .collect();
        // Gangs whose pods are all gone are forgotten (unseen pods wait for the index, bounded
        // by SEEN_LIMIT like the rest).
        r.retain(|gang, pods| {
            gang.as_str() == UNSEEN && !pods.is_empty() || pods.keys().any(|u| view.knows(u))
        });
        nudge.extend(
            placed
                .iter()
                .filter_map(|gang| r.remove(gang))
                .flat_map(HashMap::into_values)
                .map(|r| r.pod),
        );
        // A pod both turned down and parked is nudged once.
        nudge.sort();
        nudge.dedup();
        Round { ungate, nudge }
    }
}

/// Which parked placements to nudge at `now`, and notes them in `nudged`.
///
/// `parked`: (uid, namespace, name, placed at) of placed pods that carry kube-scheduler's
/// `Unschedulable` condition, placed [`PARKED_GRACE`] ago or more; `asked`: when the filter
/// was last asked about each pod. A pod the filter was asked about since its placement (or
/// since its last nudge) is on its way. Otherwise it is nudged again while kube-scheduler
/// keeps parking it by its own checks (its view of the nodes can lag the plan by a bind or
/// two), with doubling gaps, at most [`PARKED_NUDGES`] times per placement.
fn due_parked(
    parked: Vec<(String, String, String, Instant)>,
    asked: &HashMap<String, Instant>,
    nudged: &mut HashMap<String, Nudges>,
    now: Instant,
) -> Vec<PodName> {
    let mut due = Vec::new();
    for (uid, ns, name, since) in parked {
        let prev = nudged.get(&uid).copied().filter(|n| n.since == since);
        let last = prev.map_or(since, |n| n.last);
        if asked.get(&uid).is_some_and(|t| *t >= last) {
            continue;
        }
        let count = prev.map_or(0, |n| n.count);
        if count >= PARKED_NUDGES
            || count > 0 && now.saturating_duration_since(last) < PARKED_GRACE * (1 << (count - 1))
        {
            continue;
        }
        nudged.insert(
            uid,
            Nudges {
                since,
                count: count + 1,
                last: now,
            },
        );
        due.push((ns, name));
    }
    due
}

/// Which placed, still plan-gated pods to ungate at `now`, and notes them in `sent`.
///
/// `placed`: pods a session placed that the index still sees behind the plan gate; `sent`:
/// when their removal was last sent (by uid). A removal not yet visible after
/// [`UNGATE_RESEND`] is sent again (the write may have failed); pods no longer placed and
/// gated are forgotten.
fn due_ungates(
    placed: Vec<GateDue>,
    sent: &mut HashMap<String, Instant>,
    now: Instant,
) -> Vec<GateDue> {
    let live: HashSet<&str> = placed.iter().map(|d| d.uid.as_str()).collect();
    sent.retain(|uid, _| live.contains(uid.as_str()));
    let mut due = Vec::new();
    for d in placed {
        if sent
            .get(&d.uid)
            .is_some_and(|t| now.saturating_duration_since(*t) < UNGATE_RESEND)
        {
            continue;
        }
        sent.insert(d.uid.clone(), now);
        due.push(d);
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index as the book sees it: which pods it knows, which are placed (and since when),
    /// which of those are still gated or parked.
    #[derive(Default)]
    struct View {
        known: HashSet<String>,
        placed: HashMap<String, Instant>,
        gated: HashSet<String>,
        parked: HashSet<String>,
        short: HashSet<String>,
    }

    impl Placements for View {
        fn placed_plan_gated(&self) -> Vec<GateDue> {
            self.gated.iter().map(|u| due(u)).collect()
        }
        fn parked_placements(&self, placed_by: Instant) -> Vec<(String, String, String, Instant)> {
            self.parked
                .iter()
                .filter_map(|u| {
                    let since = *self.placed.get(u)?;
                    (since <= placed_by).then(|| (u.clone(), "ns".into(), u.clone(), since))
                })
                .collect()
        }
        fn knows(&self, uid: &str) -> bool {
            self.known.contains(uid)
        }
        fn is_placed(&self, uid: &str) -> bool {
            self.placed.contains_key(uid)
        }
        fn is_short(&self, gang: &str) -> bool {
            self.short.contains(gang)
        }
    }

    fn pod(uid: &str) -> PodName {
        ("ns".to_string(), uid.to_string())
    }

    /// Pod `uid` (named as its uid) due to be ungated, without a pin.
    fn due(uid: &str) -> GateDue {
        GateDue {
            uid: uid.to_string(),
            namespace: "ns".to_string(),
            name: uid.to_string(),
            pin: None,
        }
    }

    fn parked(uid: &str, since: Instant) -> Vec<(String, String, String, Instant)> {
        vec![(uid.into(), "ns".into(), uid.into(), since)]
    }

    #[test]
    fn a_filter_may_wait_for_a_session_only_until_one_has_finished_since_it_first_saw_the_pod() {
        let mut book = Book::default();
        let t0 = Instant::now();
        assert!(book.asked("u", 7, t0));
        assert!(book.asked("u", 7, t0), "no session finished yet");
        assert!(!book.asked("u", 8, t0), "one did: the filter answers");
        assert!(
            book.asked("v", 8, t0),
            "another pod has its own first sight"
        );
        assert_eq!(book.asked_at("u"), Some(t0));
    }

    #[test]
    fn turned_down_members_are_nudged_once_when_their_gang_is_placed() {
        let mut book = Book::default();
        let mut view = View::default();
        let t0 = Instant::now();
        for u in ["a", "b"] {
            view.known.insert(u.into());
            book.rejected(Some("ns/g".into()), u, pod(u), false);
        }
        assert_eq!(
            book.round(&view, t0),
            Round::default(),
            "gang not placed yet"
        );
        view.placed.insert("a".into(), t0);
        let round = book.round(&view, t0);
        assert_eq!(round.nudge, vec![pod("a"), pod("b")]);
        assert!(book.round(&view, t0).nudge.is_empty(), "each once");
    }

    #[test]
    fn a_pod_turned_down_before_the_index_knew_it_is_nudged_once_it_does() {
        let mut book = Book::default();
        let mut view = View::default();
        let t0 = Instant::now();
        book.rejected(None, "x", pod("x"), false);
        assert!(book.round(&view, t0).nudge.is_empty());
        view.known.insert("x".into());
        assert_eq!(book.round(&view, t0).nudge, vec![pod("x")]);
        assert!(book.round(&view, t0).nudge.is_empty());
    }

    #[test]
    fn a_gang_whose_pods_are_all_gone_is_forgotten() {
        let mut book = Book::default();
        let mut view = View::default();
        let t0 = Instant::now();
        book.rejected(Some("ns/g".into()), "a", pod("a"), false);
        book.round(&view, t0);
        // The pod comes back placed under the same uid: nothing remembered to nudge.
        view.known.insert("a".into());
        view.placed.insert("a".into(), t0);
        assert!(book.round(&view, t0).nudge.is_empty());
    }

    #[test]
    fn a_pod_both_turned_down_and_parked_is_nudged_once_in_a_round() {
        let mut book = Book::default();
        let mut view = View::default();
        let t0 = Instant::now();
        view.known.insert("a".into());
        view.placed.insert("a".into(), t0);
        view.parked.insert("a".into());
        book.rejected(Some("ns/g".into()), "a", pod("a"), false);
        let round = book.round(&view, t0 + PARKED_GRACE);
        assert_eq!(round.nudge, vec![pod("a")]);
    }

    #[test]
    fn members_turned_down_while_their_gang_was_short_are_asked_again_once_it_is_whole() {
        let mut book = Book::default();
        let mut view = View::default();
        let t0 = Instant::now();
        view.short.insert("ns/g".into());
        view.known.insert("a".into());
        // `a` arrived first and was told the gang's old reason ("waiting for its pods").
        book.rejected(Some("ns/g".into()), "a", pod("a"), true);
        assert!(book.round(&view, t0).nudge.is_empty(), "still short");
        // `b` came and was turned down for the gang's real reason: not nudged for it.
        view.known.insert("b".into());
        book.rejected(Some("ns/g".into()), "b", pod("b"), false);
        view.short.clear();
        assert_eq!(book.round(&view, t0).nudge, vec![pod("a")]);
        assert!(book.round(&view, t0).nudge.is_empty(), "once");
        // Both are still nudged when the gang is placed.
        book.rejected(Some("ns/g".into()), "a", pod("a"), false);
        view.placed.insert("b".into(), t0);
        assert_eq!(book.round(&view, t0).nudge, vec![pod("a"), pod("b")]);
    }

    #[test]
    fn placed_gated_pods_are_ungated_by_the_round() {
        let mut book = Book::default();
        let mut view = View::default();
        let t0 = Instant::now();
        view.gated.insert("g".into());
        assert_eq!(book.round(&view, t0).ungate, vec![due("g")]);
        assert!(book.round(&view, t0).ungate.is_empty());
    }

    #[test]
    fn a_placed_gated_pod_is_ungated_once_and_again_only_if_the_gate_outlives_a_resend() {
        let t0 = Instant::now();
        let placed = || vec![due("p1")];
        let mut sent = HashMap::new();
        assert_eq!(due_ungates(placed(), &mut sent, t0), vec![due("p1")]);
        // The watch has not shown the removal yet: not sent twice in a row.
        assert!(due_ungates(placed(), &mut sent, t0 + UNGATE_RESEND / 2).is_empty());
        // Still gated a resend later: the write may have failed, so again.
        assert_eq!(
            due_ungates(placed(), &mut sent, t0 + UNGATE_RESEND).len(),
            1
        );
        // Ungated (or no longer placed): forgotten.
        assert!(due_ungates(Vec::new(), &mut sent, t0 + UNGATE_RESEND * 2).is_empty());
        assert!(sent.is_empty());
    }

    #[test]
    fn a_placement_kube_scheduler_keeps_parking_is_nudged_again_with_doubling_gaps() {
        let t0 = Instant::now();
        let asked = HashMap::new();
        let mut nudged = HashMap::new();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut sent = Vec::new();
        // Polled every 100 ms for 20 s after the placement at t0.
        for ms in (500..20_000).step_by(100) {
            if !due_parked(parked("p", t0), &asked, &mut nudged, at(ms)).is_empty() {
                sent.push(ms);
            }
        }
        assert_eq!(sent, vec![500, 1000, 2000, 4000, 8000]);
    }

    #[test]
    fn a_pod_the_filter_was_asked_about_since_its_last_nudge_is_left_alone() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut nudged = HashMap::new();
        let mut asked = HashMap::from([("p".to_string(), at(100))]);
        // Asked after its placement: on its way, no nudge.
        assert!(due_parked(parked("p", t0), &asked, &mut nudged, at(600)).is_empty());
        // Asked before the placement only: nudged.
        asked.insert("p".into(), t0 - Duration::from_millis(1));
        assert_eq!(
            due_parked(parked("p", t0), &asked, &mut nudged, at(600)),
            vec![("ns".to_string(), "p".to_string())]
        );
        // Asked after that nudge: left alone, however long it stays parked.
        asked.insert("p".into(), at(700));
        assert!(due_parked(parked("p", t0), &asked, &mut nudged, at(5_000)).is_empty());
    }

    #[test]
    fn a_new_placement_starts_its_nudges_afresh() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let asked = HashMap::new();
        let mut nudged = HashMap::new();
        for ms in [500, 1000, 2000, 4000, 8000] {
            assert_eq!(
                due_parked(parked("p", t0), &asked, &mut nudged, at(ms)).len(),
                1
            );
        }
        assert!(due_parked(parked("p", t0), &asked, &mut nudged, at(60_000)).is_empty());
        // Placed again (a later session): nudged at once.
        let again = at(60_000);
        assert_eq!(
            due_parked(parked("p", again), &asked, &mut nudged, at(60_500)).len(),
            1
        );
    }
}
