//! The extender's series: requests by verb and result, their latency, gang-atomic binds by
//! gang, and Volcano's scheduler series where they mean the same thing here
//! (`volcano_scheduling_stage_duration_milliseconds{stage}` for Predicate/Scoring/Bind,
//! `volcano_total_preemption_attempts`, `volcano_pod_preemption_victims`).

use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    exponential_buckets,
};

/// The `outcome` label values of `tephra_extender_gang_binds_total`.
pub const GANG_BIND_OUTCOMES: [&str; 7] = [
    "held",
    "completed",
    "timed_out",
    "gather_expired",
    "failed",
    "ahead",
    "joined",
];

/// The extender's series, registered once per registry.
#[derive(Clone, Debug)]
pub struct ExtenderMetrics {
    /// `tephra_extender_requests_total{verb,result}`.
    pub requests: IntCounterVec,
    /// `tephra_extender_request_duration_seconds{verb}`.
    pub duration: HistogramVec,
    /// `tephra_extender_gang_binds_total{outcome}`: `held`, `completed`, `timed_out`,
    /// `gather_expired`, `failed` (the API refused the binding), `ahead` (members bound
    /// before kube-scheduler asked), `joined` (requests answered from a Binding already
    /// posted, not posted again; pods outside gangs included). No per-gang label: every
    /// gang ever scheduled would have kept its series for the life of the process (a
    /// thousand-job benchmark left 2,000); the gang is in the log lines and Events instead.
    pub gang_binds: IntCounterVec,
    /// `tephra_extender_binds_held`: binds waiting for the rest of their gang now.
    pub held_now: IntGauge,
    /// `tephra_extender_replans_total{result}`.
    pub replans: IntCounterVec,
    /// `volcano_scheduling_stage_duration_milliseconds{stage}`.
    pub stage: HistogramVec,
    /// `volcano_total_preemption_attempts`.
    pub preemption_attempts: IntCounter,
    /// `volcano_pod_preemption_victims`: victims accepted by the last preempt call.
    pub preemption_victims: IntGauge,
    /// `tephra_extender_placements_transferred_total`: placements handed from a gang member
    /// kube-scheduler had not asked about to one it asked about.
    pub placements_transferred: IntCounter,
    /// `tephra_extender_plan_gates_removed_total`: pods whose plan gate was removed once a
    /// session placed them.
    pub plan_gates_removed: IntCounter,
}

impl ExtenderMetrics {
    /// Creates and registers the series.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let m = Self {
            requests: IntCounterVec::new(
                Opts::new(
                    "tephra_extender_requests_total",
                    "Scheduler extender requests by verb and result.",
                ),
                &["verb", "result"],
            )?,
            duration: HistogramVec::new(
                HistogramOpts::new(
                    "tephra_extender_request_duration_seconds",
                    "Time to answer a scheduler extender request, by verb (bind includes the hold for the gang).",
                )
                .buckets(exponential_buckets(0.00005, 2.0, 18)?),
                &["verb"],
            )?,
            gang_binds: IntCounterVec::new(
                Opts::new(
                    "tephra_extender_gang_binds_total",
                    "Gang member binds by outcome (held, completed, timed_out, gather_expired, failed, ahead, joined).",
                ),
                &["outcome"],
            )?,
            held_now: IntGauge::new(
                "tephra_extender_binds_held",
                "Binds held now, waiting for the rest of their gang.",
            )?,
            replans: IntCounterVec::new(
                Opts::new(
                    "tephra_extender_replans_total",
                    "Gangs re-planned within the nodes kube-scheduler sent, by result.",
                ),
                &["result"],
            )?,
            stage: HistogramVec::new(
                HistogramOpts::new(
                    "volcano_scheduling_stage_duration_milliseconds",
                    "Stage latency in milliseconds (Predicate: filter, Scoring: prioritize, Bind).",
                )
                .buckets(exponential_buckets(0.1, 2.0, 20)?),
                &["stage"],
            )?,
            preemption_attempts: IntCounter::new(
                "volcano_total_preemption_attempts",
                "Total preemption attempts in the cluster till now",
            )?,
            preemption_victims: IntGauge::new(
                "volcano_pod_preemption_victims",
                "Number of selected preemption victims",
            )?,
            placements_transferred: IntCounter::new(
                "tephra_extender_placements_transferred_total",
                "Placements handed from a gang member kube-scheduler had not asked about to a like member it asked about.",
            )?,
            plan_gates_removed: IntCounter::new(
                "tephra_extender_plan_gates_removed_total",
                "Pods whose plan gate (scheduling.tephra.io/gang-plan) was removed once a session placed them.",
            )?,
        };
        registry.register(Box::new(m.requests.clone()))?;
        registry.register(Box::new(m.duration.clone()))?;
        registry.register(Box::new(m.gang_binds.clone()))?;
        registry.register(Box::new(m.held_now.clone()))?;
        registry.register(Box::new(m.replans.clone()))?;
        registry.register(Box::new(m.stage.clone()))?;
        registry.register(Box::new(m.preemption_attempts.clone()))?;
        registry.register(Box::new(m.preemption_victims.clone()))?;
        registry.register(Box::new(m.placements_transferred.clone()))?;
        registry.register(Box::new(m.plan_gates_removed.clone()))?;
        // Every series an alert or the dashboard reads is on the page from the start at 0, so
        // a rule sees 0 rather than no data before the first request.
        for (verb, results) in [
            (
                "filter",
                &["ok", "unschedulable", "error", "bad_request"][..],
            ),
            ("prioritize", &["ok", "bad_request"][..]),
            ("bind", &["ok", "error", "bad_request"][..]),
            ("preempt", &["ok", "bad_request"][..]),
        ] {
            m.duration.with_label_values(&[verb]);
            for result in results {
                m.requests.with_label_values(&[verb, result]);
            }
        }
        for outcome in GANG_BIND_OUTCOMES {
            m.gang_binds.with_label_values(&[outcome]);
        }
        Ok(m)
    }
}
