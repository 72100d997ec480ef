//! `overcommit`: a gang is admitted (Pending → Inqueue) only while the gangs already admitted
//! and this one fit in the cluster's capacity times `overcommit-factor` (default 1.2).

use crate::config::PluginOption;
use crate::framework::Plugin;
use crate::ix::JobIx;
use crate::resource::{EPSILON, Resource};
use crate::session::{SessionEvent, State};

/// The plugin.
#[derive(Debug)]
pub struct Overcommit {
    factor: f64,
    idle: Resource,
    inqueue: Resource,
}

impl Overcommit {
    /// Reads `overcommit-factor` (values below 1 mean the default 1.2).
    pub fn new(option: &PluginOption) -> Self {
        let f = option.float_arg("overcommit-factor", 1.2);
        Self {
            factor: if f < 1.0 { 1.2 } else { f },
            idle: Resource::zero(),
            inqueue: Resource::zero(),
        }
    }
}

impl Plugin for Overcommit {
    fn name(&self) -> &'static str {
        "overcommit"
    }

    fn open(&mut self, st: &State) {
        let mut used = Resource::zero();
        for n in st.nodes.iter().filter(|n| n.ready && !n.unschedulable) {
            used.add(&n.used);
        }
        self.idle = st.total.scaled(self.factor).minus(&used);
        self.inqueue = Resource::zero();
        for (j, job) in st.jobs.iter_enumerated() {
            let Some(min) = &job.min_resources else {
                continue;
            };
            match job.phase {
                // Gated pods do not hold anything yet.
                tephra_api::scheduling::PodGroupPhase::Inqueue => {
                    self.inqueue.add(&st.deduct_gated(j, min));
                }
                tephra_api::scheduling::PodGroupPhase::Running
                    if st.ready_task_num(j) as i64 >= job.min_available as i64 =>
                {
                    let rest = min.minus(&st.job_state[j].allocated);
                    self.inqueue.add(&st.deduct_gated(j, &rest));
                }
                _ => {}
            }
        }
    }

    fn job_enqueueable(&mut self, st: &mut State, j: JobIx) -> i8 {
        let Some(min) = st.jobs[j].min_resources.clone() else {
            return 1;
        };
        if self.inqueue.plus(&min).less_equal_in(&self.idle, &min) {
            return 1;
        }
        let asked = min.asked_dims();
        let absent: Vec<&str> = asked
            .iter()
            .copied()
            .filter(|d| st.total.get(d) < EPSILON)
            .collect();
        // The message names only what stays put while the gang waits (the cluster's room for
        // gangs, the gang's minimum): it is written into every waiting PodGroup's condition,
        // and naming what is left now rewrote every one of them at each pod's start and end.
        let room = st.total.scaled(self.factor);
        let message = if !absent.is_empty() {
            format!(
                "the gang needs {min}, and no usable node has {}",
                absent.join(", ")
            )
        } else {
            let alone: Vec<&str> = asked
                .iter()
                .copied()
                .filter(|d| min.get(d) > room.get(d) + EPSILON)
                .collect();
            if alone.is_empty() {
                format!(
                    "resource in cluster is overused: the gang needs {min}; gangs may hold {} of the cluster (its allocatable × overcommit factor {}), and what runs and is admitted leaves less",
                    room.describe(&asked),
                    self.factor
                )
            } else {
                // Only the dimensions that are short: a gang short of memory is not told of cpu.
                format!(
                    "resource in cluster is overused: the gang needs {min}, more than gangs may ever hold of the cluster: {} (its allocatable × overcommit factor {}; short by {})",
                    room.describe(&alone),
                    self.factor,
                    min.minus(&room).describe(&alone)
                )
            }
        };
        st.events.push(SessionEvent {
            job: j,
            type_: "Normal",
            reason: "Unschedulable".into(),
            message: message.clone(),
        });
        st.job_state[j].job_fit_error = Some(message);
        -1
    }

    fn job_enqueued(&mut self, st: &State, j: JobIx) {
        if let Some(min) = &st.jobs[j].min_resources {
            self.inqueue.add(min);
        }
    }
}
