//! Volcano's hierarchical `capacity` (`enableHierarchy: true` on the plugin): queues form a
//! tree under `root` through `spec.parent`, and what a queue may hold is bounded at every
//! level.
//!
//! * **Roll-up**: what each queue's gangs hold, ask for, have been promised and hold beyond
//!   their minimums counts for its ancestors too.
//! * **Capabilities**: a queue without a capability in a dimension takes its parent's; its
//!   real capability is its parent's real capability less what the parent's children are
//!   guaranteed, plus its own guarantee, within its capability (`root`'s is the cluster).
//! * **Admission and allocation** are checked at the queue and at every ancestor: a gang of a
//!   team is refused when its department is full.
//! * **Order**: queues compare at the level where their paths from `root` part, by how much
//!   of its declared share each of those ancestors holds.

use std::cmp::Ordering;

use crate::ix::{IxVec, QueueIx};
use crate::resource::Resource;
use crate::session::State;

use super::proportion::QueueAttr;

/// The name of the queue every other one hangs under.
pub const ROOT: &str = "root";

/// Each queue's ancestors, `root` first (empty for `root` and for a queue in a cycle or under
/// a parent that does not exist, which then stands alone).
#[derive(Clone, Debug, Default)]
pub struct Tree {
    /// Ancestors by queue, `root` first.
    pub ancestors: IxVec<QueueIx, Vec<QueueIx>>,
}

impl Tree {
    /// The tree of the session's queues.
    pub fn of(st: &State) -> Self {
        let parent_of = |q: QueueIx| -> Option<QueueIx> {
            let queue = &st.queues[q];
            if queue.name == ROOT {
                return None;
            }
            let name = queue.parent.as_deref().unwrap_or(ROOT);
            st.queue_index.get(name).copied().filter(|&p| p != q)
        };
        let ancestors = st
            .queues
            .indices()
            .map(|q| {
                let mut chain = Vec::new();
                let mut at = parent_of(q);
                while let Some(p) = at {
                    if chain.contains(&p) || p == q {
                        // A cycle: the queue stands alone.
                        return Vec::new();
                    }
                    chain.push(p);
                    at = parent_of(p);
                }
                chain.reverse();
                chain
            })
            .collect();
        Self { ancestors }
    }

    /// `q` and its ancestors, nearest first.
    pub fn up(&self, q: QueueIx) -> impl Iterator<Item = QueueIx> + '_ {
        std::iter::once(q).chain(self.ancestors[q].iter().rev().copied())
    }

    fn parent(&self, q: QueueIx) -> Option<QueueIx> {
        self.ancestors[q].last().copied()
    }
}

/// Adds what each queue's own gangs hold, ask for, were promised and hold beyond their
/// minimums to all its ancestors.
pub fn roll_up(tree: &Tree, attrs: &mut IxVec<QueueIx, QueueAttr>) {
    let own: Vec<(QueueIx, Resource, Resource, Resource, Resource)> = attrs
        .iter_enumerated()
        .map(|(q, a)| {
            (
                q,
                a.allocated.clone(),
                a.request.clone(),
                a.inqueue.clone(),
                a.elastic.clone(),
            )
        })
        .collect();
    for (q, allocated, request, inqueue, elastic) in own {
        for &p in &tree.ancestors[q] {
            let a = &mut attrs[p];
            a.allocated.add(&allocated);
            a.request.add(&request);
            a.inqueue.add(&inqueue);
            a.elastic.add(&elastic);
        }
    }
}

/// Capabilities and real capabilities from `root` down (see the module docs). `attrs` come
/// with each queue's own capability (the cluster's in dimensions it leaves unset) and
/// guarantee.
pub fn capabilities(
    tree: &Tree,
    st: &State,
    attrs: &mut IxVec<QueueIx, QueueAttr>,
    total: &Resource,
) {
    let mut order: Vec<QueueIx> = st.queues.indices().collect();
    order.sort_by_key(|&q| tree.ancestors[q].len());
    for q in order {
        let Some(p) = tree.parent(q) else {
            attrs[q].real_capability = attrs[q].capability.min_with(total);
            continue;
        };
        // Dimensions the queue does not limit take the parent's limit.
        let declared = st.queues[q].capability.clone().unwrap_or_default();
        let parent_cap = attrs[p].capability.clone();
        let cap = &mut attrs[q].capability;
        if declared.milli_cpu <= 0.0 {
            cap.milli_cpu = parent_cap.milli_cpu;
        }
        if declared.memory <= 0.0 {
            cap.memory = parent_cap.memory;
        }
        for (k, v) in &parent_cap.scalars {
            if !declared.scalars.contains_key(k) {
                cap.scalars.insert(k.clone(), *v);
            }
        }
        let siblings_guaranteed = st
            .queues
            .indices()
            .filter(|&s| tree.parent(s) == Some(p))
            .fold(Resource::zero(), |acc, s| acc.plus(&attrs[s].guarantee));
        let mut real = attrs[p].real_capability.minus(&siblings_guaranteed);
        real.add(&attrs[q].guarantee);
        attrs[q].real_capability = real.min_with(&attrs[q].capability);
    }
}

