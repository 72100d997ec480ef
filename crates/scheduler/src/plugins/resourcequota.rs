//! `resourcequota`: a gang is admitted (enqueued) only when its `minResources` fits every
//! ResourceQuota of its namespace: for each resource a quota limits and the gang's minimum
//! names (the same name: `cpu` limits `cpu`, not `requests.cpu`, as in Volcano), what the
//! namespace already holds plus this gang's minimum is at most the quota's hard limit. A gang
//! refused is told which resources and by how much, in its condition and in an
//! `Unschedulable` Event, and waits.
//!
//! What the namespace holds is the larger, per resource, of the quota's `status.used` (what
//! kube-controller-manager's quota controller counts) and what the session sees the
//! namespace's other gangs hold: for each gang admitted (Inqueue or Running, including those
//! admitted earlier in this session) the larger of its minimum and what its pods hold, for
//! the others what their pods hold. Volcano reads `status.used` alone and adds only the gangs
//! it let through in the same session, so where no quota controller runs (or before it has
//! counted a gang's pods) one quota admitted gang after gang.

use crate::framework::Plugin;
use crate::ix::JobIx;
use crate::resource::{EPSILON, Resource};
use crate::session::{SessionEvent, State};
use tephra_api::scheduling::PodGroupPhase;

/// The plugin.
#[derive(Debug, Default)]
pub struct ResourceQuota;

/// What the gangs of namespace `ns` other than `j` hold or were promised.
fn held_in(st: &State, ns: &str, j: JobIx) -> Resource {
    let mut held = Resource::zero();
    for (k, job) in st.jobs.iter_enumerated() {
        if k == j || job.namespace != ns {
            continue;
        }
        let pods = &st.job_state[k].allocated;
        let admitted = matches!(job.phase, PodGroupPhase::Inqueue | PodGroupPhase::Running);
        match &job.min_resources {
            Some(min) if admitted => held.add(&min.max_with(pods)),
            _ => held.add(pods),
        };
    }
    held
}

impl Plugin for ResourceQuota {
    fn name(&self) -> &'static str {
        "resourcequota"
    }

    fn job_enqueueable(&mut self, st: &mut State, j: JobIx) -> i8 {
        let Some(min) = st.jobs[j].min_resources.clone() else {
            return 1;
        };
        let ns = st.jobs[j].namespace.clone();
        if !st.quotas.iter().any(|q| q.namespace == ns) {
            return 1;
        }
        let held = held_in(st, &ns, j);
        for q in st.quotas.iter().filter(|q| q.namespace == ns) {
            let used = q.used.max_with(&held);
            let short: Vec<&str> = q
                .hard_names
                .iter()
                .map(String::as_str)
                .filter(|d| min.get(d) >= EPSILON)
                .filter(|d| used.get(d) + min.get(d) > q.hard.get(d) + EPSILON)
                .collect();
            if short.is_empty() {
                continue;
            }
            let message = format!(
                "resource quota {}/{} insufficient: the gang needs {}, {} used, limited to {}",
                q.namespace,
                q.name,
                min.describe(&short),
                used.describe(&short),
                q.hard.describe(&short)
            );
            st.events.push(SessionEvent {
                job: j,
                type_: "Normal",
                reason: "Unschedulable".into(),
                message: message.clone(),
            });
            st.job_state[j].job_fit_error = Some(message);
            return -1;
        }
        1
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ResourceQuota as Quota;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use crate::config::parse;
    use crate::outcome::{Outcome, run_session};
    use crate::testing::{World, condition_message, placed_by_gang};

    const CONF: &str = "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  \
                        - name: priority\n  - name: gang\n  - name: resourcequota\n- plugins:\n  \
                        - name: predicates\n  - name: proportion\n";

    fn quota(ns: &str, hard: serde_json::Value, used: serde_json::Value) -> Quota {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": "q"},
            "spec": {"hard": hard},
            "status": {"hard": hard, "used": used}
        }))
        .expect("quota")
    }

    fn session(w: &World) -> Outcome {
        let conf = parse(CONF, "test").expect("conf");
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        run_session(w.index.snapshot(), &conf, "s", now)
    }

    #[test]
    fn gangs_are_admitted_while_their_namespaces_quota_holds_them() {
        // 6 cpus of quota, 2 used: one gang of 4 × 1 cpu fits, a second does not; another
        // namespace is not limited.
        let mut w = World::default().nodes(4, 8, 32);
        w.index
            .apply_resource_quota(&quota("team", json!({"cpu": "6"}), json!({"cpu": "2"})));
        let w = w
            .gang("team", "a", "default", 4, 4, 1000, 512, "Pending")
            .gang("team", "b", "default", 4, 4, 1000, 512, "Pending")
            .gang("other", "c", "default", 4, 4, 1000, 512, "Pending");
        let out = session(&w);
        let placed = placed_by_gang(&out.plan);
        assert_eq!(placed.get("team/a"), Some(&4), "{placed:?}");
        assert_eq!(placed.get("team/b"), None, "{placed:?}");
        assert_eq!(placed.get("other/c"), Some(&4), "{placed:?}");
        let msg = condition_message(&out, "b");
        assert!(
            msg.contains("resource quota team/q insufficient: the gang needs cpu 4"),
            "{msg}"
        );
    }

    #[test]
    fn only_the_resources_a_quota_names_as_the_gang_does_count() {
        // `requests.cpu` is another name than the gang's `cpu`, as in Volcano; `memory` limits.
        let mut w = World::default().nodes(2, 8, 32);
        w.index.apply_resource_quota(&quota(
            "team",
            json!({"requests.cpu": "1", "memory": "1Gi"}),
            json!({}),
        ));
        let w = w
            .gang("team", "a", "default", 2, 2, 3000, 256, "Pending")
            .gang("team", "big", "default", 2, 2, 100, 2048, "Pending");
        let out = session(&w);
        let placed = placed_by_gang(&out.plan);
        assert_eq!(placed.get("team/a"), Some(&2), "{placed:?}");
        assert_eq!(placed.get("team/big"), None, "{placed:?}");
        assert!(
            condition_message(&out, "big").contains("memory"),
            "{}",
            condition_message(&out, "big")
        );
    }
}
