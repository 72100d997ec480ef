//! The Job controller's series: Volcano's (same names and labels) and tephra's own.

use crate::api::batch::JobPhase;
use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
};

/// The Job controller's metrics; cheap to clone.
#[derive(Clone)]
pub struct JobMetrics {
    /// `volcano_job_completed_phase_count{job_name, queue_name}` (Volcano's).
    pub completed: IntCounterVec,
    /// `volcano_job_failed_phase_count{job_name, queue_name}` (Volcano's).
    pub failed: IntCounterVec,
    /// `volcano_controller_job_to_pod_creation_latency_milliseconds` (Volcano's): from the
    /// job's creation to each of its pods being created.
    pub pod_creation_latency: Histogram,
    /// `tephra_jobs{phase}`: jobs in the cache by phase.
    pub jobs: IntGaugeVec,
    /// `tephra_job_transitions_total{from, to, reason}`.
    pub transitions: IntCounterVec,
    /// `tephra_job_requeues_total`: requests put back with backoff after a failure.
    pub requeues: IntCounter,
    /// `tephra_job_writes_total{op}`: API writes by the controller (`create-pod`,
    /// `delete-pod`, `mark-pod`, `status`, `podgroup`, ...), for "writes per job".
    pub writes: IntCounterVec,
    /// `tephra_job_requests_coalesced_total`: sync requests dropped because a later sync of
    /// the job had already seen what they were queued for.
    pub coalesced: IntCounter,
}

impl std::fmt::Debug for JobMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobMetrics").finish_non_exhaustive()
    }
}

/// Volcano's buckets for the pod creation latency: 30 exponential buckets from 50 ms to 60 s.
fn creation_buckets() -> Vec<f64> {
    let (min, max, n) = (50.0_f64, 60_000.0_f64, 30);
    let factor = (max / min).powf(1.0 / f64::from(n - 1));
    (0..n).map(|i| min * factor.powi(i)).collect()
}

impl JobMetrics {
    /// Creates the series and registers them into `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let completed = IntCounterVec::new(
            Opts::new(
                "volcano_job_completed_phase_count",
                "Number of job completed phase",
            ),
            &["job_name", "queue_name"],
        )?;
        let failed = IntCounterVec::new(
            Opts::new(
                "volcano_job_failed_phase_count",
                "Number of job failed phase",
            ),
            &["job_name", "queue_name"],
        )?;
        let pod_creation_latency = Histogram::with_opts(
            HistogramOpts::new(
                "volcano_controller_job_to_pod_creation_latency_milliseconds",
                "Latency from VCJob creation to pod created in milliseconds",
            )
            .buckets(creation_buckets()),
        )?;
        let jobs = IntGaugeVec::new(
            Opts::new(
                "tephra_jobs",
                "vcJobs known to the Job controller, by phase.",
            ),
            &["phase"],
        )?;
        let transitions = IntCounterVec::new(
            Opts::new(
                "tephra_job_transitions_total",
                "vcJob phase transitions written, by previous phase, new phase and reason.",
            ),
            &["from", "to", "reason"],
        )?;
        let requeues = IntCounter::new(
            "tephra_job_requeues_total",
            "Job requests put back with backoff after a failure.",
        )?;
        let writes = IntCounterVec::new(
            Opts::new(
                "tephra_job_writes_total",
                "API writes made by the Job controller, by operation.",
            ),
            &["op"],
        )?;
        let coalesced = IntCounter::new(
            "tephra_job_requests_coalesced_total",
            "Job sync requests dropped because a later sync of the job already covered them.",
        )?;
        registry.register(Box::new(completed.clone()))?;
        registry.register(Box::new(failed.clone()))?;
        registry.register(Box::new(pod_creation_latency.clone()))?;
        registry.register(Box::new(jobs.clone()))?;
        registry.register(Box::new(transitions.clone()))?;
        registry.register(Box::new(requeues.clone()))?;
        registry.register(Box::new(writes.clone()))?;
        registry.register(Box::new(coalesced.clone()))?;
        // Every phase is on the page from the start at 0, so a rule sees 0 and not no data.
        for phase in JobPhase::KNOWN {
            jobs.with_label_values(&[phase]);
        }
        Ok(Self {
            completed,
            failed,
            pod_creation_latency,
            jobs,
            transitions,
            requeues,
            writes,
            coalesced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_buckets_span_volcanos_range() {
        let b = creation_buckets();
        assert_eq!(b.len(), 30);
        assert!((b[0] - 50.0).abs() < 1e-9);
        assert!((b[29] - 60_000.0).abs() < 1e-6);
        assert!(b.windows(2).all(|w| w[0] < w[1]));
    }
}
