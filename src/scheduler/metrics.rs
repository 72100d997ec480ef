//! The scheduler's series: Volcano's names and labels where Volcano has them (so its dashboards
//! work), plus gang series of tephra's own.

use std::collections::HashMap;

use prometheus::core::Collector;
use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, exponential_buckets,
};

use super::outcome::SessionFigures;
use super::resource::Resource;
use crate::api::scheduling::PodGroupPhase;

/// Every scheduler series.
#[derive(Clone, Debug)]
pub struct SchedulerMetrics {
    /// `volcano_e2e_scheduling_latency_milliseconds`: a whole session.
    pub e2e_latency: Histogram,
    /// `volcano_action_scheduling_latency_milliseconds{action}`.
    pub action_latency: HistogramVec,
    /// `volcano_schedule_attempts_total{result}`: sessions by whether they placed anything
    /// (`scheduled`), found gangs that cannot fit (`unschedulable`), or failed (`error`).
    pub attempts: IntCounterVec,
    /// `volcano_unschedule_task_count{job_id}`.
    pub unschedule_task_count: GaugeVec,
    /// `volcano_unschedule_job_count`.
    pub unschedule_job_count: IntGauge,
    /// `volcano_queue_allocated_milli_cpu{queue_name}` and friends.
    pub queue_cpu: GaugeVec,
    /// `volcano_queue_*_memory_bytes{queue_name}` (one vec per figure via the `figure` label
    /// would break Volcano's names, so each figure has its own).
    pub queue_memory: GaugeVec,
    /// `volcano_queue_share{queue_name}`.
    pub queue_share: GaugeVec,
    /// `volcano_queue_overused{queue_name}`.
    pub queue_overused: GaugeVec,
    /// `volcano_queue_deserved_milli_cpu{queue_name}`.
    pub queue_deserved_cpu: GaugeVec,
    /// `volcano_queue_deserved_memory_bytes{queue_name}`.
    pub queue_deserved_memory: GaugeVec,
    /// `tephra_gangs{phase}`: PodGroups by phase after the last session.
    pub gangs: GaugeVec,
    /// `tephra_gang_wait_seconds`: from PodGroup creation to its gang being placed whole.
    pub gang_wait: Histogram,
    /// `tephra_placements_expired_total`: assumed placements released because kube-scheduler
    /// never bound the pod.
    pub placements_expired: IntCounter,
    /// `tephra_scheduler_sessions_total{trigger}` (`period`, `demand`).
    pub sessions: IntCounterVec,
    /// `tephra_scheduler_status_writes_total{kind,result}`.
    pub status_writes: IntCounterVec,
    /// `tephra_scheduler_config_reloads_total{result}`.
    pub config_reloads: IntCounterVec,
    /// `tephra_scheduler_last_session_timestamp_seconds`.
    pub last_session: Gauge,
    /// `tephra_scheduler_plugin_ignored{plugin}`: 1 for each of Volcano's plugins the
    /// configuration in force names and tephra does not run, 0 for the others.
    pub plugin_ignored: IntGaugeVec,
}

