//! Admission series: requests by path, operation and result, and the time spent deciding.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use crate::metrics::LATENCY_BUCKETS;

/// `tephra_admission_requests_total{path, operation, result}` and
/// `tephra_admission_duration_seconds{path}`.
#[derive(Clone)]
pub struct AdmissionMetrics {
    /// Requests answered; `result` is `allowed`, `denied`, `patched` or `invalid`.
    pub requests: IntCounterVec,
    /// Time inside the handler, from the body in hand to the answer serialised.
    pub duration: HistogramVec,
}

impl std::fmt::Debug for AdmissionMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionMetrics").finish_non_exhaustive()
    }
}

impl AdmissionMetrics {
    /// Creates the series and registers them into `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "tephra_admission_requests_total",
                "Admission reviews answered, by path, operation and result.",
            ),
            &["path", "operation", "result"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "tephra_admission_duration_seconds",
                "Time spent inside the admission handler, by path.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["path"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(Self { requests, duration })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_both_series() {
        let r = Registry::new();
        let m = AdmissionMetrics::new(&r).unwrap();
        m.requests
            .with_label_values(&["/jobs/validate", "CREATE", "denied"])
            .inc();
        m.duration
            .with_label_values(&["/jobs/validate"])
            .observe(0.0001);
        let names: Vec<String> = r.gather().iter().map(|f| f.name().to_string()).collect();
        assert!(names.contains(&"tephra_admission_requests_total".to_string()));
        assert!(names.contains(&"tephra_admission_duration_seconds".to_string()));
        // A second registration into the same registry is refused, not silently shared.
        assert!(AdmissionMetrics::new(&r).is_err());
    }
}
