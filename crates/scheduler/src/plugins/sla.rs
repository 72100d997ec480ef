//! `sla`: a job that has waited longer than its waiting time is admitted and may keep a
//! partial placement, whatever the other plugins of later tiers say, and jobs with an earlier
//! deadline go first.
//!
//! The waiting time is the PodGroup's `volcano.sh/sla-waiting-time` or `sla-waiting-time`
//! annotation (the Job controller copies a vcJob's annotations there), else the plugin's
//! `sla-waiting-time` argument; both are Go durations (`3s`, `1h30m`). A job's deadline is its
//! PodGroup's creation time plus its waiting time. Volcano registers three hooks, and so does
//! this module:
//! - job order: jobs with a deadline before jobs without, the earlier deadline first;
//! - enqueueable and pipelined: a permit (+1) once the deadline has passed, else no vote.
//!
//! The session's clock is [`State::now_ms`]; at close the plugin asks the runner for a session
//! at the next deadline still ahead ([`State::wake_at_ms`]), since nothing else changes then.

use std::cmp::Ordering;
use std::time::Duration;

use crate::config::{PluginOption, string_arg};
use crate::framework::Plugin;
use crate::ix::JobIx;
use crate::session::State;

/// The argument and annotation name.
pub const WAITING_TIME: &str = "sla-waiting-time";

/// The plugin.
#[derive(Debug, Default)]
pub struct Sla {
    /// The cluster-wide waiting time from the plugin's arguments.
    global: Option<Duration>,
}

impl Sla {
    /// Reads the `sla-waiting-time` argument. Like Volcano, a value that is not a positive Go
    /// duration string is logged and ignored (jobs then need their own annotation).
    pub fn new(option: &PluginOption) -> Self {
        let global = option.arguments.get(WAITING_TIME).and_then(|_| {
            let text = string_arg(&option.arguments, WAITING_TIME).unwrap_or_default();
            let parsed = tephra_api::Duration(text.to_string())
                .to_std()
                .ok()
                .filter(|d| !d.is_zero());
            if parsed.is_none() {
                tracing::warn!(value = %text, "sla plugin: sla-waiting-time is not a positive duration such as 1h or 30s; ignored");
            }
            parsed
        });
        Self { global }
    }

    /// The job's deadline, milliseconds since the epoch, when it has a waiting time.
    fn deadline_ms(&self, st: &State, j: JobIx) -> Option<i64> {
        let job = &st.jobs[j];
        let wait = job.waiting_time.or(self.global)?;
        let wait_ms = i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
        Some(job.created.saturating_mul(1000).saturating_add(wait_ms))
    }

    /// +1 once the deadline has passed, else 0 (no opinion).
    fn permit(&self, st: &State, j: JobIx) -> i8 {
        match self.deadline_ms(st, j) {
            Some(d) if st.now_ms >= d => 1,
            _ => 0,
        }
    }
}