/// Which of two queues goes first: at the level where their paths from `root` part, the
/// ancestor (or queue) holding less of its share first. `None` when one is the other's
/// ancestor.
pub fn compare(
    tree: &Tree,
    attrs: &IxVec<QueueIx, QueueAttr>,
    a: QueueIx,
    b: QueueIx,
) -> Option<Ordering> {
    let path = |q: QueueIx| {
        let mut p = tree.ancestors[q].clone();
        p.push(q);
        p
    };
    let (pa, pb) = (path(a), path(b));
    let split = pa.iter().zip(&pb).position(|(x, y)| x != y)?;
    attrs[pa[split]].share.partial_cmp(&attrs[pb[split]].share)
}

/// `true` when `want` fits `q`'s real capability and every ancestor's, else the first queue
/// (nearest first) it does not fit.
pub fn fits_up(
    tree: &Tree,
    attrs: &IxVec<QueueIx, QueueAttr>,
    q: QueueIx,
    add: &Resource,
    held: impl Fn(&QueueAttr) -> Resource,
) -> Result<(), QueueIx> {
    for x in tree.up(q) {
        let a = &attrs[x];
        if !held(a).plus(add).less_equal_in(&a.real_capability, add) {
            return Err(x);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use crate::config::parse;
    use crate::outcome::{Outcome, run_session};
    use crate::testing::{self, World, condition_message, placed_by_gang};

    fn conf(hierarchy: bool) -> String {
        format!(
            "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n\
             - plugins:\n  - name: predicates\n  - name: capacity\n    enableHierarchy: {hierarchy}\n  \
             - name: nodeorder\n"
        )
    }

    /// A queue under `parent` with the given spec fields (JSON).
    fn queue(mut w: World, name: &str, parent: &str, spec: serde_json::Value) -> World {
        let mut q = testing::queue(name, 1);
        q.spec.parent = Some(parent.into());
        let mut v = serde_json::to_value(&q.spec).unwrap();
        for (k, x) in spec.as_object().unwrap() {
            v[k] = x.clone();
        }
        q.spec = serde_json::from_value(v).unwrap();
        w.index.apply_queue(&q);
        w
    }

    fn session(w: &World, hierarchy: bool) -> Outcome {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        run_session(
            w.index.snapshot(),
            &parse(&conf(hierarchy), "t").unwrap(),
            "s",
            now,
        )
    }

    /// Two 4-cpu nodes; department `eng` may hold 4 cpus; team `ml` under it declares
    /// nothing.
    fn tree() -> World {
        let w = World::default().nodes(2, 4, 16);
        let w = queue(
            w,
            "eng",
            "root",
            json!({"capability": {"cpu": "4"}, "deserved": {"cpu": "4"}}),
        );
        queue(w, "ml", "eng", json!({"deserved": {"cpu": "2"}}))
    }

    #[test]
    fn a_team_is_held_to_its_departments_capability() {
        let w = tree().gang("ns", "g", "ml", 6, 1, 1000, 64, "Inqueue");
        assert_eq!(
            placed_by_gang(&session(&w, false).plan).get("ns/g"),
            Some(&6)
        );
        assert_eq!(
            placed_by_gang(&session(&w, true).plan).get("ns/g"),
            Some(&4),
            "eng's 4 cpus bound its team"
        );
    }

    #[test]
    fn a_gang_the_department_cannot_hold_beside_its_other_teams_waits_naming_it() {
        // `cv`, another team of `eng`, runs 2 cpus; `ml` alone could take a gang of 3, but
        // eng (4 cpus) cannot hold both.
        let w = queue(tree(), "cv", "eng", json!({"deserved": {"cpu": "2"}}));
        let w = w.running_gang("ns", "cv-job", "cv", 2, 1000, 64, 2);
        let w = w.gang("ns", "big", "ml", 3, 3, 1000, 64, "Pending");
        let out = session(&w, true);
        assert_eq!(placed_by_gang(&out.plan).get("ns/big"), None);
        let msg = condition_message(&out, "big");
        assert!(
            msg.contains("queue eng, above queue ml, can hold cpu 4"),
            "{msg}"
        );
        // Without the hierarchy nothing bounds the team.
        let out = session(&w, false);
        assert_eq!(placed_by_gang(&out.plan).get("ns/big"), Some(&3));
        // A gang larger than the department alone is told so at the team, whose capability
        // is the department's.
        let w = tree().gang("ns", "huge", "ml", 6, 6, 1000, 64, "Pending");
        let msg = condition_message(&session(&w, true), "huge");
        assert!(msg.contains("queue ml can hold cpu 4"), "{msg}");
    }

    #[test]
    fn a_siblings_guarantee_is_kept_from_a_team_within_its_department() {
        // `eng` may hold 6 of the 8 cpus; its team `a` is guaranteed 3 of them, so its
        // sibling `b` may take 3 at most (without the hierarchy: the cluster less a's 3).
        let w = World::default().nodes(2, 4, 16);
        let w = queue(w, "eng", "root", json!({"capability": {"cpu": "6"}}));
        let w = queue(
            w,
            "a",
            "eng",
            json!({"guarantee": {"resource": {"cpu": "3"}}}),
        );
        let w = queue(w, "b", "eng", json!({"deserved": {"cpu": "2"}}));
        let w = w.gang("ns", "g", "b", 8, 1, 1000, 64, "Inqueue");
        assert_eq!(
            placed_by_gang(&session(&w, true).plan).get("ns/g"),
            Some(&3)
        );
        assert_eq!(
            placed_by_gang(&session(&w, false).plan).get("ns/g"),
            Some(&5)
        );
    }
}