impl SchedulerMetrics {
    /// Creates the series and registers them.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let ms = |name: &str, help: &str, start: f64, factor: f64, count: usize| {
            Histogram::with_opts(
                HistogramOpts::new(name, help).buckets(exponential_buckets(start, factor, count)?),
            )
        };
        let m = Self {
            e2e_latency: ms(
                "volcano_e2e_scheduling_latency_milliseconds",
                "E2e scheduling latency in milliseconds (scheduling algorithm + binding)",
                1.0,
                1.53,
                20,
            )?,
            action_latency: HistogramVec::new(
                HistogramOpts::new(
                    "volcano_action_scheduling_latency_milliseconds",
                    "Action scheduling latency in milliseconds",
                )
                .buckets(exponential_buckets(1.0, 1.49, 20)?),
                &["action"],
            )?,
            attempts: IntCounterVec::new(
                Opts::new(
                    "volcano_schedule_attempts_total",
                    "Number of attempts to schedule pods, by the result.",
                ),
                &["result"],
            )?,
            unschedule_task_count: GaugeVec::new(
                Opts::new(
                    "volcano_unschedule_task_count",
                    "Number of tasks could not be scheduled",
                ),
                &["job_id"],
            )?,
            unschedule_job_count: IntGauge::new(
                "volcano_unschedule_job_count",
                "Number of jobs could not be scheduled",
            )?,
            queue_cpu: GaugeVec::new(
                Opts::new(
                    "volcano_queue_allocated_milli_cpu",
                    "Allocated CPU count for one queue",
                ),
                &["queue_name"],
            )?,
            queue_memory: GaugeVec::new(
                Opts::new(
                    "volcano_queue_allocated_memory_bytes",
                    "Allocated memory for one queue",
                ),
                &["queue_name"],
            )?,
            queue_share: GaugeVec::new(
                Opts::new("volcano_queue_share", "Share for one queue"),
                &["queue_name"],
            )?,
            queue_overused: GaugeVec::new(
                Opts::new("volcano_queue_overused", "If one queue is overused"),
                &["queue_name"],
            )?,
            queue_deserved_cpu: GaugeVec::new(
                Opts::new(
                    "volcano_queue_deserved_milli_cpu",
                    "Deserved CPU count for one queue",
                ),
                &["queue_name"],
            )?,
            queue_deserved_memory: GaugeVec::new(
                Opts::new(
                    "volcano_queue_deserved_memory_bytes",
                    "Deserved memory for one queue",
                ),
                &["queue_name"],
            )?,
            gangs: GaugeVec::new(
                Opts::new("tephra_gangs", "PodGroups by phase after the last session."),
                &["phase"],
            )?,
            gang_wait: Histogram::with_opts(
                HistogramOpts::new(
                    "tephra_gang_wait_seconds",
                    "Time from PodGroup creation until its gang was placed whole.",
                )
                .buckets(exponential_buckets(0.1, 2.0, 16)?),
            )?,
            placements_expired: IntCounter::new(
                "tephra_placements_expired_total",
                "Assumed placements released because the pod was never bound.",
            )?,
            sessions: IntCounterVec::new(
                Opts::new(
                    "tephra_scheduler_sessions_total",
                    "Scheduling sessions run, by what started them.",
                ),
                &["trigger"],
            )?,
            status_writes: IntCounterVec::new(
                Opts::new(
                    "tephra_scheduler_status_writes_total",
                    "PodGroup and Queue status writes and Events, by kind and result.",
                ),
                &["kind", "result"],
            )?,
            config_reloads: IntCounterVec::new(
                Opts::new(
                    "tephra_scheduler_config_reloads_total",
                    "Scheduler configuration reloads after the file changed, by result.",
                ),
                &["result"],
            )?,
            last_session: Gauge::new(
                "tephra_scheduler_last_session_timestamp_seconds",
                "When the last scheduling session finished (Unix time).",
            )?,
            plugin_ignored: IntGaugeVec::new(
                Opts::new(
                    "tephra_scheduler_plugin_ignored",
                    "1 for each of Volcano's plugins the scheduler configuration names and tephra \
                     does not run (left out of every session), 0 for the others.",
                ),
                &["plugin"],
            )?,
        };
        registry.register(Box::new(m.e2e_latency.clone()))?;
        registry.register(Box::new(m.action_latency.clone()))?;
        registry.register(Box::new(m.attempts.clone()))?;
        registry.register(Box::new(m.unschedule_task_count.clone()))?;
        registry.register(Box::new(m.unschedule_job_count.clone()))?;
        registry.register(Box::new(m.queue_cpu.clone()))?;
        registry.register(Box::new(m.queue_memory.clone()))?;
        registry.register(Box::new(m.queue_share.clone()))?;
        registry.register(Box::new(m.queue_overused.clone()))?;
        registry.register(Box::new(m.queue_deserved_cpu.clone()))?;
        registry.register(Box::new(m.queue_deserved_memory.clone()))?;
        registry.register(Box::new(m.gangs.clone()))?;
        registry.register(Box::new(m.gang_wait.clone()))?;
        registry.register(Box::new(m.placements_expired.clone()))?;
        registry.register(Box::new(m.sessions.clone()))?;
        registry.register(Box::new(m.status_writes.clone()))?;
        registry.register(Box::new(m.config_reloads.clone()))?;
        registry.register(Box::new(m.last_session.clone()))?;
        registry.register(Box::new(m.plugin_ignored.clone()))?;
        m.show_ignored(&[]);
        // Series with known label values are on the page from the start at 0, so a rule
        // sees 0 and not no data before the first session.
        for r in ["scheduled", "unschedulable", "error"] {
            m.attempts.with_label_values(&[r]);
        }
        for kind in ["podgroup", "queue", "event"] {
            for result in ["ok", "error"] {
                m.status_writes.with_label_values(&[kind, result]);
            }
        }
        for phase in PodGroupPhase::KNOWN {
            m.gangs.with_label_values(&[phase]);
        }
        Ok(m)
    }

    /// Records one session's figures.
    pub fn observe(&self, total_ms: f64, f: &SessionFigures, placed: usize) {
        self.e2e_latency.observe(total_ms);
        for (action, ms) in &f.action_ms {
            self.action_latency
                .with_label_values(&[action])
                .observe(*ms);
        }
        let result = if placed > 0 {
            "scheduled"
        } else if f.unschedulable_tasks.is_empty() {
            "none"
        } else {
            "unschedulable"
        };
        if result != "none" {
            self.attempts.with_label_values(&[result]).inc();
        }
        set_exactly(
            &self.unschedule_task_count,
            f.unschedulable_tasks
                .iter()
                .map(|(job, n)| (job.as_str(), *n as f64)),
        );
        self.unschedule_job_count
            .set(f.unschedulable_tasks.len() as i64);
        for (q, r) in &f.queues {
            let cpu_mem = |g: &GaugeVec, g2: &GaugeVec, r: &Resource| {
                g.with_label_values(&[q]).set(r.milli_cpu);
                g2.with_label_values(&[q]).set(r.memory);
            };
            cpu_mem(&self.queue_cpu, &self.queue_memory, &r.allocated);
            cpu_mem(
                &self.queue_deserved_cpu,
                &self.queue_deserved_memory,
                &r.deserved,
            );
            self.queue_share.with_label_values(&[q]).set(r.share);
            self.queue_overused
                .with_label_values(&[q])
                .set(if r.overused { 1.0 } else { 0.0 });
        }
        // Known phases stay at 0 when no gang is in them; one this build does not know
        // (written by a newer Volcano) has its series only while a gang is in it.
        let in_phase = |p: &str| f.phases.get(p).map_or(0.0, |n| *n as f64);
        set_exactly(
            &self.gangs,
            PodGroupPhase::KNOWN
                .iter()
                .copied()
                .chain(f.phases.keys().map(String::as_str))
                .map(|p| (p, in_phase(p))),
        );
    }

    /// Sets `tephra_scheduler_plugin_ignored`: 1 for the plugins in `ignored`, 0 for every
    /// other plugin tephra does not run.
    pub fn show_ignored(&self, ignored: &[&str]) {
        for (name, _) in super::config::VOLCANO_ONLY_PLUGINS {
            self.plugin_ignored
                .with_label_values(&[name])
                .set(i64::from(ignored.contains(name)));
        }
    }
}