impl Plugin for Sla {
    fn name(&self) -> &'static str {
        "sla"
    }

    fn job_order(&self, st: &State, a: JobIx, b: JobIx) -> Option<Ordering> {
        Some(match (self.deadline_ms(st, a), self.deadline_ms(st, b)) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(x), Some(y)) => x.cmp(&y),
        })
    }

    fn job_enqueueable(&mut self, st: &mut State, j: JobIx) -> i8 {
        self.permit(st, j)
    }

    fn job_pipelined(&self, st: &State, j: JobIx) -> i8 {
        self.permit(st, j)
    }

    fn close(&mut self, st: &mut State) {
        // A job not ready yet whose deadline is still ahead will be decided otherwise then.
        let next = st
            .jobs
            .indices()
            .filter(|&j| !st.is_ready(j))
            .filter_map(|j| self.deadline_ms(st, j))
            .filter(|&d| d > st.now_ms)
            .min();
        if let Some(d) = next {
            crate::model::wake_by(&mut st.wake_at_ms, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use crate::config::parse;
    use crate::outcome::{Outcome, run_session};
    use crate::testing::{World, podgroup, with_phase};
    use tephra_api::scheduling::PodGroupPhase;

    /// Volcano's CI configuration as far as enqueue goes: sla in the first tier, overcommit and
    /// proportion (which would refuse a gang larger than the cluster) in the second.
    const CONF: &str = "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  \
        - name: priority\n  - name: gang\n  - name: conformance\n  - name: sla\n- plugins:\n  \
        - name: overcommit\n  - name: drf\n  - name: predicates\n  - name: proportion\n  \
        - name: nodeorder\n";

    /// Seconds since the epoch of the test builders' creation time (2026-01-01T00:00:00Z).
    const CREATED: i64 = 1_767_225_600;

    /// A Pending PodGroup without pods needing `cpu` cores, created `created_after` seconds
    /// after [`CREATED`], with the given annotations.
    fn pending(w: &mut World, name: &str, cpu: u32, created_after: i64, ann: &[(&str, &str)]) {
        let mut pg = with_phase(
            podgroup("ns", name, "default", cpu as i32, Some((cpu * 1000, 1024))),
            "Pending",
        );
        pg.metadata.creation_timestamp = Some(Time(
            Timestamp::from_second(CREATED + created_after).unwrap(),
        ));
        let map: BTreeMap<String, String> = ann
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        pg.metadata.annotations = Some(map);
        w.index.apply_podgroup(&pg);
    }

    fn session_at(w: &World, conf: &str, secs_after: i64) -> Outcome {
        let conf = parse(conf, "test").unwrap();
        let now = Time(Timestamp::from_second(CREATED + secs_after).unwrap());
        run_session(w.index.snapshot(), &conf, "s", now)
    }

    /// The phase the session leaves the PodGroup in (all start Pending).
    fn phase(out: &Outcome, name: &str) -> PodGroupPhase {
        out.podgroups
            .iter()
            .find(|u| u.name == name)
            .and_then(|u| u.status.phase.clone())
            .unwrap_or(PodGroupPhase::Pending)
    }

    #[test]
    fn a_gang_larger_than_the_cluster_is_admitted_once_its_waiting_time_has_passed() {
        // 4 cpu; the gang needs 8: overcommit refuses it until sla permits it.
        let mut w = World::default().nodes(1, 4, 16);
        pending(&mut w, "overlarge", 8, 0, &[("sla-waiting-time", "3s")]);
        let early = session_at(&w, CONF, 2);
        assert_eq!(phase(&early, "overlarge"), PodGroupPhase::Pending);
        // The runner is asked back for the moment the waiting time runs out.
        assert_eq!(early.wake_at_ms, Some((CREATED + 3) * 1000));
        let late = session_at(&w, CONF, 3);
        assert_eq!(phase(&late, "overlarge"), PodGroupPhase::Inqueue);
        assert_eq!(late.wake_at_ms, None);
        // Without the plugin the gang waits for ever.
        let without = CONF.replace("  - name: sla\n", "");
        let out = session_at(&w, &without, 3600);
        assert_eq!(phase(&out, "overlarge"), PodGroupPhase::Pending);
        assert_eq!(out.wake_at_ms, None);
    }

    #[test]
    fn the_earlier_deadline_is_admitted_first_and_jobs_without_one_come_last() {
        // 16 cpu (19.2 with overcommit): one gang of 16 fits, not two.
        let mut w = World::default().nodes(4, 4, 16);
        pending(&mut w, "a-none", 16, 0, &[]);
        pending(&mut w, "b-slow", 16, 1, &[("sla-waiting-time", "1h")]);
        pending(
            &mut w,
            "c-fast",
            16,
            2,
            &[("volcano.sh/sla-waiting-time", "30m")],
        );
        let out = session_at(&w, CONF, 10);
        assert_eq!(phase(&out, "c-fast"), PodGroupPhase::Inqueue);
        assert_eq!(phase(&out, "b-slow"), PodGroupPhase::Pending);
        assert_eq!(phase(&out, "a-none"), PodGroupPhase::Pending);
        // Without the plugin the oldest goes first.
        let out = session_at(&w, &CONF.replace("  - name: sla\n", ""), 10);
        assert_eq!(phase(&out, "a-none"), PodGroupPhase::Inqueue);
        assert_eq!(phase(&out, "c-fast"), PodGroupPhase::Pending);
    }

    #[test]
    fn the_argument_applies_to_jobs_without_an_annotation_and_a_bad_value_counts_as_none() {
        let mut w = World::default().nodes(1, 4, 16);
        pending(&mut w, "plain", 8, 0, &[]);
        pending(&mut w, "bad", 8, 0, &[("sla-waiting-time", "soon")]);
        pending(&mut w, "own", 8, 0, &[("sla-waiting-time", "1h")]);
        let global = CONF.replace(
            "  - name: sla\n",
            "  - name: sla\n    arguments:\n      sla-waiting-time: 1m\n",
        );
        let out = session_at(&w, &global, 60);
        // The global minute applies to `plain` and to `bad` (its own value does not parse);
        // `own` waits its hour.
        assert_eq!(phase(&out, "plain"), PodGroupPhase::Inqueue);
        assert_eq!(phase(&out, "bad"), PodGroupPhase::Inqueue);
        assert_eq!(phase(&out, "own"), PodGroupPhase::Pending);
        assert_eq!(out.wake_at_ms, Some((CREATED + 3600) * 1000));
        // An argument that is no duration is ignored, not fatal.
        let broken = CONF.replace(
            "  - name: sla\n",
            "  - name: sla\n    arguments:\n      sla-waiting-time: 0s\n",
        );
        let out = session_at(&w, &broken, 7200);
        assert_eq!(phase(&out, "own"), PodGroupPhase::Inqueue);
        assert_eq!(phase(&out, "plain"), PodGroupPhase::Pending);
        assert_eq!(phase(&out, "bad"), PodGroupPhase::Pending);
    }
}