/// Sets `g`, a gauge with one label, to `values` and removes the series of label values not
/// among them. Never empties the family on the way, as `reset` followed by setting would: a
/// scrape in between would see it vanish and a rule reading it would flap.
fn set_exactly<'a>(g: &GaugeVec, values: impl Iterator<Item = (&'a str, f64)>) {
    let keep: HashMap<&str, f64> = values.collect();
    for (label, v) in &keep {
        g.with_label_values(&[label]).set(*v);
    }
    let gone: Vec<String> = g
        .collect()
        .iter()
        .flat_map(|family| family.get_metric())
        .filter_map(|m| m.get_label().first().map(|l| l.value().to_string()))
        .filter(|label| !keep.contains_key(label.as_str()))
        .collect();
    for label in gone {
        let _ = g.remove_label_values(&[&label]);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use prometheus::Registry;

    use super::*;

    fn figures(phases: &[(&str, u32)], unschedulable: &[(&str, u32)]) -> SessionFigures {
        let map = |v: &[(&str, u32)]| -> BTreeMap<String, u32> {
            v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
        };
        SessionFigures {
            phases: map(phases),
            unschedulable_tasks: map(unschedulable),
            ..SessionFigures::default()
        }
    }

    /// The series of `family` on `registry`'s page, by their one label's value.
    fn series(registry: &Registry, family: &str) -> Option<BTreeMap<String, f64>> {
        let f = registry.gather().into_iter().find(|f| f.name() == family)?;
        Some(
            f.get_metric()
                .iter()
                .map(|m| {
                    (
                        m.get_label()[0].value().to_string(),
                        m.get_gauge().get_value(),
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn per_phase_and_per_job_series_follow_the_last_session_and_drop_what_is_gone() {
        let registry = Registry::new();
        let m = SchedulerMetrics::new(&registry).unwrap_or_else(|e| panic!("{e}"));
        m.observe(
            1.0,
            &figures(&[("Running", 2), ("Scaling", 1)], &[("ns/a", 3)]),
            0,
        );
        let gangs = series(&registry, "tephra_gangs").unwrap_or_default();
        assert_eq!(gangs.get("Running"), Some(&2.0));
        assert_eq!(
            gangs.get("Scaling"),
            Some(&1.0),
            "a phase this build does not know"
        );
        assert_eq!(
            gangs.get("Pending"),
            Some(&0.0),
            "known phases are shown at 0"
        );
        let jobs = series(&registry, "volcano_unschedule_task_count").unwrap_or_default();
        assert_eq!(jobs.get("ns/a"), Some(&3.0));

        m.observe(1.0, &figures(&[("Pending", 1)], &[("ns/b", 1)]), 0);
        let gangs = series(&registry, "tephra_gangs").unwrap_or_default();
        assert_eq!(gangs.get("Running"), Some(&0.0));
        assert_eq!(gangs.get("Pending"), Some(&1.0));
        assert!(!gangs.contains_key("Scaling"), "{gangs:?}");
        let jobs = series(&registry, "volcano_unschedule_task_count").unwrap_or_default();
        assert_eq!(jobs.keys().collect::<Vec<_>>(), ["ns/b"]);
    }

    /// A scrape while a session's figures are being recorded still finds every phase: the
    /// family is updated in place, never emptied first.
    #[test]
    fn a_scrape_during_recording_never_misses_the_gang_phases() {
        let registry = Registry::new();
        let m = Arc::new(SchedulerMetrics::new(&registry).unwrap_or_else(|e| panic!("{e}")));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (m, stop) = (m.clone(), stop.clone());
            std::thread::spawn(move || {
                let f = figures(&[("Running", 1)], &[]);
                while !stop.load(Ordering::Relaxed) {
                    m.observe(1.0, &f, 0);
                }
            })
        };
        let mut missing = 0;
        for _ in 0..20_000 {
            let gangs = series(&registry, "tephra_gangs").unwrap_or_default();
            if PodGroupPhase::KNOWN.iter().any(|p| !gangs.contains_key(*p)) {
                missing += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer
            .join()
            .unwrap_or_else(|_| panic!("the writer panicked"));
        assert_eq!(missing, 0, "scrapes that missed a phase");
    }
}
